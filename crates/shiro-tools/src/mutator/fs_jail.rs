//! The jail under [`FsMutator`]: every path is opened beneath one directory handle on the
//! workspace root, never by a joined path string, so no symbolic link, planted or swapped in
//! by a race, can send an access outside.
//!
//! Mutations reach their parent directory through real directories only: `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` on Linux, and where that call is missing (before
//! Linux 5.6) or blocked (some container profiles) a walk of `openat(O_NOFOLLOW)` one
//! component at a time. Reads that follow links inside the workspace resolve them in user
//! space first ([`resolve_links`]) and then open the real path the same way, so a link that
//! changes in between makes the open fail, never escape.
//!
//! [`FsMutator`]: super::FsMutator

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(any(target_os = "linux", target_os = "android"))]
use rustix::fs::ResolveFlags;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{Found, MAX_LINKS, MutatorError, Stat, link_destination, resolve_links};
use crate::path::{PathError, WorkspacePath};

/// How a directory that is only walked through, or acted in, is opened: no read access is
/// needed to use it as the base of `*at` calls.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DIR_HANDLE: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const DIR_HANDLE: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// A directory handle: the root's, borrowed, or one opened beneath it.
pub(super) enum DirFd<'a> {
    Root(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl AsFd for DirFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            DirFd::Root(fd) => *fd,
            DirFd::Owned(fd) => fd.as_fd(),
        }
    }
}

/// The workspace root, opened once.
#[derive(Debug)]
pub(crate) struct Jail {
    /// The canonical root, against which absolute link targets are read.
    canonical: std::path::PathBuf,
    /// The handle every access starts from.
    dir: OwnedFd,
    /// Whether `openat2` works here; cleared the first time it is missing or blocked.
    openat2: AtomicBool,
}

impl Jail {
    /// Opens the directory `canonical` (already canonicalised) as a jail.
    pub(crate) fn open(canonical: &Path) -> io::Result<Self> {
        let dir = rustix::fs::open(
            canonical,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            canonical: canonical.to_path_buf(),
            dir,
            openat2: AtomicBool::new(cfg!(any(target_os = "linux", target_os = "android"))),
        })
    }

    /// The canonical root.
    pub(super) fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// Opens `rel` (relative to the root; `""` is the root itself) through real directories
    /// only, and the last component without following a link either.
    pub(super) fn open_nolinks(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let rel = if rel.is_empty() { "." } else { rel };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if self.openat2.load(Ordering::Relaxed) {
            let resolve =
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            let mut tries = 0;
            loop {
                match rustix::fs::openat2(&self.dir, rel, flags, Mode::empty(), resolve) {
                    // A rename elsewhere on the file system raced the lookup; it is safe to
                    // ask again.
                    Err(Errno::AGAIN) if tries < 8 => tries += 1,
                    Err(Errno::NOSYS | Errno::PERM | Errno::TOOBIG) => {
                        self.openat2.store(false, Ordering::Relaxed);
                        break;
                    }
                    other => return other,
                }
            }
        }
        let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let last = parts.pop().unwrap_or(".");
        let mut cur: Option<OwnedFd> = None;
        for part in parts {
            let base = cur.as_ref().map_or(self.dir.as_fd(), AsFd::as_fd);
            cur = Some(rustix::fs::openat(
                base,
                part,
                DIR_HANDLE | OFlags::NOFOLLOW,
                Mode::empty(),
            )?);
        }
        let base = cur.as_ref().map_or(self.dir.as_fd(), AsFd::as_fd);
        rustix::fs::openat(base, last, flags, Mode::empty())
    }

    /// A handle on the directory `rel` (relative to the root; `""` is the root itself),
    /// reached through real directories only: the base for `*at` calls on its entries.
    pub(crate) fn open_dir(&self, rel: &str) -> Result<OwnedFd, Errno> {
        self.open_nolinks(rel, DIR_HANDLE)
    }

    /// The names in the directory `rel` (relative to the root; `""` is the root itself),
    /// reached through real directories only, with their inode numbers; `.` and `..` left out.
    pub(crate) fn dir_entries(&self, rel: &str) -> Result<Vec<(Vec<u8>, u64)>, Errno> {
        let fd = self.open_nolinks(rel, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                entries.push((name.to_vec(), entry.ino()));
            }
        }
        Ok(entries)
    }

    /// The parent directory of `path`, reached through real directories only.
    pub(super) fn parent_nolinks(&self, path: &WorkspacePath) -> Result<DirFd<'_>, Errno> {
        match path.parent() {
            None => Ok(DirFd::Root(self.dir.as_fd())),
            Some(parent) => Ok(DirFd::Owned(
                self.open_nolinks(parent.as_str(), DIR_HANDLE)?,
            )),
        }
    }

    /// The parent directory of `path` for a mutation: a link on the way is refused
    /// ([`PathError::ThroughLink`]), a missing or non-directory parent reported as such.
    pub(super) fn parent_for_change(
        &self,
        path: &WorkspacePath,
    ) -> Result<DirFd<'_>, MutatorError> {
        self.parent_nolinks(path)
            .map_err(|errno| self.parent_error(path, errno))
    }

    /// Says why the parent of `path` could not be opened: the first ancestor that is a link,
    /// a file or missing, outermost first.
    pub(super) fn parent_error(&self, path: &WorkspacePath, errno: Errno) -> MutatorError {
        let parent = path.parent().unwrap_or_else(|| path.clone());
        if !matches!(errno, Errno::LOOP | Errno::NOTDIR | Errno::NOENT) {
            return io_error("open the directory of", path, errno.into());
        }
        for ancestor in path.ancestors() {
            match self.lstat(ancestor.as_str()) {
                Ok(Some(stat)) => match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Directory => {}
                    FileType::Symlink => {
                        return PathError::ThroughLink {
                            path: path.to_string(),
                            link: ancestor.to_string(),
                        }
                        .into();
                    }
                    _ => return MutatorError::NotDirectory(parent),
                },
                Ok(None) => return MutatorError::NotFound(parent),
                Err(err) => return io_error("open the directory of", path, err.into()),
            }
        }
        // Everything looked right a moment later: something changed in between.
        match errno {
            Errno::NOENT => MutatorError::NotFound(parent),
            Errno::NOTDIR => MutatorError::NotDirectory(parent),
            _ => io_error("open the directory of", path, errno.into()),
        }
    }

    /// `lstat` of `rel` with its parents reached through real directories; `None` when
    /// nothing is there (or a parent is not a directory, or is a link).
    pub(crate) fn lstat(&self, rel: &str) -> Result<Option<rustix::fs::Stat>, Errno> {
        // `""` is the root itself.
        let Ok(path) = WorkspacePath::from_relative(rel) else {
            return Ok(Some(rustix::fs::fstat(&self.dir)?));
        };
        let parent = match self.parent_nolinks(&path) {
            Ok(parent) => parent,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(errno) => return Err(errno),
        };
        match rustix::fs::statat(&parent, path.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
            Err(errno) => Err(errno),
        }
    }

    /// The target of the link `rel` (its parents reached through real directories only), or
    /// `None` when there is no link there.
    pub(crate) fn read_link(&self, rel: &str) -> Option<String> {
        let path = WorkspacePath::from_relative(rel).ok()?;
        let parent = self.parent_nolinks(&path).ok()?;
        let target = rustix::fs::readlinkat(&parent, path.file_name(), Vec::new()).ok()?;
        Some(c_to_string(&target))
    }

    /// See [`super::Mutator::real_path`].
    pub(super) fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        // Most paths have no link on them: one open tells.
        if self.parent_nolinks(path).is_ok() {
            return Ok(path.clone());
        }
        resolve_links(path, &self.canonical, &mut |rel| self.found(path, rel))
    }

    /// What is at the real path `rel`, for [`resolve_links`].
    fn found(&self, path: &WorkspacePath, rel: &str) -> Result<Found, MutatorError> {
        let failed = |errno: Errno| io_error("resolve", path, errno.into());
        let Some(stat) = self.lstat(rel).map_err(failed)? else {
            return Ok(Found::Other);
        };
        Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => Found::Dir,
            FileType::Symlink => {
                let at = WorkspacePath::from_relative(rel)?;
                let parent = self.parent_nolinks(&at).map_err(failed)?;
                let target =
                    rustix::fs::readlinkat(&parent, at.file_name(), Vec::new()).map_err(failed)?;
                Found::Link(c_to_string(&target))
            }
            _ => Found::Other,
        })
    }

    /// The real path of the entry `path` names, with links followed in its last component
    /// too (as reads do): `None` when a link there leads to nothing.
    pub(super) fn real_following(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<WorkspacePath>, MutatorError> {
        let mut at = self.real_path(path)?;
        for _ in 0..MAX_LINKS {
            let Found::Link(target) = self.found(path, at.as_str())? else {
                return Ok(Some(at));
            };
            let escape = || PathError::SymlinkEscape {
                path: path.to_string(),
                link: at.to_string(),
            };
            let dir = at
                .parent()
                .map(|dir| dir.as_str().to_owned())
                .unwrap_or_default();
            let Some(next) = link_destination(&dir, &target, &self.canonical) else {
                return Err(escape().into());
            };
            if next.is_empty() {
                // A link to the root itself: not a file to read.
                return Err(MutatorError::IsDirectory(path.clone()));
            }
            at = self.real_path(&WorkspacePath::from_relative(&next.join("/"))?)?;
        }
        // Still a link after as many as the kernel follows: they go round a loop.
        Err(PathError::SymlinkLoop {
            path: path.to_string(),
            link: at.to_string(),
        }
        .into())
    }

    /// Opens the entry `path` names for reading, following links that stay inside: the
    /// link-free path is tried first, and only when it meets a link are the links resolved
    /// and the real path opened. `O_NONBLOCK`, so a named pipe is never waited on (the
    /// caller checks the kind of what it opened).
    pub(crate) fn open_following(
        &self,
        path: &WorkspacePath,
        flags: OFlags,
    ) -> Result<OwnedFd, MutatorError> {
        let flags = flags | OFlags::NONBLOCK | OFlags::NOCTTY;
        match self.open_nolinks(path.as_str(), flags) {
            Ok(fd) => return Ok(fd),
            Err(Errno::LOOP | Errno::NOTDIR) => {}
            Err(errno) => return Err(io_error("open", path, errno.into())),
        }
        let Some(real) = self.real_following(path)? else {
            return Err(MutatorError::NotFound(path.clone()));
        };
        self.open_nolinks(real.as_str(), flags)
            .map_err(|errno| io_error("open", path, errno.into()))
    }
}

/// A link target or file name as text (non-UTF-8 bytes replaced).
pub(super) fn c_to_string(text: &CStr) -> String {
    text.to_string_lossy().into_owned()
}

/// What `stat` describes, as a [`Stat`]; a named pipe, socket or device is refused.
pub(super) fn stat_from(
    stat: &rustix::fs::Stat,
    path: &WorkspacePath,
    link_target: impl FnOnce() -> Result<String, MutatorError>,
) -> Result<Stat, MutatorError> {
    let mode = stat.st_mode & 0o7777;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(Stat::File {
            mode,
            len: u64::try_from(stat.st_size).unwrap_or(0),
        }),
        FileType::Directory => Ok(Stat::Dir { mode }),
        FileType::Symlink => Ok(Stat::Symlink {
            target: link_target()?,
        }),
        other => Err(not_regular(path, other)),
    }
}

/// The error for an entry that is neither a file, a directory nor a link.
pub(super) fn not_regular(path: &WorkspacePath, kind: FileType) -> MutatorError {
    MutatorError::NotRegular {
        path: path.clone(),
        kind: match kind {
            FileType::Fifo => "named pipe",
            FileType::Socket => "socket",
            FileType::CharacterDevice | FileType::BlockDevice => "device",
            _ => "special file",
        },
    }
}

/// Maps an I/O error on `path` to the [`MutatorError`] that says it best.
pub(super) fn io_error(op: &'static str, path: &WorkspacePath, err: io::Error) -> MutatorError {
    use io::ErrorKind;
    match err.kind() {
        ErrorKind::NotFound => MutatorError::NotFound(path.clone()),
        ErrorKind::AlreadyExists => MutatorError::AlreadyExists(path.clone()),
        ErrorKind::IsADirectory => MutatorError::IsDirectory(path.clone()),
        ErrorKind::NotADirectory => MutatorError::NotDirectory(path.clone()),
        ErrorKind::DirectoryNotEmpty => MutatorError::DirectoryNotEmpty(path.clone()),
        _ => MutatorError::Io {
            op,
            path: path.clone(),
            source: err,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn link_destinations_stay_inside() {
        let root = Path::new("/ws");
        let at = |target| link_destination("a/b", target, root).map(|p| p.join("/"));
        assert_eq!(at("c").as_deref(), Some("a/b/c"));
        assert_eq!(at("../c").as_deref(), Some("a/c"));
        assert_eq!(at("../../c").as_deref(), Some("c"));
        assert_eq!(at("../../../c"), None);
        assert_eq!(at("/ws/x/y").as_deref(), Some("x/y"));
        assert_eq!(at("/ws").as_deref(), Some(""));
        assert_eq!(at("/wsx/y"), None);
        assert_eq!(at("/etc/passwd"), None);
        assert_eq!(link_destination("", "..", root), None);
    }
}
