//! Object identity: [`ObjectId`], [`ObjectMeta`] and the typed handle [`PersistentPtr`].

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Global object ID.
///
/// Allocated without coordination from three parts:
/// * `origin`: the rank whose store allocated the ID;
/// * `nonce`: a 64-bit random number drawn once per store: at every
///   [`Store::in_memory`](crate::Store::in_memory), and once per rank directory for a
///   disk store ([`Store::open`](crate::Store::open) creates it with the directory and
///   reads it back on every reopen, so objects of a restarted store keep their IDs).
///   It tells apart the IDs of different universes or jobs in one process and of
///   different directories; store-issued nonces are never 0;
/// * `seq`: that store's counter, never reused: a disk store persists a reserved
///   high-water mark of it, so IDs issued after a restart never collide with IDs
///   issued before it, even after a crash.
///
/// Text form (`Display` and [`FromStr`], which round-trip exactly):
/// `r{origin}:{seq}@{nonce}` with the nonce as 16 lowercase hex digits, for example
/// `r3:17@9f2c04d1e5a6b7c8`; an ID with the nil nonce (0, see [`ObjectId::new`]) is
/// written `r{origin}:{seq}`. Field order, and so the derived `Ord`, is
/// (origin, nonce, seq): the IDs of one store sort by allocation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ObjectId {
    /// Rank whose store allocated this ID.
    pub origin: u32,
    /// Nonce of the allocating store (0: the nil nonce, never issued by a store).
    pub nonce: u64,
    /// Per-store sequence number; never reused by the allocating store.
    pub seq: u64,
}

impl ObjectId {
    /// The nil nonce: no store issues it.
    pub const NIL_NONCE: u64 = 0;

    /// An ID with the nil nonce ([`ObjectId::NIL_NONCE`]): for tests, fixtures and
    /// names made up outside any store. It never equals a store-issued ID (those have
    /// a non-zero nonce), so it is safe as a "missing object" in tests. Does not
    /// allocate anything: use [`Store::commit`](crate::Store::commit) to obtain fresh IDs.
    pub const fn new(origin: u32, seq: u64) -> ObjectId {
        ObjectId {
            origin,
            nonce: Self::NIL_NONCE,
            seq,
        }
    }

    /// An ID from all its parts (for example to name an object of a known store,
    /// [`Store::nonce`](crate::Store::nonce)). Allocates nothing.
    pub const fn with_nonce(origin: u32, nonce: u64, seq: u64) -> ObjectId {
        ObjectId { origin, nonce, seq }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}:{}", self.origin, self.seq)?;
        if self.nonce != Self::NIL_NONCE {
            write!(f, "@{:016x}", self.nonce)?;
        }
        Ok(())
    }
}

/// Error returned by `ObjectId::from_str` for text not of the form
/// `r{origin}:{seq}` or `r{origin}:{seq}@{nonce}` (nonce: 16 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid object id {0:?}: expected r{{origin}}:{{seq}} or r{{origin}}:{{seq}}@{{16 hex digit nonce}}")]
pub struct ParseObjectIdError(pub String);

impl FromStr for ObjectId {
    type Err = ParseObjectIdError;

    /// Parses `r{origin}:{seq}@{nonce}` (e.g. `r0:42@00c0ffee00c0ffee`) or, for the nil
    /// nonce, `r{origin}:{seq}` (e.g. `r0:42`). Decimal origin and seq, exactly 16 hex
    /// digits of nonce (either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseObjectIdError(s.to_owned());
        let rest = s.strip_prefix('r').ok_or_else(err)?;
        let (o, rest) = rest.split_once(':').ok_or_else(err)?;
        let (q, nonce) = match rest.split_once('@') {
            None => (rest, Self::NIL_NONCE),
            Some((q, n)) => {
                if n.len() != 16 || !n.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(err());
                }
                (q, u64::from_str_radix(n, 16).map_err(|_| err())?)
            }
        };
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(o) || !digits(q) {
            return Err(err());
        }
        Ok(ObjectId {
            origin: o.parse().map_err(|_| err())?,
            nonce,
            seq: q.parse().map_err(|_| err())?,
        })
    }
}

/// A fresh store nonce: 64 random bits from the operating system (`getrandom`),
/// never [`ObjectId::NIL_NONCE`]. If the OS source fails (it does not on supported
/// systems), falls back to hashing the time, the process ID and a process-wide counter
/// with std's randomly keyed `RandomState`, and logs a warning.
pub(crate) fn fresh_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static FALLBACK: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = match getrandom::u64() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "getrandom failed; store nonce from the fallback hash");
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                h.write_u128(t);
                h.write_u32(std::process::id());
                h.write_u64(FALLBACK.fetch_add(1, Ordering::Relaxed));
                h.finish()
            }
        };
        if n != ObjectId::NIL_NONCE {
            return n;
        }
    }
}

/// Metadata of one committed object.
///
/// `size` is the length in bytes of the encoded payload (the output of
/// [`Persist::encode`](crate::Persist::encode)); `checksum` is the CRC-32 (IEEE,
/// as computed by `crc32fast`) of those bytes; `type_name` is the
/// [`Persist::TYPE_NAME`](crate::Persist::TYPE_NAME) of the committed type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// The object's global ID.
    pub id: ObjectId,
    /// `Persist::TYPE_NAME` of the stored type.
    pub type_name: String,
    /// Encoded payload size in bytes.
    pub size: u64,
    /// CRC-32 of the encoded payload.
    pub checksum: u32,
}

impl ObjectMeta {
    /// Computes the metadata of `bytes` (size and CRC-32) for object `id` of type `type_name`.
    pub fn of_bytes(id: ObjectId, type_name: &str, bytes: &[u8]) -> ObjectMeta {
        ObjectMeta::of_parts(id, type_name, &[bytes])
    }

    /// The metadata of the concatenation of `parts` (as [`ObjectMeta::of_bytes`] of
    /// the joined bytes, without joining them).
    pub fn of_parts(id: ObjectId, type_name: &str, parts: &[&[u8]]) -> ObjectMeta {
        ObjectMeta {
            id,
            type_name: type_name.to_owned(),
            size: parts.iter().map(|p| p.len() as u64).sum(),
            checksum: crc_of_parts(parts),
        }
    }
}

/// The CRC-32 (IEEE, `crc32fast`) of the concatenation of `parts`.
pub(crate) fn crc_of_parts(parts: &[&[u8]]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    for p in parts {
        crc.update(p);
    }
    crc.finalize()
}

/// Typed handle naming one immutable committed value of type `T`.
///
/// A `PersistentPtr` is just an [`ObjectId`] with a type: it is `Copy`, serializes
/// exactly like an `ObjectId` (so it can go into descriptors and manifests), never
/// dereferences and never does I/O. Materialize it with
/// [`Store::try_load_local`](crate::Store::try_load_local),
/// [`Store::load_wait`](crate::Store::load_wait) or [`Store::load`](crate::Store::load).
///
/// `PersistentPtr<T>` is `Send + Sync` for every `T`.
pub struct PersistentPtr<T> {
    id: ObjectId,
    _ty: PhantomData<fn() -> T>,
}

impl<T> PersistentPtr<T> {
    /// Reinterprets an ID as a handle to a `T`. The type is checked when the
    /// object is loaded ([`PersistError::TypeMismatch`](crate::PersistError::TypeMismatch)).
    pub const fn from_id(id: ObjectId) -> PersistentPtr<T> {
        PersistentPtr { id, _ty: PhantomData }
    }

    /// The object's global ID.
    pub const fn id(&self) -> ObjectId {
        self.id
    }
}

impl<T> Clone for PersistentPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PersistentPtr<T> {}
impl<T> PartialEq for PersistentPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<T> Eq for PersistentPtr<T> {}
impl<T> Hash for PersistentPtr<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}
impl<T> PartialOrd for PersistentPtr<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for PersistentPtr<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id.cmp(&other.id)
    }
}
impl<T> fmt::Debug for PersistentPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PersistentPtr<{}>({})", std::any::type_name::<T>(), self.id)
    }
}
impl<T> fmt::Display for PersistentPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.id, f)
    }
}
impl<T> From<PersistentPtr<T>> for ObjectId {
    fn from(p: PersistentPtr<T>) -> ObjectId {
        p.id
    }
}
impl<T> Serialize for PersistentPtr<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.id.serialize(s)
    }
}
impl<'de, T> Deserialize<'de> for PersistentPtr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ObjectId::deserialize(d).map(PersistentPtr::from_id)
    }
}
