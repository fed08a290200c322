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

use std::collections::HashMap;
use std::ops::Range;

use pulldown_cmark::{Alignment, BrokenLink, CodeBlockKind, CowStr, Event, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use super::highlight::CodeHighlighter;

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

// ---------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------

/// Markdown that arrives in pieces (model tokens), rendered as it comes.
///
/// After each [`push`](Self::push), [`take_committed`](Self::take_committed) hands out the lines
/// of the blocks that can no longer change (they belong in the terminal's scrollback) and
/// [`live`](Self::live) renders the rest as it stands (redrawn each frame below them). The
/// committed lines followed by [`finish`](Self::finish) are exactly [`render`] of the whole
/// text, however it was split. `push` and `take_committed` cost in proportion to the new text
/// and the block still open; committed text is never parsed again.
#[derive(Debug)]
pub struct MarkdownStream {
    options: Options,
    /// Everything pushed so far, line endings normalised to `\n`.
    source: String,
    /// The last push ended with `\r` (stored as `\n`), so a `\n` opening the next is its pair.
    carriage_return: bool,
    /// Where the text not yet committed starts.
    tail: usize,
    /// End of the complete lines already scanned.
    scanned: usize,
    /// End of the text already searched for a line ending (a long line arrives in many pushes).
    searched: usize,
    scan: Scan,
    /// Committed but not yet handed out by `take_committed`.
    queue: Vec<Committed>,
    /// Link reference definitions of the chunks handed out, by normalised label.
    links: HashMap<String, LinkTarget>,
    /// Some line has been handed out, so the next block begins with a blank line.
    emitted: bool,
}

/// What the scanner knows about the uncommitted text.
#[derive(Debug)]
enum Scan {
    /// Ordinary Markdown.
    Flow {
        /// How the uncommitted text opens; `None` while it holds only blank lines.
        lead: Option<Lead>,
        /// The last complete line was blank.
        after_blank: bool,
    },
    /// Inside a fenced code block that opened at the left margin of a fresh block.
    Fence(FencedCode),
}

impl Scan {
    fn fresh() -> Self {
        Scan::Flow {
            lead: None,
            after_blank: false,
        }
    }
}

/// The first line of the uncommitted text, which tells which checks can succeed. Skipping a
/// check only commits later, so these are cheap guesses that keep a long list or a long code
/// block from being parsed again at each of its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    /// A list item: a blank line does not close a list, and a line with another item marker
    /// most likely continues it.
    List,
    /// Code or HTML, which run past blank lines.
    Open,
    /// Anything else (a paragraph, heading, table, quote), which a blank line may close.
    Closable,
}

impl Lead {
    fn of(line: &str) -> Lead {
        let indent = line.bytes().take_while(|&b| b == b' ').count();
        let rest = line.get(indent..).unwrap_or("");
        if indent >= 4 || rest.starts_with(['\t', '<']) || Fence::opening(rest).is_some() {
            Lead::Open
        } else if is_list_item(rest) {
            Lead::List
        } else {
            Lead::Closable
        }
    }
}

#[derive(Debug)]
enum Committed {
    /// Top-level blocks, rendered together.
    Chunk(Range<usize>),
    /// One line of a fenced code block; `first` when it is the block's first line.
    Code { line: Line<'static>, first: bool },
}

#[derive(Debug, Clone)]
struct LinkTarget {
    url: String,
    title: String,
}

/// A fenced code block whose lines are committed as they complete.
#[derive(Debug)]
struct FencedCode {
    fence: Fence,
    highlighter: CodeHighlighter,
    /// Start of a run of blank lines not yet committed: they are dropped if the block ends
    /// with them, as [`code_lines`] drops a block's trailing blank lines.
    held: Option<usize>,
    /// A line of this block has been committed.
    started: bool,
}

impl FencedCode {
    fn open(line: &str, options: Options) -> Option<Self> {
        let (fence, info) = Fence::opening(line)?;
        Some(FencedCode {
            fence,
            highlighter: CodeHighlighter::new(language(info), options.color),
            held: None,
            started: false,
        })
    }

    /// Takes the content line `source[start..end]` (without its line ending).
    fn line(&mut self, source: &str, start: usize, end: usize, queue: &mut Vec<Committed>) {
        let Some(text) = source.get(start..end) else {
            return;
        };
        if is_blank(text) {
            self.held.get_or_insert(start);
            return;
        }
        if let Some(from) = self.held.take() {
            for blank in source.get(from..start).unwrap_or("").split_terminator('\n') {
                self.commit(blank, queue);
            }
        }
        self.commit(text, queue);
    }

    fn commit(&mut self, text: &str, queue: &mut Vec<Committed>) {
        queue.push(Committed::Code {
            line: self.highlighter.line(text),
            first: !self.started,
        });
        self.started = true;
    }
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new(options: Options) -> Self {
        MarkdownStream {
            options,
            source: String::new(),
            carriage_return: false,
            tail: 0,
            scanned: 0,
            searched: 0,
            scan: Scan::fresh(),
            queue: Vec::new(),
            links: HashMap::new(),
            emitted: false,
        }
    }

    /// Appends a piece of the text. Costs the scan of the new text, plus a parse of the open
    /// block at a line that may close it.
    pub fn push(&mut self, delta: &str) {
        let mut delta = delta;
        if self.carriage_return {
            self.carriage_return = false;
            delta = delta.strip_prefix('\n').unwrap_or(delta);
        }
        if delta.contains('\r') {
            let mut chars = delta.chars().peekable();
            while let Some(c) = chars.next() {
                if c != '\r' {
                    self.source.push(c);
                    continue;
                }
                self.source.push('\n');
                match chars.peek() {
                    Some('\n') => {
                        chars.next();
                    }
                    None => self.carriage_return = true,
                    Some(_) => {}
                }
            }
        } else {
            self.source.push_str(delta);
        }
        while let Some(offset) = self.source.get(self.searched..).and_then(|s| s.find('\n')) {
            let start = self.scanned;
            let end = self.searched + offset + 1;
            self.scanned = end;
            self.searched = end;
            self.scan_line(start, end);
        }
        self.searched = self.source.len();
    }

    /// The lines of the blocks committed since the last call: final, for the scrollback.
    pub fn take_committed(&mut self, width: u16) -> Vec<Line<'static>> {
        let width = usize::from(width);
        let mut out = Vec::new();
        for committed in std::mem::take(&mut self.queue) {
            let (lines, starts_block) = match committed {
                Committed::Chunk(range) => {
                    let text = self.source.get(range).unwrap_or("");
                    let (lines, links) = render_chunk(text, width, self.options, &self.links);
                    for (label, target) in links {
                        // As in CommonMark, the first definition of a label wins.
                        self.links.entry(label).or_insert(target);
                    }
                    (lines, true)
                }
                Committed::Code { line, first } => (hard_wrap(&line, width, "", ""), first),
            };
            if lines.is_empty() {
                continue;
            }
            if starts_block && self.emitted {
                out.push(Line::default());
            }
            self.emitted = true;
            out.extend(lines);
        }
        out
    }

    /// The text not yet committed, rendered as it stands (with the blank line that will
    /// separate it from the committed text). Call [`take_committed`](Self::take_committed)
    /// first: then the committed lines followed by these are [`render`] of the text so far.
    pub fn live(&self, width: u16) -> Vec<Line<'static>> {
        let before = self.emitted || !self.queue.is_empty();
        let (lines, separate) = match &self.scan {
            Scan::Flow { .. } => {
                let text = self.source.get(self.tail..).unwrap_or("");
                let (lines, _) = render_chunk(text, usize::from(width), self.options, &self.links);
                (lines, before)
            }
            Scan::Fence(code) => {
                let partial = self.source.get(self.scanned..).unwrap_or("");
                if is_blank(partial) || code.fence.closed_by(partial) {
                    return Vec::new();
                }
                let mut highlighter = code.highlighter.clone();
                let held = code
                    .held
                    .and_then(|from| self.source.get(from..self.scanned));
                let lines = held
                    .unwrap_or("")
                    .split_terminator('\n')
                    .chain([partial])
                    .flat_map(|text| hard_wrap(&highlighter.line(text), usize::from(width), "", ""))
                    .collect();
                (lines, before && !code.started)
            }
        };
        if separate && !lines.is_empty() {
            std::iter::once(Line::default()).chain(lines).collect()
        } else {
            lines
        }
    }

    /// Ends the stream: the lines of everything not yet handed out. The stream is then empty
    /// of open blocks; text pushed afterwards starts a new block.
    pub fn finish(&mut self, width: u16) -> Vec<Line<'static>> {
        self.carriage_return = false;
        let end = self.source.len();
        match std::mem::replace(&mut self.scan, Scan::fresh()) {
            Scan::Flow { .. } => self.commit(end),
            Scan::Fence(mut code) => {
                let partial = self.source.get(self.scanned..).unwrap_or("");
                if !code.fence.closed_by(partial) {
                    code.line(&self.source, self.scanned, end, &mut self.queue);
                }
                self.tail = end;
            }
        }
        self.scanned = end;
        self.searched = end;
        self.take_committed(width)
    }

    /// The text pushed so far, with line endings normalised to `\n`.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn commit(&mut self, end: usize) {
        if end > self.tail {
            self.queue.push(Committed::Chunk(self.tail..end));
            self.tail = end;
        }
    }

    /// Takes the complete line `source[start..end]` (with its `\n`).
    fn scan_line(&mut self, start: usize, end: usize) {
        let content_end = end.saturating_sub(1);
        match &mut self.scan {
            Scan::Fence(code) => {
                let line = self.source.get(start..end).unwrap_or("");
                if code.fence.closed_by(line) {
                    self.tail = end;
                    self.scan = Scan::fresh();
                } else {
                    code.line(&self.source, start, content_end, &mut self.queue);
                }
            }
            Scan::Flow { lead, after_blank } => {
                let (lead, after_blank) = (*lead, *after_blank);
                self.scan_flow(start, end, lead, after_blank);
            }
        }
    }

    fn scan_flow(&mut self, start: usize, end: usize, lead: Option<Lead>, after_blank: bool) {
        let line = self.source.get(start..end).unwrap_or("");
        let blank = is_blank(line);
        let Some(lead) = lead else {
            if blank {
                self.scan = Scan::Flow {
                    lead: None,
                    after_blank: true,
                };
                return;
            }
            // Blank lines before a block render as nothing; the block starts fresh here.
            self.tail = start;
            self.scan = match FencedCode::open(line, self.options) {
                Some(code) => Scan::Fence(code),
                None => Scan::Flow {
                    lead: Some(Lead::of(line)),
                    after_blank: false,
                },
            };
            return;
        };
        let tail = self.source.get(self.tail..end).unwrap_or("");
        if blank {
            // The first blank line after a paragraph, heading, table or quote closes it, and
            // nothing after a blank line can reach back into it.
            if !after_blank && lead == Lead::Closable && ends_with_closed_block(tail) {
                self.commit(end);
                self.scan = Scan::fresh();
            } else {
                self.scan = Scan::Flow {
                    lead: Some(lead),
                    after_blank: true,
                };
            }
            return;
        }
        self.scan = Scan::Flow {
            lead: Some(lead),
            after_blank: false,
        };
        // A line at the margin after a blank line, or one that opens a fence or a heading, may
        // start a new top-level block; the parser confirms it, and then everything before the
        // line is closed for good.
        let at_margin = !line.starts_with([' ', '\t']);
        let opens_fence = Fence::opening(line).is_some();
        let may_start = after_blank || opens_fence || is_atx_heading(line);
        if !at_margin || !may_start || (lead == Lead::List && is_list_item(line)) {
            return;
        }
        let Some(started) = top_level_start(tail, start.saturating_sub(self.tail)) else {
            return;
        };
        let next = match started {
            Started::FencedCode => FencedCode::open(line, self.options).map(Scan::Fence),
            Started::Other => None,
        };
        let next = next.unwrap_or(Scan::Flow {
            lead: Some(Lead::of(line)),
            after_blank: false,
        });
        self.commit(start);
        self.scan = next;
    }

    #[cfg(test)]
    fn uncommitted_len(&self) -> usize {
        self.source.len() - self.tail
    }
}

// ---------------------------------------------------------------------------------------------
// Line classification for the stream (the parser has the last word where it matters)
// ---------------------------------------------------------------------------------------------

fn parse_options() -> pulldown_cmark::Options {
    pulldown_cmark::Options::ENABLE_TABLES
        | pulldown_cmark::Options::ENABLE_STRIKETHROUGH
        | pulldown_cmark::Options::ENABLE_TASKLISTS
}

/// Only spaces and tabs (and a line ending).
fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n'))
}

/// Whether a line (its indentation removed) starts with a list item marker: `-`, `+`, `*` or a
/// number and `.` or `)`, then a space, a tab or the line's end. Thematic breaks such as `- - -`
/// pass too, which only makes the scanner more careful.
fn is_list_item(line: &str) -> bool {
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

fn is_atx_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes)
        && matches!(
            line.as_bytes().get(hashes),
            None | Some(b' ' | b'\t' | b'\n')
        )
}

/// The language token of a fence's info string (`rust` in "rust,ignore title").
fn language(info: &str) -> &str {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .find(|word| !word.is_empty())
        .unwrap_or("")
}

/// A code fence: its character and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence {
    marker: u8,
    len: usize,
}

impl Fence {
    /// The fence a line opens, if it opens one at the left margin, and its info string.
    fn opening(line: &str) -> Option<(Fence, &str)> {
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
    fn closed_by(self, line: &str) -> bool {
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
enum Started {
    FencedCode,
    Other,
}

/// The kind of the first top-level block of `text` that starts at byte `from` or later.
fn top_level_start(text: &str, from: usize) -> Option<Started> {
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
fn ends_with_closed_block(text: &str) -> bool {
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
fn label_key(label: &str) -> String {
    label
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

// ---------------------------------------------------------------------------------------------
// Rendering one chunk
// ---------------------------------------------------------------------------------------------

/// Renders `text` (whole top-level blocks) and returns its lines and the link reference
/// definitions it holds. `links` resolves references to definitions in earlier chunks.
fn render_chunk(
    text: &str,
    width: usize,
    options: Options,
    links: &HashMap<String, LinkTarget>,
) -> (Vec<Line<'static>>, Vec<(String, LinkTarget)>) {
    let earlier = |link: BrokenLink<'_>| {
        links.get(&label_key(&link.reference)).map(|target| {
            (
                CowStr::from(target.url.clone()),
                CowStr::from(target.title.clone()),
            )
        })
    };
    let mut parser = Parser::new_with_broken_link_callback(text, parse_options(), Some(earlier));
    let events: Vec<Event<'_>> = parser.by_ref().collect();
    let definitions = parser
        .reference_definitions()
        .iter()
        .map(|(label, definition)| {
            let target = LinkTarget {
                url: definition.dest.to_string(),
                title: definition.title.as_deref().unwrap_or("").to_owned(),
            };
            (label_key(label), target)
        })
        .collect();
    let mut renderer = Renderer::new(width, options, loose_lists(&events));
    for event in events {
        renderer.event(event);
    }
    (renderer.finish(), definitions)
}

/// For each list, in the order they start, whether it is loose (its items hold paragraphs,
/// which the parser emits only for loose lists).
fn loose_lists(events: &[Event<'_>]) -> Vec<bool> {
    enum Frame {
        List(usize),
        Item(usize),
        Other,
    }
    let mut loose = Vec::new();
    let mut stack = Vec::new();
    for event in events {
        match event {
            Event::Start(tag) => {
                let frame = match (tag, stack.last()) {
                    (Tag::List(_), _) => {
                        loose.push(false);
                        Frame::List(loose.len() - 1)
                    }
                    (Tag::Item, Some(Frame::List(list))) => Frame::Item(*list),
                    (Tag::Paragraph, Some(Frame::Item(list))) => {
                        if let Some(flag) = loose.get_mut(*list) {
                            *flag = true;
                        }
                        Frame::Other
                    }
                    _ => Frame::Other,
                };
                stack.push(frame);
            }
            Event::End(_) => {
                stack.pop();
            }
            _ => {}
        }
    }
    loose
}

/// A block that indents what it holds.
#[derive(Debug)]
enum Container {
    Quote,
    /// A list item: its marker (`- `, `3. `, `- [x] `) goes on its first line, and the lines
    /// after hang under the text.
    Item {
        marker: String,
        used: bool,
    },
}

#[derive(Debug)]
struct List {
    /// The number of the next item of an ordered list.
    next: Option<u64>,
    loose: bool,
    /// Items started so far.
    items: usize,
}

#[derive(Debug)]
struct Table {
    alignments: Vec<Alignment>,
    head: Option<Vec<Vec<Span<'static>>>>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
    row: Vec<Vec<Span<'static>>>,
}

/// An open link: its destination and the text shown for it so far.
#[derive(Debug)]
struct OpenLink {
    url: String,
    text: String,
}

/// Turns parser events into lines.
#[derive(Debug)]
struct Renderer {
    width: usize,
    options: Options,
    out: Vec<Line<'static>>,
    /// A block ended: the next line shown comes after a blank line.
    blank: bool,
    containers: Vec<Container>,
    /// Inline styles in force (emphasis, links, a heading, a quote), applied in order.
    styles: Vec<Style>,
    /// The text block being built, one entry per hard line break.
    inline: Vec<Vec<Span<'static>>>,
    links: Vec<OpenLink>,
    lists: Vec<List>,
    loose: std::vec::IntoIter<bool>,
    /// An open code block: its language and text.
    code: Option<(String, String)>,
    html: Option<String>,
    table: Option<Table>,
}

/// The longest horizontal rule, in columns.
const RULE_MAX: usize = 80;

impl Renderer {
    fn new(width: usize, options: Options, loose: Vec<bool>) -> Self {
        Renderer {
            width,
            options,
            out: Vec::new(),
            blank: false,
            containers: Vec::new(),
            styles: Vec::new(),
            inline: Vec::new(),
            links: Vec::new(),
            lists: Vec::new(),
            loose: loose.into_iter(),
            code: None,
            html: None,
            table: None,
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.flush_inline();
        self.out
    }

    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::new(), |acc, style| acc.patch(*style))
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                if let Some((_, code)) = &mut self.code {
                    code.push_str(&text);
                } else if let Some(html) = &mut self.html {
                    html.push_str(&text);
                } else {
                    self.push_inline(&text, self.style());
                }
            }
            Event::Code(code) => {
                let style = if self.options.color {
                    self.style().fg(Color::Cyan)
                } else {
                    self.style()
                };
                self.push_inline(&code, style);
            }
            Event::Html(html) | Event::InlineHtml(html) => match &mut self.html {
                Some(block) => block.push_str(&html),
                None => self.push_inline(&html, self.style()),
            },
            Event::InlineMath(math) | Event::DisplayMath(math) => {
                self.push_inline(&math, self.style());
            }
            Event::FootnoteReference(label) => {
                self.push_inline(&format!("[^{label}]"), self.style());
            }
            Event::SoftBreak => self.push_inline(" ", self.style()),
            Event::HardBreak => {
                if self.inline.is_empty() {
                    self.inline.push(Vec::new());
                }
                self.inline.push(Vec::new());
            }
            Event::Rule => self.rule(),
            Event::TaskListMarker(done) => self.task(done),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                let mut style = Style::new().add_modifier(Modifier::BOLD);
                if level <= pulldown_cmark::HeadingLevel::H2 {
                    style = style.add_modifier(Modifier::UNDERLINED);
                }
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.containers.push(Container::Quote);
                self.styles
                    .push(Style::new().add_modifier(Modifier::DIM | Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                let language = match &kind {
                    CodeBlockKind::Fenced(info) => language(info).to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((language, String::new()));
            }
            Tag::HtmlBlock => {
                self.start_block();
                self.html = Some(String::new());
            }
            Tag::List(first) => {
                self.start_block();
                let loose = self.loose.next().unwrap_or(false);
                self.lists.push(List {
                    next: first,
                    loose,
                    items: 0,
                });
            }
            Tag::Item => {
                self.flush_inline();
                let mut number = None;
                if let Some(list) = self.lists.last_mut() {
                    // Items of a tight list follow one another without blank lines.
                    if list.items > 0 && !list.loose {
                        self.blank = false;
                    }
                    list.items += 1;
                    number = list.next;
                    list.next = list.next.map(|next| next.saturating_add(1));
                }
                let marker = match number {
                    Some(number) => format!("{number}. "),
                    None => "- ".to_owned(),
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
            }
            Tag::Table(alignments) => {
                self.start_block();
                self.table = Some(Table {
                    alignments,
                    head: None,
                    rows: Vec::new(),
                    row: Vec::new(),
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.row.clear();
                }
            }
            Tag::TableCell => self.inline.clear(),
            Tag::Emphasis => self
                .styles
                .push(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.styles.push(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Superscript | Tag::Subscript => self.styles.push(Style::new()),
            Tag::Link { dest_url, .. } => {
                self.links.push(OpenLink {
                    url: clean_inline(&dest_url),
                    text: String::new(),
                });
                self.styles
                    .push(Style::new().add_modifier(Modifier::UNDERLINED));
            }
            Tag::Image { .. } => {
                self.push_inline("[image: ", self.style());
                self.styles.push(Style::new());
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.start_block(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.blank = true;
            }
            TagEnd::Heading(_) => {
                self.flush_inline();
                self.styles.pop();
                self.blank = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.containers.pop();
                self.styles.pop();
                self.blank = true;
            }
            TagEnd::CodeBlock => {
                if let Some((language, text)) = self.code.take() {
                    let highlighter = CodeHighlighter::new(&language, self.options.color);
                    self.preformatted(&text, highlighter);
                }
                self.blank = true;
            }
            TagEnd::HtmlBlock => {
                if let Some(html) = self.html.take() {
                    self.preformatted(&html, CodeHighlighter::new("", false));
                }
                self.blank = true;
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                self.blank = true;
            }
            TagEnd::Item => {
                self.flush_inline();
                if let Some(Container::Item { used: false, .. }) = self.containers.last() {
                    // An empty item still shows its marker (the prefix ends with it).
                    let (first, _) = self.prefixes();
                    let first = fit_prefix(&first, self.width);
                    self.emit(vec![Line::from(first.trim_end().to_owned())]);
                }
                self.containers.pop();
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table(table);
                }
                self.blank = true;
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.head = Some(std::mem::take(&mut table.row));
                }
            }
            TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.row);
                    table.rows.push(row);
                }
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.inline)
                    .into_iter()
                    .flatten()
                    .collect();
                if let Some(table) = &mut self.table {
                    table.row.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some(link) = self.links.pop() {
                    let same = link.url == link.text
                        || link.url.strip_prefix("mailto:") == Some(link.text.as_str());
                    if !link.url.is_empty() && !same {
                        let style = self.style().add_modifier(Modifier::DIM);
                        self.push_inline(&format!(" ({})", link.url), style);
                    }
                }
            }
            TagEnd::Image => {
                self.styles.pop();
                self.push_inline("]", self.style());
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => {
                self.flush_inline();
                self.blank = true;
            }
        }
    }

    /// Before a block: emits the text before it (straight in a tight list item).
    fn start_block(&mut self) {
        self.flush_inline();
    }

    fn push_inline(&mut self, text: &str, style: Style) {
        let text = clean_inline(text);
        for link in &mut self.links {
            link.text.push_str(&text);
        }
        if self.inline.is_empty() {
            self.inline.push(Vec::new());
        }
        let Some(line) = self.inline.last_mut() else {
            return;
        };
        match line.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(&text),
            _ => line.push(Span::styled(text, style)),
        }
    }

    fn task(&mut self, done: bool) {
        let box_ = if done { "[x] " } else { "[ ] " };
        let at_start = self.inline.iter().all(Vec::is_empty);
        if let (
            true,
            Some(Container::Item {
                marker,
                used: false,
            }),
        ) = (at_start, self.containers.last_mut())
        {
            marker.push_str(box_);
        } else {
            self.push_inline(box_, self.style());
        }
    }

    /// Emits the text block built so far, word-wrapped under the containers' markers.
    fn flush_inline(&mut self) {
        let inline = std::mem::take(&mut self.inline);
        if inline.iter().all(Vec::is_empty) {
            return;
        }
        for spans in inline {
            let (first, rest) = self.prefixes();
            let lines = wrap_spans(&spans, self.width, &first, &rest);
            self.emit(lines);
        }
    }

    /// The prefixes of the next line and of the lines that continue it.
    fn prefixes(&self) -> (String, String) {
        let mut first = String::new();
        let mut rest = String::new();
        for container in &self.containers {
            match container {
                Container::Quote => {
                    first.push_str("  ");
                    rest.push_str("  ");
                }
                Container::Item { marker, used } => {
                    let hang = " ".repeat(str_width(marker));
                    first.push_str(if *used { &hang } else { marker });
                    rest.push_str(&hang);
                }
            }
        }
        (first, rest)
    }

    /// Adds lines to the output, after a blank line if a block ended before them. The blank
    /// line waits for them so that a block that shows nothing (an empty quote or code block)
    /// leaves no trace.
    fn emit(&mut self, lines: Vec<Line<'static>>) {
        if lines.is_empty() {
            return;
        }
        if self.blank && !self.out.is_empty() {
            self.out.push(Line::default());
        }
        self.blank = false;
        self.out.extend(lines);
        for container in &mut self.containers {
            if let Container::Item { used, .. } = container {
                *used = true;
            }
        }
    }

    /// Code or raw HTML: one output line per source line, hard-wrapped, trailing blank lines
    /// dropped.
    fn preformatted(&mut self, text: &str, mut highlighter: CodeHighlighter) {
        for line in code_lines(text) {
            let (first, rest) = self.prefixes();
            let lines = hard_wrap(&highlighter.line(line), self.width, &first, &rest);
            self.emit(lines);
        }
    }

    fn rule(&mut self) {
        self.start_block();
        let (first, _) = self.prefixes();
        let first = fit_prefix(&first, self.width);
        let length = self.width.saturating_sub(str_width(&first)).min(RULE_MAX);
        let mut spans = vec![Span::raw(first)];
        spans.push(Span::styled(
            "─".repeat(length),
            Style::new().add_modifier(Modifier::DIM),
        ));
        self.emit(vec![normalize(spans)]);
        self.blank = true;
    }

    fn table(&mut self, table: Table) {
        let head = table.head.map(|row| {
            row.into_iter()
                .map(|cell| {
                    cell.into_iter()
                        .map(|span| {
                            let style = span.style.add_modifier(Modifier::BOLD);
                            Span::styled(span.content, style)
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        });
        let rows: Vec<Vec<Vec<Span<'static>>>> = head.into_iter().chain(table.rows).collect();
        let columns = rows
            .iter()
            .map(Vec::len)
            .chain([table.alignments.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &rows {
            for (column, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(column) {
                    *width = (*width).max(spans_width(cell));
                }
            }
        }
        let (first, _) = self.prefixes();
        let available = self
            .width
            .saturating_sub(str_width(&fit_prefix(&first, self.width)));
        let total = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
        for row in rows {
            let (first, rest) = self.prefixes();
            let lines = if total <= available {
                let mut spans = vec![Span::raw(fit_prefix(&first, self.width))];
                for (column, width) in widths.iter().enumerate() {
                    if column > 0 {
                        spans.push(Span::raw("  "));
                    }
                    let cell = row.get(column).cloned().unwrap_or_default();
                    let pad = width.saturating_sub(spans_width(&cell));
                    let alignment = table.alignments.get(column).copied();
                    let (left, right) = match alignment {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    spans.push(Span::raw(" ".repeat(left)));
                    spans.extend(cell);
                    spans.push(Span::raw(" ".repeat(right)));
                }
                vec![normalize(spans)]
            } else {
                let mut spans = Vec::new();
                for (column, cell) in row.into_iter().enumerate() {
                    if column > 0 {
                        spans.push(Span::raw(" | "));
                    }
                    spans.extend(cell);
                }
                // A wrapped row hangs, so rows stay apart.
                wrap_spans(&spans, self.width, &first, &format!("{rest}  "))
            };
            self.emit(lines);
        }
    }
}

/// The lines of a code block's text, without the blank lines it ends with.
fn code_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split_terminator('\n').collect();
    while lines.last().is_some_and(|line| is_blank(line)) {
        lines.pop();
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// Text width and wrapping
// ---------------------------------------------------------------------------------------------

/// The columns a character takes. An emoji variation selector (U+FE0F) counts one: it widens
/// the character before it to two columns in the terminal (and in `unicode-width`).
fn char_width(c: char) -> usize {
    if c == '\u{FE0F}' {
        1
    } else {
        c.width().unwrap_or(0)
    }
}

fn str_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|span| str_width(&span.content)).sum()
}

/// Prose made safe to print: tabs and line breaks become spaces, other control characters
/// U+FFFD (a model's output must not drive the terminal).
fn clean_inline(text: &str) -> String {
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
fn fit_prefix(prefix: &str, width: usize) -> String {
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
fn normalize(spans: Vec<Span<'static>>) -> Line<'static> {
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

fn trim_end(spans: &mut Vec<Span<'static>>) {
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
struct Segment {
    pieces: Vec<(Style, String)>,
    width: usize,
    space: bool,
}

fn segments(spans: &[Span<'_>]) -> Vec<Segment> {
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
struct Layout {
    lines: Vec<Vec<Span<'static>>>,
    used: usize,
    first: usize,
    rest: usize,
}

impl Layout {
    fn new(first: usize, rest: usize) -> Self {
        Layout {
            lines: vec![Vec::new()],
            used: 0,
            first: first.max(1),
            rest: rest.max(1),
        }
    }

    fn room(&self) -> usize {
        if self.lines.len() == 1 {
            self.first
        } else {
            self.rest
        }
    }

    fn newline(&mut self) {
        self.lines.push(Vec::new());
        self.used = 0;
    }

    fn put(&mut self, style: Style, text: &str, width: usize) {
        self.used += width;
        let Some(line) = self.lines.last_mut() else {
            return;
        };
        match line.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => line.push(Span::styled(text.to_owned(), style)),
        }
    }

    fn put_segment(&mut self, segment: &Segment) {
        for (style, text) in &segment.pieces {
            self.put(*style, text, str_width(text));
        }
    }

    /// Places text character by character, starting a new line whenever one is full.
    fn put_broken(&mut self, segment: &Segment) {
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
fn wrap_spans(spans: &[Span<'_>], width: usize, first: &str, rest: &str) -> Vec<Line<'static>> {
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
fn hard_wrap(line: &Line<'_>, width: usize, first: &str, rest: &str) -> Vec<Line<'static>> {
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

fn finish_lines(lines: Vec<Vec<Span<'static>>>, first: &str, rest: &str) -> Vec<Line<'static>> {
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

#[cfg(test)]
mod tests {
    use insta::assert_snapshot;
    use proptest::prelude::*;

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
