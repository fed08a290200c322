//! shiro-undo: the undo log and restore engine of shiro.
//!
//! It plugs into the tools as a [`shiro_tools::Mutator`] decorator, [`Recording`], that
//! captures the exact pre-image of every path before the first mutation of that path in a
//! turn, and restores turns through an injected `Mutator`. The log lives in the workspace's
//! [`StateDir`], out of the workspace's tree, so that nothing run in the tree can reach it
//! ([`UndoStore`]); its format is described in `docs/formats.md`.
//!
//! Invariants:
//! - a pre-image is durable on disk before the mutation it protects happens;
//! - a restore never overwrites a change made after the turn unless the caller forces it;
//! - the cost of recording and of restoring grows with what a turn changed, never with the
//!   size of the workspace: nothing here walks the workspace;
//! - a crash at any point loses nothing: an interrupted turn is recovered as an undoable turn
//!   and an interrupted restore is completed (or, if a path changed meanwhile, rolled back
//!   around it), both on the next open;
//! - a restore reads back every stored copy it writes before it changes anything, and a
//!   restore that cannot complete is rolled back: it never stops half-way on its own;
//! - the store never follows a link: its directories must be real directories of the user's,
//!   and its files are opened with `O_NOFOLLOW`;
//! - it never prints, reads the environment or exits the process (notices are returned);
//! - it depends on shiro-tools only, and only for the `Mutator` seam (and its helper that
//!   flushes many files at once).
//!
//! ```
//! use shiro_tools::{MemMutator, Mutator, WorkspacePath};
//! use shiro_undo::{StateDir, StoreOptions, TurnStart, UndoOptions, UndoStore};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let home = tempfile::tempdir().unwrap(); // the user's state home, out of the workspace
//! let state = StateDir::of_workspace(home.path(), std::path::Path::new("/work/notes"));
//! let workspace = MemMutator::new();
//! let path = WorkspacePath::from_relative("notes.txt").unwrap();
//! workspace.write(&path, b"before\n", None).await.unwrap();
//!
//! let store = UndoStore::open_with(&state, &workspace, StoreOptions::default()).await.unwrap();
//! let recording = store.recorder(workspace.clone());
//! recording.begin_turn(TurnStart { summary: "rewrite notes".into(), history_marker: 4, session: None }).await.unwrap();
//! recording.write(&path, b"after\n", None).await.unwrap(); // what a tool would do
//! recording.finish_turn().await.unwrap();
//!
//! let outcome = store.undo(&workspace, UndoOptions::default()).await.unwrap();
//! assert_eq!(outcome.turn.history_marker, 4);
//! assert_eq!(workspace.read(&path).await.unwrap(), b"before\n");
//!
//! store.redo(&workspace, UndoOptions::default()).await.unwrap();
//! assert_eq!(workspace.read(&path).await.unwrap(), b"after\n");
//! # });
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

mod blob;
mod codec;
mod deferred;
mod delta;
mod error;
mod file_hash;
mod flight;
mod format;
#[cfg(test)]
mod gc_tests;
mod git;
mod ground;
mod image;
mod lock;
mod log;
mod pack;
mod place;
mod recorder;
mod report;
mod restore;
mod revert;
mod store;

pub use error::UndoError;
pub use format::{BashCapture, FORMAT_VERSION};
pub use ground::no_follow_options;
pub use image::{ContentHash, Image};
pub use place::{MoveBy, StateDir, migrate_legacy, migrate_legacy_by};
pub use recorder::{Recording, TurnStart};
pub use report::{
    Action, Conflict, ConflictKind, ConflictReport, Direction, Notice, PathOutcome, TurnId,
    TurnSummary, UndoOutcome,
};
pub use revert::merge::ConflictHunk;
pub use revert::report::{
    RevertConflict, RevertConflictKind, RevertConflicts, RevertOutcome, RevertPath,
};
pub use store::{Abandoned, Copies, PathStanding, StoreOptions, UndoOptions, UndoStore};

/// The largest file whose bytes a dry run reads to show its change as a diff. Past it, a
/// preview shows the file's lengths, not its bytes: a diff of such a file is no use to read,
/// and reading both versions whole would cost memory in proportion to the file (a restore
/// itself streams big files; see `docs/undo.md`, "Big files").
pub const PREVIEW_MAX_BYTES: u64 = 8 << 20;
