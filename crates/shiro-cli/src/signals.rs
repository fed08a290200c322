//! SIGINT and SIGTERM, caught from the start of the process.
//!
//! A thread of its own, with its own small runtime, listens for both signals. It registers
//! them before [`install`] returns, so no signal reaches a default handler (which would kill
//! the process part-way through a change) however long the command then runs without
//! yielding: undo, redo and apply-patch do their file operations inline on a current-thread
//! runtime, so a handler that registered when a future was first polled could come too late,
//! or never. What a signal does depends on the [`Handling`] the command has set
//! (`shiro_agent::signals`); the decisions are in `docs/cli.md`, "Signals".
//!
//! This module prints to stderr and exits the process on a second signal: it is part of the
//! binary's terminal handling, like `main.rs`.
#![allow(clippy::print_stderr, clippy::exit)]

use std::sync::Arc;

use shiro_agent::signals::{Handling, INTERRUPTED, Signal, Signals, Verdict};
use tokio::signal::unix::{SignalKind, signal};

/// Catches SIGINT and SIGTERM from now on, handled as `handling` says until changed.
/// Returns once both are registered.
pub fn install(handling: Handling) -> std::io::Result<Signals> {
    let signals = Signals::with_hook(handling, Arc::new(act));
    let delivered = signals.clone();
    let (ready, registered) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("shiro-signals".to_owned())
        .spawn(move || listen(&delivered, &ready))?;
    registered.recv().map_err(|_| {
        std::io::Error::other("the signal thread ended before it registered the signals")
    })??;
    Ok(signals)
}

/// Does what a signal's verdict asks of the process.
fn act(verdict: Verdict) {
    match verdict {
        Verdict::Nothing => {}
        Verdict::Notice(message) => eprintln!("{message}"),
        Verdict::StopNow(message) => {
            // The terminal's modes first, so the message reads as a line.
            shiro_tui::term::restore();
            eprintln!("{message}");
            std::process::exit(i32::from(INTERRUPTED));
        }
    }
}

/// The signal thread: registers both signals, says so through `ready`, then delivers them
/// until the process ends.
fn listen(signals: &Signals, ready: &std::sync::mpsc::SyncSender<std::io::Result<()>>) {
    let registered = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .and_then(|runtime| {
            // `signal` needs a runtime's context, and registers the handler right away.
            let entered = runtime.enter();
            let interrupt = signal(SignalKind::interrupt())?;
            let terminate = signal(SignalKind::terminate())?;
            drop(entered);
            // After tokio's: a signal before these would be caught, yet never delivered.
            for caught in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                signal_hook::flag::register(caught, signals.received_flag())?;
            }
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
            let got = tokio::select! {
                got = interrupt.recv() => got.map(|()| Signal::Interrupt),
                got = terminate.recv() => got.map(|()| Signal::Terminate),
            };
            match got {
                Some(got) => {
                    signals.deliver_received(got);
                }
                // The runtime is shutting down: the process is ending.
                None => return,
            }
        }
    });
}
