//! Placeholder until the Streamable HTTP transport lands.

use rmcp::model::ClientConfig;
use rmcp::service::{RoleClient, RunningService};

/// Connects to the MCP server at `url` over Streamable HTTP.
pub async fn connect(
    url: &str,
    _token: Option<String>,
    _config: ClientConfig,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    Err(format!("{url}: HTTP servers are not supported yet"))
}
