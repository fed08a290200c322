//! The model providers end to end: the OpenAI-compatible and the Anthropic provider against a
//! mock server on 127.0.0.1 that each test starts, and the replay provider.

mod support;

use std::time::Duration;

use insta::assert_snapshot;
use serde_json::json;
use shiro_providers::{
    AnthropicConfig, AnthropicProvider, ChatRequest, Completion, FinishReason, Message,
    OpenAiConfig, OpenAiProvider, Provider, ProviderError, ReplayProvider, Role, StreamEvent,
    ToolCall, ToolSpec, Usage,
};
use support::mock_anthropic::{self as anthropic, Tokens};
use support::mock_openai::{
    MockResponse, MockServer, error_body, finish_chunk, text_chunk, tool_call_chunk,
};

/// A configuration for the mock at `url` with short timings, so that retries and timeouts
/// take milliseconds.
fn config(url: &str) -> OpenAiConfig {
    OpenAiConfig {
        base_url: url.to_owned(),
        api_key: Some("sk-test".to_owned()),
        timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        max_retry_delay: Duration::from_millis(50),
        ..OpenAiConfig::new("gpt-test")
    }
}

fn provider(url: &str) -> OpenAiProvider {
    OpenAiProvider::new(config(url)).expect("a valid configuration")
}

/// Asks `provider` once and returns the result and every event it streamed.
async fn ask(
    provider: &dyn Provider,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (Result<Completion, ProviderError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = provider
        .complete(&ChatRequest { messages, tools }, &mut |event| {
            events.push(event);
        })
        .await;
    (result, events)
}

/// The error's message with the mock's changing address replaced, for snapshots.
fn message(error: &ProviderError, url: &str) -> String {
    error.to_string().replace(url, "http://127.0.0.1:PORT/v1")
}

fn text_deltas(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn write_file_tool() -> ToolSpec {
    ToolSpec {
        name: "write_file".to_owned(),
        description: "Create or replace a file.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        }),
    }
}

#[tokio::test]
async fn streams_text_and_sends_a_streaming_request() {
    let (url, server) =
        MockServer::start(vec![MockResponse::text(&["Hel", "lo, ", "wörld"])]).await;
    let messages = [Message::system("be brief"), Message::user("hi")];

    let (result, events) = ask(&provider(&url), &messages, &[]).await;

    let completion = result.expect("a completion");
    assert_eq!(completion.message, Message::assistant("Hello, wörld"));
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(text_deltas(&events), ["Hel", "lo, ", "wörld"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(
        request.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
            ],
        })
    );
    assert_eq!(completion.usage, None, "this server reported no usage");
}

#[tokio::test]
async fn reads_the_usage_of_the_last_chunk() {
    let usage = json!({
        "choices": [],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 34,
            "total_tokens": 1234,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    });
    let (url, _server) = MockServer::start(vec![MockResponse::stream(vec![
        text_chunk("hi"),
        finish_chunk("stop"),
        usage,
    ])])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let completion = result.expect("a completion");
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 1200,
            completion_tokens: 34,
            cached_tokens: 1024,
        })
    );
    assert_eq!(completion.message, Message::assistant("hi"));
}

#[tokio::test]
async fn assembles_two_tool_calls_streamed_in_interleaved_fragments() {
    let (url, server) = MockServer::start(vec![MockResponse::stream(vec![
        text_chunk("Writing both."),
        tool_call_chunk(0, Some("call_a"), Some("write_file"), ""),
        tool_call_chunk(0, None, None, "{\"path\": \"a.txt\", "),
        tool_call_chunk(1, Some("call_b"), Some("write_file"), "{\"pa"),
        tool_call_chunk(0, None, None, "\"content\": \"A\"}"),
        tool_call_chunk(1, None, None, "th\": \"b.txt\", \"content\": \"B\"}"),
        finish_chunk("tool_calls"),
    ])])
    .await;
    let tools = [write_file_tool()];

    let (result, events) = ask(&provider(&url), &[Message::user("write a and b")], &tools).await;

    let completion = result.expect("a completion");
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(completion.message.content, "Writing both.");
    assert_eq!(
        completion.message.tool_calls,
        [
            ToolCall {
                id: "call_a".to_owned(),
                name: "write_file".to_owned(),
                arguments: r#"{"path": "a.txt", "content": "A"}"#.to_owned(),
            },
            ToolCall {
                id: "call_b".to_owned(),
                name: "write_file".to_owned(),
                arguments: r#"{"path": "b.txt", "content": "B"}"#.to_owned(),
            },
        ]
    );
    let started = events
        .iter()
        .filter(
            |event| matches!(event, StreamEvent::ToolCallStarted { name } if name == "write_file"),
        )
        .count();
    assert_eq!(started, 2);
    assert_eq!(
        server.requests()[0].body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "write_file",
                "description": "Create or replace a file.",
                "parameters": tools[0].parameters,
            },
        }])
    );
}

#[tokio::test]
async fn runs_several_steps_sending_tool_calls_and_results_back() {
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_1"),
                Some("write_file"),
                "{\"path\":\"a\",\"content\":\"x\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Done."]),
    ])
    .await;
    let provider = provider(&url);
    let tools = [write_file_tool()];
    let mut messages = vec![Message::user("write a")];

    let (first, _) = ask(&provider, &messages, &tools).await;
    let first = first.expect("the first step");
    let call_id = first.message.tool_calls[0].id.clone();
    messages.push(first.message);
    messages.push(Message::tool_result(call_id, "A a"));
    let (second, _) = ask(&provider, &messages, &tools).await;

    assert_eq!(second.expect("the second step").message.content, "Done.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": "write a"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1",
                "type": "function",
                "function": {"name": "write_file", "arguments": "{\"path\":\"a\",\"content\":\"x\"}"},
            }]},
            {"role": "tool", "content": "A a", "tool_call_id": "call_1"},
        ])
    );
}

#[tokio::test]
async fn retries_a_429_then_succeeds_honouring_a_capped_retry_after() {
    let (url, server) = MockServer::start(vec![
        MockResponse::error(429, error_body("Rate limit reached", "requests", None))
            .with_header("Retry-After", "0"),
        MockResponse::error(503, error_body("overloaded", "server_error", None))
            .with_header("Retry-After", "3600"),
        MockResponse::text(&["ok"]),
    ])
    .await;

    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;

    assert_eq!(result.expect("success after retries").message.content, "ok");
    assert_eq!(server.requests().len(), 3);
    let retries: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying {
                attempt,
                max_retries,
                delay,
                reason,
            } => Some((*attempt, *max_retries, *delay, reason.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [
            (1, 2, Duration::ZERO, "rate limited (429)"),
            // An hour's Retry-After is capped at max_retry_delay.
            (2, 2, Duration::from_millis(50), "server error (503)"),
        ]
    );
}

#[tokio::test]
async fn gives_up_after_the_retries() {
    let rate_limited =
        || MockResponse::error(429, error_body("Rate limit reached.", "requests", None));
    let (url, server) =
        MockServer::start(vec![rate_limited(), rate_limited(), rate_limited()]).await;
    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("still rate limited");
    assert!(
        matches!(error, ProviderError::RateLimited { retries: 2, .. }),
        "{error:?}"
    );
    assert_snapshot!(message(&error, &url), @"the server is still rate limiting requests (429) after 2 retries: Rate limit reached");
    assert_eq!(server.requests().len(), 3);
    // Backoff doubles from the base delay: 10 ms, then 20 ms.
    let delays: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying { delay, .. } => Some(*delay),
            _ => None,
        })
        .collect();
    assert_eq!(
        delays,
        [Duration::from_millis(10), Duration::from_millis(20)]
    );

    let failing =
        || MockResponse::body(502, "text/html", vec![b"<html>bad gateway</html>".to_vec()]);
    let (url, server) = MockServer::start(vec![failing(), failing(), failing()]).await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("still failing");
    assert_snapshot!(message(&error, &url), @"the server failed with 502 after 2 retries: 502 bad gateway");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let (url, server) = MockServer::start(vec![MockResponse::error(
        429,
        error_body(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            Some("insufficient_quota"),
        ),
    )])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("no quota");
    assert_snapshot!(message(&error, &url), @"the server refused the request (429): You exceeded your current quota, please check your plan and billing details");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_key_fails_at_once() {
    let (url, server) = MockServer::start(vec![MockResponse::error(
        401,
        error_body(
            "Incorrect API key provided: sk-test.",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    )])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("unauthorized");
    assert!(
        matches!(error, ProviderError::Unauthorized { status: 401, .. }),
        "{error:?}"
    );
    assert_snapshot!(message(&error, &url), @"the API key was refused (401); set OPENAI_API_KEY");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_key_is_sent_only_when_there_is_one() {
    let (url, server) = MockServer::start(vec![MockResponse::text(&["ok"])]).await;
    let provider = OpenAiProvider::new(OpenAiConfig {
        api_key: None,
        ..config(&url)
    })
    .expect("valid");
    let (result, _) = ask(&provider, &[Message::user("hi")], &[]).await;
    result.expect("a completion");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn an_unknown_model_is_named() {
    // OpenAI's and vLLM's words, then Ollama's.
    let (url, _server) = MockServer::start(vec![
        MockResponse::error(
            404,
            error_body("The model `gpt-test` does not exist", "invalid_request_error", Some("model_not_found")),
        ),
        MockResponse::error(
            404,
            json!({"error": {"message": "model \"gpt-test\" not found, try pulling it first", "type": "api_error", "param": null, "code": null}}),
        ),
    ])
    .await;
    let provider = provider(&url);

    let (openai, _) = ask(&provider, &[Message::user("hi")], &[]).await;
    let (ollama, _) = ask(&provider, &[Message::user("hi")], &[]).await;

    let openai = openai.expect_err("unknown model");
    assert!(
        matches!(openai, ProviderError::UnknownModel { .. }),
        "{openai:?}"
    );
    assert_snapshot!(message(&openai, &url), @"unknown model `gpt-test` at http://127.0.0.1:PORT/v1/chat/completions: The model `gpt-test` does not exist; check --model or SHIRO_MODEL");
    assert_snapshot!(message(&ollama.expect_err("unknown model"), &url), @r#"unknown model `gpt-test` at http://127.0.0.1:PORT/v1/chat/completions: model "gpt-test" not found, try pulling it first; check --model or SHIRO_MODEL"#);
}

#[tokio::test]
async fn a_wrong_endpoint_is_a_not_found() {
    let (url, _server) = MockServer::start(vec![MockResponse::body(
        404,
        "text/plain",
        vec![b"404 page not found".to_vec()],
    )])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("not found");
    assert!(matches!(error, ProviderError::NotFound { .. }), "{error:?}");
    assert_snapshot!(message(&error, &url), @"the endpoint or model was not found (404) at http://127.0.0.1:PORT/v1/chat/completions; check OPENAI_BASE_URL and the model name");
}

#[tokio::test]
async fn a_refused_connection_says_so_without_retrying() {
    // A port that was just free: bound, then released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    drop(listener);

    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;

    let error = result.expect_err("refused");
    assert!(
        matches!(error, ProviderError::ConnectionRefused { .. }),
        "{error:?}"
    );
    assert_snapshot!(message(&error, &url), @"could not connect to http://127.0.0.1:PORT/v1/chat/completions: connection refused; is the server running?");
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_an_error_not_a_short_answer() {
    let (url, server) = MockServer::start(vec![MockResponse::dropped_after(vec![text_chunk(
        "Half an ans",
    )])])
    .await;
    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("dropped");
    assert!(matches!(error, ProviderError::Dropped), "{error:?}");
    assert_snapshot!(message(&error, &url), @"the connection closed before the response finished");
    assert_eq!(text_deltas(&events), ["Half an ans"]);
    // Text was already shown, so the request is not sent again.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_connection_closed_before_the_answer_is_retried() {
    let (url, server) =
        MockServer::start(vec![MockResponse::hang_up(), MockResponse::text(&["ok"])]).await;
    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    assert_eq!(result.expect("success on the retry").message.content, "ok");
    assert_eq!(server.requests().len(), 2);
    assert!(
        matches!(&events[0], StreamEvent::Retrying { attempt: 1, reason, .. } if reason == "the connection closed"),
        "{events:?}"
    );

    let (url, server) = MockServer::start(vec![MockResponse::hang_up(); 3]).await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    assert!(matches!(result, Err(ProviderError::Dropped)), "{result:?}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_is_dropped_too() {
    // A clean end of the body, but neither a finish reason nor `[DONE]`.
    let (url, _server) = MockServer::start(vec![MockResponse::sse_events(&[
        text_chunk("Half").to_string()
    ])])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    assert!(matches!(result, Err(ProviderError::Dropped)), "{result:?}");

    // A finish reason without `[DONE]` is a complete answer.
    let (url, _server) = MockServer::start(vec![MockResponse::sse_events(&[
        text_chunk("Whole").to_string(),
        finish_chunk("length").to_string(),
    ])])
    .await;
    let (result, _) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let completion = result.expect("complete");
    assert_eq!(
        (
            completion.message.content.as_str(),
            completion.finish_reason
        ),
        ("Whole", FinishReason::Length)
    );
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let (url, _server) = MockServer::start(vec![
        MockResponse::never_answer(),
        MockResponse::stalled_after(vec![text_chunk("Thinking")]),
    ])
    .await;
    let provider = OpenAiProvider::new(OpenAiConfig {
        timeout: Duration::from_millis(300),
        ..config(&url)
    })
    .expect("valid");

    let started = std::time::Instant::now();
    let (before_headers, _) = ask(&provider, &[Message::user("hi")], &[]).await;
    let (mid_stream, events) = ask(&provider, &[Message::user("hi")], &[]).await;

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let error = before_headers.expect_err("timed out");
    assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
    assert_snapshot!(message(&error, &url), @"no response from http://127.0.0.1:PORT/v1/chat/completions for 300ms; the request timed out");
    assert!(
        matches!(mid_stream, Err(ProviderError::Timeout { .. })),
        "{mid_stream:?}"
    );
    assert_eq!(text_deltas(&events), ["Thinking"]);
}

#[tokio::test]
async fn malformed_streams_are_errors_not_panics() {
    let raw = |body: &[u8]| MockResponse::body(200, "text/event-stream", vec![body.to_vec()]);
    let (url, _server) = MockServer::start(vec![
        raw(b"data: {not json\n\n"),
        raw(b"data: {\"choices\": \"nope\"}\n\n"),
        raw(b"data: {\"error\": {\"message\": \"upstream model crashed\"}}\n\n"),
        raw(b"\xff\xfe garbage without events"),
    ])
    .await;
    let provider = provider(&url);
    let mut messages = Vec::new();
    for _ in 0..4 {
        let (result, _) = ask(&provider, &[Message::user("hi")], &[]).await;
        messages.push(message(&result.expect_err("malformed"), &url));
    }
    assert_snapshot!(messages.join("\n"), @r#"
    the server sent a response shiro could not read: a chunk is not valid JSON (key must be a string at line 1 column 2)
    the server sent a response shiro could not read: a chunk is not valid JSON (invalid type: string "nope", expected a sequence at line 1 column 18)
    the server reported an error while streaming: upstream model crashed
    the connection closed before the response finished
    "#);
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_understood() {
    let body = json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant",
            "content": "Calling.",
            "tool_calls": [
                {"id": "x1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                {"type": "function", "function": {"name": "read_file", "arguments": {"path": "b"}}},
            ],
        }}],
    });
    let (url, _server) = MockServer::start(vec![MockResponse::error(200, body)]).await;
    let (result, events) = ask(&provider(&url), &[Message::user("hi")], &[]).await;
    let completion = result.expect("a completion");
    assert_eq!(text_deltas(&events), ["Calling."]);
    let calls: Vec<_> = completion
        .message
        .tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("x1", "read_file", r#"{"path":"a"}"#),
            ("call_2", "read_file", r#"{"path":"b"}"#)
        ]
    );
}

#[test]
fn bad_configurations_are_refused_before_sending() {
    let refuse = |config: OpenAiConfig| match OpenAiProvider::new(config) {
        Ok(_) => "accepted".to_owned(),
        Err(error) => error.to_string(),
    };
    let messages = [
        refuse(OpenAiConfig::new("")),
        refuse(OpenAiConfig {
            base_url: "localhost:11434/v1".into(),
            ..OpenAiConfig::new("m")
        }),
        refuse(OpenAiConfig {
            base_url: "not a url".into(),
            ..OpenAiConfig::new("m")
        }),
        refuse(OpenAiConfig {
            base_url: "http://exa mple.com/v1".into(),
            ..OpenAiConfig::new("m")
        }),
        refuse(OpenAiConfig {
            base_url: "http://localhost:11434/v1/".into(),
            ..OpenAiConfig::new("m")
        }),
    ];
    assert_snapshot!(messages.join("\n"), @r"
    invalid provider configuration: the model name is empty; set --model or SHIRO_MODEL
    invalid provider configuration: the base URL `localhost:11434/v1` must start with http:// or https://
    invalid provider configuration: the base URL `not a url` must start with http:// or https://
    invalid provider configuration: the base URL `http://exa mple.com/v1` is not a valid URL (invalid international domain name)
    accepted
    ");
}

#[test]
fn the_api_key_never_shows_in_debug_output() {
    let config = OpenAiConfig {
        api_key: Some("sk-secret".into()),
        ..OpenAiConfig::new("m")
    };
    assert!(!format!("{config:?}").contains("sk-secret"));
    let provider = OpenAiProvider::new(config).expect("valid");
    assert!(!format!("{provider:?}").contains("sk-secret"));
}

/// Every error message, as a person reads it: one line, lowercase, no trailing period.
#[test]
fn error_messages() {
    let url = "http://localhost:11434/v1/chat/completions".to_owned();
    let errors = [
        ProviderError::InvalidConfig {
            detail: "the model name is empty; set --model or SHIRO_MODEL".into(),
        },
        ProviderError::Unauthorized {
            status: 401,
            hint: "set OPENAI_API_KEY".into(),
        },
        ProviderError::Unauthorized {
            status: 403,
            hint: "set OPENAI_API_KEY".into(),
        },
        ProviderError::NotFound {
            url: url.clone(),
            base_url_var: "OPENAI_BASE_URL",
        },
        ProviderError::UnknownModel {
            model: "llama9".into(),
            url: url.clone(),
            detail: "model \"llama9\" not found, try pulling it first".into(),
        },
        ProviderError::RateLimited {
            retries: 4,
            detail: "Rate limit reached for requests".into(),
        },
        ProviderError::Server {
            status: 503,
            retries: 4,
            detail: "503 service unavailable".into(),
        },
        ProviderError::Rejected {
            status: 400,
            detail: "This model's maximum context length is 8192 tokens".into(),
        },
        ProviderError::ConnectionRefused { url: url.clone() },
        ProviderError::Connect {
            url: url.clone(),
            detail: "failed to lookup address information: Name or service not known".into(),
        },
        ProviderError::Timeout {
            url: url.clone(),
            after: Duration::from_secs(180),
        },
        ProviderError::Timeout {
            url,
            after: Duration::from_millis(1500),
        },
        ProviderError::Dropped,
        ProviderError::Stream {
            detail: "upstream model crashed".into(),
        },
        ProviderError::BadResponse {
            detail: "a chunk is not valid JSON (EOF while parsing a value at line 1 column 1)"
                .into(),
        },
        ProviderError::InvalidReplayScript {
            file: None,
            detail: "missing field `responses` at line 1 column 2".into(),
        },
        ProviderError::InvalidReplayScript {
            file: Some("scripts/demo.json".into()),
            detail: "trailing comma at line 2 column 17".into(),
        },
        ProviderError::ReplayFinished { used: 2 },
        ProviderError::Unauthorized {
            status: 401,
            hint: "check the key `pass show anthropic` prints ([model] api_key_cmd)".into(),
        },
        ProviderError::NotFound {
            url: "https://api.anthropic.com/v1/messages".into(),
            base_url_var: "ANTHROPIC_BASE_URL",
        },
    ];
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for message in &messages {
        assert!(
            !message.contains('\n') && !message.ends_with('.'),
            "{message}"
        );
    }
    assert_snapshot!(messages.join("\n"));
}

const SCRIPT: &str = r#"{"responses": [
    {"text": "I'll create hello.txt with a friendly greeting for you.", "tool_calls": [
        {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}},
        {"name": "bash", "arguments": "{\"command\": \"cat hello.txt\""}
    ]},
    {"tool_calls": [{"id": "mine", "name": "read_file", "arguments": {"path": "hello.txt"}}]},
    {"text": "Done."}
]}"#;

#[tokio::test]
async fn replay_plays_the_script_in_order_then_says_it_is_finished() {
    let provider = ReplayProvider::from_script(SCRIPT).expect("a valid script");
    assert_eq!(provider.model(), "replay");

    let (first, events) = ask(&provider, &[Message::user("hi")], &[]).await;
    let first = first.expect("first response");
    let deltas = text_deltas(&events);
    assert!(deltas.len() > 1, "text streams in pieces: {deltas:?}");
    assert_eq!(
        deltas.concat(),
        "I'll create hello.txt with a friendly greeting for you."
    );
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.message.role, Role::Assistant);
    assert_eq!(
        first.message.tool_calls,
        [
            ToolCall {
                id: "call_1".into(),
                name: "write_file".into(),
                arguments: r#"{"content":"hi\n","path":"hello.txt"}"#.into(),
            },
            // A string is passed on as it is, even when it is not valid JSON.
            ToolCall {
                id: "call_2".into(),
                name: "bash".into(),
                arguments: r#"{"command": "cat hello.txt""#.into()
            },
        ]
    );

    let (second, _) = ask(&provider, &[], &[]).await;
    let second = second.expect("second response");
    assert_eq!(second.message.content, "");
    assert_eq!(second.message.tool_calls[0].id, "mine");

    let (third, _) = ask(&provider, &[], &[]).await;
    let third = third.expect("third response");
    assert_eq!(
        (third.message, third.finish_reason),
        (Message::assistant("Done."), FinishReason::Stop)
    );
    assert_eq!(provider.played(), 3);

    let (finished, events) = ask(&provider, &[], &[]).await;
    let error = finished.expect_err("the script is finished");
    assert_snapshot!(error.to_string(), @"the replay script has no response left: all 3 were used");
    assert!(events.is_empty());
    // And it stays finished.
    let (again, _) = ask(&provider, &[], &[]).await;
    assert!(
        matches!(again, Err(ProviderError::ReplayFinished { used: 3 })),
        "{again:?}"
    );
}

#[test]
fn replay_refuses_a_malformed_script() {
    let refuse = |script: &str| match ReplayProvider::from_script(script) {
        Ok(_) => "accepted".to_owned(),
        Err(error) => error.to_string(),
    };
    let messages = [
        refuse(""),
        refuse("{}"),
        refuse(r#"{"responses": [{"txt": "typo"}]}"#),
        refuse(r#"{"responses": [{"tool_calls": [{"arguments": {}}]}]}"#),
        refuse(r#"{"responses": []}"#),
    ];
    assert_snapshot!(messages.join("\n"), @r"
    invalid replay script: EOF while parsing a value at line 1 column 0
    invalid replay script: missing field `responses` at line 1 column 2
    invalid replay script: unknown field `txt`, expected one of `text`, `tool_calls`, `delay_ms` at line 1 column 21
    invalid replay script: missing field `name` at line 1 column 48
    invalid replay script: it has no responses
    ");
}

#[test]
fn a_script_file_that_does_not_parse_is_named_with_the_place_in_it() {
    let file = std::path::Path::new("scripts/demo.json");
    let refuse = |script: &str| match ReplayProvider::from_script_file(file, script) {
        Ok(_) => "accepted".to_owned(),
        Err(error) => error.to_string(),
    };
    let messages = [
        refuse("{\"responses\": [\n  {\"text\": \"hi\",}\n]}\n"),
        refuse("{\"responses\": [\n  {\"txt\": \"typo\"}\n]}\n"),
        refuse(""),
        refuse(r#"{"responses": []}"#),
    ];
    assert_snapshot!(messages.join("\n"), @r"
    invalid replay script scripts/demo.json: trailing comma at line 2 column 17
    invalid replay script scripts/demo.json: unknown field `txt`, expected one of `text`, `tool_calls`, `delay_ms` at line 2 column 8
    invalid replay script scripts/demo.json: EOF while parsing a value at line 1 column 0
    invalid replay script scripts/demo.json: it has no responses
    ");
    assert!(ReplayProvider::from_script_file(file, r#"{"responses": [{"text": "hi"}]}"#).is_ok());
}

#[test]
fn messages_serialize_with_stable_field_names() {
    let messages = [
        Message::system("rules"),
        Message::user("hi"),
        Message {
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"a\"}".into(),
            }],
            ..Message::assistant("")
        },
        Message::tool_result("call_1", "contents"),
    ];
    let lines: Vec<String> = messages
        .iter()
        .map(|message| serde_json::to_string(message).expect("serializes"))
        .collect();
    assert_snapshot!(lines.join("\n"), @r#"
    {"role":"system","content":"rules"}
    {"role":"user","content":"hi"}
    {"role":"assistant","content":"","tool_calls":[{"id":"call_1","name":"read_file","arguments":"{\"path\":\"a\"}"}]}
    {"role":"tool","content":"contents","tool_call_id":"call_1"}
    "#);
    for (line, message) in lines.iter().zip(&messages) {
        assert_eq!(
            &serde_json::from_str::<Message>(line).expect("parses"),
            message
        );
    }
    // A transcript line may leave out the optional fields.
    assert_eq!(
        serde_json::from_str::<Message>(r#"{"role": "user"}"#).expect("parses"),
        Message::user("")
    );
}

// The Anthropic Messages provider. Its transport is the OpenAI provider's, so these tests
// check what differs (the request, the events, the error bodies) and that the shared
// behaviour (retries, 529, 401, dropped streams) holds with Anthropic's answers too.

/// An Anthropic configuration for the mock at `url`, with short timings.
fn anthropic_config(url: &str) -> AnthropicConfig {
    AnthropicConfig {
        base_url: url.to_owned(),
        api_key: Some("sk-ant-test".to_owned()),
        max_tokens: 1000,
        timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        max_retry_delay: Duration::from_millis(50),
        ..AnthropicConfig::new("claude-test")
    }
}

fn claude(url: &str) -> AnthropicProvider {
    AnthropicProvider::new(anthropic_config(url)).expect("a valid configuration")
}

fn retry_reasons(events: &[StreamEvent]) -> Vec<(u32, Duration, &str)> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
                ..
            } => Some((*attempt, *delay, reason.as_str())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn anthropic_streams_text_and_sends_system_tools_and_results_marked_for_caching() {
    let (url, server) = MockServer::start(vec![anthropic::text_with_usage(
        &["Hel", "lo, ", "wörld"],
        Tokens {
            input: 20,
            cache_read: 1000,
            cache_creation: 180,
            output: 7,
        },
    )])
    .await;
    let messages = [
        Message::system("be brief"),
        Message::user("write a and b"),
        Message {
            tool_calls: vec![
                ToolCall {
                    id: "toolu_a".into(),
                    name: "write_file".into(),
                    arguments: r#"{"path":"a","content":"A"}"#.into(),
                },
                ToolCall {
                    id: "toolu_b".into(),
                    name: "write_file".into(),
                    arguments: r#"{"path":"b""#.into(),
                },
            ],
            ..Message::assistant("Writing both.")
        },
        Message::tool_result("toolu_a", "A a"),
        Message::tool_result("toolu_b", "the arguments are not valid JSON"),
    ];
    let tools = [write_file_tool()];

    let (result, events) = ask(&claude(&url), &messages, &tools).await;

    let completion = result.expect("a completion");
    assert_eq!(completion.message, Message::assistant("Hello, wörld"));
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(text_deltas(&events), ["Hel", "lo, ", "wörld"]);
    // The prompt is the uncached input, the cache read and the cache written.
    assert_eq!(
        completion.usage,
        Some(Usage {
            prompt_tokens: 1200,
            completion_tokens: 7,
            cached_tokens: 1000,
        })
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(
        request.body,
        json!({
            "model": "claude-test",
            "max_tokens": 1000,
            "stream": true,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "tools": [{
                "name": "write_file",
                "description": "Create or replace a file.",
                "input_schema": tools[0].parameters,
                "cache_control": {"type": "ephemeral"},
            }],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "write a and b"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Writing both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "write_file", "input": {"path": "a", "content": "A"}},
                    // Arguments that are not JSON were never run; the input sent back is empty.
                    {"type": "tool_use", "id": "toolu_b", "name": "write_file", "input": {}},
                ]},
                // Both results in one user message, the last block marked for caching.
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A a"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "the arguments are not valid JSON",
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_assembles_interleaved_tool_calls() {
    let (url, _server) = MockServer::start(vec![anthropic::events(&[
        anthropic::message_start(Tokens::default()),
        anthropic::text_start(0),
        anthropic::text_delta(0, "Writing both."),
        anthropic::block_stop(0),
        anthropic::tool_use_start(1, "toolu_a", "write_file"),
        anthropic::json_delta(1, "{\"path\": \"a.txt\", "),
        anthropic::tool_use_start(2, "toolu_b", "write_file"),
        anthropic::json_delta(2, "{\"pa"),
        anthropic::ping(),
        anthropic::json_delta(1, "\"content\": \"A\"}"),
        anthropic::json_delta(2, "th\": \"b.txt\", \"content\": \"B\"}"),
        anthropic::block_stop(1),
        anthropic::block_stop(2),
        // A call without arguments streams no JSON at all.
        anthropic::tool_use_start(3, "toolu_c", "list_dir"),
        anthropic::block_stop(3),
        anthropic::message_delta("tool_use", 40),
        anthropic::message_stop(),
    ])])
    .await;

    let (result, events) = ask(&claude(&url), &[Message::user("go")], &[]).await;

    let completion = result.expect("a completion");
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(completion.message.content, "Writing both.");
    let calls: Vec<_> = completion
        .message
        .tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                "toolu_a",
                "write_file",
                r#"{"path": "a.txt", "content": "A"}"#
            ),
            (
                "toolu_b",
                "write_file",
                r#"{"path": "b.txt", "content": "B"}"#
            ),
            ("toolu_c", "list_dir", "{}"),
        ]
    );
    let started: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallStarted { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["write_file", "write_file", "list_dir"]);
}

#[tokio::test]
async fn anthropic_stop_reasons_map_to_finish_reasons() {
    let answer = |reason: &str| {
        anthropic::events(&[
            anthropic::message_start(Tokens::default()),
            anthropic::text_start(0),
            anthropic::text_delta(0, "x"),
            anthropic::message_delta(reason, 1),
            anthropic::message_stop(),
        ])
    };
    let reasons = [
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "refusal",
        "pause_turn",
    ];
    let (url, _server) = MockServer::start(reasons.iter().map(|r| answer(r)).collect()).await;
    let provider = claude(&url);
    let mut finishes = Vec::new();
    for _ in reasons {
        let (result, _) = ask(&provider, &[Message::user("hi")], &[]).await;
        finishes.push(result.expect("a completion").finish_reason);
    }
    assert_eq!(
        finishes,
        [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::Stop,
            FinishReason::ContentFilter,
            FinishReason::Other("pause_turn".into()),
        ]
    );
}

#[tokio::test]
async fn anthropic_retries_429_and_529_honouring_a_capped_retry_after() {
    let (url, server) = MockServer::start(vec![
        anthropic::error(
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
        )
        .with_header("retry-after", "0"),
        anthropic::error(529, "overloaded_error", "Overloaded").with_header("retry-after", "3600"),
        anthropic::text(&["ok"]),
    ])
    .await;

    let (result, events) = ask(&claude(&url), &[Message::user("hi")], &[]).await;

    assert_eq!(result.expect("success after retries").message.content, "ok");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        retry_reasons(&events),
        [
            (1, Duration::ZERO, "rate limited (429)"),
            (2, Duration::from_millis(50), "server error (529)"),
        ]
    );
}

#[tokio::test]
async fn anthropic_gives_up_with_the_same_words_as_the_openai_provider() {
    let overloaded = || anthropic::error(529, "overloaded_error", "Overloaded");
    let (url, server) = MockServer::start(vec![overloaded(), overloaded(), overloaded()]).await;
    let (result, _) = ask(&claude(&url), &[Message::user("hi")], &[]).await;
    assert_snapshot!(message(&result.expect_err("overloaded"), &url), @"the server failed with 529 after 2 retries: Overloaded");
    assert_eq!(server.requests().len(), 3);

    let limited = || anthropic::error(429, "rate_limit_error", "Rate limited.");
    let (url, _server) = MockServer::start(vec![limited(), limited(), limited()]).await;
    let (result, _) = ask(&claude(&url), &[Message::user("hi")], &[]).await;
    assert_snapshot!(message(&result.expect_err("limited"), &url), @"the server is still rate limiting requests (429) after 2 retries: Rate limited");
}

#[tokio::test]
async fn anthropic_a_refused_key_fails_at_once() {
    let (url, server) = MockServer::start(vec![anthropic::error(
        401,
        "authentication_error",
        "invalid x-api-key",
    )])
    .await;
    let (result, events) = ask(&claude(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("unauthorized");
    assert!(
        matches!(error, ProviderError::Unauthorized { status: 401, .. }),
        "{error:?}"
    );
    assert_snapshot!(message(&error, &url), @"the API key was refused (401); set ANTHROPIC_API_KEY");
    assert_eq!(server.requests().len(), 1);
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn anthropic_an_unknown_model_is_named() {
    let (url, _server) = MockServer::start(vec![anthropic::error(
        404,
        "not_found_error",
        "model: claude-test",
    )])
    .await;
    let (result, _) = ask(&claude(&url), &[Message::user("hi")], &[]).await;
    assert_snapshot!(message(&result.expect_err("unknown"), &url), @"unknown model `claude-test` at http://127.0.0.1:PORT/v1/messages: model: claude-test; check --model or SHIRO_MODEL");
}

#[tokio::test]
async fn anthropic_a_dropped_or_unfinished_stream_is_an_error_not_a_short_answer() {
    let started = [
        anthropic::message_start(Tokens::default()),
        anthropic::text_start(0),
        anthropic::text_delta(0, "Half an ans"),
    ];
    // Broken off mid-chunk; then a clean end of the body, but no `message_stop`, even after
    // the stop reason.
    let mut unfinished = started.to_vec();
    unfinished.push(anthropic::message_delta("end_turn", 5));
    let (url, server) = MockServer::start(vec![
        anthropic::dropped_after(&started),
        anthropic::events(&unfinished),
    ])
    .await;
    let provider = claude(&url);

    let (dropped, events) = ask(&provider, &[Message::user("hi")], &[]).await;
    let (unfinished, _) = ask(&provider, &[Message::user("hi")], &[]).await;

    let error = dropped.expect_err("dropped");
    assert!(matches!(error, ProviderError::Dropped), "{error:?}");
    assert_snapshot!(message(&error, &url), @"the connection closed before the response finished");
    assert_eq!(text_deltas(&events), ["Half an ans"]);
    assert!(
        matches!(unfinished, Err(ProviderError::Dropped)),
        "{unfinished:?}"
    );
    // Text was shown, so nothing was sent again.
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn anthropic_an_error_event_mid_stream_is_an_error() {
    let (url, server) = MockServer::start(vec![anthropic::events(&[
        anthropic::message_start(Tokens::default()),
        anthropic::text_start(0),
        anthropic::text_delta(0, "Let me"),
        anthropic::error_event("overloaded_error", "Overloaded"),
    ])])
    .await;
    let (result, events) = ask(&claude(&url), &[Message::user("hi")], &[]).await;
    let error = result.expect_err("an error event");
    assert_snapshot!(message(&error, &url), @"the server reported an error while streaming: Overloaded");
    assert_eq!(text_deltas(&events), ["Let me"]);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn anthropic_malformed_streams_are_errors_not_panics() {
    let raw = |body: &[u8]| MockResponse::body(200, "text/event-stream", vec![body.to_vec()]);
    let (url, _server) = MockServer::start(vec![
        raw(b"event: message_start\ndata: {not json\n\n"),
        raw(b"data: {\"type\": \"content_block_delta\", \"delta\": {\"type\": \"text_delta\", \"text\": \"x\"}}\n\n"),
        raw(b"data: {\"type\": \"message_start\", \"message\": {\"usage\": {\"input_tokens\": \"many\"}}}\n\n"),
        raw(b"\xff\xfe garbage without events"),
        // A whole JSON answer from a server that does not stream is understood.
        MockResponse::error(200, json!({
            "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        })),
    ])
    .await;
    let provider = claude(&url);
    let mut messages = Vec::new();
    for _ in 0..4 {
        let (result, _) = ask(&provider, &[Message::user("hi")], &[]).await;
        messages.push(message(&result.expect_err("malformed"), &url));
    }
    assert_snapshot!(messages.join("\n"), @r#"
        the server sent a response shiro could not read: an event is not valid JSON (key must be a string at line 1 column 2)
        the server sent a response shiro could not read: an event has no `index`
        the server sent a response shiro could not read: an event is not valid JSON (invalid type: string "many", expected u64 at line 1 column 70)
        the connection closed before the response finished
        "#);
    let (whole, events) = ask(&provider, &[Message::user("hi")], &[]).await;
    let whole = whole.expect("a whole answer");
    assert_eq!(text_deltas(&events), ["Calling."]);
    assert_eq!(whole.finish_reason, FinishReason::ToolCalls);
    assert_eq!(whole.message.tool_calls[0].arguments, r#"{"path":"a"}"#);
    assert_eq!(whole.usage.map(|usage| usage.total()), Some(7));
}

#[tokio::test]
async fn anthropic_base_urls_with_or_without_v1_reach_messages() {
    let (url, server) =
        MockServer::start(vec![anthropic::text(&["a"]), anthropic::text(&["b"])]).await;
    let root = url.trim_end_matches("/v1").to_owned();
    for base in [root.clone(), format!("{root}/v1/messages/")] {
        let provider = AnthropicProvider::new(AnthropicConfig {
            base_url: base,
            ..anthropic_config(&url)
        })
        .expect("valid");
        let (result, _) = ask(&provider, &[Message::user("hi")], &[]).await;
        result.expect("a completion");
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/messages", "/v1/messages"]);
}

#[test]
fn anthropic_the_api_key_never_shows_in_debug_output_or_errors() {
    let config = AnthropicConfig {
        api_key: Some("sk-ant-secret".into()),
        ..AnthropicConfig::new("m")
    };
    assert!(!format!("{config:?}").contains("sk-ant-secret"));
    let provider = AnthropicProvider::new(config).expect("valid");
    assert!(!format!("{provider:?}").contains("sk-ant-secret"));
    let refused = AnthropicProvider::new(AnthropicConfig {
        api_key: Some("sk-ant-secret\nx".into()),
        ..AnthropicConfig::new("m")
    })
    .expect_err("a line break cannot be sent");
    assert_snapshot!(refused.to_string(), @"invalid provider configuration: the API key contains characters an HTTP header cannot carry (a line break?)");
    assert_snapshot!(
        AnthropicProvider::new(AnthropicConfig { max_tokens: 0, ..AnthropicConfig::new("m") })
            .expect_err("no room for an answer")
            .to_string(),
        @"invalid provider configuration: max_tokens must be at least 1"
    );
}
