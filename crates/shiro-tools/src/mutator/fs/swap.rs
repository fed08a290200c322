//! A new version put in place by exchanging two names, where a rename over the old one
//! would wait for the new one to be written back.

use std::io;
use std::path::Path;

use rustix::fs::{AtFlags, FileType};

use super::super::fs_jail::{DirFd, io_error};
use super::super::{MutatorError, Stat};
use super::Roots;
use crate::path::WorkspacePath;

/// From this size, a new version is swapped in rather than renamed over the file it
/// replaces ([`move_in`](super::move_in), [`write_atomic`](super::write_atomic)). ext4
/// starts writing a file back when a rename replaces another with it (`auto_da_alloc`, so
/// that programs that save without flushing keep the old or the new version through a power
/// cut), and the rename waits while it does: here about half a millisecond for each MiB not
/// yet written, 0.4 s for a gigabyte a command appended a line to. An exchange of two names
/// is not such a rename. The new version is then written back when the kernel writes back
/// the rest, as a file `cp` made is; a recorded turn holds the old version in the undo
/// store, flushed before the change, whatever a power cut does to the new one.
pub(super) const SWAP_IN_FROM: u64 = 1 << 20;

/// Whether a new version of `len` bytes goes in place of what the caller found at the path
/// (`now`) by an exchange ([`swap`]): it is big enough, and a regular file is there (where
/// nothing is replaced, a rename costs nothing). What `now` says may be stale by the
/// exchange: [`swap`] checks what it replaced.
pub(super) fn swaps(now: &Stat, len: u64) -> bool {
    len >= SWAP_IN_FROM && matches!(now, Stat::File { .. })
}

/// Exchanges the names `temp` (the new version, named as a write's temporary file) and
/// `path` in `dir`, then removes `temp`, by then the old version's name: what a rename of
/// `temp` over `path` does, without the wait of [`SWAP_IN_FROM`]. `false` where the file
/// system cannot exchange, and nothing was changed. Killed between the two steps it leaves
/// the new version in place and the old one under a temporary name, which crash recovery
/// removes as it removes a write's. Should `path` name something other than a regular file by
/// the time of the exchange, it is exchanged back, and `false` returned: the caller's rename
/// then says why it cannot replace it.
pub(super) fn swap(dir: &DirFd<'_>, temp: &str, path: &WorkspacePath) -> io::Result<bool> {
    use rustix::fs::{RenameFlags, renameat_with, statat, unlinkat};
    let exchange = || renameat_with(dir, temp, dir, path.file_name(), RenameFlags::EXCHANGE);
    if exchange().is_err() {
        return Ok(false);
    }
    // Another program may have put something else at `path` since the caller looked: a
    // directory, say, which a rename would have refused to replace. It goes back.
    let replaced = statat(dir, temp, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile);
    if !replaced {
        exchange()?;
        return Ok(false);
    }
    unlinkat(dir, temp, AtFlags::empty())?;
    Ok(true)
}

/// Puts the file at `source` in place of the file at `path` by [`swap`]: it gets a second
/// name beside the old version first. `false` where the file system cannot link or exchange:
/// the caller renames.
///
/// Killed part-way, it leaves the workspace either as it was or with the new version in
/// place, and `source` naming the new version until then: a commit finished after a crash
/// moves it in (or copies it, while it has two names) or finds it there, and crash recovery
/// removes the temporary name beside the path.
pub(super) fn swap_in(
    roots: &Roots,
    dir: &DirFd<'_>,
    source: &Path,
    path: &WorkspacePath,
) -> Result<bool, MutatorError> {
    use rustix::fs::{CWD, linkat, unlinkat};
    let spare = roots.temp_name(path);
    if linkat(CWD, source, dir, spare.as_str(), AtFlags::empty()).is_err() {
        return Ok(false);
    }
    let failed = |err: io::Error| io_error("swap in the new version of", path, err);
    if !swap(dir, &spare, path).map_err(failed)? {
        unlinkat(dir, spare.as_str(), AtFlags::empty()).map_err(|errno| failed(errno.into()))?;
        return Ok(false);
    }
    // `source` lies in a command's layer, removed with it after the commit: a name left
    // there names the version now in place, which a commit finished after a crash finds
    // there already.
    let _ = unlinkat(CWD, source, AtFlags::empty());
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rustix::fs::{Mode, OFlags};

    use super::*;

    #[test]
    fn what_is_no_longer_a_file_by_the_exchange_is_exchanged_back() {
        let dir = tempfile::tempdir().unwrap();
        let (at, temp) = (dir.path(), ".big.bin.00000000000000aa.shiro-tmp");
        let fd = rustix::fs::open(at, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty());
        let fd = DirFd::Owned(fd.unwrap());
        let path = WorkspacePath::from_relative("big.bin").unwrap();
        // A directory put where the caller saw a file.
        std::fs::create_dir(at.join("big.bin")).unwrap();
        std::fs::write(at.join("big.bin/inside"), "kept").unwrap();
        std::fs::write(at.join(temp), "new").unwrap();
        assert!(!swap(&fd, temp, &path).unwrap());
        assert_eq!(std::fs::read(at.join("big.bin/inside")).unwrap(), b"kept");
        assert_eq!(std::fs::read(at.join(temp)).unwrap(), b"new");

        std::fs::remove_dir_all(at.join("big.bin")).unwrap();
        std::fs::write(at.join("big.bin"), "old").unwrap();
        assert!(swap(&fd, temp, &path).unwrap());
        assert_eq!(std::fs::read(at.join("big.bin")).unwrap(), b"new");
        assert!(!at.join(temp).exists());
    }
}
