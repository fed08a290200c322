//! The `shiro` binary: the composition root that wires shiro-tools, shiro-undo and
//! shiro-commands together, and the only place that prints, reads the environment, or exits.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use shiro_agent::config::Config;
use shiro_agent::environment::Environment;
use shiro_agent::headless::{self, Context, FailedAfterChanges, Noticed, Report, Way};
use shiro_agent::render::Color;
use shiro_agent::signals::{Handling, INTERRUPTED, Signals};
use shiro_agent::workspace;
use shiro_cli::cli::{Cli, Command, CommandsCommand, UndoArgs};
use shiro_cli::places;
use shiro_tools::{capture, tools};
use shiro_undo::StateDir;

fn main() -> ExitCode {
    // The bash overlay's helpers: first, while the process has one thread (see
    // `shiro_tools::capture`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if capture::is_helper_call(&args) {
        let exit = capture::run_helper(&args);
        if let Some(message) = exit.message {
            // The helper's standard error is the command's output, which the model reads.
            eprintln!("shiro: {message}");
        }
        std::process::exit(exit.code);
    }
    let cli = Cli::parse();
    if cli.session.fork_session && cli.session.resume.is_none() && !cli.session.continue_latest {
        use clap::CommandFactory as _;
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--fork-session needs --resume [ID] or --continue: it forks a saved session",
            )
            .exit();
    }
    if let Some(why) = cli.session.prompt.as_deref().and_then(prompt_refusal) {
        use clap::CommandFactory as _;
        Cli::command()
            .error(clap::error::ErrorKind::InvalidValue, why)
            .exit();
    }
    // Before any work: a signal that found the default handler would kill the process
    // part-way through a change (see `shiro_cli::signals`).
    let signals = match shiro_cli::signals::install(handling(&cli)) {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("shiro: cannot catch Ctrl-C ({err}); an interrupt will stop shiro at once");
            Signals::default()
        }
    };
    // A headless command does one thing at a time on one thread; the agent streams from a
    // model while it waits for the terminal and for Ctrl-C, so it gets worker threads.
    // The MCP server, too, takes calls while one runs, and waits for the store's lock on a
    // thread of its own.
    let mut builder = if !runs_many(cli.command.as_ref()) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("shiro: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let serves = matches!(&cli.command, Some(Command::Mcp(_)));
    let outcome = runtime.block_on(run(cli, signals));
    if serves {
        // The server has finished its work; a read of standard input may still be pending
        // on a blocking thread (a client's socket is not a pipe), and must not hold the exit.
        runtime.shutdown_background();
    }
    match outcome {
        Ok(code) => code,
        Err(err) => {
            let code = headless::exit_code(&err);
            // What the store said before the failure (a recovery it ran) comes first.
            let err = match err.downcast::<Noticed>() {
                Ok(noticed) => {
                    for notice in &noticed.notices {
                        eprintln!("shiro: {notice}");
                    }
                    noticed.error
                }
                Err(err) => err,
            };
            if let Some(failed) = err.downcast_ref::<FailedAfterChanges>() {
                print_stdout(&failed.stdout);
            }
            eprintln!("shiro: {}", headless::error_text(&err));
            ExitCode::from(code)
        }
    }
}

/// Why `-p PROMPT` cannot be sent, if it cannot: a prompt that is empty, or only whitespace,
/// would go to the model as it is (piped input goes after a prompt, not in its place).
fn prompt_refusal(prompt: &str) -> Option<&'static str> {
    prompt.trim().is_empty().then_some(
        "the prompt is empty: -p takes the text to send to the model, e.g. shiro -p \"explain src/main.rs\" (piped input goes after it, not in its place)",
    )
}

/// What a signal does to this command (see `docs/cli.md`, "Signals").
fn handling(cli: &Cli) -> Handling {
    let Some(command) = &cli.command else {
        // The turn takes Ctrl-C while it runs (see `agent::turn`), in the REPL and with
        // `-p`; before it, `-p` stops at once, having changed nothing.
        return if cli.session.prompt.is_some() {
            Handling::Stop
        } else {
            Handling::Idle
        };
    };
    match command {
        // The command is stopped (its process group killed), and what it changed is still
        // committed and recorded.
        Command::Tool { name, .. } if name == "bash" => Handling::Finish,
        Command::Tool { name, .. } => match tools::find(name) {
            Some(tool) if tool.is_mutating() => Handling::Finish,
            _ => Handling::Stop,
        },
        Command::ApplyPatch { .. } => Handling::Finish,
        Command::Undo(UndoArgs { restore: args, .. }) | Command::Redo(args) if !args.dry_run => {
            Handling::Finish
        }
        Command::Undo(_) | Command::Redo(_) | Command::Log { .. } => Handling::Stop,
        // They only read, as `log` does, and never yield: a signal handed to them would wait
        // for the command's end, and then be forgotten.
        Command::Commands(CommandsCommand::List { .. } | CommandsCommand::Check) => Handling::Stop,
        // Dropped rather than stopped: the demo's temporary copy is removed on drop, and
        // `commands expand` kills the shell substitutions it runs.
        Command::Commands(CommandsCommand::Expand { .. }) | Command::Demo => Handling::Cancel,
        // The server stops taking calls, stops a running bash command, and finishes and
        // records the turns under way before it exits.
        Command::Mcp(_) => Handling::Cancel,
    }
}

/// Whether `command` runs many things over its life: the agent (no command), the MCP
/// server and the demo. A headless command does one thing.
fn runs_many(command: Option<&Command>) -> bool {
    matches!(command, None | Some(Command::Mcp(_) | Command::Demo))
}

async fn run(cli: Cli, signals: Signals) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let workspace = workspace::locate(cli.global.workspace.as_deref(), &cwd)?;
    let state_home = places::state_home().context(
        "cannot tell where to keep shiro's state: set SHIRO_STATE_DIR (or HOME) to an absolute path",
    )?;
    // Canonical, so that a link in the way cannot put the state inside the workspace.
    let state_home = canonical_as_far_as_it_goes(&state_home);
    if let Some(why) = workspace::overlap_refusal(&workspace, &state_home) {
        eprintln!("shiro: {why}");
        return Ok(ExitCode::from(headless::USAGE));
    }
    let root = workspace.root;
    let state = StateDir::of_workspace(&state_home, &root);
    // Before anything opens a session or the store: an earlier version's state in the tree
    // moves out of it, sessions included.
    for notice in shiro_undo::migrate_legacy(&state).context("cannot move the undo history")? {
        eprintln!("shiro: {notice}");
    }
    let mut config = Config::load(&root, places::user_config_dir())?;
    config.home_dir = places::home_dir();
    config.config_home = places::config_home();
    let helper = headless::overlay_helper(std::env::current_exe().ok().as_deref());
    let env =
        Environment::new(std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        }));
    // The agent, the server and the demo start each command's helper as the one before
    // finishes.
    let many = runs_many(cli.command.as_ref());
    let bash = headless::bash_tool(&config, &env, &signals, &helper, &state, many);
    let ctx = Context {
        root,
        state,
        config,
        color: Color::detect(
            std::io::stdout().is_terminal(),
            std::env::var("NO_COLOR").ok().as_deref(),
        ),
        signals,
        bash,
        env,
    };
    let Some(command) = &cli.command else {
        return shiro_cli::run::main(&ctx, &cli.session).await;
    };

    // Under `Handling::Finish` the signal thread only notes a signal, and the command
    // finishes its change; under `Cancel` the command is dropped here.
    let report = tokio::select! {
        report = dispatch(&ctx, command) => report?,
        // The MCP server is never dropped: it finishes the calls under way itself.
        () = ctx.signals.cancelled(), if !matches!(command, Command::Mcp(_)) => {
            eprintln!("shiro: interrupted; the command was stopped");
            return Ok(ExitCode::from(INTERRUPTED));
        }
    };
    print_report(&report);
    if report.exit != 0 {
        return Ok(ExitCode::from(report.exit));
    }
    let bash = matches!(command, Command::Tool { name, .. } if name == "bash");
    if handling(&cli) == Handling::Finish && ctx.signals.interrupted() {
        match report.reverted_by {
            Some(reverse) if bash => eprintln!(
                "shiro: interrupted; the command was stopped, and what it changed was recorded (`{reverse}` reverts it)"
            ),
            None if bash => eprintln!("shiro: interrupted; the command was stopped"),
            Some(reverse) => eprintln!(
                "shiro: interrupted; the change was finished and recorded (`{reverse}` reverts it)"
            ),
            None => eprintln!("shiro: interrupted; the command finished, and changed nothing"),
        }
        return Ok(ExitCode::from(INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// `path` with its links resolved as far as it exists: the missing rest is appended as
/// given.
fn canonical_as_far_as_it_goes(path: &std::path::Path) -> std::path::PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return missing.iter().rev().fold(real, |dir, name| dir.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

async fn dispatch(ctx: &Context, command: &Command) -> anyhow::Result<Report> {
    match command {
        Command::Tool { name, args } => headless::tool(ctx, name, args).await,
        Command::ApplyPatch { file } => {
            headless::apply_patch(ctx, file.as_deref(), &mut std::io::stdin()).await
        }
        Command::Undo(args) => headless::restore(ctx, Way::Undo, &args.into()).await,
        Command::Redo(args) => headless::restore(ctx, Way::Redo, &args.into()).await,
        Command::Log { json } => headless::log(ctx, *json).await,
        Command::Commands(sub) => headless::commands(ctx, &sub.into()).await,
        Command::Mcp(args) => {
            let token = std::env::var(shiro_mcp::server::listen::TOKEN_VAR).ok();
            shiro_cli::mcp::serve(ctx, args, token.as_deref(), &|line| {
                eprintln!("shiro: {line}");
            })
            .await
        }
        Command::Demo => shiro_agent::demo::run(Box::new(std::io::stdout()), ctx.color)
            .await
            .map(|()| Report::default()),
    }
}

fn print_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`shiro log | head`) is not an error worth a message.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn print_report(report: &Report) {
    print_stdout(&report.stdout);
    for notice in &report.notices {
        eprintln!("shiro: {notice}");
    }
}
