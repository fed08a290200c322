//! Where shiro works: the git repository's root, never `.shiro/` in the home directory
//! unasked, and a read-only workspace where questions still work.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod agent_common;

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

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
    assert!(world.ws.path().join(".shiro/undo").is_dir());
    assert!(
        !deep.join(".shiro").exists(),
        "no state in the current directory"
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
    assert!(deep.join(".shiro/undo").is_dir());
    assert_eq!(world.read("y.txt"), None);
}

/// The home directory as the workspace: everything that would make `.shiro/` there without
/// a terminal to ask on is refused (exit 2, nothing created); what only reads works; `-C`
/// overrides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_home_directory_headless_runs_refuse_and_create_nothing() {
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
    ] {
        let run = world.run(&args, stdin, &env).await;
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        refusals.push_str(&world.normalize(&run.stderr));
    }
    let lines: Vec<&str> = refusals.lines().collect();
    assert!(lines.iter().all(|l| *l == lines[0]), "{refusals}");
    insta::assert_snapshot!(lines[0], @"shiro: will not create .shiro/ (shiro's undo log and sessions) in your home directory [WS] without asking, and there is no terminal to ask on; run shiro in a project directory, or pass -C DIR to choose the workspace (`-C [WS]` uses this one)");

    // What creates nothing still runs.
    let log = world.run(&["log"], "", &env).await;
    assert_eq!(
        (log.code, log.stdout.as_str()),
        (Some(0), "no turns to undo\n")
    );
    let undo = world.run(&["undo"], "", &env).await;
    assert_eq!(undo.code, Some(1), "{undo:?}");
    assert_eq!(undo.stderr, "shiro: nothing to undo in this workspace\n");
    let read = world
        .run(
            &["tool", "read_file", "--args", r#"{"path": "a.txt"}"#],
            "",
            &env,
        )
        .await;
    assert_eq!(read.code, Some(0), "{read:?}");
    let list = world.run(&["commands", "list"], "", &env).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    assert!(
        !world.ws.path().join(".shiro").exists(),
        "nothing was created"
    );
    assert_eq!(world.read("b.txt"), None);

    // Below the home directory, when it is a repository (dotfiles), the same, and the
    // message says why the home directory is the workspace.
    std::fs::create_dir(world.ws.path().join(".git")).unwrap();
    std::fs::create_dir(world.ws.path().join("notes")).unwrap();
    let mut command = world.command(&["-p", "hello", "--model", &model], &env);
    command.current_dir(world.ws.path().join("notes"));
    let run = run_command(command, "").await;
    assert_eq!(run.code, Some(2), "{run:?}");
    let stderr = world.normalize(&run.stderr);
    assert!(
        stderr.contains("your home directory [WS] (the root of the git repository you are in)"),
        "{stderr}"
    );
    assert!(!world.ws.path().join(".shiro").exists());

    // `-C` names it on purpose.
    let run = world
        .run(&["-C", &home, "-p", "hello", "--model", &model], "", &env)
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Hi.\n");
    assert!(world.ws.path().join(".shiro/sessions").is_dir());
}

/// A finished run under a pseudo-terminal: exit code and everything it showed.
struct PtyRun {
    code: u32,
    screen: String,
}

/// Runs `shiro ARGS` on a pseudo-terminal in `cwd`, answering each prompt that shows
/// `waits_for[i]` with `answers[i]`.
fn run_on_terminal(
    world: &World,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    script: &[(&str, &str)],
) -> PtyRun {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 300,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_shiro"));
    command.args(args);
    command.cwd(cwd);
    command.env("SHIRO_CONFIG_DIR", world.cfg.path());
    command.env("HOME", world.cfg.path());
    command.env("NO_COLOR", "1");
    // Line mode: these tests are about the question before any UI starts.
    command.env("TERM", "dumb");
    for name in [
        "SHIRO_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "XDG_CONFIG_HOME",
    ] {
        command.env_remove(name);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = pair.slave.spawn_command(command).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let mut writer = pair.master.take_writer().unwrap();
    let (sender, received) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        // Ends with an error (EIO) once the child has gone and the terminal is closed.
        while let Ok(n) = reader.read(&mut buffer) {
            if n == 0 || sender.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pull = |screen: &mut String| {
        while let Ok(bytes) = received.recv_timeout(Duration::from_millis(50)) {
            screen.push_str(&String::from_utf8_lossy(&bytes));
        }
    };
    for (waits_for, answer) in script {
        while !screen.contains(waits_for) {
            assert!(Instant::now() < deadline, "no {waits_for:?} in {screen:?}");
            pull(&mut screen);
        }
        writer.write_all(answer.as_bytes()).unwrap();
        writer.flush().unwrap();
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "shiro did not exit: {screen:?}");
        pull(&mut screen);
    };
    pull(&mut screen);
    PtyRun {
        code: status.exit_code(),
        screen: world.normalize(&screen.replace("\r\n", "\n")),
    }
}

/// On a terminal the interactive agent asks once: no leaves with the way out and creates
/// nothing; yes makes `.shiro/` and starts the session.
#[test]
fn in_the_home_directory_a_terminal_session_asks_first() {
    let world = World::new();
    let home = world.root().display().to_string();
    let env = [("HOME", home.as_str())];
    let no = run_on_terminal(&world, world.ws.path(), &[], &env, &[("[y/N]", "n\r")]);
    assert_eq!(no.code, 1, "{}", no.screen);
    insta::assert_snapshot!(no.screen, @r"
    the workspace is your home directory [WS]; shiro keeps its undo log and sessions in .shiro/ there. Create it in [WS]? [y/N] n
    shiro: did not create .shiro/ in your home directory [WS]; run shiro in a project directory, or pass -C DIR to choose the workspace (`-C [WS]` uses this one)
    ");
    assert!(!world.ws.path().join(".shiro").exists());

    let yes = run_on_terminal(
        &world,
        world.ws.path(),
        &[],
        &env,
        &[("[y/N]", "y\r"), ("> ", "/exit\r")],
    );
    assert_eq!(yes.code, 0, "{}", yes.screen);
    assert!(
        yes.screen.contains("session [SESSION] (new)"),
        "{}",
        yes.screen
    );
    assert!(world.ws.path().join(".shiro/sessions").is_dir());

    // Now that it has `.shiro/`, nothing is asked.
    let again = run_on_terminal(&world, world.ws.path(), &[], &env, &[("> ", "/exit\r")]);
    assert_eq!(again.code, 0, "{}", again.screen);
    assert!(!again.screen.contains("[y/N]"), "{}", again.screen);
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

/// In a directory where `.shiro/` cannot be made (mode 0555), questions still work, changes
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
