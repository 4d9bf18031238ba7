//! Object identity: [`ObjectId`], [`ObjectMeta`] and the typed handle [`PersistentPtr`].

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Global object ID.
///
/// Allocated without coordination: `origin` is the rank whose store allocated the
/// ID and `seq` is that store's counter. IDs are never reused: a disk store persists
/// a reserved high-water mark of its counter so that IDs issued after a restart never
/// collide with IDs issued before it, even after a crash.
///
/// `Display` writes `r{origin}:{seq}` (for example `r3:17`); [`FromStr`] parses the
/// same form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ObjectId {
    /// Rank whose store allocated this ID.
    pub origin: u32,
    /// Per-store sequence number; never reused by the allocating store.
    pub seq: u64,
}

impl ObjectId {
    /// Builds an ID from its parts. Does not allocate anything: use
    /// [`Store::commit`](crate::Store::commit) to obtain fresh IDs.
    pub const fn new(origin: u32, seq: u64) -> ObjectId {
        ObjectId { origin, seq }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}:{}", self.origin, self.seq)
    }
}

/// Error returned by `ObjectId::from_str` for text not of the form `r{origin}:{seq}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid object id {0:?}: expected r{{origin}}:{{seq}}")]
pub struct ParseObjectIdError(pub String);

impl FromStr for ObjectId {
    type Err = ParseObjectIdError;

    /// Parses `r{origin}:{seq}`, e.g. `r0:42`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseObjectIdError(s.to_owned());
        let rest = s.strip_prefix('r').ok_or_else(err)?;
        let (o, q) = rest.split_once(':').ok_or_else(err)?;
        Ok(ObjectId {
            origin: o.parse().map_err(|_| err())?,
            seq: q.parse().map_err(|_| err())?,
        })
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
        ObjectMeta {
            id,
            type_name: type_name.to_owned(),
            size: bytes.len() as u64,
            checksum: crc32fast::hash(bytes),
        }
    }
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
