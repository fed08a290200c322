//! How the server's calls become turns of the workspace's undo log.
//!
//! A mutating call is its own turn, recorded as `shiro tool` records one. `begin_turn` opens
//! a group: the mutating calls that follow are one turn, until `end_turn`, the next
//! `begin_turn`, `undo`, `redo` or `log`, or an idle gap without calls. The turn begins (and
//! takes the store's lock, which it holds until it is finished) at the group's first
//! mutating call, so a group that only reads takes no lock and records nothing.
//!
//! Mutating calls, restores and the closing of a group run one at a time, each in a task
//! of its own: a client that goes away mid-call does not stop the work, and
//! [`Turns::shutdown`] waits for it, then finishes the open turn, before the server exits.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use serde::Deserialize;
use shiro_tools::{Change, FsMutator, Tool, parse_args};
use shiro_undo::{Recording, TurnId, TurnStart, UndoStore};
use tokio::sync::Mutex;

use shiro_agent::headless::{self, Context, Report, RestoreArgs, Way};

/// Arguments of `undo` and `redo`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreToolArgs {
    /// Change nothing: show what would change, as a diff, and any conflicts.
    #[serde(default, alias = "dryRun")]
    pub dry_run: bool,
    /// Overwrite files that changed since the turn (without it, the restore is refused).
    #[serde(default)]
    pub force: bool,
}

/// Arguments of `begin_turn`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BeginTurnArgs {
    /// What this step does, in a few words: the turn's summary in `shiro log`.
    #[serde(default)]
    pub summary: Option<String>,
}

/// No arguments.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

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

/// The turns of one server.
#[derive(Debug)]
pub struct Turns {
    ctx: Context,
    idle_gap: Duration,
    state: Mutex<State>,
    /// Bumped as each call starts and ends: the idle watch of a group closes it only after
    /// a whole gap without one.
    activity: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    group: Option<Group>,
    /// Groups opened so far; names each group for its idle watch.
    groups: u64,
    /// The server is shutting down: no call starts any more.
    closed: bool,
}

#[derive(Debug)]
struct Group {
    number: u64,
    /// The turn's summary.
    summary: String,
    /// The turn under way, from the group's first mutating call on.
    open: Option<Open>,
}

#[derive(Debug)]
struct Open {
    store: UndoStore,
    recording: Recording<FsMutator>,
    turn: TurnId,
    changes: Vec<Change>,
}

/// What closing a group did.
#[derive(Debug, Default)]
struct Closed {
    /// The turn it recorded.
    turn: Option<TurnId>,
    /// What the recorded turn changed.
    changes: Vec<Change>,
    /// Lines for the text: what happened, then the store's notices.
    lines: Vec<String>,
}

impl Turns {
    /// The turns of a server working in `ctx`'s workspace, whose groups close after
    /// `idle_gap` without a call.
    pub fn new(ctx: Context, idle_gap: Duration) -> Self {
        Self {
            ctx,
            idle_gap,
            state: Mutex::new(State::default()),
            activity: AtomicU64::new(0),
        }
    }

    /// shiro's tools, `bash` as configured, in the order a model is shown them.
    pub fn tools(&self) -> Vec<Box<dyn Tool>> {
        self.ctx.tools()
    }

    /// The tool called `name`, if shiro has one.
    pub fn tool(&self, name: &str) -> Option<Box<dyn Tool>> {
        self.ctx.tool(name)
    }

    /// The tool called `name` for one call that `stop` stops (the client cancelled it, or a
    /// signal came): for `bash`, a running command is then killed, and what it changed is
    /// still recorded; the other tools finish quickly and run as [`Turns::tool`] gives them.
    pub fn tool_stopped_by(
        &self,
        name: &str,
        stop: tokio::sync::watch::Receiver<u64>,
    ) -> Option<Box<dyn Tool>> {
        if name == shiro_commands::tool::BASH {
            return Some(Box::new(self.ctx.bash.clone().with_stop(stop)));
        }
        self.tool(name)
    }

    /// A stop for one call: it changes when `cancelled` resolves (the client's cancellation)
    /// or a signal asks to stop. Drop the handle's task (abort it) once the call is over.
    pub fn call_stop(
        &self,
        cancelled: impl Future<Output = ()> + Send + 'static,
    ) -> (
        tokio::sync::watch::Receiver<u64>,
        tokio::task::JoinHandle<()>,
    ) {
        let (stop, receiver) = tokio::sync::watch::channel(0u64);
        let mut signals = self.ctx.signals.stops();
        let forward = tokio::spawn(async move {
            tokio::pin!(cancelled);
            loop {
                tokio::select! {
                    () = &mut cancelled => {
                        stop.send_modify(|n| *n += 1);
                        return;
                    }
                    changed = signals.changed() => {
                        if changed.is_err() {
                            // No more signals can come; the client can still cancel.
                            cancelled.await;
                            stop.send_modify(|n| *n += 1);
                            return;
                        }
                        stop.send_modify(|n| *n += 1);
                    }
                }
            }
        });
        (receiver, forward)
    }

    /// Runs the tool called `tool` with `args` for the client named `client`. Read-only
    /// tools run at once, outside any turn; mutating ones one at a time, each as its own
    /// turn or as part of the open group.
    pub async fn call(
        self: &Arc<Self>,
        client: &str,
        tool: Box<dyn Tool>,
        args: serde_json::Value,
    ) -> Outcome {
        self.touch();
        let outcome = if tool.is_mutating() {
            let summary = format!("mcp: {client}: {}{}", tool.name(), brief(&args));
            let this = Arc::clone(self);
            self.detached(async move { this.call_mutating(tool, args, summary).await })
                .await
        } else {
            match self.ctx.workspace() {
                Ok(workspace) => match tool.call(&workspace, args).await {
                    Ok(output) => Outcome {
                        text: output.text,
                        structured: serde_json::json!({ "turn": null, "changes": [] }),
                        is_error: false,
                    },
                    Err(err) => failure(err.to_string()),
                },
                Err(err) => failure(headless::error_text(&err)),
            }
        };
        self.touch();
        outcome
    }

    /// Runs `work` in a task of its own, which the end of the transport does not drop, and
    /// waits for it.
    async fn detached<F>(&self, work: F) -> Outcome
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        match tokio::spawn(work).await {
            Ok(outcome) => outcome,
            Err(err) => failure(format!("the call stopped unexpectedly: {err}")),
        }
    }

    async fn call_mutating(
        self: Arc<Self>,
        tool: Box<dyn Tool>,
        args: serde_json::Value,
        summary: String,
    ) -> Outcome {
        let mut state = self.state.lock().await;
        if state.closed {
            return failure(SHUTTING_DOWN.to_owned());
        }
        // The lock is held through the call, so that shutting down waits for it.
        let Some(group) = state.group.as_mut() else {
            let report = headless::run_as_turn(&self.ctx, tool.as_ref(), args, &summary).await;
            return from_report(report);
        };
        if group.open.is_none() {
            match self.open_turn(&group.summary).await {
                Ok(open) => group.open = Some(open),
                Err(err) => return failure(headless::error_text(&err)),
            }
        }
        let Some(open) = group.open.as_mut() else {
            return failure("the group's turn is not open".to_owned());
        };
        let called =
            headless::call_in_turn(&self.ctx, tool.as_ref(), &open.recording, args, "`undo`").await;
        let (result, notices) = match called {
            Ok(called) => called,
            Err(err) => return failure(format!("{}; nothing was run", headless::error_text(&err))),
        };
        let mut lines = notices;
        lines.extend(store_notices(&open.store));
        match result {
            Ok(output) => {
                open.changes.extend(output.changes.iter().cloned());
                Outcome {
                    text: with_lines(output.text, &lines),
                    structured: serde_json::json!({
                        "turn": open.turn,
                        "group_open": true,
                        "changes": output.changes,
                        "notices": lines,
                    }),
                    is_error: false,
                }
            }
            Err(err) => {
                let mut outcome = failure(with_lines(err.to_string(), &lines));
                outcome.structured["turn"] = serde_json::json!(open.turn);
                outcome.structured["group_open"] = serde_json::json!(true);
                outcome
            }
        }
    }

    /// Begins the turn of a group: opens the store and takes its lock.
    async fn open_turn(&self, summary: &str) -> Result<Open> {
        let (store, _) = self.ctx.open_store().await?;
        if self.ctx.signals.interrupted() {
            return Err(headless::InterruptedBeforeStart.into());
        }
        let recording = store.recorder(self.ctx.workspace()?);
        let turn = recording
            .begin_turn(TurnStart {
                summary: summary.to_owned(),
                history_marker: 0,
                session: None,
            })
            .await?;
        Ok(Open {
            store,
            recording,
            turn,
            changes: Vec::new(),
        })
    }

    /// `begin_turn`: closes the open group, if any, and opens a new one.
    pub async fn begin(self: &Arc<Self>, client: &str, args: serde_json::Value) -> Outcome {
        let args: BeginTurnArgs = match parse_args("begin_turn", args) {
            Ok(args) => args,
            Err(err) => return failure(err.to_string()),
        };
        self.touch();
        let this = Arc::clone(self);
        let client = client.to_owned();
        self.detached(async move {
            let mut state = this.state.lock().await;
            if state.closed {
                return failure(SHUTTING_DOWN.to_owned());
            }
            let closed = this.close(&mut state).await;
            state.groups += 1;
            let number = state.groups;
            let summary = match args.summary.as_deref().map(str::trim) {
                Some(summary) if !summary.is_empty() => format!("mcp: {client}: {summary}"),
                _ => format!("mcp: {client}: group"),
            };
            state.group = Some(Group {
                number,
                summary,
                open: None,
            });
            drop(state);
            this.watch_idle(number);
            let mut lines = closed.lines;
            lines.push(format!(
                "opened a group: the calls that follow are one turn until end_turn, the next begin_turn, undo, redo or log, or {} s without a call",
                this.idle_gap.as_secs()
            ));
            Outcome {
                text: lines.join("\n"),
                structured: serde_json::json!({ "closed_turn": closed.turn, "group_open": true }),
                is_error: false,
            }
        })
        .await
    }

    /// `end_turn`: closes the open group.
    pub async fn end(self: &Arc<Self>, args: serde_json::Value) -> Outcome {
        if let Err(err) = parse_args::<NoArgs>("end_turn", args) {
            return failure(err.to_string());
        }
        let this = Arc::clone(self);
        self.detached(async move {
            let mut state = this.state.lock().await;
            let had_group = state.group.is_some();
            let closed = this.close(&mut state).await;
            let mut lines = closed.lines;
            if !had_group {
                lines.push("no group was open; each call is its own turn".to_owned());
            }
            Outcome {
                text: lines.join("\n"),
                structured: serde_json::json!({ "turn": closed.turn, "changes": closed.changes, "group_open": false }),
                is_error: false,
            }
        })
        .await
    }

    /// `undo` and `redo`: close the open group, then restore as `shiro undo` and `shiro redo`.
    pub async fn restore(self: &Arc<Self>, way: Way, args: serde_json::Value) -> Outcome {
        let name = match way {
            Way::Undo => "undo",
            Way::Redo => "redo",
        };
        let args: RestoreToolArgs = match parse_args(name, args) {
            Ok(args) => args,
            Err(err) => return failure(err.to_string()),
        };
        self.touch();
        let this = Arc::clone(self);
        self.detached(async move {
            let mut state = this.state.lock().await;
            if state.closed {
                return failure(SHUTTING_DOWN.to_owned());
            }
            let closed = this.close(&mut state).await;
            let restore = RestoreArgs {
                dry_run: args.dry_run,
                force: args.force,
                abandon: false,
            };
            let mut outcome = match headless::restore(&this.ctx, way, &restore).await {
                Ok(report) => {
                    let refused = report.exit != 0;
                    let mut outcome = from_report(Ok(report));
                    outcome.structured = serde_json::json!({
                        "direction": name,
                        "dry_run": args.dry_run,
                        "would_be_refused": refused,
                        "notices": outcome.structured["notices"].clone(),
                    });
                    outcome
                }
                Err(err) => restore_failure(&err, name),
            };
            if !closed.lines.is_empty() {
                outcome.text = format!("{}\n{}", closed.lines.join("\n"), outcome.text);
            }
            outcome
        })
        .await
    }

    /// `log`: closes the open group, then lists the turns as `shiro log` does; the
    /// structured content is `shiro log --json`'s.
    pub async fn log(self: &Arc<Self>, args: serde_json::Value) -> Outcome {
        if let Err(err) = parse_args::<NoArgs>("log", args) {
            return failure(err.to_string());
        }
        let this = Arc::clone(self);
        self.detached(async move {
            let mut state = this.state.lock().await;
            let closed = this.close(&mut state).await;
            let text = match headless::log(&this.ctx, false).await {
                Ok(report) => report.stdout,
                Err(err) => return failure(headless::error_text(&err)),
            };
            let json = match headless::log(&this.ctx, true).await {
                Ok(report) => serde_json::from_str(&report.stdout).unwrap_or_default(),
                Err(err) => return failure(headless::error_text(&err)),
            };
            let mut lines = closed.lines;
            lines.push(text);
            Outcome {
                text: lines.join("\n"),
                structured: json,
                is_error: false,
            }
        })
        .await
    }

    /// Waits for the call under way, finishes the open group's turn, and refuses every
    /// call after it. Returns what a person should read.
    pub async fn shutdown(&self) -> Vec<String> {
        let mut state = self.state.lock().await;
        state.closed = true;
        self.close(&mut state).await.lines
    }

    /// Closes the open group: finishes its turn, if it began one.
    async fn close(&self, state: &mut State) -> Closed {
        let Some(group) = state.group.take() else {
            return Closed::default();
        };
        let Some(open) = group.open else {
            return Closed {
                lines: vec![
                    "closed the group, which changed nothing; no turn was recorded".to_owned(),
                ],
                ..Closed::default()
            };
        };
        let mut closed = match open.recording.finish_turn().await {
            Ok(Some(turn)) => Closed {
                turn: Some(turn),
                lines: vec![format!(
                    "closed the group as turn {turn} {:?} (undo reverts it)",
                    group.summary
                )],
                changes: open.changes,
            },
            Ok(None) => Closed {
                lines: vec![
                    "closed the group, which changed nothing; no turn was recorded".to_owned(),
                ],
                ..Closed::default()
            },
            Err(err) => Closed {
                lines: vec![format!(
                    "closing the group failed: {err}; the undo log's in-flight record keeps what it changed, and the next call recovers it as an undoable turn"
                )],
                ..Closed::default()
            },
        };
        closed.lines.extend(store_notices(&open.store));
        closed
    }

    /// Closes group `number` once no call has started or ended for the idle gap.
    fn watch_idle(self: &Arc<Self>, number: u64) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let seen = this.activity.load(Ordering::SeqCst);
                tokio::time::sleep(this.idle_gap).await;
                let mut state = this.state.lock().await;
                if state
                    .group
                    .as_ref()
                    .is_none_or(|group| group.number != number)
                {
                    return;
                }
                if this.activity.load(Ordering::SeqCst) == seen {
                    this.close(&mut state).await;
                    return;
                }
            }
        });
    }

    /// Whether a changing call, a restore or the closing of a group is under way.
    pub fn busy(&self) -> bool {
        self.state.try_lock().is_err()
    }

    fn touch(&self) {
        self.activity.fetch_add(1, Ordering::SeqCst);
    }
}

const SHUTTING_DOWN: &str = "the server is shutting down; nothing was changed";

/// A failed call's outcome.
fn failure(text: String) -> Outcome {
    Outcome {
        structured: serde_json::json!({ "error": text }),
        text,
        is_error: true,
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
            let mut outcome = failure(with_lines(text, &notices));
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
    let mut outcome = failure(with_lines(headless::error_text(inner), &notices));
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

/// `text` with each of `lines` after it on a line of its own.
fn with_lines(mut text: String, lines: &[String]) -> String {
    for line in lines {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
    }
    text
}

/// The store's notices, as lines.
fn store_notices(store: &UndoStore) -> Vec<String> {
    store
        .take_notices()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// What a call is about, for its turn's summary: ` PATH`, or ` COMMAND` for bash (cut to a
/// line of 60 characters); nothing when the arguments name neither.
fn brief(args: &serde_json::Value) -> String {
    const MAX: usize = 60;
    let text = ["path", "file_path", "filePath", "command"]
        .iter()
        .find_map(|key| args.get(key).and_then(serde_json::Value::as_str));
    let Some(text) = text else {
        return String::new();
    };
    let line = text.lines().next().unwrap_or("");
    let mut brief: String = line.chars().take(MAX).collect();
    if brief.len() < text.len() {
        brief.push('…');
    }
    format!(" {brief}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn briefs_name_the_path_or_the_command() {
        assert_eq!(brief(&serde_json::json!({"path": "src/a.rs"})), " src/a.rs");
        assert_eq!(brief(&serde_json::json!({"command": "ls\nrm x"})), " ls…");
        let long = "x".repeat(70);
        assert_eq!(
            brief(&serde_json::json!({ "command": long })),
            format!(" {}…", "x".repeat(60))
        );
        assert_eq!(brief(&serde_json::json!({"patch": "…"})), "");
    }
}
