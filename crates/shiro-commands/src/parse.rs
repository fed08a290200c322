//! Parsing of command sources: `commands.md` sections and `commands/*.md` files.
//!
//! Parsing never fails and never panics: every problem becomes a [`Diagnostic`] and the
//! offending piece is skipped (or kept, for warnings).

use std::fmt;
use std::path::{Path, PathBuf};

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something was skipped or misread; `shiro commands check` fails on these.
    Error,
    /// Something looks wrong but the command still works as written.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// A problem found while reading command sources, with a 1-based position.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// The file the problem is in, as the caller named it.
    pub file: PathBuf,
    /// 1-based line number (0 when the problem concerns the whole file, e.g. unreadable).
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// Whether this is an error or a warning.
    pub severity: Severity,
    /// A lowercase message without a trailing period.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.severity,
            self.message
        )
    }
}

/// Where a command comes from. Earlier variants win over later ones on a name clash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// A command built into the embedding program (e.g. `/undo`); always wins.
    Builtin,
    /// Defined under the workspace's `.shiro/` directory.
    Project,
    /// Defined under the user's config directory.
    User,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Builtin => "built-in",
            Origin::Project => "project",
            Origin::User => "user",
        })
    }
}

/// A user-defined command: a prompt template with its metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Command {
    /// The lowercase name typed after `/`, e.g. `review` or `git:commit`.
    pub name: String,
    /// The one-line summary shown in the `/` menu.
    pub description: Option<String>,
    /// A hint for the arguments, e.g. `<file> [focus]` (only from frontmatter).
    pub argument_hint: Option<String>,
    /// The prompt template, before expansion.
    pub body: String,
    /// Which source defined it.
    pub origin: Origin,
    /// The file that defined it.
    pub file: PathBuf,
    /// The 1-based line where it is defined (its heading, or 1 for a whole file).
    pub line: usize,
}

/// The result of parsing one or more sources: commands plus the problems found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Parsed {
    /// The commands, in source order, without duplicates.
    pub commands: Vec<Command>,
    /// Problems found, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Parsed {
    /// Adds `other`'s commands after this one's, reporting (and dropping) any whose name is
    /// already taken: within one origin, the first definition wins.
    fn merge(&mut self, other: Parsed) {
        self.diagnostics.extend(other.diagnostics);
        for command in other.commands {
            if let Some(first) = self.commands.iter().find(|c| c.name == command.name) {
                self.diagnostics.push(Diagnostic {
                    file: command.file.clone(),
                    line: command.line,
                    column: 1,
                    severity: Severity::Error,
                    message: format!(
                        "duplicate command /{}: already defined at {}:{}, this one is ignored",
                        command.name,
                        first.file.display(),
                        first.line
                    ),
                });
            } else {
                self.commands.push(command);
            }
        }
    }
}

/// Checks a command name (already lowercased); returns the 0-based char index of the first
/// bad character, or `None` when it is valid.
fn invalid_char(name: &str) -> Option<(usize, char)> {
    name.chars()
        .enumerate()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':')))
}

/// Trims trailing whitespace from every line, drops leading and trailing blank lines and
/// collapses runs of blank lines into one.
fn normalize_body(lines: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for line in lines {
        let line = line.trim_end();
        if line.is_empty() && out.last().is_none_or(|l| l.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out.join("\n")
}

/// A fence opener or closer: the fence character and the length of its run.
fn fence(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let run = rest.chars().take_while(|&x| x == c).count();
    (run >= 3).then_some((c, run))
}

/// Tracks whether we are inside a fenced code block, line by line.
#[derive(Default)]
struct FenceState {
    open: Option<(char, usize, usize)>,
}

impl FenceState {
    /// Feeds one line (1-based `line_no`); returns whether the line is inside or delimits a
    /// fenced block (and so cannot be a heading).
    fn feed(&mut self, line: &str, line_no: usize) -> bool {
        match self.open {
            Some((c, run, _)) => {
                if let Some((c2, run2)) = fence(line) {
                    let after = line.trim_start_matches(' ')[run2..].trim();
                    if c2 == c && run2 >= run && after.is_empty() {
                        self.open = None;
                    }
                }
                true
            }
            None => {
                if let Some((c, run)) = fence(line) {
                    // A backtick fence's info string may not contain backticks.
                    let info = &line.trim_start_matches(' ')[run..];
                    if c == '~' || !info.contains('`') {
                        self.open = Some((c, run, line_no));
                        return true;
                    }
                }
                false
            }
        }
    }
}

/// If `line` is a level-2 heading (`## name`), returns the text after `##` and its 0-based
/// char column within the line.
fn heading(line: &str) -> Option<(&str, usize)> {
    let rest = line.strip_prefix("##")?;
    if rest.is_empty() {
        return Some(("", 2));
    }
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim_start();
    let column = line.chars().count() - text.chars().count();
    Some((text.trim_end(), column))
}

/// Parses a `commands.md` file: every `## name` heading outside a fenced code block starts a
/// command. `file` is only used to label commands and diagnostics.
pub fn parse_commands_md(file: &Path, text: &str, origin: Origin) -> Parsed {
    struct Section<'a> {
        name: Option<String>,
        line: usize,
        lines: Vec<&'a str>,
    }

    let mut sections: Vec<Section<'_>> = Vec::new();
    let mut diagnostics = Vec::new();
    let mut fences = FenceState::default();
    let diag = |line: usize, column: usize, severity, message: String| Diagnostic {
        file: file.to_path_buf(),
        line,
        column,
        severity,
        message,
    };

    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let in_fence = fences.feed(line, line_no);
        let heading = if in_fence { None } else { heading(line) };
        let Some((raw, column)) = heading else {
            if let Some(section) = sections.last_mut() {
                section.lines.push(line);
            }
            continue;
        };
        let name = raw.to_lowercase();
        let name = if name.is_empty() {
            diagnostics.push(diag(
                line_no,
                column + 1,
                Severity::Error,
                "missing command name after `##`, section skipped".to_owned(),
            ));
            None
        } else if let Some((at, bad)) = invalid_char(&name) {
            diagnostics.push(diag(
                line_no,
                column + at + 1,
                Severity::Error,
                format!(
                    "invalid command name `{raw}`: {bad:?} is not allowed (use letters, digits, `-`, `_` and `:`), section skipped"
                ),
            ));
            None
        } else {
            Some(name)
        };
        sections.push(Section {
            name,
            line: line_no,
            lines: Vec::new(),
        });
    }
    if let Some((_, _, opened)) = fences.open {
        let owner = sections
            .iter()
            .rev()
            .find(|s| s.line < opened)
            .and_then(|s| s.name.as_deref())
            .map(|n| format!(" and belongs to /{n}"))
            .unwrap_or_default();
        diagnostics.push(diag(
            opened,
            1,
            Severity::Warning,
            format!("unclosed code fence: the rest of the file is inside it{owner}"),
        ));
    }

    let mut parsed = Parsed {
        commands: Vec::new(),
        diagnostics,
    };
    for section in sections {
        let Some(name) = section.name else { continue };
        let mut lines = section.lines.as_slice();
        let mut description = None;
        if let Some(first) = lines.iter().position(|l| !l.trim().is_empty())
            && let Some(summary) = lines[first].trim_start().strip_prefix('>')
        {
            let summary = summary.trim();
            if summary.is_empty() {
                parsed.diagnostics.push(diag(
                    section.line + first + 1,
                    1,
                    Severity::Warning,
                    format!("empty `>` summary for /{name}"),
                ));
            } else {
                description = Some(summary.to_owned());
            }
            lines = &lines[first + 1..];
        }
        let body = normalize_body(lines);
        if body.is_empty() {
            parsed.diagnostics.push(diag(
                section.line,
                1,
                Severity::Warning,
                format!("command /{name} has an empty body"),
            ));
        }
        parsed.merge(Parsed {
            commands: vec![Command {
                name,
                description,
                argument_hint: None,
                body,
                origin,
                file: file.to_path_buf(),
                line: section.line,
            }],
            diagnostics: Vec::new(),
        });
    }
    parsed.diagnostics.sort_by_key(|d| (d.line, d.column));
    parsed
}

/// Parses one `commands/<name>.md` file whose command is called `name` (as derived from its
/// path by the caller, lowercased and validated here). Optional `---` frontmatter may carry
/// `description` and `argument-hint`.
pub fn parse_command_file(file: &Path, name: &str, text: &str, origin: Origin) -> Parsed {
    let mut parsed = Parsed::default();
    let diag = |line: usize, column: usize, severity, message: String| Diagnostic {
        file: file.to_path_buf(),
        line,
        column,
        severity,
        message,
    };
    let name = name.to_lowercase();
    if name.is_empty() {
        parsed.diagnostics.push(diag(
            1,
            1,
            Severity::Error,
            "empty command name, file skipped".to_owned(),
        ));
        return parsed;
    }
    if let Some((_, bad)) = invalid_char(&name) {
        parsed.diagnostics.push(diag(
            1,
            1,
            Severity::Error,
            format!(
                "invalid command name `{name}` from the file name: {bad:?} is not allowed (use letters, digits, `-`, `_` and `:`), file skipped"
            ),
        ));
        return parsed;
    }

    let lines: Vec<&str> = text.lines().collect();
    let mut description = None;
    let mut argument_hint = None;
    let mut body_start = 0;
    if lines.first().is_some_and(|l| l.trim_end() == "---") {
        match lines.iter().skip(1).position(|l| l.trim_end() == "---") {
            None => parsed.diagnostics.push(diag(
                1,
                1,
                Severity::Error,
                "frontmatter `---` is never closed: the whole file is used as the body".to_owned(),
            )),
            Some(end) => {
                let end = end + 1;
                body_start = end + 1;
                for (i, line) in lines[1..end].iter().enumerate() {
                    let line_no = i + 2;
                    let trimmed = line.trim();
                    if trimmed.is_empty() || trimmed.starts_with('#') {
                        continue;
                    }
                    let Some((key, value)) = trimmed.split_once(':') else {
                        parsed.diagnostics.push(diag(
                            line_no,
                            1,
                            Severity::Warning,
                            format!("frontmatter line `{trimmed}` is not `key: value`, ignored"),
                        ));
                        continue;
                    };
                    let key = key.trim();
                    let value = unquote(value.trim());
                    let slot = match key {
                        "description" => &mut description,
                        "argument-hint" => &mut argument_hint,
                        _ => {
                            parsed.diagnostics.push(diag(
                                line_no,
                                1,
                                Severity::Warning,
                                format!(
                                    "unknown frontmatter key `{key}` (known: `description`, `argument-hint`), ignored"
                                ),
                            ));
                            continue;
                        }
                    };
                    if slot.is_some() {
                        parsed.diagnostics.push(diag(
                            line_no,
                            1,
                            Severity::Warning,
                            format!("frontmatter key `{key}` repeated, the first value is kept"),
                        ));
                    } else if !value.is_empty() {
                        *slot = Some(value.to_owned());
                    }
                }
            }
        }
    }
    let body = normalize_body(&lines[body_start.min(lines.len())..]);
    if body.is_empty() {
        parsed.diagnostics.push(diag(
            1,
            1,
            Severity::Warning,
            format!("command /{name} has an empty body"),
        ));
    }
    parsed.commands.push(Command {
        name,
        description,
        argument_hint,
        body,
        origin,
        file: file.to_path_buf(),
        line: 1,
    });
    parsed
}

/// Strips one pair of matching surrounding quotes.
fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// Reads one source directory (`<workspace>/.shiro` or the user config directory): its
/// `commands.md`, then every `commands/**/*.md` in sorted order. Missing files are not an
/// error; unreadable ones are diagnostics.
pub fn load_source(dir: &Path, origin: Origin) -> Parsed {
    let mut parsed = Parsed::default();
    let md = dir.join("commands.md");
    match std::fs::read(&md) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            parsed.merge(parse_commands_md(&md, &text, origin));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => parsed.diagnostics.push(unreadable(&md, &e)),
    }
    let mut files = Vec::new();
    collect_md(
        &dir.join("commands"),
        &[],
        &mut files,
        &mut parsed.diagnostics,
        0,
    );
    files.sort();
    for (name, path) in files {
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                parsed.merge(parse_command_file(&path, &name, &text, origin));
            }
            Err(e) => parsed.diagnostics.push(unreadable(&path, &e)),
        }
    }
    parsed
}

fn unreadable(path: &Path, e: &std::io::Error) -> Diagnostic {
    Diagnostic {
        file: path.to_path_buf(),
        line: 0,
        column: 0,
        severity: Severity::Error,
        message: format!("cannot read: {e}"),
    }
}

/// Directory depth beyond which `commands/` is not searched (guards against symlink loops).
const MAX_DEPTH: usize = 8;

/// Collects `(name, path)` for every `.md` file under `dir`; a file `a/b/c.md` is `a:b:c`.
fn collect_md(
    dir: &Path,
    prefix: &[String],
    out: &mut Vec<(String, PathBuf)>,
    diagnostics: &mut Vec<Diagnostic>,
    depth: usize,
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            diagnostics.push(unreadable(dir, &e));
            return;
        }
    };
    if depth > MAX_DEPTH {
        diagnostics.push(Diagnostic {
            file: dir.to_path_buf(),
            line: 0,
            column: 0,
            severity: Severity::Warning,
            message: format!("directories nested deeper than {MAX_DEPTH} levels are not read"),
        });
        return;
    }
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if file_name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            let mut prefix = prefix.to_vec();
            prefix.push(file_name.to_owned());
            collect_md(&path, &prefix, out, diagnostics, depth + 1);
        } else if let Some(stem) = file_name.strip_suffix(".md") {
            let mut parts = prefix.to_vec();
            parts.push(stem.to_owned());
            out.push((parts.join(":"), path));
        }
    }
}
