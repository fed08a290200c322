//! What the HTTP providers share: the client, one streamed `POST` per attempt, the retry
//! loop (429, 5xx and 529, connections that break before the response starts), the idle
//! timeout, reading server-sent events, and turning error responses into
//! [`ProviderError`]s. Each API only says how to decode its events (a [`Decoder`]).

use std::fmt;
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use serde_json::Value;

use super::error::one_line;
use super::sse::SseParser;
use super::{Api, Completion, ProviderError, Sink, StreamEvent};

/// The timings every HTTP provider takes from its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timings {
    /// To connect, for the response to start, and between two chunks.
    pub(crate) timeout: Duration,
    /// Retries after a 429, a 5xx, or a connection that broke before the response.
    pub(crate) max_retries: u32,
    /// The first retry's delay; each further retry doubles it.
    pub(crate) retry_base_delay: Duration,
    /// The longest delay before a retry, also for a server's `Retry-After`.
    pub(crate) max_retry_delay: Duration,
}

impl Timings {
    /// Both providers' defaults: a generous timeout, because a local server may load a large
    /// model into memory before it sends the first byte; 4 retries from 200 ms, doubling, at
    /// most 20 s apart.
    pub(crate) const DEFAULT: Timings = Timings {
        timeout: Duration::from_secs(180),
        max_retries: 4,
        retry_base_delay: Duration::from_millis(200),
        max_retry_delay: Duration::from_secs(20),
    };
}

/// What [`Transport::new`] needs to know about an endpoint.
pub(crate) struct Endpoint {
    /// Which API it speaks (for the settings named in error messages).
    pub(crate) api: Api,
    /// The base URL as configured, quoted in configuration errors.
    pub(crate) base_url: String,
    /// The full URL requests go to.
    pub(crate) url: String,
    /// The model asked for.
    pub(crate) model: String,
    /// Headers sent with every request: the API's own and the key (marked sensitive).
    pub(crate) headers: HeaderMap,
    /// What a refused key's error tells the user to do.
    pub(crate) key_hint: String,
    /// An HTTP(S) proxy, or `None` to connect directly.
    pub(crate) proxy: Option<String>,
    /// Timeouts and retries.
    pub(crate) timings: Timings,
}

/// A header carrying a secret: reqwest and `Debug` output never show it. An error when the
/// key cannot be sent in a header, naming neither the key nor its characters.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidConfig {
        detail: "the API key contains characters an HTTP header cannot carry (a line break?)"
            .into(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// One HTTP provider's connection to its server. Cheap to share; sends nothing until asked.
pub(crate) struct Transport {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    model: String,
    api: Api,
    key_hint: String,
    timings: Timings,
}

// By hand, so that the headers (which hold the key) never reach a log.
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api", &self.api)
            .field("timings", &self.timings)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Checks the endpoint and builds the HTTP client.
    pub(crate) fn new(endpoint: Endpoint) -> Result<Self, ProviderError> {
        let invalid = |detail: String| ProviderError::InvalidConfig { detail };
        if endpoint.model.trim().is_empty() {
            return Err(invalid(
                "the model name is empty; set --model or SHIRO_MODEL".into(),
            ));
        }
        let scheme = endpoint
            .url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(invalid(format!(
                "the base URL `{}` must start with http:// or https://",
                endpoint.base_url
            )));
        }
        if let Err(error) = reqwest::Url::parse(&endpoint.url) {
            return Err(invalid(format!(
                "the base URL `{}` is not a valid URL ({error})",
                endpoint.base_url
            )));
        }
        let proxy = match endpoint.proxy.as_deref() {
            None => None,
            Some(proxy) => Some(reqwest::Proxy::all(proxy).map_err(|error| {
                invalid(format!("the proxy `{proxy}` is not usable ({error})"))
            })?),
        };
        let client = crate::net::client(|builder| {
            let builder = builder
                .connect_timeout(endpoint.timings.timeout)
                .user_agent(concat!("shiro/", env!("CARGO_PKG_VERSION")));
            // reqwest would otherwise read proxy settings from the environment behind our back.
            match &proxy {
                None => builder.no_proxy(),
                Some(proxy) => builder.proxy(proxy.clone()),
            }
        })
        .map_err(|error| invalid(format!("could not set up HTTP ({error})")))?;
        Ok(Transport {
            client,
            url: endpoint.url,
            headers: endpoint.headers,
            model: endpoint.model,
            api: endpoint.api,
            key_hint: endpoint.key_hint,
            timings: endpoint.timings,
        })
    }

    /// The model asked for.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// Sends `body` and decodes the answer with a fresh decoder per attempt, retrying what
    /// is worth retrying and telling `sink` before each wait.
    pub(crate) async fn complete<D: Decoder>(
        &self,
        body: &Value,
        decoder: impl Fn() -> D,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let mut retries = 0;
        loop {
            let (kind, retry_after) = match self.attempt(body, decoder(), sink).await {
                Ok(completion) => return Ok(completion),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Transient { kind, retry_after }) => (kind, retry_after),
            };
            if retries >= self.timings.max_retries {
                return Err(kind.into_error(retries));
            }
            let delay = retry_after.unwrap_or_else(|| self.backoff(retries));
            let delay = delay.min(self.timings.max_retry_delay);
            retries += 1;
            sink(StreamEvent::Retrying {
                attempt: retries,
                max_retries: self.timings.max_retries,
                delay,
                reason: kind.reason(),
            });
            tokio::time::sleep(delay).await;
        }
    }

    /// Sends the request once and reads the whole response.
    async fn attempt<D: Decoder>(
        &self,
        body: &Value,
        decoder: D,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, Failure> {
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(header::ACCEPT, "text/event-stream")
            .json(body);
        let response = match tokio::time::timeout(self.timings.timeout, request.send()).await {
            Err(_elapsed) => return Err(Failure::Fatal(self.timed_out())),
            Ok(Err(error)) => return Err(self.classify_send_error(&error)),
            Ok(Ok(response)) => response,
        };
        if !response.status().is_success() {
            return Err(self.classify_status(response).await);
        }
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        let body = BodyReader {
            response,
            timeout: self.timings.timeout,
        };
        if is_json {
            // The server ignored `stream: true` and sent one whole answer.
            let bytes = body
                .read_to_limit(MAX_JSON_BODY)
                .await
                .map_err(|e| Failure::Fatal(self.body_error(e)))?;
            return decoder
                .whole(&String::from_utf8_lossy(&bytes), sink)
                .map_err(Failure::Fatal);
        }
        self.read_stream(body, decoder, sink)
            .await
            .map_err(Failure::Fatal)
    }

    async fn read_stream<D: Decoder>(
        &self,
        mut body: BodyReader,
        mut decoder: D,
        sink: &mut Sink<'_>,
    ) -> Result<Completion, ProviderError> {
        let mut parser = SseParser::default();
        let too_long = |_| ProviderError::BadResponse {
            detail: "an event in the stream is larger than 16 MiB".into(),
        };
        while let Some(chunk) = body.next_chunk().await.map_err(|e| self.body_error(e))? {
            for data in parser.push(chunk.as_ref()).map_err(too_long)? {
                if decoder.take(&data, sink)? == Progress::Done {
                    return decoder.finish(true);
                }
            }
        }
        if let Some(data) = parser.finish()
            && decoder.take(&data, sink)? == Progress::Done
        {
            return decoder.finish(true);
        }
        decoder.finish(false)
    }

    fn timed_out(&self) -> ProviderError {
        ProviderError::Timeout {
            url: self.url.clone(),
            after: self.timings.timeout,
        }
    }

    fn body_error(&self, error: BodyError) -> ProviderError {
        match error {
            BodyError::TimedOut => self.timed_out(),
            BodyError::Broken => ProviderError::Dropped,
            BodyError::TooLarge => ProviderError::BadResponse {
                detail: format!("the response is larger than {} MiB", MAX_JSON_BODY >> 20),
            },
        }
    }

    fn classify_send_error(&self, error: &reqwest::Error) -> Failure {
        if error.is_timeout() {
            return Failure::Fatal(self.timed_out());
        }
        let io_kind = error_chain(error)
            .find_map(|source| source.downcast_ref::<std::io::Error>())
            .map(std::io::Error::kind);
        if io_kind == Some(std::io::ErrorKind::ConnectionRefused) {
            return Failure::Fatal(ProviderError::ConnectionRefused {
                url: self.url.clone(),
            });
        }
        if error.is_connect() {
            let detail = error_chain(error)
                .last()
                .map_or_else(String::new, |e| e.to_string());
            return Failure::Fatal(ProviderError::Connect {
                url: self.url.clone(),
                detail: one_line(&detail),
            });
        }
        // The connection broke before the response began (a reset, or a pooled connection
        // the server had closed): nothing was streamed, so sending again is safe.
        Failure::Transient {
            kind: Transient::Dropped,
            retry_after: None,
        }
    }

    async fn classify_status(&self, response: reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let reason = response
            .status()
            .canonical_reason()
            // 529 is Anthropic's own status, which no standard names.
            .unwrap_or(if status == 529 { "overloaded" } else { "error" })
            .to_lowercase();
        let body = BodyReader {
            response,
            timeout: self.timings.timeout,
        }
        .read_to_limit(MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
        let ApiError { message, code } = ApiError::parse(&body);
        let detail = if message.is_empty() {
            format!("{status} {reason}")
        } else {
            message
        };
        let fatal = |error| Failure::Fatal(error);
        match status {
            401 | 403 => fatal(ProviderError::Unauthorized {
                status,
                hint: self.key_hint.clone(),
            }),
            400 | 404 | 422 if names_unknown_model(&detail, &code) => {
                fatal(ProviderError::UnknownModel {
                    model: self.model.clone(),
                    url: self.url.clone(),
                    detail,
                })
            }
            404 => fatal(ProviderError::NotFound {
                url: self.url.clone(),
                base_url_var: self.api.base_url_var(),
            }),
            // OpenAI says 429 for an exhausted quota too, which no amount of waiting fixes.
            429 if code == "insufficient_quota" => {
                fatal(ProviderError::Rejected { status, detail })
            }
            429 => Failure::Transient {
                kind: Transient::RateLimited { detail },
                retry_after,
            },
            // Anthropic's 529 (overloaded) is in this range too.
            500..=599 => Failure::Transient {
                kind: Transient::Server { status, detail },
                retry_after,
            },
            _ => fatal(ProviderError::Rejected { status, detail }),
        }
    }

    fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry);
        self.timings
            .retry_base_delay
            .saturating_mul(factor)
            .min(self.timings.max_retry_delay)
    }
}

/// Whether a stream has ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More events are expected.
    More,
    /// The API's end marker arrived.
    Done,
}

/// Builds one completion out of an API's events.
pub(crate) trait Decoder {
    /// Takes the `data` of one event.
    fn take(&mut self, data: &str, sink: &mut Sink<'_>) -> Result<Progress, ProviderError>;

    /// The completion once the body ended; `ended` is whether the end marker came. A decoder
    /// must refuse an answer that may have been cut short.
    fn finish(self, ended: bool) -> Result<Completion, ProviderError>;

    /// The completion from a whole JSON response, sent by a server that does not stream.
    fn whole(self, text: &str, sink: &mut Sink<'_>) -> Result<Completion, ProviderError>;
}

/// How one attempt failed.
enum Failure {
    /// Retrying cannot help.
    Fatal(ProviderError),
    /// Retrying may help; `retry_after` is the server's own suggestion.
    Transient {
        kind: Transient,
        retry_after: Option<Duration>,
    },
}

enum Transient {
    RateLimited { detail: String },
    Server { status: u16, detail: String },
    Dropped,
}

impl Transient {
    fn reason(&self) -> String {
        match self {
            Transient::RateLimited { .. } => "rate limited (429)".to_owned(),
            Transient::Server { status, .. } => format!("server error ({status})"),
            Transient::Dropped => "the connection closed".to_owned(),
        }
    }

    fn into_error(self, retries: u32) -> ProviderError {
        match self {
            Transient::RateLimited { detail } => ProviderError::RateLimited { retries, detail },
            Transient::Server { status, detail } => ProviderError::Server {
                status,
                retries,
                detail,
            },
            Transient::Dropped => ProviderError::Dropped,
        }
    }
}

/// The most of an error response that is read.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The most of a whole (non-streamed) JSON response that is read.
const MAX_JSON_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy)]
enum BodyError {
    TimedOut,
    Broken,
    TooLarge,
}

/// Reads a response body chunk by chunk, with the idle timeout between chunks.
struct BodyReader {
    response: reqwest::Response,
    timeout: Duration,
}

impl BodyReader {
    /// The next chunk of the body, or `None` at its end.
    async fn next_chunk(&mut self) -> Result<Option<impl AsRef<[u8]> + use<>>, BodyError> {
        match tokio::time::timeout(self.timeout, self.response.chunk()).await {
            Err(_elapsed) => Err(BodyError::TimedOut),
            Ok(Err(error)) if error.is_timeout() => Err(BodyError::TimedOut),
            Ok(Err(_)) => Err(BodyError::Broken),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    /// The whole body, refused when it is longer than `limit` bytes.
    async fn read_to_limit(mut self, limit: usize) -> Result<Vec<u8>, BodyError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            body.extend_from_slice(chunk.as_ref());
            if body.len() > limit {
                return Err(BodyError::TooLarge);
            }
        }
        Ok(body)
    }
}

fn error_chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |error| error.source())
}

/// The server's `Retry-After` (seconds) or OpenAI's `retry-after-ms`, if it sent one.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    // An HTTP date is allowed too but is rare from these servers; it falls back to backoff.
    let seconds = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))?;
    // Bounded before converting, since `from_secs_f64` panics on overflow.
    Some(Duration::from_secs_f64(seconds.min(24.0 * 3600.0)))
}

/// Whether an error response says the model does not exist. Servers differ: OpenAI sends
/// the code `model_not_found`, vLLM "The model `x` does not exist", Ollama "model \"x\" not
/// found, try pulling it first", Anthropic a `not_found_error` saying "model: x".
fn names_unknown_model(message: &str, code: &str) -> bool {
    let message = message.to_lowercase();
    code == "model_not_found"
        || (code == "not_found_error" && message.starts_with("model:"))
        || (message.contains("model")
            && (message.contains("not found") || message.contains("does not exist")))
}

/// The useful part of an error response body, whatever shape the server chose.
#[derive(Debug, Default)]
pub(crate) struct ApiError {
    /// The server's message, on one line.
    pub(crate) message: String,
    /// Its machine-readable code or type, when it sent one.
    pub(crate) code: String,
}

impl ApiError {
    fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            // Not JSON (an HTML error page, a proxy's text): show it only if it is short.
            let message = if text.len() <= 200 && !text.contains('<') {
                one_line(&text)
            } else {
                String::new()
            };
            return ApiError {
                message,
                code: String::new(),
            };
        };
        Self::from_value(&value)
    }

    /// Reads `{"error": {"message", "type", "code"}}` (OpenAI, vLLM, llama.cpp, and
    /// Anthropic, which adds `"type": "error"` outside), `{"error": "…"}` (Ollama), and
    /// `{"detail": "…"}` or `{"message": "…"}` (FastAPI-style servers).
    pub(crate) fn from_value(value: &Value) -> Self {
        let text = |value: Option<&Value>| match value {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(number)) => number.to_string(),
            _ => String::new(),
        };
        let error = value.get("error").unwrap_or(value);
        let message = match error {
            Value::String(message) => message.clone(),
            _ => [
                error.get("message"),
                error.get("detail"),
                value.get("detail"),
            ]
            .into_iter()
            .map(text)
            .find(|message| !message.is_empty())
            .unwrap_or_default(),
        };
        let code = [error.get("code"), error.get("type")]
            .into_iter()
            .map(text)
            .find(|code| code == "model_not_found" || code == "insufficient_quota")
            .or_else(|| Some(text(error.get("code"))).filter(|code| !code.is_empty()))
            // Anthropic names the kind of error in `type` and sends no `code`.
            .unwrap_or_else(|| text(error.get("type")));
        ApiError {
            message: one_line(&message),
            code,
        }
    }

    /// The error a stream reported in its own data, as one line.
    pub(crate) fn stream_error(error: &Value) -> ProviderError {
        let ApiError { message, .. } = Self::from_value(&serde_json::json!({ "error": error }));
        let detail = if message.is_empty() {
            one_line(&error.to_string())
        } else {
            message
        };
        ProviderError::Stream { detail }
    }
}
