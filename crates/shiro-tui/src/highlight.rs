//! Syntax highlighting of code, one line at a time, with syntect's default syntaxes and the
//! `base16-ocean.dark` theme.
//!
//! The syntaxes and the theme load once, on first use, and are shared by every highlighter.
//! Lines come out safe to print: tabs are expanded, control characters replaced, trailing
//! whitespace dropped, and no background colour is ever set.

use std::sync::LazyLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::highlighting::{
    FontStyle, HighlightIterator, HighlightState, Highlighter, Theme, ThemeSet,
};
use syntect::parsing::{ParseState, ScopeStack, SyntaxSet};

static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);
static THEME: LazyLock<Option<Theme>> =
    LazyLock::new(|| ThemeSet::load_defaults().themes.remove("base16-ocean.dark"));
static HIGHLIGHTER: LazyLock<Option<Highlighter<'static>>> =
    LazyLock::new(|| THEME.as_ref().map(Highlighter::new));

/// Lines longer than this (in bytes) are shown plain: syntect's backtracking regexes can take
/// seconds on a minified file, and such a line is unreadable in a terminal anyway.
const MAX_HIGHLIGHTED_LINE: usize = 4096;

/// Columns between tab stops when a tab in code is expanded to spaces.
const TAB_STOP: usize = 4;

/// Highlights the lines of one code block in order, carrying the parser's state from line to
/// line (a string or comment may span lines). Cloning it forks that state, so a caller can
/// highlight a line that is still being typed without disturbing the block.
#[derive(Clone, Debug)]
pub struct CodeHighlighter {
    state: Option<(ParseState, HighlightState)>,
}

impl CodeHighlighter {
    /// A highlighter for code in `language` (a Markdown fence's info token such as `rust`, `py`
    /// or `sh`). An unknown language, or `color == false`, gives plain text.
    pub fn new(language: &str, color: bool) -> Self {
        let state = if color && !language.is_empty() {
            let syntax = SYNTAXES.find_syntax_by_token(language);
            syntax
                .zip(HIGHLIGHTER.as_ref())
                .map(|(syntax, highlighter)| {
                    (
                        ParseState::new(syntax),
                        HighlightState::new(highlighter, ScopeStack::new()),
                    )
                })
        } else {
            None
        };
        CodeHighlighter { state }
    }

    /// Highlights the next line of the block; `text` holds no line ending.
    pub fn line(&mut self, text: &str) -> Line<'static> {
        let pieces = match self.highlight(text) {
            Some(pieces) => pieces,
            None => vec![(Style::new(), text.to_owned())],
        };
        clean_code_line(pieces)
    }

    fn highlight(&mut self, text: &str) -> Option<Vec<(Style, String)>> {
        let (parse, highlight) = self.state.as_mut()?;
        if text.len() > MAX_HIGHLIGHTED_LINE {
            return None;
        }
        let highlighter = HIGHLIGHTER.as_ref()?;
        // The syntaxes are the "newlines" set: they expect each line to end with one.
        let with_newline = format!("{text}\n");
        let Ok(ops) = parse.parse_line(&with_newline, &SYNTAXES) else {
            // A grammar that fails once cannot be trusted for the rest of the block.
            self.state = None;
            return None;
        };
        let default_fg = THEME.as_ref().and_then(|theme| theme.settings.foreground);
        let pieces = HighlightIterator::new(highlight, &ops, &with_newline, highlighter)
            .map(|(style, piece)| {
                let piece = piece.strip_suffix('\n').unwrap_or(piece);
                (to_ratatui(style, default_fg), piece.to_owned())
            })
            .collect();
        Some(pieces)
    }
}

/// A syntect style as a ratatui one: the foreground (unless it is the theme's default text
/// colour, which is left to the terminal so plain code reads well on light backgrounds too)
/// and the font style; never the background.
fn to_ratatui(
    style: syntect::highlighting::Style,
    default_fg: Option<syntect::highlighting::Color>,
) -> Style {
    let mut out = Style::new();
    let fg = style.foreground;
    if Some(fg) != default_fg {
        out = out.fg(Color::Rgb(fg.r, fg.g, fg.b));
    }
    for (font, modifier) in [
        (FontStyle::BOLD, Modifier::BOLD),
        (FontStyle::ITALIC, Modifier::ITALIC),
        (FontStyle::UNDERLINE, Modifier::UNDERLINED),
    ] {
        if style.font_style.contains(font) {
            out = out.add_modifier(modifier);
        }
    }
    out
}

/// Expands tabs to the next tab stop, replaces control characters, drops trailing whitespace
/// and merges neighbouring pieces of the same style.
fn clean_code_line(pieces: Vec<(Style, String)>) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut column = 0;
    for (style, piece) in pieces {
        let mut text = String::with_capacity(piece.len());
        for c in piece.chars() {
            if c == '\t' {
                let spaces = TAB_STOP - column % TAB_STOP;
                text.extend(std::iter::repeat_n(' ', spaces));
                column += spaces;
            } else {
                let c = if c.is_control() { '\u{FFFD}' } else { c };
                text.push(c);
                column += 1;
            }
        }
        match spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(&text),
            _ => spans.push(Span::styled(text, style)),
        }
    }
    while let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end().len();
        if trimmed == 0 {
            spans.pop();
        } else {
            last.content.to_mut().truncate(trimmed);
            break;
        }
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &Line<'_>) -> String {
        line.spans
            .iter()
            .map(|span| span.content.as_ref())
            .collect()
    }

    #[test]
    fn rust_is_coloured_and_plain_languages_are_not() {
        let mut rust = CodeHighlighter::new("rust", true);
        let line = rust.line("fn main() {}");
        assert_eq!(text(&line), "fn main() {}");
        assert!(
            line.spans.iter().any(|span| span.style.fg.is_some()),
            "{line:?}"
        );
        assert!(line.spans.iter().all(|span| span.style.bg.is_none()));

        let mut unknown = CodeHighlighter::new("no-such-language", true);
        let line = unknown.line("fn main() {}");
        assert_eq!(line, Line::from(vec![Span::raw("fn main() {}")]));

        let mut monochrome = CodeHighlighter::new("rust", false);
        assert_eq!(monochrome.line("fn main() {}").spans.len(), 1);
    }

    #[test]
    fn state_carries_across_lines() {
        let mut python = CodeHighlighter::new("py", true);
        python.line("x = \"\"\"start of a string");
        let inside = python.line("def not_a_function():");
        let mut fresh = CodeHighlighter::new("py", true);
        let outside = fresh.line("def not_a_function():");
        assert_ne!(inside, outside);
    }

    #[test]
    fn tabs_controls_and_trailing_space_are_cleaned() {
        let mut plain = CodeHighlighter::new("", true);
        assert_eq!(text(&plain.line("a\tb\u{1b}[31m  \t")), "a   b\u{FFFD}[31m");
        assert_eq!(plain.line("   ").spans.len(), 0);
    }
}
