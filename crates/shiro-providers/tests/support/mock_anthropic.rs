//! Scripted answers in Anthropic's Messages API format, for the mock server of
//! [`super::mock_openai`] (the HTTP side is the same: one scripted response per request,
//! every request recorded).
//!
//! A streamed answer is a series of server-sent events, each an `event:` line naming its
//! type and a `data:` line with the JSON, as the API documents them: `message_start`, per
//! content block `content_block_start`, `content_block_delta`s and `content_block_stop`,
//! then `message_delta` (stop reason, usage) and `message_stop`; `ping` may come anywhere,
//! and `error` reports a failure mid-stream.
//!
//! ```ignore
//! let (url, server) = MockServer::start(vec![mock_anthropic::text(&["Hel", "lo"])]).await;
//! // point the provider at `url` …
//! assert_eq!(server.requests()[0].path, "/v1/messages");
//! ```

use serde_json::{Value, json};

use super::mock_openai::MockResponse;

/// Token counts for `message_start`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokens {
    /// `input_tokens`: the prompt tokens not read from or written to the cache.
    pub input: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `cache_creation_input_tokens`.
    pub cache_creation: u64,
    /// `output_tokens` in the final `message_delta`.
    pub output: u64,
}

/// The bytes of one event: `event: TYPE` and `data: JSON`, then a blank line.
fn event_bytes(event: &Value) -> Vec<u8> {
    let kind = event["type"].as_str().unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n").into_bytes()
}

/// A 200 event stream of exactly `events` (each sent with its `event:` line).
pub fn events(events: &[Value]) -> MockResponse {
    MockResponse::body(
        200,
        "text/event-stream",
        events.iter().map(event_bytes).collect(),
    )
}

/// `message_start` with the usage the API reports there.
pub fn message_start(tokens: Tokens) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
        "model": "claude-mock", "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": tokens.input,
            "cache_creation_input_tokens": tokens.cache_creation,
            "cache_read_input_tokens": tokens.cache_read,
            "output_tokens": 1,
        },
    }})
}

/// The start of a text block at `index`.
pub fn text_start(index: usize) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
}

/// A piece of the text block at `index`.
pub fn text_delta(index: usize, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}})
}

/// The start of a `tool_use` block at `index`.
pub fn tool_use_start(index: usize, id: &str, name: &str) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
}

/// A piece of the JSON input of the tool call at `index`.
pub fn json_delta(index: usize, partial_json: &str) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial_json}})
}

/// The end of the block at `index`.
pub fn block_stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

/// `message_delta` with the stop reason and the final output token count.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}})
}

/// The last event of a complete answer.
pub fn message_stop() -> Value {
    json!({"type": "message_stop"})
}

/// A keep-alive.
pub fn ping() -> Value {
    json!({"type": "ping"})
}

/// An error event inside a stream, e.g. `overloaded_error`.
pub fn error_event(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// A text answer in `pieces`, one text block, ending with `end_turn`.
pub fn text(pieces: &[&str]) -> MockResponse {
    text_with_usage(pieces, Tokens::default())
}

/// [`text`], reporting `tokens`.
pub fn text_with_usage(pieces: &[&str], tokens: Tokens) -> MockResponse {
    let mut all = vec![message_start(tokens), text_start(0), ping()];
    all.extend(pieces.iter().map(|piece| text_delta(0, piece)));
    all.extend([
        block_stop(0),
        message_delta("end_turn", tokens.output),
        message_stop(),
    ]);
    events(&all)
}

/// An answer of some text, then one tool call whose input arrives in `pieces`, ending with
/// `tool_use`.
pub fn tool_call(text: &str, id: &str, name: &str, pieces: &[&str]) -> MockResponse {
    let mut all = vec![message_start(Tokens::default())];
    let mut index = 0;
    if !text.is_empty() {
        all.extend([text_start(0), text_delta(0, text), block_stop(0)]);
        index = 1;
    }
    all.push(tool_use_start(index, id, name));
    all.extend(pieces.iter().map(|piece| json_delta(index, piece)));
    all.extend([
        block_stop(index),
        message_delta("tool_use", 20),
        message_stop(),
    ]);
    events(&all)
}

/// An Anthropic error body: `{"type": "error", "error": {"type": KIND, "message": …}}`.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// An error status with an Anthropic error body.
pub fn error(status: u16, kind: &str, message: &str) -> MockResponse {
    MockResponse::error(status, error_body(kind, message))
}

/// A stream that sends `sent` and then breaks off, as a dropped connection does.
pub fn dropped_after(sent: &[Value]) -> MockResponse {
    events(sent).then_drop()
}
