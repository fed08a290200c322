//! The headless commands: `tool`, `apply-patch`, `undo`, `redo`, `log`, `commands`.
//!
//! Each returns the text for stdout; errors go back to `main`, which prints them to stderr
//! and picks the exit code (see [`exit_code`]). This module holds what they share (the
//! [`Context`], the errors and the [`Report`]) and the commands that run a tool as a turn;
//! `restore`, `log` and `commands` the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, Result};
use shiro_tools::capture::{
    Auto, Background, BashRunner, CaptureMode, Detect, Direct, Launch, Overlay, Sandbox,
    SandboxMode,
};
use shiro_tools::tools::Bash;
use shiro_tools::{
    Change, FsMutator, Hooked, Mutator, Tool, ToolError, ToolOutput, WorkspacePath, tools,
};
use shiro_undo::{Recording, StateDir, StoreOptions, TurnId, TurnStart, UndoError, UndoStore};

use crate::config::{BashCapture, Config};
use crate::environment::Environment;
use crate::render::Color;
use crate::signals::{INTERRUPTED, Signals};

mod commands;
mod log;
mod restore;

pub use commands::{
    commands, describe_tools, registry, skill_marker, slash_names, turn_notes, untrusted_note,
};
pub use log::{format_time, log};
pub use restore::{Way, dry_run_diff, restore, revert_diff, revert_summary};

/// The names the agent handles itself; user commands can never take them.
pub const BUILTINS: [(&str, &str); 21] = [
    ("help", "list commands and keys"),
    (
        "undo",
        "undo the last turn: restore its files and rewind the conversation",
    ),
    (
        "redo",
        "bring back what /undo, /rewind or /fork took: files and conversation",
    ),
    (
        "rewind",
        "go back to before a turn of this session: files, conversation or both",
    ),
    (
        "fork",
        "go on in a new session from here, or from before turn N (/fork N)",
    ),
    ("log", "list the turns that can be undone"),
    ("commands", "list user commands"),
    ("clear", "start a new conversation (files are kept)"),
    ("cost", "tokens used by this session and its last turn"),
    (
        "status",
        "the model, workspace, session, undo depth and context used",
    ),
    (
        "resume",
        "list this workspace's saved sessions; /resume N switches to one",
    ),
    (
        "sessions",
        "list this workspace's saved sessions, forks under their parent",
    ),
    (
        "trust",
        "trust this workspace: run its commands' shell substitutions, offer its skills",
    ),
    (
        "bashes",
        "background commands; /bashes show ID prints one's output, /bashes kill ID stops it",
    ),
    ("exit", "leave shiro"),
    ("init", "draft AGENTS.md, instructions for agents"),
    ("compact", "summarise older turns to free context"),
    ("model", "show the model, or switch with /model NAME"),
    (
        "permissions",
        "the permission rules in effect, with their source, and the mode",
    ),
    (
        "mode",
        "show or set the permission mode: read-only, ask, auto-edit, yes",
    ),
    (
        "mcp",
        "the MCP servers and their state; /mcp NAME lists a server's tools",
    ),
];

/// What every command needs: where it works and how it prints.
#[derive(Debug)]
pub struct Context {
    /// The workspace root.
    pub root: PathBuf,
    /// Where the workspace's undo history, sessions and bash layers live: out of its tree.
    pub state: StateDir,
    /// The merged configuration.
    pub config: Config,
    /// Whether stdout gets colours.
    pub color: Color,
    /// The process's signal handling: a file-changing command checks it before it starts.
    pub signals: Signals,
    /// The `bash` tool as configured (see [`bash_tool`]); clones share its runner.
    pub bash: Bash,
    /// The process's environment, read once by `main`.
    pub env: Environment,
}

/// The `bash` tool as `[bash] capture` says: over an overlay whose helper is the binary at
/// `helper` (see [`overlay_helper`]), with its layers in `state`, every workspace's state
/// hidden from the command and the sandbox of `[bash] sandbox` (see [`sandbox`]), falling
/// back to detection where overlays are refused; detection only; or no capture. A signal
/// that asks the running work to stop stops its command, whose changes are then still
/// captured. `many`: the process runs many commands (an agent's session, a server), so
/// each command's helper is started ahead, as the one before finishes (see
/// [`Overlay::start_ahead`]).
pub fn bash_tool(
    config: &Config,
    env: &Environment,
    signals: &Signals,
    helper: &Path,
    state: &StateDir,
    many: bool,
) -> Bash {
    let overlay = || {
        let overlay = Overlay::new(helper, state.layers_dir()).hiding(state.home());
        if many { overlay.start_ahead() } else { overlay }
    };
    let sandbox = sandbox(config, env);
    let runner: Arc<dyn BashRunner> = match config.bash_capture {
        BashCapture::Overlay => Arc::new(Auto::new(overlay().sandbox(sandbox.clone()), Detect)),
        BashCapture::Detect => Arc::new(Detect),
        BashCapture::Off => Arc::new(Direct),
    };
    let mut bash = Bash::new(runner)
        .with_stop(signals.stops())
        .with_to_background(signals.backgrounds());
    // Background commands run through the same helper, on the real workspace (see
    // `shiro_tools::capture::Background`); with capture off, directly.
    let launch = match config.bash_capture {
        BashCapture::Overlay | BashCapture::Detect => Some(Launch::Helper {
            helper: helper.to_path_buf(),
            layers: state.layers_dir(),
            hidden: vec![state.layers_dir(), state.home().to_path_buf()],
            sandbox: sandbox.clone(),
        }),
        BashCapture::Off => Some(Launch::Direct),
    };
    if let Some(launch) = launch.filter(|_| config.bash_background_limit > 0) {
        let background = Background::new(launch, config.bash_background_limit);
        bash = bash.with_background(Arc::new(background));
    }
    // Read-only mode runs bash only in a read-only sandbox, with no fallback: where it
    // cannot be made, the command is refused.
    match (config.bash_capture, sandbox.mode) {
        (BashCapture::Overlay, mode) if mode != SandboxMode::Off => {
            let read_only = Sandbox {
                mode: SandboxMode::ReadOnly,
                ..sandbox
            };
            bash.with_read_only(Arc::new(overlay().sandbox(read_only)))
        }
        _ => bash,
    }
}

/// The sandbox `[bash]` asks for: its mode and network, the user's `writable` paths (`~/`
/// is the home directory), and by default the caches of the common package managers and
/// build tools (see [`Sandbox::default_caches`]) and `$TMPDIR`.
pub fn sandbox(config: &Config, env: &Environment) -> Sandbox {
    let settings = &config.bash_sandbox;
    let home = config.home_dir.as_deref();
    let cargo_home = env.get("CARGO_HOME").map(PathBuf::from);
    let written = settings
        .writable
        .iter()
        .filter_map(|path| match path.strip_prefix('~') {
            Some(rest) => home.map(|home| home.join(rest.trim_start_matches('/'))),
            None => Some(PathBuf::from(path)),
        });
    let tmpdir = env
        .get("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    Sandbox::new(settings.mode)
        .network(settings.network)
        .writable(Sandbox::default_caches(home, cargo_home.as_deref()))
        .writable(tmpdir)
        .writable(written.collect::<Vec<_>>())
}

impl Context {
    /// Every tool, `bash` as configured.
    pub fn tools(&self) -> Vec<Box<dyn Tool>> {
        tools::all_with(self.bash.clone())
    }

    /// The tool called `name`, if there is one.
    pub fn tool(&self, name: &str) -> Option<Box<dyn Tool>> {
        self.tools().into_iter().find(|tool| tool.name() == name)
    }

    /// Opens the workspace's undo store (recovering what a crash left behind) and returns
    /// it with the notices to show.
    pub async fn open_store(&self) -> Result<(UndoStore, Vec<String>)> {
        with_notices(UndoStore::open(&self.state, self.store_options()).await)
    }

    /// Like [`Context::open_store`], for a command that opens the store to do one thing and
    /// does it at once: the lock taken to open it is kept for that operation (see
    /// [`UndoStore::open_for_one`]), which then reads nothing more.
    pub async fn open_store_for_one(&self) -> Result<(UndoStore, Vec<String>)> {
        with_notices(UndoStore::open_for_one(&self.state, self.store_options()).await)
    }

    /// Whether the workspace may have an undo log: its state directory has the store, or
    /// bash layers that opening the store recovers after a crash, or had a store that was
    /// deleted (opening says so), or an earlier version's store is in the tree; opening the
    /// store then checks what they are and refuses a link. Without them there is nothing to
    /// undo, redo or list, and the commands that only read say so rather than make a store.
    pub fn has_store(&self) -> bool {
        let exists = |path: PathBuf| std::fs::symlink_metadata(path).is_ok();
        self.state.store_was_made()
            || exists(self.state.undo_dir())
            || exists(self.state.layers_dir())
            || exists(self.state.legacy_undo_dir())
            || exists(self.state.legacy_layers_dir())
    }

    /// The store's options, from the configuration.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            depth: self.config.undo_depth,
            max_store_bytes: self.config.max_store_bytes,
            ..StoreOptions::default()
        }
    }

    /// The real workspace. Its operations run inline (see [`FsMutator::inline`]): a command
    /// and a turn of the agent do one file operation at a time, and handing each to a thread
    /// pool was most of the cost of undoing many files.
    pub fn workspace(&self) -> Result<FsMutator> {
        FsMutator::new(&self.root)
            .map(FsMutator::inline)
            .with_context(|| format!("cannot use {} as the workspace", self.root.display()))
    }
}

/// The exit code of a command that failed after it had changed files (see
/// [`FailedAfterChanges`]).
pub const FAILED_AFTER_CHANGES: u8 = 4;

/// The exit code of a usage error (see [`UsageError`]), as clap exits with its own.
pub const USAGE: u8 = 2;

/// The exit code for an error: 2 for a usage error, 3 when undo, redo or a revert was refused
/// because files changed, 4 when the command failed after changing files, 130 when it was
/// interrupted before it began, and 1 for every other failure (nothing was changed).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(noticed) = err.downcast_ref::<Noticed>() {
        return exit_code(&noticed.error);
    }
    if err.downcast_ref::<UsageError>().is_some() {
        return USAGE;
    }
    if err.downcast_ref::<FailedAfterChanges>().is_some() {
        return FAILED_AFTER_CHANGES;
    }
    if err.downcast_ref::<InterruptedBeforeStart>().is_some() {
        return INTERRUPTED;
    }
    match err.downcast_ref::<UndoError>() {
        Some(UndoError::Conflict(_) | UndoError::RevertConflict(_)) => 3,
        _ => 1,
    }
}

/// The error and its causes joined by `: `, as `{:#}` prints them, except a cause whose text
/// is already there: an error that names its source in its own message (`MutatorError::Io`
/// says "write a.txt: Permission denied (os error 13)" and also gives that error as its
/// source) would otherwise show it twice.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// A command failed after it had changed files: exit code 1 ("nothing was changed") would
/// be false. The message says what was changed and how the undo log holds it; the error it
/// wraps says what failed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FailedAfterChanges {
    /// What was changed and where it is recorded.
    pub message: String,
    /// The command's normal output, when it has one (the tool's report of what it changed).
    pub stdout: String,
}

/// A command failed, and before it did the undo store said things the user should hear
/// (a recovery it ran on opening): `main` shows them, then the error. It reads as the error
/// it carries.
#[derive(Debug)]
pub struct Noticed {
    /// The store's notices, in order.
    pub notices: Vec<String>,
    /// What failed.
    pub error: anyhow::Error,
}

impl std::fmt::Display for Noticed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&error_text(&self.error))
    }
}

impl std::error::Error for Noticed {}

/// `error`, carrying `notices` when there are any.
fn noticed(notices: Vec<String>, error: anyhow::Error) -> anyhow::Error {
    if notices.is_empty() {
        error
    } else {
        anyhow::Error::new(Noticed { notices, error })
    }
}

/// The command was asked for something that is not there (a tool with no such name), or
/// given an argument it cannot read (`--args` that are no JSON object, a `--http` address
/// other machines reach): a mistake in the command line, like those clap reports, so it
/// exits [`USAGE`], having done nothing. The message says what there is, or what to give.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A signal came before a file-changing command began its change, so it did not begin.
#[derive(Debug, thiserror::Error)]
#[error("interrupted before the change began; nothing was changed")]
pub struct InterruptedBeforeStart;

/// Output plus notices for stderr.
#[derive(Debug, Default)]
pub struct Report {
    /// Text for stdout.
    pub stdout: String,
    /// Lines for stderr that are not errors (recoveries, dropped turns, honesty notes).
    pub notices: Vec<String>,
    /// The command that takes back what this one changed and recorded (`shiro undo` after a
    /// turn, `shiro redo` after an undo); `None` when it changed nothing.
    pub reverted_by: Option<&'static str>,
    /// The exit code of a command that did its job but must not exit 0 (a dry run that
    /// finds conflicts exits 3, as the restore it previews would); 0 otherwise.
    pub exit: u8,
    /// The turn the command recorded, if it recorded one.
    pub turn: Option<TurnId>,
    /// What a tool call changed, in order (empty for the other commands).
    pub changes: Vec<Change>,
}

/// `shiro tool NAME --args JSON|@FILE`.
pub async fn tool(ctx: &Context, name: &str, args: &str) -> Result<Report> {
    let tool = ctx.tool(name).ok_or_else(|| {
        let names: Vec<&str> = tools::all().iter().map(|t| t.name()).collect();
        UsageError(format!(
            "unknown tool {name:?}; the tools are: {}",
            names.join(", ")
        ))
    })?;
    let json = if let Some(file) = args.strip_prefix('@') {
        std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the arguments file {file}"))?
    } else {
        args.to_owned()
    };
    // Arguments that are no JSON object are a mistake in the command line, as an unknown
    // tool is: exit 2, not the 1 of a call that failed.
    let args: serde_json::Value = serde_json::from_str(&json).map_err(|err| {
        UsageError(format!(
            "--args is not valid JSON ({err}): give the tool's arguments as one JSON object, such as {{\"path\": \"a.txt\"}}, or @FILE to read them from a file; nothing was changed"
        ))
    })?;
    if !args.is_object() {
        return Err(UsageError(format!(
            "--args must be a JSON object of the tool's arguments, such as {{\"path\": \"a.txt\"}}, \
             not {}; nothing was changed",
            json_kind(&args)
        ))
        .into());
    }
    // The log names the turn by its call: `shiro tool edit_file notes.txt`.
    let summary = format!("shiro tool {name} {}", crate::protocol::brief(&args));
    run_as_turn(ctx, tool.as_ref(), args, &summary).await
}

/// What kind of JSON value `value` is, for a message.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// How an undo or a redo goes (`--dry-run`, `--force`, `--abandon`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreArgs {
    /// Show what would change, as a diff, and change nothing.
    pub dry_run: bool,
    /// Overwrite files that changed since the turn.
    pub force: bool,
    /// Clear an undo or redo that stopped part-way and can be neither completed nor rolled
    /// back, keeping every file exactly as it is.
    pub abandon: bool,
    /// Undo only: rewind to before this turn, undoing it and every later turn of its
    /// session (or, for a headless command's turn, of headless commands) as one restore.
    pub to: Option<u64>,
    /// Undo only: revert this turn alone, as a new turn, keeping every later change.
    pub turn: Option<u64>,
}

/// What `shiro commands` (and `/commands`) does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandsCommand {
    /// List every command with its source and what it shadows; as JSON with `json`.
    List {
        /// JSON instead of text.
        json: bool,
    },
    /// The prompt a command expands to.
    Expand {
        /// Run the command's shell substitutions even though the workspace is not trusted.
        trust: bool,
        /// The command's name (with or without the leading /).
        name: String,
        /// The command's arguments, each one exactly as given.
        args: Vec<String>,
    },
    /// Report problems in the command files.
    Check,
}

/// `shiro apply-patch [FILE]`.
pub async fn apply_patch(
    ctx: &Context,
    file: Option<&Path>,
    stdin: &mut dyn std::io::Read,
) -> Result<Report> {
    let patch = match file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the patch file {}", file.display()))?,
        None => {
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .context("cannot read the patch from standard input")?;
            text
        }
    };
    let summary = match file {
        Some(file) => format!("shiro apply-patch {}", file.display()),
        None => "shiro apply-patch".to_owned(),
    };
    let tool = tools::apply_patch();
    run_as_turn(ctx, &tool, serde_json::json!({ "patch": patch }), &summary).await
}

/// Runs one tool call as its own recorded turn (read-only tools are not recorded), as
/// `shiro tool` does; `summary` names the turn in `shiro log`.
pub async fn run_as_turn(
    ctx: &Context,
    tool: &dyn Tool,
    args: serde_json::Value,
    summary: &str,
) -> Result<Report> {
    let workspace = ctx.workspace()?;
    if !tool.is_mutating() {
        let output = tool.call(&workspace, args).await?;
        return Ok(Report {
            stdout: with_newline(output.text),
            ..Report::default()
        });
    }
    let (store, mut notices) = ctx.open_store_for_one().await?;
    if ctx.signals.interrupted() {
        return Err(InterruptedBeforeStart.into());
    }
    let (workspace, changed) = tracked(workspace);
    let recording = store.recorder(workspace);
    recording
        .begin_turn(TurnStart {
            summary: summary.to_owned(),
            history_marker: 0,
            session: None,
        })
        .await?;
    let result = match call_in_turn(ctx, tool, &recording, args, "`shiro undo`").await {
        Ok((result, bash_notices)) => {
            notices.extend(bash_notices);
            result
        }
        Err(err) => {
            // Nothing ran: finishing records no turn, and leaves no half-begun one behind.
            recording.finish_turn().await?;
            return Err(err);
        }
    };
    // A failed call normally changed nothing (apply_patch puts back what it did), so
    // finishing records no turn; a successful one is saved.
    let finished = recording.finish_turn().await;
    notices.extend(notices_of(&store));
    let stdout = |result: &Result<ToolOutput, _>| match result {
        Ok(output) => with_newline(output.text.clone()),
        Err(_) => String::new(),
    };
    let failed = match (result, finished) {
        (Ok(output), Ok(turn)) => {
            // A turn that holds nothing to take back (a `bash` call run without capture is
            // recorded to say so) names no command that would.
            let undoable = !output.changes.is_empty() || output.git.is_some();
            return Ok(Report {
                stdout: with_newline(output.text),
                notices,
                reverted_by: turn.filter(|_| undoable).map(|_| "shiro undo"),
                exit: 0,
                turn,
                changes: output.changes,
            });
        }
        (Err(err), Ok(None)) => err.into(),
        (Err(err), Ok(Some(turn))) => anyhow::Error::new(err).context(FailedAfterChanges {
            message: format!(
                "the call failed after changing files; what it changed is recorded as turn {turn} (`shiro undo` reverts it)"
            ),
            stdout: String::new(),
        }),
        // Every mutation went through the recorder, which made its pre-image durable in
        // the in-flight record first; that record stays when finishing fails.
        (result, Err(err)) if changed.load(Ordering::SeqCst) => {
            anyhow::Error::new(err).context(FailedAfterChanges {
                message: "files were changed, but recording them as a turn failed; the undo log's in-flight record keeps what they replaced, and the next shiro command recovers them as an undoable turn".to_owned(),
                stdout: stdout(&result),
            })
        }
        (Ok(_), Err(err)) => err.into(),
        (Err(err), Err(_)) => err.into(),
    };
    Err(noticed(notices, failed))
}

/// Runs a mutating tool call inside the turn that `recording` has begun: captures what the
/// call will touch, runs it, and notes it (and, for `bash`, how its changes were captured)
/// for `shiro log`. Returns the call's result with the notices a person should read about
/// it; `undo` names the command that reverses the turn, for those notices. `Err` means the
/// capture failed and nothing ran.
pub async fn call_in_turn<M: Mutator>(
    ctx: &Context,
    tool: &dyn Tool,
    recording: &Recording<M>,
    args: serde_json::Value,
    undo: &str,
) -> Result<(Result<ToolOutput, ToolError>, Vec<String>)> {
    capture_ahead(tool, recording, &args).await?;
    let mut notices = Vec::new();
    let is_bash = tool.name() == "bash";
    if is_bash {
        // Flagged before it runs, so that a turn a crash cuts short still says it ran bash.
        let mode = ctx.bash.runner().mode();
        recording.note_bash(undo_capture(mode), &[]).await;
    }
    let result = tool.call(recording, args).await;
    match &result {
        Ok(output) => recording.note_tool(tool.name(), &output.changes).await,
        Err(_) => recording.note_tool(tool.name(), &[]).await,
    }
    if is_bash && let Ok(output) = &result {
        notices.extend(note_bash_output(recording, output, undo).await);
    }
    Ok((result, notices))
}

/// Notes in the turn `recording` records what a `bash` call reported in `output`: how its
/// changes were captured, the paths nothing can restore, and what it moved in the git
/// repository. Returns what a person should read about it; `undo` names the command that
/// reverses the turn.
pub async fn note_bash_output<M: Mutator>(
    recording: &Recording<M>,
    output: &ToolOutput,
    undo: &str,
) -> Vec<String> {
    let mode = output.capture.unwrap_or(CaptureMode::Off);
    recording
        .note_bash(undo_capture(mode), &output.unrestorable)
        .await;
    let mut notices: Vec<String> = bash_note(mode, output, undo).into_iter().collect();
    if let Some(git) = &output.git
        && let Err(err) = recording.note_git(git).await
    {
        notices.push(format!(
            "what the command did to the git repository could not be recorded ({err}); {undo} \
             restores the files, and leaves HEAD, the refs and the index as they are"
        ));
    }
    notices
}

/// The name of the helper binary installed beside `shiro` (`src/bin/shiro-bash-helper.rs`).
pub const HELPER_BIN: &str = "shiro-bash-helper";

/// The bash overlay's helper for the `shiro` binary at `exe`: `shiro-bash-helper` beside it,
/// which starts in about half the time (every command starts it), else this very
/// binary (`main` hands it the helper's arguments first), as when only `shiro` was copied.
pub fn overlay_helper(exe: Option<&Path>) -> PathBuf {
    exe.and_then(helper_beside)
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
}

/// `shiro-bash-helper` beside the `shiro` binary at `exe`, when it is there.
pub fn helper_beside(exe: &Path) -> Option<PathBuf> {
    Some(exe.with_file_name(HELPER_BIN)).filter(|helper| helper.is_file())
}

/// How the undo log names a capture mode.
pub fn undo_capture(mode: CaptureMode) -> shiro_undo::BashCapture {
    match mode {
        CaptureMode::Overlay => shiro_undo::BashCapture::Overlay,
        CaptureMode::Detect => shiro_undo::BashCapture::Detect,
        CaptureMode::Off => shiro_undo::BashCapture::Off,
    }
}

/// What a person is told after a bash call (`output`, captured as `mode` says) whose changes
/// `undo` (the command that reverses the turn) cannot all reverse; nothing when they were all
/// captured.
pub fn bash_note(mode: CaptureMode, output: &ToolOutput, undo: &str) -> Option<String> {
    let unrestorable = &output.unrestorable;
    // The session's capture may well be the overlay: then the reason is where they ran.
    let why = if output.background {
        "background commands run on the workspace itself, outside the overlay"
    } else {
        "bash capture is detect-only"
    };
    match mode {
        CaptureMode::Overlay => None,
        CaptureMode::Detect if unrestorable.is_empty() => None,
        CaptureMode::Detect => {
            const SHOWN: usize = 10;
            let n = unrestorable.len();
            let mut names: Vec<&str> = unrestorable
                .iter()
                .take(SHOWN)
                .map(WorkspacePath::as_str)
                .collect();
            let more = format!("and {} more", n.saturating_sub(SHOWN));
            if n > SHOWN {
                names.push(&more);
            }
            Some(format!(
                "note: bash changed {n} {} that {undo} cannot restore ({why}): {}",
                if n == 1 { "file" } else { "files" },
                names.join(", ")
            ))
        }
        CaptureMode::Off => Some(format!(
            "note: bash ran without capture, so {undo} cannot reverse its effects"
        )),
    }
}

fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Captures the pre-images of the paths `tool` says the call will change, with one flush for
/// all of them, before it runs (see [`Recording::capture_ahead`]). Arguments it cannot read
/// capture nothing: the call reports them itself.
pub async fn capture_ahead<M: Mutator>(
    tool: &dyn Tool,
    recording: &Recording<M>,
    args: &serde_json::Value,
) -> Result<()> {
    if let Ok(paths) = tool.touched_paths(recording.inner(), args).await {
        recording.capture_ahead(&paths).await?;
    }
    Ok(())
}

/// `inner`, noting whether any change was attempted through it: a command that fails
/// afterwards must not say that nothing was changed. The flag is set before the change, so a
/// failed one (which may have changed a file in part) counts.
fn tracked<M: Mutator>(inner: M) -> (Hooked<M>, Arc<AtomicBool>) {
    let changed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&changed);
    let hooked = Hooked::new(inner, move |_| {
        flag.store(true, Ordering::SeqCst);
        Ok(())
    });
    (hooked, changed)
}

/// The store just opened, with what opening it has to say.
fn with_notices(opened: Result<UndoStore, UndoError>) -> Result<(UndoStore, Vec<String>)> {
    let store = opened.context("cannot open the undo store")?;
    let notices = notices_of(&store);
    Ok((store, notices))
}

/// The store's notices gathered so far, as lines to show.
fn notices_of(store: &UndoStore) -> Vec<String> {
    store
        .take_notices()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlay_helper_is_the_small_binary_beside_shiro_else_shiro_itself() {
        let dir = tempfile::tempdir().unwrap();
        let shiro = dir.path().join("shiro");
        std::fs::write(&shiro, "").unwrap();
        let itself = PathBuf::from("/proc/self/exe");
        assert_eq!(overlay_helper(Some(&shiro)), itself, "only shiro copied");
        assert_eq!(overlay_helper(None), itself, "no path known");
        std::fs::create_dir(dir.path().join(HELPER_BIN)).unwrap();
        assert_eq!(overlay_helper(Some(&shiro)), itself, "not a file");
        std::fs::remove_dir(dir.path().join(HELPER_BIN)).unwrap();
        std::fs::write(dir.path().join(HELPER_BIN), "").unwrap();
        assert_eq!(overlay_helper(Some(&shiro)), dir.path().join(HELPER_BIN));
    }

    #[test]
    fn the_note_on_paths_nothing_restores_gives_their_cause() {
        let paths = vec![WorkspacePath::from_relative("target/out.log").unwrap()];
        let detect = ToolOutput {
            unrestorable: paths,
            ..ToolOutput::default()
        };
        let background = ToolOutput {
            background: true,
            ..detect.clone()
        };
        let note = |output: &ToolOutput| bash_note(CaptureMode::Detect, output, "/undo").unwrap();
        insta::assert_snapshot!(format!("{}\n{}", note(&detect), note(&background)), @r"
        note: bash changed 1 file that /undo cannot restore (bash capture is detect-only): target/out.log
        note: bash changed 1 file that /undo cannot restore (background commands run on the workspace itself, outside the overlay): target/out.log
        ");
        let captured = ToolOutput::default();
        assert_eq!(bash_note(CaptureMode::Overlay, &captured, "/undo"), None);
        assert_eq!(bash_note(CaptureMode::Detect, &captured, "/undo"), None);
    }

    #[test]
    fn a_usage_error_exits_2_even_after_notices() {
        let unknown = || anyhow::Error::new(UsageError("unknown tool \"frob\"".into()));
        assert_eq!(exit_code(&unknown()), USAGE);
        let noticed = noticed(vec!["recovered a turn".into()], unknown());
        assert_eq!(exit_code(&noticed), USAGE);
        assert_eq!(exit_code(&anyhow::anyhow!("unknown tool")), 1);
    }

    #[test]
    fn no_cause_is_shown_twice() {
        let denied = || std::io::Error::from_raw_os_error(13);
        let store = UndoError::Io {
            op: "write",
            path: ".shiro/undo/log.jsonl".into(),
            source: denied(),
        };
        let err = anyhow::Error::new(store).context("cannot open the undo store");
        assert_eq!(
            error_text(&err),
            "cannot open the undo store: could not write .shiro/undo/log.jsonl: Permission denied (os error 13)"
        );
        let path = WorkspacePath::from_relative("a.txt").unwrap();
        let mutator = shiro_tools::MutatorError::Io {
            op: "write",
            path,
            source: denied(),
        };
        let err = anyhow::Error::new(UndoError::Mutator(mutator));
        assert_eq!(
            error_text(&err),
            "write a.txt: Permission denied (os error 13)"
        );
        // A cause that says something new is kept.
        let err = anyhow::Error::new(denied()).context("cannot read the patch");
        assert_eq!(
            error_text(&err),
            "cannot read the patch: Permission denied (os error 13)"
        );
    }
}
