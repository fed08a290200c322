//! Approvals: which tool calls may run, and the diff a person sees before saying yes.

use serde_json::Value;
use shiro_tools::{MemMutator, Mutator, Stat, Tool, WorkspacePath};

use crate::permissions::{Mode, Rules};
pub use crate::protocol::{Answer, Scope};
use crate::render::{self, Color, Side};

/// What was decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Run,
    /// Do not run it; the optional reason is passed on to the model.
    Deny(Option<String>),
}

/// The session's approval state: its mode, its rules, and whether anyone can be asked.
#[derive(Debug)]
pub struct Approvals {
    /// What runs when no rule says otherwise (`/mode`).
    pub mode: Mode,
    /// The rules of the config files, the flags and this session's "always" answers.
    pub rules: Rules,
    /// Whether a person answers questions (not with `-p`: a call that needs asking is then
    /// denied).
    pub interactive: bool,
}

impl Approvals {
    /// No rules, `mode`, a person to ask when `interactive`.
    pub fn new(mode: Mode, interactive: bool) -> Approvals {
        Approvals {
            mode,
            rules: Rules::default(),
            interactive,
        }
    }
}

/// Parses the answer to "keep this rule where?": `s`/Enter, `w` or `u` (or the words).
pub fn parse_scope(line: &str) -> Option<Scope> {
    match line.trim().to_lowercase().as_str() {
        "" | "s" | "session" => Some(Scope::Session),
        "w" | "workspace" | "p" | "project" => Some(Scope::Workspace),
        "u" | "user" => Some(Scope::User),
        _ => None,
    }
}

/// Parses an answer: `y`/`yes`, `a`/`always`, `n`/`no` optionally followed by a reason
/// (`n use edit_file instead`). Anything else is `None`, and the question is asked again.
pub fn parse_answer(line: &str) -> Option<Answer> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim().trim_start_matches([':', ',', '-']).trim();
    match word.to_lowercase().trim_end_matches([':', ',']) {
        "y" | "yes" if rest.is_empty() => Some(Answer::Once),
        "a" | "always" if rest.is_empty() => Some(Answer::Always),
        "n" | "no" => Some(Answer::No((!rest.is_empty()).then(|| rest.to_owned()))),
        _ => None,
    }
}

/// The text a model reads for a call that nobody could approve (a headless run): `why` says
/// what asked, and what would let such a call run.
pub fn unanswered_text(why: &str) -> String {
    format!(
        "this tool call needs approval, and nobody can give it in this headless run; nothing was run. {why}"
    )
}

/// The text a model reads for a call the user denied, with the reason they gave.
pub fn denied_text(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => {
            format!("the user denied this tool call; nothing was run. Their reason: {reason}")
        }
        None => "the user denied this tool call; nothing was run".to_owned(),
    }
}

/// Why a call that would change something was refused without anyone saying no; `-p` ends
/// a turn whose changes were all refused with a hint that names each cause
/// ([`refusal_hint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// A deny rule.
    Rule,
    /// Read-only mode, which refuses every tool that changes files, every MCP tool, and bash
    /// where no read-only sandbox can hold it.
    ReadOnly,
    /// Read-only mode asks before bash runs in its sandbox, and nobody could answer (`-p`,
    /// with `--yes` or without).
    ReadOnlyBash,
    /// An ask rule asks every time, and nobody could answer (`-p`, with `--yes` or without).
    AskRule,
    /// Nobody could be asked: `-p` without `--yes`.
    Unasked,
    /// The user command that started the turn allows other tools (its `allowed-tools`).
    Command,
}

impl Refusal {
    /// Why a call that needs an answer is refused when nobody can give one: `rule` is the
    /// ask rule that insists, if one does, and `mode` the session's mode.
    pub fn unanswered(rule: Option<&str>, mode: Mode) -> Refusal {
        match (rule, mode) {
            (Some(_), _) => Refusal::AskRule,
            // In read-only mode only bash, run in the read-only sandbox, is ever asked about.
            (None, Mode::ReadOnly) => Refusal::ReadOnlyBash,
            (None, _) => Refusal::Unasked,
        }
    }

    /// What follows a denied call's name on stderr (`denied: write_file a (by read-only
    /// mode)`); nothing when it was refused because nobody could be asked.
    pub fn note(self) -> &'static str {
        match self {
            Refusal::Rule => " (by the permission rules)",
            Refusal::ReadOnly => " (by read-only mode)",
            Refusal::ReadOnlyBash => " (read-only mode asks before bash runs, and -p cannot ask)",
            Refusal::AskRule => " (an ask rule asks, and -p cannot ask)",
            Refusal::Unasked => "",
            Refusal::Command => " (by the command's allowed-tools)",
        }
    }
}

/// The hint a `-p` run prints when every change of its turn was refused, naming each cause
/// in `causes`: `--yes` only when nobody could be asked, the rules and the mode when they
/// refused.
pub fn refusal_hint(causes: &[Refusal]) -> String {
    let mut causes = causes.to_vec();
    causes.sort_unstable();
    causes.dedup();
    let clauses: Vec<&str> = causes
        .iter()
        .map(|cause| match cause {
            Refusal::Rule => "deny rules refused changes (/permissions in a session lists the rules)",
            Refusal::ReadOnly => "read-only mode (--read-only) refuses every change",
            Refusal::ReadOnlyBash => {
                "read-only mode asks before bash runs (in a read-only sandbox), and -p cannot ask, with --yes or without: allow the commands with --allowed-tools or a rule in .shiro/config.toml"
            }
            Refusal::AskRule => {
                "an ask rule asks before a call, and -p cannot ask, with --yes or without: run it in a session, where you can answer"
            }
            Refusal::Unasked => {
                "-p denies every change unless --yes is given; run again with --yes to allow them"
            }
            Refusal::Command => {
                "the command's allowed-tools refused changes (`shiro commands list` shows each command's tools)"
            }
        })
        .collect();
    if clauses.is_empty() {
        return "nothing was changed: every change was refused".to_owned();
    }
    format!("nothing was changed: {}", clauses.join("; "))
}

/// What a call would do, for the approval prompt: `$ command` for `bash`, else the unified
/// diff of every path the call touches.
///
/// The diff comes from running the tool itself on a [`MemMutator`] seeded with the current
/// contents of the paths it reports in [`Tool::touched_paths`], so the preview is exactly
/// what the tool will write, and no second implementation of the edits can drift from it.
/// A call that would fail says so instead (the real call then fails and tells the model).
pub async fn preview(
    tool: &dyn Tool,
    args: &Value,
    workspace: &dyn Mutator,
    color: Color,
) -> String {
    if tool.name() == "bash" {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        return format!("$ {command}\n");
    }
    let paths = match tool.touched_paths(workspace, args).await {
        Ok(paths) => paths,
        Err(err) => return format!("(no preview: {err})\n"),
    };
    let mem = MemMutator::new();
    for path in &paths {
        // A seeding failure shows up as a wrong "before" side at worst; the real call is
        // unaffected, so it is not worth refusing the preview for.
        let _ = seed(workspace, &mem, path).await;
    }
    if let Err(err) = tool.call(&mem, args.clone()).await {
        return format!("(this call will fail: {err})\n");
    }
    let mut out = String::new();
    for path in &paths {
        let before = side(workspace, path).await;
        let after = side(&mem, path).await;
        if before != after {
            out.push_str(&render::diff(path.as_str(), &before, &after, color));
        }
    }
    out
}

/// Copies what `path` (and its parent directories) hold in `from` into `to`.
async fn seed(
    from: &dyn Mutator,
    to: &MemMutator,
    path: &WorkspacePath,
) -> Result<(), shiro_tools::MutatorError> {
    for dir in path.ancestors() {
        if let Stat::Dir { .. } = from.stat(&dir).await?
            && !to.stat(&dir).await?.exists()
        {
            to.create_dir(&dir).await?;
        }
    }
    match from.stat(path).await? {
        Stat::File { mode, .. } => to.write(path, &from.read(path).await?, Some(mode)).await,
        Stat::Symlink { target } => to.symlink(&target, path).await,
        Stat::Dir { .. } => to.create_dir(path).await,
        Stat::Absent => Ok(()),
    }
}

async fn side(mutator: &dyn Mutator, path: &WorkspacePath) -> Side {
    match mutator.stat(path).await {
        Ok(Stat::File { mode, .. }) => match mutator.read(path).await {
            Ok(bytes) => Side::File(bytes, mode),
            Err(_) => Side::Absent,
        },
        Ok(Stat::Dir { .. }) => Side::Dir,
        Ok(Stat::Symlink { target }) => Side::Symlink(target),
        Ok(Stat::Absent) | Err(_) => Side::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scopes() {
        assert_eq!(parse_scope(""), Some(Scope::Session));
        assert_eq!(parse_scope(" W "), Some(Scope::Workspace));
        assert_eq!(parse_scope("user"), Some(Scope::User));
        assert_eq!(parse_scope("x"), None);
    }

    #[test]
    fn parses_answers() {
        assert_eq!(parse_answer("y"), Some(Answer::Once));
        assert_eq!(parse_answer(" YES "), Some(Answer::Once));
        assert_eq!(parse_answer("a"), Some(Answer::Always));
        assert_eq!(parse_answer("n"), Some(Answer::No(None)));
        assert_eq!(
            parse_answer("n: use edit_file"),
            Some(Answer::No(Some("use edit_file".into())))
        );
        assert_eq!(
            parse_answer("no not now"),
            Some(Answer::No(Some("not now".into())))
        );
        assert_eq!(parse_answer("maybe"), None);
        assert_eq!(parse_answer(""), None);
        assert_eq!(parse_answer("y please"), None);
    }

    /// The hint names each cause once, in a fixed order, and `--yes` only when nobody could
    /// be asked.
    #[test]
    fn the_refusal_hint_names_the_real_causes() {
        insta::assert_snapshot!(
            [
                refusal_hint(&[Refusal::Unasked]),
                refusal_hint(&[Refusal::ReadOnlyBash, Refusal::ReadOnly, Refusal::ReadOnlyBash]),
                refusal_hint(&[Refusal::AskRule, Refusal::Rule]),
                refusal_hint(&[]),
            ]
            .join("\n"),
            @r"
        nothing was changed: -p denies every change unless --yes is given; run again with --yes to allow them
        nothing was changed: read-only mode (--read-only) refuses every change; read-only mode asks before bash runs (in a read-only sandbox), and -p cannot ask, with --yes or without: allow the commands with --allowed-tools or a rule in .shiro/config.toml
        nothing was changed: deny rules refused changes (/permissions in a session lists the rules); an ask rule asks before a call, and -p cannot ask, with --yes or without: run it in a session, where you can answer
        nothing was changed: every change was refused
        "
        );
        assert_eq!(
            Refusal::unanswered(None, Mode::ReadOnly),
            Refusal::ReadOnlyBash
        );
        assert_eq!(
            Refusal::unanswered(Some("ask x"), Mode::ReadOnly),
            Refusal::AskRule
        );
        assert_eq!(Refusal::unanswered(None, Mode::Ask), Refusal::Unasked);
    }

    #[tokio::test]
    async fn previews_an_edit_as_a_diff_without_writing() {
        let ws = MemMutator::new();
        let path = WorkspacePath::from_relative("src/a.txt").unwrap();
        ws.create_dir(&WorkspacePath::from_relative("src").unwrap())
            .await
            .unwrap();
        ws.write(&path, b"one\ntwo\n", None).await.unwrap();
        let tool = shiro_tools::tools::edit_file();
        let args = serde_json::json!({"path": "src/a.txt", "old_string": "two", "new_string": "2"});
        let diff = preview(&tool, &args, &ws, Color::Never).await;
        assert!(diff.contains("-two\n+2\n"), "{diff}");
        assert_eq!(ws.read(&path).await.unwrap(), b"one\ntwo\n");
        let bad = serde_json::json!({"path": "src/a.txt", "old_string": "zzz", "new_string": "2"});
        assert!(
            preview(&tool, &bad, &ws, Color::Never)
                .await
                .starts_with("(this call will fail")
        );
    }
}
