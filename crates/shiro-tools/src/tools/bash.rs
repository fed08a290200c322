//! The `bash` tool: a shell command in the workspace root, bounded in time and output, with
//! every process it starts killed when it ends, times out, is stopped or is cancelled. What it
//! changes is captured by the tool's [`BashRunner`] (see [`crate::capture`]).

use std::fmt::{self, Write as _};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::{Pid, Signal, kill_process_group};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::capture::{
    Background, BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Direct, Ended,
    Started,
};
use crate::mutator::Mutator;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};

/// The timeout when the model gives none.
pub const BASH_DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The longest timeout a model may ask for.
pub const BASH_MAX_TIMEOUT_SECS: u64 = 600;
pub use crate::output::BASH_MAX_OUTPUT_BYTES;
use crate::output::BoundedOutput;
/// How many changed paths the result lists; the rest are counted.
pub const BASH_MAX_LISTED_PATHS: usize = 100;
/// How long output is still read after the shell has exited and its group was killed. Only a
/// process that left the group (`setsid`) can hold the pipe open past that.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs a shell command in the workspace root; its runner captures what it changes.
#[derive(Clone)]
pub struct Bash {
    runner: Arc<dyn BashRunner>,
    read_only: Option<Arc<dyn BashRunner>>,
    stop: Option<watch::Receiver<u64>>,
    /// Changes when the person asks for the running command to go to the background.
    to_background: Option<watch::Receiver<u64>>,
    live: Option<Live>,
    background: Option<Arc<Background>>,
    /// Whether its background commands may write nowhere in the workspace (read-only mode).
    background_read_only: bool,
}

/// How long a command started in the background is waited for before its first output is
/// returned (it returns at once when it ends sooner).
pub const BASH_BACKGROUND_SETTLE: Duration = Duration::from_secs(1);

/// Where a running command's output goes as it comes (a terminal UI showing it live); the
/// model still reads the whole output when the command ends.
pub type Live = Arc<dyn Fn(&[u8]) + Send + Sync>;

impl fmt::Debug for Bash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bash")
            .field("runner", &self.runner)
            .finish_non_exhaustive()
    }
}

impl Default for Bash {
    fn default() -> Self {
        Self::new(Arc::new(Direct))
    }
}

impl Bash {
    /// A `bash` tool whose commands `runner` captures.
    pub fn new(runner: Arc<dyn BashRunner>) -> Self {
        Self {
            runner,
            read_only: None,
            stop: None,
            to_background: None,
            live: None,
            background: None,
            background_read_only: false,
        }
    }

    /// Lets it start commands in the background (`run_in_background`), kept in
    /// `background`; without, such a call is refused.
    pub fn with_background(mut self, background: Arc<Background>) -> Self {
        self.background = Some(background);
        self
    }

    /// The session's background commands, if it may start them.
    pub fn background(&self) -> Option<&Arc<Background>> {
        self.background.as_ref()
    }

    /// Stops a call each time `stop`'s value changes after the call began: a running command
    /// is stopped as a timeout stops it (what it changed so far is captured, and the call
    /// returns: an interrupt that should keep the record of a command, where dropping the
    /// call would lose it), and a command not started yet never starts (the call is refused,
    /// having run nothing). A change before the call (a stop that ended an earlier one) does
    /// not count. The call begins when it is first polled: it takes note of `stop` before it
    /// awaits anything.
    pub fn with_stop(mut self, stop: watch::Receiver<u64>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Moves a running command to the background each time `to_background`'s value
    /// changes (Ctrl-B), where the tool can start background commands: the command is
    /// stopped, what it changed so far is captured as after a stop, and it is started again
    /// in the background. An overlay cannot be taken off a running process, so this is the
    /// one way to keep both the command and the record of what it did.
    pub fn with_to_background(mut self, to_background: watch::Receiver<u64>) -> Self {
        self.to_background = Some(to_background);
        self
    }

    /// Hands each piece of a command's output to `live` as it is read.
    pub fn with_live_output(mut self, live: Live) -> Self {
        self.live = Some(live);
        self
    }

    /// The runner that captures its commands.
    pub fn runner(&self) -> &Arc<dyn BashRunner> {
        &self.runner
    }

    /// Gives it `runner` for a session in read-only mode: one whose sandbox keeps the
    /// workspace read-only (see [`Bash::read_only`]).
    pub fn with_read_only(mut self, runner: Arc<dyn BashRunner>) -> Self {
        self.read_only = Some(runner);
        self
    }

    /// The same tool over the read-only runner, if it has one: a session in read-only mode
    /// runs bash through it, and no other.
    pub fn read_only(&self) -> Option<Bash> {
        let runner = Arc::clone(self.read_only.as_ref()?);
        Some(Bash {
            runner,
            read_only: None,
            stop: self.stop.clone(),
            to_background: self.to_background.clone(),
            live: self.live.clone(),
            background: self.background.clone(),
            background_read_only: true,
        })
    }
}

/// The `bash` tool, capturing nothing (see [`Bash::new`] for a capturing one).
pub fn bash() -> Bash {
    Bash::default()
}

/// The arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run by `bash -c` in the workspace root.
    pub command: String,
    /// Seconds before the command and everything it started are killed (default 120, at
    /// most 600).
    #[serde(alias = "timeoutSecs")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_secs: Option<u64>,
    /// Runs it in the background (a server, a watcher): the call returns at once with an id
    /// for bash_output and bash_kill; no timeout applies.
    #[serde(alias = "runInBackground")]
    pub run_in_background: Option<bool>,
}

const NAME: &str = "bash";

/// The description for a model: what every runner shares, then how it may run in the
/// background, then what its capture means.
macro_rules! description {
    ($background:expr, $capture:literal) => {
        concat!(
            "Runs a command with `bash -c` in the workspace root (stdin is empty) and returns \
             its combined stdout and stderr and its exit code. Use it to build, run tests, and \
             run git or other programs. It times out after `timeout_secs` (default 120, at most \
             600); then the command and every process it started are killed. Processes it \
             leaves running are killed when it exits. Output over 30000 bytes keeps its \
             beginning and end. ",
            $background,
            $capture
        )
    };
}

/// What the description says of `run_in_background`, where it is offered.
macro_rules! background {
    (on) => {
        "To keep a server, a watcher or another long-running command up, pass \
         run_in_background: true: the call returns at once with an id and the first output; \
         read more with bash_output and stop it with bash_kill. A background command sees \
         file edits as they happen, but may write in the workspace only in directories \
         .gitignore leaves out (build outputs, caches); its other writes there are refused, \
         and what it changes is named and cannot be undone. "
    };
    (off) => {
        "Do not start servers expecting them to stay up. "
    };
}

macro_rules! descriptions {
    ($background:tt) => {
        [
            description!(
                background!($background),
                "Changes the command makes to files in the workspace are recorded like the edit \
                 tools' and can be undone; the result lists them. What git does to HEAD, the \
                 branches, the stash and the index is recorded and undone with them too; \
                 changes outside the workspace are not recorded. Still prefer the edit tools for editing files, \
                 and read_file, grep, glob and list_dir for reading them."
            ),
            description!(
                background!($background),
                "Changes the command makes to files CANNOT be undone (the result names them): \
                 change files with the edit tools, and read them with read_file, grep, glob and \
                 list_dir rather than cat, grep or find."
            ),
            description!(
                background!($background),
                "Changes a command makes to files are NOT recorded for undo and cannot be \
                 undone: change files with the edit tools, and read them with read_file, grep, \
                 glob and list_dir rather than cat, grep or find."
            ),
        ]
    };
}

/// The descriptions per capture mode (overlay, detect, off), with background commands and
/// without.
const WITH_BACKGROUND: [&str; 3] = descriptions!(on);
const WITHOUT_BACKGROUND: [&str; 3] = descriptions!(off);

#[async_trait]
impl Tool for Bash {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        let all = match self.background {
            Some(_) => &WITH_BACKGROUND,
            None => &WITHOUT_BACKGROUND,
        };
        match self.runner.mode() {
            CaptureMode::Overlay => all[0],
            CaptureMode::Detect => all[1],
            CaptureMode::Off => all[2],
        }
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<BashArgs>()
    }

    /// True: a command can change anything, so it must be approved.
    fn is_mutating(&self) -> bool {
        true
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        // Only a stop from now on counts, however long the command takes to start (see
        // `Bash::with_stop`): taken note of before anything is awaited.
        let stop = self.stop.clone().map(|mut stop| {
            stop.mark_unchanged();
            stop
        });
        let args: BashArgs = parse_args(NAME, args)?;
        if args.run_in_background == Some(true) {
            if stopped_already(stop.as_ref()) {
                return Err(ToolError::refused(STOPPED_BEFORE_START));
            }
            return self.start_background(mutator, &args).await;
        }
        let secs = args.timeout_secs.unwrap_or(BASH_DEFAULT_TIMEOUT_SECS);
        if !(1..=BASH_MAX_TIMEOUT_SECS).contains(&secs) {
            return Err(ToolError::refused(format!(
                "timeout_secs must be from 1 to {BASH_MAX_TIMEOUT_SECS}, not {secs}; nothing was run"
            )));
        }
        if args.command.trim().is_empty() {
            return Err(ToolError::refused("command is empty; nothing was run"));
        }
        let root = mutator.root();
        let is_dir = tokio::fs::metadata(root)
            .await
            .is_ok_and(|meta| meta.is_dir());
        if !is_dir {
            return Err(ToolError::refused(format!(
                "bash needs a workspace on disk, and the workspace root {} is not a directory \
                 on disk; nothing was run",
                root.display()
            )));
        }
        let timeout = Duration::from_secs(secs);
        let mut notes = Vec::new();
        // A capture that could not be set up ran nothing: the runner may then try another
        // way (an `Auto` runner falls back to detection), once.
        for attempt in 0..2 {
            if stopped_already(stop.as_ref()) {
                return Err(ToolError::refused(STOPPED_BEFORE_START));
            }
            let capture = self.runner.begin(mutator).await.map_err(|err| {
                ToolError::refused(format!("cannot run the command: {err}; nothing was run"))
            })?;
            // A stop that came while the capture was readied (an overlay's layer, the git
            // repository's state) is not forgotten: the command never starts. Finishing the
            // capture of nothing puts away what it readied.
            if stopped_already(stop.as_ref()) {
                let _ = capture.finish(mutator, Ended::Killed).await;
                return Err(ToolError::refused(STOPPED_BEFORE_START));
            }
            let to_background = self
                .to_background
                .clone()
                .filter(|_| self.background.is_some());
            let (mut text, ended, moved) = run(
                &*capture,
                &args.command,
                timeout,
                [stop.clone(), to_background],
                self.live.as_ref(),
            )
            .await
            .map_err(|err| {
                ToolError::refused(format!("could not start the shell: {err}; nothing was run"))
            })?;
            let refused = capture.refused_note(&text);
            let captured = match capture.finish(mutator, ended).await {
                Ok(mut captured) => {
                    captured.notes.extend(refused);
                    captured
                }
                Err(CaptureError::NotStarted(why)) if attempt == 0 => {
                    notes.push(why);
                    continue;
                }
                Err(CaptureError::NotStarted(why)) => {
                    return Err(ToolError::refused(format!(
                        "cannot run the command: {why}; nothing was run"
                    )));
                }
                Err(err) => {
                    let _ = match err {
                        CaptureError::NotApplied(why) => write!(
                            text,
                            "\n[the command ran, but none of its file changes was applied to \
                             the workspace, which is as it was before the command: {why}]"
                        ),
                        err => write!(
                            text,
                            "\n[the command ran, but its file changes could not all be applied \
                             to the workspace: {err}; what was applied is recorded and undoable, \
                             the rest was dropped]"
                        ),
                    };
                    return Ok(ToolOutput {
                        text,
                        capture: Some(CaptureMode::Overlay),
                        ..ToolOutput::default()
                    });
                }
            };
            describe(&mut text, &captured);
            let mut unrestorable = captured.unrestorable;
            // Whether the only paths nothing can restore are those background commands changed.
            let mut background = false;
            if moved {
                let again = BashArgs {
                    command: args.command.clone(),
                    timeout_secs: None,
                    run_in_background: Some(true),
                };
                match self.start_background(mutator, &again).await {
                    Ok(started) => {
                        let _ = write!(text, "\n{}", started.text);
                        background = unrestorable.is_empty() && started.background;
                        unrestorable.extend(started.unrestorable);
                    }
                    Err(err) => {
                        let _ =
                            write!(text, "\n[it could not be started in the background: {err}]");
                    }
                }
            }
            return Ok(ToolOutput {
                text,
                changes: captured.changes,
                capture: captured.mode,
                unrestorable,
                background,
                git: captured.git,
            });
        }
        Err(ToolError::refused(format!(
            "cannot run the command: {}; nothing was run",
            notes.join("; ")
        )))
    }
}

impl Bash {
    /// Starts `args.command` in the background and returns its first output.
    async fn start_background(
        &self,
        mutator: &dyn Mutator,
        args: &BashArgs,
    ) -> Result<ToolOutput, ToolError> {
        let Some(background) = &self.background else {
            return Err(ToolError::refused(
                "commands cannot run in the background here; run it in the foreground, with a \
                 timeout_secs, or not at all; nothing was run",
            ));
        };
        if args.command.trim().is_empty() {
            return Err(ToolError::refused("command is empty; nothing was run"));
        }
        if args.timeout_secs.is_some() {
            return Err(ToolError::refused(
                "timeout_secs does not apply to a background command (stop it with bash_kill); \
                 nothing was run",
            ));
        }
        let root = mutator.root();
        let job = background
            .start(root, &args.command, self.background_read_only)
            .await
            .map_err(|err| {
                ToolError::refused(format!("cannot start the command: {err}; nothing was run"))
            })?;
        job.settle(BASH_BACKGROUND_SETTLE).await;
        let read = job.read(None).await;
        if let crate::capture::Status::Failed(why) = &read.status {
            return Err(ToolError::refused(format!(
                "cannot start the command: {why}; nothing was run"
            )));
        }
        let mut text = format!(
            "[started in the background as {id}: read its output with bash_output (id {id:?}), \
             stop it with bash_kill]\n",
            id = job.id()
        );
        text.push_str(&read.text);
        let _ = write!(text, "[{}: {}]", job.id(), read.status);
        if let Some(note) = super::background::refused_note(&job, &text) {
            let _ = write!(text, "\n[note: {note}]");
        }
        if !background.watches() {
            text.push_str(
                "\n[note: capture is off: what it changes is not recorded and cannot be undone]",
            );
        } else if job.writable().is_empty() {
            text.push_str("\n[it may write nowhere in the workspace]");
        } else {
            let dirs: Vec<String> = job.writable().iter().map(|dir| format!("{dir}/")).collect();
            let _ = write!(
                text,
                "\n[in the workspace it may write only in {} (left out by .gitignore); what it \
                 changes there is named and cannot be undone]",
                dirs.join(", ")
            );
        }
        Ok(super::background::changed(background, text).await)
    }
}

/// Appends the changed paths and the notes of a capture to the text the model reads.
fn describe(text: &mut String, captured: &Captured) {
    let list = |text: &mut String, items: Vec<String>| {
        for item in items.iter().take(BASH_MAX_LISTED_PATHS) {
            let _ = write!(text, "\n{item}");
        }
        if items.len() > BASH_MAX_LISTED_PATHS {
            let _ = write!(text, "\n… and {} more", items.len() - BASH_MAX_LISTED_PATHS);
        }
    };
    if !captured.changes.is_empty() {
        let _ = write!(
            text,
            "\n[files changed ({}; recorded, undoable):]",
            captured.changes.len()
        );
        list(
            text,
            captured.changes.iter().map(ToString::to_string).collect(),
        );
    }
    if !captured.unrestorable.is_empty() {
        let _ = write!(
            text,
            "\n[paths changed ({}) that CANNOT be undone (detected, not captured):]",
            captured.unrestorable.len()
        );
        list(
            text,
            captured
                .unrestorable
                .iter()
                .map(ToString::to_string)
                .collect(),
        );
    }
    if let Some(git) = &captured.git {
        let moved = crate::git::describe(&git.moved, git.index.is_some());
        let _ = write!(text, "\n[git: {moved} (recorded, undoable)]");
    }
    for note in &captured.notes {
        let _ = write!(text, "\n[note: {note}]");
    }
}

/// Kills the command's process group when dropped, so that a cancelled turn (its future
/// dropped on Ctrl-C) leaves nothing running.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    /// Kills the group now, once: after that the id may be reused by an unrelated group.
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            // The group may already be gone (ESRCH), which is what we want anyway.
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How the command ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    /// Stopped through [`Bash::with_stop`].
    Stopped,
    /// Stopped through [`Bash::with_to_background`], to be started again in the background.
    Moved,
    /// `wait` itself failed; the group was killed.
    Lost(io::Error),
}

/// What a call stopped before its command started says.
const STOPPED_BEFORE_START: &str = "stopped before the command started; nothing was run";

/// Whether `stop` changed since the call took note of it (its sender may be gone since: the
/// change still counts).
fn stopped_already(stop: Option<&watch::Receiver<u64>>) -> bool {
    stop.is_some_and(|stop| stop.borrow().has_changed())
}

/// Runs the command `capture` readies, and returns the text the model reads, how it ended,
/// and whether it was stopped to go to the background. `stops` are what stop it (a change
/// its receiver has not seen counts, one that comes while the command starts too), and what
/// stops it to go to the background (from now on). When this returns, every process of the
/// command's group is gone.
async fn run(
    capture: &dyn CommandCapture,
    command: &str,
    timeout: Duration,
    stops: [Option<watch::Receiver<u64>>; 2],
    live: Option<&Live>,
) -> io::Result<(String, Ended, bool)> {
    let [mut stop, mut to_background] = stops;
    // Only a move to the background asked from now on counts. Marked before the command
    // starts: one that lands while it starts (it may already run and write before this task
    // goes on) must still move it, not be forgotten. A stop that lands then is seen, as the
    // call took note of it before.
    if let Some(to_background) = to_background.as_mut() {
        to_background.mark_unchanged();
    }
    let (mut child, mut reader) = match capture.start_ready("bash", command).await {
        Some(Started { child, output }) => (child, output),
        None => {
            // One pipe for stdout and stderr, so the model reads them interleaved as a
            // terminal shows.
            let (writer, reader) = tokio::net::unix::pipe::pipe()?;
            let writer = writer.into_blocking_fd()?;
            let child = match spawn(capture, "bash", command, &writer) {
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    spawn(capture, "sh", command, &writer)?
                }
                other => other?,
            };
            // Our copy of the write end must go, or the pipe never reports end of file.
            drop(writer);
            (child, reader)
        }
    };
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let mut group = GroupGuard(pid);

    let mut output = BoundedOutput::default();
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Armed when the shell exits; until then it lies a year ahead.
    let drain = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(drain);
    let mut ending: Option<Ending> = None;
    let mut killed: Option<Ending> = None;
    let mut eof = false;
    while !(eof && ending.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    output.push(&buf[..n]);
                    if let Some(live) = live {
                        live(&buf[..n]);
                    }
                }
            },
            status = child.wait(), if ending.is_none() => {
                ending = Some(match (status, killed.take()) {
                    (Ok(_), Some(why)) => why,
                    (Ok(status), None) => Ending::Exited(status),
                    (Err(err), _) => Ending::Lost(err),
                });
                // Background processes die with the command, and their pipe ends with them.
                group.kill();
                drain.as_mut().reset(Instant::now() + DRAIN_GRACE);
            },
            () = &mut deadline, if ending.is_none() && killed.is_none() => {
                killed = Some(Ending::TimedOut);
                kill(capture, &mut child, &mut group);
            },
            changed = stopped(stop.as_mut()), if ending.is_none() && killed.is_none() => {
                if changed {
                    killed = Some(Ending::Stopped);
                    kill(capture, &mut child, &mut group);
                } else {
                    // The sender is gone: nothing can stop the command any more.
                    stop = None;
                }
            },
            changed = stopped(to_background.as_mut()), if ending.is_none() && killed.is_none() => {
                if changed {
                    killed = Some(Ending::Moved);
                    kill(capture, &mut child, &mut group);
                } else {
                    to_background = None;
                }
            },
            () = &mut drain, if ending.is_some() => break,
        }
    }
    let mut out = output.render();
    if !eof {
        out.push_str(
            "[a process that left the command's process group kept the output open; output \
             after the command exited was not read]\n",
        );
    }
    let ended = match &ending {
        Some(Ending::Exited(status)) => Ended::Exited(*status),
        _ => Ended::Killed,
    };
    let moved = matches!(ending, Some(Ending::Moved));
    match ending {
        Some(Ending::Exited(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => {
                let _ = write!(out, "[exit code {code}]");
            }
            (None, Some(signal)) => {
                let _ = write!(out, "[killed by signal {signal}]");
            }
            (None, None) => out.push_str("[ended without an exit code]"),
        },
        Some(Ending::TimedOut) => {
            let _ = write!(
                out,
                "[timed out after {} s: the command and every process it started were killed; \
                 pass a larger timeout_secs (at most {BASH_MAX_TIMEOUT_SECS}) or run less at once]",
                timeout.as_secs()
            );
        }
        Some(Ending::Stopped) => out.push_str(
            "[stopped by the user: the command and every process it started were killed]",
        ),
        Some(Ending::Moved) => out.push_str(
            "[moved to the background by the user (Ctrl-B): the command was stopped here, and \
             what it changed so far is kept like any command's changes; it is started again in \
             the background, below]",
        ),
        Some(Ending::Lost(err)) => {
            let _ = write!(
                out,
                "[lost track of the command ({err}); its processes were killed]"
            );
        }
        None => out.push_str("[the command's end was not seen; its processes were killed]"),
    }
    Ok((out, ended, moved))
}

/// Kills a command that must stop: through its capture where that knows how (the overlay
/// kills its namespace), else its process group. A started process that has already ended
/// is left to the caller's wait, which kills the group then.
fn kill(capture: &dyn CommandCapture, child: &mut Child, group: &mut GroupGuard) {
    let running = matches!(child.try_wait(), Ok(None));
    if !(running && capture.kill()) {
        group.kill();
    }
}

/// Resolves when `stop` changes (true) or its sender is gone (false); never without one.
async fn stopped(stop: Option<&mut watch::Receiver<u64>>) -> bool {
    match stop {
        Some(stop) => stop.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

fn spawn(
    capture: &dyn CommandCapture,
    program: &str,
    command: &str,
    writer: &OwnedFd,
) -> io::Result<Child> {
    capture
        .command(program, command)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer.try_clone()?)
        // Its own process group, so that one signal reaches everything it starts.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
}
