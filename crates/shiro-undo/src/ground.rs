//! The ground the store stands on: its directories must be real directories of the user's,
//! and its files are opened without following links.
//!
//! The store lives out of the workspace's tree, but a state directory can still hold what
//! someone else put there. A link there (`undo -> /elsewhere`, or `inflight.jsonl ->
//! ~/.bashrc`) would make the store write where it should not: emptying the in-flight file
//! would truncate its target. So the store
//! checks each of its directories before it uses it (a real directory, not a link, owned by
//! the user running shiro) and opens every file of its own with `O_NOFOLLOW`, which fails
//! on a link instead of following it.
//!
//! A link planted where one of the store's own files goes is removed, and the file made
//! afresh: removing a link never touches its target, and the store never makes links, so the
//! link holds nothing of the store's. A planted directory, or a file of someone else's, is
//! refused with an error that says what to remove.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::UndoError;

/// Open options that refuse to follow a link at the last component (`O_NOFOLLOW`): opening a
/// link fails with `ELOOP`, and [`UndoError::io`] turns that into a message saying so.
pub(crate) fn no_follow() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(nofollow_flag());
    options
}

fn nofollow_flag() -> i32 {
    // The flag's value fits an `i32` on every platform (it is a single small bit).
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}

/// Opens `path` for reading without following a link.
pub(crate) fn open_read(path: &Path) -> io::Result<File> {
    no_follow().read(true).open(path)
}

/// Reads a whole file without following a link; a missing file reads as `None`.
pub(crate) fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut file = match open_read(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Makes sure `dir` is a real directory of the current user, creating it (`0700`) when it is
/// missing (its parent must have been checked already). `name` is how the error names it.
pub(crate) fn ensure_dir(dir: &Path, name: &str) -> Result<(), UndoError> {
    let refuse = |problem: String| UndoError::UnsafeStore {
        path: dir.to_path_buf(),
        problem,
    };
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                // Another process made it meanwhile: check what it made.
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(UndoError::io("create the directory", dir, err)),
            }
            fs::symlink_metadata(dir).map_err(|err| UndoError::io("inspect", dir, err))?
        }
        Err(err) => return Err(UndoError::io("inspect", dir, err)),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = fs::read_link(dir).map_or_else(|_| "?".into(), PathBuf::into_os_string);
        return Err(refuse(format!(
            "{name} is a symbolic link (to {}), and shiro keeps its state only in a real directory; remove the link {name} and run again; shiro recreates it",
            target.to_string_lossy()
        )));
    }
    if !kind.is_dir() {
        return Err(refuse(format!(
            "{name} is not a directory; move it away and run again; shiro recreates it"
        )));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "{name} belongs to user id {}, not to you (user id {me}); remove it (or change its owner) and run again; shiro recreates it",
            meta.uid()
        )));
    }
    Ok(())
}

/// Open options for a file in a directory the store checked: they refuse to follow a link
/// at the file's own name (`O_NOFOLLOW`), so a planted link fails to open instead of leading
/// outside the workspace.
pub fn no_follow_options() -> OpenOptions {
    no_follow()
}

/// Makes sure each of the store's own files in `dir` named in `names` is a regular file or
/// absent: a symbolic link there is removed (never its target) and its name returned, for
/// the caller to report; anything else is refused.
pub(crate) fn clear_planted_links(
    dir: &Path,
    names: &[&str],
    store_name: &str,
) -> Result<Vec<String>, UndoError> {
    let mut removed = Vec::new();
    for name in names {
        let path = dir.join(name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(UndoError::io("inspect", &path, err)),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(&path).map_or_else(|_| "?".into(), PathBuf::into_os_string);
            fs::remove_file(&path).map_err(|err| UndoError::io("remove the link", &path, err))?;
            removed.push(format!(
                "{store_name}/{name} -> {}",
                target.to_string_lossy()
            ));
        } else if !kind.is_file() {
            return Err(UndoError::UnsafeStore {
                path,
                problem: format!(
                    "{store_name}/{name} is not a regular file; remove it and run again; shiro recreates it"
                ),
            });
        }
    }
    Ok(removed)
}
