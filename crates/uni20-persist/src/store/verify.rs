//! Integrity checks by ID: [`Store::verify`] tells an object that this store
//! does not hold from one whose file is damaged (truncated, failing its
//! checksum, undecodable), naming the file and the failed check ([`Damage`]).
//! A restore of a checkpoint asks every block's owner this before it trusts
//! the blocks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::state::OnDisk;
use super::Store;
use crate::{FailedCheck, ObjectId, PersistError};

/// A damaged object: which file failed which check, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// The object.
    pub id: ObjectId,
    /// The file that holds it (`None` for bytes held in memory).
    pub path: Option<PathBuf>,
    /// The check it failed.
    pub check: FailedCheck,
    /// What the check found, in words (sizes, checksums, the decoder's message).
    pub detail: String,
}

impl Damage {
    /// The damage that `e` reports for object `id`, if `e` is an integrity
    /// failure ([`PersistError::failed_check`] is `Some`); `path` is used when
    /// the error names no file.
    pub fn from_error(id: ObjectId, e: &PersistError, path: Option<PathBuf>) -> Option<Damage> {
        let check = e.failed_check()?;
        let (path, detail) = match e {
            PersistError::Checksum {
                expected,
                actual,
                expected_size,
                actual_size,
                path: p,
                ..
            } => {
                let detail = if expected_size != actual_size {
                    let how = if actual_size < expected_size {
                        " (truncated)"
                    } else {
                        ""
                    };
                    format!("it holds {actual_size} payload bytes, its header records {expected_size}{how}")
                } else {
                    format!("payload CRC-32 {actual:#010x}, its header records {expected:#010x}")
                };
                (p.clone().or(path), detail)
            }
            PersistError::Corrupt { path: p, reason, .. } => (Some(p.clone()), reason.clone()),
            other => (path, other.to_string()),
        };
        Some(Damage {
            id,
            path,
            check,
            detail,
        })
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(p) => write!(f, "file {} failed its {}: {}", p.display(), self.check, self.detail),
            None => write!(f, "object {} failed its {}: {}", self.id, self.check, self.detail),
        }
    }
}

/// What [`Store::verify`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Integrity {
    /// Held and intact.
    Intact,
    /// Not held by this store (never here, released, or removed).
    Missing,
    /// Held, but its file or bytes are damaged.
    Damaged(Damage),
}

impl Store {
    /// Checks that this store holds object `id` intact.
    ///
    /// A resident decoded value is intact. Resident bytes, and an object only on
    /// disk, are checked fully: for a file, its header, length and payload CRC-32
    /// (one read of the whole file); then, when the object's type is registered
    /// ([`Store::register`], or loaded here before), the payload is decoded. An
    /// object whose file was found unreadable when the store was opened is
    /// [`Integrity::Damaged`] with that finding, not [`Integrity::Missing`].
    /// Nothing is kept resident and nothing is logged.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the file cannot be read (an I/O failure, not a
    /// damaged file).
    pub fn verify(&self, id: ObjectId) -> Result<Integrity, PersistError> {
        let (meta, bytes, on_disk, refs_fn) = {
            let st = self.inner.state.lock();
            let Some(e) = st.entries.get(&id).filter(|e| !e.dead()) else {
                return Ok(match st.corrupt.get(&id) {
                    Some(err) => damaged(id, err, self.object_path(id)),
                    None => Integrity::Missing,
                });
            };
            if e.decoded().is_some() {
                return Ok(Integrity::Intact);
            }
            let refs_fn = st.refs_fns.get(&e.head.type_name).copied();
            (e.meta(), e.bytes.clone(), e.disk != OnDisk::No, refs_fn)
        };
        let path = self.object_path(id);
        let payload = match (bytes, self.inner.disk.as_ref()) {
            (Some(b), _) => b,
            (None, Some(disk)) if on_disk => match disk.read_object(id) {
                Ok((h, payload)) => {
                    if h.meta != meta {
                        return Ok(Integrity::Damaged(Damage {
                            id,
                            path,
                            check: FailedCheck::Format,
                            detail: "file metadata differs from the indexed metadata".into(),
                        }));
                    }
                    self.inner.state.lock().stats.disk_reads += 1;
                    payload.into()
                }
                Err(e) if e.failed_check().is_some() => return Ok(damaged(id, &e, path)),
                Err(e) => return Err(e),
            },
            // A value of another Rust type under the same name, or no disk: no
            // bytes to check.
            _ => return Ok(Integrity::Intact),
        };
        if let Some(refs) = refs_fn {
            if let Err(e) = refs(&payload) {
                return Ok(Integrity::Damaged(Damage {
                    id,
                    path,
                    check: FailedCheck::Decode,
                    detail: format!("its payload does not decode as {}: {e}", meta.type_name),
                }));
            }
        }
        Ok(Integrity::Intact)
    }
}

fn damaged(id: ObjectId, e: &PersistError, path: Option<PathBuf>) -> Integrity {
    match Damage::from_error(id, e, path.clone()) {
        Some(d) => Integrity::Damaged(d),
        // Recorded at open, so an integrity failure; keep its words.
        None => Integrity::Damaged(Damage {
            id,
            path,
            check: FailedCheck::Format,
            detail: e.to_string(),
        }),
    }
}
