//! SIGINT, SIGTERM and SIGHUP, caught from the start of the process. SIGHUP (the terminal
//! closed, or the SSH connection dropped) is taken for SIGTERM: the work under way is
//! finished or stopped and recorded as for SIGTERM, where the default handler would kill
//! the process part-way through a change.
//!
//! All three are registered before [`install`] returns, so no signal reaches a default handler
//! (which would kill the process part-way through a change) however long the command then
//! runs without yielding: undo, redo and apply-patch do their file operations inline on a
//! current-thread runtime, so a handler that registered when a future was first polled could
//! come too late, or never. A thread of its own then delivers each one as it comes, blocked
//! on the pipe the handlers write to (`signal_hook::iterator`), with no runtime of its own:
//! one took a second runtime's setup, and a wait for the thread to start, off every command.
//! What a signal does depends on the [`Handling`] the command has set
//! (`shiro_agent::signals`); the decisions are in `docs/cli.md`, "Signals".
//!
//! This module prints to stderr and exits the process on a second signal: it is part of the
//! binary's terminal handling, like `main.rs`.
#![allow(clippy::print_stderr, clippy::exit)]

use std::sync::Arc;

use shiro_agent::signals::{Handling, INTERRUPTED, Signal, Signals, Verdict};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signals caught.
const CAUGHT: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Catches SIGINT, SIGTERM and SIGHUP from now on, handled as `handling` says until
/// changed. Returns once all are registered.
pub fn install(handling: Handling) -> std::io::Result<Signals> {
    let signals = Signals::with_hook(handling, Arc::new(act));
    // The thread first: should the system refuse one, nothing is registered yet, and a signal
    // still stops the process, as the caller then says. It is handed the iterator once the
    // handlers are in place, and is not waited for.
    let (hand_over, handed) = std::sync::mpsc::sync_channel(1);
    let delivered = signals.clone();
    std::thread::Builder::new()
        .name("shiro-signals".to_owned())
        .spawn(move || {
            // Nothing comes when the registration failed.
            let Ok(mut caught) = handed.recv() else {
                return;
            };
            deliver(&delivered, &mut caught);
        })?;
    let caught = signal_hook::iterator::Signals::new(CAUGHT)?;
    // After the iterator's: a signal before these would be caught, yet never delivered.
    for signal in CAUGHT {
        signal_hook::flag::register(signal, signals.received_flag())?;
    }
    hand_over.send(caught).map_err(|_| {
        std::io::Error::other("the signal thread ended before it was handed the signals")
    })?;
    Ok(signals)
}

/// The signal thread: delivers each signal `caught` as it comes, until the process ends
/// (nothing closes the iterator).
fn deliver(signals: &Signals, caught: &mut signal_hook::iterator::Signals) {
    for signal in caught.forever() {
        let signal = if signal == SIGTERM || signal == SIGHUP {
            Signal::Terminate
        } else {
            Signal::Interrupt
        };
        signals.deliver_received(signal);
    }
}

/// Does what a signal's verdict asks of the process.
fn act(verdict: Verdict) {
    match verdict {
        Verdict::Nothing => {}
        Verdict::Notice(message) => say(message),
        Verdict::StopNow(message) => {
            // The terminal's modes first, so the message reads as a line.
            shiro_tui::term::restore();
            say(message);
            std::process::exit(i32::from(INTERRUPTED));
        }
    }
}

/// Writes `message` to standard error, as a line. After SIGHUP the terminal may be gone:
/// a failed write is let go (where `eprintln!` would panic).
fn say(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{message}");
}
