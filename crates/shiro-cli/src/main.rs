//! The `shiro` binary: the composition root that wires shiro-tools, shiro-undo and
//! shiro-commands together, and the only place that prints, reads the environment, or exits.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use shiro_cli::cli::{Cli, Command};
use shiro_cli::config::{self, Config};
use shiro_cli::headless::{self, Context, Report, Way};
use shiro_cli::render::Color;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A headless command does one thing at a time on one thread; the agent streams from a
    // model while it waits for the terminal and for Ctrl-C, so it gets worker threads.
    let headless = matches!(&cli.command, Some(command) if !matches!(command, Command::Demo));
    let mut builder = if headless {
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
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("shiro: {err:#}");
            ExitCode::from(headless::exit_code(&err))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let root = match &cli.global.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let root = root
        .canonicalize()
        .map_err(|err| anyhow::anyhow!("workspace {}: {err}", root.display()))?;
    if !root.is_dir() {
        anyhow::bail!("workspace {} is not a directory", root.display());
    }
    let config = Config::load(&root, config::user_config_dir())?;
    let ctx = Context {
        root,
        config,
        color: Color::detect(std::io::stdout().is_terminal()),
    };
    let Some(command) = &cli.command else {
        return shiro_cli::agent::main(&ctx, &cli.session).await;
    };
    // Ctrl-C must not cut a file operation in half: headless commands finish what they
    // started (each is one short turn), and the undo log's record of a restore under way
    // covers a hard kill.
    let report = tokio::select! {
        report = dispatch(&ctx, command) => report?,
        () = interrupted(command) => {
            eprintln!("shiro: interrupted; the command was stopped");
            return Ok(ExitCode::from(130));
        }
    };
    print_report(&report);
    Ok(ExitCode::SUCCESS)
}

async fn dispatch(ctx: &Context, command: &Command) -> anyhow::Result<Report> {
    match command {
        Command::Tool { name, args } => headless::tool(ctx, name, args).await,
        Command::ApplyPatch { file } => headless::apply_patch(ctx, file.as_deref()).await,
        Command::Undo(args) => headless::restore(ctx, Way::Undo, args).await,
        Command::Redo(args) => headless::restore(ctx, Way::Redo, args).await,
        Command::Log { json } => headless::log(ctx, *json).await,
        Command::Commands(sub) => headless::commands(ctx, sub).await,
        Command::Demo => shiro_cli::agent::demo::run(Box::new(std::io::stdout()), ctx.color)
            .await
            .map(|()| Report::default()),
    }
}

/// Resolves on Ctrl-C for commands that are safe to stop part-way: a `bash` call (its
/// process group is killed when dropped) and the read-only ones. Every other command catches
/// the signal and finishes its change, so a patch never lands half-applied.
async fn interrupted(command: &Command) {
    let stoppable = matches!(command, Command::Tool { name, .. } if name == "bash")
        || matches!(
            command,
            Command::Log { .. } | Command::Commands(_) | Command::Demo
        );
    if tokio::signal::ctrl_c().await.is_ok() {
        if stoppable {
            return;
        }
        eprintln!(
            "shiro: interrupted; finishing the current change so the workspace and the undo log stay consistent"
        );
    }
    std::future::pending::<()>().await;
}

fn print_report(report: &Report) {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`shiro log | head`) is not an error worth a message.
    let _ = stdout.write_all(report.stdout.as_bytes());
    let _ = stdout.flush();
    for notice in &report.notices {
        eprintln!("shiro: {notice}");
    }
}
