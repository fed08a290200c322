//! The server over a workspace of the tests' own ([`Fake`]), spoken to line by line over an
//! in-memory pipe, as a client that pipelines its calls writes them: the tests choose the
//! exact order in which the server reads each message, and hold a call where the real
//! workspace may keep it waiting (for the undo log's lock), so that what they check happens
//! in that order, with no sleeps.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt as _;
use serde_json::{Value, json};
use shiro_tools::capture::{
    Background, BashRunner, CaptureError, CaptureMode, CommandCapture, Direct, Launch,
};
use shiro_tools::tools::Bash;
use shiro_tools::{FsMutator, Mutator, Tool, ToolError, ToolOutput};
use shiro_undo::{Recording, StateDir, StoreOptions, UndoStore};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};
use tokio::io::{Lines, ReadHalf, WriteHalf};
use tokio::sync::{oneshot, watch};

use super::{Outcome, Restore, ShiroServer, Turns, Way, Workspace};

/// Where the workspace can keep a call waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before a call that is its own turn begins it (opening the undo log, taking its lock).
    RunAsTurn,
    /// Before a group's turn begins, at its first changing call.
    OpenStore,
    /// While `bash` readies its command's capture (in the real workspace: the overlay's
    /// layer, the git repository's state). A call held here is let go once its stop has
    /// changed too: whatever the test sent meanwhile has then reached the call.
    ReadyCapture,
}

/// A call held at a [`Place`]: it says when it gets there, and waits to be let go.
struct Hold {
    at: Place,
    reached: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
}

/// A workspace in a temporary directory, whose `bash` runs commands as they are (capturing
/// nothing) and whose calls that are turns of their own are noted rather than recorded.
struct Fake {
    root: tempfile::TempDir,
    state: tempfile::TempDir,
    background: Arc<Background>,
    signals: watch::Sender<u64>,
    /// The next call to reach its place waits there.
    hold: Mutex<Option<Hold>>,
    /// The summaries of the calls run as turns of their own whose tool ran.
    turns: Mutex<Vec<String>>,
}

impl Fake {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            root: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
            background: Arc::new(Background::new(Launch::Direct, 4)),
            signals: watch::Sender::new(0),
            hold: Mutex::new(None),
            turns: Mutex::new(Vec::new()),
        })
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    /// Holds the next call that reaches `at`. Returns what resolves once one has, and what
    /// lets it go.
    fn hold(&self, at: Place) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached, on_reached) = oneshot::channel();
        let (let_go, release) = oneshot::channel();
        *self.hold.lock().unwrap() = Some(Hold {
            at,
            reached,
            release,
        });
        (on_reached, let_go)
    }

    /// Waits there if the call is to be held at `at`; says whether it was.
    async fn held_at(&self, at: Place) -> bool {
        let hold = {
            let mut slot = self.hold.lock().unwrap();
            match slot.take() {
                Some(hold) if hold.at == at => Some(hold),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        let Some(hold) = hold else {
            return false;
        };
        hold.reached.send(()).unwrap();
        hold.release.await.unwrap();
        true
    }

    fn turns(&self) -> Vec<String> {
        self.turns.lock().unwrap().clone()
    }
}

/// The server's workspace: the tests keep the [`Fake`] to look at it.
struct Shared(Arc<Fake>);

/// The runner of the fake's `bash`: it runs commands directly (capturing nothing), and may be
/// held while it readies a command's capture ([`Place::ReadyCapture`]).
#[derive(Debug)]
struct Runner {
    fake: Arc<Fake>,
    /// The call's stop.
    stop: Option<watch::Receiver<u64>>,
}

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fake")
    }
}

#[async_trait::async_trait]
impl BashRunner for Runner {
    fn mode(&self) -> CaptureMode {
        CaptureMode::Off
    }

    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError> {
        if self.fake.held_at(Place::ReadyCapture).await
            && let Some(mut stop) = self.stop.clone()
        {
            stop.changed().await.unwrap();
        }
        Direct.begin(mutator).await
    }
}

impl Workspace for Shared {
    fn tools(&self) -> Vec<Box<dyn Tool>> {
        let bash = shiro_tools::tools::bash().with_background(Arc::clone(&self.0.background));
        shiro_tools::tools::all_with(bash)
    }

    fn tool(
        &self,
        name: &str,
        stop: Option<watch::Receiver<u64>>,
        background: Option<&Arc<Background>>,
    ) -> Option<Box<dyn Tool>> {
        let background = background.unwrap_or(&self.0.background);
        let runner = Runner {
            fake: Arc::clone(&self.0),
            stop: stop.clone(),
        };
        let mut bash = Bash::new(Arc::new(runner)).with_background(Arc::clone(background));
        if let Some(stop) = stop {
            bash = bash.with_stop(stop);
        }
        shiro_tools::tools::all_with(bash)
            .into_iter()
            .find(|tool| tool.name() == name)
    }

    fn session_background(&self) -> Option<Background> {
        None
    }

    fn stops(&self) -> watch::Receiver<u64> {
        self.0.signals.subscribe()
    }

    fn interrupted(&self) -> bool {
        false
    }

    fn jail(&self) -> Result<FsMutator, String> {
        FsMutator::new(self.0.root()).map_err(|err| err.to_string())
    }

    async fn open_store(&self) -> Result<UndoStore, String> {
        self.0.held_at(Place::OpenStore).await;
        let state = StateDir::at(self.0.state.path().join("state"), self.0.root());
        UndoStore::open_for_one(&state, StoreOptions::default())
            .await
            .map_err(|err| err.to_string())
    }

    async fn run_as_turn(&self, tool: &dyn Tool, args: Value, summary: &str) -> Outcome {
        self.0.held_at(Place::RunAsTurn).await;
        let jail = match self.jail() {
            Ok(jail) => jail,
            Err(err) => return Outcome::failure(err),
        };
        match tool.call(&jail, args).await {
            Ok(output) => {
                self.0.turns.lock().unwrap().push(summary.to_owned());
                Outcome {
                    text: output.text,
                    structured: json!({ "turn": null, "changes": [] }),
                    is_error: false,
                }
            }
            Err(err) => Outcome::failure(err.to_string()),
        }
    }

    async fn call_in_turn(
        &self,
        tool: &dyn Tool,
        recording: &Recording<FsMutator>,
        args: Value,
    ) -> Result<(Result<ToolOutput, ToolError>, Vec<String>), String> {
        Ok((tool.call(recording, args).await, Vec::new()))
    }

    async fn restore(&self, _way: Way, _restore: Restore) -> Outcome {
        Outcome::failure("no restores in these tests".to_owned())
    }

    async fn log(&self) -> Outcome {
        Outcome::failure("no log in these tests".to_owned())
    }
}

/// The server over `fake`, with no group closing by itself.
fn server(fake: &Arc<Fake>) -> ShiroServer<Shared> {
    let turns = Turns::new(Shared(Arc::clone(fake)), Duration::from_secs(3600));
    ShiroServer::new(Arc::new(turns))
}

/// A client's end of the pipe to a server, past the handshake.
struct Client {
    write: WriteHalf<DuplexStream>,
    read: Lines<BufReader<ReadHalf<DuplexStream>>>,
}

impl Client {
    /// Serves `fake` on one end of a pipe, as `shiro mcp` serves stdio, and connects.
    async fn connect(fake: &Arc<Fake>) -> Client {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let server = server(fake);
        let (read, write) = tokio::io::split(theirs);
        let transport = super::stdio(&server, read, write);
        tokio::spawn(async move {
            let running = server.serve(transport).await.unwrap();
            let _ = running.waiting().await;
        });
        let (read, write) = tokio::io::split(ours);
        let mut client = Client {
            write,
            read: BufReader::new(read).lines(),
        };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        client.send(&[initialize]).await;
        client.answers(&[0]).await;
        client
            .send(&[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})])
            .await;
        client
    }

    /// Writes `messages`, in this order, in one write.
    async fn send(&mut self, messages: &[Value]) {
        let text: String = messages
            .iter()
            .map(|message| format!("{message}\n"))
            .collect();
        self.write.write_all(text.as_bytes()).await.unwrap();
    }

    /// Reads answers until those to `ids` have come; returns every answer read, by id.
    async fn answers(&mut self, ids: &[u64]) -> HashMap<u64, Value> {
        let mut answers = HashMap::new();
        while !ids.iter().all(|id| answers.contains_key(id)) {
            let line = self.read.next_line().await.unwrap().unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            let id = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
            answers.insert(id, answer);
        }
        answers
    }

    /// Writes `text` as it is, a line the client may have botched.
    async fn send_raw(&mut self, text: &str) {
        self.write.write_all(text.as_bytes()).await.unwrap();
    }

    /// Reads lines until the answer to `id` has come; returns every line read, in order.
    async fn lines_until(&mut self, id: u64) -> Vec<Value> {
        let mut lines = Vec::new();
        loop {
            let line = self.read.next_line().await.unwrap().unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            let done = answer["id"] == json!(id);
            lines.push(answer);
            if done {
                return lines;
            }
        }
    }

    /// Cancels call `id`, and returns once the server has read the cancellation: the server
    /// reads its messages in order, and has listed its tools (request `barrier`) only after.
    async fn cancel(&mut self, id: u64, barrier: u64) {
        self.send(&[
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the user pressed Esc"}}),
            json!({"jsonrpc": "2.0", "id": barrier, "method": "tools/list"}),
        ])
        .await;
        self.answers(&[barrier]).await;
    }
}

/// A `tools/call` request.
fn call(id: u64, name: &str, args: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": args}})
}

/// A `bash` call that makes the file `name`.
fn touch(id: u64, name: &str) -> Value {
    call(id, "bash", &json!({ "command": format!("touch {name}") }))
}

/// Asserts that answer `id` among `answers` is a successful result.
fn succeeded(answers: &HashMap<u64, Value>, id: u64) {
    let answer = &answers[&id];
    assert!(answer["result"].is_object(), "{answer}");
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
}

/// Every tool the server lists, with the annotations it gives it: these are what a client
/// decides by whether to ask the user first, and what it may run side by side.
#[test]
fn every_listed_tool_has_honest_annotations() {
    let fake = Fake::new();
    let server = server(&fake);
    let listed: String = server
        .tools()
        .iter()
        .map(|tool| {
            let annotations = serde_json::to_string(&tool.annotations).unwrap();
            format!("{:<12} {annotations}\n", tool.name)
        })
        .collect();
    insta::assert_snapshot!(listed, @r#"
    write_file   {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    edit_file    {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    multi_edit   {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    apply_patch  {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    read_file    {"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    list_dir     {"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    glob         {"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    grep         {"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    bash         {"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}
    bash_output  {"readOnlyHint":true,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    bash_kill    {"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}
    begin_turn   {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    end_turn     {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    undo         {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    redo         {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}
    log          {"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}
    "#);
}

/// A bash call cancelled while it waits for the call sent before it (held by the workspace)
/// never starts; the calls after it run.
#[tokio::test]
async fn a_bash_call_cancelled_while_it_waits_its_turn_never_starts() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    let (reached, release) = fake.hold(Place::RunAsTurn);
    client.send(&[touch(1, "first")]).await;
    reached.await.unwrap();
    client.send(&[touch(2, "cancelled")]).await;
    client.cancel(2, 3).await;
    release.send(()).unwrap();
    client.send(&[touch(4, "after")]).await;
    let answers = client.answers(&[1, 4]).await;
    succeeded(&answers, 1);
    succeeded(&answers, 4);
    assert!(fake.root().join("first").exists());
    assert!(!fake.root().join("cancelled").exists());
    assert!(fake.root().join("after").exists());
    assert_eq!(
        fake.turns(),
        ["mcp: test: bash touch first", "mcp: test: bash touch after"]
    );
}

/// A bash call cancelled once its turn in the order has come, while the workspace begins
/// its turn (waiting for the undo log's lock, say), never starts its command, and nothing
/// of it is recorded.
#[tokio::test]
async fn a_bash_call_cancelled_before_its_command_starts_never_starts_it() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    let (reached, release) = fake.hold(Place::RunAsTurn);
    client.send(&[touch(1, "cancelled")]).await;
    reached.await.unwrap();
    client.cancel(1, 2).await;
    release.send(()).unwrap();
    client.send(&[touch(3, "after")]).await;
    let answers = client.answers(&[3]).await;
    succeeded(&answers, 3);
    assert!(!fake.root().join("cancelled").exists());
    assert!(fake.root().join("after").exists());
    assert_eq!(fake.turns(), ["mcp: test: bash touch after"]);
}

/// A bash call cancelled while `bash` readies its command's capture (after the call began,
/// before the command starts) never starts its command, and nothing of it is recorded.
#[tokio::test]
async fn a_bash_call_cancelled_while_its_capture_is_readied_never_starts_it() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    let (reached, release) = fake.hold(Place::ReadyCapture);
    client.send(&[touch(1, "cancelled")]).await;
    reached.await.unwrap();
    client.cancel(1, 2).await;
    release.send(()).unwrap();
    client.send(&[touch(3, "after")]).await;
    let answers = client.answers(&[3]).await;
    succeeded(&answers, 3);
    assert!(!fake.root().join("cancelled").exists());
    assert!(fake.root().join("after").exists());
    assert_eq!(fake.turns(), ["mcp: test: bash touch after"]);
}

/// In a group, a bash call cancelled while the group's turn begins (at its first changing
/// call) never starts its command, and the group closes with nothing recorded.
#[tokio::test]
async fn a_bash_call_cancelled_while_a_group_begins_its_turn_never_starts_it() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    client.send(&[call(1, "begin_turn", &json!({}))]).await;
    client.answers(&[1]).await;
    let (reached, release) = fake.hold(Place::OpenStore);
    client.send(&[touch(2, "cancelled")]).await;
    reached.await.unwrap();
    client.cancel(2, 3).await;
    release.send(()).unwrap();
    client.send(&[call(4, "end_turn", &json!({}))]).await;
    let answers = client.answers(&[4]).await;
    succeeded(&answers, 4);
    assert!(!fake.root().join("cancelled").exists());
    insta::assert_snapshot!(
        answers[&4]["result"]["content"][0]["text"].as_str().unwrap(),
        @"closed the group, which changed nothing; no turn was recorded"
    );
}

/// A request for a method shiro serves whose params do not parse is invalid params, with
/// what they must be; a method nobody serves is an unknown method, named as one. Neither
/// holds up the calls after it.
#[tokio::test]
async fn malformed_params_are_invalid_params_and_an_unknown_method_says_so() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    client
        .send(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "read_file", "arguments": "notanobject"}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "foo/bar"}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        ])
        .await;
    let answers = client.answers(&[1, 2, 3, 4]).await;
    let errors: Vec<String> = (1..=3)
        .map(|id| answers[&id]["error"].to_string())
        .collect();
    insta::assert_snapshot!(errors.join("\n"), @r#"
    {"code":-32602,"message":"invalid params for tools/call: they must be an object with \"name\", the tool's name (a string), and optionally \"arguments\", an object of the tool's arguments"}
    {"code":-32602,"message":"invalid params for tools/call: they must be an object with \"name\", the tool's name (a string), and optionally \"arguments\", an object of the tool's arguments"}
    {"code":-32601,"message":"unknown method foo/bar; shiro serves tools: tools/list, tools/call"}
    "#);
    assert!(answers[&4]["result"]["tools"].is_array(), "{}", answers[&4]);
}

/// A line that is not JSON is answered with JSON-RPC's parse error (-32700, id null), before
/// the server reads the next line, and the server goes on serving.
#[tokio::test]
async fn a_line_that_is_not_json_is_a_parse_error_and_the_server_goes_on() {
    let fake = Fake::new();
    let mut client = Client::connect(&fake).await;
    client
        .send_raw("not json\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\"}\n")
        .await;
    let lines = client.lines_until(1).await;
    let [error, listed] = lines.as_slice() else {
        panic!("{} answers", lines.len())
    };
    insta::assert_snapshot!(error.to_string(), @r#"{"error":{"code":-32700,"message":"parse error: the line is not JSON (expected ident at line 1 column 2); a message is one line of JSON"},"id":null,"jsonrpc":"2.0"}"#);
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}
