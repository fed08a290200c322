//! What the transcript shows of the agent's events: tool cards with their diffs and
//! results cut to fit, the echoed prompt, and a resumed conversation shown again.

use std::time::Instant;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use shiro_agent::conversation::Conversation;
use shiro_agent::protocol::{Event, Status, brief};
use shiro_providers::Role;

use super::{App, BashLive, CARD_DIFF_LINES, CARD_RESULT_LINES, Phase, dim};
use crate::markdown;

impl App {
    pub(super) fn on_event(&mut self, event: Event, now: Instant) {
        match event {
            Event::AssistantText { .. } => self.flush_stream(),
            // The status line shows usage; deltas and the start come as their own messages.
            Event::SessionStart { .. } | Event::TextDelta { .. } | Event::Usage { .. } => {}
            Event::ToolCall {
                name, arguments, ..
            } => {
                self.flush_stream();
                self.gap();
                let header = Line::from(vec![
                    Span::styled("● ", self.style(Color::Green)),
                    Span::styled(name.clone(), Style::default().add_modifier(Modifier::BOLD)),
                    Span::raw(" "),
                    Span::raw(brief(&arguments)),
                ]);
                self.push_lines([header]);
                if name == "bash" {
                    self.bash = Some(BashLive {
                        command: brief(&arguments),
                        ..BashLive::default()
                    });
                }
                self.phase = Some((Phase::Tool(name), now));
            }
            Event::ToolResult {
                name,
                status,
                output,
                ..
            } => {
                self.bash = None;
                let mut card = Vec::new();
                // A bash call's preview is its command, which the card's header shows.
                if let Some(preview) = self.preview.take()
                    && name != "bash"
                {
                    card = self.diff_lines(&preview);
                }
                let full_card = card.clone();
                if card.len() > CARD_DIFF_LINES {
                    let rest = card.len() - CARD_DIFF_LINES;
                    card.truncate(CARD_DIFF_LINES);
                    card.push(Line::styled(
                        format!("  … {rest} more lines (ctrl+o shows them)"),
                        dim(),
                    ));
                }
                let result = self.result_lines(status, &output, name == "bash");
                self.last_card = full_card;
                self.last_card.extend(self.full_result(status, &output));
                card.extend(result);
                self.push_lines(card);
                self.phase = Some((Phase::Waiting, now));
            }
            Event::TurnEnd {
                changed,
                turn_id,
                error,
                ..
            } => {
                self.flush_stream();
                if error.is_some() || !changed.is_empty() {
                    self.gap();
                }
                if let Some(error) = error {
                    self.push_text(&format!("turn stopped: {error}"), self.style(Color::Red));
                }
                if !changed.is_empty() {
                    let list: Vec<String> = changed.iter().map(ToString::to_string).collect();
                    let id = turn_id
                        .map(|id| format!(" · turn #{id}"))
                        .unwrap_or_default();
                    self.push_text(
                        &format!("changed: {}{id} · /undo reverts it", list.join(", ")),
                        self.style(Color::Cyan),
                    );
                    self.hint = turn_id.map(|id| format!("/undo reverts turn #{id}"));
                }
                self.end_turn();
            }
        }
    }

    /// A diff's lines, coloured, indented under its card.
    pub(super) fn diff_lines(&self, diff: &str) -> Vec<Line<'static>> {
        diff.trim_end_matches('\n')
            .split('\n')
            .map(|line| {
                let style = if line.starts_with("+++") || line.starts_with("---") {
                    Style::default().add_modifier(Modifier::BOLD)
                } else if line.starts_with('+') {
                    self.style(Color::Green)
                } else if line.starts_with('-') {
                    self.style(Color::Red)
                } else if line.starts_with("@@") {
                    self.style(Color::Cyan)
                } else {
                    Style::default()
                };
                Line::from(vec![Span::raw("  "), Span::styled(line.to_owned(), style)])
            })
            .collect()
    }

    /// A tool's result under its card: its first lines, or a command's last ones (where
    /// its errors and exit code are) when `last`.
    pub(super) fn result_lines(
        &self,
        status: Status,
        output: &str,
        last: bool,
    ) -> Vec<Line<'static>> {
        let lead = match status {
            Status::Ok => "  ⎿ ",
            Status::Error => "  ⎿ error: ",
            Status::Denied => "  ⎿ denied: ",
        };
        let style = self.result_style(status);
        let all: Vec<&str> = output.lines().collect();
        let hidden = all.len().saturating_sub(CARD_RESULT_LINES);
        let (shown, note) = match (hidden, last) {
            (0, _) => (&all[..], None),
            (_, true) => (
                &all[hidden..],
                Some(format!("    … {hidden} lines above (ctrl+o shows them)")),
            ),
            (_, false) => (
                &all[..CARD_RESULT_LINES],
                Some(format!("    … {hidden} more lines (ctrl+o shows them)")),
            ),
        };
        let mut lines: Vec<Line<'static>> = Vec::new();
        let mut lead = lead;
        if last && let Some(note) = &note {
            lines.push(Line::styled(format!("{lead}{}", note.trim_start()), dim()));
            lead = "    ";
        }
        for line in shown {
            lines.push(Line::styled(format!("{lead}{line}"), style));
            lead = "    ";
        }
        if !last && let Some(note) = note {
            lines.push(Line::styled(note, dim()));
        }
        if lines.is_empty() {
            lines.push(Line::styled(format!("{lead}(no output)"), style));
        }
        lines
    }

    /// Every line of a tool's result, for Ctrl-O.
    pub(super) fn full_result(&self, status: Status, output: &str) -> Vec<Line<'static>> {
        let style = self.result_style(status);
        output
            .lines()
            .map(|line| Line::styled(format!("    {line}"), style))
            .collect()
    }

    pub(super) fn result_style(&self, status: Status) -> Style {
        match status {
            Status::Ok => dim(),
            Status::Error | Status::Denied => self.style(Color::Red),
        }
    }

    /// Shows a sent prompt in the transcript.
    pub(super) fn echo_prompt(&mut self, prompt: &str) {
        self.gap();
        let style = Style::default().add_modifier(Modifier::BOLD);
        for (index, line) in prompt.split('\n').enumerate() {
            let lead = if index == 0 { "› " } else { "  " };
            self.push_lines([Line::from(vec![
                Span::styled(lead, self.style(Color::Magenta)),
                Span::styled(line.to_owned(), style),
            ])]);
        }
    }

    /// Shows a resumed conversation again.
    pub(super) fn replay(&mut self, conversation: &Conversation) {
        let messages = conversation.transcript();
        for (index, message) in messages.iter().enumerate() {
            self.compaction_notes(conversation, index);
            match message.role {
                Role::System => {}
                Role::User => {
                    // The prompt as typed; its attachments are counted, not shown again.
                    let (typed, added) = shiro_agent::attach::typed_prompt(&message.content);
                    self.echo_prompt(typed);
                    if let Some(note) = added.note() {
                        self.push_text(&format!("  {note}"), dim());
                    }
                }
                Role::Assistant => {
                    if !message.content.is_empty() {
                        self.gap();
                        let lines = markdown::render(&message.content, self.width, self.options());
                        self.pending.extend(lines);
                    }
                    for call in &message.tool_calls {
                        let arguments = serde_json::from_str(&call.arguments)
                            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
                        self.gap();
                        self.push_lines([Line::from(vec![
                            Span::styled("● ", self.style(Color::Green)),
                            Span::styled(
                                call.name.clone(),
                                Style::default().add_modifier(Modifier::BOLD),
                            ),
                            Span::raw(" "),
                            Span::raw(brief(&arguments)),
                        ])]);
                    }
                }
                Role::Tool => {
                    let first = message.content.lines().next().unwrap_or("(no output)");
                    self.push_lines([Line::styled(format!("  ⎿ {first}"), dim())]);
                }
            }
        }
        self.compaction_notes(conversation, messages.len());
        if messages.iter().any(|m| m.role != Role::System) {
            self.gap();
            self.push_text("(resumed: the conversation above continues)", dim());
        }
    }

    /// Notes the compactions that ran when the transcript had `len` messages.
    pub(super) fn compaction_notes(&mut self, conversation: &Conversation, len: usize) {
        for compaction in conversation.compactions().iter().filter(|c| c.at == len) {
            let replaced = conversation.transcript()[..compaction.keep_from]
                .iter()
                .filter(|m| m.role != Role::System)
                .count();
            self.gap();
            self.push_text(
                &format!(
                    "(compacted here: from this point the model was sent a summary in place of the {replaced} earlier messages above)"
                ),
                dim(),
            );
        }
    }
}
