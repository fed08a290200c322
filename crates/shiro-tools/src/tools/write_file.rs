//! The `write_file` tool: create or replace a whole file.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::{resolve, write_creating_parents};
use crate::mutator::{Mutator, Stat};
use crate::path::WorkspacePath;
use crate::tool::{Change, Tool, ToolError, ToolOutput, parse_args, schema_of};

const NAME: &str = "write_file";

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path of the file, relative to the workspace root.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// Creates a file, or replaces the whole content of an existing one.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

/// The `write_file` tool.
pub fn write_file() -> WriteFile {
    WriteFile
}

#[async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Create a file, or replace the entire content of an existing file. Missing parent \
         directories are created. `content` is written exactly as given, so include every line \
         of the file. To change part of an existing file, prefer edit_file, multi_edit or \
         apply_patch. An existing file keeps its permissions."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<WriteFileArgs>()
    }

    fn is_mutating(&self) -> bool {
        true
    }

    async fn touched_paths(
        &self,
        mutator: &dyn Mutator,
        args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        let args: WriteFileArgs = parse_args(NAME, args.clone())?;
        Ok(vec![resolve(mutator, &args.path).await?])
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: WriteFileArgs = parse_args(NAME, args)?;
        let path = resolve(mutator, &args.path).await?;
        let change = match mutator.stat(&path).await? {
            Stat::Absent => Change::Added { path: path.clone() },
            Stat::File { .. } => {
                if mutator.read(&path).await? == args.content.as_bytes() {
                    return Ok(ToolOutput {
                        text: format!("{path} already has this content; nothing was changed"),
                        changes: Vec::new(),
                        ..ToolOutput::default()
                    });
                }
                Change::Modified { path: path.clone() }
            }
            Stat::Dir { .. } => {
                return Err(ToolError::refused(format!(
                    "{path} is a directory; nothing was changed (name a file inside it)"
                )));
            }
            Stat::Symlink { target } => {
                return Err(ToolError::refused(format!(
                    "{path} is a symbolic link to {target}; nothing was changed (write the file it points to)"
                )));
            }
        };
        write_creating_parents(mutator, &path, args.content.as_bytes()).await?;
        let verb = if matches!(change, Change::Added { .. }) {
            "created"
        } else {
            "replaced"
        };
        Ok(ToolOutput {
            text: match args.content.len() {
                1 => format!("{change}\n{verb} {path} (1 byte)"),
                len => format!("{change}\n{verb} {path} ({len} bytes)"),
            },
            changes: vec![change],
            ..ToolOutput::default()
        })
    }
}
