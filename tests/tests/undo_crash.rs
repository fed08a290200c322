//! Crash safety of shiro-undo: a helper process performs a turn or an undo and dies at a random
//! point, by SIGKILL after a random delay (which lands inside the store's own writes) or by
//! aborting itself at the k-th mutating call (exact points between mutations). After the next
//! open, the workspace is exactly the state before or after, the log is consistent, an
//! interrupted undo has completed, and an interrupted turn can be undone back to the start.
//!
//! Further tests kill a rewind of ten turns, a revert of one turn (as a new turn, merging a
//! text file a later turn changed too), and a turn of many files (most of its time is writing its pack) and a
//! turn whose commit drops the turn before it and rewrites that turn's pack (collection),
//! and an undo that also moves the git repository's HEAD, refs and index back.
//!
//! `SHIRO_CRASH_TRIALS` sets the number of trials (default 20; `cargo xtask soak` sets 200),
//! `SHIRO_CRASH_SEED` replays a run; the seed is printed with every failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use shiro_tools::FsMutator;
use shiro_undo::{Notice, StoreOptions, TurnStart, UndoOptions, UndoStore};

use crate::support;

use support::Rng;

const HELPER: &str = env!("CARGO_BIN_EXE_undo_crash_helper");
/// Mutating calls in the helper's scripted turn, with a margin past the end.
const TURN_CALLS: u64 = 30;

type Tree = BTreeMap<String, String>;

/// Every entry under `root` except the store, with kind, mode and content.
fn tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".shiro" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let value = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                walk(root, &path, out);
                format!("dir {mode:o}")
            } else {
                let bytes = std::fs::read(&path).unwrap();
                format!("file {mode:o} {}", blake3_hex(&bytes))
            };
            out.insert(rel, value);
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

fn blake3_hex(bytes: &[u8]) -> String {
    shiro_undo::ContentHash::of(bytes).to_hex()
}

/// The tree the helper's scripted turn expects.
fn setup(root: &Path) {
    let write = |name: &str, bytes: &[u8], mode: u32| {
        let path = root.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for i in 0..10 {
        write(
            &format!("f{i}"),
            format!("original {i}\n").as_bytes(),
            if i == 3 { 0o600 } else { 0o644 },
        );
    }
    write("swap", b"a file that becomes a directory\n", 0o644);
    std::fs::create_dir(root.join("dswap")).unwrap();
    std::fs::set_permissions(root.join("dswap"), std::fs::Permissions::from_mode(0o750)).unwrap();
    write("dswap/file", b"", 0o644);
    symlink("somewhere", root.join("link")).unwrap();
    let big: Vec<u8> = (0..256 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    write("big.bin", &big, 0o644);
    let huge: Vec<u8> = (0..640 * 1024u32)
        .map(|i| (i.wrapping_mul(40_503) >> 7) as u8)
        .collect();
    write("huge.bin", &huge, 0o644);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A workspace, `ws` in a temporary directory that also holds its state (`ws.state`, see
/// [`shiro_tests::state_beside`]).
struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Ws {
    fn path(&self) -> &Path {
        &self.root
    }
}

/// A workspace on tmpfs when there is one: SIGKILL keeps the page cache, so a real disk would
/// only make the test slower, not stricter.
fn workspace() -> Ws {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        dir
    } else {
        tempfile::tempdir().unwrap()
    };
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    Ws { _dir: dir, root }
}

/// How the helper dies.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// Not killed: it runs to its end.
    Never,
    /// SIGKILL after this long.
    After(Duration),
    /// It aborts at its k-th mutating call, before or after performing it.
    AbortAt(u64, bool),
}

/// Runs the helper and kills it as told; returns whether it finished on its own, successfully.
fn run_helper(root: &Path, mode: &str, kill: Kill) -> bool {
    let mut cmd = Command::new(HELPER);
    cmd.arg(root).arg(mode);
    if let Kill::AbortAt(k, after) = kill {
        cmd.arg(k.to_string())
            .arg(if after { "after" } else { "before" });
    }
    let mut child = cmd.stderr(std::process::Stdio::null()).spawn().unwrap();
    if let Kill::After(delay) = kill {
        std::thread::sleep(delay);
        // Kill sends SIGKILL on Unix; it fails only when the child already exited.
        let _ = child.kill();
    }
    child.wait().unwrap().success()
}

fn open(root: &Path) -> (UndoStore, Vec<Notice>) {
    open_deep(root, 20)
}

/// Opens the store with the log `depth` deep.
fn open_deep(root: &Path, depth: usize) -> (UndoStore, Vec<Notice>) {
    // As the helper's: `big.bin` is stored as deltas, `huge.bin` streamed, and most small
    // pre-images are read back from the in-flight file.
    let options = StoreOptions {
        big_file_bytes: 64 * 1024,
        stream_file_bytes: 512 * 1024,
        max_held_bytes: 64,
        depth,
        ..StoreOptions::default()
    };
    let store = runtime()
        .block_on(UndoStore::open(&shiro_tests::state_beside(root), options))
        .unwrap();
    let notices = store.take_notices();
    (store, notices)
}

fn undo(store: &UndoStore, root: &Path) {
    let fs = FsMutator::new(root).unwrap();
    runtime()
        .block_on(store.undo(&fs, UndoOptions::default()))
        .unwrap();
}

fn redo(store: &UndoStore, root: &Path) {
    let fs = FsMutator::new(root).unwrap();
    runtime()
        .block_on(store.redo(&fs, UndoOptions::default()))
        .unwrap();
}

fn no_damage(notices: &[Notice]) -> bool {
    !notices
        .iter()
        .any(|n| matches!(n, Notice::CorruptRecord { file, .. } if file == "log.jsonl"))
}

/// How many crash trials to run (`SHIRO_CRASH_TRIALS`, 20 by default), with the seed of
/// their random points (`SHIRO_CRASH_SEED` replays one) and its generator.
fn trials() -> (u64, u64, Rng) {
    let trials = std::env::var("SHIRO_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed = support::seed_from("SHIRO_CRASH_SEED");
    (trials, seed, Rng(seed))
}

#[test]
fn a_killed_turn_or_undo_leaves_a_consistent_workspace_and_log() {
    let (trials, seed, mut rng) = trials();

    // The reference run: the states before and after the scripted turn, and how long it takes.
    let reference = workspace();
    setup(reference.path());
    let before = tree(reference.path());
    let start = Instant::now();
    assert!(
        run_helper(reference.path(), "turn", Kill::Never),
        "the scripted turn failed"
    );
    let turn_time = start.elapsed();
    let after = tree(reference.path());
    assert_ne!(before, after);

    for trial in 0..trials {
        let context = format!("trial {trial} of seed {seed} (SHIRO_CRASH_SEED={seed} replays it)");
        let ws = workspace();
        let root = ws.path();
        setup(root);
        let undo_trial = trial % 2 == 1;
        if undo_trial {
            assert!(
                run_helper(root, "turn", Kill::Never),
                "{context}: setup turn failed"
            );
            assert_eq!(tree(root), after, "{context}: setup turn");
        }
        let kill = if rng.below(2) == 0 {
            let window = turn_time.as_micros() as u64 * 3 / 2;
            Kill::After(Duration::from_micros(rng.below(window)))
        } else {
            Kill::AbortAt(1 + rng.below(TURN_CALLS), rng.below(2) == 0)
        };
        let context = format!(
            "{context}, {} killed by {kill:?}",
            if undo_trial { "undo" } else { "turn" }
        );
        let finished = run_helper(root, if undo_trial { "undo" } else { "turn" }, kill);

        let (store, notices) = open(root);
        assert!(
            no_damage(&notices),
            "{context}: the log was damaged: {notices:?}"
        );
        let now = tree(root);
        let log = store.log().unwrap();
        let redo_log = store.redo_log().unwrap();
        if undo_trial {
            if now == before {
                assert!(
                    log.is_empty() && redo_log.len() == 1,
                    "{context}: undone, but the log says otherwise"
                );
                redo(&store, root);
                assert_eq!(tree(root), after, "{context}: redo after a completed undo");
            } else {
                assert_eq!(
                    now, after,
                    "{context}: an interrupted undo was neither completed nor left unstarted"
                );
                assert!(
                    !finished,
                    "{context}: the undo finished but changed nothing"
                );
                assert!(
                    log.len() == 1 && redo_log.is_empty(),
                    "{context}: not undone, but the log says otherwise"
                );
                undo(&store, root);
                assert_eq!(
                    tree(root),
                    before,
                    "{context}: undo after an unstarted undo"
                );
            }
        } else {
            if finished {
                assert_eq!(
                    now, after,
                    "{context}: the turn finished but the tree differs"
                );
            }
            if log.is_empty() {
                assert_eq!(
                    now, before,
                    "{context}: the tree changed but no turn was recorded or recovered"
                );
            } else {
                assert_eq!(log.len(), 1, "{context}: one turn expected");
                assert_eq!(log[0].history_marker, 7, "{context}");
                undo(&store, root);
                assert_eq!(
                    tree(root),
                    before,
                    "{context}: undo of the (recovered) turn"
                );
                redo(&store, root);
                assert_eq!(tree(root), now, "{context}: redo of the (recovered) turn");
            }
        }
    }
}

/// A store an earlier version kept in the tree (`.shiro/undo`) is moved out of it by a copy
/// (the way across file systems, with the most steps to cut short), killed at random
/// points: afterwards the old store or the new one is whole, the next open finishes the move,
/// and the turn it holds still undoes exactly.
#[test]
fn a_killed_migration_leaves_the_old_store_or_the_new_one_whole() {
    let (trials, seed, mut rng) = trials();

    let reference = workspace();
    setup(reference.path());
    let before = tree(reference.path());
    assert!(run_helper(reference.path(), "legacy-turn", Kill::Never));
    let after = tree(reference.path());
    assert!(reference.path().join(".shiro/undo/log.jsonl").is_file());
    let start = Instant::now();
    assert!(run_helper(reference.path(), "migrate", Kill::Never));
    let move_time = start.elapsed();
    assert!(!reference.path().join(".shiro/undo").exists());

    for trial in 0..trials {
        let context = format!("trial {trial} of seed {seed} (SHIRO_CRASH_SEED={seed} replays it)");
        let ws = workspace();
        let root = ws.path();
        setup(root);
        assert!(run_helper(root, "legacy-turn", Kill::Never), "{context}");
        let window = move_time.as_micros() as u64 * 3 / 2;
        let kill = Kill::After(Duration::from_micros(rng.below(window.max(1))));
        let context = format!("{context}, migration killed by {kill:?}");
        run_helper(root, "migrate", kill);

        let state = shiro_tests::state_beside(root);
        let old_whole = root.join(".shiro/undo/log.jsonl").is_file();
        let new_whole = state.undo_dir().join("log.jsonl").is_file();
        assert!(old_whole || new_whole, "{context}: neither store is there");
        let (store, notices) = open(root);
        assert!(no_damage(&notices), "{context}: damaged: {notices:?}");
        assert!(
            !root.join(".shiro/undo").exists(),
            "{context}: the old store was not moved"
        );
        let log = store.log().unwrap();
        assert_eq!(log.len(), 1, "{context}: the turn was lost: {notices:?}");
        assert_eq!(log[0].history_marker, 7, "{context}");
        assert_eq!(
            tree(root),
            after,
            "{context}: the move changed the workspace"
        );
        undo(&store, root);
        assert_eq!(tree(root), before, "{context}: undo after the move");
        redo(&store, root);
        assert_eq!(tree(root), after, "{context}: redo after the move");
    }
}

/// The files of the helper's `many-turn` and `gc-turn`: `g` holds what `many/f0` held.
fn setup_many(root: &Path) {
    std::fs::create_dir(root.join("many")).unwrap();
    for i in 0..2000 {
        std::fs::write(root.join(format!("many/f{i}")), format!("many {i}\n")).unwrap();
    }
    std::fs::write(root.join("g"), "many 0\n").unwrap();
}

/// The helper's turn of many files is killed at a random time (mostly while it writes its
/// pack); or, after it, the turn that drops it from a log one turn deep and rewrites its pack
/// is. After the next open, every turn the log holds undoes and redoes exactly.
#[test]
fn a_killed_pack_write_or_collection_leaves_every_turn_undoable() {
    let (trials, seed, mut rng) = trials();

    let reference = workspace();
    setup_many(reference.path());
    let before = tree(reference.path());
    let start = Instant::now();
    assert!(run_helper(reference.path(), "many-turn", Kill::Never));
    let many_time = start.elapsed();
    let after_many = tree(reference.path());
    let start = Instant::now();
    assert!(run_helper(reference.path(), "gc-turn", Kill::Never));
    let gc_time = start.elapsed();
    let after_gc = tree(reference.path());
    assert_ne!(after_many, after_gc);
    // The collection did rewrite the dropped turn's pack down to the one copy `g` needs.
    let (store, _) = open_deep(reference.path(), 1);
    assert_eq!(store.log().unwrap().len(), 1);
    let blobs = shiro_tests::state_beside(reference.path())
        .undo_dir()
        .join("blobs");
    let pack = std::fs::metadata(blobs.join("1-0.pack")).unwrap().len();
    assert!(
        pack < 200,
        "the dropped turn's pack was rewritten: {pack} bytes"
    );

    for trial in 0..trials {
        let context = format!("trial {trial} of seed {seed} (SHIRO_CRASH_SEED={seed} replays it)");
        let ws = workspace();
        let root = ws.path();
        setup_many(root);
        let gc_trial = trial % 2 == 1;
        if gc_trial {
            assert!(
                run_helper(root, "many-turn", Kill::Never),
                "{context}: setup"
            );
        }
        let (mode, time) = if gc_trial {
            ("gc-turn", gc_time)
        } else {
            ("many-turn", many_time)
        };
        let window = time.as_micros() as u64 * 3 / 2;
        let kill = Kill::After(Duration::from_micros(rng.below(window.max(1))));
        let context = format!("{context}, {mode} killed by {kill:?}");
        let finished = run_helper(root, mode, kill);

        let (store, notices) = open_deep(root, if gc_trial { 1 } else { 20 });
        assert!(no_damage(&notices), "{context}: damaged: {notices:?}");
        let now = tree(root);
        let log = store.log().unwrap();
        let (start_tree, end_tree) = if gc_trial {
            (&after_many, &after_gc)
        } else {
            (&before, &after_many)
        };
        if finished {
            assert_eq!(&now, end_tree, "{context}: finished, but the tree differs");
        }
        // A turn of many files killed part-way leaves some rewritten: its recovered turn
        // undoes them all and redoes exactly what it found.
        if gc_trial {
            assert!(
                now == *start_tree || now == *end_tree,
                "{context}: the tree is neither before nor after"
            );
        }
        // The newest turn is the killed one (finished or recovered) when it changed the tree.
        let killed_is_in = now != *start_tree;
        if killed_is_in {
            assert_eq!(log.len(), 1, "{context}: one turn expected: {notices:?}");
            undo(&store, root);
            assert_eq!(
                &tree(root),
                start_tree,
                "{context}: undo of the killed turn"
            );
            redo(&store, root);
            assert_eq!(tree(root), now, "{context}: redo of the killed turn");
        } else if gc_trial {
            // The collecting turn never counted: the turn of many files is still there.
            assert_eq!(
                log.len(),
                1,
                "{context}: the earlier turn was lost: {notices:?}"
            );
            undo(&store, root);
            assert_eq!(tree(root), before, "{context}: undo of the earlier turn");
            redo(&store, root);
            assert_eq!(
                tree(root),
                after_many,
                "{context}: redo of the earlier turn"
            );
        } else {
            assert!(log.is_empty(), "{context}: a turn that changed nothing");
        }
    }
}

/// Mutating calls of the helper's rewind of ten turns, with a margin past the end.
const REWIND_CALLS: u64 = 40;

/// A rewind of ten turns of one session, with two turns of another between them, killed at
/// random points: afterwards the workspace is as before the rewind or as after it (never a
/// mix), the other session's files are untouched, and the log agrees: a completed rewind
/// redoes all ten turns at once, an unstarted one rewinds again.
#[test]
fn a_killed_rewind_leaves_the_tree_before_or_after_it() {
    let (trials, seed, mut rng) = trials();
    let reference = workspace();
    setup(reference.path());
    let start = tree(reference.path());
    assert!(run_helper(reference.path(), "ten-turns", Kill::Never));
    let before = tree(reference.path());
    let started = Instant::now();
    assert!(run_helper(reference.path(), "rewind", Kill::Never));
    let rewind_time = started.elapsed();
    let after = tree(reference.path());
    let others = |tree: &Tree| -> Tree {
        (tree.iter())
            .filter(|(path, _)| path.starts_with("s2"))
            .map(|(path, entry)| (path.clone(), entry.clone()))
            .collect()
    };
    assert_ne!(before, after);
    assert_eq!(
        others(&after),
        others(&before),
        "the other session's files stay"
    );
    assert_eq!(
        after
            .iter()
            .filter(|(path, _)| !path.starts_with("s2"))
            .collect::<Vec<_>>(),
        start.iter().collect::<Vec<_>>(),
        "the rewound files are as before the session's first turn"
    );

    for trial in 0..trials {
        let context = format!("trial {trial} of seed {seed} (SHIRO_CRASH_SEED={seed} replays it)");
        let ws = workspace();
        let root = ws.path();
        setup(root);
        assert!(
            run_helper(root, "ten-turns", Kill::Never),
            "{context}: setup"
        );
        let kill = if rng.below(2) == 0 {
            let window = rewind_time.as_micros() as u64 * 3 / 2;
            Kill::After(Duration::from_micros(rng.below(window)))
        } else {
            Kill::AbortAt(1 + rng.below(REWIND_CALLS), rng.below(2) == 0)
        };
        let context = format!("{context}, rewind killed by {kill:?}");
        let finished = run_helper(root, "rewind", kill);
        let (store, notices) = open(root);
        assert!(
            no_damage(&notices),
            "{context}: the log was damaged: {notices:?}"
        );
        let now = tree(root);
        let fs = FsMutator::new(root).unwrap();
        let (undone, redoable) = (store.log().unwrap().len(), store.redo_log().unwrap().len());
        if now == after {
            assert_eq!(
                (undone, redoable),
                (2, 10),
                "{context}: rewound, but the log says otherwise"
            );
            let redone = runtime()
                .block_on(store.redo(&fs, UndoOptions::default()))
                .unwrap();
            assert_eq!(
                redone.also.len(),
                9,
                "{context}: one redo brings back all ten"
            );
            assert_eq!(
                tree(root),
                before,
                "{context}: redo after a completed rewind"
            );
        } else {
            assert_eq!(
                now, before,
                "{context}: neither before nor after the rewind"
            );
            assert!(
                !finished,
                "{context}: the rewind finished but changed nothing"
            );
            assert_eq!(
                (undone, redoable),
                (12, 0),
                "{context}: not rewound, but the log says otherwise"
            );
            let first = store
                .log()
                .unwrap()
                .into_iter()
                .rev()
                .find(|t| t.session.as_deref() == Some("s1"))
                .unwrap();
            runtime()
                .block_on(store.rewind(&fs, first.id, UndoOptions::default()))
                .unwrap();
            assert_eq!(
                tree(root),
                after,
                "{context}: rewind after an unstarted one"
            );
        }
    }
}

/// Mutating calls of the helper's revert, with a margin past the end.
const REVERT_CALLS: u64 = 32;

/// A revert of one turn that changed every kind of thing, with a later turn's change to one
/// of its text files to merge, killed at random points: afterwards the workspace is as
/// before the revert or as after it (never a mix), and the log agrees: a completed revert is
/// a turn that undoes and redoes exactly, an unstarted one reverts again.
#[test]
fn a_killed_revert_leaves_the_tree_before_or_after_it() {
    let (trials, seed, mut rng) = trials();
    let reference = workspace();
    setup(reference.path());
    assert!(run_helper(reference.path(), "revert-turns", Kill::Never));
    let before = tree(reference.path());
    let started = Instant::now();
    assert!(run_helper(reference.path(), "revert", Kill::Never));
    let revert_time = started.elapsed();
    let after = tree(reference.path());
    assert_ne!(before, after);
    let lines = std::fs::read_to_string(reference.path().join("lines.txt")).unwrap();
    assert!(
        lines.contains("line 5, later") && !lines.contains("reverted"),
        "the reverted turn's lines are back, the later turn's stay:\n{lines}"
    );
    assert!(reference.path().join("later.txt").is_file());

    for trial in 0..trials {
        let context = format!("trial {trial} of seed {seed} (SHIRO_CRASH_SEED={seed} replays it)");
        let ws = workspace();
        let root = ws.path();
        setup(root);
        assert!(
            run_helper(root, "revert-turns", Kill::Never),
            "{context}: setup"
        );
        assert_eq!(tree(root), before, "{context}: setup");
        let kill = if rng.below(2) == 0 {
            let window = revert_time.as_micros() as u64 * 3 / 2;
            Kill::After(Duration::from_micros(rng.below(window.max(1))))
        } else {
            Kill::AbortAt(1 + rng.below(REVERT_CALLS), rng.below(2) == 0)
        };
        let context = format!("{context}, revert killed by {kill:?}");
        let finished = run_helper(root, "revert", kill);
        let (store, notices) = open(root);
        assert!(
            no_damage(&notices),
            "{context}: the log was damaged: {notices:?}"
        );
        let now = tree(root);
        let fs = FsMutator::new(root).unwrap();
        let log = store.log().unwrap();
        let redoable = store.redo_log().unwrap().len();
        if now == after {
            assert_eq!(
                (log.len(), redoable),
                (4, 0),
                "{context}: reverted, but the log says otherwise: {notices:?}"
            );
            assert_eq!(log[0].history_marker, 11, "{context}: the revert's turn");
            undo(&store, root);
            assert_eq!(tree(root), before, "{context}: undo of the revert");
            redo(&store, root);
            assert_eq!(tree(root), after, "{context}: redo of the revert");
        } else {
            assert_eq!(
                now, before,
                "{context}: neither before nor after the revert: {notices:?}"
            );
            assert!(
                !finished,
                "{context}: the revert finished but changed nothing"
            );
            assert_eq!(
                (log.len(), redoable),
                (3, 0),
                "{context}: not reverted, but the log says otherwise: {notices:?}"
            );
            let reverted = log.iter().find(|t| t.history_marker == 2).unwrap();
            let start = TurnStart {
                summary: "revert again".to_owned(),
                history_marker: 12,
                session: None,
            };
            runtime()
                .block_on(store.revert(&fs, reverted.id, start))
                .unwrap();
            assert_eq!(
                tree(root),
                after,
                "{context}: revert after an unstarted one"
            );
        }
    }
}

/// What `git` says of the repository at `root`: HEAD, the branch, the branches, the staged
/// entries and the stash list.
fn git_view(root: &Path) -> String {
    let mut view = String::new();
    for args in [
        &["rev-parse", "HEAD"][..],
        &["branch", "--show-current"],
        &["branch", "--list", "-v", "--no-abbrev"],
        &["ls-files", "--stage"],
        &["stash", "list"],
    ] {
        let out = Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        view += &String::from_utf8(out.stdout).unwrap();
    }
    view
}

fn git(root: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {out:?}");
}

/// An undo of a turn that edited a file and, as a bash command would, made a branch with a
/// commit and staged a file, killed at each of its writes: the next open completes it, files
/// and repository alike (the repository's state is moved after the files, and moving it
/// again is harmless).
#[test]
fn an_undo_cut_short_puts_the_git_state_back_on_the_next_open() {
    if support::git_missing() {
        return;
    }
    // Past the undo's last write: the last trials run it whole.
    for k in 1..=4u64 {
        for after in [false, true] {
            let ws = workspace();
            let root = ws.path();
            std::fs::write(root.join("f"), "before\n").unwrap();
            git(
                root,
                "git init -q -b main && git add -A && git commit -qm first",
            );
            // The files; `.git` is read through git (objects and reflogs only grow).
            let files = || {
                let mut files = tree(root);
                files.retain(|path, _| !path.starts_with(".git"));
                files
            };
            let (before_files, before_git) = (files(), git_view(root));
            {
                let (store, _) = open(root);
                let recording = store.recorder(FsMutator::new(root).unwrap());
                runtime().block_on(async {
                    recording.begin_turn(TurnStart::default()).await.unwrap();
                    let repo = shiro_tools::git::Repo::at(root).unwrap();
                    let keep = tempfile::tempdir().unwrap();
                    let watch = repo.before(keep.path()).unwrap();
                    let path = shiro_tools::WorkspacePath::from_relative("f").unwrap();
                    shiro_tools::Mutator::write(&recording, &path, b"after\n", None)
                        .await
                        .unwrap();
                    git(
                        root,
                        "git checkout -q -b x && git commit -q --allow-empty -m agent && git add f",
                    );
                    let change = repo.since(watch).unwrap();
                    assert!(!change.is_empty());
                    recording.note_git(&change).await.unwrap();
                    recording.finish_turn().await.unwrap().unwrap();
                });
            }
            let moved = git_view(root);
            assert_ne!(moved, before_git);
            let finished = run_helper(root, "undo", Kill::AbortAt(k, after));
            let (store, notices) = open(root);
            assert!(no_damage(&notices), "k={k} after={after}: {notices:?}");
            assert_eq!(
                files(),
                before_files,
                "k={k} after={after} finished={finished}"
            );
            assert_eq!(
                git_view(root),
                before_git,
                "k={k} after={after} finished={finished}"
            );
            // And redo brings all of it back.
            redo(&store, root);
            assert_eq!(git_view(root), moved, "k={k} after={after}");
        }
    }
}
