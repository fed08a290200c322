//! How a `bash` command's file changes are captured: the runner seam of the bash tool.
//!
//! A [`BashRunner`] readies each command: it says which process to start for `bash -c CMD`,
//! and once every process of the command is gone it reports, and where it can commits, what
//! the command changed. Three runners ship:
//!
//! - [`Overlay`] (Linux): the command runs in its own mount namespace, where the workspace
//!   root is an overlayfs whose upper layer lives in a directory outside the workspace,
//!   hidden from the command like the rest of shiro's state. Afterwards the upper
//!   layer is walked and each change is applied to the real workspace through the caller's
//!   `Mutator`, so a recorder captures its pre-image like any tool's.
//! - [`Detect`] (anywhere): the command runs directly; stat listings taken before and after
//!   name every path it changed, which nothing can restore.
//! - [`Direct`]: the command runs directly and nothing is known about what it changed.
//!
//! [`Auto`] tries the overlay and falls back to detection, once and for all, when the overlay
//! cannot be set up.

mod auto;
mod background;
mod detect;
mod layer;
mod objects;
mod overlay;
mod plan;
mod ready;
mod recovery;
mod repository;
mod sandbox;
mod writable;

use std::fmt;
use std::process::ExitStatus;

use async_trait::async_trait;
use serde::Serialize;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

use crate::change::Change;
use crate::mutator::{Mutator, MutatorError};
use crate::path::WorkspacePath;

pub use auto::Auto;
pub use background::{
    BACKGROUND_DEFAULT_LIMIT, Background, BackgroundError, Job, JobSummary, Launch, Read, Status,
};
pub use detect::Detect;
pub use overlay::{
    HELPER_BACKGROUND, HELPER_INIT, HELPER_OVERLAY, HelperExit, Overlay, is_helper_call, run_helper,
};
pub use ready::HELPER_READY;
pub use recovery::{BeforeCommit, LayerRecovery, recover_layers};
pub use sandbox::{PROTECTED, Sandbox, SandboxMode, TEMP_DIRS};
pub use writable::BACKGROUND_MAX_WRITABLE;

/// How a command's changes were captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    /// Through an overlay: every change under the workspace root was applied through the
    /// `Mutator`, so it is recorded and undoable.
    Overlay,
    /// Run directly; the changed paths are known but cannot be restored.
    Detect,
    /// Run directly; nothing is known.
    Off,
}

impl fmt::Display for CaptureMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CaptureMode::Overlay => "overlay",
            CaptureMode::Detect => "detect",
            CaptureMode::Off => "off",
        })
    }
}

/// What a captured command changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    /// How it was captured; `None` before a runner says.
    pub mode: Option<CaptureMode>,
    /// The changes applied through the `Mutator` (overlay), in the order they were made.
    pub changes: Vec<Change>,
    /// Paths the command changed that cannot be restored (detect-only), sorted with the
    /// paths `.gitignore` does not ignore first.
    pub unrestorable: Vec<WorkspacePath>,
    /// Things the model and the user should know: entries that were not carried over (a
    /// named pipe made by the command), a fallback to detection and why.
    pub notes: Vec<String>,
    /// What the command moved in the git repository at the workspace root, which the
    /// overlay binds through uncaptured (see [`crate::git`]); `None` when nothing moved or
    /// the runner does not look.
    pub git: Option<crate::git::GitChange>,
}

/// Why a command could not be captured.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The capture could not be set up and the command was not run; the caller may run it
    /// another way.
    #[error("{0}")]
    NotStarted(String),
    /// Applying the command's changes to the workspace failed part-way. What was applied is
    /// recorded; the rest is kept for recovery.
    #[error("{0}")]
    Commit(#[from] MutatorError),
    /// None of the command's changes was applied, for the reason given: the workspace is as
    /// it was before the command.
    #[error("{0}")]
    NotApplied(String),
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

/// How the end of a command was seen.
#[derive(Debug, Clone, Copy)]
pub enum Ended {
    /// It exited (or was killed) with this status.
    Exited(ExitStatus),
    /// It was killed after its timeout or an interrupt, or its end was not seen; every
    /// process of its group was killed either way.
    Killed,
}

/// Readies the capture of bash commands. Implementations must be safe to share.
#[async_trait]
pub trait BashRunner: Send + Sync + fmt::Debug {
    /// How the next command will be captured, as far as is known before it runs.
    fn mode(&self) -> CaptureMode;

    /// Readies one command in the workspace of `mutator`.
    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError>;
}

/// A command's process as its capture started it (see [`CommandCapture::start_ready`]).
#[derive(Debug)]
pub struct Started {
    /// The process: the leader of its own process group, killed when dropped.
    pub child: Child,
    /// Its standard output and standard error, one pipe.
    pub output: pipe::Receiver,
}

/// The capture of one command.
#[async_trait]
pub trait CommandCapture: Send + Sync {
    /// The process to start to run `program -c script` in `root`. The caller sets its
    /// output, its process group and its working directory is already set.
    fn command(&self, program: &str, script: &str) -> Command;

    /// Runs `program -c script` in a process started ahead of time (see
    /// [`Overlay::start_ahead`]), standard input `/dev/null`; `None` (the default) when
    /// none is ready, and the caller starts [`Self::command`] itself.
    async fn start_ready(&self, program: &str, script: &str) -> Option<Started> {
        let _ = (program, script);
        None
    }

    /// Kills the command's processes, for a timeout or a stop, so that once the started
    /// process has ended nothing of the command runs any more. Returns whether it did; when
    /// not (the default), the caller kills the started process's group.
    fn kill(&self) -> bool {
        false
    }

    /// What to tell the model when `output`, the output of a command that failed, shows a
    /// write its sandbox refused (see [`Sandbox::refused_note`]); `None` by default.
    fn refused_note(&self, output: &str) -> Option<String> {
        let _ = output;
        None
    }

    /// Called once every process of the command is gone (its group was killed): reports
    /// what it changed, committing it through `mutator` where the runner can.
    async fn finish(
        self: Box<Self>,
        mutator: &dyn Mutator,
        ended: Ended,
    ) -> Result<Captured, CaptureError>;
}

/// Runs commands directly, capturing nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Direct;

#[async_trait]
impl BashRunner for Direct {
    fn mode(&self) -> CaptureMode {
        CaptureMode::Off
    }

    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError> {
        Ok(Box::new(DirectCapture {
            root: mutator.root().to_path_buf(),
        }))
    }
}

struct DirectCapture {
    root: std::path::PathBuf,
}

#[async_trait]
impl CommandCapture for DirectCapture {
    fn command(&self, program: &str, script: &str) -> Command {
        plain_command(&self.root, program, script)
    }

    async fn finish(
        self: Box<Self>,
        _mutator: &dyn Mutator,
        _ended: Ended,
    ) -> Result<Captured, CaptureError> {
        Ok(Captured {
            mode: Some(CaptureMode::Off),
            ..Captured::default()
        })
    }
}

/// `program -c script` in `root`.
fn plain_command(root: &std::path::Path, program: &str, script: &str) -> Command {
    let mut command = Command::new(program);
    command.arg("-c").arg(script).current_dir(root);
    command
}
