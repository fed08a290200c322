//! shiro as an MCP client: the servers `[mcp.servers]` names are started with the session,
//! and their tools are offered to the model beside shiro's own, as `server__tool`. The
//! decisions are in `docs/mcp.md`, "Other MCP servers in shiro".
//!
//! A server that cannot start, or stops, is reported and left out; the session goes on. A
//! server from the workspace's config (which comes with a clone) starts only in a workspace
//! the user trusts, since starting it runs its command.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use shiro_commands::mcp_tool_name;
use tokio::io::AsyncBufReadExt as _;

use shiro_providers::ToolSpec;

/// The file of a repository's shared MCP servers (read by [`crate::mcp_json`]).
pub const MCP_JSON_FILE: &str = ".mcp.json";

/// How long a server may take to start and list its tools, unless its config says.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call may take, unless the server's config says.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(300);
/// The most a result gives the model: the first half and the last half are kept.
pub const MAX_RESULT_BYTES: usize = 30_000;
/// The longest tool name the model APIs take.
const MAX_NAME: usize = 64;
/// How much of a server's stderr is kept, to say why it failed.
const STDERR_LINES: usize = 20;

/// One server, as the config describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name: the prefix of its tools' names.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// `false`: listed by `/mcp`, never started.
    pub enabled: bool,
    /// The config file that names it.
    pub source: PathBuf,
    /// Whether that file is the workspace's: it then starts only once the workspace is
    /// trusted.
    pub from_workspace: bool,
    /// How long it may take to start.
    pub startup_timeout: Duration,
    /// How long one call may take.
    pub tool_timeout: Duration,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A process spoken to over its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the environment it inherits.
        env: BTreeMap<String, String>,
    },
    /// A server at an address, over Streamable HTTP.
    Http {
        /// Its address.
        url: String,
        /// The environment variable whose value is sent as a bearer token.
        bearer_token_env: Option<String>,
    },
}

/// One of a server's tools, as the model is offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `server__tool`, made fit for the model APIs (letters, digits, `_` and `-`, at most
    /// 64 characters).
    pub name: String,
    /// The server's name for it.
    pub remote: String,
    /// What it does, as the server says.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub schema: Value,
}

type Client = RunningService<RoleClient, ClientConfig>;

/// Where a server stands.
enum State {
    /// `enabled = false`.
    Disabled,
    /// From the workspace's config, which is not trusted.
    Untrusted,
    /// Not started yet.
    Pending,
    /// Running, with its tools.
    Ready {
        client: Box<Client>,
        tools: Vec<McpTool>,
    },
    /// It could not start: why.
    Failed(String),
    /// It stopped after it started: why.
    Stopped(String),
}

/// The last lines a server wrote to stderr, and whether it closed stderr.
type Tail = Arc<Mutex<StderrTail>>;

#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
    /// Whether stderr is being read (a process's; an HTTP server has none).
    piped: bool,
    /// Whether it reached its end.
    closed: bool,
}

struct Server {
    spec: ServerSpec,
    state: State,
    stderr: Tail,
}

impl Server {
    /// Whether a start is due: it waits, or with `retry`, it failed or stopped.
    fn due(&self, retry: bool) -> bool {
        match self.state {
            State::Pending | State::Untrusted => true,
            State::Failed(_) | State::Stopped(_) => retry,
            State::Disabled | State::Ready { .. } => false,
        }
    }
}

/// The MCP servers of a session.
#[derive(Default)]
pub struct McpClients {
    servers: Vec<Server>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.servers.iter().map(|s| &s.spec.name))
            .finish()
    }
}

/// What a call gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Called {
    /// The text for the model.
    pub text: String,
    /// Whether the server said the call failed.
    pub is_error: bool,
}

impl McpClients {
    /// The servers of `specs`, none started yet.
    pub fn new(specs: Vec<ServerSpec>) -> McpClients {
        let servers = specs
            .into_iter()
            .map(|spec| Server {
                state: if spec.enabled {
                    State::Pending
                } else {
                    State::Disabled
                },
                spec,
                stderr: Tail::default(),
            })
            .collect();
        McpClients { servers }
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers [`McpClients::start`] would start, by name, and the longest of their
    /// startup timeouts: what a user waits for.
    pub fn due(&self, trusted: bool, retry: bool) -> (Vec<&str>, Duration) {
        let due = self
            .servers
            .iter()
            .filter(|server| server.due(retry) && (trusted || !server.spec.from_workspace));
        let longest = due
            .clone()
            .map(|server| server.spec.startup_timeout)
            .max()
            .unwrap_or_default();
        (
            due.map(|server| server.spec.name.as_str()).collect(),
            longest,
        )
    }

    /// Starts the enabled servers that wait (those of the workspace only when `trusted`),
    /// and with `retry` those that failed or stopped too. All start at once, in `root`;
    /// `env` looks up environment variables (bearer tokens). Returns what the user should be
    /// told: which of them failed and why, and which wait for `/trust`.
    pub async fn start(
        &mut self,
        root: &Path,
        trusted: bool,
        retry: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        let mut starting = tokio::task::JoinSet::new();
        let mut tasks = BTreeMap::new();
        let mut tried = Vec::new();
        for (index, server) in self.servers.iter_mut().enumerate() {
            if !server.due(retry) {
                continue;
            }
            tried.push(index);
            if server.spec.from_workspace && !trusted {
                server.state = State::Untrusted;
                continue;
            }
            let spec = server.spec.clone();
            let token = match &spec.transport {
                Transport::Http {
                    bearer_token_env: Some(var),
                    ..
                } => match env(var) {
                    Some(token) => Some(token),
                    None => {
                        server.state = State::Failed(format!(
                            "its bearer_token_env names {var}, which is not set"
                        ));
                        continue;
                    }
                },
                _ => None,
            };
            server.stderr = Tail::default();
            let (root, stderr) = (root.to_path_buf(), Arc::clone(&server.stderr));
            let task = starting.spawn(async move {
                tokio::time::timeout(
                    spec.startup_timeout,
                    connect(&spec, &root, token, Arc::clone(&stderr)),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "it did not answer within {} s (startup_timeout_secs)",
                        spec.startup_timeout.as_secs()
                    ))
                })
            });
            tasks.insert(task.id(), index);
        }
        while let Some(joined) = starting.join_next_with_id().await {
            let (id, started) = match joined {
                Ok((id, started)) => (id, started),
                Err(err) => (err.id(), Err(format!("starting it failed ({err})"))),
            };
            let Some(server) = tasks
                .get(&id)
                .and_then(|index| self.servers.get_mut(*index))
            else {
                continue;
            };
            server.state = match started {
                Ok((client, tools)) => State::Ready {
                    client: Box::new(client),
                    tools,
                },
                Err(why) => {
                    // A process that exited says so, however the handshake noticed it.
                    let exited = drained(&server.stderr).await;
                    let why = if exited {
                        "its process exited before the MCP handshake".to_owned()
                    } else {
                        why
                    };
                    State::Failed(with_stderr(why, &server.stderr))
                }
            };
        }
        self.notices(&tried)
    }

    /// The notices for the servers that wait for `/trust`, and for those of `tried` that
    /// failed.
    fn notices(&self, tried: &[usize]) -> Vec<String> {
        let mut notices = Vec::new();
        let mut waiting: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for server in &self.servers {
            if matches!(server.state, State::Untrusted) {
                let file = if server.spec.source.ends_with(MCP_JSON_FILE) {
                    MCP_JSON_FILE
                } else {
                    ".shiro/config.toml"
                };
                waiting.entry(file).or_default().push(&server.spec.name);
            }
        }
        for (file, names) in waiting {
            let (one, name) = (names.len() == 1, names.join(", "));
            notices.push(if one {
                format!(
                    "the workspace's {file}, which comes with the repository, names MCP server {name}: it starts once you /trust this workspace"
                )
            } else {
                format!(
                    "the workspace's {file}, which comes with the repository, names MCP servers {name}: they start once you /trust this workspace"
                )
            });
        }
        for server in tried.iter().filter_map(|index| self.servers.get(*index)) {
            if let State::Failed(why) = &server.state {
                notices.push(format!(
                    "MCP server {} did not start: {why}; the session goes on without it",
                    server.spec.name
                ));
            }
        }
        notices
    }

    /// Marks the servers whose connection closed as stopped, and returns a notice for each.
    pub fn check(&mut self) -> Vec<String> {
        let mut notices = Vec::new();
        for server in &mut self.servers {
            if let State::Ready { client, .. } = &server.state
                && client.is_closed()
            {
                let why = with_stderr("its connection closed".to_owned(), &server.stderr);
                notices.push(stopped_notice(&server.spec.name, &why));
                server.state = State::Stopped(why);
            }
        }
        notices
    }

    /// The tools of the running servers, as the model is offered them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools()
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.schema.clone(),
            })
            .collect()
    }

    /// The tools of the running servers.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.servers.iter().flat_map(|server| match &server.state {
            State::Ready { tools, .. } => tools.as_slice(),
            _ => &[],
        })
    }

    /// Whether a server comes from the workspace's config.
    pub fn from_workspace(&self) -> bool {
        self.servers.iter().any(|s| s.spec.from_workspace)
    }

    /// Why tool `name` cannot be called, for the model: its server is not running, or has
    /// no such tool; `None` when it can.
    pub fn unavailable(&self, name: &str) -> Option<String> {
        let Some(server) = self.servers.iter().find(|s| {
            shiro_commands::split_mcp_name(name).is_some_and(|(server, _)| server == s.spec.name)
        }) else {
            return Some(format!("no MCP server offers {name}; nothing was run"));
        };
        match &server.state {
            State::Ready { tools, .. } if tools.iter().any(|t| t.name == name) => None,
            State::Ready { .. } => Some(format!(
                "MCP server {} has no tool {name}; nothing was run",
                server.spec.name
            )),
            state => Some(format!(
                "MCP server {} is not running ({}), so {name} cannot be called; nothing was run",
                server.spec.name,
                state_text(state)
            )),
        }
    }

    /// Whether `name` is, or was, an MCP tool of this session: the name of a configured
    /// server, `__`, and more.
    pub fn owns(&self, name: &str) -> bool {
        shiro_commands::split_mcp_name(name)
            .is_some_and(|(server, _)| self.servers.iter().any(|s| s.spec.name == server))
    }

    /// Calls tool `name` (`server__tool`) with `args`. `Err` is the text for the model when
    /// the call could not be made or its server went away; a server that stops is marked
    /// so, and `notice` is told.
    pub async fn call(
        &mut self,
        name: &str,
        args: Value,
        notice: &mut dyn FnMut(String),
    ) -> Result<Called, String> {
        if let Some(why) = self.unavailable(name) {
            return Err(why);
        }
        let Some(server) = self.servers.iter_mut().find(|s| {
            shiro_commands::split_mcp_name(name).is_some_and(|(server, _)| server == s.spec.name)
        }) else {
            return Err(format!("no MCP server offers {name}; nothing was run"));
        };
        let State::Ready { client, tools } = &server.state else {
            return Err(format!(
                "MCP server {} is not running; nothing was run",
                server.spec.name
            ));
        };
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            return Err(format!(
                "MCP server {} has no tool {name}; nothing was run",
                server.spec.name
            ));
        };
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => return Err("the arguments must be a JSON object; nothing was run".to_owned()),
        };
        let mut request = CallToolRequestParams::new(tool.remote.clone());
        if let Some(arguments) = arguments {
            request = request.with_arguments(arguments);
        }
        let timeout = server.spec.tool_timeout;
        let result = tokio::time::timeout(timeout, client.call_tool(request)).await;
        match result {
            Ok(Ok(result)) => Ok(Called {
                is_error: result.is_error == Some(true),
                text: result_text(&result),
            }),
            Err(_) => Err(format!(
                "MCP server {} did not answer within {} s (tool_timeout_secs); what the call did is unknown",
                server.spec.name,
                timeout.as_secs()
            )),
            Ok(Err(err)) if client.is_closed() || is_transport(&err) => {
                let why = if drained(&server.stderr).await {
                    "its process exited during the call".to_owned()
                } else {
                    format!("its connection closed during the call ({err})")
                };
                let why = with_stderr(why, &server.stderr);
                let text = format!(
                    "MCP server {} stopped during this call, so its tools are gone for the rest of the session; what the call did is unknown ({why})",
                    server.spec.name
                );
                notice(stopped_notice(&server.spec.name, &why));
                server.state = State::Stopped(why);
                Err(text)
            }
            Ok(Err(err)) => Err(format!(
                "MCP server {} refused the call: {err}",
                server.spec.name
            )),
        }
    }

    /// `/mcp`: every server with its state, its tools' count and where it is configured.
    pub fn show(&self) -> String {
        if self.servers.is_empty() {
            return "no MCP servers; add them under [mcp.servers] in .shiro/config.toml or your user config (see docs/mcp.md)".to_owned();
        }
        let width = self
            .servers
            .iter()
            .map(|s| s.spec.name.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::from("MCP servers (/mcp NAME lists a server's tools):\n");
        for server in &self.servers {
            let _ = writeln!(
                out,
                "  {:<width$}  {}  ({})",
                server.spec.name,
                state_text(&server.state),
                server.spec.source.display()
            );
        }
        out.truncate(out.trim_end().len());
        out
    }

    /// `/mcp NAME`: one server: how it is reached, its state, its tools, and the last lines
    /// of its stderr.
    pub fn show_server(&self, name: &str) -> String {
        let Some(server) = self.servers.iter().find(|s| s.spec.name == name) else {
            let names: Vec<&str> = self.servers.iter().map(|s| s.spec.name.as_str()).collect();
            return if names.is_empty() {
                format!("no MCP server {name}: none are configured (see docs/mcp.md)")
            } else {
                format!("no MCP server {name}; the servers: {}", names.join(", "))
            };
        };
        let mut out = format!("{}: {}\n", server.spec.name, state_text(&server.state));
        let reached = match &server.spec.transport {
            Transport::Stdio { command, args, .. } => {
                let mut line = command.clone();
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                format!("command: {line}")
            }
            Transport::Http { url, .. } => format!("url: {url}"),
        };
        let _ = writeln!(out, "  {reached}");
        let _ = writeln!(out, "  configured in {}", server.spec.source.display());
        if let State::Ready { tools, .. } = &server.state {
            for tool in tools {
                let first = tool.description.lines().next().unwrap_or("");
                let _ = writeln!(out, "  {}  {}", tool.name, first);
            }
        }
        let tail = lines_of(&server.stderr);
        if !tail.is_empty() {
            out.push_str("  its last lines on stderr:\n");
            for line in tail {
                let _ = writeln!(out, "    {line}");
            }
        }
        out.truncate(out.trim_end().len());
        out
    }

    /// The names of the configured servers.
    pub fn names(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.spec.name.as_str()).collect()
    }
}

/// The notice for a server that stopped.
fn stopped_notice(name: &str, why: &str) -> String {
    format!("MCP server {name} stopped: {why}; its tools are gone, and the session goes on")
}

/// A server's state in a few words.
fn state_text(state: &State) -> String {
    match state {
        State::Disabled => "disabled (enabled = false)".to_owned(),
        State::Untrusted => {
            "waiting: it comes with the workspace, and starts only once you /trust it".to_owned()
        }
        State::Pending => "not started".to_owned(),
        State::Ready { tools, .. } => format!(
            "running, {} {}",
            tools.len(),
            if tools.len() == 1 { "tool" } else { "tools" }
        ),
        State::Failed(why) => format!("failed to start: {why}"),
        State::Stopped(why) => format!("stopped: {why}"),
    }
}

/// Whether a call failed because the connection did.
fn is_transport(err: &rmcp::ServiceError) -> bool {
    matches!(
        err,
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
    )
}

/// `why`, with the last line the server wrote to stderr, when it wrote one.
fn with_stderr(why: String, stderr: &Tail) -> String {
    match lines_of(stderr).last() {
        Some(last) => format!("{why}; its last line on stderr: {last}"),
        None => why,
    }
}

fn lines_of(stderr: &Tail) -> Vec<String> {
    stderr
        .lock()
        .map(|tail| tail.lines.iter().cloned().collect())
        .unwrap_or_default()
}

/// Waits a little for a server that went away to close its stderr, so that its last words
/// are read before they are reported; whether it closed it (its process exited, as far as
/// shiro can tell). An HTTP server has no stderr: `false` at once.
async fn drained(stderr: &Tail) -> bool {
    for _ in 0..20 {
        match stderr.lock() {
            Ok(tail) if tail.closed => return true,
            Ok(tail) if !tail.piped => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Starts one server and lists its tools.
async fn connect(
    spec: &ServerSpec,
    root: &Path,
    token: Option<String>,
    stderr: Tail,
) -> Result<(Client, Vec<McpTool>), String> {
    let client = match &spec.transport {
        Transport::Stdio { command, args, env } => {
            let mut process = tokio::process::Command::new(command);
            process
                .args(args)
                .envs(env)
                .current_dir(root)
                // Its own process group: Ctrl-C at shiro's prompt is not meant for it.
                .process_group(0)
                // It ends with the session, however the session ends (a well-behaved server
                // also ends when its stdin closes, should shiro itself be killed).
                .kill_on_drop(true);
            let (transport, errors) = TokioChildProcess::builder(process)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|err| format!("cannot run {command}: {err}"))?;
            if let Some(errors) = errors {
                if let Ok(mut tail) = stderr.lock() {
                    tail.piped = true;
                }
                tokio::spawn(keep_tail(errors, stderr));
            }
            client_config()
                .serve(transport)
                .await
                .map_err(|err| format!("no MCP session: {err}"))?
        }
        Transport::Http { url, .. } => crate::http::connect(url, token, client_config()).await?,
    };
    let listed = client
        .list_all_tools()
        .await
        .map_err(|err| format!("it did not list its tools: {err}"))?;
    let mut tools: Vec<McpTool> = Vec::new();
    for tool in listed {
        let name = tool_name(&spec.name, &tool.name);
        if tools.iter().any(|t| t.name == name) {
            continue;
        }
        tools.push(McpTool {
            name,
            remote: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or("").to_owned(),
            schema: Value::Object((*tool.input_schema).clone()),
        });
    }
    Ok((client, tools))
}

/// What shiro tells servers about itself.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("shiro", env!("CARGO_PKG_VERSION")),
    )
}

/// Keeps the last lines a server writes to stderr.
async fn keep_tail(errors: tokio::process::ChildStderr, tail: Tail) {
    let mut lines = tokio::io::BufReader::new(errors).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Ok(mut tail) = tail.lock() {
            if tail.lines.len() == STDERR_LINES {
                tail.lines.pop_front();
            }
            tail.lines.push_back(cut(&line, 500));
        }
    }
    if let Ok(mut tail) = tail.lock() {
        tail.closed = true;
    }
}

/// `server__tool` for tool `tool` of server `server`, fit for the model APIs: a character
/// they refuse becomes `_`, and a name too long is cut and given a hash of the whole, so
/// that two long names stay apart (and stay the same from one run to the next: rules and
/// saved sessions name them).
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = shiro_providers::api_name(&mcp_tool_name(server, tool));
    if clean.len() <= MAX_NAME {
        return clean;
    }
    // FNV-1a: small, and fixed for good.
    let hash = tool.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("_{:08x}", hash & 0xffff_ffff);
    format!("{}{suffix}", &clean[..MAX_NAME - suffix.len()])
}

/// The text a result gives the model: its text blocks, a line for each block of another
/// kind, or its structured content when it has no blocks; cut to [`MAX_RESULT_BYTES`].
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!(
                "[an image ({}), {} bytes in base64, not shown]",
                image.mime_type,
                image.data.len()
            ),
            ContentBlock::Audio(audio) => format!(
                "[audio ({}), {} bytes in base64, not shown]",
                audio.mime_type,
                audio.data.len()
            ),
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, .. } => {
                    format!("[resource {uri}: binary, not shown]")
                }
                _ => "[a resource of a kind shiro does not know, not shown]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => format!("[link to resource {}]", link.uri),
            _ => "[content of a kind shiro does not know, not shown]".to_owned(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if text.is_empty() {
        return if result.is_error == Some(true) {
            "(the tool failed and said nothing)".to_owned()
        } else {
            "(the tool returned nothing)".to_owned()
        };
    }
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let half = MAX_RESULT_BYTES / 2;
    let head = cut(&text, half);
    let mut start = text.len() - half;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!(
        "{head}\n[… {} bytes of the result left out …]\n{}",
        text.len() - head.len() - (text.len() - start),
        &text[start..]
    )
}

/// The first `max` bytes of `text`, at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_fit_for_the_model_apis_and_stay_apart() {
        assert_eq!(tool_name("gh", "create_issue"), "gh__create_issue");
        assert_eq!(tool_name("fs", "read.file/v2"), "fs__read_file_v2");
        let long_a = tool_name("server", &"a".repeat(80));
        let long_b = tool_name("server", &format!("{}b", "a".repeat(79)));
        assert_eq!(long_a.len(), MAX_NAME);
        assert_eq!(long_b.len(), MAX_NAME);
        assert_ne!(long_a, long_b);
        assert!(long_a.starts_with("server__aaa"));
        // The same from one run to the next.
        assert_eq!(long_a, tool_name("server", &"a".repeat(80)));
    }

    #[test]
    fn results_become_text_for_the_model() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("aGVsbG8=", "image/png"),
        ]);
        insta::assert_snapshot!(result_text(&result), @r"
        one
        [an image (image/png), 8 bytes in base64, not shown]
        ");
        result.content.clear();
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        assert_eq!(result_text(&result), r#"{"sum":3}"#);
        let empty = CallToolResult::error(Vec::new());
        assert_eq!(result_text(&empty), "(the tool failed and said nothing)");
        let big = CallToolResult::success(vec![ContentBlock::text("é".repeat(40_000))]);
        let text = result_text(&big);
        assert!(text.len() < MAX_RESULT_BYTES + 100, "{}", text.len());
        assert!(text.contains("bytes of the result left out"));
    }

    #[test]
    fn mcp_lists_servers_and_says_how_to_add_one() {
        let spec = |name: &str, enabled, from_workspace| ServerSpec {
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: "srv".to_owned(),
                args: vec!["--flag".to_owned()],
                env: BTreeMap::new(),
            },
            enabled,
            source: PathBuf::from(if from_workspace {
                "/ws/.shiro/config.toml"
            } else {
                "/home/u/.config/shiro/config.toml"
            }),
            from_workspace,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
        };
        assert!(McpClients::default().show().starts_with("no MCP servers"));
        let mut clients = McpClients::new(vec![
            spec("github", true, false),
            spec("off", false, false),
            spec("repo_tools", true, true),
        ]);
        clients.servers[0].state = State::Failed("cannot run srv: not found".to_owned());
        clients.servers[2].state = State::Untrusted;
        insta::assert_snapshot!(clients.show(), @r"
        MCP servers (/mcp NAME lists a server's tools):
          github      failed to start: cannot run srv: not found  (/home/u/.config/shiro/config.toml)
          off         disabled (enabled = false)  (/home/u/.config/shiro/config.toml)
          repo_tools  waiting: it comes with the workspace, and starts only once you /trust it  (/ws/.shiro/config.toml)
        ");
        insta::assert_snapshot!(clients.notices(&[0, 1, 2]).join("\n"), @r"
        the workspace's .shiro/config.toml, which comes with the repository, names MCP server repo_tools: it starts once you /trust this workspace
        MCP server github did not start: cannot run srv: not found; the session goes on without it
        ");
        insta::assert_snapshot!(clients.show_server("github"), @r"
        github: failed to start: cannot run srv: not found
          command: srv --flag
          configured in /home/u/.config/shiro/config.toml
        ");
        assert_eq!(
            clients.show_server("nope"),
            "no MCP server nope; the servers: github, off, repo_tools"
        );
        assert!(clients.owns("github__x") && !clients.owns("gitlab__x") && !clients.owns("bash"));
    }
}
