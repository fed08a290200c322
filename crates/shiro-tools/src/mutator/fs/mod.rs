//! The real disk under a workspace root.

use std::collections::BTreeSet;
use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::fs_jail::{DirFd, Jail, c_to_string, io_error, not_regular, stat_from};
use super::{
    DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, DirEntry, Looked, Mutator, MutatorError, Stat,
    partial_write_name, read_exactly,
};
use crate::path::{PathError, WorkspacePath};
use crate::split::on_threads;

mod aside;
mod overwrite;
mod read;
mod stamp;
mod swap;

use overwrite::{Source, overwrite};
use swap::{swap, swap_in, swaps};

/// How many bytes [`Mutator::read_with`] reads at a time: small enough to stay in the
/// processor's cache, big enough that the calls cost nothing beside the copying.
const READ_PIECE: usize = 64 * 1024;

/// A [`Mutator`] over the real file system under a root directory.
///
/// Every access goes through one directory handle on the root, opened when the mutator is
/// made: paths are resolved beneath it by the kernel (`openat2` with `RESOLVE_BENEATH` and
/// `RESOLVE_NO_SYMLINKS` on Linux, a walk of `O_NOFOLLOW` opens elsewhere), never joined
/// into a string and opened, so no link, planted in a checkout or swapped in by a race, can
/// send a read or a write outside. Mutations follow no link at all; reads follow links that
/// stay inside the workspace.
///
/// Writes go to a temporary file with an unpredictable name, created with `O_EXCL` in the
/// same directory, then are renamed over the target, so a reader or a crashed process sees
/// either the old or the new bytes. Single writes are not flushed (no `fsync`, as `cp` and
/// editors' plain saves): callers that need durability call [`Mutator::sync`] with the
/// paths they changed.
///
/// Each operation runs on tokio's blocking pool, so it never stalls the async tasks beside
/// it; [`FsMutator::inline`] runs them on the calling thread instead.
#[derive(Debug, Clone)]
pub struct FsMutator {
    inner: Arc<Roots>,
    inline: bool,
}

#[derive(Debug)]
struct Roots {
    /// The root as given, for resolving absolute paths a model sends.
    root: PathBuf,
    /// The handle on the root that every access goes through.
    jail: Jail,
    /// Makes temporary names unpredictable: keyed from the system's randomness.
    random: RandomState,
    /// Makes each temporary name of this process differ from the last.
    counter: AtomicU64,
}

impl FsMutator {
    /// A mutator for the directory `root`, which must exist.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        let canonical = root.canonicalize()?;
        let jail = Jail::open(&canonical)?;
        Ok(Self {
            inner: Arc::new(Roots {
                root,
                jail,
                random: RandomState::new(),
                counter: AtomicU64::new(0),
            }),
            inline: false,
        })
    }

    /// The same mutator, running each operation on the calling thread rather than handing it
    /// to tokio's blocking pool: for a program that does one thing at a time (a command-line
    /// command), where each handoff costs more than the operation itself (an undo of 1,000
    /// files made about 5,000 of them). It blocks the async task that calls it, so a server
    /// or anything with concurrent tasks on few threads should keep the default.
    #[must_use]
    pub fn inline(self) -> Self {
        Self {
            inline: true,
            ..self
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Roots) -> Result<T, MutatorError> + Send + 'static,
    ) -> Result<T, MutatorError> {
        if self.inline {
            return op(&self.inner);
        }
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || op(&inner))
            .await
            .unwrap_or_else(|join| Err(MutatorError::Interrupted(join.to_string())))
    }
}

impl Roots {
    /// The parent of a mutation's target, which must not be protected.
    fn parent_for_change(&self, path: &WorkspacePath) -> Result<DirFd<'_>, MutatorError> {
        if path.is_internal() {
            return Err(PathError::Protected(path.to_string()).into());
        }
        self.jail.parent_for_change(path)
    }

    /// A fresh unpredictable temporary name for a write of `path`.
    fn temp_name(&self, path: &WorkspacePath) -> String {
        let mut hasher = self.random.build_hasher();
        hasher.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
        hasher.write_u32(std::process::id());
        partial_write_name(path, hasher.finish())
    }
}

/// What is at `name` in `dir` (a link's target read too), or [`Stat::Absent`].
fn stat_in(dir: &impl AsFd, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    let name = path.file_name();
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Stat::Absent),
        Err(errno) => return Err(io_error("stat", path, errno.into())),
    };
    stat_from(&stat, path, || {
        rustix::fs::readlinkat(dir, name, Vec::new())
            .map(|target| c_to_string(&target))
            .map_err(|errno| io_error("readlink", path, errno.into()))
    })
}

/// See [`Mutator::stat`]: links on the parents are followed when they stay inside.
fn stat(roots: &Roots, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    let jail = &roots.jail;
    let dir = match jail.parent_nolinks(path) {
        Ok(dir) => dir,
        // A link on the way (`ENOTDIR` when it is the parent itself, opened as a directory
        // without following it), or a file: resolved in user space, then opened for real.
        Err(Errno::LOOP | Errno::NOTDIR) => {
            let real = jail.real_path(path)?;
            match jail.parent_nolinks(&real) {
                Ok(dir) => return stat_in(&dir, &real),
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(Stat::Absent),
                Err(errno) => return Err(io_error("stat", path, errno.into())),
            }
        }
        Err(Errno::NOENT) => return Ok(Stat::Absent),
        Err(errno) => return Err(io_error("stat", path, errno.into())),
    };
    stat_in(&dir, path)
}

/// See [`Mutator::real_stat`]: one open of the parent through real directories only.
fn real_stat(roots: &Roots, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    look(roots, path, 0).map(|looked| looked.stat)
}

/// See [`Mutator::real_stat_many`]: the paths in runs, one per thread, the first on this one.
/// A run whose thread cannot be started, or fails, is looked at here.
fn look_many(
    roots: &Roots,
    paths: &[WorkspacePath],
    read_below: u64,
) -> Vec<Result<Looked, MutatorError>> {
    let threads = if paths.len() < LOOK_IN_PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, LOOK_THREADS)
    };
    // Paths in one directory come together (a listed tree's do): its handle is opened once.
    let look_run = |run: &[WorkspacePath]| -> Vec<Result<Looked, MutatorError>> {
        let mut open: Option<(Option<&str>, Result<DirFd<'_>, Errno>)> = None;
        let mut looked = Vec::with_capacity(run.len());
        for path in run {
            let parent = path.as_str().rsplit_once('/').map(|(parent, _)| parent);
            let dir = match open.take() {
                Some((name, dir)) if name == parent => dir,
                _ => roots.jail.parent_nolinks(path),
            };
            looked.push(look_in(roots, &dir, path, read_below));
            open = Some((parent, dir));
        }
        looked
    };
    on_threads(
        paths,
        paths.len().div_ceil(threads),
        |_, run| look_run(run),
        |_, run| look_run(run),
    )
    .into_iter()
    .flatten()
    .collect()
}

/// A file read as a plain reader, without `File`'s own `read_to_end` (see [`look_in`]).
struct Plain<'f>(&'f fs::File);

impl std::io::Read for Plain<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::io::Read::read(&mut self.0, buf)
    }
}

/// Below this many paths, [`look_many`] looks at them on the calling thread alone.
const LOOK_IN_PARALLEL_FROM: usize = 64;
/// [`look_many`] uses at most this many threads.
const LOOK_THREADS: usize = 4;

/// One path of [`look_many`] (and [`real_stat`], which reads nothing): one open of the
/// parent through real directories only, then the file opened in it, which spares walking
/// the path a second time.
fn look(roots: &Roots, path: &WorkspacePath, read_below: u64) -> Result<Looked, MutatorError> {
    look_in(roots, &roots.jail.parent_nolinks(path), path, read_below)
}

/// [`look`], with the parent of `path` opened already (or the error opening it gave).
fn look_in(
    roots: &Roots,
    parent: &Result<DirFd<'_>, Errno>,
    path: &WorkspacePath,
    read_below: u64,
) -> Result<Looked, MutatorError> {
    let dir = match parent {
        Ok(dir) => dir,
        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {
            return Ok(Looked {
                stat: Stat::Absent,
                bytes: None,
            });
        }
        Err(errno) => return Err(io_error("stat", path, (*errno).into())),
    };
    let stat = stat_in(dir, path)?;
    let bytes = match stat {
        Stat::File { len, .. } if len < read_below => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
            let name = path.file_name();
            // Without touching its access time where the file is ours (else `EPERM`): reading
            // many old files would otherwise make each inode dirty, to be written back.
            let opened = match rustix::fs::openat(dir, name, flags | OFlags::NOATIME, Mode::empty())
            {
                Err(Errno::PERM) => rustix::fs::openat(dir, name, flags, Mode::empty()),
                opened => opened,
            };
            let file = match opened {
                Ok(fd) => regular_file(fd, path)?,
                // Replaced (by a link, say) since it was looked at: read as `read` reads.
                Err(_) => open_file(roots, path)?,
            };
            // Room for the length just seen and one byte more, which finds the end; the
            // reader is not `File` itself, whose `read_to_end` asks the size and the position
            // again first.
            let mut bytes = Vec::with_capacity(usize::try_from(len).map_or(0, |len| len + 1));
            std::io::Read::read_to_end(&mut Plain(&file), &mut bytes)
                .map_err(|err| io_error("read", path, err))?;
            Some(bytes)
        }
        _ => None,
    };
    Ok(Looked { stat, bytes })
}

/// Opens the regular file `path` names for reading, following links inside the workspace;
/// anything else is refused without being read (a named pipe is opened without blocking and
/// never read).
fn open_file(roots: &Roots, path: &WorkspacePath) -> Result<fs::File, MutatorError> {
    regular_file(roots.jail.open_following(path, OFlags::RDONLY)?, path)
}

/// The entry opened at `path` as a file to read, if it is a regular file.
fn regular_file(fd: OwnedFd, path: &WorkspacePath) -> Result<fs::File, MutatorError> {
    let stat = rustix::fs::fstat(&fd).map_err(|errno| io_error("read", path, errno.into()))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(fs::File::from(fd)),
        FileType::Directory => Err(MutatorError::IsDirectory(path.clone())),
        other => Err(not_regular(path, other)),
    }
}

/// Replaces `path` with a new file holding `bytes`, atomically: a temporary file with an
/// unpredictable name, created with `O_EXCL` (so it is never an existing file, nor a link
/// planted under that name), then renamed over the target (or, when big, exchanged with it:
/// see [`swap::SWAP_IN_FROM`]).
fn write_atomic(
    roots: &Roots,
    path: &WorkspacePath,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), MutatorError> {
    let dir = roots.parent_for_change(path)?;
    let now = stat_in(&dir, path)?;
    let mode = match (mode, &now) {
        (_, Stat::Dir { .. }) => return Err(MutatorError::IsDirectory(path.clone())),
        (Some(mode), _) => mode,
        (None, Stat::File { mode, .. }) => *mode,
        (None, Stat::Absent | Stat::Symlink { .. }) => DEFAULT_FILE_MODE,
    };
    let failed = |err: io::Error| io_error("write", path, err);
    let (temp, fd) = create_temp(roots, &dir, path).map_err(failed)?;
    let written = (|| -> io::Result<()> {
        let mut file = fs::File::from(fd);
        file.write_all(bytes)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        drop(file);
        if !(swaps(&now, bytes.len() as u64) && swap(&dir, &temp, path)?) {
            rustix::fs::renameat(&dir, temp.as_str(), &dir, path.file_name())?;
        }
        Ok(())
    })();
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
        return Err(failed(err));
    }
    Ok(())
}

/// Moves the file `source` to `path` with one rename, as [`Mutator::adopt`] says; `false`
/// when it must be copied instead: it is on another file system, or has other names (a
/// rename would make them names of a workspace file).
fn move_in(
    roots: &Roots,
    source: &Path,
    path: &WorkspacePath,
    mode: u32,
) -> Result<bool, MutatorError> {
    let dir = roots.parent_for_change(path)?;
    let now = stat_in(&dir, path)?;
    if let Stat::Dir { .. } = now {
        return Err(MutatorError::IsDirectory(path.clone()));
    }
    let failed = |err: io::Error| io_error("move the new version into", path, err);
    let file = rustix::fs::open(
        source,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| failed(errno.into()))?;
    let stat = rustix::fs::fstat(&file).map_err(|errno| failed(errno.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || stat.st_nlink != 1 {
        return Ok(false);
    }
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|errno| failed(errno.into()))?;
    if u64::try_from(stat.st_size).is_ok_and(|len| swaps(&now, len))
        && swap_in(roots, &dir, source, path)?
    {
        return Ok(true);
    }
    match rustix::fs::renameat(rustix::fs::CWD, source, &dir, path.file_name()) {
        Ok(()) => Ok(true),
        Err(Errno::XDEV) => Ok(false),
        Err(errno) => Err(failed(errno.into())),
    }
}

/// See [`Mutator::move_tree_in`]: one rename, refused (`false`) where `path` is taken or
/// `source` is on another file system.
fn move_tree_in(roots: &Roots, source: &Path, path: &WorkspacePath) -> Result<bool, MutatorError> {
    let dir = roots.parent_for_change(path)?;
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        source,
        &dir,
        path.file_name(),
        rustix::fs::RenameFlags::NOREPLACE,
    ) {
        Ok(()) => Ok(true),
        // Made since the caller looked, or another file system (`EINVAL`: one that cannot
        // rename without replacing).
        Err(Errno::EXIST | Errno::XDEV | Errno::INVAL | Errno::NOSYS) => Ok(false),
        Err(errno) => Err(io_error("move the new directory into", path, errno.into())),
    }
}

/// See [`Mutator::link_out`].
fn link_out(roots: &Roots, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
    // A path the jail refuses to change is not kept either: the capture that asked reads it.
    let Ok(dir) = roots.parent_for_change(path) else {
        return Ok(false);
    };
    let failed = |errno: Errno| io_error("keep the old version of", path, errno.into());
    // `st_nlink` is narrower than `u64` on some targets.
    #[allow(clippy::useless_conversion)]
    let lone = |stat: &rustix::fs::Stat, names: u64| {
        FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && u64::from(stat.st_nlink) == names
    };
    let before = match rustix::fs::statat(&dir, path.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if lone(&stat, 1) => stat,
        Ok(_) | Err(Errno::NOENT | Errno::NOTDIR) => return Ok(false),
        Err(errno) => return Err(failed(errno)),
    };
    match rustix::fs::linkat(
        &dir,
        path.file_name(),
        rustix::fs::CWD,
        to,
        AtFlags::empty(),
    ) {
        Ok(()) => {}
        // Another file system (or mount), a file system without hard links, links refused
        // (`fs.protected_hardlinks`), the name taken, or the file gone since: the caller
        // copies instead.
        Err(
            Errno::XDEV
            | Errno::PERM
            | Errno::MLINK
            | Errno::NOENT
            | Errno::OPNOTSUPP
            | Errno::EXIST,
        ) => {
            return Ok(false);
        }
        Err(errno) => return Err(failed(errno)),
    }
    // The name may have been given to another file, or the file another name, meanwhile.
    match rustix::fs::lstat(to) {
        Ok(after) if after.st_ino == before.st_ino && after.st_dev == before.st_dev => {
            if lone(&after, 2) {
                return Ok(true);
            }
        }
        Ok(_) => {}
        Err(errno) => return Err(failed(errno)),
    }
    rustix::fs::unlink(to).map_err(failed)?;
    Ok(false)
}

/// Creates a new temporary file for a write of `path` in `dir`, owner-only until its mode is
/// set; a name that happens to be taken is skipped for another.
fn create_temp(
    roots: &Roots,
    dir: &DirFd<'_>,
    path: &WorkspacePath,
) -> io::Result<(String, OwnedFd)> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut tries = 0;
    loop {
        let name = roots.temp_name(path);
        match rustix::fs::openat(dir, name.as_str(), flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) if tries < 16 => tries += 1,
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// Changes the mode of the file or directory `path` names in `dir`, never through a link:
/// the entry is opened without following one and its mode set through that handle.
fn chmod_nofollow(dir: &DirFd<'_>, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
    let failed = |errno: Errno| io_error("chmod", path, errno.into());
    let name = path.file_name();
    let mode = Mode::from_raw_mode(mode);
    let handle = OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // A readable file or directory: its own handle.
    let flags = handle | OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    if let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) {
        let stat = rustix::fs::fstat(&fd).map_err(failed)?;
        return match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile | FileType::Directory => {
                rustix::fs::fchmod(&fd, mode).map_err(failed)
            }
            other => Err(not_regular(path, other)),
        };
    }
    // One that cannot be read (mode 000, say): a path-only handle, whose mode is set through
    // `/proc/self/fd`, which names that very file.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let fd =
            rustix::fs::openat(dir, name, handle | OFlags::PATH, Mode::empty()).map_err(failed)?;
        let stat = rustix::fs::fstat(&fd).map_err(failed)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile | FileType::Directory => {}
            FileType::Symlink => return Err(symlink_has_no_mode(path)),
            other => return Err(not_regular(path, other)),
        }
        let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match rustix::fs::chmod(proc.as_str(), mode) {
            Ok(()) => return Ok(()),
            Err(Errno::NOENT) => {}
            Err(errno) => return Err(failed(errno)),
        }
    }
    // No `/proc`: by name, which the caller checked is a file or a directory a moment ago.
    rustix::fs::chmodat(dir, name, mode, AtFlags::empty()).map_err(failed)
}

fn symlink_has_no_mode(path: &WorkspacePath) -> MutatorError {
    MutatorError::Io {
        op: "chmod",
        path: path.clone(),
        source: io::Error::other("symbolic links have no mode"),
    }
}

/// Flushes the data of every file (`fdatasync`), on several threads when there are many:
/// each flush waits for the device, and concurrent flushes share the wait (on the machine of
/// `docs/performance.md`, a thousand take about a third of the time they take one after
/// another). Shared with the undo store, which flushes its blobs the same way.
pub fn sync_data_all(files: &[&fs::File]) -> io::Result<()> {
    const THREADS: usize = 8;
    if files.len() < 2 * THREADS {
        return files.iter().try_for_each(|file| file.sync_data());
    }
    on_threads(
        files,
        files.len().div_ceil(THREADS),
        |_, part| part.iter().try_for_each(|file| file.sync_data()),
        |_, _| Err(io::Error::other("a flushing thread failed")),
    )
    .into_iter()
    .collect()
}

/// See [`Mutator::remove_partial_writes`]. A directory that cannot be reached through real
/// directories, or listed, is skipped.
fn remove_partial_writes(roots: &Roots, paths: &[WorkspacePath]) -> usize {
    let mut by_dir: std::collections::BTreeMap<String, Vec<&WorkspacePath>> =
        std::collections::BTreeMap::new();
    for path in paths {
        let dir = path
            .parent()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        by_dir.entry(dir).or_default().push(path);
    }
    let mut removed = 0;
    for (dir, paths) in by_dir {
        let Ok(fd) = roots
            .jail
            .open_nolinks(&dir, OFlags::RDONLY | OFlags::DIRECTORY)
        else {
            continue;
        };
        let Ok(listing) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        for entry in listing.flatten() {
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if !paths
                .iter()
                .any(|path| super::is_partial_write_of(path, name))
            {
                continue;
            }
            let regular = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile);
            if regular && rustix::fs::unlinkat(&fd, name, AtFlags::empty()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// See [`Mutator::sync`]: flushes each path that is a file or a directory, then each parent
/// directory (an entry created, removed or renamed lives there). Each is opened beneath the
/// root through real directories only; one that is gone by now (another program removed it,
/// or the same restore removed its directory) has nothing left to flush.
fn flush(roots: &Roots, paths: &[WorkspacePath]) -> io::Result<()> {
    let mut files = Vec::new();
    let mut dirs = BTreeSet::new();
    for path in paths {
        if let Ok(Some(stat)) = roots.jail.lstat(path.as_str()) {
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => files.push(path.as_str().to_owned()),
                FileType::Directory => {
                    dirs.insert(path.as_str().to_owned());
                }
                _ => {}
            }
        }
        dirs.insert(
            path.parent()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
        );
    }
    flush_each(roots, &files)?;
    flush_each(roots, &dirs.into_iter().collect::<Vec<_>>())
}

/// Flushes each file or directory (relative to the root), a few hundred open at a time.
fn flush_each(roots: &Roots, paths: &[String]) -> io::Result<()> {
    const OPEN_AT_ONCE: usize = 256;
    for chunk in paths.chunks(OPEN_AT_ONCE) {
        let mut files = Vec::with_capacity(chunk.len());
        for rel in chunk {
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
            let opened = match roots.jail.open_nolinks(rel, flags) {
                // A file that cannot be read (mode 200) can still be flushed through a
                // handle for writing.
                Err(Errno::ACCESS) => roots.jail.open_nolinks(rel, OFlags::WRONLY),
                other => other,
            };
            match opened {
                Ok(fd) => files.push(fs::File::from(fd)),
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        sync_data_all(&files.iter().collect::<Vec<_>>())?;
    }
    Ok(())
}

#[async_trait]
impl Mutator for FsMutator {
    fn root(&self) -> &Path {
        &self.inner.root
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| stat(roots, &path)).await
    }

    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| roots.jail.real_path(&path))
            .await
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        self.read_into(path, Vec::new()).await
    }

    async fn read_into(
        &self,
        path: &WorkspacePath,
        mut buf: Vec<u8>,
    ) -> Result<Vec<u8>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let mut file = open_file(roots, &path)?;
            buf.clear();
            std::io::Read::read_to_end(&mut file, &mut buf)
                .map_err(|err| io_error("read", &path, err))?;
            Ok(buf)
        })
        .await
    }

    /// Inline, through one buffer of 64 KiB; otherwise a piece of 1 MiB at a time on the
    /// blocking pool (see `read.rs`).
    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        read::read_with(self, path, sink).await
    }

    async fn open_read(&self, path: &WorkspacePath) -> Result<Option<fs::File>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| open_file(roots, &path).map(Some))
            .await
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let failed = |errno: Errno| io_error("list", &path, errno.into());
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            let fd = roots.jail.open_following(&path, flags)?;
            let listing = rustix::fs::Dir::read_from(&fd).map_err(failed)?;
            let mut entries = Vec::new();
            for entry in listing {
                let entry = entry.map_err(failed)?;
                let Ok(name) = entry.file_name().to_str() else {
                    continue;
                };
                if name == "." || name == ".." {
                    continue;
                }
                let child = path.join(name)?;
                match stat_in(&fd, &child) {
                    Ok(Stat::Absent) => {}
                    Ok(stat) => entries.push(DirEntry { path: child, stat }),
                    // Named pipes, sockets and devices are not listed: no tool may touch them.
                    Err(MutatorError::NotRegular { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
        .await
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        if self.inline {
            // No copy of the bytes for another thread.
            return write_atomic(&self.inner, path, bytes, mode);
        }
        let path = path.clone();
        let bytes = bytes.to_vec();
        self.blocking(move |roots| write_atomic(roots, &path, &bytes, mode))
            .await
    }

    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| real_stat(roots, &path)).await
    }

    /// On several threads, each taking a run of the paths, when there are enough of them to
    /// pay for starting threads.
    async fn real_stat_many(
        &self,
        paths: &[WorkspacePath],
        read_below: u64,
    ) -> Vec<Result<Looked, MutatorError>> {
        if self.inline {
            return look_many(&self.inner, paths, read_below);
        }
        let count = paths.len();
        let paths = paths.to_vec();
        match (self.blocking(move |roots| Ok(look_many(roots, &paths, read_below)))).await {
            Ok(looked) => looked,
            Err(err) => {
                let why = err.to_string();
                (0..count)
                    .map(|_| Err(MutatorError::Interrupted(why.clone())))
                    .collect()
            }
        }
    }

    async fn adopt(
        &self,
        source: &Path,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(), MutatorError> {
        let moved = {
            let (source, path) = (source.to_path_buf(), path.clone());
            self.blocking(move |roots| move_in(roots, &source, &path, mode))
                .await?
        };
        if moved {
            return Ok(());
        }
        super::copy_in(self, source, path, mode).await
    }

    async fn move_tree_in(
        &self,
        source: &Path,
        path: &WorkspacePath,
        listed: &[WorkspacePath],
    ) -> Result<bool, MutatorError> {
        let _ = listed;
        let (source, path) = (source.to_path_buf(), path.clone());
        self.blocking(move |roots| move_tree_in(roots, &source, &path))
            .await
    }

    async fn stamps(&self, paths: &[WorkspacePath]) -> Vec<Option<super::Stamp>> {
        stamp::stamps(self, paths).await
    }

    async fn link_out(&self, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
        if self.inline {
            return link_out(&self.inner, path, to);
        }
        let (path, to) = (path.clone(), to.to_path_buf());
        self.blocking(move |roots| link_out(roots, &path, &to))
            .await
    }

    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        if self.inline {
            return overwrite(&self.inner, path, Source::Bytes(bytes), mode);
        }
        let path = path.clone();
        let bytes = bytes.to_vec();
        self.blocking(move |roots| overwrite(roots, &path, Source::Bytes(&bytes), mode))
            .await
    }

    /// Inline, a piece at a time; otherwise the bytes are read first, then written on
    /// another thread.
    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        if self.inline {
            return overwrite(&self.inner, path, Source::Reader(source, len), mode);
        }
        let bytes = read_exactly(source, len)
            .map_err(|err| io_error("read the bytes to write to", path, err))?;
        self.overwrite(path, &bytes, mode).await
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let dir = roots.parent_for_change(&path)?;
            match stat_in(&dir, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                // Changing a link's mode would change its target's; links have no mode of their own.
                Stat::Symlink { .. } => Err(symlink_has_no_mode(&path)),
                Stat::File { .. } | Stat::Dir { .. } => chmod_nofollow(&dir, &path, mode),
            }
        })
        .await
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let dir = roots.parent_for_change(&path)?;
            let name = path.file_name();
            rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(DEFAULT_DIR_MODE))
                .map_err(|errno| io_error("create directory", &path, errno.into()))?;
            // The umask may have taken bits away; the mode is set exactly.
            chmod_nofollow(&dir, &path, DEFAULT_DIR_MODE)
        })
        .await
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        let target = target.to_owned();
        self.blocking(move |roots| {
            let dir = roots.parent_for_change(&path)?;
            rustix::fs::symlinkat(target.as_str(), &dir, path.file_name())
                .map_err(|errno| io_error("create symlink", &path, errno.into()))
        })
        .await
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let dir = roots.parent_for_change(&path)?;
            match stat_in(&dir, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                Stat::Dir { .. } => Err(MutatorError::IsDirectory(path)),
                Stat::File { .. } | Stat::Symlink { .. } => {
                    rustix::fs::unlinkat(&dir, path.file_name(), AtFlags::empty())
                        .map_err(|errno| io_error("remove", &path, errno.into()))
                }
            }
        })
        .await
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let dir = roots.parent_for_change(&path)?;
            match stat_in(&dir, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                Stat::Dir { .. } => {
                    rustix::fs::unlinkat(&dir, path.file_name(), AtFlags::REMOVEDIR)
                        .map_err(|errno| io_error("remove directory", &path, errno.into()))
                }
                Stat::File { .. } | Stat::Symlink { .. } => Err(MutatorError::NotDirectory(path)),
            }
        })
        .await
    }

    /// Lists each parent directory once, through the jail (the root included).
    async fn remove_partial_writes(&self, paths: &[WorkspacePath]) -> Result<usize, MutatorError> {
        let paths = paths.to_vec();
        self.blocking(move |roots| Ok(remove_partial_writes(roots, &paths)))
            .await
    }

    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        let paths = paths.to_vec();
        self.blocking(move |roots| flush(roots, &paths).map_err(MutatorError::Sync))
            .await
    }

    /// One rename out of the workspace when it can, else entry by entry.
    async fn remove_tree(
        &self,
        path: &WorkspacePath,
        listed: &[DirEntry],
        aside: &Path,
    ) -> Result<(), MutatorError> {
        let moved = {
            let listed = listed.iter().map(|entry| entry.path.to_string()).collect();
            let (path, aside) = (path.clone(), aside.to_path_buf());
            self.blocking(move |roots| aside::move_tree_aside(roots, &path, &listed, &aside))
                .await?
        };
        if moved {
            return Ok(());
        }
        super::remove_listed(self, path, listed).await
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        let (from, to) = (from.clone(), to.clone());
        self.blocking(move |roots| {
            let source = roots.parent_for_change(&from)?;
            let dest = roots.parent_for_change(&to)?;
            match stat_in(&source, &from)? {
                Stat::Absent => return Err(MutatorError::NotFound(from)),
                Stat::Dir { .. } => return Err(MutatorError::IsDirectory(from)),
                Stat::File { .. } | Stat::Symlink { .. } => {}
            }
            if let Stat::Dir { .. } = stat_in(&dest, &to)? {
                return Err(MutatorError::IsDirectory(to));
            }
            rustix::fs::renameat(&source, from.file_name(), &dest, to.file_name())
                .map_err(|errno| io_error("rename", &from, errno.into()))
        })
        .await
    }
}
