//! The `list_dir` tool: the entries of one directory, ignore files honoured.

use std::fmt::Write as _;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::walked_output;
use crate::mutator::Mutator;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};
use crate::tools::walk::{self, Hidden, Kind};

/// At most this many entries are shown; a note counts the rest.
pub const LIST_MAX_ENTRIES: usize = 500;

/// Lists one directory of the workspace on disk.
#[derive(Debug, Clone, Default)]
pub struct ListDir {
    /// The paths it leaves out (see [`Hidden`]).
    hidden: Option<Hidden>,
}

/// The `list_dir` tool.
pub fn list_dir() -> ListDir {
    ListDir::default()
}

impl ListDir {
    /// The same tool, leaving out the paths `hidden` hides.
    pub fn hiding(self, hidden: Hidden) -> ListDir {
        ListDir {
            hidden: Some(hidden),
        }
    }
}

/// The arguments of `list_dir`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// The directory, relative to the workspace root (default: the root).
    pub path: Option<String>,
}

const NAME: &str = "list_dir";

#[async_trait]
impl Tool for ListDir {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Lists the entries of one directory in the workspace (default: the root), one path per \
         line relative to the workspace root, sorted; directories end with `/`, symbolic links \
         show their target. Entries matched by .gitignore or .ignore are left out (a note counts \
         them), and so is `.git/`. Shows up to 500 entries. Use glob to find files at any depth."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<ListDirArgs>()
    }

    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ListDirArgs = parse_args(NAME, args)?;
        let root = mutator.root().to_path_buf();
        let hidden = self.hidden.clone();
        let given = args.path.clone();
        let walked = walk::blocking(move |cancel| {
            let start = walk::open(NAME, &root, args.path.as_deref())?.hiding(hidden.as_ref());
            if !start.is_dir {
                return Err(ToolError::refused(format!(
                    "{} is a file, not a directory; use read_file to read it",
                    start.describe()
                )));
            }
            let listing = walk::direct_entries(&start)?;
            let found = walk::walk(
                &start,
                Some(1),
                cancel,
                Vec::new,
                |entries: &mut Vec<(String, Kind)>, _, entry| {
                    if entry.listed_in(&listing) {
                        entries.push((entry.rel(), entry.kind));
                    }
                },
            );
            let mut entries: Vec<(String, Kind)> = found.into_iter().flatten().collect();
            let shown = entries.len();
            entries.sort_unstable_by(|a, b| walk::path_order(&a.0, &b.0));
            entries.truncate(LIST_MAX_ENTRIES);
            let lines: Vec<String> = entries
                .into_iter()
                .map(|(rel, kind)| match kind {
                    Kind::Dir => format!("{rel}/"),
                    Kind::Symlink => match start.jail.read_link(&rel) {
                        Some(target) => format!("{rel} -> {target}"),
                        None => format!("{rel} -> ?"),
                    },
                    Kind::File | Kind::Other => rel,
                })
                .collect();
            let hidden = start.hidden_met();
            let ignored = listing.len().saturating_sub(shown + hidden);
            Ok(start.noting_hidden(render(&start.describe(), &lines, shown, ignored)))
        })
        .await;
        walked_output(mutator, given.as_deref(), walked).await
    }
}

fn render(dir: &str, lines: &[String], shown: usize, ignored: usize) -> String {
    let mut out = String::new();
    if lines.is_empty() {
        let _ = write!(out, "{dir} is empty");
        if ignored > 0 {
            out.push_str(" apart from ignored entries");
        }
        out.push('\n');
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    if shown > lines.len() {
        let _ = writeln!(
            out,
            "({} more entries not shown; list a subdirectory, or use glob with a narrower pattern)",
            shown - lines.len()
        );
    }
    if ignored > 0 {
        let _ = writeln!(
            out,
            "({ignored} {} not shown: ignored by .gitignore, .ignore or .git/info/exclude)",
            if ignored == 1 { "entry" } else { "entries" }
        );
    }
    out.pop();
    out
}
