//! The MCP server: shiro's tools, described by the very schemas the agent sends models, and
//! the tools that only a client outside shiro needs (`begin_turn`, `end_turn`, `undo`,
//! `redo`, `log`). Written by hand over `rmcp`'s `ServerHandler` rather than with its tool
//! macros, because shiro's tools are values (`Box<dyn Tool>`) that carry their own schemas.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use rmcp::ErrorData;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use shiro_tools::capture::Background;
use shiro_tools::schema_of;

use super::annotations::annotations;
use super::cancel::{CANCELLED_WHILE_WAITING, Cancelled};
use super::order::{Arrivals, Ticket};
use super::turns::{BeginTurnArgs, NoArgs, RestoreToolArgs, Turns, UndoToolArgs};
use super::{Outcome, Way, Workspace};

/// What the server tells a client about itself when a session starts.
const INSTRUCTIONS: &str = "shiro's file tools: every change they make can be undone exactly, with the undo tool here or `shiro undo` in a terminal. Each call that changes files is its own turn; to make several calls one turn (one undo), call begin_turn first and end_turn after. Paths are relative to the workspace root.";

const BEGIN_TURN: &str = "Start a group: the calls that change files from now on are recorded as one turn, which one undo reverts, until end_turn, the next begin_turn, undo, redo or log, or a pause without calls. Give a short summary of the step.";
const END_TURN: &str = "Close the group that begin_turn opened, recording its changes as one turn.";
const UNDO: &str = "Undo the newest turn in this workspace (a call, a group, or a turn made in a terminal): restore every file it changed. With `to` (a turn's number from log): rewind to before that turn, undoing it and every later turn of its session as one restore; another session's turns stay, and one that touched the same files refuses the rewind. With `turn`: revert that one turn alone, as a new turn, keeping every later change (text files changed since are merged; any conflict refuses it all). Refused, changing nothing, if a file changed since the turn, unless force is set; dry_run shows the diff and changes nothing.";
const REDO: &str = "Redo the turn undone last (possible until a new turn is recorded). Refused, changing nothing, if a file changed since the undo, unless force is set; dry_run shows the diff and changes nothing.";
const LOG: &str = "List the turns that can be undone, newest first, with what each changed and whether the next undo would be refused; and the turns that can be redone.";

/// The server of one `shiro mcp` process; over HTTP, one per client's session (see
/// [`ShiroServer::for_session`]), all sharing the one [`Turns`] and the one order of calls.
#[derive(Debug)]
pub struct ShiroServer<W> {
    turns: Arc<Turns<W>>,
    /// The calls in the order received, which they run in (see [`super::order`]).
    arrivals: Arc<Arrivals>,
    tools: Arc<Vec<Tool>>,
    /// The background commands of this handler's HTTP session: made at its first call that
    /// needs them, and killed when the session ends (the client closes it, or it idles out)
    /// and its handler is dropped. Calls outside a session (stdio, or a stateless request)
    /// use the workspace's own registry, whose commands end with the server.
    session_background: OnceLock<Option<Arc<Background>>>,
}

impl<W: Workspace> ShiroServer<W> {
    /// A server over `turns`, offering shiro's tools (as the agent has them) and its own.
    pub fn new(turns: Arc<Turns<W>>) -> Self {
        let tools = turns.tools();
        let arrivals = Arc::new(Arrivals::new(&tools));
        let listing = |name: &'static str, description: &'static str, schema| {
            Tool::new(name, description, object(schema)).with_annotations(annotations(name))
        };
        let mut listed: Vec<Tool> = tools
            .iter()
            .map(|tool| listing(tool.name(), tool.description(), tool.schema()))
            .collect();
        listed.push(listing(
            "begin_turn",
            BEGIN_TURN,
            schema_of::<BeginTurnArgs>(),
        ));
        listed.push(listing("end_turn", END_TURN, schema_of::<NoArgs>()));
        listed.push(listing("undo", UNDO, schema_of::<UndoToolArgs>()));
        listed.push(listing("redo", REDO, schema_of::<RestoreToolArgs>()));
        listed.push(listing("log", LOG, schema_of::<NoArgs>()));
        Self {
            turns,
            arrivals,
            tools: Arc::new(listed),
            session_background: OnceLock::new(),
        }
    }

    /// A handler for a new client's session (or a request that has none): the same turns
    /// and tools, and no background commands of its own yet.
    pub fn for_session(&self) -> Self {
        Self {
            turns: Arc::clone(&self.turns),
            arrivals: Arc::clone(&self.arrivals),
            tools: Arc::clone(&self.tools),
            session_background: OnceLock::new(),
        }
    }

    /// The order of the calls, which a transport gives each call its place in as it
    /// receives it (see [`super::order`]).
    pub(super) fn arrivals(&self) -> &Arc<Arrivals> {
        &self.arrivals
    }

    /// The tools as the client lists them.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The background commands a call uses: its session's, made at the first call; `None`
    /// (the workspace's own) outside a session.
    fn background(&self, in_session: bool) -> Option<&Arc<Background>> {
        if !in_session {
            return None;
        }
        self.session_background
            .get_or_init(|| self.turns.session_background().map(Arc::new))
            .as_ref()
    }

    /// Runs one call, which `stop` stops (see [`Turns::tool_stopped_by`]) and which starts
    /// nothing once `cancelled` is set; every failure is a result the client's model reads.
    /// `in_session`: the call came in a client's HTTP session, whose background commands are
    /// its own.
    async fn run(
        &self,
        client: &str,
        name: &str,
        args: serde_json::Value,
        stop: tokio::sync::watch::Receiver<u64>,
        cancelled: Cancelled,
        in_session: bool,
    ) -> Outcome {
        match name {
            "begin_turn" => self.turns.begin(client, args).await,
            "end_turn" => self.turns.end(args).await,
            "undo" => self.turns.restore(Way::Undo, args).await,
            "redo" => self.turns.restore(Way::Redo, args).await,
            "log" => self.turns.log(args).await,
            _ => match self
                .turns
                .tool_stopped_by(name, stop, self.background(in_session))
            {
                Some(tool) => self.turns.call(client, tool, args, cancelled).await,
                None => {
                    let names: Vec<&str> =
                        self.tools.iter().map(|tool| tool.name.as_ref()).collect();
                    let text = format!(
                        "unknown tool {name:?}; the tools are: {}; nothing was changed",
                        names.join(", ")
                    );
                    Outcome::failure(text)
                }
            },
        }
    }
}

/// The place in the order the transport gave the call as it received it: in the request's
/// extensions over stdio, in its HTTP request's over HTTP.
fn take_ticket(context: &mut RequestContext<RoleServer>) -> Option<Ticket> {
    if let Some(ticket) = context.extensions.remove::<Ticket>() {
        return Some(ticket);
    }
    context
        .extensions
        .get_mut::<hyper::http::request::Parts>()
        .and_then(|parts| parts.extensions.remove::<Ticket>())
}

/// Whether a request came in a client's HTTP session (it names one with `Mcp-Session-Id`).
fn in_session(context: &RequestContext<RoleServer>) -> bool {
    context
        .extensions
        .get::<hyper::http::request::Parts>()
        .is_some_and(|parts| parts.headers.contains_key(SESSION_HEADER))
}

/// The header an HTTP client's requests name their session in.
const SESSION_HEADER: &str = "mcp-session-id";

/// A schema as the JSON object MCP wants (a schema that is not one is replaced by the
/// schema of an object with any properties).
fn object(schema: serde_json::Value) -> JsonObject {
    match schema {
        serde_json::Value::Object(map) => map,
        _ => {
            let mut map = JsonObject::new();
            map.insert("type".to_owned(), serde_json::json!("object"));
            map
        }
    }
}

/// The protocol's result of an outcome.
fn result(outcome: Outcome) -> CallToolResult {
    let mut result = if outcome.is_error {
        CallToolResult::error(vec![ContentBlock::text(outcome.text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(outcome.text)])
    };
    result.structured_content = Some(outcome.structured);
    result
}

impl<W: Workspace> ServerHandler for ShiroServer<W> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shiro", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        std::future::ready(Ok(ListToolsResult::with_all_items(self.tools.to_vec())))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        // A call that came with no place in the order (a transport that gives none) takes
        // its place now.
        let claim = take_ticket(&mut context)
            .unwrap_or_else(|| self.arrivals.arrived(&request.name))
            .claim();
        let client = context
            .peer
            .peer_info()
            .map_or_else(|| "client".to_owned(), |info| info.client_info.name.clone());
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        // The client's cancellation stops a running bash command, as Ctrl-C does in a
        // terminal; the call still finishes and its turn is recorded. A call cancelled before
        // it started anything starts nothing (see `super::cancel`).
        let in_session = in_session(&context);
        let token = context.ct;
        let before_start = token.clone();
        let cancelled = {
            let token = token.clone();
            Cancelled::by(move || token.is_cancelled())
        };
        let began = cancelled.began();
        let (stop, forward) = self
            .turns
            .call_stop(began, async move { token.cancelled().await });
        async move {
            // The calls received before this one run first (see `super::order`). A call
            // cancelled meanwhile (or whose client went away) never starts.
            tokio::select! {
                biased;
                () = before_start.cancelled() => {
                    forward.abort();
                    return Ok(result(Outcome::failure(CANCELLED_WHILE_WAITING.to_owned())).into());
                }
                () = claim.turn() => {}
            }
            let outcome = self
                .run(&client, &request.name, args, stop, cancelled, in_session)
                .await;
            // The calls received after this one may start.
            drop(claim);
            forward.abort();
            Ok(result(outcome).into())
        }
    }

    /// rmcp hands a request here when its method is not one it knows, and also when it is
    /// one it knows whose params do not parse: the second is invalid params (-32602), with
    /// what the params must be, not an unknown method.
    fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CustomResult, ErrorData>> + MaybeSendFuture + '_ {
        std::future::ready(Err(custom_request_error(&request.method)))
    }
}

/// The error for a request rmcp could not take as one of the methods it knows.
fn custom_request_error(method: &str) -> ErrorData {
    match method {
        "tools/call" => ErrorData::invalid_params(
            "invalid params for tools/call: they must be an object with \"name\", the tool's \
             name (a string), and optionally \"arguments\", an object of the tool's arguments",
            None,
        ),
        "initialize"
        | "ping"
        | "tools/list"
        | "resources/list"
        | "resources/read"
        | "resources/templates/list"
        | "resources/subscribe"
        | "resources/unsubscribe"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete"
        | "logging/setLevel" => {
            ErrorData::invalid_params(format!("invalid params for {method}"), None)
        }
        _ => ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("unknown method {method}; shiro serves tools: tools/list, tools/call"),
            None,
        ),
    }
}
