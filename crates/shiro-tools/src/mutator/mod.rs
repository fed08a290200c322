//! The `Mutator` seam: every file access a tool makes goes through it.
//!
//! Two implementations behave the same way, which one conformance suite checks:
//! [`FsMutator`] works on the real disk under a root, [`MemMutator`] on an in-memory tree.
//! shiro-undo wraps any `Mutator` in a recorder, so tools never know undo exists.

mod fs;
mod hooked;
mod mem;

use std::path::Path;

use async_trait::async_trait;

pub use fs::{FsMutator, sync_data_all};
pub use hooked::{AfterHook, Hook, Hooked, Mutation};
pub use mem::MemMutator;

use crate::path::{PathError, WorkspacePath};

/// The mode a file gets when it is created without one.
pub const DEFAULT_FILE_MODE: u32 = 0o644;
/// The mode a directory gets when it is created.
pub const DEFAULT_DIR_MODE: u32 = 0o755;

/// What a path names, without following a symbolic link in the last component.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stat {
    /// Nothing is there.
    Absent,
    /// A regular file with its permission bits (`0o7777` mask) and length.
    File {
        /// Unix permission bits.
        mode: u32,
        /// Length in bytes.
        len: u64,
    },
    /// A directory with its permission bits.
    Dir {
        /// Unix permission bits.
        mode: u32,
    },
    /// A symbolic link and its target, as stored in the link.
    Symlink {
        /// The link's target text.
        target: String,
    },
}

impl Stat {
    /// Whether something is at the path.
    pub fn exists(&self) -> bool {
        !matches!(self, Stat::Absent)
    }

    /// A word for the kind of entry, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Stat::Absent => "absent",
            Stat::File { .. } => "file",
            Stat::Dir { .. } => "directory",
            Stat::Symlink { .. } => "symlink",
        }
    }
}

/// An entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's workspace path.
    pub path: WorkspacePath,
    /// What it is.
    pub stat: Stat,
}

/// Why a file operation failed. Every variant names the path concerned.
#[derive(Debug, thiserror::Error)]
pub enum MutatorError {
    /// The path was refused by the workspace jail.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Nothing exists at the path (or its parent directory is missing).
    #[error("{0} does not exist")]
    NotFound(WorkspacePath),
    /// A directory was found where a file or symlink was expected.
    #[error("{0} is a directory")]
    IsDirectory(WorkspacePath),
    /// A file or symlink was found where a directory was expected (also on a parent).
    #[error("{0} is not a directory")]
    NotDirectory(WorkspacePath),
    /// The directory to remove still has entries.
    #[error("directory {0} is not empty")]
    DirectoryNotEmpty(WorkspacePath),
    /// Something already exists where a new entry was to be created.
    #[error("{0} already exists")]
    AlreadyExists(WorkspacePath),
    /// The operation was cut short before it finished (its worker task was cancelled).
    #[error("file operation interrupted: {0}")]
    Interrupted(String),
    /// Flushing the workspace's writes to disk failed.
    #[error("could not flush the workspace to disk: {0}")]
    Sync(#[source] std::io::Error),
    /// Any other I/O failure.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed.
        op: &'static str,
        /// The path concerned.
        path: WorkspacePath,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Every file access a tool makes. Implementations must be safe to share between tasks.
///
/// All operations act on the entry named by the path itself: a symbolic link in the last
/// component is not followed (except by [`Mutator::read`]), while links on parent directories
/// are followed only when they stay inside the workspace. Every mutation of a protected path
/// (see [`WorkspacePath::is_protected`]) is refused.
#[async_trait]
pub trait Mutator: Send + Sync {
    /// The workspace root, used to resolve absolute paths the model gives.
    fn root(&self) -> &Path;

    /// What the path names.
    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError>;

    /// The bytes of a regular file (a symlink is followed when it stays in the workspace).
    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError>;

    /// Like [`Mutator::read`], into `buf`'s allocation (its contents are replaced): a caller
    /// that reads big files over and over reuses one buffer instead of getting fresh memory,
    /// which the system must clear and map page by page, each time. The default reads into
    /// a new buffer.
    async fn read_into(&self, path: &WorkspacePath, buf: Vec<u8>) -> Result<Vec<u8>, MutatorError> {
        drop(buf);
        self.read(path).await
    }

    /// Like [`Mutator::read`], handing the bytes to `sink` a piece at a time instead of
    /// returning them, for a caller that only looks at them once (hashing a file): a big file
    /// then never needs memory of its size. Returns how many bytes there were. The default
    /// reads the whole file and hands it over at once.
    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        let bytes = self.read(path).await?;
        sink(&bytes);
        Ok(bytes.len() as u64)
    }

    /// The entries of a directory, sorted by path.
    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError>;

    /// Replaces the file (or symlink) at `path` with `bytes` atomically: readers see the old
    /// bytes or the new, never a mix. With `mode` `None`, an existing regular file keeps its
    /// mode and a new one gets [`DEFAULT_FILE_MODE`]. The parent directory must exist.
    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError>;

    /// Changes the permission bits of a file or directory.
    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError>;

    /// Creates one directory; its parent must exist and the path must be free.
    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError>;

    /// Creates a symbolic link at `path` pointing at `target`; the path must be free.
    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError>;

    /// Removes a file or a symbolic link.
    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError>;

    /// Removes an empty directory.
    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError>;

    /// Moves a file or symlink to `to`, replacing a file or symlink there. The parent of `to`
    /// must exist. Directories are not moved.
    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError>;

    /// What is at `path` itself, reached through real directories only: like
    /// [`Mutator::stat`], but a path with an ancestor that is not a directory (a file, a
    /// symbolic link, or nothing) is [`Stat::Absent`]. What a link on the way reaches is
    /// another path's entry, never this one's; a restore uses this never to act through a
    /// link.
    ///
    /// The default asks [`Mutator::stat`] once per ancestor; a mutator on a disk answers in
    /// one step.
    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        for ancestor in path.ancestors() {
            if !matches!(self.stat(&ancestor).await?, Stat::Dir { .. }) {
                return Ok(Stat::Absent);
            }
        }
        self.stat(path).await
    }

    /// Makes `path` a regular file holding `bytes` with permission bits `mode`, for a caller
    /// that can finish the job after a crash (a restore, which journals first).
    ///
    /// A regular file with no other hard link is overwritten in place, as `cp` does: its inode,
    /// owner and extended attributes stay, and no file is created and deleted. That is not
    /// atomic: a reader, or a crash, may see a mix of the old and new bytes. Anything else (no
    /// file, a link, a file with other names) is replaced as [`Mutator::write`] does, so the
    /// bytes never reach another name of the file. The parent directory must exist.
    /// `FsMutator` reads a file of 64 KiB or more first and writes only the blocks that
    /// differ, so that restoring a small edit of a big file writes (and flushes) little.
    ///
    /// The default is [`Mutator::write`].
    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.write(path, bytes, Some(mode)).await
    }

    /// Like [`Mutator::overwrite`], with the `len` bytes read from `source` as they are
    /// written, so a big file needs no memory of its size. `source` must yield exactly `len`
    /// bytes; fewer is an error (`UnexpectedEof`), and more are not read. The default reads
    /// them all, then overwrites.
    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn std::io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        let bytes = read_exactly(source, len).map_err(|source| MutatorError::Io {
            op: "read the bytes to write to",
            path: path.clone(),
            source,
        })?;
        self.overwrite(path, &bytes, mode).await
    }

    /// Makes the changes made so far to `paths` durable — their contents, and their entries
    /// in their parent directories (so removals and renames too): after it returns, a power
    /// cut cannot lose them.
    ///
    /// Single writes are atomic but not individually flushed, so a caller that must know its
    /// changes reached the disk (an undo about to drop its journal) calls this once for all
    /// its paths. Only those are flushed, never the rest of the file system, whose unflushed
    /// writes (a build's, say) can take seconds. Mutators without a disk have nothing to do.
    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        let _ = paths;
        Ok(())
    }
}

/// Where [`FsMutator`] writes `path`'s new bytes before renaming them into place:
/// `.<name>.shiro-tmp` in the same directory. A process killed between the two leaves this
/// file behind; crash recovery removes it for every path the interrupted operation touched.
pub fn partial_write_path(path: &WorkspacePath) -> WorkspacePath {
    // Keep the name within the usual 255-byte limit; a shortened name stays in the same
    // directory, and writes there are serialised by the undo store's lock.
    let mut name = path.file_name();
    let mut end = name.len().min(200);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name = &name[..end];
    let temp = format!(".{name}.shiro-tmp");
    match path.parent() {
        Some(parent) => parent.join(&temp),
        None => WorkspacePath::from_relative(&temp),
    }
    .unwrap_or_else(|_| path.clone())
}

/// Creates every missing ancestor directory of `path`, outermost first, one
/// [`Mutator::create_dir`] call each (so a recorder sees each directory a turn creates).
pub async fn create_parent_dirs(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
) -> Result<(), MutatorError> {
    for dir in path.ancestors() {
        match mutator.stat(&dir).await? {
            Stat::Dir { .. } => {}
            Stat::Absent => mutator.create_dir(&dir).await?,
            // A link to a directory inside the workspace is followed, as the disk does.
            Stat::Symlink { .. } if mutator.read_dir(&dir).await.is_ok() => {}
            Stat::File { .. } | Stat::Symlink { .. } => {
                return Err(MutatorError::NotDirectory(dir));
            }
        }
    }
    Ok(())
}

/// Reads exactly `len` bytes from `source`; fewer is an error (`UnexpectedEof`).
pub(crate) fn read_exactly(source: &mut dyn std::io::Read, len: u64) -> std::io::Result<Vec<u8>> {
    let capacity = usize::try_from(len).map_err(std::io::Error::other)?;
    let mut bytes = Vec::with_capacity(capacity);
    std::io::Read::read_to_end(&mut std::io::Read::take(source, len), &mut bytes)?;
    if bytes.len() != capacity {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(bytes)
}
