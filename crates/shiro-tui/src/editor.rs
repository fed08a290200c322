//! The prompt's text editor: multi-line text, a cursor, and the history of sent prompts.

use unicode_width::UnicodeWidthChar as _;

/// What the composer holds, and where the cursor is.
#[derive(Debug, Default, Clone)]
pub struct Editor {
    text: String,
    /// A byte index into `text`, always on a character boundary.
    cursor: usize,
    history: Vec<String>,
    /// Which history entry is shown, while browsing it; `None`: the draft.
    browsing: Option<usize>,
    /// The text being written when browsing began.
    draft: String,
}

/// One row of the composer as shown: the text of the row and where it starts in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's text.
    pub text: String,
    /// The byte offset of the row's first character.
    pub start: usize,
}

impl Editor {
    /// An empty editor with `history` (oldest first).
    pub fn with_history(history: Vec<String>) -> Self {
        Editor {
            history,
            ..Editor::default()
        }
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor's byte offset.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the text; the cursor goes to its end.
    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
    }

    /// Empties the editor and returns what it held; the history is left browsing nothing.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        self.browsing = None;
        std::mem::take(&mut self.text)
    }

    /// Adds a sent prompt to the history (not twice in a row).
    pub fn remember(&mut self, line: &str) {
        if self.history.last().map(String::as_str) != Some(line) {
            self.history.push(line.to_owned());
        }
        self.browsing = None;
    }

    /// Inserts text at the cursor. Pasted text keeps its newlines (CRLF and CR become LF) and
    /// loses other control characters, tabs becoming spaces.
    pub fn insert(&mut self, text: &str) {
        let clean: String = text
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .chars()
            .filter_map(|c| match c {
                '\t' => Some(' '),
                '\n' => Some('\n'),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect();
        self.text.insert_str(self.cursor, &clean);
        self.cursor += clean.len();
    }

    /// Deletes the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some((at, _)) = self.text[..self.cursor].char_indices().next_back() {
            self.text.replace_range(at..self.cursor, "");
            self.cursor = at;
        }
    }

    /// Deletes the character under the cursor.
    pub fn delete(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.text
                .replace_range(self.cursor..self.cursor + c.len_utf8(), "");
        }
    }

    /// Deletes the word before the cursor (and the spaces after it), as Ctrl-W does.
    pub fn delete_word(&mut self) {
        let to = self.cursor;
        self.word_left();
        self.text.replace_range(self.cursor..to, "");
    }

    /// Deletes from the start of the cursor's line to the cursor (Ctrl-U).
    pub fn delete_to_line_start(&mut self) {
        let start = self.line_start();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Deletes from the cursor to the end of its line (Ctrl-K).
    pub fn delete_to_line_end(&mut self) {
        let end = self.line_end();
        self.text.replace_range(self.cursor..end, "");
    }

    /// Moves one character left.
    pub fn left(&mut self) {
        if let Some((at, _)) = self.text[..self.cursor].char_indices().next_back() {
            self.cursor = at;
        }
    }

    /// Moves one character right.
    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    /// Moves to the start of the previous word.
    pub fn word_left(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        self.cursor = trimmed
            .char_indices()
            .rfind(|(_, c)| c.is_whitespace())
            .map_or(0, |(at, c)| at + c.len_utf8());
    }

    /// Moves past the end of the next word.
    pub fn word_right(&mut self) {
        let after = &self.text[self.cursor..];
        let skipped = after.len() - after.trim_start().len();
        let rest = &after[skipped..];
        let word = rest.find(char::is_whitespace).unwrap_or(rest.len());
        self.cursor += skipped + word;
    }

    /// Moves to the start of the cursor's line.
    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    /// Moves to the end of the cursor's line.
    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    /// Moves up a line; on the first line, shows the previous history entry. Returns whether
    /// anything moved.
    pub fn up(&mut self) -> bool {
        let start = self.line_start();
        if start == 0 {
            return self.history_back();
        }
        let column = self.text[start..self.cursor].chars().count();
        let previous_start = self.text[..start - 1].rfind('\n').map_or(0, |at| at + 1);
        self.cursor = column_offset(&self.text, previous_start, start - 1, column);
        true
    }

    /// Moves down a line; on the last line, shows the next history entry (or the draft).
    pub fn down(&mut self) -> bool {
        let end = self.line_end();
        if end == self.text.len() {
            return self.history_forward();
        }
        let column = self.text[self.line_start()..self.cursor].chars().count();
        let next_start = end + 1;
        let next_end = self.text[next_start..]
            .find('\n')
            .map_or(self.text.len(), |at| next_start + at);
        self.cursor = column_offset(&self.text, next_start, next_end, column);
        true
    }

    fn history_back(&mut self) -> bool {
        let index = match self.browsing {
            None if self.history.is_empty() => return false,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(index) => index - 1,
        };
        self.browsing = Some(index);
        let entry = self.history[index].clone();
        self.set_text(&entry);
        true
    }

    fn history_forward(&mut self) -> bool {
        let Some(index) = self.browsing else {
            return false;
        };
        if index + 1 < self.history.len() {
            self.browsing = Some(index + 1);
            let entry = self.history[index + 1].clone();
            self.set_text(&entry);
        } else {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set_text(&draft);
        }
        true
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |at| at + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |at| self.cursor + at)
    }

    /// The word the cursor is at the end of (after the last whitespace before it), with its
    /// byte offset: what `/` and `@` completion look at.
    pub fn word_before_cursor(&self) -> (usize, &str) {
        let before = &self.text[..self.cursor];
        let start = before
            .char_indices()
            .rfind(|(_, c)| c.is_whitespace())
            .map_or(0, |(at, c)| at + c.len_utf8());
        (start, &before[start..])
    }

    /// Replaces the text from byte `start` to the cursor with `with`.
    pub fn replace_before_cursor(&mut self, start: usize, with: &str) {
        let start = start.min(self.cursor);
        if !self.text.is_char_boundary(start) {
            return;
        }
        self.text.replace_range(start..self.cursor, with);
        self.cursor = start + with.len();
    }

    /// The text cut into rows of at most `width` columns (each line wrapped by characters),
    /// and the cursor's row and column among them.
    pub fn rows(&self, width: u16) -> (Vec<Row>, (u16, u16)) {
        let width = usize::from(width.max(1));
        let mut rows = Vec::new();
        let mut cursor = (0u16, 0u16);
        let mut offset = 0;
        for line in self.text.split('\n') {
            let mut row = Row {
                text: String::new(),
                start: offset,
            };
            let mut used = 0;
            let mut at = offset;
            for c in line.chars() {
                let w = c.width().unwrap_or(0);
                if used + w > width && !row.text.is_empty() {
                    let next = Row {
                        text: String::new(),
                        start: at,
                    };
                    rows.push(std::mem::replace(&mut row, next));
                    used = 0;
                }
                if at == self.cursor {
                    cursor = (to_u16(rows.len()), to_u16(used));
                }
                row.text.push(c);
                used += w;
                at += c.len_utf8();
            }
            if at == self.cursor {
                // At the end of a line; past the edge it starts the next row.
                cursor = if used >= width {
                    (to_u16(rows.len() + 1), 0)
                } else {
                    (to_u16(rows.len()), to_u16(used))
                };
            }
            rows.push(row);
            offset = at + 1;
        }
        (rows, cursor)
    }
}

/// The most entries of the prompt history kept.
pub const HISTORY_MAX: usize = 1000;

/// Reads a prompt history file: the line editor's format (`#V2`, then one entry a line, with
/// `\\` for a backslash and `\n` for a newline), the newest [`HISTORY_MAX`] entries.
pub fn parse_history(text: &str) -> Vec<String> {
    let mut entries: Vec<String> = text
        .lines()
        .filter(|line| *line != "#V2" && !line.is_empty())
        .map(|line| {
            let mut entry = String::with_capacity(line.len());
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                match (c, c == '\\') {
                    (_, true) => match chars.next() {
                        Some('n') => entry.push('\n'),
                        Some(other) => entry.push(other),
                        None => entry.push('\\'),
                    },
                    (c, false) => entry.push(c),
                }
            }
            entry
        })
        .collect();
    let skip = entries.len().saturating_sub(HISTORY_MAX);
    entries.drain(..skip);
    entries
}

/// One history entry as a line of the file, newline included.
pub fn history_line(entry: &str) -> String {
    let mut line = entry.replace('\\', "\\\\").replace('\n', "\\n");
    line.push('\n');
    line
}

fn to_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// The byte offset of the `column`th character of the line `start..end`, or its end.
fn column_offset(text: &str, start: usize, end: usize, column: usize) -> usize {
    text[start..end]
        .char_indices()
        .nth(column)
        .map_or(end, |(at, _)| start + at)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn edits_across_lines() {
        let mut editor = Editor::default();
        editor.insert("first line");
        editor.insert("\n");
        editor.insert("second");
        editor.up();
        assert_eq!(&editor.text()[..editor.cursor()], "first ");
        editor.end();
        editor.delete_word();
        assert_eq!(editor.text(), "first \nsecond");
        editor.down();
        editor.home();
        editor.delete_to_line_end();
        assert_eq!(editor.text(), "first \n");
        editor.backspace();
        editor.backspace();
        assert_eq!(editor.text(), "first");
        editor.insert("\r\npasted\tline\u{7}\r");
        assert_eq!(editor.text(), "first\npasted line\n");
    }

    #[test]
    fn history_is_browsed_from_the_first_and_last_lines_and_keeps_the_draft() {
        let mut editor = Editor::with_history(vec!["one".into(), "two\nlines".into()]);
        editor.insert("draft");
        assert!(editor.up());
        assert_eq!(editor.text(), "two\nlines");
        // Up inside a multi-line entry moves the cursor first.
        assert!(editor.up());
        assert_eq!(editor.text(), "two\nlines");
        assert!(editor.up());
        assert_eq!(editor.text(), "one");
        assert!(!editor.up());
        assert!(editor.down());
        assert_eq!(editor.text(), "two\nlines");
        assert!(editor.down());
        assert_eq!(editor.text(), "draft");
        assert!(!editor.down());
        editor.remember("draft");
        editor.remember("draft");
        assert_eq!(editor.history.len(), 3);
    }

    #[test]
    fn rows_wrap_by_width_and_place_the_cursor() {
        let mut editor = Editor::default();
        editor.insert("abcdef\n日本語");
        let (rows, cursor) = editor.rows(4);
        let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["abcd", "ef", "日本", "語"]);
        assert_eq!(cursor, (3, 2));
        editor.set_text("abcd");
        assert_eq!(editor.rows(4).1, (1, 0));
        editor.home();
        assert_eq!(editor.rows(4).1, (0, 0));
        editor.set_text("");
        assert_eq!(
            editor.rows(4),
            (
                vec![Row {
                    text: String::new(),
                    start: 0
                }],
                (0, 0)
            )
        );
    }

    #[test]
    fn history_lines_round_trip_newlines_and_backslashes() {
        let entries = ["plain", "two\nlines", "a \\n literal", "trailing\\"];
        let mut file = String::from("#V2\n");
        for entry in entries {
            file.push_str(&history_line(entry));
        }
        assert_eq!(parse_history(&file), entries);
        let many: String = (0..HISTORY_MAX + 5)
            .map(|n| history_line(&n.to_string()))
            .collect();
        let parsed = parse_history(&many);
        assert_eq!(parsed.len(), HISTORY_MAX);
        assert_eq!(parsed.first().map(String::as_str), Some("5"));
    }

    #[test]
    fn completion_replaces_the_word_before_the_cursor() {
        let mut editor = Editor::default();
        editor.insert("look at @sr");
        let (start, word) = editor.word_before_cursor();
        assert_eq!(word, "@sr");
        editor.replace_before_cursor(start, "@src/");
        assert_eq!(editor.text(), "look at @src/");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String),
        Backspace,
        Delete,
        Left,
        Right,
        Up,
        Down,
        Home,
        End,
        WordLeft,
        WordRight,
        DeleteWord,
        KillStart,
        KillEnd,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            "[a-c \\n日✨\\t\\r]{0,4}".prop_map(Op::Insert),
            Just(Op::Backspace),
            Just(Op::Delete),
            Just(Op::Left),
            Just(Op::Right),
            Just(Op::Up),
            Just(Op::Down),
            Just(Op::Home),
            Just(Op::End),
            Just(Op::WordLeft),
            Just(Op::WordRight),
            Just(Op::DeleteWord),
            Just(Op::KillStart),
            Just(Op::KillEnd),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// No sequence of keys panics, the cursor stays on a character boundary, and every
        /// row fits the width.
        #[test]
        fn any_keys_keep_the_editor_consistent(ops in proptest::collection::vec(op(), 0..40), width in 1u16..8) {
            let mut editor = Editor::with_history(vec!["h1".into(), "h\n2".into()]);
            for op in ops {
                match op {
                    Op::Insert(text) => editor.insert(&text),
                    Op::Backspace => editor.backspace(),
                    Op::Delete => editor.delete(),
                    Op::Left => editor.left(),
                    Op::Right => editor.right(),
                    Op::Up => { editor.up(); }
                    Op::Down => { editor.down(); }
                    Op::Home => editor.home(),
                    Op::End => editor.end(),
                    Op::WordLeft => editor.word_left(),
                    Op::WordRight => editor.word_right(),
                    Op::DeleteWord => editor.delete_word(),
                    Op::KillStart => editor.delete_to_line_start(),
                    Op::KillEnd => editor.delete_to_line_end(),
                }
                prop_assert!(editor.text.is_char_boundary(editor.cursor));
                prop_assert!(!editor.text.contains('\r') && !editor.text.contains('\t'));
                let (rows, (row, _)) = editor.rows(width);
                for r in &rows {
                    let w: usize = r.text.chars().map(|c| c.width().unwrap_or(0)).sum();
                    prop_assert!(w <= usize::from(width) || r.text.chars().count() == 1);
                }
                prop_assert!(usize::from(row) <= rows.len());
                let joined: String = rows.iter().map(|r| r.text.as_str()).collect();
                prop_assert_eq!(joined, editor.text.replace('\n', ""));
            }
        }
    }
}
