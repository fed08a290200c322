//! Moving through a session's history: `/undo` and `/redo` (files and conversation),
//! `/rewind` to before any of its turns, `/fork`, and what a resumed session finds of its
//! turns that were undone or redone elsewhere since it last ran. The decisions are written
//! up in `docs/undo.md`, "Rewind, fork and revert".
//!
//! The conversation keeps what each rewind took away with the undo log's turns whose files
//! went back with it ([`crate::conversation::Undone`]); `/redo` brings back the top one,
//! both halves, so an undo, a rewind or a fork is always redone as it was made.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use shiro_tools::{Change, FsMutator};
use shiro_undo::{TurnId, TurnStart, TurnSummary, UndoError, UndoOptions, UndoOutcome, UndoStore};

use super::protocol::{RewindChoice, RewindScope, ToFront, TurnItem};
use super::session::{self, Session};
use super::turn::Agent;
use crate::headless::{self, error_text};

/// The store and the workspace a restore goes through, with the store's notices as lines;
/// or the text to show instead.
async fn open(agent: &Agent<'_>) -> Result<(UndoStore, FsMutator, String), String> {
    let ctx = agent.ctx;
    let (store, notices) = ctx
        .open_store()
        .await
        .map_err(|err| format!("error: {}", error_text(&err)))?;
    let workspace = ctx
        .workspace()
        .map_err(|err| format!("error: {}", error_text(&err)))?;
    let mut out = String::new();
    for notice in notices {
        let _ = writeln!(out, "note: {notice}");
    }
    Ok((store, workspace, out))
}

/// A refusal or failure of a restore, as the session shows it.
fn refusal(err: &UndoError, retry: &str) -> String {
    match err {
        UndoError::Conflict(report) => format!(
            "{report}\n(here: {retry} --dry-run shows the diff, {retry} --force overwrites)"
        ),
        other => other.to_string(),
    }
}

/// `/undo`: undoes the workspace's newest turn and, when it is one of this conversation's,
/// takes the conversation back to where the turn began. Either way `/redo` brings back what
/// it took.
pub(crate) async fn undo(agent: &mut Agent<'_>, options: UndoOptions) -> String {
    if !agent.ctx.has_store() {
        // Nothing was ever recorded here; opening the store would only make an empty one.
        return UndoError::NothingToUndo.to_string();
    }
    let (store, workspace, mut out) = match open(agent).await {
        Ok(opened) => opened,
        Err(text) => return text,
    };
    let outcome = match store.undo(&workspace, options).await {
        Ok(outcome) => outcome,
        Err(err) => return out + &refusal(&err, "/undo"),
    };
    out.push_str(&outcome.to_string());
    if options.dry_run {
        out.push_str(&dry_run_diff(agent, &store, &workspace, &outcome).await);
        return out;
    }
    let turns = vec![outcome.turn.id.0];
    let place = place(agent, &outcome.turn);
    if let Place::Here(marker) = place {
        out.push_str(&rewind_conversation(agent, marker, turns));
        return out;
    }
    // Files alone went back: still the next thing `/redo` brings back.
    let len = agent.history.len();
    if let Err(err) = agent.rewind(len, turns) {
        let _ = writeln!(out, "error: {}", error_text(&err));
    }
    let why = match place {
        Place::Rewound => "the conversation stays as it is: that turn's messages were taken back already, by a rewind of the conversation alone; /redo brings back the files, and a later /redo the messages".to_owned(),
        Place::Left => format!("the conversation stays as it is: that turn's messages are no longer in it ({LEFT})"),
        Place::Elsewhere | Place::Here(_) => {
            format!("{}; this conversation was not rewound", whose(&outcome.turn))
        }
    };
    let _ = writeln!(out, "{why}");
    out
}

/// `/undo N`: turn N of the undo log reverted alone, as a new turn of this session, keeping
/// every later change; the conversation is kept, and the model is told in a note (a
/// prompt of its own, which the revert's turn starts, so rewinding past it takes both).
pub(crate) async fn revert(agent: &mut Agent<'_>, id: u64, dry_run: bool) -> String {
    if !agent.ctx.has_store() {
        return UndoError::NoTurnToRevert {
            id: TurnId(id),
            undone: false,
        }
        .to_string();
    }
    let (store, workspace, mut out) = match open(agent).await {
        Ok(opened) => opened,
        Err(text) => return text,
    };
    let id = TurnId(id);
    if dry_run {
        match store.revert_dry_run(&workspace, id).await {
            Ok(outcome) => {
                out.push_str(&outcome.to_string());
                out.push_str(&headless::revert_diff(&outcome, agent.printer.color()));
            }
            Err(err) => out.push_str(&err.to_string()),
        }
        return out;
    }
    let marker = agent.history.len();
    let start = TurnStart {
        summary: headless::revert_summary(&store, id),
        history_marker: marker as u64,
        session: Some(agent.session.id().to_owned()),
    };
    let outcome = match store.revert(&workspace, id, start).await {
        Ok(outcome) => outcome,
        Err(err) => return out + &err.to_string(),
    };
    out.push_str(&outcome.to_string());
    let Some(new) = &outcome.turn else {
        return out;
    };
    let paths: Vec<String> = (outcome.paths.iter())
        .filter(|path| path.action != shiro_undo::Action::Unchanged)
        .map(|path| path.path.to_string())
        .collect();
    let note = format!(
        "[shiro] The user reverted turn {} ({:?}) on its own: its changes to {} were taken out of the files, and everything done since was kept. Read those files again before relying on what that turn did.",
        outcome.reverted.id,
        outcome.reverted.summary,
        paths.join(", ")
    );
    let noted = agent
        .push_prompt(&note)
        .and_then(|()| agent.note_turn(marker, new.id.0));
    match noted {
        Ok(()) => {
            let _ = writeln!(
                out,
                "the model is told in a note; /undo takes the revert back (turn {})",
                new.id
            );
        }
        Err(err) => {
            let _ = writeln!(out, "error: {}", error_text(&err));
        }
    }
    out
}

/// Where a turn of the undo log stands in this conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Its prompt is in the conversation, at this position: the conversation goes back
    /// there with its files. A fork's conversation holds its parent's turns from before the
    /// fork.
    Here(usize),
    /// Its prompt is among the messages a rewind took away, which a redo brings back.
    Rewound,
    /// A turn of this session whose messages left the conversation: they were taken back,
    /// and a new prompt was sent since (a redo of its files alone does not bring them back).
    Left,
    /// Another session's turn, or a headless command's: this conversation never had it.
    Elsewhere,
}

/// Why a turn of [`Place::Left`] has no messages to take back or bring back.
const LEFT: &str = "a new prompt was sent after they were taken back";

/// Where `turn` stands in this conversation. Only the prompt that started it gives a turn a
/// place: a turn of this session redone without its messages has none, so its undo must
/// not cut the messages sent since.
fn place(agent: &Agent<'_>, turn: &TurnSummary) -> Place {
    let marker = usize::try_from(turn.history_marker).unwrap_or(usize::MAX);
    if marker < agent.history.len() && agent.history.prompt(marker).turn == Some(turn.id.0) {
        Place::Here(marker)
    } else if agent.history.rewound_turn(turn.id.0) {
        Place::Rewound
    } else if turn.session.as_deref() == Some(agent.session.id()) {
        Place::Left
    } else {
        Place::Elsewhere
    }
}

/// `that turn belongs to session S` or `that turn was a headless command`.
fn whose(turn: &TurnSummary) -> String {
    match &turn.session {
        Some(session) => format!("that turn belongs to session {session}"),
        None => "that turn was a headless command".to_owned(),
    }
}

/// Takes the conversation back to `marker` (the files of `turns` went back with it), and
/// says so.
fn rewind_conversation(agent: &mut Agent<'_>, marker: usize, turns: Vec<u64>) -> String {
    let mut out = String::new();
    let dropped = agent.history.len().saturating_sub(marker);
    let compactions = agent.history.compactions().len();
    if let Err(err) = agent.rewind(marker, turns) {
        let _ = writeln!(out, "error: {}", error_text(&err));
        return out;
    }
    let _ = writeln!(
        out,
        "rewound the conversation by {dropped} messages to before that turn"
    );
    let undone = compactions - agent.history.compactions().len();
    if undone > 0 {
        let _ = writeln!(
            out,
            "{}, so the model sees the messages {} had replaced again",
            if undone == 1 {
                "a compaction made since then is undone too".to_owned()
            } else {
                format!("the {undone} compactions made since then are undone too")
            },
            if undone == 1 { "it" } else { "they" }
        );
    }
    out
}

/// The diff a dry run shows, or the error that stopped it.
async fn dry_run_diff(
    agent: &Agent<'_>,
    store: &UndoStore,
    workspace: &FsMutator,
    outcome: &UndoOutcome,
) -> String {
    match headless::dry_run_diff(store, workspace, outcome, agent.printer.color()).await {
        Ok(diff) => diff,
        Err(err) => format!("error: {}\n", error_text(&err)),
    }
}

/// `/redo`: brings back what the last undo, rewind or fork of this conversation took, files
/// and conversation; with nothing of its own to bring back, the workspace's turn undone
/// last (its files).
pub(crate) async fn redo(agent: &mut Agent<'_>, options: UndoOptions) -> String {
    let next = agent
        .history
        .next_redo()
        .map(|undone| (undone.turns.clone(), undone.len()));
    let Some((turns, messages)) = next else {
        return redo_newest(agent, options).await;
    };
    let mut out = String::new();
    let mut outcomes = Vec::new();
    if !turns.is_empty() {
        let (store, workspace, notices) = match open(agent).await {
            Ok(opened) => opened,
            Err(text) => return text,
        };
        out.push_str(&notices);
        match redo_turns(&store, &workspace, &turns, options).await {
            Ok((text, redone)) => {
                out.push_str(&text);
                outcomes = redone;
            }
            Err(text) => return out + &text,
        }
        if options.dry_run {
            return out;
        }
    } else if options.dry_run {
        let _ = writeln!(
            out,
            "would bring back {messages} messages of the conversation; no file changes"
        );
        return out;
    }
    match agent.redo_conversation() {
        Ok(Some(undone)) if !undone.is_empty() => {
            let _ = writeln!(
                out,
                "the conversation is back{}: {} messages{}",
                if turns.is_empty() { "" } else { " too" },
                undone.len(),
                if turns.is_empty() {
                    " (no file changes)"
                } else {
                    ""
                }
            );
        }
        Ok(_) => {}
        Err(err) => {
            let _ = writeln!(out, "error: {}", error_text(&err));
        }
    }
    // Said once the conversation is back: a turn whose messages came back with its files
    // needs no word.
    for outcome in &outcomes {
        if let Some(note) = files_back(agent, &outcome.turn) {
            let _ = writeln!(out, "{note}");
        }
    }
    out
}

/// What a redo of `turn`'s files says of its messages, when they did not come back with
/// them: none when the conversation holds them.
fn files_back(agent: &Agent<'_>, turn: &TurnSummary) -> Option<String> {
    match place(agent, turn) {
        Place::Here(_) => None,
        Place::Rewound => Some(format!(
            "the files of turn {} are back; the conversation stays as it is: that turn's messages were taken back on their own, and a later /redo brings them back",
            turn.id
        )),
        Place::Left => Some(format!(
            "the files of turn {} are back; the conversation stays as it is: that turn's messages are no longer in it ({LEFT})",
            turn.id
        )),
        Place::Elsewhere => Some(format!(
            "the files are back; {}, and this conversation never had it",
            whose(turn)
        )),
    }
}

/// Redoes the turns `ids` that are still undone, each with the turns undone with it, and
/// says what it did; refuses (changing nothing more) at the first that cannot be.
async fn redo_turns(
    store: &UndoStore,
    workspace: &FsMutator,
    ids: &[u64],
    options: UndoOptions,
) -> Result<(String, Vec<UndoOutcome>), String> {
    let mut out = String::new();
    let mut outcomes = Vec::new();
    loop {
        let undone: Vec<u64> = match store.redo_log() {
            Ok(turns) => turns.iter().map(|turn| turn.id.0).collect(),
            Err(err) => return Err(format!("{out}{err}")),
        };
        let Some(id) = ids.iter().find(|id| undone.contains(id)) else {
            break;
        };
        match store.redo_turn(workspace, TurnId(*id), options).await {
            Ok(outcome) => {
                out.push_str(&outcome.to_string());
                outcomes.push(outcome);
            }
            Err(err) => return Err(format!("{out}{}", refusal(&err, "/redo"))),
        }
        if options.dry_run {
            // The next would be planned on files this one has not changed.
            break;
        }
    }
    if out.is_empty() {
        // Redone elsewhere (`shiro redo`) already; the conversation can follow.
        let names: Vec<String> = ids.iter().map(|id| format!("#{id}")).collect();
        let _ = writeln!(out, "the files of {} are back already", names.join(", "));
    }
    Ok((out, outcomes))
}

/// `/redo` with nothing of this conversation's to bring back: the workspace's turn undone
/// last, whoever undid it.
async fn redo_newest(agent: &mut Agent<'_>, options: UndoOptions) -> String {
    if !agent.ctx.has_store() {
        return UndoError::NothingToRedo.to_string();
    }
    let (store, workspace, mut out) = match open(agent).await {
        Ok(opened) => opened,
        Err(text) => return text,
    };
    let outcome = match store.redo(&workspace, options).await {
        Ok(outcome) => outcome,
        Err(err) => return out + &refusal(&err, "/redo"),
    };
    out.push_str(&outcome.to_string());
    if options.dry_run {
        out.push_str(&dry_run_diff(agent, &store, &workspace, &outcome).await);
        return out;
    }
    let note = files_back(agent, &outcome.turn).unwrap_or_else(|| {
        "the files are back; this conversation holds that turn's messages already".to_owned()
    });
    let _ = writeln!(out, "{note}");
    out
}

/// The session's turns, newest first, as the rewind picker and `/rewind` show them.
pub(crate) async fn turn_items(agent: &Agent<'_>) -> Vec<TurnItem> {
    let (undo, redo) = logs(agent).await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let prompts = agent.history.prompt_list();
    let mut items: Vec<TurnItem> = (prompts.iter().enumerate())
        .map(|(i, (_, message, prompt))| {
            let summary = prompt
                .turn
                .and_then(|id| undo.iter().chain(&redo).find(|t| t.id.0 == id));
            let time = prompt.time.or(summary.map(|turn| turn.time));
            let blocked = match (prompt.turn, summary) {
                (None, _) => None,
                (Some(_), None) => Some("left the undo log".to_owned()),
                (Some(id), Some(turn)) => match &turn.damage {
                    Some(_) => Some("damaged".to_owned()),
                    None if redo.iter().any(|t| t.id.0 == id) => Some("undone".to_owned()),
                    None => None,
                },
            };
            TurnItem {
                number: i + 1,
                prompt: session::first_line(&message.content, session::SUMMARY_CHARS),
                ago: time.map(|time| ago(now, time)).unwrap_or_default(),
                changes: summary.map_or_else(|| "no file changes".to_owned(), changes_text),
                blocked,
            }
        })
        .collect();
    items.reverse();
    items
}

/// The workspace's undoable and undone turns; none when there is no store (or it cannot be
/// read: the picker still offers the conversation).
async fn logs(agent: &Agent<'_>) -> (Vec<TurnSummary>, Vec<TurnSummary>) {
    if !agent.ctx.has_store() {
        return (Vec::new(), Vec::new());
    }
    match agent.ctx.open_store().await {
        Ok((store, _)) => (
            store.log().unwrap_or_default(),
            store.redo_log().unwrap_or_default(),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    }
}

/// `3 M, 1 A, 1 D, 1 R, bash`: a turn's changes counted by kind.
pub fn changes_text(turn: &TurnSummary) -> String {
    let mut counts = [0usize; 4];
    for change in &turn.changes {
        let slot = match change {
            Change::Modified { .. } => 0,
            Change::Added { .. } => 1,
            Change::Deleted { .. } => 2,
            Change::Moved { .. } => 3,
        };
        counts[slot] += 1;
    }
    let mut parts: Vec<String> = (counts.iter().zip(["M", "A", "D", "R"]))
        .filter(|(count, _)| **count > 0)
        .map(|(count, letter)| format!("{count} {letter}"))
        .collect();
    if turn.ran_bash {
        parts.push("bash".to_owned());
    }
    if parts.is_empty() {
        "no file changes".to_owned()
    } else {
        parts.join(", ")
    }
}

/// `just now`, `5 min ago`, `3 h ago`, `2 days ago`.
pub fn ago(now: u64, then: u64) -> String {
    let secs = now.saturating_sub(then);
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ if secs < 2 * 86_400 => "1 day ago".to_owned(),
        _ => format!("{} days ago", secs / 86_400),
    }
}

/// `/rewind`: with a terminal UI, the picker; in the line interface, the list of turns, or
/// with `N [both|conversation|files] [--dry-run] [--force]` the rewind to before turn N.
pub(crate) async fn rewind_command(agent: &mut Agent<'_>, args: &str) -> String {
    let mut words = args.split_whitespace();
    let Some(number) = words.next() else {
        if agent.printer.has_ui() {
            return pick(agent).await;
        }
        return list_text(&turn_items(agent).await);
    };
    let Ok(number) = number.parse::<usize>() else {
        return format!("/rewind takes the number of a turn (/rewind lists them), not {number:?}");
    };
    let mut scope = None;
    let mut options = UndoOptions::default();
    for word in words {
        match word {
            "--force" => options.force = true,
            "--dry-run" => options.dry_run = true,
            _ if word.starts_with('-') => {
                return format!("unknown option {word}: /rewind N takes --dry-run or --force");
            }
            _ => match (RewindScope::parse(word), scope) {
                (Some(parsed), None) => scope = Some(parsed),
                (Some(_), Some(_)) => {
                    return format!(
                        "unexpected {word:?}: /rewind N [both|conversation|files] [--dry-run] [--force]"
                    );
                }
                (None, _) => {
                    return format!(
                        "unknown part {word:?}: /rewind N takes both (the default), conversation or files"
                    );
                }
            },
        }
    }
    let scope = scope.unwrap_or_default();
    if scope == RewindScope::Conversation && (options.force || options.dry_run) {
        return "/rewind N conversation changes no file: --dry-run and --force go with both or files"
            .to_owned();
    }
    rewind(agent, RewindChoice { number, scope }, options).await
}

/// Asks the front end to pick a turn, then rewinds to it. Nothing is shown when the person
/// picks none.
pub(crate) async fn pick(agent: &mut Agent<'_>) -> String {
    let turns = turn_items(agent).await;
    if turns.is_empty() {
        return "no turns to rewind to: this conversation has no prompt yet".to_owned();
    }
    let (reply, chosen) = std::sync::mpsc::channel();
    agent.printer.ui(ToFront::PickTurn { turns, reply });
    // The UI answers at once when it cannot show a picker; waiting blocks this thread as a
    // prompt does.
    match chosen.recv().ok().flatten() {
        Some(choice) => rewind(agent, choice, UndoOptions::default()).await,
        None => String::new(),
    }
}

/// The numbered list `/rewind` shows in the line interface.
pub fn list_text(items: &[TurnItem]) -> String {
    if items.is_empty() {
        return "no turns to rewind to: this conversation has no prompt yet".to_owned();
    }
    let mut out = String::from(
        "this session's turns, newest first (/rewind N goes back to before turn N; add conversation or files to take back only that):\n",
    );
    for item in items {
        let blocked = item
            .blocked
            .as_deref()
            .map(|why| format!(" [files: {why}]"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:>4}  {:<12}  {}  ({}){blocked}",
            item.number, item.ago, item.prompt, item.changes
        );
    }
    out
}

/// Rewinds to before turn `choice.number` of this conversation: its files (each turn of the
/// conversation from that one on, as one restore), its conversation, or both. The turn's
/// prompt is put back in the input box.
pub(crate) async fn rewind(
    agent: &mut Agent<'_>,
    choice: RewindChoice,
    options: UndoOptions,
) -> String {
    let prompts = agent.history.prompt_list();
    let Some((index, message, _)) = choice
        .number
        .checked_sub(1)
        .and_then(|i| prompts.get(i).cloned())
    else {
        if prompts.is_empty() {
            return format!(
                "no turn {} in this conversation: it has no prompt yet",
                choice.number
            );
        }
        return format!(
            "no turn {} in this conversation: it has {} (/rewind lists them)",
            choice.number,
            prompts.len()
        );
    };
    let prompt = message.content.clone();
    let later: Vec<u64> = prompts
        .iter()
        .filter(|(at, _, _)| *at >= index)
        .filter_map(|(_, _, facts)| facts.turn)
        .collect();
    let mut out = String::new();
    let mut rewound = Vec::new();
    if choice.scope != RewindScope::Conversation && !later.is_empty() {
        let retry = Retry {
            command: format!("/rewind {}", choice.number),
            alone: Some(format!(
                "/rewind {} conversation takes back the conversation alone",
                choice.number
            )),
        };
        match rewind_files(agent, &later, options, &retry).await {
            Ok((text, ids)) => {
                out.push_str(&text);
                rewound = ids;
            }
            Err(text) => return text,
        }
    }
    if options.dry_run {
        if rewound.is_empty() {
            out.push_str("no file changes to take back: the turns from that one on changed no file that can still be undone\n");
        }
        let conversation = match choice.scope {
            RewindScope::Files => "the conversation would stay as it is".to_owned(),
            RewindScope::Both | RewindScope::Conversation => format!(
                "would rewind the conversation by {} messages to before turn {}",
                agent.history.len() - index,
                choice.number
            ),
        };
        let _ = writeln!(out, "{conversation}; a dry run changes nothing");
        return out;
    }
    match choice.scope {
        RewindScope::Files => {
            if rewound.is_empty() {
                out.push_str("no file changes to take back: the turns from that one on changed no file that can still be undone\n");
                return out;
            }
            let len = agent.history.len();
            if let Err(err) = agent.rewind(len, rewound) {
                let _ = writeln!(out, "error: {}", error_text(&err));
            }
            out.push_str("the conversation stays as it is; /redo brings the files back\n");
        }
        RewindScope::Both | RewindScope::Conversation => {
            let dropped = agent.history.len() - index;
            if let Err(err) = agent.rewind(index, rewound) {
                let _ = writeln!(out, "error: {}", error_text(&err));
                return out;
            }
            let _ = writeln!(
                out,
                "rewound the conversation by {dropped} messages to before turn {}; its prompt is back in the input box, and /redo brings everything back",
                choice.number
            );
            agent.input.prefill(&prompt);
            agent.printer.ui(ToFront::Prefill(prompt));
        }
    }
    out
}

/// How a refused rewind of files says what to do instead.
struct Retry {
    /// The command that was refused, with its turn (`/rewind 2`), to retry with `--dry-run`
    /// or `--force`.
    command: String,
    /// What else there is, when there is something (`/rewind 2 conversation …`).
    alone: Option<String>,
}

impl Retry {
    /// The line that follows a refusal: `--force` and `--dry-run` when they would help,
    /// then the other way; empty when there is nothing to say.
    fn advice(&self, forceable: bool) -> String {
        let mut parts = Vec::new();
        if forceable {
            parts.push(format!(
                "here: {0} --dry-run shows the diff, {0} --force overwrites",
                self.command
            ));
        }
        parts.extend(self.alone.clone());
        if parts.is_empty() {
            String::new()
        } else {
            format!("\n({})", parts.join("; "))
        }
    }
}

/// Rewinds the files of `turns` (this conversation's, from the chosen one on) that are still
/// undoable, as one restore (with `options`: forced, or only planned, showing the diff); the
/// text to show and the turns it undid (or would undo). Refused, changing nothing, when one
/// of them can no longer be undone, saying how to `retry`.
async fn rewind_files(
    agent: &Agent<'_>,
    turns: &[u64],
    options: UndoOptions,
    retry: &Retry,
) -> Result<(String, Vec<u64>), String> {
    let (store, workspace, mut out) = open(agent).await?;
    let undoable: Vec<u64> = match store.log() {
        Ok(log) => log.iter().map(|turn| turn.id.0).collect(),
        Err(err) => return Err(format!("error: {err}")),
    };
    let undone: Vec<u64> = match store.redo_log() {
        Ok(log) => log.iter().map(|turn| turn.id.0).collect(),
        Err(err) => return Err(format!("error: {err}")),
    };
    let gone: Vec<String> = (turns.iter())
        .filter(|id| !undoable.contains(id) && !undone.contains(id))
        .map(|id| format!("#{id}"))
        .collect();
    if !gone.is_empty() {
        return Err(format!(
            "the files cannot be rewound that far: turn {} left the undo log (it keeps the newest turns, [undo] depth); nothing was changed{}",
            gone.join(", "),
            retry.advice(false)
        ));
    }
    let ids: Vec<TurnId> = (turns.iter())
        .filter(|id| undoable.contains(id))
        .map(|id| TurnId(*id))
        .collect();
    if ids.is_empty() {
        return Ok((out, Vec::new()));
    }
    match store.rewind_turns(&workspace, &ids, options).await {
        Ok(outcome) => {
            out.push_str(&outcome.to_string());
            if options.dry_run {
                out.push_str(&dry_run_diff(agent, &store, &workspace, &outcome).await);
            }
            Ok((out, ids.iter().map(|id| id.0).collect()))
        }
        Err(UndoError::Conflict(report)) => {
            Err(format!("{out}{report}{}", retry.advice(report.forceable())))
        }
        Err(err) => Err(format!("{out}{err}")),
    }
}

/// `/fork [N] [--dry-run] [--force]`: a new session whose conversation is this one's before
/// turn N (all of it without N), which the session goes on in. With N, the files of the
/// turns from N on are rewound first, as one restore (refused: no fork; planned only with
/// `--dry-run`, which makes no fork). This session's file is left as it is;
/// resumed later, it offers to bring its files back.
pub(crate) async fn fork(agent: &mut Agent<'_>, args: &str) -> String {
    if let Some(why) = agent.session.unsaved_reason() {
        return format!("cannot fork: this session is not saved ({why})");
    }
    let prompts = agent.history.prompt_list();
    let mut number = None;
    let mut options = UndoOptions::default();
    for word in args.split_whitespace() {
        match word {
            "--force" => options.force = true,
            "--dry-run" => options.dry_run = true,
            _ if word.starts_with('-') => {
                return format!("unknown option {word}: /fork N takes --dry-run or --force");
            }
            _ => match word.parse::<usize>() {
                Ok(n) if number.is_none() && (1..=prompts.len()).contains(&n) => number = Some(n),
                _ if prompts.is_empty() => {
                    return "this conversation has no turn to fork before yet".to_owned();
                }
                _ => {
                    return format!(
                        "/fork takes the number of a turn, 1 to {} (/rewind lists them), or nothing to fork the whole conversation",
                        prompts.len()
                    );
                }
            },
        }
    }
    if number.is_none() && (options.force || options.dry_run) {
        return "/fork without N changes no file: --dry-run and --force go with /fork N".to_owned();
    }
    if number.is_none() && prompts.is_empty() {
        // A copy of nothing would be a session no list shows (see `session::list`).
        return "nothing to fork: this conversation has no prompt yet, so it is as new as a fork of it would be".to_owned();
    }
    let number = number.unwrap_or(prompts.len() + 1);
    let (index, prompt) = match prompts.get(number - 1) {
        Some((index, message, _)) => (*index, Some(message.content.clone())),
        None => (agent.history.len(), None),
    };
    let later: Vec<u64> = (prompts.iter())
        .filter(|(at, _, _)| *at >= index)
        .filter_map(|(_, _, facts)| facts.turn)
        .collect();
    let mut out = String::new();
    let mut rewound = Vec::new();
    if !later.is_empty() {
        let retry = Retry {
            command: format!("/fork {number}"),
            alone: None,
        };
        match rewind_files(agent, &later, options, &retry).await {
            Ok((text, ids)) => {
                out.push_str(&text);
                rewound = ids;
            }
            Err(text) => return format!("{text}\nno fork was made"),
        }
    }
    if options.dry_run {
        if rewound.is_empty() {
            out.push_str("no file changes to take back: the turns from that one on changed no file that can still be undone\n");
        }
        out.push_str("no fork was made: a dry run changes nothing\n");
        return out;
    }
    let parent = agent.session.id().to_owned();
    let history = agent.history.before(index);
    let session = match Session::fork(&agent.ctx.state, &parent, number, &history) {
        Ok(session) => session,
        Err(err) => return format!("{out}error: cannot fork: {}", error_text(&err)),
    };
    agent.session = session;
    agent.history = history;
    agent.usage.context = None;
    let at = match prompt {
        Some(_) => format!("before its turn {number}"),
        None => "with its whole conversation".to_owned(),
    };
    let _ = writeln!(
        out,
        "forked session {} from {parent} {at}; this is the fork now. `shiro --resume {parent}` (or /resume) reopens the original{}",
        agent.session.id(),
        if later.is_empty() {
            ""
        } else {
            ", and offers to bring its files back"
        }
    );
    if let Some(prompt) = prompt {
        agent.input.prefill(&prompt);
        agent.printer.ui(ToFront::Prefill(prompt));
    }
    out
}

/// What a resumed session finds of its turns that were undone or redone elsewhere since it
/// last ran (by `shiro undo`/`redo` in a shell, `shiro undo --to`, or a fork that rewound
/// them): a redo done elsewhere brings the conversation back too; turns whose files were
/// undone elsewhere become the next thing `/redo` brings back. Returns what to tell the
/// person.
pub async fn reconcile(agent: &mut Agent<'_>) -> Vec<String> {
    let mut notices = Vec::new();
    if !agent.ctx.has_store() {
        return notices;
    }
    let (undo, redo) = logs(agent).await;
    let undoable: Vec<u64> = undo.iter().map(|turn| turn.id.0).collect();
    let undone: Vec<u64> = redo.iter().map(|turn| turn.id.0).collect();
    // Redone in a shell: the conversation follows.
    while let Some(next) = agent.history.next_redo() {
        let turns = next.turns.clone();
        if turns.is_empty() || !turns.iter().all(|id| undoable.contains(id)) {
            break;
        }
        match agent.redo_conversation() {
            Ok(Some(undone)) if !undone.is_empty() => notices.push(format!(
                "turn {} of this conversation was redone since it last ran; its messages are back too",
                ids_text(&turns)
            )),
            // Its files alone had gone back: no message comes back.
            Ok(_) => notices.push(format!(
                "the files of turn {} were redone since this session last ran",
                ids_text(&turns)
            )),
            Err(err) => {
                notices.push(format!("error: {}", error_text(&err)));
                return notices;
            }
        }
    }
    // Undone elsewhere: offered to /redo.
    let parked: Vec<u64> = (agent.history.prompt_list().iter())
        .filter_map(|(_, _, facts)| facts.turn)
        .filter(|id| undone.contains(id))
        .collect();
    let offered = agent
        .history
        .next_redo()
        .is_some_and(|next| parked.iter().all(|id| next.turns.contains(id)));
    if !parked.is_empty() && !offered {
        let len = agent.history.len();
        match agent.rewind(len, parked.clone()) {
            Ok(()) => notices.push(format!(
                "the files of turn {} of this conversation were undone since it last ran (by a fork, a rewind or `shiro undo`), so they are not where the conversation left them; /redo brings them back (it refuses if those files changed since)",
                ids_text(&parked)
            )),
            Err(err) => notices.push(format!("error: {}", error_text(&err))),
        }
    }
    notices
}

/// `#3, #4`.
fn ids_text(ids: &[u64]) -> String {
    let names: Vec<String> = ids.iter().map(|id| format!("#{id}")).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::permissions::Mode;
    use crate::turn::tests::{agent, context, workspace};

    /// A turn of the replay script: one `write_file`, then the answer `done`.
    fn writes(path: &str, content: &str) -> [serde_json::Value; 2] {
        [
            json!({"text": "", "tool_calls": [
                {"name": "write_file", "arguments": {"path": path, "content": content}}]}),
            json!({"text": "done"}),
        ]
    }

    fn script(turns: &[(&str, &str)]) -> String {
        let responses: Vec<serde_json::Value> = turns
            .iter()
            .flat_map(|(path, content)| writes(path, content))
            .collect();
        json!({ "responses": responses }).to_string()
    }

    /// The workspace's files (its root only), with their contents.
    fn files(root: &std::path::Path) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = std::fs::read_dir(root)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(entry.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    }

    fn prompts(agent: &Agent<'_>) -> Vec<String> {
        (agent.history.prompt_list().iter())
            .map(|(_, message, _)| message.content.clone())
            .collect()
    }

    /// The conversation the session's file replays into.
    fn replayed(agent: &Agent<'_>, id: &str) -> crate::conversation::Conversation {
        session::load(&agent.ctx.state, Some(id)).unwrap().history
    }

    /// A rewind to before turn 2 of 3 takes back the files of turns 2 and 3 and the
    /// conversation from turn 2 on, as the session file records; a redo brings back both.
    #[tokio::test]
    async fn a_rewind_takes_back_files_and_conversation_and_a_redo_brings_both() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[("a.txt", "1\n"), ("b.txt", "2\n"), ("a.txt", "3\n")]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second", "third"] {
            agent.turn(prompt).await.unwrap();
        }
        let id = agent.session.id().to_owned();
        let whole = agent.history.clone();
        let after = files(&root);

        let items = turn_items(&agent).await;
        let shown: Vec<(usize, &str, &str)> = (items.iter())
            .map(|item| (item.number, item.prompt.as_str(), item.changes.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (3, "third", "1 M"),
                (2, "second", "1 A"),
                (1, "first", "1 A")
            ]
        );

        let text = rewind(
            &mut agent,
            RewindChoice {
                number: 2,
                scope: RewindScope::Both,
            },
            UndoOptions::default(),
        )
        .await;
        assert!(text.contains("rewound the conversation"), "{text}");
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);
        assert_eq!(replayed(&agent, &id), agent.history);

        let text = redo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("the conversation is back too"), "{text}");
        assert_eq!(files(&root), after);
        assert_eq!(agent.history, whole);
        assert_eq!(replayed(&agent, &id), whole);
    }

    /// The conversation alone, or the files alone, go back when asked; a redo brings back
    /// what went.
    #[tokio::test]
    async fn a_rewind_of_one_side_leaves_the_other() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[("a.txt", "1\n"), ("a.txt", "2\n")]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second"] {
            agent.turn(prompt).await.unwrap();
        }
        let id = agent.session.id().to_owned();
        let whole = agent.history.clone();
        let choice = |scope| RewindChoice { number: 2, scope };

        rewind(
            &mut agent,
            choice(RewindScope::Conversation),
            UndoOptions::default(),
        )
        .await;
        assert_eq!(files(&root), [("a.txt".to_owned(), "2\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);
        redo(&mut agent, UndoOptions::default()).await;
        assert_eq!(agent.history, whole);

        let text = rewind(
            &mut agent,
            choice(RewindScope::Files),
            UndoOptions::default(),
        )
        .await;
        assert!(text.contains("the conversation stays"), "{text}");
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first", "second"]);
        redo(&mut agent, UndoOptions::default()).await;
        assert_eq!(files(&root), [("a.txt".to_owned(), "2\n".to_owned())]);
        assert_eq!(agent.history, whole);
        assert_eq!(replayed(&agent, &id), whole);
    }

    /// A fork before turn 2 of 3 rewinds the files of turns 2 and 3 and goes on in a new
    /// session; the original, resumed, offers its files back, and `/redo` brings them back
    /// beside the fork's own work. Both transcripts replay.
    #[tokio::test]
    async fn a_fork_goes_on_apart_and_its_parent_brings_its_files_back() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[
            ("a.txt", "1\n"),
            ("b.txt", "2\n"),
            ("a.txt", "3\n"),
            ("c.txt", "fork\n"),
        ]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second", "third"] {
            agent.turn(prompt).await.unwrap();
        }
        let parent = agent.session.id().to_owned();
        let parent_history = agent.history.clone();

        let text = fork(&mut agent, "2").await;
        assert!(
            text.contains(&format!("from {parent} before its turn 2")),
            "{text}"
        );
        let child = agent.session.id().to_owned();
        assert_ne!(child, parent);
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);
        agent.turn("in the fork").await.unwrap();
        let child_history = agent.history.clone();

        // The parent's file is as it was.
        assert_eq!(replayed(&agent, &parent), parent_history);
        let listed = session::as_tree(&session::list(&ctx.state).unwrap());
        let tree: Vec<(String, usize, Option<usize>)> = (listed.into_iter())
            .map(|(s, depth)| (s.id, depth, s.forked_from.map(|(_, turn)| turn)))
            .collect();
        assert_eq!(
            tree,
            [(parent.clone(), 0, None), (child.clone(), 1, Some(2))]
        );

        let text = crate::resume_session(&mut agent, &parent).await.unwrap();
        assert!(text.contains("/redo brings them back"), "{text}");
        assert_eq!(prompts(&agent), ["first", "second", "third"]);
        let text = redo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("redid turn"), "{text}");
        assert_eq!(
            files(&root),
            [
                ("a.txt".to_owned(), "3\n".to_owned()),
                ("b.txt".to_owned(), "2\n".to_owned()),
                ("c.txt".to_owned(), "fork\n".to_owned()),
            ]
        );
        assert_eq!(agent.history.transcript(), parent_history.transcript());
        assert_eq!(replayed(&agent, &child), child_history);
        assert_eq!(
            replayed(&agent, &parent).transcript(),
            parent_history.transcript()
        );
    }

    /// `/undo 2` reverts turn 2 of 3 alone: the file keeps the changes of turns 1 and 3, the
    /// conversation stays and gains a note for the model, which `/undo` of the revert takes
    /// away with it.
    #[tokio::test]
    async fn undo_n_reverts_one_turn_keeps_the_rest_and_tells_the_model() {
        let (_dir, root) = workspace();
        std::fs::write(root.join("a.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let edit = |old: &str, new: &str| {
            [
                json!({"text": "", "tool_calls": [{"name": "edit_file", "arguments":
                    {"path": "a.txt", "old_string": old, "new_string": new}}]}),
                json!({"text": "done"}),
            ]
        };
        let responses: Vec<serde_json::Value> = [
            edit("one", "ONE"),
            edit("three", "THREE"),
            edit("five", "FIVE"),
        ]
        .concat();
        let script = json!({ "responses": responses }).to_string();
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second", "third"] {
            agent.turn(prompt).await.unwrap();
        }
        let before = agent.history.clone();
        let read = || std::fs::read_to_string(root.join("a.txt")).unwrap();

        let text = revert(&mut agent, 2, true).await;
        assert!(text.starts_with("would revert turn #2"), "{text}");
        assert!(text.contains("-THREE\n+three"), "{text}");
        assert_eq!(
            read(),
            "ONE\ntwo\nTHREE\nfour\nFIVE\n",
            "a dry run changes nothing"
        );

        let text = revert(&mut agent, 2, false).await;
        assert!(text.contains("as turn #4"), "{text}");
        assert_eq!(read(), "ONE\ntwo\nthree\nfour\nFIVE\n");
        let prompts = prompts(&agent);
        assert_eq!(prompts[..3], ["first", "second", "third"]);
        assert!(prompts[3].contains("reverted turn #2"), "{prompts:?}");
        assert_eq!(replayed(&agent, agent.session.id()), agent.history);

        let text = undo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("undid turn #4"), "{text}");
        assert_eq!(read(), "ONE\ntwo\nTHREE\nfour\nFIVE\n");
        assert_eq!(agent.history.transcript(), before.transcript());
        let refused = revert(&mut agent, 9, false).await;
        assert!(refused.contains("no turn #9 to revert"), "{refused}");
    }

    /// A turn undone with its messages, then a new prompt, then its files redone alone: the
    /// turn has no place in the conversation any more, so undoing it again takes its files
    /// and leaves the later messages, and `/redo` brings the files back.
    #[tokio::test]
    async fn an_undo_after_a_files_only_redo_leaves_the_later_messages() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let mut responses = writes("a.txt", "1\n").to_vec();
        responses.push(json!({"text": "just chatting"}));
        let script = json!({ "responses": responses }).to_string();
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        agent.turn("first").await.unwrap();
        let id = agent.session.id().to_owned();
        let text = undo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("rewound the conversation"), "{text}");
        agent.turn("hello?").await.unwrap();
        let chat = agent.history.clone();

        let text = redo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("redid turn #1"), "{text}");
        assert!(
            text.contains(
                "the conversation stays as it is: that turn's messages are no longer in it"
            ),
            "{text}"
        );
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);

        let text = undo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("undid turn #1"), "{text}");
        assert!(!text.contains("rewound the conversation"), "{text}");
        assert!(
            text.contains(
                "the conversation stays as it is: that turn's messages are no longer in it"
            ),
            "{text}"
        );
        assert_eq!(files(&root), []);
        assert_eq!(agent.history.transcript(), chat.transcript());
        assert_eq!(prompts(&agent), ["hello?"]);

        let text = redo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("redid turn #1"), "{text}");
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(agent.history.transcript(), chat.transcript());
        assert_eq!(replayed(&agent, &id), agent.history);
    }

    /// After a rewind of the conversation alone, `/undo` of the same turn takes its files and
    /// says its messages went already (not that the session is someone else's); `/redo`
    /// brings back the files, then the messages.
    #[tokio::test]
    async fn an_undo_after_a_conversation_rewind_takes_the_files_of_a_turn_of_this_session() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second"] {
            agent.turn(prompt).await.unwrap();
        }
        let id = agent.session.id().to_owned();
        let whole = agent.history.clone();
        let after = files(&root);
        let choice = RewindChoice {
            number: 2,
            scope: RewindScope::Conversation,
        };
        rewind(&mut agent, choice, UndoOptions::default()).await;

        let text = undo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("undid turn #2"), "{text}");
        assert!(!text.contains("belongs to session"), "{text}");
        assert!(
            text.contains("that turn's messages were taken back already"),
            "{text}"
        );
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);

        let text = redo(&mut agent, UndoOptions::default()).await;
        assert!(text.contains("redid turn #2"), "{text}");
        assert!(
            text.contains("that turn's messages were taken back on their own, and a later /redo brings them back"),
            "{text}"
        );
        assert_eq!(files(&root), after);
        assert_eq!(prompts(&agent), ["first"]);
        let text = redo(&mut agent, UndoOptions::default()).await;
        assert_eq!(
            text, "the conversation is back: 4 messages (no file changes)\n",
            "{text}"
        );
        assert_eq!(agent.history, whole);
        assert_eq!(replayed(&agent, &id), whole);
    }

    /// `/rewind ARGS` or `/fork ARGS`.
    async fn travel(agent: &mut Agent<'_>, command: &str, args: &str) -> String {
        match command {
            "rewind" => rewind_command(agent, args).await,
            _ => fork(agent, args).await,
        }
    }

    /// A turn whose files alone `/undo` took, redone in a shell: the resumed session says
    /// the files came back, and claims no message did.
    #[tokio::test]
    async fn a_files_only_undo_redone_elsewhere_brings_back_no_message() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second"] {
            agent.turn(prompt).await.unwrap();
        }
        let id = agent.session.id().to_owned();
        let choice = RewindChoice {
            number: 2,
            scope: RewindScope::Conversation,
        };
        rewind(&mut agent, choice, UndoOptions::default()).await;
        undo(&mut agent, UndoOptions::default()).await;
        let (store, _) = ctx.open_store().await.unwrap();
        (store
            .redo(&ctx.workspace().unwrap(), UndoOptions::default())
            .await)
            .unwrap();
        drop(store);

        agent.session = Session::create(&ctx.state).unwrap();
        let text = crate::resume_session(&mut agent, &id).await.unwrap();
        assert!(
            text.contains("the files of turn #2 were redone since this session last ran"),
            "{text}"
        );
        assert!(!text.contains("messages are back"), "{text}");
        assert_eq!(prompts(&agent), ["first"]);
        let text = redo(&mut agent, UndoOptions::default()).await;
        assert_eq!(
            text,
            "the conversation is back: 4 messages (no file changes)\n"
        );
        assert_eq!(prompts(&agent), ["first", "second"]);
    }

    /// A rewind or fork refused over an edit of yours says what works: `--dry-run` shows the
    /// diff and changes nothing, `--force` goes over the edit, which `/redo` brings back.
    #[tokio::test]
    async fn a_refused_rewind_or_fork_takes_dry_run_and_force() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = script(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        for prompt in ["first", "second"] {
            agent.turn(prompt).await.unwrap();
        }
        let parent = agent.session.id().to_owned();
        let whole = agent.history.clone();
        std::fs::write(root.join("b.txt"), "mine\n").unwrap();
        let mine = files(&root);

        for (command, retry) in [("rewind", "/rewind 2"), ("fork", "/fork 2")] {
            let text = travel(&mut agent, command, "2").await;
            assert!(text.contains("refused"), "{text}");
            assert!(
                text.contains(&format!(
                    "(here: {retry} --dry-run shows the diff, {retry} --force overwrites"
                )),
                "{text}"
            );
            let text = travel(&mut agent, command, "2 --dry-run").await;
            assert!(text.contains("would undo turn #2"), "{text}");
            assert!(text.contains("-mine\n"), "{text}");
            assert_eq!(files(&root), mine);
            assert_eq!(agent.history, whole);
            assert_eq!(agent.session.id(), parent);
        }
        let text = rewind_command(&mut agent, "2 conversation --force").await;
        assert!(text.contains("changes no file"), "{text}");
        let text = fork(&mut agent, "--force").await;
        assert!(text.contains("changes no file"), "{text}");
        assert_eq!(agent.session.id(), parent);

        let text = rewind_command(&mut agent, "2 --force").await;
        assert!(text.contains("forced over changes"), "{text}");
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);
        redo(&mut agent, UndoOptions::default()).await;
        assert_eq!(files(&root), mine, "the redo brings back the edit");
        assert_eq!(agent.history, whole);

        std::fs::write(root.join("b.txt"), "mine again\n").unwrap();
        let text = fork(&mut agent, "2").await;
        assert!(text.ends_with("no fork was made"), "{text}");
        let text = fork(&mut agent, "2 --force").await;
        assert!(text.contains("forced over changes"), "{text}");
        assert!(
            text.contains(&format!("from {parent} before its turn 2")),
            "{text}"
        );
        assert_eq!(files(&root), [("a.txt".to_owned(), "1\n".to_owned())]);
        assert_eq!(prompts(&agent), ["first"]);
    }

    /// `/fork N` and `/rewind N` in a conversation with no prompt say it has none.
    #[tokio::test]
    async fn fork_n_and_rewind_n_of_an_empty_conversation_say_it_has_no_turn() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let session = Session::create(&ctx.state).unwrap();
        let script = json!({"responses": [{"text": "hi"}]}).to_string();
        let mut agent = agent(&ctx, &script, session, Mode::Yes, 5);
        agent.start_conversation().unwrap();
        let text = fork(&mut agent, "99").await;
        assert_eq!(text, "this conversation has no turn to fork before yet");
        let text = fork(&mut agent, "").await;
        assert_eq!(
            text,
            "nothing to fork: this conversation has no prompt yet, so it is as new as a fork of it would be"
        );
        let text = rewind_command(&mut agent, "1").await;
        assert_eq!(text, "no turn 1 in this conversation: it has no prompt yet");
    }

    #[test]
    fn ages_read_as_people_say_them() {
        let now = 1_000_000;
        let shown: Vec<String> = [0, 59, 60, 3599, 3600, 86_399, 86_400, 3 * 86_400]
            .iter()
            .map(|secs| ago(now, now - secs))
            .collect();
        assert_eq!(
            shown,
            [
                "just now",
                "just now",
                "1 min ago",
                "59 min ago",
                "1 h ago",
                "23 h ago",
                "1 day ago",
                "3 days ago"
            ]
        );
    }
}
