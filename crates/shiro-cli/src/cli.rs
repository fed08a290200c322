//! The command line, as clap types. The contract is in `docs/cli.md`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// shiro: a coding agent whose every file change can be undone, byte for byte.
#[derive(Debug, Parser)]
#[command(
    name = "shiro",
    version,
    override_usage = "shiro [OPTIONS] [COMMAND]",
    about = "A coding agent whose every file change can be undone, byte for byte",
    after_help = "Examples:\n  shiro                         start an interactive session here\n  shiro -p \"rename foo to bar\"  run one headless turn\n  shiro undo --dry-run          show what undoing the last turn would change\n  shiro log                     list the turns that can be undone"
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// Options of the agent.
    #[command(flatten)]
    pub session: SessionArgs,

    /// A headless command; without one, shiro starts the agent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The workspace directory (default: the root of the git repository you are in, else the current directory)
    #[arg(short = 'C', long = "workspace", value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
}

/// Options of the agent (interactive or headless with -p).
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Run one headless turn with this prompt, print the answer, and exit
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// With -p: print one JSON event per line instead of text
    #[arg(long, requires = "prompt")]
    pub json: bool,

    /// The model to use (overrides SHIRO_MODEL and the config files; `anthropic:NAME` or `openai:NAME` picks the API, `replay:FILE` plays a script)
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,

    /// Approve every tool call without asking (deny rules still refuse theirs; with --read-only, read-only wins)
    #[arg(long)]
    pub yes: bool,

    /// Refuse every tool that changes files, and bash; reading and searching still work (with --yes, what read-only allows runs without asking: a headless review that neither prompts nor writes)
    #[arg(long)]
    pub read_only: bool,

    /// Permission rules whose calls run without asking, e.g. "Read, bash(git status:*)" (comma or space separated; repeatable)
    #[arg(long, alias = "allowedTools", value_name = "RULES")]
    pub allowed_tools: Vec<String>,

    /// Permission rules whose calls are refused, e.g. "bash(rm:*) write_file(.env)" (comma or space separated; repeatable)
    #[arg(long, alias = "disallowedTools", value_name = "RULES")]
    pub disallowed_tools: Vec<String>,

    /// Reopen a saved session (without an ID: a picker on a terminal, else the latest)
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Reopen the latest saved session
    #[arg(long = "continue", conflicts_with = "resume")]
    pub continue_latest: bool,

    /// With --resume or --continue: go on in a new session that starts as a copy of that
    /// one's conversation, leaving the original as it is
    #[arg(long)]
    pub fork_session: bool,

    /// Use the plain line interface even on a terminal (as with pipes and TERM=dumb)
    #[arg(long)]
    pub no_tui: bool,

    /// The most model calls one turn may make before it stops (default 50)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
}

/// The headless commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one tool as its own recorded turn
    #[command(
        after_help = "Example:\n  shiro tool edit_file --args '{\"path\":\"src/main.rs\",\"old_string\":\"foo\",\"new_string\":\"bar\"}'\n  shiro tool write_file --args @args.json"
    )]
    Tool {
        /// The tool's name (write_file, edit_file, multi_edit, apply_patch, read_file, …)
        name: String,
        /// The arguments as JSON, or @FILE to read them from a file
        #[arg(long, value_name = "JSON")]
        args: String,
    },

    /// Apply a patch in Codex's format as one recorded turn
    #[command(
        after_help = "Example:\n  shiro apply-patch fix.patch\n  shiro apply-patch < fix.patch"
    )]
    ApplyPatch {
        /// The patch file (standard input when absent)
        file: Option<PathBuf>,
    },

    /// Undo the newest turn in this workspace
    #[command(
        after_help = "Exit codes: 0 undone; 1 nothing to undo or it failed; 3 refused because files changed since the turn; 4 it failed after changing files.\n\nExamples:\n  shiro undo --dry-run\n  shiro undo --force\n  shiro undo --to 7        rewind: turn #7 and its session's later turns, as one restore\n  shiro undo --turn 7      revert #7 alone, keeping the later turns"
    )]
    Undo(UndoArgs),

    /// Redo the turn undone last (until a new turn is recorded)
    #[command(after_help = "Example:\n  shiro redo")]
    Redo(RestoreArgs),

    /// List the turns that can be undone, newest first
    #[command(after_help = "Example:\n  shiro log --json")]
    Log {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },

    /// List, expand and check user slash commands
    #[command(
        subcommand,
        after_help = "Example:\n  shiro commands list\n  shiro commands expand review \"focus on errors\"\n  shiro commands check"
    )]
    Commands(CommandsCommand),

    /// Serve shiro's undoable file tools, with undo, redo and log, to an MCP client over stdio (or HTTP with --http)
    #[command(
        after_help = "An MCP client (Claude Code, Codex, OpenCode, Gemini CLI, Cursor) starts it; docs/mcp.md has each one's configuration. Every change a client makes is a turn in this workspace's undo log, which `shiro undo` and `shiro log` share.\n\nExample:\n  shiro mcp\n  shiro mcp --group-idle 30\n  SHIRO_MCP_TOKEN=\"$(openssl rand -hex 32)\" shiro mcp --http 127.0.0.1:8765"
    )]
    Mcp(McpArgs),

    /// Run the offline demo: a scripted agent edits, creates, moves and deletes files, then /undo puts everything back
    #[command(
        after_help = "Works offline in a temporary copy of a built-in workspace; no model or API key needed.\n\nExample:\n  shiro demo"
    )]
    Demo,
}

/// Options of `shiro mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Seconds without a call after which a group of calls opened with the begin_turn tool is closed as one turn
    #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub group_idle: u64,
    /// Serve over Streamable HTTP at this loopback address (127.0.0.1:PORT, port 0 picks one) instead of stdio; clients must send $SHIRO_MCP_TOKEN as a bearer token
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
}

/// The options of `shiro undo`.
#[derive(Debug, Args)]
pub struct UndoArgs {
    /// The options it shares with `shiro redo`.
    #[command(flatten)]
    pub restore: RestoreArgs,
    /// Rewind to before turn ID: undo it and every later turn of its session (of headless
    /// commands, for a command's turn) as one restore; another session's turns stay
    #[arg(long, value_name = "ID", value_parser = turn_number, conflicts_with = "abandon")]
    pub to: Option<u64>,
    /// Revert turn ID alone, as a new turn, keeping every later change (a text file changed
    /// since is merged); any conflict refuses it all (exit 3)
    #[arg(
        long,
        value_name = "ID",
        value_parser = turn_number,
        conflicts_with_all = ["abandon", "to", "force"]
    )]
    pub turn: Option<u64>,
}

/// The options of `shiro undo` and `shiro redo`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Show what would change, as a diff, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Overwrite files that changed since the turn
    #[arg(long)]
    pub force: bool,
    /// Clear an undo or redo that stopped part-way and can be neither completed nor rolled
    /// back, keeping every file exactly as it is
    #[arg(long, conflicts_with_all = ["dry_run", "force"])]
    pub abandon: bool,
}

/// `shiro commands …`
#[derive(Debug, Subcommand)]
pub enum CommandsCommand {
    /// List every command with its source (.shiro, .claude, .opencode, .gemini, user) and what it shadows
    #[command(after_help = "Example:\n  shiro commands list --json")]
    List {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print the prompt a command expands to
    #[command(
        after_help = "Example:\n  shiro commands expand review \"focus on errors\"\n  shiro commands expand --trust test"
    )]
    Expand {
        /// Run the command's shell substitutions even though the workspace is not trusted
        #[arg(long)]
        trust: bool,
        /// The command's name (with or without the leading /)
        name: String,
        /// The command's arguments, each one exactly as given (no re-splitting)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Report problems in the command files as file:line:col (exit 1 when there are errors)
    #[command(after_help = "Example:\n  shiro commands check")]
    Check,
}

impl From<&RestoreArgs> for shiro_agent::headless::RestoreArgs {
    fn from(args: &RestoreArgs) -> Self {
        Self {
            dry_run: args.dry_run,
            force: args.force,
            abandon: args.abandon,
            to: None,
            turn: None,
        }
    }
}

impl From<&UndoArgs> for shiro_agent::headless::RestoreArgs {
    fn from(args: &UndoArgs) -> Self {
        Self {
            to: args.to,
            turn: args.turn,
            ..(&args.restore).into()
        }
    }
}

/// A turn's number as `shiro log` shows it: `7` or `#7`.
fn turn_number(text: &str) -> Result<u64, String> {
    text.trim_start_matches('#')
        .parse()
        .map_err(|_| format!("{text:?} is not a turn number (`shiro log` lists them: #7, or 7)"))
}

impl From<&CommandsCommand> for shiro_agent::headless::CommandsCommand {
    fn from(command: &CommandsCommand) -> Self {
        match command {
            CommandsCommand::List { json } => Self::List { json: *json },
            CommandsCommand::Expand { trust, name, args } => Self::Expand {
                trust: *trust,
                name: name.clone(),
                args: args.clone(),
            },
            CommandsCommand::Check => Self::Check,
        }
    }
}
