//! What SIGINT and SIGTERM (SIGHUP counts as SIGTERM) do to the running work: the
//! [`Handling`] a command or a turn sets, and what it is told ([`Signals::cancelled`],
//! [`Signals::interrupted`], [`Signals::stops`]). The decisions are in `docs/cli.md`,
//! "Signals".
//!
//! The signals themselves are caught by the binary (`shiro-cli`'s `signals.rs`), which
//! delivers each one here ([`Signals::deliver`]) and is handed back what the process must do
//! beyond that — print a notice, or stop at once ([`Verdict`]) — through the hook it gave
//! [`Signals::with_hook`]. This module never prints or exits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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

struct Shared {
    state: Mutex<State>,
    /// What the process does beyond telling the work (the binary's printing and exiting).
    hook: Option<Hook>,
    hand: watch::Sender<u64>,
    /// Bumped by every first signal under [`Handling::Cancel`] or [`Handling::Finish`]: a
    /// running `bash` command stops on it and still commits what it changed.
    stop: watch::Sender<u64>,
    /// Bumped by Ctrl-B in the terminal UI: a running `bash` command moves to the
    /// background.
    background: watch::Sender<u64>,
    /// Set by the binary's signal handler the moment a signal arrives, cleared as the signal
    /// thread delivers it (see [`Signals::received_flag`]).
    received: Arc<AtomicBool>,
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

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("state", &self.state)
            .field("hook", &self.hook.is_some())
            .finish_non_exhaustive()
    }
}

/// How long [`Signals::interrupted`] waits at most for a signal that arrived to be
/// delivered: the signal thread delivers it in far less, unless the machine is starved.
const DELIVERY_WAIT: Duration = Duration::from_secs(1);

/// The binary's answer to a [`Verdict`].
pub type Hook = Arc<dyn Fn(Verdict) + Send + Sync>;

/// A signal, as delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C), or the terminal UI's Esc.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

/// What the process must do about a signal beyond what the running work is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing more: the signal was ignored, or handed to the work.
    Nothing,
    /// Tell the person `message` (on standard error); the work finishes its change.
    Notice(&'static str),
    /// Stop the process now, with [`INTERRUPTED`], after putting the terminal back and
    /// showing `message`.
    StopNow(&'static str),
}

/// Signals that never come, for code that runs without a terminal (the demo's agent, tests):
/// the process keeps its default handlers.
impl Default for Signals {
    fn default() -> Self {
        Self::with(Handling::Stop)
    }
}

impl Signals {
    /// Signal handling that starts as `handling`, with no hook: verdicts are only returned.
    pub fn with(handling: Handling) -> Self {
        Self::build(handling, None)
    }

    /// Signal handling that starts as `handling` and hands every [`Verdict`] but
    /// [`Verdict::Nothing`] to `hook`, whoever delivered the signal (the binary's signal
    /// thread, or the terminal UI's Esc).
    pub fn with_hook(handling: Handling, hook: Hook) -> Self {
        Self::build(handling, Some(hook))
    }

    fn build(handling: Handling, hook: Option<Hook>) -> Self {
        let (hand, handed) = watch::channel(0);
        let (stop, _) = watch::channel(0);
        let (background, _) = watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    handling,
                    pending: false,
                    terminated: false,
                }),
                hook,
                hand,
                stop,
                background,
                received: Arc::new(AtomicBool::new(false)),
            }),
            handed,
        }
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

    /// Changes each time the person asks for the running `bash` command to go to the
    /// background (Ctrl-B); the `bash` tool watches it.
    pub fn backgrounds(&self) -> watch::Receiver<u64> {
        self.shared.background.subscribe()
    }

    /// Asks the running `bash` command, if any, to go to the background (the terminal UI's
    /// Ctrl-B); nothing happens when none runs.
    pub fn to_background(&self) {
        self.shared.background.send_modify(|n| *n += 1);
    }

    /// Acts as if Ctrl-C was pressed: the terminal UI reads Ctrl-C and Esc as keys, and
    /// stops the running turn through this.
    pub fn interrupt(&self) {
        self.deliver(Signal::Interrupt);
    }

    /// A flag for the binary's own signal handler to set as a signal arrives, in the
    /// handler itself (`signal_hook::flag::register`); the thread that then delivers the
    /// signal clears it ([`Signals::deliver_received`]).
    ///
    /// The signal thread delivers a signal some time after it arrives, later still on a
    /// loaded machine. Meanwhile the work could read that no signal came and begin a
    /// change, although the signal came first (apply-patch, having read its patch). While
    /// the flag is set, [`Signals::interrupted`] waits for the delivery instead. Should the
    /// delivery have come between the two handlers (the thread's handler runs first, so
    /// that no signal is caught before it can be delivered), the flag stays set: the wait
    /// then ends after a second and clears it.
    pub fn received_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.received)
    }

    /// Delivers `signal` as [`Signals::deliver`] does, for the signal thread: it also
    /// clears the flag of [`Signals::received_flag`], under the same lock.
    pub fn deliver_received(&self, signal: Signal) -> Verdict {
        self.deliver_as(signal, true)
    }

    /// Delivers `signal`: the work is told as the handling says, and what the process must
    /// do beyond that is returned, and handed to the hook if there is one.
    pub fn deliver(&self, signal: Signal) -> Verdict {
        self.deliver_as(signal, false)
    }

    fn deliver_as(&self, signal: Signal, received: bool) -> Verdict {
        let mut state = self.shared.lock();
        if received {
            self.shared.received.store(false, Ordering::SeqCst);
        }
        let (verdict, tell) = Shared::on_signal(&mut state, signal);
        // The hook runs before the work is told, and with the state locked: whatever the
        // work then says about the signal comes after the hook's notice, never before it
        // (or, should the work end the process first, without it).
        if verdict != Verdict::Nothing
            && let Some(hook) = &self.shared.hook
        {
            hook(verdict);
        }
        if tell.stop {
            self.shared.stop.send_modify(|n| *n += 1);
        }
        if tell.hand {
            self.shared.hand.send_modify(|n| *n += 1);
        }
        drop(state);
        verdict
    }

    /// Whether SIGTERM came: the session should end once its running turn is finished.
    pub fn terminated(&self) -> bool {
        self.shared.lock().terminated
    }

    /// Whether a signal came since the handling was last set. A signal that has arrived
    /// but is not delivered yet (see [`Signals::received_flag`]) is waited for, up to
    /// a second: what the work decides next then counts it.
    pub fn interrupted(&self) -> bool {
        let since = Instant::now();
        while self.shared.received.load(Ordering::SeqCst) {
            if since.elapsed() >= DELIVERY_WAIT {
                self.shared.received.store(false, Ordering::SeqCst);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
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

/// Whom a signal is told to, beyond its verdict.
#[derive(Debug, Default, Clone, Copy)]
struct Tell {
    /// The running work's stop watchers (the `bash` tool).
    stop: bool,
    /// [`Signals::cancelled`].
    hand: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the state itself is intact.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What `signal` means under `state`, which it updates, and whom to tell.
    fn on_signal(state: &mut State, signal: Signal) -> (Verdict, Tell) {
        if let Signal::Terminate = signal {
            state.terminated = true;
        }
        let nobody = Tell::default();
        match (state.handling, state.pending, signal) {
            (Handling::Idle, _, Signal::Interrupt) => (Verdict::Nothing, nobody),
            (Handling::Stop | Handling::Idle, _, _) => {
                (Verdict::StopNow("shiro: interrupted"), nobody)
            }
            (Handling::Cancel | Handling::Finish, true, _) => (
                Verdict::StopNow(
                    "shiro: stopped at once; the change may be partly made: the next shiro command completes an undo or redo that was under way, and records a turn that was under way so that `shiro undo` reverts it",
                ),
                nobody,
            ),
            (Handling::Cancel, false, _) => {
                state.pending = true;
                (
                    Verdict::Nothing,
                    Tell {
                        stop: true,
                        hand: true,
                    },
                )
            }
            (Handling::Finish, false, _) => {
                state.pending = true;
                (
                    Verdict::Notice(
                        "shiro: interrupted; finishing the current change so the workspace and the undo log stay consistent (interrupt again to stop at once)",
                    ),
                    Tell {
                        stop: true,
                        hand: false,
                    },
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal that has arrived (its handler set the flag) counts for the work even when
    /// the signal thread has not delivered it yet: `interrupted` waits for the delivery. A
    /// loaded test run once showed apply-patch begin its change after the signal.
    #[test]
    fn a_signal_received_but_not_delivered_yet_is_waited_for() {
        let signals = Signals::with(Handling::Finish);
        signals.received_flag().store(true, Ordering::SeqCst);
        let (go, started) = std::sync::mpsc::channel::<()>();
        let deliverer = {
            let signals = signals.clone();
            std::thread::spawn(move || {
                started.recv().unwrap();
                signals.deliver_received(Signal::Interrupt)
            })
        };
        go.send(()).unwrap();
        assert!(
            signals.interrupted(),
            "the signal that arrived first counts"
        );
        assert!(
            matches!(deliverer.join().unwrap(), Verdict::Notice(_)),
            "delivered as the first signal"
        );
        assert!(!signals.received_flag().load(Ordering::SeqCst));
    }

    /// The notice of a signal is given before the work can know of the signal: the work's
    /// own message (say, "interrupted before the change began") then always comes after
    /// it. A loaded test run once showed them the other way round.
    #[test]
    fn the_hook_runs_before_the_work_is_told() {
        let told_first = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cell: Arc<std::sync::OnceLock<(watch::Receiver<u64>, Signals)>> = Arc::default();
        let seen = Arc::clone(&cell);
        let flag = Arc::clone(&told_first);
        let hook: Hook = Arc::new(move |_verdict| {
            if let Some((stops, signals)) = seen.get() {
                let handed = signals.handed.has_changed().unwrap_or(true);
                let stopped = stops.has_changed().unwrap_or(true);
                flag.store(handed || stopped, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let signals = Signals::with_hook(Handling::Finish, hook);
        let _ = cell.set((signals.stops(), signals.clone()));
        assert!(matches!(
            signals.deliver(Signal::Interrupt),
            Verdict::Notice(_)
        ));
        assert!(
            !told_first.load(std::sync::atomic::Ordering::SeqCst),
            "the work was told before the notice"
        );
        let (stops, _) = cell.get().unwrap_or_else(|| unreachable!());
        assert!(
            stops.has_changed().unwrap_or(false),
            "then the work is told"
        );
    }

    #[test]
    fn each_handling_tells_the_work_or_the_process_what_a_signal_means() {
        let stop_now = |verdict| matches!(verdict, Verdict::StopNow(_));
        // Between turns, Ctrl-C is the line editor's key; SIGTERM ends the session.
        let idle = Signals::with(Handling::Idle);
        assert_eq!(idle.deliver(Signal::Interrupt), Verdict::Nothing);
        assert!(!idle.terminated());
        assert!(stop_now(idle.deliver(Signal::Terminate)));
        assert!(idle.terminated());

        // A turn is handed the first signal; a second one before it is acknowledged stops
        // the process.
        let cancel = Signals::with(Handling::Cancel);
        assert_eq!(cancel.deliver(Signal::Interrupt), Verdict::Nothing);
        assert!(cancel.interrupted());
        assert!(stop_now(cancel.deliver(Signal::Interrupt)));
        // Once acknowledged (the handling set again), a signal is handed over anew.
        cancel.set(Handling::Cancel);
        assert_eq!(cancel.deliver(Signal::Interrupt), Verdict::Nothing);

        // A change being made is finished after a notice; a second signal stops at once.
        let finish = Signals::with(Handling::Finish);
        assert!(matches!(
            finish.deliver(Signal::Interrupt),
            Verdict::Notice(_)
        ));
        assert!(stop_now(finish.deliver(Signal::Terminate)));

        assert!(stop_now(
            Signals::with(Handling::Stop).deliver(Signal::Interrupt)
        ));
    }

    #[test]
    fn the_hook_hears_every_verdict_but_nothing() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heard);
        let signals = Signals::with_hook(
            Handling::Finish,
            Arc::new(move |verdict| kept.lock().unwrap().push(verdict)),
        );
        signals.set(Handling::Idle);
        signals.interrupt();
        signals.set(Handling::Finish);
        signals.interrupt();
        signals.interrupt();
        let heard = heard.lock().unwrap();
        assert_eq!(heard.len(), 2, "{heard:?}");
        assert!(matches!(heard[0], Verdict::Notice(_)));
        assert!(matches!(heard[1], Verdict::StopNow(_)));
    }
}
