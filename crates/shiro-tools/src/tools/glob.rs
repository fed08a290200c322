//! The `glob` tool: files whose paths match a pattern, ignore files honoured.

use std::fmt::Write as _;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::walked_output;
use crate::mutator::Mutator;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};
use crate::tools::walk::{self, Hidden, Kind, PathGlob};

/// At most this many paths are shown; a note counts the rest.
pub const GLOB_MAX_PATHS: usize = 500;

/// Finds files by a glob pattern in the workspace on disk.
#[derive(Debug, Clone, Default)]
pub struct Glob {
    /// The paths it leaves out (see [`Hidden`]).
    hidden: Option<Hidden>,
}

/// The `glob` tool.
pub fn glob() -> Glob {
    Glob::default()
}

impl Glob {
    /// The same tool, leaving out the paths `hidden` hides.
    pub fn hiding(self, hidden: Hidden) -> Glob {
        Glob {
            hidden: Some(hidden),
        }
    }
}

/// The arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The pattern, e.g. `**/*.rs`, `src/*.{ts,tsx}`, or `Cargo.toml` (a pattern without `/`
    /// matches file names at any depth).
    pub pattern: String,
    /// The directory to search, relative to the workspace root (default: the root); the
    /// pattern is matched against paths relative to it.
    pub path: Option<String>,
}

const NAME: &str = "glob";

#[async_trait]
impl Tool for Glob {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Finds files whose paths match a glob pattern, searching the workspace (or the directory \
         `path`) at every depth. `*` matches within one path component, `**` across \
         directories, `{a,b}` either; a pattern without `/` matches the file name at any depth \
         (`*.rs` finds every Rust file, `src/*.rs` only those directly in src). Prints matching \
         files relative to the workspace root, sorted, up to 500. Files matched by .gitignore \
         or .ignore, and `.git/`, are skipped."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<GlobArgs>()
    }

    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: GlobArgs = parse_args(NAME, args)?;
        let glob = PathGlob::new(&args.pattern)?;
        let root = mutator.root().to_path_buf();
        let hidden = self.hidden.clone();
        let given = args.path.clone();
        let walked = walk::blocking(move |cancel| {
            let start = walk::open(NAME, &root, args.path.as_deref())?.hiding(hidden.as_ref());
            if !start.is_dir {
                return Err(ToolError::refused(format!(
                    "{} is a file, not a directory; pass a directory as path, or leave it out \
                     to search the whole workspace",
                    start.describe()
                )));
            }
            let found = walk::walk(
                &start,
                None,
                cancel,
                Vec::new,
                |paths: &mut Vec<String>, beneath, entry| {
                    let wanted = matches!(entry.kind, Kind::File | Kind::Symlink)
                        && glob.is_match(&entry.below_start())
                        && beneath.holds(&entry);
                    if wanted {
                        paths.push(entry.rel());
                    }
                },
            );
            let mut paths: Vec<String> = found.into_iter().flatten().collect();
            let matched = paths.len();
            walk::first_in_order(&mut paths, GLOB_MAX_PATHS);
            Ok(start.noting_hidden(render(&args.pattern, &start.describe(), &paths, matched)))
        })
        .await;
        walked_output(mutator, given.as_deref(), walked).await
    }
}

fn render(pattern: &str, dir: &str, paths: &[String], matched: usize) -> String {
    if paths.is_empty() {
        return format!(
            "no files match {pattern:?} under {dir} (files matched by .gitignore or .ignore are \
             skipped)"
        );
    }
    let mut out = paths.join("\n");
    if matched > paths.len() {
        let _ = write!(
            out,
            "\n({} more matching files not shown, {matched} in all; narrow the pattern or pass a \
             subdirectory as path)",
            matched - paths.len()
        );
    }
    out
}
