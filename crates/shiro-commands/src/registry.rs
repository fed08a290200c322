//! The registry: every source loaded, precedence applied, shareable across threads.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::load::load_location;
pub use crate::load::{Location, LocationKind};
use crate::parse::{Command, Diagnostic, Ecosystem, Kind, Origin, Parsed, Severity};
use crate::walk::Seen;

/// Which other tools' folders are read besides shiro's own (all by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ecosystems {
    /// The shared `.agents/skills/`.
    pub agents: bool,
    /// Claude Code's `.claude/commands/` and `.claude/skills/`.
    pub claude: bool,
    /// OpenCode's `.opencode/command(s)/` and `.opencode/skill(s)/`.
    pub opencode: bool,
    /// Gemini CLI's `.gemini/commands/` and `.gemini/skills/`.
    pub gemini: bool,
}

impl Default for Ecosystems {
    fn default() -> Ecosystems {
        Ecosystems {
            agents: true,
            claude: true,
            opencode: true,
            gemini: true,
        }
    }
}

impl Ecosystems {
    fn reads(self, ecosystem: Ecosystem) -> bool {
        match ecosystem {
            Ecosystem::Shiro => true,
            Ecosystem::Agents => self.agents,
            Ecosystem::Claude => self.claude,
            Ecosystem::OpenCode => self.opencode,
            Ecosystem::Gemini => self.gemini,
        }
    }
}

/// Where commands and skills come from. The caller finds the directories (this crate reads
/// no environment variables).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// The workspace root; project commands live in `.shiro/commands.md`,
    /// `.shiro/commands/`, `.claude/commands/`, `.opencode/command(s)/` and
    /// `.gemini/commands/` under it, project skills in `.shiro/skills/`, `.agents/skills/`,
    /// `.claude/skills/`, `.opencode/skill(s)/` and `.gemini/skills/`.
    pub workspace_root: PathBuf,
    /// The user's shiro config directory (e.g. `~/.config/shiro`); user commands live in its
    /// `commands.md` and `commands/`, user skills in its `skills/`.
    pub user_config_dir: Option<PathBuf>,
    /// The user's home directory, for `~/.claude/commands/`, `~/.gemini/commands/`,
    /// `~/.opencode/command(s)/`, and the skills of `~/.agents/skills/`,
    /// `~/.claude/skills/` and `~/.gemini/skills/`.
    pub home_dir: Option<PathBuf>,
    /// The user's config home (`$XDG_CONFIG_HOME`, else `~/.config`), for
    /// `opencode/command(s)/`, `opencode/skill(s)/` and `gemini-cli/commands/` under it.
    pub config_home: Option<PathBuf>,
    /// Which other tools' folders are read.
    pub ecosystems: Ecosystems,
    /// The embedder's built-in commands as `(name, summary)`; they always win.
    pub builtins: Vec<(String, String)>,
}

impl Sources {
    /// The project's shiro directory, `<workspace_root>/.shiro`.
    pub fn project_dir(&self) -> PathBuf {
        self.workspace_root.join(".shiro")
    }

    /// Every place commands and skills are read from, strongest first: `.shiro`, then the
    /// other project folders (`.agents`, `.claude`, `.opencode`, `.gemini`), then the user's
    /// own in the same order; within one tool's folders, its skills before its commands.
    /// Folders of switched-off ecosystems are left out.
    pub fn locations(&self) -> Vec<Location> {
        let root = &self.workspace_root;
        let mut out = Vec::new();
        let mut add = |origin, ecosystem, path: PathBuf, kind| {
            if self.ecosystems.reads(ecosystem) {
                out.push(Location {
                    origin,
                    ecosystem,
                    path,
                    kind,
                });
            }
        };
        use Ecosystem::{Agents, Claude, Gemini, OpenCode, Shiro};
        use LocationKind::{CommandsMd, Folder, Skills};
        use Origin::{Project, User};
        add(Project, Shiro, root.join(".shiro/skills"), Skills);
        add(Project, Shiro, root.join(".shiro/commands.md"), CommandsMd);
        add(Project, Shiro, root.join(".shiro/commands"), Folder);
        add(Project, Agents, root.join(".agents/skills"), Skills);
        add(Project, Claude, root.join(".claude/skills"), Skills);
        add(Project, Claude, root.join(".claude/commands"), Folder);
        add(Project, OpenCode, root.join(".opencode/skills"), Skills);
        add(Project, OpenCode, root.join(".opencode/skill"), Skills);
        add(Project, OpenCode, root.join(".opencode/command"), Folder);
        add(Project, OpenCode, root.join(".opencode/commands"), Folder);
        add(Project, Gemini, root.join(".gemini/skills"), Skills);
        add(Project, Gemini, root.join(".gemini/commands"), Folder);
        if let Some(dir) = &self.user_config_dir {
            add(User, Shiro, dir.join("skills"), Skills);
            add(User, Shiro, dir.join("commands.md"), CommandsMd);
            add(User, Shiro, dir.join("commands"), Folder);
        }
        if let Some(home) = &self.home_dir {
            add(User, Agents, home.join(".agents/skills"), Skills);
            add(User, Claude, home.join(".claude/skills"), Skills);
            add(User, Claude, home.join(".claude/commands"), Folder);
        }
        if let Some(config) = &self.config_home {
            add(User, OpenCode, config.join("opencode/skills"), Skills);
            add(User, OpenCode, config.join("opencode/skill"), Skills);
            add(User, OpenCode, config.join("opencode/command"), Folder);
            add(User, OpenCode, config.join("opencode/commands"), Folder);
        }
        if let Some(home) = &self.home_dir {
            add(User, OpenCode, home.join(".opencode/command"), Folder);
            add(User, OpenCode, home.join(".opencode/commands"), Folder);
            add(User, Gemini, home.join(".gemini/skills"), Skills);
            add(User, Gemini, home.join(".gemini/commands"), Folder);
        }
        if let Some(config) = &self.config_home {
            add(User, Gemini, config.join("gemini-cli/commands"), Folder);
        }
        out
    }
}

/// How a command's source is named in listings: `project`, `project .claude`, `user`,
/// `user .gemini`, `built-in`.
pub fn source_label(origin: Origin, ecosystem: Option<Ecosystem>) -> String {
    match (origin, ecosystem) {
        (Origin::Builtin, _) => "built-in".to_owned(),
        (origin, None | Some(Ecosystem::Shiro)) => origin.to_string(),
        (origin, Some(ecosystem)) => format!("{origin} {}", ecosystem.dir_name()),
    }
}

/// A definition hidden by one with the same name from a stronger source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The command name both share.
    pub name: String,
    /// The origin of the hidden definition.
    pub hidden: Origin,
    /// The format of the hidden definition.
    pub hidden_ecosystem: Ecosystem,
    /// Whether the hidden definition is a command or a skill.
    pub hidden_kind: Kind,
    /// Where the hidden definition is, as `(file, line)`.
    pub hidden_at: (PathBuf, usize),
    /// The origin of the definition that wins.
    pub by: Origin,
    /// The format of the definition that wins (`None` for a built-in).
    pub by_ecosystem: Option<Ecosystem>,
    /// Whether the definition that wins is a command or a skill.
    pub by_kind: Kind,
    /// Where the winning definition is (`None` for a built-in).
    pub by_at: Option<(PathBuf, usize)>,
}

impl Shadowed {
    /// The note `shiro commands check` prints for it, at the hidden definition.
    pub fn diagnostic(&self) -> Diagnostic {
        Diagnostic {
            file: self.hidden_at.0.clone(),
            line: self.hidden_at.1.max(1),
            column: 1,
            severity: Severity::Note,
            message: self.to_string(),
        }
    }
}

impl fmt::Display for Shadowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} /{} ({}:{}) is shadowed by ",
            source_label(self.hidden, Some(self.hidden_ecosystem)),
            self.hidden_kind,
            self.name,
            self.hidden_at.0.display(),
            self.hidden_at.1,
        )?;
        match (&self.by_at, self.by) {
            (None, _) | (_, Origin::Builtin) => write!(f, "the built-in /{}", self.name),
            (Some((file, line)), by) => write!(
                f,
                "the {} {} /{} ({}:{line})",
                source_label(by, self.by_ecosystem),
                self.by_kind,
                self.name,
                file.display()
            ),
        }
    }
}

/// What [`Registry::check`] found, counted: the line a front end prints after the
/// diagnostics ([`Registry::summarize`]). Its text counts what can be run, and says how many
/// definitions the notes report as shadowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckSummary {
    /// The user-defined commands in effect, skills apart.
    pub commands: usize,
    /// The skills in effect.
    pub skills: usize,
    /// The errors; `check` fails on them.
    pub errors: usize,
    /// The warnings.
    pub warnings: usize,
    /// The definitions hidden by stronger ones (the notes), counted in neither `commands`
    /// nor `skills`.
    pub shadowed: usize,
}

impl fmt::Display for CheckSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |count: usize, one: &str, many: &str| {
            format!("{count} {}", if count == 1 { one } else { many })
        };
        let both = |first: Option<String>, second: Option<String>| match (first, second) {
            (Some(first), Some(second)) => Some(format!("{first} and {second}")),
            (first, second) => first.or(second),
        };
        let some = |count: usize, one: &str, many: &str| (count > 0).then(|| n(count, one, many));
        let defined = both(
            some(self.commands, "command", "commands"),
            some(self.skills, "skill", "skills"),
        )
        .unwrap_or_else(|| "no commands".to_owned());
        let problems = both(
            some(self.errors, "error", "errors"),
            some(self.warnings, "warning", "warnings"),
        );
        match problems {
            None => write!(f, "{defined}, no problems")?,
            Some(problems) => write!(f, "{problems} in the command files; {defined} in effect")?,
        }
        if self.shadowed > 0 {
            let verb = if self.shadowed == 1 { "is" } else { "are" };
            write!(
                f,
                "; {} {verb} not counted (see the notes)",
                n(self.shadowed, "shadowed definition", "shadowed definitions")
            )?;
        }
        Ok(())
    }
}

/// One line of the `/` menu ([`Registry::menu`]) or of the full listing
/// ([`Registry::list`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MenuEntry {
    /// The name typed after `/`.
    pub name: String,
    /// The one-line summary, if any.
    pub summary: Option<String>,
    /// Where the command comes from.
    pub origin: Origin,
    /// Whose format it is written in (`None` for a built-in).
    pub ecosystem: Option<Ecosystem>,
    /// A hint for its arguments, if any.
    pub argument_hint: Option<String>,
    /// The file that defines it (`None` for a built-in).
    pub file: Option<PathBuf>,
    /// Its `allowed-tools` as written, when it limits the tools.
    pub allowed_tools: Option<Vec<String>>,
    /// The model its turns use, when it names one.
    pub model: Option<String>,
    /// A command or a skill (built-ins are commands).
    pub kind: Kind,
    /// A skill's folder, as the model is told it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// A skill that comes with a workspace the user has not trusted: neither offered to the
    /// model nor run as `/name` until they do.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
    /// A skill that says `user-invocable: false`: the model loads it, nobody types it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub model_only: bool,
    /// A skill that says `disable-model-invocation: true`: typed only, never offered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub typed_only: bool,
}

impl MenuEntry {
    /// Where it comes from, as listings name it (see [`source_label`]).
    pub fn source(&self) -> String {
        source_label(self.origin, self.ecosystem)
    }
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
        command: Box<Command>,
        /// The text after the name, trimmed.
        args: String,
    },
    /// `/name` with no command of that name.
    Unknown {
        /// The lowercase name.
        name: String,
        /// Commands whose last part is `name` (`/commit` for `/git:commit` and
        /// `/hg:commit`) when there are several.
        candidates: Vec<String>,
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

/// Every command and skill from every source, with precedence built-in > `.shiro` > other
/// project folders > user folders applied.
///
/// Cloning is cheap and clones share state: a [`Registry::reload`] (or the watcher from
/// [`Registry::watch`]) and [`Registry::set_workspace_trusted`] are seen by every clone.
#[derive(Debug, Clone)]
pub struct Registry {
    sources: Arc<Sources>,
    snapshot: Arc<RwLock<Arc<Snapshot>>>,
    trusted: Arc<AtomicBool>,
}

impl Registry {
    /// Loads every source. Never fails: problems are in [`Registry::diagnostics`]. The
    /// workspace counts as untrusted until [`Registry::set_workspace_trusted`] says otherwise.
    pub fn load(sources: Sources) -> Registry {
        let snapshot = Arc::new(build(&sources, 0));
        Registry {
            sources: Arc::new(sources),
            snapshot: Arc::new(RwLock::new(snapshot)),
            trusted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Records whether the user trusts the workspace (the caller keeps the list): a project
    /// skill is offered to the model, and runs as `/name`, only in a trusted workspace.
    pub fn set_workspace_trusted(&self, trusted: bool) {
        self.trusted.store(trusted, Ordering::Relaxed);
    }

    /// Whether the workspace is trusted, as last set.
    pub fn workspace_trusted(&self) -> bool {
        self.trusted.load(Ordering::Relaxed)
    }

    /// Whether `command` is a skill the workspace's trust holds back: a project skill in a
    /// workspace the user has not trusted.
    pub fn held_back(&self, command: &Command) -> bool {
        command.kind() == Kind::Skill
            && command.origin == Origin::Project
            && !self.workspace_trusted()
    }

    /// The skills offered to the model, sorted by name: every effective skill except those
    /// that say `disable-model-invocation` and those the workspace's trust holds back.
    pub fn offered_skills(&self) -> Vec<Command> {
        self.current()
            .commands
            .iter()
            .filter(|c| c.kind() == Kind::Skill && !c.disable_model_invocation)
            .filter(|c| !self.held_back(c))
            .cloned()
            .collect()
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

    /// The `/` menu: what can be typed, sorted by name. That is [`Registry::list`] without
    /// the skills for the model alone (`user-invocable: false`), which typed say only that
    /// they are the model's.
    pub fn menu(&self) -> Vec<MenuEntry> {
        let mut entries = self.list();
        entries.retain(|entry| !entry.model_only);
        entries
    }

    /// Every built-in and every effective user-defined command and skill, sorted by name,
    /// as `shiro commands list` shows them: skills for the model alone too, marked
    /// [`MenuEntry::model_only`]. The `/` menu is [`Registry::menu`].
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
                ecosystem: None,
                argument_hint: None,
                file: None,
                allowed_tools: None,
                model: None,
                kind: Kind::Command,
                folder: None,
                untrusted: false,
                model_only: false,
                typed_only: false,
            })
            .chain(snapshot.commands.iter().map(|c| MenuEntry {
                name: c.name.clone(),
                summary: c.summary(),
                origin: c.origin,
                ecosystem: Some(c.ecosystem),
                argument_hint: c.argument_hint.clone(),
                file: Some(c.file.clone()),
                allowed_tools: c.allowed_tools.as_ref().map(|a| a.written.clone()),
                model: c.model.clone(),
                kind: c.kind(),
                folder: c.skill.as_ref().map(|s| s.shown_dir.clone()),
                untrusted: self.held_back(c),
                model_only: c.skill.as_ref().is_some_and(|s| !s.user_invocable),
                typed_only: c.skill.is_some() && c.disable_model_invocation,
            }))
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    /// The effective user-defined commands, sorted by name.
    pub fn commands(&self) -> Vec<Command> {
        self.current().commands.clone()
    }

    /// The effective user-defined command called exactly `name` (case-insensitive; `/` in
    /// the name stands for `:`, as OpenCode writes nested names), if any.
    pub fn get(&self, name: &str) -> Option<Command> {
        let name = normalize_name(name);
        self.current()
            .commands
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }

    /// The command `name` stands for: the one called exactly that, else the only one whose
    /// last part is `name` (`/commit` for `/git:commit`, as Claude Code runs commands of
    /// subfolders by their file name). `Err` holds the candidates when several fit (empty
    /// when none does).
    pub fn find(&self, name: &str) -> Result<Command, Vec<String>> {
        let name = normalize_name(name);
        let snapshot = self.current();
        if let Some(command) = snapshot.commands.iter().find(|c| c.name == name) {
            return Ok(command.clone());
        }
        if name.contains(':') {
            return Err(Vec::new());
        }
        let suffix = format!(":{name}");
        let fits: Vec<&Command> = snapshot
            .commands
            .iter()
            .filter(|c| c.name.ends_with(&suffix))
            .collect();
        match fits.as_slice() {
            [only] => Ok((*only).clone()),
            _ => Err(fits.iter().map(|c| c.name.clone()).collect()),
        }
    }

    /// Every definition hidden by a stronger one.
    pub fn shadowed(&self) -> Vec<Shadowed> {
        self.current().shadowed.clone()
    }

    /// Every problem found in every source.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.current().diagnostics.clone()
    }

    /// What `check` reports: every problem, and a note for every hidden definition, source by
    /// source in precedence order, then file by file and top to bottom.
    pub fn check(&self) -> Vec<Diagnostic> {
        let snapshot = self.current();
        let mut all = snapshot.diagnostics.clone();
        all.extend(snapshot.shadowed.iter().map(Shadowed::diagnostic));
        let locations = self.sources.locations();
        let rank = |file: &Path| {
            locations
                .iter()
                .position(|l| file.starts_with(&l.path))
                .unwrap_or(locations.len())
        };
        all.sort_by(|a, b| {
            (rank(&a.file), &a.file, a.line, a.column).cmp(&(
                rank(&b.file),
                &b.file,
                b.line,
                b.column,
            ))
        });
        all
    }

    /// Counts `diagnostics` (what [`Registry::check`] returned) by severity, and the
    /// commands and skills in effect: the line that sums a check up.
    pub fn summarize(&self, diagnostics: &[Diagnostic]) -> CheckSummary {
        let count = |severity| {
            diagnostics
                .iter()
                .filter(|d| d.severity == severity)
                .count()
        };
        let snapshot = self.current();
        let skills = (snapshot.commands.iter())
            .filter(|c| c.kind() == Kind::Skill)
            .count();
        CheckSummary {
            commands: snapshot.commands.len() - skills,
            skills,
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            // The notes are the shadowed definitions.
            shadowed: count(Severity::Note),
        }
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
        let name = normalize_name(name);
        let args = args.trim().to_owned();
        if self.is_builtin(&name) {
            return Resolved::Builtin { name, args };
        }
        match self.find(&name) {
            Ok(command) => Resolved::User {
                command: Box::new(command),
                args,
            },
            Err(candidates) => Resolved::Unknown { name, candidates },
        }
    }

    fn is_builtin(&self, name: &str) -> bool {
        self.sources
            .builtins
            .iter()
            .any(|(b, _)| b.eq_ignore_ascii_case(name))
    }
}

fn normalize_name(name: &str) -> String {
    name.trim_start_matches('/')
        .to_lowercase()
        .replace('/', ":")
}

fn build(sources: &Sources, generation: u64) -> Snapshot {
    let jail = sources.workspace_root.canonicalize().ok();
    let mut seen = Seen::default();
    // One parse result per source (origin, ecosystem, and commands or skills), in
    // precedence order: a name defined twice within one source is an error, across sources
    // a shadowing.
    let mut groups: Vec<((Origin, Ecosystem, bool), Parsed)> = Vec::new();
    for location in sources.locations() {
        let key = (
            location.origin,
            location.ecosystem,
            location.kind == LocationKind::Skills,
        );
        let index = match groups.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                groups.push((key, Parsed::default()));
                groups.len() - 1
            }
        };
        let jail = match location.origin {
            // A project's folders must live in the project; without a root that resolves,
            // nothing of the project is read.
            Origin::Project => match &jail {
                Some(jail) => Some(jail.as_path()),
                None => continue,
            },
            _ => None,
        };
        load_location(&location, jail, &mut seen, &mut groups[index].1);
    }
    let mut snapshot = Snapshot {
        generation,
        ..Snapshot::default()
    };
    for (_, parsed) in groups {
        let Parsed {
            commands,
            diagnostics,
        } = parsed;
        snapshot.diagnostics.extend(diagnostics);
        for mut command in commands {
            if let Some(skill) = &mut command.skill {
                show_skill(sources, &mut command.body, skill);
            }
            let builtin = sources
                .builtins
                .iter()
                .any(|(b, _)| b.eq_ignore_ascii_case(&command.name));
            let winner = if builtin {
                Some((Origin::Builtin, None, Kind::Command, None))
            } else {
                snapshot
                    .commands
                    .iter()
                    .find(|c| c.name == command.name)
                    .map(|c| {
                        let at = (c.file.clone(), c.line);
                        (c.origin, Some(c.ecosystem), c.kind(), Some(at))
                    })
            };
            match winner {
                Some((by, by_ecosystem, by_kind, by_at)) => snapshot.shadowed.push(Shadowed {
                    name: command.name.clone(),
                    hidden: command.origin,
                    hidden_ecosystem: command.ecosystem,
                    hidden_kind: command.kind(),
                    hidden_at: (command.file.clone(), command.line),
                    by,
                    by_ecosystem,
                    by_kind,
                    by_at,
                }),
                None => snapshot.commands.push(command),
            }
        }
    }
    snapshot.commands.sort_by(|a, b| a.name.cmp(&b.name));
    snapshot
}

/// Names a skill's folder as the model is told it (relative to the workspace root when it
/// is inside, else whole), and puts that name for `${CLAUDE_SKILL_DIR}` in its body, as
/// Claude Code does.
fn show_skill(sources: &Sources, body: &mut String, skill: &mut crate::parse::SkillInfo) {
    let shown = match skill.dir.strip_prefix(&sources.workspace_root) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => skill.dir.display().to_string(),
    };
    if body.contains("${CLAUDE_SKILL_DIR}") {
        *body = body.replace("${CLAUDE_SKILL_DIR}", &shown);
    }
    skill.shown_dir = shown;
}

/// Whether `path` is one of the files a registry reads, a folder that holds them, or a
/// project folder (`.claude`, …) whose creation may bring some (used by the watcher).
pub(crate) fn is_source_path(sources: &Sources, path: &Path) -> bool {
    let root = &sources.workspace_root;
    let bases = [".shiro", ".agents", ".claude", ".opencode", ".gemini"];
    if bases.iter().any(|base| path == root.join(base)) {
        return true;
    }
    if let Some(dir) = &sources.user_config_dir
        && path == dir
    {
        return true;
    }
    sources
        .locations()
        .iter()
        .any(|location| match location.kind {
            LocationKind::CommandsMd => path == location.path,
            LocationKind::Folder | LocationKind::Skills => path.starts_with(&location.path),
        })
}
