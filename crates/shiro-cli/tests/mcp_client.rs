//! shiro as an MCP client, end to end: the built `shiro` starts `mcp_fixture_server` (a
//! small MCP server on rmcp's server side, in `tests/src/bin/`), offers its tools to the
//! model, asks before calling them, feeds their results back, and goes on when the server
//! fails to start or dies.
#![allow(clippy::unwrap_used)]

use crate::agent_common;
use crate::support;

use std::path::PathBuf;

use agent_common::World;
use serde_json::{Value, json};
use support::mock_openai::{MockResponse, MockServer, finish_chunk, text_chunk, tool_call_chunk};

/// The fixture server, built beside `shiro` by `cargo test --workspace` (so by `cargo xtask
/// test`).
fn fixture() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_shiro")).with_file_name("mcp_fixture_server");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p shiro-tests --bin mcp_fixture_server` (cargo xtask test does)",
        path.display()
    );
    path
}

/// A `[mcp.servers.NAME]` table that starts the fixture with `args`.
fn server(name: &str, args: &[&str]) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = {:?}\nargs = {args:?}\n",
        fixture().display().to_string()
    )
}

fn user_config(world: &World, text: &str) {
    std::fs::write(world.cfg.path().join("config.toml"), text).unwrap();
}

/// The lines of `text` that start with one of `starts`, but for the note that shiro waits
/// for a server, which depends on the machine's speed.
fn lines(text: &str, starts: &[&str]) -> String {
    text.lines()
        .filter(|line| starts.iter().any(|start| line.starts_with(start)))
        .filter(|line| !line.starts_with(WAITING))
        .collect::<Vec<_>>()
        .join("\n")
}

const WAITING: &str = "note: waiting for the MCP server";

fn normalized(world: &World, text: &str) -> String {
    world
        .normalize(text)
        .replace(&fixture().display().to_string(), "[FIXTURE]")
}

fn call_chunk(id: &str, name: &str, arguments: &Value) -> Vec<Value> {
    vec![
        tool_call_chunk(0, Some(id), Some(name), &arguments.to_string()),
        finish_chunk("tool_calls"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_approved_called_and_their_results_go_to_the_model() {
    let world = World::new();
    user_config(
        &world,
        &format!(
            "{}\n[permissions]\nallow = [\"fixture__echo\"]\n",
            server("fixture", &[])
        ),
    );
    let (url, model) = MockServer::start(vec![
        MockResponse::stream(call_chunk("c1", "fixture__add", &json!({"a": 2, "b": 3}))),
        MockResponse::stream(call_chunk("c2", "fixture__echo", &json!({"text": "hi"}))),
        MockResponse::stream(vec![text_chunk("The sum is 5."), finish_chunk("stop")]),
    ])
    .await;
    let env = [("OPENAI_BASE_URL", url.as_str()), ("SHIRO_MODEL", "mock")];
    // The prompt, "y" to the add, then the servers and one server's tools.
    let run = world
        .run(&[], "add 2 and 3\ny\n/mcp\n/mcp fixture\n", &env)
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");

    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{run:?}");
    // The fixture's tools are offered beside shiro's, named server__tool, with the schemas
    // the server gave.
    let offered: Vec<&Value> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| &tool["function"])
        .filter(|f| f["name"].as_str().unwrap().starts_with("fixture__"))
        .collect();
    insta::assert_json_snapshot!("offered_mcp_tools", offered);
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"edit_file") && names.contains(&"bash"),
        "{names:?}"
    );
    // Each result went back to the model.
    let last_tool = |index: usize| {
        let messages = requests[index].body["messages"].as_array().unwrap();
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(last_tool(1), "5");
    assert_eq!(last_tool(2), "echo: hi");

    let shown = lines(
        &run.stdout,
        &[
            "(an MCP",
            "allow fixture",
            "(runs without",
            "note: this turn",
            "MCP servers",
            "  fixture",
            "fixture:",
            "  command",
            "  configured",
        ],
    );
    insta::assert_snapshot!("approved_and_listed", normalized(&world, &shown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_is_reported_and_the_session_goes_on() {
    let world = World::new();
    user_config(&world, &server("fixture", &[]));
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "fixture__exit", "arguments": {}}]},
        {"text": "", "tool_calls": [{"name": "fixture__echo", "arguments": {"text": "still there?"}}]},
        {"text": "", "tool_calls": [{"name": "write_file", "arguments": {"path": "after.txt", "content": "on\n"}}]},
        {"text": "Carried on."}
    ]}));
    let run = world
        .run(&["-p", "try it", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Carried on.\n");
    // shiro's own tools still work after the server died.
    assert_eq!(world.read("after.txt").as_deref(), Some("on\n"));
    let results = world.tool_results();
    insta::assert_snapshot!("dying_server_results", results[..2].join("\n"));
    insta::assert_snapshot!(
        "dying_server_stderr",
        lines(&run.stderr, &["error:", "note: this turn"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_is_reported_and_workspace_servers_wait_for_trust() {
    let world = World::new();
    user_config(&world, &server("broken", &["--fail-start"]));
    world.write(".shiro/config.toml", &server("repo", &[]));
    // Untrusted: the workspace's server does not start, and its tools are not offered; a
    // model that calls one anyway is told why.
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "repo__echo", "arguments": {"text": "untrusted"}}]},
        {"text": "Hello."}
    ]}));
    let run = world
        .run(&["-p", "hi", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Hello.\n");
    insta::assert_snapshot!(
        "failed_and_untrusted_notes",
        normalized(&world, &lines(&run.stderr, &["note:"]))
    );
    insta::assert_snapshot!("untrusted_call", world.tool_results().join("\n"));

    // /trust starts it; then its tools are called like any.
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "repo__echo", "arguments": {"text": "trusted"}}]},
        {"text": "Done."}
    ]}));
    let run = world
        .run(&["--model", &model, "--yes"], "/trust\nhello\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "trusted_then_started",
        normalized(
            &world,
            &lines(
                &run.stdout,
                &["trusted", "note:", "MCP servers", "  broken", "  repo"]
            )
        )
    );
    let sessions: Vec<String> = world
        .sessions()
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    assert!(
        sessions
            .iter()
            .any(|text| text.contains("\"echo: trusted\"")),
        "{sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_are_flagged_in_the_undo_log_and_undo_leaves_them() {
    let world = World::new();
    user_config(&world, &server("fixture", &[]));
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "mine\n"}},
            {"name": "fixture__write_note", "arguments": {"path": "note.txt", "text": "from the server\n"}}
        ]},
        {"text": "Both written."}
    ]}));
    let run = world
        .run(&["-p", "write both", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("note: this turn called MCP tool fixture__write_note; shiro cannot see what it changed, and /undo does not reverse it"),
        "{}",
        run.stderr
    );
    let log = world.run(&["log"], "", &[]).await;
    insta::assert_snapshot!(
        "log_flags_mcp",
        agent_common::normalize_times(&world.normalize(&log.stdout))
    );
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    insta::assert_snapshot!("undo_notes_mcp", world.normalize(&undo.stdout));
    // shiro's change is undone; the server's is not, and was never claimed to be.
    assert_eq!(world.read("a.txt"), None);
    assert_eq!(world.read("note.txt").as_deref(), Some("from the server\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_and_modes_weigh_mcp_calls_like_bash() {
    let world = World::new();
    user_config(
        &world,
        &format!(
            "{}\n[permissions]\ndeny = [\"mcp__fixture__write_note\"]\n",
            server("fixture", &[])
        ),
    );
    let script = json!({"responses": [
        {"text": "", "tool_calls": [
            {"name": "fixture__write_note", "arguments": {"path": "n.txt", "text": "x"}},
            {"name": "fixture__add", "arguments": {"a": 1, "b": 1}}
        ]},
        {"text": "Tried."}
    ]});
    // Deny beats --yes; the rest runs.
    let run = world
        .run(
            &["-p", "go", "--yes", "--model", &world.replay(&script)],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(world.read("n.txt"), None);
    let got = world.tool_results();
    assert!(
        got[0].starts_with("refused by the permission rule deny mcp__fixture__write_note"),
        "{got:?}"
    );
    assert_eq!(got[1], "2");

    // Without --yes, a headless run cannot ask: both are refused, and it says how to allow.
    let other = World::new();
    user_config(&other, &server("fixture", &[]));
    let run = other
        .run(&["-p", "go", "--model", &other.replay(&script)], "", &[])
        .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("denied: fixture__add"),
        "{}",
        run.stderr
    );

    // Auto-edit runs shiro's file tools without asking, not MCP tools.
    let auto = World::new();
    user_config(&auto, &server("fixture", &[]));
    let script = json!({"responses": [
        {"text": "", "tool_calls": [{"name": "fixture__add", "arguments": {"a": 1, "b": 2}}]},
        {"text": "Asked."}
    ]});
    let run = auto
        .run(
            &["--model", &auto.replay(&script)],
            "/mode auto-edit\nadd\nn\n",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("(an MCP tool: shiro cannot see what it changes"),
        "{}",
        run.stdout
    );
    assert!(
        auto.tool_results()[0].contains("denied"),
        "{:?}",
        auto.tool_results()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_start_brings_back_a_server_that_stopped() {
    let world = World::new();
    user_config(&world, &server("fixture", &[]));
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "fixture__exit", "arguments": {}}]},
        {"text": "It stopped."},
        {"text": "", "tool_calls": [{"name": "fixture__echo", "arguments": {"text": "back"}}]},
        {"text": "It is back."}
    ]}));
    let run = world
        .run(
            &["--model", &model, "--yes"],
            "stop it\n/mcp\n/mcp start\nagain\n",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let results = world.tool_results();
    assert!(
        results[0].starts_with("MCP server fixture stopped during this call"),
        "{results:?}"
    );
    assert_eq!(results[1], "echo: back");
    insta::assert_snapshot!(
        "mcp_start",
        normalized(&world, &lines(&run.stdout, &["MCP servers", "  fixture"]))
    );
}

/// A server slower to start than shiro's patience: the user is told what shiro waits for,
/// and then the server is used as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_start_says_what_shiro_waits_for() {
    let world = World::new();
    user_config(
        &world,
        &format!(
            "{}startup_timeout_secs = 20\n",
            server("slow", &["--slow-start", "2500"])
        ),
    );
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "slow__echo", "arguments": {"text": "late"}}]},
        {"text": "Done."}
    ]}));
    let run = world
        .run(&["-p", "hi", "--yes", "--model", &model], "", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let waited: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.starts_with(WAITING))
        .collect();
    assert_eq!(
        waited,
        ["note: waiting for the MCP server slow to start (at most 20 s: startup_timeout_secs)"]
    );
    assert_eq!(world.tool_results(), ["echo: late"]);
}

/// The workspace's `.mcp.json` (Claude Code's project servers): its variables expanded, its
/// servers waiting for `/trust` and then called like any, an entry shiro cannot use left out
/// with a note, and `read_mcp_json = false` leaving the file unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_of_mcp_json_are_the_workspace_s() {
    let world = World::new();
    world.write(
        ".mcp.json",
        &json!({"mcpServers": {
            "team": {"command": "${FIXTURE_BIN}", "args": ["${FIXTURE_ARGS:-}"]},
            "linear": {"type": "sse", "url": "https://mcp.linear.example/sse"}
        }})
        .to_string(),
    );
    let fixture = fixture().display().to_string();
    let env = [("FIXTURE_BIN", fixture.as_str())];
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [{"name": "team__echo", "arguments": {"text": "from .mcp.json"}}]},
        {"text": "Done."}
    ]}));
    let run = world
        .run(&["--model", &model, "--yes"], "/mcp\n/trust\nhello\n", &env)
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "mcp_json",
        normalized(
            &world,
            &lines(&run.stdout, &["note:", "MCP servers", "  team", "  linear"])
        )
    );
    assert_eq!(world.tool_results(), ["echo: from .mcp.json"]);

    user_config(&world, "[mcp]\nread_mcp_json = false\n");
    let run = world.run(&["--yes"], "/mcp\n", &env).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("no MCP servers"), "{}", run.stdout);
    assert!(!run.stdout.contains(".mcp.json"), "{}", run.stdout);
}
