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
//! Which runs first is not decided here: the handler starts each call in the order the
//! server received it (see `super::order`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use shiro_tools::capture::Background;
use shiro_tools::{Change, FsMutator, Tool, parse_args};
use shiro_undo::{Recording, TurnId, TurnStart, UndoStore};
use tokio::sync::Mutex;

use super::cancel::{CANCELLED_BEFORE_START, Cancelled, StartUnlessCancelled};
use super::{Outcome, Way, Workspace};

/// Arguments of `redo`.
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

/// Arguments of `undo`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoToolArgs {
    /// Change nothing: show what would change, as a diff, and any conflicts.
    #[serde(default, alias = "dryRun")]
    pub dry_run: bool,
    /// Overwrite files that changed since the turn (without it, the restore is refused).
    #[serde(default)]
    pub force: bool,
    /// Rewind to before this turn (its number in `log`): it and its session's later turns.
    #[serde(default)]
    pub to: Option<u64>,
    /// Revert this turn alone (its number in `log`), as a new turn, keeping later changes.
    #[serde(default)]
    pub turn: Option<u64>,
}

/// What an `undo` or `redo` call asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restore {
    /// Change nothing; show the diff.
    pub dry_run: bool,
    /// Overwrite later changes.
    pub force: bool,
    /// Undo only: rewind to before this turn.
    pub to: Option<u64>,
    /// Undo only: revert this turn alone, as a new turn.
    pub turn: Option<u64>,
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

/// The turns of one server.
pub struct Turns<W> {
    workspace: W,
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

impl<W> std::fmt::Debug for Turns<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("idle_gap", &self.idle_gap)
            .finish_non_exhaustive()
    }
}

impl<W: Workspace> Turns<W> {
    /// The turns of a server working in `workspace`, whose groups close after `idle_gap`
    /// without a call.
    pub fn new(workspace: W, idle_gap: Duration) -> Self {
        Self {
            workspace,
            idle_gap,
            state: Mutex::new(State::default()),
            activity: AtomicU64::new(0),
        }
    }

    /// shiro's tools, `bash` as configured, in the order a model is shown them.
    pub fn tools(&self) -> Vec<Box<dyn Tool>> {
        self.workspace.tools()
    }

    /// A registry of background commands for one client's session (see
    /// [`Workspace::session_background`]).
    pub fn session_background(&self) -> Option<Background> {
        self.workspace.session_background()
    }

    /// The tool called `name` for one call that `stop` stops (the client cancelled it, or a
    /// signal came): for `bash`, a running command is then killed, and what it changed is
    /// still recorded; the other tools finish quickly. With `background`, the background
    /// commands are that registry's (see [`Workspace::tool`]).
    pub fn tool_stopped_by(
        &self,
        name: &str,
        stop: tokio::sync::watch::Receiver<u64>,
        background: Option<&Arc<Background>>,
    ) -> Option<Box<dyn Tool>> {
        self.workspace.tool(name, Some(stop), background)
    }

    /// A stop for one call: once `began` has resolved (the tool's call began), it changes
    /// when `cancelled` resolves (the client's cancellation) or a signal asks to stop, or
    /// has done so since the stop was made. Drop the handle's task (abort it) once the call
    /// is over.
    pub fn call_stop(
        &self,
        began: impl Future<Output = ()> + Send + 'static,
        cancelled: impl Future<Output = ()> + Send + 'static,
    ) -> (
        tokio::sync::watch::Receiver<u64>,
        tokio::task::JoinHandle<()>,
    ) {
        let (stop, receiver) = tokio::sync::watch::channel(0u64);
        let mut signals = self.workspace.stops();
        let forward = tokio::spawn(async move {
            // `bash` counts a change of its stop only from its call's start: one before it
            // would be forgotten (see `super::cancel`).
            began.await;
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
    /// tools run outside any turn; mutating ones one at a time, each as its own turn or as
    /// part of the open group. Once `cancelled` is set, the call starts nothing it has not
    /// started yet (see `super::cancel`).
    pub async fn call(
        self: &Arc<Self>,
        client: &str,
        tool: Box<dyn Tool>,
        args: serde_json::Value,
        cancelled: Cancelled,
    ) -> Outcome {
        self.touch();
        let tool = StartUnlessCancelled::new(tool, cancelled.clone());
        let outcome = if tool.is_mutating() {
            let summary = format!("mcp: {client}: {}{}", tool.name(), brief(&args));
            let this = Arc::clone(self);
            self.detached(async move { this.call_mutating(tool, args, summary, cancelled).await })
                .await
        } else {
            match self.workspace.jail() {
                Ok(jail) => match tool.call(&jail, args).await {
                    Ok(output) => Outcome {
                        text: output.text,
                        structured: serde_json::json!({ "turn": null, "changes": [] }),
                        is_error: false,
                    },
                    Err(err) => failure(err.to_string()),
                },
                Err(err) => failure(err),
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
        tool: StartUnlessCancelled,
        args: serde_json::Value,
        summary: String,
        cancelled: Cancelled,
    ) -> Outcome {
        let mut state = self.state.lock().await;
        if state.closed {
            return failure(SHUTTING_DOWN.to_owned());
        }
        // Cancelled while it waited for the lock: no turn is begun for it. (The tool checks
        // again once the workspace has begun the turn, as it is called.)
        if cancelled.is_set() {
            return failure(CANCELLED_BEFORE_START.to_owned());
        }
        // The lock is held through the call, so that shutting down waits for it.
        let Some(group) = state.group.as_mut() else {
            return self.workspace.run_as_turn(&tool, args, &summary).await;
        };
        if group.open.is_none() {
            match self.open_turn(&group.summary).await {
                Ok(open) => group.open = Some(open),
                Err(err) => return failure(err),
            }
        }
        let Some(open) = group.open.as_mut() else {
            return failure("the group's turn is not open".to_owned());
        };
        let called = self
            .workspace
            .call_in_turn(&tool, &open.recording, args)
            .await;
        let (result, notices) = match called {
            Ok(called) => called,
            Err(err) => return failure(format!("{err}; nothing was run")),
        };
        let mut lines = notices;
        lines.extend(store_notices(&open.store));
        match result {
            Ok(output) => {
                open.changes.extend(output.changes.iter().cloned());
                // A call that changed nothing names no turn, in a group too: the group may
                // end up recording nothing.
                let turn = (!output.changes.is_empty()).then_some(open.turn);
                Outcome {
                    text: with_lines(output.text, &lines),
                    structured: serde_json::json!({
                        "turn": turn,
                        "group_open": true,
                        "changes": output.changes,
                        "notices": lines,
                    }),
                    is_error: false,
                }
            }
            Err(err) => {
                // A failure may have changed something before it (its text says): the
                // group's turn holds it if so.
                let mut outcome = failure(with_lines(err.to_string(), &lines));
                outcome.structured["turn"] = serde_json::json!(open.turn);
                outcome.structured["group_open"] = serde_json::json!(true);
                outcome
            }
        }
    }

    /// Begins the turn of a group: opens the store and takes its lock.
    async fn open_turn(&self, summary: &str) -> Result<Open, String> {
        let store = self.workspace.open_store().await?;
        if self.workspace.interrupted() {
            return Err(INTERRUPTED_BEFORE_START.to_owned());
        }
        let recording = store.recorder(self.workspace.jail()?);
        let turn = recording
            .begin_turn(TurnStart {
                summary: summary.to_owned(),
                history_marker: 0,
                session: None,
            })
            .await
            .map_err(|err| format!("{:#}", anyhow::Error::from(err)))?;
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
        let args = match way {
            Way::Undo => parse_args::<UndoToolArgs>(name, args).map(|args| Restore {
                dry_run: args.dry_run,
                force: args.force,
                to: args.to,
                turn: args.turn,
            }),
            Way::Redo => parse_args::<RestoreToolArgs>(name, args).map(|args| Restore {
                dry_run: args.dry_run,
                force: args.force,
                to: None,
                turn: None,
            }),
        };
        let args = args.and_then(|args| {
            if args.to.is_some() && args.turn.is_some() {
                return Err(shiro_tools::ToolError::InvalidArguments {
                    tool: "undo",
                    message: "give to (rewind) or turn (revert), not both".to_owned(),
                });
            }
            Ok(args)
        });
        let args = match args {
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
            let mut outcome = this.workspace.restore(way, args).await;
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
            let mut outcome = this.workspace.log().await;
            if !closed.lines.is_empty() {
                outcome.text = format!("{}\n{}", closed.lines.join("\n"), outcome.text);
            }
            outcome
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

/// What a call the server takes after a signal came says.
const INTERRUPTED_BEFORE_START: &str = "interrupted before the change began; nothing was changed";

/// A failed call's outcome.
fn failure(text: String) -> Outcome {
    Outcome::failure(text)
}

/// `text` with each of `lines` after it on a line of its own.
pub fn with_lines(mut text: String, lines: &[String]) -> String {
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
