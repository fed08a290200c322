//! Issue 29: the undo history lives out of reach of the commands it protects. The commands
//! users and agents run on a repository (`git clean -fdx`, `git stash --all`, `git reset
//! --hard`, `rm -rf` of a build directory or of `.shiro`, …) run after a recorded edit turn,
//! through shiro's bash and directly in a shell; the edit turn stays in `shiro log` and
//! undoes exactly, and a bash command's own changes are a turn that undoes exactly too.
//! Inside bash, `find`, `grep -r` and `du` see the workspace as natively, without shiro's
//! store or layers, and shiro's state directory is empty and read-only.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use crate::support;

use std::process::Command;

use support::{Ws, git, git_missing, overlay_refused};

/// The attacks: what each runs in the workspace with `sh -c`.
const ATTACKS: &[&str] = &[
    "git clean -fdx",
    "git clean -ffdx",
    "git stash --all",
    "git stash -u",
    "git checkout -- .",
    "git reset --hard",
    "rm -rf target",
    "rm -rf .shiro",
    "chmod -R 000 .shiro",
    "mv .shiro elsewhere",
];

/// A repository as one looks mid-work: committed files (with the user's commands in
/// `.shiro/`), an untracked file, the user's untracked shiro config, and an ignored build
/// directory.
fn repository() -> Ws {
    let ws = Ws::new();
    ws.write("src/a.txt", "one\n");
    ws.write("README.md", "# shop\n");
    ws.write(".gitignore", "target/\n");
    ws.write(".shiro/commands.md", "## hi\nsay hi\n");
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "init"]);
    ws.write("notes.txt", "mine\n");
    ws.write(".shiro/config.toml", "[undo]\ndepth = 20\n");
    ws.write("target/debug/out.o", "object\n");
    ws
}

/// The edit turn: one tracked file changed through the file tools.
fn edit(ws: &Ws) {
    let args = serde_json::json!({"path": "src/a.txt", "content": "two\n"}).to_string();
    ws.ok(&["tool", "write_file", "--args", &args]);
}

fn log_len(ws: &Ws) -> usize {
    let run = ws.ok(&["log", "--json"]);
    let turns: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    turns["turns"].as_array().map_or(0, Vec::len)
}

fn bash(ws: &Ws, command: &str) -> support::Run {
    let args = serde_json::json!({ "command": command }).to_string();
    ws.ok(&["tool", "bash", "--args", &args])
}

/// Whether this test may run `attack`: after `chmod -R 000` only root can still read the
/// tree to compare it (CI runs as root).
fn runs_here(attack: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root && attack.starts_with("chmod") {
        println!("skipped {attack:?}: only root can read a tree after it");
    }
    root || !attack.starts_with("chmod")
}

#[test]
fn through_bash_each_attack_is_a_turn_and_the_history_survives_it() {
    if git_missing() || overlay_refused().is_some() {
        return;
    }
    for attack in ATTACKS.iter().filter(|a| runs_here(a)) {
        let ws = repository();
        let start = ws.worktree();
        edit(&ws);
        let edited = ws.worktree();
        let run = bash(&ws, attack);
        assert!(
            run.stdout.contains("exit code 0") || !run.stdout.contains("exit code"),
            "{attack}: {}",
            run.show()
        );
        assert!(
            !run.stdout.contains("detect-only"),
            "{attack}: {}",
            run.show()
        );
        let attacked = ws.worktree();
        assert_ne!(attacked, edited, "{attack}: the command changed nothing");
        assert_eq!(log_len(&ws), 2, "{attack}: {}", ws.ok(&["log"]).stdout);

        ws.ok(&["undo"]);
        assert_eq!(ws.worktree(), edited, "{attack}: undo of the bash turn");
        ws.ok(&["undo"]);
        assert_eq!(ws.worktree(), start, "{attack}: undo of the edit turn");
        ws.ok(&["redo"]);
        ws.ok(&["redo"]);
        assert_eq!(ws.worktree(), attacked, "{attack}: redo of both");
    }
}

#[test]
fn run_by_the_user_each_attack_leaves_the_history_whole() {
    if git_missing() {
        return;
    }
    for attack in ATTACKS.iter().filter(|a| runs_here(a)) {
        let ws = repository();
        let start = ws.read("src/a.txt");
        edit(&ws);
        let status = Command::new("sh")
            .args(["-c", attack])
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert!(status.status.success(), "{attack}: {status:?}");
        assert_eq!(log_len(&ws), 1, "{attack}");
        // The user's command may have put the file back already (`git checkout -- .`):
        // then it changed since the turn, and the undo refuses (exit 3, nothing changed)
        // until told to go on with `--force`, as for any later change.
        let reverted = ws.read("src/a.txt") == start;
        let undo = ws.run(&["undo"]);
        if reverted {
            assert_eq!(undo.code, 3, "{attack}: {}", undo.show());
            assert!(
                undo.stderr.contains("src/a.txt"),
                "{attack}: {}",
                undo.show()
            );
            assert_eq!(log_len(&ws), 1, "{attack}: the refusal changed nothing");
            let undo = ws.run(&["undo", "--force"]);
            assert_eq!(undo.code, 0, "{attack}: {}", undo.show());
        } else {
            assert_eq!(undo.code, 0, "{attack}: {}", undo.show());
        }
        assert_eq!(ws.read("src/a.txt"), start, "{attack}");
        assert_eq!(log_len(&ws), 0, "{attack}");
    }
}

/// Moving between worktrees of one repository: each worktree is a workspace with its own
/// history, and neither touches the other's.
#[test]
fn each_worktree_keeps_its_own_history() {
    if git_missing() {
        return;
    }
    let ws = repository();
    edit(&ws);
    let other = tempfile::tempdir().unwrap();
    let wt = other.path().join("wt");
    git(ws.path(), &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let in_wt = |args: &[&str]| {
        let mut command = ws.command_in(&support::shiro_bin(), &wt, args);
        command.stdin(std::process::Stdio::null()).output().unwrap()
    };
    let args = serde_json::json!({"path": "src/a.txt", "content": "three\n"}).to_string();
    let out = in_wt(&["tool", "write_file", "--args", &args]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wt.join("src/a.txt")).unwrap(),
        "three\n"
    );

    assert_eq!(log_len(&ws), 1);
    ws.ok(&["undo"]);
    assert_eq!(ws.read("src/a.txt"), "one\n");
    assert_eq!(
        std::fs::read_to_string(wt.join("src/a.txt")).unwrap(),
        "three\n"
    );
    let out = in_wt(&["undo"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(wt.join("src/a.txt")).unwrap(),
        "one\n"
    );
}

/// Inside bash, the tree walkers see the workspace as they do natively: nothing of shiro's
/// store or of the command's own layer; `find -delete` deletes; and shiro's state directory
/// is empty and cannot be written.
#[test]
fn inside_bash_the_walkers_see_the_workspace_as_natively() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    ws.write("n1.txt", "needle\n");
    ws.write("d/x", "x\n");
    ws.write(".shiro/commands.md", "## hi\nsay hi\n");
    edit_plain(&ws);
    let walk =
        "find . | sort; echo --; grep -rl needle . | sort; echo --; du -a . | cut -f2 | sort";
    let native = Command::new("sh")
        .args(["-c", walk])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let native = String::from_utf8(native.stdout).unwrap();
    let inside = bash(&ws, walk);
    assert!(
        inside.stdout.starts_with(&native),
        "inside bash:\n{}\nnatively:\n{native}",
        inside.stdout
    );
    assert!(!inside.stdout.contains("/up/"), "{}", inside.stdout);

    let state = ws.state();
    let home = state.home().to_str().unwrap().to_owned();
    let probe = format!(
        "ls -A {home} | wc -l; touch {home}/x 2>/dev/null && echo wrote || echo refused; \
         rm -rf {undo} 2>/dev/null; ls {undo} >/dev/null 2>&1 && echo seen || echo unseen",
        undo = state.undo_dir().display()
    );
    let run = bash(&ws, &probe);
    assert!(
        run.stdout.starts_with("0\nrefused\nunseen\n"),
        "{}",
        run.show()
    );
    assert!(
        state.undo_dir().join("log.jsonl").is_file(),
        "the store is whole"
    );
    assert_eq!(log_len(&ws), 1);

    // `find -delete` deletes, as natively, and stays deleted.
    let run = bash(
        &ws,
        "find . -name n1.txt -delete; test -e n1.txt && echo STILL || echo GONE",
    );
    assert!(run.stdout.starts_with("GONE\n"), "{}", run.show());
    assert!(!ws.exists("n1.txt"));
    ws.ok(&["undo"]);
    assert_eq!(ws.read("n1.txt"), "needle\n");
}

/// A recorded turn outside git: one file written by the tools.
fn edit_plain(ws: &Ws) {
    let args = serde_json::json!({"path": "d/x", "content": "y\n"}).to_string();
    ws.ok(&["tool", "write_file", "--args", &args]);
}

/// Deleting the store on purpose: shiro says the history is gone and starts a new one.
#[test]
fn a_deleted_store_is_named_and_a_new_history_begins() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let args = serde_json::json!({"path": "a.txt", "content": "two\n"}).to_string();
    ws.ok(&["tool", "write_file", "--args", &args]);
    std::fs::remove_dir_all(ws.store()).unwrap();
    let log = ws.run(&["log"]);
    assert_eq!(log.code, 0, "{}", log.show());
    insta::assert_snapshot!(log.show(), @r"
    exit 0
    --- stdout
    no turns to undo
    --- stderr
    shiro: the undo history in <state>/undo was deleted, so earlier turns can no longer be undone; a new history begins with the next turn
    ");
    // Once said, the new history is simply there.
    let again = ws.run(&["log"]);
    assert_eq!(again.stderr, "", "{}", again.show());
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &args.replace("two", "three"),
    ]);
    ws.ok(&["undo"]);
    assert_eq!(ws.read("a.txt"), "two\n");
}
