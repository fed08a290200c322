//! Template expansion: shell substitutions, then file references, then arguments.
//!
//! The template is cut into pieces once, from the text its author wrote (see
//! [`crate::template`]); each piece is then filled in, and nothing a shell command, a file or
//! an argument produced is ever scanned again. Typed arguments reach a shell substitution
//! only as the shell's own positional parameters and `ARGUMENTS` environment variable, never
//! as text spliced into the command.

use crate::parse::{Command, Ecosystem, Origin};
use crate::template::{self, Piece, Syntax};

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

/// One shell substitution to run: `sh -c COMMAND shiro ARGS…` with `ARGUMENTS` in the
/// environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShellCall<'a> {
    /// The command text, from the template only (never containing typed text).
    pub command: &'a str,
    /// The typed arguments, to become the shell's `$1`, `$2`, … (`$0` is `shiro`).
    pub args: &'a [String],
    /// Everything typed after the command name, for the `ARGUMENTS` environment variable.
    pub arguments: &'a str,
}

/// Runs the shell substitutions of a template. Injected so tests and embedders control side
/// effects; [`crate::ShRunner`] is the real one.
#[async_trait::async_trait]
pub trait ShellRunner: Send + Sync {
    /// Runs `call` and reports what happened. Must not panic.
    async fn run(&self, call: &ShellCall<'_>) -> ShellOutcome;
}

/// What reading a file reference gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// The file's text.
    Contents {
        /// The text, up to the reader's cap.
        text: String,
        /// Whether the text was cut at the cap.
        truncated: bool,
    },
    /// A directory: its entries, sorted, directories ending in `/`.
    Directory {
        /// The entry names, up to the reader's cap.
        entries: Vec<String>,
        /// How many more entries there were.
        more: usize,
    },
    /// Nothing there.
    Missing,
    /// The reader would not read it (outside the workspace, binary, a device, ...).
    Refused {
        /// Why, in lowercase.
        reason: String,
    },
}

/// Reads the files that `@path` and `@{path}` name. Injected; [`crate::FsReader`] is the
/// real one, jailed to the workspace.
#[async_trait::async_trait]
pub trait FileReader: Send + Sync {
    /// Reads `path` as written in the template (relative to the workspace). Must not panic.
    async fn read(&self, path: &str) -> FileOutcome;

    /// Whether `path` is a directory in the workspace (used to tell a missing file in an
    /// existing folder, worth a note, from an `@word` that names no file at all).
    async fn is_dir(&self, _path: &str) -> bool {
        false
    }
}

/// Everything [`expand`] needs besides the command and its arguments.
pub struct ExpandContext<'a> {
    /// Runs shell substitutions.
    pub shell: &'a dyn ShellRunner,
    /// Reads file references.
    pub files: &'a dyn FileReader,
    /// Whether the user trusts this workspace. Project commands' shell substitutions run
    /// only when this is true; user commands' always run.
    pub workspace_trusted: bool,
}

/// The note that replaces a project command's shell substitution in an untrusted workspace.
pub const NOT_TRUSTED_NOTE: &str = "[!shell not run: workspace not trusted]";

/// What a front end that shows an expanded prompt (`shiro commands expand`) says beside it,
/// because that prompt is not what typing the command in a session would send: see
/// [`expand_notes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandNote {
    /// A project skill of a workspace the user has not trusted (its name): typed, it runs
    /// nothing, and the model is not offered it (see [`crate::Registry::held_back`]).
    SkillNotTrusted(String),
    /// A skill for the model alone, `user-invocable: false` (its name): typed, it runs
    /// nothing.
    ModelOnly(String),
    /// A project command's shell substitutions were not run: the workspace is not trusted.
    ShellNotRun,
}

impl std::fmt::Display for ExpandNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpandNote::SkillNotTrusted(name) => write!(
                f,
                "/{name} is a skill of this workspace, which you have not trusted: typed in a session it runs nothing, and the model is not offered it, until you trust the workspace (`/trust` in a session, or `--trust` here)"
            ),
            ExpandNote::ModelOnly(name) => write!(
                f,
                "/{name} is a skill for the model alone (its SKILL.md says `user-invocable: false`): typed in a session it runs nothing, and the model loads it when a task calls for it"
            ),
            ExpandNote::ShellNotRun => f.write_str(
                "its shell substitutions were not run: this workspace is not trusted (`/trust` in a session, or `--trust` here)",
            ),
        }
    }
}

/// The notes for `command` expanded where the workspace is trusted or not
/// (`workspace_trusted`, as [`ExpandContext::workspace_trusted`] was): a skill that typing
/// would not run says so, as a command whose shell substitutions were not run does.
pub fn expand_notes(command: &Command, workspace_trusted: bool) -> Vec<ExpandNote> {
    let mut notes = Vec::new();
    if let Some(skill) = &command.skill {
        if command.origin == Origin::Project && !workspace_trusted {
            notes.push(ExpandNote::SkillNotTrusted(command.name.clone()));
        }
        if !skill.user_invocable {
            notes.push(ExpandNote::ModelOnly(command.name.clone()));
        }
    }
    let syntax = command.template_rules().syntax();
    let (pieces, _) = template::pieces(&command.body, syntax);
    let has_shell = pieces
        .iter()
        .any(|piece| matches!(piece, Piece::Shell { .. }));
    if has_shell && !workspace_trusted && command.origin == Origin::Project {
        notes.push(ExpandNote::ShellNotRun);
    }
    notes
}

/// The arguments of one use of a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    raw: String,
    list: Vec<String>,
}

impl Args {
    /// The arguments of a typed line: `text` is everything after the command name; it is
    /// split as [`split_args`] says.
    pub fn parse(text: &str) -> Args {
        let raw = text.trim().to_owned();
        let list = split_args(&raw);
        Args { raw, list }
    }

    /// Arguments given one by one (a program's argv): each element is one argument exactly
    /// as given, an empty one included; the text is the elements joined by spaces.
    pub fn from_argv(argv: &[String]) -> Args {
        Args {
            raw: argv.join(" "),
            list: argv.to_vec(),
        }
    }

    /// Everything typed after the command name (`$ARGUMENTS`, `{{args}}`).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The positional arguments.
    pub fn list(&self) -> &[String] {
        &self.list
    }
}

/// Splits argument text into positional arguments, much as a shell would but forgiving:
/// whitespace separates; `"…"` anywhere in an argument is quoted text (quotes removed);
/// `'…'` is quoted text when it opens an argument (or follows `=`) and closes at the end of
/// one, so the apostrophe of `don't` is just a letter. A quote that is never closed is kept
/// as a character, so nothing typed is lost.
pub fn split_args(args: &str) -> Vec<String> {
    let chars: Vec<char> = args.chars().collect();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            out.extend(current.take());
            i += 1;
            continue;
        }
        let close = match c {
            '"' => chars[i + 1..].iter().position(|&x| x == '"'),
            '\'' if current.as_deref().is_none_or(|s| s.ends_with('=')) => {
                chars[i + 1..].iter().enumerate().position(|(j, &x)| {
                    x == '\'' && chars.get(i + 2 + j).is_none_or(|n| n.is_whitespace())
                })
            }
            _ => None,
        };
        let word = current.get_or_insert_default();
        match close {
            Some(len) => {
                word.extend(&chars[i + 1..i + 1 + len]);
                i += len + 2;
            }
            None => {
                word.push(c);
                i += 1;
            }
        }
    }
    out.extend(current);
    out
}

/// How `$N` is read in a Markdown template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// `$1` is the first argument (shiro, the shell, Claude Code's original commands).
    OneBased,
    /// `$0` is the first argument (Claude Code today); chosen when the template uses `$0`.
    ZeroBased,
    /// OpenCode: `$1` is the first, and the highest-numbered placeholder takes the rest.
    OpenCode {
        /// The highest placeholder number in the template.
        last: usize,
    },
}

/// Expands `command`'s template with `args`: first the shell substitutions, then the file
/// references, then the arguments; with no argument placeholder, the arguments are appended
/// as the command's ecosystem does. Never fails: problems become bracketed notes in the text.
pub async fn expand(command: &Command, args: &Args, ctx: &ExpandContext<'_>) -> String {
    let syntax = command.template_rules().syntax();
    let (pieces, _) = template::pieces(&command.body, syntax);
    let run_shell = ctx.workspace_trusted || command.origin != Origin::Project;

    let mut produced: Vec<Option<String>> = vec![None; pieces.len()];
    for (slot, piece) in produced.iter_mut().zip(&pieces) {
        if let Piece::Shell {
            command: text,
            literal,
        } = piece
        {
            *slot = Some(if run_shell {
                let rewritten = shell_command(text, syntax, &command.arguments);
                let call = ShellCall {
                    command: &rewritten,
                    args: args.list(),
                    arguments: args.raw(),
                };
                shell_text(ctx.shell.run(&call).await, literal, text)
            } else {
                NOT_TRUSTED_NOTE.to_owned()
            });
        }
    }
    for (slot, piece) in produced.iter_mut().zip(&pieces) {
        if let Piece::File {
            path,
            literal,
            explicit,
        } = piece
        {
            *slot = Some(file_text(ctx.files, path, literal, *explicit).await);
        }
    }

    let numbering = numbering(command.template_rules(), &pieces);
    let mut out = String::new();
    for (piece, produced) in pieces.iter().zip(produced) {
        match (piece, produced) {
            (_, Some(text)) => out.push_str(&text),
            (Piece::Text(text), None) => match syntax {
                Syntax::Markdown => {
                    out.push_str(&substitute(text, args, &command.arguments, numbering));
                }
                Syntax::Gemini => out.push_str(&text.replace(GEMINI_ARGS, args.raw())),
            },
            (_, None) => {}
        }
    }
    if !args.raw().trim().is_empty() && !uses_arguments(command, &pieces) {
        out.truncate(out.trim_end().len());
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        match command.template_rules() {
            Ecosystem::Shiro | Ecosystem::Agents | Ecosystem::Claude => {
                out.push_str("ARGUMENTS: ");
                out.push_str(args.raw());
            }
            Ecosystem::OpenCode => out.push_str(args.raw()),
            Ecosystem::Gemini => {
                out.push('/');
                out.push_str(&command.name);
                out.push(' ');
                out.push_str(args.raw());
            }
        }
    }
    out
}

/// Gemini CLI's argument placeholder.
const GEMINI_ARGS: &str = "{{args}}";

fn shell_text(outcome: ShellOutcome, literal: &str, command: &str) -> String {
    match outcome {
        ShellOutcome::Success { stdout, truncated } => {
            let mut s = stdout.trim().to_owned();
            if truncated {
                s.push_str(&format!(" [!shell output cut: {command}]"));
            }
            s
        }
        ShellOutcome::Failed { code: Some(code) } => {
            format!("{literal} [!shell exit {code}: {command}]")
        }
        ShellOutcome::Failed { code: None } => {
            format!("{literal} [!shell killed by a signal: {command}]")
        }
        ShellOutcome::TimedOut { after } => {
            let after = if after.subsec_millis() == 0 {
                format!("{} s", after.as_secs())
            } else {
                format!("{} ms", after.as_millis())
            };
            format!("{literal} [!shell timed out after {after}: {command}]")
        }
        ShellOutcome::SpawnFailed { reason } => {
            format!("{literal} [!shell could not start: {reason}]")
        }
    }
}

/// File extensions that make a missing `@name` look like a file the author meant (and so
/// worth a note), where `@pytest.fixture` or `@app.route` are code.
const FILE_EXTENSIONS: &[&str] = &[
    "adoc",
    "bash",
    "bat",
    "c",
    "cc",
    "cfg",
    "cjs",
    "clj",
    "cmake",
    "conf",
    "cpp",
    "cs",
    "css",
    "csv",
    "dart",
    "diff",
    "dockerfile",
    "el",
    "env",
    "erl",
    "ex",
    "exs",
    "fish",
    "gif",
    "go",
    "gql",
    "gradle",
    "graphql",
    "h",
    "hcl",
    "hpp",
    "hs",
    "htm",
    "html",
    "ini",
    "ipynb",
    "java",
    "jpeg",
    "jpg",
    "js",
    "json",
    "jsonc",
    "jsonl",
    "jsx",
    "kt",
    "kts",
    "less",
    "lock",
    "log",
    "lua",
    "m",
    "md",
    "mdx",
    "mjs",
    "mk",
    "ml",
    "mli",
    "nix",
    "patch",
    "pdf",
    "php",
    "pl",
    "png",
    "properties",
    "proto",
    "ps1",
    "py",
    "r",
    "rb",
    "rs",
    "rst",
    "sass",
    "scala",
    "scss",
    "sh",
    "sql",
    "svelte",
    "svg",
    "swift",
    "tex",
    "tf",
    "toml",
    "ts",
    "tsx",
    "txt",
    "vue",
    "xml",
    "yaml",
    "yml",
    "zig",
    "zsh",
];

/// The paths that `@path` references in typed text name, in order, found by the rules of a
/// Markdown template's: `@` after a letter, digit or `_` (`me@example.com`) starts none;
/// whitespace, quotes, brackets, `,` and `;` end a path, and a trailing `.`, `:`, `!` or `?`
/// ends the sentence rather than the path. For a caller that attaches the files a typed
/// prompt names, as a command's template has them read.
///
/// ```
/// assert_eq!(
///     shiro_commands::file_references("see @src/a.rs, mail me@example.com @docs/."),
///     ["src/a.rs", "docs/"]
/// );
/// ```
pub fn file_references(text: &str) -> Vec<&str> {
    template::file_references(text)
}

/// Whether a missing `@path` plausibly names a file: it is written as a path (`./x`,
/// `../x`, `/x`, `~/x`, `x/`), its name has a common file extension, or the folder it names
/// exists. `@me` or `@app.route` do not, and are best left as typed without a note.
pub async fn looks_like_a_path(files: &dyn FileReader, path: &str) -> bool {
    if ["./", "../", "/", "~/"].iter().any(|p| path.starts_with(p)) || path.ends_with('/') {
        return true;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some((stem, ext)) = name.rsplit_once('.')
        && !stem.is_empty()
        && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
    {
        return true;
    }
    match path.rsplit_once('/') {
        Some((parent, _)) if !parent.is_empty() => files.is_dir(parent).await,
        _ => false,
    }
}

async fn file_text(files: &dyn FileReader, path: &str, literal: &str, explicit: bool) -> String {
    match files.read(path).await {
        FileOutcome::Contents { text, truncated } => {
            if truncated {
                format!("{text}\n[@file cut: only the start of {path} is shown]")
            } else {
                // The final line break ends the file's last line; the template's own text
                // goes on after the contents.
                let text = text.strip_suffix('\n').unwrap_or(&text);
                text.strip_suffix('\r').unwrap_or(text).to_owned()
            }
        }
        FileOutcome::Directory { entries, more } => {
            let mut out = format!("Directory {}/:", path.trim_end_matches('/'));
            for entry in &entries {
                out.push_str("\n- ");
                out.push_str(entry);
            }
            if entries.is_empty() && more == 0 {
                out.push_str("\n(empty)");
            }
            if more > 0 {
                out.push_str(&format!("\n- … and {more} more"));
            }
            out
        }
        FileOutcome::Missing if explicit || looks_like_a_path(files, path).await => {
            format!("{literal} [@file missing: {path}]")
        }
        FileOutcome::Missing => literal.to_owned(),
        FileOutcome::Refused { reason } => format!("{literal} [@file refused: {reason}]"),
    }
}

/// The position of a template's `$N` numbering.
fn numbering(ecosystem: Ecosystem, pieces: &[Piece<'_>]) -> Numbering {
    let texts = pieces.iter().filter_map(|p| match p {
        Piece::Text(t) => Some(*t),
        _ => None,
    });
    match ecosystem {
        Ecosystem::OpenCode => {
            let last = texts
                .flat_map(|t| dollar_numbers(t).into_iter())
                .max()
                .unwrap_or(0);
            Numbering::OpenCode { last }
        }
        _ => {
            let zero = texts.into_iter().any(|t| t.contains("$0"));
            if zero {
                Numbering::ZeroBased
            } else {
                Numbering::OneBased
            }
        }
    }
}

/// The numbers of every `$N` (one or more digits) in `text`.
fn dollar_numbers(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let digits: &str = &rest[..rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len())];
        if let Ok(n) = digits.parse::<usize>() {
            out.push(n);
        }
    }
    out
}

/// The declared argument name at the start of `rest`, if any: the longest one not followed
/// by a word character.
fn named_at<'n>(rest: &str, names: &'n [String]) -> Option<(usize, &'n str)> {
    names
        .iter()
        .enumerate()
        .filter(|(_, name)| {
            rest.strip_prefix(name.as_str())
                .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        })
        .max_by_key(|(_, name)| name.len())
        .map(|(i, name)| (i, name.as_str()))
}

/// `$ARGUMENTS[N]` at the start of `rest` (after the `$`): its length and N.
fn indexed_at(rest: &str) -> Option<(usize, usize)> {
    let inner = rest.strip_prefix("ARGUMENTS[")?;
    let close = inner.find(']')?;
    let n = inner[..close].parse::<usize>().ok()?;
    Some(("ARGUMENTS[".len() + close + 1, n))
}

/// Substitutes the arguments into template text of a Markdown command.
fn substitute(text: &str, args: &Args, names: &[String], numbering: Numbering) -> String {
    let list = args.list();
    let get = |i: usize| list.get(i).map_or("", String::as_str);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some((len, n)) = indexed_at(after) {
            out.push_str(get(n));
            rest = &after[len..];
        } else if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args.raw());
            rest = tail;
        } else if let Some((i, name)) = named_at(after, names) {
            out.push_str(get(i));
            rest = &after[name.len()..];
        } else if let Some(consumed) = positional(after, numbering, list, &mut out) {
            rest = &after[consumed..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Substitutes `$N` at the start of `after` (the text after a `$`) into `out`; returns how
/// many characters it took, or `None` when there is no placeholder there.
fn positional(
    after: &str,
    numbering: Numbering,
    list: &[String],
    out: &mut String,
) -> Option<usize> {
    let get = |i: usize| list.get(i).map_or("", String::as_str);
    match numbering {
        Numbering::OneBased | Numbering::ZeroBased => {
            let d = after.chars().next().filter(char::is_ascii_digit)?;
            let n = d as usize - '0' as usize;
            match (numbering, n) {
                (Numbering::ZeroBased, n) => out.push_str(get(n)),
                (_, 0) => return None,
                (_, n) => out.push_str(get(n - 1)),
            }
            Some(1)
        }
        Numbering::OpenCode { last } => {
            let len = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            let n = after[..len].parse::<usize>().ok().filter(|n| *n > 0)?;
            if n == last && n <= list.len() {
                out.push_str(&list[n - 1..].join(" "));
            } else {
                out.push_str(get(n - 1));
            }
            Some(len)
        }
    }
}

/// Whether the template takes the arguments somewhere (so they are not appended).
fn uses_arguments(command: &Command, pieces: &[Piece<'_>]) -> bool {
    let names = &command.arguments;
    pieces
        .iter()
        .any(|piece| match (command.template_rules(), piece) {
            (Ecosystem::Gemini, Piece::Text(t) | Piece::Shell { command: t, .. }) => {
                t.contains(GEMINI_ARGS)
            }
            (Ecosystem::Gemini, Piece::File { .. }) => false,
            (_, Piece::Text(t)) => text_uses_arguments(t, names, true),
            (_, Piece::Shell { command: t, .. }) => {
                text_uses_arguments(t, names, false)
                    || ["$@", "$*", "${@", "${*", "${ARGUMENTS"]
                        .iter()
                        .any(|p| t.contains(p))
                    || t.match_indices("${").any(|(at, _)| {
                        t[at + 2..].starts_with(|c: char| c.is_ascii_digit() && c != '0')
                    })
            }
            (_, Piece::File { .. }) => false,
        })
}

/// Whether `text` has `$ARGUMENTS`, `$N` or a named `$name`; `$0` counts only in template
/// text (in a shell command it is the shell's own name).
fn text_uses_arguments(text: &str, names: &[String], zero_counts: bool) -> bool {
    text.match_indices('$').any(|(at, _)| {
        let after = &text[at + 1..];
        after.starts_with("ARGUMENTS")
            || after.starts_with(|c: char| c.is_ascii_digit() && (zero_counts || c != '0'))
            || named_at(after, names).is_some()
    })
}

/// Where a shell word is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoting {
    Bare,
    Single,
    Double,
}

/// A reference to shell parameter `name` that gives its value as one word in `quoting`.
fn reference(quoting: Quoting, name: &str) -> String {
    match quoting {
        Quoting::Bare => format!("\"${{{name}}}\""),
        Quoting::Double => format!("${{{name}}}"),
        Quoting::Single => format!("'\"${{{name}}}\"'"),
    }
}

/// The command to run for a shell substitution: the template's placeholders for typed text
/// become references to the shell's parameters, quoted for where they stand, so the text
/// is passed as data: Gemini's `{{args}}` becomes `"$ARGUMENTS"`, `$ARGUMENTS[N]` and a
/// named `$name` become `"${N+1}"` (`$ARGUMENTS`, `$1` and `"$@"` the shell reads itself).
fn shell_command(command: &str, syntax: Syntax, names: &[String]) -> String {
    let find = |rest: &str| -> Option<(usize, String)> {
        match syntax {
            Syntax::Gemini => rest
                .starts_with(GEMINI_ARGS)
                .then(|| (GEMINI_ARGS.len(), "ARGUMENTS".to_owned())),
            Syntax::Markdown => {
                let after = rest.strip_prefix('$')?;
                if let Some((len, n)) = indexed_at(after) {
                    return Some((len + 1, (n + 1).to_string()));
                }
                if after.starts_with("ARGUMENTS") {
                    return None;
                }
                let (i, name) = named_at(after, names)?;
                Some((name.len() + 1, (i + 1).to_string()))
            }
        }
    };
    let mut out = String::with_capacity(command.len());
    let mut quoting = Quoting::Bare;
    let mut chars = command.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some((len, name)) = find(&command[i..]) {
            out.push_str(&reference(quoting, &name));
            while chars.peek().is_some_and(|(j, _)| *j < i + len) {
                chars.next();
            }
            continue;
        }
        out.push(c);
        match (quoting, c) {
            (Quoting::Bare, '\'') => quoting = Quoting::Single,
            (Quoting::Bare, '"') => quoting = Quoting::Double,
            (Quoting::Single, '\'') | (Quoting::Double, '"') => quoting = Quoting::Bare,
            (Quoting::Bare | Quoting::Double, '\\') => {
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_placeholders_become_quoted_references() {
        let names = vec!["file".to_owned()];
        let md = |c: &str| shell_command(c, Syntax::Markdown, &names);
        assert_eq!(md("cat $file"), "cat \"${1}\"");
        assert_eq!(md("echo \"$ARGUMENTS[1] x\""), "echo \"${2} x\"");
        assert_eq!(md("echo '$file'"), "echo ''\"${1}\"''");
        assert_eq!(
            md("echo $files $ARGUMENTS \\$file"),
            "echo $files $ARGUMENTS \\$file"
        );
        let gem = |c: &str| shell_command(c, Syntax::Gemini, &names);
        assert_eq!(gem("grep -r {{args}} ."), "grep -r \"${ARGUMENTS}\" .");
        assert_eq!(gem("echo \"{{args}}\""), "echo \"${ARGUMENTS}\"");
        assert_eq!(gem("echo '{{args}}'"), "echo ''\"${ARGUMENTS}\"''");
    }

    #[test]
    fn split_args_keeps_apostrophes_and_unclosed_quotes() {
        assert_eq!(split_args("don't stop"), ["don't", "stop"]);
        assert_eq!(split_args("'it's fine' x"), ["it's fine", "x"]);
        assert_eq!(split_args("a=\"b c\" k='v w'"), ["a=b c", "k=v w"]);
        assert_eq!(split_args("\"open rest"), ["\"open", "rest"]);
        assert_eq!(split_args("'' \"\""), ["", ""]);
        assert_eq!(split_args("rock'n'roll"), ["rock'n'roll"]);
    }

    #[test]
    fn dollar_numbers_are_read_whole() {
        assert_eq!(dollar_numbers("$1 $12 $ $x $3."), [1, 12, 3]);
    }
}
