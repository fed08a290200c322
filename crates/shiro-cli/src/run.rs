//! The agent's wiring: `shiro` (the terminal UI, or plain lines) and `shiro -p` start here.
//! This is where the session's parts are chosen from the flags, the environment and the
//! terminal, and handed to the agent ([`shiro_agent`]), which does no terminal I/O itself.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use shiro_agent::approve::Approvals;
use shiro_agent::conversation::Conversation;
use shiro_agent::events::{Mode, Printer};
use shiro_agent::headless::{self, Context};
use shiro_agent::input::{Input, Lines};
use shiro_agent::permissions::{self, Kind, Source};
use shiro_agent::protocol::{Event, FrontSink, ToFront};
use shiro_agent::render::Color;
use shiro_agent::session::{self, Session};
use shiro_agent::turn::{self, Agent, DEFAULT_MAX_STEPS, SYSTEM_PROMPT};
use shiro_agent::{
    instructions, mcp_servers, model, model_name, pick_session, piped_block, provider, repl,
    run_user_command, send_prompt, start_mcp,
};
use shiro_commands::Resolved;
use shiro_mcp::client::McpClients;
use shiro_tui::Ui;
use shiro_undo::StateDir;

use crate::cli::SessionArgs;
use crate::line_editor::Terminal;

/// How long the model's provider is made (its key read) before the user is told what shiro
/// waits for: `[model] api_key_cmd` may be a password manager waiting to be unlocked.
const KEY_PATIENCE: Duration = Duration::from_secs(1);

/// Runs the agent: interactive, or one headless turn with `-p`.
pub async fn main(ctx: &Context, args: &SessionArgs) -> Result<ExitCode> {
    let headless = args.prompt.is_some();
    let tui = !headless && !args.no_tui && tui_fits(|name| ctx.env.var(name));
    let mode = match (headless, args.json) {
        (false, _) => Mode::Interactive,
        (true, false) => Mode::Headless,
        (true, true) => Mode::Json,
    };
    let approvals = approvals(ctx, args)?;
    let registry = headless::registry(ctx);
    // A `-p` prompt naming a command that several match is a usage error, as in a session
    // it is refused: sent as text, the model would get a command name it cannot run.
    if let Some(prompt) = &args.prompt
        && let Resolved::Unknown { name, candidates } = registry.resolve(prompt)
        && !candidates.is_empty()
    {
        return Err(headless::UsageError(format!(
            "/{name} is ambiguous: {}; name the one to run; nothing was sent",
            headless::slash_names(&candidates)
        ))
        .into());
    }
    // `--resume` without an id on a terminal: a new session, then a picker of the others.
    let pick = tui && args.resume.as_deref() == Some("");
    let (session, history, notices) = if pick {
        let new = SessionArgs {
            resume: None,
            ..args.clone()
        };
        open_session(&ctx.state, &new)?
    } else {
        open_session(&ctx.state, args)?
    };
    let cwd = std::env::current_dir().ok();
    let instructions = instructions::load(&instructions::Places {
        root: &ctx.root,
        cwd: cwd.as_deref(),
        user_dir: ctx.config.user_dir.as_deref(),
        home: ctx.config.home_dir.as_deref(),
    });
    // Last of what may refuse the run, before the terminal UI: a refused `--resume`, rule or
    // command has asked no password manager for a key it never uses.
    let provider = {
        let env = |name: &str| ctx.env.var(name);
        let made = provider(ctx, args.model.as_deref(), &env);
        tokio::pin!(made);
        tokio::select! {
            provider = &mut made => provider,
            () = tokio::time::sleep(KEY_PATIENCE) => {
                if let Some(command) = &ctx.config.model.api_key_cmd {
                    // Before the terminal UI starts: standard error is the terminal's.
                    #[allow(clippy::print_stderr)]
                    {
                        eprintln!(
                            "shiro: waiting for the key from [model] api_key_cmd `{command}` (at most {} s)",
                            model::KEY_COMMAND_TIMEOUT.as_secs()
                        );
                    }
                }
                made.await
            }
        }
    };
    let ui = if tui {
        match Ui::start(
            registry.clone(),
            ctx.root.clone(),
            history_file(&ctx.state),
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
        Box::new(Terminal::new(
            &ctx.root,
            history_file(&ctx.state),
            registry.clone(),
        )?)
    } else {
        Box::new(Lines::new(Box::new(std::io::BufReader::new(
            std::io::stdin(),
        ))))
    };
    let printer = match &ui {
        Some(ui) => Printer::to_front(ui.front()),
        None => Printer::new(
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
            mode,
            ctx.color,
        ),
    };
    let bash = match &ui {
        // bash's output is shown as it comes.
        Some(ui) => ctx.bash.clone().with_live_output(live_output(ui.front())),
        None => ctx.bash.clone(),
    };
    if let (Some(ui), Some(background)) = (&ui, bash.background()) {
        count_background(ui.front(), background);
    }
    // A search of the whole workspace leaves out what a deny rule refuses to let it read.
    let tools = shiro_tools::tools::all_hiding(bash, |tool| approvals.rules.hidden(tool));
    let (mcp_servers, mcp_notes) = mcp_servers(ctx);
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
        max_steps: args
            .max_turns
            .map_or(DEFAULT_MAX_STEPS, |turns| turns as usize),
        // `-p` too: Ctrl-C stops the turn, which is finished and recorded.
        catch_interrupts: true,
        bash_running: tokio::sync::watch::Sender::new(false),
        limits: turn::TurnLimits::default(),
        usage: turn::SessionUsage::default(),
        system_prompt: instructions.system_prompt(SYSTEM_PROMPT),
        mcp: McpClients::new(mcp_servers),
        skills: Some(registry.clone()),
    };
    agent.start_conversation()?;
    for note in mcp_notes {
        agent.printer.info(&format!("note: {note}"));
    }
    for notice in start_mcp(&mut agent, false).await {
        agent.printer.info(&format!("note: {notice}"));
    }
    if let Some(summary) = instructions.summary() {
        agent.printer.info(&format!("note: {summary}"));
    }
    for note in &instructions.notes {
        agent.printer.info(&format!("note: {note}"));
    }
    for notice in notices {
        agent.printer.info(&format!("note: {notice}"));
    }
    for notice in shiro_agent::travel::reconcile(&mut agent).await {
        agent.printer.info(&format!("note: {notice}"));
    }
    if let Some(note) = shiro_agent::resumed_background(&agent) {
        agent.printer.info(&format!("note: {note}"));
    }
    if let Some(prompt) = &args.prompt {
        agent.printer.event(&Event::SessionStart {
            session_id: agent.session.id().to_owned(),
            model: model_name(&agent),
            workspace: ctx.root.display().to_string(),
        });
        // Piped input goes with the prompt, after it (`git diff | shiro -p "review this"`).
        let piped = if std::io::stdin().is_terminal() {
            String::new()
        } else {
            piped_block(std::io::stdin().lock(), &mut agent.printer)?
        };
        // A user command works with -p as it does in a session; other text, a built-in's
        // name included, goes to the model as typed.
        let report = match registry.resolve(prompt) {
            Resolved::User { command, args } => {
                let report = run_user_command(&mut agent, &command, &args, &piped).await?;
                // It ran nothing, as it said (a skill of a workspace not trusted, or one for
                // the model alone): like any command with nothing to do, that exits 1.
                if report.steps == 0 && report.error.is_none() && !report.interrupted {
                    return Ok(ExitCode::FAILURE);
                }
                report
            }
            _ => send_prompt(&mut agent, prompt, &piped).await?,
        };
        // Background commands end with the run (`turn_end` listed them).
        if let Some(background) = ctx.bash.background() {
            let stopped = background.stop_all().await;
            if let Some(text) = shiro_agent::bashes::stopped(&stopped) {
                agent.printer.info(&text);
            }
        }
        if report.interrupted {
            // The turn was finished and recorded, like one the REPL stops.
            agent.printer.info(match report.turn_id {
                Some(_) => "turn stopped; /undo or `shiro undo` reverts it",
                None => "turn stopped; it changed nothing",
            });
            return Ok(ExitCode::from(shiro_agent::signals::INTERRUPTED));
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
        if report.denied_change
            && report.changed.is_empty()
            && !report.ran_bash
            && report.mcp_tools.is_empty()
        {
            // Every change the model tried was refused: a script must not take this for
            // success.
            agent
                .printer
                .info(&shiro_agent::approve::refusal_hint(&report.refused));
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let model = model_name(&agent);
    // A session `--continue` or `--resume` opened is resumed even when it shows nothing (its
    // every turn undone); with the picker, this one is new.
    let resumed = !pick && (args.resume.is_some() || args.continue_latest);
    let state = match (resumed, agent.session.unsaved_reason()) {
        (_, Some(_)) => "new, not saved",
        (true, None) => "resumed",
        (false, None) => "new",
    };
    if resumed {
        agent.printer.ui(ToFront::Replay(agent.history.clone()));
        if let Some(note) = session::all_undone_note(&agent.history) {
            agent.printer.info(&format!("note: {note}"));
        }
    }
    agent.printer.info(&format!(
        "shiro: session {} ({state}), model {model}; /help lists commands, /undo takes a turn back",
        agent.session.id(),
    ));
    // Hot reload of user commands; without it (no inotify, say) commands load once.
    let _watch = registry.watch().ok();
    if pick {
        pick_session(&mut agent).await;
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
        return Ok(ExitCode::from(shiro_agent::signals::INTERRUPTED));
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

/// Keeps the UI's count of running background commands live: a command that ends between
/// turns leaves the status line at once, not at the next prompt. The task ends with the
/// registry.
fn count_background(front: FrontSink, background: &Arc<shiro_tools::capture::Background>) {
    let mut changes = background.changes();
    let background = Arc::downgrade(background);
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(background) = background.upgrade() else {
                return;
            };
            front(ToFront::BackgroundRunning(background.running()));
        }
    });
}

/// Hands a running command's output to the UI, whole characters at a time.
fn live_output(front: FrontSink) -> shiro_tools::tools::Live {
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
            front(ToFront::BashOutput(text));
        }
    })
}

/// `resume this session with: shiro --resume ID` for a saved session that `/resume` lists
/// (with a prompt, or prompts `/redo` can bring back), shown when an interactive session
/// ends; `-C ROOT` is added when shiro started here would pick another workspace.
pub fn resume_hint(agent: &Agent<'_>) -> Option<String> {
    if agent.session.unsaved_reason().is_some() || !session::has_prompts(&agent.history) {
        return None;
    }
    let here = std::env::current_dir()
        .ok()
        .and_then(|cwd| shiro_agent::workspace::locate(None, &cwd).ok());
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

/// The line editor's history, beside the saved sessions.
fn history_file(state: &StateDir) -> std::path::PathBuf {
    state.sessions_dir().join(session::HISTORY_FILE)
}

/// A new session, or the one `--continue`/`--resume` names (`--resume` without an id: the
/// newest that `/resume` lists), with its history and notices. A new session in a workspace
/// where `.shiro/` cannot be made is an unsaved one, and the one notice says so: its turns
/// answer questions and refuse changes, without saying it again.
pub fn open_session(
    state: &StateDir,
    args: &SessionArgs,
) -> Result<(Session, Conversation, Vec<String>)> {
    let id = match (&args.resume, args.continue_latest) {
        (Some(id), _) if !id.is_empty() => Some(Some(id.as_str())),
        (Some(_), _) | (None, true) => Some(None),
        (None, false) => None,
    };
    match id {
        // A copy only reads the original, which it never appends to: that works while
        // another shiro process has it open, and is what its refusal suggests.
        Some(id) if args.fork_session => {
            let mut parent = session::load(state, id)?;
            let history = parent.history.before(parent.history.len());
            let turn = history.prompts() + 1;
            let fork = Session::fork(state, &parent.id, turn, &history)?;
            parent.notices.push(format!(
                "forked session {} from {id} with its whole conversation; the original is left as it is (`shiro --resume {id}` reopens it)",
                fork.id(),
                id = parent.id
            ));
            Ok((fork, history, parent.notices))
        }
        // Refused, having made nothing, when another shiro process has that session open
        // (`session::InUse`); `--continue` then takes no older session in its place.
        Some(id) => {
            let reopened = Session::reopen(state, id)?;
            Ok((reopened.session, reopened.history, reopened.notices))
        }
        None => match Session::create(state) {
            Ok(session) => Ok((session, Conversation::default(), Vec::new())),
            Err(err) => {
                let why = headless::error_text(&err);
                let notice = format!(
                    "this session cannot be saved ({why}), and changes to files and bash are refused, since they could not be undone; questions that change nothing still work"
                );
                Ok((Session::unsaved(why), Conversation::default(), vec![notice]))
            }
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::{Path, PathBuf};

    use clap::Parser as _;
    use shiro_agent::config::Config;
    use shiro_agent::environment::Environment;
    use shiro_agent::signals::Signals;

    use super::*;
    use crate::cli::Cli;

    /// A workspace in `dir` whose user config names an OpenAI model and gets its key from
    /// `[model] api_key_cmd`, which leaves the marker file it returns when it runs. No
    /// variable holds a key, so nothing else could stand in for the command.
    fn context(dir: &Path) -> (Context, PathBuf) {
        let root = dir.join("ws");
        let user = dir.join("config");
        std::fs::create_dir_all(root.join(".shiro")).unwrap();
        std::fs::create_dir_all(&user).unwrap();
        let marker = dir.join("the-key-command-ran");
        std::fs::write(
            user.join("config.toml"),
            format!(
                "[model]\nname = \"gpt-4o-mini\"\napi_key_cmd = \"touch '{}'; echo sk-test\"\n",
                marker.display()
            ),
        )
        .unwrap();
        // Two commands that `/commit` could mean: `-p /commit` is a usage error.
        std::fs::write(
            root.join(".shiro/commands.md"),
            "## git:commit\nCommit.\n\n## hg:commit\nCommit.\n",
        )
        .unwrap();
        let config = Config::load(&root, Some(user)).unwrap();
        let ctx = Context {
            state: StateDir::of_workspace(&dir.join("state"), &root),
            root,
            config,
            color: Color::Never,
            signals: Signals::default(),
            bash: shiro_tools::tools::bash(),
            env: Environment::default(),
        };
        (ctx, marker)
    }

    fn args(argv: &[&str]) -> SessionArgs {
        Cli::try_parse_from(argv).unwrap().session
    }

    /// A run refused before it begins (a session that is unknown or open in another
    /// process, an invalid rule, an ambiguous command) runs no `api_key_cmd`: a password
    /// manager is not asked for a key the run never uses. The command does run for a model
    /// that is used, so the test would see it.
    #[tokio::test]
    async fn a_refused_run_never_runs_the_key_command() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, marker) = context(dir.path());
        let mut held = Session::create(&ctx.state).unwrap();
        held.append(&session::Line::Message {
            message: shiro_providers::Message::user("held"),
            time: None,
        })
        .unwrap();
        let held_id = held.id().to_owned();
        let refused = [
            vec!["shiro", "--resume", "20260101-000000-dead"],
            vec!["shiro", "--resume", &held_id],
            vec!["shiro", "--continue"],
            vec!["shiro", "--allowed-tools", "bash(", "-p", "hello"],
            vec!["shiro", "-p", "/commit"],
        ];
        let mut errors = Vec::new();
        for argv in refused {
            let err = main(&ctx, &args(&argv)).await.unwrap_err();
            assert!(!marker.exists(), "{argv:?} ran the key command: {err:#}");
            errors.push(format!("{err:#}").replace(&held_id, "[ID]"));
        }
        let errors = errors.join("\n").replace(
            &ctx.state.sessions_dir().display().to_string(),
            "[SESSIONS]",
        );
        insta::assert_snapshot!(errors, @r#"
        no session 20260101-000000-dead in this workspace's sessions ([SESSIONS]); /resume, or `shiro --resume` on a terminal, lists them
        session [ID] is open in another shiro process, which may still append to it; wait until that process ends, go on in a copy of it (`shiro --resume [ID] --fork-session`), or start a new session
        the newest session, [ID], is open in another shiro process, which may still append to it (--continue takes no older session in its place); wait until that process ends, go on in a copy of it (`shiro --continue --fork-session`), or start a new session
        invalid allow rule "bash(" in --allowed-tools: `bash(` opens `(` and never closes it
        /commit is ambiguous: /git:commit or /hg:commit; name the one to run; nothing was sent
        "#);
        drop(held);

        let env = |_: &str| Err(std::env::VarError::NotPresent);
        assert!(provider(&ctx, None, &env).await.is_ok());
        assert!(
            marker.exists(),
            "the key command did not run for a model in use"
        );
    }
}
