//! Anthropic's Messages API: one streamed `POST {base}/v1/messages` per completion, with the
//! system prompt, the tools and the conversation so far marked for prompt caching. Retries,
//! timeouts and errors are the shared transport's (see [`super::http`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{ApiError, Decoder, Endpoint, Progress, Timings, Transport, secret_header};
use super::{
    Api, ChatRequest, Completion, FinishReason, Message, Provider, ProviderError, Role, Sink,
    StreamEvent, ToolCall, Usage,
};

/// How an [`AnthropicProvider`] reaches its server. The binary fills it from flags, the
/// environment and config files; this module reads none of them.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API root, e.g. [`AnthropicConfig::DEFAULT_BASE_URL`]; `/v1/messages` is appended
    /// (only `/messages` when it already ends in `/v1`, nothing when it ends in
    /// `/v1/messages`).
    pub base_url: String,
    /// Sent as `x-api-key` when present.
    pub api_key: Option<String>,
    /// Sent as `Authorization: Bearer …` when present: what a gateway in front of the API
    /// may want instead of (or beside) a key.
    pub auth_token: Option<String>,
    /// The model to ask for, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The most tokens the model may write in one answer; the API requires a value.
    pub max_tokens: u32,
    /// The longest the provider waits for the server: to connect, for the response to start,
    /// and between two events of a streamed response. Not a cap on the whole answer.
    pub timeout: Duration,
    /// How many times a request is retried after a 429, a 5xx (529 included), or a
    /// connection that broke before the response started.
    pub max_retries: u32,
    /// The first retry's delay; each further retry doubles it.
    pub retry_base_delay: Duration,
    /// The longest delay before a retry, also for a server's `Retry-After`.
    pub max_retry_delay: Duration,
    /// An HTTP(S) proxy URL for every request; `None` connects directly.
    pub proxy: Option<String>,
    /// What the error for a refused key tells the user to do; the binary says where the
    /// key came from (`set ANTHROPIC_API_KEY`, or the `api_key_cmd` that printed it).
    pub key_hint: String,
}

impl AnthropicConfig {
    /// Anthropic's public endpoint.
    pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
    /// The API version shiro speaks, sent as `anthropic-version`.
    pub const API_VERSION: &str = "2023-06-01";
    /// The default [`AnthropicConfig::max_tokens`]: room for a large file in one tool call,
    /// within what every current Claude model accepts.
    pub const DEFAULT_MAX_TOKENS: u32 = 16_384;

    /// A configuration for `model` at Anthropic's endpoint with no key and default timings
    /// (the same as the OpenAI-compatible provider's); set the fields to change the rest.
    pub fn new(model: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            auth_token: None,
            model: model.into(),
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            timeout: Timings::DEFAULT.timeout,
            max_retries: Timings::DEFAULT.max_retries,
            retry_base_delay: Timings::DEFAULT.retry_base_delay,
            max_retry_delay: Timings::DEFAULT.max_retry_delay,
            proxy: None,
            key_hint: format!("set {}", Api::Anthropic.key_var()),
        }
    }

    fn timings(&self) -> Timings {
        Timings {
            timeout: self.timeout,
            max_retries: self.max_retries,
            retry_base_delay: self.retry_base_delay,
            max_retry_delay: self.max_retry_delay,
        }
    }
}

// Written by hand so that the API key never reaches a log or an error report.
impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("max_retry_delay", &self.max_retry_delay)
            .field("proxy", &self.proxy)
            .field("key_hint", &self.key_hint)
            .finish()
    }
}

/// A [`Provider`] for Anthropic's Messages API (and servers that speak it).
#[derive(Debug)]
pub struct AnthropicProvider {
    transport: Transport,
    max_tokens: u32,
}

impl AnthropicProvider {
    /// Checks the configuration and builds the HTTP client; sends nothing yet.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        if config.max_tokens == 0 {
            return Err(ProviderError::InvalidConfig {
                detail: "max_tokens must be at least 1".into(),
            });
        }
        let base = config.base_url.trim().trim_end_matches('/');
        let url = if base.ends_with("/v1/messages") {
            base.to_owned()
        } else if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(AnthropicConfig::API_VERSION),
        );
        if let Some(key) = config.api_key.as_deref().filter(|key| !key.is_empty()) {
            headers.insert(HeaderName::from_static("x-api-key"), secret_header(key)?);
        }
        if let Some(token) = config
            .auth_token
            .as_deref()
            .filter(|token| !token.is_empty())
        {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                secret_header(&format!("Bearer {token}"))?,
            );
        }
        let transport = Transport::new(Endpoint {
            api: Api::Anthropic,
            timings: config.timings(),
            base_url: config.base_url,
            url,
            model: config.model,
            headers,
            key_hint: config.key_hint,
            proxy: config.proxy,
        })?;
        Ok(AnthropicProvider {
            transport,
            max_tokens: config.max_tokens,
        })
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    async fn complete(
        &self,
        request: &ChatRequest<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(self.transport.model(), self.max_tokens, request);
        self.transport
            .complete(&body, Assembler::default, sink)
            .await
    }

    fn model(&self) -> &str {
        self.transport.model()
    }

    fn kind(&self) -> &'static str {
        Api::Anthropic.name()
    }
}

/// Marks the block it is put on as the end of a cached prefix.
fn cache_control() -> Value {
    json!({ "type": "ephemeral" })
}

/// The JSON body of a streamed Messages request.
///
/// Three cache breakpoints: the last system block, the last tool, and the last block of the
/// conversation, so each step of a turn reads the whole earlier prompt from the cache.
fn request_body(model: &str, max_tokens: u32, request: &ChatRequest<'_>) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
    });
    // The API takes the system prompt apart from the messages; every system message goes
    // there, in order. Empty text blocks are refused by the API, so none is sent.
    let mut system: Vec<Value> = request
        .messages
        .iter()
        .filter(|message| message.role == Role::System && !message.content.is_empty())
        .map(|message| json!({ "type": "text", "text": message.content }))
        .collect();
    if let Some(last) = system.last_mut() {
        last["cache_control"] = cache_control();
        body["system"] = Value::Array(system);
    }
    let mut messages = wire_messages(request.messages);
    if let Some(last) = messages
        .last_mut()
        .and_then(|message| message["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
    {
        last["cache_control"] = cache_control();
    }
    body["messages"] = Value::Array(messages);
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_control();
        }
        body["tools"] = Value::Array(tools);
    }
    body
}

/// The conversation as the API wants it: only `user` and `assistant` messages, alternating,
/// each a list of content blocks. Tool results become `tool_result` blocks of a user
/// message; consecutive messages of one role are merged into one.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut wire: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", text_block(&message.content).into_iter().collect()),
            Role::Tool => ("user", vec![tool_result_block(message)]),
            Role::Assistant => ("assistant", assistant_blocks(message)),
        };
        if blocks.is_empty() {
            continue;
        }
        match wire.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => wire.push((role, blocks)),
        }
    }
    wire.into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

fn assistant_blocks(message: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = text_block(&message.content).into_iter().collect();
    for call in &message.tool_calls {
        // The API wants the input as an object. Arguments that are not a JSON object were
        // never run: the tool's result already tells the model they were invalid, so the
        // call is sent back with an empty input rather than failing the whole request.
        let input = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(object @ Value::Object(_)) => object,
            _ => json!({}),
        };
        blocks.push(json!({
            "type": "tool_use",
            "id": wire_id(&call.id),
            "name": call.name,
            "input": input,
        }));
    }
    blocks
}

fn tool_result_block(message: &Message) -> Value {
    let id = message.tool_call_id.as_deref().unwrap_or_default();
    let mut block = json!({ "type": "tool_result", "tool_use_id": wire_id(id) });
    if !message.content.is_empty() {
        block["content"] = Value::String(message.content.clone());
    }
    block
}

/// A tool call id the API accepts (letters, digits, `_` and `-`). Ids another provider
/// made may hold other characters; a call and its result map to the same id.
fn wire_id(id: &str) -> String {
    let id = super::api_name(id);
    if id.is_empty() { "call".to_owned() } else { id }
}

/// One streamed event, read leniently: the API may add event types and fields.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    index: Option<usize>,
    /// `message_start`'s message skeleton.
    #[serde(default)]
    message: Option<WireMessage>,
    /// `content_block_start`'s block.
    #[serde(default)]
    content_block: Option<WireBlock>,
    /// `content_block_delta`'s and `message_delta`'s change.
    #[serde(default)]
    delta: Option<WireDelta>,
    /// `message_delta`'s cumulative token counts.
    #[serde(default)]
    usage: Option<WireUsage>,
    /// An `error` event's error.
    #[serde(default)]
    error: Option<Value>,
}

/// A message: the skeleton in `message_start`, or a whole non-streamed answer.
#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireBlock {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts as the Messages API reports them; each may be missing or null.
#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// One content block of the answer being assembled.
#[derive(Debug)]
enum Block {
    /// Text (its deltas go straight to the message's text).
    Text,
    /// A tool call: its input arrives as JSON text in pieces.
    ToolUse {
        call: ToolCall,
        /// The input sent with the block's start, used when no piece follows.
        initial: Option<Value>,
    },
    /// A block shiro does not use (thinking, for one).
    Other,
}

/// Builds one assistant message out of the stream's events.
#[derive(Debug, Default)]
struct Assembler {
    text: String,
    /// Blocks by the API's `index`, so that deltas land in the right one.
    blocks: BTreeMap<usize, Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: u64,
    cache_creation: u64,
    cache_read: u64,
}

impl Decoder for Assembler {
    fn take(&mut self, data: &str, sink: &mut Sink<'_>) -> Result<Progress, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let event: Event =
            serde_json::from_str(data).map_err(|error| ProviderError::BadResponse {
                detail: format!("an event is not valid JSON ({error})"),
            })?;
        match event.kind.as_str() {
            "message_start" => {
                if let Some(usage) = event.message.and_then(|message| message.usage) {
                    self.take_usage(&usage);
                }
            }
            "content_block_start" => {
                let block = event
                    .content_block
                    .ok_or_else(|| missing("content_block"))?;
                let index = event.index.ok_or_else(|| missing("index"))?;
                self.start_block(index, block, sink);
            }
            "content_block_delta" => {
                let delta = event.delta.ok_or_else(|| missing("delta"))?;
                let index = event.index.ok_or_else(|| missing("index"))?;
                self.take_delta(index, delta, sink);
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|delta| delta.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = event.usage {
                    self.take_usage(&usage);
                }
            }
            "message_stop" => return Ok(Progress::Done),
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                return Err(ApiError::stream_error(&error));
            }
            // `ping`, `content_block_stop`, and event types added after this was written.
            _ => {}
        }
        Ok(Progress::More)
    }

    /// Only `message_stop` ends an answer: a stream that stops before it was cut short.
    fn finish(self, ended: bool) -> Result<Completion, ProviderError> {
        if !ended {
            return Err(ProviderError::Dropped);
        }
        Ok(self.assemble())
    }

    fn whole(mut self, text: &str, sink: &mut Sink<'_>) -> Result<Completion, ProviderError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| ProviderError::BadResponse {
                detail: format!("the answer is not valid JSON ({error})"),
            })?;
        if value.get("type").and_then(Value::as_str) == Some("error") {
            return Err(ApiError::stream_error(&value["error"]));
        }
        let message: WireMessage =
            serde_json::from_value(value).map_err(|error| ProviderError::BadResponse {
                detail: format!("the answer is not a message ({error})"),
            })?;
        if let Some(usage) = &message.usage {
            self.take_usage(usage);
        }
        for (index, block) in message.content.into_iter().enumerate() {
            self.start_block(index, block, sink);
        }
        self.stop_reason = message.stop_reason;
        Ok(self.assemble())
    }
}

fn missing(field: &str) -> ProviderError {
    ProviderError::BadResponse {
        detail: format!("an event has no `{field}`"),
    }
}

impl Assembler {
    /// Usage counts are cumulative: each one sent replaces the one before.
    fn take_usage(&mut self, usage: &WireUsage) {
        if let Some(input) = usage.input_tokens {
            self.input_tokens = Some(input);
        }
        if let Some(output) = usage.output_tokens {
            self.output_tokens = output;
        }
        if let Some(created) = usage.cache_creation_input_tokens {
            self.cache_creation = created;
        }
        if let Some(read) = usage.cache_read_input_tokens {
            self.cache_read = read;
        }
    }

    fn start_block(&mut self, index: usize, block: WireBlock, sink: &mut Sink<'_>) {
        let block = match block.kind.as_str() {
            "text" => {
                self.push_text(block.text.unwrap_or_default(), sink);
                Block::Text
            }
            "tool_use" => {
                let name = block.name.unwrap_or_default();
                sink(StreamEvent::ToolCallStarted { name: name.clone() });
                Block::ToolUse {
                    call: ToolCall {
                        id: block.id.unwrap_or_default(),
                        name,
                        arguments: String::new(),
                    },
                    initial: block.input,
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, block);
    }

    fn take_delta(&mut self, index: usize, delta: WireDelta, sink: &mut Sink<'_>) {
        match delta.kind.as_str() {
            "text_delta" => self.push_text(delta.text.unwrap_or_default(), sink),
            "input_json_delta" => {
                if let Some(Block::ToolUse { call, .. }) = self.blocks.get_mut(&index) {
                    call.arguments
                        .push_str(delta.partial_json.as_deref().unwrap_or_default());
                }
            }
            // Thinking, signatures, citations: nothing shiro uses.
            _ => {}
        }
    }

    fn push_text(&mut self, text: String, sink: &mut Sink<'_>) {
        if !text.is_empty() {
            self.text.push_str(&text);
            sink(StreamEvent::TextDelta(text));
        }
    }

    fn assemble(self) -> Completion {
        let tool_calls: Vec<ToolCall> = self
            .blocks
            .into_values()
            .enumerate()
            .filter_map(|(position, block)| match block {
                Block::ToolUse { mut call, initial } => {
                    if call.arguments.trim().is_empty() {
                        // A call without arguments streams no piece: its input is the
                        // start's, `{}`.
                        call.arguments = initial
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}))
                            .to_string();
                    }
                    if call.id.is_empty() {
                        call.id = format!("call_{}", position + 1);
                    }
                    Some(call)
                }
                Block::Text | Block::Other => None,
            })
            .collect();
        let finish_reason = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        // The API counts cached prompt tokens apart from `input_tokens`; shiro's prompt is
        // all of them.
        let usage = self.input_tokens.map(|input| Usage {
            prompt_tokens: input
                .saturating_add(self.cache_read)
                .saturating_add(self.cache_creation),
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read,
        });
        Completion {
            message: Message {
                tool_calls,
                ..Message::assistant(self.text)
            },
            finish_reason,
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "write_file".to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn the_conversation_alternates_and_tool_results_are_merged() {
        let messages = [
            Message::system("rules"),
            Message::system("more rules"),
            Message::user("write a and b"),
            Message {
                tool_calls: vec![
                    call("toolu_1", r#"{"path":"a"}"#),
                    call("call.2", "{not json"),
                ],
                ..Message::assistant("Writing.")
            },
            Message::tool_result("toolu_1", "A a"),
            Message::tool_result("call.2", "the arguments are not valid JSON"),
            Message::user("and c"),
            Message::assistant(""),
            Message::user("please"),
        ];
        let tools = [ToolSpec {
            name: "write_file".into(),
            description: "Write.".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = request_body(
            "claude-test",
            100,
            &ChatRequest {
                messages: &messages,
                tools: &tools,
            },
        );
        insta::assert_snapshot!(serde_json::to_string_pretty(&body).unwrap());
    }

    fn arbitrary_message() -> impl proptest::strategy::Strategy<Value = Message> {
        use proptest::prelude::*;
        let text = prop_oneof![Just(String::new()), "[a-z ]{1,8}"];
        let id = prop_oneof![Just("toolu_1".to_owned()), "[a-z.:]{0,4}"];
        let calls = proptest::collection::vec(
            (id.clone(), "[{}a-z\"]{0,6}").prop_map(|(id, arguments)| call(&id, &arguments)),
            0..3,
        );
        prop_oneof![
            text.clone().prop_map(Message::system),
            text.clone().prop_map(Message::user),
            (text.clone(), calls).prop_map(|(text, tool_calls)| Message {
                tool_calls,
                ..Message::assistant(text)
            }),
            (id, text).prop_map(|(id, text)| Message::tool_result(id, text)),
        ]
    }

    proptest::proptest! {
        /// Whatever the history, the API gets what it requires: user and assistant
        /// messages alternating, none empty, no empty text block, inputs that are objects,
        /// every tool call and result sent once, and one cache mark on the last block.
        #[test]
        fn any_history_becomes_a_request_the_api_accepts(
            messages in proptest::collection::vec(arbitrary_message(), 0..12)
        ) {
            let body = request_body("m", 10, &ChatRequest { messages: &messages, tools: &[] });
            let wire = body["messages"].as_array().cloned().unwrap_or_default();
            for pair in wire.windows(2) {
                proptest::prop_assert_ne!(&pair[0]["role"], &pair[1]["role"]);
            }
            let blocks: Vec<&Value> = wire
                .iter()
                .flat_map(|message| message["content"].as_array().into_iter().flatten())
                .collect();
            for message in &wire {
                proptest::prop_assert!(!message["content"].as_array().unwrap().is_empty());
            }
            for block in &blocks {
                if block["type"] == "text" {
                    proptest::prop_assert_ne!(&block["text"], "");
                }
                if block["type"] == "tool_use" {
                    proptest::prop_assert!(block["input"].is_object());
                }
            }
            let count = |kind: &str| blocks.iter().filter(|block| block["type"] == kind).count();
            let calls: usize = messages.iter().map(|message| message.tool_calls.len()).sum();
            let results = messages.iter().filter(|message| message.role == Role::Tool).count();
            proptest::prop_assert_eq!(count("tool_use"), calls);
            proptest::prop_assert_eq!(count("tool_result"), results);
            let marked = blocks.iter().filter(|block| block.get("cache_control").is_some()).count();
            proptest::prop_assert_eq!(marked, usize::from(!blocks.is_empty()));
        }

        /// No event data, however broken, panics the decoder.
        #[test]
        fn any_event_data_is_an_answer_or_an_error(
            events in proptest::collection::vec(
                proptest::prop_oneof![
                    "\\PC{0,40}",
                    proptest::strategy::Just(r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use"}}"#.to_owned()),
                    proptest::strategy::Just(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta"}}"#.to_owned()),
                    proptest::strategy::Just(r#"{"type":"message_delta","usage":{"output_tokens":18446744073709551615}}"#.to_owned()),
                    proptest::strategy::Just(r#"{"type":"message_start","message":{"usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":5}}}"#.to_owned()),
                ],
                0..8,
            )
        ) {
            let mut assembler = Assembler::default();
            let mut sink = |_event: StreamEvent| {};
            for data in &events {
                if assembler.take(data, &mut sink).is_err() {
                    return Ok(());
                }
            }
            let _ = assembler.finish(true);
        }
    }

    #[test]
    fn ids_are_made_acceptable_and_stay_paired() {
        assert_eq!(wire_id("call.2:x"), "call_2_x");
        assert_eq!(wire_id("toolu_01-A"), "toolu_01-A");
        assert_eq!(wire_id(""), "call");
    }
}
