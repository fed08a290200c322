//! A call the client cancels before it has started anything starts nothing.
//!
//! The client's `notifications/cancelled` reaches a call as its request's cancellation token
//! (rmcp's `RequestContext::ct`), which rmcp sets as it reads the notification. The token is
//! read, as [`Cancelled`], at each point where the call is about to begin something: while it waits for its turn in the order (the handler), once it holds
//! the turns' lock (`Turns::call`), and as the tool itself is called, after the workspace has
//! opened the undo log, taken its lock and begun the turn ([`StartUnlessCancelled`]). A call
//! cancelled by then changes nothing, and its turn holds no change. (With `[bash] capture =
//! "off"`, the CLI's workspace notes that bash ran uncaptured before it calls the tool, and
//! that note alone keeps the turn.)
//!
//! Once `bash` is called, the call's stop (see [`super::Turns::call_stop`]) carries the
//! cancellation on: `bash` takes note of its stop as its call begins, and a change after that
//! stops it wherever it is. A command not started yet (its capture being readied: the
//! overlay's layer, the git repository's state) never starts, and one running is stopped as
//! Ctrl-C stops it, what it changed being recorded. A change before `bash` took note would be
//! taken for one from before the call, and forgotten, so the stop changes only once the
//! tool's call has begun ([`Cancelled::began`]): a cancellation that lands between the last
//! read of the token and that moment is passed on then.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use shiro_tools::{Mutator, Tool, ToolError, ToolOutput, WorkspacePath};
use tokio::sync::watch;

/// What a call cancelled before its turn in the order came says (the client does not read
/// it: rmcp sends no result for a cancelled request).
pub const CANCELLED_WHILE_WAITING: &str =
    "cancelled before the calls sent before it had ended; nothing was changed";

/// What a call cancelled once its turn had come, but before it started, says.
pub const CANCELLED_BEFORE_START: &str = "cancelled before it started; nothing was changed";

/// Whether the client has cancelled one call (once it says so, it always does), and whether
/// the tool's call has begun.
#[derive(Clone)]
pub struct Cancelled {
    is_cancelled: Arc<dyn Fn() -> bool + Send + Sync>,
    /// True once the tool's call has begun (see [`StartUnlessCancelled`]).
    began: Arc<watch::Sender<bool>>,
}

impl Cancelled {
    /// Cancelled as `is_cancelled` says (rmcp's token, read without waiting), which must
    /// not go back to false once it has said true.
    pub fn by(is_cancelled: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            is_cancelled: Arc::new(is_cancelled),
            began: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Whether the call was cancelled.
    pub fn is_set(&self) -> bool {
        (self.is_cancelled)()
    }

    /// Resolves once the tool's call has begun (and taken note of its stop), or can no
    /// longer begin: until then, a change of the call's stop would be forgotten.
    pub fn began(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut began = self.began.subscribe();
        async move {
            // An error: every copy is gone, and the call with them.
            let _ = began.wait_for(|began| *began).await;
        }
    }
}

impl fmt::Debug for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cancelled").field(&self.is_set()).finish()
    }
}

/// A tool whose call starts only if its call was not cancelled by then: a refusal that
/// changed nothing otherwise. Given to the workspace in place of the tool, so that the
/// check comes after what the workspace does before it calls the tool (opening the undo log,
/// waiting for its lock, beginning the turn), which a cancel may arrive during.
pub struct StartUnlessCancelled {
    tool: Box<dyn Tool>,
    cancelled: Cancelled,
}

impl StartUnlessCancelled {
    /// `tool`, for one call that `cancelled` may cancel.
    pub fn new(tool: Box<dyn Tool>, cancelled: Cancelled) -> Self {
        Self { tool, cancelled }
    }
}

#[async_trait::async_trait]
impl Tool for StartUnlessCancelled {
    fn name(&self) -> &'static str {
        self.tool.name()
    }

    fn description(&self) -> &'static str {
        self.tool.description()
    }

    fn schema(&self) -> serde_json::Value {
        self.tool.schema()
    }

    fn is_mutating(&self) -> bool {
        self.tool.is_mutating()
    }

    async fn touched_paths(
        &self,
        mutator: &dyn Mutator,
        args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        self.tool.touched_paths(mutator, args).await
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        if self.cancelled.is_set() {
            return Err(ToolError::refused(CANCELLED_BEFORE_START));
        }
        // `bash` takes note of its stop as its call is first polled, and counts only a change
        // after that (see `Bash::with_stop`); so the call's stop changes only once it has
        // been. A cancellation that lands meanwhile is passed on then.
        let mut call = self.tool.call(mutator, args);
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        self.cancelled.began.send_replace(true);
        match first {
            Poll::Ready(result) => result,
            Poll::Pending => call.await,
        }
    }
}
