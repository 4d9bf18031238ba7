//! [`PValue`]: a pinned, resident, read-only materialization.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::{ObjectId, PersistentPtr};

/// Resident, read-only, pinned materialization of a persistent object.
///
/// Obtained from [`Store::try_load_local`](crate::Store::try_load_local),
/// [`Store::load_wait`](crate::Store::load_wait) or [`Store::load`](crate::Store::load).
/// While any clone of a `PValue` is alive the store's cache entry is pinned: the
/// cache never evicts it. `PValue` shares the cached allocation (an aliasing
/// `Arc<T>`), so cloning is a reference-count increment. Dropping the last clone
/// only decrements that count: it does no I/O, takes no lock and never blocks; the
/// entry returns to the cache policy and may be evicted later.
///
/// A value is never freed under its holder: [`Store::gc`](crate::Store::gc) keeps
/// pinned objects, [`Store::evict`](crate::Store::evict) only drops the store's own
/// reference, and [`Store::release`](crate::Store::release) of a pinned object waits:
/// the object stays loadable, and once only `PValue`s hold it its memory goes with
/// the last of them.
pub struct PValue<T> {
    id: ObjectId,
    value: Arc<T>,
}

impl<T> PValue<T> {
    pub(crate) fn new(id: ObjectId, value: Arc<T>) -> Self {
        PValue { id, value }
    }

    /// The ID of the object this value materializes.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// A typed handle to the object this value materializes.
    pub fn ptr(&self) -> PersistentPtr<T> {
        PersistentPtr::from_id(self.id)
    }
}

impl<T> Clone for PValue<T> {
    fn clone(&self) -> Self {
        PValue {
            id: self.id,
            value: Arc::clone(&self.value),
        }
    }
}

impl<T> Deref for PValue<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> AsRef<T> for PValue<T> {
    fn as_ref(&self) -> &T {
        &self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for PValue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PValue")
            .field("id", &self.id)
            .field("value", &*self.value)
            .finish()
    }
}
