//! Distributed `.npy` I/O on the in-process universe: big-endian operands
//! (numpy-made fixtures in `tests/fixtures/npy_endian`) read and contract
//! exactly like their little-endian copies and match numpy; `write_npy`
//! follows its rule for every kind of output path; no failure path (error
//! or unwinding panic) leaves a temporary file behind.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use uni20::prelude::*;
use uni20::worker::commands::Noop;
use uni20::worker::fault::FaultPlan;
use uni20::DistError;

fn endian_cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/npy_endian");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert_eq!(v.len(), 2, "npy_endian fixtures missing under {}", root.display());
    v
}

/// The npy payload of a file written by `write_npy` (after checking that
/// its header says little-endian `descr`).
fn payload(path: &Path, descr: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8_lossy(&bytes[10..10 + hlen]);
    assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
    bytes[10 + hlen..].to_vec()
}

/// Components of a little-endian f32/f64 buffer, widened to f64.
fn values(bytes: &[u8], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F32 | DType::C32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        _ => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

#[test]
fn big_endian_operands_read_and_contract_like_little_endian() {
    let scratch = tempfile::tempdir().unwrap();
    for case in endian_cases() {
        let spec = std::fs::read_to_string(case.join("spec.txt"))
            .unwrap()
            .trim()
            .to_string();
        for block in [1, 2, 64] {
            uni20::universe()
                .ranks(3)
                .run(|ctl| {
                    let read = |name: &str| read_npy(ctl, case.join(name), block).unwrap();
                    for (be, le) in [("a.npy", "a_le.npy"), ("b.npy", "b_le.npy")] {
                        let (x, y) = (read(be).to_local(ctl).unwrap(), read(le).to_local(ctl).unwrap());
                        assert_eq!((x.dtype(), x.shape()), (y.dtype(), y.shape()), "{case:?} {be}");
                        assert_eq!(x.as_bytes(), y.as_bytes(), "{case:?} {be} block {block}");
                    }
                    let c_be = contract(ctl, &spec, &read("a.npy"), &read("b.npy")).unwrap();
                    let c_le = contract(ctl, &spec, &read("a_le.npy"), &read("b_le.npy")).unwrap();
                    let out = scratch.path().join(format!("be-{block}.npy"));
                    write_npy(ctl, &c_be, &out).unwrap();
                    let (lbe, lle) = (c_be.to_local(ctl).unwrap(), c_le.to_local(ctl).unwrap());
                    assert_eq!(lbe.as_bytes(), lle.as_bytes(), "{case:?} block {block}");
                    // Output is little-endian and holds the same bytes.
                    let descr = lbe.dtype().npy_descr();
                    assert!(descr.starts_with('<'));
                    assert_eq!(payload(&out, descr), lbe.as_bytes(), "{case:?}");
                    // And matches numpy's einsum.
                    let want = read("out.npy").to_local(ctl).unwrap();
                    assert_eq!((want.dtype(), want.shape()), (lbe.dtype(), lbe.shape()));
                    let (got, want) = (
                        values(lbe.as_bytes(), lbe.dtype()),
                        values(want.as_bytes(), want.dtype()),
                    );
                    let tol = if matches!(lbe.dtype(), DType::F32 | DType::C32) {
                        1e-5
                    } else {
                        1e-12
                    };
                    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                    for (p, q) in got.iter().zip(&want) {
                        assert!((p - q).abs() <= tol * scale, "{case:?}: {p} vs {q}");
                    }
                })
                .unwrap();
        }
    }
}

fn npy_file(descr: &str, fortran: bool, shape: &str, payload: &[u8]) -> Vec<u8> {
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    v.extend_from_slice(dict.as_bytes());
    v.extend_from_slice(payload);
    v
}

#[test]
fn hand_made_byte_orders_are_converted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 0-d '>f8'.
    std::fs::write(d.join("s.npy"), npy_file(">f8", false, "()", &(-1.5f64).to_be_bytes())).unwrap();
    // 1-d '>c8': (1, 2), (3, -4), (0.5, 8).
    let parts = [1.0f32, 2.0, 3.0, -4.0, 0.5, 8.0];
    let be: Vec<u8> = parts.iter().flat_map(|x| x.to_be_bytes()).collect();
    std::fs::write(d.join("c.npy"), npy_file(">c8", false, "(3,)", &be)).unwrap();
    // 2x3 '>f4' in Fortran order: column-major values 0..6 of [[0, 2, 4], [1, 3, 5]].
    let f: Vec<u8> = (0..6).flat_map(|x| (x as f32).to_be_bytes()).collect();
    std::fs::write(d.join("f.npy"), npy_file(">f4", true, "(2, 3)", &f)).unwrap();
    // '<f8' next to them.
    let n: Vec<u8> = [7.0f64, -0.25].iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(d.join("n.npy"), npy_file("<f8", false, "(2,)", &n)).unwrap();
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let local = |name: &str| read_npy(ctl, d.join(name), 1).unwrap().to_local(ctl).unwrap();
            let s = local("s.npy");
            assert_eq!((s.dtype(), s.shape()), (DType::F64, &[][..]));
            assert_eq!(values(s.as_bytes(), DType::F64), vec![-1.5]);
            let c = local("c.npy");
            assert_eq!(c.dtype(), DType::C32);
            assert_eq!(values(c.as_bytes(), DType::C32), vec![1.0, 2.0, 3.0, -4.0, 0.5, 8.0]);
            let f = local("f.npy");
            assert_eq!((f.dtype(), f.shape()), (DType::F32, &[2, 3][..]));
            assert_eq!(values(f.as_bytes(), DType::F32), vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
            assert_eq!(values(local("n.npy").as_bytes(), DType::F64), vec![7.0, -0.25]);
        })
        .unwrap();
    // The header reports the byte order it found.
    assert!(uni20::dist::npy::read_npy_header(&d.join("s.npy")).unwrap().big_endian);
    assert!(!uni20::dist::npy::read_npy_header(&d.join("n.npy")).unwrap().big_endian);
}

/// Every `.uni20-tmp-` file under `dir`, recursively (not following links).
fn debris(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            out.extend(debris(&e.path()));
        } else if e.file_name().to_string_lossy().contains(".uni20-tmp-") {
            out.push(e.path());
        }
    }
    out
}

fn sample(ctl: &Controller<'_>) -> DistTensor {
    let local = LocalTensor::from_f64(&[3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap();
    DistTensor::from_local(ctl, &local, 1).unwrap()
}

fn is_sample(path: &Path) -> bool {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    values(&b[10 + hlen..], DType::F64) == vec![1., 2., 3., 4., 5., 6.]
}

fn sh(cmd: &str, args: &[&std::ffi::OsStr]) -> bool {
    Command::new(cmd)
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn write_npy_follows_its_rule_for_every_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    let regular = d.join("regular.npy");
    std::fs::write(&regular, b"old contents").unwrap();
    std::fs::set_permissions(&regular, std::fs::Permissions::from_mode(0o600)).unwrap();
    let old_ino = std::fs::metadata(&regular).unwrap().ino();
    let link_target = d.join("target.npy");
    std::fs::write(&link_target, b"old").unwrap();
    std::os::unix::fs::symlink("../target.npy", d.join("sub/link.npy")).unwrap();
    std::os::unix::fs::symlink("created.npy", d.join("dangling.npy")).unwrap();
    std::os::unix::fs::symlink("sub/link.npy", d.join("chain.npy")).unwrap();
    std::fs::create_dir(d.join("adir")).unwrap();
    assert!(sh("mkfifo", &[d.join("fifo").as_os_str()]));
    std::os::unix::fs::symlink("fifo", d.join("to_fifo.npy")).unwrap();
    std::os::unix::fs::symlink("loop_b", d.join("loop_a")).unwrap();
    std::os::unix::fs::symlink("loop_a", d.join("loop_b")).unwrap();
    // A character device like /dev/null (needs root; skipped otherwise).
    let have_dev = sh(
        "mknod",
        &[d.join("fakenull").as_os_str(), "c".as_ref(), "1".as_ref(), "3".as_ref()],
    );
    if !have_dev {
        eprintln!("mknod failed (not root?): the character-device case is skipped");
    }
    uni20::universe()
        .ranks(3)
        .run(|ctl| {
            let t = sample(ctl);
            // New path and regular file: replaced through the rename.
            write_npy(ctl, &t, d.join("new.npy")).unwrap();
            assert!(is_sample(&d.join("new.npy")));
            write_npy(ctl, &t, &regular).unwrap();
            let m = std::fs::metadata(&regular).unwrap();
            assert!(is_sample(&regular));
            assert_ne!(m.ino(), old_ino, "replaced through a rename, not rewritten in place");
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "permission bits kept");
            // Symlinks are followed; the link stays.
            write_npy(ctl, &t, d.join("sub/link.npy")).unwrap();
            assert!(std::fs::symlink_metadata(d.join("sub/link.npy"))
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(is_sample(&link_target));
            std::fs::write(&link_target, b"old").unwrap();
            write_npy(ctl, &t, d.join("chain.npy")).unwrap();
            assert!(std::fs::symlink_metadata(d.join("chain.npy"))
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(is_sample(&link_target));
            write_npy(ctl, &t, d.join("dangling.npy")).unwrap();
            assert!(std::fs::symlink_metadata(d.join("dangling.npy"))
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(is_sample(&d.join("created.npy")));
            // Refused kinds: a typed error, the node untouched.
            let mut refused = vec![
                ("adir", "is a directory"),
                ("fifo", "is a FIFO"),
                ("to_fifo.npy", "a symlink to"),
                ("loop_a", "levels of symbolic links"),
                ("missing/x.npy", "missing"),
                ("..", "is a directory"),
                ("missing/..", "does not name a file"),
            ];
            if have_dev {
                refused.push(("fakenull", "is a character device"));
            }
            for (name, needle) in refused {
                let e = write_npy(ctl, &t, d.join(name)).unwrap_err();
                assert!(matches!(e, DistError::Npy { .. }), "{name}: {e:?}");
                assert!(e.to_string().contains(needle), "{name}: {e}");
            }
            assert!(std::fs::metadata(d.join("adir")).unwrap().is_dir());
            assert!(std::fs::metadata(d.join("fifo")).unwrap().file_type().is_fifo());
            if have_dev {
                assert!(std::fs::metadata(d.join("fakenull"))
                    .unwrap()
                    .file_type()
                    .is_char_device());
            }
        })
        .unwrap();
    assert_eq!(debris(d), Vec::<PathBuf>::new());
}

#[test]
fn a_failed_or_panicking_write_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.npy");
    // A handler error at the write (op 2: op 1 is the scatter of from_local).
    let r = uni20::universe()
        .ranks(3)
        .faults(FaultPlan::parse("error@rank=1,op=2").unwrap())
        .run(|ctl| write_npy(ctl, &sample(ctl), &out));
    let text = match r {
        Ok(Ok(())) => panic!("the injected error was lost"),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("injected error"), "{text}");
    assert!(!out.exists());
    assert_eq!(debris(dir.path()), Vec::<PathBuf>::new());

    // A panic on the root while write_npy waits (an earlier operation's
    // completion callback panics): the unwinding removes the temporary.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        uni20::universe().ranks(3).run(|ctl| {
            let t = sample(ctl);
            ctl.submit_nowait::<Noop>(&(), &ctl.compute_ranks(), |_, _| panic!("callback bug"))
                .unwrap();
            write_npy(ctl, &t, &out)
        })
    }));
    assert!(caught.is_err(), "the panic must propagate");
    assert!(!out.exists());
    assert_eq!(debris(dir.path()), Vec::<PathBuf>::new());
}
