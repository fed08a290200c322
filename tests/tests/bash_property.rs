//! Property: turns that mix random shell scripts (writes, appends, deletes, `mv` of files and
//! directories, `mkdir -p`, `rm -rf`, `chmod`, `ln -s`, files replaced by directories and
//! back) with ordinary tool calls are undone to the exact start tree and redone to the exact
//! end tree — content, mode and kind — when bash runs over the overlay. With detect-only
//! capture, every path a script changed is reported. And in a git repository, where scripts
//! also clean, stash and `rm -rf` (issue 29), the history stays complete through random
//! undos and redos, each of which is exact.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use shiro_tools::capture::{BashRunner, Detect, Direct, Overlay};
use shiro_tools::tools::{Bash, write_file};
use shiro_tools::{FsMutator, Tool, WorkspacePath};
use shiro_undo::{StoreOptions, TurnStart, UndoOptions, UndoStore};
use support::{Ws, overlay_refused, shiro_bin};

const PATHS: [&str; 8] = ["a", "b", "d/x", "d/y", "d/e/z", "e", "e/f", "d"];
const MODES: [u32; 3] = [0o644, 0o755, 0o600];

/// One shell command of a script. Each may fail (its target missing, say); the script goes on.
#[derive(Debug, Clone)]
enum Sh {
    Write(usize, u8),
    Append(usize, u8),
    Rm(usize),
    Mv(usize, usize),
    MkdirP(usize),
    RmRf(usize),
    Chmod(usize, usize),
    Symlink(usize, usize),
    FileToDir(usize),
    DirToFile(usize, u8),
}

impl Sh {
    fn render(&self) -> String {
        let p = |i: &usize| PATHS[*i];
        match self {
            Sh::Write(i, c) => format!("printf 'w{c}\\n' > {}", p(i)),
            Sh::Append(i, c) => format!("printf 'a{c}\\n' >> {}", p(i)),
            Sh::Rm(i) => format!("rm -f {}", p(i)),
            Sh::Mv(i, j) => format!("mv -T {} {}", p(i), p(j)),
            Sh::MkdirP(i) => format!("mkdir -p {}", p(i)),
            Sh::RmRf(i) => format!("rm -rf {}", p(i)),
            Sh::Chmod(i, m) => format!("chmod {:o} {}", MODES[*m], p(i)),
            Sh::Symlink(t, i) => format!("ln -s {} {}", p(t), p(i)),
            Sh::FileToDir(i) => format!("rm -f {0} && mkdir {0} && printf 'in\\n' > {0}/in", p(i)),
            Sh::DirToFile(i, c) => format!("rm -rf {0} && printf 'f{c}\\n' > {0}", p(i)),
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Bash(Vec<Sh>),
    Write(usize, u8),
}

fn sh() -> impl Strategy<Value = Sh> {
    let i = 0..PATHS.len();
    let c = 0u8..4;
    prop_oneof![
        (i.clone(), c.clone()).prop_map(|(i, c)| Sh::Write(i, c)),
        (i.clone(), c.clone()).prop_map(|(i, c)| Sh::Append(i, c)),
        i.clone().prop_map(Sh::Rm),
        (i.clone(), i.clone()).prop_map(|(i, j)| Sh::Mv(i, j)),
        i.clone().prop_map(Sh::MkdirP),
        i.clone().prop_map(Sh::RmRf),
        (i.clone(), 0..MODES.len()).prop_map(|(i, m)| Sh::Chmod(i, m)),
        (i.clone(), i.clone()).prop_map(|(t, i)| Sh::Symlink(t, i)),
        i.clone().prop_map(Sh::FileToDir),
        (i, c).prop_map(|(i, c)| Sh::DirToFile(i, c)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(sh(), 1..6).prop_map(Op::Bash),
        1 => (0..PATHS.len(), 0u8..4).prop_map(|(i, c)| Op::Write(i, c)),
    ]
}

fn turns() -> impl Strategy<Value = Vec<Vec<Op>>> {
    prop::collection::vec(prop::collection::vec(op(), 1..4), 1..4)
}

/// A start tree: some of the paths as files, one directory with a file.
fn seed(ws: &Ws) {
    ws.write("a", "start a\n");
    ws.write("d/x", "start x\n");
    ws.write("d/e/z", "start z\n");
    std::os::unix::fs::symlink("a", ws.path().join("b")).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `turns` through a recorder, bash with `runner`, and the same operations directly in
/// `twin` (a copy of the start tree: bash run bare, the tools unrecorded); after each one
/// the workspace must equal its twin, so a commit that applies anything other than what the
/// command did fails here. Returns how many turns were recorded and, for each bash call,
/// what it changed on disk and what it reported.
async fn play(
    ws: &Ws,
    twin: &Ws,
    store: &UndoStore,
    runner: Arc<dyn BashRunner>,
    turns: &[Vec<Op>],
) -> (usize, Vec<(BTreeSet<String>, BTreeSet<String>)>) {
    let bash = Bash::new(runner);
    let bare = Bash::new(Arc::new(Direct));
    let twin_fs = FsMutator::new(twin.path()).unwrap();
    let recording = store.recorder(FsMutator::new(ws.path()).unwrap());
    let mut recorded = 0;
    let mut reports = Vec::new();
    for (n, turn) in turns.iter().enumerate() {
        recording
            .begin_turn(TurnStart {
                summary: format!("turn {n}"),
                ..TurnStart::default()
            })
            .await
            .unwrap();
        for op in turn {
            match op {
                Op::Bash(script) => {
                    let script: Vec<String> = script.iter().map(Sh::render).collect();
                    let args = serde_json::json!({ "command": script.join("; ") });
                    let before = ws.tree();
                    let output = bash.call(&recording, args).await.unwrap();
                    let changed: BTreeSet<String> = changed(&before, &ws.tree());
                    let reported = output.unrestorable.iter().map(|p| p.to_string()).collect();
                    recording.note_tool("bash", &output.changes).await;
                    reports.push((changed, reported));
                    let args = serde_json::json!({ "command": script.join("; ") });
                    bare.call(&twin_fs, args).await.unwrap();
                }
                Op::Write(i, c) => {
                    let args = serde_json::json!({"path": PATHS[*i], "content": format!("t{c}\n")});
                    let tool = write_file();
                    let paths: Vec<WorkspacePath> = tool
                        .touched_paths(recording.inner(), &args)
                        .await
                        .unwrap_or_default();
                    recording.capture_ahead(&paths).await.unwrap();
                    // It may be refused (its parent is a file, say); that is part of the game.
                    let _ = tool.call(&twin_fs, args.clone()).await;
                    let _ = tool.call(&recording, args).await;
                }
            }
            assert_eq!(ws.tree(), twin.tree(), "after {op:?}");
        }
        if recording.finish_turn().await.unwrap().is_some() {
            recorded += 1;
        }
    }
    (recorded, reports)
}

/// The paths whose entry differs between two trees.
fn changed(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}

/// 32 cases, or `PROPTEST_CASES` up to 300: each case runs a dozen commands, so the soak's
/// 20,000 would take most of an hour.
fn runner() -> TestRunner {
    support::capped_runner(32, 300)
}

/// Runs `property` over generated turns; a failure panics with the shrunk input.
fn check(property: impl Fn(Vec<Vec<Op>>) -> Result<(), TestCaseError>) {
    if let Err(err) = runner().run(&turns(), property) {
        panic!("{err}");
    }
}

#[test]
fn undo_and_redo_of_mixed_bash_turns_are_exact() {
    if overlay_refused().is_some() {
        return;
    }
    check(|turns| {
        let (ws, twin) = (Ws::new(), Ws::new());
        seed(&ws);
        seed(&twin);
        let start = ws.tree();
        runtime().block_on(async {
            let store = UndoStore::open(&ws.state(), StoreOptions::default())
                .await
                .unwrap();
            let runner: Arc<dyn BashRunner> =
                Arc::new(Overlay::new(shiro_bin(), ws.state().layers_dir()));
            let (recorded, _) = play(&ws, &twin, &store, runner, &turns).await;
            let end = ws.tree();
            let workspace = FsMutator::new(ws.path()).unwrap();
            for _ in 0..recorded {
                store
                    .undo(&workspace, UndoOptions::default())
                    .await
                    .unwrap();
            }
            prop_assert_eq!(&ws.tree(), &start);
            for _ in 0..recorded {
                store
                    .redo(&workspace, UndoOptions::default())
                    .await
                    .unwrap();
            }
            prop_assert_eq!(&ws.tree(), &end);
            let layers = support::bash_layers(&ws.state().layers_dir()).len();
            prop_assert_eq!(layers, 0);
            Ok(())
        })
    });
}

#[test]
fn detect_only_reports_every_path_a_script_changed() {
    check(|turns| {
        let (ws, twin) = (Ws::new(), Ws::new());
        seed(&ws);
        seed(&twin);
        runtime().block_on(async {
            let store = UndoStore::open(&ws.state(), StoreOptions::default())
                .await
                .unwrap();
            let (_, reports) = play(&ws, &twin, &store, Arc::new(Detect), &turns).await;
            for (changed, reported) in reports {
                // A file rewritten with the bytes it had is reported too (its times
                // changed); every real change must be.
                let missed: Vec<&String> = changed.difference(&reported).collect();
                prop_assert!(missed.is_empty(), "not reported: {:?}", missed);
            }
            Ok(())
        })
    });
}

/// One step of the history game below.
#[derive(Debug, Clone)]
enum Step {
    /// A bash turn: one script, git commands among its possible commands.
    Bash(Vec<String>),
    /// A file-tool turn.
    Write(usize, u8),
    Undo,
    Redo,
}

/// Commands that take the tree away from under an agent: git's cleaning and stashing, and
/// `rm -rf` of directories.
const GIT_ATTACKS: [&str; 7] = [
    "git clean -fdxq",
    "git stash --all -q",
    "git stash -u -q",
    "git checkout -q -- .",
    "git reset -q --hard",
    "rm -rf d",
    "rm -rf e .shiro",
];

fn step() -> impl Strategy<Value = Step> {
    let script = prop::collection::vec(
        prop_oneof![
            2 => sh().prop_map(|sh| sh.render()),
            1 => (0..GIT_ATTACKS.len()).prop_map(|i| GIT_ATTACKS[i].to_owned()),
        ],
        1..4,
    );
    prop_oneof![
        3 => script.prop_map(Step::Bash),
        1 => (0..PATHS.len(), 0u8..4).prop_map(|(i, c)| Step::Write(i, c)),
        2 => Just(Step::Undo),
        1 => Just(Step::Redo),
    ]
}

/// Random bash turns (with `git clean`, `git stash --all`, `rm -rf` of directories among
/// their commands) and file-tool turns, undone and redone at random, in a git repository:
/// the log always holds every turn the model expects, and every undo and redo lands on
/// exactly the tree the model remembers.
#[test]
fn the_history_survives_git_cleans_stashes_and_rm_rf() {
    if overlay_refused().is_some() {
        return;
    }
    if support::git_missing() {
        return;
    }
    let steps = prop::collection::vec(step(), 1..10);
    let result = runner().run(&steps, |steps| {
        let ws = Ws::new();
        seed(&ws);
        ws.write(".gitignore", "e\n");
        ws.write(".shiro/commands.md", "## hi\nsay hi\n");
        support::git(ws.path(), &["init", "-q"]);
        support::git(ws.path(), &["add", "-A"]);
        support::git(ws.path(), &["commit", "-qm", "seed"]);
        ws.write("e/f", "ignored\n");
        runtime().block_on(async {
            let store = UndoStore::open(&ws.state(), StoreOptions::default())
                .await
                .unwrap();
            let runner: Arc<dyn BashRunner> =
                Arc::new(Overlay::new(shiro_bin(), ws.state().layers_dir()));
            let bash = Bash::new(runner);
            let workspace = FsMutator::new(ws.path()).unwrap();
            let recording = store.recorder(workspace.clone());
            // The model: each undoable turn's tree before and after it, and the undone ones.
            let mut done: Vec<(BTreeMap<String, String>, BTreeMap<String, String>)> = Vec::new();
            let mut undone: Vec<(BTreeMap<String, String>, BTreeMap<String, String>)> =
                Vec::new();
            for (n, step) in steps.iter().enumerate() {
                let before = ws.worktree();
                match step {
                    Step::Bash(_) | Step::Write(..) => {
                        recording
                            .begin_turn(TurnStart {
                                summary: format!("turn {n}"),
                                ..TurnStart::default()
                            })
                            .await
                            .unwrap();
                        if let Step::Bash(script) = step {
                            let args = serde_json::json!({ "command": script.join("; ") });
                            let output = bash.call(&recording, args).await.unwrap();
                            prop_assert!(
                                output.capture == Some(shiro_tools::capture::CaptureMode::Overlay),
                                "{:?}",
                                output
                            );
                            recording.note_tool("bash", &output.changes).await;
                        } else if let Step::Write(i, c) = step {
                            let args = serde_json::json!({"path": PATHS[*i], "content": format!("t{c}\n")});
                            let tool = write_file();
                            let paths: Vec<WorkspacePath> = tool
                                .touched_paths(recording.inner(), &args)
                                .await
                                .unwrap_or_default();
                            recording.capture_ahead(&paths).await.unwrap();
                            let _ = tool.call(&recording, args).await;
                        }
                        if recording.finish_turn().await.unwrap().is_some() {
                            done.push((before, ws.worktree()));
                            undone.clear();
                        } else {
                            prop_assert_eq!(&ws.worktree(), &before, "{:?} changed nothing", step);
                        }
                    }
                    Step::Undo | Step::Redo => {
                        let undo = matches!(step, Step::Undo);
                        let result = if undo {
                            store.undo(&workspace, UndoOptions::default()).await
                        } else {
                            store.redo(&workspace, UndoOptions::default()).await
                        };
                        let (from, to) = if undo {
                            (&mut done, &mut undone)
                        } else {
                            (&mut undone, &mut done)
                        };
                        match from.pop() {
                            Some(turn) => {
                                prop_assert!(result.is_ok(), "{:?}: {:?}", step, result.err());
                                let expected = if undo { &turn.0 } else { &turn.1 };
                                prop_assert_eq!(&ws.worktree(), expected, "after {:?}", step);
                                to.push(turn);
                            }
                            None => prop_assert!(result.is_err(), "{:?} of nothing", step),
                        }
                    }
                }
                prop_assert_eq!(store.log().unwrap().len(), done.len(), "after {:?}", step);
                prop_assert_eq!(store.redo_log().unwrap().len(), undone.len(), "after {:?}", step);
            }
            // Every remaining turn still undoes, back to the seeded tree.
            while let Some(turn) = done.pop() {
                store.undo(&workspace, UndoOptions::default()).await.unwrap();
                prop_assert_eq!(&ws.worktree(), &turn.0);
            }
            prop_assert_eq!(support::bash_layers(&ws.state().layers_dir()).len(), 0);
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
