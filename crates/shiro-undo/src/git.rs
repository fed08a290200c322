//! The git side of a restore: what a turn's `bash` calls moved in the repository at the
//! workspace root (HEAD, refs, the stash list, the index), checked and moved back.
//!
//! A restore checks it with the paths ([`conflicts`], and git's locks on it, [`locked`]),
//! before anything changes, and moves it once the paths are restored ([`apply`]). Moving is
//! idempotent, value by value: what stands where the restore takes it already is left alone,
//! so the recovery of a restore a crash interrupted simply moves it again.

use std::path::Path;

use shiro_tools::WorkspacePath;
use shiro_tools::git::{Move, Repo, same_index};

use crate::error::UndoError;
use crate::format::{GitRecord, IndexRecord};
use crate::image::ContentHash;
use crate::report::{Conflict, ConflictKind, Direction};
use crate::restore::Stored;

/// What a restore in `direction` moves, in one line, as it moves it.
pub(crate) fn describe(record: &GitRecord, direction: Direction) -> String {
    let moved = (record.moved.iter())
        .map(|(name, moved)| {
            let (from, to) = sides(&moved.before, &moved.after, direction);
            let turned = Move {
                before: from.clone(),
                after: to.clone(),
            };
            (name.clone(), turned)
        })
        .collect();
    shiro_tools::git::describe(&moved, record.index.is_some())
}

/// The value a thing must have before a restore in `direction` and the one it leaves.
fn sides<T>(before: T, after: T, direction: Direction) -> (T, T) {
    match direction {
        Direction::Undo => (after, before),
        Direction::Redo => (before, after),
    }
}

/// A conflict over the thing `name`, on the path `.git/<name>` (names are checked when a
/// record is read, so every one makes a path).
fn conflict(name: &str, expected: Option<String>, found: Option<String>) -> Option<Conflict> {
    let path = WorkspacePath::from_relative(&format!(".git/{name}")).ok()?;
    Some(Conflict {
        path,
        kind: ConflictKind::Git { expected, found },
    })
}

fn git_error(root: &Path, err: std::io::Error) -> UndoError {
    UndoError::io("restore the git state in", &root.join(".git"), err)
}

/// The repository a record applies to: the one at `root`, which must still be there.
fn repo(root: &Path) -> Option<Repo> {
    Repo::at(root)
}

/// Where what `record` moved does not stand as a restore in `direction` expects: each a
/// [`ConflictKind::Git`] on `.git/<name>`.
pub(crate) fn conflicts(
    root: &Path,
    record: &GitRecord,
    direction: Direction,
    stored: &Stored<'_>,
) -> Result<Vec<Conflict>, UndoError> {
    let Some(repo) = repo(root) else {
        return Ok(conflict("HEAD", Some("a repository".to_owned()), None)
            .into_iter()
            .collect());
    };
    let mut conflicts = Vec::new();
    for (name, moved) in &record.moved {
        let (expected, _) = sides(&moved.before, &moved.after, direction);
        let found = repo.value(name).map_err(|err| git_error(root, err))?;
        if found != *expected {
            conflicts.extend(conflict(name, expected.clone(), found));
        }
    }
    if let Some(index) = record.index {
        let (expected, _) = sides(index.before, index.after, direction);
        let found = repo.index().map_err(|err| git_error(root, err))?;
        let alike = match (&expected, &found) {
            (None, None) => true,
            (Some(hash), Some(found)) => match stored.get(hash) {
                Ok(Some(bytes)) => same_index(&bytes, found),
                _ => false,
            },
            _ => false,
        };
        if !alike {
            conflicts.extend(conflict(
                "index",
                expected.map(|hash| hash.short()),
                found.map(|bytes| ContentHash::of(&bytes).short()),
            ));
        }
    }
    Ok(conflicts)
}

/// git's lock files (`.git/HEAD.lock`, `.git/refs/heads/x.lock`, …) on what a restore of
/// `record` in `direction` moves: one is there while a git runs, and stays where a git
/// stopped without removing it. [`apply`] takes the lock of each thing it moves (and of
/// `packed-refs` to delete a ref, of the index to write it), and fails on one that is
/// there: found before, the restore stops before it changes anything. A lock on a thing the
/// record does not name is no obstacle, as it is none to [`apply`].
pub(crate) fn locked(root: &Path, record: &GitRecord, direction: Direction) -> Vec<WorkspacePath> {
    let Some(repo) = repo(root) else {
        return Vec::new();
    };
    let mut names: Vec<&str> = record.moved.keys().map(String::as_str).collect();
    let deletes_a_ref = (record.moved.iter()).any(|(name, moved)| {
        let (_, target) = sides(&moved.before, &moved.after, direction);
        name.starts_with("refs/") && target.is_none()
    });
    if deletes_a_ref {
        names.push("packed-refs");
    }
    if record.index.is_some() {
        names.push("index");
    }
    (names.into_iter())
        .map(|name| format!("{name}.lock"))
        // Not `exists`: a lock that is a link is there all the same.
        .filter(|lock| std::fs::symlink_metadata(repo.git_dir().join(lock)).is_ok())
        .filter_map(|lock| WorkspacePath::from_relative(&format!(".git/{lock}")).ok())
        .collect()
}

/// The index bytes a restore in `direction` writes, read now so that a missing copy stops
/// the restore before anything changes: `None` when it writes none.
pub(crate) fn index_to_write(
    record: &GitRecord,
    direction: Direction,
    stored: &Stored<'_>,
) -> std::io::Result<Option<Option<Vec<u8>>>> {
    let Some(IndexRecord { before, after }) = record.index else {
        return Ok(None);
    };
    let (_, target) = sides(before, after, direction);
    match target {
        None => Ok(Some(None)),
        Some(hash) => match stored.get(&hash)? {
            Some(bytes) => Ok(Some(Some(bytes))),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the copy of the git index {} is missing", hash.short()),
            )),
        },
    }
}

/// Moves what `record` moved to where a restore in `direction` takes it, writing `index`
/// (from [`index_to_write`]) as the index, with reflog entries `shiro undo` or `shiro redo`.
/// What stands there already is left alone.
pub(crate) fn apply(
    root: &Path,
    record: &GitRecord,
    direction: Direction,
    index: Option<Option<Vec<u8>>>,
) -> Result<(), UndoError> {
    let Some(repo) = repo(root) else {
        return Err(git_error(
            root,
            std::io::Error::new(std::io::ErrorKind::NotFound, "the repository is gone"),
        ));
    };
    let failed = |err| git_error(root, err);
    let mut moves = Vec::new();
    let mut now = Vec::new();
    for (name, moved) in &record.moved {
        let (_, target) = sides(&moved.before, &moved.after, direction);
        now.push(repo.value(name).map_err(failed)?);
        moves.push((name.as_str(), target.as_deref()));
    }
    let moves: Vec<(&str, Option<&str>, Option<&str>)> = (moves.into_iter().zip(&now))
        .filter(|((_, target), now)| now.as_deref() != *target)
        .map(|((name, target), now)| (name, now.as_deref(), target))
        .collect();
    let message = match direction {
        Direction::Undo => "shiro undo",
        Direction::Redo => "shiro redo",
    };
    if !moves.is_empty() {
        repo.set(&moves, message).map_err(failed)?;
    }
    if let Some(bytes) = index {
        let found = repo.index().map_err(failed)?;
        if found != bytes {
            repo.set_index(bytes.as_deref()).map_err(failed)?;
        }
    }
    Ok(())
}

/// Records in `record` the values things have now on the side a restore in `direction`
/// leaves, so that the opposite restore brings back what a forced one moved away from (the
/// index excepted: its bytes are not kept again).
pub(crate) fn settle(
    root: &Path,
    record: &mut GitRecord,
    direction: Direction,
) -> Result<(), UndoError> {
    let Some(repo) = repo(root) else {
        return Ok(());
    };
    for (name, moved) in &mut record.moved {
        let now = repo.value(name).map_err(|err| git_error(root, err))?;
        match direction {
            Direction::Undo => moved.after = now,
            Direction::Redo => moved.before = now,
        }
    }
    Ok(())
}
