//! The tools a model can call.

mod apply_patch;
mod background;
mod bash;
mod common;
mod edit_file;
mod glob;
mod grep;
mod list_dir;
mod read_file;
#[cfg(test)]
mod tests;
mod walk;
mod write_file;

pub use apply_patch::apply_patch;
pub use background::{BashKill, BashKillArgs, BashOutput, BashOutputArgs, bash_kill, bash_output};
pub use bash::{
    BASH_BACKGROUND_SETTLE, BASH_DEFAULT_TIMEOUT_SECS, BASH_MAX_LISTED_PATHS,
    BASH_MAX_OUTPUT_BYTES, BASH_MAX_TIMEOUT_SECS, Bash, BashArgs, Live, bash,
};
pub use edit_file::{
    EditFile, EditFileArgs, EditSpec, MultiEdit, MultiEditArgs, edit_file, multi_edit,
};
pub use glob::{GLOB_MAX_PATHS, Glob, GlobArgs, glob};
pub use grep::{
    GREP_MAX_BYTES, GREP_MAX_FILE_BYTES, GREP_MAX_LINE_CHARS, GREP_MAX_MATCHES, Grep, GrepArgs,
    grep,
};
pub use list_dir::{LIST_MAX_ENTRIES, ListDir, ListDirArgs, list_dir};
pub use read_file::{READ_DEFAULT_LIMIT, READ_MAX_LINE_CHARS, ReadFile, ReadFileArgs, read_file};
pub use walk::Hidden;
pub use write_file::{WriteFile, WriteFileArgs, write_file};

use std::sync::Arc;

use crate::tool::Tool;

/// Every tool, in the order a model is shown them: the file-changing tools first. Its `bash`
/// captures nothing; see [`all_with`].
pub fn all() -> Vec<Box<dyn Tool>> {
    all_with(bash())
}

/// Every tool, with `bash` as given (its runner decides how commands are captured).
pub fn all_with(bash: Bash) -> Vec<Box<dyn Tool>> {
    all_hiding(bash, |_| None)
}

/// Every tool, with `bash` as given, and the walking tools (`list_dir`, `glob`, `grep`) each
/// leaving out what `hidden` gives for its name (see [`Hidden`]).
pub fn all_hiding(bash: Bash, hidden: impl Fn(&str) -> Option<Hidden>) -> Vec<Box<dyn Tool>> {
    let background = bash.background().cloned();
    let mut tools: Vec<Box<dyn Tool>> = vec![
        Box::new(write_file()),
        Box::new(edit_file()),
        Box::new(multi_edit()),
        Box::new(apply_patch()),
        Box::new(read_file()),
        Box::new(match hidden("list_dir") {
            Some(hidden) => list_dir().hiding(hidden),
            None => list_dir(),
        }),
        Box::new(match hidden("glob") {
            Some(hidden) => glob().hiding(hidden),
            None => glob(),
        }),
        Box::new(match hidden("grep") {
            Some(hidden) => grep().hiding(hidden),
            None => grep(),
        }),
        Box::new(bash),
    ];
    // With background commands, the tools that read and stop them.
    if let Some(background) = background {
        tools.push(Box::new(bash_output(Arc::clone(&background))));
        tools.push(Box::new(bash_kill(background)));
    }
    tools
}

/// The tool called `name`, if there is one.
pub fn find(name: &str) -> Option<Box<dyn Tool>> {
    all().into_iter().find(|tool| tool.name() == name)
}
