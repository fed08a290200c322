//! Line classification for the stream (the parser has the last word where it matters).

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag};

pub(super) fn parse_options() -> pulldown_cmark::Options {
    pulldown_cmark::Options::ENABLE_TABLES
        | pulldown_cmark::Options::ENABLE_STRIKETHROUGH
        | pulldown_cmark::Options::ENABLE_TASKLISTS
}

/// Only spaces and tabs (and a line ending).
pub(super) fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n'))
}

/// Whether a line (its indentation removed) starts with a list item marker: `-`, `+`, `*` or a
/// number and `.` or `)`, then a space, a tab or the line's end. Thematic breaks such as `- - -`
/// pass too, which only makes the scanner more careful.
pub(super) fn is_list_item(line: &str) -> bool {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let marker = match line.as_bytes().first() {
        Some(b'-' | b'+' | b'*') => 1,
        Some(b'0'..=b'9') if digits <= 9 => match line.as_bytes().get(digits) {
            Some(b'.' | b')') => digits + 1,
            _ => return false,
        },
        _ => return false,
    };
    matches!(
        line.as_bytes().get(marker),
        None | Some(b' ' | b'\t' | b'\n')
    )
}

pub(super) fn is_atx_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes)
        && matches!(
            line.as_bytes().get(hashes),
            None | Some(b' ' | b'\t' | b'\n')
        )
}

/// The language token of a fence's info string (`rust` in "rust,ignore title").
pub(super) fn language(info: &str) -> &str {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .find(|word| !word.is_empty())
        .unwrap_or("")
}

/// A code fence: its character and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fence {
    pub(super) marker: u8,
    pub(super) len: usize,
}

impl Fence {
    /// The fence a line opens, if it opens one at the left margin, and its info string.
    pub(super) fn opening(line: &str) -> Option<(Fence, &str)> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let marker = *line.as_bytes().first()?;
        if marker != b'`' && marker != b'~' {
            return None;
        }
        let len = line.bytes().take_while(|&b| b == marker).count();
        let info = line.get(len..)?;
        // A backtick fence's info string cannot hold a backtick (it would be inline code).
        if len < 3 || (marker == b'`' && info.contains('`')) {
            return None;
        }
        Some((Fence { marker, len }, info))
    }

    /// Whether `line` closes this fence: up to three spaces, at least as many markers, then
    /// only spaces and tabs.
    pub(super) fn closed_by(self, line: &str) -> bool {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let indent = line.bytes().take_while(|&b| b == b' ').count();
        let Some(rest) = line.get(indent..) else {
            return false;
        };
        let len = rest.bytes().take_while(|&b| b == self.marker).count();
        indent <= 3 && len >= self.len && rest.bytes().skip(len).all(|b| b == b' ' || b == b'\t')
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Started {
    FencedCode,
    Other,
}

/// The kind of the first top-level block of `text` that starts at byte `from` or later.
pub(super) fn top_level_start(text: &str, from: usize) -> Option<Started> {
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(text, parse_options()).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 && range.start >= from {
                    return Some(match tag {
                        Tag::CodeBlock(CodeBlockKind::Fenced(_)) => Started::FencedCode,
                        _ => Started::Other,
                    });
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Rule if depth == 0 && range.start >= from => return Some(Started::Other),
            _ => {}
        }
    }
    None
}

/// Whether the last top-level block of `text` (which ends with a blank line) is one that a
/// blank line closes for good. Lists, code and HTML blocks can go on after a blank line.
pub(super) fn ends_with_closed_block(text: &str) -> bool {
    let mut depth = 0usize;
    let mut closed = false;
    for event in Parser::new_ext(text, parse_options()) {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    closed = matches!(
                        tag,
                        Tag::Paragraph | Tag::Heading { .. } | Tag::Table(_) | Tag::BlockQuote(_)
                    );
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Rule if depth == 0 => closed = true,
            _ => {}
        }
    }
    closed
}

/// A link label as CommonMark matches it: case-folded, inner whitespace collapsed.
pub(super) fn label_key(label: &str) -> String {
    label
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}
