//! Permission rules, modes and `--allowed-tools`/`--disallowed-tools`, end to end: the real
//! `shiro` with the replay provider (no network).
#![allow(clippy::unwrap_used)]

use crate::agent_common;

use agent_common::{Run, World};
use serde_json::{Value, json};

/// One step calling each of `calls` (name, arguments), then an answer.
fn script(calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(name, arguments)| json!({"name": name, "arguments": arguments}))
        .collect();
    json!({"responses": [{"text": "", "tool_calls": calls}, {"text": "Done."}]})
}

/// The lines of stderr that start with one of `starts`.
fn lines(run: &Run, starts: &[&str]) -> String {
    run.stderr
        .lines()
        .filter(|line| starts.iter().any(|start| line.starts_with(start)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// bash without capture: these tests are about who may run what, not about undo. It goes in
/// the user's config: a workspace's config may not lower the capture.
const NO_CAPTURE: &str = "[bash]\ncapture = \"off\"\n";

/// Writes [`NO_CAPTURE`] as the user's config.
fn without_capture(world: &World) {
    std::fs::write(world.cfg.path().join("config.toml"), NO_CAPTURE).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_beats_yes_and_the_model_is_told_which_rule() {
    let world = World::new();
    without_capture(&world);
    world.write(
        ".shiro/config.toml",
        "[permissions]\ndeny = [\"bash(rm -rf:*)\", \"write_file(.env)\"]\nallow = [\"Bash\"]\n",
    );
    world.write("build/out.o", "object\n");
    let model = world.replay(&script(&[
        (
            "write_file",
            json!({"path": "./.env", "content": "SECRET=1\n"}),
        ),
        ("bash", json!({"command": "ls && rm -rf build"})),
        ("write_file", json!({"path": "ok.txt", "content": "ok\n"})),
    ]));
    let run = world
        .run(&["-p", "clean up", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read(".env"), None);
    assert_eq!(world.read("build/out.o").as_deref(), Some("object\n"));
    assert_eq!(world.read("ok.txt").as_deref(), Some("ok\n"));
    let results = world.tool_results();
    insta::assert_snapshot!("deny_results", world.normalize(&results[..2].join("\n")));
    insta::assert_snapshot!("deny_stderr", lines(&run, &["denied:"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_prefix_rule_runs_git_status_unasked_and_asks_for_git_push() {
    let world = World::new();
    without_capture(&world);
    world.write(
        ".shiro/config.toml",
        "[permissions]\nallow = [\"bash(git status:*)\"]\n",
    );
    world.write("x", "keep\n");
    let model = world.replay(&script(&[
        ("bash", json!({"command": "git status -s"})),
        ("bash", json!({"command": "git push"})),
        ("bash", json!({"command": "git status; rm x"})),
    ]));
    // -p without --yes: what needs asking is denied, what a rule allows runs.
    let run = world.run(&["-p", "look", "--model", &model], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("x").as_deref(), Some("keep\n"));
    let results = world.tool_results();
    assert!(!results[0].contains("denied"), "{results:?}");
    for asked in &results[1..] {
        assert!(
            asked.starts_with("this tool call needs approval, and nobody can give it in this headless run; nothing was run."),
            "{asked}"
        );
    }
    insta::assert_snapshot!(
        "git_status_stderr",
        world.normalize(&lines(&run, &["(runs without asking", "denied:"]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_changes_and_bash_even_when_allowed_and_reads_run() {
    let world = World::new();
    without_capture(&world);
    world.write(
        ".shiro/config.toml",
        "[permissions]\nallow = [\"Bash\", \"Edit\"]\n",
    );
    world.write("a.txt", "hello\n");
    let model = world.replay(&script(&[
        ("read_file", json!({"path": "a.txt"})),
        ("write_file", json!({"path": "b.txt", "content": "b\n"})),
        ("bash", json!({"command": "touch c.txt"})),
    ]));
    let run = world
        .run(&["-p", "change", "--read-only", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(world.read("c.txt"), None);
    let results = world.tool_results();
    assert!(results[0].contains("hello"), "{results:?}");
    insta::assert_snapshot!("read_only_result", results[1]);
    assert_eq!(results[1], results[2]);
    insta::assert_snapshot!(
        "read_only_stderr",
        lines(&run, &["denied:", "nothing was changed"])
    );
    // With --yes too, read-only wins: the same reads run, the same changes are refused.
    let run = world
        .run(
            &["-p", "change", "--read-only", "--yes", "--model", &model],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(world.read("c.txt"), None);
    assert!(
        run.stderr.contains("denied: write_file b.txt"),
        "{}",
        run.stderr
    );
}

/// With the overlay (the default capture), read-only mode runs bash in a read-only sandbox,
/// weighed as in ask mode: the command reads, and every write to the workspace is refused by
/// the kernel and named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stderr)]
async fn read_only_mode_runs_bash_in_a_read_only_sandbox() {
    let world = World::new();
    world.write(".shiro/config.toml", "[permissions]\nallow = [\"Bash\"]\n");
    world.write("a.txt", "hello\n");
    let model = world.replay(&script(&[(
        "bash",
        json!({"command": "echo x > $PWD/a.txt; touch $PWD/c.txt; cat a.txt"}),
    )]));
    let run = world
        .run(&["-p", "look", "--read-only", "--model", &model], "", &[])
        .await;
    let results = world.tool_results();
    if results[0].contains("cannot run the command") {
        eprintln!(
            "skipped: no read-only sandbox on this machine ({})",
            results[0]
        );
        return;
    }
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("a.txt").as_deref(), Some("hello\n"));
    assert_eq!(world.read("c.txt"), None);
    assert!(
        results[0].contains("\nhello\n[exit code 0]"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("[note: the read-only sandbox refused a write to "),
        "{}",
        results[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_and_disallowed_tools_flags_add_rules_for_the_run() {
    let world = World::new();
    without_capture(&world);
    world.write("src/a.rs", "fn a() {}\n");
    world.write("notes.txt", "notes\n");
    let model = world.replay(&script(&[
        (
            "edit_file",
            json!({"path": "src/a.rs", "old_string": "a()", "new_string": "b()"}),
        ),
        (
            "write_file",
            json!({"path": "notes.txt", "content": "gone\n"}),
        ),
        ("bash", json!({"command": "echo hi"})),
    ]));
    let run = world
        .run(
            &[
                "-p",
                "edit",
                "--model",
                &model,
                "--allowed-tools",
                "edit_file(src/**), bash(echo:*)",
            ],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("src/a.rs").as_deref(), Some("fn b() {}\n"));
    assert_eq!(world.read("notes.txt").as_deref(), Some("notes\n"));
    assert!(world.tool_results()[2].contains("hi"));

    let world = World::new();
    without_capture(&world);
    world.write("notes.txt", "notes\n");
    let model = world.replay(&script(&[
        ("bash", json!({"command": "rm notes.txt"})),
        ("write_file", json!({"path": "new.txt", "content": "new\n"})),
    ]));
    let run = world
        .run(
            &[
                "-p",
                "tidy",
                "--yes",
                "--model",
                &model,
                "--disallowedTools",
                "bash(rm:*) Write(*.md)",
            ],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("notes.txt").as_deref(), Some("notes\n"));
    assert_eq!(world.read("new.txt").as_deref(), Some("new\n"));
    assert!(
        world.tool_results()[0].contains("deny bash(rm:*) (--disallowed-tools)"),
        "{:?}",
        world.tool_results()
    );

    let run = world
        .run(&["-p", "x", "--allowed-tools", "Bash(git"], "", &[])
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!("bad_flag_stderr", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_rule_in_a_config_file_stops_shiro_with_the_file_and_the_rule() {
    let world = World::new();
    world.write(
        ".shiro/config.toml",
        "[permissions]\nallow = [\"Read\", \"edit_file(../x)\"]\n",
    );
    let run = world.run(&["-p", "x"], "", &[]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!("bad_config_stderr", world.normalize(&run.stderr));
}

/// A piped session: `a` keeps the narrowest rule in the workspace's config (its comments
/// kept), the next call it covers runs unasked, `/permissions` lists it, and `/mode
/// read-only` then refuses what the rule allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_saves_the_narrowest_rule_and_the_session_shows_and_changes_modes() {
    let world = World::new();
    without_capture(&world);
    world.write(
        ".shiro/config.toml",
        "# my settings\n\n[permissions]\n# never this\ndeny = [\"bash(rm -rf:*)\"]\n",
    );
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi  -n"}}]},
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi there"}}]},
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo bye"}}]},
        {"text": "First done."},
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "Second done."}
    ]}));
    let stdin = "go\na\nw\nn not now\n/permissions\n/mode read-only\n/status\nagain\n/mode\n";
    let run = world.run(&["--model", &model], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "saved_config",
        world.normalize(
            &std::fs::read_to_string(world.ws.path().join(".shiro/config.toml")).unwrap()
        )
    );
    let transcript: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| {
            [
                "allow ",
                "keep ",
                "saved ",
                "(runs without",
                "mode",
                "rules",
                "  deny",
                "  allow",
                "refused",
            ]
            .iter()
            .any(|start| line.starts_with(start))
        })
        .collect();
    insta::assert_snapshot!(
        "session_transcript",
        world.normalize(&transcript.join("\n"))
    );
    let results = world.tool_results();
    assert!(results[0].contains("hi -n"), "{results:?}");
    assert!(results[1].contains("hi there"), "{results:?}");
    assert!(results[2].ends_with("Their reason: not now"), "{results:?}");
    assert!(
        results[3].starts_with("refused: the session is in read-only mode"),
        "{results:?}"
    );
}

/// `u` keeps the rule in the user's config; an ask rule asks even with `--yes` and after an
/// `a`, which then runs the call once and keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_rules_are_saved_and_an_ask_rule_asks_even_with_yes() {
    let world = World::new();
    std::fs::write(
        world.cfg.path().join("config.toml"),
        format!("{NO_CAPTURE}[permissions]\nask = [\"bash(echo:*)\"]\n"),
    )
    .unwrap();
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes/a.md", "content": "1\n"}}]},
        {"text": "", "tool_calls": [{"name": "write_file", "arguments": {"path": "notes/a.md", "content": "2\n"}}]},
        {"text": "Written."}
    ]}));
    let run = world.run(&["--model", &model], "write\na\nu\n", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("notes/a.md").as_deref(), Some("2\n"));
    let user = std::fs::read_to_string(world.cfg.path().join("config.toml")).unwrap();
    insta::assert_snapshot!(user, @r#"
    [bash]
    capture = "off"
    [permissions]
    ask = ["bash(echo:*)"]
    allow = ["write_file(notes/a.md)"]
    "#);

    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo again"}}]},
        {"text": "Echoed."}
    ]}));
    let run = world
        .run(&["--yes", "--model", &model], "echo\na\nn\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let asked: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("allow ") || line.starts_with("keep "))
        .collect();
    insta::assert_snapshot!("ask_rule_with_yes", world.normalize(&asked.join("\n")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_of_the_whole_workspace_leaves_out_what_deny_rules_hide() {
    let world = World::new();
    world.write(
        ".shiro/config.toml",
        "[permissions]\ndeny = [\"Read(secrets)\"]\n",
    );
    world.write("secrets/key.pem", "password = hunter2\n");
    world.write("src/a.rs", "let password = ask();\n");
    let model = world.replay(&script(&[
        ("grep", json!({"pattern": "password"})),
        ("glob", json!({"pattern": "**/*.pem"})),
        ("grep", json!({"pattern": "password", "path": "secrets"})),
    ]));
    let run = world
        .run(&["-p", "look for passwords", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let got = world.tool_results();
    assert_eq!(
        got[0],
        "src/a.rs:1:let password = ask();\n(1 path the permission rules deny reading was left out)"
    );
    assert!(got[1].starts_with("no files match"), "{got:?}");
    assert!(!got.iter().any(|text| text.contains("hunter2")), "{got:?}");
    // Naming the path is refused outright, as before.
    assert!(
        got[2].starts_with("refused by the permission rule deny Read(secrets)"),
        "{got:?}"
    );
}

/// "Always" on `sh -c '…'` keeps that exact line, not `bash(sh:*)`: another script is asked
/// about. `git -C DIR status` keeps its options up to the subcommand, not `bash(git:*)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_on_a_script_keeps_the_exact_line_and_on_git_the_subcommand() {
    let world = World::new();
    without_capture(&world);
    world.write("victim", "keep\n");
    let bash = |command: &str| json!({"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]});
    let model = world.replay(&json!({"responses": [
        bash("sh -c 'echo harmless'"),
        {"text": "First done."},
        bash("sh -c 'echo harmless'"),
        bash("sh -c 'rm -f victim; echo gone'"),
        {"text": "Second done."},
        bash("git -C sub status"),
        bash("git -C sub status -s"),
        bash("git -C sub push --force"),
        {"text": "Third done."}
    ]}));
    let stdin = "one\na\ns\ntwo\nn\nthree\na\ns\nn\n";
    let run = world.run(&["--model", &model], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("victim").as_deref(), Some("keep\n"));
    let transcript: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| {
            ["allow ", "keep ", "(runs without"]
                .iter()
                .any(|start| line.starts_with(start))
        })
        .collect();
    insta::assert_snapshot!(world.normalize(&transcript.join("\n")), @r"
    allow bash? [y]es, [a] always: bash(sh -c 'echo harmless'), [n]o (n REASON tells the model why) a
    keep bash(sh -c 'echo harmless') for: [s]ession only, [w]orkspace (.shiro/config.toml), [u]ser config (all your workspaces)? s
    (runs without asking: allow bash(sh -c 'echo harmless') (this session))
    allow bash? [y]es, [a] always: bash(sh -c 'rm -f victim; echo gone'), [n]o (n REASON tells the model why) n
    allow bash? [y]es, [a] always: bash(git -C sub status:*), [n]o (n REASON tells the model why) a
    keep bash(git -C sub status:*) for: [s]ession only, [w]orkspace (.shiro/config.toml), [u]ser config (all your workspaces)? s
    (runs without asking: allow bash(git -C sub status:*) (this session))
    allow bash? [y]es, [a] always: bash(git -C sub push:*), [n]o (n REASON tells the model why) n
    ");
}

/// `-p --yes --read-only`: read-only mode refuses the write, and asks before bash (in its
/// sandbox), which -p cannot; the hint and the model's text name read-only mode, never
/// `--yes`, which was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yes_with_read_only_names_read_only_mode_as_the_cause() {
    let world = World::new();
    let model = world.replay(&script(&[
        ("bash", json!({"command": "ls"})),
        ("write_file", json!({"path": "b.txt", "content": "b\n"})),
    ]));
    let run = world
        .run(
            &["-p", "go", "--yes", "--read-only", "--model", &model],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(world.read("b.txt"), None);
    let results = world.tool_results();
    assert!(!results[0].contains("--yes to allow"), "{results:?}");
    insta::assert_snapshot!(results[0], @"this tool call needs approval, and nobody can give it in this headless run; nothing was run. In read-only mode bash runs (in a read-only sandbox) only when approved or allowed by a rule, with --yes or without; read and search with the other tools instead, or tell the user the command, which --allowed-tools or an allow rule in .shiro/config.toml can allow.");
    assert!(
        results[1].starts_with("refused: the session is in read-only mode"),
        "{results:?}"
    );
    insta::assert_snapshot!(lines(&run, &["denied:", "nothing was changed"]), @r"
    denied: bash ls (read-only mode asks before bash runs, and -p cannot ask)
    denied: write_file b.txt (by read-only mode)
    nothing was changed: read-only mode (--read-only) refuses every change; read-only mode asks before bash runs (in a read-only sandbox), and -p cannot ask, with --yes or without: allow the commands with --allowed-tools or a rule in .shiro/config.toml
    ");
}

/// An ask rule asks even with `--yes`; with -p nobody can answer, and the hint says so
/// rather than telling to pass `--yes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_rule_under_p_with_yes_is_named_as_the_cause() {
    let world = World::new();
    without_capture(&world);
    world.write(
        ".shiro/config.toml",
        "[permissions]\nask = [\"bash(git push:*)\"]\n",
    );
    let model = world.replay(&script(&[("bash", json!({"command": "git push"}))]));
    let run = world
        .run(&["-p", "push", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!(lines(&run, &["denied:", "nothing was changed"]), @r"
    denied: bash git push (an ask rule asks, and -p cannot ask)
    nothing was changed: an ask rule asks before a call, and -p cannot ask, with --yes or without: run it in a session, where you can answer
    ");
    // Nobody denied it, and the model is not told that anyone did.
    insta::assert_snapshot!(world.normalize(&world.tool_results()[0]), @"this tool call needs approval, and nobody can give it in this headless run; nothing was run. The permission rule ask bash(git push:*) (workspace config [WS]/.shiro/config.toml) asks before every such call, with --yes or without.");
}
