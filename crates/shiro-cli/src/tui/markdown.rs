//! TEMPORARY STUB (replaced by the tui-md branch's renderer at merge).
#![allow(missing_docs, dead_code)]
use ratatui::text::Line;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub color: bool,
}

pub fn render(source: &str, width: u16, _options: Options) -> Vec<Line<'static>> {
    source
        .lines()
        .flat_map(|l| wrap(&Line::from(l.to_owned()), width, ""))
        .collect()
}

pub fn wrap(line: &Line<'_>, width: u16, _indent: &str) -> Vec<Line<'static>> {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![Line::from("")];
    }
    chars
        .chunks(usize::from(width.max(1)))
        .map(|c| Line::from(c.iter().collect::<String>()))
        .collect()
}

#[derive(Debug, Default)]
pub struct MarkdownStream {
    source: String,
    committed: usize,
    options: Options,
}

impl MarkdownStream {
    pub fn new(options: Options) -> Self {
        MarkdownStream {
            source: String::new(),
            committed: 0,
            options,
        }
    }
    pub fn push(&mut self, delta: &str) {
        self.source.push_str(delta);
    }
    pub fn take_committed(&mut self, width: u16) -> Vec<Line<'static>> {
        let Some(end) = self.source[self.committed..].rfind("\n\n") else {
            return Vec::new();
        };
        let end = self.committed + end + 2;
        let lines = render(&self.source[self.committed..end], width, self.options);
        self.committed = end;
        lines
    }
    pub fn live(&self, width: u16) -> Vec<Line<'static>> {
        render(&self.source[self.committed..], width, self.options)
    }
    pub fn finish(&mut self, width: u16) -> Vec<Line<'static>> {
        let lines = render(&self.source[self.committed..], width, self.options);
        self.committed = self.source.len();
        lines
    }
    pub fn source(&self) -> &str {
        &self.source
    }
}
