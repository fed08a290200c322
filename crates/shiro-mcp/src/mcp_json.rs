//! `.mcp.json`: the MCP servers a repository shares with Claude Code (its "project scope",
//! also read by other agents), taken as the workspace's own servers, so that they start only
//! once the workspace is trusted. The decisions are in `docs/mcp.md`.
//!
//! Its entries are `{"mcpServers": {NAME: {"type", "command", "args", "env", "url",
//! "headers"}}}`. `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env`
//! and `url`, as Claude Code expands them. An entry shiro cannot use (an SSE server, a header
//! other than a bearer token from a variable, a variable that is not set) is left out with a
//! note that says why; a file that is not JSON is left out whole, with a note: another
//! tool's file never stops shiro, nor `shiro undo`. shiro's own server (`shiro mcp`, which
//! the setup for Claude Code puts in this very file) is left out too.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use serde::Deserialize;

use crate::client::{DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, ServerSpec, Transport};

/// The file.
pub use crate::client::MCP_JSON_FILE as FILE;
/// The most of it that is read: a config, not a data file.
const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Deserialize)]
struct McpJson {
    #[serde(rename = "mcpServers", default)]
    servers: BTreeMap<String, Entry>,
}

/// One server. Fields other tools add (`disabled`, `cwd`, `timeout`, …) are ignored.
#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The servers of `root/.mcp.json`, and what the user should be told of the entries left
/// out. `env` looks up the variables the file names. No file: nothing, and no note.
pub fn read(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> (Vec<ServerSpec>, Vec<String>) {
    let path = root.join(FILE);
    let text = match read_text(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return (Vec::new(), Vec::new()),
        Err(why) => return (Vec::new(), vec![format!("{FILE} is left out: {why}")]),
    };
    let file: McpJson = match serde_json::from_str(&text) {
        Ok(file) => file,
        Err(err) => {
            return (
                Vec::new(),
                vec![format!(
                    "{FILE} is left out: it is not the JSON of MCP servers ({err})"
                )],
            );
        }
    };
    let mut specs = Vec::new();
    let mut notes = Vec::new();
    for (name, entry) in &file.servers {
        match entry.spec(name, &path, env) {
            Ok(spec) => specs.push(spec),
            Err(why) => notes.push(format!("{FILE}: MCP server {name} is left out: {why}")),
        }
    }
    (specs, notes)
}

/// The servers of the config files and of `.mcp.json`, by name: the workspace's
/// `.shiro/config.toml` beats `.mcp.json`, which beats the user's config.
pub fn merge(configured: Vec<ServerSpec>, imported: Vec<ServerSpec>) -> Vec<ServerSpec> {
    let (workspace, user): (Vec<_>, Vec<_>) =
        configured.into_iter().partition(|spec| spec.from_workspace);
    let mut by_name = BTreeMap::new();
    for spec in user.into_iter().chain(imported).chain(workspace) {
        by_name.insert(spec.name.clone(), spec);
    }
    by_name.into_values().collect()
}

/// The file's text; `None` when there is none.
fn read_text(path: &Path) -> Result<Option<String>, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read it ({err})")),
    };
    let mut text = String::new();
    file.take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read it ({err})"))?;
    if text.len() as u64 > MAX_BYTES {
        return Err(format!("it is larger than {} KiB", MAX_BYTES >> 10));
    }
    Ok(Some(text))
}

impl Entry {
    fn spec(
        &self,
        name: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerSpec, String> {
        crate::check_server_name(name)?;
        let expand = |field: &str, text: &str| {
            expand(text, env)
                .map_err(|var| format!("${{{var}}} in its {field} is not set, and has no default"))
        };
        let transport = match (self.kind.as_deref(), &self.command, &self.url) {
            (Some("sse"), _, _) => {
                return Err("it is an SSE server; shiro speaks Streamable HTTP (type \"http\"), which replaced SSE".to_owned());
            }
            (None | Some("stdio"), Some(command), None) => {
                if !self.headers.is_empty() {
                    return Err("headers are for a server reached by url".to_owned());
                }
                let command = expand("command", command)?;
                if command.trim().is_empty() {
                    return Err("its command is empty".to_owned());
                }
                Transport::Stdio {
                    command,
                    args: (self.args.iter())
                        .map(|arg| expand("args", arg))
                        .collect::<Result<_, _>>()?,
                    env: (self.env.iter())
                        .map(|(key, value)| Ok((key.clone(), expand("env", value)?)))
                        .collect::<Result<_, String>>()?,
                }
            }
            (None | Some("http" | "streamable-http"), None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err("args and env are for a server started by command".to_owned());
                }
                let url = expand("url", url)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "its url must start with http:// or https://, not {url:?}"
                    ));
                }
                Transport::Http {
                    url,
                    bearer_token_env: self.bearer_token_env()?,
                }
            }
            (None | Some("stdio" | "http" | "streamable-http"), _, _) => {
                return Err("it needs a command (a server to start) or a url (a server to reach), and not both".to_owned());
            }
            (Some(other), _, _) => {
                return Err(format!(
                    "its type {other:?} is not one shiro knows (stdio, http)"
                ));
            }
        };
        if let Transport::Stdio { command, args, .. } = &transport
            && Path::new(command).file_name() == Some("shiro".as_ref())
            && args.iter().any(|arg| arg == "mcp")
        {
            // The setup docs/mcp.md gives Claude Code: shiro would be its own client.
            return Err(
                "it is shiro's own server (shiro mcp), whose tools the agent has already"
                    .to_owned(),
            );
        }
        Ok(ServerSpec {
            name: name.to_owned(),
            transport,
            enabled: true,
            source: path.to_path_buf(),
            from_workspace: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
        })
    }

    /// The variable of `"Authorization": "Bearer ${VAR}"`, the one header shiro sends; the
    /// token itself is read when the server starts, and never kept in the spec.
    fn bearer_token_env(&self) -> Result<Option<String>, String> {
        let mut var = None;
        for (header, value) in &self.headers {
            let from_variable = header
                .eq_ignore_ascii_case("authorization")
                .then(|| value.trim().strip_prefix("Bearer ${"))
                .flatten()
                .and_then(|rest| rest.strip_suffix('}'))
                .filter(|name| is_variable_name(name));
            match from_variable {
                Some(name) => var = Some(name.to_owned()),
                None => {
                    return Err(format!(
                        "its header {header} cannot be sent: shiro sends only \"Authorization\": \"Bearer ${{VAR}}\", a bearer token from a variable"
                    ));
                }
            }
        }
        Ok(var)
    }
}

/// `text` with each `${VAR}` replaced by the variable's value and each `${VAR:-default}` by
/// the value, or `default` when the variable is unset or empty; anything else, `$VAR`
/// included, is kept as written. The error is the name of an unset variable with no default.
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_variable_name(name) {
            out.push_str(&rest[at..at + 3 + end]);
        } else {
            match (env(name), default) {
                (Some(value), Some(default)) if value.is_empty() => out.push_str(default),
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => return Err(name.to_owned()),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_as_claude_code_expands_them() {
        let cases = [
            ("${HOME}/bin", Ok("/home/u/bin")),
            ("${UNSET:-fallback}", Ok("fallback")),
            ("${HOME:-fallback}", Ok("/home/u")),
            ("${EMPTY:-fallback}", Ok("fallback")),
            ("[${EMPTY}]", Ok("[]")),
            ("$HOME stays", Ok("$HOME stays")),
            ("${not a name} stays", Ok("${not a name} stays")),
            ("${HOME", Ok("${HOME")),
            ("a${HOME}b${UNSET:-}c", Ok("a/home/ubc")),
            ("${UNSET}", Err("UNSET")),
        ];
        for (text, want) in cases {
            let want = want.map(str::to_owned).map_err(str::to_owned);
            assert_eq!(expand(text, &env), want, "{text}");
        }
    }

    fn entries(json: &str) -> Vec<Result<ServerSpec, String>> {
        let file: McpJson = serde_json::from_str(json).unwrap();
        file.servers
            .iter()
            .map(|(name, entry)| entry.spec(name, Path::new("/w/.mcp.json"), &env))
            .collect()
    }

    #[test]
    fn entries_map_to_servers_or_say_why_they_cannot() {
        let specs = entries(
            r#"{"mcpServers": {
                "a-stdio": {"command": "${HOME}/bin/srv", "args": ["--dir", "${DIR:-.}"], "env": {"K": "v"}},
                "b-http": {"type": "http", "url": "https://h.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "c-sse": {"type": "sse", "url": "https://h.example/sse"},
                "d-header": {"type": "http", "url": "https://h.example/mcp", "headers": {"X-Api-Key": "${KEY}"}},
                "e-unset": {"command": "srv", "args": ["${MISSING}"]},
                "f-both": {"command": "srv", "url": "https://h.example/mcp"},
                "g-kind": {"type": "websocket", "url": "wss://h.example"},
                "h__bad": {"command": "srv"},
                "i-url": {"url": "ftp://h.example"},
                "j-self": {"type": "stdio", "command": "shiro", "args": ["mcp"], "env": {}}
            }}"#,
        );
        let shown: Vec<String> = specs
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"])
            .map(|(spec, entry)| match spec {
                Ok(spec) => format!("{entry}: {:?}", spec.transport),
                Err(why) => format!("{entry}: left out: {why}"),
            })
            .collect();
        insta::assert_snapshot!(shown.join("\n"));
        let Ok(first) = &specs[0] else {
            panic!("{specs:?}")
        };
        assert!(first.from_workspace && first.enabled);
        assert_eq!(first.source, Path::new("/w/.mcp.json"));
    }

    fn spec(name: &str, from_workspace: bool, source: &str) -> ServerSpec {
        ServerSpec {
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: "srv".to_owned(),
                args: Vec::new(),
                env: BTreeMap::new(),
            },
            enabled: true,
            source: source.into(),
            from_workspace,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
        }
    }

    #[test]
    fn the_workspace_config_beats_mcp_json_which_beats_the_user_config() {
        let merged = merge(
            vec![
                spec("both", false, "user"),
                spec("all", false, "user"),
                spec("all", true, "workspace"),
                spec("mine", false, "user"),
            ],
            vec![spec("both", true, "json"), spec("all", true, "json")],
        );
        let shown: Vec<(&str, &str)> = merged
            .iter()
            .map(|s| (s.name.as_str(), s.source.to_str().unwrap_or_default()))
            .collect();
        assert_eq!(
            shown,
            [("all", "workspace"), ("both", "json"), ("mine", "user")]
        );
    }

    #[test]
    fn a_missing_file_is_nothing_and_a_broken_one_a_note() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), &env), (Vec::new(), Vec::new()));
        std::fs::write(dir.path().join(FILE), "{\"mcpServers\": {").unwrap();
        let (specs, notes) = read(dir.path(), &env);
        assert!(specs.is_empty());
        insta::assert_snapshot!(notes.join("\n"));
        std::fs::write(dir.path().join(FILE), vec![b' '; (MAX_BYTES + 1) as usize]).unwrap();
        assert_eq!(
            read(dir.path(), &env).1,
            [".mcp.json is left out: it is larger than 1024 KiB"]
        );
    }
}
