//! What a tool changed: one [`Change`] a path. The capture of bash's changes reports them
//! too, so the type sits below both the tools and the capture.

use std::fmt;

use serde::Serialize;

use crate::path::WorkspacePath;

/// One change a tool made to the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A file was created.
    Added {
        /// The new file.
        path: WorkspacePath,
    },
    /// A file's bytes (or mode) changed.
    Modified {
        /// The changed file.
        path: WorkspacePath,
    },
    /// A file was deleted.
    Deleted {
        /// The deleted file.
        path: WorkspacePath,
    },
    /// A file was moved (and possibly changed).
    Moved {
        /// Where it was.
        from: WorkspacePath,
        /// Where it is now.
        to: WorkspacePath,
    },
}

impl Change {
    /// The paths it touched: one, or both ends of a move.
    pub fn paths(&self) -> Vec<&WorkspacePath> {
        match self {
            Change::Added { path } | Change::Modified { path } | Change::Deleted { path } => {
                vec![path]
            }
            Change::Moved { from, to } => vec![from, to],
        }
    }
}

impl fmt::Display for Change {
    /// The one-line summary: `A path`, `M path`, `D path`, `R old -> new`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added { path } => write!(f, "A {path}"),
            Change::Modified { path } => write!(f, "M {path}"),
            Change::Deleted { path } => write!(f, "D {path}"),
            Change::Moved { from, to } => write!(f, "R {from} -> {to}"),
        }
    }
}
