//! Permission rules and modes: which tool calls run without asking, which are asked about,
//! and which are refused. Documented in `docs/cli.md`, "Permissions".
//!
//! Rules are written as user commands' `allowed-tools` are (`bash(git status:*)`,
//! `edit_file(src/**)`, `Read`), and parsed and judged by the same code in
//! [`shiro_commands`]; this module adds path globs, where the rules come from, the modes, and
//! the order in which they are weighed: deny, then ask, then allow, then the mode's default.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::Value;
use shiro_commands::{Rule, RuleSpec, tool};
use shiro_tools::{Mutator, PathError, Tool, WorkspacePath};

/// What a rule does with the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Refuse them, whatever else says yes.
    Deny,
    /// Ask about them, even where the mode or an allow rule would run them.
    Ask,
    /// Run them without asking.
    Allow,
}

impl Kind {
    /// The key it has in `[permissions]`.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Deny => "deny",
            Kind::Ask => "ask",
            Kind::Allow => "allow",
        }
    }
}

/// Where a rule comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The user's `config.toml`.
    User(PathBuf),
    /// The workspace's `.shiro/config.toml`.
    Workspace(PathBuf),
    /// A command-line flag (`--allowed-tools`, `--disallowed-tools`).
    Flag(&'static str),
    /// An "always" answer, for this session only.
    Session,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::User(path) => write!(f, "user config {}", path.display()),
            Source::Workspace(path) => write!(f, "workspace config {}", path.display()),
            Source::Flag(flag) => f.write_str(flag),
            Source::Session => f.write_str("this session"),
        }
    }
}

/// One rule in effect.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Deny, ask or allow.
    pub kind: Kind,
    /// Where it was written.
    pub source: Source,
    /// The rule.
    pub rule: Rule,
    /// A path rule's globs, compiled.
    globs: Option<GlobSet>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        (self.kind, &self.source, &self.rule) == (other.kind, &other.source, &other.rule)
    }
}

impl Entry {
    /// Parses `text` as a rule of `kind` from `source`; the error says why it cannot be read.
    pub fn new(kind: Kind, source: Source, text: &str) -> Result<Entry, String> {
        let rule = Rule::parse(text).map_err(|err| err.to_string())?;
        let globs = match &rule.spec {
            RuleSpec::Path(pattern) => {
                Some(path_globs(pattern).map_err(|why| format!("`{}`: {why}", rule.written))?)
            }
            _ => None,
        };
        Ok(Entry {
            kind,
            source,
            rule,
            globs,
        })
    }

    /// Whether the rule matches one of the call's paths (workspace-relative; `""` is the root).
    fn matches_path(&self, path: &str) -> bool {
        match (&self.rule.spec, &self.globs) {
            (RuleSpec::Any, _) => true,
            (RuleSpec::Path(_), Some(globs)) => globs.is_match(path),
            _ => false,
        }
    }

    /// Whether the rule matches one simple bash command.
    fn matches_command(&self, command: &str) -> bool {
        match &self.rule.spec {
            RuleSpec::Any => true,
            RuleSpec::Bash(rule) => rule.matches(command),
            RuleSpec::Path(_) => false,
        }
    }
}

/// Compiles a path rule: gitignore-like, a pattern with a `/` (or starting with `./` or `/`)
/// is anchored at the workspace root, one without matches at any depth; and a pattern that
/// names a directory covers everything beneath it.
fn path_globs(pattern: &str) -> Result<GlobSet, String> {
    let anchored = pattern.starts_with('/') || pattern.starts_with("./");
    let body = pattern
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_end_matches('/');
    if body.is_empty() {
        return Err("the path is empty; write the tool's name alone to match every path".into());
    }
    if body.split('/').any(|part| part == "..") {
        return Err(
            "a path rule cannot climb out with `..`: paths are matched relative to the workspace root"
                .into(),
        );
    }
    let base = if anchored || body.contains('/') {
        body.to_owned()
    } else {
        format!("**/{body}")
    };
    let mut set = GlobSetBuilder::new();
    for glob in [base.clone(), format!("{base}/**")] {
        let glob = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| format!("not a valid glob ({})", err.kind()))?;
        set.add(glob);
    }
    set.build()
        .map_err(|err| format!("not a valid glob ({})", err.kind()))
}

/// A path as a glob matching only itself, anchored at the workspace root.
fn literal_glob(path: &str) -> String {
    let mut out = String::new();
    if !path.contains('/') {
        out.push_str("./");
    }
    for c in path.chars() {
        if "*?[]{}\\!".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The session's mode: what runs when no rule says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every tool that changes files and MCP tools are refused, and bash runs only in a
    /// read-only sandbox (`--read-only`).
    ReadOnly,
    /// Changes, bash and MCP tools are asked about (the default).
    Ask,
    /// File changes run; bash and MCP tools are asked about.
    AutoEdit,
    /// Everything runs (`--yes`).
    Yes,
}

impl Mode {
    /// Every mode, in the order `/mode` lists them.
    pub const ALL: [Mode; 4] = [Mode::ReadOnly, Mode::Ask, Mode::AutoEdit, Mode::Yes];

    /// Its name for `/mode`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Ask => "ask",
            Mode::AutoEdit => "auto-edit",
            Mode::Yes => "yes",
        }
    }

    /// What it does, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::ReadOnly => {
                "tools that change files and MCP tools are refused; bash runs only in a read-only sandbox"
            }
            Mode::Ask => "changes to files, bash commands and MCP tools are asked about",
            Mode::AutoEdit => {
                "file changes run without asking; bash commands and MCP tools are asked about"
            }
            Mode::Yes => "every call runs without asking, except what a deny or ask rule names",
        }
    }

    /// The mode `name` names (`readonly` and `auto` also work), if any.
    pub fn parse(name: &str) -> Option<Mode> {
        match name.trim().to_ascii_lowercase().as_str() {
            "read-only" | "readonly" | "read_only" => Some(Mode::ReadOnly),
            "ask" | "default" => Some(Mode::Ask),
            "auto-edit" | "auto_edit" | "autoedit" | "auto" => Some(Mode::AutoEdit),
            "yes" => Some(Mode::Yes),
            _ => None,
        }
    }
}

/// What a call would touch, as rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The workspace paths, after the tool's own normalisation (`""` is the root).
    Paths(Vec<String>),
    /// The bash command line.
    Command(String),
    /// A call of an MCP server's tool: nothing but its name for a rule to match.
    Mcp,
    /// A call of the `skill` tool: the skill's name, which `Skill(…)` rules match as a glob.
    Skill(String),
}

/// What a call touches: for bash its command; for a file tool the paths it reports (after
/// its own normalisation, symbolic links inside the workspace resolved); for a reading tool
/// the path it reads or searches, both as given and as resolved. A path the tool would refuse
/// gives no path: the call then fails by itself.
pub async fn target(tool: &dyn Tool, args: &Value, mutator: &dyn Mutator) -> Target {
    if tool.name() == tool::BASH {
        let line = args.get("command").and_then(Value::as_str).unwrap_or("");
        return Target::Command(line.to_owned());
    }
    if tool.is_mutating() {
        let paths = tool.touched_paths(mutator, args).await.unwrap_or_default();
        return Target::Paths(paths.iter().map(|p| p.as_str().to_owned()).collect());
    }
    let given = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let mut paths = Vec::new();
    match WorkspacePath::resolve(mutator.root(), given) {
        Ok(path) => {
            if let Ok(real) = mutator.real_path(&path).await
                && real != path
            {
                paths.push(real.as_str().to_owned());
            }
            paths.push(path.as_str().to_owned());
        }
        Err(PathError::Empty) => paths.push(String::new()),
        Err(_) => {}
    }
    Target::Paths(paths)
}

/// What the rules and the mode say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; the allow rule that says so, when one does.
    Run(Option<String>),
    /// Ask the person; the ask rule that insists, when one does.
    Ask(Option<String>),
    /// Refuse it, with this text for the model.
    Deny(String),
}

/// The rules in effect, in the order they were added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    entries: Vec<Entry>,
}

impl Rules {
    /// Adds the rules `texts` of `kind` from `source`; the error names the source and the rule.
    pub fn add(&mut self, kind: Kind, source: &Source, texts: &[String]) -> Result<()> {
        for text in texts {
            let entry = Entry::new(kind, source.clone(), text).map_err(|why| {
                anyhow::anyhow!("invalid {} rule {text:?} in {source}: {why}", kind.key())
            })?;
            if !self.entries.contains(&entry) {
                self.entries.push(entry);
            }
        }
        Ok(())
    }

    /// The rules, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether a deny rule refuses a call of `tool` touching `target` (a refusal without one
    /// is the mode's).
    pub fn denies(&self, tool: &str, target: &Target) -> bool {
        self.touching(Kind::Deny, tool, target).is_some()
    }

    /// The first rule of `kind` that matches some path or command of the call (deny and ask).
    fn touching(&self, kind: Kind, tool: &str, target: &Target) -> Option<&Entry> {
        let mut rules = self
            .entries
            .iter()
            .filter(|e| e.kind == kind && e.rule.names(tool));
        rules.find(|entry| {
            entry.rule.spec == RuleSpec::Any
                || match target {
                    Target::Paths(paths) => paths.iter().any(|p| entry.matches_path(p)),
                    Target::Command(line) => {
                        shiro_commands::some_command(line, |part| entry.matches_command(part))
                    }
                    Target::Skill(name) => entry.matches_path(name),
                    Target::Mcp => false,
                }
        })
    }

    /// The allow rules covering every path or command of the call, if they do: the first of
    /// them that matches one of its paths or commands (the one a message names).
    fn covering(&self, tool: &str, target: &Target) -> Option<&Entry> {
        let rules: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Allow && e.rule.names(tool))
            .collect();
        if let Some(any) = rules.iter().find(|e| e.rule.spec == RuleSpec::Any) {
            return Some(any);
        }
        let covered = match target {
            Target::Paths(paths) => {
                !paths.is_empty()
                    && paths
                        .iter()
                        .all(|path| rules.iter().any(|e| e.matches_path(path)))
            }
            Target::Command(line) => shiro_commands::every_command(line, |part| {
                rules.iter().any(|e| e.matches_command(part))
            }),
            Target::Skill(name) => rules.iter().any(|e| e.matches_path(name)),
            Target::Mcp => false,
        };
        if !covered {
            return None;
        }
        rules.into_iter().find(|e| match target {
            Target::Paths(paths) => paths.iter().any(|path| e.matches_path(path)),
            // Some command of the line: not every one is unmatched.
            Target::Command(line) => {
                !shiro_commands::every_command(line, |part| !e.matches_command(part))
            }
            Target::Skill(name) => e.matches_path(name),
            Target::Mcp => false,
        })
    }

    /// Weighs a call of `tool` (`changes`: a tool that changes files, bash, or an MCP tool)
    /// in `mode`: deny, then ask, then allow, then the mode's default. Read-only mode refuses
    /// changes whatever allows them; calls that change nothing run unless a rule says
    /// otherwise. Auto-edit mode runs only shiro's file tools without asking: bash and MCP
    /// tools can do anything.
    pub fn judge(&self, mode: Mode, tool: &str, changes: bool, target: &Target) -> Verdict {
        if let Some(entry) = self.touching(Kind::Deny, tool, target) {
            return Verdict::Deny(format!(
                "refused by the permission rule deny {} ({}); nothing was run. Do not try to get around it; tell the user what you needed",
                entry.rule.written, entry.source
            ));
        }
        if changes && mode == Mode::ReadOnly {
            return Verdict::Deny(
                "refused: the session is in read-only mode, which refuses every tool that changes files, and bash where no read-only sandbox can hold it; nothing was run. Read and search instead, or tell the user what you would change".to_owned(),
            );
        }
        if let Some(entry) = self.touching(Kind::Ask, tool, target) {
            return Verdict::Ask(Some(described(entry)));
        }
        if !changes {
            return Verdict::Run(None);
        }
        if let Some(entry) = self.covering(tool, target) {
            return Verdict::Run(Some(described(entry)));
        }
        match mode {
            Mode::Yes => Verdict::Run(None),
            Mode::AutoEdit
                if tool != tool::BASH && shiro_commands::split_mcp_name(tool).is_none() =>
            {
                Verdict::Run(None)
            }
            _ => Verdict::Ask(None),
        }
    }

    /// `/permissions`: the mode and every rule with its source, deny first.
    pub fn show(&self, mode: Mode) -> String {
        let mut out = format!("mode: {} ({})\n", mode.name(), mode.describe());
        if self.entries.is_empty() {
            out.push_str(
                "no permission rules; add them under [permissions] in .shiro/config.toml (see docs/cli.md, \"Permissions\")",
            );
            return out;
        }
        out.push_str("rules, weighed in this order (deny, then ask, then allow):\n");
        let width = self
            .entries
            .iter()
            .map(|e| e.rule.written.chars().count())
            .max()
            .unwrap_or(0);
        for kind in [Kind::Deny, Kind::Ask, Kind::Allow] {
            for entry in self.entries.iter().filter(|e| e.kind == kind) {
                out.push_str(&format!(
                    "  {:<5} {:<width$}  {}\n",
                    kind.key(),
                    entry.rule.written,
                    entry.source
                ));
            }
        }
        out.truncate(out.trim_end().len());
        out
    }
}

impl Rules {
    /// What the walking tool `tool` (list_dir, glob, grep) leaves out: the paths a deny rule
    /// with a path names for it, so that a search of the whole workspace does not read what a
    /// call naming the path would be refused. `None` when no such rule names the tool.
    pub fn hidden(&self, tool: &str) -> Option<shiro_tools::tools::Hidden> {
        let denied: Vec<Entry> = self
            .entries
            .iter()
            .filter(|e| {
                e.kind == Kind::Deny
                    && e.rule.names(tool)
                    && matches!(e.rule.spec, RuleSpec::Path(_))
            })
            .cloned()
            .collect();
        (!denied.is_empty()).then(|| {
            shiro_tools::tools::Hidden::new(move |rel| denied.iter().any(|e| e.matches_path(rel)))
        })
    }
}

/// `rule (source)`, for messages.
fn described(entry: &Entry) -> String {
    format!(
        "{} {} ({})",
        entry.kind.key(),
        entry.rule.written,
        entry.source
    )
}

/// The narrowest rules that would allow this call again: for bash, a rule for each of its
/// commands (`bash(git status:*)`, `bash(git -C sub status:*)`, the exact text of `sh -c
/// '…'`; never a bare `bash`, nor a prefix that covers any script: see
/// [`shiro_commands::narrowest_bash_rules`]); for a file tool, each path it touches; for an
/// MCP tool or a skill, its name. `None` when no rule can cover it (a bash line with a
/// substitution, a script with a `*` or a `$`).
pub fn narrowest(tool: &str, target: &Target) -> Option<Vec<String>> {
    match target {
        Target::Mcp => Some(vec![tool.to_owned()]),
        Target::Skill(name) if !name.is_empty() => Some(vec![format!("{tool}({name})")]),
        Target::Skill(_) => None,
        Target::Command(line) => shiro_commands::narrowest_bash_rules(line).map(|rules| {
            rules
                .iter()
                .map(|rule| format!("{}({rule})", tool::BASH))
                .collect()
        }),
        Target::Paths(paths) => {
            let rules: Vec<String> = paths
                .iter()
                .filter(|path| !path.is_empty())
                .map(|path| format!("{tool}({})", literal_glob(path)))
                .collect();
            (!rules.is_empty()).then_some(rules)
        }
    }
}

/// Adds `rules` to the `allow` list of `[permissions]` in the config file at `path`, keeping
/// its comments and layout (the file and its directory are created when missing). Rules it
/// already holds are not added twice. A file that is not valid TOML is left as it is.
pub fn save_allow(path: &Path, rules: &[String]) -> Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; it was left as it is", path.display()))?;
    let table = doc
        .entry("permissions")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .with_context(|| format!("`permissions` in {} is not a table", path.display()))?;
    let allow = table
        .entry("allow")
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .with_context(|| {
            format!(
                "`allow` under [permissions] in {} is not a list",
                path.display()
            )
        })?;
    // A list written one value a line gets the new values on lines of their own.
    let prefix = allow
        .iter()
        .next()
        .and_then(|first| first.decor().prefix())
        .and_then(|prefix| prefix.as_str())
        .filter(|prefix| prefix.contains('\n'))
        .map(str::to_owned);
    // A comment after the last value stays with it rather than moving to the new last one.
    let mut after_last = allow
        .trailing()
        .as_str()
        .map(|text| text.trim_end().to_owned())
        .filter(|_| prefix.is_some());
    for rule in rules {
        if !allow.iter().any(|v| v.as_str() == Some(rule.as_str())) {
            let mut value = toml_edit::Value::from(rule.as_str());
            if let Some(prefix) = &prefix {
                let comment = after_last.take().unwrap_or_default();
                value.decor_mut().set_prefix(format!("{comment}{prefix}"));
                allow.set_trailing("\n");
            }
            allow.push_formatted(value);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, doc.to_string())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(kind: Kind, texts: &[&str]) -> Rules {
        let mut rules = Rules::default();
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        rules
            .add(
                kind,
                &Source::Workspace(".shiro/config.toml".into()),
                &texts,
            )
            .unwrap();
        rules
    }

    fn paths(paths: &[&str]) -> Target {
        Target::Paths(paths.iter().map(|p| (*p).to_owned()).collect())
    }

    fn command(line: &str) -> Target {
        Target::Command(line.to_owned())
    }

    #[test]
    fn path_globs_are_anchored_when_they_have_a_slash() {
        let allow = rules(Kind::Allow, &["edit_file(src/**)", "write_file(.env)"]);
        let judge = |tool: &str, p: &[&str]| allow.judge(Mode::Ask, tool, true, &paths(p));
        assert!(matches!(
            judge("edit_file", &["src/a.rs"]),
            Verdict::Run(Some(_))
        ));
        assert!(matches!(
            judge("edit_file", &["src/x/y/a.rs"]),
            Verdict::Run(_)
        ));
        assert_eq!(judge("edit_file", &["lib/src/a.rs"]), Verdict::Ask(None));
        assert_eq!(judge("edit_file", &["src"]), Verdict::Ask(None));
        assert_eq!(judge("write_file", &["src/a.rs"]), Verdict::Ask(None));
        // A name without a slash matches at any depth, as in .gitignore.
        assert!(matches!(judge("write_file", &[".env"]), Verdict::Run(_)));
        assert!(matches!(
            judge("write_file", &["a/b/.env"]),
            Verdict::Run(_)
        ));
        assert_eq!(judge("write_file", &[".envrc"]), Verdict::Ask(None));
        // Every path must be allowed: one outside makes the call ask.
        assert_eq!(
            judge("edit_file", &["src/a.rs", "README.md"]),
            Verdict::Ask(None)
        );
        // No path known (the tool refuses it): never allowed by a path rule.
        assert_eq!(judge("edit_file", &[]), Verdict::Ask(None));
    }

    #[test]
    fn a_directory_rule_covers_its_contents_and_stars_stay_in_one_directory() {
        let deny = rules(Kind::Deny, &["Read(secrets)", "write_file(/docs/*.md)"]);
        let denied = |tool: &str, p: &str| {
            matches!(
                deny.judge(Mode::Yes, tool, true, &paths(&[p])),
                Verdict::Deny(_)
            )
        };
        assert!(denied("read_file", "secrets/key.pem"));
        assert!(denied("grep", "app/secrets"));
        assert!(denied("write_file", "docs/a.md"));
        assert!(!denied("write_file", "docs/sub/a.md"));
        assert!(!denied("write_file", "sub/docs/a.md"));
    }

    #[tokio::test]
    async fn paths_are_matched_after_the_tool_s_own_normalisation() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        std::os::unix::fs::symlink("src", root.join("link")).unwrap();
        let ws = shiro_tools::FsMutator::new(&root).unwrap();
        let deny = rules(Kind::Deny, &["edit_file(src/**)", "read_file(src/**)"]);
        let edit = shiro_tools::tools::edit_file();
        let read = shiro_tools::tools::read_file();
        let abs = root.join("src/a.rs").display().to_string();
        for given in ["./src/a.rs", "src//a.rs", abs.as_str(), "link/a.rs"] {
            let args = serde_json::json!({"path": given, "old_string": "a", "new_string": "b"});
            let target = target(&edit, &args, &ws).await;
            assert_eq!(target, paths(&["src/a.rs"]), "{given}");
            let verdict = deny.judge(Mode::Yes, "edit_file", true, &target);
            assert!(matches!(verdict, Verdict::Deny(_)), "{given}: {verdict:?}");
            let target = super::target(&read, &args, &ws).await;
            let verdict = deny.judge(Mode::Yes, "read_file", false, &target);
            assert!(matches!(verdict, Verdict::Deny(_)), "{given}: {verdict:?}");
        }
        // `..` is refused by the tool itself; no path, nothing a rule could allow.
        let args =
            serde_json::json!({"path": "./src/../src/a.rs", "old_string": "a", "new_string": "b"});
        assert_eq!(target(&edit, &args, &ws).await, paths(&[]));
    }

    #[test]
    fn a_bash_prefix_rule_allows_its_command_and_asks_for_the_rest() {
        let allow = rules(Kind::Allow, &["bash(git status:*)"]);
        let judge = |line: &str| allow.judge(Mode::Ask, "bash", true, &command(line));
        assert!(matches!(judge("git status -s"), Verdict::Run(Some(_))));
        assert_eq!(judge("git push"), Verdict::Ask(None));
        assert_eq!(judge("git status; rm x"), Verdict::Ask(None));
        assert_eq!(judge("git status $(rm x)"), Verdict::Ask(None));
        // auto-edit asks for bash; a rule still allows it.
        assert_eq!(
            allow.judge(Mode::AutoEdit, "bash", true, &command("ls")),
            Verdict::Ask(None)
        );
        assert!(matches!(
            allow.judge(Mode::AutoEdit, "bash", true, &command("git status")),
            Verdict::Run(_)
        ));
    }

    #[test]
    fn deny_beats_ask_beats_allow_beats_the_mode() {
        let mut all = rules(Kind::Allow, &["Bash", "Edit"]);
        let source = Source::User("config.toml".into());
        all.add(Kind::Deny, &source, &["bash(rm -rf:*)".into()])
            .unwrap();
        all.add(
            Kind::Ask,
            &source,
            &["bash(git push:*)".into(), "write_file(*.lock)".into()],
        )
        .unwrap();
        let bash = |mode: Mode, line: &str| all.judge(mode, "bash", true, &command(line));
        let denied = bash(Mode::Yes, "ls && rm -rf build");
        insta::assert_snapshot!(
            match &denied { Verdict::Deny(text) => text.as_str(), _ => "not denied" },
            @"refused by the permission rule deny bash(rm -rf:*) (user config config.toml); nothing was run. Do not try to get around it; tell the user what you needed"
        );
        assert!(matches!(
            bash(Mode::Yes, "echo $(rm -rf /)"),
            Verdict::Deny(_)
        ));
        assert_eq!(
            bash(Mode::Yes, "git push origin"),
            Verdict::Ask(Some(
                "ask bash(git push:*) (user config config.toml)".into()
            ))
        );
        assert!(matches!(
            bash(Mode::Ask, "cargo build"),
            Verdict::Run(Some(_))
        ));
        assert!(matches!(
            all.judge(Mode::Yes, "write_file", true, &paths(&["Cargo.lock"])),
            Verdict::Ask(Some(_))
        ));
        // Read-only mode refuses changes even where a rule allows them, and runs reads.
        let refused = bash(Mode::ReadOnly, "cargo build");
        insta::assert_snapshot!(
            match &refused { Verdict::Deny(text) => text.as_str(), _ => "not refused" },
            @"refused: the session is in read-only mode, which refuses every tool that changes files, and bash where no read-only sandbox can hold it; nothing was run. Read and search instead, or tell the user what you would change"
        );
        assert!(matches!(
            all.judge(Mode::ReadOnly, "edit_file", true, &paths(&["a"])),
            Verdict::Deny(_)
        ));
        assert_eq!(
            all.judge(Mode::ReadOnly, "read_file", false, &paths(&["a"])),
            Verdict::Run(None)
        );
    }

    /// Deny and ask rules see the command through quoting, paths, wrappers and scripts;
    /// an allow rule never does, so it allows no more than it says.
    #[test]
    fn deny_and_ask_rules_see_through_the_easy_disguises() {
        let mut all = rules(Kind::Allow, &["bash(git:*)", "bash(echo:*)"]);
        let source = Source::User("config.toml".into());
        all.add(Kind::Deny, &source, &["bash(rm:*)".into()])
            .unwrap();
        all.add(Kind::Ask, &source, &["bash(curl:*)".into()])
            .unwrap();
        let judge = |line: &str| all.judge(Mode::Yes, "bash", true, &command(line));
        let disguises = [
            "rm a",
            "/bin/rm b",
            "\\rm h",
            "\"rm\" x",
            "r\"\"m x",
            "$'rm' x",
            "${RM:-rm} x",
            "env rm e",
            "env -i PATH=/bin rm x",
            "command rm x",
            "nice -n 5 rm x",
            "nohup rm x",
            "time rm x",
            "timeout 5 rm x",
            "xargs rm < list",
            "sudo rm x",
            "bash -c 'rm f'",
            "sh -c \"rm g\"",
            "eval 'rm x'",
            "echo; rm c",
            "echo $(rm d)",
            "git status && /usr/bin/env rm x",
        ];
        let through: Vec<&str> = disguises
            .iter()
            .copied()
            .filter(|line| !matches!(judge(line), Verdict::Deny(_)))
            .collect();
        assert_eq!(
            through,
            Vec::<&str>::new(),
            "these ran past deny bash(rm:*)"
        );
        for line in ["/usr/bin/curl x", "env curl x", "bash -c 'curl x'"] {
            assert!(matches!(judge(line), Verdict::Ask(Some(_))), "{line}");
        }
        // An allow rule is matched as written: a wrapped git is asked about, not allowed.
        assert!(matches!(judge("git status"), Verdict::Run(Some(_))));
        assert!(matches!(judge("env git status"), Verdict::Run(None)));
        assert!(matches!(
            all.judge(Mode::Ask, "bash", true, &command("env git status")),
            Verdict::Ask(None)
        ));
    }

    #[test]
    fn deny_rules_with_paths_hide_them_from_the_walking_tools() {
        let deny = rules(
            Kind::Deny,
            &["Read(secrets)", "grep(*.lock)", "bash(rm:*)", "Edit"],
        );
        let grep = deny.hidden("grep").unwrap();
        assert!(grep.hides("secrets") && grep.hides("secrets/key.pem"));
        assert!(grep.hides("Cargo.lock") && grep.hides("a/b/yarn.lock"));
        assert!(!grep.hides("src/lib.rs") && !grep.hides("secrets.md"));
        let glob = deny.hidden("glob").unwrap();
        assert!(glob.hides("secrets/x") && !glob.hides("Cargo.lock"));
        // No deny rule with a path names it: nothing hidden.
        assert!(deny.hidden("write_file").is_none());
        assert!(rules(Kind::Allow, &["Read(src)"]).hidden("grep").is_none());
        assert!(Rules::default().hidden("grep").is_none());
    }

    #[test]
    fn mcp_tools_are_asked_about_like_bash_unless_a_rule_names_them() {
        let none = Rules::default();
        let judge = |rules: &Rules, mode, tool: &str| rules.judge(mode, tool, true, &Target::Mcp);
        assert_eq!(judge(&none, Mode::Ask, "gh__list"), Verdict::Ask(None));
        // Auto-edit runs shiro's file tools, never what it cannot see.
        assert_eq!(judge(&none, Mode::AutoEdit, "gh__list"), Verdict::Ask(None));
        assert_eq!(judge(&none, Mode::Yes, "gh__list"), Verdict::Run(None));
        assert!(matches!(
            judge(&none, Mode::ReadOnly, "gh__list"),
            Verdict::Deny(_)
        ));
        let allow = rules(Kind::Allow, &["mcp__gh__list", "db__*"]);
        assert!(matches!(
            judge(&allow, Mode::Ask, "gh__list"),
            Verdict::Run(Some(_))
        ));
        assert!(matches!(
            judge(&allow, Mode::Ask, "db__query"),
            Verdict::Run(Some(_))
        ));
        assert_eq!(judge(&allow, Mode::Ask, "gh__delete"), Verdict::Ask(None));
        let deny = rules(Kind::Deny, &["mcp__gh"]);
        assert!(matches!(
            judge(&deny, Mode::Yes, "gh__list"),
            Verdict::Deny(_)
        ));
        assert_eq!(judge(&deny, Mode::Yes, "ghx__list"), Verdict::Run(None));
        // "Always" keeps the tool's own name.
        assert_eq!(
            narrowest("gh__list", &Target::Mcp),
            Some(vec!["gh__list".to_owned()])
        );
    }

    #[test]
    fn skill_rules_match_skill_names_and_loading_one_asks_nobody_by_itself() {
        let skill = |name: &str| Target::Skill(name.to_owned());
        let judge =
            |rules: &Rules, mode, name: &str| rules.judge(mode, "skill", false, &skill(name));
        let none = Rules::default();
        for mode in Mode::ALL {
            assert_eq!(
                judge(&none, mode, "pdf-forms"),
                Verdict::Run(None),
                "{mode:?}"
            );
        }
        let deny = rules(Kind::Deny, &["Skill(deploy-*)"]);
        assert!(matches!(
            judge(&deny, Mode::Yes, "deploy-prod"),
            Verdict::Deny(_)
        ));
        assert_eq!(judge(&deny, Mode::Yes, "pdf-forms"), Verdict::Run(None));
        let every = rules(Kind::Deny, &["skill"]);
        assert!(matches!(
            judge(&every, Mode::Ask, "pdf-forms"),
            Verdict::Deny(_)
        ));
        // A rule about another tool says nothing about skills, and the other way round.
        let read = rules(Kind::Deny, &["Read", "bash"]);
        assert_eq!(judge(&read, Mode::Ask, "pdf-forms"), Verdict::Run(None));
        assert_eq!(
            every.judge(Mode::Yes, "read_file", false, &paths(&["a"])),
            Verdict::Run(None)
        );
        let ask = rules(Kind::Ask, &["Skill(release)"]);
        assert!(matches!(
            judge(&ask, Mode::Yes, "release"),
            Verdict::Ask(Some(_))
        ));
        assert_eq!(judge(&ask, Mode::Yes, "release-notes"), Verdict::Run(None));
        assert_eq!(
            narrowest("skill", &skill("release")),
            Some(vec!["skill(release)".to_owned()])
        );
        assert_eq!(narrowest("skill", &skill("")), None);
    }

    #[test]
    fn invalid_rules_name_the_source_and_the_rule() {
        let source = Source::Workspace("/ws/.shiro/config.toml".into());
        let errors: Vec<String> = [
            "Bash(git status",
            "Bash()",
            "WebFetch(example.com)",
            "edit_file(../x)",
            "edit_file(src/[a)",
            "Read(/)",
        ]
        .iter()
        .map(|rule| {
            let mut rules = Rules::default();
            format!(
                "{:#}",
                rules
                    .add(Kind::Deny, &source, &[(*rule).to_owned()])
                    .unwrap_err()
            )
        })
        .collect();
        insta::assert_snapshot!(errors.join("\n"), @r#"
        invalid deny rule "Bash(git status" in workspace config /ws/.shiro/config.toml: `Bash(git status` opens `(` and never closes it
        invalid deny rule "Bash()" in workspace config /ws/.shiro/config.toml: `Bash()` has nothing between its parentheses; write the tool's name alone to match every call
        invalid deny rule "WebFetch(example.com)" in workspace config /ws/.shiro/config.toml: `WebFetch(example.com)` names no tool shiro has (the tools: read_file, list_dir, glob, grep, write_file, edit_file, multi_edit, apply_patch, bash, skill, and Claude Code's Read, LS, Glob, Grep, Write, Edit, MultiEdit, Bash, Skill; an MCP server's tools are server__tool, or mcp__server for all of them)
        invalid deny rule "edit_file(../x)" in workspace config /ws/.shiro/config.toml: `edit_file(../x)`: a path rule cannot climb out with `..`: paths are matched relative to the workspace root
        invalid deny rule "edit_file(src/[a)" in workspace config /ws/.shiro/config.toml: `edit_file(src/[a)`: not a valid glob (unclosed character class; missing ']')
        invalid deny rule "Read(/)" in workspace config /ws/.shiro/config.toml: `Read(/)`: the path is empty; write the tool's name alone to match every path
        "#);
    }

    #[test]
    fn narrowest_rules_allow_the_call_again_and_little_else() {
        let call = command("git status -s && cargo test -p x");
        let made = narrowest("bash", &call).unwrap();
        assert_eq!(made, ["bash(git status:*)", "bash(cargo test:*)"]);
        let allow = rules(
            Kind::Allow,
            &made.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(matches!(
            allow.judge(Mode::Ask, "bash", true, &call),
            Verdict::Run(_)
        ));
        assert_eq!(narrowest("bash", &command("echo $(id)")), None);
        let odd = paths(&["a[1]*.txt", "src/b.rs"]);
        let made = narrowest("apply_patch", &odd).unwrap();
        assert_eq!(
            made,
            ["apply_patch(./a\\[1\\]\\*.txt)", "apply_patch(src/b.rs)"]
        );
        let allow = rules(
            Kind::Allow,
            &made.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(matches!(
            allow.judge(Mode::Ask, "apply_patch", true, &odd),
            Verdict::Run(_)
        ));
        let other = paths(&["a1x.txt"]);
        assert_eq!(
            allow.judge(Mode::Ask, "apply_patch", true, &other),
            Verdict::Ask(None)
        );
        let nested = paths(&["sub/a[1]*.txt"]);
        assert_eq!(
            allow.judge(Mode::Ask, "apply_patch", true, &nested),
            Verdict::Ask(None)
        );
    }

    /// "Always" on `sh -c '…'` keeps that line, not `bash(sh:*)`: another script is asked
    /// about, and a deny rule that sees the script's commands still wins over the kept rule.
    #[test]
    fn a_kept_script_rule_allows_that_script_only_and_deny_sees_inside_it() {
        let call = command("sh -c 'echo harmless'");
        let made = narrowest("bash", &call).unwrap();
        assert_eq!(made, ["bash(sh -c 'echo harmless')"]);
        let mut all = rules(
            Kind::Allow,
            &made.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(matches!(
            all.judge(Mode::Ask, "bash", true, &call),
            Verdict::Run(Some(_))
        ));
        for other in [
            "sh -c 'rm -f victim; echo gone'",
            "sh -c 'echo harmless' ; rm x",
            "sh -c 'echo  harmless'",
            "sh -c 'echo\nharmless'",
        ] {
            assert_eq!(
                all.judge(Mode::Ask, "bash", true, &command(other)),
                Verdict::Ask(None),
                "{other}"
            );
        }
        all.add(Kind::Deny, &Source::Session, &["bash(echo:*)".into()])
            .unwrap();
        assert!(matches!(
            all.judge(Mode::Yes, "bash", true, &call),
            Verdict::Deny(_)
        ));
        // A tool with subcommands keeps its options up to the subcommand.
        let git = narrowest("bash", &command("git -C sub status -s")).unwrap();
        assert_eq!(git, ["bash(git -C sub status:*)"]);
        let git = rules(Kind::Allow, &[git[0].as_str()]);
        for (line, runs) in [
            ("git -C sub status", true),
            ("git -C sub push --force", false),
            ("git status", false),
        ] {
            let verdict = git.judge(Mode::Ask, "bash", true, &command(line));
            assert_eq!(matches!(verdict, Verdict::Run(_)), runs, "{line}");
        }
    }

    /// The message of a call an allow rule runs names the rule that matched it, not the
    /// first allow rule there is.
    #[test]
    fn runs_without_asking_names_the_rule_that_matched() {
        let allow = rules(
            Kind::Allow,
            &[
                "bash(echo hi:*)",
                "bash(git status:*)",
                "edit_file(a)",
                "edit_file(src/**)",
            ],
        );
        assert_eq!(
            allow.judge(Mode::Ask, "bash", true, &command("git status -s")),
            Verdict::Run(Some(
                "allow bash(git status:*) (workspace config .shiro/config.toml)".into()
            ))
        );
        assert_eq!(
            allow.judge(Mode::Ask, "edit_file", true, &paths(&["src/b.rs"])),
            Verdict::Run(Some(
                "allow edit_file(src/**) (workspace config .shiro/config.toml)".into()
            ))
        );
    }

    #[test]
    fn saving_a_rule_keeps_the_file_s_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".shiro/config.toml");
        save_allow(&path, &["bash(git status:*)".into()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[permissions]\nallow = [\"bash(git status:*)\"]\n"
        );
        std::fs::write(
            &path,
            "# my settings\n[undo]\ndepth = 5 # turns\n\n[permissions]\n# never\ndeny = [\"bash(rm:*)\"]\nallow = [\n  \"Read\", # reading is fine\n]\n",
        )
        .unwrap();
        save_allow(&path, &["edit_file(src/a.rs)".into(), "Read".into()]).unwrap();
        insta::assert_snapshot!(std::fs::read_to_string(&path).unwrap(), @r#"
        # my settings
        [undo]
        depth = 5 # turns

        [permissions]
        # never
        deny = ["bash(rm:*)"]
        allow = [
          "Read", # reading is fine
          "edit_file(src/a.rs)",
        ]
        "#);
        std::fs::write(&path, "[permissions\n").unwrap();
        let err = save_allow(&path, &["Read".into()]).unwrap_err();
        assert!(format!("{err:#}").contains("is not valid TOML"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[permissions\n");
    }

    #[test]
    fn permissions_lists_rules_with_their_source() {
        let mut all = rules(Kind::Allow, &["bash(cargo test:*)", "edit_file(src/**)"]);
        all.add(
            Kind::Deny,
            &Source::User("/home/me/.config/shiro/config.toml".into()),
            &["bash(rm -rf:*)".into()],
        )
        .unwrap();
        all.add(
            Kind::Deny,
            &Source::Flag("--disallowed-tools"),
            &["WebFetch".into()],
        )
        .unwrap_err();
        all.add(
            Kind::Allow,
            &Source::Session,
            &["bash(git status:*)".into()],
        )
        .unwrap();
        insta::assert_snapshot!(all.show(Mode::AutoEdit), @r"
        mode: auto-edit (file changes run without asking; bash commands and MCP tools are asked about)
        rules, weighed in this order (deny, then ask, then allow):
          deny  bash(rm -rf:*)      user config /home/me/.config/shiro/config.toml
          allow bash(cargo test:*)  workspace config .shiro/config.toml
          allow edit_file(src/**)   workspace config .shiro/config.toml
          allow bash(git status:*)  this session
        ");
        insta::assert_snapshot!(Rules::default().show(Mode::Ask), @r#"
        mode: ask (changes to files, bash commands and MCP tools are asked about)
        no permission rules; add them under [permissions] in .shiro/config.toml (see docs/cli.md, "Permissions")
        "#);
    }

    /// A path component: letters and glob metacharacters, never `.` or `..`.
    fn component() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(r"[a-c*?\[\]{}!\\]{1,4}").expect("a valid regex")
    }

    fn workspace_path() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::collection::vec(component(), 1..4).prop_map(|parts| parts.join("/"))
    }

    /// A bash line of simple commands joined by operators.
    fn bash_line() -> impl proptest::strategy::Strategy<Value = String> {
        let command = (
            "[a-c]{1,3}",
            proptest::collection::vec("[a-c]{1,3}|-[a-c]", 0..3),
        )
            .prop_map(|(first, rest)| format!("{first} {}", rest.join(" ")));
        proptest::collection::vec((command, prop_oneof!["&&", ";", "|", "||"]), 1..4).prop_map(
            |parts| {
                let mut line = String::new();
                for (index, (command, op)) in parts.iter().enumerate() {
                    if index > 0 {
                        line.push_str(&format!(" {op} "));
                    }
                    line.push_str(command);
                }
                line
            },
        )
    }

    use proptest::prelude::*;

    proptest! {
        /// The rule an "always" answer keeps for a path allows that path and no other.
        #[test]
        fn a_kept_path_rule_matches_exactly_its_path(path in workspace_path(), other in workspace_path()) {
            let made = narrowest("write_file", &paths(&[&path])).unwrap();
            let allow = rules(Kind::Allow, &made.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert!(matches!(allow.judge(Mode::Ask, "write_file", true, &paths(&[&path])), Verdict::Run(_)));
            let judged = allow.judge(Mode::Ask, "write_file", true, &paths(&[&other]));
            prop_assert_eq!(matches!(judged, Verdict::Run(_)), other == path || other.starts_with(&format!("{path}/")));
        }

        /// The rules an "always" answer keeps for a bash line allow that line again, and a
        /// deny rule for any of its commands beats them in every mode.
        #[test]
        fn kept_bash_rules_allow_the_line_and_deny_still_wins(line in bash_line(), pick in 0usize..4) {
            let made = narrowest("bash", &command(&line)).unwrap();
            let mut all = rules(Kind::Allow, &made.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert!(matches!(all.judge(Mode::Ask, "bash", true, &command(&line)), Verdict::Run(_)));
            let deny = made[pick % made.len()].clone();
            all.add(Kind::Deny, &Source::Session, &[deny]).unwrap();
            for mode in Mode::ALL {
                prop_assert!(matches!(all.judge(mode, "bash", true, &command(&line)), Verdict::Deny(_)));
            }
        }
    }

    #[test]
    fn modes_parse_by_name() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.name()), Some(mode));
        }
        assert_eq!(Mode::parse("readonly"), Some(Mode::ReadOnly));
        assert_eq!(Mode::parse("plan"), None);
    }
}
