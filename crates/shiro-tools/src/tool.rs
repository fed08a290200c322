//! What every tool shares: its description for a model, its output, its errors.

use async_trait::async_trait;
use serde::Serialize;

pub use crate::change::Change;
use crate::mutator::{Mutator, MutatorError};
use crate::path::{PathError, WorkspacePath};

impl serde::Serialize for WorkspacePath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What a tool returns on success.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// What changed on disk, in the order it happened; empty for read-only tools.
    pub changes: Vec<Change>,
    /// How `bash` captured its command's changes; `None` for the other tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<crate::capture::CaptureMode>,
    /// Paths a `bash` command changed that nothing can restore (it ran without an overlay).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrestorable: Vec<WorkspacePath>,
    /// Whether [`Self::unrestorable`] are what background commands changed (they run on the
    /// real workspace, outside the overlay), rather than a command run without one.
    #[serde(skip)]
    pub background: bool,
    /// What a `bash` command moved in the git repository at the workspace root (HEAD,
    /// refs, the stash list, the index), for the undo log; `None` when nothing moved.
    #[serde(skip)]
    pub git: Option<crate::git::GitChange>,
}

/// Why a tool call failed. The message tells the model what to do next and whether anything
/// was written.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not match the tool's schema.
    #[error("invalid arguments for {tool}: {message}; nothing was changed")]
    InvalidArguments {
        /// The tool's name.
        tool: &'static str,
        /// What serde said.
        message: String,
    },
    /// A path was refused by the jail.
    #[error("{0}; nothing was changed")]
    Path(PathError),
    /// The request cannot be carried out as asked (a missing match, an ambiguous edit …).
    #[error("{0}")]
    Refused(String),
    /// A file operation failed.
    #[error("{0}; nothing was changed")]
    Mutator(MutatorError),
}

// Written by hand rather than with `#[from]`, which would also make the inner error the
// `source`: the message already contains it, and error chains would print it twice.
impl From<PathError> for ToolError {
    fn from(err: PathError) -> Self {
        ToolError::Path(err)
    }
}

impl From<MutatorError> for ToolError {
    fn from(err: MutatorError) -> Self {
        ToolError::Mutator(err)
    }
}

impl ToolError {
    /// A refusal whose message the tool wrote for the model.
    pub fn refused(message: impl Into<String>) -> Self {
        ToolError::Refused(message.into())
    }
}

/// A tool a model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by, e.g. `edit_file`.
    fn name(&self) -> &'static str;

    /// What the tool does, written for a model.
    fn description(&self) -> &'static str;

    /// The JSON Schema of the arguments, derived from the serde types.
    fn schema(&self) -> serde_json::Value;

    /// Whether the tool can change files (and so must be approved and recorded).
    fn is_mutating(&self) -> bool;

    /// The workspace paths the call will touch, known before anything is written, so that a
    /// recorder or an approval prompt can see them first. The default, nothing, is right for
    /// read-only tools and for `bash`, whose effects cannot be known in advance; a recorder
    /// still captures every path a tool mutates through its `Mutator`.
    async fn touched_paths(
        &self,
        _mutator: &dyn Mutator,
        _args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        Ok(Vec::new())
    }

    /// Runs the tool against the workspace seen through `mutator`.
    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError>;
}

/// Decodes a tool's arguments, naming the tool in the error.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &'static str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|err| ToolError::InvalidArguments {
        tool,
        message: err.to_string(),
    })
}

/// The JSON Schema of a tool's argument type, as a plain JSON value.
pub fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(serde_json::Value::Null)
}
