//! Expansion with fake shell runners and file readers: each substitution, the order, the
//! failure notes, quoting, trust and injection attempts.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use shiro_commands::{
    Command, ExpandContext, FileOutcome, FileReader, Origin, ShellOutcome, ShellRunner, expand,
    split_args,
};

/// Answers from a table; unknown commands succeed with `out(<cmd>)` plus a newline.
#[derive(Default)]
struct FakeShell {
    answers: HashMap<String, ShellOutcome>,
    calls: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl ShellRunner for FakeShell {
    async fn run(&self, command: &str) -> ShellOutcome {
        self.calls.lock().unwrap().push(command.to_owned());
        self.answers
            .get(command)
            .cloned()
            .unwrap_or_else(|| ShellOutcome::Success {
                stdout: format!("  out({command})\n\n"),
                truncated: false,
            })
    }
}

/// Answers from a table; unknown paths are missing.
#[derive(Default)]
struct FakeFiles {
    files: HashMap<String, FileOutcome>,
    calls: Mutex<Vec<String>>,
}

impl FakeFiles {
    fn with(mut self, path: &str, text: &str) -> FakeFiles {
        self.files.insert(
            path.to_owned(),
            FileOutcome::Contents {
                text: text.to_owned(),
                truncated: false,
            },
        );
        self
    }
}

#[async_trait::async_trait]
impl FileReader for FakeFiles {
    async fn read(&self, path: &str) -> FileOutcome {
        self.calls.lock().unwrap().push(path.to_owned());
        self.files
            .get(path)
            .cloned()
            .unwrap_or(FileOutcome::Missing)
    }
}

fn command(body: &str, origin: Origin) -> Command {
    Command {
        name: "t".to_owned(),
        description: None,
        argument_hint: None,
        body: body.to_owned(),
        origin,
        file: PathBuf::from("commands.md"),
        line: 1,
    }
}

fn run(body: &str, args: &str, shell: &FakeShell, files: &FakeFiles) -> String {
    run_as(body, args, shell, files, Origin::Project, true)
}

fn run_as(
    body: &str,
    args: &str,
    shell: &FakeShell,
    files: &FakeFiles,
    origin: Origin,
    workspace_trusted: bool,
) -> String {
    let ctx = ExpandContext {
        shell,
        files,
        workspace_trusted,
    };
    let cmd = command(body, origin);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(expand(&cmd, args, &ctx))
}

/// Expands with default fakes (every command succeeds, no files).
fn check(body: &str, args: &str) -> String {
    run(body, args, &FakeShell::default(), &FakeFiles::default())
}

#[test]
fn shell_success_is_trimmed_stdout() {
    insta::assert_snapshot!(check("Branch: !`git branch --show-current`.", ""), @"Branch: out(git branch --show-current).");
}

#[test]
fn shell_failures_keep_the_literal_with_a_note() {
    let mut shell = FakeShell::default();
    shell
        .answers
        .insert("false".into(), ShellOutcome::Failed { code: Some(1) });
    shell
        .answers
        .insert("kill -9 $$".into(), ShellOutcome::Failed { code: None });
    shell.answers.insert(
        "sleep 99".into(),
        ShellOutcome::TimedOut {
            after: std::time::Duration::from_secs(10),
        },
    );
    shell.answers.insert(
        "sleep 1".into(),
        ShellOutcome::TimedOut {
            after: std::time::Duration::from_millis(250),
        },
    );
    shell.answers.insert(
        "nope".into(),
        ShellOutcome::SpawnFailed {
            reason: "no such file or directory".into(),
        },
    );
    shell.answers.insert(
        "yes".into(),
        ShellOutcome::Success {
            stdout: "y\ny\n".into(),
            truncated: true,
        },
    );
    let body = "a !`false`\nb !`kill -9 $$`\nc !`sleep 99` !`sleep 1`\nd !`nope`\ne !`yes`";
    insta::assert_snapshot!(run(body, "", &shell, &FakeFiles::default()), @r"
    a !`false` [!shell exit 1: false]
    b !`kill -9 $$` [!shell killed by a signal: kill -9 $$]
    c !`sleep 99` [!shell timed out after 10 s: sleep 99] !`sleep 1` [!shell timed out after 250 ms: sleep 1]
    d !`nope` [!shell could not start: no such file or directory]
    e y
    y [!shell output cut: yes]
    ");
}

#[test]
fn incomplete_shell_syntax_is_left_alone() {
    let shell = FakeShell::default();
    let body = "Wow!`not closed\nnext` line, !`` empty, ! `spaced`, a!`x`";
    let out = run(body, "", &shell, &FakeFiles::default());
    insta::assert_snapshot!(out, @r"
    Wow!`not closed
    next` line, !`` empty, ! `spaced`, aout(x)
    ");
    assert_eq!(*shell.calls.lock().unwrap(), ["x"]);
}

#[test]
fn untrusted_workspace_does_not_run_project_shell() {
    let shell = FakeShell::default();
    let files = FakeFiles::default();
    let out = run_as(
        "Run !`rm -rf /` now",
        "",
        &shell,
        &files,
        Origin::Project,
        false,
    );
    insta::assert_snapshot!(out, @"Run [!shell not run: workspace not trusted] now");
    assert!(shell.calls.lock().unwrap().is_empty());
}

#[test]
fn user_commands_are_always_trusted() {
    let shell = FakeShell::default();
    let files = FakeFiles::default();
    let out = run_as("Date: !`date`", "", &shell, &files, Origin::User, false);
    insta::assert_snapshot!(out, @"Date: out(date)");
}

#[test]
fn file_references() {
    let mut files = FakeFiles::default()
        .with("src/a.rs", "fn a() {}")
        .with("README.md", "# Readme");
    files.files.insert(
        "../secret".into(),
        FileOutcome::Refused {
            reason: "../secret uses `..`".into(),
        },
    );
    files.files.insert(
        "big.log".into(),
        FileOutcome::Contents {
            text: "start".into(),
            truncated: true,
        },
    );
    let body = "See @README.md, then (@src/a.rs).\nAlso @missing.txt and @../secret\nLog: @big.log";
    insta::assert_snapshot!(run(body, "", &FakeShell::default(), &files), @r"
    See # Readme, then (fn a() {}).
    Also @missing.txt [@file missing: missing.txt] and @../secret [@file refused: ../secret uses `..`]
    Log: start
    [@file cut: only the start of big.log is shown]
    ");
}

#[test]
fn at_inside_a_word_is_not_a_reference() {
    let files = FakeFiles::default();
    let body = "Mail dev@example.com, run npm@latest, a_b@c, x@y. Lone @ and @. stay.";
    let out = run(body, "", &FakeShell::default(), &files);
    assert_eq!(out, body);
    assert!(files.calls.lock().unwrap().is_empty());
}

#[test]
fn trailing_punctuation_is_not_part_of_the_path() {
    let files = FakeFiles::default();
    let body = "@a.md, @b.md. @c.md: @d.md! @e.md? (@f.md) [@g.md] {@h.md} \"@i.md\" '@j.md' `@k.md`; @l.md;";
    let _ = run(body, "", &FakeShell::default(), &files);
    insta::assert_debug_snapshot!(files.calls.lock().unwrap(), @r#"
    [
        "a.md",
        "b.md",
        "c.md",
        "d.md",
        "e.md",
        "f.md",
        "g.md",
        "h.md",
        "i.md",
        "j.md",
        "k.md",
        "l.md",
    ]
    "#);
}

#[test]
fn arguments() {
    let body = "all=[$ARGUMENTS] 1=[$1] 2=[$2] 3=[$3] 9=[$9] 0=[$0] $HOME $ $$ $x";
    insta::assert_snapshot!(check(body, r#"  one "two words" 'three  spaced'  "#), @r#"all=[one "two words" 'three  spaced'] 1=[one] 2=[two words] 3=[three  spaced] 9=[] 0=[$0] $HOME $ $$ $x"#);
    insta::assert_snapshot!(check(body, ""), @"all=[] 1=[] 2=[] 3=[] 9=[] 0=[$0] $HOME $ $$ $x");
}

#[test]
fn ten_is_the_first_argument_then_zero() {
    assert_eq!(check("$10 $11", "a b"), "a0 a1");
}

#[test]
fn split_args_quoting() {
    insta::assert_debug_snapshot!(split_args(r#"a "b c" 'd "e"' f"g h"i "" "unclosed rest"#), @r#"
    [
        "a",
        "b c",
        "d \"e\"",
        "fg hi",
        "",
        "unclosed rest",
    ]
    "#);
    assert!(split_args("   ").is_empty());
}

#[test]
fn steps_run_in_order_and_never_rescan_produced_text() {
    let mut shell = FakeShell::default();
    shell.answers.insert(
        "emit".into(),
        ShellOutcome::Success {
            stdout: "@secret.txt $1 $ARGUMENTS !`nested`".into(),
            truncated: false,
        },
    );
    let files = FakeFiles::default()
        .with("a.md", "file says !`from-file` @b.md $1")
        .with("secret.txt", "SECRET")
        .with("b.md", "B");
    let out = run("S: !`emit`\nF: @a.md\nA: $1", "ARG", &shell, &files);
    insta::assert_snapshot!(out, @r"
    S: @secret.txt $1 $ARGUMENTS !`nested`
    F: file says !`from-file` @b.md $1
    A: ARG
    ");
    assert_eq!(*shell.calls.lock().unwrap(), ["emit"]);
    assert_eq!(*files.calls.lock().unwrap(), ["a.md"]);
}

#[test]
fn failure_literals_are_not_rescanned() {
    let mut shell = FakeShell::default();
    shell.answers.insert(
        "cat @x.md $1".into(),
        ShellOutcome::Failed { code: Some(2) },
    );
    let files = FakeFiles::default().with("x.md", "X");
    let out = run("!`cat @x.md $1`", "ARG", &shell, &files);
    insta::assert_snapshot!(out, @"!`cat @x.md $1` [!shell exit 2: cat @x.md $1]");
    assert!(files.calls.lock().unwrap().is_empty());
}

#[test]
fn arguments_cannot_inject_shell_or_file_reads() {
    let attempts = [
        "!`touch pwned`",
        "$(touch pwned)",
        "`touch pwned`",
        "; touch pwned",
        "@/etc/passwd",
        "@secret.txt",
        "$1 $ARGUMENTS",
    ];
    for attempt in attempts {
        let shell = FakeShell::default();
        let files = FakeFiles::default().with("secret.txt", "SECRET");
        let out = run(
            "Review $ARGUMENTS and $1 !`echo safe`",
            attempt,
            &shell,
            &files,
        );
        assert_eq!(
            *shell.calls.lock().unwrap(),
            ["echo safe"],
            "attempt {attempt}"
        );
        assert!(files.calls.lock().unwrap().is_empty(), "attempt {attempt}");
        assert!(!out.contains("SECRET"), "attempt {attempt}: {out}");
        assert!(
            out.contains(attempt),
            "attempt {attempt} is passed through: {out}"
        );
    }
}

#[test]
fn file_reference_built_from_an_argument_is_not_read() {
    let files = FakeFiles::default().with("src/main.rs", "MAIN");
    let out = run("Look at @$1", "src/main.rs", &FakeShell::default(), &files);
    assert_eq!(out, "Look at @src/main.rs");
    assert!(files.calls.lock().unwrap().is_empty());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

    /// Expansion never panics, and whatever the arguments say, they never reach the shell or
    /// the file reader.
    #[test]
    fn expansion_never_panics_and_arguments_never_run(
        body in "[a-z!`@$ARGUMENTS0-9 .,()\"'\n]{0,60}",
        args in proptest::prelude::any::<String>(),
    ) {
        let shell = FakeShell::default();
        let files = FakeFiles::default();
        let _ = run(&body, "", &shell, &files);
        let calls_without_args = (shell.calls.lock().unwrap().len(), files.calls.lock().unwrap().len());
        let shell = FakeShell::default();
        let files = FakeFiles::default();
        let _ = run(&body, &args, &shell, &files);
        let calls_with_args = (shell.calls.lock().unwrap().len(), files.calls.lock().unwrap().len());
        proptest::prop_assert_eq!(calls_without_args, calls_with_args);
    }
}
