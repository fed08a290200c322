//! The same end-to-end scenarios through the `shiro` binary on both HTTP providers, each
//! against its mock server on 127.0.0.1: tool calls that write a file (then `shiro undo`),
//! usage in `/cost`, a 429 retried, a 401, a dropped stream, and an API key from
//! `api_key_cmd` that never reaches a file or an output. Each scenario is written once and
//! run for each [`Wire`]; `/model` switching between the two has its own test.
#![allow(clippy::unwrap_used)]

use crate::agent_common;
use crate::support;

use agent_common::{Run, World};
use serde_json::Value;
use support::mock_anthropic::{self as anthropic, Tokens};
use support::mock_openai::{self as openai, MockResponse, MockServer, RecordedRequest};

/// The key `api_key_cmd` prints: the tests look for it everywhere it must not be.
const SECRET: &str = "sk-SECRET-d41d8cd98f00b204e9800998ecf8427e";

/// Which API a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        }
    }

    fn base_url_var(self) -> &'static str {
        match self {
            Wire::OpenAi => "OPENAI_BASE_URL",
            Wire::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// A text answer in `pieces`.
    fn text(self, pieces: &[&str]) -> MockResponse {
        match self {
            Wire::OpenAi => MockResponse::text(pieces),
            Wire::Anthropic => anthropic::text(pieces),
        }
    }

    /// A text answer that reports 1200 prompt tokens (1000 of them cached) and 30
    /// completion tokens, each API in its own terms.
    fn text_with_usage(self, text: &str) -> MockResponse {
        match self {
            Wire::OpenAi => MockResponse::stream(vec![
                openai::text_chunk(text),
                openai::finish_chunk("stop"),
                serde_json::json!({"choices": [], "usage": {
                    "prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
                    "prompt_tokens_details": {"cached_tokens": 1000},
                }}),
            ]),
            Wire::Anthropic => anthropic::text_with_usage(
                &[text],
                Tokens {
                    input: 150,
                    cache_read: 1000,
                    cache_creation: 50,
                    output: 30,
                },
            ),
        }
    }

    /// Some text, then one call of `name` whose JSON arguments arrive in `pieces`.
    fn tool_call(self, text: &str, id: &str, name: &str, pieces: &[&str]) -> MockResponse {
        match self {
            Wire::OpenAi => {
                let mut chunks = Vec::new();
                if !text.is_empty() {
                    chunks.push(openai::text_chunk(text));
                }
                for (n, piece) in pieces.iter().enumerate() {
                    let first = n == 0;
                    chunks.push(openai::tool_call_chunk(
                        0,
                        first.then_some(id),
                        first.then_some(name),
                        piece,
                    ));
                }
                chunks.push(openai::finish_chunk("tool_calls"));
                MockResponse::stream(chunks)
            }
            Wire::Anthropic => anthropic::tool_call(text, id, name, pieces),
        }
    }

    /// A 429 that asks for a retry at once.
    fn rate_limited(self) -> MockResponse {
        let response = match self {
            Wire::OpenAi => MockResponse::error(
                429,
                openai::error_body("slow down", "rate_limit_exceeded", None),
            ),
            Wire::Anthropic => anthropic::error(429, "rate_limit_error", "slow down"),
        };
        response.with_header("retry-after", "0")
    }

    /// A 401 for a bad key.
    fn unauthorized(self) -> MockResponse {
        match self {
            Wire::OpenAi => MockResponse::error(
                401,
                openai::error_body(
                    "Incorrect API key provided",
                    "invalid_request_error",
                    Some("invalid_api_key"),
                ),
            ),
            Wire::Anthropic => anthropic::error(401, "authentication_error", "invalid x-api-key"),
        }
    }

    /// Some text, then the connection breaks.
    fn dropped_after_text(self, text: &str) -> MockResponse {
        match self {
            Wire::OpenAi => MockResponse::dropped_after(vec![openai::text_chunk(text)]),
            Wire::Anthropic => anthropic::dropped_after(&[
                anthropic::message_start(Tokens::default()),
                anthropic::text_start(0),
                anthropic::text_delta(0, text),
            ]),
        }
    }

    /// The key the request carried, from the API's own header.
    fn sent_key(self, request: &RecordedRequest) -> Option<String> {
        match self {
            Wire::OpenAi => request
                .header("authorization")
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::to_owned),
            Wire::Anthropic => request.header("x-api-key").map(str::to_owned),
        }
    }

    /// The tool results a request sends back, as (id, text), in order.
    fn tool_results(self, request: &RecordedRequest) -> Vec<(String, String)> {
        let messages = request.body["messages"].as_array().unwrap();
        let text = |value: &Value| match value {
            Value::Array(blocks) => blocks
                .iter()
                .map(|block| block["text"].as_str().unwrap())
                .collect(),
            other => other.as_str().unwrap().to_owned(),
        };
        match self {
            Wire::OpenAi => messages
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| (text(&m["tool_call_id"]), text(&m["content"])))
                .collect(),
            Wire::Anthropic => messages
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| (text(&block["tool_use_id"]), text(&block["content"])))
                .collect(),
        }
    }

    /// The ids of the tool results a request sends back, in order.
    fn tool_result_ids(self, request: &RecordedRequest) -> Vec<String> {
        self.tool_results(request)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }
}

/// A world whose user config sends `wire`'s requests to `url`, with the key from
/// `api_key_cmd` (a file read by `cat`, so the command itself holds no secret).
fn world_for(wire: Wire) -> World {
    let world = World::new();
    let key_file = world.cfg.path().join("key.txt");
    std::fs::write(&key_file, format!("{SECRET}\n")).unwrap();
    let config = format!(
        "[model]\nprovider = \"{}\"\napi_key_cmd = \"cat '{}'\"\n",
        wire.name(),
        key_file.display()
    );
    std::fs::write(world.cfg.path().join("config.toml"), config).unwrap();
    world
}

async fn run(world: &World, wire: Wire, url: &str, args: &[&str], stdin: &str) -> Run {
    let env = [(wire.base_url_var(), url), ("SHIRO_MODEL", "mock-model")];
    world.run(args, stdin, &env).await
}

/// Every file of the workspace's state directory (its sessions and undo store), and every
/// output, must not hold the key.
fn assert_no_secret(world: &World, runs: &[&Run]) {
    for run in runs {
        assert!(!run.stdout.contains(SECRET), "stdout: {}", run.stdout);
        assert!(!run.stderr.contains(SECRET), "stderr: {}", run.stderr);
    }
    let mut stack = vec![world.state().dir().to_path_buf()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files += 1;
                let bytes = std::fs::read(&path).unwrap();
                let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
                assert!(!found, "the key is in {}", path.display());
            }
        }
    }
    assert!(files > 0, "the run wrote its session and undo files");
}

async fn tool_calls_write_a_file_and_undo_restores(wire: Wire) {
    let world = world_for(wire);
    let (url, server) = MockServer::start(vec![
        wire.tool_call(
            "Writing it.",
            "call_w",
            "write_file",
            &["{\"path\": \"hello", ".txt\", \"content\": \"hello\\n\"}"],
        ),
        wire.text(&["hello.txt ", "is written."]),
    ])
    .await;
    let turn = run(&world, wire, &url, &["-p", "make hello.txt", "--yes"], "").await;
    assert_eq!(turn.code, Some(0), "{turn:?}");
    assert_eq!(turn.stdout, "hello.txt is written.\n");
    assert_eq!(world.read("hello.txt").as_deref(), Some("hello\n"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["model"], "mock-model");
    assert_eq!(wire.tool_result_ids(&requests[1]), ["call_w"]);
    for request in &requests {
        assert_eq!(wire.sent_key(request).as_deref(), Some(SECRET));
    }

    let json = {
        let (url, _server) = MockServer::start(vec![wire.text(&["Nothing to do."])]).await;
        run(&world, wire, &url, &["-p", "anything?", "--json"], "").await
    };
    assert_eq!(json.code, Some(0), "{json:?}");
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(world.read("hello.txt"), None, "undo removed the file");
    assert_no_secret(&world, &[&turn, &json, &undo]);
}

async fn usage_is_shown(wire: Wire) {
    let world = world_for(wire);
    let (url, _server) = MockServer::start(vec![wire.text_with_usage("hi there")]).await;
    let session = run(&world, wire, &url, &[], "hi\n/cost\n").await;
    assert_eq!(session.code, Some(0), "{session:?}");
    let all = format!("{}{}", session.stdout, session.stderr);
    assert!(
        all.contains("this session: 1230 tokens: 1200 prompt (1000 of them cached), 30 completion"),
        "{all}"
    );
    assert_no_secret(&world, &[&session]);
}

async fn a_429_is_retried_then_the_turn_succeeds(wire: Wire) {
    let world = world_for(wire);
    let (url, server) =
        MockServer::start(vec![wire.rate_limited(), wire.text(&["fine now"])]).await;
    let turn = run(&world, wire, &url, &["-p", "hi"], "").await;
    assert_eq!(turn.code, Some(0), "{turn:?}");
    assert_eq!(turn.stdout, "fine now\n");
    assert!(
        turn.stderr.contains("rate limited (429); retry 1 of"),
        "{}",
        turn.stderr
    );
    assert_eq!(server.requests().len(), 2);
}

async fn a_401_fails_clearly_naming_the_key_command(wire: Wire) {
    let world = world_for(wire);
    let (url, server) = MockServer::start(vec![wire.unauthorized()]).await;
    let turn = run(&world, wire, &url, &["-p", "hi"], "").await;
    assert_eq!(turn.code, Some(1), "{turn:?}");
    assert_eq!(turn.stdout, "");
    let stopped = turn
        .stderr
        .lines()
        .find(|line| line.starts_with("turn stopped:"))
        .unwrap();
    assert_no_secret(&world, &[&turn]);
    insta::assert_snapshot!(format!("{}_401", wire.name()), world.normalize(stopped));
    assert_eq!(server.requests().len(), 1, "a refused key is not retried");
}

async fn a_dropped_stream_fails_and_earlier_changes_stay_undoable(wire: Wire) {
    let world = world_for(wire);
    let (url, _server) = MockServer::start(vec![
        wire.tool_call(
            "",
            "call_w",
            "write_file",
            &["{\"path\": \"x.txt\", \"content\": \"x\"}"],
        ),
        wire.dropped_after_text("Half an ans"),
    ])
    .await;
    let turn = run(
        &world,
        wire,
        &url,
        &["-p", "make x.txt", "--yes", "--json"],
        "",
    )
    .await;
    assert_eq!(turn.code, Some(1), "{turn:?}");
    let last: Value = serde_json::from_str(turn.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn_end");
    assert_eq!(
        last["error"],
        "the connection closed before the response finished"
    );
    assert_eq!(world.read("x.txt").as_deref(), Some("x"));
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(world.read("x.txt"), None);
    assert_no_secret(&world, &[&turn, &undo]);
}

/// Runs each scenario on both wires, as its own test.
/// A cloned repository's `.shiro/config.toml` can name a server (`[model] base_url`), but the
/// user's key goes there only once they trust the workspace: until then the server is asked
/// without one (a local server needs none), and a refusal says to trust it.
async fn a_workspace_named_server_gets_the_key_only_once_trusted(wire: Wire) {
    let world = world_for(wire);
    let (url, server) =
        MockServer::start(vec![wire.text(&["Hi."]), wire.text(&["Hi again."])]).await;
    world.write(
        ".shiro/config.toml",
        &format!("[model]\nname = \"mock-model\"\nbase_url = \"{url}\"\n"),
    );
    // No variable names the server: the workspace's file does.
    let key_header = |request: &RecordedRequest| {
        request
            .header("authorization")
            .or(request.header("x-api-key"))
            .map(str::to_owned)
    };
    let untrusted = world.run(&["-p", "hi"], "", &[]).await;
    assert_eq!(untrusted.code, Some(0), "{untrusted:?}");
    assert_eq!(untrusted.stdout, "Hi.\n");
    assert_eq!(
        key_header(&server.requests()[0]),
        None,
        "no key before /trust"
    );

    let trusted = world.run(&[], "/trust\n", &[]).await;
    assert_eq!(trusted.code, Some(0), "{trusted:?}");
    let again = world.run(&["-p", "hi"], "", &[]).await;
    assert_eq!(again.code, Some(0), "{again:?}");
    let sent = key_header(&server.requests()[1]).unwrap_or_default();
    assert!(sent.ends_with(SECRET), "the key once trusted: {sent:?}");
    assert_no_secret(&world, &[&untrusted, &again]);
}

/// A turn whose own tool outputs fill the window: a compaction would keep the turn whole,
/// so the output of its first read is cleared from the next request (the second's stays),
/// the user is told, `/status` counts it, and the session file records it.
async fn a_turn_that_fills_the_window_has_its_older_outputs_cleared(wire: Wire) {
    let world = world_for(wire);
    let config = world.cfg.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}context_window = 2000\n")).unwrap();
    // About 2500 tokens by the estimate of a token per four characters: more than the 1600
    // (0.8 of the window) at which shiro compacts.
    world.write("big.txt", &"a line of the big file\n".repeat(400));
    world.write("small.txt", "the small file\n");
    let read = |path: &str| format!("{{\"path\": \"{path}\"}}");
    // The Anthropic mock reports the prompt's tokens, as the API does (the second answer's
    // prompt holds the big output); the OpenAI one reports none, so the estimate counts.
    let second = match wire {
        Wire::OpenAi => wire.tool_call("", "call_small", "read_file", &[&read("small.txt")]),
        Wire::Anthropic => anthropic::events(&[
            anthropic::message_start(Tokens {
                input: 2600,
                ..Tokens::default()
            }),
            anthropic::tool_use_start(0, "call_small", "read_file"),
            anthropic::json_delta(0, &read("small.txt")),
            anthropic::block_stop(0),
            anthropic::message_delta("tool_use", 20),
            anthropic::message_stop(),
        ]),
    };
    let (url, server) = MockServer::start(vec![
        wire.tool_call("", "call_big", "read_file", &[&read("big.txt")]),
        second,
        wire.text(&["Both read."]),
    ])
    .await;
    let session = run(&world, wire, &url, &[], "read both\n/status\n").await;
    assert_eq!(session.code, Some(0), "{session:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{session:?}");
    let second = wire.tool_results(&requests[1]);
    assert!(second[0].1.contains("a line of the big file"), "{second:?}");
    let third = wire.tool_results(&requests[2]);
    let ids: Vec<&str> = third.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_big", "call_small"], "every call keeps a result");
    assert_eq!(
        third[0].1,
        "[shiro cleared this tool output from the conversation to keep it within the model's context window; call the tool again if you still need it]"
    );
    assert!(third[1].1.contains("the small file"), "{third:?}");
    // The token count differs between the wires: measured, or estimated.
    let shown: Vec<&str> = session
        .stdout
        .lines()
        .filter(|line| line.contains("in place of") || line.contains("cleared"))
        .map(|line| line.split_once("%), ").map_or(line, |(_, rest)| rest))
        .collect();
    insta::assert_snapshot!("cleared_outputs_shown", shown.join("\n"));
    let clear: Vec<Value> = world
        .session_lines()
        .into_iter()
        .filter(|line| line["type"] == "clear")
        .collect();
    // After the system prompt, the prompt, the big read's call and output, and the small
    // read's call (4) and output: the outputs before the latest call are cleared.
    assert_eq!(
        clear,
        [serde_json::json!({"type": "clear", "at": 6, "before": 4})]
    );
    assert_no_secret(&world, &[&session]);
}

macro_rules! on_both_wires {
    ($($scenario:ident),* $(,)?) => {
        mod openai_wire {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Wire::OpenAi).await;
                }
            )*
        }
        mod anthropic_wire {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::Wire::Anthropic).await;
                }
            )*
        }
    };
}

on_both_wires!(
    tool_calls_write_a_file_and_undo_restores,
    usage_is_shown,
    a_429_is_retried_then_the_turn_succeeds,
    a_401_fails_clearly_naming_the_key_command,
    a_dropped_stream_fails_and_earlier_changes_stay_undoable,
    a_workspace_named_server_gets_the_key_only_once_trusted,
    a_turn_that_fills_the_window_has_its_older_outputs_cleared,
);

/// A key command that takes longer than a second (a password manager waiting to be
/// unlocked) is named while shiro waits for it; a quick one says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_key_command_says_what_shiro_waits_for() {
    let world = world_for(Wire::OpenAi);
    let config = world.cfg.path().join("config.toml");
    let quick = std::fs::read_to_string(&config).unwrap();
    let (url, _server) = MockServer::start(vec![
        Wire::OpenAi.text(&["Hi."]),
        Wire::OpenAi.text(&["Hi again."]),
    ])
    .await;
    let fast = run(&world, Wire::OpenAi, &url, &["-p", "hi"], "").await;
    assert_eq!(fast.code, Some(0), "{fast:?}");
    assert!(!fast.stderr.contains("waiting"), "{}", fast.stderr);
    let slow = quick.replace("api_key_cmd = \"cat ", "api_key_cmd = \"sleep 2; cat ");
    assert_ne!(slow, quick);
    std::fs::write(&config, slow).unwrap();
    let waited = run(&world, Wire::OpenAi, &url, &["-p", "hi"], "").await;
    assert_eq!(waited.code, Some(0), "{waited:?}");
    assert_eq!(waited.stdout, "Hi again.\n");
    insta::assert_snapshot!(world.normalize(&waited.stderr), @"shiro: waiting for the key from [model] api_key_cmd `sleep 2; cat '[CFG]/key.txt'` (at most 120 s)");
    assert_no_secret(&world, &[&fast, &waited]);
}

/// `/model` shows the model, refuses a name it cannot use (keeping the model), and switches
/// API in the middle of a conversation, which goes on with its history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_switches_provider_and_keeps_the_conversation() {
    let world = world_for(Wire::OpenAi);
    let (openai_url, openai_server) = MockServer::start(vec![
        Wire::OpenAi.tool_call(
            "",
            "call_w",
            "write_file",
            &["{\"path\": \"a.txt\", \"content\": \"a\"}"],
        ),
        Wire::OpenAi.text(&["Wrote a.txt."]),
    ])
    .await;
    let (anthropic_url, anthropic_server) =
        MockServer::start(vec![Wire::Anthropic.text(&["It says a."])]).await;
    let env = [
        ("OPENAI_BASE_URL", openai_url.as_str()),
        ("ANTHROPIC_BASE_URL", anthropic_url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-from-env"),
        ("SHIRO_MODEL", "gpt-mock"),
    ];
    let script = "/model\nmake a.txt\n/model replay:/nonexistent/script.json\n/model\n/model anthropic:claude-mock\nwhat is in a.txt?\n/model\n/status\n";
    let session = world.run(&["--yes"], script, &env).await;
    assert_eq!(session.code, Some(0), "{session:?}");
    let lines: Vec<&str> = session
        .stdout
        .lines()
        .chain(session.stderr.lines())
        .filter(|line| {
            line.starts_with("model")
                || line.starts_with("switched")
                || line.starts_with("the model was not changed")
                || line.starts_with("(/model")
        })
        .collect();
    insta::assert_snapshot!(world.normalize(&lines.join("\n")), @r#"
        model: gpt-mock (openai)
        (/model NAME switches; `anthropic:NAME` or `openai:NAME` picks the API)
        the model was not changed (model: gpt-mock (openai)): cannot read the replay script /nonexistent/script.json: No such file or directory (os error 2)
        model: gpt-mock (openai)
        (/model NAME switches; `anthropic:NAME` or `openai:NAME` picks the API)
        switched to claude-mock (anthropic); the conversation goes on with it
        model: claude-mock (anthropic)
        (/model NAME switches; `anthropic:NAME` or `openai:NAME` picks the API)
        model: claude-mock
        "#);
    assert_eq!(openai_server.requests().len(), 2);
    let requests = anthropic_server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.body["model"], "claude-mock");
    // The [model] key settings belong to the configured API (OpenAI): the Anthropic model
    // gets its own variable, never the other API's key.
    assert_eq!(request.header("x-api-key"), Some("sk-ant-from-env"));
    assert_eq!(Wire::Anthropic.tool_result_ids(request), ["call_w"]);
    let roles: Vec<&str> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_no_secret(&world, &[&session]);
}

/// `ANTHROPIC_AUTH_TOKEN` goes as `Authorization: Bearer …` (a gateway's way), beside the
/// key; a 401 with a token and no key says to check the token; and a workspace-named server
/// gets neither before the workspace is trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_bearer_token_is_sent_as_authorization() {
    const TOKEN: &str = "tok-gateway-7f3a";
    let world = World::new();
    let (url, server) = MockServer::start(vec![
        Wire::Anthropic.text(&["Hi."]),
        Wire::Anthropic.unauthorized(),
    ])
    .await;
    let env = [
        ("ANTHROPIC_BASE_URL", url.as_str()),
        ("ANTHROPIC_AUTH_TOKEN", TOKEN),
        ("SHIRO_MODEL", "claude-mock"),
    ];
    let ok = world.run(&["-p", "hi"], "", &env).await;
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let request = &server.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(request.header("x-api-key"), None);
    let refused = world.run(&["-p", "hi"], "", &env).await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused.stderr.contains("check ANTHROPIC_AUTH_TOKEN"),
        "{}",
        refused.stderr
    );
    for run in [&ok, &refused] {
        assert!(!run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN));
    }

    // A server the workspace's config names gets no token until /trust.
    let cloned = World::new();
    let (url, server) = MockServer::start(vec![Wire::Anthropic.text(&["Hi."])]).await;
    cloned.write(
        ".shiro/config.toml",
        &format!("[model]\nname = \"claude-mock\"\nbase_url = \"{url}\"\n"),
    );
    let run = cloned
        .run(&["-p", "hi"], "", &[("ANTHROPIC_AUTH_TOKEN", TOKEN)])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.requests()[0].header("authorization"), None);
}
