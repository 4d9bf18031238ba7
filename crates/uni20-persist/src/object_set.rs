//! [`ObjectSet`]: an object that keeps a list of other objects alive (a checkpoint).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{decode_postcard, encode_postcard, ObjectId, Persist, PersistError, PersistentPtr};

/// A set of object IDs (for example the site tensors of a wavefunction checkpoint)
/// plus string metadata (step, energy, parameters), committed like any object.
///
/// Its [`references`](Persist::references) are its `objects`, so naming it as a root
/// ([`Store::set_root`](crate::Store::set_root) or an argument of
/// [`Store::gc`](crate::Store::gc)) keeps every listed object: neither `gc` nor
/// [`Store::release`](crate::Store::release) frees them while the root stands.
/// Encoded with postcard (`TYPE_NAME` `"uni20.object_set.v1"`); its size in bytes is
/// about 20 per ID (a store-issued [`ObjectId`] is three varints, the nonce taking 9
/// or 10 bytes) plus the metadata strings.
///
/// Not to be confused with the distributed tensor's manifest in `uni20-dist`, which
/// describes one tensor's blocks; an `ObjectSet` only lists IDs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSet {
    /// The objects this set keeps alive, in the caller's order.
    pub objects: Vec<ObjectId>,
    /// Free-form metadata, sorted by key.
    pub metadata: BTreeMap<String, String>,
}

impl ObjectSet {
    /// An empty set.
    pub fn new() -> ObjectSet {
        ObjectSet::default()
    }

    /// Appends the object named by `p` (any type) and returns `self`.
    pub fn with<T>(mut self, p: PersistentPtr<T>) -> ObjectSet {
        self.objects.push(p.id());
        self
    }

    /// Sets metadata `key` to `value` and returns `self`.
    pub fn with_meta(mut self, key: impl Into<String>, value: impl ToString) -> ObjectSet {
        self.metadata.insert(key.into(), value.to_string());
        self
    }

    /// Entry `i` as a typed handle (the type is checked when it is loaded); `None` if
    /// out of range.
    pub fn entry<T>(&self, i: usize) -> Option<PersistentPtr<T>> {
        self.objects.get(i).map(|&id| PersistentPtr::from_id(id))
    }
}

impl Persist for ObjectSet {
    const TYPE_NAME: &'static str = "uni20.object_set.v1";
    fn encode(&self) -> Vec<u8> {
        encode_postcard(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, PersistError> {
        decode_postcard(bytes)
    }
    fn references(&self) -> Vec<ObjectId> {
        self.objects.clone()
    }
}
