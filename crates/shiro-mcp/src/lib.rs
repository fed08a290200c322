//! MCP both ways, on the official SDK (`rmcp`). The decisions are in `docs/mcp.md`.
//!
//! The client: the servers a config or a workspace's `.mcp.json` names, started or reached
//! by URL, whose tools the agent offers its model beside shiro's own, as `server__tool`.
//! - [`client`]: the servers of a session, their tools, and calls to them;
//! - [`http`]: the way to a server reached by URL (Streamable HTTP);
//! - [`mcp_json`]: the servers of a workspace's `.mcp.json`.
//!
//! The server (the `server` feature, which the binary turns on and the agent does not):
//! [`server`] serves shiro's undoable tools to other clients, over a
//! [`server::Workspace`] the binary implements.
//!
//! Invariant: nothing here prints, reads the environment or exits. A server's variables are
//! looked up through the function the caller passes; what went wrong comes back as notices.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

pub mod client;
pub mod http;
pub mod mcp_json;
#[cfg(feature = "server")]
pub mod server;

/// Why `name` cannot name an MCP server: its tools are called `name__tool`, and the model
/// APIs take only letters, digits, `_` and `-` in a tool's name.
pub fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err("a server's name has 1 to 32 characters".to_owned());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err("a server's name may hold only letters, digits, `_` and `-`".to_owned());
    }
    if name.contains("__") || name.starts_with('_') || name.ends_with('_') {
        return Err(
            "a server's name may not hold `__` nor start or end with `_`: its tools are named server__tool".to_owned(),
        );
    }
    if name == "mcp" {
        return Err("`mcp` cannot name a server: rules write mcp__server".to_owned());
    }
    Ok(())
}
