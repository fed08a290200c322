//! The detect-only runner: the command runs directly, and stat listings of the workspace taken
//! before and after it name every path it changed. Nothing can restore them; the turn records
//! them so that undo names them.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::process::Command;

use super::{
    BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Ended, plain_command,
};
use crate::mutator::Mutator;
use crate::path::WorkspacePath;

/// Runs commands directly and names what they changed. Its cost grows with the workspace: it
/// lists every entry (`.git` directories and an earlier shiro's state in `.shiro` left out)
/// before and after each command.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detect;

#[async_trait]
impl BashRunner for Detect {
    fn mode(&self) -> CaptureMode {
        CaptureMode::Detect
    }

    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError> {
        let root = mutator.root().to_path_buf();
        let before = listing(root.clone()).await?;
        Ok(Box::new(DetectCapture { root, before }))
    }
}

/// What one entry was: enough to see that it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    kind: u32,
    mode: u32,
    ino: u64,
    /// Length and times, for files and links; directories change those whenever an entry in
    /// them does, and are named only when they appear, go, or change kind or mode.
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

pub(super) type Listing = BTreeMap<PathBuf, Seen>;

async fn listing(root: PathBuf) -> Result<Listing, CaptureError> {
    tokio::task::spawn_blocking(move || {
        let mut out = Listing::new();
        list(&root, Path::new(""), &mut out);
        out
    })
    .await
    .map_err(|err| CaptureError::Other(format!("listing the workspace failed: {err}")))
}

/// Adds every entry below `rel` (relative to `root`) to `out`, `.git` and shiro's own
/// internal paths left out.
pub(super) fn list(root: &Path, rel: &Path, out: &mut Listing) {
    let Ok(entries) = fs::read_dir(root.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        // Never restorable: `.git`, and what an earlier shiro kept in `.shiro`. The rest of
        // `.shiro` is the user's, and a command's change to it is reported like any other.
        let internal = (rel.join(&name).to_str())
            .and_then(|rel| WorkspacePath::from_relative(rel).ok())
            .is_some_and(|path| path.is_internal());
        if name == ".git" || internal {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let path = rel.join(&name);
        let dir = meta.is_dir();
        out.insert(path.clone(), Seen::of(&meta));
        if dir {
            list(root, &path, out);
        }
    }
}

impl Seen {
    /// What `meta` says of an entry.
    pub(super) fn of(meta: &fs::Metadata) -> Seen {
        let dir = meta.is_dir();
        Seen {
            kind: meta.mode() & 0o170_000,
            mode: meta.mode() & 0o7777,
            ino: meta.ino(),
            len: if dir { 0 } else { meta.len() },
            mtime: if dir {
                (0, 0)
            } else {
                (meta.mtime(), meta.mtime_nsec())
            },
            ctime: if dir {
                (0, 0)
            } else {
                (meta.ctime(), meta.ctime_nsec())
            },
        }
    }

    /// Whether it is a directory.
    pub(super) fn is_dir(&self) -> bool {
        self.kind == 0o040_000
    }
}

/// The paths whose entries differ between `before` and `after`, sorted.
pub(super) fn changed<'a>(before: &'a Listing, after: &'a Listing) -> Vec<&'a PathBuf> {
    let mut changed: Vec<&PathBuf> = before
        .iter()
        .filter(|(path, seen)| after.get(*path) != Some(seen))
        .map(|(path, _)| path)
        .chain(after.keys().filter(|path| !before.contains_key(*path)))
        .collect();
    changed.sort();
    changed
}

struct DetectCapture {
    root: PathBuf,
    before: Listing,
}

#[async_trait]
impl CommandCapture for DetectCapture {
    fn command(&self, program: &str, script: &str) -> Command {
        plain_command(&self.root, program, script)
    }

    async fn finish(
        self: Box<Self>,
        _mutator: &dyn Mutator,
        _ended: Ended,
    ) -> Result<Captured, CaptureError> {
        let DetectCapture { root, before } = *self;
        let after = listing(root.clone()).await?;
        let changed = changed(&before, &after);
        let mut notes = Vec::new();
        let mut paths: Vec<WorkspacePath> = Vec::with_capacity(changed.len());
        for path in changed {
            match path.to_str().map(WorkspacePath::from_relative) {
                Some(Ok(path)) => paths.push(path),
                _ => notes.push(format!(
                    "the command also changed {}, whose name shiro cannot hold",
                    path.display()
                )),
            }
        }
        // Paths `.gitignore` leaves out (build output, dependencies) come last.
        let ignore = ignore::gitignore::Gitignore::new(root.join(".gitignore")).0;
        paths.sort_by_cached_key(|path| {
            let is_dir = after
                .get(Path::new(path.as_str()))
                .or_else(|| before.get(Path::new(path.as_str())))
                .is_some_and(Seen::is_dir);
            let ignored = ignore
                .matched_path_or_any_parents(path.as_str(), is_dir)
                .is_ignore();
            (ignored, path.clone())
        });
        Ok(Captured {
            mode: Some(CaptureMode::Detect),
            changes: Vec::new(),
            unrestorable: paths,
            notes,
            git: None,
        })
    }
}
