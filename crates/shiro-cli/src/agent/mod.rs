//! The interactive agent, `shiro -p`, and `shiro demo` (providers are in
//! [`crate::provider`]). The decisions are written up in `docs/cli.md`, "The agent".
//!
//! - [`turn`]: the loop (model → tools → model …), approvals and undo recording;
//! - [`session`]: the JSONL transcript in `.shiro/sessions/`;
//! - [`repl`]: the read-eval loop and its `/` commands; [`input`]: where lines come from;
//! - [`attach`]: the files a prompt's `@path`s name, attached to its message;
//! - [`events`]: what a turn reports, as text or JSON lines; [`approve`]: approvals and diffs;
//! - [`demo`]: the offline demo, which drives the same REPL with a replay script.
//!
//! This is the part of the binary that reads the environment (`SHIRO_MODEL`,
//! `OPENAI_BASE_URL`, `OPENAI_API_KEY`) and talks to the terminal.

pub mod approve;
pub mod attach;
pub mod demo;
pub mod events;
pub mod input;
pub mod repl;
pub mod session;
pub mod turn;

use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use shiro_commands::{Args, ExpandContext, FsReader, Origin, Resolved, ShRunner};

use self::approve::Approvals;
use self::events::{Mode, Printer};
use self::input::{Input, Lines, Terminal};
use self::session::Session;
use self::turn::{Agent, DEFAULT_MAX_STEPS, SYSTEM_PROMPT, TurnLimits, TurnReport};
use crate::cli::SessionArgs;
use crate::headless::{self, Context};
use crate::permissions::{self, Kind, Source};
use crate::provider::{Message, OpenAiConfig, OpenAiProvider, Provider, ReplayProvider};
use crate::render::Color;
use crate::tui::{Msg, PickItem, ToUi, Ui, UiSender};

/// Runs the agent: interactive, or one headless turn with `-p`.
pub async fn main(ctx: &Context, args: &SessionArgs) -> Result<ExitCode> {
    let provider = provider(ctx, args.model.as_deref(), |name| std::env::var(name));
    let headless = args.prompt.is_some();
    let tui = !headless && !args.no_tui && tui_fits(|name| std::env::var(name));
    // `--resume` without an id on a terminal: a new session, then a picker of the others.
    let pick = tui && args.resume.as_deref() == Some("");
    let (session, history, notices) = if pick {
        let new = SessionArgs {
            resume: None,
            ..args.clone()
        };
        open_session(&ctx.root, &new)?
    } else {
        open_session(&ctx.root, args)?
    };
    let mode = match (headless, args.json) {
        (false, _) => Mode::Interactive,
        (true, false) => Mode::Headless,
        (true, true) => Mode::Json,
    };
    let approvals = approvals(ctx, args)?;
    let registry = headless::registry(ctx);
    let ui = if tui {
        match Ui::start(
            registry.clone(),
            ctx.root.clone(),
            ctx.color == Color::Always,
            ctx.signals.clone(),
        ) {
            Ok(ui) => Some(ui),
            Err(err) => {
                // The line interface still works.
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("shiro: the terminal UI cannot start ({err}); using plain lines");
                }
                None
            }
        }
    } else {
        None
    };
    let input: Box<dyn Input> = if let Some(ui) = &ui {
        Box::new(ui.input())
    } else if headless {
        Box::new(Lines::new(Box::new(std::io::empty())))
    } else if std::io::stdin().is_terminal() {
        Box::new(Terminal::new(&ctx.root, registry.clone())?)
    } else {
        Box::new(Lines::new(Box::new(std::io::BufReader::new(
            std::io::stdin(),
        ))))
    };
    let printer = match &ui {
        Some(ui) => Printer::to_ui(ui.sender()),
        None => Printer::new(
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
            mode,
            ctx.color,
        ),
    };
    let tools = match &ui {
        // bash's output is shown as it comes.
        Some(ui) => shiro_tools::tools::all_with(
            ctx.bash.clone().with_live_output(live_output(ui.sender())),
        ),
        None => ctx.tools(),
    };
    let mut agent = Agent {
        ctx,
        provider,
        specs: turn::specs(&tools),
        tools,
        history,
        session,
        printer,
        input,
        approvals,
        max_steps: DEFAULT_MAX_STEPS,
        // `-p` too: Ctrl-C stops the turn, which is finished and recorded.
        catch_interrupts: true,
        bash_running: tokio::sync::watch::Sender::new(false),
        limits: turn::TurnLimits::default(),
        usage: turn::SessionUsage::default(),
    };
    if agent.history.is_empty() {
        agent.push(Message::system(SYSTEM_PROMPT))?;
    }
    for notice in notices {
        agent.printer.info(&format!("note: {notice}"));
    }
    if let Some(prompt) = &args.prompt {
        // A user command works with -p as it does in a session; other text, a built-in's
        // name included, goes to the model as typed.
        let report = match registry.resolve(prompt) {
            Resolved::User { command, args } => {
                run_user_command(&mut agent, &command, &args).await?
            }
            _ => send_prompt(&mut agent, prompt).await?,
        };
        if report.interrupted {
            // The turn was finished and recorded, like one the REPL stops.
            agent.printer.info(match report.turn_id {
                Some(_) => "turn stopped; /undo or `shiro undo` reverts it",
                None => "turn stopped; it changed nothing",
            });
            return Ok(ExitCode::from(crate::signals::INTERRUPTED));
        }
        // A failed turn's last text is not an answer; the error is on stderr (or in turn_end).
        if report.error.is_some() {
            return Ok(ExitCode::FAILURE);
        }
        agent.printer.answer(&report.answer);
        for call in &report.denied {
            agent.printer.info(&format!("denied: {call}"));
        }
        for call in &report.unrecordable {
            agent.printer.info(&format!("refused: {call}"));
        }
        if !report.unrecordable.is_empty() && report.changed.is_empty() && !report.ran_bash {
            // As for denied calls: the changes the model asked for were not made.
            agent.printer.info(
                "nothing was changed: this workspace cannot keep shiro's undo log (see the note above), and a change that could not be undone is never made",
            );
            return Ok(ExitCode::FAILURE);
        }
        if !report.denied.is_empty() && report.changed.is_empty() && !report.ran_bash {
            // Every change the model tried was refused: a script must not take this for
            // success.
            agent.printer.info(if report.unapproved {
                "nothing was changed: -p denies every change unless --yes is given; run again \
                 with --yes to allow them"
            } else {
                "nothing was changed: the permission rules or the mode refused every change \
                 (/permissions in a session lists them)"
            });
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let model = match &agent.provider {
        Ok(provider) => provider.model().to_owned(),
        Err(_) => "none".to_owned(),
    };
    let resumed = agent.history.len() > 1;
    let state = match (resumed, agent.session.unsaved_reason()) {
        (_, Some(_)) => "new, not saved",
        (true, None) => "resumed",
        (false, None) => "new",
    };
    if resumed {
        agent.printer.ui(ToUi::Replay(agent.history.clone()));
    }
    agent.printer.info(&format!(
        "shiro: session {} ({state}), model {model}; /help lists commands, /undo takes a turn back",
        agent.session.id(),
    ));
    // Hot reload of user commands; without it (no inotify, say) commands load once.
    let _watch = registry.watch().ok();
    if pick {
        pick_session(&mut agent);
    }
    let ended = repl::run(&mut agent, &registry).await;
    let hint = resume_hint(&agent);
    if let (None, Some(hint)) = (&ui, &hint) {
        agent.printer.info(hint);
    }
    drop(agent);
    if let Some(ui) = ui {
        ui.finish();
        // The UI is gone: the hint goes after the transcript, on the terminal itself.
        if let Some(hint) = &hint {
            #[allow(clippy::print_stdout)]
            {
                println!("{hint}");
            }
        }
    }
    ended?;
    if ctx.signals.terminated() {
        // SIGTERM stopped a turn and ended the session: a signal's exit code, as at the
        // prompt, so that whoever sent it does not read a normal end.
        return Ok(ExitCode::from(crate::signals::INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// The session's approvals: the mode from `--read-only`/`--yes`, the config files' rules and
/// those of `--allowed-tools`/`--disallowed-tools`. With `-p` nobody is asked.
pub fn approvals(ctx: &Context, args: &SessionArgs) -> Result<Approvals> {
    let mode = match (args.read_only, args.yes) {
        (true, _) => permissions::Mode::ReadOnly,
        (false, true) => permissions::Mode::Yes,
        (false, false) => permissions::Mode::Ask,
    };
    let mut approvals = Approvals::new(mode, args.prompt.is_none());
    approvals.rules = ctx.config.permissions.clone();
    for (kind, flag, values) in [
        (Kind::Deny, "--disallowed-tools", &args.disallowed_tools),
        (Kind::Allow, "--allowed-tools", &args.allowed_tools),
    ] {
        let rules: Vec<String> = values
            .iter()
            .flat_map(|value| shiro_commands::AllowedTools::split(value))
            .collect();
        approvals.rules.add(kind, &Source::Flag(flag), &rules)?;
    }
    Ok(approvals)
}

/// Whether the terminal UI can run: both ends on a terminal that is not `TERM=dumb`.
fn tui_fits(env: impl Fn(&str) -> Result<String, std::env::VarError>) -> bool {
    std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && env("TERM").map_or(true, |term| term != "dumb")
}

/// Hands a running command's output to the UI, whole characters at a time.
fn live_output(ui: UiSender) -> shiro_tools::tools::Live {
    let carry = std::sync::Mutex::new(Vec::new());
    Arc::new(move |bytes: &[u8]| {
        let mut carry = carry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        carry.extend_from_slice(bytes);
        // A character cut between two reads waits for its end.
        let valid = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            Err(err) if err.error_len().is_none() => err.valid_up_to(),
            Err(_) => carry.len(),
        };
        let text = String::from_utf8_lossy(&carry[..valid]).into_owned();
        carry.drain(..valid);
        if !text.is_empty() {
            let _ = ui.send(Msg::Agent(ToUi::BashOutput(text)));
        }
    })
}

/// The picker of `--resume` and `/resume` without an id: the workspace's other sessions
/// are offered, and the chosen one replaces the conversation and is shown again.
pub fn pick_session(agent: &mut Agent<'_>) {
    let sessions = match session::list(&agent.ctx.root) {
        Ok(sessions) => sessions,
        Err(err) => {
            agent
                .printer
                .info(&format!("error: {}", headless::error_text(&err)));
            return;
        }
    };
    let items: Vec<PickItem> = sessions
        .iter()
        .filter(|summary| summary.id != agent.session.id())
        .map(|summary| PickItem {
            id: summary.id.clone(),
            when: session_time(summary.modified),
            first_prompt: summary.first_prompt.clone(),
            turns: summary.turns,
        })
        .collect();
    let (reply, chosen) = std::sync::mpsc::channel();
    agent.printer.ui(ToUi::Pick {
        sessions: items,
        reply,
    });
    // The UI answers at once when there is nothing to pick. Waiting blocks this thread, as
    // the agent's input does while a person types.
    let chosen = chosen.recv().ok().flatten();
    let Some(id) = chosen else {
        return;
    };
    match resume_session(agent, &id) {
        Ok(notice) => {
            agent.printer.ui(ToUi::Replay(agent.history.clone()));
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

/// Sends a typed prompt as one turn: the files and directories its `@path`s name are
/// attached to the message (see [`attach`]), each with a note for the user, and the turn
/// runs. The REPL and `-p` send prompts through it; a user command's template has its own
/// `@` references, read by [`run_user_command`].
pub async fn send_prompt(agent: &mut Agent<'_>, prompt: &str) -> Result<TurnReport> {
    let attached = attach::attach(&agent.ctx.root, prompt).await;
    for note in &attached.notes {
        agent.printer.info(note);
    }
    agent.turn(&attached.message).await
}

/// Switches `agent` to the saved session `id` of its workspace (`/resume`, a picker): its
/// history replaces the current conversation, and what follows is appended to its file.
/// Returns the notice to show. On an error the agent keeps its session.
pub fn resume_session(agent: &mut Agent<'_>, id: &str) -> Result<String> {
    if id.trim() == agent.session.id() {
        return Ok(format!("session {id} is this one"));
    }
    let reopened = Session::reopen(&agent.ctx.root, Some(id))?;
    let mut text = String::new();
    for notice in &reopened.notices {
        text.push_str(&format!("note: {notice}\n"));
    }
    agent.session = reopened.session;
    agent.history = reopened.history;
    if agent.history.is_empty() {
        agent.push(Message::system(SYSTEM_PROMPT))?;
    }
    let turns = agent
        .history
        .iter()
        .filter(|m| m.role == crate::provider::Role::User)
        .count();
    text.push_str(&format!(
        "resumed session {} ({turns} {}); the conversation goes on from its last message, and /undo rewinds its turns",
        agent.session.id(),
        if turns == 1 { "turn" } else { "turns" }
    ));
    Ok(text)
}

/// `resume this session with: shiro --resume ID` for a saved session with at least one user
/// message, shown when an interactive session ends; `-C ROOT` is added when shiro started
/// here would pick another workspace.
pub fn resume_hint(agent: &Agent<'_>) -> Option<String> {
    if agent.session.unsaved_reason().is_some()
        || !agent
            .history
            .iter()
            .any(|m| m.role == crate::provider::Role::User)
    {
        return None;
    }
    let here = std::env::current_dir()
        .ok()
        .and_then(|cwd| crate::workspace::locate(None, &cwd).ok());
    let flag = match here {
        Some(here) if here.root == agent.ctx.root => String::new(),
        _ => format!("-C {} ", shell_word(&agent.ctx.root.to_string_lossy())),
    };
    Some(format!(
        "resume this session with: shiro {flag}--resume {}",
        agent.session.id()
    ))
}

/// `word` as one shell word: as it is when it holds only safe characters, else quoted.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Expands a user command and runs it as one turn: its `allowed-tools` limit the turn's tools
/// (a matching `Bash(…)` rule runs a command without asking, when the command is the user's
/// own or its workspace is trusted), and its `model` answers this turn only.
pub async fn run_user_command(
    agent: &mut Agent<'_>,
    command: &shiro_commands::Command,
    args: &str,
) -> Result<TurnReport> {
    let ctx = agent.ctx;
    let trusted = crate::trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root);
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
    let saved = command.model.as_deref().map(|model| {
        let for_turn = provider(ctx, Some(model), |name| std::env::var(name));
        std::mem::replace(&mut agent.provider, for_turn)
    });
    let report = agent.turn_with(&prompt, limits).await;
    if let Some(saved) = saved {
        agent.provider = saved;
    }
    report
}

/// A new session, or the one `--continue`/`--resume` names (`--resume` without an id: the
/// newest), with its history and notices. A new session in a workspace where `.shiro/`
/// cannot be made is an unsaved one, and the one notice says so: its turns answer questions
/// and refuse changes, without saying it again.
pub fn open_session(
    root: &Path,
    args: &SessionArgs,
) -> Result<(Session, Vec<Message>, Vec<String>)> {
    let id = match (&args.resume, args.continue_latest) {
        (Some(id), _) if !id.is_empty() => Some(Some(id.as_str())),
        (Some(_), _) | (None, true) => Some(None),
        (None, false) => None,
    };
    match id {
        Some(id) => {
            let reopened = Session::reopen(root, id)?;
            Ok((reopened.session, reopened.history, reopened.notices))
        }
        None => match Session::create(root) {
            Ok(session) => Ok((session, Vec::new(), Vec::new())),
            Err(err) => {
                let why = headless::error_text(&err);
                let notice = format!(
                    "this session cannot be saved ({why}), and changes to files and bash are refused, since they could not be undone; questions that change nothing still work"
                );
                Ok((Session::unsaved(why), Vec::new(), vec![notice]))
            }
        },
    }
}

/// The model: `--model` > `SHIRO_MODEL` > `[model] name`; `replay:FILE` plays a script,
/// anything else is an OpenAI-compatible model at `OPENAI_BASE_URL` > `[model] base_url` >
/// OpenAI. Failing to make one is reported when a prompt is sent, so that `/undo`, `/log`
/// and the rest work without a model.
pub fn provider(
    ctx: &Context,
    flag: Option<&str>,
    env: impl Fn(&str) -> Result<String, std::env::VarError>,
) -> Result<Box<dyn Provider>, String> {
    let var = |name: &str| env(name).ok().filter(|value| !value.trim().is_empty());
    let name = flag
        .map(str::to_owned)
        .or_else(|| var("SHIRO_MODEL"))
        .or_else(|| ctx.config.model.name.clone())
        .ok_or_else(|| {
            "no model is set: pass --model NAME, set SHIRO_MODEL, or put `name` under [model] in .shiro/config.toml (`shiro demo` runs offline)".to_owned()
        })?;
    if let Some(path) = name.strip_prefix("replay:") {
        let script = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read the replay script {path}: {err}"))?;
        return ReplayProvider::from_script(&script)
            .map(|provider| Box::new(provider) as Box<dyn Provider>)
            .map_err(|err| err.to_string());
    }
    let mut config = OpenAiConfig::new(name);
    if let Some(url) = var("OPENAI_BASE_URL").or_else(|| ctx.config.model.base_url.clone()) {
        config.base_url = url;
    }
    config.api_key = var("OPENAI_API_KEY");
    if let Some(secs) = ctx.config.model.timeout_secs {
        config.timeout = Duration::from_secs(secs);
    }
    OpenAiProvider::new(config)
        .map(|provider| Box::new(provider) as Box<dyn Provider>)
        .map_err(|err| err.to_string())
}
