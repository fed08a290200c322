//! shiro-commands: user-defined slash commands from `.shiro/commands.md`.
//!
//! A user writes prompt templates as `## name` sections in `.shiro/commands.md` (or one file
//! per command in `.shiro/commands/`, or the same under their config directory). This crate
//! parses them into [`Command`]s with [`Diagnostic`]s, merges every source in a [`Registry`]
//! (built-ins > project > user), resolves a typed `/name args` line and [`expand`]s the
//! template: `` !`cmd` `` first, then `@path`, then `$ARGUMENTS` and `$1`…`$9`.
//!
//! Invariants:
//! - parsing never fails: it returns commands plus diagnostics with line numbers;
//! - expansion runs shell and file substitutions only through injected traits
//!   ([`ShellRunner`], [`FileReader`]), each step scans only template text, and typed
//!   arguments are substituted last so they can never inject shell code or file reads;
//! - a project command's shell substitutions run only in a trusted workspace;
//! - it depends on no other shiro crate, never prints, reads the environment or the home
//!   directory, or exits.
//!
//! ```
//! use shiro_commands::{ExpandContext, FileOutcome, FileReader, Origin, Resolved, Registry,
//!     ShellOutcome, ShellRunner, Sources, expand};
//!
//! struct Echo;
//! #[async_trait::async_trait]
//! impl ShellRunner for Echo {
//!     async fn run(&self, command: &str) -> ShellOutcome {
//!         ShellOutcome::Success { stdout: format!("<{command}>\n"), truncated: false }
//!     }
//! }
//! struct NoFiles;
//! #[async_trait::async_trait]
//! impl FileReader for NoFiles {
//!     async fn read(&self, _path: &str) -> FileOutcome { FileOutcome::Missing }
//! }
//!
//! let root = tempfile::tempdir()?;
//! std::fs::create_dir(root.path().join(".shiro"))?;
//! std::fs::write(
//!     root.path().join(".shiro/commands.md"),
//!     "## Review\n> Review a file\nReview $1 on branch !`git branch --show-current`.\n",
//! )?;
//! let registry = Registry::load(Sources {
//!     workspace_root: root.path().to_path_buf(),
//!     user_config_dir: None,
//!     builtins: vec![("help".into(), "Show help".into())],
//! });
//! assert!(registry.diagnostics().is_empty());
//!
//! let Resolved::User { command, args } = registry.resolve("/review src/main.rs") else {
//!     panic!("expected a user command");
//! };
//! assert_eq!(command.origin, Origin::Project);
//! let ctx = ExpandContext { shell: &Echo, files: &NoFiles, workspace_trusted: true };
//! let prompt = tokio::runtime::Builder::new_current_thread()
//!     .build()?
//!     .block_on(expand(&command, &args, &ctx));
//! assert_eq!(prompt, "Review src/main.rs on branch <git branch --show-current>.");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod expand;
mod fs_reader;
mod parse;
mod registry;
mod sh;
mod watch;

pub use expand::{
    ExpandContext, FileOutcome, FileReader, NOT_TRUSTED_NOTE, ShellOutcome, ShellRunner, expand,
    split_args,
};
pub use fs_reader::FsReader;
pub use parse::{
    Command, Diagnostic, Origin, Parsed, Severity, load_source, parse_command_file,
    parse_commands_md,
};
pub use registry::{MenuEntry, Registry, Resolved, Shadowed, Sources};
pub use sh::ShRunner;
pub use watch::{WatchError, WatchHandle};
