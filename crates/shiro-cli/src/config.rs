//! Configuration: `.shiro/config.toml` in the workspace over `config.toml` in the user's
//! config directory, over the defaults. Documented in `docs/cli.md`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::permissions::{Kind, Rules, Source};

/// Everything a config file may set. Every field is optional so a file can set one thing.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[undo]`
    #[serde(default)]
    pub undo: UndoConfig,
    /// `[model]`
    #[serde(default)]
    pub model: ModelConfig,
    /// `[bash]`
    #[serde(default)]
    pub bash: BashConfig,
    /// `[commands]`
    #[serde(default)]
    pub commands: CommandsConfig,
    /// `[permissions]`
    #[serde(default)]
    pub permissions: PermissionsConfig,
}

/// `[permissions]`: rules for tool calls (see `docs/cli.md`, "Permissions").
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// Calls that run without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Calls that are always asked about.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Calls that are refused, whatever else allows them.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl PermissionsConfig {
    /// Adds these rules, from `source`, to `rules`.
    fn add_to(&self, rules: &mut Rules, source: &Source) -> Result<()> {
        rules.add(Kind::Deny, source, &self.deny)?;
        rules.add(Kind::Ask, source, &self.ask)?;
        rules.add(Kind::Allow, source, &self.allow)
    }
}

/// `[commands]`: which other tools' command folders are read besides `.shiro`'s.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandsConfig {
    /// Claude Code's `.claude/commands/` and `~/.claude/commands/` (default true).
    pub claude: Option<bool>,
    /// OpenCode's `.opencode/command(s)/` and its user-level folders (default true).
    pub opencode: Option<bool>,
    /// Gemini CLI's `.gemini/commands/` and its user-level folders (default true).
    pub gemini: Option<bool>,
}

/// `[bash]`: how bash commands' file changes are captured.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BashConfig {
    /// `overlay` (the default; falls back to `detect` where overlays are refused), `detect`
    /// or `off`.
    pub capture: Option<BashCapture>,
}

/// How bash commands' file changes are captured (see `docs/undo.md`).
#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BashCapture {
    /// Through an overlay of the workspace, so they are undone like any tool's; where
    /// overlays are refused, `Detect`, with a notice.
    #[default]
    Overlay,
    /// Run directly; the changed paths are named, and cannot be undone.
    Detect,
    /// Run directly; nothing is known about what changed.
    Off,
}

/// `[undo]`: depth and store size.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UndoConfig {
    /// How many turns the log keeps (default 20).
    pub depth: Option<usize>,
    /// The store's size cap in bytes (default 1 GiB).
    pub max_store_bytes: Option<u64>,
}

/// `[model]`: which model and where.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The model name, or `replay:FILE`.
    pub name: Option<String>,
    /// The OpenAI-compatible endpoint.
    pub base_url: Option<String>,
    /// Request timeout in seconds.
    pub timeout_secs: Option<u64>,
    /// The model's context window in tokens (the status line's share of it); well-known
    /// models have a default (see [`context_window`]).
    pub context_window: Option<u64>,
}

/// The context window of a well-known model, by its name: the status line shows the share
/// of it a session uses. `None` for a model this table does not know.
pub fn context_window(model: &str) -> Option<u64> {
    let model = model.to_lowercase();
    let name = model.rsplit('/').next().unwrap_or(&model);
    let table: [(&str, u64); 12] = [
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("claude", 200_000),
        ("gemini", 1_048_576),
        ("llama3", 8_192),
        ("qwen2.5-coder", 32_768),
        ("deepseek", 128_000),
    ];
    table
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, window)| *window)
}

/// The merged configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Turns kept in the undo log.
    pub undo_depth: usize,
    /// The undo store's size cap in bytes.
    pub max_store_bytes: u64,
    /// `[model]` as merged.
    pub model: ModelConfig,
    /// `[bash] capture` as merged.
    pub bash_capture: BashCapture,
    /// The user's config directory, when there is one (user commands live there too).
    pub user_dir: Option<PathBuf>,
    /// `[commands]` as merged: which other tools' command folders are read.
    pub ecosystems: shiro_commands::Ecosystems,
    /// The user's home directory (for `~/.claude/commands` and the like); set by `main`.
    pub home_dir: Option<PathBuf>,
    /// The user's config home (`$XDG_CONFIG_HOME`, else `~/.config`); set by `main`.
    pub config_home: Option<PathBuf>,
    /// `[permissions]` of both files: the user's rules, then the workspace's. They all
    /// apply; a deny anywhere beats an allow anywhere.
    pub permissions: Rules,
}

/// Default number of undoable turns.
pub const DEFAULT_DEPTH: usize = 20;
/// Default store cap: 1 GiB.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 1 << 30;

impl Config {
    /// Reads the user's and the workspace's config files; the workspace wins field by field.
    pub fn load(workspace: &Path, user_dir: Option<PathBuf>) -> Result<Self> {
        let mut permissions = Rules::default();
        let user = match &user_dir {
            Some(dir) => {
                let path = dir.join("config.toml");
                let file = read_file(&path)?;
                file.permissions
                    .add_to(&mut permissions, &Source::User(path))?;
                file
            }
            None => ConfigFile::default(),
        };
        let project_path = workspace.join(".shiro").join("config.toml");
        let project = read_file(&project_path)?;
        project
            .permissions
            .add_to(&mut permissions, &Source::Workspace(project_path))?;
        let depth = project
            .undo
            .depth
            .or(user.undo.depth)
            .unwrap_or(DEFAULT_DEPTH);
        if depth == 0 {
            anyhow::bail!("[undo] depth must be at least 1");
        }
        Ok(Self {
            undo_depth: depth,
            max_store_bytes: project
                .undo
                .max_store_bytes
                .or(user.undo.max_store_bytes)
                .unwrap_or(DEFAULT_MAX_STORE_BYTES),
            model: ModelConfig {
                name: project.model.name.or(user.model.name),
                base_url: project.model.base_url.or(user.model.base_url),
                timeout_secs: project.model.timeout_secs.or(user.model.timeout_secs),
                context_window: project.model.context_window.or(user.model.context_window),
            },
            bash_capture: project
                .bash
                .capture
                .or(user.bash.capture)
                .unwrap_or_default(),
            user_dir,
            ecosystems: shiro_commands::Ecosystems {
                claude: project
                    .commands
                    .claude
                    .or(user.commands.claude)
                    .unwrap_or(true),
                opencode: project
                    .commands
                    .opencode
                    .or(user.commands.opencode)
                    .unwrap_or(true),
                gemini: project
                    .commands
                    .gemini
                    .or(user.commands.gemini)
                    .unwrap_or(true),
            },
            home_dir: None,
            config_home: None,
            permissions,
        })
    }
}

fn read_file(path: &Path) -> Result<ConfigFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigFile::default()),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// The user's config directory: `$SHIRO_CONFIG_DIR`, else `$XDG_CONFIG_HOME/shiro`, else
/// `~/.config/shiro`.
pub fn user_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SHIRO_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("shiro"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config").join("shiro"))
}

/// The user's home directory: `$HOME`, when set.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// The user's config home: `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home_dir().map(|home| home.join(".config")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_wins_field_by_field() {
        let user = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            user.path().join("config.toml"),
            "[undo]\ndepth = 5\nmax_store_bytes = 100\n",
        )
        .unwrap();
        std::fs::create_dir(ws.path().join(".shiro")).unwrap();
        std::fs::write(ws.path().join(".shiro/config.toml"), "[undo]\ndepth = 64\n").unwrap();
        let config = Config::load(ws.path(), Some(user.path().to_owned())).unwrap();
        assert_eq!((config.undo_depth, config.max_store_bytes), (64, 100));
    }

    #[test]
    fn defaults_without_files_and_clear_errors_for_bad_ones() {
        let ws = tempfile::tempdir().unwrap();
        let config = Config::load(ws.path(), None).unwrap();
        assert_eq!(
            (config.undo_depth, config.max_store_bytes),
            (DEFAULT_DEPTH, DEFAULT_MAX_STORE_BYTES)
        );
        std::fs::create_dir(ws.path().join(".shiro")).unwrap();
        std::fs::write(ws.path().join(".shiro/config.toml"), "[undo]\ndepht = 3\n").unwrap();
        let err = Config::load(ws.path(), None).unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown field `depht`"),
            "{err:#}"
        );
        std::fs::write(ws.path().join(".shiro/config.toml"), "[undo]\ndepth = 0\n").unwrap();
        assert!(Config::load(ws.path(), None).is_err());
        std::fs::write(
            ws.path().join(".shiro/config.toml"),
            "[bash]\ncapture = \"sometimes\"\n",
        )
        .unwrap();
        let err = Config::load(ws.path(), None).unwrap_err();
        assert!(
            format!("{err:#}").contains(
                "unknown variant `sometimes`, expected one of `overlay`, `detect`, `off`"
            ),
            "{err:#}"
        );
    }

    #[test]
    fn other_tools_command_folders_are_read_unless_switched_off() {
        let user = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let config = Config::load(ws.path(), None).unwrap();
        assert_eq!(config.ecosystems, shiro_commands::Ecosystems::default());
        std::fs::write(
            user.path().join("config.toml"),
            "[commands]\nclaude = false\ngemini = false\n",
        )
        .unwrap();
        std::fs::create_dir(ws.path().join(".shiro")).unwrap();
        std::fs::write(
            ws.path().join(".shiro/config.toml"),
            "[commands]\ngemini = true\n",
        )
        .unwrap();
        let config = Config::load(ws.path(), Some(user.path().to_owned())).unwrap();
        assert_eq!(
            config.ecosystems,
            shiro_commands::Ecosystems {
                claude: false,
                opencode: true,
                gemini: true
            }
        );
    }

    #[test]
    fn permission_rules_of_both_files_apply_and_a_bad_one_is_named() {
        use crate::permissions::{Mode, Target, Verdict};
        let user = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            user.path().join("config.toml"),
            "[permissions]\ndeny = [\"bash(git push:*)\"]\n",
        )
        .unwrap();
        std::fs::create_dir(ws.path().join(".shiro")).unwrap();
        std::fs::write(
            ws.path().join(".shiro/config.toml"),
            "[permissions]\nallow = [\"Bash\", \"edit_file(src/**)\"]\n",
        )
        .unwrap();
        let config = Config::load(ws.path(), Some(user.path().to_owned())).unwrap();
        let judge = |line: &str| {
            config
                .permissions
                .judge(Mode::Ask, "bash", true, &Target::Command(line.into()))
        };
        // The workspace cannot allow what the user denies.
        assert!(matches!(judge("git push"), Verdict::Deny(_)));
        assert!(matches!(judge("git status"), Verdict::Run(Some(_))));
        std::fs::write(
            ws.path().join(".shiro/config.toml"),
            "[permissions]\nask = [\"Bash(git\"]\n",
        )
        .unwrap();
        let err = Config::load(ws.path(), None).unwrap_err();
        let text = format!("{err:#}").replace(&ws.path().display().to_string(), "[WS]");
        insta::assert_snapshot!(text, @r#"invalid ask rule "Bash(git" in workspace config [WS]/.shiro/config.toml: `Bash(git` opens `(` and never closes it"#);
    }

    #[test]
    fn bash_capture_defaults_to_overlay_and_the_workspace_wins() {
        let user = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(
            Config::load(ws.path(), None).unwrap().bash_capture,
            BashCapture::Overlay
        );
        std::fs::write(
            user.path().join("config.toml"),
            "[bash]\ncapture = \"off\"\n",
        )
        .unwrap();
        let config = Config::load(ws.path(), Some(user.path().to_owned())).unwrap();
        assert_eq!(config.bash_capture, BashCapture::Off);
        std::fs::create_dir(ws.path().join(".shiro")).unwrap();
        std::fs::write(
            ws.path().join(".shiro/config.toml"),
            "[bash]\ncapture = \"detect\"\n",
        )
        .unwrap();
        let config = Config::load(ws.path(), Some(user.path().to_owned())).unwrap();
        assert_eq!(config.bash_capture, BashCapture::Detect);
    }
}
