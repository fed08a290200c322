//! The `Mutator` seam: every file access a tool makes goes through it.
//!
//! Two implementations behave the same way, which one conformance suite checks:
//! [`FsMutator`] works on the real disk under a root, [`MemMutator`] on an in-memory tree.
//! shiro-undo wraps any `Mutator` in a recorder, so tools never know undo exists.

mod fs;
pub(crate) mod fs_jail;
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

/// Which entry is at a path, and whether it changed since it was stamped (see
/// [`Mutator::stamps`]): two stamps of a path are equal while nobody changed what is there.
///
/// A file's or a link's stamp holds its inode, length, mode and modification time, which
/// every write moves; a directory's holds only its mode, since what it holds are other
/// paths' entries. Not the status-change time (`ctime`): a new name or a removed one moves
/// it too, and an undo store that keeps a file under a second name adds and removes such
/// names while the file stays what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stamp {
    /// Nothing is there.
    Absent,
    /// A directory, with its permission bits.
    Dir {
        /// Unix permission bits.
        mode: u32,
    },
    /// A regular file or a link.
    Entry {
        /// The device and inode.
        dev: u64,
        /// The inode on the device.
        ino: u64,
        /// Its length.
        len: u64,
        /// Its permission bits.
        mode: u32,
        /// Its modification time: seconds and nanoseconds.
        modified: (i64, i64),
    },
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
    /// Reading the top of a bash command's overlay layer failed.
    #[error("could not read the command's layer: {0}")]
    Layer(#[source] std::io::Error),
    /// The path names a named pipe, a socket or a device: no tool opens one, since opening
    /// or reading it can block forever or have effects of its own.
    #[error(
        "{path} is a {kind}; shiro never opens named pipes, sockets or devices, so nothing was read or written"
    )]
    NotRegular {
        /// The path concerned.
        path: WorkspacePath,
        /// What it is (`named pipe`, `socket`, `device`).
        kind: &'static str,
    },
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

/// What [`Mutator::real_stat_many`] found at a path: its entry, and the bytes of a regular
/// file short enough to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked {
    /// What the path names.
    pub stat: Stat,
    /// The bytes of a regular file shorter than the limit asked for.
    pub bytes: Option<Vec<u8>>,
}

/// A new version of a file that a caller of [`Mutator::prepare`] is about to move in whole
/// at `path` (see [`Mutator::adopt`]): a regular file outside the workspace, which nothing
/// writes into meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// Where it goes.
    pub path: &'a WorkspacePath,
    /// The file.
    pub source: &'a Path,
}

/// One path of [`Mutator::real_stat_many`]'s default: its entry, then its bytes if it is a
/// file short enough.
async fn look_at<M: Mutator + ?Sized>(
    mutator: &M,
    path: &WorkspacePath,
    read_below: u64,
) -> Result<Looked, MutatorError> {
    let stat = mutator.real_stat(path).await?;
    let bytes = match stat {
        Stat::File { len, .. } if len < read_below => Some(mutator.read(path).await?),
        _ => None,
    };
    Ok(Looked { stat, bytes })
}

/// Every file access a tool makes. Implementations must be safe to share between tasks.
///
/// All operations act on the entry named by the path itself: a symbolic link in the last
/// component is not followed (except by the reads). Reads and [`Mutator::stat`] follow links
/// on parent directories when they stay inside the workspace. Mutations follow no link at all:
/// a link on a parent directory is refused with [`PathError::ThroughLink`], so a caller
/// resolves a path first with [`Mutator::real_path`] and records, writes and restores it under
/// the one name the bytes really have. Every mutation of an internal path (`.git`, see
/// [`WorkspacePath::is_internal`]) is refused; the file tools refuse the wider set of
/// protected paths ([`WorkspacePath::is_protected`]) themselves. Named pipes, sockets and devices are never
/// opened ([`MutatorError::NotRegular`]).
#[async_trait]
pub trait Mutator: Send + Sync {
    /// The workspace root, used to resolve absolute paths the model gives.
    fn root(&self) -> &Path;

    /// What the path names.
    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError>;

    /// The path with every symbolic link on its parent directories resolved: the real path of
    /// the entry it names (the last component itself is not followed). A link that leads
    /// outside the workspace is refused ([`PathError::SymlinkEscape`]); a link that leads to
    /// nothing, or to something that is not a directory, is left as it is, for the operation
    /// to report. The answer can be stale by the time it is used; mutations then refuse the
    /// link they meet rather than follow it.
    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError>;

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

    /// The regular file at `path`, opened for reading as [`Mutator::read`] finds it, for a
    /// caller that reads a big file its own way: a recorder hashing it on several threads.
    /// `Ok(None)` from a mutator that keeps no files on disk (the default); the caller then
    /// reads with [`Mutator::read_with`].
    async fn open_read(&self, path: &WorkspacePath) -> Result<Option<std::fs::File>, MutatorError> {
        let _ = path;
        Ok(None)
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

    /// Removes the directory `path` with everything in it, as `rm -rf` does, for a caller
    /// that listed it first (and, recording, captured what it holds): `listed` holds every
    /// entry under `path`, each directory before its own entries. An entry the listing does
    /// not hold (made since) is never removed: it stays where it is, and so do the
    /// directories that lead to it. Listed entries already gone are skipped, so a call cut
    /// short can be made again.
    ///
    /// `aside` is a path outside the workspace, in a directory the caller owns and removes
    /// later, where nothing is yet. [`FsMutator`] moves the whole tree there with one rename
    /// when it can (the same file system, no mount point in the tree), so the removal costs
    /// the same for any number of files, then moves back what the listing did not hold.
    /// Otherwise, and by default, each listed entry is removed, the deepest first.
    async fn remove_tree(
        &self,
        path: &WorkspacePath,
        listed: &[DirEntry],
        aside: &Path,
    ) -> Result<(), MutatorError> {
        let _ = aside;
        remove_listed(self, path, listed).await
    }

    /// Moves the directory `source`, outside the workspace, to `path`, where nothing is, with
    /// everything in it and with one rename, for a caller that made the tree itself (a
    /// command's layer) and, recording, captured `path` and `listed`, the workspace paths of
    /// every entry under it. The tree must hold only what a workspace may: directories,
    /// regular files with one name each, and symbolic links, none of them protected.
    ///
    /// `Ok(false)`, having done nothing, when it cannot: `source` is on another file system,
    /// something is at `path` now, or the mutator keeps no files on disk (the default). The
    /// caller then makes the entries one at a time.
    async fn move_tree_in(
        &self,
        source: &Path,
        path: &WorkspacePath,
        listed: &[WorkspacePath],
    ) -> Result<bool, MutatorError> {
        let _ = (source, path, listed);
        Ok(false)
    }

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

    /// What [`Mutator::real_stat`] says of each of `paths`, in their order, with the bytes of
    /// each regular file shorter than `read_below`, read as [`Mutator::read`] reads them
    /// (`None` for other entries and longer files). An error is that path's alone. For a
    /// caller that captures many paths at once, a bash command's pre-images: `FsMutator`
    /// looks at them on several threads. The default looks at one after another.
    async fn real_stat_many(
        &self,
        paths: &[WorkspacePath],
        read_below: u64,
    ) -> Vec<Result<Looked, MutatorError>> {
        let mut looked = Vec::with_capacity(paths.len());
        for path in paths {
            looked.push(look_at(self, path, read_below).await);
        }
        looked
    }

    /// The [`Stamp`] of what is at each of `paths` itself (reached through real directories
    /// only, as [`Mutator::real_stat`] does), in their order; `None` where it cannot be told.
    /// An undo recorder stamps what each of its turn's changes left, so that it can tell a
    /// later change by someone else from the turn's own. The default tells none.
    async fn stamps(&self, paths: &[WorkspacePath]) -> Vec<Option<Stamp>> {
        vec![None; paths.len()]
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

    /// Makes `path` the regular file at `source` — a file outside the workspace that nothing
    /// else uses, such as a bash command's file in its overlay layer — with permission bits
    /// `mode`, replacing a file or link there as [`Mutator::write`] does. `source` is gone
    /// afterwards. `FsMutator` moves it with one rename when it is on the workspace's file
    /// system and has no other name, so the bytes are not copied; otherwise, and by
    /// default, it is read, written, and removed. A file over 64 MiB is streamed.
    async fn adopt(
        &self,
        source: &Path,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(), MutatorError> {
        copy_in(self, source, path, mode).await
    }

    /// Gives the regular file at `path` the second name `to`: a path outside the workspace,
    /// not taken yet, on the file's file system. A recorder about to see `path` replaced whole
    /// keeps the old version so, without copying its bytes. Done only when the file has no
    /// other name; `Ok(false)`, having done nothing, when it is not a lone regular file, when
    /// `to` is on another file system, or when the mutator keeps no files on disk (the
    /// default).
    ///
    /// While both names exist, a write into the file through either reaches both. No
    /// mutator write does: `FsMutator` writes in place only into a file with one name, and
    /// replaces any other (see [`Mutator::overwrite`]).
    async fn link_out(&self, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
        let _ = (path, to);
        Ok(false)
    }

    /// Says that the caller is about to change `paths` (each one, or entries under it), so
    /// that a recorder captures their pre-images now, in one batch with one flush, rather
    /// than one flush per change. A path the caller then leaves alone costs nothing more.
    /// `incoming` names the new versions the caller will move in whole at some of the paths,
    /// so that a recorder can read each with the version it replaces (a big file's two
    /// versions are hashed together, what they share once). The default, for mutators that
    /// record nothing, does nothing.
    async fn prepare(
        &self,
        paths: &[WorkspacePath],
        incoming: &[Incoming<'_>],
    ) -> Result<(), MutatorError> {
        let _ = (paths, incoming);
        Ok(())
    }

    /// Removes the temporary files that writes of `paths` killed before their rename left
    /// behind (see [`is_partial_write_of`]), for crash recovery; returns how many. Only
    /// regular files whose names match are removed. Mutators that write no temporary files
    /// have nothing to do.
    async fn remove_partial_writes(&self, paths: &[WorkspacePath]) -> Result<usize, MutatorError> {
        let _ = paths;
        Ok(0)
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

/// [`Mutator::remove_tree`] one entry at a time: the listed entries, the deepest first, then
/// the directory itself. What is gone already is skipped; a directory that still holds an
/// entry the listing did not is left.
async fn remove_listed<M: Mutator + ?Sized>(
    mutator: &M,
    path: &WorkspacePath,
    listed: &[DirEntry],
) -> Result<(), MutatorError> {
    for entry in listed.iter().rev() {
        let removed = match entry.stat {
            Stat::Dir { .. } => mutator.remove_dir(&entry.path).await,
            _ => mutator.remove_file(&entry.path).await,
        };
        match removed {
            Ok(()) | Err(MutatorError::NotFound(_) | MutatorError::DirectoryNotEmpty(_)) => {}
            Err(err) => return Err(err),
        }
    }
    match mutator.remove_dir(path).await {
        Err(MutatorError::DirectoryNotEmpty(_)) => Ok(()),
        other => other,
    }
}

/// [`Mutator::adopt`] by copying: reads `source` (never through a link), writes it at
/// `path`, then removes it.
async fn copy_in<M: Mutator + ?Sized>(
    mutator: &M,
    source: &Path,
    path: &WorkspacePath,
    mode: u32,
) -> Result<(), MutatorError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    /// Bigger files are streamed rather than read whole.
    const WHOLE_FILE_MAX: u64 = 64 << 20;
    let failed = |source| MutatorError::Io {
        op: "read the new version of",
        path: path.clone(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(source)
        .map_err(failed)?;
    let len = file.metadata().map_err(failed)?.len();
    if len <= WHOLE_FILE_MAX {
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.read_to_end(&mut bytes).map_err(failed)?;
        mutator.write(path, &bytes, Some(mode)).await?;
    } else {
        mutator.overwrite_from(path, &mut file, len, mode).await?;
    }
    // Left over only costs space; the caller's layer goes as a whole.
    let _ = std::fs::remove_file(source);
    Ok(())
}

/// The suffix of the temporary files [`FsMutator`] writes new bytes to before renaming them
/// into place: `.<name>.<16 hex digits>.shiro-tmp`, in the target's directory.
pub const PARTIAL_WRITE_SUFFIX: &str = ".shiro-tmp";

/// Whether `name` (an entry of `path`'s directory) is a temporary file that a write of `path`
/// may have left when it was killed before its rename: `.<name>.<16 hex digits>.shiro-tmp`,
/// with `<name>` cut to 200 bytes. The random part makes the name unpredictable (it is also
/// created with `O_EXCL`, so no planted file or link is ever written through); crash recovery
/// lists the directory and removes what matches for every path the interrupted operation
/// touched, and nothing else: a user's own `.x.shiro-tmp` is never taken for one.
pub fn is_partial_write_of(path: &WorkspacePath, name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|rest| rest.strip_prefix(partial_write_stem(path)))
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(PARTIAL_WRITE_SUFFIX))
    else {
        return false;
    };
    rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The temporary name for a write of `path` with `random` as its unpredictable part.
pub(crate) fn partial_write_name(path: &WorkspacePath, random: u64) -> String {
    format!(
        ".{}.{random:016x}{PARTIAL_WRITE_SUFFIX}",
        partial_write_stem(path)
    )
}

/// `path`'s file name cut to 200 bytes, so a temporary name stays within the usual 255-byte
/// limit.
fn partial_write_stem(path: &WorkspacePath) -> &str {
    let name = path.file_name();
    let mut end = name.len().min(200);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// What one step of [`resolve_links`] found at a real path (relative to the root).
pub(crate) enum Found {
    /// A directory.
    Dir,
    /// A symbolic link, with its target.
    Link(String),
    /// Anything else, or nothing.
    Other,
}

/// How many links one resolution may follow, as on Linux.
pub(crate) const MAX_LINKS: usize = 40;

/// See [`Mutator::real_path`]: resolves the links on `path`'s parent directories, asking
/// `lookup` what is at each real path (relative to the root, never through a link). `root` is
/// the workspace's absolute path, against which absolute link targets are read.
pub(crate) fn resolve_links(
    path: &WorkspacePath,
    root: &Path,
    lookup: &mut dyn FnMut(&str) -> Result<Found, MutatorError>,
) -> Result<WorkspacePath, MutatorError> {
    let components: Vec<&str> = path.components().collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(PathError::Empty.into());
    };
    let mut real: Vec<String> = Vec::new();
    let mut hops = 0;
    for (at, part) in parents.iter().enumerate() {
        let here = joined(&real, part);
        let led = match lookup(&here)? {
            Found::Dir => {
                let mut dir = real.clone();
                dir.push((*part).to_owned());
                Led::Dir(dir)
            }
            Found::Link(target) => follow_dir(&real, &target, root, &mut hops, lookup)?,
            Found::Other => Led::Nowhere,
        };
        match led {
            Led::Dir(dir) => real = dir,
            Led::Nowhere => {
                // Missing, not a directory, or a link to nothing: kept as given, for the
                // operation to report.
                real.extend(parents[at..].iter().map(|s| (*s).to_owned()));
                break;
            }
            Led::Outside => {
                return Err(PathError::SymlinkEscape {
                    path: path.to_string(),
                    link: here,
                }
                .into());
            }
            Led::Loop => {
                return Err(PathError::SymlinkLoop {
                    path: path.to_string(),
                    link: here,
                }
                .into());
            }
        }
    }
    real.push((*last).to_owned());
    Ok(WorkspacePath::from_relative(&real.join("/"))?)
}

/// Where a link leads.
enum Led {
    /// To the real directory with these components (none: the root).
    Dir(Vec<String>),
    /// To nothing, or to something that is not a directory.
    Nowhere,
    /// Outside the root.
    Outside,
    /// Round a loop (more than [`MAX_LINKS`] links).
    Loop,
}

/// Follows the link `target` found in the real directory `base`.
fn follow_dir(
    base: &[String],
    target: &str,
    root: &Path,
    hops: &mut usize,
    lookup: &mut dyn FnMut(&str) -> Result<Found, MutatorError>,
) -> Result<Led, MutatorError> {
    *hops += 1;
    if *hops > MAX_LINKS {
        return Ok(Led::Loop);
    }
    let (mut cur, rest): (Vec<String>, &str) = if target.starts_with('/') {
        match inside_root(target, root) {
            Some(inside) => (Vec::new(), inside),
            None => return Ok(Led::Outside),
        }
    } else {
        (base.to_vec(), target)
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if cur.pop().is_none() {
                    return Ok(Led::Outside);
                }
            }
            name => match lookup(&joined(&cur, name))? {
                Found::Dir => cur.push(name.to_owned()),
                Found::Link(next) => match follow_dir(&cur, &next, root, hops, lookup)? {
                    Led::Dir(dir) => cur = dir,
                    other => return Ok(other),
                },
                Found::Other => return Ok(Led::Nowhere),
            },
        }
    }
    Ok(Led::Dir(cur))
}

/// The part of the absolute link target `target` below `root` (`""` for the root itself),
/// or `None` when it lies outside.
fn inside_root<'t>(target: &'t str, root: &Path) -> Option<&'t str> {
    let inside = target.strip_prefix(root.to_str()?.trim_end_matches('/'))?;
    (inside.is_empty() || inside.starts_with('/')).then_some(inside)
}

/// Where the link `target`, found in the directory `link_dir` (relative to the root, `""` for
/// the root), leads, as components relative to the root (none: the root itself), read
/// lexically; `None` when it leads outside `root`.
pub(crate) fn link_destination(link_dir: &str, target: &str, root: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = Vec::new();
    let rest = if target.starts_with('/') {
        inside_root(target, root)?
    } else {
        parts.extend(
            link_dir
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        target
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other.to_owned()),
        }
    }
    Some(parts)
}

/// `dir/name`, or `name` at the root.
fn joined(dir: &[String], name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{}/{name}", dir.join("/"))
    }
}

/// Creates every missing ancestor directory of `path`, outermost first, one
/// [`Mutator::create_dir`] call each (so a recorder sees each directory a turn creates).
pub async fn create_parent_dirs(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
) -> Result<(), MutatorError> {
    for dir in path.ancestors() {
        match mutator.real_stat(&dir).await? {
            Stat::Dir { .. } => {}
            Stat::Absent => mutator.create_dir(&dir).await?,
            // Mutations follow no link: the caller resolved the path with `real_path`, so a
            // link here leads nowhere (or appeared since), and is not a directory to use.
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
