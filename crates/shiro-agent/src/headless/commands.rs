//! `shiro commands`: the user commands of a workspace, listed, shown, checked or expanded;
//! and how the agent names them and what they allow.

use std::fmt::Write as _;

use anyhow::{Context as _, Result, anyhow, bail};
use shiro_commands::{
    AllowedTools, Args, ExpandContext, FsReader, Kind, MenuEntry, Registry, ShRunner, Sources,
};

use super::{BUILTINS, CommandsCommand, Context, Report, with_newline};
use crate::trust;

/// The registry of user commands and skills for this workspace, told whether the user
/// trusts it (a project's skills wait for that).
pub fn registry(ctx: &Context) -> Registry {
    let registry = Registry::load(Sources {
        workspace_root: ctx.root.clone(),
        user_config_dir: ctx.config.user_dir.clone(),
        home_dir: ctx.config.home_dir.clone(),
        config_home: ctx.config.config_home.clone(),
        ecosystems: ctx.config.ecosystems,
        builtins: BUILTINS
            .iter()
            .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
            .collect(),
    });
    registry.set_workspace_trusted(trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root));
    registry
}

/// `shiro commands …`.
pub async fn commands(ctx: &Context, command: &CommandsCommand) -> Result<Report> {
    let registry = registry(ctx);
    match command {
        CommandsCommand::List { json } => Ok(Report {
            stdout: if *json {
                list_json(&registry)?
            } else {
                list_text(&registry)
            },
            ..Report::default()
        }),
        CommandsCommand::Expand {
            trust: trust_flag,
            name,
            args,
        } => {
            let name = name.trim_start_matches('/');
            if BUILTINS.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                bail!("/{name} is a built-in command; it has no prompt to expand");
            }
            let command = registry.find(name).map_err(|candidates| {
                if candidates.is_empty() {
                    anyhow!("unknown command /{name}; `shiro commands list` shows the commands")
                } else {
                    anyhow!("/{name} is ambiguous: {}", slash_names(&candidates))
                }
            })?;
            let trusted =
                *trust_flag || trust::is_trusted(ctx.config.user_dir.as_deref(), &ctx.root);
            let shell = ShRunner::new(&ctx.root);
            let files = FsReader::new(&ctx.root).context("cannot read the workspace")?;
            let expand_ctx = ExpandContext {
                shell: &shell,
                files: &files,
                workspace_trusted: trusted,
            };
            let text = shiro_commands::expand(&command, &Args::from_argv(args), &expand_ctx).await;
            let mut notices = turn_notes(&command);
            notices.extend(
                shiro_commands::expand_notes(&command, trusted)
                    .iter()
                    .map(ToString::to_string),
            );
            Ok(Report {
                stdout: with_newline(text),
                notices,
                ..Report::default()
            })
        }
        CommandsCommand::Check => {
            let diagnostics = registry.check();
            let mut out = String::new();
            for diagnostic in &diagnostics {
                writeln!(out, "{diagnostic}")?;
            }
            let summary = registry.summarize(&diagnostics);
            Ok(Report {
                stdout: out,
                notices: vec![summary.to_string()],
                exit: u8::from(summary.errors > 0),
                ..Report::default()
            })
        }
    }
}

/// `/a or /b or /c`.
pub fn slash_names(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("/{n}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// What a user command asks of the turn it starts, one line each: its tools and model.
pub fn turn_notes(command: &shiro_commands::Command) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(allowed) = &command.allowed_tools {
        notes.push(format!(
            "/{} limits its turn's tools to {}",
            command.name,
            describe_tools(allowed)
        ));
    }
    if let Some(model) = &command.model {
        notes.push(format!(
            "/{} runs its turn on the model {model}",
            command.name
        ));
    }
    notes
}

/// `read_file, grep, and bash for Bash(git status:*)`, or `none`.
pub fn describe_tools(allowed: &AllowedTools) -> String {
    let mut names: Vec<String> = allowed
        .names()
        .into_iter()
        .filter(|t| *t != shiro_commands::tool::BASH)
        .map(str::to_owned)
        .collect();
    names.extend(allowed.mcp.iter().map(|mcp| match &mcp.tool {
        Some(tool) => shiro_commands::mcp_tool_name(&mcp.server, tool),
        None => format!("every tool of MCP server {}", mcp.server),
    }));
    if allowed.allows(shiro_commands::tool::BASH) {
        let rules: Vec<String> = allowed
            .written
            .iter()
            .filter(|w| {
                let lower = w.to_ascii_lowercase();
                lower.starts_with("bash(")
            })
            .cloned()
            .collect();
        names.push(match (allowed.any_bash, rules.is_empty()) {
            (true, true) => "bash".to_owned(),
            (true, false) => format!("bash (without asking for {})", rules.join(", ")),
            (false, _) => format!("bash only for {}", rules.join(", ")),
        });
    }
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn list_text(registry: &Registry) -> String {
    let entries = registry.list();
    let width = entries.iter().map(|e| e.name.len()).max().unwrap_or(0) + 1;
    let sources: Vec<String> = entries.iter().map(MenuEntry::source).collect();
    let source_width = sources.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (entry, source) in entries.iter().zip(&sources) {
        let marker = skill_marker(entry)
            .map(|marker| format!("{marker} "))
            .unwrap_or_default();
        let mut line = format!(
            "/{:<width$} {source:<source_width$} {marker}{}",
            entry.name,
            entry.summary.as_deref().unwrap_or("")
        );
        if let Some(hint) = &entry.argument_hint {
            line.push(' ');
            line.push_str(hint);
        }
        let mut extra = Vec::new();
        if let Some(tools) = &entry.allowed_tools {
            extra.push(format!("tools: {}", tools.join(", ")));
        }
        if let Some(model) = &entry.model {
            extra.push(format!("model: {model}"));
        }
        if !extra.is_empty() {
            line.push_str(&format!(" ({})", extra.join("; ")));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for shadowed in registry.shadowed() {
        out.push_str(&format!("note: {shadowed}\n"));
    }
    if let Some(note) = untrusted_note(&entries) {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

/// How listings mark a skill (`[skill]`, with what holds it back or limits it); `None` for
/// a command.
pub fn skill_marker(entry: &MenuEntry) -> Option<String> {
    if entry.kind != Kind::Skill {
        return None;
    }
    let mut marks = vec!["skill"];
    if entry.untrusted {
        marks.push("untrusted");
    }
    if entry.model_only {
        marks.push("model only");
    }
    if entry.typed_only {
        marks.push("typed only");
    }
    Some(format!("[{}]", marks.join(", ")))
}

/// What a listing says when a workspace's skills wait for `/trust`; `None` when none do.
pub fn untrusted_note(entries: &[MenuEntry]) -> Option<String> {
    let held: Vec<String> = entries
        .iter()
        .filter(|entry| entry.untrusted)
        .map(|entry| format!("/{}", entry.name))
        .collect();
    if held.is_empty() {
        return None;
    }
    Some(format!(
        "note: this workspace is not trusted, so its skills ({}) are neither offered to the model nor run; type /trust in a session to trust it",
        held.join(" ")
    ))
}

fn list_json(registry: &Registry) -> Result<String> {
    let shadowed: Vec<String> = registry
        .shadowed()
        .iter()
        .map(ToString::to_string)
        .collect();
    let value = serde_json::json!({ "commands": registry.list(), "shadowed": shadowed });
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_s_tools_name_its_mcp_tools() {
        let allowed = AllowedTools {
            written: Vec::new(),
            tools: ["read_file".to_owned()].into(),
            any_bash: false,
            bash_rules: Vec::new(),
            mcp: vec![
                shiro_commands::McpTools {
                    server: "gh".into(),
                    tool: Some("list".into()),
                },
                shiro_commands::McpTools {
                    server: "db".into(),
                    tool: None,
                },
            ],
        };
        assert_eq!(
            describe_tools(&allowed),
            "read_file, gh__list, every tool of MCP server db"
        );
    }
}
