//! `shiro mcp`, the server side (the `server` feature): shiro's undoable tools, with undo,
//! redo and log, served to an MCP client over stdio, or over Streamable HTTP on a loopback
//! port ([`listen`]). The decisions are in `docs/mcp.md`.
//!
//! Each call that changes files is a turn of the workspace's undo log, recorded as `shiro
//! tool` records it, in the same store, through the same jail: `shiro undo` in a terminal
//! undoes what the client did, and the client's `undo` what the terminal did. The server
//! reaches the workspace only through a [`Workspace`], which the binary implements over its
//! headless commands; so this crate, which the agent uses for its client, needs nothing of
//! the agent, and the protocol's side can be tested on its own.
//!
//! Calls run in the order the server received them, over either transport, though rmcp
//! runs each in a task of its own: a client may send several without waiting for their
//! results and get what running them one by one would give (see `order.rs`).
//!
//! Invariant: standard output carries the protocol and nothing else; nothing here prints,
//! reads the environment or exits. What a person should read comes back as lines.

mod annotations;
mod cancel;
mod handler;
mod lines;
pub mod listen;
mod order;
#[cfg(test)]
mod tests;
mod turns;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use rmcp::ServiceExt as _;
use shiro_tools::capture::Background;
use shiro_tools::{FsMutator, Tool, ToolError, ToolOutput};
use shiro_undo::{Recording, UndoStore};
use tokio::sync::watch;

pub use handler::ShiroServer;
use lines::Lines;
use order::InOrder;
pub use turns::{BeginTurnArgs, NoArgs, Restore, RestoreToolArgs, Turns, UndoToolArgs, with_lines};

/// Which way a restore goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// `undo`.
    Undo,
    /// `redo`.
    Redo,
}

/// The outcome of one call, before it becomes the protocol's result.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The text, as the CLI prints it (notices on lines of their own after it).
    pub text: String,
    /// The structured content.
    pub structured: serde_json::Value,
    /// Whether the call failed.
    pub is_error: bool,
}

impl Outcome {
    /// A failed call's outcome: `text`, which is also the structured `error`.
    pub fn failure(text: String) -> Self {
        Outcome {
            structured: serde_json::json!({ "error": text }),
            text,
            is_error: true,
        }
    }
}

/// What the server needs of the workspace it serves. Errors come back as the text a person
/// (or the client's model) reads.
pub trait Workspace: Send + Sync + 'static {
    /// shiro's tools, `bash` as configured, in the order a model is shown them.
    fn tools(&self) -> Vec<Box<dyn Tool>>;

    /// The tool called `name`, if there is one. With `stop`, a `bash` call is stopped when it
    /// changes after the call began (see `Bash::with_stop`): a running command is killed
    /// (what it changed is still recorded), and one not started yet never starts. With `background`,
    /// `bash`, `bash_output` and `bash_kill` start, read and stop the background commands of
    /// that registry rather than the workspace's own.
    fn tool(
        &self,
        name: &str,
        stop: Option<watch::Receiver<u64>>,
        background: Option<&Arc<Background>>,
    ) -> Option<Box<dyn Tool>>;

    /// A registry of background commands of its own, for one client's session: empty, run
    /// as the workspace's are, and killed when dropped. `None` when background commands are
    /// off.
    fn session_background(&self) -> Option<Background>;

    /// Changes each time a signal asks the call under way to stop.
    fn stops(&self) -> watch::Receiver<u64>;

    /// Whether a signal came that no call has taken yet.
    fn interrupted(&self) -> bool;

    /// The workspace, through its jail.
    fn jail(&self) -> Result<FsMutator, String>;

    /// Opens the undo store (and recovers what a crash left).
    fn open_store(&self) -> impl Future<Output = Result<UndoStore, String>> + Send;

    /// Runs the mutating `tool` as a turn of its own, summarised by `summary`, as `shiro
    /// tool` does. The structured content has `turn`, `changes` and `notices`.
    fn run_as_turn(
        &self,
        tool: &dyn Tool,
        args: serde_json::Value,
        summary: &str,
    ) -> impl Future<Output = Outcome> + Send;

    /// Runs the mutating `tool` inside the turn `recording` has begun. Returns the call's
    /// result and the notices about it; `Err` means nothing ran.
    fn call_in_turn(
        &self,
        tool: &dyn Tool,
        recording: &Recording<FsMutator>,
        args: serde_json::Value,
    ) -> impl Future<Output = Result<(Result<ToolOutput, ToolError>, Vec<String>), String>> + Send;

    /// Undoes or redoes the newest turn (or, with `to`, rewinds to before a turn), as `shiro
    /// undo` and `shiro redo` do. The structured content has `notices`; a refusal is an error
    /// whose content is the conflict report.
    fn restore(&self, way: Way, restore: Restore) -> impl Future<Output = Outcome> + Send;

    /// The turns as `shiro log` lists them; the structured content is `shiro log --json`'s.
    fn log(&self) -> impl Future<Output = Outcome> + Send;
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct Serve {
    /// Serve over Streamable HTTP on this loopback address, rather than on stdio.
    pub http: Option<SocketAddr>,
    /// The bearer token HTTP clients must send (needed with `http`).
    pub token: Option<String>,
    /// A group closes after this long without a call.
    pub group_idle: Duration,
}

/// How serving ended.
#[derive(Debug, Default)]
pub struct Served {
    /// A signal ended it (rather than the client closing the connection).
    pub signalled: bool,
    /// What a person should read: how the open group's turn was finished.
    pub notices: Vec<String>,
}

/// Serves MCP on standard input and output until the client closes the connection or
/// `stopped` completes (with `http`, on a loopback address to the clients that send the
/// token, until `stopped` completes), then finishes the call under way and the open group's
/// turn. `notify` is given the lines to show while the server is still at work.
pub async fn serve<W: Workspace>(
    workspace: W,
    how: &Serve,
    stopped: impl Future<Output = ()> + Send,
    notify: &dyn Fn(&str),
) -> Result<Served> {
    let turns = Arc::new(Turns::new(workspace, how.group_idle));
    let server = ShiroServer::new(Arc::clone(&turns));
    tokio::pin!(stopped);
    let signalled = if let Some(addr) = how.http {
        let token = how
            .token
            .as_deref()
            .ok_or_else(|| anyhow!("{}", listen::NO_TOKEN))?;
        if let Some(why) = listen::refuse_token(token) {
            return Err(anyhow!("{}: {why}", listen::TOKEN_VAR));
        }
        let listener = listen::Listener::bind(addr).await?;
        notify(&format!(
            "serving MCP at {} (Streamable HTTP); clients send Authorization: Bearer ${}",
            listener.url,
            listen::TOKEN_VAR
        ));
        listener.serve(server, token, stopped).await;
        true
    } else {
        let (read, write) = rmcp::transport::stdio_pipes();
        let transport = stdio(&server, read, write);
        let service = tokio::select! {
            started = server.serve(transport) => started
                .map_err(|err| anyhow!("no MCP session was started: {err}"))?,
            () = &mut stopped => return Ok(Served { signalled: true, notices: Vec::new() }),
        };
        let stop = service.cancellation_token();
        let waiting = service.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            _ = &mut waiting => false,
            () = &mut stopped => {
                stop.cancel();
                let _ = waiting.await;
                true
            }
        }
    };
    if turns.busy() {
        notify(if signalled {
            "stopping: finishing the call under way and recording its turn"
        } else {
            "the client went away during a call: finishing it and recording its turn before exiting"
        });
    }
    let notices = turns.shutdown().await;
    Ok(Served { signalled, notices })
}

/// The transport of `server` over standard input and output (`read` and `write`): a message
/// per line (see `lines.rs`), each call taking its place in the order as it is read.
fn stdio<W, R, O>(server: &ShiroServer<W>, read: R, write: O) -> InOrder<Lines<R, O>>
where
    W: Workspace,
    R: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite + Unpin,
{
    InOrder::new(Lines::new(read, write), Arc::clone(server.arrivals()))
}
