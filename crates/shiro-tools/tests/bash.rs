//! The bash tool: outputs and errors as reviewed snapshots, and that no process it started
//! outlives a timeout, the command's end, or the cancelled turn.

// Helpers outside `#[test]` functions unwrap too: a failed setup should fail the test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use shiro_tools::{FsMutator, MemMutator, Tool, tools};
use tempfile::TempDir;

async fn run_in(dir: &Path, args: Value) -> String {
    let m = FsMutator::new(dir).unwrap();
    let text = match tools::bash().call(&m, args).await {
        Ok(output) => {
            assert!(
                output.changes.is_empty(),
                "bash without capture reports no changes"
            );
            output.text
        }
        Err(err) => format!("error: {err}"),
    };
    let canonical = dir.canonicalize().unwrap();
    text.replace(&canonical.display().to_string(), "[ROOT]")
}

async fn run(args: Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    run_in(dir.path(), args).await
}

/// Whether the process is gone (or a zombie waiting for its reaper, which is as dead).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (generously) for a killed process to die: SIGKILL is delivered asynchronously.
async fn assert_dies(pid: u32) {
    for _ in 0..200 {
        if is_dead(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} is still alive");
}

/// The pid a command wrote into `file`, once it has been written.
async fn read_pid(file: &Path) -> u32 {
    for _ in 0..400 {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no pid in {}", file.display());
}

#[tokio::test]
async fn reports_output_and_exit_code() {
    insta::assert_snapshot!(
        run(json!({"command": "echo out; echo err >&2; echo out again"})).await
    );
    insta::assert_snapshot!(run(json!({"command": "echo failing >&2; exit 3"})).await);
    insta::assert_snapshot!(run(json!({"command": "true"})).await);
    insta::assert_snapshot!(run(json!({"command": "printf 'no newline'"})).await);
    insta::assert_snapshot!(run(json!({"command": "kill -TERM $$"})).await);
}

#[tokio::test]
async fn runs_in_the_workspace_root_with_bash_and_empty_stdin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("here.txt"), "present\n").unwrap();
    let out = run_in(
        dir.path(),
        json!({"command": "pwd; cat here.txt; echo \"${BASH_VERSION:+bash}\"; cat; echo stdin done"}),
    )
    .await;
    insta::assert_snapshot!(out);
}

#[tokio::test]
async fn caps_output_keeping_head_and_tail() {
    let out = run(json!({"command": "seq 1 30000"})).await;
    assert!(
        out.len() < shiro_tools::tools::BASH_MAX_OUTPUT_BYTES + 300,
        "{} bytes",
        out.len()
    );
    assert!(out.starts_with("1\n2\n3\n"), "{}", &out[..20]);
    let note: Vec<&str> = out.lines().filter(|line| line.starts_with("[…")).collect();
    let lines: Vec<&str> = out.lines().collect();
    let end = &lines[lines.len() - 3..];
    insta::assert_snapshot!(format!("{}\n---\n{}", note.join("\n"), end.join("\n")));
    // Every line shown is whole: the head ends and the tail starts on a line break.
    let numbers: Vec<u32> = out.lines().filter_map(|l| l.parse().ok()).collect();
    let gap = numbers.windows(2).filter(|w| w[1] != w[0] + 1).count();
    assert_eq!(gap, 1, "one gap where the middle was left out");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        json!({"command": "echo started; sleep 30 & echo $! > bg.pid; sleep 30", "timeout_secs": 1}),
    )
    .await;
    insta::assert_snapshot!(out);
    assert_dies(read_pid(&dir.path().join("bg.pid")).await).await;
}

#[tokio::test]
async fn background_processes_do_not_outlive_the_command() {
    let dir = tempfile::tempdir().unwrap();
    // The background sleep holds the output pipe open; the call must still return.
    let out = run_in(
        dir.path(),
        json!({"command": "sleep 30 & echo $! > bg.pid; echo done"}),
    )
    .await;
    insta::assert_snapshot!(out);
    assert_dies(read_pid(&dir.path().join("bg.pid")).await).await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let m = FsMutator::new(dir.path()).unwrap();
    let bash = tools::bash();
    let pid_file = dir.path().join("bg.pid");
    let call = bash.call(&m, json!({"command": "sleep 30 & echo $! > bg.pid; wait"}));
    // Drive the call until the grandchild exists, then drop it, as Ctrl-C drops a turn.
    let pid = tokio::select! {
        result = call => panic!("the command finished early: {result:?}"),
        pid = read_pid(&pid_file) => pid,
    };
    assert_dies(pid).await;
}

#[tokio::test]
async fn accepts_camel_case_and_refuses_bad_arguments() {
    insta::assert_snapshot!(run(json!({"command": "echo ok", "timeoutSecs": 5})).await);
    let cases = [
        json!({"command": "echo", "timeout_secs": 0}),
        json!({"command": "echo", "timeout_secs": 601}),
        json!({"command": "  "}),
        json!({"command": "echo", "cwd": "/"}),
        json!({"cmd": "echo"}),
        json!({"command": "echo", "timeout_secs": "5"}),
    ];
    let mut out = Vec::new();
    for args in cases {
        out.push(format!("{args}\n  {}", run(args.clone()).await));
    }
    insta::assert_snapshot!(out.join("\n"));
}

#[tokio::test]
async fn needs_a_workspace_on_disk() {
    let err = tools::bash()
        .call(&MemMutator::new(), json!({"command": "echo"}))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string());
}

#[tokio::test]
async fn is_approved_but_not_recorded() {
    let bash = tools::bash();
    assert_eq!(bash.name(), "bash");
    assert!(bash.is_mutating(), "bash must be approved");
    let dir: TempDir = tempfile::tempdir().unwrap();
    let m = FsMutator::new(dir.path()).unwrap();
    let touched = bash
        .touched_paths(&m, &json!({"command": "rm -rf src"}))
        .await
        .unwrap();
    assert!(
        touched.is_empty(),
        "bash's effects are not known before it runs"
    );
    insta::assert_json_snapshot!(
        json!({"description": bash.description(), "schema": bash.schema()})
    );
}

/// A stop that lands while the command is being started (after the call began, before the
/// runner watches) stops it: it is not taken for one from before the call. The runner here
/// sends the stop from inside the start itself, where a signal can land at any time.
#[tokio::test]
async fn a_stop_that_lands_while_the_command_starts_stops_it() {
    use async_trait::async_trait;
    use shiro_tools::Mutator;
    use shiro_tools::capture::{
        BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Ended,
    };
    use std::sync::Arc;
    use tokio::sync::watch;

    /// Runs commands directly, and asks to stop each one as it starts it.
    #[derive(Debug)]
    struct StopsAsItStarts(Arc<watch::Sender<u64>>);
    struct Starting(std::path::PathBuf, Arc<watch::Sender<u64>>);

    #[async_trait]
    impl BashRunner for StopsAsItStarts {
        fn mode(&self) -> CaptureMode {
            CaptureMode::Off
        }
        async fn begin(
            &self,
            mutator: &dyn Mutator,
        ) -> Result<Box<dyn CommandCapture>, CaptureError> {
            Ok(Box::new(Starting(
                mutator.root().to_path_buf(),
                Arc::clone(&self.0),
            )))
        }
    }

    #[async_trait]
    impl CommandCapture for Starting {
        fn command(&self, program: &str, script: &str) -> tokio::process::Command {
            self.1.send_modify(|n| *n += 1);
            let mut command = tokio::process::Command::new(program);
            command.arg("-c").arg(script).current_dir(&self.0);
            command
        }
        async fn finish(
            self: Box<Self>,
            _mutator: &dyn Mutator,
            _ended: Ended,
        ) -> Result<Captured, CaptureError> {
            Ok(Captured::default())
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(watch::Sender::new(0));
    let bash =
        tools::Bash::new(Arc::new(StopsAsItStarts(Arc::clone(&stop)))).with_stop(stop.subscribe());
    let m = FsMutator::new(dir.path()).unwrap();
    // Forgotten, the stop would leave the command to its timeout, and the result would say so.
    let output = bash
        .call(&m, json!({"command": "sleep 600", "timeout_secs": 30}))
        .await
        .unwrap();
    assert!(
        output.text.contains("[stopped by the user"),
        "{}",
        output.text
    );
}

/// A runner that runs commands directly, after doing what `readying` does where a capture is
/// readied (the overlay's layer, the git repository's state); it counts the captures it
/// finished.
mod readying {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use shiro_tools::Mutator;
    use shiro_tools::capture::{
        BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Ended,
    };

    pub struct Readying {
        pub readying: Box<dyn Fn() + Send + Sync>,
        pub finished: Arc<AtomicUsize>,
    }

    impl std::fmt::Debug for Readying {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Readying")
        }
    }

    struct Direct(PathBuf, Arc<AtomicUsize>);

    #[async_trait]
    impl BashRunner for Readying {
        fn mode(&self) -> CaptureMode {
            CaptureMode::Off
        }
        async fn begin(
            &self,
            mutator: &dyn Mutator,
        ) -> Result<Box<dyn CommandCapture>, CaptureError> {
            (self.readying)();
            Ok(Box::new(Direct(
                mutator.root().to_path_buf(),
                Arc::clone(&self.finished),
            )))
        }
    }

    #[async_trait]
    impl CommandCapture for Direct {
        fn command(&self, program: &str, script: &str) -> tokio::process::Command {
            let mut command = tokio::process::Command::new(program);
            command.arg("-c").arg(script).current_dir(&self.0);
            command
        }
        async fn finish(
            self: Box<Self>,
            _mutator: &dyn Mutator,
            _ended: Ended,
        ) -> Result<Captured, CaptureError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Ok(Captured::default())
        }
    }
}

/// A stop that lands after the call began, while its capture is readied (before the command
/// starts), is not forgotten, though its sender is gone since (the MCP server's stop of one
/// call ends with its cancellation): the command never starts, the call is refused as one
/// that ran nothing, and the capture readied is put away.
#[tokio::test]
async fn a_stop_that_lands_while_the_capture_is_readied_runs_nothing() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio::sync::watch;

    let dir = tempfile::tempdir().unwrap();
    let (stop, stopped) = watch::channel(0u64);
    let stop = Mutex::new(Some(stop));
    let finished = Arc::new(AtomicUsize::new(0));
    let runner = readying::Readying {
        readying: Box::new(move || {
            if let Some(stop) = stop.lock().unwrap().take() {
                stop.send_modify(|n| *n += 1);
            }
        }),
        finished: Arc::clone(&finished),
    };
    let bash = tools::Bash::new(Arc::new(runner)).with_stop(stopped);
    let m = FsMutator::new(dir.path()).unwrap();
    let err = bash
        .call(&m, json!({"command": "touch ran"}))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"stopped before the command started; nothing was run");
    assert!(!dir.path().join("ran").exists());
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}

/// A stop from before the call (a Ctrl-C that ended an earlier turn) does not count: the
/// command runs.
#[tokio::test]
async fn a_stop_from_before_the_call_does_not_count() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::watch;

    let dir = tempfile::tempdir().unwrap();
    let stop = watch::Sender::new(0u64);
    let runner = readying::Readying {
        readying: Box::new(|| {}),
        finished: Arc::new(AtomicUsize::new(0)),
    };
    let bash = tools::Bash::new(Arc::new(runner)).with_stop(stop.subscribe());
    stop.send_modify(|n| *n += 1);
    let m = FsMutator::new(dir.path()).unwrap();
    let output = bash
        .call(&m, json!({"command": "touch ran"}))
        .await
        .unwrap();
    assert!(output.text.ends_with("[exit code 0]"), "{}", output.text);
    assert!(dir.path().join("ran").exists());
}

/// A runner that cannot set its overlay up falls back to detection once, says why in the
/// first result, and runs the command exactly once.
#[tokio::test]
async fn auto_falls_back_to_detection_once_and_says_why() {
    use shiro_tools::capture::{Auto, CaptureMode, Detect, Overlay};
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let helpers = tempfile::tempdir().unwrap();
    // A helper that refuses as a kernel without overlays would: it names why in the layer
    // (its third argument) and exits 125, running nothing.
    let refusing = helpers.path().join("refusing-helper");
    std::fs::write(
        &refusing,
        "#!/bin/sh\necho 'overlays are off in this test' > \"$3/setup-error\"\nexit 125\n",
    )
    .unwrap();
    std::fs::set_permissions(&refusing, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (helper, why) in [
        (refusing, "overlays are off in this test".to_owned()),
        (
            helpers.path().join("missing"),
            format!(
                "the overlay helper {} is missing",
                helpers.path().join("missing").display()
            ),
        ),
    ] {
        let runner = Arc::new(Auto::new(
            Overlay::new(&helper, helpers.path().join("layers")),
            Detect,
        ));
        let bash = tools::Bash::new(runner.clone());
        let m = FsMutator::new(dir.path()).unwrap();
        let first = bash
            .call(&m, json!({"command": "echo x >> runs.txt"}))
            .await
            .unwrap();
        assert_eq!(first.capture, Some(CaptureMode::Detect));
        assert!(
            first.text.contains(&format!(
                "[note: bash capture fell back to detect-only: {why}"
            )),
            "{}",
            first.text
        );
        assert_eq!(
            first
                .unrestorable
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["runs.txt"]
        );
        assert_eq!(runner.fallback_reason().as_deref(), Some(why.as_str()));
        let second = bash
            .call(&m, json!({"command": "echo x >> runs.txt"}))
            .await
            .unwrap();
        assert!(
            !second.text.contains("fell back"),
            "told once: {}",
            second.text
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("runs.txt")).unwrap(),
            "x\nx\n",
            "each command ran exactly once"
        );
        std::fs::remove_file(dir.path().join("runs.txt")).unwrap();
    }
}

/// What the model is told about undo depends on how commands are captured.
#[test]
fn the_description_says_how_commands_are_captured() {
    use shiro_tools::capture::{BashRunner, Detect, Direct, Overlay};
    use std::sync::Arc;

    let runners: [Arc<dyn BashRunner>; 3] = [
        Arc::new(Overlay::new("shiro", "/state/bash")),
        Arc::new(Detect),
        Arc::new(Direct),
    ];
    let described: Vec<String> = runners
        .into_iter()
        .map(|runner| {
            let mode = runner.mode();
            format!("{mode}: {}", tools::Bash::new(runner).description())
        })
        .collect();
    insta::assert_snapshot!(described.join("\n\n"));
}

/// With background commands, `bash` tells the model how to run one, and `bash_output` and
/// `bash_kill` come with it: what a model reads of each.
#[test]
fn the_background_tools_describe_themselves() {
    use shiro_tools::capture::{Background, Launch, Overlay};
    use std::sync::Arc;

    let background = Arc::new(Background::new(Launch::Direct, 4));
    let bash = tools::Bash::new(Arc::new(Overlay::new("shiro", "/state/bash")))
        .with_background(background);
    let described: Vec<serde_json::Value> = tools::all_with(bash)
        .iter()
        .filter(|tool| tool.name().starts_with("bash"))
        .map(|tool| {
            json!({"name": tool.name(), "description": tool.description(), "schema": tool.schema()})
        })
        .collect();
    insta::assert_json_snapshot!(described);
}
