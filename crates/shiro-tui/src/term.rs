//! The terminal's modes while the UI runs, and putting them back on every way out: a
//! normal exit, an error, a panic (a hook), and a signal that ends the process (the signal
//! thread calls [`restore`] before it exits).

use std::io::Write as _;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::{cursor, execute, terminal};

/// Whether the terminal is in the UI's modes.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether keyboard enhancement was pushed (and must be popped).
static ENHANCED: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Puts the terminal in the UI's modes: raw input, bracketed paste, and (where the terminal
/// supports it) keys reported unambiguously, so Shift+Enter differs from Enter. Returns the
/// cursor's row, asked before anything else reads the input.
pub fn enter() -> std::io::Result<u16> {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let mut stdout = std::io::stdout();
    execute!(stdout, EnableBracketedPaste)?;
    // Both questions are answered on the input, so they come before the key reader starts.
    if terminal::supports_keyboard_enhancement().unwrap_or(false) {
        execute!(
            stdout,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )?;
        ENHANCED.store(true, Ordering::SeqCst);
    }
    let row = match cursor::position() {
        Ok((_, row)) => row,
        // No answer: start at the bottom.
        Err(_) => terminal::size().map_or(0, |(_, rows)| rows.saturating_sub(1)),
    };
    Ok(row)
}

/// Puts the terminal's modes back as they were. Safe to call any number of times, from any
/// thread; only the first call after [`enter`] does anything.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut stdout = std::io::stdout();
    if ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = execute!(stdout, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(stdout, DisableBracketedPaste, cursor::Show);
    let _ = terminal::disable_raw_mode();
    let _ = stdout.flush();
}
