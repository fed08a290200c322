//! The `skill` tool: Agent Skills disclosed progressively. The model is offered each skill's
//! name and description, in this tool's description and nothing more; a call loads one
//! skill's instructions, names its folder and lists its files, and with `file` reads one of
//! them. Scripts are not run here: the model runs them with `bash`, so what they change is
//! captured and undone like any command's.
//!
//! The tool is offered only while at least one skill is (see
//! [`shiro_commands::Registry::offered_skills`]: a project's skills wait for `/trust`), so a
//! workspace without skills sends the model exactly what it sent before skills existed.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::Value;
use shiro_commands::{Command, Registry};
use shiro_providers::ToolSpec;

/// The tool's name.
pub const SKILL_TOOL: &str = shiro_commands::tool::SKILL;

/// What the description says before the list of skills.
const PREAMBLE: &str = "Loads a skill: instructions for one kind of task, written by the user or installed with their tools. \
When a task matches a skill's description, call this tool with its name before you start, then follow the instructions it returns. \
The result names the skill's folder and lists its files: read a reference with `file`, and run a script with bash from the workspace root, using the folder as given. \
The skills:";

/// The description of the tool for `skills`: the preamble, then one line per skill with its
/// name and description (at most the format's 1024 characters), and nothing of its body.
pub fn description(skills: &[Command]) -> String {
    let mut out = String::from(PREAMBLE);
    for skill in skills {
        let summary = skill.summary().unwrap_or_default();
        let summary: String = summary.chars().take(MAX_DESCRIPTION).collect();
        let summary = summary.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = write!(out, "\n- {}: {summary}", skill.name);
    }
    out
}

/// The format's longest description; longer ones are cut for the model.
const MAX_DESCRIPTION: usize = 1024;

/// The tool's spec for the skills `registry` offers now that `shown` lets through (the
/// permission rules' deny list keeps a skill from the model's sight), or `None` when that
/// leaves none.
pub fn spec(registry: &Registry, shown: impl Fn(&str) -> bool) -> Option<ToolSpec> {
    let mut skills = registry.offered_skills();
    skills.retain(|skill| shown(&skill.name));
    if skills.is_empty() {
        return None;
    }
    Some(ToolSpec {
        name: SKILL_TOOL.to_owned(),
        description: description(&skills),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The skill's name, as the list gives it."
                },
                "file": {
                    "type": "string",
                    "description": "Optional: one of the skill's files, relative to its folder (e.g. `references/guide.md`), to read instead of its instructions."
                }
            },
            "required": ["name"],
            "additionalProperties": false
        }),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillArgs {
    name: String,
    #[serde(default, alias = "path")]
    file: Option<String>,
}

/// Runs one call: `Ok` with the text for the model, or `Err` with what went wrong and what
/// to do instead. Only skills the registry offers can be loaded, so a project's skills stay
/// out of reach until the workspace is trusted.
pub fn call(registry: &Registry, args: Value) -> Result<String, String> {
    let args: SkillArgs = serde_json::from_value(args).map_err(|err| {
        format!(
            "the arguments do not fit the skill tool ({err}); give `name`, and optionally `file`"
        )
    })?;
    let skills = registry.offered_skills();
    let wanted = args.name.trim().trim_start_matches('/');
    if skills.is_empty() {
        return Err(format!(
            "no skill is offered in this session, so `{wanted}` cannot be loaded (a workspace's own skills wait until the user trusts it with /trust); go on without it"
        ));
    }
    let Some(skill) = skills.iter().find(|s| s.name.eq_ignore_ascii_case(wanted)) else {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "there is no skill `{wanted}`; the skills are: {}",
            names.join(", ")
        ));
    };
    match args.file.as_deref() {
        Some(file) => read_file(registry, skill, file),
        None => Ok(load(registry, skill)),
    }
}

/// A skill's instructions, folder and files.
fn load(registry: &Registry, skill: &Command) -> String {
    let folder = skill
        .skill
        .as_ref()
        .map_or_else(String::new, |info| info.shown_dir.clone());
    let files = registry.skill_files(skill);
    let mut out = format!("skill {} (folder: {folder})\n", skill.name);
    out.push_str("files:");
    if files.files.is_empty() {
        out.push_str(" (none besides SKILL.md)");
    }
    for file in &files.files {
        let _ = write!(out, "\n  {file}");
    }
    if files.more > 0 {
        let _ = write!(out, "\n  … and {} more", files.more);
    }
    if files.links_left_out {
        out.push_str("\n  (links that lead out of the workspace are left out)");
    }
    out.push_str("\nRead a file with the skill tool's `file`");
    if let Some(script) = files.files.iter().find(|f| f.starts_with("scripts/")) {
        let _ = write!(out, "; run a script with bash, as `{folder}/{script}`");
    }
    out.push_str(".\n\n");
    let body = skill.body.trim();
    if body.is_empty() {
        out.push_str("(the skill has no instructions beyond its description)");
    } else {
        out.push_str(body);
    }
    out
}

/// One file of a skill's folder.
fn read_file(registry: &Registry, skill: &Command, file: &str) -> Result<String, String> {
    let read = registry
        .read_skill_file(skill, file)
        .map_err(|err| err.to_string())?;
    let mut out = read.text;
    if let Some(size) = read.cut {
        let _ = write!(
            out,
            "\n[cut: the file has {size} bytes; only its first {} are shown]",
            shiro_commands::MAX_SKILL_FILE_BYTES
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiro_commands::Sources;

    fn write_skill(root: &std::path::Path, name: &str) {
        let dir = root.join(".agents/skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: About {name}.\n---\nBody of {name}.\n"),
        )
        .unwrap();
    }

    /// The spec is made from the registry at each request, so a skill added since (seen by
    /// the watcher's reload) is offered, and one the rules hide is not.
    #[test]
    fn the_spec_follows_the_registry_and_leaves_out_hidden_skills() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        write_skill(&root, "first");
        let registry = Registry::load(Sources {
            workspace_root: root.clone(),
            ..Sources::default()
        });
        registry.set_workspace_trusted(true);
        let described = |registry: &Registry, shown: &dyn Fn(&str) -> bool| {
            spec(registry, shown).map(|spec| spec.description)
        };
        let before = described(&registry, &|_| true).unwrap();
        assert!(before.contains("\n- first: About first."), "{before}");
        write_skill(&root, "second");
        // The watcher reloads a clone; the agent's registry shares its state.
        let watched = registry.clone();
        watched.reload();
        let after = described(&registry, &|_| true).unwrap();
        assert!(after.contains("\n- second: About second."), "{after}");
        let hidden = described(&registry, &|name| name != "first").unwrap();
        assert!(!hidden.contains("first"), "{hidden}");
        assert!(hidden.contains("\n- second: "), "{hidden}");
        assert_eq!(described(&registry, &|_| false), None);
    }
}
