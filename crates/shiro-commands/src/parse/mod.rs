//! Parsing of command sources: `commands.md` sections, Markdown command files (shiro's,
//! Claude Code's, OpenCode's), Gemini CLI's TOML command files and skills' `SKILL.md`.
//!
//! Parsing never fails and never panics: every problem becomes a [`Diagnostic`] and the
//! offending piece is skipped (or kept, for warnings).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::allowed::AllowedTools;
use crate::frontmatter::{self, Value};
use crate::template::Syntax;

mod gemini;
mod skill;

pub use gemini::parse_gemini_file;
pub use skill::{SKILL_FILE, SkillInfo, parse_skill_file};

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something was skipped or misread; `shiro commands check` fails on these.
    Error,
    /// Something looks wrong but the command still works as written.
    Warning,
    /// Worth knowing, not a problem (a definition hidden by a stronger one).
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// A problem found while reading command sources, with a 1-based position.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// The file the problem is in, as the caller named it.
    pub file: PathBuf,
    /// 1-based line number (1 when the problem concerns the whole file).
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// Whether this is an error, a warning or a note.
    pub severity: Severity,
    /// A lowercase message without a trailing period.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic about `file` as a whole (line 1, column 1).
    pub(crate) fn whole_file(file: &Path, severity: Severity, message: String) -> Diagnostic {
        Diagnostic {
            file: file.to_path_buf(),
            line: 1,
            column: 1,
            severity,
            message,
        }
    }
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

/// Whether a command comes from the embedder, the workspace or the user. Earlier variants
/// win over later ones on a name clash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// A command built into the embedding program (e.g. `/undo`); always wins.
    Builtin,
    /// Defined in the workspace (`.shiro/`, `.claude/`, `.opencode/`, `.gemini/`).
    Project,
    /// Defined in the user's own directories.
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

/// Whose format a command file is written in. Within one origin, earlier variants win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    /// shiro's own `commands.md`, `commands/*.md` and `skills/`.
    Shiro,
    /// The folder every agent shares, `.agents/skills/` (Codex's, and Gemini CLI's and
    /// OpenCode's too).
    Agents,
    /// Claude Code's `.claude/commands/*.md`.
    Claude,
    /// OpenCode's `.opencode/command(s)/*.md`.
    OpenCode,
    /// Gemini CLI's `.gemini/commands/*.toml`.
    Gemini,
}

impl Ecosystem {
    /// The directory name the ecosystem uses (`.claude`, …).
    pub fn dir_name(self) -> &'static str {
        match self {
            Ecosystem::Shiro => ".shiro",
            Ecosystem::Agents => ".agents",
            Ecosystem::Claude => ".claude",
            Ecosystem::OpenCode => ".opencode",
            Ecosystem::Gemini => ".gemini",
        }
    }

    /// The template syntax of its command files.
    pub(crate) fn syntax(self) -> Syntax {
        match self {
            Ecosystem::Gemini => Syntax::Gemini,
            _ => Syntax::Markdown,
        }
    }
}

impl fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ecosystem::Shiro => "shiro",
            Ecosystem::Agents => "agents",
            Ecosystem::Claude => "claude",
            Ecosystem::OpenCode => "opencode",
            Ecosystem::Gemini => "gemini",
        })
    }
}

/// Whether a definition is a command (a prompt template) or a skill (a folder of
/// instructions the model can load).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A command file or a `commands.md` section.
    Command,
    /// A skill: a folder with a `SKILL.md`.
    Skill,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Command => "command",
            Kind::Skill => "skill",
        })
    }
}

/// A user-defined command: a prompt template with its metadata. A skill is one too (its
/// `SKILL.md` body is the template), with [`Command::skill`] set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Command {
    /// The lowercase name typed after `/`, e.g. `review` or `git:commit`.
    pub name: String,
    /// The one-line summary shown in the `/` menu, as the file declares it.
    pub description: Option<String>,
    /// A hint for the arguments, e.g. `<file> [focus]` (only from frontmatter).
    pub argument_hint: Option<String>,
    /// The prompt template, before expansion.
    pub body: String,
    /// Whether it is a project or a user command.
    pub origin: Origin,
    /// Whose format it is written in.
    pub ecosystem: Ecosystem,
    /// The file that defined it.
    pub file: PathBuf,
    /// The 1-based line where it is defined (its heading, or 1 for a whole file).
    pub line: usize,
    /// The tools the turn it starts may use (`allowed-tools`), when it limits them.
    pub allowed_tools: Option<AllowedTools>,
    /// The model for the turn it starts (`model`), when it names one.
    pub model: Option<String>,
    /// Names for its positional arguments (`arguments`), used as `$name`.
    pub arguments: Vec<String>,
    /// `disable-model-invocation`: accepted for a command, which shiro's model never starts
    /// anyway; a skill that says so is never offered to the model.
    pub disable_model_invocation: bool,
    /// What a skill has beyond a command's; `None` for a command.
    pub skill: Option<Box<SkillInfo>>,
}

impl Command {
    /// A command with `body` and no metadata, for tests and embedders that build commands
    /// by hand.
    pub fn new(name: &str, body: &str, origin: Origin, ecosystem: Ecosystem) -> Command {
        Command {
            name: name.to_owned(),
            description: None,
            argument_hint: None,
            body: body.to_owned(),
            origin,
            ecosystem,
            file: PathBuf::new(),
            line: 1,
            allowed_tools: None,
            model: None,
            arguments: Vec::new(),
            disable_model_invocation: false,
            skill: None,
        }
    }

    /// A command or a skill.
    pub fn kind(&self) -> Kind {
        match self.skill {
            Some(_) => Kind::Skill,
            None => Kind::Command,
        }
    }

    /// Whose rules its template follows when it is expanded: its folder's, except that every
    /// skill is a Markdown body with Claude Code's rules (`$ARGUMENTS`, `$0`, `` !`cmd` ``),
    /// the format's origin, whichever agent's folder holds it.
    pub(crate) fn template_rules(&self) -> Ecosystem {
        match self.skill {
            Some(_) => Ecosystem::Claude,
            None => self.ecosystem,
        }
    }

    /// The menu summary: the declared description, else the first line of the body that
    /// has a letter or digit (heading marks removed, cut at 100 characters).
    pub fn summary(&self) -> Option<String> {
        if let Some(description) = &self.description {
            return Some(description.clone());
        }
        let line = self
            .body
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| l.chars().any(char::is_alphanumeric))?;
        Some(match line.char_indices().nth(100) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_owned(),
        })
    }
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
    /// already taken: within one source, the first definition wins.
    pub(crate) fn merge(&mut self, other: Parsed) {
        self.diagnostics.extend(other.diagnostics);
        for command in other.commands {
            if let Some(first) = self.commands.iter().find(|c| c.name == command.name) {
                self.diagnostics.push(Diagnostic {
                    file: command.file.clone(),
                    line: command.line,
                    column: 1,
                    severity: Severity::Error,
                    message: format!(
                        "duplicate {} /{}: already defined at {}:{}, this one is ignored",
                        command.kind(),
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

/// Removes a UTF-8 byte order mark from the start of a file's text.
pub(crate) fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Why a name cannot be a command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadName {
    /// A character a name may not have, at a 0-based char index.
    Char(usize, char),
    /// A `:` that does not stand between two parts (`::`, `:a`, `a:`), at a 0-based char
    /// index.
    Colon(usize),
}

impl BadName {
    /// The 0-based char index of the culprit.
    fn at(self) -> usize {
        match self {
            BadName::Char(at, _) | BadName::Colon(at) => at,
        }
    }

    /// What is wrong, briefly: `' ' is not allowed`.
    fn what(self) -> String {
        match self {
            BadName::Char(_, c) => format!("{c:?} is not allowed"),
            BadName::Colon(_) => "`:` must stand between two parts of the name".to_owned(),
        }
    }

    /// What is wrong, and the rule: `' ' is not allowed (use letters, …)`.
    fn reason(self) -> String {
        match self {
            BadName::Char(..) => format!("{} (use letters, digits, `-`, `_` and `:`)", self.what()),
            BadName::Colon(_) => format!("{}, as in `git:commit`", self.what()),
        }
    }
}

/// Checks a command name (already lowercased): ASCII letters, digits, `-`, `_`, and `:`
/// between two parts that are not empty; `None` when it is valid.
fn bad_name(name: &str) -> Option<BadName> {
    let chars: Vec<char> = name.chars().collect();
    if let Some(at) = chars
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':')))
    {
        return Some(BadName::Char(at, chars[at]));
    }
    let colon = |at: usize| chars.get(at) == Some(&':');
    (0..chars.len())
        .find(|&at| colon(at) && (at == 0 || colon(at - 1) || at + 1 == chars.len()))
        .map(BadName::Colon)
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

/// Makes diagnostics for one file.
struct Diags<'a> {
    file: &'a Path,
    out: Vec<Diagnostic>,
}

impl Diags<'_> {
    fn push(&mut self, line: usize, column: usize, severity: Severity, message: String) {
        self.out.push(Diagnostic {
            file: self.file.to_path_buf(),
            line: line.max(1),
            column: column.max(1),
            severity,
            message,
        });
    }
}

/// Whether a section's lines so far hold text of its own: anything but blank lines, its
/// `> summary`, and a `---` frontmatter block (a command file's, pasted).
fn has_own_text(lines: &[&str]) -> bool {
    let mut rest = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .peekable();
    if rest.peek().is_some_and(|l| l.starts_with('>')) {
        rest.next();
    }
    let rest: Vec<&str> = rest.collect();
    let rest = match rest.first() {
        Some(&"---") => match rest[1..].iter().position(|l| *l == "---") {
            Some(end) => &rest[end + 2..],
            None => &rest[..],
        },
        _ => &rest[..],
    };
    !rest.is_empty()
}

/// Whether a heading's text is written as a section's title (`Context`, `Your task`) rather
/// than as a command's name: it has a capital letter or a space.
fn is_title(text: &str) -> bool {
    text.chars().any(|c| c.is_uppercase() || c.is_whitespace())
}

/// Parses a `commands.md` file: every `## name` heading outside a fenced code block starts a
/// command, except a heading written as a title (`## Context`) right after a command with no
/// text of its own, which is read as a section of that command's prompt, as are the titles
/// that follow it (see docs/user-commands.md, "A pasted command body"). `file` is only used
/// to label commands and diagnostics.
pub fn parse_commands_md(file: &Path, text: &str, origin: Origin) -> Parsed {
    struct Section<'a> {
        name: Option<String>,
        line: usize,
        lines: Vec<&'a str>,
        /// The first heading read as a section of this command's prompt: its line and text.
        pasted: Option<(usize, String)>,
    }

    let text = strip_bom(text);
    let mut sections: Vec<Section<'_>> = Vec::new();
    let mut diags = Diags {
        file,
        out: Vec::new(),
    };
    let mut fences = FenceState::default();

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
        if let Some(section) = sections.last_mut()
            && let Some(owner) = &section.name
            && is_title(raw)
            && (section.pasted.is_some() || !has_own_text(&section.lines))
        {
            let message = match &section.pasted {
                Some((first, text)) => format!(
                    "`## {raw}` is read as a section of /{owner}'s prompt too, as `## {text}` (line {first}) is"
                ),
                None => {
                    let lower = raw.to_lowercase();
                    let fix = match bad_name(&lower) {
                        None => format!(
                            "to make it the command /{lower}, write `## {lower}`, or give /{owner} text of its own above it"
                        ),
                        Some(_) => format!(
                            "a command's name has only letters, digits, `-`, `_` and `:`; give /{owner} text of its own above it if you meant a command"
                        ),
                    };
                    format!(
                        "`## {raw}` is read as a section of /{owner}'s prompt, not as a command: /{owner} has no text of its own before it, as when a command file's body is pasted under its `## {owner}`; {fix}"
                    )
                }
            };
            diags.push(line_no, column + 1, Severity::Warning, message);
            section.pasted.get_or_insert((line_no, raw.to_owned()));
            section.lines.push(line);
            continue;
        }
        let name = raw.to_lowercase();
        let name = if name.is_empty() {
            diags.push(
                line_no,
                column + 1,
                Severity::Error,
                "missing command name after `##`, section skipped".to_owned(),
            );
            None
        } else if let Some(bad) = bad_name(&name) {
            diags.push(
                line_no,
                column + bad.at() + 1,
                Severity::Error,
                format!(
                    "invalid command name `{raw}`: {}, section skipped",
                    bad.reason()
                ),
            );
            None
        } else {
            Some(name)
        };
        sections.push(Section {
            name,
            line: line_no,
            lines: Vec::new(),
            pasted: None,
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
        diags.push(
            opened,
            1,
            Severity::Warning,
            format!("unclosed code fence: the rest of the file is inside it{owner}"),
        );
    }

    let mut parsed = Parsed::default();
    for section in sections {
        let Some(name) = section.name else { continue };
        let mut lines = section.lines.as_slice();
        let mut description = None;
        if let Some(first) = lines.iter().position(|l| !l.trim().is_empty())
            && let Some(summary) = lines[first].trim_start().strip_prefix('>')
        {
            let summary = summary.trim();
            if summary.is_empty() {
                diags.push(
                    section.line + first + 1,
                    1,
                    Severity::Warning,
                    format!("empty `>` summary for /{name}"),
                );
            } else {
                description = Some(summary.to_owned());
            }
            lines = &lines[first + 1..];
        }
        if let Some(at) = lines.iter().position(|l| !l.trim().is_empty())
            && lines[at].trim_end() == "---"
            && lines[at + 1..].iter().any(|l| l.trim_end() == "---")
        {
            diags.push(
                section.line + 1 + (section.lines.len() - lines.len()) + at,
                1,
                Severity::Warning,
                format!(
                    "this `---` block is part of /{name}'s prompt: frontmatter keys do nothing in commands.md; to use them, move the command to a file of its own (`commands/{name}.md`)"
                ),
            );
        }
        let body = normalize_body(lines);
        if body.is_empty() {
            diags.push(
                section.line,
                1,
                Severity::Warning,
                format!("command /{name} has an empty body"),
            );
        }
        let mut command = Command::new(&name, &body, origin, Ecosystem::Shiro);
        command.description = description;
        command.file = file.to_path_buf();
        command.line = section.line;
        parsed.merge(Parsed {
            commands: vec![command],
            diagnostics: Vec::new(),
        });
    }
    parsed.diagnostics.extend(diags.out);
    parsed.diagnostics.sort_by_key(|d| (d.line, d.column));
    parsed
}

/// Checks the name a command file's path gives; an error diagnostic when it is unusable.
/// The diagnostics of a one-command file and its command's name, or what parsing it gives
/// when the name is not one (no command, the name's error).
fn named_file<'a>(file: &'a Path, name: &str) -> Result<(Diags<'a>, String), Parsed> {
    let mut diags = Diags {
        file,
        out: Vec::new(),
    };
    match file_command_name(name, &mut diags) {
        Some(name) => Ok((diags, name)),
        None => Err(Parsed {
            commands: Vec::new(),
            diagnostics: diags.out,
        }),
    }
}

fn file_command_name(name: &str, diags: &mut Diags<'_>) -> Option<String> {
    let name = name.to_lowercase();
    if name.is_empty() {
        diags.push(
            1,
            1,
            Severity::Error,
            "empty command name, file skipped".to_owned(),
        );
        return None;
    }
    if let Some(bad) = bad_name(&name) {
        diags.push(
            1,
            1,
            Severity::Error,
            format!(
                "invalid command name `{name}` from the file name: {}, file skipped",
                bad.reason()
            ),
        );
        return None;
    }
    Some(name)
}

/// The frontmatter keys shiro reads, for the unknown-key warning.
const KNOWN_KEYS: &str = "`description`, `argument-hint`, `allowed-tools`, `model`, `arguments`, `agent`, `disable-model-invocation`";

/// Parses one Markdown command file (shiro's `commands/<name>.md`, Claude Code's or
/// OpenCode's) whose command is called `name` (derived from its path by the caller,
/// lowercased and validated here). Optional `---` frontmatter carries the metadata.
pub fn parse_command_file(
    file: &Path,
    name: &str,
    text: &str,
    origin: Origin,
    ecosystem: Ecosystem,
) -> Parsed {
    let (mut diags, name) = match named_file(file, name) {
        Ok(started) => started,
        Err(parsed) => return parsed,
    };
    let text = strip_bom(text);
    let lines: Vec<&str> = text.lines().collect();
    let front = frontmatter::parse(&lines);
    if front.unclosed {
        diags.push(
            1,
            1,
            Severity::Error,
            "frontmatter `---` is never closed: the whole file is used as the body".to_owned(),
        );
    }
    for (line, message) in &front.warnings {
        diags.push(*line, 1, Severity::Warning, message.clone());
    }
    let body = normalize_body(&lines[front.body_start.min(lines.len())..]);
    let mut command = Command::new(&name, &body, origin, ecosystem);
    command.file = file.to_path_buf();
    apply_frontmatter(&mut command, &front.entries, &mut diags);
    if body.is_empty() {
        diags.push(
            1,
            1,
            Severity::Warning,
            format!("command /{name} has an empty body"),
        );
    }
    Parsed {
        commands: vec![command],
        diagnostics: diags.out,
    }
}

/// Warns that `entry`'s value cannot be used as `expected` ("text", "a list").
fn unusable<T>(entry: &frontmatter::Entry, expected: &str, diags: &mut Diags<'_>) -> Option<T> {
    let message = match &entry.value {
        Value::Invalid(why) => format!("`{}`: {why}, ignored", entry.key),
        _ => format!("`{}` should be {expected}, ignored", entry.key),
    };
    diags.push(entry.line, 1, Severity::Warning, message);
    None
}

/// Reads a value that should be text; warns and gives `None` otherwise.
fn text_value(entry: &frontmatter::Entry, diags: &mut Diags<'_>) -> Option<String> {
    match &entry.value {
        Value::Text(text) => Some(text.clone()),
        _ => unusable(entry, "text", diags),
    }
}

/// Reads a value that may be a list or text of comma- or space-separated items.
fn list_value(
    entry: &frontmatter::Entry,
    split: fn(&str) -> Vec<String>,
    diags: &mut Diags<'_>,
) -> Option<Vec<String>> {
    match &entry.value {
        Value::List(items) => Some(items.iter().flat_map(|i| split(i)).collect()),
        Value::Text(text) => Some(split(text)),
        _ => unusable(entry, "a list", diags),
    }
}

fn split_names(text: &str) -> Vec<String> {
    text.split([',', ' ', '\t'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `name` can be used as `$name`: a letter or `_`, then letters, digits, `_`, `-`.
fn valid_argument_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn apply_frontmatter(command: &mut Command, entries: &[frontmatter::Entry], diags: &mut Diags<'_>) {
    let mut agent_read_only = None;
    for entry in entries {
        let warn = |diags: &mut Diags<'_>, message: String| {
            diags.push(entry.line, 1, Severity::Warning, message);
        };
        match entry.key.as_str() {
            "description" => {
                command.description = text_value(entry, diags).filter(|t| !t.trim().is_empty());
            }
            "argument-hint" => {
                // Authors write `[file] [focus]` and mean the text, which YAML would read as
                // a list: the text as written is the hint.
                let hint = match &entry.value {
                    Value::Text(text) => text.clone(),
                    _ => entry.raw.clone(),
                };
                command.argument_hint = Some(hint).filter(|h| !h.trim().is_empty());
            }
            "allowed-tools" => {
                let Some(items) = list_value(entry, crate::allowed::AllowedTools::split, diags)
                else {
                    continue;
                };
                if items.is_empty() && matches!(entry.value, Value::Text(_)) {
                    warn(
                        diags,
                        "`allowed-tools` is empty, so it does not limit the tools; write `[]` for no tools".to_owned(),
                    );
                    continue;
                }
                let (allowed, problems) = AllowedTools::parse(&items);
                let notes = [
                    (&problems.unknown, "shiro has no tool for {}, ignored"),
                    (&problems.malformed, "cannot read {}, ignored"),
                    (
                        &problems.path_rules,
                        "path rules such as {} are not supported, so those tools stay off for \
                         this command",
                    ),
                ];
                for (names, message) in notes {
                    if !names.is_empty() {
                        let message = message.replace("{}", &names.join(", "));
                        warn(diags, format!("`allowed-tools`: {message}"));
                    }
                }
                command.allowed_tools = Some(allowed);
            }
            "model" => {
                command.model = text_value(entry, diags)
                    .map(|m| m.trim().to_owned())
                    .filter(|m| !m.is_empty() && m != "inherit");
                if command
                    .model
                    .as_deref()
                    .is_some_and(|m| m.starts_with("replay:"))
                {
                    warn(
                        diags,
                        "`model`: a command cannot pick a replay script, ignored".to_owned(),
                    );
                    command.model = None;
                }
            }
            "arguments" => {
                let Some(names) = list_value(entry, split_names, diags) else {
                    continue;
                };
                let (good, bad): (Vec<String>, Vec<String>) =
                    names.into_iter().partition(|n| valid_argument_name(n));
                if !bad.is_empty() {
                    warn(
                        diags,
                        format!(
                            "`arguments`: {} cannot be used as `$name` (use letters, digits, `_` and `-`, starting with a letter), ignored",
                            bad.join(", ")
                        ),
                    );
                }
                command.arguments = good;
            }
            "disable-model-invocation" => match text_value(entry, diags).as_deref() {
                Some("true" | "yes" | "on") => command.disable_model_invocation = true,
                Some("false" | "no" | "off") | None => {}
                Some(other) => warn(
                    diags,
                    format!(
                        "`disable-model-invocation` should be true or false, not `{other}`, ignored"
                    ),
                ),
            },
            "agent" => match text_value(entry, diags).as_deref().map(str::trim) {
                Some("plan") => agent_read_only = Some(true),
                Some("build") | None => {}
                Some(other) => warn(
                    diags,
                    format!(
                        "`agent`: shiro has no agent `{other}` (it knows OpenCode's `plan`, read-only, and `build`), ignored"
                    ),
                ),
            },
            "subtask" | "subagent" => warn(
                diags,
                format!(
                    "`{}`: shiro runs every command in the conversation, not as a subagent; ignored",
                    entry.key
                ),
            ),
            other => warn(
                diags,
                format!("unknown frontmatter key `{other}` (shiro reads {KNOWN_KEYS}), ignored"),
            ),
        }
    }
    if agent_read_only == Some(true) && command.allowed_tools.is_none() {
        command.allowed_tools = Some(AllowedTools::read_only());
    }
}

#[cfg(test)]
mod tests {
    use super::gemini::position;
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        assert_eq!(position("ab\ncé\nx", 0), (1, 1));
        assert_eq!(position("ab\ncé\nx", 3), (2, 1));
        assert_eq!(position("ab\ncé\nx", 7), (3, 1));
        assert_eq!(position("ab", 99), (1, 3));
    }

    #[test]
    fn summary_falls_back_to_the_first_line() {
        let mut command = Command::new(
            "x",
            "\n# Review the code\nmore",
            Origin::User,
            Ecosystem::Claude,
        );
        assert_eq!(command.summary().as_deref(), Some("Review the code"));
        command.description = Some("Declared".to_owned());
        assert_eq!(command.summary().as_deref(), Some("Declared"));
        let long = "word ".repeat(40);
        let command = Command::new("x", &long, Origin::User, Ecosystem::Claude);
        assert!(
            command
                .summary()
                .is_some_and(|s| s.ends_with('…') && s.chars().count() == 101)
        );
    }
}
