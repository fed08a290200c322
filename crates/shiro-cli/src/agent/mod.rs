//! The interactive agent, `shiro -p`, and `shiro demo` (providers are in
//! [`crate::provider`]). The decisions are written up in `docs/cli.md`, "The agent".
//!
//! - [`turn`]: the loop (model → tools → model …), approvals and undo recording;
//! - [`session`]: the JSONL transcript in `.shiro/sessions/`;
//! - [`repl`]: the read-eval loop and its `/` commands; [`input`]: where lines come from;
//! - [`events`]: what a turn reports, as text or JSON lines; [`approve`]: approvals and diffs;
//! - [`demo`]: the offline demo, which drives the same REPL with a replay script.
//!
//! This is the part of the binary that reads the environment (`SHIRO_MODEL`,
//! `OPENAI_BASE_URL`, `OPENAI_API_KEY`) and talks to the terminal.

pub mod approve;
pub mod demo;
pub mod events;
pub mod input;
pub mod repl;
pub mod session;
pub mod turn;

use std::collections::BTreeSet;
use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use shiro_commands::{Args, ExpandContext, FsReader, Origin, Resolved, ShRunner};

use self::approve::{Approvals, Policy};
use self::events::{Mode, Printer};
use self::input::{Input, Lines, Terminal};
use self::session::Session;
use self::turn::{Agent, DEFAULT_MAX_STEPS, SYSTEM_PROMPT, TurnLimits, TurnReport};
use std::sync::Arc;

use crate::cli::SessionArgs;
use crate::headless::{self, Context};
use crate::provider::{Message, OpenAiConfig, OpenAiProvider, Provider, ReplayProvider};
use crate::render::Color;
use crate::tui::{Msg, ToUi, Ui, UiInput, UiSender};

/// Runs the agent: interactive, or one headless turn with `-p`.
pub async fn main(ctx: &Context, args: &SessionArgs) -> Result<ExitCode> {
    let provider = provider(ctx, args.model.as_deref(), |name| std::env::var(name));
    let (session, history, notices) = open_session(&ctx.root, args)?;
    let headless = args.prompt.is_some();
    let mode = match (headless, args.json) {
        (false, _) => Mode::Interactive,
        (true, false) => Mode::Headless,
        (true, true) => Mode::Json,
    };
    let policy = match (args.yes, headless) {
        (true, _) => Policy::Approve,
        (false, true) => Policy::Deny,
        (false, false) => Policy::Ask,
    };
    let registry = headless::registry(ctx);
    let ui = if !headless && !args.no_tui && tui_fits(|name| std::env::var(name)) {
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
        Box::new(UiInput::new(ui.sender()))
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
        approvals: Approvals {
            policy,
            always: BTreeSet::new(),
        },
        max_steps: DEFAULT_MAX_STEPS,
        // `-p` too: Ctrl-C stops the turn, which is finished and recorded.
        catch_interrupts: true,
        bash_running: tokio::sync::watch::Sender::new(false),
        limits: turn::TurnLimits::default(),
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
            _ => agent.turn(prompt).await?,
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
        if !report.denied.is_empty() && report.changed.is_empty() && !report.ran_bash {
            // Every change the model tried was refused: a script must not take this for
            // success.
            agent.printer.info(
                "nothing was changed: -p denies every change unless --yes is given; run again \
                 with --yes to allow them",
            );
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let model = match &agent.provider {
        Ok(provider) => provider.model().to_owned(),
        Err(_) => "none".to_owned(),
    };
    let resumed = agent.history.len() > 1;
    if resumed {
        agent.printer.ui(ToUi::Replay(agent.history.clone()));
    }
    agent.printer.info(&format!(
        "shiro: session {} ({}), model {model}; /help lists commands, /undo takes a turn back",
        agent.session.id(),
        if resumed { "resumed" } else { "new" }
    ));
    // Hot reload of user commands; without it (no inotify, say) commands load once.
    let _watch = registry.watch().ok();
    let ended = repl::run(&mut agent, &registry).await;
    drop(agent);
    if let Some(ui) = ui {
        ui.finish();
    }
    ended?;
    if ctx.signals.terminated() {
        // SIGTERM stopped a turn and ended the session: a signal's exit code, as at the
        // prompt, so that whoever sent it does not read a normal end.
        return Ok(ExitCode::from(crate::signals::INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
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

/// A new session, or the one `--continue`/`--resume` names, with its history and notices.
fn open_session(root: &Path, args: &SessionArgs) -> Result<(Session, Vec<Message>, Vec<String>)> {
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
        None => Ok((Session::create(root)?, Vec::new(), Vec::new())),
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
