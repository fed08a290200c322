//! The MCP client's way to servers reached by URL: Streamable HTTP, through rmcp's own
//! transport over the reqwest client every shiro HTTP client comes from (`net.rs`).
//! This module only connects and runs the handshake; it turns what went wrong into one line
//! a person reads, and no message it returns ever holds the token.

use std::time::Duration;

use reqwest::header::HeaderValue;
use rmcp::ServiceExt as _;
use rmcp::model::ClientConfig;
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};

use shiro_providers::one_line;

/// How long a TCP (and TLS) connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the whole handshake may take: a server that accepts the connection and then
/// says nothing must not hold the agent's start.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to the MCP server at `url` over Streamable HTTP, sending `token` (when given) as
/// a bearer token, and runs the MCP handshake with `config`.
///
/// The error is one line for a person (which URL, and why), and never holds the token.
/// Redirects are not followed (the URL to configure is the final one), and proxy settings
/// in the environment are not used, as for the model providers.
pub async fn connect(
    url: &str,
    token: Option<String>,
    config: ClientConfig,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    let token = token.map(|token| token.trim().to_owned());
    let secret = token.as_deref().unwrap_or_default();
    connect_with(url, token.as_deref(), config)
        .await
        .map_err(|message| redact(&message, secret))
}

/// [`connect`], with the token already trimmed; its errors may still need redacting.
async fn connect_with(
    url: &str,
    token: Option<&str>,
    config: ClientConfig,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|error| format!("`{url}` is not a URL ({error})"))?;
    let shown = shown(&parsed);
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{shown}` is not an http:// or https:// URL, which an MCP server reached by URL needs"
        ));
    }
    if let Some(token) = token {
        if token.is_empty() {
            return Err("the bearer token for the MCP server is empty".to_owned());
        }
        if HeaderValue::from_str(token).is_err() {
            return Err(
                "the bearer token for the MCP server holds characters an HTTP header \
                 cannot carry (a line break?)"
                    .to_owned(),
            );
        }
    }
    let client = shiro_providers::net::client(|builder| {
        builder
            .connect_timeout(CONNECT_TIMEOUT)
            // As rmcp's own client does: a pooled connection whose last answer was not read
            // to its end stalls the next request for a delayed ACK.
            .pool_max_idle_per_host(0)
            // A redirect could carry the session to another host; the error names the status.
            .redirect(reqwest::redirect::Policy::none())
            // reqwest would otherwise read proxy settings from the environment behind our back.
            .no_proxy()
            .user_agent(concat!("shiro/", env!("CARGO_PKG_VERSION")))
    })
    .map_err(|error| format!("could not set up HTTP ({error})"))?;
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(parsed.as_str());
    if let Some(token) = token {
        // rmcp sends it as `Authorization: Bearer <token>`, marked sensitive.
        transport_config = transport_config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::with_client(client, transport_config);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, Box::pin(config.serve(transport))).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(error)) => Err(explain(&shown, token.is_some(), &error)),
        Err(_) => Err(format!(
            "{shown} did not finish the MCP handshake within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        )),
    }
}

/// The URL as messages show it: without a password or a query, which may hold secrets.
fn shown(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    // Both fail only for URLs that cannot have them, which then have none to hide.
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// Why the handshake with the server at `shown` failed, in one line.
fn explain(shown: &str, has_token: bool, error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => {
            match error
                .error
                .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            {
                Some(error) => explain_http(shown, has_token, error),
                None => format!(
                    "the MCP handshake with {shown} failed: {}",
                    one_line(&error.error.to_string())
                ),
            }
        }
        ClientInitializeError::JsonRpcError(data) => format!(
            "{shown} refused the MCP handshake: {}",
            one_line(&data.message)
        ),
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            format!("{shown} speaks no version of MCP that shiro speaks")
        }
        ClientInitializeError::ConnectionClosed(_) => {
            format!("{shown} ended the connection during the MCP handshake")
        }
        other => format!(
            "the MCP handshake with {shown} failed: {}",
            one_line(&other.to_string())
        ),
    }
}

/// Why the transport could not send the handshake, or what the server answered instead.
fn explain_http(
    shown: &str,
    has_token: bool,
    error: &StreamableHttpError<reqwest::Error>,
) -> String {
    match error {
        StreamableHttpError::Client(error) => {
            format!("cannot reach {shown}: {}", unreachable_because(error))
        }
        StreamableHttpError::AuthRequired(_) => refused(has_token, 401),
        StreamableHttpError::InsufficientScope(_) => refused(has_token, 403),
        StreamableHttpError::HttpStatus(status) => {
            format!("{shown} answered HTTP {}", status.status)
        }
        // rmcp reports other failing statuses as "HTTP <status> <reason>: <body>".
        StreamableHttpError::UnexpectedServerResponse(text) => match leading_status(text) {
            Some(status @ (401 | 403)) => refused(has_token, status),
            Some(300..=399) => format!(
                "{shown} answered with a redirect ({}); configure the URL it points to",
                one_line(text)
            ),
            Some(404) => format!(
                "{shown} answered 404 Not Found: is it the server's MCP endpoint (often \
                 ending in /mcp)?"
            ),
            _ => format!("{shown} answered {}", one_line(text)),
        },
        StreamableHttpError::UnexpectedContentType(content_type) => format!(
            "{shown} does not answer as an MCP server (its answer is {})",
            content_type.as_deref().unwrap_or("of no declared type")
        ),
        other => format!(
            "the MCP handshake with {shown} failed: {}",
            one_line(&other.to_string())
        ),
    }
}

/// The server did not take the token, or wants one.
fn refused(has_token: bool, status: u16) -> String {
    if has_token {
        format!("the server refused the token ({status})")
    } else {
        format!(
            "the server asks for a token ({status}); name an environment variable that holds \
             it in `bearer_token_env`"
        )
    }
}

/// The status at the start of rmcp's "HTTP 401 Unauthorized: …" messages.
fn leading_status(text: &str) -> Option<u16> {
    text.strip_prefix("HTTP ")?.get(..3)?.parse().ok()
}

/// Why no exchange took place: refused, timed out, TLS, DNS, or what the innermost error says.
fn unreachable_because(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!("no connection within {} s", CONNECT_TIMEOUT.as_secs());
    }
    let chain = || causes(error, |e| e.source());
    let io = chain().find_map(|e| e.downcast_ref::<std::io::Error>());
    if io.is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
        return "connection refused".to_owned();
    }
    // rustls' errors reach reqwest wrapped in `io::Error`s (two, today), whose `source`
    // skips the error they wrap.
    let tls = chain()
        .find_map(|e| causes(e, wrapped_by_io).find_map(|e| e.downcast_ref::<rustls::Error>()));
    match tls {
        Some(tls @ rustls::Error::InvalidCertificate(_)) => {
            return format!(
                "its TLS certificate is not trusted ({})",
                one_line(&tls.to_string())
            );
        }
        Some(tls) => return format!("TLS failed ({})", one_line(&tls.to_string())),
        None => {}
    }
    chain()
        .last()
        .map_or_else(String::new, |e| one_line(&e.to_string()))
}

/// `error` and the errors behind it, each found by `next` from the one before.
fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
    next: fn(
        &'a (dyn std::error::Error + 'static),
    ) -> Option<&'a (dyn std::error::Error + 'static)>,
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), move |e| next(*e))
}

/// The error an `io::Error` wraps, if `error` is one that wraps another.
fn wrapped_by_io<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    let inner = error.downcast_ref::<std::io::Error>()?.get_ref()?;
    Some(inner)
}

/// `message` without `secret`, should a server have echoed it into an error page.
fn redact(message: &str, secret: &str) -> String {
    if secret.is_empty() {
        message.to_owned()
    } else {
        message.replace(secret, "<token>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_read_from_rmcps_message() {
        assert_eq!(leading_status("HTTP 401 Unauthorized: go away"), Some(401));
        assert_eq!(leading_status("HTTP 30"), None);
        assert_eq!(leading_status("unexpected"), None);
    }

    #[test]
    fn a_shown_url_hides_its_password_and_query() {
        let url = reqwest::Url::parse("https://me:pw@example.com/mcp?key=k#top").unwrap();
        assert_eq!(shown(&url), "https://me@example.com/mcp");
    }

    #[test]
    fn the_token_is_redacted() {
        assert_eq!(redact("echo: abc123", "abc123"), "echo: <token>");
        assert_eq!(redact("nothing", ""), "nothing");
    }
}
