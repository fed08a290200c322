//! The real file reader for `@path`: jailed to the workspace, capped, text only; a
//! directory is listed.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::expand::{FileOutcome, FileReader};
use crate::regular_file::{OpenError, open_regular};

/// Reads `@path` references from the workspace: refuses `..`, absolute paths and symlinks
/// that lead outside the workspace root, refuses binary files (those containing a NUL byte)
/// and keeps at most a cap of bytes (256 KiB by default). A directory is listed (at most
/// [`FsReader::MAX_ENTRIES`] entries).
#[derive(Debug, Clone)]
pub struct FsReader {
    root: PathBuf,
    cap: usize,
}

impl FsReader {
    /// The default cap: 256 KiB.
    pub const DEFAULT_CAP: usize = 256 * 1024;
    /// How many entries of a directory are listed.
    pub const MAX_ENTRIES: usize = 200;

    /// A reader jailed to `workspace_root`, which must exist (it is canonicalized).
    pub fn new(workspace_root: &Path) -> std::io::Result<FsReader> {
        Ok(FsReader {
            root: workspace_root.canonicalize()?,
            cap: FsReader::DEFAULT_CAP,
        })
    }

    /// Sets how many bytes of a file are kept.
    #[must_use]
    pub fn with_cap(mut self, bytes: usize) -> FsReader {
        self.cap = bytes;
        self
    }

    /// Where `path` leads inside the workspace, or the outcome that ends the read.
    fn resolve(&self, path: &str) -> Result<PathBuf, FileOutcome> {
        let refused = |reason: String| FileOutcome::Refused { reason };
        let rel = Path::new(path);
        if rel.components().any(|c| c == Component::ParentDir) {
            return Err(refused(format!("{path} uses `..`")));
        }
        let full = self.root.join(rel);
        let real = match full.canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(FileOutcome::Missing),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(FileOutcome::Missing);
            }
            Err(e) => return Err(refused(format!("{path}: {e}"))),
        };
        if !real.starts_with(&self.root) {
            return Err(refused(format!("{path} is outside the workspace")));
        }
        Ok(real)
    }

    fn list(real: &Path, path: &str) -> FileOutcome {
        let entries = match std::fs::read_dir(real) {
            Ok(entries) => entries,
            Err(e) => {
                return FileOutcome::Refused {
                    reason: format!("{path}: {e}"),
                };
            }
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                // A link to a directory is listed as one, as `ls -F` would not; the model
                // reads it the same way.
                if entry.path().is_dir() {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        names.sort();
        let more = names.len().saturating_sub(FsReader::MAX_ENTRIES);
        names.truncate(FsReader::MAX_ENTRIES);
        FileOutcome::Directory {
            entries: names,
            more,
        }
    }

    fn read_sync(&self, path: &str) -> FileOutcome {
        let refused = |reason: String| FileOutcome::Refused { reason };
        let real = match self.resolve(path) {
            Ok(real) => real,
            Err(outcome) => return outcome,
        };
        if real.is_dir() {
            return FsReader::list(&real, path);
        }
        // A named pipe would block a plain open (and the expansion) forever; a device may
        // do anything when opened. Only regular files are read.
        let file = match open_regular(&real) {
            Ok(file) => file,
            Err(OpenError::NotRegular(_)) => {
                return refused(format!("{path} is not a regular file"));
            }
            Err(OpenError::Io(e)) => return refused(format!("{path}: {e}")),
        };
        let mut bytes = Vec::new();
        let limit = u64::try_from(self.cap)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        if let Err(e) = file.take(limit).read_to_end(&mut bytes) {
            return refused(format!("{path}: {e}"));
        }
        let truncated = bytes.len() > self.cap;
        bytes.truncate(self.cap);
        if bytes.contains(&0) {
            return refused(format!("{path} is a binary file"));
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                // A cut may split a character; anything else invalid is shown lossily.
                let valid = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                if truncated && bytes.len() - valid < 4 {
                    String::from_utf8_lossy(&bytes[..valid]).into_owned()
                } else {
                    String::from_utf8_lossy(&bytes).into_owned()
                }
            }
        };
        FileOutcome::Contents { text, truncated }
    }
}

#[async_trait::async_trait]
impl FileReader for FsReader {
    /// Reads synchronously: files are capped, so the call is short.
    async fn read(&self, path: &str) -> FileOutcome {
        self.read_sync(path)
    }

    async fn is_dir(&self, path: &str) -> bool {
        self.resolve(path).is_ok_and(|real| real.is_dir())
    }
}
