//! A small MCP server over stdio, for the end-to-end tests of shiro's MCP client
//! (`crates/shiro-cli/tests/mcp_client.rs`). Built on rmcp's server side, as a real server
//! would be.
//!
//! `mcp_fixture_server [--fail-start] [--slow-start MS]`
//!
//! Its tools: `echo` (returns its text), `add` (two integers), `write_note` (writes a file
//! in its working directory, which shiro cannot see or undo), `fail` (an error result) and
//! `exit` (the process exits in the middle of the call: a server that dies). With
//! `--fail-start` it writes a reason to stderr and exits before the handshake; with
//! `--slow-start MS` it waits that many milliseconds before it answers the handshake.
#![allow(clippy::print_stderr)]

use std::future::Future;
use std::process::ExitCode;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Fixture;

/// A schema of an object with these string or integer properties, all required.
fn schema(properties: &[(&str, &str)]) -> JsonObject {
    let props: serde_json::Map<String, Value> = properties
        .iter()
        .map(|(name, kind)| ((*name).to_owned(), json!({ "type": kind })))
        .collect();
    let required: Vec<&str> = properties.iter().map(|(name, _)| *name).collect();
    let Value::Object(map) = json!({
        "type": "object",
        "properties": props,
        "required": required,
    }) else {
        return JsonObject::new();
    };
    map
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Returns the text it is given.",
            schema(&[("text", "string")]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "add",
            "Adds two integers.",
            schema(&[("a", "integer"), ("b", "integer")]),
        ),
        Tool::new(
            "write_note",
            "Writes a file in the server's working directory.",
            schema(&[("path", "string"), ("text", "string")]),
        ),
        Tool::new("fail", "Always fails.", schema(&[])),
        Tool::new(
            "exit",
            "Stops the server in the middle of the call.",
            schema(&[]),
        ),
    ]
}

fn text_of(args: &JsonObject, key: &str) -> String {
    args.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn call(name: &str, args: &JsonObject) -> CallToolResult {
    match name {
        "echo" => CallToolResult::success(vec![ContentBlock::text(format!(
            "echo: {}",
            text_of(args, "text")
        ))]),
        "add" => {
            let int = |key: &str| args.get(key).and_then(Value::as_i64).unwrap_or(0);
            CallToolResult::success(vec![ContentBlock::text((int("a") + int("b")).to_string())])
        }
        "write_note" => {
            let path = text_of(args, "path");
            match std::fs::write(&path, text_of(args, "text")) {
                Ok(()) => {
                    CallToolResult::success(vec![ContentBlock::text(format!("wrote {path}"))])
                }
                Err(err) => CallToolResult::error(vec![ContentBlock::text(err.to_string())]),
            }
        }
        "exit" => {
            eprintln!("fixture: exiting as asked");
            std::process::exit(7);
        }
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "{name} failed on purpose"
        ))]),
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("fixture", "1.0.0"))
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        std::future::ready(Ok(ListToolsResult::with_all_items(tools())))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        let args = request.arguments.unwrap_or_default();
        std::future::ready(Ok(call(&request.name, &args).into()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    if std::env::args().any(|arg| arg == "--fail-start") {
        eprintln!("fixture: cannot start: FIXTURE_TOKEN is not set");
        return ExitCode::from(3);
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(ms) = args
        .iter()
        .position(|arg| arg == "--slow-start")
        .and_then(|at| args.get(at + 1))
        .and_then(|ms| ms.parse().ok())
    {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let service = match Fixture.serve(rmcp::transport::stdio()).await {
        Ok(service) => service,
        Err(err) => {
            eprintln!("fixture: no session: {err}");
            return ExitCode::FAILURE;
        }
    };
    let _ = service.waiting().await;
    ExitCode::SUCCESS
}
