//! Where `write_npy` may write, and its temporary file: the rule for each
//! kind of output path (regular file or new path: replaced through a
//! rename; symlink: followed, the target replaced and the link kept;
//! device, FIFO, socket, directory: refused) and the creation of the
//! registered `.NAME.uni20-tmp-PID-N` file beside the file to replace.

use std::ffi::OsString;
use std::fs::{File, FileType, OpenOptions};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use uni20_worker::cleanup::{self, TempGuard};

use crate::error::DistError;

/// Symlinks followed before giving up (Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Temporary names tried before giving up (each taken one is skipped).
const MAX_TEMP_ATTEMPTS: usize = 1000;

/// Bytes of the target's file name kept in the temporary name, so that
/// the prefix and suffix never push it past `NAME_MAX` (255).
const MAX_NAME_IN_TEMP: usize = 200;

fn refuse(path: &Path, reason: String) -> DistError {
    DistError::Npy {
        path: path.to_path_buf(),
        reason,
    }
}

fn io_err(path: &Path, error: std::io::Error) -> DistError {
    DistError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// "a character device", "a FIFO", ... for anything but a regular file.
fn kind_name(ft: FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The file that [`write_npy`](super::write_npy) replaces when asked to
/// write `path`, checked without writing anything:
///
/// - a regular file, or a path that does not exist yet (its directory
///   must exist): that path;
/// - a symlink: followed (up to 40 links, relative targets resolved
///   against the link's directory); the final target is checked by these
///   same rules and is what gets replaced, so the link itself stays. A
///   dangling link creates its target, as `open(2)` would;
/// - a directory, character or block device, FIFO or socket (directly or
///   as a link's target): refused, because the file written beside it and
///   renamed over it would replace the node (`-o /dev/null` would replace
///   the system's device) and blocks cannot be written at offsets of a
///   FIFO.
///
/// The check is repeated just before the rename, so a path that changes
/// kind during the job is refused too (a narrow window remains between
/// that check and the rename).
///
/// # Errors
/// [`DistError::Npy`] naming `path` for a refused kind, a path without a
/// file name (`/`, `..`), a missing or non-directory parent, or a symlink
/// loop; [`DistError::Io`] if the path cannot be inspected.
pub fn resolve_npy_output(path: &Path) -> Result<PathBuf, DistError> {
    let mut cur = path.to_path_buf();
    for _ in 0..=MAX_SYMLINKS {
        let via = if cur == path {
            String::new()
        } else {
            format!("(a symlink to {}) ", cur.display())
        };
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&cur).map_err(|e| io_err(path, e))?;
                cur = match cur.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(m) if m.file_type().is_file() => return Ok(cur),
            Ok(m) => {
                return Err(refuse(
                    path,
                    format!(
                        "{via}is {}: refusing to replace it (the output must be a regular file, a new path, \
                         or a symlink to one)",
                        kind_name(m.file_type())
                    ),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if cur.file_name().is_none() {
                    return Err(refuse(path, format!("{via}does not name a file")));
                }
                let dir = match cur.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                return match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => Ok(cur),
                    Ok(_) => Err(refuse(path, format!("{via}{} is not a directory", dir.display()))),
                    Err(e) => Err(refuse(path, format!("{via}directory {}: {e}", dir.display()))),
                };
            }
            Err(e) => return Err(io_err(path, e)),
        }
    }
    Err(refuse(
        path,
        format!("more than {MAX_SYMLINKS} levels of symbolic links"),
    ))
}

/// Re-checks, just before the rename, that `target` is still a regular file
/// or absent.
pub(super) fn still_replaceable(path: &Path, target: &Path) -> Result<(), DistError> {
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => Err(refuse(
            path,
            format!(
                "{} became {} during the write: refusing to replace it",
                target.display(),
                if m.file_type().is_symlink() {
                    "a symlink"
                } else {
                    kind_name(m.file_type())
                }
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path, e)),
    }
}

/// Creates `.NAME.uni20-tmp-PID-N` beside `target` (`O_EXCL`, so it never
/// opens an existing file or follows a link planted at that name), with the
/// permissions of `target` when it exists. The path is registered with
/// [`cleanup::register`] before the file is created, so every failure path
/// that runs the cleanup registry removes it.
pub(super) fn create_temp(path: &Path, target: &Path) -> Result<(TempGuard, File), DistError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .ok_or_else(|| refuse(path, "does not name a file".into()))?
        .as_bytes();
    let keep = &name[..name.len().min(MAX_NAME_IN_TEMP)];
    let permissions = std::fs::metadata(target).ok().map(|m| m.permissions());
    for _ in 0..MAX_TEMP_ATTEMPTS {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name = b".".to_vec();
        tmp_name.extend_from_slice(keep);
        tmp_name.extend_from_slice(format!(".uni20-tmp-{}-{n}", std::process::id()).as_bytes());
        let tmp = dir.join(OsString::from_vec(tmp_name));
        let guard = cleanup::register(&tmp).map_err(|e| io_err(&tmp, e))?;
        match OpenOptions::new().write(true).create_new(true).open(guard.path()) {
            Ok(file) => {
                if let Some(p) = &permissions {
                    // Best effort: a file we cannot chmod keeps the default mode.
                    let _ = file.set_permissions(p.clone());
                }
                return Ok((guard, file));
            }
            // Someone else's file (an earlier process with this pid): not ours to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => guard.dismiss(),
            Err(e) => {
                guard.dismiss();
                return Err(io_err(&tmp, e));
            }
        }
    }
    Err(refuse(
        path,
        format!(
            "no free temporary name beside it after {MAX_TEMP_ATTEMPTS} attempts (stale .uni20-tmp- files in {}?)",
            dir.display()
        ),
    ))
}
