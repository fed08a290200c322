//! The overlay runner: each command runs in its own mount namespace, over an overlayfs of the
//! workspace whose upper layer shiro then commits through the `Mutator`.
//!
//! Setting up namespaces needs a single-threaded process, and the workspace denies `unsafe`,
//! so the runner starts a helper: the embedding binary run with [`HELPER_OVERLAY`] as its
//! first argument, which hands its arguments to [`run_helper`] before anything else (before
//! a thread or an async runtime is started). The helper
//!
//! 1. leaves the parent's mount and PID namespaces (and, when not root, its user namespace,
//!    mapping only the user's own ids);
//! 2. mounts an overlayfs over the workspace root (`lowerdir` = the root, `upperdir` and
//!    `workdir` in a layer of the runner's layers directory, which lies outside the
//!    workspace), then binds the real `.git` over its merged view so that writes there go
//!    straight through, uncaptured (but for `.git/objects`, whose view in the overlay is
//!    bound back over it, so that no object is ever removed: `objects.rs`), and covers each hidden
//!    directory (the layers', the undo store's) with an empty read-only file system, so the
//!    command can neither see nor change shiro's own state;
//! 3. forks: the child is PID 1 of the new PID namespace (the init), runs the command and
//!    waits for it. When it ends, the kernel kills every process left in the namespace,
//!    including ones that left the process group (`setsid`), so nothing writes into the
//!    upper layer while it is committed. A fork, not a second start of the binary: that
//!    would cost a whole program start on every command. Only a helper called with more than
//!    one thread (against [`run_helper`]'s contract) starts the init as a program of its own,
//!    with [`HELPER_INIT`].
//!
//! Both helpers ask the kernel to kill them when their parent dies, so a shiro that is killed
//! takes the command with it; the layer is then found unlocked by the next recovery.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::process::Command;

use super::layer::Layer;
use super::objects;
use super::plan::commit_layer;
use super::ready::{Ahead, HELPER_READY};
use super::sandbox::{Sandbox, SandboxMode};
use super::{BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Ended, Started};
use crate::git;
use crate::mutator::Mutator;

/// The first argument that runs the embedding binary as the overlay helper.
pub const HELPER_OVERLAY: &str = "__shiro-bash-overlay";
/// The first argument that runs the embedding binary as the helper that is PID 1 of the
/// command's PID namespace.
pub const HELPER_INIT: &str = "__shiro-bash-init";

/// The first argument that runs the embedding binary as the helper of a background command
/// (see [`super::Background`]): no overlay, the workspace read-only but for the directories
/// it is given.
pub const HELPER_BACKGROUND: &str = "__shiro-bash-background";

/// The exit code of a helper that could not set the overlay up; it then names why in the
/// layer's `setup-error` file, and the command was not run.
pub(super) const SETUP_FAILED: i32 = 125;

/// Runs commands over an overlay of the workspace and commits their upper layer.
#[derive(Debug, Clone)]
pub struct Overlay {
    helper: PathBuf,
    layers: PathBuf,
    hidden: Vec<PathBuf>,
    sandbox: Sandbox,
    /// The helper started ahead for the next command, when asked for.
    ahead: Option<Arc<Ahead>>,
}

impl Overlay {
    /// A runner whose helper is the binary at `helper`, which must pass its arguments to
    /// [`run_helper`] when its first one is [`HELPER_OVERLAY`] or [`HELPER_INIT`], and which
    /// makes each command's layer in the directory `layers` (made when missing). `layers`
    /// must lie outside every workspace it runs commands in; commands never see it.
    pub fn new(helper: impl Into<PathBuf>, layers: impl Into<PathBuf>) -> Self {
        let layers = layers.into();
        Self {
            helper: helper.into(),
            hidden: vec![layers.clone()],
            layers,
            sandbox: Sandbox::off(),
            ahead: None,
        }
    }

    /// Keeps a helper started ahead of the next command: as each command finishes, the
    /// next one's helper starts (its `run_helper` is called with [`HELPER_READY`]) and
    /// waits, so that the command skips a program start, about a millisecond (see
    /// `docs/performance.md`). For a runner that serves many commands, an agent's session
    /// or a server; the helper that waits is killed when the runner is dropped. Clones
    /// share it.
    pub fn start_ahead(mut self) -> Self {
        self.ahead = Some(Arc::new(Ahead::new(self.helper.clone())));
        self
    }

    /// The process id of the helper started ahead that waits for the next command, once
    /// it has started (see [`Self::start_ahead`]); `None` when none waits.
    pub async fn waiting_helper(&self) -> Option<u32> {
        self.ahead.as_ref()?.waiting_id().await
    }

    /// Runs every command in `sandbox` (none by default).
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox commands run in.
    pub fn sandboxed(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Hides the directory `dir` from every command too (shiro's whole state directory,
    /// say): inside the command's namespace it is empty and read-only.
    pub fn hiding(mut self, dir: impl Into<PathBuf>) -> Self {
        self.hidden.push(dir.into());
        self
    }
}

#[async_trait]
impl BashRunner for Overlay {
    fn mode(&self) -> CaptureMode {
        CaptureMode::Overlay
    }

    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError> {
        if !cfg!(target_os = "linux") {
            return Err(CaptureError::NotStarted(
                "overlays are a Linux feature".to_owned(),
            ));
        }
        if std::fs::metadata(&self.helper).is_err() {
            return Err(CaptureError::NotStarted(format!(
                "the overlay helper {} is missing",
                self.helper.display()
            )));
        }
        let root = mutator.root().to_path_buf();
        if let Some(c) = root
            .to_str()
            .and_then(|s| s.chars().find(|c| matches!(c, ',' | ':' | '\\' | '\n')))
        {
            return Err(CaptureError::NotStarted(format!(
                "the workspace path contains {c:?}, which overlay mount options cannot carry"
            )));
        }
        if root.to_str().is_none() {
            return Err(CaptureError::NotStarted(
                "the workspace path is not UTF-8, which overlay mount options need".to_owned(),
            ));
        }
        if let Some(inside) = (self.hidden.iter()).find(|dir| dir.starts_with(&root)) {
            return Err(CaptureError::NotStarted(format!(
                "shiro's directory {} lies inside the workspace, where the command could reach it",
                inside.display()
            )));
        }
        if let Some(c) = (self.hidden.iter())
            .chain([&self.layers])
            .filter_map(|dir| dir.to_str())
            .flat_map(str::chars)
            .find(|c| matches!(c, ',' | ':' | '\\' | '\n'))
        {
            return Err(CaptureError::NotStarted(format!(
                "shiro's state directory contains {c:?}, which overlay mount options cannot carry"
            )));
        }
        // A read-only sandbox lets git change nothing: there is nothing to look at.
        let watch_git = self.sandbox.mode != SandboxMode::ReadOnly;
        let repo = watch_git.then(|| git::Repo::at(&root)).flatten();
        let reftable = watch_git
            && repo.is_none()
            && std::fs::symlink_metadata(root.join(".git/reftable")).is_ok();
        let made = {
            let layers = self.layers.clone();
            tokio::task::spawn_blocking(move || {
                let layer = Layer::create(&layers)?;
                // The repository's state as the command finds it, the index kept in the
                // layer (hidden from the command) until the command has ended.
                let git = match repo {
                    Some(repo) => match repo.before(&layer.dir().join(GIT_KEEP_DIR)) {
                        Ok(before) => GitWatch::Watching(repo, before),
                        Err(err) => GitWatch::Unread(err.to_string()),
                    },
                    // Said, not silent: its refs are not read, so not recorded.
                    None if reftable => GitWatch::Unread(
                        "the repository keeps its refs in a reftable, which shiro does not read"
                            .to_owned(),
                    ),
                    None => GitWatch::None,
                };
                Ok::<_, std::io::Error>((layer, git))
            })
            .await
            .map_err(|err| CaptureError::Other(format!("the layer setup failed: {err}")))?
        };
        let (layer, git) = made.map_err(|err| {
            CaptureError::NotStarted(format!(
                "cannot make a layer in {}: {err}",
                self.layers.display()
            ))
        })?;
        Ok(Box::new(OverlayCapture {
            helper: self.helper.clone(),
            root,
            hidden: self.hidden.clone(),
            sandbox: self.sandbox.clone(),
            layer,
            git,
            ahead: self.ahead.clone(),
        }))
    }
}

/// Where a layer keeps the index as a command found it (see [`git::Repo::before`]).
const GIT_KEEP_DIR: &str = "git";

struct OverlayCapture {
    helper: PathBuf,
    root: PathBuf,
    hidden: Vec<PathBuf>,
    sandbox: Sandbox,
    layer: Layer,
    git: GitWatch,
    ahead: Option<Arc<Ahead>>,
}

impl OverlayCapture {
    /// The overlay helper's arguments for `program -c script`, [`HELPER_OVERLAY`] first.
    fn helper_args(&self, program: &str, script: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            HELPER_OVERLAY.into(),
            self.root.clone().into(),
            self.layer.dir().into(),
            self.hidden.len().to_string().into(),
        ];
        args.extend(self.hidden.iter().map(OsString::from));
        args.extend(self.sandbox.to_args());
        args.extend([program.into(), "-c".into(), script.into()]);
        args
    }
}

/// What a capture knows of the git repository at the workspace root.
enum GitWatch {
    /// There is none (or the sandbox lets the command change nothing).
    None,
    /// Its state before the command.
    Watching(git::Repo, git::Before),
    /// It could not be read; the command runs, and the result says so.
    Unread(String),
}

impl GitWatch {
    /// What the command moved, or a note saying why that is not known.
    async fn since(self) -> Result<Option<git::GitChange>, String> {
        match self {
            GitWatch::None => Ok(None),
            GitWatch::Unread(why) => Err(why),
            GitWatch::Watching(repo, before) => {
                tokio::task::spawn_blocking(move || repo.since(before))
                    .await
                    .map_err(|err| err.to_string())?
                    .map(|change| Some(change).filter(|change| !change.is_empty()))
                    .map_err(|err| err.to_string())
            }
        }
    }
}

#[async_trait]
impl CommandCapture for OverlayCapture {
    fn command(&self, program: &str, script: &str) -> Command {
        let mut command = Command::new(&self.helper);
        command
            .args(self.helper_args(program, script))
            .current_dir(&self.root);
        command
    }

    async fn start_ready(&self, program: &str, script: &str) -> Option<Started> {
        let ahead = self.ahead.as_ref()?;
        ahead.run(&self.helper_args(program, script)).await
    }

    fn refused_note(&self, output: &str) -> Option<String> {
        self.sandbox.refused_note(&self.root, output)
    }

    /// Kills the command's init process, PID 1 of its namespace: the kernel then kills
    /// every other process in it, and only after all of them are gone does the helper, which
    /// waits for init, end. Killing the process group instead would end the helper at once,
    /// while a process that left the group might still be writing into the layer.
    fn kill(&self) -> bool {
        let Some(pid) = self
            .layer
            .init_pid()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        // The helper has not been waited for (the caller checks), so init, its child, has
        // not been reaped by it and its id cannot have been given to another process.
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
    }

    async fn finish(
        self: Box<Self>,
        mutator: &dyn Mutator,
        ended: Ended,
    ) -> Result<Captured, CaptureError> {
        let OverlayCapture {
            layer,
            git,
            ahead,
            root,
            ..
        } = *self;
        if let Ended::Exited(status) = ended
            && status.code() == Some(SETUP_FAILED)
            && let Some(why) = layer.setup_error()
        {
            layer.discard();
            return Err(CaptureError::NotStarted(why));
        }
        // First: the refs the command moved are in `.git` already, and name these.
        let objects = objects::keep_notes(&layer, &root).await;
        // Read before the commit, which removes the layer and the index kept in it.
        let moved = git.since().await;
        let mut captured = commit_layer(mutator, layer).await?;
        captured.notes.extend(objects);
        // The next command's helper starts while this one's result is read.
        if let Some(ahead) = ahead {
            ahead.refill();
        }
        match moved {
            Ok(change) => captured.git = change,
            Err(why) => captured.notes.push(format!(
                "what the command did to the git repository could not be read ({why}); an \
                 undo restores the files, and leaves HEAD, the refs and the index as they are"
            )),
        }
        Ok(captured)
    }
}

/// How a helper ended: the code its process should exit with and, when it could not run
/// the command, what to print on its standard error (the command's output, which the model
/// reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperExit {
    /// The exit code.
    pub code: i32,
    /// What went wrong, for standard error.
    pub message: Option<String>,
}

/// Whether `args` (the process's arguments after its name) ask for a helper: their first
/// is [`HELPER_OVERLAY`], [`HELPER_READY`], [`HELPER_BACKGROUND`] or [`HELPER_INIT`].
pub fn is_helper_call(args: &[OsString]) -> bool {
    args.first()
        .and_then(|first| first.to_str())
        .is_some_and(|first| {
            [HELPER_OVERLAY, HELPER_READY, HELPER_BACKGROUND, HELPER_INIT].contains(&first)
        })
}

/// Runs the helper named by `args[0]` ([`HELPER_OVERLAY`], [`HELPER_READY`],
/// [`HELPER_BACKGROUND`] or [`HELPER_INIT`]) and says how the process should end. Call it
/// first thing in `main`, while the process has one thread.
pub fn run_helper(args: &[OsString]) -> HelperExit {
    #[cfg(target_os = "linux")]
    {
        linux::run(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        HelperExit {
            code: SETUP_FAILED,
            message: Some("overlays are a Linux feature".to_owned()),
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::io;
    use std::os::fd::{AsRawFd as _, OwnedFd};
    use std::os::unix::process::ExitStatusExt as _;
    use std::path::Path;
    use std::process::{Command, ExitStatus};

    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{MountFlags, MountPropagationFlags};
    use rustix::process::Signal;
    use rustix::thread::UnshareFlags;

    use super::{HELPER_BACKGROUND, HELPER_INIT, HELPER_OVERLAY, HelperExit, SETUP_FAILED};
    use crate::capture::layer::{INIT_PID_FILE, SETUP_ERROR_FILE, UPPER_DIR, WORK_DIR};
    use crate::capture::objects::{self, OBJECTS_UNKEPT_FILE};
    use crate::capture::ready::{HELPER_READY, take_request};
    use crate::capture::sandbox::{Sandbox, SandboxMode, linux as sandbox};

    pub(super) fn run(args: &[OsString]) -> HelperExit {
        match args.first().and_then(|a| a.to_str()) {
            Some(HELPER_OVERLAY) => overlay(&args[1..]),
            Some(HELPER_READY) => ready(),
            Some(HELPER_BACKGROUND) => background(&args[1..]),
            Some(HELPER_INIT) => init(&args[1..]),
            _ => HelperExit {
                code: SETUP_FAILED,
                message: Some("unknown helper".to_owned()),
            },
        }
    }

    /// `ROOT LAYER N HIDDEN… SANDBOX… PROGRAM ARGS…` (N hidden directories, the sandbox as
    /// `Sandbox::to_args` writes it): sets the overlay up, then runs the init helper in it.
    fn overlay(args: &[OsString]) -> HelperExit {
        let [root, layer, rest @ ..] = args else {
            return failed();
        };
        let Some((hidden, rest)) = counted(rest) else {
            return failed();
        };
        let Some((sandbox, [program, rest @ ..])) = Sandbox::from_args(rest) else {
            return failed();
        };
        let (root, layer) = (Path::new(root), Path::new(layer));
        // Held open, since the layer's path is hidden from this namespace once it is set up.
        let Some(layer_fd) = open_dir(layer) else {
            return failed();
        };
        if let Err(why) = set_up(root, layer, hidden, &sandbox) {
            // Best effort: without the file, the caller sees exit code 125 from a command.
            let _ = write_in(&layer_fd, SETUP_ERROR_FILE, &why);
            return failed();
        }
        run_init(&layer_fd, root, &sandbox, program, rest)
    }

    /// Waits for the overlay helper's arguments (see `ready.rs`), then runs as that helper;
    /// ends quietly when the input ends with none.
    fn ready() -> HelperExit {
        match take_request() {
            Ok(None) => HelperExit {
                code: 0,
                message: None,
            },
            Ok(Some(args)) => match args.split_first() {
                Some((first, rest)) if first == HELPER_OVERLAY => overlay(rest),
                _ => HelperExit {
                    code: SETUP_FAILED,
                    message: Some(
                        "the waiting helper was handed something other than a command to run over an overlay"
                            .to_owned(),
                    ),
                },
            },
            Err(err) => HelperExit {
                code: SETUP_FAILED,
                message: Some(format!("cannot read the command to run: {err}")),
            },
        }
    }

    /// `N ITEM… REST…`: the N items, and the rest.
    fn counted(args: &[OsString]) -> Option<(&[OsString], &[OsString])> {
        let (count, rest) = args.split_first()?;
        let count = count.to_str()?.parse::<usize>().ok()?;
        rest.split_at_checked(count)
    }

    fn open_dir(dir: &Path) -> Option<OwnedFd> {
        rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
    }

    /// `ROOT DIR N HIDDEN… M WRITABLE… SANDBOX… PROGRAM ARGS…`: sets up the namespaces of a
    /// background command (the workspace read-only, the M directories writable), then runs
    /// the init helper in them. `DIR` takes the helper's notes, as a layer's do.
    fn background(args: &[OsString]) -> HelperExit {
        let [root, dir, rest @ ..] = args else {
            return failed();
        };
        let Some((hidden, rest)) = counted(rest) else {
            return failed();
        };
        let Some((writable, rest)) = counted(rest) else {
            return failed();
        };
        let Some((sandbox, [program, rest @ ..])) = Sandbox::from_args(rest) else {
            return failed();
        };
        let (root, dir) = (Path::new(root), Path::new(dir));
        let Some(dir_fd) = open_dir(dir) else {
            return failed();
        };
        if let Err(why) = set_up_background(root, hidden, writable, &sandbox) {
            let _ = write_in(&dir_fd, SETUP_ERROR_FILE, &why);
            return failed();
        }
        run_init(&dir_fd, root, &sandbox, program, rest)
    }

    /// Runs `PROGRAM ARGS…` under an init process, PID 1 of the namespace this process
    /// made, says the init's id in the layer `layer_fd`, and waits for it.
    ///
    /// The init is this process forked: starting the helper binary once more would cost a
    /// whole program start (about a millisecond) on every command. A fork is only sound
    /// while the process has one thread, which is `run_helper`'s contract; should it have
    /// more, the init is started as a program of its own ([`HELPER_INIT`]) instead.
    fn run_init(
        layer_fd: &OwnedFd,
        root: &Path,
        sandbox: &Sandbox,
        program: &OsString,
        rest: &[OsString],
    ) -> HelperExit {
        let started = if single_threaded() {
            match fork() {
                Ok(Forked::Init) => return run_as_init(root, sandbox, program, rest),
                Ok(Forked::Parent(pid)) => Ok(pid),
                Err(err) => Err(err),
            }
        } else {
            start_init(root, sandbox, program, rest)
        };
        let ended = started.and_then(|pid| {
            // Stopping the command kills the init (see `OverlayCapture::kill`).
            write_in(layer_fd, INIT_PID_FILE, &pid.as_raw_nonzero().to_string())?;
            wait_for(pid)
        });
        match ended {
            Ok(code) => HelperExit {
                code,
                message: None,
            },
            Err(err) => {
                let _ = write_in(
                    layer_fd,
                    SETUP_ERROR_FILE,
                    &format!("cannot start the command's init process: {err}"),
                );
                failed()
            }
        }
    }

    /// How a helper that could not set the command up ends: the layer's `setup-error` file
    /// says why, when it could be written.
    fn failed() -> HelperExit {
        HelperExit {
            code: SETUP_FAILED,
            message: None,
        }
    }

    /// Whether this process has one thread, as `/proc/self/status` says.
    pub(super) fn single_threaded() -> bool {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .is_some_and(|count| count.trim() == "1")
        })
    }

    /// Which side of a fork this process is on.
    enum Forked {
        /// The child: the init.
        Init,
        /// The parent, with the child's id.
        Parent(rustix::process::Pid),
    }

    /// Forks this process, which must have one thread.
    #[allow(unsafe_code)]
    fn fork() -> io::Result<Forked> {
        // SAFETY: the caller checked that this process has one thread, so the child is a
        // whole copy of it: no lock is held by a thread that the child lacks, and the child
        // may run any code, as it does (the init, then `exit` from `main`).
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => Ok(Forked::Init),
            Ok(nix::unistd::ForkResult::Parent { child }) => {
                rustix::process::Pid::from_raw(child.as_raw())
                    .map(Forked::Parent)
                    .ok_or_else(|| io::Error::other("fork gave no process id"))
            }
            Err(errno) => Err(io::Error::from_raw_os_error(errno as i32)),
        }
    }

    /// Starts the init as a program of its own: this binary, with [`HELPER_INIT`].
    fn start_init(
        root: &Path,
        sandbox: &Sandbox,
        program: &OsString,
        rest: &[OsString],
    ) -> io::Result<rustix::process::Pid> {
        let child = Command::new("/proc/self/exe")
            .arg(HELPER_INIT)
            .arg(root)
            .args(sandbox.to_args())
            .arg(program)
            .args(rest)
            .spawn()?;
        // Waited for by its id (`wait_for`); the `Child` handle is dropped unwaited.
        Ok(rustix::process::Pid::from_child(&child))
    }

    /// Waits for the process `pid`, a child of this one, and says the code to end with.
    fn wait_for(pid: rustix::process::Pid) -> io::Result<i32> {
        loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
                Ok(Some((_, status))) => {
                    return Ok(status
                        .exit_status()
                        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
                        .unwrap_or(SETUP_FAILED));
                }
                Ok(None) => return Err(io::Error::other("the init could not be waited for")),
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Writes the file `name` of the layer whose directory is `dir`.
    fn write_in(dir: &OwnedFd, name: &str, text: &str) -> io::Result<()> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        let mut file = std::fs::File::from(fd);
        io::Write::write_all(&mut file, text.as_bytes())
    }

    /// `ROOT SANDBOX… PROGRAM ARGS…`: PID 1 of the command's namespace; confines itself to
    /// the sandbox, then runs the command and waits for it.
    fn init(args: &[OsString]) -> HelperExit {
        let Some((root, (sandbox, [program, rest @ ..]))) = args
            .split_first()
            .and_then(|(root, rest)| Some((root, Sandbox::from_args(rest)?)))
        else {
            return HelperExit {
                code: SETUP_FAILED,
                message: Some("no command to run".to_owned()),
            };
        };
        run_as_init(Path::new(root), &sandbox, program, rest)
    }

    /// The init's work, in PID 1 of the command's namespace: confines itself to `sandbox`,
    /// then runs `PROGRAM ARGS…` and waits for it.
    fn run_as_init(
        root: &Path,
        sandbox: &Sandbox,
        program: &OsString,
        rest: &[OsString],
    ) -> HelperExit {
        let failed = |message: String| HelperExit {
            code: SETUP_FAILED,
            message: Some(message),
        };
        // Its parent is outside its PID namespace, so it cannot check that the parent is
        // still there (`getppid` says 0); the overlay helper checked its own.
        if let Err(err) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
            return failed(format!("cannot tie the command to shiro: {err}"));
        }
        if sandbox.is_on() {
            // Before Landlock, which refuses every mount to the process it confines.
            sandbox::fresh_proc();
            if let Err(why) = sandbox::confine(sandbox, root) {
                return failed(format!("the command was not run: {why}"));
            }
        }
        let spawn = |program: &OsString| Command::new(program).args(rest).spawn();
        let child = match spawn(program) {
            Err(err) if err.kind() == io::ErrorKind::NotFound && program == "bash" => {
                spawn(&OsString::from("sh"))
            }
            other => other,
        };
        match child.and_then(|mut child| child.wait()) {
            Ok(status) => HelperExit {
                code: code_of(status),
                message: None,
            },
            Err(err) => HelperExit {
                code: 127,
                message: Some(format!("cannot run {}: {err}", program.to_string_lossy())),
            },
        }
    }

    fn code_of(status: ExitStatus) -> i32 {
        status
            .code()
            .or_else(|| status.signal().map(|signal| 128 + signal))
            .unwrap_or(SETUP_FAILED)
    }

    fn die_with_parent() -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // The parent may have died before the request: then this process was re-parented.
        if rustix::process::getppid().is_none_or(|pid| pid.as_raw_nonzero().get() == 1) {
            return Err(io::Error::other("the parent is gone"));
        }
        Ok(())
    }

    /// Leaves shiro's namespaces for new ones (mount and PID, user when not root, network
    /// when the sandbox keeps the command off it), with private mounts.
    fn enter_namespaces(sandbox: &Sandbox) -> Result<(), String> {
        die_with_parent().map_err(|err| format!("cannot tie the helper to shiro: {err}"))?;
        if sandbox.is_on() {
            sandbox::probe()?;
        }
        let euid = rustix::process::geteuid();
        let privileged = euid.is_root();
        let mut flags = UnshareFlags::NEWNS | UnshareFlags::NEWPID;
        if !privileged {
            flags |= UnshareFlags::NEWUSER;
        }
        if !sandbox.network {
            flags |= UnshareFlags::NEWNET;
        }
        let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
        // `unshare` is deprecated for `unshare_unsafe` only because of `CLONE_FILES`, which
        // would split the descriptor table between threads; it is not asked for here, and
        // this process has one thread.
        #[allow(deprecated)]
        rustix::thread::unshare(flags).map_err(|err| {
            format!(
                "cannot make a {} namespace ({err}); user namespaces may be disabled or restricted (e.g. by AppArmor)",
                if privileged { "mount" } else { "user" }
            )
        })?;
        if !privileged {
            let write = |file: &str, text: String| {
                std::fs::write(format!("/proc/self/{file}"), text)
                    .map_err(|err| format!("cannot write /proc/self/{file}: {err}"))
            };
            write("setgroups", "deny".to_owned())?;
            write("uid_map", format!("{0} {0} 1\n", uid.as_raw()))?;
            write("gid_map", format!("{0} {0} 1\n", gid.as_raw()))?;
        }
        if !sandbox.network {
            sandbox::loopback_up()?;
        }
        rustix::mount::mount_change(
            "/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )
        .map_err(|err| format!("cannot make the mounts private: {err}"))?;
        Ok(())
    }

    /// Covers each directory of `hidden` (shiro's state) with an empty read-only file
    /// system: it lists nothing and takes no write. A directory that is not there has
    /// nothing to hide, and one inside another hidden one is hidden with it (the layers lie
    /// in shiro's state directory): one mount fewer to make, and to undo as the command ends.
    fn hide(hidden: &[OsString]) -> Result<(), String> {
        let hidden: Vec<&Path> = hidden.iter().map(Path::new).collect();
        for &dir in &hidden {
            let covered = (hidden.iter()).any(|&other| other != dir && dir.starts_with(other));
            if covered || !dir.is_dir() {
                continue;
            }
            rustix::mount::mount(
                "shiro-hidden",
                dir,
                "tmpfs",
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                c"size=4k,mode=0500",
            )
            .map_err(|err| format!("cannot hide {} from the command: {err}", dir.display()))?;
        }
        Ok(())
    }

    /// A background command's namespaces: the workspace `root` bound over itself and made
    /// read-only, each directory of `writable` (inside it) bound writable over itself first,
    /// shiro's state hidden.
    fn set_up_background(
        root: &Path,
        hidden: &[OsString],
        writable: &[OsString],
        sandbox: &Sandbox,
    ) -> Result<(), String> {
        enter_namespaces(sandbox)?;
        rustix::mount::mount_bind_recursive(root, root)
            .map_err(|err| format!("cannot bind the workspace: {err}"))?;
        for dir in writable {
            let dir = Path::new(dir);
            if !dir.starts_with(root) {
                return Err(format!("{} is not in the workspace", dir.display()));
            }
            rustix::mount::mount_bind_recursive(dir, dir)
                .map_err(|err| format!("cannot keep {} writable: {err}", dir.display()))?;
        }
        sandbox::read_only_mount(root)?;
        hide(hidden)?;
        rustix::process::chdir(root).map_err(|err| format!("cannot enter the workspace: {err}"))?;
        Ok(())
    }

    fn set_up(
        root: &Path,
        layer: &Path,
        hidden: &[OsString],
        sandbox: &Sandbox,
    ) -> Result<(), String> {
        enter_namespaces(sandbox)?;
        let privileged = rustix::process::geteuid().is_root();
        // Opened before the overlay hides it, and bound over its merged view after. Only
        // `.git`: the rest of `.shiro` is the user's, captured like any file, and shiro's own
        // state lies outside the workspace.
        let through: Vec<(&str, OwnedFd)> = [".git"]
            .into_iter()
            .filter_map(|name| {
                rustix::fs::open(
                    root.join(name),
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()
                .filter(|fd| {
                    rustix::fs::fstat(fd).is_ok_and(|st| {
                        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
                        matches!(
                            kind,
                            rustix::fs::FileType::Directory | rustix::fs::FileType::RegularFile
                        )
                    })
                })
                .map(|fd| (name, fd))
            })
            .collect();
        // A renamed directory must show in the upper layer as what it is, a new directory
        // with everything in it (`mv` copies when the rename is refused), never as a
        // redirect to the lower one; metadata-only copy-ups must not exist either. Without
        // privilege, `userxattr` turns both features off and the kernel refuses the options.
        let mut data = format!(
            "lowerdir={},upperdir={},workdir={},metacopy=off,index=off",
            root.display(),
            layer.join(UPPER_DIR).display(),
            layer.join(WORK_DIR).display()
        );
        data.push_str(if privileged {
            ",redirect_dir=off"
        } else {
            ",userxattr"
        });
        // `volatile`: the overlay never flushes its upper layer, and its unmount does not
        // flush the whole file system (other programs' writes too, which can take seconds).
        // The layer is committed right after the command; a commit that a power cut
        // interrupts is discarded rather than finished (see `layer.rs`). Kernels before 5.10
        // refuse the option, and get a plain mount.
        let mount = |data: String| {
            let data = std::ffi::CString::new(data)
                .map_err(|_| "the overlay options contain a NUL byte".to_owned())?;
            rustix::mount::mount("overlay", root, "overlay", MountFlags::empty(), &*data)
                .map_err(|err| format!("cannot mount an overlay over the workspace: {err}"))
        };
        mount(format!("{data},volatile")).or_else(|_| mount(data))?;
        // The objects stay the overlay's (see `objects.rs`): their view, opened now, is bound
        // back over the real `.git` once it is bound through.
        let objects_view = if through.is_empty() {
            Ok(None)
        } else {
            objects::linux::open_view(root)
        };
        for (name, fd) in &through {
            let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
            rustix::mount::mount_bind(source.as_str(), root.join(name))
                .map_err(|err| format!("cannot pass {name} through the overlay: {err}"))?;
        }
        let objects_kept = objects_view.and_then(|view| match view {
            Some(view) => objects::linux::bind_view(root, &view),
            None => Ok(()),
        });
        if let Err(why) = objects_kept {
            // The command runs all the same, with the real objects, as it did before they
            // were kept; its result says so.
            let _ = std::fs::write(layer.join(OBJECTS_UNKEPT_FILE), why);
        }
        if sandbox.is_on() {
            sandbox::protect(root)?;
        }
        if sandbox.mode == SandboxMode::ReadOnly {
            sandbox::read_only_workspace(root)?;
        }
        // Covered last, so the overlay above still reaches its layer through the path.
        hide(hidden)?;
        // The working directory still names the workspace under the overlay.
        rustix::process::chdir(root).map_err(|err| format!("cannot enter the overlay: {err}"))?;
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::mpsc;

    /// The init is forked only by a process with one thread; one with another thread alive
    /// must be seen to have it, or the fork would copy a process whose locks another thread
    /// may hold.
    #[test]
    fn a_second_thread_is_seen() {
        let (release, wait) = mpsc::channel::<()>();
        let (started, ready) = mpsc::channel();
        let other = std::thread::spawn(move || {
            let _ = started.send(());
            let _ = wait.recv();
        });
        ready.recv().expect("the thread started");
        assert!(!super::linux::single_threaded());
        release.send(()).expect("the thread waits");
        other.join().expect("the thread ended");
    }
}
