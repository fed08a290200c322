//! The replay provider: plays back a script of model responses, so the agent runs offline,
//! deterministically, with no model and no network.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::{
    ChatRequest, Completion, FinishReason, Message, Provider, ProviderError, Sink, StreamEvent,
    ToolCall,
};

/// The most bytes of text sent in one [`StreamEvent::TextDelta`], so that replayed text
/// streams in a few pieces the way a model's does.
const CHUNK_BYTES: usize = 24;

/// The script file: `{"responses": [ … ]}`, one entry per model call, in order.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    responses: Vec<ScriptResponse>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptResponse {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptToolCall>,
    /// A pause before each streamed piece, in milliseconds: a slow model, for the terminal
    /// UI's tests and benchmark.
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptToolCall {
    /// Made up (`call_1`, `call_2`, … across the whole script) when absent.
    #[serde(default)]
    id: Option<String>,
    name: String,
    /// A JSON object (the usual case), or a string sent as it is, which lets a script
    /// replay a model that sends broken arguments.
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A [`Provider`] that answers each [`Provider::complete`] call with the next response of a
/// script, and fails with [`ProviderError::ReplayFinished`] once the script is used up
/// (a script and an agent that disagree about the number of steps is a bug to report, not
/// to paper over).
///
/// The script format is documented in `docs/providers.md`:
///
/// ```json
/// {"responses": [
///   {"text": "I'll create it.", "tool_calls": [
///     {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}
///   ]},
///   {"text": "Done: hello.txt now says hi."}
/// ]}
/// ```
#[derive(Debug)]
pub struct ReplayProvider {
    responses: Vec<Message>,
    /// The pause before each streamed piece of each response.
    delays: Vec<std::time::Duration>,
    /// The next response to play; atomic because `complete` takes `&self`.
    next: AtomicUsize,
}

impl ReplayProvider {
    /// The name [`Provider::model`] reports.
    pub const MODEL: &str = "replay";

    /// What [`Provider::kind`] reports: a replay model's requests reach no server, and
    /// count no tokens.
    pub const KIND: &str = "replay";

    /// Parses a script (the JSON text of a script file). Its errors say where in the text
    /// the mistake is; [`ReplayProvider::from_script_file`] names the file too.
    pub fn from_script(script: &str) -> Result<Self, ProviderError> {
        Self::parse(script, None)
    }

    /// Parses `script`, the text of the script file `file` (which the caller read): its
    /// errors name the file, as given, and the line and column of the mistake.
    pub fn from_script_file(file: &Path, script: &str) -> Result<Self, ProviderError> {
        Self::parse(script, Some(file))
    }

    fn parse(script: &str, file: Option<&Path>) -> Result<Self, ProviderError> {
        let invalid = |detail: String| ProviderError::InvalidReplayScript {
            file: file.map(Path::to_path_buf),
            detail,
        };
        let script: Script =
            serde_json::from_str(script).map_err(|error| invalid(error.to_string()))?;
        if script.responses.is_empty() {
            // It could only fail on its first use; better to say so when it is loaded.
            return Err(invalid("it has no responses".into()));
        }
        let mut call_number = 0;
        let delays = script
            .responses
            .iter()
            .map(|response| std::time::Duration::from_millis(response.delay_ms))
            .collect();
        let responses = script
            .responses
            .into_iter()
            .map(|response| {
                let tool_calls = response
                    .tool_calls
                    .into_iter()
                    .map(|call| {
                        call_number += 1;
                        let arguments = match call.arguments {
                            Value::String(raw) => raw,
                            other => other.to_string(),
                        };
                        ToolCall {
                            id: call.id.unwrap_or_else(|| format!("call_{call_number}")),
                            name: call.name,
                            arguments,
                        }
                    })
                    .collect();
                Message {
                    tool_calls,
                    ..Message::assistant(response.text)
                }
            })
            .collect();
        Ok(ReplayProvider {
            responses,
            delays,
            next: AtomicUsize::new(0),
        })
    }

    /// How many responses have been played so far.
    pub fn played(&self) -> usize {
        self.next.load(Ordering::SeqCst).min(self.responses.len())
    }
}

#[async_trait]
impl Provider for ReplayProvider {
    async fn complete(
        &self,
        _request: &ChatRequest<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let Some(message) = self.responses.get(index) else {
            // Keep the counter from creeping towards overflow on repeated calls.
            self.next.store(self.responses.len(), Ordering::SeqCst);
            return Err(ProviderError::ReplayFinished {
                used: self.responses.len(),
            });
        };
        let delay = self.delays.get(index).copied().unwrap_or_default();
        for piece in chunks(&message.content) {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            sink(StreamEvent::TextDelta(piece.to_owned()));
        }
        for call in &message.tool_calls {
            sink(StreamEvent::ToolCallStarted {
                name: call.name.clone(),
            });
        }
        let finish_reason = if message.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        Ok(Completion {
            message: message.clone(),
            finish_reason,
            usage: None,
        })
    }

    fn model(&self) -> &str {
        Self::MODEL
    }

    fn kind(&self) -> &'static str {
        Self::KIND
    }
}

/// Splits `text` into pieces of at most about [`CHUNK_BYTES`] bytes, on character
/// boundaries, preferring to end a piece after a space.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        if end > CHUNK_BYTES {
            end = CHUNK_BYTES;
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            if let Some(space) = rest[..end].rfind(' ').filter(|&space| space > 0) {
                end = space + 1;
            }
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_rebuild_the_text_on_char_boundaries() {
        for text in [
            "",
            "short",
            "a longer sentence that needs several pieces to stream",
            "é".repeat(40).as_str(),
            "x".repeat(100).as_str(),
        ] {
            let pieces: Vec<&str> = chunks(text).collect();
            assert_eq!(pieces.concat(), text);
            assert!(
                pieces
                    .iter()
                    .all(|piece| !piece.is_empty() && piece.len() <= CHUNK_BYTES + 3)
            );
        }
        assert!(chunks("a longer sentence that needs several pieces").count() > 1);
    }
}
