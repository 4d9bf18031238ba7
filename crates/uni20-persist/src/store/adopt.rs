//! Adoption: copying an object out of the directory that another rank's
//! store left under the same root, so that a checkpoint written with one
//! rank count can be restored on another (the objects of ranks that the new
//! universe lacks, or that no longer hold blocks, move to ranks that do).

use std::io::ErrorKind;

use super::Store;
use crate::disk::Disk;
use crate::{ObjectId, PersistError};

impl Store {
    /// Copies object `id` from rank `from`'s store directory under this
    /// store's root (`<root>/rank-<from>`, left by an earlier run; it need not
    /// be open, and it is only read) into this store, and makes the copy
    /// durable here. The file is fully verified first (header, size, payload
    /// CRC-32), exactly as a load from this store's own disk. If this store
    /// already holds `id` with the same content, nothing changes. Returns the
    /// object's payload size in bytes.
    ///
    /// This needs the root to be visible from this rank (one machine, or a
    /// shared file system): a rank whose store root is node-local cannot see
    /// the other node's directories and gets the error below.
    ///
    /// # Errors
    /// [`PersistError::Remote`] if this store has no directory (in memory)
    /// or the file is not there (the message names the path);
    /// [`PersistError::Checksum`] or [`PersistError::Corrupt`] if the file is
    /// damaged; [`PersistError::Conflict`] (fatal) if this store already holds
    /// different content under `id`; [`PersistError::Io`] for other I/O
    /// failures.
    pub fn adopt(&self, from: u32, id: ObjectId) -> Result<u64, PersistError> {
        let Some(disk) = self.inner.disk.as_ref() else {
            return Err(PersistError::Remote {
                id,
                reason: format!(
                    "rank {}'s store is in memory: it cannot adopt objects from rank {from}'s store directory",
                    self.rank()
                ),
            });
        };
        let path = disk.sibling_object_path(from, id);
        let (header, payload) = match Disk::read_object_at(&path, id) {
            Ok(x) => x,
            Err(PersistError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
                return Err(PersistError::Remote {
                    id,
                    reason: format!(
                        "no file {} (rank {from}'s store directory must be under the same root, visible from rank {})",
                        path.display(),
                        self.rank()
                    ),
                })
            }
            Err(e) => return Err(e),
        };
        let size = header.meta.size;
        self.insert_replica(header.meta, payload)?;
        self.flush(id)?;
        Ok(size)
    }
}
