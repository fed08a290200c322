//! `shiro -p` end to end against the mock OpenAI-compatible server on 127.0.0.1.
#![allow(clippy::unwrap_used)]

use crate::agent_common;
use crate::support;

use agent_common::World;
use support::mock_openai::{
    MockResponse, MockServer, error_body, finish_chunk, text_chunk, tool_call_chunk,
};

/// Three steps: write a file (arguments streamed in fragments), edit it, answer.
fn write_edit_answer() -> Vec<MockResponse> {
    vec![
        MockResponse::stream(vec![
            text_chunk("Writing it."),
            tool_call_chunk(0, Some("call_w"), Some("write_file"), "{\"path\": \"hello"),
            tool_call_chunk(0, None, None, ".txt\", \"content\": \"hello\\n\"}"),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_e"),
                Some("edit_file"),
                "{\"path\": \"hello.txt\", ",
            ),
            tool_call_chunk(
                0,
                None,
                None,
                "\"old_string\": \"hello\", \"new_string\": \"hello, world\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["hello.txt now ", "says hello, world."]),
    ]
}

fn model_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_BASE_URL", url.to_owned()),
        ("SHIRO_MODEL", "mock-model".to_owned()),
    ]
}

async fn run_p(world: &World, url: &str, args: &[&str]) -> agent_common::Run {
    let env = model_env(url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    world.run(args, "", &env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_turn_writes_edits_answers_and_undo_restores() {
    let world = World::new();
    let (url, server) = MockServer::start(write_edit_answer()).await;
    let run = run_p(&world, &url, &["-p", "make hello.txt", "--yes"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "hello.txt now says hello, world.\n");
    insta::assert_snapshot!("headless_stderr", world.normalize(&run.stderr));
    assert_eq!(world.read("hello.txt").as_deref(), Some("hello, world\n"));

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["model"], "mock-model");
    let messages = requests[2].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    );
    assert_eq!(messages[3]["tool_call_id"], "call_w");
    assert!(
        messages[5]["content"]
            .as_str()
            .unwrap()
            .contains("hello.txt"),
        "{:?}",
        messages[5]
    );

    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(
        world.read("hello.txt"),
        None,
        "undo removed the file the turn created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_events_are_one_object_a_line() {
    let world = World::new();
    let (url, _server) = MockServer::start(write_edit_answer()).await;
    let run = run_p(&world, &url, &["-p", "make hello.txt", "--yes", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    for line in run.stdout.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    insta::assert_snapshot!("headless_json", world.normalize(&run.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_yes_mutating_tools_are_denied_and_the_model_is_told() {
    let world = World::new();
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"x.txt\", \"content\": \"x\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["I could not write x.txt."]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "make x.txt"]).await;
    // Every change the model tried was denied: a script must not read that as success.
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(world.read("x.txt"), None);
    let told: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("denied:") || line.starts_with("nothing was changed"))
        .collect();
    insta::assert_snapshot!(told.join("\n"), @r"
    denied: write_file x.txt
    nothing was changed: -p denies every change unless --yes is given; run again with --yes to allow them
    ");
    let requests = server.requests();
    let tool_result = &requests[1].body["messages"][3];
    assert_eq!(tool_result["role"], "tool");
    let text = tool_result["content"].as_str().unwrap();
    assert!(
        text.starts_with("this tool call needs approval, and nobody can give it in this headless run; nothing was run."),
        "{text}"
    );
    assert!(text.contains("--yes"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_then_the_turn_succeeds() {
    let world = World::new();
    let (url, server) = MockServer::start(vec![
        MockResponse::error(429, error_body("slow down", "rate_limit_exceeded", None))
            .with_header("Retry-After", "0"),
        MockResponse::text(&["fine now"]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "hi"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "fine now\n");
    assert!(run.stderr.contains("retry 1 of"), "{}", run.stderr);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_fails_clearly_with_exit_1() {
    let world = World::new();
    let (url, _server) = MockServer::start(vec![MockResponse::error(
        401,
        error_body(
            "Incorrect API key",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    )])
    .await;
    let run = run_p(&world, &url, &["-p", "hi"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("turn stopped: the API key was refused (401); set OPENAI_API_KEY"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_clearly_and_keeps_earlier_changes_undoable() {
    let world = World::new();
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"x.txt\", \"content\": \"x\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::dropped_after(vec![text_chunk("Half an ans")]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "make x.txt", "--yes", "--json"]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let last: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn_end");
    assert_eq!(
        last["error"],
        "the connection closed before the response finished"
    );
    assert_eq!(
        last["turn_id"], 1,
        "the write before the failure was recorded"
    );
    assert_eq!(world.read("x.txt").as_deref(), Some("x"));
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(world.read("x.txt"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_command_is_expanded_and_sent_as_the_prompt() {
    let world = World::new();
    world.write(
        ".shiro/commands.md",
        "# Commands\n\n## review\n> Review a file for bugs\nReview $1 for bugs. Focus: $2\n",
    );
    let (url, server) = MockServer::start(vec![MockResponse::text(&["Looks fine."])]).await;
    let env = model_env(&url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = world
        .run(&[], "/review src/main.rs \"error handling\"\n", &env)
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{run:?}");
    let messages = requests[0].body["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["role"], "user");
    assert_eq!(
        messages.last().unwrap()["content"],
        "Review src/main.rs for bugs. Focus: error handling"
    );
    assert!(run.stdout.contains("Looks fine."), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_turn_not_the_session_and_what_it_changed_stays_undoable() {
    let world = World::new();
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"x.txt\", \"content\": \"x\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        // The model then goes silent, as a slow one does, until the user presses Ctrl-C.
        MockResponse::stalled_after(vec![text_chunk("Thinking about it")]),
    ])
    .await;
    let env = model_env(&url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let child = world.spawn(&["--yes"], "make x.txt\n/undo\n", &env).await;
    let pid = child.id().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while world.read("x.txt").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never happened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Give the second request a moment to be in flight, then press Ctrl-C.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let run = agent_common::finish(child).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let out = world.normalize(&run.stdout);
    assert!(
        out.contains("turn stopped: interrupted (Esc, Ctrl-C or a signal)"),
        "{out}"
    );
    assert!(
        out.contains("changed: A x.txt (turn #1; /undo reverts it)"),
        "{out}"
    );
    assert!(out.contains("undid turn #1 \"make x.txt\""), "{out}");
    assert_eq!(world.read("x.txt"), None, "the interrupted turn was undone");
}

/// `shiro -p` stopped by Ctrl-C finishes and records its turn, says how to revert it, and
/// exits 130; nothing is left for the next command to recover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_headless_turn_records_it_says_so_and_exits_130() {
    let world = World::new();
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"x.txt\", \"content\": \"x\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::stalled_after(vec![text_chunk("Thinking about it")]),
    ])
    .await;
    let env = model_env(&url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let child = world.spawn(&["-p", "make x.txt", "--yes"], "", &env).await;
    let pid = child.id().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while world.read("x.txt").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never happened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let run = agent_common::finish(child).await;
    assert_eq!(run.code, Some(130), "{run:?}");
    assert!(
        run.stderr
            .contains("turn stopped; /undo or `shiro undo` reverts it"),
        "{run:?}"
    );
    let log = world.run(&["log"], "", &[]).await;
    assert!(!log.stderr.contains("recovered"), "{log:?}");
    assert!(log.stdout.contains("A x.txt"), "{log:?}");
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(world.read("x.txt"), None);
}

/// The names of the tools a request offered.
fn offered(request: &support::mock_openai::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A Claude Code command that allows only `Read, Grep`: its turn offers the model only the
/// reading tools, a `write_file` the model calls anyway is refused with a message that says
/// why, nothing is written (even with `--yes`), and its `model` answers that turn alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_command_with_allowed_tools_refuses_write_file_and_tells_the_model() {
    let world = World::new();
    world.write(
        ".claude/commands/review.md",
        "---\ndescription: Review a file without changing it\nallowed-tools: Read, Grep\nmodel: review-model\n---\nReview $1 for bugs. Change nothing.\n",
    );
    world.write("src/lib.rs", "fn main() {}\n");
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_r"),
                Some("read_file"),
                "{\"path\": \"src/lib.rs\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"src/lib.rs\", \"content\": \"pub fn rewritten() {}\\n\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["I may only read here, so I changed nothing."]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "/review src/lib.rs", "--yes"]).await;
    // Every change the model tried was refused, as by a deny rule: -p exits 1 and says why.
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.stdout, "I may only read here, so I changed nothing.\n");
    let told: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("denied:") || line.starts_with("nothing was changed"))
        .collect();
    insta::assert_snapshot!(told.join("\n"), @r"
    denied: write_file src/lib.rs (by the command's allowed-tools)
    nothing was changed: the command's allowed-tools refused changes (`shiro commands list` shows each command's tools)
    ");
    assert_eq!(world.read("src/lib.rs").as_deref(), Some("fn main() {}\n"));
    assert!(
        run.stderr
            .contains("/review limits its turn's tools to read_file, list_dir, glob, grep"),
        "{}",
        run.stderr
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(request.body["model"], "review-model");
        assert_eq!(offered(request), ["read_file", "list_dir", "glob", "grep"]);
    }
    let messages = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(
        messages[1]["content"],
        "Review src/lib.rs for bugs. Change nothing."
    );
    assert_eq!(messages[3]["content"], "     1\tfn main() {}");
    let refusal = &messages[5];
    assert_eq!(refusal["tool_call_id"], "call_w");
    insta::assert_snapshot!(refusal["content"].as_str().unwrap(), @"refused: the /review command limits this turn to these tools: read_file, list_dir, glob, grep (its allowed-tools: Read, Grep); write_file is not one of them, so nothing was run. Use those tools, or tell the user what you would need");
}

/// In a session, the limits and the model belong to the command's turn: the next prompt
/// gets every tool and the session's model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_s_limits_end_with_its_turn() {
    let world = World::new();
    world.write(
        ".claude/commands/look.md",
        "---\nallowed-tools: [Read]\nmodel: small-model\n---\nLook around.\n",
    );
    let (url, server) = MockServer::start(vec![
        MockResponse::text(&["Looked."]),
        MockResponse::text(&["Done."]),
    ])
    .await;
    let env = model_env(&url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = world.run(&[], "/look\nthen anything\n", &env).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["model"], "small-model");
    assert_eq!(
        offered(&requests[0]),
        ["read_file", "list_dir", "glob", "grep"]
    );
    assert_eq!(requests[1].body["model"], "mock-model");
    assert_eq!(offered(&requests[1]).len(), 11);
}

/// A user's own command with `Bash(echo:*)`: `echo` runs without asking (here under `-p`,
/// which otherwise denies every command), anything else is refused by the command's limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_rules_run_matching_commands_without_asking_and_refuse_the_rest() {
    let world = World::new();
    std::fs::create_dir_all(world.cfg.path().join(".claude/commands")).unwrap();
    std::fs::write(
        world.cfg.path().join(".claude/commands/hello.md"),
        "---\nallowed-tools: Bash(echo:*)\n---\nSay hello with bash.\n",
    )
    .unwrap();
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_1"),
                Some("bash"),
                "{\"command\": \"echo hello from bash\"}",
            ),
            tool_call_chunk(
                1,
                Some("call_2"),
                Some("bash"),
                "{\"command\": \"echo hi && touch made.txt\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Said hello."]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "/hello"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(world.read("made.txt").is_none());
    let requests = server.requests();
    assert_eq!(offered(&requests[0]), ["bash"]);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let first = messages[3]["content"].as_str().unwrap();
    assert!(first.contains("hello from bash"), "{first}");
    insta::assert_snapshot!(messages[4]["content"].as_str().unwrap(), @r"refused: in this turn the /hello command allows bash only for Bash(echo:*); `echo hi && touch made.txt` is not covered (every command of a line must match a rule, and substitutions and redirections never do), so nothing was run");
    assert!(
        run.stderr
            .contains("(runs without asking: the /hello command's allowed-tools cover it)"),
        "{}",
        run.stderr
    );
}

/// The same rule in a cloned repository's command does not pre-approve anything until the
/// user trusts the workspace: the call is asked about as usual (here, under `-p`, denied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_command_cannot_pre_approve_bash() {
    let world = World::new();
    world.write(
        ".claude/commands/hello.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nMake a file.\n",
    );
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_1"),
                Some("bash"),
                "{\"command\": \"touch made.txt\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Could not."]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "/hello"]).await;
    // The one change the model tried was denied.
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(world.read("made.txt").is_none());
    let requests = server.requests();
    let answer = requests[1].body["messages"][3]["content"].as_str().unwrap();
    assert!(
        answer.starts_with("this tool call needs approval, and nobody can give it in this headless run; nothing was run."),
        "{answer}"
    );
}

/// `@path` in a `-p` prompt: the model gets the file after the prompt as typed, the user a
/// note per reference, and the session keeps the message with its attachment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_paths_in_the_prompt_are_attached_for_the_model() {
    let world = World::new();
    world.write("notes.md", "# Notes\nship it\n");
    world.write("src/a.rs", "fn a() {}\n");
    let (url, server) = MockServer::start(vec![MockResponse::text(&["Noted."])]).await;
    let prompt = "summarize @notes.md and @src/, not @missing.rs, mail me@example.com";
    let run = run_p(&world, &url, &["-p", prompt]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Noted.\n");
    insta::assert_snapshot!(run.stderr, @r"
    (attached notes.md: 2 lines)
    (attached src/: a directory of 1 entry)
    (not attached: there is no missing.rs in the workspace)
    ");
    let requests = server.requests();
    let sent = requests[0].body["messages"][1]["content"].as_str().unwrap();
    insta::assert_snapshot!(sent, @r#"
    summarize @notes.md and @src/, not @missing.rs, mail me@example.com

    <attachment path="notes.md">
    # Notes
    ship it
    </attachment>

    <attachment path="src/" kind="directory">
    a.rs
    </attachment>
    "#);
    let history = agent_common::replay_history(&world.session_lines());
    assert_eq!(
        history[1]["content"], sent,
        "the session keeps what was sent"
    );
}

/// `--yes --read-only` is accepted: read-only wins, reads run without asking and a write is
/// refused with read-only's message, without a prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yes_with_read_only_reads_without_asking_and_writes_nothing() {
    let world = World::new();
    world.write("src/lib.rs", "fn main() {}\n");
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_r"),
                Some("read_file"),
                "{\"path\": \"src/lib.rs\"}",
            ),
            tool_call_chunk(
                1,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"src/lib.rs\", \"content\": \"changed\\n\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Reviewed; nothing written."]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "review", "--yes", "--read-only"]).await;
    assert_ne!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "Reviewed; nothing written.\n");
    assert_eq!(world.read("src/lib.rs").as_deref(), Some("fn main() {}\n"));
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    insta::assert_snapshot!(
        "yes_read_only",
        format!(
            "exit {:?}\n{}\n---\n{}",
            run.code,
            results.join("\n---\n"),
            world.normalize(&run.stderr)
        )
    );
}

/// The model starts a web server in the background, fetches a page from it with a
/// foreground command, reads the server's log with `bash_output` and stops it with
/// `bash_kill`; no process of it is left, and `turn_end` listed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_runs_a_server_in_the_background_reads_it_and_stops_it() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let world = World::new();
    world.write("page.txt", "served by the background\n");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let marker = format!("bg-server-marker-{port}");
    let serve = format!("exec python3 -m http.server {port} --bind 127.0.0.1 # {marker}");
    let fetch = format!(
        "python3 -c \"import time, urllib.request\nfor _ in range(400):\n    try:\n        \
         print(urllib.request.urlopen('http://127.0.0.1:{port}/page.txt').read().decode(), \
         end='')\n        break\n    except OSError:\n        time.sleep(0.05)\""
    );
    let model = world.replay(&serde_json::json!({"responses": [
        {"text": "Starting it.", "tool_calls": [
            {"name": "bash", "arguments": {"command": serve, "run_in_background": true}}]},
        {"text": "Fetching.", "tool_calls": [
            {"name": "bash", "arguments": {"command": fetch}}]},
        {"text": "Its log.", "tool_calls": [
            {"name": "bash_output", "arguments": {"id": "b1", "filter": "GET /page"}}]},
        {"text": "Stopping it.", "tool_calls": [
            {"name": "bash_kill", "arguments": {"id": "b1"}}]},
        {"text": "Done."}
    ]}));
    let run = world
        .run(
            &["-p", "serve it", "--model", &model, "--yes", "--json"],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let results = world.tool_results();
    if results[0].contains("cannot start the command") {
        eprintln!(
            "skipped: background commands cannot run here: {}",
            results[0]
        );
        return;
    }
    assert!(
        results[0].contains("started in the background as b1"),
        "{results:?}"
    );
    assert!(
        results[1].contains("served by the background"),
        "{results:?}"
    );
    assert!(
        results[2].contains("\"GET /page.txt HTTP/1.1\" 200"),
        "{results:?}"
    );
    assert!(results[3].contains("b1: stopped"), "{results:?}");
    let turn_end = run
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "turn_end")
        .unwrap();
    assert_eq!(turn_end["background"][0]["id"], "b1", "{turn_end}");
    assert_eq!(turn_end["background"][0]["status"], "killed", "{turn_end}");
    assert_eq!(
        support::procs::processes_with(&marker),
        Vec::<String>::new()
    );
}

/// `shiro -p` stops the background commands still running when its turn ends, says so, and
/// leaves no process; a SIGKILL of shiro mid-turn leaves none either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_commands_end_with_the_run_and_with_a_killed_shiro() {
    let world = World::new();
    let marker = format!("bg-end-marker-{}", std::process::id());
    let start = |n: u32| {
        serde_json::json!({"name": "bash", "arguments": {
            "command": format!("setsid sleep 600 & sleep 600 # {marker}-{n}"),
            "run_in_background": true}})
    };
    let model = world.replay(&serde_json::json!({"responses": [
        {"text": "Two.", "tool_calls": [start(1), start(2)]},
        {"text": "Left running."}
    ]}));
    let run = world
        .run(&["-p", "start two", "--model", &model, "--yes"], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    if run.stderr.contains("cannot start the command") {
        eprintln!(
            "skipped: background commands cannot run here: {}",
            run.stderr
        );
        return;
    }
    assert!(
        run.stderr
            .contains("stopped 2 background commands: b1 (setsid sleep 600"),
        "{}",
        run.stderr
    );
    assert_eq!(
        support::procs::processes_with(&marker),
        Vec::<String>::new()
    );

    // Resumed, the session names them and does not restart them.
    let session = world.sessions()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let model = world.replay(&serde_json::json!({"responses": [{"text": "Noted."}]}));
    let run = world
        .run(
            &["-p", "what runs?", "--resume", &session, "--model", &model],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "when this session last ended, background commands were running: b1 (setsid sleep \
             600"
        ) && run.stderr.contains("b2 (setsid"),
        "{}",
        run.stderr
    );

    // Killed while it waits for the model, with two commands running.
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("c1"),
                Some("bash"),
                &start(3)["arguments"].to_string(),
            ),
            tool_call_chunk(
                1,
                Some("c2"),
                Some("bash"),
                &start(4)["arguments"].to_string(),
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::never_answer(),
    ])
    .await;
    let mut child = world
        .spawn(
            &["-p", "start two more", "--yes"],
            "",
            &[
                ("OPENAI_BASE_URL", url.as_str()),
                ("SHIRO_MODEL", "mock-model"),
            ],
        )
        .await;
    for _ in 0..600 {
        if support::procs::processes_with(&format!("{marker}-4")).len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!support::procs::processes_with(&format!("{marker}-3")).is_empty());
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(
        support::procs::left_after_kill(&marker),
        Vec::<String>::new()
    );
}

/// What a background command changes in an ignored directory is named with a turn: in
/// `shiro log`, and by `shiro undo`, which cannot restore it. The second prompt is sent once
/// the change is on disk, so its turn's end has it to name if the start's result did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_change_is_named_by_the_log_and_by_undo() {
    use tokio::io::AsyncWriteExt as _;
    let world = World::new();
    world.write(".gitignore", "build/\n");
    world.write("build/old.o", "old\n");
    world.write("notes.txt", "mine\n");
    let model = world.replay(&serde_json::json!({"responses": [
        {"text": "Building.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "notes.txt", "content": "theirs\n"}},
            {"name": "bash", "arguments": {
                "command": "echo new > build/new.o", "run_in_background": true}}]},
        {"text": "Started."},
        {"text": "Noted."}
    ]}));
    let mut child = world
        .command(&["--model", &model, "--yes"], &[])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"build it\n").await.unwrap();
    for _ in 0..1200 {
        if world.read("build/new.o").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    stdin.write_all(b"what changed?\n").await.unwrap();
    drop(stdin);
    let run = agent_common::finish(child).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    if world.tool_results()[1].contains("cannot start the command") {
        eprintln!("skipped: background commands cannot run here");
        return;
    }
    assert_eq!(world.read("build/new.o").as_deref(), Some("new\n"));
    let log = world.run(&["log"], "", &[]).await;
    assert!(log.stdout.contains("build/new.o"), "{}", log.stdout);
    let mut undone = String::new();
    for _ in 0..2 {
        let undo = world.run(&["undo"], "", &[]).await;
        undone.push_str(&undo.stdout);
        undone.push_str(&undo.stderr);
    }
    assert!(undone.contains("build/new.o"), "{undone}");
    // The recorded edit is undone; the background change is named, and stays.
    assert_eq!(world.read("notes.txt").as_deref(), Some("mine\n"));
    assert_eq!(world.read("build/new.o").as_deref(), Some("new\n"));
}

/// `-p` with nothing to say is a usage error (exit 2): no session is made and nothing is
/// sent, not even with piped input, which goes after a prompt rather than in place of one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_prompt_is_a_usage_error_and_sends_nothing() {
    let world = World::new();
    let (url, server) = MockServer::start(vec![MockResponse::text(&["an answer"])]).await;
    let env = model_env(&url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut said = Vec::new();
    for prompt in ["", "  \n\t "] {
        let run = world.run(&["-p", prompt], "piped text\n", &env).await;
        assert_eq!(run.code, Some(2), "{run:?}");
        assert_eq!(run.stdout, "");
        said.push(run.stderr);
    }
    assert_eq!(said[0], said[1], "only whitespace is empty too");
    insta::assert_snapshot!(said[0], @r#"
    error: the prompt is empty: -p takes the text to send to the model, e.g. shiro -p "explain src/main.rs" (piped input goes after it, not in its place)

    Usage: shiro [OPTIONS] [COMMAND]

    For more information, try '--help'.
    "#);
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    assert!(world.sessions().is_empty(), "{:?}", world.sessions());
}

/// A replay script that does not parse is named, with the place in it, so that the user can
/// find the mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replay_script_is_named_with_its_line_and_column() {
    let world = World::new();
    let script = world.cfg.path().join("broken.json");
    std::fs::write(&script, "{\"responses\": [\n  {\"text\": \"hi\",}\n]}\n").unwrap();
    let model = format!("replay:{}", script.display());
    let run = world.run(&["-p", "hi", "--model", &model], "", &[]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!(world.normalize(&run.stderr), @"turn stopped: invalid replay script [CFG]/broken.json: trailing comma at line 2 column 17");
}

/// `-p` with a command name that several commands match is refused as a session refuses it,
/// rather than sent to the model as text; nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_command_under_p_is_a_usage_error() {
    let world = World::new();
    world.write(
        ".claude/commands/git/commit.md",
        "Commit with git: $ARGUMENTS\n",
    );
    world.write(
        ".claude/commands/hg/commit.md",
        "Commit with hg: $ARGUMENTS\n",
    );
    let (url, server) = MockServer::start(vec![MockResponse::text(&["an answer"])]).await;
    let run = run_p(&world, &url, &["-p", "/commit a"]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    insta::assert_snapshot!(run.stderr, @"shiro: /commit is ambiguous: /git:commit or /hg:commit; name the one to run; nothing was sent");
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}
