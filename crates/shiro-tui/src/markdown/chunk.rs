//! Rendering one chunk: parser events to styled, indented lines.

use std::collections::HashMap;

use pulldown_cmark::{Alignment, BrokenLink, CodeBlockKind, CowStr, Event, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::*;

/// Renders `text` (whole top-level blocks) and returns its lines and the link reference
/// definitions it holds. `links` resolves references to definitions in earlier chunks.
pub(super) fn render_chunk(
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
pub(super) fn loose_lists(events: &[Event<'_>]) -> Vec<bool> {
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
pub(super) enum Container {
    Quote,
    /// A list item: its marker (`- `, `3. `, `- [x] `) goes on its first line, and the lines
    /// after hang under the text.
    Item {
        marker: String,
        used: bool,
    },
}

#[derive(Debug)]
pub(super) struct List {
    /// The number of the next item of an ordered list.
    pub(super) next: Option<u64>,
    pub(super) loose: bool,
    /// Items started so far.
    pub(super) items: usize,
}

#[derive(Debug)]
pub(super) struct Table {
    pub(super) alignments: Vec<Alignment>,
    pub(super) head: Option<Vec<Vec<Span<'static>>>>,
    pub(super) rows: Vec<Vec<Vec<Span<'static>>>>,
    pub(super) row: Vec<Vec<Span<'static>>>,
}

/// An open link: its destination and the text shown for it so far.
#[derive(Debug)]
pub(super) struct OpenLink {
    pub(super) url: String,
    pub(super) text: String,
}

/// Turns parser events into lines.
#[derive(Debug)]
pub(super) struct Renderer {
    pub(super) width: usize,
    pub(super) options: Options,
    pub(super) out: Vec<Line<'static>>,
    /// A block ended: the next line shown comes after a blank line.
    pub(super) blank: bool,
    pub(super) containers: Vec<Container>,
    /// Inline styles in force (emphasis, links, a heading, a quote), applied in order.
    pub(super) styles: Vec<Style>,
    /// The text block being built, one entry per hard line break.
    pub(super) inline: Vec<Vec<Span<'static>>>,
    pub(super) links: Vec<OpenLink>,
    pub(super) lists: Vec<List>,
    pub(super) loose: std::vec::IntoIter<bool>,
    /// An open code block: its language and text.
    pub(super) code: Option<(String, String)>,
    pub(super) html: Option<String>,
    pub(super) table: Option<Table>,
}

/// The longest horizontal rule, in columns.
pub(super) const RULE_MAX: usize = 80;

impl Renderer {
    pub(super) fn new(width: usize, options: Options, loose: Vec<bool>) -> Self {
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

    pub(super) fn finish(mut self) -> Vec<Line<'static>> {
        self.flush_inline();
        self.out
    }

    pub(super) fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::new(), |acc, style| acc.patch(*style))
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
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

    pub(super) fn start(&mut self, tag: Tag<'_>) {
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

    pub(super) fn end(&mut self, tag: TagEnd) {
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
    pub(super) fn start_block(&mut self) {
        self.flush_inline();
    }

    pub(super) fn push_inline(&mut self, text: &str, style: Style) {
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

    pub(super) fn task(&mut self, done: bool) {
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
    pub(super) fn flush_inline(&mut self) {
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
    pub(super) fn prefixes(&self) -> (String, String) {
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
    pub(super) fn emit(&mut self, lines: Vec<Line<'static>>) {
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
    pub(super) fn preformatted(&mut self, text: &str, mut highlighter: CodeHighlighter) {
        for line in code_lines(text) {
            let (first, rest) = self.prefixes();
            let lines = hard_wrap(&highlighter.line(line), self.width, &first, &rest);
            self.emit(lines);
        }
    }

    pub(super) fn rule(&mut self) {
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

    pub(super) fn table(&mut self, table: Table) {
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
pub(super) fn code_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split_terminator('\n').collect();
    while lines.last().is_some_and(|line| is_blank(line)) {
        lines.pop();
    }
    lines
}
