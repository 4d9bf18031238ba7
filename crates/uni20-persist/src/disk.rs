//! On-disk layout of a rank's store.
//!
//! `<root>/rank-<rank>/` holds one file per object, `<origin>-<seq>-<nonce>.obj`
//! (nonce as 16 hex digits), a `nonce` file, a `counter` file, a `roots` file and
//! the `lock` file (held with `flock` by the store that has the directory open; it
//! holds that process's ID as decimal text, see `crate::dir_lock`). An object file is
//!
//! ```text
//! magic "U20OBJ\0\x02" (8) | header_len u32 LE | header_crc u32 LE | header | payload
//! ```
//!
//! where `header` is the postcard encoding of [`FileHeader`] (the object's metadata
//! and, when known, the IDs it references) and `payload` is the encoded object
//! (`meta.size` bytes, CRC-32 `meta.checksum`). Files are written to a temporary
//! name (`.tmp-*`) and renamed into place, so a reader never sees a partial object
//! under its final name; leftover temporaries are deleted at open. Durability needs
//! an explicit flush (fsync of the file and of the directory).
//!
//! The `nonce` file holds the directory's store nonce (the middle part of every
//! [`ObjectId`] it issues), created once with the directory and never changed:
//! magic "U20NONC\x01" (8) | nonce u64 LE | crc32 of the first 16 bytes (4).
//! The `counter` file holds the reserved high-water mark of this rank's ID counter:
//! magic "U20CNT\0\x01" (8) | value u64 LE | crc32 of the first 16 bytes (4).
//! The `roots` file holds the named gc roots: magic "U20ROOT\x02" (8) | crc32 of
//! the body (4) | postcard `BTreeMap<String, ObjectId>`.
//!
//! Format 1 (object files `<origin>-<seq>.obj` with magic version 1, roots magic
//! version 1) predates the nonce: such object files are ignored with a warning and a
//! format-1 roots file is reported as corrupt, naming the format.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::dir_lock::DirLock;
use crate::{FailedCheck, ObjectId, ObjectMeta, PersistError};

const OBJ_MAGIC: &[u8; 8] = b"U20OBJ\0\x02";
/// Magic of format-1 object files (IDs without a nonce), recognised only to say so.
const OBJ_MAGIC_V1: &[u8; 8] = b"U20OBJ\0\x01";
const CNT_MAGIC: &[u8; 8] = b"U20CNT\0\x01";
const NONCE_MAGIC: &[u8; 8] = b"U20NONC\x01";
const ROOTS_MAGIC: &[u8; 8] = b"U20ROOT\x02";
/// Magic of format-1 roots files, recognised only to say so.
const ROOTS_MAGIC_V1: &[u8; 8] = b"U20ROOT\x01";
/// Upper bound on a header's size; anything larger is treated as corruption.
const MAX_HEADER: u32 = 64 << 20;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) struct FileHeader {
    pub meta: ObjectMeta,
    pub refs: Option<Vec<ObjectId>>,
}

/// One object file found by [`Disk::scan`]: its ID and its header (or why it is unreadable).
pub(crate) type ScanItem = (ObjectId, Result<FileHeader, PersistError>);

pub(crate) struct Disk {
    dir: PathBuf,
    tmp_counter: AtomicU64,
    /// This process's exclusive hold on `dir`, released when the handle drops.
    _lock: DirLock,
    /// Filesystem operations performed through this handle (see [`Disk::io_ops`]).
    ops: AtomicU64,
}

fn io(op: impl Into<String>, path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    let op = op.into();
    move |e| PersistError::io(op, path, e)
}

impl Disk {
    /// Creates (if needed) `<root>/rank-<rank>`, takes it exclusively for this store
    /// ([`DirLock`]) and returns the handle.
    ///
    /// # Errors
    /// [`PersistError::Io`] if the directory cannot be created or locked;
    /// [`PersistError::AlreadyOpen`] if a live store of this process holds it;
    /// [`PersistError::Locked`] if another process holds it.
    pub(crate) fn create(root: &Path, rank: u32) -> Result<Disk, PersistError> {
        let dir = root.join(format!("rank-{rank}"));
        let existed = dir.is_dir();
        fs::create_dir_all(&dir).map_err(io("create store directory", &dir))?;
        if !existed {
            // Make the new directory entry itself durable.
            sync_dir(root)?;
        }
        let lock = DirLock::acquire(&dir)?;
        Ok(Disk {
            dir,
            tmp_counter: AtomicU64::new(0),
            _lock: lock,
            ops: AtomicU64::new(0),
        })
    }

    /// Filesystem operations performed through this handle since it was created: one
    /// per object-file read, header read, write, fsync or deletion, per directory
    /// fsync or listing, and per read or write of the nonce, counter or roots file.
    pub(crate) fn io_ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    fn op(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn object_path(&self, id: ObjectId) -> PathBuf {
        self.dir.join(format!("{}.obj", file_stem(id)))
    }

    fn tmp_path(&self, stem: &str) -> PathBuf {
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!(".tmp-{stem}-{}-{n}", std::process::id()))
    }

    /// Writes an object file (temp file + rename). Does not fsync.
    pub(crate) fn write_object(
        &self,
        meta: &ObjectMeta,
        refs: Option<&[ObjectId]>,
        payload: &[u8],
    ) -> Result<PathBuf, PersistError> {
        self.op();
        let header = postcard::to_allocvec(&FileHeader {
            meta: meta.clone(),
            refs: refs.map(|r| r.to_vec()),
        })
        .map_err(|e| PersistError::Decode(format!("encoding file header: {e}")))?;
        let final_path = self.object_path(meta.id);
        let tmp = self.tmp_path(&file_stem(meta.id));
        let op = format!("write object {}", meta.id);
        let res = (|| {
            let mut f = File::create(&tmp).map_err(io(op.clone(), &tmp))?;
            let mut pre = Vec::with_capacity(16 + header.len());
            pre.extend_from_slice(OBJ_MAGIC);
            pre.extend_from_slice(&(header.len() as u32).to_le_bytes());
            pre.extend_from_slice(&crc32fast::hash(&header).to_le_bytes());
            pre.extend_from_slice(&header);
            f.write_all(&pre).map_err(io(op.clone(), &tmp))?;
            f.write_all(payload).map_err(io(op.clone(), &tmp))?;
            drop(f);
            fs::rename(&tmp, &final_path).map_err(io(op.clone(), &final_path))
        })();
        if res.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        res.map(|_| final_path)
    }

    fn corrupt(id: Option<ObjectId>, path: &Path, check: FailedCheck, reason: impl Into<String>) -> PersistError {
        PersistError::Corrupt {
            id,
            path: path.to_owned(),
            check,
            reason: reason.into(),
        }
    }

    /// Reads and checks the header of an open object file, and checks that the file
    /// length is exactly header + payload. Leaves the reader at the payload.
    fn read_header_from(f: &mut File, path: &Path, id: Option<ObjectId>) -> Result<FileHeader, PersistError> {
        let len = f.metadata().map_err(io("stat object file", path))?.len();
        let mut pre = [0u8; 16];
        if len < 16 {
            return Err(Self::corrupt(
                id,
                path,
                FailedCheck::Size,
                format!("truncated: {len} bytes"),
            ));
        }
        f.read_exact(&mut pre).map_err(io("read object file", path))?;
        if &pre[..8] == OBJ_MAGIC_V1 {
            return Err(Self::corrupt(
                id,
                path,
                FailedCheck::Format,
                "object file format 1 (IDs without a store nonce) is not supported",
            ));
        }
        if &pre[..8] != OBJ_MAGIC {
            return Err(Self::corrupt(id, path, FailedCheck::Format, "bad magic"));
        }
        let hlen = u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]);
        let hcrc = u32::from_le_bytes([pre[12], pre[13], pre[14], pre[15]]);
        if hlen > MAX_HEADER || 16 + hlen as u64 > len {
            return Err(Self::corrupt(
                id,
                path,
                FailedCheck::Size,
                "truncated or oversized header",
            ));
        }
        let mut hbuf = vec![0u8; hlen as usize];
        f.read_exact(&mut hbuf).map_err(io("read object file", path))?;
        if crc32fast::hash(&hbuf) != hcrc {
            return Err(Self::corrupt(
                id,
                path,
                FailedCheck::Checksum,
                "header checksum mismatch",
            ));
        }
        let header: FileHeader = postcard::from_bytes(&hbuf)
            .map_err(|e| Self::corrupt(id, path, FailedCheck::Decode, format!("undecodable header: {e}")))?;
        if let Some(id) = id {
            if header.meta.id != id {
                return Err(Self::corrupt(
                    Some(id),
                    path,
                    FailedCheck::Format,
                    format!("file holds object {}", header.meta.id),
                ));
            }
        }
        let expect = 16 + hlen as u64 + header.meta.size;
        if len != expect {
            return Err(PersistError::Checksum {
                id: header.meta.id,
                expected: header.meta.checksum,
                actual: 0,
                expected_size: header.meta.size,
                actual_size: len.saturating_sub(16 + hlen as u64),
                path: Some(path.to_owned()),
            });
        }
        Ok(header)
    }

    /// Reads only the header of object file `path` (used when scanning at open).
    pub(crate) fn read_header(&self, path: &Path, id: ObjectId) -> Result<FileHeader, PersistError> {
        self.op();
        let mut f = File::open(path).map_err(io("open object file", path))?;
        Self::read_header_from(&mut f, path, Some(id))
    }

    /// Reads and fully verifies object `id`: header, size and payload CRC.
    pub(crate) fn read_object(&self, id: ObjectId) -> Result<(FileHeader, Vec<u8>), PersistError> {
        self.op();
        Self::read_object_at(&self.object_path(id), id)
    }

    /// [`Disk::read_object`] into `buf` (see [`Disk::read_object_into`]).
    pub(crate) fn read_object_with(&self, id: ObjectId, buf: Vec<u8>) -> Result<(FileHeader, Vec<u8>), PersistError> {
        self.op();
        Self::read_object_into(&self.object_path(id), id, buf)
    }

    /// The path object `id` has in the directory of rank `rank`'s store under
    /// the same root as this one (`<root>/rank-<rank>/...`): where an earlier
    /// run with another rank count left it.
    pub(crate) fn sibling_object_path(&self, rank: u32, id: ObjectId) -> PathBuf {
        let root = self.dir.parent().unwrap_or(&self.dir);
        root.join(format!("rank-{rank}")).join(format!("{}.obj", file_stem(id)))
    }

    /// Reads and fully verifies the object file at `path`, which must hold
    /// object `id` (header, size and payload CRC), without taking the file's
    /// directory: the read of [`Disk::read_object`] and of adoption from a
    /// sibling rank's directory (`Store::adopt`). Counts no operation.
    pub(crate) fn read_object_at(path: &Path, id: ObjectId) -> Result<(FileHeader, Vec<u8>), PersistError> {
        Self::read_object_into(path, id, Vec::new())
    }

    /// [`Disk::read_object_at`] into `payload` (cleared first), whose
    /// allocation is reused when its capacity suffices: a prefetch gives a
    /// buffer allocated by the thread that will free it, so that the load
    /// thread's allocator heap keeps nothing (mimalloc returns a block freed
    /// by another thread to the allocating thread's heap).
    pub(crate) fn read_object_into(
        path: &Path,
        id: ObjectId,
        mut payload: Vec<u8>,
    ) -> Result<(FileHeader, Vec<u8>), PersistError> {
        let path = path.to_path_buf();
        let mut f = File::open(&path).map_err(io(format!("open object {id}"), &path))?;
        let header = Self::read_header_from(&mut f, &path, Some(id))?;
        let size = usize::try_from(header.meta.size)
            .map_err(|_| Self::corrupt(Some(id), &path, FailedCheck::Size, "payload too large for this machine"))?;
        payload.clear();
        payload.reserve_exact(size);
        // Read into the spare capacity (no zero fill first); a short file is
        // a read error, as `read_exact` would report.
        let got = (&mut f)
            .take(size as u64)
            .read_to_end(&mut payload)
            .map_err(io(format!("read object {id}"), &path))?;
        if got < size {
            return Err(PersistError::io(
                format!("read object {id}"),
                path.clone(),
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"),
            ));
        }
        let actual = crc32fast::hash(&payload);
        if actual != header.meta.checksum {
            return Err(PersistError::Checksum {
                id,
                expected: header.meta.checksum,
                actual,
                expected_size: header.meta.size,
                actual_size: payload.len() as u64,
                path: Some(path),
            });
        }
        Ok((header, payload))
    }

    /// fsyncs one object file.
    pub(crate) fn sync_object(&self, id: ObjectId) -> Result<(), PersistError> {
        self.op();
        let path = self.object_path(id);
        let f = File::open(&path).map_err(io(format!("open object {id} for fsync"), &path))?;
        f.sync_all().map_err(io(format!("fsync object {id}"), &path))
    }

    /// fsyncs the store directory (makes renames and removals durable).
    pub(crate) fn sync_dir(&self) -> Result<(), PersistError> {
        self.op();
        sync_dir(&self.dir)
    }

    /// Deletes an object file; a missing file is not an error.
    pub(crate) fn remove_object(&self, id: ObjectId) -> Result<(), PersistError> {
        self.op();
        let path = self.object_path(id);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PersistError::io(format!("remove object {id}"), path, e)),
        }
    }

    /// Lists the object files, deleting leftover temporaries. Returns each object's
    /// ID (from its file name) and its header or the error reading it.
    pub(crate) fn scan(&self) -> Result<Vec<ScanItem>, PersistError> {
        self.op();
        let mut out = Vec::new();
        let mut legacy = 0usize;
        let rd = fs::read_dir(&self.dir).map_err(io("list store directory", &self.dir))?;
        for ent in rd {
            let ent = ent.map_err(io("list store directory", &self.dir))?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = ent.path();
            if name.starts_with(".tmp-") {
                if let Err(e) = fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove leftover temporary file");
                }
                continue;
            }
            let Some(stem) = name.strip_suffix(".obj") else {
                continue;
            };
            let Some(id) = parse_file_stem(stem) else {
                let mut parts = stem.split('-');
                if let (Some(o), Some(q), None) = (parts.next(), parts.next(), parts.next()) {
                    if o.parse::<u32>().is_ok() && q.parse::<u64>().is_ok() {
                        legacy += 1;
                    }
                }
                continue;
            };
            out.push((id, self.read_header(&path, id)));
        }
        if legacy > 0 {
            tracing::warn!(
                dir = %self.dir.display(),
                files = legacy,
                "ignoring object files of format 1 (written before object IDs had a store nonce)"
            );
        }
        Ok(out)
    }

    fn counter_path(&self) -> PathBuf {
        self.dir.join("counter")
    }

    /// Reads the reserved counter high-water mark; `None` if there is no counter file.
    pub(crate) fn read_counter(&self) -> Result<Option<u64>, PersistError> {
        self.read_u64_file(&self.counter_path(), "counter", CNT_MAGIC)
    }

    /// Durably records a new counter high-water mark (temp file, fsync, rename, fsync dir).
    pub(crate) fn write_counter(&self, value: u64) -> Result<(), PersistError> {
        self.write_u64_file(&self.counter_path(), "counter", CNT_MAGIC, value)
    }

    /// Reads a 20-byte file holding one `u64` (`magic`, the value little-endian, CRC-32 of
    /// the first 16 bytes); `None` if the file does not exist. `what` names it in errors.
    fn read_u64_file(&self, path: &Path, what: &str, magic: &[u8; 8]) -> Result<Option<u64>, PersistError> {
        self.op();
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(PersistError::io(format!("read {what}"), path.to_path_buf(), e)),
        };
        if bytes.len() != 20 || &bytes[..8] != magic {
            return Err(Self::corrupt(
                None,
                path,
                FailedCheck::Format,
                format!("bad {what} file"),
            ));
        }
        let crc = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        if crc32fast::hash(&bytes[..16]) != crc {
            return Err(Self::corrupt(
                None,
                path,
                FailedCheck::Checksum,
                format!("{what} checksum mismatch"),
            ));
        }
        let mut v = [0u8; 8];
        v.copy_from_slice(&bytes[8..16]);
        Ok(Some(u64::from_le_bytes(v)))
    }

    /// Durably writes the file [`Disk::read_u64_file`] reads (temp file, fsync, rename,
    /// fsync dir).
    fn write_u64_file(&self, path: &Path, what: &str, magic: &[u8; 8], value: u64) -> Result<(), PersistError> {
        let mut buf = Vec::with_capacity(20);
        buf.extend_from_slice(magic);
        buf.extend_from_slice(&value.to_le_bytes());
        let crc = crc32fast::hash(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        self.write_small_durable(path, what, &buf)
    }
}

impl Disk {
    fn nonce_path(&self) -> PathBuf {
        self.dir.join("nonce")
    }

    /// Reads the directory's store nonce; `None` if there is no nonce file yet.
    pub(crate) fn read_nonce(&self) -> Result<Option<u64>, PersistError> {
        let path = self.nonce_path();
        let Some(nonce) = self.read_u64_file(&path, "nonce", NONCE_MAGIC)? else {
            return Ok(None);
        };
        if nonce == ObjectId::NIL_NONCE {
            return Err(Self::corrupt(None, &path, FailedCheck::Format, "nil nonce"));
        }
        Ok(Some(nonce))
    }

    /// Durably records the directory's store nonce (temp file, fsync, rename, fsync dir).
    pub(crate) fn write_nonce(&self, nonce: u64) -> Result<(), PersistError> {
        self.write_u64_file(&self.nonce_path(), "nonce", NONCE_MAGIC, nonce)
    }

    fn roots_path(&self) -> PathBuf {
        self.dir.join("roots")
    }

    /// Reads the named roots; empty if there is no roots file.
    pub(crate) fn read_roots(&self) -> Result<BTreeMap<String, ObjectId>, PersistError> {
        self.op();
        let path = self.roots_path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(PersistError::io("read roots", path, e)),
        };
        if bytes.len() >= 8 && &bytes[..8] == ROOTS_MAGIC_V1 {
            return Err(Self::corrupt(
                None,
                &path,
                FailedCheck::Format,
                "roots file format 1 (IDs without a store nonce) is not supported",
            ));
        }
        if bytes.len() < 12 || &bytes[..8] != ROOTS_MAGIC {
            return Err(Self::corrupt(None, &path, FailedCheck::Format, "bad roots file"));
        }
        let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if crc32fast::hash(&bytes[12..]) != crc {
            return Err(Self::corrupt(
                None,
                &path,
                FailedCheck::Checksum,
                "roots checksum mismatch",
            ));
        }
        postcard::from_bytes(&bytes[12..])
            .map_err(|e| Self::corrupt(None, &path, FailedCheck::Decode, format!("undecodable roots: {e}")))
    }

    /// Durably replaces the named roots (temp file, fsync, rename, fsync dir).
    pub(crate) fn write_roots(&self, roots: &BTreeMap<String, ObjectId>) -> Result<(), PersistError> {
        let body = postcard::to_allocvec(roots).map_err(|e| PersistError::Decode(format!("encoding roots: {e}")))?;
        let mut buf = Vec::with_capacity(12 + body.len());
        buf.extend_from_slice(ROOTS_MAGIC);
        buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        buf.extend_from_slice(&body);
        self.write_small_durable(&self.roots_path(), "roots", &buf)
    }

    fn write_small_durable(&self, path: &Path, what: &str, buf: &[u8]) -> Result<(), PersistError> {
        self.op();
        let tmp = self.tmp_path(what);
        let res = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io(format!("write {what}"), &tmp))?;
            f.write_all(buf).map_err(io(format!("write {what}"), &tmp))?;
            f.sync_all().map_err(io(format!("fsync {what}"), &tmp))?;
            drop(f);
            fs::rename(&tmp, path).map_err(io(format!("rename {what}"), path))
        })();
        if res.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        res?;
        self.sync_dir()
    }
}

/// File name stem of object `id`: `<origin>-<seq>-<nonce as 16 hex digits>`.
fn file_stem(id: ObjectId) -> String {
    format!("{}-{}-{:016x}", id.origin, id.seq, id.nonce)
}

/// Inverse of [`file_stem`]; `None` for any other name.
fn parse_file_stem(stem: &str) -> Option<ObjectId> {
    let mut parts = stem.split('-');
    let (o, q, n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || n.len() != 16 || !n.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let id = ObjectId::with_nonce(o.parse().ok()?, u64::from_str_radix(n, 16).ok()?, q.parse().ok()?);
    (file_stem(id) == stem).then_some(id)
}

fn sync_dir(dir: &Path) -> Result<(), PersistError> {
    let f = File::open(dir).map_err(io("open directory for fsync", dir))?;
    f.sync_all().map_err(io("fsync directory", dir))
}
