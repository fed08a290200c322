//! The OpenAI-compatible Chat Completions provider: one streamed `POST {base}/chat/completions`
//! per completion, with retries on 429 and 5xx.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{self, HeaderMap};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::one_line;
use super::sse::SseParser;
use super::{
    ChatRequest, Completion, FinishReason, Message, Provider, ProviderError, Role, Sink,
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
}

impl OpenAiConfig {
    /// OpenAI's public endpoint.
    pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
    /// The default [`OpenAiConfig::timeout`]: generous, because a local server may load a
    /// large model into memory before it sends the first byte.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
    /// The default [`OpenAiConfig::max_retries`].
    pub const DEFAULT_MAX_RETRIES: u32 = 4;

    /// A configuration for `model` at OpenAI's endpoint with no key and default timings;
    /// set the fields to change the rest.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            timeout: Self::DEFAULT_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            retry_base_delay: Duration::from_millis(200),
            max_retry_delay: Duration::from_secs(20),
            proxy: None,
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
            .finish()
    }
}

/// A [`Provider`] for any server that speaks OpenAI's Chat Completions API with streaming:
/// OpenAI, Ollama, llama.cpp's server, vLLM and others.
#[derive(Debug)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    config: OpenAiConfig,
    /// The full `…/chat/completions` URL.
    url: String,
}

impl OpenAiProvider {
    /// Checks the configuration and builds the HTTP client; sends nothing yet.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let invalid = |detail: String| ProviderError::InvalidConfig { detail };
        if config.model.trim().is_empty() {
            return Err(invalid(
                "the model name is empty; set --model or SHIRO_MODEL".into(),
            ));
        }
        let base = config.base_url.trim().trim_end_matches('/');
        let url = if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        };
        let scheme = url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(invalid(format!(
                "the base URL `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        if let Err(error) = reqwest::Url::parse(&url) {
            return Err(invalid(format!(
                "the base URL `{}` is not a valid URL ({error})",
                config.base_url
            )));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .user_agent(concat!("shiro/", env!("CARGO_PKG_VERSION")));
        // reqwest would otherwise read proxy settings from the environment behind our back.
        builder = match &config.proxy {
            None => builder.no_proxy(),
            Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy).map_err(|error| {
                invalid(format!("the proxy `{proxy}` is not usable ({error})"))
            })?),
        };
        let client = builder
            .build()
            .map_err(|error| invalid(format!("could not set up HTTP ({error})")))?;
        Ok(OpenAiProvider {
            client,
            config,
            url,
        })
    }

    /// Sends the request once and reads the whole response.
    async fn attempt(&self, body: &Value, sink: &mut Sink<'_>) -> Result<Completion, Failure> {
        let mut request = self
            .client
            .post(&self.url)
            .header(header::ACCEPT, "text/event-stream")
            .json(body);
        if let Some(key) = self.config.api_key.as_deref().filter(|key| !key.is_empty()) {
            request = request.bearer_auth(key);
        }
        let response = match tokio::time::timeout(self.config.timeout, request.send()).await {
            Err(_elapsed) => return Err(Failure::Fatal(self.timed_out())),
            Ok(Err(error)) => return Err(self.classify_send_error(&error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return Err(self.classify_status(response).await);
        }
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        let body = BodyReader {
            response,
            timeout: self.config.timeout,
        };
        if is_json {
            // The server ignored `stream: true` and sent one whole completion.
            let bytes = body
                .read_to_limit(MAX_JSON_BODY)
                .await
                .map_err(|e| self.fatal(e))?;
            let text = String::from_utf8_lossy(&bytes);
            let mut assembler = Assembler::default();
            assembler.take(&text, true, sink).map_err(Failure::Fatal)?;
            return assembler.finish(true).map_err(Failure::Fatal);
        }
        self.read_stream(body, sink).await.map_err(Failure::Fatal)
    }

    async fn read_stream(
        &self,
        mut body: BodyReader,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let mut parser = SseParser::default();
        let mut assembler = Assembler::default();
        let too_long = |_| ProviderError::BadResponse {
            detail: "an event in the stream is larger than 16 MiB".into(),
        };
        while let Some(chunk) = body.next_chunk().await.map_err(|e| self.body_error(e))? {
            for data in parser.push(chunk.as_ref()).map_err(too_long)? {
                if assembler.take(&data, false, sink)? == Progress::Done {
                    return assembler.finish(true);
                }
            }
        }
        if let Some(data) = parser.finish()
            && assembler.take(&data, false, sink)? == Progress::Done
        {
            return assembler.finish(true);
        }
        // No `[DONE]`: accept the stream only if the model said it had finished.
        assembler.finish(false)
    }

    fn timed_out(&self) -> ProviderError {
        ProviderError::Timeout {
            url: self.url.clone(),
            after: self.config.timeout,
        }
    }

    fn body_error(&self, error: BodyError) -> ProviderError {
        match error {
            BodyError::TimedOut => self.timed_out(),
            BodyError::Broken => ProviderError::Dropped,
            BodyError::TooLarge => ProviderError::BadResponse {
                detail: format!("the response is larger than {} MiB", MAX_JSON_BODY >> 20),
            },
        }
    }

    fn fatal(&self, error: BodyError) -> Failure {
        Failure::Fatal(self.body_error(error))
    }

    fn classify_send_error(&self, error: &reqwest::Error) -> Failure {
        if error.is_timeout() {
            return Failure::Fatal(self.timed_out());
        }
        let io_kind = error_chain(error)
            .find_map(|source| source.downcast_ref::<std::io::Error>())
            .map(std::io::Error::kind);
        if io_kind == Some(std::io::ErrorKind::ConnectionRefused) {
            return Failure::Fatal(ProviderError::ConnectionRefused {
                url: self.url.clone(),
            });
        }
        if error.is_connect() {
            let detail = error_chain(error)
                .last()
                .map_or_else(String::new, |e| e.to_string());
            return Failure::Fatal(ProviderError::Connect {
                url: self.url.clone(),
                detail: one_line(&detail),
            });
        }
        // The connection broke before the response began (a reset, or a pooled connection
        // the server had closed): nothing was streamed, so sending again is safe.
        Failure::Transient {
            kind: Transient::Dropped,
            retry_after: None,
        }
    }

    async fn classify_status(&self, response: reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let reason = response
            .status()
            .canonical_reason()
            .unwrap_or("error")
            .to_lowercase();
        let body = BodyReader {
            response,
            timeout: self.config.timeout,
        }
        .read_to_limit(MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
        let ApiError { message, code } = ApiError::parse(&body);
        let detail = if message.is_empty() {
            format!("{status} {reason}")
        } else {
            message
        };
        let fatal = |error| Failure::Fatal(error);
        match status {
            401 | 403 => fatal(ProviderError::Unauthorized { status }),
            400 | 404 | 422 if names_unknown_model(&detail, &code) => {
                fatal(ProviderError::UnknownModel {
                    model: self.config.model.clone(),
                    url: self.url.clone(),
                    detail,
                })
            }
            404 => fatal(ProviderError::NotFound {
                url: self.url.clone(),
            }),
            // OpenAI says 429 for an exhausted quota too, which no amount of waiting fixes.
            429 if code == "insufficient_quota" => {
                fatal(ProviderError::Rejected { status, detail })
            }
            429 => Failure::Transient {
                kind: Transient::RateLimited { detail },
                retry_after,
            },
            500..=599 => Failure::Transient {
                kind: Transient::Server { status, detail },
                retry_after,
            },
            _ => fatal(ProviderError::Rejected { status, detail }),
        }
    }

    fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry);
        self.config
            .retry_base_delay
            .saturating_mul(factor)
            .min(self.config.max_retry_delay)
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn complete(
        &self,
        request: &ChatRequest<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(&self.config.model, request);
        let mut retries = 0;
        loop {
            let (kind, retry_after) = match self.attempt(&body, sink).await {
                Ok(completion) => return Ok(completion),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Transient { kind, retry_after }) => (kind, retry_after),
            };
            if retries >= self.config.max_retries {
                return Err(kind.into_error(retries));
            }
            let delay = retry_after.unwrap_or_else(|| self.backoff(retries));
            let delay = delay.min(self.config.max_retry_delay);
            retries += 1;
            sink(StreamEvent::Retrying {
                attempt: retries,
                max_retries: self.config.max_retries,
                delay,
                reason: kind.reason(),
            });
            tokio::time::sleep(delay).await;
        }
    }

    fn model(&self) -> &str {
        &self.config.model
    }
}

/// How one attempt failed.
enum Failure {
    /// Retrying cannot help.
    Fatal(ProviderError),
    /// Retrying may help; `retry_after` is the server's own suggestion.
    Transient {
        kind: Transient,
        retry_after: Option<Duration>,
    },
}

enum Transient {
    RateLimited { detail: String },
    Server { status: u16, detail: String },
    Dropped,
}

impl Transient {
    fn reason(&self) -> String {
        match self {
            Transient::RateLimited { .. } => "rate limited (429)".to_owned(),
            Transient::Server { status, .. } => format!("server error ({status})"),
            Transient::Dropped => "the connection closed".to_owned(),
        }
    }

    fn into_error(self, retries: u32) -> ProviderError {
        match self {
            Transient::RateLimited { detail } => ProviderError::RateLimited { retries, detail },
            Transient::Server { status, detail } => ProviderError::Server {
                status,
                retries,
                detail,
            },
            Transient::Dropped => ProviderError::Dropped,
        }
    }
}

/// The most of an error response that is read.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The most of a whole (non-streamed) JSON response that is read.
const MAX_JSON_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy)]
enum BodyError {
    TimedOut,
    Broken,
    TooLarge,
}

/// Reads a response body chunk by chunk, with the idle timeout between chunks.
struct BodyReader {
    response: reqwest::Response,
    timeout: Duration,
}

impl BodyReader {
    /// The next chunk of the body, or `None` at its end.
    async fn next_chunk(&mut self) -> Result<Option<impl AsRef<[u8]> + use<>>, BodyError> {
        match tokio::time::timeout(self.timeout, self.response.chunk()).await {
            Err(_elapsed) => Err(BodyError::TimedOut),
            Ok(Err(error)) if error.is_timeout() => Err(BodyError::TimedOut),
            Ok(Err(_)) => Err(BodyError::Broken),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    /// The whole body, refused when it is longer than `limit` bytes.
    async fn read_to_limit(mut self, limit: usize) -> Result<Vec<u8>, BodyError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            body.extend_from_slice(chunk.as_ref());
            if body.len() > limit {
                return Err(BodyError::TooLarge);
            }
        }
        Ok(body)
    }
}

fn error_chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |error| error.source())
}

/// The server's `Retry-After` (seconds) or OpenAI's `retry-after-ms`, if it sent one.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    // An HTTP date is allowed too but is rare from these servers; it falls back to backoff.
    let seconds = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))?;
    // Bounded before converting, since `from_secs_f64` panics on overflow.
    Some(Duration::from_secs_f64(seconds.min(24.0 * 3600.0)))
}

/// Whether an error response says the model does not exist. Servers differ: OpenAI sends
/// the code `model_not_found`, vLLM "The model `x` does not exist", Ollama "model \"x\" not
/// found, try pulling it first".
fn names_unknown_model(message: &str, code: &str) -> bool {
    let message = message.to_lowercase();
    code == "model_not_found"
        || (message.contains("model")
            && (message.contains("not found") || message.contains("does not exist")))
}

/// The useful part of an error response body, whatever shape the server chose.
#[derive(Debug, Default)]
struct ApiError {
    message: String,
    code: String,
}

impl ApiError {
    fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            // Not JSON (an HTML error page, a proxy's text): show it only if it is short.
            let message = if text.len() <= 200 && !text.contains('<') {
                one_line(&text)
            } else {
                String::new()
            };
            return ApiError {
                message,
                code: String::new(),
            };
        };
        Self::from_value(&value)
    }

    fn from_value(value: &Value) -> Self {
        let text = |value: Option<&Value>| match value {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(number)) => number.to_string(),
            _ => String::new(),
        };
        // OpenAI, vLLM, llama.cpp: {"error": {"message", "type", "code"}}; Ollama's native
        // errors: {"error": "…"}; FastAPI-style servers: {"detail": "…"} or {"message": "…"}.
        let error = value.get("error").unwrap_or(value);
        let message = match error {
            Value::String(message) => message.clone(),
            _ => [
                error.get("message"),
                error.get("detail"),
                value.get("detail"),
            ]
            .into_iter()
            .map(text)
            .find(|message| !message.is_empty())
            .unwrap_or_default(),
        };
        let code = [error.get("code"), error.get("type")]
            .into_iter()
            .map(text)
            .find(|code| code == "model_not_found" || code == "insufficient_quota")
            .or_else(|| Some(text(error.get("code"))))
            .unwrap_or_default();
        ApiError {
            message: one_line(&message),
            code,
        }
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

#[derive(Debug, PartialEq, Eq)]
enum Progress {
    More,
    Done,
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

impl Assembler {
    /// Takes one event's data: a streamed chunk, or (`whole`) a complete response.
    fn take(
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
            let ApiError { message, .. } = ApiError::from_value(&json!({ "error": error }));
            let detail = if message.is_empty() {
                one_line(&error.to_string())
            } else {
                message
            };
            return Err(ProviderError::Stream { detail });
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

    /// The assembled completion. Without `[DONE]` (`saw_done` false) the stream counts as
    /// complete only if the model sent a finish reason.
    fn finish(self, saw_done: bool) -> Result<Completion, ProviderError> {
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
