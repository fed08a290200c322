//! shiro-tools: the `Mutator` seam and the tools of the shiro coding agent.
//!
//! Every file access a tool makes goes through a [`Mutator`]: [`FsMutator`] for the real disk,
//! [`MemMutator`] for tests and dry runs. Paths are jailed to the workspace by
//! [`WorkspacePath`]. The file-changing tools are `write_file`, `edit_file`, `multi_edit` and
//! `apply_patch` (Codex's patch format).
//!
//! Invariants:
//! - shiro-tools never records undo state; it only calls its `Mutator`, which a recorder may wrap;
//! - a tool call changes every file it names or none of them;
//! - it never prints, reads the environment or exits the process.
//!
//! ```
//! use shiro_tools::{MemMutator, Mutator, Tool, WorkspacePath, tools};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let ws = MemMutator::new();
//! let write = tools::write_file();
//! let out = write
//!     .call(&ws, serde_json::json!({"path": "src/hello.txt", "content": "hi\n"}))
//!     .await
//!     .unwrap();
//! assert_eq!(out.changes[0].to_string(), "A src/hello.txt");
//! let path = WorkspacePath::from_relative("src/hello.txt").unwrap();
//! assert_eq!(ws.read(&path).await.unwrap(), b"hi\n");
//! # });
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

pub mod capture;
mod change;
pub mod git;
mod mutator;
mod output;
pub mod patch;
mod path;
mod split;
pub mod text;
mod tool;
pub mod tools;

pub use mutator::{
    AfterHook, DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, DirEntry, FsMutator, Hook, Hooked, Incoming,
    Looked, MemMutator, Mutation, Mutator, MutatorError, PARTIAL_WRITE_SUFFIX, Stamp, Stat,
    create_parent_dirs, is_partial_write_of, sync_data_all,
};
pub use path::{PathError, WorkspacePath};
pub use split::on_threads;
pub use tool::{Change, Tool, ToolError, ToolOutput, parse_args, schema_of};
