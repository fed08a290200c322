//! The OpenAI-compatible Chat Completions provider: one streamed `POST {base}/chat/completions`
//! per completion, with retries on 429 and 5xx.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{self, HeaderMap};
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{ApiError, Decoder, Endpoint, Progress, Timings, Transport, secret_header};
use super::{
    Api, ChatRequest, Completion, FinishReason, Message, Provider, ProviderError, Role, Sink,
    StreamEvent, ToolCall, Usage,
};

/// How an [`OpenAiProvider`] reaches its server. The binary fills it from flags, the
/// environment and config files; this module reads none of them.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, e.g. [`OpenAiConfig::DEFAULT_BASE_URL`] or `http://localhost:11434/v1`
    /// for Ollama; `/chat/completions` is appended (unless it is already there).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present; local servers need none.
    pub api_key: Option<String>,
    /// The model to ask for.
    pub model: String,
    /// The longest the provider waits for the server: to connect, for the response to start,
    /// and between two chunks of a streamed response. Not a cap on the whole answer, which
    /// may stream for minutes.
    pub timeout: Duration,
    /// How many times a request is retried after a 429, a 5xx, or a connection that broke
    /// before the response started.
    pub max_retries: u32,
    /// The first retry's delay; each further retry doubles it.
    pub retry_base_delay: Duration,
    /// The longest delay before a retry, also for a server's `Retry-After`.
    pub max_retry_delay: Duration,
    /// An HTTP(S) proxy URL for every request; `None` connects directly.
    pub proxy: Option<String>,
    /// What the error for a refused key tells the user to do; the binary says where the
    /// key came from (`set OPENAI_API_KEY`, or the `api_key_cmd` that printed it).
    pub key_hint: String,
}

impl OpenAiConfig {
    /// OpenAI's public endpoint.
    pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
    /// The default [`OpenAiConfig::timeout`]: generous, because a local server may load a
    /// large model into memory before it sends the first byte.
    pub const DEFAULT_TIMEOUT: Duration = Timings::DEFAULT.timeout;
    /// The default [`OpenAiConfig::max_retries`].
    pub const DEFAULT_MAX_RETRIES: u32 = Timings::DEFAULT.max_retries;

    /// A configuration for `model` at OpenAI's endpoint with no key and default timings;
    /// set the fields to change the rest.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            timeout: Timings::DEFAULT.timeout,
            max_retries: Timings::DEFAULT.max_retries,
            retry_base_delay: Timings::DEFAULT.retry_base_delay,
            max_retry_delay: Timings::DEFAULT.max_retry_delay,
            proxy: None,
            key_hint: format!("set {}", Api::OpenAi.key_var()),
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
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("max_retry_delay", &self.max_retry_delay)
            .field("proxy", &self.proxy)
            .field("key_hint", &self.key_hint)
            .finish()
    }
}

/// A [`Provider`] for any server that speaks OpenAI's Chat Completions API with streaming:
/// OpenAI, Ollama, llama.cpp's server, vLLM and others.
#[derive(Debug)]
pub struct OpenAiProvider {
    transport: Transport,
}

impl OpenAiProvider {
    /// Checks the configuration and builds the HTTP client; sends nothing yet.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let url = if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        };
        let mut headers = HeaderMap::new();
        // Local servers need no key, so none (or an empty one) sends no header.
        if let Some(key) = config.api_key.as_deref().filter(|key| !key.is_empty()) {
            headers.insert(
                header::AUTHORIZATION,
                secret_header(&format!("Bearer {key}"))?,
            );
        }
        let transport = Transport::new(Endpoint {
            api: Api::OpenAi,
            timings: config.timings(),
            base_url: config.base_url,
            url,
            model: config.model,
            headers,
            key_hint: config.key_hint,
            proxy: config.proxy,
        })?;
        Ok(OpenAiProvider { transport })
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn complete(
        &self,
        request: &ChatRequest<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(self.transport.model(), request);
        self.transport
            .complete(&body, Assembler::default, sink)
            .await
    }

    fn model(&self) -> &str {
        self.transport.model()
    }

    fn kind(&self) -> &'static str {
        Api::OpenAi.name()
    }
}

/// The JSON body of a streamed Chat Completions request.
fn request_body(model: &str, request: &ChatRequest<'_>) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
    // `include_usage` asks for a last chunk with the request's token counts.
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    // Some servers reject an empty `tools` array, so none is sent when there are no tools.
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

fn wire_message(message: &Message) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut wire = json!({ "role": role, "content": message.content });
    if !message.tool_calls.is_empty() {
        // An assistant turn that only calls tools has no text; the API spells that `null`.
        if message.content.is_empty() {
            wire["content"] = Value::Null;
        }
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
        wire["tool_calls"] = Value::Array(calls);
    }
    if let Some(id) = &message.tool_call_id {
        wire["tool_call_id"] = Value::String(id.clone());
    }
    wire
}

/// One streamed chunk (or a whole non-streamed response), read leniently: every field may
/// be missing, because servers differ in what they send.
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// Token counts as the Chat Completions API reports them.
#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    /// Streamed chunks carry a `delta`, whole responses a `message`; both read the same.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment as OpenAI sends it; some servers send a whole JSON object.
    #[serde(default)]
    arguments: Option<Value>,
}

/// Builds one assistant message out of streamed fragments.
#[derive(Debug, Default)]
struct Assembler {
    text: String,
    /// Tool calls by the server's `index`, so fragments of interleaved calls land right.
    calls: BTreeMap<usize, ToolCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl Decoder for Assembler {
    fn take(&mut self, data: &str, sink: &mut Sink<'_>) -> Result<Progress, ProviderError> {
        self.take_data(data, false, sink)
    }

    /// Without `[DONE]` (`ended` false) the stream counts as complete only if the model sent
    /// a finish reason.
    fn finish(self, ended: bool) -> Result<Completion, ProviderError> {
        self.assemble(ended)
    }

    fn whole(mut self, text: &str, sink: &mut Sink<'_>) -> Result<Completion, ProviderError> {
        self.take_data(text, true, sink)?;
        self.assemble(true)
    }
}

impl Assembler {
    /// Takes one event's data: a streamed chunk, or (`whole`) a complete response.
    fn take_data(
        &mut self,
        data: &str,
        whole: bool,
        sink: &mut Sink<'_>,
    ) -> Result<Progress, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|error| ProviderError::BadResponse {
                detail: format!("a chunk is not valid JSON ({error})"),
            })?;
        if let Some(error) = chunk.error.filter(|error| !error.is_null()) {
            return Err(ApiError::stream_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                cached_tokens: usage
                    .prompt_tokens_details
                    .map_or(0, |details| details.cached_tokens),
            });
        }
        // shiro asks for one choice; should a server send more, only the first counts.
        for choice in chunk
            .choices
            .into_iter()
            .filter(|choice| choice.index.unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.delta {
                self.take_delta(delta, whole, sink);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(FinishReason::from_wire(&reason));
            }
        }
        Ok(Progress::More)
    }

    fn take_delta(&mut self, delta: Delta, whole: bool, sink: &mut Sink<'_>) {
        if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
            self.text.push_str(&text);
            sink(StreamEvent::TextDelta(text));
        }
        for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            // A whole response lists each call once, complete, in order.
            let index = if whole {
                position
            } else {
                self.slot_for(&fragment)
            };
            let call = self.calls.entry(index).or_insert_with(|| ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                // Some servers repeat the id on every fragment; the first one stands.
                if call.id.is_empty() {
                    call.id = id;
                }
            }
            let Some(function) = fragment.function else {
                continue;
            };
            if let Some(name) = function.name.filter(|name| !name.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
                sink(StreamEvent::ToolCallStarted {
                    name: call.name.clone(),
                });
            }
            match function.arguments {
                Some(Value::String(fragment)) => call.arguments.push_str(&fragment),
                Some(Value::Null) | None => {}
                Some(whole) => call.arguments.push_str(&whole.to_string()),
            }
        }
    }

    /// Where a fragment belongs. OpenAI numbers every fragment with `index`; a server that
    /// does not starts a new call when it sends an id not seen yet, and otherwise continues
    /// the newest call.
    fn slot_for(&self, fragment: &ToolCallDelta) -> usize {
        if let Some(index) = fragment.index {
            return index;
        }
        let Some((&newest, newest_call)) = self.calls.last_key_value() else {
            return 0;
        };
        match fragment.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) if id != newest_call.id => self
                .calls
                .iter()
                .find(|(_, call)| call.id == id)
                .map_or(newest + 1, |(&index, _)| index),
            _ => newest,
        }
    }

    /// The assembled completion; see [`Decoder::finish`].
    fn assemble(self, saw_done: bool) -> Result<Completion, ProviderError> {
        if !saw_done && self.finish_reason.is_none() {
            return Err(ProviderError::Dropped);
        }
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{}", index + 1);
                }
                call
            })
            .collect();
        let finish_reason = self.finish_reason.unwrap_or(if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        Ok(Completion {
            message: Message {
                tool_calls,
                ..Message::assistant(self.text)
            },
            finish_reason,
            usage: self.usage,
        })
    }
}
