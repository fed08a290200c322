//! The tools over background commands: `bash_output` reads what one printed since the last
//! read, `bash_kill` stops one. `bash` with `run_in_background` starts them (see
//! [`crate::capture::Background`]).

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::capture::{Background, CaptureMode, Job, Status};
use crate::mutator::Mutator;
use crate::path::WorkspacePath;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};
use crate::tools::BASH_MAX_LISTED_PATHS;

/// Reads a background command's new output.
#[derive(Debug, Clone)]
pub struct BashOutput {
    background: Arc<Background>,
}

/// Stops a background command.
#[derive(Debug, Clone)]
pub struct BashKill {
    background: Arc<Background>,
}

/// The `bash_output` tool over the session's background commands.
pub fn bash_output(background: Arc<Background>) -> BashOutput {
    BashOutput { background }
}

/// The `bash_kill` tool over the session's background commands.
pub fn bash_kill(background: Arc<Background>) -> BashKill {
    BashKill { background }
}

/// The arguments of `bash_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOutputArgs {
    /// The id `bash` gave when it started the command (`b1`, …).
    #[serde(alias = "bash_id", alias = "shell_id")]
    pub id: String,
    /// A regular expression: only the lines that match it are returned (the others are
    /// still counted as read).
    pub filter: Option<String>,
}

/// The arguments of `bash_kill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashKillArgs {
    /// The id `bash` gave when it started the command.
    #[serde(alias = "bash_id", alias = "shell_id")]
    pub id: String,
}

#[async_trait]
impl Tool for BashOutput {
    fn name(&self) -> &'static str {
        "bash_output"
    }

    fn description(&self) -> &'static str {
        "Returns the output (stdout and stderr together) that a command started by bash with \
         run_in_background printed since the last bash_output call for it, and whether it is \
         still running or how it ended. `filter`, a regular expression, keeps only the lines \
         that match it. The result also names files in the workspace the background command \
         changed since it was last asked; those changes cannot be undone."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<BashOutputArgs>()
    }

    /// False: it only reads what the command printed.
    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        _mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: BashOutputArgs = parse_args("bash_output", args)?;
        let filter = args
            .filter
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|err| ToolError::refused(format!("filter is not a valid regex: {err}")))?;
        let job = self.background.job(&args.id).map_err(refused)?;
        let read = job.read(filter.as_ref()).await;
        let mut text = read.text;
        let _ = write!(text, "[{}: {}]", job.id(), read.status);
        if let Some(note) = refused_note(&job, &text) {
            let _ = write!(text, "\n[note: {note}]");
        }
        Ok(changed(&self.background, text).await)
    }
}

#[async_trait]
impl Tool for BashKill {
    fn name(&self) -> &'static str {
        "bash_kill"
    }

    fn description(&self) -> &'static str {
        "Stops a command started by bash with run_in_background, and every process it started. \
         Its output not read yet is returned."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<BashKillArgs>()
    }

    /// False: it changes no file, and stops only a command of this session.
    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        _mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: BashKillArgs = parse_args("bash_kill", args)?;
        let job = self.background.job(&args.id).map_err(refused)?;
        let was = job.status();
        job.kill().await;
        let read = job.read(None).await;
        let mut text = read.text;
        match was {
            Status::Running => {
                let _ = write!(
                    text,
                    "[{}: stopped, with every process it started]",
                    job.id()
                );
            }
            ended => {
                let _ = write!(text, "[{}: had already ended: {ended}]", job.id());
            }
        }
        Ok(changed(&self.background, text).await)
    }
}

fn refused(err: crate::capture::BackgroundError) -> ToolError {
    ToolError::refused(err.0)
}

/// The result `text`, with the paths the background commands changed since they were last
/// asked listed after it, as changes that cannot be undone.
pub(crate) async fn changed(background: &Background, mut text: String) -> ToolOutput {
    let paths = background.take_changes().await;
    list_changed(&mut text, &paths);
    ToolOutput {
        text,
        capture: Some(CaptureMode::Detect),
        unrestorable: paths,
        background: true,
        ..ToolOutput::default()
    }
}

/// Appends the paths background commands changed to `text`.
pub(crate) fn list_changed(text: &mut String, paths: &[WorkspacePath]) {
    if paths.is_empty() {
        return;
    }
    let _ = write!(
        text,
        "\n[paths changed by background commands ({}) that CANNOT be undone:]",
        paths.len()
    );
    for path in paths.iter().take(BASH_MAX_LISTED_PATHS) {
        let _ = write!(text, "\n{path}");
    }
    if paths.len() > BASH_MAX_LISTED_PATHS {
        let _ = write!(text, "\n… and {} more", paths.len() - BASH_MAX_LISTED_PATHS);
    }
}

/// The path a line that says `reason` names, as the common tools word it:
/// - `bash: line 1: a.txt: REASON` (the last part before the reason; with a message before
///   it, as in `sed: couldn't open temporary file ./sedAb12: REASON`, the path at its end);
/// - `touch: cannot touch 'a.txt': REASON`, `cp: cannot create regular file ‘a’: REASON`
///   (the last quoted part before it);
/// - `OSError: [Errno 30] REASON: 'a.txt'` (the quoted part after it).
fn refused_path<'a>(line: &'a str, reason: &str) -> Option<&'a str> {
    let (before, after) = line.split_once(reason)?;
    let quoted = |text: &'a str, last: bool| {
        let mut parts = text.split(['\'', '"', '`', '‘', '’']).skip(1).step_by(2);
        let found = if last { parts.last() } else { parts.next() };
        found.filter(|part| !part.trim().is_empty())
    };
    // A quoted part ends before the reason only if its closing quote does.
    let closed = before.trim_end().trim_end_matches(':').trim_end();
    let named = if closed.ends_with(['\'', '"', '`', '’']) {
        quoted(closed, true)
    } else if closed.is_empty() || closed.ends_with(']') {
        quoted(after, false)
    } else {
        // A message before the path (`couldn't open temporary file ./sedAb12`) ends in it.
        closed
            .rsplit(": ")
            .next()
            .map(|part| match part.rsplit_once(char::is_whitespace) {
                Some((_, last)) if last.starts_with(['.', '/']) => last,
                _ => part,
            })
    };
    named.map(str::trim).filter(|path| !path.is_empty())
}

/// What to say when `output` shows a write the kernel refused: the workspace is read-only to
/// a background command but for its writable directories.
pub(crate) fn refused_note(job: &Job, output: &str) -> Option<String> {
    refused_note_in(job.writable(), output)
}

/// The same for a command that may write in the directories `writable` of the workspace.
fn refused_note_in(writable: &[WorkspacePath], output: &str) -> Option<String> {
    const REFUSED: &str = "Read-only file system";
    let line = output.lines().find(|line| line.contains(REFUSED))?;
    let named = refused_path(line, REFUSED);
    let what = match named {
        Some(path) => format!("a write to {path} was refused"),
        None => "a write was refused".to_owned(),
    };
    let may = if writable.is_empty() {
        "may write nowhere in the workspace (a background command may write only in \
         directories .gitignore leaves out that hold nothing git tracks, and it has none)"
            .to_owned()
    } else {
        let dirs: Vec<String> = writable.iter().map(|dir| format!("{dir}/")).collect();
        format!(
            "may write in the workspace only in {} (directories .gitignore leaves out that \
             hold nothing git tracks)",
            dirs.join(", ")
        )
    };
    Some(format!(
        "{what}: this background command {may}, so that nothing it does goes unrecorded; \
         change files with the edit tools or a foreground bash command, whose changes are \
         recorded and undoable"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form of the note reads as a sentence: a path named or not, and some writable
    /// directories or none.
    #[test]
    fn the_note_on_a_refused_write_reads_right() {
        let dirs = |dirs: &[&str]| -> Vec<WorkspacePath> {
            (dirs.iter())
                .map(|dir| WorkspacePath::from_relative(dir).unwrap())
                .collect()
        };
        let named = "bash: line 1: out.txt: Read-only file system";
        let unnamed = "Read-only file system";
        let notes = [
            refused_note_in(&dirs(&["target"]), named),
            refused_note_in(&dirs(&["node_modules", "target"]), named),
            refused_note_in(&dirs(&["target"]), unnamed),
            refused_note_in(&[], named),
            refused_note_in(&[], unnamed),
        ];
        let notes: Vec<String> = notes.into_iter().flatten().collect();
        insta::assert_snapshot!(notes.join("\n"), @r"
        a write to out.txt was refused: this background command may write in the workspace only in target/ (directories .gitignore leaves out that hold nothing git tracks), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable
        a write to out.txt was refused: this background command may write in the workspace only in node_modules/, target/ (directories .gitignore leaves out that hold nothing git tracks), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable
        a write was refused: this background command may write in the workspace only in target/ (directories .gitignore leaves out that hold nothing git tracks), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable
        a write to out.txt was refused: this background command may write nowhere in the workspace (a background command may write only in directories .gitignore leaves out that hold nothing git tracks, and it has none), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable
        a write was refused: this background command may write nowhere in the workspace (a background command may write only in directories .gitignore leaves out that hold nothing git tracks, and it has none), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable
        ");
        assert_eq!(
            refused_note_in(&[], "bash: out.txt: Permission denied"),
            None
        );
    }

    #[test]
    fn the_refused_path_is_found_as_the_common_tools_word_it() {
        const RO: &str = "Read-only file system";
        let cases = [
            ("bash: line 1: a.txt: Read-only file system", Some("a.txt")),
            (
                "bash: line 1: my notes: Read-only file system",
                Some("my notes"),
            ),
            (
                "touch: cannot touch 'a.txt': Read-only file system",
                Some("a.txt"),
            ),
            (
                "cp: cannot create regular file ‘src/x y.rs’: Read-only file system",
                Some("src/x y.rs"),
            ),
            (
                "sed: couldn't open temporary file ./sedAb12: Read-only file system",
                Some("./sedAb12"),
            ),
            (
                "OSError: [Errno 30] Read-only file system: 'out/a.txt'",
                Some("out/a.txt"),
            ),
            ("Read-only file system", None),
            ("mkdir: '': Read-only file system", None),
        ];
        for (line, path) in cases {
            assert_eq!(refused_path(line, RO), path, "{line}");
        }
    }
}
