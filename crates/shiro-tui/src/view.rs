//! Draws the viewport: the live part of the turn, the spinner, the prompt, the menu or the
//! session picker, and the status line. Every line is wrapped here, before drawing, so the
//! viewport's height is known before it is drawn.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr as _;

use shiro_agent::protocol::RewindScope;

use super::app::{App, BashesPicker, ReadKind, TurnPicker};
use super::markdown::wrap;

/// The most lines of streamed text, diff or output shown live.
const LIVE_LINES: usize = 8;
/// The most rows of the prompt shown.
const PROMPT_ROWS: usize = 8;
/// The most menu or picker rows shown.
const MENU_ROWS: usize = 12;

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

/// The viewport's lines, and where the cursor goes (row, column), for `app` at `now`.
pub fn lines(app: &App, now: Instant) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
    let width = app.width.max(1);
    let color = |c: Color| {
        if app.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    };
    let mut out: Vec<Line<'static>> = Vec::new();
    let wrapped = |line: Line<'static>, out: &mut Vec<Line<'static>>| {
        out.extend(wrap(&line, width, "  "));
    };

    // What the turn is doing, live.
    let live = app.live_text();
    out.extend(tail(live, LIVE_LINES));
    if let Some(bash) = &app.bash {
        let mut lines: Vec<Line<'static>> = Vec::new();
        for line in bash
            .tail
            .iter()
            .chain((!bash.partial.is_empty()).then_some(&bash.partial))
        {
            lines.extend(wrap(&Line::styled(format!("  {line}"), dim()), width, "  "));
        }
        let hidden = bash.lines.saturating_sub(bash.tail.len());
        if hidden > 0 {
            out.push(Line::styled(format!("  … {hidden} lines above"), dim()));
        }
        out.extend(tail(lines, super::app::BASH_TAIL));
    }
    if let Some(preview) = app.preview().filter(|_| app.bash.is_none()) {
        let lines: Vec<Line<'static>> = preview
            .trim_end_matches('\n')
            .split('\n')
            .flat_map(|line| wrap(&Line::raw(format!("  {line}")), width, "  "))
            .collect();
        out.extend(tail(lines, LIVE_LINES));
    }
    let question = match app.reading() {
        Some(ReadKind::Approval { tool, always }) => Some((
            format!("Allow {tool}? "),
            format!(
                "y yes · a {always} · n no (type a reason after n, then Enter) · esc stops the turn"
            ),
        )),
        Some(ReadKind::Keep { rules }) => Some((
            format!("Keep {rules} for: "),
            "s this session · w this workspace (.shiro/config.toml) · u all your workspaces (user config)".to_owned(),
        )),
        _ => None,
    };
    if let Some((question, keys)) = question {
        wrapped(
            Line::from(vec![
                Span::styled(question, Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(keys),
            ]),
            &mut out,
        );
    }
    if let Some((frame, what, elapsed)) = app.activity(now) {
        let hint = if app.can_background() {
            " · ctrl+b to background"
        } else {
            ""
        };
        wrapped(
            Line::from(vec![
                Span::styled(format!("{frame} "), color(Color::Cyan)),
                Span::raw(what),
                Span::styled(
                    format!("{hint} · {}s · esc to stop", elapsed.as_secs()),
                    dim(),
                ),
            ]),
            &mut out,
        );
    }
    if let Some(queued) = &app.queued {
        wrapped(
            Line::styled(format!("queued: {}", queued.replace('\n', " ")), dim()),
            &mut out,
        );
    }

    // The prompt, or the picker in its place.
    let rule = "─".repeat(usize::from(width));
    out.push(Line::styled(rule, dim()));
    let mut cursor = None;
    if let Some(picker) = &app.turn_picker {
        turn_picker(picker, width, &mut out);
    } else if let Some(picker) = &app.bashes_picker {
        bashes_picker(picker, width, &mut out);
    } else if let Some(picker) = &app.picker {
        wrapped(
            Line::from(vec![
                Span::styled(
                    "Resume a session",
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::styled(
                    " · ↑↓ to choose · enter resumes · esc starts a new one",
                    dim(),
                ),
            ]),
            &mut out,
        );
        let first = picker.selected.saturating_sub(MENU_ROWS - 1);
        for (index, item) in picker
            .sessions
            .iter()
            .enumerate()
            .skip(first)
            .take(MENU_ROWS)
        {
            let fork = match item.forked_at {
                Some(turn) => format!("{}↳ fork before turn {turn} · ", "  ".repeat(item.depth)),
                None => String::new(),
            };
            let text = format!(
                "{fork}{} · {} · {}",
                item.when,
                plural(item.turns, "prompt"),
                item.first_prompt
            );
            out.push(picker_row(index == picker.selected, &text, width));
        }
    } else {
        let inner = width.saturating_sub(2).max(1);
        let (rows, (row, column)) = app.editor.rows(inner);
        let first = usize::from(row).saturating_sub(PROMPT_ROWS - 1);
        let top = out.len();
        let placeholder = match app.reading() {
            Some(ReadKind::Approval { .. }) => Some("y, a, or n and a reason"),
            Some(ReadKind::Keep { .. }) => Some("s, w or u (Enter: this session)"),
            _ if app.editor.is_empty() && app.turn_started.is_none() => {
                Some("ask anything · / for commands · @ for files")
            }
            _ => None,
        };
        for (index, text) in rows.iter().enumerate().skip(first).take(PROMPT_ROWS) {
            let lead = if index == 0 { "› " } else { "  " };
            let mut spans = vec![Span::styled(lead, color(Color::Magenta))];
            match placeholder {
                Some(placeholder) if app.editor.is_empty() => {
                    spans.push(Span::styled(cut(placeholder, inner), dim()));
                }
                _ => spans.push(Span::raw(text.text.clone())),
            }
            out.push(Line::from(spans));
        }
        let shown_row = usize::from(row) - first;
        cursor = Some((
            u16::try_from(top + shown_row.min(PROMPT_ROWS - 1)).unwrap_or(u16::MAX),
            (column + 2).min(width - 1),
        ));
        if let Some(menu) = &app.menu {
            let first = menu.selected.saturating_sub(MENU_ROWS - 1);
            let label_width = menu
                .items
                .iter()
                .map(|item| item.label.width())
                .max()
                .unwrap_or(0)
                .min(usize::from(width) / 2);
            for (index, item) in menu.items.iter().enumerate().skip(first).take(MENU_ROWS) {
                let selected = index == menu.selected;
                // Marked, not only highlighted, so it shows without colours too.
                let mark = if selected { "› " } else { "  " };
                let label = format!("{mark}{:<label_width$}  ", item.label);
                let style = if selected {
                    Style::default().add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                };
                let text = cut(&format!("{label}{}", item.detail), width);
                let (left, right) = split_at_width(&text, label.width());
                out.push(Line::from(vec![
                    Span::styled(left, style),
                    Span::styled(right, if selected { style } else { dim() }),
                ]));
            }
            if menu.items.len() > MENU_ROWS {
                out.push(Line::styled(
                    format!("  … {} in all", menu.items.len()),
                    dim(),
                ));
            }
        }
    }
    out.push(status_line(app, now, width));
    (out, cursor)
}

/// The rewind picker: the session's turns, then, once one is chosen, what to take back.
fn turn_picker(picker: &TurnPicker, width: u16, out: &mut Vec<Line<'static>>) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let row = |selected: bool, text: String| picker_row(selected, &text, width);
    match (picker.scope, picker.turn()) {
        (Some(scope), Some(turn)) => {
            let title = format!("Rewind to before turn {} ", turn.number);
            out.extend(wrap(
                &Line::from(vec![
                    Span::styled(title, bold),
                    Span::raw(format!("\"{}\"", turn.prompt)),
                ]),
                width,
                "  ",
            ));
            out.push(Line::styled(
                cut(
                    "  what goes back? ↑↓ or 1-3 · enter rewinds · esc goes back to the turns",
                    width,
                ),
                dim(),
            ));
            for (index, choice) in RewindScope::ALL.iter().enumerate() {
                let mut text = format!("{} {}", index + 1, choice.describe());
                if let (Some(why), RewindScope::Both | RewindScope::Files) = (&turn.blocked, choice)
                {
                    text.push_str(&format!(" · its files cannot go back: {why}"));
                }
                out.push(row(index == scope, text));
            }
        }
        _ => {
            out.push(Line::from(vec![
                Span::styled("Rewind to before a turn", bold),
                Span::styled(" · ↑↓ to choose · enter picks it · esc cancels", dim()),
            ]));
            let first = picker.selected.saturating_sub(MENU_ROWS - 1);
            for (index, turn) in picker.turns.iter().enumerate().skip(first).take(MENU_ROWS) {
                let mut text = format!("{:>2}  {}", turn.number, turn.prompt);
                if !turn.ago.is_empty() {
                    text.push_str(&format!(" · {}", turn.ago));
                }
                text.push_str(&format!(" · {}", turn.changes));
                if let Some(why) = &turn.blocked {
                    text.push_str(&format!(" · files {why}"));
                }
                out.push(row(index == picker.selected, text));
            }
            if picker.turns.len() > MENU_ROWS {
                out.push(Line::styled(
                    format!("  … {} turns in all", picker.turns.len()),
                    dim(),
                ));
            }
        }
    }
}

/// A row of a picker, cut to `width`: marked and reversed when selected, so that it shows
/// without colours too.
fn picker_row(selected: bool, text: &str, width: u16) -> Line<'static> {
    let mark = if selected { "› " } else { "  " };
    let style = if selected {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    };
    Line::styled(cut(&format!("{mark}{text}"), width), style)
}

/// The `/bashes` picker: the session's background commands, and the last line the selected
/// one printed.
fn bashes_picker(picker: &BashesPicker, width: u16, out: &mut Vec<Line<'static>>) {
    let stop = if picker.command().is_some_and(|command| command.running) {
        " · k stops it"
    } else {
        ""
    };
    out.extend(wrap(
        &Line::from(vec![
            Span::styled(
                "Background commands",
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!(" · ↑↓ to choose · enter shows its output{stop} · esc closes"),
                dim(),
            ),
        ]),
        width,
        "  ",
    ));
    let first = picker.selected.saturating_sub(MENU_ROWS - 1);
    for (index, command) in picker
        .commands
        .iter()
        .enumerate()
        .skip(first)
        .take(MENU_ROWS)
    {
        let text = format!(
            "{:<4} {} · {} · {}",
            command.id, command.status, command.age, command.command
        );
        out.push(picker_row(index == picker.selected, &text, width));
    }
    if picker.commands.len() > MENU_ROWS {
        out.push(Line::styled(
            format!("  … {} in all", picker.commands.len()),
            dim(),
        ));
    }
    if let Some(last) = picker
        .command()
        .and_then(|command| command.last_line.as_deref())
    {
        out.push(Line::styled(cut(&format!("  last: {last}"), width), dim()));
    }
}

/// The status line: model · workspace · tokens · undo depth, or a hint that matters now.
fn status_line(app: &App, now: Instant, width: u16) -> Line<'static> {
    if app.quit_armed(now) {
        return Line::styled("press ctrl+c again to exit", dim());
    }
    if app.esc_armed {
        return Line::styled("press esc again to rewind to an earlier turn", dim());
    }
    let status = &app.status;
    // What matters most comes first, since a narrow terminal cuts the end.
    let mut parts: Vec<String> = Vec::new();
    if !status.model.is_empty() {
        parts.push(status.model.clone());
    }
    if let Some(depth) = status.undo_depth {
        parts.push(plural(depth, "undoable turn"));
    }
    if let Some(running) = status.background.filter(|running| *running > 0) {
        parts.push(format!("{} running", plural(running, "background command")));
    }
    match (status.tokens, status.context_used, status.context_window) {
        (Some(tokens), Some(used), Some(window)) if window > 0 => parts.push(format!(
            "{} tokens · {}% of context",
            short(tokens),
            used.saturating_mul(100) / window
        )),
        (Some(tokens), _, _) => parts.push(format!("{} tokens", short(tokens))),
        _ => {}
    }
    if let Some(note) = &status.capture_note {
        parts.push(note.clone());
    }
    if !status.workspace.is_empty() {
        parts.push(status.workspace.clone());
    }
    let mut text = parts.join(" · ");
    if let Some(hint) = &app.hint {
        text = format!("{text} · {hint}");
    }
    Line::styled(cut(&text, width), dim())
}

/// `12.3k`-style token counts.
fn short(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The last `n` lines.
fn tail(mut lines: Vec<Line<'static>>, n: usize) -> Vec<Line<'static>> {
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    lines
}

/// `text` cut to `width` columns, with `…` when cut.
fn cut(text: &str, width: u16) -> String {
    let width = usize::from(width);
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `text` split after `columns` display columns.
fn split_at_width(text: &str, columns: usize) -> (String, String) {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        if used >= columns {
            return (text[..at].to_owned(), text[at..].to_owned());
        }
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
    }
    (text.to_owned(), String::new())
}

/// Draws `lines` into the frame, the cursor where the prompt wants it.
pub fn draw(frame: &mut Frame<'_>, lines: &[Line<'static>], cursor: Option<(u16, u16)>) {
    let area = frame.area();
    frame.render_widget(Paragraph::new(lines.to_vec()), area);
    if let Some((row, column)) = cursor
        && row < area.height
    {
        frame.set_cursor_position((area.x + column, area.y + row));
    }
}

/// The rows the viewport needs for `lines`.
pub fn height(lines: &[Line<'_>]) -> u16 {
    u16::try_from(lines.len()).unwrap_or(u16::MAX).max(1)
}

/// A test buffer's area of `width` × the height `lines` need.
pub fn area_for(lines: &[Line<'_>], width: u16) -> Rect {
    Rect::new(0, 0, width, height(lines))
}
