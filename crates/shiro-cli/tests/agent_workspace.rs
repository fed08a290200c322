//! Where shiro works: the git repository's root, never a workspace that holds shiro's own
//! state directory, and a workspace whose state cannot be kept, where questions still work.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use crate::agent_common;

use std::os::unix::fs::PermissionsExt as _;

use agent_common::{World, run_command};
use serde_json::json;

fn write_args(path: &str) -> String {
    json!({"path": path, "content": "x\n"}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_a_git_repository_the_workspace_is_its_root_unless_c_says_otherwise() {
    let world = World::new();
    std::fs::create_dir(world.ws.path().join(".git")).unwrap();
    let deep = world.ws.path().join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();

    let mut command = world.command(&["tool", "write_file", "--args", &write_args("x.txt")], &[]);
    command.current_dir(&deep);
    let run = run_command(command, "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        world.read("x.txt").as_deref(),
        Some("x\n"),
        "written at the root"
    );
    assert!(world.state().undo_dir().is_dir());
    assert!(
        !world.ws.path().join(".shiro").exists() && !deep.join(".shiro").exists(),
        "no state in the tree"
    );

    // `shiro log` from the subdirectory sees the root's turn.
    let mut command = world.command(&["log"], &[]);
    command.current_dir(&deep);
    let log = run_command(command, "").await;
    assert!(log.stdout.contains("shiro tool write_file"), "{log:?}");

    // `-C .` is the current directory, exactly.
    let mut command = world.command(
        &[
            "-C",
            ".",
            "tool",
            "write_file",
            "--args",
            &write_args("y.txt"),
        ],
        &[],
    );
    command.current_dir(&deep);
    let run = run_command(command, "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(deep.join("y.txt").is_file());
    assert!(
        world
            .state_of(&deep.canonicalize().unwrap())
            .undo_dir()
            .is_dir()
    );
    assert_eq!(world.read("y.txt"), None);
}

/// The home directory as the workspace holds shiro's state directory
/// (`~/.local/state/shiro`), where the agent's tools and commands could reach it: every run
/// is refused (exit 2, nothing created) with the way out, and `SHIRO_STATE_DIR` elsewhere is
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_that_holds_the_state_directory_is_refused_with_the_way_out() {
    let world = World::new();
    world.write("a.txt", "hello\n");
    let home = world.root().display().to_string();
    let env = [("HOME", home.as_str())];
    let model = world.replay(&json!({"responses": [{"text": "Hi."}]}));

    let mut refusals = String::new();
    for (args, stdin) in [
        (vec!["-p", "hello", "--model", &model], ""),
        (vec!["--model", &model], "hello\n"),
        (
            vec!["tool", "write_file", "--args", &write_args("b.txt")],
            "",
        ),
        (vec!["apply-patch"], "*** Begin Patch\n*** End Patch\n"),
        (vec!["log"], ""),
        (vec!["-C", &home, "undo"], ""),
    ] {
        let run = world.run(&args, stdin, &env).await;
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        refusals.push_str(&world.normalize(&run.stderr));
    }
    let lines: Vec<&str> = refusals.lines().collect();
    assert!(lines.iter().all(|l| *l == lines[0]), "{refusals}");
    insta::assert_snapshot!(lines[0], @"shiro: the workspace [WS] holds shiro's state directory [WS]/.local/state/shiro, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory outside this one");
    assert!(
        !world.ws.path().join(".local").exists(),
        "nothing was created"
    );
    assert_eq!(world.read("b.txt"), None);

    // When the home directory is a repository (dotfiles), the message says why it is the
    // workspace.
    std::fs::create_dir(world.ws.path().join(".git")).unwrap();
    std::fs::create_dir(world.ws.path().join("notes")).unwrap();
    let mut command = world.command(&["-p", "hello", "--model", &model], &env);
    command.current_dir(world.ws.path().join("notes"));
    let run = run_command(command, "").await;
    assert_eq!(run.code, Some(2), "{run:?}");
    let stderr = world.normalize(&run.stderr);
    assert!(
        stderr.contains("the workspace [WS] (the root of the git repository you are in) holds"),
        "{stderr}"
    );

    // A state directory outside it is the way out.
    let elsewhere = tempfile::tempdir().unwrap();
    let state = elsewhere.path().display().to_string();
    let env = [("HOME", home.as_str()), ("SHIRO_STATE_DIR", state.as_str())];
    let run = world
        .run(&["-p", "hello", "--model", &model], "", &env)
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Hi.\n");
    assert!(elsewhere.path().join("workspaces").is_dir());
    assert!(!world.ws.path().join(".local").exists());
}

/// A script for the read-only workspace: a question answered with read_file, then a change
/// the model tries.
fn read_then_write_script() -> serde_json::Value {
    json!({"responses": [
        {"text": "Reading.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "It says hello."},
        {"text": "Writing.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}},
            {"name": "bash", "arguments": {"command": "touch c.txt"}}]},
        {"text": "I could not change anything."}
    ]})
}

/// In a read-only directory (mode 0555) whose state directory cannot be made either (the
/// user's home is not theirs to write), questions still work, changes
/// and bash are refused with a text for the model, the state is reported once, and `/log`
/// and `shiro log` say there is no history. Root ignores the mode, so as root the test runs
/// shiro as `nobody`; where that is not possible it says why and stops (the same logic is
/// tested with an injected failure in `agent::turn`'s unit tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_read_only_directory_questions_work_and_changes_are_refused() {
    let world = World::new();
    world.write("a.txt", "hello\n");
    let model = world.replay(&read_then_write_script());
    // `nobody` must reach the binary, the script and the config directory.
    std::fs::set_permissions(world.cfg.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(world.ws.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let as_nobody = |mut command: tokio::process::Command| {
        if is_root() {
            command.uid(65534).gid(65534);
        }
        command
    };
    let probe = as_nobody(world.command(&["log"], &[]));
    let Some(log) = as_nobody_runs(probe).await else {
        std::fs::set_permissions(world.ws.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        eprintln!("skipped: running as root, and shiro cannot be started as nobody here");
        return;
    };
    assert_eq!(
        (log.code, log.stdout.as_str()),
        (Some(0), "no turns to undo\n"),
        "{log:?}"
    );

    let command = as_nobody(world.command(&["--model", &model, "--yes"], &[]));
    let stdin = "what does a.txt say?\nnow change things\n/log\n/undo\n";
    let run = run_command(command, stdin).await;
    std::fs::set_permissions(world.ws.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(run.code, Some(0), "{run:?}");
    let out = world.normalize(&run.stdout);
    insta::assert_snapshot!("read_only_session", out);
    assert_eq!(
        out.matches("cannot be saved").count(),
        1,
        "the state is reported once: {out}"
    );
    assert!(!world.ws.path().join(".shiro").exists());
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(world.read("c.txt"), None, "bash did not run");
}

/// `shiro -p --yes` there: a turn whose changes were all refused exits 1 and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_read_only_directory_a_headless_change_exits_1() {
    let world = World::new();
    world.write("a.txt", "hello\n");
    let model = world.replay(&json!({"responses": [
        {"text": "Writing.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}]},
        {"text": "I could not write b.txt."}
    ]}));
    std::fs::set_permissions(world.cfg.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(world.ws.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut command = world.command(&["-p", "write b.txt", "--yes", "--model", &model], &[]);
    if is_root() {
        command.uid(65534).gid(65534);
    }
    let run = as_nobody_runs(command).await;
    std::fs::set_permissions(world.ws.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let Some(run) = run else {
        eprintln!("skipped: running as root, and shiro cannot be started as nobody here");
        return;
    };
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!("read_only_headless_stderr", world.normalize(&run.stderr));
    assert_eq!(world.read("b.txt"), None);
}

fn is_root() -> bool {
    // The owner of a file this process creates is its effective user.
    let probe = tempfile::NamedTempFile::new().unwrap();
    std::os::unix::fs::MetadataExt::uid(&probe.as_file().metadata().unwrap()) == 0
}

/// Runs `command`, or `None` when it cannot be started (switching to `nobody` refused).
async fn as_nobody_runs(mut command: tokio::process::Command) -> Option<agent_common::Run> {
    command.stdin(std::process::Stdio::null());
    let child = command.spawn().ok()?;
    Some(agent_common::finish(child).await)
}
