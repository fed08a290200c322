//! Template expansion: shell substitutions, then file references, then arguments.
//!
//! The template is kept as a list of segments, each either text from the template or text an
//! earlier step produced. Every step scans only template text, so nothing a shell command,
//! a file or an argument produced is ever expanded again.

use crate::parse::{Command, Origin};

/// What running a shell substitution gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellOutcome {
    /// The command exited with status 0.
    Success {
        /// Everything it wrote to stdout, up to the runner's cap.
        stdout: String,
        /// Whether stdout was cut at the cap.
        truncated: bool,
    },
    /// The command exited with a non-zero status (`None`: killed by a signal).
    Failed {
        /// The exit code, if it exited normally.
        code: Option<i32>,
    },
    /// The command ran past the runner's timeout and was killed.
    TimedOut {
        /// The timeout that ran out.
        after: std::time::Duration,
    },
    /// The command could not be started.
    SpawnFailed {
        /// Why, in lowercase.
        reason: String,
    },
}

/// Runs the command text of a `` !`cmd` `` substitution. Injected so tests and embedders
/// control side effects; [`crate::ShRunner`] is the real one.
#[async_trait::async_trait]
pub trait ShellRunner: Send + Sync {
    /// Runs `command` and reports what happened. Must not panic.
    async fn run(&self, command: &str) -> ShellOutcome;
}

/// What reading an `@path` reference gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// The file's text.
    Contents {
        /// The text, up to the reader's cap.
        text: String,
        /// Whether the text was cut at the cap.
        truncated: bool,
    },
    /// No such file.
    Missing,
    /// The reader would not read it (outside the workspace, binary, a directory, ...).
    Refused {
        /// Why, in lowercase.
        reason: String,
    },
}

/// Reads the file named by an `@path` reference. Injected; [`crate::FsReader`] is the real
/// one, jailed to the workspace.
#[async_trait::async_trait]
pub trait FileReader: Send + Sync {
    /// Reads `path` as written in the template (relative to the workspace). Must not panic.
    async fn read(&self, path: &str) -> FileOutcome;
}

/// Everything [`expand`] needs besides the command and its arguments.
pub struct ExpandContext<'a> {
    /// Runs `` !`cmd` `` substitutions.
    pub shell: &'a dyn ShellRunner,
    /// Reads `@path` references.
    pub files: &'a dyn FileReader,
    /// Whether the user trusts this workspace. Project commands' shell substitutions run
    /// only when this is true; user commands' always run.
    pub workspace_trusted: bool,
}

/// The note that replaces a project command's shell substitution in an untrusted workspace.
pub const NOT_TRUSTED_NOTE: &str = "[!shell not run: workspace not trusted]";

#[derive(Debug)]
enum Segment {
    /// Text from the template, still to be scanned by later steps.
    Template(String),
    /// Text a step produced; never scanned again.
    Produced(String),
}

/// Expands `command`'s body with `args` (the text typed after the command name): first
/// `` !`cmd` ``, then `@path`, then `$ARGUMENTS` and `$1`…`$9`. Never fails: problems
/// become bracketed notes in the text.
pub async fn expand(command: &Command, args: &str, ctx: &ExpandContext<'_>) -> String {
    let run_shell = ctx.workspace_trusted || command.origin != Origin::Project;
    let segments = vec![Segment::Template(command.body.clone())];
    let segments = expand_shell(segments, ctx.shell, run_shell).await;
    let segments = expand_files(segments, ctx.files).await;
    let positional = split_args(args);
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Template(t) => out.push_str(&substitute_args(&t, args.trim(), &positional)),
            Segment::Produced(p) => out.push_str(&p),
        }
    }
    out
}

async fn expand_shell(
    segments: Vec<Segment>,
    shell: &dyn ShellRunner,
    run_shell: bool,
) -> Vec<Segment> {
    let mut out = Vec::new();
    for segment in segments {
        let Segment::Template(text) = segment else {
            out.push(segment);
            continue;
        };
        let mut rest = text.as_str();
        while let Some(start) = rest.find("!`") {
            let after = &rest[start + 2..];
            let Some(len) = after.find(['`', '\n']) else {
                break;
            };
            if after.as_bytes()[len] != b'`' || after[..len].trim().is_empty() {
                // Not a substitution: keep `!` and look again after it.
                out.push(Segment::Template(rest[..start + 1].to_owned()));
                rest = &rest[start + 1..];
                continue;
            }
            let cmd = &after[..len];
            let literal = &rest[start..start + 2 + len + 1];
            out.push(Segment::Template(rest[..start].to_owned()));
            let produced = if run_shell {
                match shell.run(cmd).await {
                    ShellOutcome::Success { stdout, truncated } => {
                        let mut s = stdout.trim().to_owned();
                        if truncated {
                            s.push_str(&format!(" [!shell output cut: {cmd}]"));
                        }
                        s
                    }
                    ShellOutcome::Failed { code: Some(code) } => {
                        format!("{literal} [!shell exit {code}: {cmd}]")
                    }
                    ShellOutcome::Failed { code: None } => {
                        format!("{literal} [!shell killed by a signal: {cmd}]")
                    }
                    ShellOutcome::TimedOut { after } => {
                        let after = if after.subsec_millis() == 0 {
                            format!("{} s", after.as_secs())
                        } else {
                            format!("{} ms", after.as_millis())
                        };
                        format!("{literal} [!shell timed out after {after}: {cmd}]")
                    }
                    ShellOutcome::SpawnFailed { reason } => {
                        format!("{literal} [!shell could not start: {reason}]")
                    }
                }
            } else {
                NOT_TRUSTED_NOTE.to_owned()
            };
            out.push(Segment::Produced(produced));
            rest = &after[len + 1..];
        }
        out.push(Segment::Template(rest.to_owned()));
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Characters that end an `@path` (besides whitespace).
fn ends_path(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '<'
                | '>'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | ','
                | ';'
                | '$'
                | '@'
        )
}

/// Finds the next `@path` reference in `text`: returns (start of `@`, the path).
fn next_file_ref(text: &str) -> Option<(usize, &str)> {
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == '@' && !prev.is_some_and(is_word_char) {
            let after = &text[i + 1..];
            let end = after.find(ends_path).unwrap_or(after.len());
            let path = after[..end].trim_end_matches(['.', ':', '!', '?']);
            if !path.is_empty() {
                return Some((i, path));
            }
        }
        prev = Some(c);
    }
    None
}

async fn expand_files(segments: Vec<Segment>, files: &dyn FileReader) -> Vec<Segment> {
    let mut out = Vec::new();
    for segment in segments {
        let Segment::Template(text) = segment else {
            out.push(segment);
            continue;
        };
        let mut rest = text.as_str();
        while let Some((at, path)) = next_file_ref(rest) {
            out.push(Segment::Template(rest[..at].to_owned()));
            let produced = match files.read(path).await {
                FileOutcome::Contents { text, truncated } => {
                    if truncated {
                        format!("{text}\n[@file cut: only the start of {path} is shown]")
                    } else {
                        text
                    }
                }
                FileOutcome::Missing => format!("@{path} [@file missing: {path}]"),
                FileOutcome::Refused { reason } => format!("@{path} [@file refused: {reason}]"),
            };
            out.push(Segment::Produced(produced));
            rest = &rest[at + 1 + path.len()..];
        }
        out.push(Segment::Template(rest.to_owned()));
    }
    out
}

/// Splits argument text into positional arguments: whitespace separates, and a double- or
/// single-quoted stretch (quotes removed) counts as part of one argument. An unclosed quote
/// runs to the end.
pub fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.get_or_insert_default().push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                current.get_or_insert_default();
            }
            None if c.is_whitespace() => out.extend(current.take()),
            None => current.get_or_insert_default().push(c),
        }
    }
    out.extend(current);
    out
}

fn substitute_args(text: &str, all: &str, positional: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(all);
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let n = d as usize - '1' as usize;
            out.push_str(positional.get(n).map_or("", String::as_str));
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
