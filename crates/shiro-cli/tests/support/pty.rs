//! A program in a pseudo-terminal, seen through a terminal emulator, for end-to-end tests of
//! the terminal UI.
//!
//! A reader thread feeds everything the program writes into a [`vt100::Parser`] (with
//! scrollback), and answers the questions a terminal is asked, as a real one would: the
//! cursor's position (`ESC[6n`), the primary device attributes (`ESC[c`) and, when
//! [`PtyOptions::kitty_keyboard`] says the terminal has it, the keyboard-enhancement flags
//! (`ESC[?u`). Without answers crossterm would wait about 2 s for each.
//!
//! ```ignore
//! let mut pty = Pty::spawn(command, PtyOptions::default());
//! pty.wait_for("ask anything", WAIT);
//! pty.send("hello\r");
//! ```

use std::io::{Read as _, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

/// How often the screen is looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// How the pseudo-terminal looks to the program.
#[derive(Debug, Clone, Copy)]
pub struct PtyOptions {
    pub cols: u16,
    pub rows: u16,
    /// Whether the terminal answers the keyboard-enhancement query (kitty's protocol), as
    /// kitty, foot or WezTerm do; otherwise it stays silent, as xterm does.
    pub kitty_keyboard: bool,
}

impl Default for PtyOptions {
    fn default() -> Self {
        PtyOptions {
            cols: 100,
            rows: 30,
            kitty_keyboard: false,
        }
    }
}

/// A child process on a pseudo-terminal. Dropping it kills the child.
pub struct Pty {
    terminal: Arc<Mutex<vt100::Parser<Terminal>>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    child: Box<dyn Child + Send + Sync>,
    reader: Option<JoinHandle<()>>,
    /// Kept open: closing it hangs up the terminal.
    _master: Box<dyn MasterPty + Send>,
    status: Option<portable_pty::ExitStatus>,
}

/// The emulator's side of the conversation: replies to queries, and the keyboard-enhancement
/// flags the program pushed and has not popped.
#[derive(Debug, Default)]
struct Terminal {
    kitty_keyboard: bool,
    replies: Vec<u8>,
    kitty_pushed: usize,
    /// The output ended: the program and everything it started closed the terminal.
    closed: bool,
}

impl vt100::Callbacks for Terminal {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c) {
            // Device status report: where is the cursor (1-based)?
            (None, 'n') if first == 6 => {
                let (row, col) = screen.cursor_position();
                self.replies
                    .extend_from_slice(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
            // Primary device attributes: a VT220-ish terminal with ANSI colour.
            (None, 'c') if first == 0 => self.replies.extend_from_slice(b"\x1b[?62;22c"),
            // The keyboard-enhancement flags in force: none yet.
            (Some(b'?'), 'u') if self.kitty_keyboard => {
                self.replies.extend_from_slice(b"\x1b[?0u");
            }
            (Some(b'>'), 'u') => self.kitty_pushed += 1,
            (Some(b'<'), 'u') => {
                let count = usize::from(first.max(1));
                self.kitty_pushed = self.kitty_pushed.saturating_sub(count);
            }
            _ => {}
        }
    }
}

impl Pty {
    /// Starts `command` on a new pseudo-terminal, or says why it cannot (no `/dev/ptmx`).
    pub fn spawn(command: CommandBuilder, options: PtyOptions) -> Result<Pty, String> {
        let system = native_pty_system();
        let pair = system
            .openpty(PtySize {
                rows: options.rows,
                cols: options.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|err| format!("no pseudo-terminal: {err}"))?;
        let child = pair
            .slave
            .spawn_command(command)
            .map_err(|err| format!("cannot start the program: {err}"))?;
        // Only the child holds the terminal's other end now, so its end reads as EOF here.
        drop(pair.slave);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|err| format!("cannot read the pseudo-terminal: {err}"))?;
        let writer: Arc<Mutex<Box<dyn Write + Send>>> =
            Arc::new(Mutex::new(pair.master.take_writer().map_err(|err| {
                format!("cannot write to the pseudo-terminal: {err}")
            })?));
        let terminal = Arc::new(Mutex::new(vt100::Parser::new_with_callbacks(
            nonzero(options.rows),
            nonzero(options.cols),
            10_000,
            Terminal {
                kitty_keyboard: options.kitty_keyboard,
                ..Terminal::default()
            },
        )));
        let reader = {
            let terminal = Arc::clone(&terminal);
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 8192];
                loop {
                    // EOF, or EIO once the terminal's other end is closed: the output is over.
                    let read = match reader.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(read) => read,
                    };
                    let replies = {
                        let mut terminal = lock(&terminal);
                        terminal.process(&buffer[..read]);
                        std::mem::take(&mut terminal.callbacks_mut().replies)
                    };
                    if !replies.is_empty() {
                        let mut writer = lock(&writer);
                        let _ = writer.write_all(&replies);
                        let _ = writer.flush();
                    }
                }
                lock(&terminal).callbacks_mut().closed = true;
            })
        };
        Ok(Pty {
            terminal,
            writer,
            child,
            reader: Some(reader),
            _master: pair.master,
            status: None,
        })
    }

    /// Types `keys`: `\r` is Enter, `\x03` Ctrl-C, `\x04` Ctrl-D.
    pub fn send(&self, keys: &str) {
        let mut writer = lock(&self.writer);
        writer.write_all(keys.as_bytes()).expect("write to the pty");
        writer.flush().expect("flush the pty");
    }

    /// Presses Esc alone. A lone ESC byte is only read as Esc when nothing follows it at once
    /// (otherwise it starts Alt+key or an escape sequence), so this waits a moment after it.
    pub fn send_esc(&self) {
        self.send("\x1b");
        std::thread::sleep(Duration::from_millis(100));
    }

    /// The visible screen, trailing blanks trimmed.
    pub fn screen(&self) -> String {
        let terminal = lock(&self.terminal);
        let (_, cols) = terminal.screen().size();
        trim_rows(terminal.screen().rows(0, cols.get()))
    }

    /// The scrollback and the screen, oldest line first, trailing blanks trimmed.
    pub fn text(&self) -> String {
        let mut terminal = lock(&self.terminal);
        let screen = terminal.screen_mut();
        let (rows, cols) = screen.size();
        let (rows, cols) = (usize::from(rows.get()), cols.get());
        screen.set_scrollback(usize::MAX);
        let mut offset = screen.scrollback();
        let mut lines = Vec::new();
        // Seen from `offset` rows up, the first rows on screen are the scrollback's.
        while offset > 0 {
            screen.set_scrollback(offset);
            let take = offset.min(rows);
            lines.extend(screen.rows(0, cols).take(take));
            offset -= take;
        }
        screen.set_scrollback(0);
        lines.extend(screen.rows(0, cols));
        trim_rows(lines.into_iter())
    }

    /// Waits until the scrollback or the screen shows `text`; panics with the whole terminal
    /// when `timeout` passes first.
    pub fn wait_for(&mut self, text: &str, timeout: Duration) {
        self.wait_until(&format!("{text:?} on the terminal"), timeout, |pty| {
            pty.text().contains(text)
        });
    }

    /// Waits until `done` holds; panics with `what` and the whole terminal when `timeout`
    /// passes first, or when the program has ended and `done` still does not hold.
    pub fn wait_until(&mut self, what: &str, timeout: Duration, done: impl Fn(&Pty) -> bool) {
        let start = Instant::now();
        loop {
            // Closed is read before looking, so output that came just before the end is seen.
            let closed = lock(&self.terminal).callbacks().closed;
            if done(self) {
                return;
            }
            if closed {
                let status = self.wait_exit(Duration::from_secs(5));
                panic!(
                    "waited for {what}, but the program ended ({status:?}); the terminal:\n{}",
                    self.dump()
                );
            }
            if start.elapsed() > timeout {
                panic!(
                    "waited {timeout:?} for {what}; the terminal:\n{}",
                    self.dump()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for the child to exit and returns its status; panics with the terminal when it
    /// is still running after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_status() {
                return status;
            }
            if start.elapsed() > timeout {
                panic!(
                    "the program still runs after {timeout:?}; the terminal:\n{}",
                    self.dump()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The child's exit status, if it has exited.
    pub fn try_status(&mut self) -> Option<portable_pty::ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("wait for the child");
        }
        self.status.clone()
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("a spawned child has a pid")
    }

    /// Waits until the output has ended (every process on the terminal closed it), so the
    /// emulator has seen all of it.
    pub fn wait_closed(&mut self, timeout: Duration) {
        self.wait_until("the end of the output", timeout, |pty| {
            lock(&pty.terminal).callbacks().closed
        });
    }

    /// Whether bracketed paste is on, the cursor hidden, or keyboard-enhancement flags pushed
    /// and not popped: the terminal's modes the program must put back, as words.
    pub fn output_modes(&self) -> Vec<&'static str> {
        let terminal = lock(&self.terminal);
        let mut modes = Vec::new();
        if terminal.screen().bracketed_paste() {
            modes.push("bracketed paste");
        }
        if terminal.screen().hide_cursor() {
            modes.push("hidden cursor");
        }
        if terminal.screen().alternate_screen() {
            modes.push("alternate screen");
        }
        if terminal.callbacks().kitty_pushed > 0 {
            modes.push("keyboard enhancement");
        }
        modes
    }

    /// Whether the program pushed keyboard-enhancement flags (and has not popped them).
    pub fn keyboard_enhanced(&self) -> bool {
        lock(&self.terminal).callbacks().kitty_pushed > 0
    }

    /// The scrollback and the screen, framed, for failure messages.
    pub fn dump(&self) -> String {
        let (rows, cols) = lock(&self.terminal).screen().size();
        let rule = "─".repeat(usize::from(cols.get()));
        format!(
            "{rule}\n{}\n{rule}\n(the last {} rows are the screen)",
            self.text(),
            rows
        )
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // The reader ends when the last process holding the terminal closes it; it is not
        // waited for, so a leftover grandchild cannot hang the test.
        drop(self.reader.take());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread of the test is reported there; the data is still readable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n.max(1)).expect("at least 1")
}

fn trim_rows(rows: impl Iterator<Item = String>) -> String {
    let mut text: String = rows
        .map(|row| row.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    text.truncate(text.trim_end().len());
    text
}
