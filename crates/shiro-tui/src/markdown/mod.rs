//! Markdown for the transcript: CommonMark with GitHub's tables, strikethrough and task lists,
//! rendered to styled lines word-wrapped to the terminal, either whole ([`render`]) or as a
//! model streams it ([`MarkdownStream`]).
//!
//! Streaming cuts the text into top-level chunks at points where nothing that may follow can
//! change what came before: after a paragraph, heading, table or quote and the blank line that
//! ends it; before the first line of a new top-level block once the line has arrived (this is
//! how lists are committed); and line by line inside a fenced code block at the left margin.
//! Each chunk is parsed and rendered once. [`render`] is that same stream fed in one piece, so
//! the scrollback a stream leaves is exactly what [`render`] gives for the whole text.
//!
//! A consequence worth knowing: a reference link (`[text][label]`) resolves against the
//! definitions in its own chunk and in earlier ones, never against a definition further down
//! (that text may already be in the scrollback when the definition arrives).

use ratatui::text::{Line, Span};

use super::highlight::CodeHighlighter;

mod chunk;
mod scan;
mod stream;
mod wrap;

pub use self::stream::MarkdownStream;
use self::{chunk::*, scan::*, stream::*, wrap::*};

/// How to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Colours: inline code and syntax-highlighted code blocks. Without them only modifiers
    /// (bold, italic, underline, dim, crossed out) mark the text, for `NO_COLOR` and dumb
    /// terminals.
    pub color: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { color: true }
    }
}

/// Renders a whole Markdown document, word-wrapped to `width` columns of display width.
///
/// The result is identical to streaming `source` through a [`MarkdownStream`] in any pieces.
pub fn render(source: &str, width: u16, options: Options) -> Vec<Line<'static>> {
    let mut stream = MarkdownStream::new(options);
    stream.push(source);
    stream.finish(width)
}

/// Word-wraps one styled line to `width` columns, keeping each span's style; `indent` is put
/// before every continuation line. Words longer than a line are broken; spaces at a break are
/// dropped; tabs and control characters are replaced, so the text is safe to print. Always
/// returns at least one line.
pub fn wrap(line: &Line<'_>, width: u16, indent: &str) -> Vec<Line<'static>> {
    let spans: Vec<Span<'static>> = line
        .spans
        .iter()
        .map(|span| Span::styled(clean_inline(&span.content), span.style))
        .collect();
    wrap_spans(&spans, usize::from(width), "", indent)
        .into_iter()
        .map(|wrapped| Line {
            style: line.style,
            alignment: line.alignment,
            spans: wrapped.spans,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use insta::assert_snapshot;
    use proptest::prelude::*;
    use ratatui::style::{Color, Modifier, Style};

    use super::*;

    const COLOR: Options = Options { color: true };
    const PLAIN: Options = Options { color: false };

    /// Lines as text; a styled span shows as `«tags|text»` (b bold, i italic, u underlined,
    /// d dim, s crossed out, then the foreground colour).
    fn markup(lines: &[Line<'_>]) -> String {
        let mut out = String::new();
        for line in lines {
            for span in &line.spans {
                if span.style == Style::new() {
                    out.push_str(&span.content);
                } else {
                    out.push_str(&format!("«{}|{}»", tags(span.style), span.content));
                }
            }
            out.push('\n');
        }
        out
    }

    fn tags(style: Style) -> String {
        let mut tags = Vec::new();
        for (modifier, tag) in [
            (Modifier::BOLD, "b"),
            (Modifier::ITALIC, "i"),
            (Modifier::UNDERLINED, "u"),
            (Modifier::DIM, "d"),
            (Modifier::CROSSED_OUT, "s"),
        ] {
            if style.add_modifier.contains(modifier) {
                tags.push(tag.to_owned());
            }
        }
        match style.fg {
            Some(Color::Rgb(r, g, b)) => tags.push(format!("#{r:02x}{g:02x}{b:02x}")),
            Some(color) => tags.push(format!("{color:?}").to_lowercase()),
            None => {}
        }
        assert!(style.bg.is_none(), "no background colours: {style:?}");
        tags.join(",")
    }

    fn check(source: &str, width: u16) -> String {
        markup(&render(source, width, COLOR))
    }

    const DOCUMENT: &str = "\
# Shiro renders Markdown

Some *emphasis*, **strong text**, ~~struck~~ and `inline code`, with a \
[link](https://example.com/docs) and <https://example.com>.

## Lists

- first item
- second item, long enough to wrap when the terminal is narrow
  - nested item
    - deeper still

3. three, keeping its start number
4. four

- [ ] a task to do
- [x] a task done

> A quoted paragraph that also wraps
> onto several lines.

| Column | Right | Centre |
|--------|------:|:------:|
| a | 1 | x |
| longer cell | 22 | yy |

```rust
fn main() {
    println!(\"hello, {}\", 42); // greet
}
```

```zork
plain text in an unknown language
```

---

![a diagram](diagram.png) and a line  
after a hard break.
";

    #[test]
    fn document_at_80_columns() {
        assert_snapshot!(check(DOCUMENT, 80));
    }

    #[test]
    fn document_at_30_columns() {
        assert_snapshot!(check(DOCUMENT, 30));
    }

    #[test]
    fn document_without_colour() {
        assert_snapshot!(markup(&render(DOCUMENT, 60, PLAIN)));
    }

    #[test]
    fn links_show_their_url_unless_it_is_the_text() {
        assert_snapshot!(check("[docs](https://a.b/c), <https://a.b>, [same](same) and <me@a.b>", 80), @"«u|docs»«d| (https://a.b/c)», «u|https://a.b», «u|same» and «u|me@a.b»");
    }

    #[test]
    fn wrapped_list_items_hang_under_their_text() {
        let source = "7. a numbered item with words\n   - [x] a nested task that wraps\n";
        assert_snapshot!(check(source, 18), @r"
        7. a numbered item
           with words
           - [x] a nested
                 task that
                 wraps
        ");
    }

    #[test]
    fn loose_lists_keep_a_blank_line_between_items() {
        assert_snapshot!(check("- one\n\n- two\n- three\n", 80), @r"
        - one

        - two

        - three
        ");
    }

    #[test]
    fn a_table_too_wide_shows_rows_as_cells_with_bars() {
        let source = "| name | description |\n|---|---|\n| shiro | an agent whose changes undo |\n";
        assert_snapshot!(check(source, 24), @r"
        «b|name» | «b|description»
        shiro | an agent whose
          changes undo
        ");
    }

    #[test]
    fn raw_html_and_control_characters_show_as_text() {
        let source = "<div>\n  <b>bold?</b>\n</div>\n\nescape \u{1b}[31m and bell \u{7}\n";
        assert_snapshot!(check(source, 80), @r"
        <div>
          <b>bold?</b>
        </div>

        escape �[31m and bell �
        ");
    }

    #[test]
    fn long_words_and_wide_characters_are_broken_to_fit() {
        // A bare URL is text (CommonMark autolinks need angle brackets).
        assert_snapshot!(check("see https://example.com/a/very/long/path 漢字漢字漢字", 10), @r"
        see
        https://ex
        ample.com/
        a/very/lon
        g/path
        漢字漢字漢
        字
        ");
    }

    #[test]
    fn code_blocks_drop_trailing_blank_lines_and_keep_inner_ones() {
        let source = "```\nfirst\n\n  second\n\n\n```\n\n```\n```\n\nafter\n";
        assert_snapshot!(markup(&render(source, 80, PLAIN)), @r"
        first

          second

        after
        ");
    }

    #[test]
    fn empty_blocks_leave_no_blank_lines() {
        assert_snapshot!(check("# Heading\n\n>\n\n```\n```\n\nText\n\n-\n", 40), @r"
        «b,u|Heading»

        Text

        -
        ");
    }

    /// Boundaries the property tests once got wrong (or caught when the scanner was broken on
    /// purpose): each must render as one parse of the whole text does.
    #[test]
    fn blocks_that_look_closed_but_are_not() {
        for source in [
            "# Heading\n\n>\n",
            "- item one\n\n  a",
            "<div>\n```rust\n\ntext\n",
            "foo\n  ```\n\n```\nbar\n",
            "> ```\n> a\n\n> b\n",
            "- a\n```\n\nfoo\n```\n",
        ] {
            let whole = render_chunk(source, 40, COLOR, &HashMap::new()).0;
            assert_eq!(render(source, 40, COLOR), whole, "{source:?}");
        }
    }

    #[test]
    fn headings_of_level_three_and_below_are_bold_only() {
        assert_snapshot!(check("### Third\nSetext\n---\n", 80), @r"
        «b|Third»

        «b,u|Setext»
        ");
    }

    #[test]
    fn reference_links_resolve_against_earlier_definitions_only() {
        let source = "[early]: https://early.example\n\n[early] and [late]\n\n[late]: https://late.example\n";
        assert_snapshot!(check(source, 80), @"«u|early»«d| (https://early.example)» and [late]");
    }

    #[test]
    fn wrap_keeps_styles_and_indents_continuations() {
        let line = Line::from(vec![
            Span::raw("plain words then "),
            Span::styled("bold words", Style::new().add_modifier(Modifier::BOLD)),
        ]);
        assert_snapshot!(markup(&wrap(&line, 12, "> ")), @r"
        plain words
        > then «b|bold»
        > «b|words»
        ");
        assert_eq!(wrap(&Line::default(), 0, "  "), vec![Line::default()]);
    }

    // Streaming.

    fn stream_markup(stream: &mut MarkdownStream, delta: &str) -> (String, String) {
        stream.push(delta);
        let committed = markup(&stream.take_committed(40));
        (committed, markup(&stream.live(40)))
    }

    #[test]
    fn a_paragraph_commits_at_the_blank_line_that_ends_it() {
        let mut stream = MarkdownStream::new(PLAIN);
        let step = stream_markup(&mut stream, "First para");
        assert_eq!(step, (String::new(), "First para\n".to_owned()));
        let step = stream_markup(&mut stream, "graph.\n");
        assert_eq!(step, (String::new(), "First paragraph.\n".to_owned()));
        let step = stream_markup(&mut stream, "\nSecond");
        assert_eq!(
            step,
            ("First paragraph.\n".to_owned(), "\nSecond\n".to_owned())
        );
        assert_eq!(markup(&stream.finish(40)), "\nSecond\n");
        assert_eq!(stream.source(), "First paragraph.\n\nSecond");
    }

    #[test]
    fn a_list_waits_for_the_block_after_it() {
        let mut stream = MarkdownStream::new(PLAIN);
        // Another item or an indented paragraph may still follow and make the list loose.
        let (committed, live) = stream_markup(&mut stream, "- one\n- two\n\n");
        assert_eq!((committed.as_str(), live.as_str()), ("", "- one\n- two\n"));
        let (committed, live) = stream_markup(&mut stream, "  more of two\n\nAfter");
        assert_eq!(committed, "");
        assert_eq!(live, "- one\n\n- two\n\n  more of two\n\nAfter\n");
        let (committed, live) = stream_markup(&mut stream, " the list\n");
        assert_eq!(committed, "- one\n\n- two\n\n  more of two\n");
        assert_eq!(live, "\nAfter the list\n");
    }

    #[test]
    fn fenced_code_commits_line_by_line() {
        let mut stream = MarkdownStream::new(PLAIN);
        let step = stream_markup(&mut stream, "Intro\n\n```rust\nfn a() {}\n");
        assert_eq!(step, ("Intro\n\nfn a() {}\n".to_owned(), String::new()));
        // Blank lines wait: a block does not end with them.
        let step = stream_markup(&mut stream, "\n\nlet x");
        assert_eq!(step, (String::new(), "\n\nlet x\n".to_owned()));
        let step = stream_markup(&mut stream, " = 1;\n\n```\nOutro");
        assert_eq!(
            step,
            ("\n\nlet x = 1;\n".to_owned(), "\nOutro\n".to_owned())
        );
        assert_eq!(markup(&stream.finish(40)), "\nOutro\n");
    }

    #[test]
    fn carriage_returns_split_across_pushes_make_one_line_ending() {
        let mut stream = MarkdownStream::new(PLAIN);
        for delta in ["a\r", "\nb\r", "\r\n", "c\rd"] {
            stream.push(delta);
        }
        assert_eq!(stream.source(), "a\nb\n\nc\nd");
        assert_eq!(render("a\r\nb\r\r\nc\rd", 40, PLAIN), stream.finish(40));
    }

    /// Splits `text` at the given fractions of its length (on character boundaries).
    fn split(text: &str, cuts: &[prop::sample::Index]) -> Vec<String> {
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let mut points: Vec<usize> = cuts
            .iter()
            .filter_map(|cut| {
                let index = cut.index(boundaries.len().max(1));
                boundaries.get(index).copied()
            })
            .collect();
        points.push(0);
        points.push(text.len());
        points.sort_unstable();
        points.dedup();
        points
            .windows(2)
            .map(|pair| text[pair[0]..pair[1]].to_owned())
            .collect()
    }

    #[test]
    fn the_live_tail_stays_short_over_a_long_answer() {
        let mut answer = String::new();
        for step in 0..60 {
            answer.push_str(&format!(
                "## Step {step}\n\nRun the build and read what it says; this paragraph is \
                 long enough to wrap over a few lines of a narrow terminal.\n\n```sh\n\
                 cargo build\ncargo test -p shiro-cli\n```\n\n- check one\n- check two\n\n\
                 > a note\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            ));
        }
        let mut stream = MarkdownStream::new(COLOR);
        let mut lines = Vec::new();
        let (mut longest_tail, mut tallest_live) = (0, 0);
        // Model tokens: a word and the space or line ending after it.
        for token in answer.split_inclusive([' ', '\n']) {
            stream.push(token);
            lines.extend(stream.take_committed(40));
            longest_tail = longest_tail.max(stream.uncommitted_len());
            tallest_live = tallest_live.max(stream.live(40).len());
        }
        let rest = stream.finish(40);
        assert!(
            longest_tail <= 150,
            "uncommitted text grew to {longest_tail} bytes"
        );
        assert!(tallest_live <= 5, "live tail grew to {tallest_live} lines");
        assert!(rest.len() <= 5, "{} lines left for finish", rest.len());
        lines.extend(rest);
        assert_eq!(lines, render(&answer, 40, COLOR));
    }

    /// Markdown pieces that interact across blocks: containers, fences, lazy lines, setext
    /// underlines, table rows, HTML, and lines without an ending.
    const FRAGMENTS: &[&str] = &[
        "Plain words in a paragraph.\n",
        "A *second* line with **bold**, ~~struck~~ and `code`.\n",
        "\n",
        "\n\n",
        "# Heading\n",
        "Setext heading\n",
        "===\n",
        "---\n",
        "***\n",
        "- item one\n",
        "- item two\n",
        "  continued under the item\n",
        "  - nested item\n",
        "1. first\n",
        "2) second\n",
        "* star item\n",
        "- [ ] task\n",
        "> quoted\n",
        "> > deeper quote\n",
        ">\n",
        "lazy continuation\n",
        "```rust\n",
        "```\n",
        "~~~\n",
        "````\n",
        "  ```py\n",
        "fn main() {}\n",
        "    indented code\n",
        "\tafter a tab\n",
        "| a | b |\n",
        "|---|:-:|\n",
        "| 1 | 2 |\n",
        "<div>\n",
        "<!-- comment\n",
        "-->\n",
        "[link](http://x.y) and <http://auto.link>\n",
        "wide 漢字 and emoji 🦀 text\n",
        "no line ending",
        "- ```\n",
        "> ```\n",
        "\r\n",
    ];

    fn document(extra: &'static [&'static str]) -> impl Strategy<Value = String> {
        let fragment = prop_oneof![
            4 => prop::sample::select(FRAGMENTS).prop_map(str::to_owned),
            1 => prop::sample::select(extra).prop_map(str::to_owned),
            1 => "[a-z #>*`|~_=-]{0,12}\n",
            // Lines that may open, continue or close any block (no `:`, so no link definitions).
            3 => "[ ]{0,5}[-*+>#`~|0-9.)a-z<!\\[\\]=]{0,6}[ a-z`*_<>/-]{0,8}\n?",
            1 => "[ \t]{0,3}\n",
        ];
        prop::collection::vec(fragment, 0..16).prop_map(|parts| parts.concat())
    }

    /// Reference links, whose definitions a stream applies only forwards.
    const REFERENCES: &[&str] = &["[ref]: http://ref.example\n", "see [ref] here\n"];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The key invariant: however the text is split, the committed lines followed by
        /// `finish` are `render` of the whole, and at every step the committed lines followed
        /// by `live` are `render` of the text so far.
        #[test]
        fn streaming_in_any_pieces_matches_render(
            source in document(REFERENCES),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..24),
            width in 0u16..100,
            color in any::<bool>(),
        ) {
            let options = Options { color };
            let mut stream = MarkdownStream::new(options);
            let mut committed = Vec::new();
            for delta in split(&source, &cuts) {
                stream.push(&delta);
                committed.extend(stream.take_committed(width));
                let mut shown = committed.clone();
                shown.extend(stream.live(width));
                prop_assert_eq!(&shown, &render(stream.source(), width, options));
            }
            committed.extend(stream.finish(width));
            prop_assert_eq!(committed, render(&source, width, options));
        }

        /// Committing early is safe: rendering chunk by chunk gives what one parse of the
        /// whole text gives (for text without reference links).
        #[test]
        fn chunks_render_as_the_whole_document_does(
            source in document(&["Trailing words\n"]),
            width in 10u16..100,
        ) {
            let whole = render_chunk(&source.replace("\r\n", "\n"), usize::from(width), COLOR, &HashMap::new()).0;
            prop_assert_eq!(render(&source, width, COLOR), whole);
        }
    }

    fn tricky_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            prop::sample::select(
                &[
                    "a",
                    "word ",
                    " ",
                    "   ",
                    "\t",
                    "\n",
                    "\n\n",
                    "漢",
                    "字 ",
                    "🦀",
                    "❤\u{FE0F}",
                    "e\u{301}",
                    "\u{200D}",
                    "\u{1b}[31m",
                    "\u{0}",
                    "\r",
                    "- ",
                    "1. ",
                    "> ",
                    "```\n",
                    "|a|b|\n|-|-|\n",
                    "`",
                    "*",
                    "**",
                    "# ",
                    "[x] ",
                    "    ",
                    "<br>",
                    "---\n",
                    "https://example.com/long/path",
                ][..]
            )
            .prop_map(str::to_owned),
            any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn tiny_widths_never_panic(
            text in prop_oneof![tricky_text(), any::<String>()],
            width in 0u16..=4,
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            render(&text, width, COLOR);
            wrap(&Line::from(text.clone()), width, "    ");
            let mut stream = MarkdownStream::new(PLAIN);
            for delta in split(&text, &cuts) {
                stream.push(&delta);
                stream.take_committed(width);
                stream.live(width);
            }
            stream.finish(width);
        }

        #[test]
        fn every_line_fits_its_width(text in tricky_text(), width in 2u16..=40) {
            let lines = render(&text, width, COLOR)
                .into_iter()
                .chain(wrap(&Line::from(text.clone()), width, "  > "));
            for line in lines {
                prop_assert!(line.width() <= usize::from(width), "{:?} is wider than {}", line, width);
            }
        }
    }
}
