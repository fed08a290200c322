//! The real `ShRunner` and `FsReader` against a temporary workspace.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use shiro_commands::{
    FileOutcome, FileReader, FsReader, ShRunner, ShellCall, ShellOutcome, ShellRunner,
};

/// A call of `command` with no arguments.
fn call(command: &str) -> ShellCall<'_> {
    ShellCall {
        command,
        args: &[],
        arguments: "",
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn sh_runs_in_the_workspace_root_with_stdin_closed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let runner = ShRunner::new(&root);
    let out = block_on(runner.run(&call("pwd; cat; echo done")));
    assert_eq!(
        out,
        ShellOutcome::Success {
            stdout: format!("{}\ndone\n", root.display()),
            truncated: false
        }
    );
}

#[test]
fn sh_reports_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = block_on(ShRunner::new(dir.path()).run(&call("echo partial; exit 3")));
    assert_eq!(out, ShellOutcome::Failed { code: Some(3) });
}

#[test]
fn sh_caps_stdout_and_still_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let runner = ShRunner::new(dir.path()).with_stdout_cap(1000);
    let out = block_on(runner.run(&call("head -c 300000 /dev/zero | tr '\\0' x")));
    let ShellOutcome::Success { stdout, truncated } = out else {
        panic!("unexpected {out:?}");
    };
    assert!(truncated);
    assert_eq!(stdout, "x".repeat(1000));
}

/// Whether a process is gone (or a zombie nobody has reaped yet, which is dead too).
fn is_dead(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A substitution whose future is dropped (its expansion cancelled) leaves nothing running:
/// not the shell, nor what it started in the background.
#[test]
fn dropping_a_running_substitution_kills_its_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let runner = ShRunner::new(dir.path()).with_timeout(Duration::from_secs(60));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sleeper = call("sleep 30 & echo $! > bg.pid; sleep 30");
        let run = runner.run(&sleeper);
        // Dropped once the background child has said who it is.
        let written = async {
            while std::fs::read_to_string(&pid_file).map_or(true, |p| p.trim().is_empty()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = run => panic!("the substitution ended on its own"),
            () = written => {}
        }
    });
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let pid = pid.trim();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !is_dead(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        is_dead(pid),
        "background child {pid} outlived the dropped substitution"
    );
}

#[test]
fn sh_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let runner = ShRunner::new(dir.path()).with_timeout(Duration::from_millis(500));
    let start = Instant::now();
    let out = block_on(runner.run(&call("sleep 30 & echo $! > bg.pid; sleep 30")));
    assert_eq!(
        out,
        ShellOutcome::TimedOut {
            after: Duration::from_millis(500)
        }
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let pid = pid.trim();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !is_dead(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(is_dead(pid), "background child {pid} survived the timeout");
}

#[test]
fn fs_reader_reads_and_refuses() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "SECRET").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(root.join("bin.dat"), b"abc\0def").unwrap();
    std::fs::write(root.join("big.txt"), "é".repeat(100)).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("src/a.rs"), root.join("inside-link.rs")).unwrap();
    // A named pipe would block a plain open forever.
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .is_ok_and(|status| status.success());

    let reader = FsReader::new(root).unwrap();
    let read = |p: &str| block_on(reader.read(p));
    let text = |t: &str| FileOutcome::Contents {
        text: t.to_owned(),
        truncated: false,
    };
    let refused = |p: &str| match read(p) {
        FileOutcome::Refused { reason } => reason,
        other => panic!("{p} was not refused: {other:?}"),
    };

    assert_eq!(read("src/a.rs"), text("fn a() {}\n"));
    assert_eq!(read("inside-link.rs"), text("fn a() {}\n"));
    let absolute_inside = root.canonicalize().unwrap().join("src/a.rs");
    assert_eq!(read(absolute_inside.to_str().unwrap()), text("fn a() {}\n"));
    assert_eq!(read("nope.txt"), FileOutcome::Missing);

    let secret = outside.path().join("secret.txt");
    let reasons = [
        refused("../x"),
        refused("src/../src/a.rs"),
        refused(secret.to_str().unwrap()).replace(secret.to_str().unwrap(), "<outside>/secret.txt"),
        refused("link.txt"),
        refused("bin.dat"),
        if fifo {
            refused("pipe")
        } else {
            "pipe is not a regular file".to_owned()
        },
    ];
    insta::assert_debug_snapshot!(reasons, @r#"
    [
        "../x uses `..`",
        "src/../src/a.rs uses `..`",
        "<outside>/secret.txt is outside the workspace",
        "link.txt is outside the workspace",
        "bin.dat is a binary file",
        "pipe is not a regular file",
    ]
    "#);

    // A directory is listed, links to directories as directories; a path through a file
    // is missing, not an error.
    std::fs::create_dir(root.join("src/sub")).unwrap();
    assert_eq!(
        read("src"),
        FileOutcome::Directory {
            entries: vec!["a.rs".to_owned(), "sub/".to_owned()],
            more: 0
        }
    );
    assert!(block_on(reader.is_dir("src/sub")));
    assert!(!block_on(reader.is_dir("src/a.rs")));
    assert!(!block_on(reader.is_dir("../")));
    assert_eq!(read("src/a.rs/x"), FileOutcome::Missing);

    // The cut falls inside a two-byte character, which is dropped rather than mangled.
    let capped = FsReader::new(root).unwrap().with_cap(11);
    assert_eq!(
        block_on(capped.read("big.txt")),
        FileOutcome::Contents {
            text: "é".repeat(5),
            truncated: true
        }
    );
    assert_eq!(
        block_on(capped.read("src/a.rs")),
        FileOutcome::Contents {
            text: "fn a() {}\n".to_owned(),
            truncated: false
        }
    );
}

/// The typed arguments reach the shell as `$1`… and `$ARGUMENTS`, as data: nothing in them
/// runs, whatever quotes or substitutions they hold.
#[test]
fn sh_passes_arguments_as_parameters_never_as_code() {
    let dir = tempfile::tempdir().unwrap();
    let runner = ShRunner::new(dir.path());
    let args: Vec<String> = [
        "$(touch pwned1)",
        "`touch pwned2`",
        "'; touch pwned3; '",
        "\"; touch pwned4; \"",
        "",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let arguments = "x $(touch pwned5) `touch pwned6`";
    let out = block_on(runner.run(&ShellCall {
        command: "printf '[%s]' \"$0\" \"$@\" \"$#\"; printf '{%s}' \"$ARGUMENTS\"; echo $ARGUMENTS",
        args: &args,
        arguments,
    }));
    let ShellOutcome::Success { stdout, .. } = out else {
        panic!("unexpected {out:?}");
    };
    insta::assert_snapshot!(stdout, @r#"
    [shiro][$(touch pwned1)][`touch pwned2`]['; touch pwned3; ']["; touch pwned4; "][][5]{x $(touch pwned5) `touch pwned6`}x $(touch pwned5) `touch pwned6`
    "#);
    let made: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(made.is_empty(), "{made:?}");
}

/// The real shell, with arguments full of shell syntax: what it prints is exactly what was
/// typed (it got the text as data, in either format), and nothing it was told ran.
#[test]
fn typed_text_reaches_the_real_shell_only_as_data() {
    use proptest::prelude::*;
    use shiro_commands::{Args, Command, Ecosystem, ExpandContext, Origin, expand};

    let dir = tempfile::tempdir().unwrap();
    let shell = ShRunner::new(dir.path());
    let files = FsReader::new(dir.path()).unwrap();
    let ctx = ExpandContext {
        shell: &shell,
        files: &files,
        workspace_trusted: true,
    };
    let markdown = Command::new(
        "t",
        "md[!`printf '%s' \"$ARGUMENTS\"`] first[!`printf '%s' \"$1\"`] [!`printf '%s' $ARGUMENTS[0]`]",
        Origin::Project,
        Ecosystem::Claude,
    );
    let gemini = Command::new(
        "t",
        "gem[!{printf '%s' {{args}}}] q[!{printf '%s' \"{{args}}\"}] s[!{printf '%s' '{{args}}'}]",
        Origin::Project,
        Ecosystem::Gemini,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest::test_runner::TestRunner::new(config)
        .run(
            &proptest::collection::vec("[a-z$`'\"();|&<>*?{}!@ \\\\]{1,12}", 1..4),
            |argv| {
                let args = Args::from_argv(&argv);
                let raw = args.raw().trim();
                let first = argv[0].trim();
                let got = runtime.block_on(expand(&markdown, &args, &ctx));
                prop_assert_eq!(got, format!("md[{raw}] first[{first}] [{first}]"));
                let got = runtime.block_on(expand(&gemini, &args, &ctx));
                prop_assert_eq!(got, format!("gem[{raw}] q[{raw}] s[{raw}]"));
                Ok(())
            },
        )
        .unwrap();
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}
