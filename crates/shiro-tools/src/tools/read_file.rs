//! The `read_file` tool: a text file with line numbers, a window at a time.

use std::fmt::Write as _;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::or_broken_link;
use crate::mutator::{Mutator, MutatorError};
use crate::path::{PathError, WorkspacePath};
use crate::text::{TextError, TextFile};
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};

/// How many lines one call shows when the model does not say.
pub const READ_DEFAULT_LIMIT: usize = 2000;
/// Lines longer than this many characters are cut, so one minified line cannot flood the
/// model's context.
pub const READ_MAX_LINE_CHARS: usize = 2000;

/// Reads a text file through the [`Mutator`], so it is jailed like every other tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

/// The `read_file` tool.
pub fn read_file() -> ReadFile {
    ReadFile
}

/// The arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The 1-based line number to start at (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<usize>,
    /// How many lines to show (default 2000).
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

const NAME: &str = "read_file";

#[async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Reads a UTF-8 text file in the workspace and shows it with line numbers, like `cat -n`: \
         each line is its number, a tab, then the line. Shows up to 2000 lines from `offset` \
         (1-based, default 1); pass `offset` and `limit` to read a long file in parts, as the \
         note at the end says. Lines longer than 2000 characters are cut. Binary files are \
         refused. The line numbers are not part of the file: leave them out of edits."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<ReadFileArgs>()
    }

    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReadFileArgs = parse_args(NAME, args)?;
        let path = WorkspacePath::resolve_file(mutator.root(), &args.path).map_err(|err| {
            ToolError::refused(match err {
                PathError::Root(_) | PathError::TrailingSlash(_) => {
                    format!("{err} (use list_dir to see what is in a directory)")
                }
                other => other.to_string(),
            })
        })?;
        let bytes = match mutator.read(&path).await {
            Ok(bytes) => bytes,
            Err(err) => {
                let err = read_error(&path, err);
                return Err(or_broken_link(mutator, &args.path, err).await);
            }
        };
        let file = TextFile::decode(&bytes).map_err(|err| match err {
            TextError::Binary => ToolError::refused(format!(
                "{path} is a binary file (it contains NUL bytes); read_file shows text only"
            )),
            TextError::NotUtf8(at) => ToolError::refused(format!(
                "{path} is not valid UTF-8 (first bad byte at offset {at}); read_file shows \
                 UTF-8 text only"
            )),
        })?;
        let text = render(&path, &file.body, args.offset, args.limit)?;
        Ok(ToolOutput {
            text,
            changes: Vec::new(),
            ..ToolOutput::default()
        })
    }
}

/// A read error in words that tell the model where to look instead.
fn read_error(path: &WorkspacePath, err: MutatorError) -> ToolError {
    match err {
        MutatorError::NotFound(_) => ToolError::refused(format!(
            "{path} does not exist; use glob or list_dir to find the right path"
        )),
        MutatorError::IsDirectory(_) => ToolError::refused(format!(
            "{path} is a directory; use list_dir to see what is in it"
        )),
        other => ToolError::refused(other.to_string()),
    }
}

/// The numbered window of `body` the arguments ask for, with a note when the file goes on.
fn render(
    path: &WorkspacePath,
    body: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<String, ToolError> {
    if body.is_empty() {
        return Ok(format!("{path} is empty (0 lines)"));
    }
    // `lines` also drops a `\r` before each `\n`, for files with mixed line endings.
    let total = body.lines().count();
    // Models often count from 0; line 0 does not exist, so it means the start.
    let first = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(READ_DEFAULT_LIMIT);
    if limit == 0 {
        return Err(ToolError::refused(
            "limit must be at least 1; leave it out to read up to 2000 lines",
        ));
    }
    if first > total {
        return Err(ToolError::refused(format!(
            "offset {first} is past the end of {path}, which has {total} lines; call read_file \
             with an offset from 1 to {total}"
        )));
    }
    let mut out = String::new();
    let mut last = first - 1;
    for (index, line) in body.lines().enumerate().skip(first - 1).take(limit) {
        last = index + 1;
        let _ = write!(out, "{last:>6}\t");
        match line.char_indices().nth(READ_MAX_LINE_CHARS) {
            Some((cut, _)) => {
                let chars = line.chars().count();
                let _ = writeln!(
                    out,
                    "{}… [line cut: {chars} characters in all]",
                    &line[..cut]
                );
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if last < total {
        let _ = write!(
            out,
            "(file continues: {total} lines in all; call read_file with offset {} to read on)",
            last + 1
        );
    } else {
        // The last line of a window is followed by the footer or by nothing.
        out.pop();
    }
    Ok(out)
}
