//! Expansion with fake shell runners and file readers: each substitution, the order, the
//! failure notes, quoting, trust, the argument rules of each ecosystem and injection attempts.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use shiro_commands::{
    Args, Command, Ecosystem, ExpandContext, FileOutcome, FileReader, Origin, ShellCall,
    ShellOutcome, ShellRunner, expand, split_args,
};

/// One call the fake shell received.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    command: String,
    args: Vec<String>,
    arguments: String,
}

/// Answers from a table; unknown commands succeed with `out(<cmd>)` plus a newline.
#[derive(Default)]
struct FakeShell {
    answers: HashMap<String, ShellOutcome>,
    calls: Mutex<Vec<Call>>,
}

impl FakeShell {
    fn commands(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.command.clone())
            .collect()
    }
}

#[async_trait::async_trait]
impl ShellRunner for FakeShell {
    async fn run(&self, call: &ShellCall<'_>) -> ShellOutcome {
        let command = call.command;
        self.calls.lock().unwrap().push(Call {
            command: command.to_owned(),
            args: call.args.to_vec(),
            arguments: call.arguments.to_owned(),
        });
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
    dirs: HashSet<String>,
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

    fn with_dir(mut self, path: &str, entries: &[&str]) -> FakeFiles {
        self.dirs.insert(path.to_owned());
        self.files.insert(
            path.to_owned(),
            FileOutcome::Directory {
                entries: entries.iter().map(|e| (*e).to_owned()).collect(),
                more: 0,
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

    async fn is_dir(&self, path: &str) -> bool {
        self.dirs.contains(path)
    }
}

fn expand_with(
    command: &Command,
    args: &Args,
    shell: &FakeShell,
    files: &FakeFiles,
    workspace_trusted: bool,
) -> String {
    let ctx = ExpandContext {
        shell,
        files,
        workspace_trusted,
    };
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(expand(command, args, &ctx))
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
    let cmd = Command::new("t", body, origin, Ecosystem::Shiro);
    expand_with(&cmd, &Args::parse(args), shell, files, workspace_trusted)
}

/// Expands with default fakes (every command succeeds, no files).
fn check(body: &str, args: &str) -> String {
    run(body, args, &FakeShell::default(), &FakeFiles::default())
}

/// Expands a command of `ecosystem` with default fakes.
fn check_in(ecosystem: Ecosystem, body: &str, args: &str) -> String {
    let cmd = Command::new("t", body, Origin::User, ecosystem);
    expand_with(
        &cmd,
        &Args::parse(args),
        &FakeShell::default(),
        &FakeFiles::default(),
        true,
    )
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
    assert_eq!(shell.commands(), ["x"]);
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
    let body = "all=[$ARGUMENTS] 1=[$1] 2=[$2] 3=[$3] 9=[$9] $HOME $ $$ $x";
    insta::assert_snapshot!(check(body, r#"  one "two words" 'three  spaced'  "#), @r#"all=[one "two words" 'three  spaced'] 1=[one] 2=[two words] 3=[three  spaced] 9=[] $HOME $ $$ $x"#);
    insta::assert_snapshot!(check(body, ""), @"all=[] 1=[] 2=[] 3=[] 9=[] $HOME $ $$ $x");
}

#[test]
fn a_template_that_uses_zero_counts_from_zero_as_claude_code_does() {
    let body = "0=[$0] 1=[$1] 2=[$2] [0]=[$ARGUMENTS[0]] [1]=[$ARGUMENTS[1]] [7]=[$ARGUMENTS[7]]";
    insta::assert_snapshot!(check(body, "a b c"), @"0=[a] 1=[b] 2=[c] [0]=[a] [1]=[b] [7]=[]");
    // Without `$0`, `$ARGUMENTS[N]` still counts from zero, and `$1` is the first argument.
    insta::assert_snapshot!(check("$1 $ARGUMENTS[0] $ARGUMENTS[x] $ARGUMENTS[", "a b"), @"a a a b[x] a b[");
}

#[test]
fn named_arguments_take_positions_in_order() {
    let mut cmd = Command::new(
        "t",
        "from $from to $to, not $toward, all: $ARGUMENTS",
        Origin::User,
        Ecosystem::Claude,
    );
    cmd.arguments = vec!["from".to_owned(), "to".to_owned()];
    let out = expand_with(
        &cmd,
        &Args::parse("React Vue extra"),
        &FakeShell::default(),
        &FakeFiles::default(),
        true,
    );
    insta::assert_snapshot!(out, @"from React to Vue, not $toward, all: React Vue extra");
}

#[test]
fn arguments_are_appended_when_the_template_takes_none() {
    insta::assert_snapshot!(check_in(Ecosystem::Claude, "Review the code.", "src/a.rs carefully"), @r"
    Review the code.

    ARGUMENTS: src/a.rs carefully
    ");
    insta::assert_snapshot!(check_in(Ecosystem::Shiro, "Review the code.", "x"), @r"
    Review the code.

    ARGUMENTS: x
    ");
    insta::assert_snapshot!(check_in(Ecosystem::OpenCode, "Review the code.", "x y"), @r"
    Review the code.

    x y
    ");
    insta::assert_snapshot!(check_in(Ecosystem::Gemini, "Review the code.", "x \"y z\""), @r#"
    Review the code.

    /t x "y z"
    "#);
    // No arguments, nothing appended; a placeholder anywhere (a shell one too), nothing
    // appended.
    assert_eq!(check_in(Ecosystem::Claude, "Review.", "   "), "Review.");
    assert_eq!(
        check_in(Ecosystem::Claude, "Review !`echo \"$1\"`.", "x"),
        "Review out(echo \"$1\")."
    );
    assert_eq!(
        check_in(Ecosystem::Claude, "Log !`git log \"$@\"`", "x"),
        "Log out(git log \"$@\")"
    );
    assert_eq!(check_in(Ecosystem::Gemini, "Fix {{args}}.", "x"), "Fix x.");
    assert_eq!(check_in(Ecosystem::Claude, "", "x"), "ARGUMENTS: x");
}

#[test]
fn opencode_numbers_from_one_and_the_last_placeholder_takes_the_rest() {
    insta::assert_snapshot!(check_in(Ecosystem::OpenCode, "type=$1 message=$2", "fix the login bug"), @"type=fix message=the login bug");
    insta::assert_snapshot!(check_in(Ecosystem::OpenCode, "$2 then $1 then $10", "a b c"), @"b then a then ");
    insta::assert_snapshot!(check_in(Ecosystem::OpenCode, "all: $ARGUMENTS, $0 stays", "a"), @"all: a, $0 stays");
}

#[test]
fn gemini_args_are_raw_in_text_and_a_shell_reference_in_commands() {
    let shell = FakeShell::default();
    let cmd = Command::new(
        "grep-code",
        "Pattern `{{args}}`:\n!{grep -r {{args}} .}\n!{echo \"{{args}}\" '{{args}}'}",
        Origin::User,
        Ecosystem::Gemini,
    );
    let out = expand_with(
        &cmd,
        &Args::parse("It's complicated"),
        &shell,
        &FakeFiles::default(),
        true,
    );
    insta::assert_snapshot!(out, @r#"
    Pattern `It's complicated`:
    out(grep -r "${ARGUMENTS}" .)
    out(echo "${ARGUMENTS}" ''"${ARGUMENTS}"'')
    "#);
    let calls = shell.calls.lock().unwrap();
    assert_eq!(calls[0].arguments, "It's complicated");
    assert_eq!(calls[0].args, ["It's", "complicated"]);
}

#[test]
fn gemini_files_and_untrusted_shell() {
    let files = FakeFiles::default().with("docs/best practices.md", "BE KIND");
    let shell = FakeShell::default();
    let cmd = Command::new(
        "review",
        "Rules: @{docs/best practices.md}\nMissing: @{nope}\nDiff: !{git diff}\nOpen: !{never",
        Origin::Project,
        Ecosystem::Gemini,
    );
    let out = expand_with(&cmd, &Args::default(), &shell, &files, false);
    insta::assert_snapshot!(out, @r"
    Rules: BE KIND
    Missing: @{nope} [@file missing: nope]
    Diff: [!shell not run: workspace not trusted]
    Open: !{never
    ");
    assert!(shell.commands().is_empty());
}

#[test]
fn at_names_a_file_only_where_it_plausibly_does() {
    let files = FakeFiles::default()
        .with("me", "a file called me")
        .with_dir("src", &["lib.rs", "util/"])
        .with_dir("types", &[]);
    let body = "@me @src @scope/pkg@latest @RestController @typescript-eslint/parser \
                @pytest.fixture @app.route(x) @notes.md @types/missing @./x @~/y";
    let out = run(body, "", &FakeShell::default(), &files);
    insta::assert_snapshot!(out, @r"
    a file called me Directory src/:
    - lib.rs
    - util/ @scope/pkg@latest @RestController @typescript-eslint/parser @pytest.fixture @app.route(x) @notes.md [@file missing: notes.md] @types/missing [@file missing: types/missing] @./x [@file missing: ./x] @~/y [@file missing: ~/y]
    ");
    // The second `@` of `@scope/pkg@latest` follows a word character: never a reference.
    assert!(!files.calls.lock().unwrap().contains(&"latest".to_owned()));
}

#[test]
fn the_shell_gets_the_arguments_as_parameters_and_in_the_environment() {
    let shell = FakeShell::default();
    let mut cmd = Command::new(
        "t",
        "!`grep -n \"$1\" $ARGUMENTS[1] '$file'`",
        Origin::User,
        Ecosystem::Claude,
    );
    cmd.arguments = vec!["pattern".to_owned(), "file".to_owned()];
    let _ = expand_with(
        &cmd,
        &Args::parse("'a b' c.rs"),
        &shell,
        &FakeFiles::default(),
        true,
    );
    assert_eq!(
        *shell.calls.lock().unwrap(),
        [Call {
            command: "grep -n \"$1\" \"${2}\" ''\"${2}\"''".to_owned(),
            args: vec!["a b".to_owned(), "c.rs".to_owned()],
            arguments: "'a b' c.rs".to_owned(),
        }]
    );
}

#[test]
fn argv_arguments_are_taken_verbatim() {
    let argv: Vec<String> = ["it's", "", "\"quoted\"", "two words"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let args = Args::from_argv(&argv);
    assert_eq!(args.list(), argv.as_slice());
    insta::assert_snapshot!(check_args("1=[$1] 2=[$2] 3=[$3] 4=[$4] all=[$ARGUMENTS]", &args), @r#"1=[it's] 2=[] 3=["quoted"] 4=[two words] all=[it's  "quoted" two words]"#);
}

fn check_args(body: &str, args: &Args) -> String {
    let cmd = Command::new("t", body, Origin::User, Ecosystem::Shiro);
    expand_with(
        &cmd,
        args,
        &FakeShell::default(),
        &FakeFiles::default(),
        true,
    )
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
        "\"unclosed",
        "rest",
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
    assert_eq!(shell.commands(), ["emit"]);
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
        assert_eq!(shell.commands(), ["echo safe"], "attempt {attempt}");
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

    /// Expansion never panics, and whatever the arguments say, they never reach the shell
    /// as code or the file reader: in every format, the shell runs the same command text and
    /// the reader reads the same paths with or without them.
    #[test]
    fn expansion_never_panics_and_arguments_never_run(
        body in "[a-z!`@${}ARGUMENTS0-9 .,()\"'\n\\\\\\[\\]]{0,60}",
        args in proptest::prelude::any::<String>(),
        ecosystem in proptest::sample::select(vec![Ecosystem::Shiro, Ecosystem::Claude, Ecosystem::OpenCode, Ecosystem::Gemini]),
        named in proptest::prelude::any::<bool>(),
    ) {
        let mut cmd = Command::new("t", &body, Origin::User, ecosystem);
        if named {
            cmd.arguments = vec!["a".to_owned(), "ARG".to_owned()];
        }
        let seen = |args: &Args| {
            let shell = FakeShell::default();
            let files = FakeFiles::default();
            let _ = expand_with(&cmd, args, &shell, &files, true);
            let reads = files.calls.lock().unwrap().clone();
            (shell.commands(), reads)
        };
        let without = seen(&Args::default());
        proptest::prop_assert_eq!(&without, &seen(&Args::parse(&args)));
        proptest::prop_assert_eq!(&without, &seen(&Args::from_argv(&[args, "!`x`".to_owned()])));
    }
}
