//! The errors of the undo store, each naming what it concerns.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use shiro_tools::{MutatorError, WorkspacePath};

use crate::report::{ConflictReport, TurnId};

/// Why an undo store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The log holds no turn to undo.
    #[error("nothing to undo in this workspace")]
    NothingToUndo,
    /// No undone turn is waiting to be redone.
    #[error("nothing to redo: no turn has been undone since the last turn was recorded")]
    NothingToRedo,
    /// Paths the turn touched changed since; nothing was changed (the CLI exits 3).
    #[error("{0}")]
    Conflict(ConflictReport),
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
    /// A file operation on the workspace failed before anything was restored.
    #[error(transparent)]
    Mutator(#[from] MutatorError),
    /// A restore failed part-way; its `begin` record stays in the log, so it is completed on
    /// the next open.
    #[error(
        "restoring turn {turn} stopped: {source}; the restore will be completed the next time the undo store is opened"
    )]
    RestoreInterrupted {
        /// The turn being restored.
        turn: TurnId,
        /// What failed.
        #[source]
        source: Box<UndoError>,
    },
}

impl UndoError {
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        UndoError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
