//! The `edit_file` and `multi_edit` tools: exact string replacement in one file.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::{load_text, occurrences, resolve};
use crate::mutator::Mutator;
use crate::path::WorkspacePath;
use crate::tool::{Change, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Path of the file, relative to the workspace root.
    #[serde(alias = "file_path", alias = "filePath")]
    pub path: String,
    /// The exact text to replace, including whitespace and indentation.
    #[serde(alias = "oldString")]
    pub old_string: String,
    /// The text to put in its place.
    #[serde(alias = "newString")]
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default, alias = "replaceAll")]
    pub replace_all: bool,
}

/// One edit of `multi_edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditSpec {
    /// The exact text to replace.
    #[serde(alias = "oldString")]
    pub old_string: String,
    /// The text to put in its place.
    #[serde(alias = "newString")]
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default, alias = "replaceAll")]
    pub replace_all: bool,
}

/// Arguments of `multi_edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiEditArgs {
    /// Path of the file, relative to the workspace root.
    #[serde(alias = "file_path", alias = "filePath")]
    pub path: String,
    /// The edits, applied in order; each sees the result of the previous one.
    pub edits: Vec<EditSpec>,
}

/// Replaces an exact, unique string in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

/// Applies several replacements to one file, all or nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct MultiEdit;

/// The `edit_file` tool.
pub fn edit_file() -> EditFile {
    EditFile
}

/// The `multi_edit` tool.
pub fn multi_edit() -> MultiEdit {
    MultiEdit
}

/// Applies one replacement to `body`, returning how many occurrences were replaced, or the
/// reason it cannot be applied (for the model).
fn replace(
    body: &mut String,
    path: &WorkspacePath,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<usize, String> {
    if old.is_empty() {
        return Err(
            "old_string is empty; give the exact text to replace (use write_file to create a file)"
                .to_owned(),
        );
    }
    if old == new {
        return Err(
            "old_string and new_string are identical, so the edit would change nothing".to_owned(),
        );
    }
    let count = body.matches(old).count();
    match count {
        0 => Err(format!(
            "old_string was not found in {path}; read the file again and copy the text exactly, \
             including whitespace and indentation"
        )),
        1 => {
            *body = body.replacen(old, new, 1);
            Ok(1)
        }
        _ if replace_all => {
            *body = body.replace(old, new);
            Ok(count)
        }
        _ => Err(format!(
            "old_string occurs {count} times in {path}; include more surrounding lines to make \
             it unique, or set replace_all to true to replace every occurrence"
        )),
    }
}

#[async_trait]
impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn description(&self) -> &'static str {
        "Replace an exact string in a file. `old_string` must match the file's text exactly \
         (whitespace and indentation included) and occur exactly once, unless `replace_all` is \
         true. Include enough surrounding lines to make it unique. The file keeps its line \
         endings, byte order mark and permissions. Read the file before editing it."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<EditFileArgs>()
    }

    fn is_mutating(&self) -> bool {
        true
    }

    async fn touched_paths(
        &self,
        mutator: &dyn Mutator,
        args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        let args: EditFileArgs = parse_args(self.name(), args.clone())?;
        Ok(vec![resolve(mutator, &args.path).await?])
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: EditFileArgs = parse_args(self.name(), args)?;
        let path = resolve(mutator, &args.path).await?;
        let mut file = load_text(mutator, &path).await?;
        let old = file.normalize(&args.old_string).into_owned();
        let new = file.normalize(&args.new_string).into_owned();
        let count = replace(&mut file.body, &path, &old, &new, args.replace_all)
            .map_err(|reason| ToolError::refused(format!("{reason}; nothing was changed")))?;
        mutator.write(&path, &file.encode(), None).await?;
        let change = Change::Modified { path: path.clone() };
        Ok(ToolOutput {
            text: format!("{change}\nreplaced {} in {path}", occurrences(count)),
            changes: vec![change],
            ..ToolOutput::default()
        })
    }
}

#[async_trait]
impl Tool for MultiEdit {
    fn name(&self) -> &'static str {
        "multi_edit"
    }

    fn description(&self) -> &'static str {
        "Apply several exact string replacements to one file, in order, all or nothing: each \
         edit sees the result of the previous one, and if any edit fails no edit is applied. \
         Each `old_string` must match exactly and be unique unless its `replace_all` is true. \
         Prefer this to several edit_file calls on the same file."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<MultiEditArgs>()
    }

    fn is_mutating(&self) -> bool {
        true
    }

    async fn touched_paths(
        &self,
        mutator: &dyn Mutator,
        args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        let args: MultiEditArgs = parse_args(self.name(), args.clone())?;
        Ok(vec![resolve(mutator, &args.path).await?])
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: MultiEditArgs = parse_args(self.name(), args)?;
        let path = resolve(mutator, &args.path).await?;
        if args.edits.is_empty() {
            return Err(ToolError::refused(
                "edits is empty; give at least one edit; nothing was changed",
            ));
        }
        let mut file = load_text(mutator, &path).await?;
        let original = file.body.clone();
        let total = args.edits.len();
        let mut replaced = 0;
        for (index, edit) in args.edits.iter().enumerate() {
            let old = file.normalize(&edit.old_string).into_owned();
            let new = file.normalize(&edit.new_string).into_owned();
            replaced +=
                replace(&mut file.body, &path, &old, &new, edit.replace_all).map_err(|reason| {
                    ToolError::refused(format!(
                        "edit {} of {total} failed: {reason}; no edit was applied",
                        index + 1
                    ))
                })?;
        }
        if file.body == original {
            return Err(ToolError::refused(format!(
                "the edits leave {path} unchanged (later edits undo earlier ones); nothing was written"
            )));
        }
        mutator.write(&path, &file.encode(), None).await?;
        let change = Change::Modified { path: path.clone() };
        let edits = if total == 1 {
            "1 edit".to_owned()
        } else {
            format!("{total} edits")
        };
        Ok(ToolOutput {
            text: format!(
                "{change}\napplied {edits} to {path} ({} replaced)",
                occurrences(replaced)
            ),
            changes: vec![change],
            ..ToolOutput::default()
        })
    }
}
