//! shiro-tui: the terminal UI (see `docs/cli.md`, "The terminal UI"), a front end of
//! `shiro-agent` that consumes the agent's protocol (`shiro_agent::protocol`) and nothing
//! else of its loop.
//!
//! The agent's loop does no terminal I/O with it: the [`Printer`] sends what a turn reports
//! to the UI's thread as [`ToFront`] messages, and the agent's [`Input`] asks that thread for
//! lines. The UI thread owns the terminal: a second thread only reads keys into the same
//! channel. So the spinner turns and Esc is read while the agent waits on the model or a
//! tool.
//!
//! - [`app`]: the state, driven by messages and keys; [`view`]: the viewport's lines;
//! - [`screen`]: the viewport of variable height and the scrollback above it;
//! - [`editor`]: the prompt's text; [`markdown`]: the transcript's Markdown, its code
//!   blocks coloured by [`highlight`];
//! - [`term`]: the terminal's modes, restored on every way out.
//!
//! Invariant: it draws on the terminal it was started on and never prints, exits or reads
//! the environment; the binary chooses whether it runs.

#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

pub mod app;
pub mod editor;
pub mod highlight;
pub mod markdown;
pub mod screen;
pub mod term;
pub mod view;

#[cfg(test)]
mod snapshots_test;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossterm::event::Event as TermEvent;
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use ratatui::backend::CrosstermBackend;
use shiro_agent::events::Printer;
use shiro_agent::input::Input;
use shiro_agent::protocol::{FrontSink, Op};
use shiro_agent::signals::Signals;
use shiro_commands::Registry;

use self::app::{App, Effect};
pub use self::app::{Phase, PickItem, ReadKind, StatusInfo, ToFront};
use self::screen::Screen;

/// A message to the UI thread.
#[derive(Debug)]
pub enum Msg {
    /// From the agent.
    Agent(ToFront),
    /// From the terminal.
    Term(TermEvent),
    /// The session is over: leave the terminal as it was.
    Finish,
}

/// Where the agent sends what the UI shows.
pub type UiSender = Sender<Msg>;

/// How often the spinner turns while a turn runs.
const TICK: Duration = Duration::from_millis(80);

/// The running UI, held by the agent.
#[derive(Debug)]
pub struct Ui {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    keys_stop: Arc<AtomicBool>,
    keys: Option<JoinHandle<()>>,
    history_file: PathBuf,
}

impl Ui {
    /// Takes over the terminal: its modes, a UI thread, and a thread reading keys.
    pub fn start(
        registry: Registry,
        root: PathBuf,
        history_file: PathBuf,
        color: bool,
        signals: Signals,
    ) -> std::io::Result<Ui> {
        let row = term::enter()?;
        let (width, _) = crossterm::terminal::size().unwrap_or((80, 24));
        let (tx, rx) = mpsc::channel();
        let screen = match Screen::new(CrosstermBackend::new(std::io::stdout()), row) {
            Ok(screen) => screen,
            Err(err) => {
                term::restore();
                return Err(err);
            }
        };
        let mut app = App::new(width, color, Some(registry), root);
        // No history yet is the normal first run.
        let history = std::fs::read_to_string(&history_file).unwrap_or_default();
        app.editor = editor::Editor::with_history(editor::parse_history(&history));
        let thread = std::thread::Builder::new()
            .name("shiro-ui".into())
            .spawn(move || {
                // A failed write to the terminal ends the UI; the terminal is put back.
                let _ = run(&rx, app, screen, &signals);
                term::restore();
            })?;
        let keys_stop = Arc::new(AtomicBool::new(false));
        let keys = {
            let tx = tx.clone();
            let stop = Arc::clone(&keys_stop);
            std::thread::Builder::new()
                .name("shiro-keys".into())
                .spawn(move || read_keys(&tx, &stop))?
        };
        Ok(Ui {
            tx,
            thread: Some(thread),
            keys_stop,
            keys: Some(keys),
            history_file,
        })
    }

    /// The agent's front-end sink, for the printer: what it is sent, this UI shows.
    pub fn front(&self) -> FrontSink {
        let tx = self.tx.clone();
        Arc::new(move |message| {
            // A UI that is gone shows nothing; the turn's bookkeeping goes on.
            let _ = tx.send(Msg::Agent(message));
        })
    }

    /// The agent's input through this UI.
    pub fn input(&self) -> UiInput {
        UiInput {
            tx: self.tx.clone(),
            history_file: Some(self.history_file.clone()),
        }
    }

    /// Shows `message`.
    pub fn send(&self, message: ToFront) {
        let _ = self.tx.send(Msg::Agent(message));
    }

    /// Leaves the terminal as it was; waits for the UI to finish drawing.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.keys_stop.store(true, Ordering::SeqCst);
        let _ = self.tx.send(Msg::Finish);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(keys) = self.keys.take() {
            let _ = keys.join();
        }
        term::restore();
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the terminal's events until told to stop.
fn read_keys(tx: &Sender<Msg>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match crossterm::event::poll(Duration::from_millis(50)) {
            Ok(true) => match crossterm::event::read() {
                Ok(event) => {
                    if tx.send(Msg::Term(event)).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            },
            Ok(false) => {}
            Err(_) => return,
        }
    }
}

/// The UI thread: handles messages and keys, and redraws after each batch.
fn run<B: ratatui::backend::Backend>(
    rx: &Receiver<Msg>,
    mut app: App,
    mut screen: Screen<B>,
    signals: &Signals,
) -> Result<(), B::Error> {
    let mut finish = false;
    while !finish {
        let timeout = if app.turn_started.is_some() || app.quit_armed(Instant::now()) {
            TICK
        } else {
            Duration::from_secs(1)
        };
        let mut batch = Vec::new();
        match rx.recv_timeout(timeout) {
            Ok(message) => batch.push(message),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        batch.extend(rx.try_iter());
        for message in batch {
            let now = Instant::now();
            match message {
                Msg::Agent(message) => app.on_agent(message, now),
                Msg::Term(TermEvent::Key(key)) => match app.on_key(key, now) {
                    Effect::Cancel => signals.interrupt(),
                    Effect::Background => signals.to_background(),
                    Effect::None => {}
                },
                Msg::Term(TermEvent::Paste(text)) => app.on_paste(&text),
                Msg::Term(TermEvent::Resize(..)) => {
                    screen.resized()?;
                    app.width = screen.width().max(1);
                }
                Msg::Term(_) => {}
                Msg::Finish => finish = true,
            }
        }
        // One synchronized update, so a terminal that supports it shows no half-drawn frame.
        let _ = crossterm::queue!(std::io::stdout(), BeginSynchronizedUpdate);
        let drawn = render(&mut app, &mut screen);
        let _ = crossterm::execute!(std::io::stdout(), EndSynchronizedUpdate);
        drawn?;
    }
    screen.leave()
}

/// Prints what is finished above the viewport and redraws the viewport.
pub fn render<B: ratatui::backend::Backend>(
    app: &mut App,
    screen: &mut Screen<B>,
) -> Result<(), B::Error> {
    let pending = app.take_pending();
    screen.insert(&pending)?;
    let (lines, cursor) = view::lines(app, Instant::now());
    screen.set_height(view::height(&lines))?;
    screen.draw(|frame| view::draw(frame, &lines, cursor))
}

/// The agent's input through the UI: it asks the UI thread, and waits for the answer.
#[derive(Debug)]
pub struct UiInput {
    tx: Sender<Msg>,
    /// Where sent prompts are kept for the next session's history.
    history_file: Option<PathBuf>,
}

impl UiInput {
    /// Input asking the UI behind `tx`, keeping no history file.
    pub fn new(tx: UiSender) -> Self {
        UiInput {
            tx,
            history_file: None,
        }
    }

    fn ask(&self, kind: ReadKind) -> Op {
        let (reply, answer) = mpsc::channel();
        if self
            .tx
            .send(Msg::Agent(ToFront::Read { kind, reply }))
            .is_err()
        {
            return Op::Quit;
        }
        answer.recv().unwrap_or(Op::Quit)
    }
}

impl Input for UiInput {
    fn read(&mut self, _prompt: &str, _printer: &mut Printer) -> Op {
        self.ask(ReadKind::Prompt)
    }

    fn approve(&mut self, tool: &str, always: &str, _printer: &mut Printer) -> Op {
        self.ask(ReadKind::Approval {
            tool: tool.to_owned(),
            always: always.to_owned(),
        })
    }

    fn keep(&mut self, rules: &str, _printer: &mut Printer) -> Op {
        self.ask(ReadKind::Keep {
            rules: rules.to_owned(),
        })
    }

    fn remember(&mut self, line: &str) {
        let Some(path) = &self.history_file else {
            return;
        };
        // Appended at once so that history survives a crash; losing it is not worth an
        // error (a read-only workspace has none).
        let fresh = !path.exists();
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            use std::io::Write as _;
            let header = if fresh { "#V2\n" } else { "" };
            let _ = file.write_all(format!("{header}{}", editor::history_line(line)).as_bytes());
        }
    }
}
