//! The read-eval loop: prompts go to the model, `/` lines are commands.

use std::fmt::Write as _;

use anyhow::Result;
use shiro_commands::{Origin, Registry, Resolved};
use shiro_providers::Usage;
use shiro_tools::capture::CaptureMode;
use shiro_undo::UndoOptions;

use super::compact;
use super::conversation::Conversation;
use super::protocol::Op;
use super::protocol::{StatusInfo, ToFront};
use super::session::{self, Session, SessionSummary};
use super::turn::Agent;
use super::turn::SessionUsage;
use crate::headless::CommandsCommand;
use crate::headless::{self, BUILTINS};
use crate::permissions::Mode;
use crate::trust;

/// The built-ins that take no arguments: typed with some, they say so and do nothing,
/// rather than drop words the user meant for them.
const NO_ARGUMENTS: [&str; 11] = [
    "clear",
    "commands",
    "cost",
    "exit",
    "help",
    "init",
    "log",
    "permissions",
    "sessions",
    "status",
    "trust",
];

/// What a built-in typed with `args` says instead of running, when it takes none.
fn refuse_arguments(name: &str, args: &str) -> Option<String> {
    (NO_ARGUMENTS.contains(&name) && !args.trim().is_empty())
        .then(|| format!("/{name} takes no arguments, so nothing was done; type /{name} alone"))
}

/// The prompt shown for the next message.
pub const PROMPT: &str = "> ";

/// Runs the loop until `/exit`, Ctrl-D or the end of the input, then stops the session's
/// background commands, naming them.
pub async fn run(agent: &mut Agent<'_>, registry: &Registry) -> Result<()> {
    let ended = run_loop(agent, registry).await;
    if let Some(background) = agent.ctx.bash.background() {
        let stopped = background.stop_all().await;
        if let Some(text) = super::bashes::stopped(&stopped) {
            agent.printer.info(&text);
        }
    }
    ended
}

async fn run_loop(agent: &mut Agent<'_>, registry: &Registry) -> Result<()> {
    loop {
        // SIGTERM during a turn stopped it; the session ends with it.
        if agent.ctx.signals.terminated() {
            return Ok(());
        }
        if agent.printer.has_ui() {
            let status = status(agent).await;
            agent.printer.ui(ToFront::Status(status));
        }
        let line = match agent.input.read(PROMPT, &mut agent.printer) {
            Op::Submit(line) => line,
            Op::Undo => {
                builtin(agent, registry, "undo", "").await?;
                continue;
            }
            Op::Redo => {
                builtin(agent, registry, "redo", "").await?;
                continue;
            }
            Op::Rewind => {
                builtin(agent, registry, "rewind", "").await?;
                continue;
            }
            // Ctrl-C at the prompt clears the line, as in a shell.
            Op::Interrupt => continue,
            Op::Quit => return Ok(()),
            Op::Approve(_) | Op::Keep(_) => {
                agent.printer.info("nothing waits for an answer");
                continue;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        agent.input.remember(line);
        match registry.resolve(line) {
            Resolved::NotACommand => send(agent, line).await?,
            Resolved::Builtin { name, args } => {
                if let Some(refusal) = refuse_arguments(&name, &args) {
                    agent.printer.info(&refusal);
                } else if name == "exit" {
                    return Ok(());
                } else {
                    builtin(agent, registry, &name, &args).await?;
                }
            }
            Resolved::User { command, args } => {
                if let Err(err) = super::run_user_command(agent, &command, &args, "").await {
                    agent
                        .printer
                        .info(&format!("error: {}", crate::headless::error_text(&err)));
                }
            }
            Resolved::Unknown { name, candidates } if !candidates.is_empty() => {
                agent.printer.info(&format!(
                    "/{name} is ambiguous: {}",
                    headless::slash_names(&candidates)
                ));
            }
            Resolved::Unknown { name, .. } => {
                let names: Vec<String> = registry
                    .menu()
                    .into_iter()
                    .map(|entry| entry.name)
                    .collect();
                agent.printer.info(&unknown_command(&name, &names));
            }
        }
    }
}

/// What the terminal UI's status line shows now.
async fn status(agent: &Agent<'_>) -> StatusInfo {
    let ctx = agent.ctx;
    let model = match &agent.provider {
        Ok(provider) => provider.model().to_owned(),
        Err(_) => "no model".to_owned(),
    };
    let workspace = match &ctx.config.home_dir {
        Some(home) => match ctx.root.strip_prefix(home) {
            Ok(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => ctx.root.display().to_string(),
        },
        None => ctx.root.display().to_string(),
    };
    // Only when the store is there: the status line must not create it.
    let undo_depth = if ctx.has_store() {
        match ctx.open_store().await {
            Ok((store, _)) => store.log().ok().map(|turns| turns.len()),
            Err(_) => None,
        }
    } else {
        Some(0)
    };
    let capture_note = match ctx.bash.runner().mode() {
        CaptureMode::Overlay => None,
        CaptureMode::Detect => Some("bash: changes detected, not undoable".to_owned()),
        CaptureMode::Off => Some("bash: not captured".to_owned()),
    };
    let usage = agent.usage;
    StatusInfo {
        context_window: ctx
            .config
            .model
            .context_window
            .or_else(|| crate::config::context_window(&model)),
        model,
        workspace,
        tokens: (usage.total.total() > 0).then(|| usage.total.total()),
        context_used: usage.last.map(|last| last.total()),
        undo_depth,
        capture_note,
        background: ctx.bash.background().map(|background| background.running()),
    }
}

/// `/cost`: the tokens of the session and of its last turn, as the provider counted them,
/// and the responses the replay model played, which count none.
pub fn cost_text(usage: &SessionUsage) -> String {
    let replayed = count(usage.replayed, "response", "responses");
    if usage.reported == 0 && usage.unreported == 0 {
        return if usage.replayed == 0 {
            "no tokens used yet: no request was sent to the model in this session".to_owned()
        } else {
            format!(
                "no tokens used: the replay model played {replayed} from its script, calling no model, so there is nothing to count or pay"
            )
        };
    }
    let mut out = if usage.reported == 0 {
        format!(
            "the model's server reported no token usage for the {} of this session (an OpenAI-compatible server that ignores stream_options.include_usage)",
            count(usage.unreported, "request", "requests")
        )
    } else {
        let line = |what: &str, sum: &Usage| {
            format!(
                "{what}: {} tokens: {} prompt ({} of them cached), {} completion",
                sum.total(),
                sum.prompt_tokens,
                sum.cached_tokens,
                sum.completion_tokens
            )
        };
        let mut out = line("this session", &usage.total);
        out.push('\n');
        out.push_str(&line("its last turn", &usage.last_turn));
        if usage.unreported > 0 {
            let _ = write!(
                out,
                "\n({} of the session's requests came without usage and are not counted)",
                usage.unreported
            );
        }
        out
    };
    if usage.replayed > 0 {
        let _ = write!(
            out,
            "\n({replayed} played by the replay model from its script used no tokens and cost nothing)"
        );
    }
    out
}

/// `n` and the noun, singular or plural as `n` needs.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `/status`: what the terminal UI's status line shows, as text, with the session, its
/// permission mode and its compactions.
pub fn status_text(
    status: &StatusInfo,
    session: &str,
    usage: &SessionUsage,
    mode: Mode,
    compaction: &str,
) -> String {
    let mut out = format!(
        "model: {}\nworkspace: {}\nsession: {session}\n",
        status.model, status.workspace
    );
    match status.undo_depth {
        Some(depth) => {
            let _ = writeln!(out, "undoable turns: {depth}");
        }
        None => out.push_str("undoable turns: unknown (the undo log cannot be read)\n"),
    }
    if let Some(running) = status.background.filter(|running| *running > 0) {
        let _ = writeln!(
            out,
            "background commands running: {running} (/bashes lists them)"
        );
    }
    let window = status.context_window.map_or_else(
        || "unknown (set [model] context_window)".to_owned(),
        |w| w.to_string(),
    );
    match usage.last {
        Some(last) => {
            let share = status
                .context_window
                .filter(|window| *window > 0)
                .map(|window| match last.total().saturating_mul(100) / window {
                    0 => " (under 1%)".to_owned(),
                    share => format!(" ({share}%)"),
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "context: {} tokens in the last request{share}, of a window of {window}",
                last.total()
            );
        }
        None if usage.unreported > 0 => {
            let _ = writeln!(
                out,
                "context: not known, as the model's replies carry no token counts; window \
                 {window}"
            );
        }
        None if usage.replayed > 0 => {
            let _ = writeln!(
                out,
                "context: not known, as the replay model counts no tokens; window {window}"
            );
        }
        None => {
            let _ = writeln!(out, "context: no request yet; window {window}");
        }
    }
    let _ = writeln!(out, "{compaction}");
    let _ = writeln!(
        out,
        "{}",
        status
            .capture_note
            .as_deref()
            .unwrap_or("bash: captured through an overlay, so /undo reverses its changes")
    );
    let _ = writeln!(
        out,
        "mode: {} ({}; /permissions shows the rules)",
        mode.name(),
        mode.describe()
    );
    out.push_str("(/cost shows the tokens used)");
    out
}

/// `/mode`: shows the permission mode, or sets it (`/mode read-only`).
fn set_mode(agent: &mut Agent<'_>, args: &str) -> String {
    let names: Vec<&str> = Mode::ALL.iter().map(|mode| mode.name()).collect();
    let args = args.trim();
    if args.is_empty() {
        let mode = agent.approvals.mode;
        return format!(
            "mode: {} ({}); /mode {} changes it",
            mode.name(),
            mode.describe(),
            names.join("|")
        );
    }
    match Mode::parse(args) {
        Some(mode) => {
            agent.approvals.mode = mode;
            format!("mode: {} ({})", mode.name(), mode.describe())
        }
        None => format!("unknown mode {args:?}; the modes are {}", names.join(", ")),
    }
}

/// Sends a prompt as one turn. Errors of shiro's bookkeeping are shown and the session goes
/// on: the files and the log are consistent (the store recovers on its next use).
async fn send(agent: &mut Agent<'_>, prompt: &str) -> Result<()> {
    if let Err(err) = super::send_prompt(agent, prompt, "").await {
        agent
            .printer
            .info(&format!("error: {}", crate::headless::error_text(&err)));
    }
    Ok(())
}

async fn builtin(agent: &mut Agent<'_>, registry: &Registry, name: &str, args: &str) -> Result<()> {
    let ctx = agent.ctx;
    let text = match name {
        "help" => help(registry),
        "undo" => match undo_args(args) {
            Ok((options, None)) => super::travel::undo(agent, options).await,
            Ok((options, Some(turn))) => super::travel::revert(agent, turn, options.dry_run).await,
            Err(text) => text,
        },
        "redo" => match restore_options(args) {
            Ok(options) => super::travel::redo(agent, options).await,
            Err(text) => text,
        },
        "rewind" => {
            let text = super::travel::rewind_command(agent, args).await;
            if text.is_empty() {
                return Ok(());
            }
            text
        }
        "fork" => super::travel::fork(agent, args).await,
        "sessions" => resume(agent, "").await,
        "bashes" if args.trim().is_empty() && agent.printer.has_ui() => {
            let background = ctx.bash.background().map(|b| &**b);
            let text = super::bashes::pick(&mut agent.printer, background).await;
            if text.is_empty() {
                return Ok(());
            }
            text
        }
        "bashes" => super::bashes::command(ctx.bash.background().map(|b| &**b), args).await,
        "log" => match headless::log(ctx, false).await {
            Ok(report) => report.stdout,
            Err(err) => format!("error: {}", crate::headless::error_text(&err)),
        },
        "commands" => match headless::commands(ctx, &CommandsCommand::List { json: false }).await {
            Ok(report) => report.stdout,
            Err(err) => format!("error: {}", crate::headless::error_text(&err)),
        },
        // The terminal UI picks from a list; the line interface lists, and switches by number.
        "resume" if args.trim().is_empty() && agent.printer.has_ui() => {
            super::pick_session(agent).await;
            return Ok(());
        }
        "resume" => resume(agent, args).await,
        "clear" => match new_session(agent) {
            Ok(session) => {
                agent.session = session;
                agent.history = Conversation::default();
                agent.usage.context = None;
                agent.start_conversation()?;
                format!(
                    "new conversation: session {} (files are unchanged; /undo still works on earlier turns)",
                    agent.session.id()
                )
            }
            Err(err) => format!("error: {}", crate::headless::error_text(&err)),
        },
        "init" => {
            let prompt = super::instructions::init_prompt(&ctx.root);
            return send(agent, &prompt).await;
        }
        "cost" => cost_text(&agent.usage),
        "model" => super::switch_model(agent, args).await,
        "status" => {
            let status = status(agent).await;
            let compaction = compact::status_line(
                &agent.history,
                agent.compact_threshold(),
                agent.ctx.config.model.compact_at,
            );
            status_text(
                &status,
                agent.session.id(),
                &agent.usage,
                agent.approvals.mode,
                &compaction,
            )
        }
        // It tells the user how it went; only a session file that cannot be written is left.
        "compact" => match agent.compact_command(args).await {
            Ok(_) => return Ok(()),
            Err(err) => format!("error: {}", crate::headless::error_text(&err)),
        },
        "permissions" => agent.approvals.rules.show(agent.approvals.mode),
        "mode" => set_mode(agent, args),
        "trust" => match trust::trust(ctx.config.user_dir.as_deref(), &ctx.root) {
            Ok(()) => {
                registry.set_workspace_trusted(true);
                agent.printer.info(&format!(
                    "trusted {}: its commands' shell substitutions now run, and its skills are offered",
                    ctx.root.display()
                ));
                // The workspace's MCP servers waited for this.
                if agent.mcp.from_workspace() {
                    for notice in super::start_mcp(agent, false).await {
                        agent.printer.info(&format!("note: {notice}"));
                    }
                    agent.printer.info(&agent.mcp.show());
                }
                return Ok(());
            }
            Err(err) => format!("error: {}", crate::headless::error_text(&err)),
        },
        "mcp" => mcp_command(agent, args).await,
        other => format!("/{other} is not available here"),
    };
    agent.printer.info(&text);
    Ok(())
}

/// `/mcp` lists the servers, `/mcp NAME` shows one, `/mcp start` starts those that are not
/// running (that wait for `/trust`, failed or stopped).
async fn mcp_command(agent: &mut Agent<'_>, args: &str) -> String {
    for notice in agent.mcp.check() {
        agent.printer.info(&format!("error: {notice}"));
    }
    match args.trim() {
        "" => agent.mcp.show(),
        "start" => {
            let notices = super::start_mcp(agent, true).await;
            let mut text = agent.mcp.show();
            for notice in notices {
                text.push_str(&format!("\nnote: {notice}"));
            }
            text
        }
        name => agent.mcp.show_server(name),
    }
}

/// A new session for `/clear`: unsaved like the current one when that is unsaved.
fn new_session(agent: &Agent<'_>) -> Result<Session> {
    match agent.session.unsaved_reason() {
        Some(why) => Ok(Session::unsaved(why)),
        None => Session::create(&agent.ctx.state),
    }
}

/// How many sessions `/resume` lists.
const LISTED_SESSIONS: usize = 20;

/// `/resume` lists the workspace's saved sessions, newest first; `/resume N` (a number from
/// the list) or `/resume ID` switches to one.
async fn resume(agent: &mut Agent<'_>, args: &str) -> String {
    let sessions = match session::list(&agent.ctx.state) {
        Ok(sessions) => session::as_tree(&sessions),
        Err(err) => return format!("error: {}", crate::headless::error_text(&err)),
    };
    let arg = args.trim();
    if arg.is_empty() {
        return sessions_text(&sessions, agent.session.id());
    }
    let id = match arg.parse::<usize>() {
        Ok(n) => match n.checked_sub(1).and_then(|i| sessions.get(i)) {
            Some((session, _)) => session.id.clone(),
            None => {
                return format!(
                    "no session number {n}: /resume lists {} {}",
                    sessions.len(),
                    if sessions.len() == 1 {
                        "session"
                    } else {
                        "sessions"
                    }
                );
            }
        },
        Err(_) => arg.to_owned(),
    };
    match super::resume_session(agent, &id).await {
        Ok(text) => text,
        Err(err) => format!("error: {}", crate::headless::error_text(&err)),
    }
}

/// The numbered list `/resume` and `/sessions` show: time (UTC), turns, first prompt; each
/// fork under its parent, indented, with the turn it was forked before; a session another
/// shiro process has open (which `/resume` would refuse) marked as in use.
pub fn sessions_text(sessions: &[(SessionSummary, usize)], current: &str) -> String {
    if sessions.is_empty() {
        return "no saved session with a prompt in this workspace".to_owned();
    }
    let mut out = String::from(
        "saved sessions, newest first, forks under their parent (/resume N switches to one):\n",
    );
    for (index, (session, depth)) in sessions.iter().take(LISTED_SESSIONS).enumerate() {
        let secs = session
            .modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let turns = format!(
            "{} {}",
            session.turns,
            if session.turns == 1 { "turn" } else { "turns" }
        );
        // The session this process is in holds its lock too.
        let this = if session.id == current {
            "  (this session)"
        } else if session.in_use {
            "  (in use by another shiro process)"
        } else {
            ""
        };
        let fork = match &session.forked_from {
            Some((parent, turn)) if *depth == 0 => {
                format!("↳ fork of {parent} before turn {turn}: ")
            }
            Some((_, turn)) => format!("↳ fork before turn {turn}: "),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>4}  {}  {turns:>9}  {}{fork}{}{this}",
            index + 1,
            headless::format_time(secs),
            "  ".repeat(*depth),
            session.first_prompt
        );
    }
    if sessions.len() > LISTED_SESSIONS {
        let _ = writeln!(
            out,
            "      … and {} older (/resume N opens any of them)",
            sessions.len() - LISTED_SESSIONS
        );
    }
    out
}

/// `/undo`'s arguments: its options, and the turn to revert (`/undo 7`, `/undo #7`).
fn undo_args(args: &str) -> Result<(UndoOptions, Option<u64>), String> {
    let mut turn = None;
    let mut rest = Vec::new();
    for arg in args.split_whitespace() {
        match arg.trim_start_matches('#').parse::<u64>() {
            Ok(id) if turn.is_none() => turn = Some(id),
            Ok(_) => return Err("/undo reverts one turn at a time: /undo N".to_owned()),
            Err(_) => rest.push(arg),
        }
    }
    let options = restore_options(&rest.join(" "))?;
    if turn.is_some() && options.force {
        return Err(
            "/undo N reverts turn N as a new turn and refuses any conflict; --force does not apply (use --dry-run to see the merge)"
                .to_owned(),
        );
    }
    Ok((options, turn))
}

fn restore_options(args: &str) -> Result<UndoOptions, String> {
    let mut options = UndoOptions {
        force: false,
        dry_run: false,
    };
    for arg in args.split_whitespace() {
        match arg {
            "--force" => options.force = true,
            "--dry-run" => options.dry_run = true,
            other => return Err(format!("unknown option {other}; use --force or --dry-run")),
        }
    }
    Ok(options)
}

fn help(registry: &Registry) -> String {
    let mut out = String::from("commands:\n");
    let width = BUILTINS
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    for (name, summary) in BUILTINS {
        let _ = writeln!(out, "  /{name:<width$} {summary}");
    }
    // What can be typed: a skill for the model alone is not.
    let users: Vec<String> = registry
        .menu()
        .iter()
        .filter(|entry| entry.origin != Origin::Builtin)
        .map(|entry| format!("/{}", entry.name))
        .collect();
    if !users.is_empty() {
        let _ = writeln!(
            out,
            "your commands: {} (/commands lists them)",
            users.join(" ")
        );
    }
    out.push_str("/undo --dry-run shows the diff first; /undo --force overwrites later changes; /undo N reverts turn N alone\n");
    out.push_str("keys: Tab completes /commands and @paths; Ctrl-C stops the running turn (its changes stay undoable); Ctrl-D or /exit leaves\n");
    out
}

/// `unknown command /frob; did you mean /log?`: the closest names by edit distance.
pub fn unknown_command(name: &str, names: &[String]) -> String {
    let mut scored: Vec<(usize, &String)> = names.iter().map(|n| (distance(name, n), n)).collect();
    scored.sort();
    let best = scored.first().map_or(usize::MAX, |(d, _)| *d);
    let close: Vec<String> = scored
        .iter()
        .filter(|(d, n)| *d == best || n.starts_with(name))
        .take(3)
        .map(|(_, n)| format!("/{n}"))
        .collect();
    if close.is_empty() {
        format!("unknown command /{name}; /help lists the commands")
    } else {
        format!(
            "unknown command /{name}; did you mean {}?",
            close.join(" or ")
        )
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (row[j] + 1).min(row[j + 1] + 1).min(previous + cost);
            previous = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_and_status_say_what_the_provider_counted() {
        let mut usage = SessionUsage::default();
        assert_eq!(
            cost_text(&usage),
            "no tokens used yet: no request was sent to the model in this session"
        );
        usage.add("openai", None);
        insta::assert_snapshot!(cost_text(&usage), @"the model's server reported no token usage for the 1 request of this session (an OpenAI-compatible server that ignores stream_options.include_usage)");
        usage.add(
            "openai",
            Some(Usage {
                prompt_tokens: 1_000,
                completion_tokens: 50,
                cached_tokens: 800,
            }),
        );
        usage.last_turn = Usage::default();
        usage.add(
            "openai",
            Some(Usage {
                prompt_tokens: 1_200,
                completion_tokens: 30,
                cached_tokens: 1_000,
            }),
        );
        insta::assert_snapshot!(cost_text(&usage), @r"
        this session: 2280 tokens: 2200 prompt (1800 of them cached), 80 completion
        its last turn: 1230 tokens: 1200 prompt (1000 of them cached), 30 completion
        (1 of the session's requests came without usage and are not counted)
        ");
        let status = StatusInfo {
            model: "gpt-4o".into(),
            workspace: "~/src/shop".into(),
            tokens: Some(usage.total.total()),
            context_window: Some(128_000),
            context_used: usage.last.map(|last| last.total()),
            undo_depth: Some(2),
            capture_note: Some("bash: changes detected, not undoable".into()),
            background: Some(1),
        };
        insta::assert_snapshot!(status_text(&status, "20261201-101500-abcd", &usage, Mode::AutoEdit, "compactions: none; automatic at about 102400 tokens of the window of 128000"), @r"
        model: gpt-4o
        workspace: ~/src/shop
        session: 20261201-101500-abcd
        undoable turns: 2
        background commands running: 1 (/bashes lists them)
        context: 1230 tokens in the last request (under 1%), of a window of 128000
        compactions: none; automatic at about 102400 tokens of the window of 128000
        bash: changes detected, not undoable
        mode: auto-edit (file changes run without asking; bash commands and MCP tools are asked about; /permissions shows the rules)
        (/cost shows the tokens used)
        ");
        // Requests made, none of them with token counts: the context is not known, but a
        // request was made.
        let mut silent = SessionUsage::default();
        let context = |usage: &SessionUsage| {
            let text = status_text(&status, "s", usage, Mode::AutoEdit, "");
            text.lines()
                .find(|line| line.starts_with("context: "))
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(context(&silent), "context: no request yet; window 128000");
        silent.add("openai", None);
        assert_eq!(
            context(&silent),
            "context: not known, as the model's replies carry no token counts; window 128000"
        );
    }

    /// The replay model plays a script: no server, no tokens, no price. `/cost` says so
    /// rather than blame a server for sending no counts.
    #[test]
    fn cost_says_the_replay_model_uses_no_tokens() {
        let replay = shiro_providers::ReplayProvider::KIND;
        let mut usage = SessionUsage::default();
        usage.add(replay, None);
        let one = cost_text(&usage);
        usage.add(replay, None);
        let two = cost_text(&usage);
        // A session that switched to a real model (`/model`) and back counts both.
        usage.add(
            "anthropic",
            Some(Usage {
                prompt_tokens: 1_000,
                completion_tokens: 50,
                cached_tokens: 0,
            }),
        );
        usage.add("openai", None);
        let mixed = cost_text(&usage);
        insta::assert_snapshot!(format!("{one}\n--\n{two}\n--\n{mixed}"), @r"
        no tokens used: the replay model played 1 response from its script, calling no model, so there is nothing to count or pay
        --
        no tokens used: the replay model played 2 responses from its script, calling no model, so there is nothing to count or pay
        --
        this session: 1050 tokens: 1000 prompt (0 of them cached), 50 completion
        its last turn: 1050 tokens: 1000 prompt (0 of them cached), 50 completion
        (1 of the session's requests came without usage and are not counted)
        (2 responses played by the replay model from its script used no tokens and cost nothing)
        ");
        let status = StatusInfo {
            model: "replay".into(),
            workspace: "~/src/shop".into(),
            tokens: None,
            context_window: None,
            context_used: None,
            undo_depth: Some(0),
            capture_note: None,
            background: None,
        };
        let mut replayed = SessionUsage::default();
        replayed.add(replay, None);
        let text = status_text(&status, "s", &replayed, Mode::Ask, "");
        let context = text.lines().find(|line| line.starts_with("context: "));
        insta::assert_snapshot!(context.unwrap_or_default(), @"context: not known, as the replay model counts no tokens; window unknown (set [model] context_window)");
    }

    /// `/help` names the commands that can be typed: not a skill for the model alone.
    #[test]
    fn help_leaves_out_skills_for_the_model_alone() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, extra) in [("deploy", ""), ("house-style", "user-invocable: false\n")] {
            let folder = dir.path().join(".claude/skills").join(name);
            std::fs::create_dir_all(&folder).expect("a skill folder");
            std::fs::write(
                folder.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: d\n{extra}---\nBody.\n"),
            )
            .expect("a SKILL.md");
        }
        let registry = Registry::load(shiro_commands::Sources {
            workspace_root: dir.path().to_path_buf(),
            ..shiro_commands::Sources::default()
        });
        let help = help(&registry);
        let users = help
            .lines()
            .find(|line| line.starts_with("your commands:"))
            .expect("a line of the user's commands");
        insta::assert_snapshot!(users, @"your commands: /deploy (/commands lists them)");
    }

    /// `/sessions` and `/resume` mark a session another shiro process has open, which
    /// resuming would refuse; the session this one is in is marked as this session, though
    /// it holds its lock too.
    #[test]
    fn the_list_of_sessions_marks_those_open_in_another_process() {
        let at = |secs: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let summary = |id: &str, prompt: &str, in_use: bool| SessionSummary {
            id: id.to_owned(),
            modified: at(1_796_000_000),
            first_prompt: prompt.to_owned(),
            turns: 1,
            forked_from: None,
            in_use,
        };
        let sessions = [
            (summary("a", "fix the parser", true), 0),
            (summary("b", "add tests", false), 0),
            (summary("c", "this one", true), 0),
        ];
        insta::assert_snapshot!(sessions_text(&sessions, "c"), @r"
        saved sessions, newest first, forks under their parent (/resume N switches to one):
           1  2026-11-30 00:53:20 UTC     1 turn  fix the parser  (in use by another shiro process)
           2  2026-11-30 00:53:20 UTC     1 turn  add tests
           3  2026-11-30 00:53:20 UTC     1 turn  this one  (this session)
        ");
    }

    /// `/sessions` in a session, with another session of the workspace held open as
    /// another shiro process would hold it: that one is marked, a closed one is not.
    #[tokio::test]
    async fn sessions_marks_a_session_held_open_with_a_real_lock() {
        use crate::turn::tests::{agent, context, workspace};
        let (_dir, root) = workspace();
        let ctx = context(
            root.clone(),
            crate::config::Config::load(&root, None).expect("a config"),
        );
        let prompt = |text: &str| session::Line::Message {
            message: shiro_providers::Message::user(text),
            time: None,
        };
        let mut held = Session::create(&ctx.state).expect("a session");
        held.append(&prompt("held elsewhere")).expect("appended");
        let mut closed = Session::create(&ctx.state).expect("a session");
        closed.append(&prompt("closed")).expect("appended");
        drop(closed);
        let session = Session::create(&ctx.state).expect("a session");
        let script = r#"{"responses": [{"text": "never asked"}]}"#;
        let mut agent = agent(&ctx, script, session, Mode::Ask, 5);
        let text = resume(&mut agent, "").await;
        let line = |prompt: &str| {
            text.lines()
                .find(|line| line.contains(prompt))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            line("held elsewhere").ends_with("held elsewhere  (in use by another shiro process)"),
            "{text}"
        );
        assert!(line("closed").ends_with("closed"), "{text}");
        drop(held);
        let text = resume(&mut agent, "").await;
        assert!(!text.contains("in use"), "{text}");
    }

    /// Every built-in either takes arguments or refuses them: a new one must be put in one
    /// of the two lists, so that no built-in silently drops words the user typed.
    #[test]
    fn every_built_in_either_takes_arguments_or_refuses_them() {
        const TAKES_ARGUMENTS: [&str; 10] = [
            "bashes", "compact", "fork", "mcp", "mode", "model", "redo", "resume", "rewind", "undo",
        ];
        let mut classified: Vec<&str> = NO_ARGUMENTS
            .iter()
            .chain(&TAKES_ARGUMENTS)
            .copied()
            .collect();
        classified.sort_unstable();
        let mut builtins: Vec<&str> = BUILTINS.iter().map(|(name, _)| *name).collect();
        builtins.sort_unstable();
        assert_eq!(classified, builtins);
        for name in TAKES_ARGUMENTS {
            assert_eq!(refuse_arguments(name, "1"), None, "{name}");
        }
        for name in NO_ARGUMENTS {
            assert_eq!(refuse_arguments(name, ""), None, "{name}");
            assert!(refuse_arguments(name, "x").is_some(), "{name}");
        }
    }

    /// A built-in that takes no arguments, typed with some, says so and does nothing: `/clear
    /// extra` keeps the conversation and its session, `/status extra` shows no status, and
    /// `/exit now` does not end the session; typed alone, they run.
    #[tokio::test]
    async fn a_built_in_typed_with_words_it_does_not_take_says_so_and_does_nothing() {
        use crate::turn::tests::{agent, context, workspace};
        let (_dir, root) = workspace();
        let ctx = context(
            root.clone(),
            crate::config::Config::load(&root, None).expect("a config"),
        );
        let session = Session::create(&ctx.state).expect("a session");
        let id = session.id().to_owned();
        let script = r#"{"responses": [{"text": "never asked"}]}"#;
        let mut agent = agent(&ctx, script, session, Mode::Ask, 5);
        let printed = Printed::default();
        agent.printer = crate::events::Printer::new(
            Box::new(printed.clone()),
            Box::new(printed.clone()),
            crate::events::Mode::Interactive,
            crate::render::Color::Never,
        );
        agent.input = Box::new(crate::input::Lines::new(Box::new(std::io::Cursor::new(
            "/clear extra\n/status now\n/exit now\n/help me\n/cost\n",
        ))));
        let registry = headless::registry(&ctx);
        run(&mut agent, &registry).await.expect("the loop ends");
        assert_eq!(agent.session.id(), id, "/clear extra made a new session");
        insta::assert_snapshot!(printed.text(), @r"
        > /clear extra
        /clear takes no arguments, so nothing was done; type /clear alone
        > /status now
        /status takes no arguments, so nothing was done; type /status alone
        > /exit now
        /exit takes no arguments, so nothing was done; type /exit alone
        > /help me
        /help takes no arguments, so nothing was done; type /help alone
        > /cost
        no tokens used yet: no request was sent to the model in this session
        ");
    }

    /// What a printer wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Printed(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Printed {
        fn text(&self) -> String {
            let bytes = self.0.lock().expect("not poisoned").clone();
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }

    impl std::io::Write for Printed {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .expect("not poisoned")
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn suggests_the_closest_commands() {
        let names: Vec<String> = [
            "help", "undo", "redo", "log", "commands", "clear", "trust", "exit", "review",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            unknown_command("undp", &names),
            "unknown command /undp; did you mean /undo?"
        );
        assert_eq!(
            unknown_command("rev", &names),
            "unknown command /rev; did you mean /redo or /review?"
        );
        assert!(
            unknown_command("frob", &names).starts_with("unknown command /frob; did you mean /")
        );
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
