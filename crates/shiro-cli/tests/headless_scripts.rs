//! What scripts need from `shiro -p`: piped input, `--max-turns`, and `--json` events that
//! carry the session id, usage, text deltas and an error kind. Against the mock
//! OpenAI-compatible server on 127.0.0.1.
#![allow(clippy::unwrap_used)]

use crate::agent_common;
use crate::support;

use agent_common::World;
use serde_json::{Value, json};
use support::mock_openai::{
    MockResponse, MockServer, error_body, finish_chunk, text_chunk, tool_call_chunk,
};
use tokio::io::AsyncWriteExt as _;

fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    })
}

async fn run_p(world: &World, url: &str, args: &[&str], stdin: &str) -> agent_common::Run {
    let env = [("OPENAI_BASE_URL", url), ("SHIRO_MODEL", "mock-model")];
    world.run(args, stdin, &env).await
}

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// `git diff | shiro -p "review this"`: the input follows the prompt in a `<stdin>` block, and
/// an `@path` in it attaches nothing (only the typed prompt's do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_input_follows_the_prompt_and_its_at_paths_attach_nothing() {
    let world = World::new();
    world.write("notes.txt", "PRIVATE NOTES\n");
    world.write("a.txt", "typed attachment\n");
    let (url, server) = MockServer::start(vec![MockResponse::text(&["Looks fine."])]).await;
    let piped = "diff --git a/x b/x\n+see @notes.txt\n";
    let run = run_p(&world, &url, &["-p", "review this with @a.txt"], piped).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Looks fine.\n");
    let sent = server.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sent.starts_with("review this with @a.txt"), "{sent}");
    assert!(sent.contains("typed attachment"), "{sent}");
    assert!(
        sent.ends_with("\n\n<stdin>\ndiff --git a/x b/x\n+see @notes.txt\n</stdin>"),
        "{sent}"
    );
    assert!(!sent.contains("PRIVATE NOTES"), "{sent}");
    // The session holds what the model was sent, so `--continue` sees the same.
    let lines = world.session_lines();
    assert_eq!(lines[1]["message"]["content"], sent.as_str());

    // Empty input adds nothing.
    let world = World::new();
    let (url, server) = MockServer::start(vec![MockResponse::text(&["Hi."])]).await;
    let run = run_p(&world, &url, &["-p", "hi"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.requests()[0].body["messages"][1]["content"], "hi");
}

/// Input past 1 MiB is cut; the model and the user are both told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_input_past_the_cap_is_cut_and_said() {
    let world = World::new();
    let (url, server) = MockServer::start(vec![MockResponse::text(&["Long."])]).await;
    let piped = "y\n".repeat(600 * 1024);
    let env = [
        ("OPENAI_BASE_URL", url.as_str()),
        ("SHIRO_MODEL", "mock-model"),
    ];
    let mut child = world.command(&["-p", "count"], &env).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // shiro stops reading past the cap, so the end of the input may meet a closed pipe.
    let writer = tokio::spawn(async move {
        let _ = input.write_all(piped.as_bytes()).await;
    });
    let run = agent_common::finish(child).await;
    writer.await.unwrap();
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "note: standard input is longer than 1024 KiB; only its first 1024 KiB go to the model"
        ),
        "{}",
        run.stderr
    );
    let sent = server.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sent.ends_with(
            "y\n[cut: standard input is longer than 1024 KiB; only its start is here]\n</stdin>"
        ),
        "{}",
        &sent[sent.len() - 120..]
    );
    assert!(sent.len() < 1024 * 1024 + 200);
}

/// One turn's events: the session id first and last (and the session file's), each
/// request's usage, the deltas that make up each text, and the turn's usage summed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_carries_the_session_id_usage_and_text_deltas() {
    let world = World::new();
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            text_chunk("Writing "),
            text_chunk("it."),
            tool_call_chunk(
                0,
                Some("call_w"),
                Some("write_file"),
                "{\"path\": \"x.txt\", \"content\": \"x\"}",
            ),
            finish_chunk("tool_calls"),
            usage_chunk(1000, 20, 0),
        ]),
        MockResponse::stream(vec![
            text_chunk("Done"),
            text_chunk("."),
            finish_chunk("stop"),
            usage_chunk(1100, 5, 1000),
        ]),
    ])
    .await;
    let run = run_p(&world, &url, &["-p", "make x.txt", "--yes", "--json"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let events = events(&run.stdout);
    let session = world.sessions()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        events[0],
        json!({"type": "session_start", "session_id": session, "model": "mock-model",
               "workspace": world.root().display().to_string()})
    );
    let deltas: String = of_type(&events, "text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    let texts: String = of_type(&events, "assistant_text")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        (deltas.as_str(), texts.as_str()),
        ("Writing it.Done.", "Writing it.Done.")
    );
    assert_eq!(
        of_type(&events, "usage"),
        [
            &json!({"type": "usage", "prompt_tokens": 1000, "completion_tokens": 20, "cached_tokens": 0}),
            &json!({"type": "usage", "prompt_tokens": 1100, "completion_tokens": 5, "cached_tokens": 1000}),
        ]
    );
    let end = events.last().unwrap();
    assert_eq!(end["type"], "turn_end");
    assert_eq!(end["session_id"], session.as_str());
    assert_eq!(
        end["usage"],
        json!({"prompt_tokens": 2100, "completion_tokens": 25, "cached_tokens": 1000})
    );
    assert_eq!(
        (&end["error"], &end["error_kind"]),
        (&Value::Null, &Value::Null)
    );
}

/// Each way a turn fails has its kind, so a script can tell a refused key from a flaky
/// network without reading the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_names_the_kind_of_error() {
    let cases: Vec<(Vec<MockResponse>, &str)> = vec![
        (
            vec![MockResponse::error(
                401,
                error_body("Incorrect API key", "invalid_request_error", None),
            )],
            "auth",
        ),
        (
            vec![MockResponse::error(
                400,
                error_body("context too long", "invalid_request_error", None),
            )],
            "invalid_request",
        ),
        (
            vec![MockResponse::dropped_after(vec![text_chunk("Half")])],
            "network",
        ),
    ];
    for (script, kind) in cases {
        let world = World::new();
        let (url, _server) = MockServer::start(script).await;
        let run = run_p(&world, &url, &["-p", "hi", "--json"], "").await;
        assert_eq!(run.code, Some(1), "{run:?}");
        let end = events(&run.stdout).pop().unwrap();
        assert_eq!(end["error_kind"], kind, "{end}");
        assert!(end["error"].is_string(), "{end}");
    }

    // No model at all.
    let world = World::new();
    let run = world.run(&["-p", "hi", "--json"], "", &[]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    let events = events(&run.stdout);
    assert_eq!(events[0]["model"], "none");
    assert_eq!(events.last().unwrap()["error_kind"], "config");
}

/// `--max-turns` caps the model calls of the turn: it stops with `max_turns`, exit 1, and
/// what it changed before is recorded, so `shiro undo` reverts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_stops_the_turn_and_its_changes_stay_undoable() {
    let world = World::new();
    let write = |n: u32| {
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some(&format!("call_{n}")),
                Some("write_file"),
                &format!("{{\"path\": \"f{n}.txt\", \"content\": \"{n}\"}}"),
            ),
            finish_chunk("tool_calls"),
        ])
    };
    let (url, server) = MockServer::start(vec![write(1), write(2), write(3)]).await;
    let run = run_p(
        &world,
        &url,
        &["-p", "write files", "--yes", "--json", "--max-turns", "2"],
        "",
    )
    .await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(server.requests().len(), 2);
    let end = events(&run.stdout).pop().unwrap();
    assert_eq!(end["error_kind"], "max_turns");
    assert_eq!(
        end["error"],
        "stopped after 2 model calls (the step cap); ask again to continue"
    );
    assert_eq!(
        (world.read("f1.txt"), world.read("f2.txt")),
        (Some("1".into()), Some("2".into()))
    );
    let undo = world.run(&["undo"], "", &[]).await;
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!((world.read("f1.txt"), world.read("f2.txt")), (None, None));

    let bad = world.run(&["-p", "x", "--max-turns", "0"], "", &[]).await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
}
