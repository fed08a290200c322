//! The undo store checks its own ground, and restores finish or stop cleanly, end to end
//! through the `shiro` binary (issue #13, items 3, 4 and 8).
#![allow(clippy::unwrap_used)]

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::Ws;

/// Aborts a library undo at its k-th file change (see `tests/src/bin/undo_crash_helper.rs`).
const HELPER: &str = env!("CARGO_BIN_EXE_undo_crash_helper");

/// A directory outside the workspace, holding `victim` (a file a planted link points at).
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("victim"), "SECRET\n").unwrap();
        Self { dir }
    }

    fn victim(&self) -> PathBuf {
        self.dir.path().join("victim")
    }

    /// Every entry, for checking that nothing out here changed.
    fn listing(&self) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                let bytes = std::fs::read(&path).unwrap_or_default();
                (path.display().to_string(), bytes)
            })
            .collect();
        out.sort();
        out
    }
}

fn write_file(ws: &Ws, path: &str, content: &str) -> support::Run {
    let args = serde_json::json!({ "path": path, "content": content }).to_string();
    ws.run(&["tool", "write_file", "--args", &args])
}

/// Item 4: a link planted at any of the store's own file names is never followed; the store
/// removes it (never its target), says so, and works as usual.
#[test]
fn a_link_planted_at_a_store_file_is_removed_never_followed() {
    for name in ["inflight.jsonl", "lock", "log.jsonl", "progress"] {
        let ws = Ws::new();
        let outside = Outside::new();
        ws.write("foo", "orig\n");
        std::fs::create_dir_all(ws.store()).unwrap();
        std::os::unix::fs::symlink(outside.victim(), ws.store().join(name)).unwrap();
        let before = outside.listing();

        let run = write_file(&ws, "foo", "agent\n");
        assert_eq!(run.code, 0, "{name}: {}", run.show());
        assert!(
            run.stderr
                .contains("removed a symbolic link from the undo store")
                && run.stderr.contains(&format!("/undo/{name} -> ")),
            "{name}: {}",
            run.show()
        );
        assert_eq!(
            outside.listing(),
            before,
            "{name}: the link's target changed"
        );
        let planted = ws.store().join(name);
        // Gone, or the store's own file (the progress file is made by the first restore).
        assert!(
            planted.symlink_metadata().is_ok_and(|meta| meta.is_file()) || name == "progress",
            "{name}"
        );
        ws.ok(&["undo"]);
        assert_eq!(ws.read("foo"), "orig\n", "{name}");
        assert_eq!(outside.listing(), before, "{name}");
    }
}

/// Item 4: a link planted in `blobs/` under the name of a copy the store is about to keep is
/// not taken for that copy (nor read, nor written through): the copy is stored in its place.
#[test]
fn a_link_planted_as_a_blob_is_never_followed() {
    let ws = Ws::new();
    let outside = Outside::new();
    ws.write("foo", "orig\n");
    let blobs = ws.store().join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let name = shiro_undo::ContentHash::of(b"orig\n").to_hex();
    std::os::unix::fs::symlink(outside.victim(), blobs.join(name)).unwrap();
    let before = outside.listing();

    assert_eq!(write_file(&ws, "foo", "agent\n").code, 0);
    ws.ok(&["undo"]);
    assert_eq!(ws.read("foo"), "orig\n");
    assert_eq!(outside.listing(), before);
}

/// Item 4: the workspace's state directory, its `undo` or its `undo/blobs` being a link
/// sends nothing outside: the store refuses to open, says which link to remove, and nothing
/// is written anywhere.
#[test]
fn a_linked_store_directory_is_refused_with_the_fix() {
    for link in ["", "undo", "undo/blobs"] {
        let ws = Ws::new();
        let outside = Outside::new();
        ws.write("foo", "orig\n");
        let link_path = match link {
            "" => ws.state().dir().to_path_buf(),
            _ => ws.state().dir().join(link),
        };
        std::fs::create_dir_all(link_path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(outside.dir.path(), &link_path).unwrap();
        let before = outside.listing();
        let shown = link_path
            .display()
            .to_string()
            .replace(ws.state().dir().to_str().unwrap(), "<state>")
            .replace(ws.config.path().to_str().unwrap(), "<config>");

        let run = write_file(&ws, "foo", "agent\n");
        assert_eq!(run.code, 1, "{link}: {}", run.show());
        assert!(
            run.stderr.contains(&format!("{shown} is a symbolic link"))
                && run
                    .stderr
                    .contains(&format!("remove the link {shown} and run again")),
            "{link}: {}",
            run.show()
        );
        assert_eq!(ws.read("foo"), "orig\n", "{link}: the tool ran anyway");
        assert_eq!(outside.listing(), before, "{link}: written outside");

        // Removing the link, as told, is all it takes.
        std::fs::remove_file(&link_path).unwrap();
        let run = write_file(&ws, "foo", "agent\n");
        assert_eq!(run.code, 0, "{link}: {}", run.show());
        ws.ok(&["undo"]);
        assert_eq!(ws.read("foo"), "orig\n");
    }
}

/// Item 4: a store directory that belongs to another user is refused (it needs root to set
/// up; skipped otherwise).
#[test]
fn a_store_directory_of_another_user_is_refused() {
    if rustix_euid() != 0 {
        println!("skipped: making a directory of another user needs root");
        return;
    }
    let ws = Ws::new();
    ws.write("foo", "orig\n");
    let undo = ws.store();
    std::fs::create_dir_all(&undo).unwrap();
    std::os::unix::fs::chown(&undo, Some(65534), Some(65534)).unwrap();
    let run = write_file(&ws, "foo", "agent\n");
    assert_eq!(run.code, 1, "{}", run.show());
    assert!(
        run.stderr
            .contains("/undo belongs to user id 65534, not to you (user id 0)"),
        "{}",
        run.show()
    );
    assert_eq!(ws.read("foo"), "orig\n");
}

fn rustix_euid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |meta| meta.uid())
}

/// The files of the store's `blobs/` (blobs and packs).
fn store_files(ws: &Ws) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(ws.store().join("blobs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Flips one byte of the stored bytes in `path`: the middle of a blob, or the first byte
/// after a pack's magic (its first copy; damage to a pack's index is the corruption
/// property test's, in crates/shiro-undo/tests/corruption.rs).
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = if path.extension().is_some_and(|ext| ext == "pack") {
        8
    } else {
        bytes.len() / 2
    };
    bytes[at] ^= 0x55;
    std::fs::write(path, bytes).unwrap();
}

/// Item 8: one damaged stored copy stops the undo before it changes anything; the turn is
/// marked in `shiro log`, and the store stays usable for new turns, their undo and redo.
#[test]
fn a_damaged_copy_stops_the_undo_before_any_change() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let patch = "*** Begin Patch\n*** Add File: new.txt\n+created\n*** Update File: a.txt\n-one\n+two\n*** End Patch\n";
    let run = ws.run_with_stdin(&["apply-patch"], patch);
    assert_eq!(run.code, 0, "{}", run.show());
    // The only stored copy: a.txt before the turn.
    let files = store_files(&ws);
    assert_eq!(files.len(), 1, "{files:?}");
    damage(&files[0]);
    let tree = ws.tree();

    let run = ws.run(&["undo"]);
    assert_eq!(run.code, 1, "{}", run.show());
    assert!(
        run.stderr.contains("cannot undo turn #1")
            && run.stderr.contains("cannot restore a.txt")
            && run.stderr.contains("is damaged")
            && run.stderr.contains("nothing was changed"),
        "{}",
        run.show()
    );
    assert_eq!(ws.tree(), tree, "the undo changed the workspace");

    let log = ws.ok(&["log"]);
    assert!(
        log.stdout.contains("damaged: its undo cannot be made"),
        "{}",
        log.show()
    );
    let json = ws.ok(&["log", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let damage = value["turns"][0]["damage"].as_str().unwrap_or_default();
    assert!(damage.contains("a.txt"), "{}", json.stdout);

    // New turns, their undo and redo work.
    assert_eq!(write_file(&ws, "b.txt", "b\n").code, 0);
    ws.ok(&["undo"]);
    assert!(!ws.exists("b.txt"));
    ws.ok(&["redo"]);
    assert_eq!(ws.read("b.txt"), "b\n");
    ws.ok(&["undo"]);
    // The damaged turn is next again, and still refused cleanly.
    assert_eq!(ws.run(&["undo"]).code, 1);
    assert_eq!(ws.read("a.txt"), "two\n");
    assert!(ws.exists("new.txt"));
}

/// Records one turn changing `a`, `b` and `c` (to `a2`, `b2`, `c2`), then runs an undo
/// (through the crash helper) that aborts, like SIGKILL, before its second file write: `a`
/// is back to `a1`, and the `begin` record is in the log.
fn interrupted_undo() -> Ws {
    let ws = Ws::new();
    for name in ["a", "b", "c"] {
        ws.write(name, &format!("{name}1\n"));
    }
    let patch = "*** Begin Patch\n*** Update File: a\n-a1\n+a2\n*** Update File: b\n-b1\n+b2\n*** Update File: c\n-c1\n+c2\n*** End Patch\n";
    let run = ws.run_with_stdin(&["apply-patch"], patch);
    assert_eq!(run.code, 0, "{}", run.show());
    let status = Command::new(HELPER)
        .arg(ws.path())
        .args(["undo", "2", "before"])
        .env("UNDO_CRASH_STATE", ws.state().dir())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the helper was to abort");
    assert_eq!(ws.read("a"), "a1\n");
    assert_eq!(ws.read("b"), "b2\n");
    ws
}

/// Item 3: an undo interrupted by a crash is not completed over a file the user changed
/// meanwhile: it is rolled back around it, the user's bytes stay, and the turn can still be
/// undone (refused as a conflict, then forced).
#[test]
fn completing_an_interrupted_undo_never_overwrites_a_later_edit() {
    let ws = interrupted_undo();
    ws.write("c", "mine\n");

    let run = ws.ok(&["log"]);
    assert!(
        run.stderr.contains("rolled back the undo of turn #1")
            && run.stderr.contains("left exactly as found: c"),
        "{}",
        run.show()
    );
    assert_eq!(ws.read("c"), "mine\n", "the user's edit was overwritten");
    // The rest is as the undo found it.
    assert_eq!(ws.read("a"), "a2\n");
    assert_eq!(ws.read("b"), "b2\n");
    assert!(run.stdout.contains("damaged: "), "{}", run.show());

    assert_eq!(ws.run(&["undo"]).code, 3, "c changed since the turn");
    ws.ok(&["undo", "--force"]);
    assert_eq!(
        [ws.read("a"), ws.read("b"), ws.read("c")],
        ["a1\n", "b1\n", "c1\n"]
    );
    // Redo brings back what the forced undo replaced, the user's edit included.
    ws.ok(&["redo"]);
    assert_eq!(ws.read("c"), "mine\n");
}

/// The path an interrupted undo was writing may hold a mix of both versions: it is marked,
/// so completing the undo rewrites it rather than taking it for a change by the user.
#[test]
fn the_path_being_written_at_the_crash_is_completed() {
    let ws = interrupted_undo();
    // What a write cut short could leave.
    ws.write("b", "b");
    let run = ws.ok(&["log"]);
    assert!(
        run.stderr
            .contains("completed the interrupted undo of turn #1"),
        "{}",
        run.show()
    );
    assert_eq!(
        [ws.read("a"), ws.read("b"), ws.read("c")],
        ["a1\n", "b1\n", "c1\n"]
    );
}

/// A restore that can be neither completed nor rolled back (every stored copy damaged)
/// does not wedge the store: `shiro log` shows it, other commands say what to do, and
/// `shiro undo --abandon` clears it, keeping every file as it is.
#[test]
fn a_stuck_restore_is_shown_and_abandoned() {
    let ws = interrupted_undo();
    // Every copy cut short: the ones completing the undo needs (b and c as before the turn)
    // and the one rolling it back needs (a as the undo found it, in the undo's pack).
    for file in store_files(&ws) {
        let len = std::fs::metadata(&file).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    let tree = ws.tree();

    let run = ws.ok(&["log"]);
    assert!(
        run.stderr
            .contains("could be neither completed nor rolled back")
            && run.stderr.contains("shiro undo --abandon"),
        "{}",
        run.show()
    );
    assert!(
        run.stdout.contains("damaged: its undo is stuck part-way"),
        "{}",
        run.show()
    );
    let run = write_file(&ws, "x", "x\n");
    assert_eq!(run.code, 1, "{}", run.show());
    assert!(
        run.stderr.contains("shiro undo --abandon"),
        "{}",
        run.show()
    );
    assert_eq!(ws.tree(), tree);

    let run = ws.ok(&["undo", "--abandon"]);
    assert!(
        run.stdout
            .contains("abandoned the undo of turn #1 \"shiro apply-patch\""),
        "{}",
        run.show()
    );
    assert_eq!(ws.tree(), tree, "abandoning changed a file");
    insta::assert_snapshot!("abandoned", run.stdout);

    assert_eq!(write_file(&ws, "x", "x\n").code, 0);
    ws.ok(&["undo"]);
    assert!(!ws.exists("x"));
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("abandoned"), "{}", log.show());
    let run = ws.run(&["undo", "--abandon"]);
    assert_eq!(run.code, 1, "nothing left to abandon: {}", run.show());
}
