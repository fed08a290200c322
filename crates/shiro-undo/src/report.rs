//! What the store tells its caller: turn summaries, outcomes, conflicts and notices. Every
//! type meant for people has a `Display` that the CLI prints as is.

use std::fmt;
use std::path::PathBuf;

use shiro_tools::{Change, WorkspacePath};

use crate::image::Image;

/// A turn's number in this workspace's log; numbers only grow.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct TurnId(pub u64);

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Which way a restore goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Back to the state before the turn.
    Undo,
    /// Forward again to the state the turn left.
    Redo,
}

impl Direction {
    /// The other way.
    pub fn opposite(self) -> Direction {
        match self {
            Direction::Undo => Direction::Redo,
            Direction::Redo => Direction::Undo,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Direction::Undo => "undo",
            Direction::Redo => "redo",
        }
    }
}

/// One recorded turn, as `shiro log` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TurnSummary {
    /// The turn's number.
    pub id: TurnId,
    /// When it began, in seconds since the Unix epoch.
    pub time: u64,
    /// The text given when it began (usually the user's prompt).
    pub summary: String,
    /// The session that made it; `None` for a headless command.
    pub session: Option<String>,
    /// The caller's history marker at the start of the turn (e.g. the message count).
    pub history_marker: u64,
    /// The tools it used, in first-use order.
    pub tools: Vec<String>,
    /// What it changed: the changes its tools reported, or, when none were reported (a
    /// turn recovered after a crash), the changes read from its recorded paths.
    pub changes: Vec<Change>,
    /// Whether it ran `bash`. What `bash` changed in the workspace is undone with the turn,
    /// except when [`Self::bash_uncaptured`], and the paths of [`Self::bash_unrestorable`].
    pub ran_bash: bool,
    /// Whether a `bash` call ran with capture off: what it did is not recorded, nor undone.
    pub bash_uncaptured: bool,
    /// The paths `bash` changed that cannot be restored (it ran with capture `detect`),
    /// sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bash_unrestorable: Vec<WorkspacePath>,
    /// The paths it changed that someone else changed after it (or while its process was
    /// stopped): kept as they are; undo and redo leave them alone. Sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_since: Vec<WorkspacePath>,
    /// Whether it was recovered after its process stopped mid-turn.
    pub recovered: bool,
    /// Why its last restore could not be made (a damaged stored copy, a restore rolled back
    /// or abandoned, or one under way); `None` when nothing is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
    /// What its `bash` calls moved in the git repository, in one line (`HEAD main →
    /// feature; refs/heads/feature created at 1a2b3c4`), undone with the turn; `None` when
    /// nothing moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
}

impl TurnSummary {
    /// The tools it used from outside shiro: an agent's MCP tools, which it names
    /// `server__tool` (shiro's own tools never hold `__`). What they changed is not
    /// recorded, so undo and redo do not touch it.
    pub fn outside_tools(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|tool| tool.contains("__"))
            .map(String::as_str)
            .collect()
    }
}

impl fmt::Display for TurnSummary {
    /// `#3 "fix the parser" (session s1): M src/a.rs, A src/b.rs`, plus the bash notes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.id, self.summary)?;
        if let Some(session) = &self.session {
            write!(f, " (session {session})")?;
        }
        if self.recovered {
            f.write_str(" [recovered after a crash]")?;
        }
        let changes: Vec<String> = self.changes.iter().map(ToString::to_string).collect();
        // A turn whose only change bash made, unrestorable, lists none.
        if !changes.is_empty() {
            write!(f, ": {}", changes.join(", "))?;
        }
        if self.bash_uncaptured {
            f.write_str(" (ran bash without capture: its effects are not recorded)")?;
        }
        let outside = self.outside_tools();
        if !outside.is_empty() {
            write!(
                f,
                " (called MCP tools {}: their effects are not recorded)",
                outside.join(", ")
            )?;
        }
        if !self.bash_unrestorable.is_empty() {
            write!(
                f,
                " (bash changed {} that cannot be restored: {})",
                files(self.bash_unrestorable.len()),
                named(&self.bash_unrestorable, MAX_NAMED_IN_LINE)
            )?;
        } else if self.ran_bash && !self.bash_uncaptured {
            f.write_str(" (ran bash)")?;
        }
        if !self.changed_since.is_empty() {
            write!(
                f,
                " (kept {} as changed after it: {})",
                files(self.changed_since.len()),
                named(&self.changed_since, MAX_NAMED_IN_LINE)
            )?;
        }
        if let Some(damage) = &self.damage {
            write!(f, " [damaged: {damage}]")?;
        }
        Ok(())
    }
}

/// What a restore does, or would do, to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Already as it should become.
    Unchanged,
    /// A file's bytes or mode are put back.
    Restore,
    /// Something absent is created again (a file, link or directory).
    Recreate,
    /// Something is removed (a file, link or an empty directory).
    Remove,
    /// One kind of entry is replaced by another (a file by a directory, or the reverse).
    Replace,
    /// Only the mode changes.
    SetMode,
    /// A directory the turn created was kept because it holds entries the turn did not make.
    KeptNotEmpty,
    /// Left as it is: a forced restore found a directory with others' entries in the way.
    Skipped,
}

impl Action {
    /// The verb for reports (past tense when done).
    pub fn describe(self, done: bool) -> &'static str {
        match (self, done) {
            (Action::Unchanged, _) => "unchanged",
            (Action::Restore, true) => "restored",
            (Action::Restore, false) => "restore",
            (Action::Recreate, true) => "recreated",
            (Action::Recreate, false) => "recreate",
            (Action::Remove, true) => "removed",
            (Action::Remove, false) => "remove",
            (Action::Replace, true) => "replaced",
            (Action::Replace, false) => "replace",
            (Action::SetMode, true) => "mode set",
            (Action::SetMode, false) => "set mode",
            (Action::KeptNotEmpty, _) => "kept (not empty)",
            (Action::Skipped, _) => "skipped",
        }
    }

    /// The action that turns `now` into `becomes`.
    pub(crate) fn between(now: &Image, becomes: &Image) -> Action {
        match (now, becomes) {
            (now, becomes) if now == becomes => Action::Unchanged,
            (_, Image::Absent) => Action::Remove,
            (Image::Absent, _) => Action::Recreate,
            (
                Image::File { len, hash, .. },
                Image::File {
                    len: l2, hash: h2, ..
                },
            ) if len == l2 && hash == h2 => Action::SetMode,
            (Image::Dir { .. }, Image::Dir { .. }) => Action::SetMode,
            (Image::File { .. }, Image::File { .. }) => Action::Restore,
            (Image::Symlink { .. }, Image::Symlink { .. }) => Action::Restore,
            _ => Action::Replace,
        }
    }
}

/// One path of a restore or of its plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathOutcome {
    /// The path.
    pub path: WorkspacePath,
    /// What it was before the restore (now, for a dry run).
    pub now: Image,
    /// What the restore makes it. A file's bytes are in the store:
    /// [`UndoStore::blob`](crate::UndoStore::blob) with its hash.
    pub becomes: Image,
    /// What was done (or would be).
    pub action: Action,
}

/// The result of an undo or a redo, or the plan of a dry run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UndoOutcome {
    /// The turn concerned: for a rewind, the turn rewound to (the first it undoes).
    pub turn: TurnSummary,
    /// For a rewind (or the redo of one), the later turns it restored with `turn`, oldest
    /// first; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<TurnSummary>,
    /// Undo or redo.
    pub direction: Direction,
    /// Whether this is only a plan: nothing was changed.
    pub dry_run: bool,
    /// Changes made after the turn that a forced restore overwrote (or, in a dry run,
    /// that stand in the way, git's locks that would stop the restore last, as
    /// [`ConflictKind::GitLocked`]).
    pub conflicts: Vec<Conflict>,
    /// Every path the turn touched, sorted.
    pub paths: Vec<PathOutcome>,
    /// What it moves in the git repository, in the direction it moves it (`HEAD feature →
    /// main; refs/heads/feature deleted (was 1a2b3c4)`); `None` when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
}

impl fmt::Display for UndoOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match (self.direction, self.dry_run) {
            (Direction::Undo, false) => "undid",
            (Direction::Redo, false) => "redid",
            (Direction::Undo, true) => "would undo",
            (Direction::Redo, true) => "would redo",
        };
        write!(f, "{verb} turn {} {:?}", self.turn.id, self.turn.summary)?;
        if let Some(session) = &self.turn.session {
            write!(f, " of session {session}")?;
        }
        if !self.also.is_empty() {
            let ids: Vec<TurnId> = self.also.iter().map(|turn| turn.id).collect();
            write!(f, " {}", later_turns(&ids))?;
        }
        writeln!(f)?;
        let width = self
            .paths
            .iter()
            .map(|p| p.action.describe(!self.dry_run).len())
            .max()
            .unwrap_or(0);
        for path in &self.paths {
            let verb = path.action.describe(!self.dry_run);
            writeln!(f, "  {verb:<width$}  {}", path.path)?;
        }
        if let Some(git) = &self.git {
            writeln!(f, "  git: {git}")?;
        }
        let (locks, changed): (Vec<&Conflict>, Vec<&Conflict>) =
            (self.conflicts.iter()).partition(|conflict| conflict.kind == ConflictKind::GitLocked);
        if !changed.is_empty() {
            let since = match self.direction {
                Direction::Undo => "since the turn",
                Direction::Redo => "since the turn was undone",
            };
            if self.dry_run {
                let verb = self.direction.verb();
                writeln!(f, "changed {since} ({verb} refuses these unless forced):")?;
            } else {
                writeln!(f, "forced over changes made {since}:")?;
            }
            for conflict in changed {
                writeln!(f, "  {conflict}")?;
            }
        }
        if !locks.is_empty() {
            let verb = self.direction.verb();
            writeln!(
                f,
                "git's lock files on what it moves ({verb} stops on these, even forced):"
            )?;
            for lock in locks {
                writeln!(f, "  {lock}")?;
            }
        }
        let turns = || std::iter::once(&self.turn).chain(&self.also);
        let this = if self.also.is_empty() {
            "this turn"
        } else {
            "a turn of these"
        };
        if turns().any(|turn| turn.bash_uncaptured) {
            writeln!(
                f,
                "note: {this} ran bash without capture; effects of its commands are not undone or redone"
            )?;
        }
        let mut outside: Vec<&str> = turns().flat_map(TurnSummary::outside_tools).collect();
        outside.sort_unstable();
        outside.dedup();
        if !outside.is_empty() {
            writeln!(
                f,
                "note: {this} called MCP tools ({}); what they changed is not undone or redone",
                outside.join(", ")
            )?;
        }
        let mut unrestorable: Vec<WorkspacePath> = turns()
            .flat_map(|turn| turn.bash_unrestorable.iter().cloned())
            .collect();
        unrestorable.sort();
        unrestorable.dedup();
        if !unrestorable.is_empty() {
            let count = files(unrestorable.len());
            let head = format!("note: bash changed {count} that cannot be restored:");
            note_paths(f, &head, &unrestorable)?;
        }
        let mut since: Vec<WorkspacePath> = turns()
            .flat_map(|turn| turn.changed_since.iter().cloned())
            .collect();
        since.sort();
        since.dedup();
        if !since.is_empty() {
            let (count, verb) = (files(since.len()), self.direction.verb());
            let head = format!(
                "note: {verb} does not touch {count} changed (by you or another program) after {this} changed them:"
            );
            note_paths(f, &head, &since)?;
        }
        Ok(())
    }
}

/// A note's line, `head` then `paths`: on the line when they are few, else one per line.
fn note_paths(f: &mut fmt::Formatter<'_>, head: &str, paths: &[WorkspacePath]) -> fmt::Result {
    f.write_str(head)?;
    if paths.len() <= MAX_INLINE_IN_NOTE {
        writeln!(f, " {}", named(paths, MAX_INLINE_IN_NOTE))
    } else {
        writeln!(f)?;
        for path in paths {
            writeln!(f, "  {path}")?;
        }
        Ok(())
    }
}

/// A path that changed since the turn (or since its undo, for a redo), or that is otherwise
/// in a restore's way (see [`ConflictKind`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    /// The path.
    pub path: WorkspacePath,
    /// What is wrong.
    pub kind: ConflictKind,
}

/// How a path differs from what the restore expects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConflictKind {
    /// Its kind, mode or content is not what the turn left.
    Changed {
        /// What the turn (or the undo) left there.
        expected: Image,
        /// What is there now.
        found: Image,
    },
    /// A directory that must give way to a file or link holds entries the turn did not make.
    NotEmpty {
        /// Some of those entries.
        entries: Vec<WorkspacePath>,
    },
    /// Between two of the turns a rewind undoes, someone else changed the path: the later
    /// turn found it other than the earlier one left it.
    ChangedBetween {
        /// The turn that left it.
        left_by: TurnId,
        /// The next turn of the rewind to touch it, which found it changed.
        found_by: TurnId,
    },
    /// A later turn that the rewind does not undo (another session's, or a headless
    /// command's) touched the path. Refused even when forced: undoing the path would undo
    /// that turn's change too.
    LaterTurn {
        /// That turn.
        id: TurnId,
        /// Its session; `None` for a headless command.
        session: Option<String>,
    },
    /// A thing of the git repository (HEAD, a ref, the stash list, the index; the path is
    /// `.git/<its name>`) is not where the turn (or the undo) left it: someone committed,
    /// checked out or staged since.
    Git {
        /// Its value as the turn left it (an object id, `ref: …`); `None`: absent. For the
        /// index, the hash of the stored bytes it should hold.
        expected: Option<String>,
        /// Its value now.
        found: Option<String>,
    },
    /// A lock file of git's (the path, `.git/HEAD.lock`, `.git/index.lock`, …) is on a thing
    /// the restore moves: a git is running in the repository, or one that stopped left it.
    /// The restore cannot take the lock, so it would fail: [`UndoStore::check`] names it,
    /// and a restore stops on it before it changes anything ([`UndoError::GitLocked`]), even
    /// when forced.
    ///
    /// [`UndoStore::check`]: crate::UndoStore::check
    /// [`UndoError::GitLocked`]: crate::UndoError::GitLocked
    GitLocked,
}

impl ConflictKind {
    /// Whether `--force` may overwrite it.
    pub fn forceable(&self) -> bool {
        !matches!(
            self,
            ConflictKind::LaterTurn { .. } | ConflictKind::GitLocked
        )
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ConflictKind::Changed { expected, found } => {
                write!(f, "{}: now {found}, expected {expected}", self.path)
            }
            ConflictKind::NotEmpty { entries } => {
                let entries: Vec<&str> = entries.iter().map(WorkspacePath::as_str).collect();
                write!(
                    f,
                    "{}: directory holds entries the turn did not create: {}",
                    self.path,
                    entries.join(", ")
                )
            }
            ConflictKind::ChangedBetween { left_by, found_by } => write!(
                f,
                "{}: changed by someone else between turns {left_by} and {found_by}",
                self.path
            ),
            ConflictKind::LaterTurn { id, session } => {
                write!(f, "{}: changed later by turn {id} of ", self.path)?;
                match session {
                    Some(session) => write!(f, "session {session}"),
                    None => f.write_str("a headless command"),
                }?;
                f.write_str(", which this rewind does not undo")
            }
            ConflictKind::Git { expected, found } => {
                let show = |value: &Option<String>| match value {
                    Some(value) => value.trim().lines().last().unwrap_or_default().to_owned(),
                    None => "absent".to_owned(),
                };
                write!(
                    f,
                    "{}: moved since the turn (git): now {}, expected {}",
                    self.path,
                    show(found),
                    show(expected)
                )
            }
            ConflictKind::GitLocked => write!(
                f,
                "{}: exists: another git process seems to be running in this repository",
                self.path
            ),
        }
    }
}

/// Why a restore was refused: the paths that changed since. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConflictReport {
    /// The turn that was to be restored.
    pub turn: TurnId,
    /// Its summary.
    pub summary: String,
    /// For a rewind (or the redo of one), the later turns it was to restore with `turn`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<TurnId>,
    /// Undo or redo.
    pub direction: Direction,
    /// The paths, sorted.
    pub conflicts: Vec<Conflict>,
}

impl ConflictReport {
    /// Whether `--force` would go over every conflict.
    pub fn forceable(&self) -> bool {
        self.conflicts.iter().all(|c| c.kind.forceable())
    }
}

/// ` and 2 later turns (#4, #6)`, without the leading space.
fn later_turns(ids: &[TurnId]) -> String {
    let named: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let turns = if ids.len() == 1 { "turn" } else { "turns" };
    format!("and {} later {turns} ({})", ids.len(), named.join(", "))
}

impl fmt::Display for ConflictReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.conflicts.len();
        let paths = if count == 1 { "path" } else { "paths" };
        let since = match self.direction {
            Direction::Undo => "since the turn",
            Direction::Redo => "since the turn was undone",
        };
        write!(
            f,
            "{} of turn {} {:?}",
            self.direction.verb(),
            self.turn,
            self.summary
        )?;
        if !self.also.is_empty() {
            write!(f, " {}", later_turns(&self.also))?;
        }
        writeln!(
            f,
            " refused: {count} {paths} changed {since}; nothing was changed"
        )?;
        for conflict in &self.conflicts {
            writeln!(f, "  {conflict}")?;
        }
        if self.forceable() {
            write!(
                f,
                "to overwrite these changes, {} with --force; to see what it would do, use --dry-run",
                self.direction.verb()
            )
        } else {
            f.write_str(
                "a rewind never undoes the turns of another session or of a headless command: undo those first, or rewind to a later turn",
            )
        }
    }
}

/// Something the store did on its own that the user should hear about. The library never
/// prints: the caller takes these with [`UndoStore::take_notices`](crate::UndoStore::take_notices).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// A turn whose process stopped mid-turn was recovered as a finished, undoable turn.
    RecoveredTurn {
        /// The turn.
        id: TurnId,
        /// Its summary.
        summary: String,
        /// How many paths it changed (that undo restores).
        paths: usize,
        /// The paths `bash` changed that cannot be restored, sorted.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        unrestorable: Vec<WorkspacePath>,
        /// The paths whose pre-image was damaged before it could be stored (a disk error, a
        /// hand edit of the in-flight file): the turn cannot be undone, and the log marks it.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        lost: Vec<WorkspacePath>,
        /// The paths it changed that are no longer what it left (changed after the crash, or
        /// its last change of them was cut short): kept as they are, out of the turn. Sorted.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        changed_since: Vec<WorkspacePath>,
    },
    /// A turn interrupted before it changed anything was discarded.
    DiscardedEmptyTurn {
        /// The turn.
        id: TurnId,
    },
    /// An undo, redo or revert interrupted part-way was completed from its record in the log.
    CompletedRestore {
        /// The turn (for a revert, the new turn that it records).
        id: TurnId,
        /// Which way it went (a revert applies its new turn: `redo`).
        direction: Direction,
        /// For a revert, the turn it reverts.
        #[serde(skip_serializing_if = "Option::is_none")]
        reverting: Option<TurnId>,
    },
    /// A restore that could not be completed (a path changed while it was interrupted, a
    /// damaged copy, a full disk) was rolled back: every path it had changed is as the restore
    /// found it, except `left`, which changed meanwhile and were left as they are.
    RolledBackRestore {
        /// The turn (for a revert, the new turn it was to record, which is not recorded).
        id: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// For a revert, the turn it reverts.
        #[serde(skip_serializing_if = "Option::is_none")]
        reverting: Option<TurnId>,
        /// Why it could not be completed.
        reason: String,
        /// Paths left as found.
        left: Vec<WorkspacePath>,
    },
    /// A restore stopped part-way and could be neither completed nor rolled back; it stays
    /// in the log until it can, or until `shiro undo --abandon` clears it.
    StuckRestore {
        /// The turn (for a revert, the new turn it records).
        id: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// For a revert, the turn it reverts.
        #[serde(skip_serializing_if = "Option::is_none")]
        reverting: Option<TurnId>,
        /// What failed.
        reason: String,
    },
    /// A record of a store file failed its checksum or could not be read; it was not used.
    CorruptRecord {
        /// The store file, relative to the store directory.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A symbolic link was found where one of the store's own files goes (a checkout can
    /// hold anything) and removed; its target was not touched.
    RemovedLink {
        /// The link and its target: `.shiro/undo/inflight.jsonl -> /elsewhere`.
        link: String,
    },
    /// A bash command's changes, whose commit a crash cut short, were applied from the
    /// overlay layer it left, except on paths changed since; the interrupted turn's record
    /// holds their pre-images.
    FinishedBashCommit {
        /// How many steps were still to apply.
        steps: usize,
        /// How many of them were applied.
        applied: usize,
        /// The paths left unapplied, as they are, because they changed since the commit
        /// began (or nothing was saved of them): the turn leaves them out.
        kept: Vec<WorkspacePath>,
    },
    /// A bash command cut short before its changes counted (its process was killed while it
    /// ran) left an overlay layer; it was discarded, so the workspace has none of its changes.
    DiscardedBashLayer,
    /// A bash command's commit that a restart of the system interrupted was not finished:
    /// its layer may hold torn files. What it had applied is recorded with its turn.
    DiscardedBashCommit,
    /// The oldest turns were dropped to keep the store under its size cap.
    DroppedForSize {
        /// The turns dropped, oldest first.
        dropped: Vec<TurnId>,
        /// The store's blob bytes afterwards.
        store_bytes: u64,
        /// The cap.
        cap: u64,
    },
    /// The store, or the state directory holding it, was deleted (by hand: nothing shiro
    /// runs can reach it); a new, empty history begins.
    HistoryGone {
        /// Where the store was, and is again.
        dir: PathBuf,
    },
    /// A store or the sessions that an earlier version kept in the workspace's tree were
    /// moved to the state directory, out of reach of what runs in the tree.
    MovedState {
        /// Where they were (`<root>/.shiro/undo`).
        from: PathBuf,
        /// Where they are now.
        to: PathBuf,
    },
    /// An earlier version's store or sessions in the tree were left as they are, because
    /// the state directory already has its own.
    KeptLegacyState {
        /// The old directory, left untouched.
        path: PathBuf,
        /// The directory in use.
        store: PathBuf,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::RecoveredTurn {
                id,
                summary,
                paths,
                unrestorable,
                lost,
                changed_since,
            } => {
                write!(
                    f,
                    "recovered turn {id} {summary:?}, interrupted before it finished"
                )?;
                let changed = if *paths == 1 { "path" } else { "paths" };
                if !lost.is_empty() {
                    write!(
                        f,
                        "; it changed {paths} {changed}, but cannot be undone: what {} held before it is lost, its copy damaged before it could be stored (the log marks the turn)",
                        named(lost, MAX_NAMED_IN_LINE)
                    )?;
                } else if *paths > 0 {
                    write!(f, "; it changed {paths} {changed} and can be undone")?;
                }
                if !unrestorable.is_empty() {
                    write!(
                        f,
                        "; bash changed {} that cannot be restored: {}",
                        files(unrestorable.len()),
                        named(unrestorable, MAX_NAMED_IN_LINE)
                    )?;
                }
                if !changed_since.is_empty() {
                    write!(
                        f,
                        "; kept as they are, out of the turn, since they are not what it left (changed after it stopped, or its change was cut short): {}",
                        named(changed_since, MAX_NAMED_IN_LINE)
                    )?;
                }
                Ok(())
            }
            Notice::DiscardedEmptyTurn { id } => {
                write!(
                    f,
                    "turn {id} was interrupted before it changed anything; nothing to recover"
                )
            }
            Notice::CompletedRestore {
                id,
                direction,
                reverting: Some(reverted),
            } => write!(
                f,
                "completed the interrupted {}; the workspace is as after it",
                restore_name(*direction, *id, Some(*reverted))
            ),
            Notice::CompletedRestore {
                id,
                direction,
                reverting: None,
            } => write!(
                f,
                "completed the interrupted {} of turn {id}; the workspace is as it was {}",
                direction.verb(),
                match direction {
                    Direction::Undo => "before the turn",
                    Direction::Redo => "after the turn",
                }
            ),
            Notice::RolledBackRestore {
                id,
                direction,
                reverting,
                reason,
                left,
            } => {
                let verb = if reverting.is_some() {
                    "revert"
                } else {
                    direction.verb()
                };
                write!(
                    f,
                    "rolled back the {}: {reason}; every file it had changed is as it was before the {verb}",
                    restore_name(*direction, *id, *reverting)
                )?;
                if !left.is_empty() {
                    let paths: Vec<&str> = left.iter().map(WorkspacePath::as_str).collect();
                    write!(
                        f,
                        ", except what changed meanwhile, left exactly as found: {}",
                        paths.join(", ")
                    )?;
                }
                match reverting {
                    Some(reverted) => write!(
                        f,
                        "; nothing was recorded, and turn {reverted} can be reverted again"
                    ),
                    None => write!(f, "; turn {id} can still be {}ne", direction.verb()),
                }
            }
            Notice::StuckRestore {
                id,
                direction,
                reverting,
                reason,
            } => write!(
                f,
                "the {} stopped part-way and could be neither completed nor rolled back ({reason}); fix the cause and run any shiro command to retry, or run `shiro undo --abandon` to keep every file as it is now",
                restore_name(*direction, *id, *reverting)
            ),
            Notice::CorruptRecord { file, line, reason } => {
                write!(
                    f,
                    "ignored a damaged record in the undo store ({file}, line {line}: {reason})"
                )?;
                // The log's name (`format::LOG_FILE`, which this module cannot import
                // without a cycle); the `damaged_record` snapshot holds it to this.
                if file == "log.jsonl" {
                    f.write_str("; the rest of the log is intact")?;
                }
                Ok(())
            }
            Notice::RemovedLink { link } => write!(
                f,
                "removed a symbolic link from the undo store ({link}): the store never follows links, so its target was not touched; the store uses a file of its own there"
            ),
            Notice::FinishedBashCommit {
                steps,
                applied,
                kept,
            } => {
                let kept_text = format!(
                    "because {} not what {} when its changes began to be applied (changed since, or never saved): {}",
                    if kept.len() == 1 { "it is" } else { "they are" },
                    if kept.len() == 1 { "it was" } else { "they were" },
                    named(kept, MAX_NAMED_IN_LINE)
                );
                if *applied == 0 && !kept.is_empty() {
                    return write!(
                        f,
                        "did not apply the rest of the changes of a bash command that was interrupted while they were applied, and kept the workspace as it is, {kept_text}"
                    );
                }
                write!(
                    f,
                    "finished applying the changes of a bash command that was interrupted while they were applied ({steps} {} left); the turn that ran it can be undone",
                    if *steps == 1 { "step was" } else { "steps were" }
                )?;
                if !kept.is_empty() {
                    write!(
                        f,
                        "; kept as {} without the command's changes, {kept_text} (the turn leaves {}, so undoing it leaves {} too)",
                        if kept.len() == 1 { "it is," } else { "they are," },
                        if kept.len() == 1 { "it out" } else { "them out" },
                        if kept.len() == 1 { "it" } else { "them" },
                    )?;
                }
                Ok(())
            }
            Notice::DiscardedBashLayer => f.write_str(
                "discarded the changes of a bash command that was cut short before it ended; the workspace has none of them",
            ),
            Notice::DiscardedBashCommit => f.write_str(
                "did not finish applying the changes of a bash command that a restart of the system interrupted, as they may be torn; what it had applied is recorded with its turn and can be undone",
            ),
            Notice::DroppedForSize {
                dropped,
                store_bytes,
                cap,
            } => {
                let ids: Vec<String> = dropped.iter().map(ToString::to_string).collect();
                let (turns, they) = if dropped.len() == 1 {
                    ("turn", "it")
                } else {
                    ("turns", "they")
                };
                write!(
                    f,
                    "dropped the oldest {turns} {} from the undo log to keep its store under {} (now {}); {they} can no longer be undone",
                    ids.join(", "),
                    human_bytes(*cap),
                    human_bytes(*store_bytes)
                )
            }
            Notice::HistoryGone { dir } => write!(
                f,
                "the undo history in {} was deleted, so earlier turns can no longer be undone; a new history begins with the next turn",
                dir.display()
            ),
            Notice::MovedState { from, to } => write!(
                f,
                "moved {} to {}, where git clean, git stash and the agent's commands cannot reach it",
                from.display(),
                to.display()
            ),
            Notice::KeptLegacyState { path, store } => write!(
                f,
                "left {} as it is: this workspace already keeps its state in {}; remove the old one once you no longer need it",
                path.display(),
                store.display()
            ),
        }
    }
}

/// What a restore is, for messages: `undo of turn #7`, `redo of turn #7`, or, for a revert
/// (which applies the new turn `turn` it records), `revert of turn #3 (as turn #7)`.
pub(crate) fn restore_name(
    direction: Direction,
    turn: TurnId,
    reverting: Option<TurnId>,
) -> String {
    match reverting {
        Some(reverted) => format!("revert of turn {reverted} (as turn {turn})"),
        None => format!("{} of turn {turn}", direction.verb()),
    }
}

/// How many paths a one-line text names before it counts the rest.
pub(crate) const MAX_NAMED_IN_LINE: usize = 10;
/// How many paths a restore's note names on its own line; more get a line each.
const MAX_INLINE_IN_NOTE: usize = 3;

/// `1 file`, `2 files`.
fn files(count: usize) -> String {
    format!("{count} {}", if count == 1 { "file" } else { "files" })
}

/// `a, b, c`, or the first `max` of `paths` and `and 2 more`.
pub(crate) fn named(paths: &[WorkspacePath], max: usize) -> String {
    let shown: Vec<&str> = paths.iter().take(max).map(WorkspacePath::as_str).collect();
    let mut text = shown.join(", ");
    if paths.len() > max {
        text.push_str(&format!(" and {} more", paths.len() - max));
    }
    text
}

/// `1.0 GiB`, `512 KiB`, `17 bytes`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
