//! Steps the file tools share: resolving a path, loading a text file for editing, writing a
//! file without leaving directories behind when the write fails, and saying what is wrong
//! with a symbolic link that leads nowhere, and the output of a walk.

use crate::mutator::{MAX_LINKS, Mutator, MutatorError, Stat, link_destination};
use crate::path::{PathError, WorkspacePath};
use crate::text::TextFile;
use crate::tool::{ToolError, ToolOutput};

/// Resolves a path the model gave for a file tool to change: relative to the workspace root,
/// then to its real path (links on its parent directories resolved, see
/// [`Mutator::real_path`]), which is what is changed, recorded and restored. A path that is
/// protected, under any spelling, is refused, and so is one that names a directory (see
/// [`WorkspacePath::resolve_file`]).
pub(crate) async fn resolve(
    mutator: &dyn Mutator,
    input: &str,
) -> Result<WorkspacePath, ToolError> {
    let given = WorkspacePath::resolve_file(mutator.root(), input)?;
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

/// `err`, unless `input` names a path that is, or goes through, a symbolic link that loops or
/// whose target does not exist: then an error that says which link, and what is wrong with it.
/// For a reading tool whose read or walk failed; it looks only when there was an error.
pub(crate) async fn or_broken_link(
    mutator: &dyn Mutator,
    input: &str,
    err: ToolError,
) -> ToolError {
    let Ok(path) = WorkspacePath::resolve(mutator.root(), input) else {
        return err;
    };
    // The outermost broken link is the one to mend first.
    for at in path.ancestors().into_iter().chain([path.clone()]) {
        if let Some(broken) = broken_link(mutator, &at).await {
            return ToolError::refused(if at == path {
                format!("{at} is {broken}")
            } else {
                format!("{path} goes through {at}, {broken}")
            });
        }
    }
    err
}

/// The output of a walking tool (glob, grep, list_dir) from what its walk `walked` from the
/// path `given` (the root when none) came to; a failed walk says which link broke it, if
/// one did ([`or_broken_link`]).
pub(crate) async fn walked_output(
    mutator: &dyn Mutator,
    given: Option<&str>,
    walked: Result<String, ToolError>,
) -> Result<ToolOutput, ToolError> {
    match walked {
        Ok(text) => Ok(ToolOutput {
            text,
            changes: Vec::new(),
            ..ToolOutput::default()
        }),
        Err(err) => Err(or_broken_link(mutator, given.unwrap_or_default(), err).await),
    }
}

/// A symbolic link that leads to no file or directory, with the links followed from it: the
/// link's path, then each link's target as stored.
enum BrokenLink {
    /// The links come back round to one already followed.
    Loop(Vec<String>),
    /// The last link's target does not exist.
    Dangling(Vec<String>),
}

impl std::fmt::Display for BrokenLink {
    /// The link described after "… is": `a symbolic link that loops (a -> b -> a)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrokenLink::Loop(chain) => {
                write!(f, "a symbolic link that loops ({})", arrows(chain))
            }
            BrokenLink::Dangling(chain) => match chain.as_slice() {
                [_, target] => write!(f, "a symbolic link to {target}, which does not exist"),
                _ => write!(
                    f,
                    "a symbolic link whose target does not exist ({})",
                    arrows(chain)
                ),
            },
        }
    }
}

/// `a -> b -> c`, the middle left out of a long chain.
fn arrows(chain: &[String]) -> String {
    const SHOWN: usize = 6;
    if chain.len() <= SHOWN {
        return chain.join(" -> ");
    }
    let (head, tail) = (&chain[..SHOWN / 2], &chain[chain.len() - 2..]);
    format!("{} -> … -> {}", head.join(" -> "), tail.join(" -> "))
}

/// What is wrong with `link`, when it is a symbolic link that loops or leads to nothing;
/// `None` when it is no link, leads to something, leads outside the workspace (the jail's
/// own error says so) or cannot be looked at.
async fn broken_link(mutator: &dyn Mutator, link: &WorkspacePath) -> Option<BrokenLink> {
    let mut at = mutator.real_path(link).await.ok()?;
    let Stat::Symlink { mut target } = mutator.stat(&at).await.ok()? else {
        return None;
    };
    let mut chain = vec![link.to_string()];
    let mut followed: Vec<WorkspacePath> = Vec::new();
    loop {
        if followed.contains(&at) || followed.len() >= MAX_LINKS {
            return Some(BrokenLink::Loop(chain));
        }
        chain.push(target.clone());
        let dir = at.parent().map(|dir| dir.to_string()).unwrap_or_default();
        let next = link_destination(&dir, &target, mutator.root())?;
        // An empty destination is the workspace root: a directory.
        let next = WorkspacePath::from_relative(&next.join("/")).ok()?;
        followed.push(at);
        at = match mutator.real_path(&next).await {
            Ok(real) => real,
            Err(MutatorError::Path(PathError::SymlinkLoop { .. })) => {
                return Some(BrokenLink::Loop(chain));
            }
            Err(_) => return None,
        };
        match mutator.stat(&at).await {
            Ok(Stat::Absent) | Err(MutatorError::NotFound(_)) => {
                return Some(BrokenLink::Dangling(chain));
            }
            Ok(Stat::Symlink { target: further }) => target = further,
            Ok(Stat::File { .. } | Stat::Dir { .. }) | Err(_) => return None,
        }
    }
}

/// `1 occurrence`, `3 occurrences`.
pub(crate) fn occurrences(count: usize) -> String {
    if count == 1 {
        "1 occurrence".to_owned()
    } else {
        format!("{count} occurrences")
    }
}
