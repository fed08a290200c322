//! What a revert tells its caller: the outcome (or a dry run's plan), and the conflicts that
//! refuse it. Every type meant for people has a `Display` that the CLI prints as is.

use std::fmt;

use shiro_tools::WorkspacePath;

use super::merge::ConflictHunk;
use crate::image::Image;
use crate::report::{Action, TurnId, TurnSummary};

/// At most this many lines of each side of a conflicting region are shown.
const MAX_SHOWN_LINES: usize = 6;

/// The result of reverting one turn, or the plan of a dry run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RevertOutcome {
    /// The turn reverted (it stays in the log as it was).
    pub reverted: TurnSummary,
    /// The new turn that the revert recorded, which can be undone and redone like any other;
    /// `None` for a dry run.
    pub turn: Option<TurnSummary>,
    /// Whether this is only a plan: nothing was changed.
    pub dry_run: bool,
    /// Every path the reverted turn touched, sorted, with what the revert does (or would do)
    /// to it.
    pub paths: Vec<RevertPath>,
}

/// One path of a revert.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RevertPath {
    /// The path.
    pub path: WorkspacePath,
    /// What it was before the revert (now, for a dry run).
    pub now: Image,
    /// What the revert makes it: what it was before the reverted turn, or, for a text file
    /// changed since, the merge of both.
    pub becomes: Image,
    /// What was done (or would be).
    pub action: Action,
    /// Whether its content is a merge: the reverted turn's change taken out of a text file
    /// that was changed since, those later changes kept.
    pub merged: bool,
    /// In a dry run, for a file the revert changes: its bytes now (for the caller to show
    /// the change as a diff). `None` otherwise, and for a file over
    /// [`PREVIEW_MAX_BYTES`](crate::PREVIEW_MAX_BYTES).
    #[serde(skip)]
    pub now_bytes: Option<Vec<u8>>,
    /// In a dry run, for a file the revert writes: the bytes it would write. `None`
    /// otherwise, and for a file over [`PREVIEW_MAX_BYTES`](crate::PREVIEW_MAX_BYTES).
    #[serde(skip)]
    pub becomes_bytes: Option<Vec<u8>>,
}

impl fmt::Display for RevertOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run {
            "would revert"
        } else {
            "reverted"
        };
        let reverted = &self.reverted;
        write!(f, "{verb} turn {} {:?}", reverted.id, reverted.summary)?;
        if let Some(session) = &reverted.session {
            write!(f, " of session {session}")?;
        }
        match &self.turn {
            Some(turn) => writeln!(f, ", as turn {} {:?}", turn.id, turn.summary)?,
            None => writeln!(f, ", as a new turn")?,
        }
        let done = !self.dry_run;
        let width = (self.paths.iter())
            .map(|p| p.action.describe(done).len())
            .max()
            .unwrap_or(0);
        for path in &self.paths {
            let action = path.action.describe(done);
            write!(f, "  {action:<width$}  {}", path.path)?;
            if path.merged {
                f.write_str(" (merged: the changes made since the turn are kept)")?;
            } else if path.action == Action::Unchanged {
                f.write_str(" (as before the turn already)")?;
            }
            writeln!(f)?;
        }
        let id = reverted.id;
        if reverted.bash_uncaptured {
            writeln!(
                f,
                "note: turn {id} ran bash without capture; what its commands did is not reverted"
            )?;
        }
        if let Some(git) = &reverted.git {
            writeln!(
                f,
                "note: turn {id} moved the git repository ({git}); a revert changes files only, and leaves HEAD, the refs and the index as they are"
            )?;
        }
        let outside = reverted.outside_tools();
        if !outside.is_empty() {
            writeln!(
                f,
                "note: turn {id} called MCP tools ({}); what they changed is not reverted",
                outside.join(", ")
            )?;
        }
        if !reverted.bash_unrestorable.is_empty() {
            let paths: Vec<&str> = (reverted.bash_unrestorable.iter())
                .map(WorkspacePath::as_str)
                .collect();
            writeln!(
                f,
                "note: bash changed paths in turn {id} that cannot be restored, so they are not reverted: {}",
                paths.join(", ")
            )?;
        }
        if !reverted.changed_since.is_empty() {
            let paths: Vec<&str> = (reverted.changed_since.iter())
                .map(WorkspacePath::as_str)
                .collect();
            writeln!(
                f,
                "note: turn {id} left these as they are, since they changed after it changed them (by you or another program): {}",
                paths.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Why a revert was refused: the paths where the reverted turn's change cannot be taken out
/// of the workspace as it is now. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RevertConflicts {
    /// The turn that was to be reverted.
    pub turn: TurnId,
    /// Its summary.
    pub summary: String,
    /// The paths, sorted.
    pub conflicts: Vec<RevertConflict>,
}

/// A path that stops a revert.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RevertConflict {
    /// The path.
    pub path: WorkspacePath,
    /// What is wrong.
    pub kind: RevertConflictKind,
}

/// How a path stops a revert.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RevertConflictKind {
    /// A text file the turn changed was changed since on the same lines (or lines next to
    /// them), in another way.
    Overlapping {
        /// The regions, in order.
        hunks: Vec<ConflictHunk>,
    },
    /// The path changed since the turn, and it is not a text file whose content alone the
    /// turn changed (a binary file, a mode, a link, a file or directory the turn created or
    /// deleted, a change of kind): only what the turn left can be reverted.
    Changed {
        /// What the turn left there.
        expected: Image,
        /// What is there now.
        found: Image,
    },
    /// A text file changed since the turn, whose bytes as the turn left them (the base of
    /// the merge) the store does not keep: it keeps the state before each turn, and the
    /// state after a turn only when a later turn or an undo found it.
    NotKept {
        /// What the turn left there.
        expected: Image,
        /// What is there now.
        found: Image,
    },
    /// A directory the revert removes (the turn created it), or replaces, holds entries the
    /// revert does not remove.
    NotEmpty {
        /// Some of those entries.
        entries: Vec<WorkspacePath>,
    },
    /// Something the revert recreates has no real directory above it any more.
    NoParent {
        /// The first ancestor that is not a directory.
        parent: WorkspacePath,
        /// What is there.
        found: Image,
    },
}

impl fmt::Display for RevertConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.kind {
            RevertConflictKind::Overlapping { hunks } => {
                for (i, hunk) in hunks.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write_hunk(f, path, hunk)?;
                }
                Ok(())
            }
            RevertConflictKind::Changed { expected, found } => {
                write!(
                    f,
                    "{path}: changed since the turn: now {found}, the turn left {expected}"
                )
            }
            RevertConflictKind::NotKept { expected, found } => write!(
                f,
                "{path}: changed since the turn (now {found}, the turn left {expected}), and the store keeps no copy of what the turn left to merge with"
            ),
            RevertConflictKind::NotEmpty { entries } => {
                let entries: Vec<&str> = entries.iter().map(WorkspacePath::as_str).collect();
                write!(
                    f,
                    "{path}: directory holds entries the revert would not remove: {}",
                    entries.join(", ")
                )
            }
            RevertConflictKind::NoParent { parent, found } => write!(
                f,
                "{path}: cannot be put back, as {parent} is no longer a directory (now {found})"
            ),
        }
    }
}

/// One conflicting region: where it is in the current file, then before the turn, what the
/// turn made it, and what it is now.
fn write_hunk(
    f: &mut fmt::Formatter<'_>,
    path: &WorkspacePath,
    hunk: &ConflictHunk,
) -> fmt::Result {
    let place = match hunk.lines {
        0 => format!("before line {}", hunk.line),
        1 => format!("line {}", hunk.line),
        n => format!("lines {}-{}", hunk.line, hunk.line + n - 1),
    };
    writeln!(f, "{path}, {place}: changed by the turn, and since")?;
    let sections = [
        ("before the turn:", &hunk.before_turn),
        ("the turn made it:", &hunk.turn_made),
        ("now:", &hunk.now),
    ];
    for (i, (title, text)) in sections.iter().enumerate() {
        write!(f, "    {title}")?;
        if text.is_empty() {
            f.write_str(" (no lines)")?;
        }
        let lines: Vec<&str> = text.lines().collect();
        for line in lines.iter().take(MAX_SHOWN_LINES) {
            write!(f, "\n      | {line}")?;
        }
        if lines.len() > MAX_SHOWN_LINES {
            write!(
                f,
                "\n      … and {} more lines",
                lines.len() - MAX_SHOWN_LINES
            )?;
        }
        if i + 1 < sections.len() {
            writeln!(f)?;
        }
    }
    Ok(())
}

impl RevertConflicts {
    /// The report as a dry run gives it: the revert it previews would be refused.
    pub fn as_dry_run(&self) -> impl fmt::Display + '_ {
        Refusal {
            conflicts: self,
            refused: "would be refused",
        }
    }
}

impl fmt::Display for RevertConflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Refusal {
            conflicts: self,
            refused: "refused",
        }
        .fmt(f)
    }
}

/// [`RevertConflicts`] as a person reads it, saying that the revert was `refused`, or that
/// it would be.
struct Refusal<'a> {
    conflicts: &'a RevertConflicts,
    refused: &'static str,
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Refusal { conflicts, refused } = self;
        let count = conflicts.conflicts.len();
        let paths = if count == 1 { "path" } else { "paths" };
        writeln!(
            f,
            "revert of turn {} {:?} {refused}: {count} {paths} changed since the turn in ways it cannot be taken out of; nothing was changed",
            conflicts.turn, conflicts.summary
        )?;
        for conflict in &conflicts.conflicts {
            // Indent every line of the conflict's text.
            for line in conflict.to_string().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        f.write_str(
            "only the content of text files is merged, line by line; anything else must be as the turn left it. Change those paths by hand, or undo what changed them, and revert again",
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::revert::merge::{Merged, merge};

    fn hunks(base: &str, ours: &str, theirs: &str) -> Vec<ConflictHunk> {
        match merge(base.as_bytes(), ours.as_bytes(), theirs.as_bytes()) {
            Merged::Conflicts(hunks) => hunks,
            Merged::Clean(_) => panic!("merged"),
        }
    }

    fn report(conflicts: Vec<(&str, Vec<ConflictHunk>)>) -> String {
        RevertConflicts {
            turn: TurnId(7),
            summary: "fix the parser".to_owned(),
            conflicts: (conflicts.into_iter())
                .map(|(path, hunks)| RevertConflict {
                    path: WorkspacePath::from_relative(path).unwrap(),
                    kind: RevertConflictKind::Overlapping { hunks },
                })
                .collect(),
        }
        .to_string()
    }

    /// A dry run lists what a revert would be refused on as the revert does, saying that it
    /// would be.
    #[test]
    fn a_dry_run_says_the_revert_would_be_refused() {
        let conflicts = RevertConflicts {
            turn: TurnId(7),
            summary: "fix the parser".to_owned(),
            conflicts: vec![RevertConflict {
                path: WorkspacePath::from_relative("a.txt").unwrap(),
                kind: RevertConflictKind::Overlapping {
                    hunks: hunks("1\n2\n", "1\nTWO!\n", "1\nTWO\n"),
                },
            }],
        };
        let dry = conflicts.as_dry_run().to_string();
        assert_eq!(
            dry.replacen("would be refused", "refused", 1),
            conflicts.to_string()
        );
        insta::assert_snapshot!(dry.lines().next().unwrap(), @r#"revert of turn #7 "fix the parser" would be refused: 1 path changed since the turn in ways it cannot be taken out of; nothing was changed"#);
    }

    /// Conflicting regions as a person reads them: numbered in the current file, CRLF lines
    /// shown without their endings, an empty side said so, long sides cut short.
    #[test]
    fn conflicting_regions_read_well() {
        let crlf = hunks(
            "a\r\nB\r\nc\r\nD\r\ne\r\n",
            "a\r\nB2\r\nc\r\nD2\r\ne\r\n",
            "a\r\nb\r\nc\r\nd\r\ne\r\n",
        );
        let deleted = hunks("1\n2\n3\n", "1\n3\n", "1\ntwo\n3\n");
        let inserted = hunks("x\n", "x\nmine\n", "x\ntheirs\n");
        let long_now: String = (0..10).map(|i| format!("line {i}\n")).collect();
        let long = hunks(
            "head\nold\ntail\n",
            &format!("head\n{long_now}tail\n"),
            "head\nolder\ntail\n",
        );
        insta::assert_snapshot!(report(vec![
            ("crlf.txt", crlf),
            ("deleted.txt", deleted),
            ("inserted.txt", inserted),
            ("long.txt", long),
        ]), @r#"
        revert of turn #7 "fix the parser" refused: 4 paths changed since the turn in ways it cannot be taken out of; nothing was changed
          crlf.txt, line 2: changed by the turn, and since
              before the turn:
                | b
              the turn made it:
                | B
              now:
                | B2
          crlf.txt, line 4: changed by the turn, and since
              before the turn:
                | d
              the turn made it:
                | D
              now:
                | D2
          deleted.txt, before line 2: changed by the turn, and since
              before the turn:
                | two
              the turn made it:
                | 2
              now: (no lines)
          inserted.txt, line 2: changed by the turn, and since
              before the turn:
                | theirs
              the turn made it: (no lines)
              now:
                | mine
          long.txt, lines 2-11: changed by the turn, and since
              before the turn:
                | older
              the turn made it:
                | old
              now:
                | line 0
                | line 1
                | line 2
                | line 3
                | line 4
                | line 5
                … and 4 more lines
        only the content of text files is merged, line by line; anything else must be as the turn left it. Change those paths by hand, or undo what changed them, and revert again
        "#);
    }
}
