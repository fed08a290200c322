//! A call the client cancels before it has started anything starts nothing.
//!
//! The client's `notifications/cancelled` reaches a call as its request's cancellation token
//! (rmcp's `RequestContext::ct`), which rmcp sets as it reads the notification. Two things
//! follow from it. A running `bash` command is stopped through the call's stop (see
//! [`super::Turns::call_stop`]), and what it changed is recorded. But that stop only counts
//! from the moment the command starts: one that lands before is forgotten, and the command
//! would then run in full. So the token is also read, as [`Cancelled`], at each point where
//! the call is about to begin something: while it waits for its turn in the order (the
//! handler), once it holds the turns' lock (`Turns::call`), and as the tool itself is called,
//! after the workspace has opened the undo log, taken its lock and begun the turn
//! ([`StartUnlessCancelled`]). A call cancelled by then changes nothing, and its turn holds
//! no change. (With `[bash] capture = "off"`, the CLI's workspace notes that bash ran
//! uncaptured before it calls the tool, and that note alone keeps the turn.)
//!
//! One window is left, inside `bash` itself, between its call and its command's start (it
//! sets up the command's capture: an overlay layer, the git repository's state): a cancel
//! that lands there is forgotten, since `shiro_tools::tools::Bash` counts a stop only from
//! the moment it starts its command. Closing it is for that tool, which alone knows when the
//! command starts.

use std::fmt;
use std::sync::Arc;

use shiro_tools::{Mutator, Tool, ToolError, ToolOutput, WorkspacePath};

/// What a call cancelled before its turn in the order came says (the client does not read
/// it: rmcp sends no result for a cancelled request).
pub const CANCELLED_WHILE_WAITING: &str =
    "cancelled before the calls sent before it had ended; nothing was changed";

/// What a call cancelled once its turn had come, but before it started, says.
pub const CANCELLED_BEFORE_START: &str = "cancelled before it started; nothing was changed";

/// Whether the client has cancelled one call. Once it says so, it always does.
#[derive(Clone)]
pub struct Cancelled(Arc<dyn Fn() -> bool + Send + Sync>);

impl Cancelled {
    /// Cancelled as `is_cancelled` says (rmcp's token, read without waiting), which must
    /// not go back to false once it has said true.
    pub fn by(is_cancelled: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(is_cancelled))
    }

    /// Whether the call was cancelled.
    pub fn is_set(&self) -> bool {
        (self.0)()
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
        self.tool.call(mutator, args).await
    }
}
