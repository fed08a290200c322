//! `shiro mcp`: the server of [`shiro_mcp::server`], over the workspace the headless commands
//! work in. This module is the wiring: it answers the server's [`Workspace`] with the
//! commands `shiro tool`, `shiro undo`, `shiro redo` and `shiro log` run, so a client's
//! calls and a terminal's commands are turns of the one undo log.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use shiro_agent::headless::{self, Context, Report, RestoreArgs, UsageError};
use shiro_agent::render::Color;
use shiro_agent::signals::INTERRUPTED;
use shiro_mcp::server::{self, Outcome, Restore, Serve, Way, Workspace, listen, with_lines};
use shiro_tools::capture::Background;
use shiro_tools::{FsMutator, Tool, ToolError, ToolOutput};
use shiro_undo::{Recording, UndoStore};
use tokio::sync::watch;

use crate::cli::McpArgs;

/// Serves MCP as [`server::serve`] does, in `ctx`'s workspace; `http_token` is the token
/// HTTP clients must send. The report holds what a person should read (on stderr) and exits
/// 130 after a signal; `notify` is given the lines to show while the server is still at work.
pub async fn serve(
    ctx: &Context,
    args: &McpArgs,
    http_token: Option<&str>,
    notify: &dyn Fn(&str),
) -> Result<Report> {
    // An address the server refuses is a mistake in the command line (exit 2), found before
    // the token is asked for: the message is then about the address, whatever the token.
    if let Some(why) = args.http.as_ref().and_then(listen::refuse_address) {
        return Err(UsageError(why).into());
    }
    let workspace = HeadlessWorkspace(Context {
        root: ctx.root.clone(),
        state: ctx.state.clone(),
        config: ctx.config.clone(),
        // Diffs of dry runs are read by a model, not a terminal.
        color: Color::Never,
        signals: ctx.signals.clone(),
        bash: ctx.bash.clone(),
        env: ctx.env.clone(),
    });
    let how = Serve {
        http: args.http,
        token: http_token.map(str::to_owned),
        group_idle: Duration::from_secs(args.group_idle),
    };
    let signals = ctx.signals.clone();
    let served = server::serve(workspace, &how, signals.cancelled(), notify).await?;
    Ok(Report {
        notices: served.notices,
        exit: if served.signalled { INTERRUPTED } else { 0 },
        ..Report::default()
    })
}

/// The workspace a server serves: the headless commands' context.
#[derive(Debug)]
struct HeadlessWorkspace(Context);

impl Workspace for HeadlessWorkspace {
    fn tools(&self) -> Vec<Box<dyn Tool>> {
        self.0.tools()
    }

    fn tool(
        &self,
        name: &str,
        stop: Option<watch::Receiver<u64>>,
        background: Option<&Arc<Background>>,
    ) -> Option<Box<dyn Tool>> {
        let mut bash = self.0.bash.clone();
        if let Some(stop) = stop {
            bash = bash.with_stop(stop);
        }
        if let Some(background) = background {
            bash = bash.with_background(Arc::clone(background));
        }
        shiro_tools::tools::all_with(bash)
            .into_iter()
            .find(|tool| tool.name() == name)
    }

    fn session_background(&self) -> Option<Background> {
        self.0
            .bash
            .background()
            .map(|background| background.fresh())
    }

    fn stops(&self) -> watch::Receiver<u64> {
        self.0.signals.stops()
    }

    fn interrupted(&self) -> bool {
        self.0.signals.interrupted()
    }

    fn jail(&self) -> Result<FsMutator, String> {
        self.0.workspace().map_err(|err| headless::error_text(&err))
    }

    async fn open_store(&self) -> Result<UndoStore, String> {
        match self.0.open_store().await {
            Ok((store, _)) => Ok(store),
            Err(err) => Err(headless::error_text(&err)),
        }
    }

    async fn run_as_turn(
        &self,
        tool: &dyn Tool,
        args: serde_json::Value,
        summary: &str,
    ) -> Outcome {
        from_report(headless::run_as_turn(&self.0, tool, args, summary).await)
    }

    async fn call_in_turn(
        &self,
        tool: &dyn Tool,
        recording: &Recording<FsMutator>,
        args: serde_json::Value,
    ) -> Result<(Result<ToolOutput, ToolError>, Vec<String>), String> {
        headless::call_in_turn(&self.0, tool, recording, args, "`undo`")
            .await
            .map_err(|err| headless::error_text(&err))
    }

    async fn restore(&self, way: Way, restore: Restore) -> Outcome {
        let Restore {
            dry_run,
            force,
            to,
            turn,
        } = restore;
        let name = match way {
            Way::Undo => "undo",
            Way::Redo => "redo",
        };
        let way = match way {
            Way::Undo => headless::Way::Undo,
            Way::Redo => headless::Way::Redo,
        };
        let args = RestoreArgs {
            dry_run,
            force,
            abandon: false,
            to,
            turn,
        };
        match headless::restore(&self.0, way, &args).await {
            Ok(report) => {
                let refused = report.exit != 0;
                let mut outcome = from_report(Ok(report));
                outcome.structured = serde_json::json!({
                    "direction": name,
                    "dry_run": dry_run,
                    "would_be_refused": refused,
                    "notices": outcome.structured["notices"].clone(),
                });
                outcome
            }
            Err(err) => restore_failure(&err, name),
        }
    }

    async fn log(&self) -> Outcome {
        let text = match headless::log(&self.0, false).await {
            Ok(report) => report.stdout,
            Err(err) => return Outcome::failure(headless::error_text(&err)),
        };
        let json = match headless::log(&self.0, true).await {
            Ok(report) => serde_json::from_str(&report.stdout).unwrap_or_default(),
            Err(err) => return Outcome::failure(headless::error_text(&err)),
        };
        Outcome {
            text,
            structured: json,
            is_error: false,
        }
    }
}

/// The outcome of a command of the CLI: its output and notices, or its error.
fn from_report(report: Result<Report>) -> Outcome {
    match report {
        Ok(report) => Outcome {
            text: with_lines(report.stdout.trim_end().to_owned(), &report.notices),
            structured: serde_json::json!({
                "turn": report.turn,
                "changes": report.changes,
                "notices": report.notices,
            }),
            is_error: false,
        },
        Err(err) => {
            let (notices, err) = match err.downcast::<headless::Noticed>() {
                Ok(noticed) => (noticed.notices, noticed.error),
                Err(err) => (Vec::new(), err),
            };
            let mut text = String::new();
            if let Some(failed) = err.downcast_ref::<headless::FailedAfterChanges>() {
                text.push_str(&failed.stdout);
            }
            text.push_str(&headless::error_text(&err));
            let mut outcome = Outcome::failure(with_lines(text, &notices));
            outcome.structured["notices"] = serde_json::json!(notices);
            outcome
        }
    }
}

/// A failed undo or redo; a refusal for conflicts carries the conflict report.
fn restore_failure(err: &anyhow::Error, name: &str) -> Outcome {
    let noticed = err.downcast_ref::<headless::Noticed>();
    let inner = noticed.map_or(err, |noticed| &noticed.error);
    let notices = noticed
        .map(|noticed| noticed.notices.clone())
        .unwrap_or_default();
    let mut outcome = Outcome::failure(with_lines(headless::error_text(inner), &notices));
    if let Some(shiro_undo::UndoError::Conflict(report)) =
        inner.downcast_ref::<shiro_undo::UndoError>()
    {
        // The report names the CLI's flags; here they are arguments.
        outcome.text = outcome.text.replace(
            &format!("{name} with --force; to see what it would do, use --dry-run"),
            &format!(
                "call {name} with \"force\": true; to see what it would do, with \"dry_run\": true"
            ),
        );
        outcome.structured = serde_json::to_value(report)
            .unwrap_or_else(|err| serde_json::json!({ "error": err.to_string() }));
        outcome.structured["refused"] = serde_json::json!(true);
    }
    outcome
}
