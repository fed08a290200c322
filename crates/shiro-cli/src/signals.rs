//! SIGINT and SIGTERM, caught from the start of the process.
//!
//! A thread of its own, with its own small runtime, listens for both signals. It registers
//! them before [`Signals::install`] returns, so no signal reaches a default handler (which
//! would kill the process part-way through a change) however long the command then runs
//! without yielding: undo, redo and apply-patch do their file operations inline on a
//! current-thread runtime, so a handler that registered when a future was first polled
//! could come too late, or never. What a signal does depends on the [`Handling`] the
//! command has set; the decisions are in `docs/cli.md`, "Signals".
//!
//! This module prints to stderr and exits the process on a second signal: it is part of
//! the binary's terminal handling, like `main.rs`.
#![allow(clippy::print_stderr)]

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// The exit code of a command stopped by a signal (128 + SIGINT), whichever signal it was.
pub const INTERRUPTED: u8 = 130;

/// What the next signal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Any signal stops the process at once: nothing is under way that a stop could cut
    /// in half (read-only commands), or the undo log covers it like a crash (`shiro -p`).
    Stop,
    /// The first signal is handed to the command through [`Signals::cancelled`], which
    /// drops the work (a `bash` call, whose process group is killed on drop; an agent
    /// turn); a second one before that is acknowledged stops the process at once.
    Cancel,
    /// The first signal is noted ([`Signals::interrupted`]) and the command finishes the
    /// change it is making; a second one stops the process at once, leaving the undo log's
    /// journal to finish or roll back what was under way on the next open.
    Finish,
    /// Between the agent's turns: SIGINT is ignored (at a terminal the line editor reads
    /// Ctrl-C as a key), SIGTERM stops the process.
    Idle,
}

/// The signal handling of this process. Clones share it.
#[derive(Debug, Clone)]
pub struct Signals {
    shared: Arc<Shared>,
    /// Bumped each time a signal is handed to the command ([`Handling::Cancel`]).
    handed: watch::Receiver<u64>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    hand: watch::Sender<u64>,
    /// Bumped by every first signal under [`Handling::Cancel`] or [`Handling::Finish`]: a
    /// running `bash` command stops on it and still commits what it changed.
    stop: watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    handling: Handling,
    /// A signal came that the command has not acknowledged yet.
    pending: bool,
    /// SIGTERM came: the session ends once the running turn is finished.
    terminated: bool,
}

impl State {
    fn handed_over(&self) -> bool {
        self.pending && self.handling == Handling::Cancel
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Interrupt,
    Terminate,
}

/// Signals that never come, for code that runs without a terminal (the demo's agent, tests):
/// the process keeps its default handlers.
impl Default for Signals {
    fn default() -> Self {
        Self::with(Handling::Stop)
    }
}

impl Signals {
    fn with(handling: Handling) -> Self {
        let (hand, handed) = watch::channel(0);
        let (stop, _) = watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    handling,
                    pending: false,
                    terminated: false,
                }),
                hand,
                stop,
            }),
            handed,
        }
    }

    /// Catches SIGINT and SIGTERM from now on, handled as `handling` says until changed.
    /// Returns once both are registered.
    pub fn install(handling: Handling) -> std::io::Result<Self> {
        let signals = Self::with(handling);
        let shared = Arc::clone(&signals.shared);
        let (ready, registered) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("shiro-signals".to_owned())
            .spawn(move || listen(&shared, &ready))?;
        registered.recv().map_err(|_| {
            std::io::Error::other("the signal thread ended before it registered the signals")
        })??;
        Ok(signals)
    }

    /// Sets what the next signal does, and forgets any signal not acknowledged yet.
    pub fn set(&self, handling: Handling) {
        let mut state = self.shared.lock();
        state.handling = handling;
        state.pending = false;
    }

    /// Changes each time a signal asks the running work to stop (the first signal under
    /// [`Handling::Cancel`] or [`Handling::Finish`]); the `bash` tool watches it.
    pub fn stops(&self) -> watch::Receiver<u64> {
        self.shared.stop.subscribe()
    }

    /// Acts as if Ctrl-C was pressed: the terminal UI reads Ctrl-C and Esc as keys, and
    /// stops the running turn through this.
    pub fn interrupt(&self) {
        self.shared.on_signal(Kind::Interrupt);
    }

    /// Whether SIGTERM came: the session should end once its running turn is finished.
    pub fn terminated(&self) -> bool {
        self.shared.lock().terminated
    }

    /// Whether a signal came since the handling was last set.
    pub fn interrupted(&self) -> bool {
        self.shared.lock().pending
    }

    /// Resolves when a signal comes under [`Handling::Cancel`] (or has come already since
    /// the handling was set).
    pub async fn cancelled(&self) {
        let mut handed = self.handed.clone();
        // Marked before the check, so a signal that lands between the two still wakes us.
        handed.mark_unchanged();
        if self.shared.lock().handed_over() {
            return;
        }
        if handed.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the state itself is intact.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn on_signal(&self, kind: Kind) {
        let mut state = self.lock();
        if let Kind::Terminate = kind {
            state.terminated = true;
        }
        match (state.handling, state.pending, kind) {
            (Handling::Idle, _, Kind::Interrupt) => {}
            (Handling::Stop | Handling::Idle, _, _) => {
                // The terminal's modes first, so the message reads as a line.
                crate::tui::term::restore();
                eprintln!("shiro: interrupted");
                std::process::exit(i32::from(INTERRUPTED));
            }
            (Handling::Cancel | Handling::Finish, true, _) => {
                crate::tui::term::restore();
                eprintln!(
                    "shiro: stopped at once; the change may be partly made: the next shiro command completes an undo or redo that was under way, and records a turn that was under way so that `shiro undo` reverts it"
                );
                std::process::exit(i32::from(INTERRUPTED));
            }
            (Handling::Cancel, false, _) => {
                state.pending = true;
                self.stop.send_modify(|n| *n += 1);
                self.hand.send_modify(|n| *n += 1);
            }
            (Handling::Finish, false, _) => {
                state.pending = true;
                self.stop.send_modify(|n| *n += 1);
                eprintln!(
                    "shiro: interrupted; finishing the current change so the workspace and the undo log stay consistent (interrupt again to stop at once)"
                );
            }
        }
    }
}

/// The signal thread: registers both signals, says so through `ready`, then handles them
/// until the process ends.
fn listen(shared: &Shared, ready: &std::sync::mpsc::SyncSender<std::io::Result<()>>) {
    let registered = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .and_then(|runtime| {
            // `signal` needs a runtime's context, and registers the handler right away.
            let entered = runtime.enter();
            let interrupt = signal(SignalKind::interrupt())?;
            let terminate = signal(SignalKind::terminate())?;
            drop(entered);
            Ok((runtime, interrupt, terminate))
        });
    let (runtime, mut interrupt, mut terminate) = match registered {
        Ok(parts) => {
            let _ = ready.send(Ok(()));
            parts
        }
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    runtime.block_on(async {
        loop {
            let kind = tokio::select! {
                got = interrupt.recv() => got.map(|()| Kind::Interrupt),
                got = terminate.recv() => got.map(|()| Kind::Terminate),
            };
            match kind {
                Some(kind) => shared.on_signal(kind),
                // The runtime is shutting down: the process is ending.
                None => return,
            }
        }
    });
}
