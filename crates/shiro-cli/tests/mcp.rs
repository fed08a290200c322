//! `shiro mcp` end to end: a real MCP client (rmcp's client side) talks to the built binary
//! over stdio. It lists the tools, edits, undoes and redoes, groups calls into one turn, hits
//! a conflict, and goes away in the middle of a call; the terminal's `shiro undo` and `shiro
//! log` share the same undo log.
#![allow(clippy::unwrap_used, clippy::print_stderr)] // A test says why it skips.

use crate::agent_common;
use crate::support;

use std::collections::HashMap;
use std::process::Stdio;

use agent_common::World;
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, Request,
};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

type Client = RunningService<RoleClient, ClientConfig>;

/// The client's name, which the turns' summaries carry.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("e2e", "1.0.0"),
    )
}

/// Starts `shiro mcp ARGS` in the world's workspace and connects to it.
async fn connect(world: &World, args: &[&str]) -> Client {
    let mut all = vec!["mcp"];
    all.extend_from_slice(args);
    let command = world.command(&all, &[]);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    client_config().serve(transport).await.unwrap()
}

/// Calls `name` with `args` and returns its result (a protocol error fails the test).
async fn call(client: &Client, name: &'static str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args))
        .await
        .unwrap()
}

/// The text of a result.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| content.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn failed(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[tokio::test]
async fn lists_the_tools_with_the_schemas_the_agent_sends_models() {
    let world = World::new();
    let client = connect(&world, &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
    // The very schemas of shiro-tools: they come from the same serde types.
    for tool in shiro_tools::tools::all() {
        let listed = tools.iter().find(|t| t.name == tool.name()).unwrap();
        assert_eq!(Value::Object((*listed.input_schema).clone()), tool.schema());
        // `bash` describes the capture it runs with: the server's records what it changes.
        if tool.name() == "bash" {
            assert!(
                listed
                    .description
                    .as_deref()
                    .unwrap()
                    .contains("can be undone")
            );
        } else {
            assert_eq!(listed.description.as_deref(), Some(tool.description()));
        }
    }
    let listed: Vec<Value> = tools
        .iter()
        .map(|tool| serde_json::to_value(tool).unwrap())
        .collect();
    insta::assert_json_snapshot!("mcp_tools", listed);
}

#[tokio::test]
async fn edits_are_undone_and_redone_and_shared_with_the_terminal() {
    let world = World::new();
    world.write("a.txt", "one\ntwo\n");
    let client = connect(&world, &[]).await;

    let edited = call(
        &client,
        "edit_file",
        json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
    )
    .await;
    assert!(!failed(&edited), "{}", text(&edited));
    assert_eq!(world.read("a.txt").unwrap(), "one\nTWO\n");
    let structured = edited.structured_content.clone().unwrap();
    assert_eq!(structured["turn"], json!(1));
    assert_eq!(
        structured["changes"],
        json!([{"kind": "modified", "path": "a.txt"}])
    );

    // The terminal sees the client's turn, named after it.
    let log = world.run(&["log"], "", &[]).await;
    assert!(
        log.stdout.contains("\"mcp: e2e: edit_file a.txt\""),
        "{}",
        log.stdout
    );

    let undone = call(&client, "undo", json!({})).await;
    assert!(!failed(&undone), "{}", text(&undone));
    assert_eq!(world.read("a.txt").unwrap(), "one\ntwo\n");
    let redone = call(&client, "redo", json!({})).await;
    assert!(!failed(&redone), "{}", text(&redone));
    assert_eq!(world.read("a.txt").unwrap(), "one\nTWO\n");

    // `shiro undo` in a terminal undoes what the client did …
    let run = world.run(&["undo"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(world.read("a.txt").unwrap(), "one\ntwo\n");
    // … and the client's undo what the terminal did.
    let run = world
        .run(
            &[
                "tool",
                "write_file",
                "--args",
                r#"{"path":"b.txt","content":"b\n"}"#,
            ],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let undone = call(&client, "undo", json!({})).await;
    assert!(!failed(&undone), "{}", text(&undone));
    assert!(world.read("b.txt").is_none());

    // Bad arguments get the text a model of the agent would get, as a tool error.
    let bad = call(&client, "edit_file", json!({"path": "a.txt"})).await;
    assert!(failed(&bad));
    insta::assert_snapshot!(text(&bad), @"invalid arguments for edit_file: missing field `old_string`; nothing was changed");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_group_of_calls_is_one_turn() {
    let world = World::new();
    world.write("a.txt", "a\n");
    let client = connect(&world, &[]).await;
    let begun = call(&client, "begin_turn", json!({"summary": "rename things"})).await;
    assert!(!failed(&begun), "{}", text(&begun));
    for (path, content) in [("a.txt", "A\n"), ("b.txt", "B\n")] {
        let written = call(
            &client,
            "write_file",
            json!({"path": path, "content": content}),
        )
        .await;
        assert!(!failed(&written), "{}", text(&written));
    }
    let ended = call(&client, "end_turn", json!({})).await;
    insta::assert_snapshot!(text(&ended), @r#"closed the group as turn #1 "mcp: e2e: rename things" (undo reverts it)"#);

    // One undo reverts the whole step.
    let undone = call(&client, "undo", json!({})).await;
    assert!(!failed(&undone), "{}", text(&undone));
    assert_eq!(world.read("a.txt").unwrap(), "a\n");
    assert!(world.read("b.txt").is_none());
    let log = call(&client, "log", json!({})).await;
    assert_eq!(log.structured_content.unwrap()["redo"], json!([1]));
    client.cancel().await.unwrap();
}

/// `undo {"to": N}` rewinds to before turn N: it and the later turns of headless commands
/// (every call of the server is one) go back as one restore, and one `redo` brings them all
/// back; `redo` takes no `to`.
#[tokio::test]
async fn undo_to_rewinds_several_turns_as_one_restore() {
    let world = World::new();
    let client = connect(&world, &[]).await;
    for (path, content) in [("a.txt", "1\n"), ("b.txt", "2\n"), ("a.txt", "3\n")] {
        let written = call(
            &client,
            "write_file",
            json!({"path": path, "content": content}),
        )
        .await;
        assert!(!failed(&written), "{}", text(&written));
    }
    let rewound = call(&client, "undo", json!({"to": 2})).await;
    assert!(!failed(&rewound), "{}", text(&rewound));
    assert!(
        text(&rewound).contains("and 1 later turn (#3)"),
        "{}",
        text(&rewound)
    );
    assert_eq!(world.read("a.txt").unwrap(), "1\n");
    assert!(world.read("b.txt").is_none());
    let log = call(&client, "log", json!({})).await;
    assert_eq!(log.structured_content.unwrap()["redo"], json!([2, 3]));
    let refused = call(&client, "redo", json!({"to": 2})).await;
    assert!(failed(&refused), "{}", text(&refused));
    let redone = call(&client, "redo", json!({})).await;
    assert!(!failed(&redone), "{}", text(&redone));
    assert_eq!(world.read("a.txt").unwrap(), "3\n");
    assert_eq!(world.read("b.txt").unwrap(), "2\n");
    let missing = call(&client, "undo", json!({"to": 42})).await;
    assert!(failed(&missing), "{}", text(&missing));

    // `turn` reverts one turn alone, as a new turn; `to` and `turn` together are refused.
    let reverted = call(&client, "undo", json!({"turn": 2})).await;
    assert!(!failed(&reverted), "{}", text(&reverted));
    assert!(
        text(&reverted).contains("reverted turn #2"),
        "{}",
        text(&reverted)
    );
    assert_eq!(world.read("a.txt").unwrap(), "3\n");
    assert!(world.read("b.txt").is_none());
    let both = call(&client, "undo", json!({"to": 1, "turn": 2})).await;
    assert!(failed(&both), "{}", text(&both));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_idle_gap_closes_a_group() {
    let world = World::new();
    let client = connect(&world, &["--group-idle", "1"]).await;
    call(&client, "begin_turn", json!({})).await;
    let written = call(
        &client,
        "write_file",
        json!({"path": "a.txt", "content": "a\n"}),
    )
    .await;
    assert!(!failed(&written), "{}", text(&written));
    let structured = written.structured_content.unwrap();
    assert_eq!(structured["group_open"], json!(true));
    assert!(structured["turn"].is_u64(), "{structured}");
    // The same write again changes nothing: it names no turn, in a group too.
    let again = call(
        &client,
        "write_file",
        json!({"path": "a.txt", "content": "a\n"}),
    )
    .await;
    let structured = again.structured_content.unwrap();
    assert_eq!(structured["group_open"], json!(true));
    assert_eq!(structured["turn"], json!(null), "{structured}");
    // The terminal's undo waits for the store's lock, which the group holds until the gap
    // has passed without a call.
    let run = world.run(&["undo"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(world.read("a.txt").is_none());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_conflict_is_a_structured_error_that_changes_nothing() {
    let world = World::new();
    world.write("a.txt", "mine\n");
    let client = connect(&world, &[]).await;
    call(
        &client,
        "write_file",
        json!({"path": "a.txt", "content": "agent\n"}),
    )
    .await;
    world.write("a.txt", "edited by hand\n");

    let refused = call(&client, "undo", json!({})).await;
    assert!(failed(&refused));
    assert_eq!(world.read("a.txt").unwrap(), "edited by hand\n");
    let report = refused.structured_content.clone().unwrap();
    assert_eq!(report["refused"], json!(true));
    assert_eq!(report["direction"], json!("undo"));
    assert_eq!(report["conflicts"][0]["path"], json!("a.txt"));
    insta::assert_snapshot!("mcp_conflict", text(&refused));

    // A dry run shows the diff, says the undo would be refused, and changes nothing.
    let preview = call(&client, "undo", json!({"dry_run": true})).await;
    assert!(!failed(&preview), "{}", text(&preview));
    assert!(text(&preview).contains("+mine"), "{}", text(&preview));
    let structured = preview.structured_content.unwrap();
    assert_eq!(structured["would_be_refused"], json!(true));
    assert_eq!(world.read("a.txt").unwrap(), "edited by hand\n");

    let forced = call(&client, "undo", json!({"force": true})).await;
    assert!(!failed(&forced), "{}", text(&forced));
    assert_eq!(world.read("a.txt").unwrap(), "mine\n");
    client.cancel().await.unwrap();
}

/// Whether bash runs over an overlay here (it needs a mount namespace).
async fn overlays_work() -> bool {
    let world = World::new();
    let run = world
        .run(
            &["tool", "bash", "--args", r#"{"command":"true"}"#],
            "",
            &[],
        )
        .await;
    let refused = run.stdout.contains("fell back to detect-only");
    if refused {
        eprintln!(
            "skipped: overlays are refused on this machine: {}",
            run.stdout
        );
    }
    !refused
}

/// The server starts each bash command's overlay helper as the one before finishes
/// (`Overlay::start_ahead`): the first command runs in a helper started for it, the next in
/// the one that waited. The sandbox is off so that the command sees the host's `/proc`,
/// where it reads the first argument its helper was started with.
#[tokio::test]
async fn the_server_starts_each_commands_helper_ahead() {
    use shiro_tools::capture::{HELPER_OVERLAY, HELPER_READY};

    if !overlays_work().await {
        return;
    }
    let world = World::new();
    std::fs::write(
        world.cfg.path().join("config.toml"),
        "[bash]\nsandbox = \"off\"\n",
    )
    .unwrap();
    let client = connect(&world, &[]).await;
    let who = "read -r _ _ _ init _ < /proc/self/stat; \
               read -r _ _ _ helper _ < /proc/$init/stat; \
               tr '\\0' '\\n' < /proc/$helper/cmdline | sed -n 2p > helper.txt";
    for started in [HELPER_OVERLAY, HELPER_READY, HELPER_READY] {
        let result = call(&client, "bash", json!({ "command": who })).await;
        assert!(!failed(&result), "{}", text(&result));
        assert_eq!(world.read("helper.txt").unwrap().trim(), started);
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_survives_its_client_going_away_and_is_undone_after() {
    if !overlays_work().await {
        return;
    }
    let world = World::new();
    world.write("a.txt", "before\n");
    // The client owns the server's pipes; going away closes them, as a client that quits
    // does. (The SDK's child-process transport would kill the server instead.)
    let mut child = world.command(&["mcp"], &[]).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let client = client_config().serve((stdout, stdin)).await.unwrap();

    let (started, command) = slow_command(&world);
    let peer = client.peer().clone();
    let call = tokio::spawn(async move {
        let Value::Object(args) = json!({"command": command}) else {
            unreachable!()
        };
        peer.call_tool(CallToolRequestParams::new("bash").with_arguments(args))
            .await
    });
    while !started.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The client goes away mid-call: once the server has seen it go and ended the session
    // (after the SDK's grace period for responses), the command is stopped as a cancelled
    // one is, and what it changed is recorded.
    drop(client);
    let _ = call.await;
    let said = stderr.next_line().await.unwrap().unwrap();
    assert_eq!(
        said,
        "shiro: the client went away during a call: finishing it and recording its turn before exiting"
    );
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(world.read("a.txt").unwrap(), "during");
    let log = world.run(&["log"], "", &[]).await;
    assert!(
        log.stdout.contains("mcp: e2e: bash printf during"),
        "{}",
        log.stdout
    );

    // A new client undoes it exactly.
    let client = connect(&world, &[]).await;
    let undone = call_undo(&client).await;
    assert!(!failed(&undone), "{}", text(&undone));
    assert_eq!(world.read("a.txt").unwrap(), "before\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_bash_call_stops_its_command_and_records_what_it_did() {
    if !overlays_work().await {
        return;
    }
    let world = World::new();
    world.write("a.txt", "before\n");
    let client = connect(&world, &[]).await;
    let (started, command) = slow_command(&world);
    let Value::Object(args) = json!({"command": command}) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("bash").with_arguments(args),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    while !started.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle
        .cancel(Some("the user pressed Esc".into()))
        .await
        .unwrap();
    // The next call that changes files waits for the cancelled one to finish; had its
    // command not been stopped, that would be 30 s on, with "after" written.
    let next = call(
        &client,
        "write_file",
        json!({"path": "b.txt", "content": "b\n"}),
    )
    .await;
    assert!(!failed(&next), "{}", text(&next));
    assert_eq!(world.read("a.txt").unwrap(), "during");
    // The cancelled call's turn was recorded: undoing both puts a.txt back.
    for _ in 0..2 {
        let undone = call_undo(&client).await;
        assert!(!failed(&undone), "{}", text(&undone));
    }
    assert_eq!(world.read("a.txt").unwrap(), "before\n");
    assert_eq!(world.read("b.txt"), None);
    client.cancel().await.unwrap();
}

/// A bash command that writes `during` to a.txt, touches the file returned once it has, and
/// would write `after` 30 s later, were it not stopped.
fn slow_command(world: &World) -> (std::path::PathBuf, String) {
    let started = world.cfg.path().join("started");
    let command = format!(
        "printf during > a.txt; touch {started}; sleep 30; printf after > a.txt",
        started = started.display(),
    );
    (started, command)
}

async fn call_undo(client: &Client) -> CallToolResult {
    call(client, "undo", json!({})).await
}

/// Whether `value` holds a server entry `shiro` that starts `shiro mcp`.
fn starts_shiro_mcp(value: &Value) -> bool {
    let starts = |server: &Value| match &server["command"] {
        Value::String(command) => command == "shiro" && server["args"][0] == json!("mcp"),
        Value::Array(words) => {
            words.first() == Some(&json!("shiro")) && words.get(1) == Some(&json!("mcp"))
        }
        _ => false,
    };
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, inner)| (key == "shiro" && starts(inner)) || starts_shiro_mcp(inner)),
        _ => false,
    }
}

#[test]
fn the_configuration_blocks_in_docs_mcp_are_valid() {
    let doc = include_str!("../../../docs/mcp.md");
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in doc.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    let mut checked = Vec::new();
    let mut client_blocks = 0;
    for (lang, body) in &blocks {
        // The client's side: `[mcp.servers]` of shiro's own config, loaded as shiro loads it.
        if lang == "toml" && body.contains("[mcp.servers.") {
            let world = World::new();
            world.write(".shiro/config.toml", body);
            let config = shiro_agent::config::Config::load(&world.root(), None)
                .unwrap_or_else(|err| panic!("{err:#}:\n{body}"));
            assert!(!config.mcp_servers.is_empty(), "{body}");
            client_blocks += 1;
            continue;
        }
        let value: Value = match lang.as_str() {
            "json" => serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}:\n{body}")),
            "toml" => serde_json::to_value(
                toml::from_str::<toml::Value>(body).unwrap_or_else(|err| panic!("{err}:\n{body}")),
            )
            .unwrap(),
            _ => continue,
        };
        // The client's side again: a `.mcp.json`, read as shiro reads it.
        if lang == "json" && !starts_shiro_mcp(&value) && value.get("mcpServers").is_some() {
            let world = World::new();
            world.write(".mcp.json", body);
            let (specs, notes) =
                shiro_mcp::mcp_json::read(&world.root(), &|_| Some("set".to_owned()));
            assert!(notes.is_empty() && !specs.is_empty(), "{notes:?}:\n{body}");
            client_blocks += 1;
            continue;
        }
        assert!(
            starts_shiro_mcp(&value),
            "this block does not start `shiro mcp`:\n{body}"
        );
        checked.push(format!("```{lang}\n{body}```"));
    }
    // Claude Code, Codex CLI, OpenCode, Gemini CLI and Cursor; and shiro's own client, in
    // its config and in `.mcp.json`.
    assert_eq!(checked.len(), 5, "{checked:#?}");
    assert_eq!(client_blocks, 2);
    insta::assert_snapshot!("mcp_docs_configuration", checked.join("\n"));
}

/// The token the HTTP tests' servers take.
const TOKEN: &str = "tok-http-0123456789abcdef";

/// `shiro mcp --http` on a port the system picks, in `world`, taking [`TOKEN`]: the server,
/// and the URL it said it serves at.
async fn serve_http(world: &World) -> (tokio::process::Child, String) {
    let mut command = world.command(
        &["mcp", "--http", "127.0.0.1:0"],
        &[("SHIRO_MCP_TOKEN", TOKEN)],
    );
    let mut server = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let first = stderr.next_line().await.unwrap().unwrap();
    let url = first
        .strip_prefix("shiro: serving MCP at ")
        .and_then(|rest| rest.split_once(' '))
        .map(|(url, _)| url.to_owned())
        .unwrap_or_else(|| panic!("{first}"));
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    (server, url)
}

/// Stops `server` with SIGINT, as a person does with Ctrl-C: it exits 130.
async fn interrupt(mut server: tokio::process::Child) {
    std::process::Command::new("kill")
        .args(["-INT", &server.id().unwrap().to_string()])
        .status()
        .unwrap();
    let status = server.wait().await.unwrap();
    assert_eq!(status.code(), Some(130));
}

/// `shiro mcp --http`: two clients reach one server with the token and share its undo log;
/// a request without the token, from a browser page (`Origin`) or under another `Host` is
/// refused; SIGINT stops the server, which says why it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_clients_share_one_log_and_need_the_token() {
    let world = World::new();
    world.write("a.txt", "one\n");
    let (server, url) = serve_http(&world).await;

    let writer = shiro_mcp::http::connect(&url, Some(TOKEN.to_owned()), client_config())
        .await
        .unwrap();
    let edited = call(
        &writer,
        "edit_file",
        json!({"path": "a.txt", "old_string": "one", "new_string": "ONE"}),
    )
    .await;
    assert!(!failed(&edited), "{}", text(&edited));
    assert_eq!(world.read("a.txt").unwrap(), "ONE\n");
    // A second client sees the first one's turn and undoes it.
    let other = shiro_mcp::http::connect(&url, Some(TOKEN.to_owned()), client_config())
        .await
        .unwrap();
    let log = call(&other, "log", json!({})).await;
    assert!(text(&log).contains("edit_file a.txt"), "{}", text(&log));
    let undone = call(&other, "undo", json!({})).await;
    assert!(!failed(&undone), "{}", text(&undone));
    assert_eq!(world.read("a.txt").unwrap(), "one\n");

    // Without the token, with a wrong one: refused.
    for token in [None, Some("tok-http-0123456789abcdeX".to_owned())] {
        let refused = shiro_mcp::http::connect(&url, token, client_config()).await;
        let why = refused.err().unwrap();
        assert!(why.contains("401"), "{why}");
    }
    // A browser page, or a name that resolves to this machine (DNS rebinding): refused,
    // though they carry the token.
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "page", "version": "1"}}});
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp");
    for (header, value, status) in [
        ("x-control", String::new(), 200),
        ("origin", "https://evil.example".to_owned(), 403),
        ("host", format!("evil.example:{port}"), 403),
    ] {
        let response = http
            .post(&url)
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header(header, value)
            .json(&initialize)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{header}");
    }
    writer.cancel().await.unwrap();
    other.cancel().await.unwrap();

    interrupt(server).await;
    assert_eq!(world.read("a.txt").unwrap(), "one\n");
}

/// `--http` without a token, with a short one, or on an address other machines reach: a
/// clear error, and nothing listens. The address is refused as a usage error (exit 2),
/// before the token is looked at.
#[tokio::test]
async fn over_http_a_token_and_a_loopback_address_are_required() {
    let world = World::new();
    let cases: [(&str, &[(&str, &str)]); 3] = [
        ("127.0.0.1:0", &[]),
        ("127.0.0.1:0", &[("SHIRO_MCP_TOKEN", "short")]),
        (
            "0.0.0.0:0",
            &[("SHIRO_MCP_TOKEN", "tok-http-0123456789abcdef")],
        ),
    ];
    let mut errors = Vec::new();
    for (addr, env) in cases {
        let run = world.run(&["mcp", "--http", addr], "", env).await;
        // A token is not the command line's; the address is, and a refused one is a usage
        // error, whatever the token.
        let usage = addr.starts_with("0.0.0.0");
        assert_eq!(run.code, Some(if usage { 2 } else { 1 }), "{run:?}");
        errors.push(run.stderr.trim_end().to_owned());
    }
    let run = world.run(&["mcp", "--http", "0.0.0.0:0"], "", &[]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(
        Some(run.stderr.trim_end()),
        errors.last().map(String::as_str)
    );
    insta::assert_snapshot!(errors.join("\n"));
}

/// `shiro mcp` runs background commands as the agent does: started with `bash`, read with
/// `bash_output`, and ended when the client goes away (the server's pipes close).
#[tokio::test]
async fn background_commands_end_when_the_client_goes_away() {
    if !overlays_work().await {
        return;
    }
    let world = World::new();
    let marker = format!("mcp-bg-marker-{}", std::process::id());
    let mut child = world.command(&["mcp"], &[]).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let client = client_config().serve((stdout, stdin)).await.unwrap();
    let command = format!("echo up; sleep 600 # {marker}");
    let started = call(
        &client,
        "bash",
        json!({"command": command, "run_in_background": true}),
    )
    .await;
    assert!(!failed(&started), "{}", text(&started));
    assert!(
        text(&started).contains("started in the background as b1"),
        "{}",
        text(&started)
    );
    let read = call(&client, "bash_output", json!({"id": "b1"})).await;
    assert!(text(&read).ends_with("[b1: running]"), "{}", text(&read));
    assert!(!support::procs::processes_with(&marker).is_empty());
    drop(client);
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        support::procs::left_after_kill(&marker),
        Vec::<String>::new()
    );
}

/// Over HTTP, each client's session has background commands of its own: another client can
/// neither read nor stop them, and they end when their session does (the client closes it),
/// while the other session's keep running until the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_background_commands_belong_to_their_session() {
    if !overlays_work().await {
        return;
    }
    let world = World::new();
    let (server, url) = serve_http(&world).await;
    let connect = || shiro_mcp::http::connect(&url, Some(TOKEN.to_owned()), client_config());
    let first = connect().await.unwrap();
    let second = connect().await.unwrap();
    let marker = |who: &str| format!("mcp-http-bg-{who}-{}", std::process::id());
    let start = |client, who: &str| {
        let command = format!("echo up; sleep 600 # {}", marker(who));
        call(
            client,
            "bash",
            json!({"command": command, "run_in_background": true}),
        )
    };
    let started = start(&first, "first").await;
    assert!(
        text(&started).contains("started in the background as b1"),
        "{}",
        text(&started)
    );
    // The second session sees none of the first one's commands, and numbers its own anew.
    let foreign = call(&second, "bash_output", json!({"id": "b1"})).await;
    assert!(failed(&foreign), "{}", text(&foreign));
    let refused = call(&second, "bash_kill", json!({"id": "b1"})).await;
    assert!(failed(&refused), "{}", text(&refused));
    let started = start(&second, "second").await;
    assert!(
        text(&started).contains("started in the background as b1"),
        "{}",
        text(&started)
    );
    assert!(!support::procs::processes_with(&marker("first")).is_empty());

    first.cancel().await.unwrap();
    assert_eq!(
        support::procs::left_after_kill(&marker("first")),
        Vec::<String>::new()
    );
    let read = call(&second, "bash_output", json!({"id": "b1"})).await;
    assert!(text(&read).ends_with("[b1: running]"), "{}", text(&read));
    assert!(!support::procs::processes_with(&marker("second")).is_empty());

    interrupt(server).await;
    assert_eq!(
        support::procs::left_after_kill(&marker("second")),
        Vec::<String>::new()
    );
}

/// The calls of the pipelining tests, as (name, arguments), each the next id from 1 on:
/// a.txt written, then edited ten times, each edit building on the one before and followed by
/// a read of it; eight files written, each its own turn; an undo, which must take back the
/// last of them; and the log, which must list every turn in the order sent.
fn pipelined_calls() -> Vec<(&'static str, Value)> {
    let mut calls = vec![("write_file", json!({"path": "a.txt", "content": "0\n"}))];
    for k in 1..=EDITS {
        let (old, new) = ((k - 1).to_string(), k.to_string());
        calls.push((
            "edit_file",
            json!({"path": "a.txt", "old_string": old, "new_string": new}),
        ));
        calls.push(("read_file", json!({"path": "a.txt"})));
    }
    for i in 1..=FILES {
        let path = format!("f{i}.txt");
        calls.push(("write_file", json!({"path": path, "content": "f\n"})));
    }
    calls.push(("undo", json!({})));
    calls.push(("log", json!({})));
    calls
}

const EDITS: usize = 10;
const FILES: usize = 8;

/// The request of [`pipelined_calls`]'s call `index`.
fn pipelined_request(index: usize, (name, args): &(&str, Value)) -> Value {
    tool_request(index as u64 + 1, name, args)
}

/// A `tools/call` request.
fn tool_request(id: u64, name: &str, args: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": args}})
}

/// Checks that the results of [`pipelined_calls`] (by id) and the workspace are those of
/// running the calls one after another, in the order sent.
fn check_pipelined(world: &World, results: &HashMap<u64, Value>) {
    let calls = pipelined_calls();
    assert_eq!(results.len(), calls.len(), "{results:#?}");
    for (index, (name, _)) in calls.iter().enumerate() {
        let result = &results[&(index as u64 + 1)];
        assert_ne!(
            result["isError"],
            json!(true),
            "call {} ({name}): {result}",
            index + 1
        );
    }
    // Each read sees the edit sent just before it, and no later one.
    for k in 1..=EDITS {
        let read = &results[&(2 * k as u64 + 1)];
        let line = read["content"][0]["text"].as_str().unwrap().lines().next();
        assert_eq!(
            line.and_then(|line| line.split_once('\t'))
                .map(|(_, text)| text),
            Some(k.to_string().as_str()),
            "read {k}: {read}"
        );
    }
    assert_eq!(world.read("a.txt").unwrap(), format!("{EDITS}\n"));
    // The undo took back the last write, and only it.
    for i in 1..FILES {
        assert_eq!(world.read(&format!("f{i}.txt")).unwrap(), "f\n");
    }
    assert_eq!(world.read(&format!("f{FILES}.txt")), None);
    // The log lists the turns in the order their calls were sent (newest first), with the
    // undone one to redo.
    let log = &results[&(calls.len() as u64)]["structuredContent"];
    let summaries: Vec<&str> = log["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["summary"].as_str().unwrap())
        .collect();
    let mut expected = vec!["mcp: e2e: write_file a.txt".to_owned()];
    expected.extend((1..=EDITS).map(|_| "mcp: e2e: edit_file a.txt".to_owned()));
    expected.extend((1..FILES).map(|i| format!("mcp: e2e: write_file f{i}.txt")));
    expected.reverse();
    assert_eq!(summaries, expected);
    let turns = 1 + EDITS + FILES;
    assert_eq!(log["redo"], json!([turns]));
}

/// `shiro mcp` spoken to line by line, as a client that pipelines its calls writes them.
struct Lines {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Lines {
    /// Starts `shiro mcp` in `world`, past the handshake.
    async fn start(world: &World) -> Lines {
        let mut child = world
            .command(&["mcp"], &[])
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = Lines {
            stdin: child.stdin.take().unwrap(),
            stdout: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
        };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}});
        lines.send(&[initialize]).await;
        lines.answers(&[0]).await;
        lines
            .send(&[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})])
            .await;
        lines
    }

    /// Writes `messages`, in one write.
    async fn send(&mut self, messages: &[Value]) {
        use tokio::io::AsyncWriteExt as _;

        let text: String = messages
            .iter()
            .map(|message| format!("{message}\n"))
            .collect();
        self.stdin.write_all(text.as_bytes()).await.unwrap();
    }

    /// Reads answers until those to `ids` have come; returns every answer read, by id.
    async fn answers(&mut self, ids: &[u64]) -> HashMap<u64, Value> {
        let mut answers = HashMap::new();
        while !ids.iter().all(|id| answers.contains_key(id)) {
            let line = self.stdout.next_line().await.unwrap().unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            let id = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
            answers.insert(id, answer);
        }
        answers
    }

    /// Closes the server's input, as a client that is done does, and waits for it to exit.
    async fn close(self) {
        drop(self.stdin);
        let mut child = self.child;
        assert!(child.wait().await.unwrap().success());
    }
}

/// A client may send calls without waiting for the results before (pipelining, as the
/// protocol allows): over stdio they run in the order sent, as if it had waited for each.
/// The server's runtime has worker threads, so this fails when calls are run as they are
/// scheduled rather than in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_calls_run_in_the_order_sent() {
    let world = World::new();
    let mut server = Lines::start(&world).await;
    let calls = pipelined_calls();
    let requests: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, call)| pipelined_request(index, call))
        .collect();
    // Every call in one write, before any result is read.
    server.send(&requests).await;
    let ids: Vec<u64> = (1..=calls.len() as u64).collect();
    let results = server
        .answers(&ids)
        .await
        .into_iter()
        .map(|(id, answer)| (id, answer["result"].clone()))
        .collect();
    server.close().await;
    check_pipelined(&world, &results);
}

/// A call cancelled while it waits for the calls sent before it never starts, and the calls
/// after it run: here a write sent after a command that runs until the test lets it end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_it_waits_never_starts() {
    let world = World::new();
    let fifo = world.cfg.path().join("go");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut server = Lines::start(&world).await;
    let command = format!("cat {} > /dev/null", fifo.display());
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 2, "reason": "the user pressed Esc"}});
    server
        .send(&[
            tool_request(1, "bash", &json!({"command": command})),
            tool_request(2, "write_file", &json!({"path": "b.txt", "content": "b\n"})),
            cancel,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
            tool_request(4, "write_file", &json!({"path": "c.txt", "content": "c\n"})),
        ])
        .await;
    // The server reads its input in order: once it has listed the tools, it has taken the
    // cancellation, while the command still runs.
    server.answers(&[3]).await;
    // Opening the pipe waits for the command to open it; closing it ends the command. (A
    // thread of its own: were the command never to start, the test would fail, not hang.)
    std::thread::spawn(move || drop(std::fs::OpenOptions::new().write(true).open(fifo)));
    let answers = server.answers(&[1, 4]).await;
    for id in [1, 4] {
        assert_ne!(
            answers[&id]["result"]["isError"],
            json!(true),
            "{}",
            answers[&id]
        );
    }
    assert_eq!(world.read("c.txt").unwrap(), "c\n");
    assert_eq!(world.read("b.txt"), None);
    server.close().await;
    let log = world.run(&["log"], "", &[]).await;
    assert!(log.stdout.contains("write_file c.txt"), "{}", log.stdout);
    assert!(!log.stdout.contains("b.txt"), "{}", log.stdout);
}

/// Over HTTP, calls run in the order the server received them, whichever connection each
/// came on: each call here is sent once the one before has been taken (its response's head
/// came back), without waiting for its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_calls_run_in_the_order_received() {
    let world = World::new();
    let (server, url) = serve_http(&world).await;
    let http = shiro_providers::net::client(|builder| builder).unwrap();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(&url)
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}});
    let started = post(initialize, None).await.unwrap();
    assert_eq!(started.status(), 200);
    let session = started.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    started.bytes().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(initialized, Some(&session)).await.unwrap();
    assert_eq!(accepted.status(), 202);

    let mut pending = Vec::new();
    for (index, call) in pipelined_calls().iter().enumerate() {
        let response = post(pipelined_request(index, call), Some(&session))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        pending.push(response);
    }
    let mut results = HashMap::new();
    for response in pending {
        // A server-sent event stream: the answer is the `data` line that has an id.
        let body = response.text().await.unwrap();
        let answer = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
            .unwrap_or_else(|| panic!("{body}"));
        results.insert(answer["id"].as_u64().unwrap(), answer["result"].clone());
    }
    check_pipelined(&world, &results);
    interrupt(server).await;
}
