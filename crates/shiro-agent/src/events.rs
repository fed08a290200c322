//! How what a session reports is shown: as text for a person, as JSON lines, or handed to a
//! front end (the terminal UI) as [`ToFront`] messages.

use std::io::Write;

use shiro_providers::StreamEvent;

use super::protocol::{Event, FrontSink, Phase, Status, ToFront, brief};
use crate::render::Color;

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
    /// The front end (the terminal UI), when it shows the session: everything goes to it
    /// instead.
    front: Option<FrontSink>,
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
            front: None,
        }
    }

    /// A printer that sends everything to a front end. Its text carries no colour codes
    /// (diffs included): the front end styles what it shows.
    pub fn to_front(front: FrontSink) -> Self {
        Printer {
            out: Box::new(std::io::sink()),
            err: Box::new(std::io::sink()),
            mode: Mode::Interactive,
            color: Color::Never,
            at_line_start: true,
            front: Some(front),
        }
    }

    /// Sends `message` to the front end, when there is one; says whether there is.
    fn to_ui_if_any(&self, message: impl FnOnce() -> ToFront) -> bool {
        match &self.front {
            Some(front) => {
                front(message());
                true
            }
            None => false,
        }
    }

    /// Says what the turn does now (the UI's spinner); nothing in text modes.
    pub fn phase(&mut self, phase: Phase) {
        self.to_ui_if_any(|| ToFront::Phase(phase));
    }

    /// Shows the diff of a call about to run.
    pub fn preview(&mut self, diff: &str) {
        if !self.to_ui_if_any(|| ToFront::Preview(diff.to_owned())) {
            self.info(diff);
        }
    }

    /// Sends anything else the UI shows (the status line, a replayed conversation).
    pub fn ui(&mut self, message: ToFront) {
        self.to_ui_if_any(|| message);
    }

    /// Whether a terminal UI shows the session.
    pub fn has_ui(&self) -> bool {
        self.front.is_some()
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
        if !self.at_line_start && self.front.is_none() {
            self.write_text("\n");
        }
    }

    /// Shows what a provider streams: text as it comes (interactive only), retries always.
    pub fn stream(&mut self, event: StreamEvent) {
        if let StreamEvent::TextDelta(text) = &event
            && self.to_ui_if_any(|| ToFront::Delta(text.clone()))
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
        if self.to_ui_if_any(|| ToFront::Info(text.to_owned())) {
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
        if self.to_ui_if_any(|| ToFront::Event(event.clone())) {
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
