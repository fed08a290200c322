//! The restore engine: plan, conflict check and the idempotent apply, all through a `Mutator`.
//!
//! Apply converges every touched path on its target image, checking what is there before each
//! step, so running it again after an interruption finishes the job and changes nothing that
//! is already right. Its order handles a file replaced by a directory and the reverse:
//! 1. remove what must go, deepest first (files and links, then emptied directories);
//! 2. create the directories that must exist, shallowest first;
//! 3. write files (bytes and mode) and create links;
//! 4. set directory modes last, so a read-only directory is filled before it is closed.

use std::collections::{BTreeMap, BTreeSet};

use shiro_tools::{
    Mutator, MutatorError, Stat, WorkspacePath, create_parent_dirs, partial_write_path,
};

use crate::blob::Blobs;
use crate::error::UndoError;
use crate::format::TurnRecord;
use crate::image::{ContentHash, Image, Spares, hash_file, hashed_image, real_image};
use crate::report::{Action, Conflict, ConflictKind, Direction};

/// At most this many foreign entries are named in a "directory not empty" conflict.
const MAX_NAMED_ENTRIES: usize = 5;

/// The spare buffers a restore reads blobs into: those of files this big (or bigger) are read
/// into memory it already has (from the file before), since mapping fresh memory page by page
/// costs as much as copying the bytes.
pub(crate) fn spares() -> Spares {
    Spares::new(64 * 1024)
}

/// One path of a restore: where it is, where it should be, where it goes.
#[derive(Debug)]
pub(crate) struct Planned {
    pub path: WorkspacePath,
    /// What is there now.
    pub now: Image,
    /// What the log says should be there now.
    pub expected: Image,
    /// What the restore makes it.
    pub becomes: Image,
}

/// The images a restore in `direction` expects to find and leaves.
fn sides(record: &crate::format::PathRecord, direction: Direction) -> (&Image, &Image) {
    match direction {
        Direction::Undo => (&record.after, &record.before),
        Direction::Redo => (&record.before, &record.after),
    }
}

/// Reads the current image of every path of `turn` (the bytes of files are hashed, not
/// kept: a turn may have touched more than fits in memory).
pub(crate) async fn plan(
    mutator: &dyn Mutator,
    turn: &TurnRecord,
    direction: Direction,
) -> Result<Vec<Planned>, UndoError> {
    let mut planned = Vec::with_capacity(turn.paths.len());
    for (path, record) in turn.workspace_paths() {
        let now = hashed_image(mutator, &path).await?;
        let (expected, becomes) = sides(record, direction);
        planned.push(Planned {
            path,
            now,
            expected: expected.clone(),
            becomes: becomes.clone(),
        });
    }
    Ok(planned)
}

/// The paths that changed since the log's record of them, and directories in the way of a
/// file that hold entries the turn did not make.
pub(crate) async fn conflicts(
    mutator: &dyn Mutator,
    plan: &[Planned],
) -> Result<Vec<Conflict>, UndoError> {
    let going: BTreeSet<&WorkspacePath> = plan
        .iter()
        .filter(|p| !p.becomes.exists())
        .map(|p| &p.path)
        .collect();
    let mut conflicts = Vec::new();
    for item in plan {
        if !same(&item.now, &item.expected) {
            conflicts.push(Conflict {
                path: item.path.clone(),
                kind: ConflictKind::Changed {
                    expected: item.expected.clone(),
                    found: item.now.clone(),
                },
            });
        } else if item.now.is_dir() && item.becomes.exists() && !item.becomes.is_dir() {
            let entries = foreign_entries(mutator, &item.path, &going).await?;
            if !entries.is_empty() {
                conflicts.push(Conflict {
                    path: item.path.clone(),
                    kind: ConflictKind::NotEmpty { entries },
                });
            }
        }
    }
    Ok(conflicts)
}

/// Whether two images describe the same state (for a file: kind, mode and content).
fn same(a: &Image, b: &Image) -> bool {
    a == b
}

/// Entries under `dir` that the restore will not remove, up to a few.
async fn foreign_entries(
    mutator: &dyn Mutator,
    dir: &WorkspacePath,
    going: &BTreeSet<&WorkspacePath>,
) -> Result<Vec<WorkspacePath>, UndoError> {
    let mut foreign = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(next) = pending.pop() {
        for entry in mutator.read_dir(&next).await? {
            if !going.contains(&entry.path) {
                foreign.push(entry.path);
                if foreign.len() >= MAX_NAMED_ENTRIES {
                    return Ok(foreign);
                }
            } else if matches!(entry.stat, Stat::Dir { .. }) {
                pending.push(entry.path);
            }
        }
    }
    foreign.sort();
    Ok(foreign)
}

/// Stores a copy of each file the restore will replace that the store lacks, so that the
/// opposite operation can bring it back: read again and stored in batches (256 files or
/// 16 MiB), so memory stays bounded however much the turn touched. Returns the paths whose bytes no longer
/// match what the plan saw (changed meanwhile); their copies are not stored, and the caller
/// must not go on.
pub(crate) async fn keep_copies(
    mutator: &dyn Mutator,
    blobs: &Blobs,
    plan: &[Planned],
) -> Result<Vec<Conflict>, UndoError> {
    // A batch is stored (and its memory freed) at this many files or bytes.
    const BATCH_FILES: usize = 256;
    const BATCH_BYTES: usize = 16 << 20;
    let store = |copies: &mut Vec<(ContentHash, Vec<u8>)>| {
        let stored = blobs
            .put_fast(copies.iter().map(|(hash, bytes)| (hash, bytes.as_slice())))
            .map_err(|err| UndoError::io("store a copy in", blobs.dir(), err));
        copies.clear();
        stored
    };
    let mut copies = Vec::new();
    let mut bytes_held = 0;
    for item in plan {
        let Some(hash) = item.now.hash().filter(|hash| !blobs.contains(hash)) else {
            continue;
        };
        let (found, bytes) = real_image(mutator, &item.path, &Spares::none()).await?;
        match bytes {
            Some(bytes) if found == item.now => {
                bytes_held += bytes.len();
                copies.push((hash, bytes));
            }
            _ => {
                return Ok(vec![Conflict {
                    path: item.path.clone(),
                    kind: ConflictKind::Changed {
                        expected: item.now.clone(),
                        found,
                    },
                }]);
            }
        }
        if copies.len() >= BATCH_FILES || bytes_held >= BATCH_BYTES {
            store(&mut copies)?;
            bytes_held = 0;
        }
    }
    store(&mut copies)?;
    Ok(Vec::new())
}

/// Checks that every file the restore writes has its bytes in the store, before anything is
/// changed.
pub(crate) fn check_blobs(blobs: &Blobs, plan: &[Planned]) -> Result<(), UndoError> {
    for item in plan {
        if let Image::File { hash, .. } = &item.becomes
            && item.now != item.becomes
            && !blobs.contains(hash)
        {
            return Err(UndoError::Blob {
                path: item.path.clone(),
                hash: hash.to_hex(),
                reason: "missing".to_owned(),
            });
        }
    }
    Ok(())
}

/// Removes what writes killed before their rename left beside `paths` (see
/// [`partial_write_path`]): crash recovery calls it for every path of the interrupted
/// operation, so a crash leaves no stray file in the workspace. Best effort: a path it cannot
/// see safely (under a link that now leads elsewhere, say) is left alone, since a stray
/// temporary file must never stop a restore.
pub(crate) async fn sweep_partial_writes<'a>(
    mutator: &dyn Mutator,
    paths: impl IntoIterator<Item = &'a WorkspacePath>,
) {
    for path in paths {
        let temp = partial_write_path(path);
        if let Ok(Stat::File { .. }) = mutator.stat(&temp).await {
            let _ = mutator.remove_file(&temp).await;
        }
    }
}

/// What a restore found at its paths just before it began (the images of its plan), so that
/// it need not read a file again to know whether it already holds its target. A restore
/// re-run after a crash has seen nothing and reads what it needs.
pub(crate) type Seen = BTreeMap<WorkspacePath, Image>;

/// Makes every path of `turn` what `direction` says it becomes. Returns the paths whose
/// action differs from the plain one (kept or skipped directories).
///
/// Files are written with [`Mutator::overwrite`]: in place, like `cp`, since a restore
/// interrupted half-way is finished from its `begin` record in the log, and creating a new file per path (then
/// deleting the old one) was most of a restore's cost on a real disk.
pub(crate) async fn apply(
    mutator: &dyn Mutator,
    blobs: &Blobs,
    turn: &TurnRecord,
    direction: Direction,
    seen: &Seen,
    spares: &Spares,
) -> Result<BTreeMap<WorkspacePath, Action>, UndoError> {
    let mut items: Vec<(WorkspacePath, Image)> = turn
        .workspace_paths()
        .into_iter()
        .map(|(path, record)| {
            let target = sides(record, direction).1.clone();
            (path, target)
        })
        .collect();
    let mut notes = BTreeMap::new();

    // 1. Removals, deepest first, so a directory is emptied before it is removed.
    items.sort_by(|(a, _), (b, _)| b.depth().cmp(&a.depth()).then_with(|| b.cmp(a)));
    for (path, target) in &items {
        match mutator.real_stat(path).await? {
            Stat::Absent => {}
            Stat::File { .. } if matches!(target, Image::File { .. }) => {}
            Stat::Symlink { target: now }
                if *target
                    == (Image::Symlink {
                        target: now.clone(),
                    }) => {}
            Stat::File { .. } | Stat::Symlink { .. } => mutator.remove_file(path).await?,
            Stat::Dir { .. } if target.is_dir() => {}
            Stat::Dir { .. } => match mutator.remove_dir(path).await {
                Ok(()) => {}
                Err(MutatorError::DirectoryNotEmpty(_)) => {
                    let note = if target.exists() {
                        Action::Skipped
                    } else {
                        Action::KeptNotEmpty
                    };
                    notes.insert(path.clone(), note);
                }
                Err(err) => return Err(err.into()),
            },
        }
    }

    // 2. Directories, shallowest first; their modes come last (step 4).
    items.reverse();
    for (path, target) in &items {
        if !target.is_dir() {
            continue;
        }
        match mutator.real_stat(path).await? {
            Stat::Absent => {
                create_parent_dirs(mutator, path).await?;
                mutator.create_dir(path).await?;
            }
            Stat::Dir { .. } => {}
            // Step 1 removed files and links here; one that came back is not ours to remove.
            Stat::File { .. } | Stat::Symlink { .. } => {
                notes.insert(path.clone(), Action::Skipped);
            }
        }
    }

    // 3. Files and links.
    for (path, target) in &items {
        if notes.contains_key(path) {
            continue;
        }
        match target {
            Image::File { mode, len, hash } => {
                let now = mutator.real_stat(path).await?;
                match now {
                    Stat::File {
                        mode: now_mode,
                        len: now_len,
                    } if now_mode == *mode
                        && now_len == *len
                        && holds(mutator, path, hash, seen).await? =>
                    {
                        continue;
                    }
                    Stat::Dir { .. } => {
                        notes.insert(path.clone(), Action::Skipped);
                        continue;
                    }
                    _ => {}
                }
                let bytes = load_blob(blobs, path, hash, spares.take(*len))?;
                if !now.exists() {
                    create_parent_dirs(mutator, path).await?;
                }
                mutator.overwrite(path, &bytes, *mode).await?;
                spares.give(Some(bytes));
            }
            Image::Symlink { target: link } => match mutator.real_stat(path).await? {
                Stat::Symlink { target: now } if now == *link => {}
                Stat::Dir { .. } => {
                    notes.insert(path.clone(), Action::Skipped);
                }
                Stat::Absent => {
                    create_parent_dirs(mutator, path).await?;
                    mutator.symlink(link, path).await?;
                }
                Stat::File { .. } | Stat::Symlink { .. } => {
                    mutator.remove_file(path).await?;
                    mutator.symlink(link, path).await?;
                }
            },
            Image::Absent | Image::Dir { .. } => {}
        }
    }

    // 4. Directory modes, deepest first.
    for (path, target) in items.iter().rev() {
        if let Image::Dir { mode } = target
            && let Stat::Dir { mode: now } = mutator.real_stat(path).await?
            && now != *mode
        {
            mutator.set_mode(path, *mode).await?;
        }
    }
    // Single writes are not flushed; one sync makes the whole restore durable before the
    // caller logs it as done. A crash before that re-runs it from its `begin` record.
    let paths: Vec<WorkspacePath> = items.into_iter().map(|(path, _)| path).collect();
    mutator.sync(&paths).await?;
    Ok(notes)
}

/// Whether the file at `path` holds the bytes of `hash`: what the restore saw there, or else
/// what it reads there now.
async fn holds(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    hash: &ContentHash,
    seen: &Seen,
) -> Result<bool, UndoError> {
    Ok(match seen.get(path) {
        Some(image) => image.hash().as_ref() == Some(hash),
        None => hash_file(mutator, path).await?.1 == *hash,
    })
}

/// The bytes of the blob `hash` for `path`, read into `buf` when given.
fn load_blob(
    blobs: &Blobs,
    path: &WorkspacePath,
    hash: &ContentHash,
    buf: Option<Vec<u8>>,
) -> Result<Vec<u8>, UndoError> {
    let blob_error = |reason: String| UndoError::Blob {
        path: path.clone(),
        hash: hash.to_hex(),
        reason,
    };
    match blobs.get_into(hash, buf.unwrap_or_default()) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(blob_error("missing".to_owned())),
        Err(err) => Err(blob_error(format!("damaged ({err})"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shiro_tools::MemMutator;

    use super::*;

    fn file(bytes: &[u8]) -> Image {
        Image::File {
            mode: 0o644,
            len: bytes.len() as u64,
            hash: ContentHash::of(bytes),
        }
    }

    /// The copies are read again after the plan; a file that changed meanwhile is reported,
    /// not stored under the hash the plan saw.
    #[tokio::test]
    async fn a_file_changed_since_the_plan_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let ws = MemMutator::new();
        let kept = WorkspacePath::from_relative("kept").unwrap();
        let changed = WorkspacePath::from_relative("changed").unwrap();
        ws.write(&kept, b"as planned", None).await.unwrap();
        ws.write(&changed, b"edited after the plan", None)
            .await
            .unwrap();
        let planned = |path: &WorkspacePath, seen: &[u8]| Planned {
            path: path.clone(),
            now: file(seen),
            expected: file(seen),
            becomes: Image::Absent,
        };
        let unchanged = [planned(&kept, b"as planned")];
        assert!(
            keep_copies(&ws, &blobs, &unchanged)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            blobs.get(&ContentHash::of(b"as planned")).unwrap().unwrap(),
            b"as planned"
        );

        let raced = [planned(&changed, b"what the plan saw")];
        let conflicts = keep_copies(&ws, &blobs, &raced).await.unwrap();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, changed);
        assert!(!blobs.contains(&ContentHash::of(b"edited after the plan")));
        assert!(!blobs.contains(&ContentHash::of(b"what the plan saw")));
    }
}
