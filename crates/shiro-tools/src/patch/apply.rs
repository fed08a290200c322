//! Applying the hunks of one `*** Update File` section to a text file.

use std::fmt;

use super::{Hunk, HunkLine};
use crate::text::TextFile;

/// Why a hunk could not be applied to a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hunk {hunk} (patch line {line}): {kind}")]
pub struct HunkError {
    /// The hunk's number within its file section, from 1.
    pub hunk: usize,
    /// The patch line where the hunk starts.
    pub line: usize,
    /// What was not found.
    pub kind: HunkErrorKind,
}

/// What a hunk looked for and did not find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkErrorKind {
    /// An `@@` anchor line is not in the file (after the previous match).
    AnchorNotFound {
        /// The anchor text.
        anchor: String,
        /// The file line after which the search started (0: from the top).
        after: usize,
    },
    /// The hunk's context and `-` lines are not in the file (after the previous match).
    LinesNotFound {
        /// The context and `-` lines, as written in the patch.
        expected: Vec<HunkLine>,
        /// The file line after which the search started (0: from the top).
        after: usize,
        /// Whether the hunk was pinned to the end of the file.
        end_of_file: bool,
    },
}

impl fmt::Display for HunkErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = |after: usize| match after {
            0 => "in the file".to_owned(),
            n => format!("after line {n} of the file"),
        };
        match self {
            HunkErrorKind::AnchorNotFound { anchor, after } => {
                write!(
                    f,
                    "could not find the `@@` anchor line `{anchor}` {}",
                    place(*after)
                )
            }
            HunkErrorKind::LinesNotFound {
                expected,
                after,
                end_of_file,
            } => {
                let place = if *end_of_file {
                    "at the end of the file".to_owned()
                } else {
                    place(*after)
                };
                write!(f, "could not find these lines {place}:")?;
                for line in expected {
                    write!(f, "\n  {line}")?;
                }
                Ok(())
            }
        }
    }
}

/// Applies `hunks` (one file's, in file order) to `file`, returning the edited file.
///
/// Each hunk is sought after the previous one's match: first its `@@` anchors, one after the
/// other, then its context and `-` lines (see [`seek`]). Context lines keep the file's own text;
/// only `-` lines are removed and `+` lines inserted. The file keeps its BOM and final-newline
/// state, and every line it keeps keeps its own ending: in a file that mixes CRLF and LF lines,
/// an inserted line takes the ending of the line it replaces (the `-` line at the same place in
/// its run of changes, or the run's last one), or for a pure insertion the ending of the line
/// before it (the line after it at the top of the file).
pub fn apply_hunks(file: &TextFile, hunks: &[Hunk]) -> Result<TextFile, HunkError> {
    let body = file.body.as_str();
    // An empty file counts as ending with a newline, so lines added to it end with one.
    let final_newline = body.is_empty() || body.ends_with('\n');
    let lines = split_lines(body, final_newline);
    let texts: Vec<&str> = lines.iter().map(|line| line.text).collect();

    let mut replacements: Vec<(usize, usize, &[HunkLine])> = Vec::new();
    let mut next = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let error = |kind| HunkError {
            hunk: index + 1,
            line: hunk.line,
            kind,
        };
        let mut cursor = next;
        for anchor in &hunk.anchors {
            match seek(&texts, &[anchor.as_str()], cursor, false) {
                Some(found) => cursor = found + 1,
                None => {
                    return Err(error(HunkErrorKind::AnchorNotFound {
                        anchor: anchor.clone(),
                        after: cursor,
                    }));
                }
            }
        }
        let mut body_lines = hunk.lines.as_slice();
        let mut old: Vec<&str> = hunk.old_lines().collect();
        if old.is_empty() {
            // Only `+` lines: right after the anchor when there is one, else at the end.
            let at = if hunk.anchors.is_empty() || hunk.end_of_file {
                lines.len()
            } else {
                cursor
            };
            replacements.push((at, 0, body_lines));
            if !hunk.anchors.is_empty() {
                next = cursor;
            }
            continue;
        }
        let mut found = seek(&texts, &old, cursor, hunk.end_of_file);
        // A trailing empty context line often stands for the file's final newline; retry without.
        while found.is_none()
            && let Some((HunkLine::Context(last), rest)) = body_lines.split_last()
            && last.is_empty()
            && rest.iter().any(|line| !matches!(line, HunkLine::Add(_)))
        {
            body_lines = rest;
            old.pop();
            found = seek(&texts, &old, cursor, hunk.end_of_file);
        }
        let Some(start) = found else {
            let expected = hunk
                .lines
                .iter()
                .filter(|line| !matches!(line, HunkLine::Add(_)))
                .cloned()
                .collect();
            return Err(error(HunkErrorKind::LinesNotFound {
                expected,
                after: cursor,
                end_of_file: hunk.end_of_file,
            }));
        };
        replacements.push((start, old.len(), body_lines));
        next = start + old.len();
    }

    // Insertions at the end of the file do not move the search position, so a later hunk can
    // sit before them; a stable sort keeps hunks at the same position in patch order.
    replacements.sort_by_key(|&(start, _, _)| start);
    let mut out: Vec<Line<'_>> = Vec::with_capacity(lines.len());
    let mut pos = 0;
    for (start, len, body_lines) in replacements {
        out.extend(lines.get(pos..start).unwrap_or_default());
        pos = start;
        // The endings of the lines removed so far in the current run of `-` and `+` lines, and
        // how many lines the run has added.
        let mut removed: Vec<Ending> = Vec::new();
        let mut added = 0;
        for line in body_lines {
            match line {
                HunkLine::Context(_) => {
                    // The file's own text, not the patch's: the match may have been loose.
                    out.extend(lines.get(pos));
                    pos += 1;
                    removed.clear();
                    added = 0;
                }
                HunkLine::Remove(_) => {
                    removed.extend(lines.get(pos).map(|line| line.ending));
                    pos += 1;
                }
                HunkLine::Add(text) => {
                    let ending = match removed.get(added).or(removed.last()) {
                        Some(&replaced) => replaced,
                        None => out
                            .last()
                            .or(lines.get(pos))
                            .map_or(Ending::Lf, |line| line.ending),
                    };
                    out.push(Line { text, ending });
                    added += 1;
                }
            }
        }
        debug_assert_eq!(
            pos,
            start + len,
            "a replacement consumes exactly its matched lines"
        );
    }
    out.extend(lines.get(pos..).unwrap_or_default());

    let mut new_body = String::with_capacity(body.len());
    for (index, line) in out.iter().enumerate() {
        new_body.push_str(line.text);
        if final_newline || index + 1 < out.len() {
            new_body.push_str(line.ending.as_str());
        }
    }
    Ok(TextFile {
        body: new_body,
        ..file.clone()
    })
}

/// The ending of one line of a body. A file that uses CRLF throughout reaches the applier with
/// `\n` endings (see [`TextFile`]); only a file that mixes both has `Ending::CrLf` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Lf,
    CrLf,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
        }
    }
}

/// A line of a body without its ending, and that ending.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    text: &'a str,
    ending: Ending,
}

/// Splits a body into lines and their endings. A last line without a line break is given the
/// ending of the line before it, which it gets if a line is ever added after it; a `\r` at its
/// end is part of its text.
fn split_lines(body: &str, final_newline: bool) -> Vec<Line<'_>> {
    if body.is_empty() {
        return Vec::new();
    }
    let content = body.strip_suffix('\n').unwrap_or(body);
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut pieces = content.split('\n').peekable();
    while let Some(piece) = pieces.next() {
        let is_last = pieces.peek().is_none();
        let line = match piece.strip_suffix('\r') {
            Some(text) if final_newline || !is_last => Line {
                text,
                ending: Ending::CrLf,
            },
            _ if is_last && !final_newline => Line {
                text: piece,
                ending: lines.last().map_or(Ending::Lf, |line| line.ending),
            },
            _ => Line {
                text: piece,
                ending: Ending::Lf,
            },
        };
        lines.push(line);
    }
    lines
}

/// Finds `pattern` in `lines` at or after `start`, returning the index of its first line.
///
/// Four passes, each over every position before the next is tried: exact; ignoring trailing
/// whitespace; ignoring leading and trailing whitespace; and the last after folding typographic
/// punctuation (dashes and minus to `-`, curly single quotes to `'`, curly double quotes to
/// `"`, unusual spaces to a space). With `end_of_file`, only the position that ends at the last
/// line is tried. An empty pattern matches at `start`.
///
/// ```
/// use shiro_tools::patch::seek;
///
/// let lines = ["fn main() {", "    let s = \u{201c}hi\u{201d};", "}"];
/// assert_eq!(seek(&lines, &["let s = \"hi\";"], 0, false), Some(1));
/// assert_eq!(seek(&lines, &["}"], 0, true), Some(2));
/// assert_eq!(seek(&lines, &["fn main() {"], 1, false), None);
/// ```
pub fn seek(lines: &[&str], pattern: &[&str], start: usize, end_of_file: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start.min(lines.len()));
    }
    let last = lines.len().checked_sub(pattern.len())?;
    let first = if end_of_file { last } else { start };
    if first > last || start > last {
        return None;
    }
    let matches_at = |at: usize, same: LinesMatch| {
        lines.get(at..at + pattern.len()).is_some_and(|window| {
            window
                .iter()
                .zip(pattern)
                .all(|(line, want)| same(line, want))
        })
    };
    let passes: [LinesMatch; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    for same in passes {
        if let Some(at) = (first..=last).find(|&at| matches_at(at, same)) {
            return Some(at);
        }
    }
    // Folding allocates, so it is done once per line and only when the cheaper passes failed.
    let folded_lines: Vec<String> = lines.iter().map(|line| fold(line)).collect();
    let folded_pattern: Vec<String> = pattern.iter().map(|line| fold(line)).collect();
    (first..=last).find(|&at| {
        folded_lines
            .get(at..at + pattern.len())
            .is_some_and(|window| {
                window
                    .iter()
                    .zip(&folded_pattern)
                    .all(|(line, want)| line.trim() == want.trim())
            })
    })
}

/// Whether a file line matches a pattern line, in one of the cheap passes.
type LinesMatch = fn(&str, &str) -> bool;

/// Folds typographic punctuation to ASCII, as models often retype it.
fn fold(line: &str) -> String {
    line.chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}'..='\u{201B}' => '\'',
            '\u{201C}'..='\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::Operation;
    use crate::patch::parse;

    fn apply(body: &str, patch: &str) -> Result<String, String> {
        let Operation::Update { hunks, .. } = parse(patch).unwrap().operations.remove(0) else {
            panic!("not an update");
        };
        apply_hunks(&TextFile::new(body.to_owned()), &hunks)
            .map(|f| f.body)
            .map_err(|e| e.to_string())
    }

    fn update(lines: &str) -> String {
        format!("*** Begin Patch\n*** Update File: f\n{lines}\n*** End Patch")
    }

    #[test]
    fn passes_run_in_order() {
        // The exact match later in the file wins over a loose match earlier.
        let lines = ["a  ", "a"];
        assert_eq!(seek(&lines, &["a"], 0, false), Some(1));
        assert_eq!(seek(&lines, &["a "], 0, false), Some(0));
        assert_eq!(seek(&["  a"], &["a"], 0, false), Some(0));
        assert_eq!(seek(&["x \u{2013} y"], &["x - y"], 0, false), Some(0));
        assert_eq!(seek(&["a\u{00a0}b"], &["a b"], 0, false), Some(0));
        assert_eq!(seek(&["a"], &["a", "b"], 0, false), None);
        assert_eq!(seek(&["a", "b"], &["a"], 5, false), None);
        assert_eq!(seek(&["a", "b", "a"], &["a"], 0, true), Some(2));
        assert_eq!(seek(&["a", "b"], &["a"], 0, true), None);
    }

    #[test]
    fn context_keeps_the_files_text() {
        let out = apply("  x \u{2014} y\nold\n", &update("@@\n x - y\n-old\n+new")).unwrap();
        assert_eq!(out, "  x \u{2014} y\nnew\n");
    }

    #[test]
    fn final_newline_state_is_kept() {
        assert_eq!(apply("a\nb", &update("-b\n+c")).unwrap(), "a\nc");
        assert_eq!(apply("a\nb\n", &update("-b\n+c")).unwrap(), "a\nc\n");
        assert_eq!(apply("a", &update("+b")).unwrap(), "a\nb");
        assert_eq!(apply("", &update("+b")).unwrap(), "b\n");
        assert_eq!(apply("a\n", &update("-a")).unwrap(), "");
    }

    #[test]
    fn mixed_endings_are_kept_line_by_line() {
        // The replaced CRLF line stays CRLF, the LF line after it stays LF.
        assert_eq!(
            apply("a\r\nb\r\nc\n", &update(" a\n-b\n+B\n c")).unwrap(),
            "a\r\nB\r\nc\n"
        );
        // Added lines pair with the removed lines of their run; the surplus takes the last one's.
        assert_eq!(
            apply("a\r\nb\nc\r\n", &update("-a\n-b\n+A\n+B\n+B2\n c")).unwrap(),
            "A\r\nB\nB2\nc\r\n"
        );
        // A pure insertion takes the ending of the line before it, or at the top of the line after.
        assert_eq!(
            apply("a\r\nb\nc\r\n", &update(" a\n+x\n b\n+y\n c")).unwrap(),
            "a\r\nx\r\nb\ny\nc\r\n"
        );
        assert_eq!(
            apply("a\r\nb\n", &update("+x\n a")).unwrap(),
            "x\r\na\r\nb\n"
        );
        // A last line without a line break gets the ending of the line before it when a line
        // is added after it; a `\r` at its end is text.
        assert_eq!(
            apply("a\nb\r\nc", &update("@@\n+d")).unwrap(),
            "a\nb\r\nc\r\nd"
        );
        assert_eq!(
            apply("a\r\nb\nc\r", &update(" b\n+x")).unwrap(),
            "a\r\nb\nx\nc\r"
        );
    }

    #[test]
    fn a_crlf_line_matches_exactly_in_a_mixed_file() {
        // Its `\r` is its ending, not trailing whitespace, so the first `x` matches exactly.
        assert_eq!(
            apply("x\r\ny\nx\n", &update("-x\n+z")).unwrap(),
            "z\r\ny\nx\n"
        );
    }

    #[test]
    fn pure_additions_go_after_the_anchor_or_at_the_end() {
        assert_eq!(
            apply("a\nb\nc\n", &update("@@ a\n+x")).unwrap(),
            "a\nx\nb\nc\n"
        );
        assert_eq!(
            apply("a\nb\nc\n", &update("@@\n+x")).unwrap(),
            "a\nb\nc\nx\n"
        );
        // The insertion moves the search position: the next hunk is sought after the anchor.
        assert_eq!(
            apply("b\na\nb\n", &update("@@ a\n+x\n@@\n-b\n+y")).unwrap(),
            "b\na\nx\ny\n"
        );
    }

    #[test]
    fn trailing_empty_context_is_optional_at_end_of_file() {
        assert_eq!(
            apply("a\nb\n", &update("-b\n+c\n \n*** End of File")).unwrap(),
            "a\nc\n"
        );
    }

    #[test]
    fn errors_show_expected_lines() {
        let err = apply("a\nb\n", &update("@@\n a\n-c\n+d")).unwrap_err();
        assert_eq!(
            err,
            "hunk 1 (patch line 3): could not find these lines in the file:\n   a\n  -c"
        );
        let err = apply("a\nb\n", &update("@@ zz\n-a")).unwrap_err();
        assert_eq!(
            err,
            "hunk 1 (patch line 3): could not find the `@@` anchor line `zz` in the file"
        );
    }
}
