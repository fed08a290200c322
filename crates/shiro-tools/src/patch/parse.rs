//! The patch parser: text in, [`Patch`] out, every error naming its patch line.

use super::{Envelope, Hunk, HunkLine, Operation, Patch};

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File:";
const DELETE_FILE: &str = "*** Delete File:";
const UPDATE_FILE: &str = "*** Update File:";
const MOVE_TO: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// Why a text is not a valid patch. Lines are 1-based lines of the text as sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The text holds no file operation.
    #[error(
        "the patch is empty: it names no file; send `*** Begin Patch`, then `*** Add File: path`, \
         `*** Update File: path` or `*** Delete File: path` sections, then `*** End Patch`"
    )]
    Empty,
    /// A shell heredoc wrapper was opened but its closing delimiter is not the last line.
    #[error("line {line}: the heredoc opened here is not closed by a final `{delimiter}` line")]
    HeredocNotClosed {
        /// The line of the opener.
        line: usize,
        /// The heredoc delimiter.
        delimiter: String,
    },
    /// The first line is neither `*** Begin Patch` nor a file header.
    #[error(
        "line {line}: a patch starts with `*** Begin Patch` (or directly with a `*** Add File:`, \
         `*** Update File:` or `*** Delete File:` line), found `{found}`"
    )]
    InvalidStart {
        /// The offending line.
        line: usize,
        /// Its text.
        found: String,
    },
    /// A shell heredoc wrapper is closed, but something other than blank lines follows.
    #[error(
        "line {line}: `{found}` follows the heredoc's closing `{delimiter}` (line {close}): \
         only blank lines may come after it"
    )]
    AfterHeredoc {
        /// The first offending line.
        line: usize,
        /// Its text.
        found: String,
        /// The heredoc delimiter.
        delimiter: String,
        /// The line that closes the heredoc.
        close: usize,
    },
    /// `*** Begin Patch` without any `*** End Patch` after it.
    #[error(
        "line {line}: `*** Begin Patch` is not closed: no `*** End Patch` line follows it (was \
         the patch cut off?)"
    )]
    MissingEnd {
        /// The line of `*** Begin Patch`.
        line: usize,
    },
    /// Something other than blank lines and one heredoc closing word after `*** End Patch`.
    #[error(
        "line {line}: `{found}` follows `*** End Patch` (line {end}): only blank lines and one \
         heredoc closing word (such as `EOF`) may come after it"
    )]
    AfterEnd {
        /// The first offending line.
        line: usize,
        /// Its text.
        found: String,
        /// The line of `*** End Patch`.
        end: usize,
    },
    /// A line where a file header was expected.
    #[error(
        "line {line}: expected a file header (`*** Add File: path`, `*** Update File: path` or \
         `*** Delete File: path`), found `{found}`"
    )]
    InvalidHeader {
        /// The offending line.
        line: usize,
        /// Its text.
        found: String,
    },
    /// A marker in a place where it has no meaning.
    #[error("line {line}: `{marker}` is not allowed here")]
    MisplacedMarker {
        /// The offending line.
        line: usize,
        /// The marker.
        marker: &'static str,
    },
    /// A file header without a path.
    #[error("line {line}: `{marker}` needs a path after it")]
    MissingPath {
        /// The offending line.
        line: usize,
        /// The marker.
        marker: &'static str,
    },
    /// A line of an `*** Add File` section that does not start with `+`.
    #[error(
        "line {line}: every line of the added file {path} must start with `+`, found `{found}`"
    )]
    AddLine {
        /// The offending line.
        line: usize,
        /// The file being added.
        path: String,
        /// The line's text.
        found: String,
    },
    /// A line of an update hunk that starts with none of ` `, `-`, `+`, `@@`.
    #[error(
        "line {line}: unexpected line in the hunk for {path}: `{found}`; every hunk line starts \
         with ` ` (context), `-` (remove) or `+` (add), and hunks are introduced by `@@`"
    )]
    HunkLine {
        /// The offending line.
        line: usize,
        /// The file being updated.
        path: String,
        /// The line's text.
        found: String,
    },
    /// An `@@` hunk with no lines.
    #[error("line {line}: the hunk for {path} that starts here has no lines")]
    EmptyHunk {
        /// The line where the hunk starts.
        line: usize,
        /// The file being updated.
        path: String,
    },
    /// An `*** Update File` section with no hunk and no move.
    #[error(
        "line {line}: `*** Update File: {path}` has no hunks; add `@@` hunks with ` `, `-` and `+` \
         lines, or a `*** Move to:` line"
    )]
    EmptyUpdate {
        /// The line of the header.
        line: usize,
        /// The file.
        path: String,
    },
    /// `*** End of File` that does not close a hunk.
    #[error("line {line}: `*** End of File` must follow the lines of a hunk of {path}")]
    EndOfFileWithoutHunk {
        /// The offending line.
        line: usize,
        /// The file being updated.
        path: String,
    },
    /// Hunk lines right after `*** End of File`, without a new `@@`.
    #[error(
        "line {line}: in {path}, lines after `*** End of File` must start a new hunk with `@@`"
    )]
    AfterEndOfFile {
        /// The offending line.
        line: usize,
        /// The file being updated.
        path: String,
    },
}

/// Parses a patch in Codex's format (or the seed's simpler envelope, or either wrapped in a
/// shell heredoc). See `docs/tools.md` for the grammar.
///
/// ```
/// use shiro_tools::patch::{self, Envelope, Operation};
///
/// let patch = patch::parse("*** Delete File: old.txt\n").unwrap();
/// assert_eq!(patch.envelope, Envelope::Simple);
/// assert_eq!(patch.operations, [Operation::Delete { path: "old.txt".into(), line: 1 }]);
/// let err = patch::parse("*** Begin Patch\nhello\n*** End Patch").unwrap_err();
/// assert!(err.to_string().starts_with("line 2: expected a file header"));
/// ```
pub fn parse(text: &str) -> Result<Patch, PatchError> {
    let numbered: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .collect();
    let mut body = trim_blank(&numbered);
    let &(first_line, first) = body.first().ok_or(PatchError::Empty)?;
    let mut workdir = None;
    if let Some(opener) = heredoc_opener(first) {
        body = trim_blank(heredoc_body(body, first_line, opener.delimiter)?);
        workdir = opener.workdir.map(str::to_owned);
    }
    let &(first_line, first) = body.first().ok_or(PatchError::Empty)?;
    let (envelope, body) = if first.trim() == BEGIN_PATCH {
        let rest = body.get(1..).unwrap_or_default();
        match before_end(rest)? {
            Some(inner) => (Envelope::Codex, inner),
            None => return Err(PatchError::MissingEnd { line: first_line }),
        }
    } else if matches!(
        marker(first),
        Some(Marker::Add(_) | Marker::Delete(_) | Marker::Update(_))
    ) {
        // The simple envelope may still end with `*** End Patch`; it is accepted and ignored.
        (Envelope::Simple, before_end(body)?.unwrap_or(body))
    } else {
        return Err(PatchError::InvalidStart {
            line: first_line,
            found: first.to_owned(),
        });
    };
    let operations = Parser {
        lines: body,
        pos: 0,
        envelope,
    }
    .operations()?;
    if operations.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(Patch {
        envelope,
        workdir,
        operations,
    })
}

/// Drops blank lines at both ends.
fn trim_blank<'a, 'b>(lines: &'a [(usize, &'b str)]) -> &'a [(usize, &'b str)] {
    let start = lines
        .iter()
        .position(|(_, line)| !line.trim().is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|(_, line)| !line.trim().is_empty())
        .map_or(start, |i| i + 1);
    lines.get(start..end).unwrap_or_default()
}

/// The lines inside a heredoc wrapper: `lines` without its opener (the first line) and its
/// closing delimiter, which must be the last line but for blank lines.
fn heredoc_body<'a, 'b>(
    lines: &'a [(usize, &'b str)],
    opener: usize,
    delimiter: &str,
) -> Result<&'a [(usize, &'b str)], PatchError> {
    match lines.split_last() {
        Some((&(_, last), rest)) if !rest.is_empty() && last.trim() == delimiter => {
            return Ok(rest.get(1..).unwrap_or_default());
        }
        _ => {}
    }
    // A line that closes the heredoc as the shell would (only `<<-` strips leading tabs, but
    // tabs are allowed either way) with more lines after it: name the first of them.
    let closes = |line: &str| line.trim_start_matches('\t').trim_end() == delimiter;
    let after_close = lines
        .iter()
        .skip(1)
        .position(|&(_, line)| closes(line))
        .and_then(|index| {
            let &(close, _) = lines.get(index + 1)?;
            let &(line, found) = lines
                .get(index + 2..)?
                .iter()
                .find(|(_, line)| !line.trim().is_empty())?;
            Some(PatchError::AfterHeredoc {
                line,
                found: found.to_owned(),
                delimiter: delimiter.to_owned(),
                close,
            })
        });
    Err(after_close.unwrap_or_else(|| PatchError::HeredocNotClosed {
        line: opener,
        delimiter: delimiter.to_owned(),
    }))
}

/// The lines before the first `*** End Patch` line, or `None` when there is none. After it may
/// come blank lines and one heredoc closing word (`EOF`, `PATCH`), which a model leaves when it
/// copies a heredoc without its opener; anything else is refused, naming the line.
fn before_end<'a, 'b>(
    lines: &'a [(usize, &'b str)],
) -> Result<Option<&'a [(usize, &'b str)]>, PatchError> {
    let Some(end) = lines
        .iter()
        .position(|&(_, line)| marker(line) == Some(Marker::End))
    else {
        return Ok(None);
    };
    let (before, after) = lines.split_at(end);
    let Some((&(end_line, _), after)) = after.split_first() else {
        return Ok(Some(before));
    };
    let mut rest = after.iter().filter(|(_, line)| !line.trim().is_empty());
    let junk = match rest.next() {
        Some(&(_, word)) if is_closing_word(word.trim()) => rest.next(),
        first => first,
    };
    match junk {
        Some(&(line, found)) => Err(PatchError::AfterEnd {
            line,
            found: found.to_owned(),
            end: end_line,
        }),
        None => Ok(Some(before)),
    }
}

/// Whether `word` looks like a heredoc's closing line: a capital letter, then capitals, digits
/// and `_` (`EOF`, `PATCH`, `END_PATCH`). Lower-case words are more likely stray prose.
fn is_closing_word(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_uppercase())
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The first line of a shell heredoc wrapper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opener<'a> {
    /// The word that closes the heredoc.
    delimiter: &'a str,
    /// The directory of a `cd <dir> &&` before `apply_patch`.
    workdir: Option<&'a str>,
}

/// Reads a heredoc opener: `apply_patch <<'EOF'`, `<<EOF`, or `cd <dir> && apply_patch <<'EOF'`
/// (the form of Codex's shell call). Anything else on the line, such as a second command, makes
/// it no opener.
fn heredoc_opener(line: &str) -> Option<Opener<'_>> {
    let line = line.trim();
    let (workdir, rest) = match line.strip_prefix("cd") {
        Some(rest) if rest.starts_with([' ', '\t']) => {
            let (dir, rest) = shell_word(rest.trim_start())?;
            let rest = rest.trim_start().strip_prefix("&&")?.trim_start();
            (Some(dir), rest.strip_prefix("apply_patch")?.trim_start())
        }
        _ => (
            None,
            line.strip_prefix("apply_patch")
                .map_or(line, str::trim_start),
        ),
    };
    let rest = rest.strip_prefix("<<")?;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    let (word, tail) = match rest.chars().next()? {
        quote @ ('\'' | '"') => rest.strip_prefix(quote)?.split_once(quote)?,
        _ => rest.split_once(char::is_whitespace).unwrap_or((rest, "")),
    };
    let is_word = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (is_word && tail.trim().is_empty()).then_some(Opener {
        delimiter: word,
        workdir,
    })
}

/// One shell word at the start of `text` that means the same to every shell: in `'` or `"`
/// quotes, or bare, and without anything a shell would expand or treat specially (`$`, `~`,
/// globs, escapes, operators). Returns the word without its quotes and the text after it.
fn shell_word(text: &str) -> Option<(&str, &str)> {
    let (word, rest) = match text.chars().next()? {
        quote @ ('\'' | '"') => text.strip_prefix(quote)?.split_once(quote)?,
        // A bare word ends at a blank or at an operator (`cd src&&apply_patch`).
        _ => text.split_at(
            text.find(|c: char| c.is_whitespace() || "&|;<>".contains(c))
                .unwrap_or(text.len()),
        ),
    };
    let special = |c: char| "$`\\'\"~*?[]{}()<>|&;#".contains(c) || (c.is_whitespace() && c != ' ');
    (!word.is_empty() && !word.contains(special)).then_some((word, rest))
}

/// A `***` marker line (surrounding spaces allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker<'a> {
    Begin,
    End,
    Add(&'a str),
    Delete(&'a str),
    Update(&'a str),
    MoveTo(&'a str),
    EndOfFile,
}

impl Marker<'_> {
    fn text(self) -> &'static str {
        match self {
            Marker::Begin => BEGIN_PATCH,
            Marker::End => END_PATCH,
            Marker::Add(_) => ADD_FILE,
            Marker::Delete(_) => DELETE_FILE,
            Marker::Update(_) => UPDATE_FILE,
            Marker::MoveTo(_) => MOVE_TO,
            Marker::EndOfFile => END_OF_FILE,
        }
    }
}

type MakeMarker<'a> = fn(&'a str) -> Marker<'a>;

fn marker<'a>(raw: &'a str) -> Option<Marker<'a>> {
    let line = raw.trim();
    if line == BEGIN_PATCH {
        return Some(Marker::Begin);
    }
    if line == END_PATCH {
        return Some(Marker::End);
    }
    if line == END_OF_FILE {
        return Some(Marker::EndOfFile);
    }
    let with_path: [(&str, MakeMarker<'a>); 4] = [
        (ADD_FILE, Marker::Add),
        (DELETE_FILE, Marker::Delete),
        (UPDATE_FILE, Marker::Update),
        (MOVE_TO, Marker::MoveTo),
    ];
    with_path
        .into_iter()
        .find_map(|(prefix, make)| line.strip_prefix(prefix).map(|path| make(path.trim())))
}

/// Reads the operations between the envelope lines.
struct Parser<'a, 'b> {
    lines: &'a [(usize, &'b str)],
    pos: usize,
    envelope: Envelope,
}

impl<'b> Parser<'_, 'b> {
    fn peek(&self) -> Option<(usize, &'b str)> {
        self.lines.get(self.pos).copied()
    }

    fn operations(mut self) -> Result<Vec<Operation>, PatchError> {
        let mut operations = Vec::new();
        while let Some((line, raw)) = self.peek() {
            self.pos += 1;
            if raw.trim().is_empty() {
                continue;
            }
            let operation = match marker(raw) {
                Some(Marker::Add(path)) => self.add(line, checked_path(line, path, ADD_FILE)?)?,
                Some(Marker::Delete(path)) => Operation::Delete {
                    path: checked_path(line, path, DELETE_FILE)?,
                    line,
                },
                Some(Marker::Update(path)) => {
                    self.update(line, checked_path(line, path, UPDATE_FILE)?)?
                }
                Some(other) => {
                    return Err(PatchError::MisplacedMarker {
                        line,
                        marker: other.text(),
                    });
                }
                None => {
                    return Err(PatchError::InvalidHeader {
                        line,
                        found: raw.to_owned(),
                    });
                }
            };
            operations.push(operation);
        }
        Ok(operations)
    }

    /// The `+` lines of an added file. Blank lines between `+` lines are taken as empty lines
    /// (models often drop the `+` there); blank lines before the next header are separators.
    fn add(&mut self, line: usize, path: String) -> Result<Operation, PatchError> {
        let mut contents = String::new();
        let mut blanks = 0;
        while let Some((at, raw)) = self.peek() {
            if marker(raw).is_some() {
                break;
            }
            if raw.starts_with("***") {
                return Err(PatchError::InvalidHeader {
                    line: at,
                    found: raw.to_owned(),
                });
            }
            if let Some(text) = raw.strip_prefix('+') {
                contents.extend(std::iter::repeat_n('\n', blanks));
                blanks = 0;
                contents.push_str(text);
                contents.push('\n');
            } else if raw.trim().is_empty() {
                blanks += 1;
            } else {
                return Err(PatchError::AddLine {
                    line: at,
                    path,
                    found: raw.to_owned(),
                });
            }
            self.pos += 1;
        }
        Ok(Operation::Add {
            path,
            line,
            contents,
        })
    }

    fn update(&mut self, line: usize, path: String) -> Result<Operation, PatchError> {
        let mut move_to = None;
        if let Some((at, raw)) = self.peek()
            && let Some(Marker::MoveTo(dest)) = marker(raw)
        {
            move_to = Some(checked_path(at, dest, MOVE_TO)?);
            self.pos += 1;
        }
        let mut hunks = Vec::new();
        let mut current: Option<HunkBuilder> = None;
        let mut after_end_of_file = false;
        while let Some((at, raw)) = self.peek() {
            match marker(raw) {
                Some(Marker::EndOfFile) => {
                    let Some(hunk) = current.take() else {
                        return Err(PatchError::EndOfFileWithoutHunk { line: at, path });
                    };
                    hunks.extend(hunk.finish(true, self.envelope, &path)?);
                    after_end_of_file = true;
                    self.pos += 1;
                    continue;
                }
                Some(Marker::Add(_) | Marker::Delete(_) | Marker::Update(_)) => break,
                Some(other) => {
                    return Err(PatchError::MisplacedMarker {
                        line: at,
                        marker: other.text(),
                    });
                }
                None => {}
            }
            self.pos += 1;
            if let Some(rest) = raw.strip_prefix("@@") {
                let anchor = anchor(rest);
                match current.as_mut() {
                    // Stacked `@@` lines narrow the search step by step (`@@ class A` then `@@ fn f`).
                    Some(hunk) if hunk.lines.is_empty() => hunk.anchors.extend(anchor),
                    _ => {
                        if let Some(done) = current.take() {
                            hunks.extend(done.finish(false, self.envelope, &path)?);
                        }
                        current = Some(HunkBuilder::new(at, true, anchor));
                    }
                }
                after_end_of_file = false;
                continue;
            }
            // An unknown `***` line is far more likely a mistyped header than a hunk line.
            if raw.starts_with("***") {
                return Err(PatchError::InvalidHeader {
                    line: at,
                    found: raw.to_owned(),
                });
            }
            let hunk_line = if let Some(text) = raw.strip_prefix(' ') {
                HunkLine::Context(text.to_owned())
            } else if let Some(text) = raw.strip_prefix('-') {
                HunkLine::Remove(text.to_owned())
            } else if let Some(text) = raw.strip_prefix('+') {
                HunkLine::Add(text.to_owned())
            } else if raw.trim().is_empty() {
                // A blank line is an empty context line whose leading space was lost, unless it
                // only separates this hunk from the next header.
                if let Some(hunk) = current.as_mut() {
                    hunk.blanks += 1;
                }
                continue;
            } else {
                return Err(PatchError::HunkLine {
                    line: at,
                    path,
                    found: raw.to_owned(),
                });
            };
            let hunk = match current.as_mut() {
                Some(hunk) => hunk,
                None if after_end_of_file => {
                    return Err(PatchError::AfterEndOfFile { line: at, path });
                }
                None => current.insert(HunkBuilder::new(at, false, None)),
            };
            hunk.push(hunk_line);
        }
        if let Some(hunk) = current {
            hunks.extend(hunk.finish(false, self.envelope, &path)?);
        }
        if hunks.is_empty() && move_to.is_none() {
            return Err(PatchError::EmptyUpdate { line, path });
        }
        Ok(Operation::Update {
            path,
            move_to,
            line,
            hunks,
        })
    }
}

fn checked_path(line: usize, path: &str, marker: &'static str) -> Result<String, PatchError> {
    if path.is_empty() {
        return Err(PatchError::MissingPath { line, marker });
    }
    Ok(path.to_owned())
}

/// The anchor text of an `@@` line (what follows `@@ `), or `None` for a bare `@@`.
///
/// A unified-diff range header (`@@ -12,3 +12,4 @@ fn main`) is accepted as well: the ranges
/// are ignored, and the function context after them, if any, becomes the anchor.
fn anchor(rest: &str) -> Option<String> {
    let text = rest.strip_prefix(' ').unwrap_or(rest);
    let text = unified_range_tail(text).map_or(text, str::trim);
    (!text.trim().is_empty()).then(|| text.to_owned())
}

/// What follows `-a,b +c,d @@`, when `text` starts with such ranges.
fn unified_range_tail(text: &str) -> Option<&str> {
    let is_range = |range: &str| {
        let mut parts = range.splitn(2, ',');
        parts.all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    };
    let rest = text.trim_start().strip_prefix('-')?;
    let (old, rest) = rest.split_once(' ')?;
    let rest = rest.trim_start().strip_prefix('+')?;
    let (new, rest) = rest.split_once(' ')?;
    (is_range(old) && is_range(new)).then_some(())?;
    rest.trim_start().strip_prefix("@@")
}

struct HunkBuilder {
    line: usize,
    /// Whether the hunk was introduced by an `@@` line.
    has_header: bool,
    anchors: Vec<String>,
    lines: Vec<HunkLine>,
    /// Blank lines seen since the last hunk line, kept only if another hunk line follows.
    blanks: usize,
}

impl HunkBuilder {
    fn new(line: usize, has_header: bool, anchor: Option<String>) -> Self {
        Self {
            line,
            has_header,
            anchors: anchor.into_iter().collect(),
            lines: Vec::new(),
            blanks: 0,
        }
    }

    fn push(&mut self, line: HunkLine) {
        let blanks = std::mem::take(&mut self.blanks);
        self.lines.extend(std::iter::repeat_n(
            HunkLine::Context(String::new()),
            blanks,
        ));
        self.lines.push(line);
    }

    /// The finished hunk. In the simple envelope, a hunk of only `-`/`+` lines (no `@@`, no
    /// context) is split into one hunk per `-` run and the `+` run after it, because without
    /// context nothing says the runs are adjacent in the file.
    fn finish(
        self,
        end_of_file: bool,
        envelope: Envelope,
        path: &str,
    ) -> Result<Vec<Hunk>, PatchError> {
        if self.lines.is_empty() {
            return Err(PatchError::EmptyHunk {
                line: self.line,
                path: path.to_owned(),
            });
        }
        let splittable = envelope == Envelope::Simple
            && !self.has_header
            && !self
                .lines
                .iter()
                .any(|line| matches!(line, HunkLine::Context(_)));
        if !splittable {
            return Ok(vec![Hunk {
                line: self.line,
                anchors: self.anchors,
                lines: self.lines,
                end_of_file,
            }]);
        }
        // Without blanks or headers the lines are consecutive in the patch, so the line of each
        // group is the hunk's first line plus its offset.
        let mut groups: Vec<Hunk> = Vec::new();
        let mut previous_was_add = false;
        for (offset, line) in self.lines.into_iter().enumerate() {
            let starts_group = match &line {
                HunkLine::Remove(_) => previous_was_add || groups.is_empty(),
                HunkLine::Add(_) | HunkLine::Context(_) => groups.is_empty(),
            };
            previous_was_add = matches!(line, HunkLine::Add(_));
            match groups.last_mut() {
                Some(group) if !starts_group => group.lines.push(line),
                _ => groups.push(Hunk {
                    line: self.line + offset,
                    anchors: Vec::new(),
                    lines: vec![line],
                    end_of_file: false,
                }),
            }
        }
        if let Some(last) = groups.last_mut() {
            last.end_of_file = end_of_file;
        }
        Ok(groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_hunks(text: &str) -> Vec<Hunk> {
        match parse(text).unwrap().operations.remove(0) {
            Operation::Update { hunks, .. } => hunks,
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn heredoc_openers() {
        let delimiter = |line| heredoc_opener(line).map(|opener| opener.delimiter);
        assert_eq!(delimiter("apply_patch <<'EOF'"), Some("EOF"));
        assert_eq!(delimiter("<<EOF"), Some("EOF"));
        assert_eq!(delimiter("  apply_patch <<-\"PATCH\"  "), Some("PATCH"));
        assert_eq!(delimiter("apply_patch << 'EOF' extra"), None);
        assert_eq!(delimiter("*** Begin Patch"), None);
        assert_eq!(delimiter("<<''"), None);
    }

    #[test]
    fn cd_before_apply_patch() {
        let workdir = |line| heredoc_opener(line).map(|opener| opener.workdir);
        assert_eq!(workdir("apply_patch <<'EOF'"), Some(None));
        assert_eq!(workdir("cd src && apply_patch <<'EOF'"), Some(Some("src")));
        assert_eq!(workdir("cd\tsrc/a&&apply_patch<<EOF"), Some(Some("src/a")));
        assert_eq!(
            workdir("cd 'my dir' && apply_patch <<'EOF'"),
            Some(Some("my dir"))
        );
        assert_eq!(
            workdir("cd \"/w/x\" && apply_patch <<\"EOF\""),
            Some(Some("/w/x"))
        );
        // What a shell would expand, other commands, and `cd` without `apply_patch` are no
        // wrapper.
        for line in [
            "cd $HOME && apply_patch <<'EOF'",
            "cd ~/x && apply_patch <<'EOF'",
            "cd \"$D\" && apply_patch <<'EOF'",
            "cd src/* && apply_patch <<'EOF'",
            "cd src; apply_patch <<'EOF'",
            "cd src || apply_patch <<'EOF'",
            "cd src && <<'EOF'",
            "cd a b && apply_patch <<'EOF'",
            "cd && apply_patch <<'EOF'",
            "cd '' && apply_patch <<'EOF'",
            "cd src && apply_patch <<'EOF' && echo done",
            "cdsrc && apply_patch <<'EOF'",
        ] {
            assert_eq!(workdir(line), None, "{line}");
        }
        let patch = parse("cd src && apply_patch <<'EOF'\n*** Delete File: a\nEOF").unwrap();
        assert_eq!(patch.workdir.as_deref(), Some("src"));
        assert_eq!(parse("*** Delete File: a").unwrap().workdir, None);
    }

    #[test]
    fn unified_ranges_become_anchors() {
        assert_eq!(
            anchor(" -1,3 +1,4 @@ fn main()"),
            Some("fn main()".to_owned())
        );
        assert_eq!(anchor(" -1 +1 @@"), None);
        assert_eq!(anchor(" fn main()"), Some("fn main()".to_owned()));
        assert_eq!(anchor(" -x +y @@ z"), Some("-x +y @@ z".to_owned()));
        assert_eq!(anchor(""), None);
    }

    #[test]
    fn stacked_anchors_and_blank_lines() {
        let hunks = update_hunks(
            "*** Begin Patch\n*** Update File: a\n@@ class A\n@@ def f\n a\n\n-b\n+c\n\n*** End Patch",
        );
        assert_eq!(hunks.len(), 1);
        assert_eq!(hunks[0].anchors, ["class A", "def f"]);
        assert_eq!(
            hunks[0].lines,
            [
                HunkLine::Context("a".into()),
                HunkLine::Context(String::new()),
                HunkLine::Remove("b".into()),
                HunkLine::Add("c".into()),
            ]
        );
    }

    #[test]
    fn simple_envelope_splits_context_free_runs() {
        let hunks = update_hunks("*** Update File: a\n-x\n+y\n-z\n+w\n+v\n");
        let lines: Vec<Vec<String>> = hunks
            .iter()
            .map(|h| h.lines.iter().map(ToString::to_string).collect())
            .collect();
        assert_eq!(lines, [vec!["-x", "+y"], vec!["-z", "+w", "+v"]]);
        assert_eq!(hunks.iter().map(|h| h.line).collect::<Vec<_>>(), [2, 4]);
    }

    #[test]
    fn codex_envelope_keeps_runs_together() {
        let hunks =
            update_hunks("*** Begin Patch\n*** Update File: a\n-x\n+y\n-z\n+w\n*** End Patch");
        assert_eq!(hunks.len(), 1);
    }

    #[test]
    fn after_end_patch_only_blank_lines_and_one_closing_word() {
        let ok = |text: &str| parse(text).map(|patch| patch.operations.len());
        let patch = "*** Begin Patch\n*** Delete File: a\n*** End Patch\n";
        assert_eq!(ok(&format!("{patch}\n \n")), Ok(1));
        assert_eq!(ok(&format!("{patch}EOF\n")), Ok(1));
        assert_eq!(ok(&format!("{patch}\n  END_PATCH2 \n\n")), Ok(1));
        assert_eq!(ok("*** Delete File: a\n*** End Patch\nPATCH"), Ok(1));
        let junk = |text: &str| match parse(text) {
            Err(PatchError::AfterEnd { line, found, end }) => (line, found, end),
            other => panic!("{other:?}"),
        };
        assert_eq!(junk(&format!("{patch}EOF\nEOF")), (5, "EOF".into(), 3));
        assert_eq!(junk(&format!("{patch}done")), (4, "done".into(), 3));
        assert_eq!(junk(&format!("{patch}\nfoo\nEOF")), (5, "foo".into(), 3));
        assert_eq!(
            junk(&format!("{patch}{patch}")),
            (4, "*** Begin Patch".into(), 3)
        );
        assert_eq!(
            junk("*** Delete File: a\n*** End Patch\n*** Delete File: b"),
            (3, "*** Delete File: b".into(), 2)
        );
    }

    #[test]
    fn after_a_heredoc_only_blank_lines() {
        let text = "apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF\n";
        assert_eq!(
            parse(&format!("{text}\n\n")).map(|p| p.operations.len()),
            Ok(1)
        );
        assert_eq!(
            parse(&format!("{text}echo done\n")),
            Err(PatchError::AfterHeredoc {
                line: 6,
                found: "echo done".into(),
                delimiter: "EOF".into(),
                close: 5,
            })
        );
        // A context line ` EOF` does not close the heredoc, as in the shell.
        assert_eq!(
            parse("<<EOF\n*** Begin Patch\n*** Update File: a\n EOF\n-x\n*** End Patch\n"),
            Err(PatchError::HeredocNotClosed {
                line: 1,
                delimiter: "EOF".into(),
            })
        );
    }

    #[test]
    fn errors_carry_line_numbers() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(err(""), PatchError::Empty.to_string());
        assert_eq!(
            err("*** Begin Patch\n*** End Patch"),
            PatchError::Empty.to_string()
        );
        assert!(err("\n\n*** Begin Patch\n*** Add File: a\n+x").starts_with("line 3: "));
        assert!(err("*** Begin Patch\n*** Add File: a\nx\n*** End Patch").starts_with("line 3: "));
        assert!(
            err("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch").starts_with("line 3: ")
        );
        assert!(
            err("*** Begin Patch\n*** Update File: a\n-x\n*** End of File\n+y\n*** End Patch")
                .starts_with("line 5: ")
        );
        assert!(err("*** Begin Patch\n*** Update File:\n*** End Patch").starts_with("line 2: "));
        assert!(
            err("apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\n").starts_with("line 1: ")
        );
    }
}
