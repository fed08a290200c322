//! shiro-commands: user-defined slash commands from `.shiro/commands.md`, and the command
//! files people already have for Claude Code, OpenCode and Gemini CLI.
//!
//! A user writes prompt templates as `## name` sections in `.shiro/commands.md` (or one file
//! per command in `.shiro/commands/`, `.claude/commands/`, `.opencode/commands/`, or as TOML
//! in `.gemini/commands/`, or the same under their own directories), and installs Agent
//! Skills: folders holding a `SKILL.md` in `.shiro/skills/`, `.agents/skills/`,
//! `.claude/skills/`, `.opencode/skills/` or `.gemini/skills/`. This crate parses them into
//! [`Command`]s (a skill is a command with [`Command::skill`] set) with [`Diagnostic`]s, merges
//! every source in a [`Registry`] (built-ins > `.shiro` > the other project folders > the
//! user's), resolves a typed `/name args` line and [`expand`]s the template: shell
//! substitutions first, then file references, then the arguments. It lists a skill's folder
//! and reads its files ([`Registry::skill_files`]) for the agent's `skill` tool, and holds
//! back a project's skills until the caller says the workspace is trusted.
//!
//! Invariants:
//! - parsing never fails: it returns commands plus diagnostics with line numbers;
//! - expansion runs shell and file substitutions only through injected traits
//!   ([`ShellRunner`], [`FileReader`]) and scans only template text; typed arguments reach a
//!   shell only as its positional parameters and `ARGUMENTS` variable, never as command text;
//! - a project command's shell substitutions run only in a trusted workspace, and a
//!   project's skills are offered only there ([`Registry::offered_skills`]);
//! - directory walks follow links at most once per folder, and a project's files, folders
//!   and links stay in the project (a `commands.md` or a `.shiro` that links out is not read,
//!   nor watched);
//! - only regular files are opened, never a named pipe or a device, so no load blocks;
//! - it depends on no other shiro crate, never prints, reads the environment or the home
//!   directory, or exits (the caller passes the directories in).
//!
//! ```
//! use shiro_commands::{Args, ExpandContext, FileOutcome, FileReader, Origin, Resolved,
//!     Registry, ShellCall, ShellOutcome, ShellRunner, Sources, expand};
//!
//! struct Echo;
//! #[async_trait::async_trait]
//! impl ShellRunner for Echo {
//!     async fn run(&self, call: &ShellCall<'_>) -> ShellOutcome {
//!         let stdout = format!("<{}> with {:?}\n", call.command, call.args);
//!         ShellOutcome::Success { stdout, truncated: false }
//!     }
//! }
//! struct NoFiles;
//! #[async_trait::async_trait]
//! impl FileReader for NoFiles {
//!     async fn read(&self, _path: &str) -> FileOutcome { FileOutcome::Missing }
//! }
//!
//! let root = tempfile::tempdir()?;
//! std::fs::create_dir_all(root.path().join(".claude/commands"))?;
//! std::fs::write(
//!     root.path().join(".claude/commands/review.md"),
//!     "---\ndescription: Review a file\nallowed-tools: Read, Grep\n---\n\
//!      Review $1. Log: !`git log -1 \"$1\"`\n",
//! )?;
//! let registry = Registry::load(Sources {
//!     workspace_root: root.path().to_path_buf(),
//!     builtins: vec![("help".into(), "Show help".into())],
//!     ..Sources::default()
//! });
//! assert!(registry.diagnostics().is_empty());
//!
//! let Resolved::User { command, args } = registry.resolve("/review src/main.rs") else {
//!     panic!("expected a user command");
//! };
//! assert_eq!(command.origin, Origin::Project);
//! assert!(command.allowed_tools.as_ref().is_some_and(|a| !a.allows("write_file")));
//! let ctx = ExpandContext { shell: &Echo, files: &NoFiles, workspace_trusted: true };
//! let prompt = tokio::runtime::Builder::new_current_thread()
//!     .build()?
//!     .block_on(expand(&command, &Args::parse(&args), &ctx));
//! // The typed path reaches the shell as `$1`, never inside the command text.
//! assert_eq!(
//!     prompt,
//!     "Review src/main.rs. Log: <git log -1 \"$1\"> with [\"src/main.rs\"]"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

mod allowed;
mod disguise;
mod expand;
mod frontmatter;
mod fs_reader;
mod load;
mod narrow;
mod parse;
mod programs;
mod registry;
mod regular_file;
mod sh;
mod skill_files;
mod template;
mod walk;
mod watch;

pub use allowed::{
    AllowedTools, BashRule, BashVerdict, McpTools, Rule, RuleError, RuleSpec, every_command,
    mcp_tool_name, some_command, split_mcp_name, tool, tools_for,
};
pub use expand::{
    Args, ExpandContext, ExpandNote, FileOutcome, FileReader, NOT_TRUSTED_NOTE, ShellCall,
    ShellOutcome, ShellRunner, expand, expand_notes, file_references, looks_like_a_path,
    split_args,
};
pub use fs_reader::FsReader;
pub use load::load_source;
pub use narrow::narrowest_bash_rules;
pub use parse::{
    Command, Diagnostic, Ecosystem, Kind, Origin, Parsed, SKILL_FILE, Severity, SkillInfo,
    parse_command_file, parse_commands_md, parse_gemini_file, parse_skill_file,
};
pub use registry::{
    CheckSummary, Ecosystems, Location, LocationKind, MenuEntry, Registry, Resolved, Shadowed,
    Sources, source_label,
};
pub use sh::ShRunner;
pub use skill_files::{
    MAX_FILE_BYTES as MAX_SKILL_FILE_BYTES, SkillFile, SkillFileError, SkillFiles,
};
pub use watch::{WatchError, WatchHandle};
