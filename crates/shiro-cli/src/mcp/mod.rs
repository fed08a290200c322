//! MCP both ways, through the official SDK, `rmcp`; the decisions are in `docs/mcp.md`.
//!
//! - `shiro mcp` ([`serve`]): shiro's undoable tools, with undo, redo and log, served to an
//!   MCP client over stdio, or over Streamable HTTP on a loopback port ([`listen`]);
//! - the MCP servers a config names, whose tools the agent offers its model, are the
//!   `shiro-mcp` crate's.
//!
//! Each call that changes files is a turn of the workspace's undo log, recorded as
//! `shiro tool` records it, in the same `.shiro/undo` store, through the same jail: `shiro
//! undo` in a terminal undoes what the client did, and the client's `undo` what the terminal
//! did. Standard output carries the protocol and nothing else: this module never prints.

pub mod listen;
mod server;
mod turns;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use rmcp::ServiceExt as _;
use shiro_agent::headless::{Context, Report};
use shiro_agent::render::Color;
use shiro_agent::signals::INTERRUPTED;

pub use server::ShiroServer;
pub use turns::{BeginTurnArgs, NoArgs, Outcome, RestoreToolArgs, Turns};

use crate::cli::McpArgs;

/// Serves MCP on standard input and output until the client closes the connection or a
/// signal comes (with `--http`, on a loopback address to the clients that send
/// `http_token`, until a signal comes), then finishes the call under way and the open
/// group's turn. The report holds what a person should read (on stderr) and exits 130 after
/// a signal; `notify` is given the lines to show while the server is still at work.
pub async fn serve(
    ctx: &Context,
    args: &McpArgs,
    http_token: Option<&str>,
    notify: &dyn Fn(&str),
) -> Result<Report> {
    let ctx = Context {
        root: ctx.root.clone(),
        state: ctx.state.clone(),
        config: ctx.config.clone(),
        // Diffs of dry runs are read by a model, not a terminal.
        color: Color::Never,
        signals: ctx.signals.clone(),
        bash: ctx.bash.clone(),
        env: ctx.env.clone(),
    };
    let signals = ctx.signals.clone();
    let turns = Arc::new(Turns::new(ctx, Duration::from_secs(args.group_idle)));
    let server = ShiroServer::new(Arc::clone(&turns));
    let interrupted = || Report {
        exit: INTERRUPTED,
        ..Report::default()
    };
    let signalled = if let Some(addr) = args.http {
        let token = http_token.ok_or_else(|| anyhow!("{}", listen::NO_TOKEN))?;
        if let Some(why) = listen::refuse_token(token) {
            return Err(anyhow!("{}: {why}", listen::TOKEN_VAR));
        }
        let listener = listen::Listener::bind(addr).await?;
        notify(&format!(
            "serving MCP at {} (Streamable HTTP); clients send Authorization: Bearer ${}",
            listener.url,
            listen::TOKEN_VAR
        ));
        listener.serve(server, token, signals.cancelled()).await;
        true
    } else {
        let service = tokio::select! {
            started = server.serve(rmcp::transport::stdio_pipes()) => started
                .map_err(|err| anyhow!("no MCP session was started: {err}"))?,
            () = signals.cancelled() => return Ok(interrupted()),
        };
        let stop = service.cancellation_token();
        let waiting = service.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            _ = &mut waiting => false,
            () = signals.cancelled() => {
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
    Ok(Report {
        notices,
        ..if signalled {
            interrupted()
        } else {
            Report::default()
        }
    })
}
