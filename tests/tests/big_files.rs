//! A turn on a file far bigger than what the store holds in memory: a bash command appends to
//! a 160 MiB file, and the turn, its undo and its redo are exact, while no `shiro` process's
//! peak memory comes near the file's size, nor that of the dry runs that preview the undo. The store copies and hashes such files a piece at
//! a time (`StoreOptions::stream_file_bytes`, docs/formats.md); it used to hold the old and
//! the new version whole, twice the file.
//!
//! And a turn of many files that add up to more than the store holds in memory: an `rm -rf`
//! of 2,000 files of 64 KiB. Their pre-images past `StoreOptions::max_held_bytes` (32 MiB)
//! are read back from the in-flight file as the turn is stored; the turn used to hold them
//! all.
//!
//! The overlay needs a mount namespace; where the kernel refuses one, the test prints why and
//! skips.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

use support::{Run, Ws, overlay_refused};

/// The file: past the store's 64 MiB streaming size, small enough for a modest `/tmp`.
const BIG: usize = 160 << 20;
/// The most any one `shiro` process may hold at its peak, in KiB: well under the file, which
/// the store used to hold twice.
const MAX_KIB: u64 = 96 << 10;

/// Runs `shiro -C ws ARGS` through `peak_rss`, and returns the run with the process's peak
/// resident memory in KiB.
fn measured(ws: &Ws, args: &[&str]) -> (Run, u64) {
    let shiro = ws.command(args);
    let out = ws.config.path().join("peak-kib");
    let mut command = Command::new(env!("CARGO_BIN_EXE_peak_rss"));
    command
        .arg(&out)
        .arg(shiro.get_program())
        .args(shiro.get_args());
    for (key, value) in shiro.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = ws.finish(command.spawn().unwrap());
    let kib = fs::read_to_string(&out).unwrap().trim().parse().unwrap();
    (run, kib)
}

/// The many-file turn: this many files of `MANY_BYTES`, 128 MiB in all.
const MANY: usize = 2000;
const MANY_BYTES: usize = 64 << 10;

/// Writes `len` bytes of a pattern that no two MiB share, to `path`.
fn write_big(path: &Path, len: usize) {
    let mut file = std::io::BufWriter::new(fs::File::create(path).unwrap());
    let mut block = vec![0u8; 1 << 20];
    for (n, chunk) in (0..len).step_by(block.len()).enumerate() {
        for (i, byte) in block.iter_mut().enumerate() {
            *byte = (i.wrapping_mul(31) ^ n.wrapping_mul(7)) as u8;
        }
        file.write_all(&block[..block.len().min(len - chunk)])
            .unwrap();
    }
    file.flush().unwrap();
}

/// Whether the files at `a` and `b` hold the same bytes, compared a MiB at a time.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (mut a, mut b) = (fs::File::open(a).unwrap(), fs::File::open(b).unwrap());
    if a.metadata().unwrap().len() != b.metadata().unwrap().len() {
        return false;
    }
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = a.read(&mut x).unwrap();
        if n == 0 {
            return true;
        }
        b.read_exact(&mut y[..n]).unwrap();
        if x[..n] != y[..n] {
            return false;
        }
    }
}

#[test]
fn a_bash_turn_on_a_big_file_is_exact_in_bounded_memory() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    let big = ws.path().join("big.bin");
    let before = ws.config.path().join("before.bin");
    let after = ws.config.path().join("after.bin");
    write_big(&big, BIG);
    fs::copy(&big, &before).unwrap();
    fs::copy(&big, &after).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(&after)
        .unwrap()
        .write_all(b"tail\n")
        .unwrap();

    let old = fs::metadata(&big).unwrap();

    let args = serde_json::json!({ "command": "echo tail >> big.bin" }).to_string();
    let (run, kib) = measured(&ws, &["tool", "bash", "--args", &args]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(same_bytes(&big, &after), "the command's append is in place");
    assert!(kib < MAX_KIB, "the bash turn peaked at {kib} KiB");
    // The old version was kept, not copied: the store's blob is the file that was in the
    // workspace, now under that one name.
    let kept: Vec<fs::Metadata> = (fs::read_dir(ws.store().join("blobs")).unwrap())
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".file"))
        .map(|entry| entry.metadata().unwrap())
        .collect();
    assert_eq!(kept.len(), 1, "one kept file in the store");
    assert_eq!(
        (kept[0].dev(), kept[0].ino(), kept[0].nlink(), kept[0].len()),
        (old.dev(), old.ino(), 1, BIG as u64),
        "the kept blob is the old file itself"
    );

    // The previews, of the undo and of a revert of the turn, show the file's lengths and
    // read neither version whole.
    let shown = format!(
        "Large files differ ({} -> {} bytes; diffs are shown up to 8 MiB)",
        BIG + 5,
        BIG
    );
    for preview in [
        &["undo", "--dry-run"][..],
        &["undo", "--turn", "1", "--dry-run"],
    ] {
        let (run, kib) = measured(&ws, preview);
        assert_eq!(run.code, 0, "{}", run.show());
        assert!(run.stdout.contains(&shown), "{preview:?}: {}", run.show());
        assert!(kib < MAX_KIB, "{preview:?} peaked at {kib} KiB");
    }
    assert!(same_bytes(&big, &after), "a dry run changed the file");

    let (run, kib) = measured(&ws, &["undo"]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(same_bytes(&big, &before), "undo puts the file back exactly");
    assert!(kib < MAX_KIB, "the undo peaked at {kib} KiB");

    let (run, kib) = measured(&ws, &["redo"]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(
        same_bytes(&big, &after),
        "redo brings the append back exactly"
    );
    assert!(kib < MAX_KIB, "the redo peaked at {kib} KiB");
}

/// The bytes of the `n`th file of the many-file tree: no two files share them, and they do
/// not compress much.
fn many_bytes(n: usize) -> Vec<u8> {
    (0..MANY_BYTES)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7 ^ n.wrapping_mul(40_503)) as u8)
        .collect()
}

#[test]
fn a_bash_turn_of_many_files_is_exact_in_bounded_memory() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    for n in 0..MANY {
        let dir = ws.path().join(format!("tree/d{:02}", n % 40));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("f{n}.bin")), many_bytes(n)).unwrap();
    }

    let args = serde_json::json!({ "command": "rm -rf tree" }).to_string();
    let (run, kib) = measured(&ws, &["tool", "bash", "--args", &args]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(
        !ws.path().join("tree").exists(),
        "the command removed the tree"
    );
    assert!(kib < MAX_KIB, "the bash turn peaked at {kib} KiB");

    let (run, kib) = measured(&ws, &["undo"]);
    assert_eq!(run.code, 0, "{}", run.show());
    for n in 0..MANY {
        let path = ws.path().join(format!("tree/d{:02}/f{n}.bin", n % 40));
        assert!(
            fs::read(&path).unwrap() == many_bytes(n),
            "undo puts {} back exactly",
            path.display()
        );
    }
    assert!(kib < MAX_KIB, "the undo peaked at {kib} KiB");
}

/// A crash in the middle of a turn of many files. The crash helper's `many-turn` captures the
/// pre-images of its 2,000 files (here 64 KiB each) into the in-flight file, rewrites all but
/// the last, and aborts as SIGKILL would. Opening the store recovers the turn, reading that
/// file a record at a time and checking each pre-image as it goes: it holds what the recorder
/// would have held, and reads the rest back as it stores the turn. It used to read the whole
/// file into memory and copy every pre-image out of it, twice the pre-images (256 MiB here).
#[test]
fn recovering_a_crashed_turn_of_many_files_is_exact_in_bounded_memory() {
    const HELPER: &str = env!("CARGO_BIN_EXE_undo_crash_helper");
    let ws = Ws::new();
    fs::create_dir_all(ws.path().join("many")).unwrap();
    for n in 0..MANY {
        fs::write(ws.path().join(format!("many/f{n}")), many_bytes(n)).unwrap();
    }
    let status = Command::new(HELPER)
        .arg(ws.path())
        .args(["many-turn", &MANY.to_string(), "before"])
        .env("UNDO_CRASH_STATE", ws.state().dir())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the helper was to abort");
    let last = format!("many/f{}", MANY - 1);
    assert_eq!(
        fs::read(ws.path().join(&last)).unwrap(),
        many_bytes(MANY - 1),
        "the helper stopped before its last write"
    );

    let (run, kib) = measured(&ws, &["log"]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(
        run.stderr.contains("many-turn") && run.stdout.contains("many-turn"),
        "the turn was recovered: {}",
        run.show()
    );
    assert!(kib < MAX_KIB, "the recovery peaked at {kib} KiB");

    let (run, kib) = measured(&ws, &["undo"]);
    assert_eq!(run.code, 0, "{}", run.show());
    for n in 0..MANY {
        let path = ws.path().join(format!("many/f{n}"));
        assert!(
            fs::read(&path).unwrap() == many_bytes(n),
            "undo puts {} back exactly",
            path.display()
        );
    }
    assert!(kib < MAX_KIB, "the undo peaked at {kib} KiB");
}
