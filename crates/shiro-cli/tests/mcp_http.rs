//! The MCP client's HTTP transport against a real rmcp Streamable HTTP server, served in this
//! process on 127.0.0.1 with one tool, `echo`: the handshake, listing and calling the tool,
//! the bearer token as the server receives it, and the errors a person reads when the server
//! refuses the token or nothing listens.
#![allow(clippy::unwrap_used)]

use crate::agent_common;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::{Service as _, service_fn};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{MaybeSendFuture, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use shiro_mcp::http::connect;

/// A server with one tool, `echo`, which answers with its `text` argument.
#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("echo-server", "1.0.0"))
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + MaybeSendFuture + '_ {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        });
        let serde_json::Value::Object(schema) = schema else {
            unreachable!("the schema is an object")
        };
        let echo = Tool::new("echo", "Answers with its text.", Arc::new(schema));
        std::future::ready(Ok(ListToolsResult::with_all_items(vec![echo])))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + MaybeSendFuture + '_ {
        let text = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("text"))
            .and_then(|text| text.as_str())
            .unwrap_or_default()
            .to_owned();
        let result = CallToolResult::success(vec![ContentBlock::text(text)]);
        std::future::ready(Ok(result.into()))
    }
}

/// How the test server treats the `Authorization` header.
#[derive(Clone, Copy)]
enum Guard {
    /// Every request is served.
    Open,
    /// A request without `Bearer <token>` gets a 401, with a `WWW-Authenticate` challenge
    /// when `challenge` is set (as the MCP authorization spec asks), without one otherwise.
    Token {
        token: &'static str,
        challenge: bool,
    },
    /// Every request gets a 418 whose body repeats the `Authorization` header it was sent,
    /// as a careless server's error page might.
    Teapot,
}

/// A running test server: its URL and the `Authorization` header of every request it got.
struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

/// Serves `Echo` over Streamable HTTP on a free port of 127.0.0.1, until the test ends.
async fn serve(guard: Guard) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mcp = TowerToHyperService::new(StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    ));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let mcp = mcp.clone();
            let log = Arc::clone(&log);
            let service = service_fn(move |request: Request<Incoming>| {
                let authorization = request
                    .headers()
                    .get(hyper::header::AUTHORIZATION)
                    .map(|value| value.to_str().unwrap().to_owned());
                log.lock().unwrap().push(authorization.clone());
                let mcp = mcp.clone();
                async move {
                    match guard {
                        Guard::Token { token, challenge }
                            if authorization.as_deref() != Some(&format!("Bearer {token}")) =>
                        {
                            return Ok(plain(
                                StatusCode::UNAUTHORIZED,
                                challenge.then_some(r#"Bearer realm="test""#),
                                "go away".to_owned(),
                            ));
                        }
                        Guard::Teapot => {
                            let body = format!("you sent {}", authorization.unwrap_or_default());
                            return Ok(plain(StatusCode::IM_A_TEAPOT, None, body));
                        }
                        _ => {}
                    }
                    mcp.call(request).await
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Server { url, seen }
}

/// A plain-text answer, with a `WWW-Authenticate` challenge when one is given.
fn plain(
    status: StatusCode,
    challenge: Option<&str>,
    body: String,
) -> Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>> {
    let mut response = Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain");
    if let Some(challenge) = challenge {
        response = response.header(hyper::header::WWW_AUTHENTICATE, challenge);
    }
    response
        .body(http_body_util::BodyExt::boxed(Full::new(Bytes::from(body))))
        .unwrap()
}

/// The client's side of the handshake.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mcp-http-test", "1.0.0"),
    )
}

#[tokio::test]
async fn the_handshake_lists_and_calls_the_tool_with_the_token_sent() {
    let server = serve(Guard::Token {
        token: "s3cret-token",
        challenge: true,
    })
    .await;
    let client = connect(&server.url, Some("s3cret-token".into()), client_config())
        .await
        .unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "echo-server");

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["echo"]);

    let serde_json::Value::Object(args) = serde_json::json!({"text": "hello over HTTP"}) else {
        unreachable!("the arguments are an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        .await
        .unwrap();
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|content| content.as_text().map(|text| text.text.as_str()))
        .collect();
    assert_eq!(texts, ["hello over HTTP"]);
    assert_ne!(result.is_error, Some(true));
    client.cancel().await.unwrap();

    let seen = server.seen.lock().unwrap().clone();
    // The initialize POST, the initialized notification, the list and the call at least.
    assert!(seen.len() >= 4, "{seen:?}");
    for authorization in &seen {
        assert_eq!(authorization.as_deref(), Some("Bearer s3cret-token"));
    }
}

#[tokio::test]
async fn without_a_token_no_authorization_is_sent() {
    let server = serve(Guard::Open).await;
    let client = connect(&server.url, None, client_config()).await.unwrap();
    assert_eq!(client.list_all_tools().await.unwrap().len(), 1);
    client.cancel().await.unwrap();
    let seen = server.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(Option::is_none), "{seen:?}");
}

#[tokio::test]
async fn a_refused_token_is_a_clear_error_without_the_token() {
    for challenge in [true, false] {
        let server = serve(Guard::Token {
            token: "right-secret",
            challenge,
        })
        .await;
        let error = connect(&server.url, Some("wrong-secret".into()), client_config())
            .await
            .unwrap_err();
        assert_eq!(
            error, "the server refused the token (401)",
            "challenge: {challenge}"
        );
        let error = connect(&server.url, None, client_config())
            .await
            .unwrap_err();
        assert_eq!(
            error,
            "the server asks for a token (401); name an environment variable that holds it in \
             `bearer_token_env`",
            "challenge: {challenge}"
        );
    }
}

#[tokio::test]
async fn a_token_echoed_by_the_server_never_reaches_the_message() {
    let server = serve(Guard::Teapot).await;
    let error = connect(&server.url, Some("s3cret-token".into()), client_config())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        format!(
            "{} answered HTTP 418 I'm a teapot: you sent Bearer <token>",
            server.url
        )
    );
}

#[tokio::test]
async fn nothing_listening_is_a_clear_error_at_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{address}/mcp");
    let started = Instant::now();
    let error = connect(&url, Some("s3cret".into()), client_config())
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(error, format!("cannot reach {url}: connection refused"));
}

#[tokio::test]
async fn unusable_settings_are_refused_before_connecting() {
    let check = async |url: &str, token: Option<&str>| {
        connect(url, token.map(str::to_owned), client_config())
            .await
            .unwrap_err()
    };
    assert_eq!(
        check("ftp://127.0.0.1/mcp", None).await,
        "`ftp://127.0.0.1/mcp` is not an http:// or https:// URL, which an MCP server reached by URL needs"
    );
    assert_eq!(
        check("not a url", None).await,
        "`not a url` is not a URL (relative URL without a base)"
    );
    assert_eq!(
        check("http://127.0.0.1:1/mcp", Some("  ")).await,
        "the bearer token for the MCP server is empty"
    );
    let error = check("http://127.0.0.1:1/mcp", Some("line\nbreak")).await;
    assert_eq!(
        error,
        "the bearer token for the MCP server holds characters an HTTP header cannot carry (a \
         line break?)"
    );
}

/// The agent end to end: `shiro -p` with `[mcp.servers.web] url = …` offers `web__echo`,
/// calls it with the token from `bearer_token_env`, and feeds its answer to the model; a
/// missing variable is reported and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_calls_a_tool_of_a_server_reached_by_url() {
    let server = serve(Guard::Token {
        token: "s3cret-token",
        challenge: true,
    })
    .await;
    let world = agent_common::World::new();
    std::fs::write(
        world.cfg.path().join("config.toml"),
        format!(
            "[mcp.servers.web]\nurl = \"{}\"\nbearer_token_env = \"WEB_TOKEN\"\n",
            server.url
        ),
    )
    .unwrap();
    let model = world.replay(&serde_json::json!({"responses": [
        {"text": "", "tool_calls": [{"name": "web__echo", "arguments": {"text": "over http"}}]},
        {"text": "Echoed."}
    ]}));
    let run = world
        .run(
            &["-p", "echo it", "--yes", "--model", &model],
            "",
            &[("WEB_TOKEN", "s3cret-token")],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Echoed.\n");
    assert_eq!(world.tool_results(), ["over http"]);
    let seen = server.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|header| header.as_deref() == Some("Bearer s3cret-token")),
        "{seen:?}"
    );

    // Without the variable, nothing is sent and the session goes on without the server.
    let other = agent_common::World::new();
    std::fs::copy(
        world.cfg.path().join("config.toml"),
        other.cfg.path().join("config.toml"),
    )
    .unwrap();
    let model = other.replay(&serde_json::json!({"responses": [{"text": "Alone."}]}));
    let run = other.run(&["-p", "hi", "--model", &model], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Alone.\n");
    assert!(
        run.stderr.contains(
            "note: MCP server web did not start: its bearer_token_env names WEB_TOKEN, which is not set; the session goes on without it"
        ),
        "{}",
        run.stderr
    );
}
