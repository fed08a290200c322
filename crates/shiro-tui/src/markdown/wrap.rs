//! Text width and wrapping.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// The columns a character takes. An emoji variation selector (U+FE0F) counts one: it widens
/// the character before it to two columns in the terminal (and in `unicode-width`).
pub(super) fn char_width(c: char) -> usize {
    if c == '\u{FE0F}' {
        1
    } else {
        c.width().unwrap_or(0)
    }
}

pub(super) fn str_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

pub(super) fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|span| str_width(&span.content)).sum()
}

/// Prose made safe to print: tabs and line breaks become spaces, other control characters
/// U+FFFD (a model's output must not drive the terminal).
pub(super) fn clean_inline(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => ' ',
            c if c.is_control() => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// A prefix cut (from the left, where it is only indentation) so that at least two columns
/// remain for text: a wide character always fits.
pub(super) fn fit_prefix(prefix: &str, width: usize) -> String {
    let room = width.saturating_sub(2);
    let mut chars = prefix.chars();
    let mut excess = str_width(prefix).saturating_sub(room);
    while excess > 0 {
        match chars.next() {
            Some(c) => excess = excess.saturating_sub(char_width(c).max(1)),
            None => break,
        }
    }
    chars.collect()
}

/// Merges neighbouring spans of one style and drops empty ones.
pub(super) fn normalize(spans: Vec<Span<'static>>) -> Line<'static> {
    let mut out: Vec<Span<'static>> = Vec::with_capacity(spans.len());
    for span in spans {
        if span.content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.style == span.style => last.content.to_mut().push_str(&span.content),
            _ => out.push(span),
        }
    }
    trim_end(&mut out);
    Line::from(out)
}

pub(super) fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let kept = last.content.trim_end_matches(' ').len();
        if kept == 0 {
            spans.pop();
        } else {
            last.content.to_mut().truncate(kept);
            break;
        }
    }
}

/// A word or a run of spaces, in pieces of one style each.
pub(super) struct Segment {
    pub(super) pieces: Vec<(Style, String)>,
    pub(super) width: usize,
    pub(super) space: bool,
}

pub(super) fn segments(spans: &[Span<'_>]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for span in spans {
        let text = span.content.as_ref();
        let mut start = 0;
        while start < text.len() {
            let rest = text.get(start..).unwrap_or("");
            let space = rest.starts_with(' ');
            let len = rest
                .find(|c: char| (c == ' ') != space)
                .unwrap_or(rest.len());
            let run = rest.get(..len).unwrap_or("");
            start += len.max(1);
            match out.last_mut() {
                Some(segment) if segment.space == space => {
                    segment.width += str_width(run);
                    match segment.pieces.last_mut() {
                        Some((style, piece)) if *style == span.style => piece.push_str(run),
                        _ => segment.pieces.push((span.style, run.to_owned())),
                    }
                }
                _ => out.push(Segment {
                    pieces: vec![(span.style, run.to_owned())],
                    width: str_width(run),
                    space,
                }),
            }
        }
    }
    out
}

/// Lines being filled, each with the columns it may use.
pub(super) struct Layout {
    pub(super) lines: Vec<Vec<Span<'static>>>,
    pub(super) used: usize,
    pub(super) first: usize,
    pub(super) rest: usize,
}

impl Layout {
    pub(super) fn new(first: usize, rest: usize) -> Self {
        Layout {
            lines: vec![Vec::new()],
            used: 0,
            first: first.max(1),
            rest: rest.max(1),
        }
    }

    pub(super) fn room(&self) -> usize {
        if self.lines.len() == 1 {
            self.first
        } else {
            self.rest
        }
    }

    pub(super) fn newline(&mut self) {
        self.lines.push(Vec::new());
        self.used = 0;
    }

    pub(super) fn put(&mut self, style: Style, text: &str, width: usize) {
        self.used += width;
        let Some(line) = self.lines.last_mut() else {
            return;
        };
        match line.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => line.push(Span::styled(text.to_owned(), style)),
        }
    }

    pub(super) fn put_segment(&mut self, segment: &Segment) {
        for (style, text) in &segment.pieces {
            self.put(*style, text, str_width(text));
        }
    }

    /// Places text character by character, starting a new line whenever one is full.
    pub(super) fn put_broken(&mut self, segment: &Segment) {
        for (style, text) in &segment.pieces {
            for c in text.chars() {
                let width = char_width(c);
                if self.used > 0 && self.used + width > self.room() {
                    self.newline();
                }
                let mut buffer = [0; 4];
                self.put(*style, c.encode_utf8(&mut buffer), width);
            }
        }
    }
}

/// Word-wraps spans (already cleaned) to `width`, `first` before the first line and `rest`
/// before the others.
pub(super) fn wrap_spans(
    spans: &[Span<'_>],
    width: usize,
    first: &str,
    rest: &str,
) -> Vec<Line<'static>> {
    let first = fit_prefix(first, width);
    let rest = fit_prefix(rest, width);
    let mut layout = Layout::new(
        width.saturating_sub(str_width(&first)),
        width.saturating_sub(str_width(&rest)),
    );
    let mut space: Option<Segment> = None;
    let mut started = false;
    for segment in segments(spans) {
        if segment.space && started {
            space = Some(segment);
            continue;
        }
        // Leading spaces of the text are kept, like a word.
        started = true;
        let gap = match &space {
            Some(space) if layout.used > 0 => space.width,
            _ => 0,
        };
        if layout.used + gap + segment.width <= layout.room() {
            if let (Some(space), true) = (&space, layout.used > 0) {
                layout.put_segment(space);
            }
            layout.put_segment(&segment);
        } else {
            if layout.used > 0 {
                layout.newline();
            }
            if segment.width <= layout.room() {
                layout.put_segment(&segment);
            } else {
                layout.put_broken(&segment);
            }
        }
        space = None;
    }
    finish_lines(layout.lines, &first, &rest)
}

/// Breaks a line wherever it reaches `width` (code: every character counts).
pub(super) fn hard_wrap(
    line: &Line<'_>,
    width: usize,
    first: &str,
    rest: &str,
) -> Vec<Line<'static>> {
    let first = fit_prefix(first, width);
    let rest = fit_prefix(rest, width);
    let mut layout = Layout::new(
        width.saturating_sub(str_width(&first)),
        width.saturating_sub(str_width(&rest)),
    );
    for span in &line.spans {
        layout.put_broken(&Segment {
            pieces: vec![(span.style, span.content.to_string())],
            width: 0,
            space: false,
        });
    }
    finish_lines(layout.lines, &first, &rest)
}

pub(super) fn finish_lines(
    lines: Vec<Vec<Span<'static>>>,
    first: &str,
    rest: &str,
) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .enumerate()
        .map(|(index, spans)| {
            let prefix = if index == 0 { first } else { rest };
            let mut all = Vec::with_capacity(spans.len() + 1);
            all.push(Span::raw(prefix.to_owned()));
            all.extend(spans);
            normalize(all)
        })
        .collect()
}
