//! What a turn reports, and how it is shown: as text for a person or as JSON lines.

use std::io::Write;

use serde::Serialize;
use shiro_tools::Change;

use crate::render::Color;
use crate::tui::{Msg, Phase, ToUi, UiSender};
use shiro_providers::{StreamEvent, Usage};

/// One event of a turn, as `shiro -p … --json` prints it (one JSON object a line, tagged by
/// `type`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A headless run began (`--json` only, first): which session it saves to and where.
    SessionStart {
        /// The session's id: `shiro --resume ID` continues it.
        session_id: String,
        /// The model's name, or `none` when no model is set.
        model: String,
        /// The workspace root.
        workspace: String,
    },
    /// A piece of the model's text as it streams (`--json` only); a step's deltas
    /// concatenate to its `assistant_text`.
    TextDelta {
        /// The text.
        text: String,
    },
    /// What one model request used, as the server counted it (when it says).
    Usage {
        /// The request's tokens.
        #[serde(flatten)]
        usage: Usage,
    },
    /// The model's text of one step, whole (it streamed before).
    AssistantText {
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCall {
        /// The call's id, which its result quotes.
        id: String,
        /// The tool.
        name: String,
        /// The arguments: the parsed JSON, or the raw text when it does not parse.
        arguments: serde_json::Value,
    },
    /// A tool call's result, as sent back to the model.
    ToolResult {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// `ok`, `error` or `denied`.
        status: Status,
        /// The text the model reads.
        output: String,
        /// What the call changed on disk.
        changes: Vec<Change>,
    },
    /// The turn ended.
    TurnEnd {
        /// Every change of the turn, in order.
        changed: Vec<Change>,
        /// The undo log's number for the turn, when it was recorded (it changed a file).
        turn_id: Option<u64>,
        /// How many model calls the turn made.
        steps: usize,
        /// Why the turn ended early (interrupted, a provider error, the step cap), if it did.
        error: Option<String>,
        /// What kind of error `error` is, for a script to act on.
        error_kind: Option<ErrorKind>,
        /// The tokens the turn's requests used together; `null` when the server said nothing.
        usage: Option<Usage>,
        /// The session the turn belongs to.
        session_id: String,
    },
}

/// What kind of error ended a turn, in `turn_end`'s `error_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Esc, Ctrl-C or a signal stopped it.
    Interrupted,
    /// It reached the cap on model calls (`--max-turns`).
    MaxTurns,
    /// No model is set, or its configuration cannot work.
    Config,
    /// The server refused the API key.
    Auth,
    /// The server kept rate limiting after every retry.
    RateLimit,
    /// The server refused the request (a wrong model or endpoint, a context too long, an
    /// exhausted quota).
    InvalidRequest,
    /// The server kept failing (5xx) after every retry.
    Server,
    /// The server could not be reached, timed out, or the connection broke mid-answer.
    Network,
    /// The server's answer could not be read (or a replay script ran out).
    BadResponse,
}

/// How a tool call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran and succeeded.
    Ok,
    /// It ran (or was refused by the tool) and failed.
    Error,
    /// The user (or the approval policy) did not let it run.
    Denied,
}

/// Where output goes and in which form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The REPL: everything as text on stdout, assistant text streamed.
    Interactive,
    /// `-p`: progress on stderr, the final answer alone on stdout.
    Headless,
    /// `-p --json`: [`Event`]s on stdout, notices on stderr.
    Json,
}

/// Prints a session's output. Writes go to injected writers so tests and the demo can
/// capture them; a write that fails (a closed pipe) is ignored, because losing output must
/// not lose the turn's bookkeeping.
pub struct Printer {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
    mode: Mode,
    color: Color,
    /// Whether the last thing written to the text stream ended a line.
    at_line_start: bool,
    /// The terminal UI, when it shows the session: everything goes to it instead.
    ui: Option<UiSender>,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The longest tool output shown in a transcript, in lines; the model still gets all of it.
const SHOWN_RESULT_LINES: usize = 6;

impl Printer {
    /// A printer writing to `out` (answers, events, the REPL) and `err` (progress, notices).
    pub fn new(
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        mode: Mode,
        color: Color,
    ) -> Self {
        Printer {
            out,
            err,
            mode,
            color,
            at_line_start: true,
            ui: None,
        }
    }

    /// A printer that sends everything to the terminal UI. Its text carries no colour
    /// codes (diffs included): the UI styles what it shows.
    pub fn to_ui(ui: UiSender) -> Self {
        Printer {
            out: Box::new(std::io::sink()),
            err: Box::new(std::io::sink()),
            mode: Mode::Interactive,
            color: Color::Never,
            at_line_start: true,
            ui: Some(ui),
        }
    }

    /// Sends `message` to the UI, when there is one; says whether there is.
    fn to_ui_if_any(&self, message: impl FnOnce() -> ToUi) -> bool {
        match &self.ui {
            Some(ui) => {
                // A UI that is gone shows nothing; the turn's bookkeeping goes on.
                let _ = ui.send(Msg::Agent(message()));
                true
            }
            None => false,
        }
    }

    /// Says what the turn does now (the UI's spinner); nothing in text modes.
    pub fn phase(&mut self, phase: Phase) {
        self.to_ui_if_any(|| ToUi::Phase(phase));
    }

    /// Shows the diff of a call about to run.
    pub fn preview(&mut self, diff: &str) {
        if !self.to_ui_if_any(|| ToUi::Preview(diff.to_owned())) {
            self.info(diff);
        }
    }

    /// Sends anything else the UI shows (the status line, a replayed conversation).
    pub fn ui(&mut self, message: ToUi) {
        self.to_ui_if_any(|| message);
    }

    /// Whether a terminal UI shows the session.
    pub fn has_ui(&self) -> bool {
        self.ui.is_some()
    }

    /// The output mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The colour setting, for diffs.
    pub fn color(&self) -> Color {
        self.color
    }

    fn text_stream(&mut self) -> &mut (dyn Write + Send) {
        match self.mode {
            Mode::Interactive => &mut *self.out,
            Mode::Headless | Mode::Json => &mut *self.err,
        }
    }

    fn write_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.at_line_start = text.ends_with('\n');
        let stream = self.text_stream();
        let _ = stream.write_all(text.as_bytes());
        let _ = stream.flush();
    }

    /// Ends the current line if something is on it.
    pub fn end_line(&mut self) {
        if !self.at_line_start && self.ui.is_none() {
            self.write_text("\n");
        }
    }

    /// Shows what a provider streams: text as it comes (interactive only), retries always.
    pub fn stream(&mut self, event: StreamEvent) {
        if let StreamEvent::TextDelta(text) = &event
            && self.to_ui_if_any(|| ToUi::Delta(text.clone()))
        {
            return;
        }
        match event {
            StreamEvent::TextDelta(text) if self.mode == Mode::Interactive => {
                self.write_text(&text);
            }
            StreamEvent::TextDelta(text) if self.mode == Mode::Json => {
                self.event(&Event::TextDelta { text });
            }
            StreamEvent::Retrying {
                attempt,
                max_retries,
                delay,
                reason,
            } => {
                self.info(&format!(
                    "({reason}; retry {attempt} of {max_retries} in {:.1}s)",
                    delay.as_secs_f64()
                ));
            }
            _ => {}
        }
    }

    /// Shows a line of information (a notice, a command's output).
    pub fn info(&mut self, text: &str) {
        if self.to_ui_if_any(|| ToUi::Info(text.to_owned())) {
            return;
        }
        self.end_line();
        self.write_text(text);
        if !text.is_empty() && !text.ends_with('\n') {
            self.write_text("\n");
        }
    }

    /// Prints the final answer of a headless turn on stdout.
    pub fn answer(&mut self, text: &str) {
        if self.mode == Mode::Headless && !text.is_empty() {
            let _ = self.out.write_all(text.as_bytes());
            if !text.ends_with('\n') {
                let _ = self.out.write_all(b"\n");
            }
            let _ = self.out.flush();
        }
    }

    /// Reports an event: a JSON line, or its text form.
    pub fn event(&mut self, event: &Event) {
        if self.to_ui_if_any(|| ToUi::Event(event.clone())) {
            return;
        }
        if self.mode == Mode::Json {
            if let Ok(line) = serde_json::to_string(event) {
                let _ = writeln!(self.out, "{line}");
                let _ = self.out.flush();
            }
            return;
        }
        match event {
            // Interactive text already streamed; headless prints the final answer at the end.
            Event::AssistantText { .. } => self.end_line(),
            // Only for scripts: `/cost` and the status line show usage to a person.
            Event::SessionStart { .. } | Event::TextDelta { .. } | Event::Usage { .. } => {}
            Event::ToolCall {
                name, arguments, ..
            } => {
                let line = format!("● {name} {}", brief(arguments));
                self.info(&self.paint("1", &line));
            }
            Event::ToolResult { status, output, .. } => {
                let mut lines = output.lines();
                let mut shown = String::new();
                for (index, line) in lines.by_ref().take(SHOWN_RESULT_LINES).enumerate() {
                    let lead = if index == 0 {
                        match status {
                            Status::Ok => "  ⎿ ",
                            Status::Error => "  ⎿ error: ",
                            Status::Denied => "  ⎿ denied: ",
                        }
                    } else {
                        "    "
                    };
                    shown.push_str(lead);
                    shown.push_str(line);
                    shown.push('\n');
                }
                let rest = lines.count();
                if rest > 0 {
                    shown.push_str(&format!("    … {rest} more lines\n"));
                }
                if shown.is_empty() {
                    shown.push_str("  ⎿ (no output)\n");
                }
                self.info(&shown);
            }
            Event::TurnEnd {
                changed,
                turn_id,
                error,
                ..
            } => {
                if let Some(error) = error {
                    self.info(&self.paint("31", &format!("turn stopped: {error}")));
                }
                if !changed.is_empty() {
                    let list: Vec<String> = changed.iter().map(ToString::to_string).collect();
                    let how = if self.mode == Mode::Interactive {
                        "/undo"
                    } else {
                        "shiro undo"
                    };
                    let id = turn_id
                        .map(|id| format!(" (turn #{id}; {how} reverts it)"))
                        .unwrap_or_default();
                    self.info(&format!("changed: {}{id}", list.join(", ")));
                }
            }
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        match self.color {
            Color::Never => text.to_owned(),
            Color::Always => format!("\x1b[{code}m{text}\x1b[0m"),
        }
    }
}

/// A one-line view of a tool call's arguments: the path or command when there is one,
/// else the JSON, cut to a readable length.
pub(crate) fn brief(arguments: &serde_json::Value) -> String {
    const MAX: usize = 100;
    // A patch is summed up by its file headers: `Update File: a.rs, Delete File: b.rs`.
    let patch_files = arguments
        .get("patch")
        .and_then(|v| v.as_str())
        .map(|patch| {
            patch
                .lines()
                .filter_map(|line| line.strip_prefix("*** "))
                .filter(|rest| !rest.starts_with("Begin Patch") && !rest.starts_with("End "))
                .collect::<Vec<_>>()
                .join(", ")
        });
    let text = ["path", "command", "pattern"]
        .iter()
        .find_map(|key| {
            arguments
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .or(patch_files)
        .unwrap_or_else(|| match arguments {
            serde_json::Value::String(raw) => raw.clone(),
            other => other.to_string(),
        });
    let text = text.replace('\n', "⏎");
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
