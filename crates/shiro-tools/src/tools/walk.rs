//! What `list_dir`, `glob` and `grep` share: finding where to start inside the workspace and
//! walking the tree on disk with the `ignore` crate, so `.gitignore` and `.ignore` are honoured.
//!
//! The walk goes to disk rather than through the [`Mutator`](crate::Mutator) because a
//! `Mutator` cannot list the workspace root, and because these tools never write. The start
//! is resolved with [`WorkspacePath::resolve`], canonicalised and checked to lie under the
//! canonical root; symbolic links met on the way are reported, never followed; and since the
//! `ignore` walker opens directories by path, every entry it yields is checked beneath the
//! jail's handle on the root (the same inode, through real directories only) before it is
//! reported, and files are read through that handle too.

use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ignore::WalkBuilder;

use crate::mutator::fs_jail::Jail;
use crate::path::{PathError, WorkspacePath};
use crate::tool::ToolError;

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A socket, a FIFO, a device: listed, never read.
    Other,
}

/// Where a walk starts: an existing file or directory inside the workspace.
#[derive(Debug)]
pub(crate) struct Start {
    /// The canonical workspace root.
    root: PathBuf,
    /// The canonical start, under `root`.
    pub full: PathBuf,
    /// Whether the start is a directory (else a file).
    pub is_dir: bool,
}

impl Start {
    /// The start for messages: its workspace path, or "the workspace root".
    pub fn describe(&self) -> String {
        match self.rel() {
            rel if rel.is_empty() => "the workspace root".to_owned(),
            rel => rel,
        }
    }

    /// The start relative to the root, `/`-separated; empty for the root itself.
    pub fn rel(&self) -> String {
        relative(&self.root, &self.full)
    }
}

/// One entry found under the start.
#[derive(Debug)]
pub(crate) struct Found {
    /// The workspace path, `/`-separated, relative to the root.
    pub rel: String,
    /// The path relative to the start, for matching globs against.
    pub below_start: String,
    pub kind: Kind,
}

/// Resolves the directory or file a walking tool was asked to start from.
///
/// `input` of `None`, `""` or `"."` means the workspace root. Blocking: call it from
/// [`blocking`].
pub(crate) fn open(tool: &str, root: &Path, input: Option<&str>) -> Result<Start, ToolError> {
    let canonical = root
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            ToolError::refused(format!(
                "{tool} needs a workspace on disk, and the workspace root {} is not a directory on \
             disk; use read_file on paths you know instead",
                root.display()
            ))
        })?;
    let rel = match input.map(str::trim) {
        None | Some("" | ".") => None,
        Some(text) => match WorkspacePath::resolve(root, text) {
            Ok(path) => Some(path),
            Err(PathError::Empty) => None,
            Err(err) => return Err(ToolError::refused(err.to_string())),
        },
    };
    let Some(rel) = rel else {
        return Ok(Start {
            root: canonical.clone(),
            full: canonical,
            is_dir: true,
        });
    };
    let full = rel.to_fs_path(&canonical);
    let resolved = full.canonicalize().map_err(|err| match err.kind() {
        ErrorKind::NotFound => ToolError::refused(format!(
            "{rel} does not exist; call list_dir on its parent directory or glob to find the \
             right path"
        )),
        _ => ToolError::refused(format!("cannot open {rel}: {err}")),
    })?;
    if !resolved.starts_with(&canonical) {
        return Err(ToolError::refused(format!(
            "{rel} leads outside the workspace through a symbolic link; give a path inside the \
             workspace"
        )));
    }
    let is_dir = resolved.is_dir();
    Ok(Start {
        root: canonical,
        full: resolved,
        is_dir,
    })
}

/// Walks the tree under `start` (which must be a directory) in a stable order: depth first,
/// entries of each directory sorted by name. Ignore files are honoured; `.git` and
/// `.shiro/undo` are never entered or reported; symbolic links are reported, not followed.
///
/// `max_depth` counts from the start (1 lists its direct entries). The walk stops early when
/// `cancel` is set. Blocking: call it from [`blocking`].
pub(crate) fn walk(
    start: &Start,
    max_depth: Option<usize>,
    cancel: &AtomicBool,
    mut visit: impl FnMut(Found),
) {
    // Walk from the root so that ignore files between the root and the start apply, pruning
    // every branch that does not lead to the start. If the start itself is ignored, the user
    // asked for it by name: walk it on its own, with only the ignore files inside it.
    let reached = walk_from(&start.root, start, max_depth, cancel, &mut visit);
    if !reached && !cancel.load(Ordering::Relaxed) {
        walk_from(&start.full, start, max_depth, cancel, &mut visit);
    }
}

/// One walk from `from` (the root or the start); returns whether the start was reached.
fn walk_from(
    from: &Path,
    start: &Start,
    max_depth: Option<usize>,
    cancel: &AtomicBool,
    visit: &mut impl FnMut(Found),
) -> bool {
    let start_depth = start
        .full
        .strip_prefix(from)
        .map_or(0, |rest| rest.components().count());
    let root = Arc::new(start.root.clone());
    let target = Arc::new(start.full.clone());
    let mut builder = WalkBuilder::new(from);
    builder
        .standard_filters(true)
        // Dotfiles such as `.github/` matter in a code base; `.git/` is pruned below.
        .hidden(false)
        // Ignore files above the workspace root are outside the jail and the model's view.
        .parents(false)
        // The global excludes file lives in the user's home: libraries do not read it.
        .git_global(false)
        // A workspace that is not (yet) a git repository still means its `.gitignore`.
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth.map(|depth| depth + start_depth))
        .sort_by_file_name(OsStr::cmp)
        .filter_entry(move |entry| {
            let path = entry.path();
            !is_hidden_internal(&root, path)
                && (path.starts_with(&*target) || target.starts_with(path))
        });
    // The walker opens directories by path; each entry it reports is checked beneath the
    // jail's handle on the root (the same inode, reached through real directories only), so
    // a directory swapped for a link while the walk runs never makes it list what lies
    // outside.
    let Ok(jail) = Jail::open(&start.root) else {
        return false;
    };
    let mut reached = false;
    for entry in builder.build() {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        // Unreadable entries (permissions, races with deletion) are skipped, as `rg` does.
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        if path == start.full {
            reached = true;
            continue;
        }
        let Ok(below) = path.strip_prefix(&start.full) else {
            continue;
        };
        let kind = match entry.file_type() {
            Some(t) if t.is_symlink() => Kind::Symlink,
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        let rel = relative(&start.root, path);
        let inside = matches!(jail.lstat(&rel), Ok(Some(stat)) if Some(stat.st_ino) == entry.ino());
        if !inside {
            continue;
        }
        visit(Found {
            rel,
            below_start: slash_path(below),
            kind,
        });
    }
    reached
}

/// Whether `path` is `.git` (anywhere: submodules have their own) or `.shiro/undo`.
fn is_hidden_internal(root: &Path, path: &Path) -> bool {
    path.file_name() == Some(OsStr::new(".git"))
        || path
            .strip_prefix(root)
            .is_ok_and(|rel| rel == Path::new(".shiro/undo"))
}

/// How many entries directly in `dir` a walk would not show because of ignore files.
/// Blocking.
pub(crate) fn count_direct_entries(root: &Path, dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|entry| !is_hidden_internal(root, &entry.path()))
            .count()
    })
}

impl Start {
    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// `path` relative to `root`, `/`-separated (lossy for names that are not UTF-8).
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).map(slash_path).unwrap_or_default()
}

fn slash_path(path: &Path) -> String {
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// Runs blocking work (a walk, file reads) on Tokio's blocking pool. When the returned future
/// is dropped (the turn was cancelled), `cancel` is set so the work stops early.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce(&AtomicBool) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    struct CancelOnDrop(Arc<AtomicBool>);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(Arc::clone(&cancel));
    let result = tokio::task::spawn_blocking(move || work(&cancel))
        .await
        .unwrap_or_else(|join| {
            Err(ToolError::refused(format!(
                "the tool was interrupted: {join}"
            )))
        });
    drop(guard);
    result
}

/// A glob the model gave, compiled the way `rg -g` and `.gitignore` read one: `*` stays within
/// one path component, and a pattern without `/` matches a file name at any depth.
#[derive(Debug)]
pub(crate) struct PathGlob {
    matcher: globset::GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    /// Compiles `pattern`; the error tells the model how to fix it.
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        let glob = globset::GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| {
                ToolError::refused(format!(
                    "invalid glob {pattern:?}: {}; use `*` within a name, `**` across \
                     directories and `{{a,b}}` for alternatives",
                    err.kind()
                ))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            name_only: !trimmed.contains('/'),
        })
    }

    /// Whether the entry at `below_start` (relative to where the search started) matches.
    pub fn is_match(&self, below_start: &str) -> bool {
        if self.name_only {
            let name = below_start.rsplit('/').next().unwrap_or(below_start);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(below_start)
        }
    }
}
