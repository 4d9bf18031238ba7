//! `uni20 contract -o PATH` for every kind of PATH (regular file, new path,
//! character device made with mknod, FIFO, directory, symlink to a regular
//! file, dangling symlink, symlink to a device), and big-endian operands
//! (numpy-made fixtures) giving byte for byte the output of their
//! little-endian copies.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Runs `uni20 contract SPEC A B -o OUT --block 2` on 3 in-process ranks.
fn contract(spec: &str, a: &Path, b: &Path, out: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_uni20"))
        .arg("contract")
        .arg(spec)
        .args([a, b])
        .arg("-o")
        .arg(out)
        .args(["--block", "2"])
        .env("UNI20_RANKS", "3")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn sh(cmd: &str, args: &[&std::ffi::OsStr]) -> bool {
    Command::new(cmd)
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn debris(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".uni20-tmp-"))
        .collect()
}

/// Whether `p` itself (not what it points to) is a symlink.
fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).unwrap().file_type().is_symlink()
}

#[test]
fn each_kind_of_output_path_is_replaced_followed_or_refused() {
    let m = fixtures().join("contract/matmul");
    let (a, b) = (m.join("a.npy"), m.join("b.npy"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |out: &Path| contract("ij,jk->ik", &a, &b, out);

    // A new path: the reference output.
    let (code, err) = run(&d.join("new.npy"));
    assert_eq!(code, 0, "{err}");
    let want = std::fs::read(d.join("new.npy")).unwrap();
    assert!(want.starts_with(b"\x93NUMPY"));

    // A regular file: replaced (through a rename: a new inode).
    let regular = d.join("regular.npy");
    std::fs::write(&regular, b"old").unwrap();
    let ino = std::fs::metadata(&regular).unwrap().ino();
    assert_eq!(run(&regular).0, 0);
    assert_eq!(std::fs::read(&regular).unwrap(), want);
    assert_ne!(std::fs::metadata(&regular).unwrap().ino(), ino);

    // A symlink to a regular file: the target is written, the link stays.
    let target = d.join("target.npy");
    std::fs::write(&target, b"old").unwrap();
    std::os::unix::fs::symlink("target.npy", d.join("link.npy")).unwrap();
    assert_eq!(run(&d.join("link.npy")).0, 0);
    assert!(is_symlink(&d.join("link.npy")));
    assert_eq!(std::fs::read(&target).unwrap(), want);

    // A dangling symlink: its target is created, the link stays.
    std::os::unix::fs::symlink("created.npy", d.join("dangling.npy")).unwrap();
    assert_eq!(run(&d.join("dangling.npy")).0, 0);
    assert!(is_symlink(&d.join("dangling.npy")));
    assert_eq!(std::fs::read(d.join("created.npy")).unwrap(), want);

    // Refused: exit 1, one line naming the kind, the node untouched.
    std::fs::create_dir(d.join("adir")).unwrap();
    assert!(sh("mkfifo", &[d.join("fifo").as_os_str()]));
    let have_dev = sh(
        "mknod",
        &[d.join("fakenull").as_os_str(), "c".as_ref(), "1".as_ref(), "3".as_ref()],
    );
    std::os::unix::fs::symlink("fakenull", d.join("to_dev.npy")).unwrap();
    let mut refused = vec![("adir", "is a directory"), ("fifo", "is a FIFO")];
    if have_dev {
        refused.push(("fakenull", "is a character device"));
        refused.push(("to_dev.npy", "a symlink to"));
    } else {
        eprintln!("mknod failed (not root?): the character-device cases are skipped");
    }
    for (name, needle) in refused {
        let (code, err) = run(&d.join(name));
        assert_eq!(code, 1, "{name}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{name}: {err}");
        assert!(
            lines[0].contains(needle) && lines[0].contains("refusing"),
            "{name}: {err}"
        );
    }
    assert!(std::fs::metadata(d.join("adir")).unwrap().is_dir());
    assert!(std::fs::metadata(d.join("fifo")).unwrap().file_type().is_fifo());
    if have_dev {
        let ft = std::fs::metadata(d.join("fakenull")).unwrap().file_type();
        assert!(ft.is_char_device(), "the device was replaced");
        // Refused before any work: the missing operand is never opened.
        let (code, err) = contract("ij,jk->ik", &d.join("missing.npy"), &b, &d.join("fakenull"));
        assert_eq!(code, 1);
        assert!(
            err.contains("character device") && !err.contains("missing.npy"),
            "{err}"
        );
    }
    assert_eq!(debris(d), Vec::<String>::new());
}

#[test]
fn big_endian_operands_give_the_little_endian_output() {
    let dir = tempfile::tempdir().unwrap();
    for case in ["f64_c128", "f32_c64"] {
        let c = fixtures().join("npy_endian").join(case);
        let spec = std::fs::read_to_string(c.join("spec.txt")).unwrap().trim().to_string();
        let (be, le) = (
            dir.path().join(format!("{case}-be.npy")),
            dir.path().join(format!("{case}-le.npy")),
        );
        let (code, err) = contract(&spec, &c.join("a.npy"), &c.join("b.npy"), &be);
        assert_eq!(code, 0, "{case}: {err}");
        let (code, err) = contract(&spec, &c.join("a_le.npy"), &c.join("b_le.npy"), &le);
        assert_eq!(code, 0, "{case}: {err}");
        let (x, y) = (std::fs::read(&be).unwrap(), std::fs::read(&le).unwrap());
        assert_eq!(x, y, "{case}: big-endian operands gave a different file");
        let hlen = u16::from_le_bytes([x[8], x[9]]) as usize;
        let header = String::from_utf8_lossy(&x[10..10 + hlen]);
        assert!(header.contains("'descr': '<c"), "{case}: {header}");
    }
}
