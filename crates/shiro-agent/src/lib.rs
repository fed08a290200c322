//! shiro-agent: the agent as a library — its turn loop, its sessions and what it reports,
//! and the workspace's operations that the binary's headless commands share with it.
//! Providers are the [`shiro_providers`] crate's, the MCP client [`shiro_mcp`]'s. The
//! decisions are written up in `docs/cli.md`, "The agent", and `docs/architecture.md`.
//!
//! - [`turn`]: the loop (model → tools → model …), approvals and undo recording;
//! - [`session`]: the JSONL transcript in the state directory; [`conversation`]: the
//!   transcript, its compactions and clearings, and what the model is sent; [`compact`]:
//!   `/compact`, compaction as the context fills, and clearing older tool outputs when the
//!   running turn fills it alone;
//! - [`repl`]: the read-eval loop and its `/` commands; [`input`]: where lines come from;
//! - [`travel`]: `/undo`, `/redo`, `/rewind` and `/fork`, files and conversation together;
//! - [`skill`]: the `skill` tool, which offers Agent Skills by description and loads one;
//! - [`attach`]: the files a prompt's `@path`s name, attached to its message;
//! - [`protocol`]: what a session reports to its front end, and what the front end answers;
//!   [`events`]: the printer, which shows it as text or JSON lines or hands it to a front end;
//!   [`approve`]: approvals and diffs;
//! - [`demo`]: the offline demo, which drives the same REPL with a replay script;
//! - [`model`]: which provider a model name means, its server and key, and `/model`;
//! - [`headless`]: the [`Context`] of a command or a session, and the operations `shiro tool`,
//!   `shiro undo`, `shiro log`, `shiro commands` and the MCP server share with the agent;
//! - [`config`] (the merged config files), [`permissions`] (the rules), [`trust`] (the trusted
//!   workspaces), [`workspace`] (where a workspace's root is), [`render`] (diffs),
//!   [`signals`] (what a signal does to the running work), [`environment`].
//!
//! Invariant: nothing here prints, exits, or reads the process's environment (it comes in
//! the [`Context`]), and nothing drives a terminal: the printer sends a front end
//! [`protocol::ToFront`] messages through a sink, and the wiring that picks the front end is
//! the binary's (`shiro-cli`, `run.rs`).

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

pub mod approve;
pub mod attach;
pub mod bashes;
pub mod compact;
pub mod config;
pub mod conversation;
pub mod demo;
pub mod environment;
pub mod events;
pub mod headless;
pub mod input;
pub mod instructions;
pub mod model;
pub mod permissions;
pub mod protocol;
pub mod render;
pub mod repl;
pub mod session;
pub mod signals;
pub mod skill;
pub mod travel;
pub mod trust;
pub mod turn;
pub mod workspace;

use std::time::Duration;

use anyhow::Result;
use shiro_commands::{Args, ExpandContext, FsReader, Origin, ShRunner};
use shiro_mcp::client::ServerSpec;
use shiro_mcp::mcp_json;

use self::events::Printer;
pub use self::model::provider;
use self::protocol::{PickItem, ToFront};
use self::session::Session;
use self::turn::{Agent, TurnLimits, TurnReport};
pub use crate::headless::Context;

/// Starts the MCP servers that wait (the workspace's only when it is trusted), and with
/// `retry` those that failed or stopped, and returns what the user should be told.
pub async fn start_mcp(agent: &mut Agent<'_>, retry: bool) -> Vec<String> {
    if agent.mcp.is_empty() {
        return Vec::new();
    }
    let ctx = agent.ctx;
    let trusted = crate::trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root);
    let (due, longest) = agent.mcp.due(trusted, retry);
    let waiting = match due.as_slice() {
        [one] => format!("the MCP server {one}"),
        all => format!("the MCP servers {}", all.join(", ")),
    };
    let waiting = format!(
        "note: waiting for {waiting} to start (at most {} s: startup_timeout_secs)",
        longest.as_secs()
    );
    let env = |name: &str| ctx.env.get(name);
    let start = agent.mcp.start(&ctx.root, trusted, retry, &env);
    tokio::pin!(start);
    // Most servers answer at once; a slow one should not look like a hung shiro.
    tokio::select! {
        notices = &mut start => return notices,
        () = tokio::time::sleep(MCP_PATIENCE) => {}
    }
    agent.printer.info(&waiting);
    start.await
}

/// The MCP servers of the config files and of the workspace's `.mcp.json`, and what the
/// user should be told of the `.mcp.json` entries left out.
pub fn mcp_servers(ctx: &Context) -> (Vec<ServerSpec>, Vec<String>) {
    let (imported, notes) = if ctx.config.read_mcp_json {
        mcp_json::read(&ctx.root, &|name| ctx.env.get(name))
    } else {
        (Vec::new(), Vec::new())
    };
    (
        mcp_json::merge(ctx.config.mcp_servers.clone(), imported),
        notes,
    )
}

/// How long starting MCP servers goes on before the user is told what shiro waits for.
const MCP_PATIENCE: Duration = Duration::from_secs(1);

/// The model's name, or `none`.
pub fn model_name(agent: &Agent<'_>) -> String {
    match &agent.provider {
        Ok(provider) => provider.model().to_owned(),
        Err(_) => "none".to_owned(),
    }
}

/// The most of standard input `-p` sends with its prompt.
pub const MAX_PIPED_BYTES: usize = 1 << 20;

/// What `-p` reads from a pipe, as a block to add to its prompt: `\n\n<stdin>…</stdin>`, or
/// nothing when the input is empty. Input past [`MAX_PIPED_BYTES`] is cut, and both the
/// model (in the block) and the user (a notice) are told.
pub fn piped_block(input: impl std::io::Read, printer: &mut Printer) -> Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    input
        .take(MAX_PIPED_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| anyhow::anyhow!("cannot read standard input: {err}"))?;
    let cut = bytes.len() > MAX_PIPED_BYTES;
    bytes.truncate(MAX_PIPED_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        // Not in the middle of a character the lossy decoding replaced.
        while text.ends_with('\u{FFFD}') {
            text.pop();
        }
    }
    if text.trim().is_empty() {
        return Ok(String::new());
    }
    let mut block = format!("\n\n<stdin>\n{}", text.trim_end_matches('\n'));
    if cut {
        block.push_str(&format!(
            "\n[cut: standard input is longer than {} KiB; only its start is here]",
            MAX_PIPED_BYTES / 1024
        ));
        printer.info(&format!(
            "note: standard input is longer than {} KiB; only its first {} KiB go to the model",
            MAX_PIPED_BYTES / 1024,
            MAX_PIPED_BYTES / 1024
        ));
    }
    block.push_str("\n</stdin>");
    Ok(block)
}

/// The picker of `--resume` and `/resume` without an id: the workspace's other sessions
/// are offered, and the chosen one replaces the conversation and is shown again.
pub async fn pick_session(agent: &mut Agent<'_>) {
    let sessions = match session::list(&agent.ctx.state) {
        Ok(sessions) => sessions,
        Err(err) => {
            agent
                .printer
                .info(&format!("error: {}", headless::error_text(&err)));
            return;
        }
    };
    let items: Vec<PickItem> = session::as_tree(&sessions)
        .into_iter()
        .filter(|(summary, _)| summary.id != agent.session.id())
        .map(|(summary, depth)| PickItem {
            when: session_time(summary.modified),
            first_prompt: summary.first_prompt.clone(),
            turns: summary.turns,
            forked_at: summary.forked_from.as_ref().map(|(_, turn)| *turn),
            depth,
            id: summary.id,
        })
        .collect();
    let (reply, chosen) = std::sync::mpsc::channel();
    agent.printer.ui(ToFront::Pick {
        sessions: items,
        reply,
    });
    // The UI answers at once when there is nothing to pick. Waiting blocks this thread, as
    // the agent's input does while a person types.
    let chosen = chosen.recv().ok().flatten();
    let Some(id) = chosen else {
        return;
    };
    match resume_session(agent, &id).await {
        Ok(notice) => {
            agent.printer.ui(ToFront::Replay(agent.history.clone()));
            agent.printer.info(&notice);
        }
        Err(err) => agent
            .printer
            .info(&format!("error: {}", headless::error_text(&err))),
    }
}

/// A session file's time as the picker shows it (UTC).
fn session_time(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    headless::format_time(secs)
}

/// `/model` (see [`model::model_command`]), with the process's environment.
pub async fn switch_model(agent: &mut Agent<'_>, args: &str) -> String {
    let env = agent.ctx.env.clone();
    model::model_command(agent, args, &|name| env.var(name)).await
}

/// Sends a typed prompt as one turn: the files and directories its `@path`s name are
/// attached to the message (see [`attach`]), each with a note for the user, and the turn
/// runs. The REPL and `-p` send prompts through it; a user command's template has its own
/// `@` references, read by [`run_user_command`].
///
/// `extra` (piped input) follows the message as it is: its `@`s attach nothing.
pub async fn send_prompt(agent: &mut Agent<'_>, prompt: &str, extra: &str) -> Result<TurnReport> {
    let attached = attach::attach(&agent.ctx.root, prompt).await;
    for note in &attached.notes {
        agent.printer.info(note);
    }
    agent.turn(&format!("{}{extra}", attached.message)).await
}

/// Switches `agent` to the saved session `id` of its workspace (`/resume`, a picker): its
/// history replaces the current conversation, and what follows is appended to its file.
/// Returns the notice to show. On an error the agent keeps its session.
pub async fn resume_session(agent: &mut Agent<'_>, id: &str) -> Result<String> {
    if id.trim() == agent.session.id() {
        return Ok(format!("session {id} is this one"));
    }
    let reopened = Session::reopen(&agent.ctx.state, Some(id))?;
    let mut text = String::new();
    for notice in &reopened.notices {
        text.push_str(&format!("note: {notice}\n"));
    }
    agent.session = reopened.session;
    agent.history = reopened.history;
    agent.usage.context = None;
    agent.start_conversation()?;
    for notice in travel::reconcile(agent).await {
        text.push_str(&format!("note: {notice}\n"));
    }
    if let Some(note) = resumed_background(agent) {
        text.push_str(&format!("note: {note}\n"));
    }
    if let Some(note) = session::all_undone_note(&agent.history) {
        text.push_str(&format!("note: {note}\n"));
    }
    let turns = agent.history.prompts();
    text.push_str(&format!(
        "resumed session {} ({turns} {}); the conversation goes on from its last message, and /undo rewinds its turns",
        agent.session.id(),
        if turns == 1 { "turn" } else { "turns" }
    ));
    Ok(text)
}

/// What a resumed conversation's background commands became: those it never saw end are
/// named (they ended with the session, and are not restarted), and new ids follow its own.
pub fn resumed_background(agent: &Agent<'_>) -> Option<String> {
    let (left, highest) = bashes::left_running(agent.history.transcript());
    if let Some(background) = agent.ctx.bash.background() {
        background.continue_after(highest);
    }
    bashes::left_running_note(&left)
}

/// Expands a user command and runs it as one turn: its `allowed-tools` limit the turn's tools
/// (a matching `Bash(…)` rule runs a command without asking, when the command is the user's
/// own or its workspace is trusted), and its `model` answers this turn only.
///
/// `extra` (piped input) follows the expanded prompt as it is.
pub async fn run_user_command(
    agent: &mut Agent<'_>,
    command: &shiro_commands::Command,
    args: &str,
    extra: &str,
) -> Result<TurnReport> {
    let ctx = agent.ctx;
    let trusted = crate::trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root);
    if command.kind() == shiro_commands::Kind::Skill
        && command.origin == Origin::Project
        && !trusted
    {
        // The same gate as the model's: a skill that came with the repository may tell the
        // model to run its scripts.
        agent.printer.info(&format!(
            "/{} is a skill of this workspace, which you have not trusted; it runs once you trust the workspace with /trust, which also offers its skills to the model",
            command.name
        ));
        return Ok(TurnReport::default());
    }
    if command
        .skill
        .as_ref()
        .is_some_and(|skill| !skill.user_invocable)
    {
        agent.printer.info(&format!(
            "/{} is a skill for the model alone (its SKILL.md says `user-invocable: false`): the model loads it when a task calls for it, so ask for the task instead",
            command.name
        ));
        return Ok(TurnReport::default());
    }
    let shell = ShRunner::new(&ctx.root);
    let files = FsReader::new(&ctx.root)?;
    let expand_ctx = ExpandContext {
        shell: &shell,
        files: &files,
        workspace_trusted: trusted,
    };
    let prompt = shiro_commands::expand(command, &Args::parse(args), &expand_ctx).await;
    agent.printer.info(&format!(
        "(/{} expanded to {} characters)",
        command.name,
        prompt.chars().count()
    ));
    for note in headless::turn_notes(command) {
        agent.printer.info(&format!("({note})"));
    }
    let limits = TurnLimits {
        command: command.name.clone(),
        allowed: command.allowed_tools.clone(),
        preapprove: trusted || command.origin != Origin::Project,
    };
    let saved = match command.model.as_deref() {
        Some(model) => {
            let for_turn = provider(ctx, Some(model), &|name| ctx.env.var(name)).await;
            Some(std::mem::replace(&mut agent.provider, for_turn))
        }
        None => None,
    };
    let report = agent.turn_with(&format!("{prompt}{extra}"), limits).await;
    if let Some(saved) = saved {
        agent.provider = saved;
    }
    report
}
