//! The errors of the undo store, each naming what it concerns.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use shiro_tools::{MutatorError, WorkspacePath};

use crate::report::{ConflictReport, Direction, TurnId, restore_name};
use crate::revert::report::RevertConflicts;

fn direction_verb(direction: Direction) -> &'static str {
    match direction {
        Direction::Undo => "undo",
        Direction::Redo => "redo",
    }
}

/// Why an undo store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The log holds no turn to undo.
    #[error("nothing to undo in this workspace")]
    NothingToUndo,
    /// No undone turn is waiting to be redone.
    #[error("nothing to redo: no turn has been undone since the last turn was recorded")]
    NothingToRedo,
    /// A rewind to a turn that is not among the turns that can be undone.
    #[error(
        "no turn {id} to rewind to: it is not among the turns that can be undone (`shiro log` lists them)"
    )]
    NoSuchTurn {
        /// The turn asked for.
        id: TurnId,
    },
    /// The turn asked to be redone is not among the undone turns.
    #[error(
        "turn {id} cannot be redone: it is not among the undone turns (it was redone already, or it left the log)"
    )]
    NotUndone {
        /// The turn asked for.
        id: TurnId,
    },
    /// Paths the turn touched changed since; nothing was changed (the CLI exits 3).
    #[error("{0}")]
    Conflict(ConflictReport),
    /// A revert that cannot take the turn's change out of the workspace as it is now (the
    /// same lines changed since, a binary file changed since, ...); nothing was changed
    /// (the CLI exits 3).
    #[error("{0}")]
    RevertConflict(RevertConflicts),
    /// A revert of a turn that is not among the turns that can be undone.
    #[error("{}", no_turn_to_revert(*id, *undone))]
    NoTurnToRevert {
        /// The turn asked for.
        id: TurnId,
        /// Whether it is on the redo stack (it was undone).
        undone: bool,
    },
    /// A revert that would change nothing: every path of the turn is as it was before it,
    /// or was changed since into what the revert would make of it.
    #[error("{}", nothing_to_revert(*id, *undone))]
    NothingToRevert {
        /// The turn asked for.
        id: TurnId,
        /// Whether every path of the turn is as it was before it (else changes made since
        /// hold what the revert would make of some).
        undone: bool,
    },
    /// Another process held the store's lock for longer than the wait allowed.
    #[error(
        "another shiro process is using the undo store; gave up after waiting {:.1}s for the lock {}",
        waited.as_secs_f64(),
        lock.display()
    )]
    Locked {
        /// The lock file.
        lock: PathBuf,
        /// How long this process waited.
        waited: Duration,
    },
    /// `begin_turn` was called while a turn was being recorded.
    #[error("a turn is already being recorded; finish it before beginning another")]
    TurnInProgress,
    /// The store was written by a newer shiro; it is left untouched.
    #[error(
        "the undo store file {} has format version {found}, but this shiro understands only version {supported}; it was left untouched",
        path.display()
    )]
    UnsupportedVersion {
        /// The file with the unknown version.
        path: PathBuf,
        /// The version it declares.
        found: u32,
        /// The version this build writes.
        supported: u32,
    },
    /// The stored copy needed to restore a path is missing or damaged.
    #[error("cannot restore {path}: its stored copy (blob {hash}) is {reason}")]
    Blob {
        /// The path that cannot be restored.
        path: WorkspacePath,
        /// The blob's hash, in hex.
        hash: String,
        /// `missing`, or what is wrong with it.
        reason: String,
    },
    /// A turn's record in the log whose paths (or changes) cannot be read, though its line's
    /// checksum matched (written by another build, or by hand): the turn cannot be restored,
    /// and its record is kept as it is.
    #[error("the undo log's record of turn {id} cannot be used: {reason}")]
    UnreadableTurn {
        /// The turn.
        id: TurnId,
        /// What is wrong with them.
        reason: String,
    },
    /// Reading or writing the store itself failed.
    #[error("could not {op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The store file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The store's directory, or a file of its own, is not what the store made: a link, a
    /// file of someone else's, something that is not a directory. Nothing was read or
    /// written through it.
    #[error("refusing to use the undo store at {}: {problem}", path.display())]
    UnsafeStore {
        /// The directory or file concerned.
        path: PathBuf,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A file operation on the workspace failed before anything was restored.
    #[error(transparent)]
    Mutator(#[from] MutatorError),
    /// A restore was refused before it changed anything, because a stored copy it needs is
    /// missing or damaged (see [`UndoError::Blob`]); the turn is marked in the log.
    #[error(
        "cannot {} turn {turn}: {source}; nothing was changed, and the turn stays in the log, marked as damaged (see `shiro log`)",
        direction_verb(*direction)
    )]
    Unrestorable {
        /// The turn.
        turn: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// What is wrong with its copies.
        #[source]
        source: Box<UndoError>,
    },
    /// A revert was refused before it changed anything, because a stored copy of the turn it
    /// reverts is missing or damaged (see [`UndoError::Blob`]); the turn is marked in the log.
    #[error(
        "cannot revert turn {turn}: {source}; nothing was changed, and the turn stays in the log, marked as damaged (see `shiro log`)"
    )]
    Unrevertible {
        /// The turn to revert.
        turn: TurnId,
        /// What is wrong with its copies.
        #[source]
        source: Box<UndoError>,
    },
    /// A restore that moves git's state, stopped before it changed anything because git's
    /// lock files are on things it moves (a git is running, or one that stopped left them;
    /// see [`ConflictKind::GitLocked`](crate::ConflictKind::GitLocked)). Even a forced one:
    /// it could not take the locks. The CLI exits 1.
    #[error(
        "cannot {} turn {turn}: {}; nothing was changed (run it again once git is done; if no git is running, one that stopped left the {} behind: remove {})",
        direction_verb(*direction),
        locked(locks),
        if locks.len() == 1 { "lock" } else { "locks" },
        if locks.len() == 1 { "it" } else { "them" }
    )]
    GitLocked {
        /// The turn.
        turn: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// The lock files, `.git/HEAD.lock` and the like.
        locks: Vec<WorkspacePath>,
    },
    /// A revert failed part-way and was rolled back: every path it changed is as it was
    /// before it, and no turn was recorded.
    #[error(
        "the revert of turn {turn} failed part-way ({source}); every file it had changed was put back as it was before the revert, and nothing was recorded"
    )]
    RevertRolledBack {
        /// The turn reverted.
        turn: TurnId,
        /// What failed.
        #[source]
        source: Box<UndoError>,
    },
    /// A restore failed part-way and was rolled back: every path it changed is as it was
    /// before it, and the turn stays where it was, marked in the log.
    #[error(
        "the {verb} of turn {turn} failed part-way ({source}); every file it had changed was put back as it was before the {verb}, and the turn can still be {verb}ne",
        verb = direction_verb(*direction)
    )]
    RolledBack {
        /// The turn.
        turn: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// What failed.
        #[source]
        source: Box<UndoError>,
    },
    /// A restore stopped part-way and could be neither completed nor rolled back (its record
    /// stays in the log; every operation retries it). [`crate::UndoStore::abandon`] clears it.
    #[error(
        "the {} stopped part-way and could be neither completed nor rolled back ({reason}); fix the cause and run again to retry, or run `shiro undo --abandon` to keep every file as it is now",
        restore_name(*direction, *turn, *reverting)
    )]
    RestoreStuck {
        /// The turn (for a revert, the new turn that the revert records).
        turn: TurnId,
        /// Which way the restore went.
        direction: Direction,
        /// For a revert, the turn it reverts.
        reverting: Option<TurnId>,
        /// What failed.
        reason: String,
    },
}

/// `.git/HEAD.lock exists: …`, naming every lock.
fn locked(locks: &[WorkspacePath]) -> String {
    let names: Vec<&str> = locks.iter().map(WorkspacePath::as_str).collect();
    let exist = if locks.len() == 1 { "exists" } else { "exist" };
    format!(
        "{} {exist}: another git process seems to be running in this repository",
        names.join(", ")
    )
}

fn no_turn_to_revert(id: TurnId, undone: bool) -> String {
    if undone {
        format!(
            "cannot revert turn {id}: it has been undone; redo it first (`shiro redo`), or leave it undone"
        )
    } else {
        format!(
            "no turn {id} to revert: it is not among the turns that can be undone (`shiro log` lists them)"
        )
    }
}

fn nothing_to_revert(id: TurnId, undone: bool) -> String {
    if undone {
        format!(
            "nothing to revert: the changes of turn {id} are undone already; nothing was changed"
        )
    } else {
        format!(
            "nothing to revert: the files turn {id} changed were changed since, and already hold what its revert would make of them; nothing was changed"
        )
    }
}

/// Whether an open failed because the last component of its path is a symbolic link (the
/// store opens with `O_NOFOLLOW`, which fails with `ELOOP` there).
fn is_link(err: &io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

impl UndoError {
    /// Reading or writing a store file failed. A link where a store file should be (the
    /// store opens its files without following links) is said to be one.
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        if is_link(&source) {
            return UndoError::UnsafeStore {
                path: path.to_path_buf(),
                problem: format!(
                    "it is a symbolic link, which the undo store never follows (it could lead outside the workspace); could not {op} it; remove the link and run again"
                ),
            };
        }
        UndoError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
