//! The menu under the prompt: the `/` commands and user commands that match what is typed,
//! and `@path` completions.

use std::time::Instant;

use shiro_agent::attach::complete_path;

use super::{App, Menu, MenuItem};

impl App {
    pub(super) fn move_menu(&mut self, by: isize) {
        if let Some(menu) = &mut self.menu {
            let len = menu.items.len();
            if len > 0 {
                menu.selected = (menu.selected as isize + by).rem_euclid(len as isize) as usize;
            }
        }
    }

    /// Puts the menu's choice in the prompt. Enter on a command sends it; Tab leaves room
    /// for its arguments.
    pub(super) fn accept_menu(&mut self, enter: bool, now: Instant) {
        let Some(menu) = self.menu.take() else {
            if !enter {
                self.refresh_menu_forced();
            }
            return;
        };
        let Some(item) = menu.items.get(menu.selected).cloned() else {
            return;
        };
        self.editor
            .replace_before_cursor(menu.start, &item.replacement);
        if menu.commands {
            if enter {
                self.enter(now);
                return;
            }
            self.editor.insert(" ");
        }
        self.refresh_menu();
    }

    /// Opens, filters or closes the menu after an edit.
    pub(super) fn refresh_menu(&mut self) {
        let word = self.editor.word_before_cursor().1.to_owned();
        if self.menu_dismissed.as_deref() == Some(word.as_str()) {
            return;
        }
        self.menu_dismissed = None;
        self.menu = self.menu_for(false);
    }

    pub(super) fn refresh_menu_forced(&mut self) {
        self.menu_dismissed = None;
        self.menu = self.menu_for(true);
    }

    pub(super) fn menu_for(&self, forced: bool) -> Option<Menu> {
        if self.approval() || self.picking() {
            return None;
        }
        let (start, word) = self.editor.word_before_cursor();
        let at_end = self.editor.cursor() == self.editor.text().len();
        if start == 0 && at_end && word.starts_with('/') && !self.editor.text().contains('\n') {
            let registry = self.registry.as_ref()?;
            let typed = word[1..].to_lowercase();
            // What can be typed: a skill for the model alone is not offered.
            let entries = registry.menu();
            let mut items: Vec<(bool, MenuItem)> = entries
                .into_iter()
                .filter(|entry| entry.name.contains(&typed))
                .map(|entry| {
                    let hint = entry
                        .argument_hint
                        .as_deref()
                        .map(|hint| format!(" {hint}"))
                        .unwrap_or_default();
                    (
                        entry.name.starts_with(&typed),
                        MenuItem {
                            label: format!("/{}{hint}", entry.name),
                            detail: match shiro_agent::headless::skill_marker(&entry) {
                                // How to use it comes first: a narrow menu cuts the end.
                                Some(marker) if entry.untrusted => format!(
                                    "{} {}",
                                    marker.replace("untrusted", "untrusted: /trust to use it"),
                                    entry.summary.as_deref().unwrap_or_default()
                                ),
                                Some(marker) => format!(
                                    "{marker} {}",
                                    entry.summary.as_deref().unwrap_or_default()
                                ),
                                None => entry.summary.clone().unwrap_or_default(),
                            },
                            replacement: format!("/{}", entry.name),
                        },
                    )
                })
                .collect();
            // Names that start with what was typed come first.
            items.sort_by_key(|(prefix, _)| !prefix);
            let items: Vec<MenuItem> = items.into_iter().map(|(_, item)| item).collect();
            return (!items.is_empty()).then_some(Menu {
                start: 0,
                items,
                selected: 0,
                commands: true,
            });
        }
        if let Some(partial) = word.strip_prefix('@') {
            let items: Vec<MenuItem> = complete_path(&self.root, partial)
                .into_iter()
                .map(|pair| MenuItem {
                    label: pair.display,
                    detail: String::new(),
                    replacement: pair.replacement,
                })
                .collect();
            return (!items.is_empty() && (forced || !partial.ends_with(' '))).then_some(Menu {
                start,
                items,
                selected: 0,
                commands: false,
            });
        }
        None
    }
}
