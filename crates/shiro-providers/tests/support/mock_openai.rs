//! A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.
//!
//! Each accepted request takes the next [`MockResponse`] of the script, whatever its path;
//! every request is recorded so a test can check what the client sent. Each response closes
//! its connection, so each request arrives on a fresh one.
//!
//! ```ignore
//! let (url, server) = MockServer::start(vec![MockResponse::text(&["Hel", "lo"])]).await;
//! // point the provider at `url` (it ends in `/v1`) …
//! assert_eq!(server.requests()[0].body["stream"], true);
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A running mock server; dropping it stops the server and every connection it holds.
pub struct MockServer {
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    script: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
    tasks: Mutex<Vec<AbortHandle>>,
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, usually.
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Every header, names in lowercase, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, or `Value::Null` when it is not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What the server does with one request.
#[derive(Debug, Clone)]
pub struct MockResponse {
    status: u16,
    headers: Vec<(String, String)>,
    /// The body, written as one HTTP chunk per piece (with a flush between), so the client
    /// sees it arrive in parts.
    pieces: Vec<Vec<u8>>,
    ending: Ending,
    /// Gates the server waits at, each before the piece at its index.
    gates: Vec<(usize, Gate)>,
}

/// A point in a response where the server waits until the test opens it, so a test sees
/// the client in the middle of a stream for as long as it needs to look.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Gate {
    /// Lets the response go on; it stays open.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn passed(&self) {
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = self.0.subscribe().wait_for(|open| *open).await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The body ends properly.
    Complete,
    /// The connection closes in the middle of a chunk.
    Drop,
    /// The server goes silent after the pieces, keeping the connection open.
    Stall,
    /// The server reads the request and never answers at all.
    NeverAnswer,
    /// The server reads the request and closes the connection without a word.
    HangUp,
}

impl MockResponse {
    /// A 200 event stream of `chunks` (each sent as `data: <json>`), then `data: [DONE]`.
    pub fn stream(chunks: Vec<Value>) -> Self {
        let mut events: Vec<String> = chunks.into_iter().map(|chunk| chunk.to_string()).collect();
        events.push("[DONE]".to_owned());
        Self::sse_events(&events)
    }

    /// A 200 event stream whose events carry exactly `payloads`, with no `[DONE]` added.
    pub fn sse_events(payloads: &[String]) -> Self {
        let pieces = payloads
            .iter()
            .map(|data| format!("data: {data}\n\n").into_bytes())
            .collect();
        Self::body(200, "text/event-stream", pieces)
    }

    /// A streamed text answer in `pieces`, finishing with `stop`.
    pub fn text(pieces: &[&str]) -> Self {
        let mut chunks: Vec<Value> = pieces.iter().map(|piece| text_chunk(piece)).collect();
        chunks.push(finish_chunk("stop"));
        Self::stream(chunks)
    }

    /// An error status with a JSON body.
    // By value, so that call sites read `error(401, json!(…))`.
    #[allow(clippy::needless_pass_by_value)]
    pub fn error(status: u16, body: Value) -> Self {
        Self::body(
            status,
            "application/json",
            vec![body.to_string().into_bytes()],
        )
    }

    /// Any status, content type and body, the body sent in the given pieces.
    pub fn body(status: u16, content_type: &str, pieces: Vec<Vec<u8>>) -> Self {
        MockResponse {
            status,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            pieces,
            ending: Ending::Complete,
            gates: Vec::new(),
        }
    }

    /// Waits at `gate` before sending the piece at `index` (for [`MockResponse::stream`],
    /// the chunk at `index`; the chunk count is where `[DONE]` goes).
    pub fn gated_before(mut self, index: usize, gate: &Gate) -> Self {
        self.gates.push((index, gate.clone()));
        self
    }

    /// A 200 event stream that sends `chunks` and then breaks off in the middle of the
    /// next HTTP chunk, as a dropped connection does.
    pub fn dropped_after(chunks: Vec<Value>) -> Self {
        let events: Vec<String> = chunks.into_iter().map(|chunk| chunk.to_string()).collect();
        MockResponse {
            ending: Ending::Drop,
            ..Self::sse_events(&events)
        }
    }

    /// This response, broken off in the middle of an HTTP chunk after its pieces, as a
    /// dropped connection does.
    pub fn then_drop(self) -> Self {
        MockResponse {
            ending: Ending::Drop,
            ..self
        }
    }

    /// A 200 event stream that sends `chunks` and then goes silent, connection open.
    pub fn stalled_after(chunks: Vec<Value>) -> Self {
        let events: Vec<String> = chunks.into_iter().map(|chunk| chunk.to_string()).collect();
        MockResponse {
            ending: Ending::Stall,
            ..Self::sse_events(&events)
        }
    }

    /// Reads the request and never answers.
    pub fn never_answer() -> Self {
        MockResponse {
            ending: Ending::NeverAnswer,
            ..Self::body(200, "text/plain", Vec::new())
        }
    }

    /// Reads the request and closes the connection without answering.
    pub fn hang_up() -> Self {
        MockResponse {
            ending: Ending::HangUp,
            ..Self::body(200, "text/plain", Vec::new())
        }
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A streamed chunk carrying text.
pub fn text_chunk(text: &str) -> Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

/// A streamed chunk carrying one fragment of the tool call at `index`: `id` and `name` in a
/// call's first fragment, `arguments` text in any.
pub fn tool_call_chunk(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
}

/// The closing chunk with `finish_reason` (`stop`, `tool_calls`, `length`…).
pub fn finish_chunk(reason: &str) -> Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// An OpenAI-style error body.
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

impl MockServer {
    /// Starts a server on a free port of 127.0.0.1 that answers with `script`, in order.
    /// Returns its base URL (`http://127.0.0.1:PORT/v1`) and the handle.
    pub async fn start(script: Vec<MockResponse>) -> (String, MockServer) {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        let state = Arc::new(State {
            script: Mutex::new(script.into()),
            ..State::default()
        });
        let accepting = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let connection = tokio::spawn(serve(stream, Arc::clone(&accepting)));
                accepting
                    .tasks
                    .lock()
                    .expect("lock")
                    .push(connection.abort_handle());
            }
        });
        state.tasks.lock().expect("lock").push(task.abort_handle());
        (format!("http://{address}/v1"), MockServer { state })
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests.lock().expect("lock").clone()
    }

    /// How many scripted responses have not been used.
    pub fn remaining(&self) -> usize {
        self.state.script.lock().expect("lock").len()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        for task in self.state.tasks.lock().expect("lock").drain(..) {
            task.abort();
        }
    }
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    state.requests.lock().expect("lock").push(request);
    let response = state
        .script
        .lock()
        .expect("lock")
        .pop_front()
        .unwrap_or_else(|| {
            MockResponse::error(
                500,
                error_body(
                    "the mock server has no scripted response left",
                    "mock_error",
                    None,
                ),
            )
        });
    // Errors writing mean the client went away, which some tests do on purpose.
    let _ = respond(&mut stream, &response).await;
}

async fn respond(stream: &mut TcpStream, response: &MockResponse) -> std::io::Result<()> {
    match response.ending {
        Ending::NeverAnswer => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Ok(());
        }
        Ending::HangUp => return stream.shutdown().await,
        Ending::Complete | Ending::Drop | Ending::Stall => {}
    }
    let mut head = format!("HTTP/1.1 {} Mock\r\n", response.status);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    for (index, piece) in response.pieces.iter().enumerate() {
        for (_, gate) in response.gates.iter().filter(|(at, _)| *at == index) {
            gate.passed().await;
        }
        stream
            .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await?;
        stream.write_all(piece).await?;
        stream.write_all(b"\r\n").await?;
        stream.flush().await?;
        // Let the client read each piece on its own.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    match response.ending {
        Ending::Complete => stream.write_all(b"0\r\n\r\n").await?,
        Ending::Drop => {
            // Promise 100 bytes, send 10, and hang up.
            stream.write_all(b"64\r\ndata: {\"ch").await?;
            stream.flush().await?;
        }
        Ending::Stall => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ending::NeverAnswer | Ending::HangUp => {}
    }
    stream.flush().await?;
    stream.shutdown().await
}

/// Reads one HTTP/1.1 request with a `Content-Length` body; `None` if the client sent
/// nothing usable.
async fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::new();
    let header_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}
