//! Immutable persistent objects by global ID.
//!
//! A [`PersistentPtr<T>`] names an immutable committed value by its global
//! [`ObjectId`] (origin rank + store nonce + per-store counter, never reused). It never
//! dereferences and never does I/O: a value is materialized explicitly with
//! [`Store::try_load_local`] (no I/O), [`Store::load_wait`] (blocking) or
//! [`Store::load`] (async; completes at once on a cache hit), which return a
//! [`PValue<T>`]: a resident, read-only, pinned materialization. While a `PValue` is
//! alive its cache entry is never evicted; dropping the last one just unpins.
//!
//! Because objects are immutable they can be replicated freely: [`Store::encoded`]
//! gives the bytes to send to another rank and [`Store::insert_replica`] takes them
//! in, checking size and CRC-32; a second, different value for one ID is a fatal
//! [`PersistError::Conflict`].
//!
//! A [`Store`] is either in memory ([`Store::in_memory`]) or backed by a directory
//! per rank ([`Store::open`]) with explicit durability ([`Store::flush`],
//! [`Store::flush_all`]), a memory budget with LRU eviction and spill, restart, and
//! [`Store::gc`]. The owner of an object frees it with [`Store::release`] /
//! [`Store::release_many`] (memory and disk), unless it is pinned or a named root
//! reaches it.
//!
//! ```
//! use uni20_persist::{Store, PersistentPtr};
//! let store = Store::in_memory(0);
//! let p: PersistentPtr<Vec<f64>> = store.commit(vec![1.0, 2.0, 3.0]).unwrap();
//! let v = store.load_wait(p).unwrap();
//! assert_eq!(&*v, &[1.0, 2.0, 3.0]);
//! // Ship it to another rank's store.
//! let (meta, bytes) = store.encoded(p.id()).unwrap();
//! let other = Store::in_memory(1);
//! other.insert_replica(meta, bytes.to_vec()).unwrap();
//! assert_eq!(&*other.try_load_local(p).unwrap(), &[1.0, 2.0, 3.0]);
//! ```
//!
//! A storage rank answers [`StorageRequest`]s with [`Store::serve`]. A store never
//! fetches from other ranks by itself: an object of another rank is loaded only after a
//! plan's explicit transfer inserted it as a replica ([`Store::insert_replica`]), so that
//! every byte that moves between ranks is a step of a plan (the design's rule that
//! communication is never an invisible fallback).
//!
//! Values computed through `uni20-async` enter the store at an epoch:
//! [`Store::persist_copy`] commits a copy of a [`ReadBuffer`](uni20_async::ReadBuffer)'s
//! value and [`Store::persist_take`] moves the value out of a
//! [`WriteBuffer`](uni20_async::WriteBuffer)'s epoch (blocking forms: `*_wait`).

#![warn(missing_docs)]
#![deny(unreachable_pub)]

mod bridge;
mod dir_lock;
mod disk;
mod error;
mod id;
mod object_set;
mod persist;
mod pool;
mod service;
mod store;
mod value;

pub use bridge::CommitFailed;
pub use error::{FailedCheck, PersistError};
pub use id::{ObjectId, ObjectMeta, ParseObjectIdError, PersistentPtr};
pub use object_set::ObjectSet;
pub use persist::{decode_postcard, encode_postcard, Persist};
pub use service::{StorageRequest, StorageResponse};
pub use store::{Damage, GcReport, Integrity, Offloaded, ReleaseReport, Store, StoreOptions, StoreStats};
pub use value::PValue;
