//! The line interface's editor on a terminal: history (saved beside the sessions,
//! `history.txt`) and Tab completion of `/` commands with their summaries and of `@` paths,
//! which the terminal UI's menu completes too.

use std::path::{Path, PathBuf};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History as _};
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Editor, Helper};
use shiro_agent::events::Printer;
use shiro_agent::input::Input;
use shiro_agent::protocol::Op;
use shiro_commands::Registry;

/// The terminal line editor: history (saved beside the sessions, `history.txt`) and Tab
/// completion of `/` commands with their summaries and of `@` paths.
pub struct Terminal {
    editor: Editor<Completion, DefaultHistory>,
    history_file: PathBuf,
    /// Text the next prompt starts with (a rewound turn's prompt).
    initial: Option<String>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal").finish_non_exhaustive()
    }
}

impl Terminal {
    /// A line editor completing from `registry` and the files under `root`, keeping its
    /// history in `history_file`.
    pub fn new(root: &Path, history_file: PathBuf, registry: Registry) -> anyhow::Result<Self> {
        let config = Config::builder()
            .completion_type(CompletionType::List)
            .auto_add_history(false)
            .max_history_size(1000)?
            .build();
        let mut editor = Editor::with_config(config)?;
        editor.set_helper(Some(Completion {
            root: root.to_owned(),
            registry,
        }));
        // No history yet is the normal first run.
        let _ = editor.load_history(&history_file);
        Ok(Terminal {
            editor,
            history_file,
            initial: None,
        })
    }
}

impl Input for Terminal {
    fn read(&mut self, prompt: &str, _printer: &mut Printer) -> Op {
        let read = match self.initial.take() {
            Some(text) => self.editor.readline_with_initial(prompt, (&text, "")),
            None => self.editor.readline(prompt),
        };
        match read {
            Ok(line) => Op::Submit(line),
            Err(ReadlineError::Interrupted) => Op::Interrupt,
            Err(_) => Op::Quit,
        }
    }

    fn prefill(&mut self, text: &str) {
        self.initial = Some(text.to_owned());
    }

    fn remember(&mut self, line: &str) {
        let _ = self.editor.add_history_entry(line);
        // Saved at once so that history survives a crash; losing it is not worth an error.
        let _ = self.editor.history_mut().save(&self.history_file);
    }
}

/// Tab completion for the REPL.
struct Completion {
    root: PathBuf,
    registry: Registry,
}

impl Completer for Completion {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = line.get(..pos).unwrap_or(line);
        // After the last whitespace character, which may be wider than one byte.
        let start = before
            .char_indices()
            .rfind(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = &before[start..];
        if start == 0 && word.starts_with('/') {
            return Ok((0, complete_command(&self.registry, &word[1..])));
        }
        if let Some(partial) = word.strip_prefix('@') {
            return Ok((start, complete_path(&self.root, partial)));
        }
        Ok((pos, Vec::new()))
    }
}

impl Hinter for Completion {
    type Hint = String;
}
impl Highlighter for Completion {}
impl Validator for Completion {}
impl Helper for Completion {}

/// `/` names starting with `prefix`, each shown with its summary: what can be typed, as the
/// `/` menu shows it (no skill for the model alone).
pub fn complete_command(registry: &Registry, prefix: &str) -> Vec<Pair> {
    let prefix = prefix.to_lowercase();
    registry
        .menu()
        .into_iter()
        .filter(|entry| entry.name.starts_with(&prefix))
        .map(|entry| Pair {
            display: format!("/{:<12} {}", entry.name, entry.summary.unwrap_or_default()),
            replacement: format!("/{} ", entry.name),
        })
        .collect()
}

/// Workspace paths starting with `partial`, as `@path` (directories end with `/`).
pub fn complete_path(root: &Path, partial: &str) -> Vec<Pair> {
    shiro_agent::attach::complete_path(root, partial)
        .into_iter()
        .map(|choice| Pair {
            display: choice.display,
            replacement: choice.replacement,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_after_wide_whitespace_without_panicking() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("notes.md"), "").unwrap();
        let registry = Registry::load(shiro_commands::Sources {
            workspace_root: root.path().to_owned(),
            builtins: vec![("undo".into(), "undo the last turn".into())],
            ..shiro_commands::Sources::default()
        });
        let helper = Completion {
            root: root.path().to_owned(),
            registry,
        };
        let history = DefaultHistory::new();
        let ctx = rustyline::Context::new(&history);
        let line = "look at\u{3000}@no";
        let (start, pairs) = helper.complete(line, line.len(), &ctx).unwrap();
        assert_eq!(&line[start..], "@no");
        assert_eq!(
            pairs
                .iter()
                .map(|p| p.replacement.as_str())
                .collect::<Vec<_>>(),
            ["@notes.md"]
        );
        let (start, pairs) = helper.complete("/un", 3, &ctx).unwrap();
        assert_eq!(start, 0);
        assert_eq!(pairs[0].replacement, "/undo ");
        assert!(
            pairs[0].display.contains("undo the last turn"),
            "{}",
            pairs[0].display
        );
    }

    /// A skill for the model alone (`user-invocable: false`) cannot be typed, so it is not
    /// offered; one the user may type is.
    #[test]
    fn completion_offers_no_skill_for_the_model_alone() {
        let root = tempfile::tempdir().unwrap();
        for (name, invocable) in [("deploy-hidden", "false"), ("deploy-shown", "true")] {
            let dir = root.path().join(".shiro/skills").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!(
                    "---\nname: {name}\ndescription: Deploys.\nuser-invocable: {invocable}\n---\nDeploy.\n"
                ),
            )
            .unwrap();
        }
        let registry = Registry::load(shiro_commands::Sources {
            workspace_root: root.path().to_owned(),
            ..shiro_commands::Sources::default()
        });
        let offered: Vec<String> = complete_command(&registry, "deploy")
            .into_iter()
            .map(|pair| pair.replacement)
            .collect();
        assert_eq!(offered, ["/deploy-shown "]);
    }
}
