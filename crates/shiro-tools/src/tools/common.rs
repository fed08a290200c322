//! Steps the file tools share: resolving a path, loading a text file for editing, and
//! writing a file without leaving directories behind when the write fails.

use crate::mutator::{Mutator, MutatorError, Stat};
use crate::path::{PathError, WorkspacePath};
use crate::text::TextFile;
use crate::tool::ToolError;

/// Resolves a path the model gave for a file tool to change: relative to the workspace root,
/// then to its real path (links on its parent directories resolved, see
/// [`Mutator::real_path`]), which is what is changed, recorded and restored. A path that is
/// protected, under any spelling, is refused.
pub(crate) async fn resolve(
    mutator: &dyn Mutator,
    input: &str,
) -> Result<WorkspacePath, ToolError> {
    let given = WorkspacePath::resolve(mutator.root(), input)?;
    let real = mutator.real_path(&given).await?;
    if given.is_protected() || real == given && real.is_protected() {
        return Err(PathError::Protected(input.to_owned()).into());
    }
    if real.is_protected() {
        return Err(PathError::ProtectedThroughLink {
            path: input.to_owned(),
            real: real.to_string(),
        }
        .into());
    }
    Ok(real)
}

/// Loads `path` for a text edit, refusing what cannot be edited as text.
pub(crate) async fn load_text(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
) -> Result<TextFile, ToolError> {
    match mutator.stat(path).await? {
        Stat::File { .. } => {}
        Stat::Absent => {
            return Err(ToolError::refused(format!(
                "{path} does not exist; nothing was changed (use write_file to create a new file)"
            )));
        }
        Stat::Dir { .. } => {
            return Err(ToolError::refused(format!(
                "{path} is a directory; nothing was changed (name a file)"
            )));
        }
        Stat::Symlink { target } => {
            return Err(ToolError::refused(format!(
                "{path} is a symbolic link to {target}; nothing was changed (edit the file it points to)"
            )));
        }
    }
    let bytes = mutator.read(path).await?;
    TextFile::decode(&bytes)
        .map_err(|err| ToolError::refused(format!("{path} {err}; nothing was changed")))
}

/// Writes `bytes` to `path`, creating missing parent directories first. If the write fails,
/// the directories it created are removed again, so a failed call leaves no trace.
pub(crate) async fn write_creating_parents(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    bytes: &[u8],
) -> Result<(), MutatorError> {
    if path.is_protected() {
        return Err(PathError::Protected(path.to_string()).into());
    }
    let mut created = Vec::new();
    let mut result = Ok(());
    for dir in path.ancestors() {
        // `path` is a real path (see `resolve`): a link on it leads nowhere, or appeared since.
        match mutator.real_stat(&dir).await {
            Ok(Stat::Dir { .. }) => continue,
            Ok(Stat::Absent) => {}
            Ok(Stat::File { .. } | Stat::Symlink { .. }) => {
                result = Err(MutatorError::NotDirectory(dir));
                break;
            }
            Err(err) => {
                result = Err(err);
                break;
            }
        }
        if let Err(err) = mutator.create_dir(&dir).await {
            result = Err(err);
            break;
        }
        created.push(dir);
    }
    if result.is_ok() {
        result = mutator.write(path, bytes, None).await;
    }
    if result.is_err() {
        for dir in created.iter().rev() {
            // Best effort: the directory is empty because the write never happened.
            let _ = mutator.remove_dir(dir).await;
        }
    }
    result
}

/// `1 occurrence`, `3 occurrences`.
pub(crate) fn occurrences(count: usize) -> String {
    if count == 1 {
        "1 occurrence".to_owned()
    } else {
        format!("{count} occurrences")
    }
}
