//! The registry: every source loaded, precedence applied, shareable across threads.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::parse::{Command, Diagnostic, Origin, Parsed, load_source};

/// Where commands come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// The workspace root; project commands live in `<root>/.shiro/commands.md` and
    /// `<root>/.shiro/commands/**/*.md`.
    pub workspace_root: PathBuf,
    /// The user's shiro config directory (e.g. `~/.config/shiro`), found by the caller;
    /// user commands live in its `commands.md` and `commands/**/*.md`.
    pub user_config_dir: Option<PathBuf>,
    /// The embedder's built-in commands as `(name, summary)`; they always win.
    pub builtins: Vec<(String, String)>,
}

impl Sources {
    /// The project source directory, `<workspace_root>/.shiro`.
    pub fn project_dir(&self) -> PathBuf {
        self.workspace_root.join(".shiro")
    }
}

/// A definition hidden by one with the same name from a stronger origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The command name both share.
    pub name: String,
    /// The origin of the hidden definition.
    pub hidden: Origin,
    /// Where the hidden definition is, as `(file, line)`.
    pub hidden_at: (PathBuf, usize),
    /// The origin of the definition that wins.
    pub by: Origin,
}

impl fmt::Display for Shadowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by = match self.by {
            Origin::Builtin => "the built-in",
            Origin::Project => "the project command",
            Origin::User => "the user command",
        };
        write!(
            f,
            "{} command /{} ({}:{}) is shadowed by {by} /{}",
            self.hidden,
            self.name,
            self.hidden_at.0.display(),
            self.hidden_at.1,
            self.name
        )
    }
}

/// One line of the `/` menu.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MenuEntry {
    /// The name typed after `/`.
    pub name: String,
    /// The one-line summary, if any.
    pub summary: Option<String>,
    /// Where the command comes from.
    pub origin: Origin,
    /// A hint for its arguments, if any.
    pub argument_hint: Option<String>,
}

/// What a typed line refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The line does not start with `/` followed by a name.
    NotACommand,
    /// A built-in: the embedder handles it.
    Builtin {
        /// The lowercase name.
        name: String,
        /// The text after the name, trimmed.
        args: String,
    },
    /// A user-defined command, ready for [`crate::expand`].
    User {
        /// The command.
        command: Command,
        /// The text after the name, trimmed.
        args: String,
    },
    /// `/name` with no command of that name.
    Unknown {
        /// The lowercase name.
        name: String,
    },
}

/// One consistent view of every source.
#[derive(Debug, Default)]
struct Snapshot {
    commands: Vec<Command>,
    shadowed: Vec<Shadowed>,
    diagnostics: Vec<Diagnostic>,
    generation: u64,
}

/// Every command from every source, with precedence built-in > project > user applied.
///
/// Cloning is cheap and clones share state: a [`Registry::reload`] (or the watcher from
/// [`Registry::watch`]) is seen by every clone.
#[derive(Debug, Clone)]
pub struct Registry {
    sources: Arc<Sources>,
    snapshot: Arc<RwLock<Arc<Snapshot>>>,
}

impl Registry {
    /// Loads every source. Never fails: problems are in [`Registry::diagnostics`].
    pub fn load(sources: Sources) -> Registry {
        let snapshot = Arc::new(build(&sources, 0));
        Registry {
            sources: Arc::new(sources),
            snapshot: Arc::new(RwLock::new(snapshot)),
        }
    }

    /// Re-reads every source and swaps the result in atomically.
    pub fn reload(&self) {
        // Read the files without holding the lock, so readers never wait on disk I/O.
        let mut next = build(&self.sources, 0);
        let mut guard = self
            .snapshot
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        next.generation = guard.generation + 1;
        *guard = Arc::new(next);
    }

    /// The sources this registry reads.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    fn current(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many times the registry has been reloaded (0 after [`Registry::load`]).
    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    /// The `/` menu: built-ins and every effective user-defined command, sorted by name.
    pub fn list(&self) -> Vec<MenuEntry> {
        let snapshot = self.current();
        let mut entries: Vec<MenuEntry> = self
            .sources
            .builtins
            .iter()
            .map(|(name, summary)| MenuEntry {
                name: name.to_lowercase(),
                summary: Some(summary.clone()),
                origin: Origin::Builtin,
                argument_hint: None,
            })
            .chain(snapshot.commands.iter().map(|c| MenuEntry {
                name: c.name.clone(),
                summary: c.description.clone(),
                origin: c.origin,
                argument_hint: c.argument_hint.clone(),
            }))
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    /// The effective user-defined commands (project and user), sorted by name.
    pub fn commands(&self) -> Vec<Command> {
        self.current().commands.clone()
    }

    /// The effective user-defined command called `name` (case-insensitive), if any.
    pub fn get(&self, name: &str) -> Option<Command> {
        let name = name.to_lowercase();
        self.current()
            .commands
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }

    /// Every definition hidden by a stronger one.
    pub fn shadowed(&self) -> Vec<Shadowed> {
        self.current().shadowed.clone()
    }

    /// Every problem found in every source.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.current().diagnostics.clone()
    }

    /// Resolves a typed line such as `/review src/main.rs`.
    pub fn resolve(&self, line: &str) -> Resolved {
        let Some(rest) = line.trim_start().strip_prefix('/') else {
            return Resolved::NotACommand;
        };
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if name.is_empty() {
            return Resolved::NotACommand;
        }
        let name = name.to_lowercase();
        let args = args.trim().to_owned();
        if self.is_builtin(&name) {
            return Resolved::Builtin { name, args };
        }
        match self.get(&name) {
            Some(command) => Resolved::User { command, args },
            None => Resolved::Unknown { name },
        }
    }

    fn is_builtin(&self, name: &str) -> bool {
        self.sources
            .builtins
            .iter()
            .any(|(b, _)| b.eq_ignore_ascii_case(name))
    }
}

fn build(sources: &Sources, generation: u64) -> Snapshot {
    let project = load_source(&sources.project_dir(), Origin::Project);
    let user = sources
        .user_config_dir
        .as_deref()
        .map(|dir| load_source(dir, Origin::User))
        .unwrap_or_default();
    let mut snapshot = Snapshot {
        generation,
        ..Snapshot::default()
    };
    for parsed in [project, user] {
        let Parsed {
            commands,
            diagnostics,
        } = parsed;
        snapshot.diagnostics.extend(diagnostics);
        for command in commands {
            let winner = if sources
                .builtins
                .iter()
                .any(|(b, _)| b.eq_ignore_ascii_case(&command.name))
            {
                Some(Origin::Builtin)
            } else {
                snapshot
                    .commands
                    .iter()
                    .find(|c| c.name == command.name)
                    .map(|c| c.origin)
            };
            match winner {
                Some(by) => snapshot.shadowed.push(Shadowed {
                    name: command.name.clone(),
                    hidden: command.origin,
                    hidden_at: (command.file.clone(), command.line),
                    by,
                }),
                None => snapshot.commands.push(command),
            }
        }
    }
    snapshot.commands.sort_by(|a, b| a.name.cmp(&b.name));
    snapshot
}

/// Whether `path` is one of the files a registry reads (used by the watcher).
pub(crate) fn is_source_path(sources: &Sources, path: &Path) -> bool {
    let dirs = std::iter::once(sources.project_dir()).chain(sources.user_config_dir.clone());
    for dir in dirs {
        if path == dir || path.starts_with(dir.join("commands")) || path == dir.join("commands.md")
        {
            return true;
        }
    }
    false
}
