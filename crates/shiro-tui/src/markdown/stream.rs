//! Streaming: Markdown that arrives in pieces, committed in whole top-level chunks.

use std::collections::HashMap;
use std::ops::Range;

use ratatui::text::Line;

use super::*;

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
pub(super) enum Scan {
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
    pub(super) fn fresh() -> Self {
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
pub(super) enum Lead {
    /// A list item: a blank line does not close a list, and a line with another item marker
    /// most likely continues it.
    List,
    /// Code or HTML, which run past blank lines.
    Open,
    /// Anything else (a paragraph, heading, table, quote), which a blank line may close.
    Closable,
}

impl Lead {
    pub(super) fn of(line: &str) -> Lead {
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
pub(super) enum Committed {
    /// Top-level blocks, rendered together.
    Chunk(Range<usize>),
    /// One line of a fenced code block; `first` when it is the block's first line.
    Code { line: Line<'static>, first: bool },
}

#[derive(Debug, Clone)]
pub(super) struct LinkTarget {
    pub(super) url: String,
    pub(super) title: String,
}

/// A fenced code block whose lines are committed as they complete.
#[derive(Debug)]
pub(super) struct FencedCode {
    pub(super) fence: Fence,
    pub(super) highlighter: CodeHighlighter,
    /// Start of a run of blank lines not yet committed: they are dropped if the block ends
    /// with them, as [`code_lines`] drops a block's trailing blank lines.
    pub(super) held: Option<usize>,
    /// A line of this block has been committed.
    pub(super) started: bool,
}

impl FencedCode {
    pub(super) fn open(line: &str, options: Options) -> Option<Self> {
        let (fence, info) = Fence::opening(line)?;
        Some(FencedCode {
            fence,
            highlighter: CodeHighlighter::new(language(info), options.color),
            held: None,
            started: false,
        })
    }

    /// Takes the content line `source[start..end]` (without its line ending).
    pub(super) fn line(
        &mut self,
        source: &str,
        start: usize,
        end: usize,
        queue: &mut Vec<Committed>,
    ) {
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

    pub(super) fn commit(&mut self, text: &str, queue: &mut Vec<Committed>) {
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

    pub(super) fn commit(&mut self, end: usize) {
        if end > self.tail {
            self.queue.push(Committed::Chunk(self.tail..end));
            self.tail = end;
        }
    }

    /// Takes the complete line `source[start..end]` (with its `\n`).
    pub(super) fn scan_line(&mut self, start: usize, end: usize) {
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

    pub(super) fn scan_flow(
        &mut self,
        start: usize,
        end: usize,
        lead: Option<Lead>,
        after_blank: bool,
    ) {
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
    pub(super) fn uncommitted_len(&self) -> usize {
        self.source.len() - self.tail
    }
}
