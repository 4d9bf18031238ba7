//! One process per rank directory: a store held by a live process cannot be opened by
//! another (a typed error naming the directory and the holder), and the hold is gone
//! once the holder is killed with SIGKILL.
//!
//! `harness = false`, as tests/crash.rs: `main` is the parent; the same binary run
//! with `UNI20_LOCK_CHILD=<dir>` and `UNI20_LOCK_ROLE=hold|try` is a child. A `hold`
//! child opens the store, commits and flushes one object, prints `held <id>` and
//! waits to be killed. A `try` child opens the store and prints `locked <holder>`,
//! `opened <n objects>` or `error <message>`, then exits.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uni20_persist::{ObjectId, PersistError, PersistentPtr, Store, StoreOptions};

const CHILD_ENV: &str = "UNI20_LOCK_CHILD";
const ROLE_ENV: &str = "UNI20_LOCK_ROLE";
const NAME: &str = "lock_across_processes";
const RANK: u32 = 4;

fn child(dir: &Path, role: &str) -> ! {
    match role {
        "hold" => {
            let store = Store::open(dir, RANK, StoreOptions::new()).expect("holder: open");
            let p = store.commit(String::from("held")).expect("holder: commit");
            store.flush(p).expect("holder: flush");
            println!("held {}", p.id());
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        "try" => {
            match Store::open(dir, RANK, StoreOptions::new()) {
                Ok(s) => println!("opened {}", s.stats().objects),
                Err(PersistError::Locked { holder, .. }) => {
                    println!("locked {}", holder.map_or("unknown".to_owned(), |p| p.to_string()))
                }
                Err(e) => println!("error {e}"),
            }
            std::process::exit(0);
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn(dir: &Path, role: &str) -> Child {
    Command::new(std::env::current_exe().expect("current_exe"))
        .env(CHILD_ENV, dir)
        .env(ROLE_ENV, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// First line a child prints (without the newline).
fn first_line(c: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().expect("child stdout"))
        .read_line(&mut line)
        .expect("read child");
    line.trim_end().to_owned()
}

/// Runs a `try` child to completion and returns what it printed.
fn try_open(dir: &Path) -> String {
    let mut c = spawn(dir, "try");
    let line = first_line(&mut c);
    assert!(c.wait().expect("wait try child").success());
    line
}

fn main() {
    if let (Some(dir), Ok(role)) = (std::env::var_os(CHILD_ENV), std::env::var(ROLE_ENV)) {
        child(Path::new(&dir), &role);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| NAME.contains(f.as_str())) {
        return;
    }
    let start = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let rank_dir = tmp.path().join(format!("rank-{RANK}"));

    // 1. A holder process.
    let mut holder = spawn(tmp.path(), "hold");
    let held = first_line(&mut holder);
    let id: ObjectId = held
        .strip_prefix("held ")
        .unwrap_or_else(|| panic!("holder said {held:?}"))
        .parse()
        .expect("object id");
    let pid = holder.id();

    // 2. This process is refused with a typed error naming the directory and holder.
    match Store::open(tmp.path(), RANK, StoreOptions::new()) {
        Err(e @ PersistError::Locked { .. }) => {
            let msg = e.to_string();
            let PersistError::Locked { path, holder: h } = e else {
                unreachable!()
            };
            assert_eq!(path, rank_dir.canonicalize().expect("canonical rank dir"));
            assert_eq!(h, Some(pid), "holder pid");
            assert!(
                msg.contains(&format!("pid {pid}")) && msg.contains(&*rank_dir.to_string_lossy()),
                "{msg}"
            );
        }
        other => panic!("expected PersistError::Locked, got {other:?}"),
    }
    // Another rank's directory under the same root is free.
    drop(Store::open(tmp.path(), RANK + 1, StoreOptions::new()).expect("other rank opens"));

    // 3. So is a second process.
    assert_eq!(try_open(tmp.path()), format!("locked {pid}"));

    // 4. SIGKILL the holder (`Child::kill` sends SIGKILL on Unix): the lock goes with it.
    holder.kill().expect("kill holder");
    let status = holder.wait().expect("wait holder");
    assert!(!status.success(), "the holder was killed: {status:?}");
    assert_eq!(try_open(tmp.path()), "opened 1");

    // 5. And this process opens it and finds the holder's object.
    let s = Store::open(tmp.path(), RANK, StoreOptions::new()).expect("open after the holder died");
    assert_eq!(
        &*s.load_wait(PersistentPtr::<String>::from_id(id)).expect("load"),
        "held"
    );
    // While we hold it, a second process is refused again, naming us.
    assert_eq!(try_open(tmp.path()), format!("locked {}", std::process::id()));
    drop(s);
    assert_eq!(try_open(tmp.path()), "opened 1");

    println!("{NAME} ... ok ({:.1} s)", start.elapsed().as_secs_f64());
}
