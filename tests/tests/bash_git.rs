//! Git-aware undo end to end: what a `bash` command does to the repository at the workspace
//! root (HEAD, refs, the stash list, the index) is undone with its turn, so that `git status`,
//! `git log`, `git branch` and `git stash list` read exactly as before the command; redo puts
//! it back; a ref moved since the turn is a conflict; and random sequences of git commands
//! mixed with edits all undo to the exact start.
//!
//! The commands run over the overlay (the default capture); where the machine refuses it,
//! the tests print why and skip.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use shiro_tools::capture::{BashRunner, Overlay};
use shiro_tools::tools::Bash;
use shiro_tools::{FsMutator, Tool};
use shiro_undo::{StoreOptions, TurnStart, UndoOptions, UndoStore};
use support::{Ws, overlay_refused, shiro_bin};

/// Everything a person reads of the repository's state, and the files.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GitView {
    status: String,
    head: String,
    branch: String,
    branches: String,
    tags: String,
    stash: String,
    staged: String,
    log: String,
}

fn git_out(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn view(root: &Path) -> GitView {
    GitView {
        status: git_out(root, &["status", "--porcelain", "--untracked-files=all"]),
        head: git_out(root, &["rev-parse", "HEAD"]),
        branch: git_out(root, &["branch", "--show-current"]),
        branches: git_out(root, &["branch", "--list", "-v", "--no-abbrev"]),
        tags: git_out(root, &["tag", "--list"]),
        stash: git_out(root, &["stash", "list", "--format=%H %s"]),
        staged: git_out(root, &["ls-files", "--stage"]),
        log: git_out(root, &["log", "--format=%H %s", "--all"]),
    }
}

/// A workspace holding a repository on `main` with two commits and an identity of its own;
/// `None` (the test skips) where the overlay or git is missing.
fn repo() -> Option<Ws> {
    if overlay_refused().is_some() || support::git_missing() {
        return None;
    }
    let ws = Ws::new();
    let root = ws.path();
    support::git(root, &["init", "-q", "-b", "main"]);
    support::git(root, &["config", "user.name", "t"]);
    support::git(root, &["config", "user.email", "t@example.com"]);
    support::git(root, &["config", "commit.gpgsign", "false"]);
    ws.write("a.txt", "a\n");
    ws.write("b.txt", "b\n");
    support::git(root, &["add", "-A"]);
    support::git(root, &["commit", "-qm", "first"]);
    ws.write("a.txt", "a\na2\n");
    support::git(root, &["commit", "-qam", "second"]);
    Some(ws)
}

/// Runs `script` as the agent's bash would, and returns what the model reads.
fn bash(ws: &Ws, script: &str) -> String {
    let args = serde_json::json!({ "command": script }).to_string();
    let run = ws.run_bounded(&["tool", "bash", "--args", &args]);
    assert_eq!(run.code, 0, "{script}:\n{}", run.show());
    run.stdout
}

/// `script` moves the repository, `shiro undo` puts every part of it back with the files,
/// and `shiro redo` brings the command's state back.
fn undone_and_redone(ws: &Ws, script: &str) -> String {
    let before = (view(ws.path()), ws.worktree());
    let said = bash(ws, script);
    let after = (view(ws.path()), ws.worktree());
    assert_ne!(before, after, "{script} changed nothing");
    ws.ok(&["undo"]);
    assert_eq!(
        (view(ws.path()), ws.worktree()),
        before,
        "after undoing {script}"
    );
    ws.ok(&["redo"]);
    assert_eq!(
        (view(ws.path()), ws.worktree()),
        after,
        "after redoing {script}"
    );
    said
}

#[test]
fn a_new_branch_and_a_commit_are_undone() {
    let Some(ws) = repo() else {
        return;
    };
    let said = undone_and_redone(
        &ws,
        "git checkout -q -b feature && echo more >> b.txt && git commit -qam third",
    );
    assert!(said.contains("[git: HEAD main → feature; refs/heads/feature created at "));
    let log = ws.ok(&["log"]).stdout;
    assert!(log.contains("    git: HEAD main → feature; refs/heads/feature created at "));
}

#[test]
fn a_hard_reset_is_undone() {
    let Some(ws) = repo() else {
        return;
    };
    ws.write("b.txt", "b\nuncommitted\n");
    undone_and_redone(&ws, "git reset -q --hard HEAD~1");
}

/// `git fsck`'s verdict on every object the repository's refs and reflogs reach.
fn fsck(root: &Path) -> (bool, String) {
    let out = Command::new("git")
        .args(["fsck", "--full", "--no-progress"])
        .current_dir(root)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// History the command destroys for good (the reflog expired, the dropped commit's objects
/// pruned) comes back with the undo: the command removed objects only from its own view.
#[test]
fn a_pruned_commit_is_back_after_undo() {
    let Some(ws) = repo() else {
        return;
    };
    undone_and_redone(
        &ws,
        "git reset -q --hard HEAD~1 && git reflog expire --expire=now --all && git gc -q --prune=now",
    );
    let (ok, said) = fsck(ws.path());
    assert!(ok, "{said}");
}

/// `rm -rf .git` by the agent: the objects stay, and the undo puts HEAD, the refs and the
/// index back, so the repository reads as before.
#[test]
fn rm_rf_dot_git_is_undone() {
    let Some(ws) = repo() else {
        return;
    };
    let before = (view(ws.path()), ws.worktree());
    bash(&ws, "rm -rf .git; true");
    assert_ne!(git_out(ws.path(), &["rev-parse", "HEAD"]), before.0.head);
    ws.ok(&["undo"]);
    assert_eq!((view(ws.path()), ws.worktree()), before);
    let (ok, said) = fsck(ws.path());
    assert!(ok, "{said}");
}

/// A commit's objects, written in the command's own view, are carried into the repository
/// as the command ends: git outside finds them.
#[test]
fn a_commit_made_by_the_command_is_whole_outside_it() {
    let Some(ws) = repo() else {
        return;
    };
    ws.write("b.txt", "b\nb2\n");
    bash(&ws, "git commit -qam third");
    assert_eq!(git_out(ws.path(), &["log", "-1", "--format=%s"]), "third\n");
    let (ok, said) = fsck(ws.path());
    assert!(ok, "{said}");
}

#[test]
fn a_stash_is_undone() {
    let Some(ws) = repo() else {
        return;
    };
    ws.write("b.txt", "b\nwork in progress\n");
    let said = undone_and_redone(&ws, "git stash -q");
    assert!(said.contains("stash: 1 entry added"), "{said}");
    // A second stash on top of one the user made: the list keeps the user's entry.
    support::git(ws.path(), &["stash", "-q"]);
    ws.write("a.txt", "more work\n");
    undone_and_redone(&ws, "git stash -q");
}

#[test]
fn staging_is_undone() {
    let Some(ws) = repo() else {
        return;
    };
    ws.write("c.txt", "new\n");
    ws.write("a.txt", "changed\n");
    let said = undone_and_redone(&ws, "git add -A");
    assert!(
        said.contains("[git: index changed (recorded, undoable)]"),
        "{said}"
    );
}

#[test]
fn a_rebase_of_two_commits_is_undone() {
    let Some(ws) = repo() else {
        return;
    };
    let root = ws.path();
    support::git(root, &["checkout", "-q", "-b", "topic", "HEAD~1"]);
    ws.write("c.txt", "c\n");
    support::git(root, &["add", "c.txt"]);
    support::git(root, &["commit", "-qm", "topic one"]);
    ws.write("c.txt", "c\nc2\n");
    support::git(root, &["commit", "-qam", "topic two"]);
    undone_and_redone(&ws, "git rebase -q main");
}

#[test]
fn a_ref_moved_since_the_turn_is_a_conflict() {
    let Some(ws) = repo() else {
        return;
    };
    let root = ws.path();
    let before = view(root);
    bash(
        &ws,
        "git checkout -q -b feature && git commit -q --allow-empty -m agent",
    );
    // The user commits on the agent's branch afterwards.
    support::git(root, &["commit", "-q", "--allow-empty", "-m", "user"]);
    let theirs = view(root);
    let refused = ws.run(&["undo"]);
    assert_eq!(refused.code, 3, "{}", refused.show());
    assert!(
        refused
            .stderr
            .contains(".git/refs/heads/feature: moved since the turn (git)"),
        "{}",
        refused.show()
    );
    assert_eq!(view(root), theirs, "a refused undo changes nothing");
    // Forced, it goes back to before the turn; the user's commit stays in the reflog.
    ws.ok(&["undo", "--force"]);
    assert_eq!(view(root).head, before.head);
    assert_eq!(view(root).branches, before.branches);
    let reflog = git_out(root, &["reflog", "--format=%gs"]);
    assert!(
        reflog.lines().next().unwrap().contains("shiro undo"),
        "{reflog}"
    );
    assert!(git_out(root, &["reflog", "--format=%s"]).contains("user"));
}

/// What [`log_then_undo`] saw.
struct Standing {
    /// `shiro log` then `shiro undo`, with what each printed and how it exited, object ids
    /// and hashes (which the commits' times make) replaced by `<hex>`.
    transcript: String,
    /// The paths `shiro log --json` gives as standing in the way of the undo
    /// (`undo_is_clean` is whether there are none).
    in_the_way: Vec<String>,
    /// The paths the undo refused on.
    refused_on: Vec<String>,
}

/// Runs `shiro log --json`, `shiro log` and `shiro undo`, which must exit with `undo_exit`.
fn log_then_undo(ws: &Ws, undo_exit: i32) -> Standing {
    let json = ws.ok(&["log", "--json"]).stdout;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let next = &json["turns"][0];
    let in_the_way: Vec<String> = (next["conflicts"].as_array().unwrap().iter())
        .map(|path| path.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        next["undo_is_clean"],
        serde_json::json!(in_the_way.is_empty()),
        "{json:#}"
    );
    let log = ws.ok(&["log"]);
    let undo = ws.run(&["undo"]);
    assert_eq!(undo.code, undo_exit, "{}", undo.show());
    let transcript = format!(
        "$ shiro log\n{}\n$ shiro undo\n{}",
        support::normalize_times(&log.show()),
        undo.show()
    );
    Standing {
        transcript: without_hex(&transcript),
        in_the_way,
        refused_on: refused_on(&undo.stderr),
    }
}

/// `text` with every run of 7 or more hex digits (an object id, a short hash) as `<hex>`.
fn without_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.len() >= 7 && word.chars().all(|c| c.is_ascii_hexdigit()) {
            out.push_str("<hex>");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The paths a refused undo names on its stderr, one a line (`  PATH: now …`).
fn refused_on(stderr: &str) -> Vec<String> {
    (stderr.lines())
        .filter_map(|line| line.strip_prefix("  ")?.split_once(": "))
        .map(|(path, _)| path.to_owned())
        .collect()
}

/// What `shiro log` says of the next turn is what `shiro undo` finds: a branch the user
/// committed on since the turn is named by both, and the log does not call the turn clean.
#[test]
fn the_log_names_the_ref_undo_refuses_on() {
    let Some(ws) = repo() else {
        return;
    };
    bash(
        &ws,
        "git checkout -q -b feature && git commit -q --allow-empty -m agent",
    );
    support::git(ws.path(), &["commit", "-q", "--allow-empty", "-m", "user"]);
    let seen = log_then_undo(&ws, 3);
    assert_eq!(seen.in_the_way, [".git/refs/heads/feature"]);
    assert_eq!(seen.in_the_way, seen.refused_on);
    insta::assert_snapshot!(seen.transcript);
}

/// A file, a ref and the index moved since the turn: the log names all three, as the undo
/// does, not the file alone.
#[test]
fn the_log_names_a_file_a_ref_and_the_index_as_undo_does() {
    let Some(ws) = repo() else {
        return;
    };
    bash(&ws, "echo agent >> a.txt && git commit -qam agent");
    ws.write("a.txt", "user\n");
    support::git(ws.path(), &["commit", "-qam", "user"]);
    let seen = log_then_undo(&ws, 3);
    assert_eq!(
        seen.in_the_way,
        [".git/index", ".git/refs/heads/main", "a.txt"]
    );
    assert_eq!(seen.in_the_way, seen.refused_on);
    insta::assert_snapshot!(seen.transcript);
}

/// A lock of git's on what the undo moves (a git running, or one that stopped and left it):
/// the log names it instead of calling the turn clean, and the undo stops before it changes
/// anything, exits 1 and leaves the turn undamaged; once the lock is gone, both go ahead.
#[test]
fn a_git_lock_is_named_by_the_log_and_stops_the_undo_before_any_change() {
    let Some(ws) = repo() else {
        return;
    };
    let root = ws.path();
    let before = (view(root), ws.worktree());
    bash(
        &ws,
        "git checkout -q -b feature && echo agent >> b.txt && git commit -qam agent",
    );
    let after = (view(root), ws.worktree());
    std::fs::write(root.join(".git/HEAD.lock"), "").unwrap();
    let seen = log_then_undo(&ws, 1);
    assert_eq!(seen.in_the_way, [".git/HEAD.lock"]);
    assert_eq!(
        (view(root), ws.worktree()),
        after,
        "a stopped undo changed something"
    );
    let log = ws.ok(&["log"]).stdout;
    assert!(!log.contains("damaged"), "{log}");
    insta::assert_snapshot!(seen.transcript);

    std::fs::remove_file(root.join(".git/HEAD.lock")).unwrap();
    let seen = log_then_undo(&ws, 0);
    assert_eq!(seen.in_the_way, Vec::<String>::new());
    assert_eq!((view(root), ws.worktree()), before);
}

/// A forced rewind of two turns goes over the user's commits on the branch, one between the
/// turns and one after the last, and its redo puts the branch back where the rewind found
/// it; the later turn keeps both, so that undoing it alone then brings back the repository as
/// it was between the turns.
#[test]
fn a_forced_rewind_is_redone_to_the_commits_it_went_over() {
    let Some(ws) = repo() else {
        return;
    };
    let root = ws.path();
    let start = (view(root), ws.worktree());
    bash(&ws, "echo one >> b.txt && git commit -qam agent1");
    support::git(
        root,
        &["commit", "-q", "--allow-empty", "-m", "user between"],
    );
    let between = (view(root), ws.worktree());
    bash(&ws, "echo two >> b.txt && git commit -qam agent2");
    support::git(root, &["commit", "-q", "--allow-empty", "-m", "user after"]);
    let found = (view(root), ws.worktree());
    let refused = ws.run(&["undo", "--to", "1"]);
    assert_eq!(refused.code, 3, "{}", refused.show());
    for moved in [
        ".git/refs/heads/main: changed by someone else between turns #1 and #2",
        ".git/refs/heads/main: moved since the turn (git)",
    ] {
        assert!(refused.stderr.contains(moved), "{}", refused.show());
    }
    ws.ok(&["undo", "--to", "1", "--force"]);
    assert_eq!((view(root), ws.worktree()), start, "after the rewind");
    ws.ok(&["redo"]);
    assert_eq!((view(root), ws.worktree()), found, "after its redo");
    // Undone alone, the later turn expects the user's last commit and leaves the first.
    ws.ok(&["undo"]);
    assert_eq!(
        (view(root), ws.worktree()),
        between,
        "after undoing turn #2"
    );
}

/// A repository that keeps its refs in a reftable is not read, and the result says so rather
/// than claim the undo covers it.
#[test]
fn a_reftable_repository_is_named_as_not_recorded() {
    if overlay_refused().is_some() || support::git_missing() {
        return;
    }
    let ws = Ws::new();
    let made = Command::new("git")
        .args(["init", "-q", "--ref-format=reftable"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    if !made.success() {
        eprintln!("skipped: this git cannot make a reftable repository");
        return;
    }
    let said = bash(&ws, "echo a > a.txt");
    assert!(
        said.contains(
            "[note: what the command did to the git repository could not be read (the \
             repository keeps its refs in a reftable, which shiro does not read)"
        ),
        "{said}"
    );
    assert!(!said.contains("[git:"), "{said}");
}

/// A workspace with a file and no repository; `None` (the test skips) where the overlay or
/// git is missing.
fn no_repo() -> Option<Ws> {
    if overlay_refused().is_some() || support::git_missing() {
        return None;
    }
    let ws = Ws::new();
    ws.write("a.txt", "a\n");
    Some(ws)
}

const IDENTITY: &str = "-c user.name=t -c user.email=t@example.com -c commit.gpgsign=false";

#[test]
fn a_repository_git_init_makes_is_carried_over_and_kept_by_undo() {
    let Some(ws) = no_repo() else {
        return;
    };
    let said = bash(
        &ws,
        &format!(
            "git init -q -b main && git {IDENTITY} add a.txt && git {IDENTITY} commit -qm first \
             && echo new > b.txt"
        ),
    );
    assert!(
        said.contains(
            "[note: made the git repository .git: carried over as the command left it; undoing \
             this turn leaves it, and what later commands do to it is recorded]"
        ),
        "{said}"
    );
    assert_eq!(git_out(ws.path(), &["log", "--format=%s"]), "first\n");
    assert_eq!(git_out(ws.path(), &["status", "--porcelain"]), "?? b.txt\n");
    // What the command made beside it is undone; the repository stays.
    ws.ok(&["undo"]);
    assert!(!ws.exists("b.txt"));
    assert_eq!(git_out(ws.path(), &["log", "--format=%s"]), "first\n");
    // The next command's commit is recorded, as in any repository.
    let said = bash(
        &ws,
        &format!("echo more >> a.txt && git {IDENTITY} commit -qam second"),
    );
    assert!(said.contains("[git: refs/heads/main "), "{said}");
    ws.ok(&["undo"]);
    assert_eq!(git_out(ws.path(), &["log", "--format=%s"]), "first\n");
    assert_eq!(ws.read("a.txt"), "a\n");
}

#[test]
fn a_repository_git_clone_makes_below_the_root_is_carried_over() {
    let Some(ws) = no_repo() else {
        return;
    };
    // The repository to clone, outside the workspace.
    let origin = tempfile::tempdir().unwrap();
    support::git(origin.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(origin.path().join("lib.rs"), "fn lib() {}\n").unwrap();
    support::git(origin.path(), &["add", "-A"]);
    support::git(
        origin.path(),
        &["-c", "commit.gpgsign=false", "commit", "-qm", "lib"],
    );
    let url = format!("file://{}", origin.path().display());
    let said = bash(&ws, &format!("git clone -q {url} vendor/lib"));
    assert!(
        said.contains(
            "[note: made the git repository vendor/lib/.git: carried over as the command left \
             it; undoing this turn leaves it, and what later commands do inside it is not \
             carried over (shiro lets commands write only the workspace root's .git)]"
        ),
        "{said}"
    );
    assert!(said.contains("A vendor/lib/lib.rs"), "{said}");
    let clone = ws.path().join("vendor/lib");
    assert_eq!(git_out(&clone, &["log", "--format=%s"]), "lib\n");
    assert_eq!(git_out(&clone, &["status", "--porcelain"]), "");
    // The undo takes the checkout back and keeps the repository, in the directory it needs.
    ws.ok(&["undo"]);
    assert!(!ws.exists("vendor/lib/lib.rs"));
    assert_eq!(git_out(&clone, &["log", "--format=%s"]), "lib\n");
}

#[test]
fn a_repository_made_with_a_hook_is_not_carried_over() {
    let Some(ws) = no_repo() else {
        return;
    };
    let said = bash(
        &ws,
        "git init -q && printf '#!/bin/sh\\n' > .git/hooks/pre-commit \
         && chmod +x .git/hooks/pre-commit && echo new > b.txt",
    );
    assert!(
        said.contains(
            "[note: not carried over: the git repository the command made (.git), because it \
             holds the hook .git/hooks/pre-commit, which git would run outside the sandbox; run \
             `git init` yourself to make one (what commands then do to it is recorded)]"
        ),
        "{said}"
    );
    assert!(!ws.exists(".git"));
    assert_eq!(ws.read("b.txt"), "new\n", "the rest is carried over");
}

/// One git command (or a file edit) of a random script; each may fail, and the script goes on.
fn command() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u8..3).prop_map(|n| format!("echo e{n} >> a.txt")),
        (0u8..3).prop_map(|n| format!("echo n{n} > f{n}.txt")),
        Just("git add -A".to_owned()),
        (0u8..3).prop_map(|n| format!("git commit -qam c{n} --allow-empty")),
        (0u8..3).prop_map(|n| format!("git branch -q b{n}")),
        (0u8..3).prop_map(|n| format!("git checkout -q b{n}")),
        Just("git checkout -q main".to_owned()),
        (0u8..3).prop_map(|n| format!("git checkout -q -b b{n}")),
        Just("git reset -q --hard HEAD~1".to_owned()),
        Just("git reset -q HEAD~1".to_owned()),
        Just("git stash -q".to_owned()),
        Just("git stash pop -q".to_owned()),
        (0u8..3).prop_map(|n| format!("git tag t{n}")),
        (0u8..3).prop_map(|n| format!("git tag -d t{n}")),
        Just("git pack-refs --all".to_owned()),
    ]
}

/// 16 cases, or `PROPTEST_CASES` up to 200: each case runs up to six commands through the
/// overlay.
fn runner() -> TestRunner {
    support::capped_runner(16, 200)
}

/// Random turns of git commands and edits, recorded; undoing every turn restores the refs,
/// HEAD, the stash list, the index and the worktree exactly, and redoing them all brings
/// the end back.
#[test]
fn undoing_random_git_turns_restores_the_repository_exactly() {
    let turns = prop::collection::vec(prop::collection::vec(command(), 1..4), 1..6);
    let result = runner().run(&turns, |turns| {
        let Some(ws) = repo() else {
            return Ok(());
        };
        let start = (view(ws.path()), ws.worktree());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = UndoStore::open(&ws.state(), StoreOptions::default())
                .await
                .unwrap();
            let runner: Arc<dyn BashRunner> =
                Arc::new(Overlay::new(shiro_bin(), ws.state().layers_dir()));
            let bash = Bash::new(runner);
            let workspace = FsMutator::new(ws.path()).unwrap();
            let recording = store.recorder(workspace.clone());
            let mut recorded = 0;
            for (n, script) in turns.iter().enumerate() {
                recording
                    .begin_turn(TurnStart {
                        summary: format!("turn {n}"),
                        ..TurnStart::default()
                    })
                    .await
                    .unwrap();
                let args = serde_json::json!({ "command": script.join("; ") });
                let output = bash.call(&recording, args).await.unwrap();
                recording.note_tool("bash", &output.changes).await;
                if let Some(git) = &output.git {
                    recording.note_git(git).await.unwrap();
                }
                if recording.finish_turn().await.unwrap().is_some() {
                    recorded += 1;
                }
            }
            let end = (view(ws.path()), ws.worktree());
            for _ in 0..recorded {
                store
                    .undo(&workspace, UndoOptions::default())
                    .await
                    .unwrap();
            }
            prop_assert_eq!(&(view(ws.path()), ws.worktree()), &start);
            for _ in 0..recorded {
                store
                    .redo(&workspace, UndoOptions::default())
                    .await
                    .unwrap();
            }
            prop_assert_eq!(&(view(ws.path()), ws.worktree()), &end);
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
