//! The bottom of the terminal: a viewport of variable height that ratatui draws, with the
//! finished transcript printed above it into the terminal's own scrollback.
//!
//! ratatui's inline viewport has a height fixed at creation, so this manages a
//! [`Viewport::Fixed`] area itself. The viewport starts where the cursor was, moves down as
//! history is printed above it until it reaches the bottom of the screen, and then history
//! scrolls the screen up. History rows are written once and never read back: the terminal's
//! scrollback is output, not state.

use ratatui::backend::{Backend, ClearType};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect, Size};
use ratatui::text::Line;
use ratatui::widgets::Widget as _;
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};

/// The live area at the bottom of the terminal.
pub struct Screen<B: Backend> {
    terminal: Terminal<B>,
    /// Where the viewport is: full width, `top`, `height` rows.
    area: Rect,
    size: Size,
}

impl<B: Backend> std::fmt::Debug for Screen<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("area", &self.area)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Screen<B> {
    /// A one-row viewport on the row of the cursor (`cursor_row`, asked of the terminal
    /// before any input is read, since the answer comes on the input).
    pub fn new(backend: B, cursor_row: u16) -> Result<Self, B::Error> {
        let size = backend.size()?;
        let rows = size.height.max(1);
        let area = Rect::new(0, cursor_row.min(rows - 1), size.width, 1);
        let terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(area),
            },
        )?;
        Ok(Screen {
            terminal,
            area,
            size,
        })
    }

    /// The viewport's area on the screen.
    pub fn area(&self) -> Rect {
        self.area
    }

    /// The screen's width in columns.
    pub fn width(&self) -> u16 {
        self.size.width
    }

    /// The screen's height in rows.
    pub fn rows(&self) -> u16 {
        self.size.height
    }

    /// The backend, for tests that read what was written.
    pub fn backend(&self) -> &B {
        self.terminal.backend()
    }

    /// The backend, for tests that resize it.
    #[cfg(test)]
    pub fn backend_mut(&mut self) -> &mut B {
        self.terminal.backend_mut()
    }

    /// Makes the viewport `height` rows tall (at most the screen), scrolling the screen up
    /// when it would run past the bottom. Rows it gives up are cleared.
    pub fn set_height(&mut self, height: u16) -> Result<(), B::Error> {
        let rows = self.size.height.max(1);
        // One row stays above the viewport for history, when the screen has two.
        let height = height.clamp(1, rows.saturating_sub(1).max(1));
        if height == self.area.height {
            return Ok(());
        }
        let mut top = self.area.top();
        let bottom = top.saturating_add(height);
        if bottom > rows {
            let scroll = bottom - rows;
            self.scroll_up(scroll)?;
            top -= scroll.min(top);
        }
        if height < self.area.height {
            // The rows given up keep what was drawn there; blank them.
            let backend = self.terminal.backend_mut();
            for row in top + height..self.area.bottom().min(rows) {
                backend.set_cursor_position(Position::new(0, row))?;
                backend.clear_region(ClearType::CurrentLine)?;
            }
        }
        self.place(Rect::new(0, top, self.size.width, height))
    }

    /// Prints `lines` (each at most one row wide) above the viewport, into the scrollback.
    pub fn insert(&mut self, lines: &[Line<'_>]) -> Result<(), B::Error> {
        if lines.is_empty() {
            return Ok(());
        }
        let rows = self.size.height.max(1);
        let width = self.size.width;
        let height = self.area.height;
        let mut top = self.area.top();
        for line in lines {
            // A row for the line: below the viewport while there is room, else by scrolling.
            if top + height < rows {
                top += 1;
            } else {
                self.scroll_up(1)?;
            }
            // A viewport as tall as the screen leaves no row: the line scrolls out unseen.
            let Some(row) = top.checked_sub(1) else {
                continue;
            };
            let area = Rect::new(0, 0, width, 1);
            let mut buffer = Buffer::empty(area);
            line.clone().render(area, &mut buffer);
            // Only the line's own cells, then the rest of the row cleared: no trailing
            // blanks end up in a copy of the transcript.
            let used = u16::try_from(line.width()).unwrap_or(u16::MAX).min(width);
            let cells = buffer
                .content
                .iter()
                .take(usize::from(used))
                .enumerate()
                .map(|(x, cell)| (u16::try_from(x).unwrap_or(u16::MAX), row, cell));
            let backend = self.terminal.backend_mut();
            backend.draw(cells)?;
            if used < width {
                backend.set_cursor_position(Position::new(used, row))?;
                backend.clear_region(ClearType::UntilNewLine)?;
            }
        }
        self.place(Rect::new(0, top, width, height))
    }

    /// Draws the viewport.
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame<'_>)) -> Result<(), B::Error> {
        self.terminal.draw(render)?;
        Ok(())
    }

    /// Follows a change of the terminal's size: the viewport keeps its height (as far as the
    /// screen allows) and is redrawn in full; the rows below it are cleared.
    pub fn resized(&mut self) -> Result<(), B::Error> {
        let size = self.terminal.backend().size()?;
        self.size = size;
        let rows = size.height.max(1);
        let height = self.area.height.clamp(1, rows);
        let top = self.area.top().min(rows - height);
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position(Position::new(0, top))?;
        backend.clear_region(ClearType::AfterCursor)?;
        self.place(Rect::new(0, top, size.width, height))
    }

    /// Clears the viewport and leaves the cursor on its first row, so what follows (the
    /// shell's prompt, a last message) comes right after the transcript.
    pub fn leave(&mut self) -> Result<(), B::Error> {
        let top = self.area.top();
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position(Position::new(0, top))?;
        backend.clear_region(ClearType::AfterCursor)?;
        backend.show_cursor()?;
        backend.flush()
    }

    /// Scrolls the whole screen up `lines` rows (the top rows go to the scrollback).
    fn scroll_up(&mut self, lines: u16) -> Result<(), B::Error> {
        if lines == 0 {
            return Ok(());
        }
        let rows = self.size.height.max(1);
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position(Position::new(0, rows - 1))?;
        backend.append_lines(lines)
    }

    /// Moves the viewport to `area`; the next draw repaints all of it.
    fn place(&mut self, area: Rect) -> Result<(), B::Error> {
        self.area = area;
        self.terminal.resize(area)
    }
}

/// A crossterm backend writing to any writer, with a size given rather than asked of a
/// terminal: for benchmarks, and tests that feed a terminal emulator.
pub struct FixedSize<W: std::io::Write> {
    backend: ratatui::backend::CrosstermBackend<W>,
    size: Size,
}

impl<W: std::io::Write> std::fmt::Debug for FixedSize<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedSize")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl<W: std::io::Write> FixedSize<W> {
    /// A `width` × `height` terminal writing to `writer`.
    pub fn new(writer: W, width: u16, height: u16) -> Self {
        FixedSize {
            backend: ratatui::backend::CrosstermBackend::new(writer),
            size: Size::new(width, height),
        }
    }

    /// Changes the size, as a window resize does.
    pub fn set_size(&mut self, width: u16, height: u16) {
        self.size = Size::new(width, height);
    }
}

impl<W: std::io::Write> Backend for FixedSize<W> {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.backend.draw(content)
    }
    fn append_lines(&mut self, n: u16) -> std::io::Result<()> {
        self.backend.append_lines(n)
    }
    fn hide_cursor(&mut self) -> std::io::Result<()> {
        self.backend.hide_cursor()
    }
    fn show_cursor(&mut self) -> std::io::Result<()> {
        self.backend.show_cursor()
    }
    fn get_cursor_position(&mut self) -> std::io::Result<Position> {
        // Never asked of a terminal: the answer would come on the input.
        Ok(Position::new(0, 0))
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> std::io::Result<()> {
        self.backend.set_cursor_position(position)
    }
    fn clear(&mut self) -> std::io::Result<()> {
        self.backend.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> std::io::Result<()> {
        self.backend.clear_region(clear_type)
    }
    fn scroll_region_up(
        &mut self,
        region: std::ops::Range<u16>,
        line_count: u16,
    ) -> std::io::Result<()> {
        self.backend.scroll_region_up(region, line_count)
    }
    fn scroll_region_down(
        &mut self,
        region: std::ops::Range<u16>,
        line_count: u16,
    ) -> std::io::Result<()> {
        self.backend.scroll_region_down(region, line_count)
    }
    fn size(&self) -> std::io::Result<Size> {
        Ok(self.size)
    }
    fn window_size(&mut self) -> std::io::Result<ratatui::backend::WindowSize> {
        Ok(ratatui::backend::WindowSize {
            columns_rows: self.size,
            pixels: Size::new(0, 0),
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Backend::flush(&mut self.backend)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::RefCell;
    use std::io::Write;
    use std::num::NonZeroU16;
    use std::rc::Rc;

    use ratatui::backend::WindowSize;
    use ratatui::buffer::Cell;
    use ratatui::widgets::Paragraph;

    use super::*;

    /// A terminal of a fixed size writing into a vt100 terminal emulator, so tests see what
    /// a terminal would show, scrollback included.
    pub(crate) struct Emulator {
        backend: FixedSize<Sink>,
        written: Rc<RefCell<Vec<u8>>>,
        pub(crate) parser: vt100::Parser,
        width: u16,
    }

    /// Where the backend writes: a buffer the emulator drains.
    pub(crate) struct Sink(Rc<RefCell<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn nonzero(n: u16) -> NonZeroU16 {
        NonZeroU16::new(n.max(1)).unwrap()
    }

    impl Emulator {
        pub(crate) fn new(width: u16, height: u16) -> Self {
            let written = Rc::new(RefCell::new(Vec::new()));
            Emulator {
                backend: FixedSize::new(Sink(Rc::clone(&written)), width, height),
                written,
                parser: vt100::Parser::new(nonzero(height), nonzero(width), 1000),
                width,
            }
        }

        /// Changes the emulated terminal's size, as a window resize does.
        pub(crate) fn set_size(&mut self, width: u16, height: u16) {
            self.backend.set_size(width, height);
            self.width = width;
            self.parser
                .screen_mut()
                .set_size(nonzero(height), nonzero(width));
        }

        fn feed(&mut self) {
            let bytes = std::mem::take(&mut *self.written.borrow_mut());
            self.parser.process(&bytes);
        }

        /// The screen's rows, trailing blank rows trimmed.
        pub(crate) fn screen(&self) -> String {
            let mut text = self.parser.screen().contents();
            while text.ends_with('\n') {
                text.pop();
            }
            text
        }

        /// Everything: the scrollback, then the screen.
        pub(crate) fn everything(&mut self) -> String {
            let screen = self.screen();
            let len = self.parser.screen().scrollback_len();
            let mut lines = Vec::new();
            for offset in (1..=len).rev() {
                self.parser.screen_mut().set_scrollback(offset);
                let row = self
                    .parser
                    .screen()
                    .rows(0, self.width)
                    .next()
                    .unwrap_or_default();
                lines.push(row);
            }
            self.parser.screen_mut().set_scrollback(0);
            lines.push(screen);
            lines.join("\n")
        }
    }

    impl Backend for Emulator {
        type Error = std::io::Error;

        fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
        where
            I: Iterator<Item = (u16, u16, &'a Cell)>,
        {
            self.backend.draw(content)?;
            self.feed();
            Ok(())
        }
        fn append_lines(&mut self, n: u16) -> std::io::Result<()> {
            self.backend.append_lines(n)?;
            self.feed();
            Ok(())
        }
        fn hide_cursor(&mut self) -> std::io::Result<()> {
            self.backend.hide_cursor()
        }
        fn show_cursor(&mut self) -> std::io::Result<()> {
            self.backend.show_cursor()
        }
        fn get_cursor_position(&mut self) -> std::io::Result<Position> {
            let (row, col) = self.parser.screen().cursor_position();
            Ok(Position::new(col, row))
        }
        fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> std::io::Result<()> {
            self.backend.set_cursor_position(position)?;
            self.feed();
            Ok(())
        }
        fn clear(&mut self) -> std::io::Result<()> {
            self.backend.clear()?;
            self.feed();
            Ok(())
        }
        fn clear_region(&mut self, clear_type: ClearType) -> std::io::Result<()> {
            self.backend.clear_region(clear_type)?;
            self.feed();
            Ok(())
        }
        fn scroll_region_up(
            &mut self,
            region: std::ops::Range<u16>,
            line_count: u16,
        ) -> std::io::Result<()> {
            self.backend.scroll_region_up(region, line_count)?;
            self.feed();
            Ok(())
        }
        fn scroll_region_down(
            &mut self,
            region: std::ops::Range<u16>,
            line_count: u16,
        ) -> std::io::Result<()> {
            self.backend.scroll_region_down(region, line_count)?;
            self.feed();
            Ok(())
        }
        fn size(&self) -> std::io::Result<Size> {
            self.backend.size()
        }
        fn window_size(&mut self) -> std::io::Result<WindowSize> {
            self.backend.window_size()
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Backend::flush(&mut self.backend)?;
            self.feed();
            Ok(())
        }
    }

    fn draw_box(screen: &mut Screen<Emulator>, text: &str) {
        screen
            .draw(|frame| frame.render_widget(Paragraph::new(text.to_owned()), frame.area()))
            .unwrap();
    }

    #[test]
    fn history_goes_above_the_viewport_then_into_the_scrollback() {
        let mut screen = Screen::new(Emulator::new(20, 6), 1).unwrap();
        screen.set_height(2).unwrap();
        draw_box(&mut screen, "> input\nstatus");
        assert_eq!(screen.area(), Rect::new(0, 1, 20, 2));
        let lines: Vec<Line<'_>> = (1..=3).map(|n| Line::from(format!("line {n}"))).collect();
        screen.insert(&lines).unwrap();
        draw_box(&mut screen, "> input\nstatus");
        // Room below: the viewport moved down, nothing scrolled.
        assert_eq!(screen.area(), Rect::new(0, 4, 20, 2));
        assert_eq!(
            screen.backend().screen(),
            "\nline 1\nline 2\nline 3\n> input\nstatus"
        );
        let more: Vec<Line<'_>> = (4..=6).map(|n| Line::from(format!("line {n}"))).collect();
        screen.insert(&more).unwrap();
        screen.set_height(3).unwrap();
        draw_box(&mut screen, "> input\nmenu\nstatus");
        assert_eq!(screen.area(), Rect::new(0, 3, 20, 3));
        let everything = screen.terminal.backend_mut().everything();
        assert_eq!(
            everything,
            "\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\n> input\nmenu\nstatus"
        );
    }

    #[test]
    fn shrinking_blanks_the_rows_given_up_and_resizing_keeps_the_viewport_on_screen() {
        let mut screen = Screen::new(Emulator::new(20, 6), 5).unwrap();
        screen.set_height(4).unwrap();
        assert_eq!(screen.area(), Rect::new(0, 2, 20, 4));
        draw_box(&mut screen, "a\nb\nc\nd");
        screen.set_height(2).unwrap();
        draw_box(&mut screen, "a\nb");
        assert_eq!(screen.backend().screen(), "\n\na\nb");
        screen.terminal.backend_mut().set_size(10, 3);
        screen.resized().unwrap();
        draw_box(&mut screen, "a\nb");
        assert!(screen.area().bottom() <= 3, "{:?}", screen.area());
        assert_eq!(screen.width(), 10);
    }

    #[test]
    fn a_tiny_screen_never_panics() {
        let mut screen = Screen::new(Emulator::new(1, 1), 40).unwrap();
        screen.set_height(9).unwrap();
        screen
            .insert(&[Line::from("wide ✨ text"), Line::from("")])
            .unwrap();
        draw_box(&mut screen, "x");
        screen.leave().unwrap();
        assert_eq!(screen.area().height, 1);
    }
}
