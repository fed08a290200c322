//! Background commands: a dev server, a watcher or a test loop that keeps running after the
//! call that started it, with its output read later (`bash_output`) and its end asked for
//! (`bash_kill`). See `docs/undo.md`, "Background commands", for why they run as they do.
//!
//! An overlay is no place for them: overlayfs leaves changes to its lower layer undefined
//! while it is mounted, and a server must see the agent's edits as they happen. So a
//! background command runs on the real workspace, in a mount namespace of its own where
//!
//! - the workspace is **read-only**, except the directories `.gitignore` leaves out that
//!   exist when it starts and hold nothing git tracks (build outputs, caches: `target/`,
//!   `node_modules/`; see [`super::writable`]), which are bound writable over themselves;
//!   every other write in the workspace is refused by the kernel (`Read-only file system`),
//!   and the refusal is named in what the model reads;
//! - what it changes in those writable directories is found by stat listings of them, taken
//!   when it starts and again each time it is asked ([`Background::take_changes`]): each path
//!   is named as changed by a background command and not restorable, in the tool result, the
//!   turn's record, `shiro log` and undo;
//! - it is PID 1's child in a PID namespace of its own, and the helpers that set it up die
//!   with shiro (the parent-death signal), so whatever ends the session (an exit, a crash, a
//!   SIGKILL) ends every process it started.
//!
//! The sandbox applies as to any command, with the workspace read-only and the writable
//! directories added to its writable paths.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::{Notify, watch};

use super::detect::{Listing, Seen, changed, list};
use super::layer::Layer;
use super::overlay::{HELPER_BACKGROUND, SETUP_FAILED};
use super::sandbox::{Sandbox, SandboxMode};
use super::writable::{self, Writable};
use crate::path::WorkspacePath;
use read::Buffer;

mod read;

/// How many background commands may run at once unless configured otherwise.
pub const BACKGROUND_DEFAULT_LIMIT: usize = 4;
/// How long output is still read after the command has ended.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How background commands are run.
#[derive(Debug, Clone)]
pub enum Launch {
    /// Through the helper at this path (see [`super::run_helper`]), in namespaces of their
    /// own, with the workspace read-only but for its ignored directories; `layers` is where
    /// each command gets a small directory for its helper's notes, `hidden` the directories
    /// it must not see (shiro's state), `sandbox` what it may write outside the workspace.
    Helper {
        /// The helper binary.
        helper: PathBuf,
        /// The layers directory (outside every workspace).
        layers: PathBuf,
        /// Directories hidden from the command.
        hidden: Vec<PathBuf>,
        /// The sandbox of `[bash] sandbox`.
        sandbox: Sandbox,
    },
    /// Directly, in a process group of their own, nothing protected or watched (capture
    /// off). A crash of shiro cannot take them with it.
    Direct,
}

/// The background commands of one session. Dropping it kills every command still running.
#[derive(Debug)]
pub struct Background {
    launch: Launch,
    limit: usize,
    jobs: Mutex<Jobs>,
    /// Ticks each time a command starts or ends.
    changes: Arc<watch::Sender<u64>>,
}

#[derive(Debug, Default)]
struct Jobs {
    next: u32,
    list: Vec<Arc<Job>>,
}

/// Why a background command could not be started, or asked about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackgroundError(pub String);

/// One background command.
#[derive(Debug)]
pub struct Job {
    id: String,
    command: String,
    started: Instant,
    /// The workspace-relative directories it may write in, watched.
    writable: Vec<WorkspacePath>,
    root: PathBuf,
    state: Mutex<JobState>,
    stop: Notify,
    ended: watch::Sender<bool>,
    /// How many bytes of output have been taken from the pipe so far (the buffer's total),
    /// for a read to wait on.
    taken: watch::Sender<u64>,
    /// Its registry's [`Background::changes`].
    changes: Arc<watch::Sender<u64>>,
}

#[derive(Debug)]
struct JobState {
    output: Buffer,
    status: Status,
    /// The started process (the helper, or the shell when direct), as long as it has not
    /// been waited for; signals sent through it never reach a reused id.
    process: Option<Arc<OwnedFd>>,
    /// Its process group (direct) or its namespace's init (helper), while it runs.
    kill: Option<Kill>,
    /// The listing of the writable directories as last reported.
    seen: Listing,
    /// Whether its end was reported by [`Background::take_changes`] yet.
    swept: bool,
    /// A second descriptor of its output pipe's read end, to see what waits in the pipe;
    /// closed once the output has been read to its end.
    pipe: Option<OwnedFd>,
}

#[derive(Debug, Clone)]
enum Kill {
    Group(Pid),
    Init(PathBuf),
}

/// Where a background command stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Still running.
    Running,
    /// It ended with this exit code.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
    /// `bash_kill` or the end of the session stopped it.
    Killed,
    /// It could not be started; why.
    Failed(String),
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Running => f.write_str("running"),
            Status::Exited(code) => write!(f, "exited with code {code}"),
            Status::Signaled(signal) => write!(f, "killed by signal {signal}"),
            Status::Killed => f.write_str("killed"),
            Status::Failed(why) => write!(f, "failed to start: {why}"),
        }
    }
}

/// A background command as `/bashes` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSummary {
    /// Its id (`b1`, `b2`, …).
    pub id: String,
    /// The command line.
    pub command: String,
    /// How long ago it started.
    pub age: Duration,
    /// Where it stands.
    pub status: Status,
    /// The last line of its output, if any.
    pub last_line: Option<String>,
}

/// What a read of a command's output gives.
#[derive(Debug, Clone)]
pub struct Read {
    /// The new output, filtered and bounded.
    pub text: String,
    /// Where it stands.
    pub status: Status,
}

impl Background {
    /// The background commands of a session, launched as `launch` says, at most `limit` at
    /// once.
    pub fn new(launch: Launch, limit: usize) -> Self {
        Self {
            launch,
            limit,
            jobs: Mutex::new(Jobs::default()),
            changes: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Changes each time a command starts or ends (by itself or killed): the moment to look
    /// at [`Background::running`] again, e.g. for a status line.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Another session's registry: launched and limited as this one, with no commands (the
    /// limit counts each registry's own).
    pub fn fresh(&self) -> Self {
        Self::new(self.launch.clone(), self.limit)
    }

    /// Starts `command` with `bash -c` in `root`; a `read_only` session's command may write
    /// nowhere in the workspace. Returns the job once it has started.
    pub async fn start(
        &self,
        root: &Path,
        command: &str,
        read_only: bool,
    ) -> Result<Arc<Job>, BackgroundError> {
        let running = lock(&self.jobs)
            .list
            .iter()
            .filter(|job| job.status() == Status::Running)
            .count();
        if running >= self.limit {
            return Err(BackgroundError(limit_reached(running)));
        }
        // Found, and listed, before the command starts, so that nothing it writes is in the
        // listing.
        let Writable {
            dirs: writable,
            mut notes,
            seen,
        } = match (&self.launch, read_only) {
            (Launch::Helper { .. }, false) => {
                let root = root.to_path_buf();
                tokio::task::spawn_blocking(move || writable::writable(&root))
                    .await
                    .map_err(|err| {
                        BackgroundError(format!("listing the workspace failed: {err}"))
                    })?
            }
            _ => Writable::default(),
        };
        let (writer, reader) = tokio::net::unix::pipe::pipe()
            .map_err(|err| BackgroundError(format!("cannot make a pipe: {err}")))?;
        let writer = writer
            .into_blocking_fd()
            .map_err(|err| BackgroundError(format!("cannot make a pipe: {err}")))?;
        let (mut process, layer) = match &self.launch {
            Launch::Helper {
                helper,
                layers,
                hidden,
                sandbox,
            } => {
                let layer = {
                    let dir = layers.clone();
                    tokio::task::spawn_blocking(move || Layer::create(&dir))
                        .await
                        .map_err(|err| BackgroundError(err.to_string()))?
                        .map_err(|err| {
                            BackgroundError(format!(
                                "cannot make a directory in {}: {err}",
                                layers.display()
                            ))
                        })?
                };
                let sandbox = confined(sandbox, root, &writable);
                let mut process = Command::new(helper);
                process
                    .arg(HELPER_BACKGROUND)
                    .arg(root)
                    .arg(layer.dir())
                    .arg(hidden.len().to_string())
                    .args(hidden)
                    .arg(writable.len().to_string())
                    .args(writable.iter().map(|dir| root.join(dir.as_str())))
                    .args(sandbox.to_args())
                    .arg("bash")
                    .arg("-c")
                    .arg(command);
                (process, Some(layer))
            }
            Launch::Direct => {
                let mut process = Command::new("bash");
                process.arg("-c").arg(command);
                (process, None)
            }
        };
        let spawned = process
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(clone(&writer)?)
            .stderr(clone(&writer)?)
            .process_group(0)
            .kill_on_drop(true)
            .spawn();
        drop(writer);
        let child = spawned
            .map_err(|err| BackgroundError(format!("could not start the command: {err}")))?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let pidfd = pid
            .and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            })
            .map(Arc::new);
        let kill = match &layer {
            Some(layer) => Some(Kill::Init(layer.dir().to_path_buf())),
            None => pid.map(Kill::Group),
        };
        let id = {
            let mut jobs = lock(&self.jobs);
            jobs.next += 1;
            format!("b{}", jobs.next)
        };
        let job = Arc::new(Job {
            id,
            command: command.to_owned(),
            started: Instant::now(),
            writable,
            root: root.to_path_buf(),
            state: Mutex::new(JobState {
                output: Buffer::default(),
                status: Status::Running,
                process: pidfd,
                kill,
                seen,
                swept: false,
                pipe: rustix::io::dup(&reader).ok(),
            }),
            stop: Notify::new(),
            ended: watch::Sender::new(false),
            taken: watch::Sender::new(0),
            changes: Arc::clone(&self.changes),
        });
        lock(&self.jobs).list.push(Arc::clone(&job));
        job.changed();
        tokio::spawn(supervise(Arc::clone(&job), child, reader, layer));
        for note in notes.drain(..) {
            job.push(format!("[note: {note}]\n").as_bytes());
        }
        Ok(job)
    }

    /// Gives the next command an id after `b{highest}`: a resumed conversation's ids keep
    /// naming the commands it started, which are gone.
    pub fn continue_after(&self, highest: u32) {
        let mut jobs = lock(&self.jobs);
        jobs.next = jobs.next.max(highest);
    }

    /// Whether it keeps the workspace safe from its commands and names what they change
    /// (through the helper), rather than running them directly (capture off).
    pub fn watches(&self) -> bool {
        matches!(self.launch, Launch::Helper { .. })
    }

    /// The job called `id`.
    pub fn job(&self, id: &str) -> Result<Arc<Job>, BackgroundError> {
        let jobs = lock(&self.jobs);
        jobs.list
            .iter()
            .find(|job| job.id == id)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = jobs.list.iter().map(|job| job.id.as_str()).collect();
                BackgroundError(if known.is_empty() {
                    format!("there is no background command {id:?}; none was started")
                } else {
                    format!(
                        "there is no background command {id:?}; there are {}",
                        known.join(", ")
                    )
                })
            })
    }

    /// Every command of the session, oldest first.
    pub fn list(&self) -> Vec<JobSummary> {
        lock(&self.jobs)
            .list
            .iter()
            .map(|job| job.summary())
            .collect()
    }

    /// How many are running.
    pub fn running(&self) -> usize {
        lock(&self.jobs)
            .list
            .iter()
            .filter(|job| job.status() == Status::Running)
            .count()
    }

    /// Stops every command still running and waits (a few seconds at most) until each has
    /// ended; returns those it stopped.
    pub async fn stop_all(&self) -> Vec<JobSummary> {
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).list.clone();
        let mut stopped = Vec::new();
        for job in jobs {
            if job.status() == Status::Running {
                stopped.push(job.summary());
                job.kill().await;
            }
        }
        stopped
    }

    /// The paths in the workspace the commands changed since this was last asked (or since
    /// they started), sorted: each is changed by a background command and cannot be
    /// restored. Commands that ended are asked once more, then no longer.
    pub async fn take_changes(&self) -> Vec<WorkspacePath> {
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).list.clone();
        let mut all = BTreeSet::new();
        for job in jobs {
            all.extend(job.take_changes().await);
        }
        all.into_iter().collect()
    }

    /// Takes the paths the agent's own tools just changed (recorded, undoable) into what
    /// the commands were last seen to have, so that they are not named as the commands'.
    pub async fn recorded(&self, paths: &[WorkspacePath]) {
        if paths.is_empty() {
            return;
        }
        let jobs: Vec<Arc<Job>> = lock(&self.jobs).list.clone();
        for job in jobs {
            job.recorded(paths).await;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for job in &lock(&self.jobs).list {
            job.kill_now();
        }
    }
}

impl Job {
    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The directories of the workspace it may write in.
    pub fn writable(&self) -> &[WorkspacePath] {
        &self.writable
    }

    /// Where it stands.
    pub fn status(&self) -> Status {
        lock(&self.state).status.clone()
    }

    /// Waits until it ends or `wait` has passed; returns whether it ended.
    pub async fn settle(&self, wait: Duration) -> bool {
        let mut ended = self.ended.subscribe();
        tokio::time::timeout(wait, ended.wait_for(|ended| *ended))
            .await
            .is_ok()
    }

    /// The output since the last read, its lines kept only where `filter` matches them,
    /// bounded like a foreground command's, and where the command stands. Everything the
    /// command wrote before the call is in it.
    pub async fn read(&self, filter: Option<&regex::Regex>) -> Read {
        self.caught_up().await;
        let mut state = lock(&self.state);
        let unread = state.output.unread();
        let status = state.status.clone();
        drop(state);
        Read {
            text: read::render(&unread, filter),
            status,
        }
    }

    /// The end of its output, at most `max` bytes from a line start, without marking
    /// anything read (what a person looks at does not take it from the model).
    pub fn tail(&self, max: usize) -> String {
        lock(&self.state).output.end(max)
    }

    /// Waits until the bytes that were in the output pipe when it was called have been
    /// taken into the buffer (the task that reads the pipe may not have run yet), or the
    /// command has ended; a few seconds at most, should that task be starved.
    async fn caught_up(&self) {
        const AT_MOST: Duration = Duration::from_secs(2);
        let pending = (lock(&self.state).pipe.as_ref())
            .map_or(0, |pipe| rustix::io::ioctl_fionread(pipe).unwrap_or(0));
        if pending == 0 {
            return;
        }
        let target = lock(&self.state).output.total() + pending;
        let (mut taken, mut ended) = (self.taken.subscribe(), self.ended.subscribe());
        let caught_up = async {
            tokio::select! {
                _ = taken.wait_for(|total| *total >= target) => {}
                _ = ended.wait_for(|ended| *ended) => {}
            }
        };
        let _ = tokio::time::timeout(AT_MOST, caught_up).await;
    }

    /// Tells its registry's watchers that it started or ended.
    fn changed(&self) {
        self.changes
            .send_modify(|tick| *tick = tick.wrapping_add(1));
    }

    /// Stops it and everything it started, and waits (a few seconds at most) for its end.
    pub async fn kill(&self) {
        {
            let mut state = lock(&self.state);
            if state.status == Status::Running {
                state.status = Status::Killed;
            }
        }
        self.changed();
        self.kill_now();
        self.stop.notify_one();
        self.settle(DRAIN_GRACE * 2).await;
    }

    /// Sends the signals that end it, at once.
    fn kill_now(&self) {
        let state = lock(&self.state);
        match &state.kill {
            Some(Kill::Group(pid)) => {
                let _ = rustix::process::kill_process_group(*pid, Signal::KILL);
            }
            Some(Kill::Init(layer)) => {
                // Init is PID 1 of the command's namespace: the kernel kills the rest with
                // it. The helper, which waits for init, has not been waited for by us, so
                // init's id is still its own.
                let init = std::fs::read_to_string(layer.join(super::layer::INIT_PID_FILE))
                    .ok()
                    .and_then(|pid| pid.trim().parse::<i32>().ok())
                    .and_then(Pid::from_raw);
                if let Some(init) = init {
                    let _ = rustix::process::kill_process(init, Signal::KILL);
                }
                // The helper too: init dies with it (its parent-death signal), which covers
                // the moment before init has said its id.
                if let Some(process) = &state.process {
                    let _ = rustix::process::pidfd_send_signal(&**process, Signal::KILL);
                }
            }
            None => {}
        }
    }

    fn push(&self, bytes: &[u8]) {
        let total = {
            let mut state = lock(&self.state);
            state.output.push(bytes);
            state.output.total()
        };
        self.taken.send_replace(total);
    }

    fn summary(&self) -> JobSummary {
        let state = lock(&self.state);
        JobSummary {
            id: self.id.clone(),
            command: self.command.clone(),
            age: self.started.elapsed(),
            status: state.status.clone(),
            last_line: state.output.last_line(),
        }
    }

    async fn take_changes(&self) -> Vec<WorkspacePath> {
        {
            let mut state = lock(&self.state);
            if self.writable.is_empty() || state.swept {
                return Vec::new();
            }
            if state.status != Status::Running {
                state.swept = true;
            }
        }
        let (root, writable) = (self.root.clone(), self.writable.clone());
        let now = tokio::task::spawn_blocking(move || listing(&root, &writable))
            .await
            .unwrap_or_default();
        let mut state = lock(&self.state);
        let paths = changed(&state.seen, &now)
            .into_iter()
            .filter_map(|path| {
                path.to_str()
                    .and_then(|p| WorkspacePath::from_relative(p).ok())
            })
            .collect();
        state.seen = now;
        paths
    }

    async fn recorded(&self, paths: &[WorkspacePath]) {
        let inside: Vec<WorkspacePath> = paths
            .iter()
            .filter(|path| {
                (self.writable.iter()).any(|dir| Path::new(path.as_str()).starts_with(dir.as_str()))
            })
            .cloned()
            .collect();
        if inside.is_empty() {
            return;
        }
        let root = self.root.clone();
        let fresh = tokio::task::spawn_blocking(move || {
            let mut fresh = BTreeMap::new();
            for path in inside {
                let rel = PathBuf::from(path.as_str());
                let meta = std::fs::symlink_metadata(root.join(&rel));
                let entry = meta.as_ref().ok().map(Seen::of);
                let mut below = Listing::new();
                if entry.as_ref().is_some_and(Seen::is_dir) {
                    list(&root, &rel, &mut below);
                }
                fresh.insert(rel, (entry, below));
            }
            fresh
        })
        .await
        .unwrap_or_default();
        let mut state = lock(&self.state);
        for (rel, (entry, below)) in fresh {
            state.seen.retain(|path, _| !path.starts_with(&rel));
            if let Some(entry) = entry {
                state.seen.insert(rel, entry);
            }
            state.seen.extend(below);
        }
    }
}

/// The sandbox a background command's init confines it to: the workspace read-only, its
/// writable directories added to the writable paths.
fn confined(sandbox: &Sandbox, root: &Path, writable: &[WorkspacePath]) -> Sandbox {
    if !sandbox.is_on() {
        return sandbox.clone();
    }
    Sandbox {
        mode: SandboxMode::ReadOnly,
        ..sandbox.clone()
    }
    .writable(writable.iter().map(|dir| root.join(dir.as_str())))
}

fn clone(fd: &OwnedFd) -> Result<OwnedFd, BackgroundError> {
    fd.try_clone()
        .map_err(|err| BackgroundError(format!("cannot share the output pipe: {err}")))
}

/// Reads the command's output until it has ended, and says how it ended.
async fn supervise(
    job: Arc<Job>,
    mut child: Child,
    mut reader: tokio::net::unix::pipe::Receiver,
    layer: Option<Layer>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut eof = false;
    let mut exited: Option<std::io::Result<ExitStatus>> = None;
    let drain = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(drain);
    while !(eof && exited.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => job.push(&buf[..n]),
            },
            status = child.wait(), if exited.is_none() => {
                // What it left in its group (direct) dies with it, as in the foreground.
                if let Some(Kill::Group(pid)) = &lock(&job.state).kill {
                    let _ = rustix::process::kill_process_group(*pid, Signal::KILL);
                }
                {
                    let mut state = lock(&job.state);
                    state.kill = None;
                    state.process = None;
                }
                exited = Some(status);
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            },
            () = job.stop.notified(), if exited.is_none() => job.kill_now(),
            () = &mut drain, if exited.is_some() => break,
        }
    }
    let setup_error = layer.as_ref().and_then(|layer| layer.setup_error());
    if let Some(layer) = layer {
        let _ = tokio::task::spawn_blocking(move || layer.discard()).await;
    }
    let status = match exited {
        Some(Ok(status)) if status.code() == Some(SETUP_FAILED) && setup_error.is_some() => {
            Status::Failed(setup_error.unwrap_or_default())
        }
        Some(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Status::Exited(code),
            (None, Some(signal)) => Status::Signaled(signal),
            (None, None) => Status::Exited(-1),
        },
        Some(Err(err)) => Status::Failed(format!("lost track of it: {err}")),
        None => Status::Killed,
    };
    {
        let mut state = lock(&job.state);
        if state.status == Status::Running || matches!(status, Status::Failed(_)) {
            state.status = status;
        }
        state.pipe = None;
    }
    job.ended.send_replace(true);
    job.changed();
}

/// The listing of the directories `writable` of `root`, with the directories themselves.
fn listing(root: &Path, writable: &[WorkspacePath]) -> Listing {
    let mut out = Listing::new();
    for dir in writable {
        let rel = PathBuf::from(dir.as_str());
        if let Ok(meta) = std::fs::symlink_metadata(root.join(&rel)) {
            out.insert(rel.clone(), Seen::of(&meta));
            list(root, &rel, &mut out);
        }
    }
    out
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the state itself is intact.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Why a command cannot start while `running` commands are, the most allowed.
fn limit_reached(running: usize) -> String {
    let running = match running {
        1 => "1 background command is running".to_owned(),
        n => format!("{n} background commands are running"),
    };
    format!(
        "{running}, the most allowed at once ([bash] background_limit); stop one with \
         bash_kill first"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_says_how_many_run() {
        insta::assert_snapshot!(format!("{}\n{}", limit_reached(1), limit_reached(4)), @r"
        1 background command is running, the most allowed at once ([bash] background_limit); stop one with bash_kill first
        4 background commands are running, the most allowed at once ([bash] background_limit); stop one with bash_kill first
        ");
    }
}
