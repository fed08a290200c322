//! [`Mutator::remove_tree`](crate::mutator::Mutator::remove_tree) on the disk: a directory
//! moved out of the workspace whole, with one rename, and what its listing did not hold moved
//! back.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::Mode;
use rustix::io::Errno;

use super::super::fs_jail::io_error;
use super::super::{MutatorError, Stat};
use super::{Roots, stat_in};
use crate::path::WorkspacePath;

/// Moves the directory `path` to `aside` with one rename, then moves back into the workspace
/// each entry `listed` (paths) does not hold (made while the caller captured the rest). `false` when
/// the tree must be removed entry by entry instead: `aside` is on another file system, or a
/// mount point lies in the tree (a rename would carry it along, and its removal reach into
/// it), or the mount table cannot be read.
pub(super) fn move_tree_aside(
    roots: &Roots,
    path: &WorkspacePath,
    listed: &HashSet<String>,
    aside: &Path,
) -> Result<bool, MutatorError> {
    let dir = roots.parent_for_change(path)?;
    match stat_in(&dir, path)? {
        Stat::Dir { .. } => {}
        Stat::Absent => return Err(MutatorError::NotFound(path.clone())),
        Stat::File { .. } | Stat::Symlink { .. } => {
            return Err(MutatorError::NotDirectory(path.clone()));
        }
    }
    if !no_mount_in(&roots.jail.canonical().join(path.as_str())) {
        return Ok(false);
    }
    match rustix::fs::renameat(&dir, path.file_name(), rustix::fs::CWD, aside) {
        Ok(()) => {}
        // Another file system, or the directory is a mount point itself.
        Err(Errno::XDEV | Errno::BUSY) => return Ok(false),
        Err(errno) => return Err(io_error("move aside", path, errno.into())),
    }
    let moved = fs::symlink_metadata(aside).map_err(|err| io_error("move aside", path, err))?;
    if !moved.is_dir() {
        // Swapped for a file or a link since it was looked at: it goes back as it is, and
        // the caller's listing is stale.
        rustix::fs::renameat(rustix::fs::CWD, aside, &dir, path.file_name())
            .map_err(|errno| io_error("move back", path, errno.into()))?;
        return Err(MutatorError::NotDirectory(path.clone()));
    }
    if let Err(err) = put_back(roots, path, aside, listed) {
        // Then the whole tree goes back (over what the moving back had remade, while empty),
        // and the caller's removal fails: nothing is lost that it had not saved.
        let dir = roots.parent_for_change(path)?;
        return match rustix::fs::renameat(rustix::fs::CWD, aside, &dir, path.file_name()) {
            Ok(()) => Err(err),
            Err(_) => Err(annotate(&err, path, aside)),
        };
    }
    Ok(true)
}

/// Moves back into the workspace, under `path`, what lies under `aside` (where `path` was
/// moved) and `listed` does not hold, remaking the directories on the way.
fn put_back(
    roots: &Roots,
    path: &WorkspacePath,
    aside: &Path,
    listed: &HashSet<String>,
) -> Result<(), MutatorError> {
    let mut stack: Vec<(PathBuf, WorkspacePath)> = vec![(aside.to_path_buf(), path.clone())];
    while let Some((dir, at)) = stack.pop() {
        let failed = |err| io_error("list what was moved aside from", &at, err);
        for entry in fs::read_dir(&dir).map_err(failed)? {
            let entry = entry.map_err(failed)?;
            let name = entry.file_name();
            let child = name.to_str().and_then(|name| at.join(name).ok());
            match child {
                Some(child) if listed.contains(child.as_str()) => {
                    if entry.file_type().map_err(failed)?.is_dir() {
                        stack.push((entry.path(), child));
                    }
                }
                _ => {
                    make_dirs(roots, path, &at, aside)?;
                    let parent = roots
                        .jail
                        .open_dir(at.as_str())
                        .map_err(failed_errno(&at))?;
                    rustix::fs::renameat(rustix::fs::CWD, entry.path(), &parent, &name)
                        .map_err(failed_errno(&at))?;
                }
            }
        }
    }
    Ok(())
}

/// Makes the workspace directory `at` (`path` or a directory under it) and its missing
/// parents up to `path`, each with the mode of its counterpart under `aside`.
fn make_dirs(
    roots: &Roots,
    path: &WorkspacePath,
    at: &WorkspacePath,
    aside: &Path,
) -> Result<(), MutatorError> {
    let mut chain: Vec<WorkspacePath> = at
        .ancestors()
        .into_iter()
        .filter(|ancestor| ancestor.starts_with(path))
        .collect();
    chain.push(at.clone());
    for dir in chain {
        let rel = dir.as_str().get(path.as_str().len()..).unwrap_or_default();
        let counterpart = aside.join(rel.trim_start_matches('/'));
        let mode = fs::symlink_metadata(&counterpart).map_or(0o755, |meta| meta.mode() & 0o7777);
        let parent = roots.parent_for_change(&dir)?;
        match rustix::fs::mkdirat(&parent, dir.file_name(), Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(errno) => return Err(io_error("make the directory", &dir, errno.into())),
        }
        if !matches!(stat_in(&parent, &dir)?, Stat::Dir { .. }) {
            return Err(MutatorError::NotDirectory(dir));
        }
    }
    Ok(())
}

fn failed_errno(path: &WorkspacePath) -> impl Fn(Errno) -> MutatorError + '_ {
    move |errno| {
        io_error(
            "move back what was made during the removal of",
            path,
            errno.into(),
        )
    }
}

/// Says where the entries that could not be moved back are.
fn annotate(err: &MutatorError, path: &WorkspacePath, aside: &Path) -> MutatorError {
    MutatorError::Io {
        op: "move back what appeared while removing",
        path: path.clone(),
        source: std::io::Error::other(format!(
            "{err}; what was not moved back is in {}",
            aside.display()
        )),
    }
}

/// Whether no mount point lies at or under the canonical path `dir`, by this process's
/// mount table; `false` when the table cannot be read.
fn no_mount_in(dir: &Path) -> bool {
    let Ok(table) = fs::read("/proc/self/mountinfo") else {
        return false;
    };
    !table
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .any(|point| Path::new(OsStr::from_bytes(&unescape(point))).starts_with(dir))
}

/// A mount table field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let digits = field.get(i + 1..i + 4);
        match digits {
            Some(d) if field[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            _ => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes_undone() {
        assert_eq!(unescape(br"/mnt/a\040b\011c\134d"), b"/mnt/a b\tc\\d");
        assert_eq!(unescape(br"/plain\04"), br"/plain\04");
        assert_eq!(unescape(br"/x\999"), br"/x\999");
    }
}
