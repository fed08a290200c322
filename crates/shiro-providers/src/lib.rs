//! Model providers behind one async trait.
//!
//! A [`Provider`] turns a [`ChatRequest`] (the conversation so far and the tools on offer)
//! into one assistant [`Completion`], reporting text as it streams in through a sink
//! callback. Three implementations:
//!
//! - [`OpenAiProvider`]: any OpenAI-compatible Chat Completions server (OpenAI, Ollama,
//!   llama.cpp, vLLM), streaming over server-sent events, with retries and clear errors.
//! - [`AnthropicProvider`]: Anthropic's Messages API, streaming, with tool use, usage and
//!   prompt caching of the system prompt and the tools.
//! - [`ReplayProvider`]: plays back a JSON script of responses, for offline demos and tests.
//!
//! The two HTTP providers share one transport: the client, the retries, the timeouts, the
//! event-stream parser and the error messages; each only encodes its requests and decodes
//! its events.
//!
//! Providers never print and never read the environment: everything comes in through their
//! constructors, and everything goes out through return values and the sink. The crate knows
//! nothing of the agent's loop, its sessions or how it is shown.
//!
//! ```
//! use shiro_providers::{ChatRequest, Message, Provider, ReplayProvider, StreamEvent};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let provider = ReplayProvider::from_script(r#"{"responses": [{"text": "hello there"}]}"#)?;
//! let messages = [Message::user("hi")];
//! let mut streamed = String::new();
//! let completion = provider
//!     .complete(&ChatRequest { messages: &messages, tools: &[] }, &mut |event| {
//!         if let StreamEvent::TextDelta(text) = event {
//!             streamed.push_str(&text);
//!         }
//!     })
//!     .await?;
//! assert_eq!(completion.message.content, "hello there");
//! assert_eq!(streamed, "hello there");
//! # Ok::<(), shiro_providers::ProviderError>(())
//! # }).unwrap();
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

mod anthropic;
mod error;
mod http;
pub mod net;
mod openai;
mod replay;
mod sse;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use error::ProviderError;
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use replay::ReplayProvider;

pub use self::error::one_line;

/// `text` with every character the model APIs refuse in a name (of a tool, of a call's id)
/// made `_`: they take letters, digits, `_` and `-`.
pub fn api_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Which HTTP API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI's Chat Completions, and the servers that copy it.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Api {
    /// Its name in config files and model prefixes: `openai` or `anthropic`.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    /// The environment variable that sets its server.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_BASE_URL",
            Api::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// The environment variable its key is read from unless `[model] api_key_env` says
    /// otherwise.
    pub fn key_var(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// Its API by name (`openai`, `anthropic`), any case.
    pub fn from_name(name: &str) -> Option<Api> {
        match name.to_ascii_lowercase().as_str() {
            "openai" => Some(Api::OpenAi),
            "anthropic" => Some(Api::Anthropic),
            _ => None,
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who wrote a [`Message`]. Serialized in lowercase (`"system"`, `"user"`, `"assistant"`,
/// `"tool"`), as in the Chat Completions API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from shiro itself.
    System,
    /// The person at the keyboard (or a user command's expanded prompt).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering the call named by `tool_call_id`.
    Tool,
}

/// One message of a conversation, as the provider sends it and as the session transcript
/// stores it (one JSON object per line).
///
/// The serialized field names are stable: `role`, `content` (always present, may be empty),
/// `tool_calls` (omitted when empty) and `tool_call_id` (omitted when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text; empty for an assistant message that only calls tools.
    #[serde(default)]
    pub content: String,
    /// The tools an assistant message calls, in the order the model sent them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message, the [`ToolCall::id`] it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// An assistant message with text and no tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    /// A tool's result, answering the call with id `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
}

/// One tool call requested by the model.
///
/// Serialized as `{"id": …, "name": …, "arguments": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the model gave the call (or one shiro made up when the server gave none); the
    /// tool's result message quotes it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model sent them: JSON text, not parsed here, because a
    /// model can send invalid JSON and the tool layer must be able to tell it so.
    pub arguments: String,
}

/// A tool offered to the model.
///
/// Serialized as `{"name": …, "description": …, "parameters": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, written for the model.
    pub description: String,
    /// A JSON Schema for its arguments object.
    pub parameters: serde_json::Value,
}

/// What a provider is asked: the conversation so far and the tools the model may call.
///
/// Borrowed, so that asking does not copy the session's history.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The conversation, oldest first, usually starting with a system message.
    pub messages: &'a [Message],
    /// The tools on offer; empty offers none.
    pub tools: &'a [ToolSpec],
}

/// Something that happened while a completion was in flight, for the UI to show at once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More assistant text; the deltas of one completion concatenate to its content.
    TextDelta(String),
    /// The model started a tool call (its arguments are still streaming).
    ToolCallStarted {
        /// The tool's name.
        name: String,
    },
    /// A request failed in a way that is worth retrying; the provider waits `delay`, then
    /// sends attempt number `attempt` (the first retry is 1) of at most `max_retries`.
    Retrying {
        /// Which retry this will be, from 1.
        attempt: u32,
        /// How many retries the provider makes at most.
        max_retries: u32,
        /// How long it waits first.
        delay: Duration,
        /// Why, in a few words (e.g. "rate limited (429)").
        reason: String,
    },
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants tools run. Look at [`Message::tool_calls`] rather than at this: some servers
    /// report `stop` even when they call tools.
    ToolCalls,
    /// It hit the output token limit; the answer is cut short.
    Length,
    /// A content filter stopped it.
    ContentFilter,
    /// Anything else, as the server spelled it.
    Other(String),
}

impl FinishReason {
    fn from_wire(reason: &str) -> Self {
        match reason {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// The assembled result of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The assistant's message: its whole text and its tool calls, in order.
    pub message: Message,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// What the request used, when the server says.
    pub usage: Option<Usage>,
}

/// The tokens one request used, as the server counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Tokens of the prompt: the conversation and the tools sent.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// Tokens of the prompt served from the server's cache (included in `prompt_tokens`).
    pub cached_tokens: u64,
}

impl Usage {
    /// Prompt and answer together.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// Where a provider reports [`StreamEvent`]s while it works.
pub type Sink<'a> = dyn FnMut(StreamEvent) + Send + 'a;

/// A model behind a chat API.
///
/// To cancel a request (for example on Ctrl-C), drop the future.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Asks the model for its next message, streaming what arrives to `sink`.
    async fn complete(
        &self,
        request: &ChatRequest<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError>;

    /// The model's name, for the status line and the transcript.
    fn model(&self) -> &str;

    /// Which provider this is, for `/model` and `/status`: `openai`, `anthropic` or `replay`.
    fn kind(&self) -> &'static str;
}
