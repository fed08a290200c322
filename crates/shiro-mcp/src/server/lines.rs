//! The stdio transport: one JSON-RPC message per line, each way.
//!
//! rmcp's own (`AsyncRwTransport`) drops a line that is not JSON without a word: it stopped
//! answering such lines because a peer that answers the answer with more text that is not
//! JSON (a server that logs to stdout, read by an rmcp client) bounced errors back and forth
//! without end (rmcp's issue 938). A server that says nothing leaves a client whose line was
//! garbled waiting for an answer that never comes, so this one answers as JSON-RPC 2.0 says:
//! a line that is not JSON with a parse error (-32700), a line of JSON that is not a message
//! with an invalid request (-32600), both with the request's id where it can be read and
//! `null` where it cannot. The answer is JSON, which no JSON-RPC peer answers, so no storm
//! can start from it. Notifications and responses are never answered, as JSON-RPC says.
//!
//! Otherwise it reads and writes as rmcp's does: a line is at most [`MAX_LINE`] bytes, a
//! leading byte order mark and a trailing `\r` are dropped, blank lines are skipped.

use std::future::Future;
use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The longest line read (as rmcp's transport allows); a longer one is dropped, and
/// answered as an invalid request.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The transport over `R` (standard input) and `W` (standard output).
pub struct Lines<R, W> {
    read: BufReader<R>,
    /// The line read so far. It lives here, not in [`Lines::receive`], since rmcp drops a
    /// receive under way when another event comes first: the next one goes on with it.
    line: Vec<u8>,
    /// The rest of a line longer than [`MAX_LINE`] is being skipped.
    skipping: bool,
    write: Arc<Mutex<Option<W>>>,
    /// An answer to a line being written, in a task of its own so that a dropped receive
    /// cannot cut it short; the next line is read once it is out.
    answering: Option<JoinHandle<()>>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Lines<R, W> {
    /// Messages read from `read` and written to `write`.
    pub fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            write: Arc::new(Mutex::new(Some(write))),
            answering: None,
        }
    }
}

/// What one line read comes to.
#[derive(Debug)]
enum Read {
    /// A whole line is in `line`.
    Line,
    /// A line longer than [`MAX_LINE`] was dropped.
    TooLong,
    /// The input ended (a last line without its newline is dropped, as rmcp drops it).
    End,
}

impl<R: AsyncRead + Unpin, W> Lines<R, W> {
    /// Reads the next line into `line`, never holding more than [`MAX_LINE`] bytes of it.
    /// Cancel-safe: what was read stays in `line` (or was skipped) for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) | Err(_) => return Read::End,
                Ok(available) => available,
            };
            let newline = available.iter().position(|byte| *byte == b'\n');
            let taken = newline.map_or(available.len(), |at| at + 1);
            let too_long = !self.skipping && self.line.len() + taken > MAX_LINE;
            if !self.skipping && !too_long {
                self.line.extend_from_slice(&available[..taken]);
            }
            self.read.consume(taken);
            if too_long {
                self.line.clear();
                self.skipping = newline.is_none();
                return Read::TooLong;
            }
            match (newline, self.skipping) {
                (Some(_), true) => self.skipping = false,
                (Some(_), false) => return Read::Line,
                (None, _) => {}
            }
        }
    }
}

/// What the server does with one line.
#[derive(Debug)]
enum Taken {
    /// A message for the server.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing: a blank line, or a notification or response the server cannot read.
    Nothing,
    /// An error to answer the line with, as a line of JSON.
    Answer(Value),
}

/// What `line` (its newline included) comes to.
fn take(line: &[u8]) -> Taken {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Taken::Nothing;
    }
    if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        return Taken::Message(Box::new(message));
    }
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(err) => {
            return Taken::Answer(answer(
                &Value::Null,
                &ErrorData::parse_error(
                    format!(
                        "parse error: the line is not JSON ({err}); a message is one line of JSON"
                    ),
                    None,
                ),
            ));
        }
    };
    // A notification or a response is never answered, even one that cannot be read.
    let has = |key: &str| value.get(key).is_some();
    let is_notification = has("method") && !has("id");
    let is_response = !has("method") && (has("result") || has("error"));
    if is_notification || is_response {
        return Taken::Nothing;
    }
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    Taken::Answer(answer(
        &id,
        &ErrorData::invalid_request(
            "invalid request: the line is JSON, but not a JSON-RPC 2.0 request: an object with \
             \"jsonrpc\": \"2.0\", an \"id\" (a string or a number) and a \"method\"",
            None,
        ),
    ))
}

/// The error response to a request whose id is `id` (`null`: not known).
fn answer(id: &Value, error: &ErrorData) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// Writes `line` to `write` as one line, whole: writes take turns.
async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<Option<W>>,
    mut line: Vec<u8>,
) -> io::Result<()> {
    line.push(b'\n');
    let mut write = write.lock().await;
    let Some(write) = write.as_mut() else {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    write.write_all(&line).await?;
    write.flush().await
}

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move {
            let line = serde_json::to_vec(&item)?;
            write_line(&write, line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Awaited through a reference, so that a dropped receive leaves it to the next.
            if let Some(answering) = self.answering.as_mut() {
                let _ = answering.await;
                self.answering = None;
            }
            let read = self.read_line().await;
            let taken = match read {
                Read::Line => take(&std::mem::take(&mut self.line)),
                Read::TooLong => Taken::Answer(answer(
                    &Value::Null,
                    &ErrorData::invalid_request(
                        format!(
                            "invalid request: the line is longer than {} MiB, the most a \
                             message may be, and was dropped",
                            MAX_LINE >> 20
                        ),
                        None,
                    ),
                )),
                Read::End => return None,
            };
            match taken {
                Taken::Message(message) => return Some(*message),
                Taken::Nothing => {}
                Taken::Answer(error) => {
                    let write = Arc::clone(&self.write);
                    self.answering = Some(tokio::spawn(async move {
                        // A client that no longer reads has nothing to be told.
                        if let Ok(line) = serde_json::to_vec(&error) {
                            let _ = write_line(&write, line).await;
                        }
                    }));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(answering) = self.answering.take() {
            let _ = answering.await;
        }
        drop(self.write.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::JsonRpcMessage;

    use super::*;

    /// What each line comes to, one per line: the message's kind, nothing, or the answer.
    fn check(lines: &[&str]) -> String {
        lines
            .iter()
            .map(|line| match take(format!("{line}\n").as_bytes()) {
                Taken::Message(message) => match *message {
                    JsonRpcMessage::Request(_) => "request".to_owned(),
                    JsonRpcMessage::Notification(_) => "notification".to_owned(),
                    JsonRpcMessage::Response(_) => "response".to_owned(),
                    JsonRpcMessage::Error(_) => "error".to_owned(),
                },
                Taken::Nothing => "nothing".to_owned(),
                Taken::Answer(answer) => answer.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn each_line_is_a_message_nothing_or_an_answer() {
        insta::assert_snapshot!(check(&[
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
            "\u{feff}{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"ping\"}\r",
            r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
            "   ",
            "not json",
            r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/list""#,
            r#"{"jsonrpc": "1.0", "id": "a", "method": "ping"}"#,
            r#"{"jsonrpc": "2.0", "id": [4], "method": "ping"}"#,
            r#"[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]"#,
            r#"{"jsonrpc": "1.0", "method": "notifications/initialized"}"#,
            r#"{"id": 6, "result": {}}"#,
        ]), @r#"
        request
        request
        notification
        nothing
        {"error":{"code":-32700,"message":"parse error: the line is not JSON (expected ident at line 1 column 2); a message is one line of JSON"},"id":null,"jsonrpc":"2.0"}
        {"error":{"code":-32700,"message":"parse error: the line is not JSON (EOF while parsing an object at line 1 column 50); a message is one line of JSON"},"id":null,"jsonrpc":"2.0"}
        {"error":{"code":-32600,"message":"invalid request: the line is JSON, but not a JSON-RPC 2.0 request: an object with \"jsonrpc\": \"2.0\", an \"id\" (a string or a number) and a \"method\""},"id":"a","jsonrpc":"2.0"}
        {"error":{"code":-32600,"message":"invalid request: the line is JSON, but not a JSON-RPC 2.0 request: an object with \"jsonrpc\": \"2.0\", an \"id\" (a string or a number) and a \"method\""},"id":null,"jsonrpc":"2.0"}
        {"error":{"code":-32600,"message":"invalid request: the line is JSON, but not a JSON-RPC 2.0 request: an object with \"jsonrpc\": \"2.0\", an \"id\" (a string or a number) and a \"method\""},"id":null,"jsonrpc":"2.0"}
        nothing
        nothing
        "#);
    }

    /// A line too long to read is dropped and answered, the next one is read, and a last line
    /// without its newline is dropped as the input ends.
    #[tokio::test]
    async fn a_line_too_long_is_answered_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE + 1];
        input.extend_from_slice(
            b"\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}\n{\"jsonrpc\"",
        );
        let (write, read) = tokio::io::duplex(1 << 16);
        let mut lines = Lines::new(std::io::Cursor::new(input), write);
        let message = lines.receive().await;
        assert!(
            matches!(message, Some(JsonRpcMessage::Request(_))),
            "{message:?}"
        );
        assert!(lines.receive().await.is_none());
        lines.close().await.unwrap();
        let mut answers = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut { read }, &mut answers)
            .await
            .unwrap();
        insta::assert_snapshot!(answers, @r#"{"error":{"code":-32600,"message":"invalid request: the line is longer than 16 MiB, the most a message may be, and was dropped"},"id":null,"jsonrpc":"2.0"}"#);
    }
}
