//! The `/bashes` picker: the session's background commands, one of which the person shows or
//! stops.

use crossterm::event::KeyCode;
use shiro_agent::protocol::{BackgroundAction, BackgroundChoice, BackgroundItem};
use std::sync::mpsc::Sender;

use super::App;

/// The open `/bashes` picker.
#[derive(Debug)]
pub struct BashesPicker {
    /// The session's background commands, oldest first.
    pub commands: Vec<BackgroundItem>,
    /// The selected one.
    pub selected: usize,
    reply: Sender<Option<BackgroundChoice>>,
}

impl BashesPicker {
    /// A picker over `commands` (not empty) whose choice goes to `reply`; the newest is
    /// selected.
    pub(super) fn new(
        commands: Vec<BackgroundItem>,
        reply: Sender<Option<BackgroundChoice>>,
    ) -> Self {
        Self {
            selected: commands.len().saturating_sub(1),
            commands,
            reply,
        }
    }

    /// The selected command.
    pub fn command(&self) -> Option<&BackgroundItem> {
        self.commands.get(self.selected)
    }
}

impl App {
    /// A key while the `/bashes` picker is open: ↑↓ choose, Enter shows the output, `k` (or
    /// Delete) stops a running command, Esc or Ctrl-C close it.
    pub(super) fn bashes_picker_key(&mut self, code: KeyCode, ctrl: bool) {
        let Some(picker) = &mut self.bashes_picker else {
            return;
        };
        let chosen = |picker: &BashesPicker, action| {
            picker.command().map(|command| BackgroundChoice {
                id: command.id.clone(),
                action,
            })
        };
        let choice = match code {
            KeyCode::Up => {
                picker.selected = picker.selected.saturating_sub(1);
                return;
            }
            KeyCode::Down => {
                picker.selected =
                    (picker.selected + 1).min(picker.commands.len().saturating_sub(1));
                return;
            }
            KeyCode::Char('c') if ctrl => None,
            KeyCode::Esc => None,
            KeyCode::Enter => chosen(picker, BackgroundAction::Show),
            // Stopping one that has ended would do nothing: the key waits for a running one.
            KeyCode::Char('k') | KeyCode::Delete
                if picker.command().is_some_and(|command| command.running) =>
            {
                chosen(picker, BackgroundAction::Kill)
            }
            _ => return,
        };
        if let Some(picker) = self.bashes_picker.take() {
            let _ = picker.reply.send(choice);
        }
    }
}
