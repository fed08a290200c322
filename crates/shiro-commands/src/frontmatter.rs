//! The `---` frontmatter of a command file: the subset of YAML that command files use.
//!
//! Claude Code, OpenCode and shiro command files open with YAML frontmatter. Real files use
//! a small part of YAML: `key: value` lines, quoted values, flow lists (`[a, b]`), block lists
//! (`- a` lines), block scalars (`|` and `>`) and comments. This module reads that part
//! without a YAML library, and never fails: whatever it cannot read becomes a warning with
//! its line, and the key is skipped.

/// The value of one frontmatter key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar, unquoted and unescaped.
    Text(String),
    /// A list of scalars (a flow or block sequence).
    List(Vec<String>),
    /// A one-level mapping of keys to scalars, written on the lines below its key (a
    /// skill's `metadata`), in file order.
    Map(Vec<(String, String)>),
    /// Something else (a deeper or flow mapping), which no key shiro reads takes.
    Other,
    /// Text that is not valid YAML, with the reason. Some keys (`argument-hint`) still use
    /// the raw text.
    Invalid(String),
}

/// One `key: value` of the frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The key as written.
    pub key: String,
    /// The 1-based line of the key.
    pub line: usize,
    /// The value, parsed.
    pub value: Value,
    /// The value's text on the key's line as written (trimmed), for keys such as
    /// `argument-hint` whose authors write `[file] [focus]` and mean the text.
    pub raw: String,
}

/// A problem in the frontmatter, as `(line, message)`.
pub(crate) type Problem = (usize, String);

/// The frontmatter of a file split into lines.
#[derive(Debug, Default)]
pub(crate) struct Frontmatter {
    /// The entries, in file order, repeated keys dropped (the first is kept).
    pub entries: Vec<Entry>,
    /// The 0-based index of the first body line (0 when there is no frontmatter).
    pub body_start: usize,
    /// Whether an opening `---` was never closed (then the whole file is the body).
    pub unclosed: bool,
    /// Lines that could not be read, and repeated keys.
    pub warnings: Vec<Problem>,
}

/// Whether `line` is a frontmatter delimiter.
fn is_delimiter(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Reads the frontmatter at the top of `lines`, if the first line is `---`.
pub(crate) fn parse(lines: &[&str]) -> Frontmatter {
    let mut out = Frontmatter::default();
    if !lines.first().is_some_and(|l| is_delimiter(l)) {
        return out;
    }
    let Some(end) = lines
        .iter()
        .skip(1)
        .position(|l| is_delimiter(l) || l.trim_end() == "...")
    else {
        out.unclosed = true;
        return out;
    };
    let end = end + 1;
    out.body_start = end + 1;
    let block = &lines[1..end];
    let mut i = 0;
    while i < block.len() {
        let line_no = i + 2;
        let line = block[i];
        let trimmed = line.trim();
        i += 1;
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) || trimmed.starts_with("- ") || trimmed == "-" {
            out.warnings.push((
                line_no,
                format!("frontmatter line `{trimmed}` belongs to no key, ignored"),
            ));
            continue;
        }
        let Some((key, rest)) = split_key(trimmed) else {
            out.warnings.push((
                line_no,
                format!("frontmatter line `{trimmed}` is not `key: value`, ignored"),
            ));
            continue;
        };
        // The lines after the key that belong to its value: indented ones, and `- item`
        // lines (YAML lets a block list sit at the key's own indentation).
        let start = i;
        while i < block.len() {
            let next = block[i];
            let t = next.trim();
            let belongs = t.is_empty()
                || next.starts_with([' ', '\t'])
                || t.starts_with("- ")
                || t == "-"
                || (t.starts_with('#') && !next.starts_with('#'));
            if !belongs {
                break;
            }
            i += 1;
        }
        let mut more = &block[start..i];
        // Trailing blank lines separate entries; they are no part of the value.
        while more.last().is_some_and(|l| l.trim().is_empty()) {
            more = &more[..more.len() - 1];
        }
        let value = value(rest, more).unwrap_or_else(Value::Invalid);
        if out.entries.iter().any(|e| e.key == key) {
            out.warnings.push((
                line_no,
                format!("frontmatter key `{key}` repeated, the first value is kept"),
            ));
            continue;
        }
        out.entries.push(Entry {
            key: key.to_owned(),
            line: line_no,
            value,
            raw: strip_comment(rest).trim().to_owned(),
        });
    }
    out
}

/// Splits `key: rest` (the colon followed by a space or the end of the line).
fn split_key(line: &str) -> Option<(&str, &str)> {
    let (key, rest) = match line.find(": ") {
        Some(at) => (&line[..at], &line[at + 2..]),
        None => (line.strip_suffix(':')?, ""),
    };
    let key = key.trim();
    let key = unquote_key(key);
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
    valid.then_some((key, rest.trim()))
}

fn unquote_key(key: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = key.strip_prefix(q).and_then(|k| k.strip_suffix(q)) {
            return inner;
        }
    }
    key
}

/// Parses the value written after `key:` (`rest`) and on the lines that follow (`more`).
fn value(rest: &str, more: &[&str]) -> Result<Value, String> {
    let rest = strip_comment(rest).trim();
    if rest.is_empty() {
        return Ok(block_value(more));
    }
    if let Some(indicator) = rest.strip_prefix(['|', '>']) {
        if !indicator
            .chars()
            .all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
        {
            return Err(format!("`{rest}` is not a block scalar indicator"));
        }
        return Ok(Value::Text(block_scalar(rest.starts_with('|'), more)));
    }
    let mut text = rest.to_owned();
    for line in more {
        text.push('\n');
        text.push_str(line.trim());
    }
    if text.starts_with('[') {
        return flow_list(&text).map(Value::List);
    }
    if text.starts_with('{') {
        return Ok(Value::Other);
    }
    let (scalar, after) = scalar(&text)?;
    if !strip_comment(after).trim().is_empty() {
        return Err(format!(
            "unexpected text after the value: `{}`",
            after.trim()
        ));
    }
    Ok(Value::Text(scalar))
}

/// A value given on the lines below its key: a block list, a nested mapping, or a plain
/// scalar written over several lines.
fn block_value(more: &[&str]) -> Value {
    let lines: Vec<&str> = more
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if lines.is_empty() {
        return Value::Text(String::new());
    }
    if lines.iter().all(|l| l.starts_with("- ") || *l == "-") {
        let items = lines
            .iter()
            .map(|l| {
                let item = strip_comment(l.trim_start_matches('-')).trim();
                scalar(item).map_or_else(|_| item.to_owned(), |(s, _)| s)
            })
            .filter(|s| !s.is_empty())
            .collect();
        return Value::List(items);
    }
    if lines.iter().any(|l| split_key(l).is_some()) {
        return map_value(more).unwrap_or(Value::Other);
    }
    Value::Text(lines.join(" "))
}

/// A mapping of `key: scalar` lines that all share one indentation; `None` for anything
/// else (nested mappings, lists inside, lines that are not pairs).
fn map_value(more: &[&str]) -> Option<Value> {
    let lines: Vec<&str> = more
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
        .collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let first = indent(lines.first()?);
    let mut pairs = Vec::new();
    for line in lines {
        if indent(line) != first {
            return None;
        }
        let (key, rest) = split_key(line.trim())?;
        let rest = strip_comment(rest).trim();
        if rest.starts_with(['[', '{', '|', '>']) {
            return None;
        }
        let (value, after) = scalar(rest).ok()?;
        if !strip_comment(after).trim().is_empty() {
            return None;
        }
        pairs.push((key.to_owned(), value));
    }
    Some(Value::Map(pairs))
}

/// A `|` (literal) or `>` (folded) block scalar's text, trailing newlines removed.
fn block_scalar(literal: bool, more: &[&str]) -> String {
    let indent = more
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = more
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    if literal {
        return lines.join("\n").trim_end().to_owned();
    }
    let mut out = String::new();
    for line in lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out.trim_end().to_owned()
}

/// Removes a ` # comment` from the end of a plain value (a `#` inside quotes stays).
fn strip_comment(text: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == '"' || c == '\'') && (prev.is_whitespace() || prev == '[') => {
                quote = Some(c);
            }
            None if c == '#' && prev.is_whitespace() => return &text[..i],
            None => {}
        }
        prev = c;
    }
    text
}

/// Reads one scalar at the start of `text`: quoted (with its escapes) or plain. Returns it
/// and the text after it.
fn scalar(text: &str) -> Result<(String, &str), String> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((out, &rest[i + 1..])),
                '\\' => match chars.next().map(|(_, e)| e) {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('\n') => {}
                    Some(other) => out.push(other),
                    None => {}
                },
                '\n' => out.push(' '),
                c => out.push(c),
            }
        }
        return Err("a double-quoted value is never closed".to_owned());
    }
    if let Some(rest) = text.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if chars.peek().is_some_and(|(_, n)| *n == '\'') => {
                    out.push('\'');
                    chars.next();
                }
                '\'' => return Ok((out, &rest[i + 1..])),
                '\n' => out.push(' '),
                c => out.push(c),
            }
        }
        return Err("a single-quoted value is never closed".to_owned());
    }
    let plain = strip_comment(text);
    let folded: Vec<&str> = plain.lines().map(str::trim).collect();
    Ok((folded.join(" ").trim().to_owned(), ""))
}

/// Reads a flow list `[a, "b, c", d]` (possibly over several lines).
fn flow_list(text: &str) -> Result<Vec<String>, String> {
    let inner = text.strip_prefix('[').unwrap_or(text);
    let mut items = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    let mut closed_at = None;
    for (i, c) in inner.char_indices() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                current.push(c);
            }
            Some(_) => current.push(c),
            None => match c {
                '"' | '\'' if current.trim().is_empty() => {
                    quote = Some(c);
                    current.push(c);
                }
                '[' | '(' | '{' => {
                    depth += 1;
                    current.push(c);
                }
                ')' | '}' => {
                    depth = depth.saturating_sub(1);
                    current.push(c);
                }
                ']' if depth == 0 => {
                    closed_at = Some(i);
                    break;
                }
                ']' => {
                    depth -= 1;
                    current.push(c);
                }
                ',' if depth == 0 => items.push(std::mem::take(&mut current)),
                '\n' => current.push(' '),
                c => current.push(c),
            },
        }
    }
    let Some(closed_at) = closed_at else {
        return Err("a `[` list is never closed".to_owned());
    };
    let after = &inner[closed_at + 1..];
    if !strip_comment(after).trim().is_empty() {
        return Err(format!(
            "unexpected text after the list: `{}`",
            after.trim()
        ));
    }
    items.push(current);
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (value, rest) = scalar(item)?;
        if !rest.trim().is_empty() {
            return Err(format!("unexpected text in the list: `{item}`"));
        }
        out.push(value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> (Vec<(String, Value)>, Vec<Problem>) {
        let lines: Vec<&str> = text.lines().collect();
        let fm = parse(&lines);
        (
            fm.entries.into_iter().map(|e| (e.key, e.value)).collect(),
            fm.warnings,
        )
    }

    fn text(s: &str) -> Value {
        Value::Text(s.to_owned())
    }

    fn list(items: &[&str]) -> Value {
        Value::List(items.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn scalars_lists_and_block_scalars() {
        let (got, warnings) = entries(
            "---\n\
             description: \"Say \\\"hi\\\" # not a comment\" # a comment\n\
             argument-hint: [file] [focus]\n\
             allowed-tools: [Read, \"Bash(git log:*)\", 'Grep']\n\
             model: 'it''s'\n\
             arguments:\n  - first\n  - second # two\n\
             tools:\n- a\n- b\n\
             long: >\n  one\n  two\n\n  three\n\
             code: |\n  a\n    b\n\
             nested:\n  key: value\n\
             ---\nbody\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            got,
            vec![
                ("description".to_owned(), text("Say \"hi\" # not a comment")),
                (
                    "argument-hint".to_owned(),
                    Value::Invalid("unexpected text after the list: `[focus]`".to_owned())
                ),
                (
                    "allowed-tools".to_owned(),
                    list(&["Read", "Bash(git log:*)", "Grep"])
                ),
                ("model".to_owned(), text("it's")),
                ("arguments".to_owned(), list(&["first", "second"])),
                ("tools".to_owned(), list(&["a", "b"])),
                ("long".to_owned(), text("one two\nthree")),
                ("code".to_owned(), text("a\n  b")),
                (
                    "nested".to_owned(),
                    Value::Map(vec![("key".to_owned(), "value".to_owned())])
                ),
            ]
        );
    }

    #[test]
    fn one_level_mappings_are_read_and_deeper_ones_are_not() {
        let (got, warnings) = entries(
            "---\n\
             metadata:\n  author: someone # a comment\n  version: \"1.0\"\n\n  tags: 'a, b'\n\
             deep:\n  a:\n    b: c\n\
             mixed:\n  a: b\n  - c\n\
             ragged:\n  a: b\n    c: d\n\
             flow:\n  a: [b]\n\
             ---\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            got,
            vec![
                (
                    "metadata".to_owned(),
                    Value::Map(vec![
                        pair("author", "someone"),
                        pair("version", "1.0"),
                        pair("tags", "a, b")
                    ])
                ),
                ("deep".to_owned(), Value::Other),
                ("mixed".to_owned(), Value::Other),
                ("ragged".to_owned(), Value::Other),
                ("flow".to_owned(), Value::Other),
            ]
        );
    }

    #[test]
    fn raw_text_is_kept_for_hints() {
        let lines = ["---", "argument-hint: [file] [focus] ", "---"];
        let fm = parse(&lines);
        assert_eq!(fm.entries[0].raw, "[file] [focus]");
        assert!(fm.warnings.is_empty());
        let lines = ["---", "argument-hint: <file> [focus]", "---"];
        let fm = parse(&lines);
        assert_eq!(fm.entries[0].raw, "<file> [focus]");
        assert_eq!(fm.body_start, 3);
    }

    #[test]
    fn problems_are_warnings_with_lines() {
        let (got, warnings) =
            entries("---\nnot a pair\n  stray\n- item\nok: yes\nok: again\nq: \"open\n---\n");
        assert_eq!(
            got,
            vec![
                ("ok".to_owned(), text("yes")),
                (
                    "q".to_owned(),
                    Value::Invalid("a double-quoted value is never closed".to_owned())
                )
            ]
        );
        let lines: Vec<usize> = warnings.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 3, 4, 6], "{warnings:?}");
    }

    #[test]
    fn unclosed_and_absent() {
        let fm = parse(&["---", "a: b"]);
        assert!(fm.unclosed);
        let fm = parse(&["body", "---"]);
        assert!(!fm.unclosed && fm.entries.is_empty() && fm.body_start == 0);
    }
}
