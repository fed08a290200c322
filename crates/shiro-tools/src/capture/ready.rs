//! A helper started ahead of the command it will run (see [`super::Overlay::start_ahead`]).
//!
//! Starting the helper binary is about a millisecond of every overlay command (the
//! program's load, its dynamic linking, Rust's start), most of it spent after the process
//! exists. A runner that serves many commands starts the next command's helper as the last
//! one finishes, while the model reads its result, with [`HELPER_READY`]: the helper starts,
//! then waits on its standard input. The next command hands it the arguments the overlay
//! helper takes ([`super::HELPER_OVERLAY`] and the rest), NUL-separated, and closes the
//! pipe; the helper swaps `/dev/null` in as its standard input and runs as that helper. Its
//! standard output and error are already the pipe the command's output is read from, and it
//! leads its own process group, as a helper started for the command would.
//!
//! The helper is started on a task of its own, so that the command that finishes does not
//! wait for the start (the kernel's part of it, about half a millisecond); the next command
//! waits for that task if it has not ended yet. A waiting helper that shiro leaves (or that
//! is dropped with its runner) reads the end of its input with nothing in it and exits, or
//! is killed on drop; one that has ended by the time it is wanted is not used, and the
//! command starts its own.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::AsyncWriteExt as _;
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdin, Command};
use tokio::task::JoinHandle;

use super::Started;

/// The first argument that runs the embedding binary as a helper that waits for its
/// command's arguments on its standard input.
pub const HELPER_READY: &str = "__shiro-bash-ready";

/// The helper waiting for the next command of one runner, if any.
#[derive(Debug)]
pub(super) struct Ahead {
    helper: Arc<PathBuf>,
    slot: Mutex<Slot>,
}

/// Where the next command's helper stands.
#[derive(Debug, Default)]
enum Slot {
    /// None was started, or the last one was taken.
    #[default]
    Empty,
    /// One is being started; the task gives it, or `None` when it could not start.
    Starting(JoinHandle<Option<Waiting>>),
    /// One waits.
    Ready(Box<Waiting>),
}

/// A helper started with [`HELPER_READY`].
#[derive(Debug)]
struct Waiting {
    child: Child,
    request: ChildStdin,
    output: pipe::Receiver,
}

impl Ahead {
    /// Helpers started from the binary at `helper`.
    pub(super) fn new(helper: PathBuf) -> Self {
        Self {
            helper: Arc::new(helper),
            slot: Mutex::new(Slot::Empty),
        }
    }

    /// Starts a helper, on a task of the current Tokio runtime, to wait for the next
    /// command, unless one waits or is starting already. One that cannot be started is no
    /// error: the next command starts its own, as without this. Outside a runtime it does
    /// nothing.
    pub(super) fn refill(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut slot = lock(&self.slot);
        let busy = match &mut *slot {
            Slot::Starting(_) => true,
            Slot::Ready(waiting) => matches!(waiting.child.try_wait(), Ok(None)),
            Slot::Empty => false,
        };
        if busy {
            return;
        }
        let helper = Arc::clone(&self.helper);
        *slot = Slot::Starting(runtime.spawn(async move { start(&helper).ok() }));
    }

    /// The helper that waits, once it has started; `None` when none waits.
    async fn take(&self) -> Option<Waiting> {
        let slot = std::mem::take(&mut *lock(&self.slot));
        let mut waiting = match slot {
            Slot::Empty => None,
            Slot::Starting(task) => task.await.ok().flatten(),
            Slot::Ready(waiting) => Some(*waiting),
        }?;
        matches!(waiting.child.try_wait(), Ok(None)).then_some(waiting)
    }

    /// The id of the helper that waits for the next command, once it has started; `None`
    /// when none waits. It stays waiting.
    pub(super) async fn waiting_id(&self) -> Option<u32> {
        let waiting = self.take().await?;
        let id = waiting.child.id();
        let mut slot = lock(&self.slot);
        // A refill while this one was out found the slot empty and started another: that one
        // is dropped (killed), this one kept.
        *slot = Slot::Ready(Box::new(waiting));
        id
    }

    /// Hands the waiting helper `args`, the overlay helper's arguments, and returns it as
    /// the command's process. `None` when no helper waits, when the one that waited has
    /// ended, or when it cannot take the arguments (one holds a NUL byte, which no program
    /// argument can, or the pipe failed): the caller then starts the helper itself, and
    /// gets the error a NUL byte causes there.
    pub(super) async fn run(&self, args: &[OsString]) -> Option<Started> {
        if args.iter().any(|arg| arg.as_bytes().contains(&0)) {
            return None;
        }
        let Waiting {
            child,
            mut request,
            output,
        } = self.take().await?;
        let mut bytes = Vec::with_capacity(args.iter().map(|arg| arg.len() + 1).sum());
        for arg in args {
            bytes.extend_from_slice(arg.as_bytes());
            bytes.push(0);
        }
        // Dropped on failure: the helper is killed with its handle.
        request.write_all(&bytes).await.ok()?;
        // The end of its input tells the helper the request is whole.
        drop(request);
        Some(Started { child, output })
    }
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // What it guards stays whole if a holder panicked: a value swapped in one step.
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts the helper at `helper` to wait, its standard output and error one new pipe.
fn start(helper: &Path) -> io::Result<Waiting> {
    let (writer, output) = pipe::pipe()?;
    let writer = writer.into_blocking_fd()?;
    let mut child = Command::new(helper)
        .arg(HELPER_READY)
        // It holds no directory of the workspace while it waits; the overlay helper then
        // enters the workspace itself.
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        // Its own process group, as the bash tool starts a command's helper.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let request = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("the helper was started without its input"))?;
    Ok(Waiting {
        child,
        request,
        output,
    })
}

/// In a helper started with [`HELPER_READY`]: reads the arguments it is handed up to the
/// end of its standard input, then makes `/dev/null` its standard input, as the command's.
/// `None` when the input ended with nothing in it: the runner went away, and there is
/// nothing to run.
#[cfg(target_os = "linux")]
pub(super) fn take_request() -> io::Result<Option<Vec<OsString>>> {
    let mut request = Vec::new();
    io::Read::read_to_end(&mut io::stdin().lock(), &mut request)?;
    if request.is_empty() {
        return Ok(None);
    }
    // Every argument ends with a NUL; a request cut short (its writer died) does not.
    let Some(whole) = request.strip_suffix(&[0]) else {
        return Err(io::Error::other("the request was cut short"));
    };
    let args = whole
        .split(|&byte| byte == 0)
        .map(|arg| OsString::from_vec(arg.to_vec()))
        .collect();
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(Some(args))
}
