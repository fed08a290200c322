//! Agent Skills: a folder holding a `SKILL.md`, whose YAML frontmatter names the skill and
//! says when to use it, and whose Markdown body is the instructions.
//!
//! The format (agentskills.io) asks for `name` (lowercase letters, digits and single
//! hyphens, at most 64 characters, the folder's own name) and `description` (at most 1,024
//! characters), and allows `license`, `compatibility`, `metadata` and `allowed-tools`.
//! Agents add keys of their own (Claude Code's `argument-hint`, `model`,
//! `disable-model-invocation`, `user-invocable`, `context`, …). shiro reads what it can use,
//! keeps every other key as written, and turns what breaks the format into warnings: a skill
//! is skipped only when its frontmatter never closes or it has no name that can be typed.

use std::path::Path;

use super::{
    Command, Diags, Ecosystem, Origin, Parsed, Severity, apply_frontmatter, bad_name,
    normalize_body, strip_bom, text_value,
};
use crate::frontmatter::{self, Value};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// The format's longest name.
const MAX_NAME: usize = 64;
/// The format's longest description.
pub(crate) const MAX_DESCRIPTION: usize = 1024;
/// The format's longest `compatibility`.
const MAX_COMPATIBILITY: usize = 500;

/// What a skill has beyond a command's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillInfo {
    /// The skill's folder, as it was reached (links unresolved).
    pub dir: std::path::PathBuf,
    /// How the model and the listings name that folder: relative to the workspace root for
    /// a folder inside it, else the whole path. Set by the registry; the folder as given
    /// until then.
    pub shown_dir: String,
    /// `license`, as written.
    pub license: Option<String>,
    /// `compatibility`: what the skill needs (a product, packages, the network).
    pub compatibility: Option<String>,
    /// `metadata`: the format's map of keys to text, in file order.
    pub metadata: Vec<(String, String)>,
    /// Frontmatter keys shiro does not read, with their text as written, in file order.
    pub other_keys: Vec<(String, String)>,
    /// `user-invocable`: `false` keeps it out of the `/` menu, for the model to load alone.
    pub user_invocable: bool,
}

/// The frontmatter keys a skill shares with a command file, read by the same code.
const COMMAND_KEYS: [&str; 6] = [
    "description",
    "argument-hint",
    "allowed-tools",
    "model",
    "arguments",
    "disable-model-invocation",
];

/// Parses a skill's `SKILL.md` (`file`), found in a folder called `folder`. The skill is
/// called by its frontmatter's `name` when that can be typed as a command, else by its
/// folder's name; what breaks the format is a warning. Never fails and never panics: a skill
/// whose frontmatter never closes, or without a usable name, is an error diagnostic and no
/// command.
pub fn parse_skill_file(
    file: &Path,
    folder: &str,
    text: &str,
    origin: Origin,
    ecosystem: Ecosystem,
) -> Parsed {
    let mut diags = Diags {
        file,
        out: Vec::new(),
    };
    let text = strip_bom(text);
    let lines: Vec<&str> = text.lines().collect();
    let front = frontmatter::parse(&lines);
    let has_frontmatter = lines.first().is_some_and(|l| l.trim_end() == "---");
    if front.unclosed {
        // Without its end, neither the name nor the description can be told from the
        // instructions: offered, the skill would be described by its first line.
        diags.push(
            1,
            1,
            Severity::Error,
            "frontmatter `---` is never closed, skill skipped: end the frontmatter with a `---` line before the instructions"
                .to_owned(),
        );
        return Parsed {
            commands: Vec::new(),
            diagnostics: diags.out,
        };
    }
    if !has_frontmatter {
        diags.push(
            1,
            1,
            Severity::Warning,
            "no `---` frontmatter: the format asks for `name` and `description` there; the folder's name is used, and the first line of the instructions as the description".to_owned(),
        );
    }
    for (line, message) in &front.warnings {
        diags.push(*line, 1, Severity::Warning, message.clone());
    }
    let entries = &front.entries;
    let declared = entries.iter().find(|e| e.key == "name");
    let Some(name) = skill_name(declared, folder, has_frontmatter, &mut diags) else {
        return Parsed {
            commands: Vec::new(),
            diagnostics: diags.out,
        };
    };
    let body = normalize_body(&lines[front.body_start.min(lines.len())..]);
    let mut command = Command::new(&name, &body, origin, ecosystem);
    command.file = file.to_path_buf();
    let shared: Vec<frontmatter::Entry> = entries
        .iter()
        .filter(|e| COMMAND_KEYS.contains(&e.key.as_str()))
        .cloned()
        .collect();
    apply_frontmatter(&mut command, &shared, &mut diags);
    let mut info = SkillInfo {
        dir: file.parent().unwrap_or(file).to_path_buf(),
        shown_dir: file.parent().unwrap_or(file).display().to_string(),
        license: None,
        compatibility: None,
        metadata: Vec::new(),
        other_keys: Vec::new(),
        user_invocable: true,
    };
    for entry in entries {
        read_skill_key(entry, &mut info, &mut diags);
    }
    check_description(&command, entries, has_frontmatter, &mut diags);
    if body.is_empty() {
        diags.push(
            1,
            1,
            Severity::Warning,
            format!(
                "skill /{name} has no instructions: its SKILL.md has nothing after the frontmatter"
            ),
        );
    }
    command.skill = Some(Box::new(info));
    diags.out.sort_by_key(|d| (d.line, d.column));
    Parsed {
        commands: vec![command],
        diagnostics: diags.out,
    }
}

/// Reads one frontmatter key that only skills have, or keeps a key shiro does not read.
fn read_skill_key(entry: &frontmatter::Entry, info: &mut SkillInfo, diags: &mut Diags<'_>) {
    let key = entry.key.as_str();
    if key == "name" || COMMAND_KEYS.contains(&key) {
        return;
    }
    match key {
        "license" => info.license = text_value(entry, diags).filter(|t| !t.trim().is_empty()),
        "compatibility" => {
            info.compatibility = text_value(entry, diags).filter(|t| !t.trim().is_empty());
            if let Some(text) = &info.compatibility
                && text.chars().count() > MAX_COMPATIBILITY
            {
                diags.push(
                    entry.line,
                    1,
                    Severity::Warning,
                    format!(
                        "`compatibility` is {} characters, more than the format's {MAX_COMPATIBILITY}",
                        text.chars().count()
                    ),
                );
            }
        }
        "metadata" => match &entry.value {
            Value::Map(pairs) => info.metadata.clone_from(pairs),
            Value::Text(text) if text.trim().is_empty() => {}
            _ => diags.push(
                entry.line,
                1,
                Severity::Warning,
                "`metadata` should be keys with text values, one a line below it (`author: someone`), ignored".to_owned(),
            ),
        },
        "user-invocable" => match text_value(entry, diags).as_deref().map(str::trim) {
            Some("false" | "no" | "off") => info.user_invocable = false,
            Some("true" | "yes" | "on") | None => {}
            Some(other) => diags.push(
                entry.line,
                1,
                Severity::Warning,
                format!("`user-invocable` should be true or false, not `{other}`, ignored"),
            ),
        },
        _ => info.other_keys.push((entry.key.clone(), raw_value(entry))),
    }
}

/// A kept key's value as text: a scalar as it reads, a list or a map as written.
fn raw_value(entry: &frontmatter::Entry) -> String {
    match &entry.value {
        Value::Text(text) => text.clone(),
        Value::List(items) => items.join(", "),
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Other | Value::Invalid(_) if entry.raw.is_empty() => "(nested)".to_owned(),
        Value::Other | Value::Invalid(_) => entry.raw.clone(),
    }
}

/// The name a skill is called by (lowercased), with warnings for what breaks the format;
/// `None` (with an error) when neither `name` nor the folder's name can be typed.
fn skill_name(
    declared: Option<&frontmatter::Entry>,
    folder: &str,
    has_frontmatter: bool,
    diags: &mut Diags<'_>,
) -> Option<String> {
    let folder_ok = !folder.is_empty() && bad_name(&folder.to_lowercase()).is_none();
    let written = declared.and_then(|entry| match &entry.value {
        Value::Text(text) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        _ => None,
    });
    let line = declared.map_or(1, |entry| entry.line);
    let Some(written) = written else {
        if has_frontmatter && folder_ok {
            diags.push(
                line,
                1,
                Severity::Warning,
                format!("no `name`: the format requires one; the folder's name `{folder}` is used"),
            );
        }
        if folder_ok {
            return Some(folder.to_lowercase());
        }
        diags.push(
            line,
            1,
            Severity::Error,
            format!(
                "the folder's name `{folder}` cannot be typed as a command (use letters, digits, `-`, `_` and `:`), skill skipped"
            ),
        );
        return None;
    };
    let lower = written.to_lowercase();
    if let Some(bad) = bad_name(&lower) {
        if folder_ok {
            diags.push(
                line,
                1,
                Severity::Warning,
                format!(
                    "`name` `{written}` cannot be typed as a command ({}); the folder's name `{folder}` is used",
                    bad.what()
                ),
            );
            return Some(folder.to_lowercase());
        }
        diags.push(
            line,
            1,
            Severity::Error,
            format!(
                "invalid skill name `{written}`: {} (use letters, digits and `-`), and the folder's name `{folder}` cannot be used either, skill skipped",
                bad.what()
            ),
        );
        return None;
    }
    if !follows_the_format(&written) {
        diags.push(
            line,
            1,
            Severity::Warning,
            format!(
                "`name` `{written}` does not follow the format (lowercase letters, digits and single hyphens, at most {MAX_NAME} characters); shiro calls it /{lower}"
            ),
        );
    }
    if written != folder {
        diags.push(
            line,
            1,
            Severity::Warning,
            format!(
                "`name` `{written}` differs from its folder's name `{folder}`: the format asks them to match; shiro calls it /{lower}"
            ),
        );
    }
    Some(lower)
}

/// Whether `name` keeps the format's rules: 1 to 64 of `a-z`, `0-9` and `-`, no hyphen at
/// either end or twice in a row.
fn follows_the_format(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Warns about a missing or overlong `description`: the model chooses skills by it.
fn check_description(
    command: &Command,
    entries: &[frontmatter::Entry],
    has_frontmatter: bool,
    diags: &mut Diags<'_>,
) {
    let entry = entries.iter().find(|e| e.key == "description");
    match &command.description {
        None if has_frontmatter => diags.push(
            entry.map_or(1, |e| e.line),
            1,
            Severity::Warning,
            format!(
                "no `description`: the format requires one, and the model chooses skills by it; /{} is offered with the first line of its instructions",
                command.name
            ),
        ),
        Some(text) if text.chars().count() > MAX_DESCRIPTION => diags.push(
            entry.map_or(1, |e| e.line),
            1,
            Severity::Warning,
            format!(
                "`description` is {} characters, more than the format's {MAX_DESCRIPTION}; the model is offered its first {MAX_DESCRIPTION}",
                text.chars().count()
            ),
        ),
        _ => {}
    }
}
