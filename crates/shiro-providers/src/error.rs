//! The one error type of every provider.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a provider could not produce a completion. Each message is one line, lowercase,
/// without a trailing period, and says what to do next where there is something to do.
/// Exhaustive on purpose: the agent sorts every variant into a kind a script can act on,
/// and a new one must be sorted too.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The configuration cannot work (for example, the base URL does not parse).
    #[error("invalid provider configuration: {detail}")]
    InvalidConfig {
        /// What is wrong.
        detail: String,
    },
    /// 401 or 403: the server refused the API key (or there was none).
    #[error("the API key was refused ({status}); {hint}")]
    Unauthorized {
        /// The HTTP status, 401 or 403.
        status: u16,
        /// Where the key comes from, as advice: `set OPENAI_API_KEY`, or the command that
        /// printed it. Never the key.
        hint: String,
    },
    /// 404 that does not name a model: usually a wrong base URL.
    #[error(
        "the endpoint or model was not found (404) at {url}; check {base_url_var} and the model name"
    )]
    NotFound {
        /// The URL that was requested.
        url: String,
        /// The variable that sets the server, e.g. `OPENAI_BASE_URL`.
        base_url_var: &'static str,
    },
    /// The server said it has no such model.
    #[error("unknown model `{model}` at {url}: {detail}; check --model or SHIRO_MODEL")]
    UnknownModel {
        /// The model that was asked for.
        model: String,
        /// The URL that was requested.
        url: String,
        /// The server's own words.
        detail: String,
    },
    /// Still 429 after every retry.
    #[error("the server is still rate limiting requests (429) after {retries} retries: {detail}")]
    RateLimited {
        /// How many retries were made.
        retries: u32,
        /// The server's own words.
        detail: String,
    },
    /// Still a 5xx after every retry.
    #[error("the server failed with {status} after {retries} retries: {detail}")]
    Server {
        /// The last HTTP status.
        status: u16,
        /// How many retries were made.
        retries: u32,
        /// The server's own words.
        detail: String,
    },
    /// Any other error status, for example 400 for a context that is too long, or 429
    /// for an exhausted quota (which waiting does not fix).
    #[error("the server refused the request ({status}): {detail}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The server's own words.
        detail: String,
    },
    /// Nothing listens at the address.
    #[error("could not connect to {url}: connection refused; is the server running?")]
    ConnectionRefused {
        /// The URL that was requested.
        url: String,
    },
    /// The connection could not be made for another reason (DNS, TLS, network).
    #[error("could not connect to {url}: {detail}")]
    Connect {
        /// The URL that was requested.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// The server sent nothing for the whole timeout, before or during the response.
    #[error("no response from {url} for {}; the request timed out", DisplayDuration(*.after))]
    Timeout {
        /// The URL that was requested.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The connection closed (or broke) before the response was complete.
    #[error("the connection closed before the response finished")]
    Dropped,
    /// The server reported an error inside an otherwise good stream.
    #[error("the server reported an error while streaming: {detail}")]
    Stream {
        /// The server's own words.
        detail: String,
    },
    /// The response was not what a server of the API sends.
    #[error("the server sent a response shiro could not read: {detail}")]
    BadResponse {
        /// What was wrong with it.
        detail: String,
    },
    /// A replay script that does not parse.
    #[error("invalid replay script{}: {detail}", InFile(.file.as_deref()))]
    InvalidReplayScript {
        /// The file it was read from, as the user named it; `None` for a script given as
        /// text.
        file: Option<PathBuf>,
        /// What is wrong with it, and where (`at line 2 column 17`) when a place is known.
        detail: String,
    },
    /// The agent asked the replay provider for more responses than its script holds.
    #[error("the replay script has no response left: all {used} were used")]
    ReplayFinished {
        /// How many responses the script had.
        used: usize,
    },
}

/// ` FILE` after the words it follows, or nothing without a file.
struct InFile<'a>(Option<&'a Path>);

impl fmt::Display for InFile<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(file) => write!(f, " {}", file.display()),
            None => Ok(()),
        }
    }
}

/// Shows `300ms` below a second and `1.5s` or `120s` above.
struct DisplayDuration(Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis < 1000 {
            write!(f, "{millis}ms")
        } else if millis.is_multiple_of(1000) {
            write!(f, "{}s", millis / 1000)
        } else {
            write!(f, "{:.1}s", self.0.as_secs_f64())
        }
    }
}

/// Makes a server's message fit in a one-line error: whitespace runs become one space, a
/// trailing period goes, and very long text is cut.
pub fn one_line(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(MAX_CHARS) {
        line.truncate(cut);
        line.push('…');
    }
    while line.ends_with('.') {
        line.pop();
    }
    line
}
