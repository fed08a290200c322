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

use shiro_tools::{Mutator, MutatorError, Stat, WorkspacePath, create_parent_dirs};

use crate::blob::Blobs;
use crate::error::UndoError;
use crate::format::TurnRecord;
use crate::image::{ContentHash, Image, Spares, hash_file, hashed_image, real_image};
use crate::pack::{Pack, PackWriter, pack_path};
use crate::report::{Action, Conflict, ConflictKind, Direction};

/// At most this many foreign entries are named in a "directory not empty" conflict.
const MAX_NAMED_ENTRIES: usize = 5;

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

/// Where a restore finds the bytes it writes: the blobs, and the packs of its turn.
#[derive(Debug)]
pub(crate) struct Stored<'a> {
    blobs: &'a Blobs,
    packs: Vec<Pack>,
}

impl<'a> Stored<'a> {
    /// The blobs, and the packs `turn` names. A pack that cannot be opened is left out: what
    /// only it held reads as missing, which the restore reports before it changes anything.
    pub(crate) fn open(blobs: &'a Blobs, turn: &TurnRecord) -> Self {
        let packs = (turn.packs.iter())
            .filter_map(|name| Pack::open(&pack_path(blobs.dir(), name)).ok())
            .collect();
        Self { blobs, packs }
    }

    /// The blobs alone.
    pub(crate) fn blobs_only(blobs: &'a Blobs) -> Self {
        Self {
            blobs,
            packs: Vec::new(),
        }
    }

    /// Where the blobs and packs are.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.blobs.dir()
    }

    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.blobs.contains(hash) || self.packs.iter().any(|pack| pack.contains(hash))
    }

    /// The bytes of `hash`, checked; `Ok(None)` when none holds them.
    pub(crate) fn get(&self, hash: &ContentHash) -> std::io::Result<Option<Vec<u8>>> {
        if let Some(pack) = self.packs.iter().find(|pack| pack.contains(hash)) {
            return pack.get(hash);
        }
        self.blobs.get(hash)
    }
}

/// Keeps a copy of each file the restore will replace that the store lacks, so that the
/// opposite operation can bring it back: all of them in one new pack, flushed once (see
/// [`crate::pack`]), at `target`. Each file is read again, compressed and appended at once,
/// so memory stays bounded however much the turn touched. Returns whether it wrote the pack
/// (none was needed otherwise), or the paths whose bytes no longer match what the plan saw
/// (changed meanwhile): their copies are not kept, and the caller must not go on.
pub(crate) async fn keep_copies(
    mutator: &dyn Mutator,
    stored: &Stored<'_>,
    plan: &[Planned],
    target: &std::path::Path,
) -> Result<Result<bool, Vec<Conflict>>, UndoError> {
    let dir = stored.blobs.dir();
    let failed = |err| UndoError::io("keep a copy in", dir, err);
    let mut pack: Option<PackWriter> = None;
    for item in plan {
        let Some(hash) = item.now.hash().filter(|hash| !stored.contains(hash)) else {
            continue;
        };
        if pack.as_ref().is_some_and(|pack| pack.contains(&hash)) {
            continue;
        }
        let (found, bytes) = real_image(mutator, &item.path, &Spares::none()).await?;
        match bytes {
            Some(bytes) if found == item.now => {
                let writer = match &mut pack {
                    Some(writer) => writer,
                    None => pack.insert(PackWriter::create(dir).map_err(failed)?),
                };
                writer.add(hash, &bytes).map_err(failed)?;
            }
            _ => {
                return Ok(Err(vec![Conflict {
                    path: item.path.clone(),
                    kind: ConflictKind::Changed {
                        expected: item.now.clone(),
                        found,
                    },
                }]));
            }
        }
    }
    match pack {
        Some(writer) if !writer.is_empty() => {
            writer.finish(target).map_err(failed)?;
            Ok(Ok(true))
        }
        _ => Ok(Ok(false)),
    }
}

/// Checks that every file the restore writes has its bytes in the store, before anything is
/// changed.
pub(crate) fn check_blobs(stored: &Stored<'_>, plan: &[Planned]) -> Result<(), UndoError> {
    for item in plan {
        if let Image::File { hash, .. } = &item.becomes
            && item.now != item.becomes
            && !stored.contains(hash)
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
/// [`Mutator::remove_partial_writes`]): crash recovery calls it for every path of the
/// interrupted operation, so a crash leaves no stray file in the workspace. Best effort: a
/// stray temporary file must never stop a restore.
pub(crate) async fn sweep_partial_writes<'a>(
    mutator: &dyn Mutator,
    paths: impl IntoIterator<Item = &'a WorkspacePath>,
) {
    let paths: Vec<WorkspacePath> = paths.into_iter().cloned().collect();
    let _ = mutator.remove_partial_writes(&paths).await;
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
    stored: &Stored<'_>,
    turn: &TurnRecord,
    direction: Direction,
    seen: &Seen,
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
                if !now.exists() {
                    create_parent_dirs(mutator, path).await?;
                }
                // A blob stored raw (a big file's) is copied into place a piece at a time;
                // others are read into memory.
                let raw = stored.blobs.open_raw(hash);
                if let Some((mut source, stored_len)) =
                    raw.map_err(|err| blob_error(path, hash, &err))?
                {
                    mutator
                        .overwrite_from(path, &mut source, stored_len, *mode)
                        .await?;
                } else {
                    let bytes = load_blob(stored, path, hash)?;
                    mutator.overwrite(path, &bytes, *mode).await?;
                }
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

/// The stored bytes of `hash`, which `path` is to hold.
fn load_blob(
    stored: &Stored<'_>,
    path: &WorkspacePath,
    hash: &ContentHash,
) -> Result<Vec<u8>, UndoError> {
    match stored.get(hash) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(UndoError::Blob {
            path: path.clone(),
            hash: hash.to_hex(),
            reason: "missing".to_owned(),
        }),
        Err(err) => Err(blob_error(path, hash, &err)),
    }
}

/// The stored copy of `hash` for `path` cannot be read.
fn blob_error(path: &WorkspacePath, hash: &ContentHash, err: &std::io::Error) -> UndoError {
    UndoError::Blob {
        path: path.clone(),
        hash: hash.to_hex(),
        reason: format!("damaged ({err})"),
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

    /// The copies are read again after the plan and kept in one pack; a file that changed
    /// meanwhile is reported, not kept under the hash the plan saw.
    #[tokio::test]
    async fn a_file_changed_since_the_plan_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let turn = TurnRecord {
            packs: vec!["1-0".to_owned()],
            ..TurnRecord::empty(1)
        };
        let target = pack_path(dir.path(), "1-0");
        let ws = MemMutator::new();
        let kept = WorkspacePath::from_relative("kept").unwrap();
        let also = WorkspacePath::from_relative("also").unwrap();
        let changed = WorkspacePath::from_relative("changed").unwrap();
        ws.write(&kept, b"as planned", None).await.unwrap();
        ws.write(&also, b"as planned", None).await.unwrap();
        ws.write(&changed, b"edited after the plan", None)
            .await
            .unwrap();
        let planned = |path: &WorkspacePath, seen: &[u8]| Planned {
            path: path.clone(),
            now: file(seen),
            expected: file(seen),
            becomes: Image::Absent,
        };
        let unchanged = [planned(&kept, b"as planned"), planned(&also, b"as planned")];
        let none_yet = Stored::open(&blobs, &turn);
        let wrote = keep_copies(&ws, &none_yet, &unchanged, &target).await;
        assert!(matches!(wrote, Ok(Ok(true))), "{wrote:?}");
        let stored = Stored::open(&blobs, &turn);
        let hash = ContentHash::of(b"as planned");
        assert_eq!(stored.get(&hash).unwrap().unwrap(), b"as planned");
        // Kept already: no second pack.
        let again = keep_copies(&ws, &stored, &unchanged, &pack_path(dir.path(), "1-1")).await;
        assert!(matches!(again, Ok(Ok(false))), "{again:?}");

        let raced = [planned(&changed, b"what the plan saw")];
        let other = pack_path(dir.path(), "1-2");
        let Ok(Err(conflicts)) = keep_copies(&ws, &stored, &raced, &other).await else {
            panic!("the change is not reported");
        };
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, changed);
        assert!(!other.exists());
        assert!(!stored.contains(&ContentHash::of(b"what the plan saw")));
    }
}
