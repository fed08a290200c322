//! Issue 13's hostile-tree property: random workspaces full of traps — links to directories
//! and files inside and outside, into `.git/` and `.shiro/`, dangling links and loops, links
//! and hard links planted under temporary names, named pipes — and random tool calls over
//! them, each its own recorded turn, then every turn undone and redone.
//!
//! Whatever the calls do, nothing outside the workspace changes (byte for byte, mode
//! included); undoing every turn gives back each earlier tree exactly and redoing gives back
//! each later one; and an edit made after a turn is never overwritten by its undo.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::Path;

use proptest::prelude::*;
use shiro_tools::{FsMutator, Tool, tools};
use shiro_undo::{StoreOptions, TurnStart, UndoError, UndoOptions, UndoStore};

/// Entries that may be planted, each a trap of its own kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trap {
    /// `in -> d`: a link to a directory inside.
    InsideDirLink,
    /// `inf -> a.txt`: a link to a file inside.
    InsideFileLink,
    /// `out -> <outside>/dir`: a link to a directory outside.
    OutsideDirLink,
    /// `outf -> <outside>/victim`: a link to a file outside.
    OutsideFileLink,
    /// `up -> ../..`: a relative link that climbs out.
    ClimbingLink,
    /// `g -> .git`.
    GitLink,
    /// `s -> .shiro/undo`.
    StoreLink,
    /// `dot -> .shiro`.
    ShiroLink,
    /// `dangle -> nowhere`.
    Dangling,
    /// `loop -> loop`.
    Loop,
    /// `.a.txt.shiro-tmp -> <outside>/victim`, and the same beside `d/b.txt`.
    PlantedTempLink,
    /// `hard`: a hard link to `<outside>/victim2`.
    HardLink,
    /// `fifo`: a named pipe.
    Fifo,
}

const TRAPS: [Trap; 13] = [
    Trap::InsideDirLink,
    Trap::InsideFileLink,
    Trap::OutsideDirLink,
    Trap::OutsideFileLink,
    Trap::ClimbingLink,
    Trap::GitLink,
    Trap::StoreLink,
    Trap::ShiroLink,
    Trap::Dangling,
    Trap::Loop,
    Trap::PlantedTempLink,
    Trap::HardLink,
    Trap::Fifo,
];

/// Paths the calls name: plain ones, and every spelling through a trap.
const PATHS: [&str; 22] = [
    "a.txt",
    "d/b.txt",
    "d/sub/c.txt",
    "d/new/deep.txt",
    "e",
    "e/inner.txt",
    "in/b.txt",
    "in/new.txt",
    "in/sub/c.txt",
    "inf",
    "out/x",
    "out/victim",
    "outf",
    "up/escaped.txt",
    "g/hooks/pre-commit",
    "s/log.jsonl",
    "dot/config.toml",
    "dot/commands/hi.md",
    "dangle/x",
    "loop/x",
    "hard",
    "fifo",
];

#[derive(Debug, Clone)]
enum Call {
    Write { path: usize, content: u8 },
    Edit { path: usize },
    Add { path: usize },
    Delete { path: usize },
    Move { from: usize, to: usize },
}

fn call_strategy() -> impl Strategy<Value = Call> {
    let path = 0..PATHS.len();
    prop_oneof![
        (path.clone(), 0u8..4).prop_map(|(path, content)| Call::Write { path, content }),
        path.clone().prop_map(|path| Call::Edit { path }),
        path.clone().prop_map(|path| Call::Add { path }),
        path.clone().prop_map(|path| Call::Delete { path }),
        (path.clone(), path).prop_map(|(from, to)| Call::Move { from, to }),
    ]
}

impl Call {
    /// The tool and its arguments.
    fn tool(&self) -> (Box<dyn Tool>, serde_json::Value) {
        let patch = |body: String| {
            (
                Box::new(tools::apply_patch()) as Box<dyn Tool>,
                serde_json::json!({ "patch": format!("*** Begin Patch\n{body}*** End Patch\n") }),
            )
        };
        match self {
            Call::Write { path, content } => (
                Box::new(tools::write_file()),
                serde_json::json!({ "path": PATHS[*path], "content": format!("written {content}\n") }),
            ),
            Call::Edit { path } => (
                Box::new(tools::edit_file()),
                serde_json::json!({ "path": PATHS[*path], "old_string": "orig", "new_string": "edited" }),
            ),
            Call::Add { path } => patch(format!("*** Add File: {}\n+added\n", PATHS[*path])),
            Call::Delete { path } => patch(format!("*** Delete File: {}\n", PATHS[*path])),
            Call::Move { from, to } => patch(format!(
                "*** Update File: {}\n*** Move to: {}\n@@\n-orig\n+moved\n",
                PATHS[*from], PATHS[*to]
            )),
        }
    }
}

/// Every entry under `root` (not following links): kind, mode, bytes or target. `.shiro/undo`
/// (the store) is left out; everything else, `.git/` included, is compared.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == ".shiro/undo" {
            continue;
        }
        let meta = path.symlink_metadata().unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        let shown = if kind.is_symlink() {
            format!("link -> {}", std::fs::read_link(&path).unwrap().display())
        } else if kind.is_dir() {
            walk(root, &path, out);
            format!("dir {mode:o}")
        } else if kind.is_fifo() {
            "fifo".to_owned()
        } else {
            format!(
                "file {mode:o} {:?}",
                String::from_utf8_lossy(&std::fs::read(&path).unwrap())
            )
        };
        out.insert(rel, shown);
    }
}

/// Builds the workspace `ws` with `traps`, and the outside world beside it.
fn build(ws: &Path, outside: &Path, traps: &[Trap]) {
    std::fs::create_dir_all(ws.join("d/sub")).unwrap();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(ws.join("a.txt"), "orig\n").unwrap();
    std::fs::write(ws.join("d/b.txt"), "orig\n").unwrap();
    std::fs::write(ws.join("d/sub/c.txt"), "orig\n").unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(outside.join("victim"), "orig\n").unwrap();
    std::fs::set_permissions(
        outside.join("victim"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(outside.join("victim2"), "orig\n").unwrap();
    std::fs::write(outside.join("dir/x"), "orig\n").unwrap();
    // Opening the store first makes `.shiro/undo` for the links that lead into it.
    std::fs::create_dir_all(ws.join(".shiro/undo")).unwrap();
    for trap in traps {
        match trap {
            Trap::InsideDirLink => symlink("d", ws.join("in")).unwrap(),
            Trap::InsideFileLink => symlink("a.txt", ws.join("inf")).unwrap(),
            Trap::OutsideDirLink => symlink(outside.join("dir"), ws.join("out")).unwrap(),
            Trap::OutsideFileLink => symlink(outside.join("victim"), ws.join("outf")).unwrap(),
            Trap::ClimbingLink => symlink("../..", ws.join("up")).unwrap(),
            Trap::GitLink => symlink(".git", ws.join("g")).unwrap(),
            Trap::StoreLink => symlink(".shiro/undo", ws.join("s")).unwrap(),
            Trap::ShiroLink => symlink(".shiro", ws.join("dot")).unwrap(),
            Trap::Dangling => symlink("nowhere", ws.join("dangle")).unwrap(),
            Trap::Loop => symlink("loop", ws.join("loop")).unwrap(),
            Trap::PlantedTempLink => {
                symlink(outside.join("victim"), ws.join(".a.txt.shiro-tmp")).unwrap();
                symlink(outside.join("victim"), ws.join("d/.b.txt.shiro-tmp")).unwrap();
            }
            Trap::HardLink => std::fs::hard_link(outside.join("victim2"), ws.join("hard")).unwrap(),
            Trap::Fifo => {
                let made = std::process::Command::new("mkfifo")
                    .arg(ws.join("fifo"))
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(made, "mkfifo failed");
            }
        }
    }
}

/// Runs one call as its own turn, as `shiro tool` does; returns whether a turn was recorded.
async fn run_turn(store: &UndoStore, ws: &FsMutator, call: &Call) -> bool {
    let recording = store.recorder(ws.clone());
    recording
        .begin_turn(TurnStart {
            summary: format!("{call:?}"),
            history_marker: 0,
            session: None,
        })
        .await
        .unwrap();
    let (tool, args) = call.tool();
    let ahead = match tool.touched_paths(recording.inner(), &args).await {
        Ok(paths) => recording.capture_ahead(&paths).await.is_ok(),
        Err(_) => true,
    };
    if ahead {
        let result = tool.call(&recording, args).await;
        let changes = result
            .as_ref()
            .map(|out| out.changes.clone())
            .unwrap_or_default();
        recording.note_tool(tool.name(), &changes).await;
    }
    recording.finish_turn().await.unwrap().is_some()
}

fn check(traps: &[Trap], calls: &[Call]) -> Result<(), TestCaseError> {
    let top = tempfile::tempdir().unwrap();
    let ws_dir = top.path().join("ws");
    let outside = top.path().join("outside");
    std::fs::create_dir_all(&ws_dir).unwrap();
    build(&ws_dir, &outside, traps);
    let outside_before = snapshot(&outside);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = UndoStore::open(
            &shiro_tests::state_beside(&ws_dir),
            StoreOptions {
                depth: 100,
                ..StoreOptions::default()
            },
        )
        .await
        .unwrap();
        let ws = FsMutator::new(&ws_dir).unwrap().inline();
        let mut states = vec![snapshot(&ws_dir)];
        for call in calls {
            let recorded = run_turn(&store, &ws, call).await;
            let now = snapshot(&ws_dir);
            prop_assert_eq!(
                snapshot(&outside),
                outside_before.clone(),
                "after {:?}",
                call
            );
            let last = states.last().unwrap();
            if recorded {
                states.push(now);
            } else {
                prop_assert_eq!(&now, last, "{:?} changed the tree without a turn", call);
            }
        }
        // Undo every turn: each earlier tree comes back exactly.
        for expected in states.iter().rev().skip(1) {
            store.undo(&ws, UndoOptions::default()).await.unwrap();
            prop_assert_eq!(&snapshot(&ws_dir), expected);
            prop_assert_eq!(snapshot(&outside), outside_before.clone());
        }
        prop_assert!(matches!(
            store.undo(&ws, UndoOptions::default()).await,
            Err(UndoError::NothingToUndo)
        ));
        // Redo every turn: each later tree comes back exactly.
        for expected in states.iter().skip(1) {
            store.redo(&ws, UndoOptions::default()).await.unwrap();
            prop_assert_eq!(&snapshot(&ws_dir), expected);
            prop_assert_eq!(snapshot(&outside), outside_before.clone());
        }
        // An edit made after the newest turn, at a path it changed, is never overwritten.
        if states.len() >= 2 {
            let (before, after) = (&states[states.len() - 2], &states[states.len() - 1]);
            let changed = after.keys().chain(before.keys()).find(|path| {
                after.get(*path) != before.get(*path)
                    && !after.get(*path).is_some_and(|s| s.starts_with("dir"))
                    && !before.get(*path).is_some_and(|s| s.starts_with("dir"))
            });
            if let Some(path) = changed {
                let full = ws_dir.join(path);
                if full.symlink_metadata().is_ok() {
                    std::fs::remove_file(&full).unwrap();
                }
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(&full, "the user's edit\n").unwrap();
                let user = snapshot(&ws_dir);
                let refused = store.undo(&ws, UndoOptions::default()).await;
                prop_assert!(
                    matches!(refused, Err(UndoError::Conflict(_))),
                    "{:?}",
                    refused
                );
                prop_assert_eq!(snapshot(&ws_dir), user);
            }
        }
        prop_assert_eq!(snapshot(&outside), outside_before);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Each case builds a tree on disk and runs up to ten turns, each flushed, through the
        // real store, then undoes and redoes them all: a quarter of the suite's case count
        // keeps `cargo xtask test` near a minute here, and soak still runs thousands.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse::<u32>().ok())
            .map_or(64, |cases| (cases / 4).max(16)),
        ..ProptestConfig::default()
    })]

    #[test]
    fn hostile_trees_never_leak_and_always_round_trip(
        mask in proptest::collection::vec(any::<bool>(), TRAPS.len()),
        calls in proptest::collection::vec(call_strategy(), 1..10),
    ) {
        let traps: Vec<Trap> = TRAPS.iter().zip(&mask).filter(|(_, on)| **on).map(|(t, _)| *t).collect();
        check(&traps, &calls)?;
    }
}

/// Every trap at once, with a call through each of them.
#[test]
fn every_trap_at_once() {
    let calls: Vec<Call> = (0..PATHS.len())
        .flat_map(|path| [Call::Write { path, content: 1 }, Call::Delete { path }])
        .collect();
    check(&TRAPS, &calls).unwrap();
}
