//! `allowed-tools`: which tools the turn a command starts may use, in Claude Code's syntax.
//!
//! A command file may say `allowed-tools: Read, Grep, Bash(git status:*)`. For the turn that
//! command starts, the agent may then use only those tools, and may run without asking only
//! the bash commands the `Bash(…)` patterns match. Claude Code's tool names are mapped to
//! shiro's (`Read` is `read_file` and `list_dir`, `Edit` is `edit_file`, `multi_edit` and
//! `apply_patch`, …); shiro's own names work too.
//!
//! The same rules, parsed by [`Rule::parse`] and judged by [`every_command`] and
//! [`some_command`], are the agent's permission rules (`allow`, `ask` and `deny` in its
//! config), so a rule means the same in a command file and in a config file.

use std::collections::BTreeSet;

/// shiro's tool names, as the agent offers them to a model.
pub mod tool {
    /// Reads a file.
    pub const READ_FILE: &str = "read_file";
    /// Lists a directory.
    pub const LIST_DIR: &str = "list_dir";
    /// Finds files by pattern.
    pub const GLOB: &str = "glob";
    /// Searches file contents.
    pub const GREP: &str = "grep";
    /// Creates or replaces a file.
    pub const WRITE_FILE: &str = "write_file";
    /// Replaces text in a file.
    pub const EDIT_FILE: &str = "edit_file";
    /// Several edits of one file, all or nothing.
    pub const MULTI_EDIT: &str = "multi_edit";
    /// Applies a patch to several files.
    pub const APPLY_PATCH: &str = "apply_patch";
    /// Runs a shell command.
    pub const BASH: &str = "bash";
    /// Loads an Agent Skill's instructions (offered only while some skill is).
    pub const SKILL: &str = "skill";

    /// Every tool, in the order the agent offers them to a model when it lists them for a
    /// person: reading first, then writing, then the shell.
    pub const ALL: [&str; 9] = [
        READ_FILE,
        LIST_DIR,
        GLOB,
        GREP,
        WRITE_FILE,
        EDIT_FILE,
        MULTI_EDIT,
        APPLY_PATCH,
        BASH,
    ];
}

/// The name the agent gives tool `tool` of MCP server `server`: `server__tool`.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

/// The server and the tool of an MCP tool's name (`github__create_issue`); `None` for a
/// name without `__`, which no MCP tool has. Server names never hold `__`, so the first one
/// divides.
pub fn split_mcp_name(name: &str) -> Option<(&str, &str)> {
    name.split_once("__")
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
}

/// The tools of an MCP server a rule names: `mcp__github` or `github__*` (all of them),
/// `mcp__github__create_issue` (Claude Code's name) or `github__create_issue` (shiro's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct McpTools {
    /// The server's name, as the config names it.
    pub server: String,
    /// The tool's name as the server gives it; `None`: every tool of the server.
    pub tool: Option<String>,
}

impl McpTools {
    /// Reads a rule's name as MCP tools; `None` when it is not one.
    fn parse(name: &str) -> Option<McpTools> {
        let (server, tool) = match name.strip_prefix("mcp__") {
            Some(rest) => match rest.split_once("__") {
                Some((server, tool)) => (server, Some(tool)),
                None => (rest, None),
            },
            None => {
                let (server, tool) = split_mcp_name(name)?;
                (server, Some(tool))
            }
        };
        if server.is_empty() || tool == Some("") {
            return None;
        }
        Some(McpTools {
            server: server.to_owned(),
            tool: tool.filter(|tool| *tool != "*").map(str::to_owned),
        })
    }

    /// Whether `name` (as the agent offers it, `server__tool`) is one of these tools.
    pub fn names(&self, name: &str) -> bool {
        split_mcp_name(name).is_some_and(|(server, tool)| {
            server == self.server && self.tool.as_deref().is_none_or(|t| t == tool)
        })
    }
}

/// The shiro tools a name in a rule stands for (`None`: not a tool shiro has). As in Claude
/// Code, `Read` covers every tool that reads files (the search tools too) and `Edit` every
/// tool that changes them.
pub fn tools_for(name: &str) -> Option<&'static [&'static str]> {
    use tool::*;
    Some(match name.to_ascii_lowercase().as_str() {
        "read" => &[READ_FILE, LIST_DIR, GLOB, GREP],
        "ls" => &[LIST_DIR],
        "glob" => &[GLOB],
        "grep" => &[GREP],
        "write" => &[WRITE_FILE],
        "edit" => &[WRITE_FILE, EDIT_FILE, MULTI_EDIT, APPLY_PATCH],
        "multiedit" => &[MULTI_EDIT],
        "bash" => &[BASH],
        "read_file" => &[READ_FILE],
        "list_dir" => &[LIST_DIR],
        "write_file" => &[WRITE_FILE],
        "edit_file" => &[EDIT_FILE],
        "multi_edit" => &[MULTI_EDIT],
        "apply_patch" => &[APPLY_PATCH],
        "skill" => &[SKILL],
        _ => return None,
    })
}

/// A `Bash(…)` rule: which command lines run without asking.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "text", rename_all = "lowercase")]
pub enum BashRule {
    /// `Bash(git status:*)`: the command itself, or it followed by a space and more.
    Prefix(String),
    /// `Bash(npm run test)`: exactly this command.
    Exact(String),
    /// `Bash(git commit *)`: `*` stands for any text.
    Wildcard(String),
}

impl BashRule {
    /// Reads the text between `Bash(` and `)`: `PREFIX:*`, a pattern with `*`, or an exact
    /// command. `None` for an empty one.
    pub fn parse(spec: &str) -> Option<BashRule> {
        let spec = spec.trim();
        if spec.is_empty() {
            return None;
        }
        if let Some(prefix) = spec.strip_suffix(":*") {
            return Some(BashRule::Prefix(prefix.trim_end().to_owned()));
        }
        if spec.contains('*') {
            return Some(BashRule::Wildcard(spec.to_owned()));
        }
        Some(BashRule::Exact(spec.to_owned()))
    }

    /// Whether the rule matches one simple command (whitespace already collapsed).
    pub fn matches(&self, command: &str) -> bool {
        match self {
            BashRule::Prefix(prefix) => {
                prefix.is_empty()
                    || command == prefix
                    || command
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with(char::is_whitespace))
            }
            BashRule::Exact(exact) => command == exact,
            BashRule::Wildcard(pattern) => wildcard(pattern, command),
        }
    }
}

impl std::fmt::Display for BashRule {
    /// The rule as it is written between the parentheses.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BashRule::Prefix(prefix) => write!(f, "{prefix}:*"),
            BashRule::Exact(text) | BashRule::Wildcard(text) => f.write_str(text),
        }
    }
}

/// What a rule's parentheses hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "rule", rename_all = "lowercase")]
pub enum RuleSpec {
    /// No parentheses: every call of the rule's tools.
    Any,
    /// `Bash(…)`: the command lines it matches.
    Bash(BashRule),
    /// `Edit(src/**)`: a path glob, as written (the caller compiles and matches it); for
    /// `Skill(pdf-*)` a glob over the skill's name.
    Path(String),
}

/// One rule, `Name` or `Name(spec)`, as `allowed-tools` and the permission rules write it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rule {
    /// The rule as written, trimmed.
    pub written: String,
    /// The shiro tools its name stands for.
    pub tools: &'static [&'static str],
    /// What it matches among those tools' calls.
    pub spec: RuleSpec,
    /// The MCP tools it names, for a rule about an MCP server's tools (whose `tools` is
    /// empty).
    pub mcp: Option<McpTools>,
}

/// Why a rule cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Nothing was written.
    #[error("a rule is empty")]
    Empty,
    /// `Bash(git status` with no `)`.
    #[error("`{0}` opens `(` and never closes it")]
    Unclosed(String),
    /// `Bash()`.
    #[error(
        "`{0}` has nothing between its parentheses; write the tool's name alone to match every call"
    )]
    EmptySpec(String),
    /// A name shiro has no tool for.
    #[error(
        "`{0}` names no tool shiro has (the tools: read_file, list_dir, glob, grep, write_file, edit_file, multi_edit, apply_patch, bash, skill, and Claude Code's Read, LS, Glob, Grep, Write, Edit, MultiEdit, Bash, Skill; an MCP server's tools are server__tool, or mcp__server for all of them)"
    )]
    UnknownTool(String),
    /// `github__create_issue(x)`: MCP tools' calls have nothing a rule could match.
    #[error(
        "`{0}` names an MCP tool, whose rules take no parentheses: write `server__tool` for one tool, or `mcp__server` for all of a server's tools"
    )]
    McpSpec(String),
}

impl Rule {
    /// Parses one rule: a tool name (shiro's or Claude Code's, any case), optionally with a
    /// bash pattern (`Bash(git status:*)`) or a path glob (`Edit(src/**)`; for `Skill(…)`, a
    /// glob over skill names) in parentheses.
    pub fn parse(entry: &str) -> Result<Rule, RuleError> {
        let written = entry.trim();
        if written.is_empty() {
            return Err(RuleError::Empty);
        }
        let (name, spec) = match written.split_once('(') {
            Some((name, rest)) => match rest.strip_suffix(')') {
                Some(spec) => (name.trim(), Some(spec.trim())),
                None => return Err(RuleError::Unclosed(written.to_owned())),
            },
            None => (written, None),
        };
        let Some(tools) = tools_for(name) else {
            let mcp =
                McpTools::parse(name).ok_or_else(|| RuleError::UnknownTool(written.to_owned()))?;
            if spec.is_some() {
                return Err(RuleError::McpSpec(written.to_owned()));
            }
            return Ok(Rule {
                written: written.to_owned(),
                tools: &[],
                spec: RuleSpec::Any,
                mcp: Some(mcp),
            });
        };
        let spec = match spec {
            None => RuleSpec::Any,
            Some("") => return Err(RuleError::EmptySpec(written.to_owned())),
            Some(spec) if tools.contains(&tool::BASH) => match BashRule::parse(spec) {
                Some(rule) => RuleSpec::Bash(rule),
                None => return Err(RuleError::EmptySpec(written.to_owned())),
            },
            Some(spec) => RuleSpec::Path(spec.to_owned()),
        };
        Ok(Rule {
            written: written.to_owned(),
            tools,
            spec,
            mcp: None,
        })
    }

    /// Whether the rule is about `tool` at all.
    pub fn names(&self, tool: &str) -> bool {
        self.tools.contains(&tool) || self.mcp.as_ref().is_some_and(|mcp| mcp.names(tool))
    }
}

/// Whether every simple command of the bash line `line` satisfies `matches`: the line is cut
/// at `&&`, `||`, `;`, `|` and newlines outside quotes, and a line with a command
/// substitution, a process substitution, a redirection, a background `&` or an unclosed
/// quote never does (it can do what no rule names). An empty line never does either.
pub fn every_command(line: &str, matches: impl Fn(&str) -> bool) -> bool {
    simple_commands(line)
        .is_some_and(|parts| !parts.is_empty() && parts.iter().all(|part| matches(part)))
}

/// Whether some command of the bash line `line` satisfies `matches`, including commands
/// inside substitutions, subshells and braces, and seen through the easy disguises
/// (`/bin/rm`, `\rm`, `"rm"`, `env rm`, `bash -c 'rm …'`; see the private `disguise` module): for a
/// line [`every_command`] cannot split, every piece between shell operators and brackets is
/// tried too. This is the test for `deny` and `ask` rules, which must err on the side of
/// matching; allow rules never look through disguises.
pub fn some_command(line: &str, matches: impl Fn(&str) -> bool) -> bool {
    if crate::disguise::forms(line)
        .iter()
        .any(|form| matches(form))
    {
        return true;
    }
    if let Some(parts) = simple_commands(line) {
        return parts.iter().any(|part| matches(part));
    }
    line.split(|c: char| ";&|()`<>{}\n$".contains(c))
        .map(|piece| piece.split_whitespace().collect::<Vec<_>>().join(" "))
        .any(|piece| !piece.is_empty() && matches(&piece))
}

/// Matches `text` against `pattern`, where `*` stands for any run of characters.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return pattern == text;
    }
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// What a scoped turn does with a bash command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BashVerdict {
    /// A `Bash(…)` rule matches every command on the line: it runs without asking.
    Allowed,
    /// Bash is allowed but no rule matches: it is asked about as usual.
    Ask,
    /// The command's tools do not include bash for this line: it is refused.
    Refused,
}

/// The tools the turn a command starts may use, parsed from `allowed-tools`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllowedTools {
    /// The entries as the command file wrote them, for messages.
    pub written: Vec<String>,
    /// shiro's tools the turn may use (bash included when any `Bash` entry is given).
    pub tools: BTreeSet<String>,
    /// Whether a bare `Bash` lets every command line be asked about.
    pub any_bash: bool,
    /// The `Bash(…)` rules: lines they match run without asking.
    pub bash_rules: Vec<BashRule>,
    /// The MCP servers' tools the turn may use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<McpTools>,
}

/// What parsing `allowed-tools` found besides the tools.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct AllowedProblems {
    /// Names shiro has no tool for (`WebFetch`), ignored.
    pub unknown: Vec<String>,
    /// Entries that could not be read (`Bash(` never closed, `Bash()`), ignored.
    pub malformed: Vec<String>,
    /// Entries with a path rule (`Edit(docs/**)`), which shiro cannot enforce: the tool is
    /// left out rather than allowed everywhere.
    pub path_rules: Vec<String>,
}

impl AllowedTools {
    /// The tools of a read-only turn: reading, listing and searching.
    pub fn read_only() -> AllowedTools {
        let tools = [tool::READ_FILE, tool::LIST_DIR, tool::GLOB, tool::GREP];
        AllowedTools {
            written: vec!["read-only".to_owned()],
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            any_bash: false,
            bash_rules: Vec::new(),
            mcp: Vec::new(),
        }
    }

    /// Parses the entries of `allowed-tools` (each one `Name` or `Name(spec)`).
    pub(crate) fn parse(entries: &[String]) -> (AllowedTools, AllowedProblems) {
        let mut allowed = AllowedTools::default();
        let mut problems = AllowedProblems::default();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            allowed.written.push(entry.to_owned());
            let rule = match Rule::parse(entry) {
                Ok(rule) => rule,
                Err(RuleError::UnknownTool(_)) => {
                    problems.unknown.push(entry.to_owned());
                    continue;
                }
                Err(_) => {
                    problems.malformed.push(entry.to_owned());
                    continue;
                }
            };
            if let Some(mcp) = rule.mcp {
                allowed.mcp.push(mcp);
                continue;
            }
            match rule.spec {
                RuleSpec::Any => {
                    if rule.names(tool::BASH) {
                        allowed.any_bash = true;
                    }
                    allowed
                        .tools
                        .extend(rule.tools.iter().map(|t| (*t).to_owned()));
                }
                RuleSpec::Bash(bash) => {
                    allowed.tools.insert(tool::BASH.to_owned());
                    allowed.bash_rules.push(bash);
                }
                RuleSpec::Path(_) => problems.path_rules.push(entry.to_owned()),
            }
        }
        (allowed, problems)
    }

    /// Splits `allowed-tools` text into entries: at commas outside parentheses, or at
    /// whitespace outside parentheses when there is no comma.
    pub fn split(text: &str) -> Vec<String> {
        let split_at = |sep: fn(char) -> bool| {
            let mut out = Vec::new();
            let mut current = String::new();
            let mut depth = 0usize;
            for c in text.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if depth == 0 && sep(c) {
                    out.push(std::mem::take(&mut current));
                } else {
                    current.push(c);
                }
            }
            out.push(current);
            out.into_iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect::<Vec<String>>()
        };
        let commas = split_at(|c| c == ',');
        if commas.len() > 1 {
            commas
        } else {
            split_at(char::is_whitespace)
        }
    }

    /// The tools the turn may use, in the order of [`tool::ALL`] (unknown names last).
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = tool::ALL
            .iter()
            .copied()
            .filter(|t| self.tools.contains(*t))
            .collect();
        names.extend(
            self.tools
                .iter()
                .map(String::as_str)
                .filter(|t| !tool::ALL.contains(t)),
        );
        names
    }

    /// Whether the turn may use `tool` at all (for bash, whether some line may run).
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.contains(tool) || self.mcp.iter().any(|mcp| mcp.names(tool))
    }

    /// What the turn does with the bash command line `command`.
    ///
    /// A rule pre-approves a line only when it matches every command of it: the line is cut
    /// at `&&`, `||`, `;`, `|` and newlines outside quotes, and a line with a command
    /// substitution, a process substitution, a redirection or a background `&` is never
    /// pre-approved (it can do what no rule names).
    pub fn bash(&self, command: &str) -> BashVerdict {
        if !self.allows(tool::BASH) {
            return BashVerdict::Refused;
        }
        let matched = every_command(command, |part| {
            self.bash_rules.iter().any(|rule| rule.matches(part))
        });
        match (matched, self.any_bash) {
            (true, _) => BashVerdict::Allowed,
            (false, true) => BashVerdict::Ask,
            (false, false) => BashVerdict::Refused,
        }
    }
}

/// The simple commands of a command line, or `None` when the line does anything a rule
/// cannot vouch for (substitutions, redirections, background jobs, an unclosed quote).
///
/// Each command is its text with the blanks between words collapsed to one space and none
/// at either end. Blanks inside quotes or after a backslash belong to a word and are kept as
/// written: two commands with the same text then pass the same words, so a rule written
/// from one (an exact `sh -c '…'`) matches no command that runs something else.
pub(crate) fn simple_commands(line: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    // Blanks seen since the last character of a word, outside quotes.
    let mut blank = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if quote.is_none() {
            if c == ' ' || c == '\t' {
                blank = true;
                continue;
            }
            // A backslash-newline joins lines, as in the shell, and is not a word's end.
            if c == '\\' && chars.peek() == Some(&'\n') {
                chars.next();
                continue;
            }
            if std::mem::take(&mut blank) && !current.is_empty() && !";|&\n".contains(c) {
                current.push(' ');
            }
        }
        match quote {
            Some('\'') => {
                current.push(c);
                if c == '\'' {
                    quote = None;
                }
                continue;
            }
            Some(_) => {
                match c {
                    '"' => quote = None,
                    '`' => return None,
                    '$' if chars.peek() == Some(&'(') => return None,
                    '\\' => {
                        current.push(c);
                        if let Some(next) = chars.next() {
                            current.push(next);
                        }
                        continue;
                    }
                    _ => {}
                }
                current.push(c);
                continue;
            }
            None => {}
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                current.push(c);
            }
            '\\' => {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            '`' | '<' | '>' | '(' | ')' | '{' | '}' => return None,
            '$' if matches!(chars.peek(), Some('(' | '{')) => return None,
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                parts.push(std::mem::take(&mut current));
            }
            '&' => return None,
            '|' => {
                if chars.peek() == Some(&'|') {
                    chars.next();
                }
                parts.push(std::mem::take(&mut current));
            }
            ';' | '\n' => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    parts.push(current);
    // An empty command between operators (`a ;; b`, a trailing `|`) is a syntax error the
    // shell will report; a trailing `;` or newline is harmless.
    let (last, rest) = parts.split_last()?;
    if rest.iter().any(String::is_empty) {
        return None;
    }
    let mut parts = rest.to_vec();
    if !last.is_empty() {
        parts.push(last.clone());
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (AllowedTools, AllowedProblems) {
        AllowedTools::parse(&AllowedTools::split(text))
    }

    #[test]
    fn claude_names_map_to_shiro_tools() {
        let (allowed, problems) = parse("Read, Grep, WebFetch, Edit(docs/**), Bash(");
        let tools: Vec<&str> = allowed.tools.iter().map(String::as_str).collect();
        assert_eq!(tools, ["glob", "grep", "list_dir", "read_file"]);
        assert_eq!(problems.unknown, ["WebFetch"]);
        assert_eq!(problems.path_rules, ["Edit(docs/**)"]);
        assert_eq!(problems.malformed, ["Bash("]);
        assert_eq!(allowed.bash("ls"), BashVerdict::Refused);
        let (allowed, _) = parse("Read Grep edit_file");
        assert_eq!(allowed.tools.len(), 5);
        let (allowed, _) = parse("Edit");
        assert!(allowed.allows(tool::WRITE_FILE) && allowed.allows(tool::APPLY_PATCH));
    }

    #[test]
    fn rules_parse_with_clear_errors() {
        let rule = Rule::parse(" Bash(git status:*) ").unwrap();
        assert_eq!(rule.written, "Bash(git status:*)");
        assert_eq!(
            rule.spec,
            RuleSpec::Bash(BashRule::Prefix("git status".into()))
        );
        assert_eq!(rule.spec, Rule::parse("bash( git status:* )").unwrap().spec);
        let rule = Rule::parse("edit_file(src/**)").unwrap();
        assert_eq!(
            (rule.tools, rule.spec),
            (&[tool::EDIT_FILE][..], RuleSpec::Path("src/**".into()))
        );
        assert_eq!(Rule::parse("Write").unwrap().spec, RuleSpec::Any);
        // Claude Code's `Skill(name)`: the skill tool, limited to the names the glob matches.
        let rule = Rule::parse("Skill(pdf-*)").unwrap();
        assert_eq!(
            (rule.tools, rule.spec),
            (&[tool::SKILL][..], RuleSpec::Path("pdf-*".into()))
        );
        let errors: Vec<String> = [
            "",
            "Bash(git",
            "Bash()",
            "edit_file( )",
            "WebFetch",
            "mcp__x(y)",
        ]
        .iter()
        .map(|entry| Rule::parse(entry).unwrap_err().to_string())
        .collect();
        insta::assert_snapshot!(errors.join("\n"), @r"
        a rule is empty
        `Bash(git` opens `(` and never closes it
        `Bash()` has nothing between its parentheses; write the tool's name alone to match every call
        `edit_file( )` has nothing between its parentheses; write the tool's name alone to match every call
        `WebFetch` names no tool shiro has (the tools: read_file, list_dir, glob, grep, write_file, edit_file, multi_edit, apply_patch, bash, skill, and Claude Code's Read, LS, Glob, Grep, Write, Edit, MultiEdit, Bash, Skill; an MCP server's tools are server__tool, or mcp__server for all of them)
        `mcp__x(y)` names an MCP tool, whose rules take no parentheses: write `server__tool` for one tool, or `mcp__server` for all of a server's tools
        ");
    }

    #[test]
    fn mcp_rules_name_a_server_or_one_of_its_tools() {
        let names = |rule: &str, tool: &str| Rule::parse(rule).unwrap().names(tool);
        // A whole server, in Claude Code's way or with a wildcard.
        for rule in ["mcp__github", "github__*", "mcp__github__*"] {
            assert!(names(rule, "github__create_issue"), "{rule}");
            assert!(names(rule, "github__list"), "{rule}");
            assert!(!names(rule, "gitlab__list"), "{rule}");
            assert!(!names(rule, "bash"), "{rule}");
        }
        // One tool, by shiro's name or Claude Code's; tool names may hold `__` themselves.
        for rule in ["github__create_issue", "mcp__github__create_issue"] {
            assert!(names(rule, "github__create_issue"), "{rule}");
            assert!(!names(rule, "github__create_issue_comment"), "{rule}");
            assert!(!names(rule, "github__list"), "{rule}");
        }
        assert!(names("db__a__b", "db__a__b"));
        assert!(!names("db__a__b", "db__a"));
        // Built-in tools are not MCP tools.
        assert_eq!(Rule::parse("mcp__github").unwrap().tools, &[] as &[&str]);
        assert!(!names("Bash", "github__bash"));
        for bad in ["__x", "x__", "mcp__", "mcp____x"] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allowed_tools_take_mcp_tools() {
        let (allowed, problems) = AllowedTools::parse(&[
            "Read".to_owned(),
            "mcp__github__create_issue".to_owned(),
            "db__*".to_owned(),
        ]);
        assert_eq!(problems, AllowedProblems::default());
        assert!(allowed.allows("github__create_issue"));
        assert!(!allowed.allows("github__delete_repo"));
        assert!(allowed.allows("db__query"));
        assert!(allowed.allows("read_file"));
        assert!(!allowed.allows("bash"));
    }

    #[test]
    fn some_command_looks_inside_what_every_command_refuses() {
        let rm = |part: &str| BashRule::Prefix("rm".into()).matches(part);
        assert!(some_command("ls; rm -rf x", rm));
        assert!(some_command("echo $(rm -rf x)", rm));
        assert!(some_command("echo `rm x` > y", rm));
        assert!(some_command("(cd a && rm x)", rm));
        assert!(!some_command("ls -l | grep rm", rm));
        assert!(!every_command("rm x; ls", rm));
        assert!(every_command("rm x && rm y", rm));
    }

    #[test]
    fn bash_rules() {
        let (allowed, problems) = parse(
            "Bash(git status:*), Bash(git diff:*), Bash(npm test), Bash(git log * --oneline)",
        );
        assert_eq!(problems, AllowedProblems::default());
        let verdict = |line: &str| allowed.bash(line);
        assert_eq!(verdict("git status"), BashVerdict::Allowed);
        assert_eq!(verdict("git status --short"), BashVerdict::Allowed);
        assert_eq!(verdict("  git   status  "), BashVerdict::Allowed);
        assert_eq!(verdict("git statusx"), BashVerdict::Refused);
        assert_eq!(verdict("npm test"), BashVerdict::Allowed);
        assert_eq!(verdict("npm test --watch"), BashVerdict::Refused);
        assert_eq!(verdict("git log -5 --oneline"), BashVerdict::Allowed);
        assert_eq!(verdict("git status && git diff HEAD"), BashVerdict::Allowed);
        assert_eq!(verdict("git status; rm -rf /"), BashVerdict::Refused);
        assert_eq!(verdict("git status | sh"), BashVerdict::Refused);
        assert_eq!(verdict("git status $(rm -rf /)"), BashVerdict::Refused);
        assert_eq!(verdict("git status `rm -rf /`"), BashVerdict::Refused);
        assert_eq!(verdict("git diff > /etc/passwd"), BashVerdict::Refused);
        assert_eq!(verdict("git status & rm x"), BashVerdict::Refused);
        assert_eq!(verdict("git status 'a;b'"), BashVerdict::Allowed);
        assert_eq!(verdict("git status \"$(id)\""), BashVerdict::Refused);
        assert_eq!(verdict("git status 'unclosed"), BashVerdict::Refused);
        assert_eq!(verdict(""), BashVerdict::Refused);

        let (allowed, _) = parse("Bash, Bash(git status:*)");
        assert_eq!(allowed.bash("git status"), BashVerdict::Allowed);
        assert_eq!(allowed.bash("rm x"), BashVerdict::Ask);
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("a*c", "abc"));
        assert!(wildcard("a*c", "ac"));
        assert!(!wildcard("a*c", "ab"));
        assert!(wildcard("*", ""));
        assert!(wildcard("a*b*c", "aXbYc"));
        assert!(!wildcard("a*a", "a"));
    }
}
