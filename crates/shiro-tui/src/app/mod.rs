//! The UI's state: what the agent reported, what the person is typing, and what is shown
//! live. It is driven by messages ([`ToFront`]) and keys, and knows nothing of the terminal, so
//! every state can be drawn into a test buffer.

use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use shiro_agent::protocol::{Answer, Op, RewindChoice, RewindScope, Scope};
pub use shiro_agent::protocol::{Phase, PickItem, ReadKind, StatusInfo, ToFront, TurnItem};
use shiro_commands::Registry;

pub use self::bashes::BashesPicker;
use super::editor::Editor;
use super::markdown::{self, MarkdownStream, Options};

mod bashes;
mod menu;
mod transcript;

/// What the UI asks of the loop that runs it after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing beyond a redraw.
    None,
    /// Stop the running turn (as Ctrl-C does to a process).
    Cancel,
    /// Move the running `bash` command to the background (Ctrl-B).
    Background,
}

/// The `/` and `@` menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Menu {
    /// Where the completed word starts in the editor's text.
    pub start: usize,
    /// The choices.
    pub items: Vec<MenuItem>,
    /// The selected choice.
    pub selected: usize,
    /// Whether it completes a `/` command (Enter then sends it, Tab leaves room for its
    /// arguments).
    pub commands: bool,
}

/// One choice of the menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuItem {
    /// What is shown.
    pub label: String,
    /// The summary after it.
    pub detail: String,
    /// What replaces the word.
    pub replacement: String,
}

/// The session picker.
#[derive(Debug)]
pub struct Picker {
    /// The sessions.
    pub sessions: Vec<PickItem>,
    /// The selected one.
    pub selected: usize,
    reply: Sender<Option<String>>,
}

/// The rewind picker: a turn of the session, then what to take back.
#[derive(Debug)]
pub struct TurnPicker {
    /// The session's turns, newest first.
    pub turns: Vec<TurnItem>,
    /// The selected turn.
    pub selected: usize,
    /// Once a turn is chosen: the selected scope, an index into [`RewindScope::ALL`].
    pub scope: Option<usize>,
    reply: Sender<Option<RewindChoice>>,
}

impl TurnPicker {
    /// The turn chosen or selected.
    pub fn turn(&self) -> Option<&TurnItem> {
        self.turns.get(self.selected)
    }
}

/// A running `bash` command's output, for the live area.
#[derive(Debug, Default)]
pub struct BashLive {
    /// The command line.
    pub command: String,
    /// The output so far, cut to its last lines.
    pub tail: Vec<String>,
    /// The unfinished last line.
    pub partial: String,
    /// How many lines came.
    pub lines: usize,
}

/// How many lines of a running command's output are shown.
pub const BASH_TAIL: usize = 5;
/// How many lines of a diff a card shows before Ctrl-O.
pub const CARD_DIFF_LINES: usize = 12;
/// How many lines of a tool's result a card shows.
pub const CARD_RESULT_LINES: usize = 4;
/// How long a first Ctrl-C on an empty prompt waits for the second.
pub const QUIT_WINDOW: Duration = Duration::from_secs(2);

/// The UI's state.
pub struct App {
    /// Transcript lines, wrapped, waiting to be printed above the viewport.
    pending: Vec<Line<'static>>,
    /// The screen's width.
    pub width: u16,
    /// Colour on or off.
    pub color: bool,
    /// The prompt being typed.
    pub editor: Editor,
    /// What the agent waits for, and where the answer goes.
    reading: Option<(ReadKind, Sender<Op>)>,
    /// A prompt sent while a turn ran: it goes as soon as the agent asks for one.
    pub queued: Option<String>,
    /// Esc Esc pressed after a turn's end was shown but before the agent asked for the next
    /// prompt: the rewind goes as soon as it asks.
    rewind_queued: bool,
    /// The model's text of this step, as it streams.
    stream: Option<MarkdownStream>,
    /// What the running turn does, since when; `None` between turns.
    pub phase: Option<(Phase, Instant)>,
    /// When the running turn began.
    pub turn_started: Option<Instant>,
    /// A stop was asked for this turn.
    pub stopping: bool,
    /// The running bash command.
    pub bash: Option<BashLive>,
    /// The diff of a call waiting to be run or approved.
    preview: Option<String>,
    /// The last card's full lines, for Ctrl-O.
    last_card: Vec<Line<'static>>,
    /// The open menu.
    pub menu: Option<Menu>,
    /// The word the menu was closed on with Esc; it stays closed until the word changes.
    menu_dismissed: Option<String>,
    /// The open session picker.
    pub picker: Option<Picker>,
    /// The open rewind picker.
    pub turn_picker: Option<TurnPicker>,
    /// The open `/bashes` picker.
    pub bashes_picker: Option<BashesPicker>,
    /// Esc was pressed on an empty prompt: another opens the rewind picker.
    pub esc_armed: bool,
    /// The status line's facts.
    pub status: StatusInfo,
    /// The footer's hint after a turn that changed files.
    pub hint: Option<String>,
    /// When Ctrl-C was pressed on an empty prompt.
    quit_armed: Option<Instant>,
    /// The person asked to leave.
    pub quit: bool,
    registry: Option<Registry>,
    root: PathBuf,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("width", &self.width)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

impl App {
    /// A UI `width` columns wide, completing `/` from `registry` and `@` under `root`.
    pub fn new(width: u16, color: bool, registry: Option<Registry>, root: PathBuf) -> Self {
        App {
            pending: Vec::new(),
            width: width.max(1),
            color,
            editor: Editor::default(),
            reading: None,
            queued: None,
            rewind_queued: false,
            stream: None,
            phase: None,
            turn_started: None,
            stopping: false,
            bash: None,
            preview: None,
            last_card: Vec::new(),
            menu: None,
            menu_dismissed: None,
            picker: None,
            turn_picker: None,
            bashes_picker: None,
            esc_armed: false,
            status: StatusInfo::default(),
            hint: None,
            quit_armed: None,
            quit: false,
            registry,
            root,
        }
    }

    /// The transcript lines to print above the viewport now.
    pub fn take_pending(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.pending)
    }

    /// What the agent waits for, if anything.
    pub fn reading(&self) -> Option<&ReadKind> {
        self.reading.as_ref().map(|(kind, _)| kind)
    }

    /// The streamed text not yet printed, rendered.
    pub fn live_text(&self) -> Vec<Line<'static>> {
        self.stream
            .as_ref()
            .map(|stream| stream.live(self.width))
            .unwrap_or_default()
    }

    /// The diff waiting for a decision.
    pub fn preview(&self) -> Option<&str> {
        self.preview.as_deref()
    }

    fn options(&self) -> Options {
        Options { color: self.color }
    }

    fn style(&self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    /// Adds transcript lines, each wrapped to the width.
    fn push_lines(&mut self, lines: impl IntoIterator<Item = Line<'static>>) {
        for line in lines {
            self.pending.extend(markdown::wrap(&line, self.width, "  "));
        }
    }

    /// Adds plain text, line by line, in `style`.
    fn push_text(&mut self, text: &str, style: Style) {
        let lines: Vec<Line<'static>> = text
            .trim_end_matches('\n')
            .split('\n')
            .map(|line| Line::styled(line.to_owned(), style))
            .collect();
        self.push_lines(lines);
    }

    /// A blank line between entries, unless the transcript is at its start.
    fn gap(&mut self) {
        self.pending.push(Line::default());
    }

    fn flush_stream(&mut self) {
        if let Some(mut stream) = self.stream.take() {
            let lines = stream.finish(self.width);
            self.pending.extend(lines);
        }
    }

    /// Handles a message of the agent.
    pub fn on_agent(&mut self, message: ToFront, now: Instant) {
        match message {
            ToFront::Info(text) => {
                self.flush_stream();
                self.push_text(&text, Style::default());
            }
            ToFront::Preview(text) => {
                self.flush_stream();
                self.preview = Some(text);
            }
            ToFront::Delta(text) => {
                let width = self.width;
                if self.stream.is_none() {
                    self.gap();
                }
                let options = self.options();
                let stream = self
                    .stream
                    .get_or_insert_with(|| MarkdownStream::new(options));
                stream.push(&text);
                let lines = stream.take_committed(width);
                self.pending.extend(lines);
            }
            ToFront::Event(event) => self.on_event(event, now),
            ToFront::Phase(phase) => {
                if self.turn_started.is_none() {
                    self.turn_started = Some(now);
                }
                self.phase = Some((phase, now));
            }
            ToFront::BashOutput(text) => {
                let bash = self.bash.get_or_insert_with(BashLive::default);
                bash.partial.push_str(&text);
                while let Some(at) = bash.partial.find('\n') {
                    let line: String = bash.partial[..at].trim_end_matches('\r').to_owned();
                    bash.partial.replace_range(..=at, "");
                    bash.lines += 1;
                    bash.tail.push(line);
                    if bash.tail.len() > BASH_TAIL {
                        bash.tail.remove(0);
                    }
                }
            }
            ToFront::Read { kind, reply } => {
                self.flush_stream();
                if self.quit {
                    // The person left before the agent asked (Ctrl-D as a turn ended, while
                    // the agent still saved it): the question is answered as it would have
                    // been, or the agent would wait for a key that was already pressed.
                    let _ = reply.send(Op::Quit);
                    return;
                }
                if kind == ReadKind::Prompt {
                    self.end_turn();
                    if std::mem::take(&mut self.rewind_queued) {
                        let _ = reply.send(Op::Rewind);
                        self.start_rewind(now);
                        return;
                    }
                    if let Some(queued) = self.queued.take() {
                        self.echo_prompt(&queued);
                        let _ = reply.send(Op::Submit(queued));
                        self.turn_started = Some(now);
                        self.phase = Some((Phase::Waiting, now));
                        return;
                    }
                } else if let Some(preview) = self.preview.take() {
                    // Asked: the diff goes to the transcript in full; a command only when
                    // the card's header had to cut it.
                    let shown = self.bash.as_ref().map(|bash| format!("$ {}", bash.command));
                    if shown.as_deref() != Some(preview.trim_end_matches('\n')) {
                        let lines = self.diff_lines(&preview);
                        self.push_lines(lines);
                    }
                }
                self.reading = Some((kind, reply));
            }
            ToFront::Status(status) => self.status = status,
            ToFront::BackgroundRunning(running) => {
                if let Some(count) = &mut self.status.background {
                    *count = running;
                }
            }
            ToFront::Replay(conversation) => self.replay(&conversation),
            ToFront::PickTurn { turns, reply } => {
                // The agent waits for the person now, not the other way round.
                self.end_turn();
                if self.quit || turns.is_empty() {
                    let _ = reply.send(None);
                } else {
                    self.turn_picker = Some(TurnPicker {
                        turns,
                        selected: 0,
                        scope: None,
                        reply,
                    });
                }
            }
            ToFront::Prefill(text) => {
                self.editor.take();
                self.editor.insert(&text);
                self.menu = None;
            }
            ToFront::PickBackground { commands, reply } => {
                if self.quit || commands.is_empty() {
                    let _ = reply.send(None);
                } else {
                    self.bashes_picker = Some(BashesPicker::new(commands, reply));
                }
            }
            ToFront::Pick { sessions, reply } => {
                self.end_turn();
                if self.quit {
                    let _ = reply.send(None);
                } else if sessions.is_empty() {
                    let _ = reply.send(None);
                    self.push_text("no saved sessions in this workspace", dim());
                } else {
                    self.picker = Some(Picker {
                        sessions,
                        selected: 0,
                        reply,
                    });
                }
            }
        }
    }

    /// A rewind was asked for: it runs as a turn does, under the spinner, until the agent
    /// shows its picker.
    fn start_rewind(&mut self, now: Instant) {
        self.turn_started = Some(now);
        self.phase = Some((Phase::Tool("/rewind".to_owned()), now));
    }

    /// The turn is over: its live parts go.
    fn end_turn(&mut self) {
        self.phase = None;
        self.turn_started = None;
        self.stopping = false;
        self.bash = None;
        self.preview = None;
    }

    /// Handles pasted text: it goes into the prompt as typed, newlines kept.
    pub fn on_paste(&mut self, text: &str) {
        if !self.picking() {
            self.editor.insert(text);
            self.refresh_menu();
        }
    }

    /// Handles a key.
    pub fn on_key(&mut self, key: KeyEvent, now: Instant) -> Effect {
        if key.kind == KeyEventKind::Release {
            return Effect::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        if self.picker.is_some() {
            self.picker_key(key.code, ctrl);
            return Effect::None;
        }
        if self.turn_picker.is_some() {
            self.turn_picker_key(key.code, ctrl);
            return Effect::None;
        }
        if self.bashes_picker.is_some() {
            self.bashes_picker_key(key.code, ctrl);
            return Effect::None;
        }
        let busy = self.turn_started.is_some() || self.approval();
        if key.code == KeyCode::Char('b') && ctrl && self.can_background() {
            return Effect::Background;
        }
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if busy {
                    return self.stop();
                }
                if !self.editor.is_empty() {
                    self.editor.take();
                    self.menu = None;
                    self.quit_armed = None;
                    return Effect::None;
                }
                match self.quit_armed {
                    Some(at) if now.duration_since(at) <= QUIT_WINDOW => self.leave(),
                    _ => self.quit_armed = Some(now),
                }
                return Effect::None;
            }
            KeyCode::Esc => {
                if self.menu.is_some() {
                    self.menu_dismissed = Some(self.editor.word_before_cursor().1.to_owned());
                    self.menu = None;
                    return Effect::None;
                }
                if busy {
                    return self.stop();
                }
                // Esc Esc on an empty prompt: the rewind picker. Any other key in between
                // disarms it; no clock decides. The prompt shows empty as soon as a turn's
                // end is reported, a moment before the agent asks for the next line (it
                // saves the turn first): Esc Esc in that moment is answered when it asks.
                if self.editor.is_empty() && matches!(self.reading(), None | Some(ReadKind::Prompt))
                {
                    if self.esc_armed {
                        self.esc_armed = false;
                        if self.reading.is_some() {
                            self.answer_with(Op::Rewind);
                        } else {
                            self.rewind_queued = true;
                        }
                        self.start_rewind(now);
                    } else {
                        self.esc_armed = true;
                    }
                }
                return Effect::None;
            }
            KeyCode::Char('d') if ctrl => {
                if self.editor.is_empty() && !busy {
                    self.leave();
                } else {
                    self.editor.delete();
                }
            }
            KeyCode::Char('o') if ctrl => {
                if !self.last_card.is_empty() {
                    let card = self.last_card.clone();
                    self.push_lines(card);
                }
                return Effect::None;
            }
            KeyCode::Enter if shift || alt => self.editor.insert("\n"),
            KeyCode::Char('j') if ctrl => self.editor.insert("\n"),
            KeyCode::Enter => self.enter(now),
            KeyCode::Tab => self.accept_menu(false, now),
            KeyCode::Up if self.menu.is_some() => {
                self.move_menu(-1);
                return Effect::None;
            }
            KeyCode::Down if self.menu.is_some() => {
                self.move_menu(1);
                return Effect::None;
            }
            KeyCode::Up => {
                self.editor.up();
            }
            KeyCode::Down => {
                self.editor.down();
            }
            KeyCode::Left if ctrl || alt => self.editor.word_left(),
            KeyCode::Right if ctrl || alt => self.editor.word_right(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Char('u') if ctrl => self.editor.delete_to_line_start(),
            KeyCode::Char('k') if ctrl => self.editor.delete_to_line_end(),
            KeyCode::Char('w') if ctrl => self.editor.delete_word(),
            KeyCode::Backspace if ctrl || alt => self.editor.delete_word(),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Char(c) if !ctrl => {
                if self.approval() && self.editor.is_empty() {
                    let keep = matches!(self.reading, Some((ReadKind::Keep { .. }, _)));
                    let op = match (keep, c.to_ascii_lowercase()) {
                        (false, 'y') => Some(Op::Approve(Answer::Once)),
                        (false, 'a') => Some(Op::Approve(Answer::Always)),
                        (true, 's') => Some(Op::Keep(Scope::Session)),
                        (true, 'w') => Some(Op::Keep(Scope::Workspace)),
                        (true, 'u') => Some(Op::Keep(Scope::User)),
                        _ => None,
                    };
                    if let Some(op) = op {
                        self.answer_with(op);
                        return Effect::None;
                    }
                    if !keep && c.eq_ignore_ascii_case(&'n') {
                        // Room for a reason; Enter sends it.
                        self.editor.insert("n ");
                        return Effect::None;
                    }
                }
                self.editor.insert(&c.to_string());
            }
            _ => return Effect::None,
        }
        self.quit_armed = None;
        self.esc_armed = false;
        self.refresh_menu();
        Effect::None
    }

    /// Whether the agent waits for an answer to a question (an approval, or where to keep
    /// an "always" rule) rather than for a prompt.
    fn approval(&self) -> bool {
        matches!(
            self.reading,
            Some((ReadKind::Approval { .. } | ReadKind::Keep { .. }, _))
        )
    }

    /// Whether a second Ctrl-C now leaves.
    pub fn quit_armed(&self, now: Instant) -> bool {
        self.quit_armed
            .is_some_and(|at| now.duration_since(at) <= QUIT_WINDOW)
    }

    /// Stops the running turn: once; a second press only says it is stopping.
    fn stop(&mut self) -> Effect {
        self.menu = None;
        if std::mem::take(&mut self.rewind_queued) {
            // The agent never saw the rewind: it is dropped, and there is nothing to stop.
            self.end_turn();
            return Effect::None;
        }
        if self.approval() {
            // The call is refused and the turn is stopped with it.
            self.answer_with(Op::Interrupt);
        }
        if self.stopping {
            return Effect::None;
        }
        self.stopping = true;
        Effect::Cancel
    }

    fn leave(&mut self) {
        self.quit = true;
        if let Some((_, reply)) = self.reading.take() {
            let _ = reply.send(Op::Quit);
        }
    }

    fn answer(&mut self, line: String) {
        self.answer_with(Op::Submit(line));
    }

    fn answer_with(&mut self, op: Op) {
        if let Some((_, reply)) = self.reading.take() {
            let _ = reply.send(op);
        }
        self.editor.take();
    }

    fn enter(&mut self, now: Instant) {
        if self.menu.is_some() {
            self.accept_menu(true, now);
            return;
        }
        // A trailing backslash continues the prompt on a new line, as in a shell.
        if self.editor.text()[..self.editor.cursor()].ends_with('\\') {
            self.editor.backspace();
            self.editor.insert("\n");
            return;
        }
        if self.approval() {
            let line = self.editor.take();
            self.answer(line);
            return;
        }
        let text = self.editor.text().trim().to_owned();
        if text.is_empty() {
            return;
        }
        self.editor.take();
        self.editor.remember(&text);
        match self.reading.take() {
            Some((ReadKind::Prompt, reply)) => {
                self.echo_prompt(&text);
                self.hint = None;
                // A command says what it runs until the model is asked (a user command's
                // turn then says so itself).
                let phase = match text.strip_prefix('/') {
                    Some(command) => Phase::Tool(format!(
                        "/{}",
                        command.split_whitespace().next().unwrap_or("")
                    )),
                    None => Phase::Waiting,
                };
                let _ = reply.send(Op::Submit(text));
                self.turn_started = Some(now);
                self.phase = Some((phase, now));
            }
            other => {
                // A turn runs: the prompt waits for it to end.
                self.reading = other;
                self.queued = Some(text);
            }
        }
    }

    fn picker_key(&mut self, code: KeyCode, ctrl: bool) {
        let Some(picker) = &mut self.picker else {
            return;
        };
        let len = picker.sessions.len();
        match code {
            KeyCode::Up => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Down => picker.selected = (picker.selected + 1).min(len.saturating_sub(1)),
            KeyCode::Enter => {
                let id = picker.sessions.get(picker.selected).map(|s| s.id.clone());
                if let Some(picker) = self.picker.take() {
                    let _ = picker.reply.send(id);
                }
            }
            KeyCode::Esc => {
                if let Some(picker) = self.picker.take() {
                    let _ = picker.reply.send(None);
                }
            }
            KeyCode::Char('c') if ctrl => {
                if let Some(picker) = self.picker.take() {
                    let _ = picker.reply.send(None);
                }
            }
            _ => {}
        }
    }

    fn turn_picker_key(&mut self, code: KeyCode, ctrl: bool) {
        let Some(picker) = &mut self.turn_picker else {
            return;
        };
        let close = |app: &mut Self, choice: Option<RewindChoice>| {
            if let Some(picker) = app.turn_picker.take() {
                let _ = picker.reply.send(choice);
            }
        };
        match (picker.scope, code) {
            (_, KeyCode::Char('c')) if ctrl => close(self, None),
            (None, KeyCode::Up) => picker.selected = picker.selected.saturating_sub(1),
            (None, KeyCode::Down) => {
                picker.selected = (picker.selected + 1).min(picker.turns.len().saturating_sub(1));
            }
            (None, KeyCode::Enter) => {
                // A turn whose files cannot go back starts at the conversation alone.
                let blocked = picker.turn().is_some_and(|turn| turn.blocked.is_some());
                picker.scope = Some(usize::from(blocked));
            }
            (None, KeyCode::Esc) => close(self, None),
            (Some(scope), KeyCode::Up) => picker.scope = Some(scope.saturating_sub(1)),
            (Some(scope), KeyCode::Down) => {
                picker.scope = Some((scope + 1).min(RewindScope::ALL.len() - 1));
            }
            (Some(scope), KeyCode::Enter) => {
                let choice = picker.turn().map(|turn| RewindChoice {
                    number: turn.number,
                    scope: RewindScope::ALL[scope.min(RewindScope::ALL.len() - 1)],
                });
                close(self, choice);
            }
            (Some(_), KeyCode::Char(digit @ '1'..='3')) => {
                let scope = RewindScope::ALL[usize::from(digit as u8 - b'1')];
                let choice = picker.turn().map(|turn| RewindChoice {
                    number: turn.number,
                    scope,
                });
                close(self, choice);
            }
            (Some(_), KeyCode::Esc) => picker.scope = None,
            _ => {}
        }
    }

    /// Whether a picker is open in the prompt's place.
    pub fn picking(&self) -> bool {
        self.picker.is_some() || self.turn_picker.is_some() || self.bashes_picker.is_some()
    }

    /// Whether Ctrl-B would move something to the background now: a `bash` call runs and
    /// the session can start background commands.
    pub fn can_background(&self) -> bool {
        let bash = matches!(&self.phase, Some((Phase::Tool(name), _)) if name == "bash");
        bash && self.turn_started.is_some()
            && !self.stopping
            && !self.approval()
            && self.status.background.is_some()
    }

    /// The spinner's frame and what the running turn does, e.g. `Waiting for the model`.
    pub fn activity(&self, now: Instant) -> Option<(char, String, Duration)> {
        const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
        let started = self.turn_started?;
        let elapsed = now.saturating_duration_since(started);
        let frame = FRAMES[(elapsed.as_millis() / 80) as usize % FRAMES.len()];
        let what = if self.stopping {
            "Stopping".to_owned()
        } else if self.approval() {
            "Waiting for your answer".to_owned()
        } else {
            match &self.phase {
                Some((Phase::Tool(name), _)) => format!("Running {name}"),
                Some((Phase::Waiting, _)) if self.stream.is_some() => "Streaming".to_owned(),
                _ => "Waiting for the model".to_owned(),
            }
        };
        Some((frame, what, elapsed))
    }
}

#[cfg(test)]
mod tests {
    use shiro_agent::protocol::{Event, Status};

    use super::*;
    use crate::snapshots_test::{prompt, text};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn a_prompt_is_sent_when_asked_for_and_queued_while_a_turn_runs() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        let (reply, replies) = std::sync::mpsc::channel();
        app.on_agent(
            ToFront::Read {
                kind: ReadKind::Prompt,
                reply: reply.clone(),
            },
            now,
        );
        for c in "hi".chars() {
            app.on_key(key(KeyCode::Char(c)), now);
        }
        app.on_key(key(KeyCode::Enter), now);
        assert_eq!(replies.try_recv(), Ok(Op::Submit("hi".into())));
        assert!(app.turn_started.is_some());
        for c in "next".chars() {
            app.on_key(key(KeyCode::Char(c)), now);
        }
        app.on_key(key(KeyCode::Enter), now);
        assert_eq!(app.queued.as_deref(), Some("next"));
        assert!(replies.try_recv().is_err());
        app.on_agent(
            ToFront::Read {
                kind: ReadKind::Prompt,
                reply,
            },
            now,
        );
        assert_eq!(replies.try_recv(), Ok(Op::Submit("next".into())));
        assert!(text(&app.take_pending()).contains("› next"));
    }

    #[test]
    fn esc_and_ctrl_c_stop_a_turn_once_and_an_approval_with_it() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        app.on_agent(ToFront::Phase(Phase::Waiting), now);
        assert_eq!(app.on_key(key(KeyCode::Esc), now), Effect::Cancel);
        assert_eq!(app.on_key(key(KeyCode::Esc), now), Effect::None);
        app.on_agent(
            ToFront::Event(Event::TurnEnd {
                changed: Vec::new(),
                turn_id: None,
                steps: 1,
                error: Some("interrupted by Ctrl-C".into()),
                error_kind: None,
                usage: None,
                session_id: String::new(),
                background: Vec::new(),
            }),
            now,
        );
        assert!(app.turn_started.is_none());
        let (reply, replies) = std::sync::mpsc::channel();
        app.on_agent(ToFront::Phase(Phase::Tool("write_file".into())), now);
        app.on_agent(
            ToFront::Read {
                kind: ReadKind::Approval {
                    tool: "write_file".into(),
                    always: "always: write_file(./a.txt)".into(),
                },
                reply,
            },
            now,
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.on_key(ctrl_c, now), Effect::Cancel);
        assert_eq!(replies.try_recv(), Ok(Op::Interrupt));
    }

    #[test]
    fn a_long_diff_is_cut_in_its_card_and_ctrl_o_prints_it_whole() {
        let now = Instant::now();
        let mut app = App::new(60, false, None, PathBuf::from("/nonexistent"));
        app.on_agent(
            ToFront::Event(Event::ToolCall {
                id: "call_1".into(),
                name: "write_file".into(),
                arguments: serde_json::json!({"path": "big.txt"}),
            }),
            now,
        );
        let diff: String = (1..=30).map(|n| format!("+line {n}\n")).collect();
        app.on_agent(ToFront::Preview(diff), now);
        app.on_agent(
            ToFront::Event(Event::ToolResult {
                id: "call_1".into(),
                name: "write_file".into(),
                status: Status::Ok,
                output: "created big.txt".into(),
                changes: Vec::new(),
            }),
            now,
        );
        let card = text(&app.take_pending());
        assert!(
            card.contains("+line 12") && !card.contains("+line 13"),
            "{card}"
        );
        assert!(
            card.contains("… 18 more lines (ctrl+o shows them)"),
            "{card}"
        );
        app.on_key(
            KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
            now,
        );
        let whole = text(&app.take_pending());
        assert!(
            whole.contains("+line 30") && whole.contains("created big.txt"),
            "{whole}"
        );
    }

    /// The UI shows the empty prompt as soon as a turn's end is reported, before the agent
    /// has saved the turn and asked for the next line: a key pressed in between must reach
    /// the agent's next question, not be lost with the agent waiting for it.
    #[test]
    fn keys_pressed_as_a_turn_ends_reach_the_next_question() {
        let now = Instant::now();
        let turn_end = || {
            ToFront::Event(Event::TurnEnd {
                changed: Vec::new(),
                turn_id: None,
                steps: 1,
                error: None,
                error_kind: None,
                usage: None,
                session_id: "s".into(),
                background: Vec::new(),
            })
        };
        let ask = |app: &mut App, kind: ReadKind| {
            let (reply, replies) = std::sync::mpsc::channel();
            app.on_agent(ToFront::Read { kind, reply }, now);
            replies
        };
        // Types `text` into the prompt and presses Enter.
        let send_line = |app: &mut App, text: &str| {
            for c in text.chars() {
                app.on_key(key(KeyCode::Char(c)), now);
            }
            app.on_key(key(KeyCode::Enter), now);
        };
        // A prompt is asked for and answered, and the turn it starts ends.
        let run_a_turn = |app: &mut App| {
            let replies = prompt(app, now);
            send_line(app, "go");
            assert_eq!(replies.try_recv(), Ok(Op::Submit("go".into())));
            app.on_agent(turn_end(), now);
            assert!(app.turn_started.is_none() && app.reading.is_none());
        };
        // Ctrl-D between the turn's end and the next prompt: the prompt is answered `Eof`.
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        run_a_turn(&mut app);
        app.on_key(
            KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL),
            now,
        );
        assert!(app.quit);
        assert_eq!(ask(&mut app, ReadKind::Prompt).try_recv(), Ok(Op::Quit));
        // So is any later question, and a picker chooses nothing.
        let approval = ReadKind::Approval {
            tool: "bash".into(),
            always: "once".into(),
        };
        assert_eq!(ask(&mut app, approval).try_recv(), Ok(Op::Quit));
        let (reply, chosen) = std::sync::mpsc::channel();
        let sessions = vec![PickItem {
            id: "a".into(),
            when: "now".into(),
            first_prompt: "hi".into(),
            turns: 1,
            forked_at: None,
            depth: 0,
        }];
        app.on_agent(ToFront::Pick { sessions, reply }, now);
        assert_eq!(chosen.try_recv(), Ok(None));

        // Esc Esc in the same gap asks for the rewind picker when the prompt is asked for.
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        run_a_turn(&mut app);
        app.on_key(key(KeyCode::Esc), now);
        assert!(app.esc_armed, "the first Esc says what the second does");
        app.on_key(key(KeyCode::Esc), now);
        assert_eq!(ask(&mut app, ReadKind::Prompt).try_recv(), Ok(Op::Rewind));
        assert!(
            app.turn_started.is_some(),
            "the rewind runs under the spinner"
        );
        // Stopped before the agent asked: it is dropped, and the prompt is a prompt again.
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        run_a_turn(&mut app);
        for _ in 0..3 {
            app.on_key(key(KeyCode::Esc), now);
        }
        assert!(app.turn_started.is_none());
        send_line(&mut app, "hi");
        assert_eq!(
            ask(&mut app, ReadKind::Prompt).try_recv(),
            Ok(Op::Submit("hi".into()))
        );

        // A line typed and sent in the same gap is the next prompt's answer.
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        run_a_turn(&mut app);
        send_line(&mut app, "next");
        assert_eq!(
            ask(&mut app, ReadKind::Prompt).try_recv(),
            Ok(Op::Submit("next".into()))
        );
    }

    #[test]
    fn ctrl_c_twice_on_an_empty_prompt_leaves() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        let replies = prompt(&mut app, now);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        app.on_key(key(KeyCode::Char('x')), now);
        app.on_key(ctrl_c, now);
        assert!(app.editor.is_empty() && !app.quit);
        app.on_key(ctrl_c, now);
        assert!(!app.quit && app.quit_armed(now));
        // Too late: the first press is forgotten.
        app.on_key(ctrl_c, now + QUIT_WINDOW * 2);
        assert!(!app.quit);
        app.on_key(ctrl_c, now + QUIT_WINDOW * 2 + Duration::from_millis(100));
        assert!(app.quit);
        assert_eq!(replies.try_recv(), Ok(Op::Quit));
    }

    #[test]
    fn approvals_take_single_keys_and_a_reason() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        let (reply, replies) = std::sync::mpsc::channel();
        let ask = |reply: Sender<Op>| ToFront::Read {
            kind: ReadKind::Approval {
                tool: "bash".into(),
                always: "always: bash(git status:*)".into(),
            },
            reply,
        };
        app.on_agent(ask(reply.clone()), now);
        app.on_key(key(KeyCode::Char('y')), now);
        assert_eq!(replies.try_recv(), Ok(Op::Approve(Answer::Once)));
        app.on_agent(ask(reply.clone()), now);
        app.on_key(key(KeyCode::Char('A')), now);
        assert_eq!(replies.try_recv(), Ok(Op::Approve(Answer::Always)));
        app.on_agent(ask(reply), now);
        for c in "nuse git".chars() {
            app.on_key(key(KeyCode::Char(c)), now);
        }
        app.on_key(key(KeyCode::Enter), now);
        assert_eq!(replies.try_recv(), Ok(Op::Submit("n use git".into())));
    }

    #[test]
    fn multi_line_input_by_shift_enter_alt_enter_and_a_trailing_backslash() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        app.on_key(key(KeyCode::Char('a')), now);
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT), now);
        app.on_key(key(KeyCode::Char('b')), now);
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), now);
        app.on_key(key(KeyCode::Char('\\')), now);
        app.on_key(key(KeyCode::Enter), now);
        app.on_key(key(KeyCode::Char('c')), now);
        assert_eq!(app.editor.text(), "a\nb\n\nc");
    }

    #[test]
    fn streamed_text_is_printed_in_blocks_and_bash_output_is_tailed() {
        let now = Instant::now();
        let mut app = App::new(40, false, None, PathBuf::from("/nonexistent"));
        app.on_agent(ToFront::Delta("first para".into()), now);
        assert_eq!(text(&app.live_text()), "first para");
        app.on_agent(ToFront::Delta("graph\n\nsecond".into()), now);
        assert!(text(&app.take_pending()).contains("first paragraph"));
        app.on_agent(
            ToFront::Event(Event::AssistantText {
                text: String::new(),
            }),
            now,
        );
        assert!(text(&app.take_pending()).contains("second"));
        for n in 0..8 {
            app.on_agent(ToFront::BashOutput(format!("line {n}\n")), now);
        }
        app.on_agent(ToFront::BashOutput("part".into()), now);
        let bash = app.bash.as_ref().unwrap();
        assert_eq!(bash.tail.first().map(String::as_str), Some("line 3"));
        assert_eq!((bash.lines, bash.partial.as_str()), (8, "part"));
    }
}
