//! `shiro mcp --http ADDR`: the same server over Streamable HTTP, on a loopback address,
//! for clients that would rather reach a running server than start one. The decisions are in
//! `docs/mcp.md`.
//!
//! A server on a port can be reached by every process of the machine, and by web pages
//! through the browser; so it listens on loopback only, asks every request for the bearer
//! token the user set, refuses requests that carry a browser's `Origin`, and takes only
//! loopback `Host` names (rmcp's guard against DNS rebinding). Every session shares one
//! [`super::Turns`]: the calls of all clients are recorded in the one undo log, grouped as one
//! client's would be, and run in the order the server received them, whichever session or
//! connection each came on (each takes its place as its body has been read; see
//! `super::order`). Background commands are each session's own, and end with it.

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::{Service as _, service_fn};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::order::{Arrivals, Ticket};
use super::{ShiroServer, Workspace};

/// The variable `shiro` reads the token from.
pub const TOKEN_VAR: &str = "SHIRO_MCP_TOKEN";
/// What to do without a token.
pub const NO_TOKEN: &str = "shiro mcp --http needs a token: set SHIRO_MCP_TOKEN to a long random secret (e.g. `openssl rand -hex 32`), and have the client send it as Authorization: Bearer …";

/// The path the server answers on.
pub const PATH: &str = "/mcp";

/// Why `addr` may not be listened on; `None` when it may.
pub fn refuse_address(addr: &SocketAddr) -> Option<String> {
    (!addr.ip().is_loopback()).then(|| {
        format!(
            "shiro mcp --http listens only on a loopback address (127.0.0.1:PORT or [::1]:PORT), not {addr}: a server other machines can reach could change this workspace"
        )
    })
}

/// Why `token` cannot guard the server; `None` when it can.
pub fn refuse_token(token: &str) -> Option<String> {
    if token.trim().len() < MIN_TOKEN {
        Some(format!(
            "the token has fewer than {MIN_TOKEN} characters: use a long random one (e.g. the output of `openssl rand -hex 32`)"
        ))
    } else if hyper::header::HeaderValue::from_str(&format!("Bearer {}", token.trim())).is_err() {
        Some("the token holds characters an HTTP header cannot carry".to_owned())
    } else {
        None
    }
}

/// How long a session lasts without a request; its background commands end with it.
pub const SESSION_IDLE: Duration = Duration::from_secs(60 * 60);

/// The shortest token taken.
const MIN_TOKEN: usize = 16;

/// A listener bound to a loopback address: where it listens, and what serves on it.
pub struct Listener {
    listener: tokio::net::TcpListener,
    /// The address clients reach, `http://ADDR/mcp`.
    pub url: String,
}

impl Listener {
    /// Binds `addr` (port 0: one the system picks), after the checks of [`refuse_address`].
    pub async fn bind(addr: SocketAddr) -> Result<Listener> {
        if let Some(why) = refuse_address(&addr) {
            return Err(anyhow!(why));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|err| anyhow!("cannot listen on {addr}: {err}"))?;
        let bound = listener
            .local_addr()
            .map_err(|err| anyhow!("cannot listen on {addr}: {err}"))?;
        Ok(Listener {
            listener,
            url: format!("http://{bound}{PATH}"),
        })
    }

    /// Serves `server` to every client that sends `token`, until `stop` completes; then
    /// it takes no new request and ends the sessions (a call under way is finished by
    /// [`super::Turns::shutdown`]).
    pub async fn serve<W: Workspace>(
        self,
        server: ShiroServer<W>,
        token: &str,
        stop: impl Future<Output = ()>,
    ) {
        let config = StreamableHttpServerConfig::default().enforce_origin_validation();
        let stopping = config.cancellation_token.clone();
        let most = config.max_request_body_bytes;
        let arrivals = Arc::clone(server.arrivals());
        // A session ends when its client closes it, or after this long without a request
        // (rmcp's default is five minutes, which would end a dev server the client started
        // while its user read for a while).
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(SESSION_IDLE);
        let mcp = TowerToHyperService::new(StreamableHttpService::new(
            move || Ok(server.for_session()),
            Arc::new(sessions),
            config,
        ));
        let expected: Arc<[u8]> = format!("Bearer {}", token.trim()).into_bytes().into();
        tokio::pin!(stop);
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = &mut stop => {
                    stopping.cancel();
                    return;
                }
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            let (mcp, expected, arrivals) =
                (mcp.clone(), Arc::clone(&expected), Arc::clone(&arrivals));
            let service = service_fn(move |request: Request<Incoming>| {
                let allowed = request
                    .headers()
                    .get(hyper::header::AUTHORIZATION)
                    .is_some_and(|value| same(value.as_bytes(), &expected));
                let (mcp, arrivals) = (mcp.clone(), Arc::clone(&arrivals));
                async move {
                    if !allowed {
                        return Ok(unauthorized());
                    }
                    // The whole body is read here, so that a call takes its place in the
                    // order as it is received, before rmcp hands it to a task of its own.
                    let (mut parts, body) = request.into_parts();
                    let body = match Limited::new(body, most).collect().await {
                        Ok(body) => body.to_bytes(),
                        Err(err) => return Ok(unreadable(err.is::<LengthLimitError>())),
                    };
                    if let Some(ticket) = ticket(&arrivals, &body) {
                        parts.extensions.insert(ticket);
                    }
                    mcp.call(Request::from_parts(parts, Full::new(body))).await
                }
            });
            let stopping = stopping.clone();
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = stopping.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                    }
                }
            });
        }
    }
}

/// The place in the order of the call a request's body holds; `None` when it holds none
/// (another message, or one rmcp will refuse).
fn ticket(arrivals: &Arc<Arrivals>, body: &[u8]) -> Option<Ticket> {
    /// Of a JSON-RPC message, what tells a call and its tool.
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        method: Option<Cow<'a, str>>,
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        name: Option<Cow<'a, str>>,
    }
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    if message.method.as_deref() != Some("tools/call") {
        return None;
    }
    let name = message.params.and_then(|params| params.name);
    Some(arrivals.arrived(name.as_deref().unwrap_or_default()))
}

/// 413 for a body longer than rmcp takes (`too_long`), else 400: the client broke off.
fn unreadable(too_long: bool) -> Response<BoxBody<Bytes, Infallible>> {
    let (status, text) = if too_long {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            "shiro mcp: the request's body is too long\n",
        )
    } else {
        (
            StatusCode::BAD_REQUEST,
            "shiro mcp: the request's body could not be read\n",
        )
    };
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
}

/// Whether `a` and `b` are equal, in a time that does not tell where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// 401, with the challenge a client reads to know it needs a bearer token.
fn unauthorized() -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(http_body_util::BodyExt::boxed(Full::new(Bytes::from(
        "shiro mcp: send the token as Authorization: Bearer …\n",
    ))));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer realm=\"shiro\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_and_long_tokens_are_taken() {
        let ok: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let ok6: SocketAddr = "[::1]:8765".parse().unwrap();
        let open: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert_eq!(refuse_address(&ok), None);
        assert_eq!(refuse_address(&ok6), None);
        insta::assert_snapshot!(refuse_address(&open).unwrap_or_default(), @"shiro mcp --http listens only on a loopback address (127.0.0.1:PORT or [::1]:PORT), not 0.0.0.0:8765: a server other machines can reach could change this workspace");
        assert!(refuse_token("short").is_some());
        assert!(refuse_token("0123456789abcdef\n").is_none());
        assert!(refuse_token("0123456789abcdef\u{7f}").is_some());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"Bearer abc", b"Bearer abc"));
        assert!(!same(b"Bearer abc", b"Bearer abd"));
        assert!(!same(b"Bearer ab", b"Bearer abc"));
    }
}
