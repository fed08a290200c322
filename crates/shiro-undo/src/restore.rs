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

use shiro_tools::{Mutator, MutatorError, Stat, WorkspacePath, create_parent_dirs, on_threads};

use crate::blob::Blobs;
use crate::error::UndoError;
use crate::format::TurnRecord;
use crate::image::{ContentHash, Image, Spares, copy_into, hash_file, hashed_image, real_image};
use crate::pack::{PACK_SUFFIX, Pack, PackWriter, pack_path};
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
pub(crate) fn sides(record: &crate::format::PathRecord, direction: Direction) -> (&Image, &Image) {
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
    let paths = turn.workspace_paths()?;
    let mut planned = Vec::with_capacity(paths.len());
    for (path, record) in paths {
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
pub(crate) async fn foreign_entries(
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
    /// The packs of the turn that could not be opened, with why: a copy only they held
    /// is not just missing but damaged, and the error names them.
    unreadable: Vec<(String, String)>,
    /// What [`verify`] read, for the restore to write without reading it again.
    checked: std::sync::Mutex<Checked>,
}

/// The copies [`verify`] found whole: raw blobs (streamed, so only their hashes are kept)
/// and other copies' bytes, kept up to [`Checked::KEEP_MAX`] bytes in all so that a restore
/// does not decode each copy twice.
#[derive(Debug, Default)]
struct Checked {
    raw: BTreeSet<ContentHash>,
    bytes: BTreeMap<ContentHash, Vec<u8>>,
    kept: usize,
}

impl Checked {
    const KEEP_MAX: usize = 32 << 20;
}

impl<'a> Stored<'a> {
    /// The blobs, and the packs `turn` names. A pack that cannot be opened is left out (and
    /// remembered): what only it held is reported, before the restore changes anything, as
    /// damaged by that pack.
    pub(crate) fn open(blobs: &'a Blobs, turn: &TurnRecord) -> Self {
        let mut stored = Self::blobs_only(blobs);
        for name in &turn.packs {
            stored.open_pack(name);
        }
        stored
    }

    /// Opens the pack `name` too: one the restore names since [`Stored::open`] (another
    /// turn's, or the one it kept its copies in). What [`verify`] read is kept, for the
    /// restore to write without reading it again.
    pub(crate) fn open_pack(&mut self, name: &str) {
        match Pack::open(&pack_path(self.blobs.dir(), name)) {
            Ok(pack) => self.packs.push(pack),
            Err(err) => self.unreadable.push((name.to_owned(), err.to_string())),
        }
    }

    /// Why a copy that none of the blobs and packs holds is not there.
    fn missing_reason(&self) -> String {
        match self.unreadable.as_slice() {
            [] => "missing".to_owned(),
            [(name, why), ..] => {
                format!("damaged: the turn's pack blobs/{name}{PACK_SUFFIX} cannot be read ({why})")
            }
        }
    }

    /// The blobs alone.
    pub(crate) fn blobs_only(blobs: &'a Blobs) -> Self {
        Self {
            blobs,
            packs: Vec::new(),
            unreadable: Vec::new(),
            checked: std::sync::Mutex::default(),
        }
    }

    /// Where the blobs and packs are.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.blobs.dir()
    }

    /// Whether a pack or a blob holds `hash`: the packs first, whose indexes are in memory,
    /// where each look for a blob is two or three lookups of files that are mostly missing.
    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.in_packs(hash) || self.blobs.contains(hash)
    }

    /// Whether a pack of the restore holds `hash`.
    fn in_packs(&self, hash: &ContentHash) -> bool {
        self.packs.iter().any(|pack| pack.contains(hash))
    }

    fn checked(&self) -> std::sync::MutexGuard<'_, Checked> {
        // A poisoned lock only means a panic elsewhere; the sets are intact.
        self.checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks the copy of `hash` in full: `Ok(false)` when none holds it. What it read is
    /// remembered for [`Stored::take`] and [`Stored::open_raw`].
    fn check(&self, hash: &ContentHash) -> std::io::Result<bool> {
        // A pack's copy, where one reads back whole, spares looking for a raw blob (which
        // only a big file's copy is, and packs do not hold those).
        if self.in_packs(hash)
            && let Ok(Some(bytes)) = self.get(hash)
        {
            self.keep_checked(hash, bytes);
            return Ok(true);
        }
        let raw_damage = match self.blobs.open_raw(hash) {
            Ok(Some(_)) => {
                self.checked().raw.insert(*hash);
                return Ok(true);
            }
            Ok(None) => None,
            // A raw blob that cannot be read (damaged, or a link planted where it should be)
            // is no loss while a pack holds the same bytes.
            Err(err) => Some(err),
        };
        let bytes = match (self.get(hash)?, raw_damage) {
            (Some(bytes), _) => bytes,
            (None, Some(err)) => return Err(err),
            (None, None) => return Ok(false),
        };
        self.keep_checked(hash, bytes);
        Ok(true)
    }

    /// Keeps the bytes [`Stored::check`] read of `hash` for [`Stored::take`], while they fit
    /// in [`Checked::KEEP_MAX`] with those kept already; else the restore reads them again.
    fn keep_checked(&self, hash: &ContentHash, mut bytes: Vec<u8>) {
        let mut checked = self.checked();
        if checked.kept + bytes.len() <= Checked::KEEP_MAX {
            // Decoding leaves room to spare, which a kept copy would hold on to.
            bytes.shrink_to_fit();
            checked.kept += bytes.len();
            checked.bytes.insert(*hash, bytes);
        }
    }

    /// The bytes of `hash`, checked: those [`verify`] read, or read now.
    fn take(&self, hash: &ContentHash) -> std::io::Result<Option<Vec<u8>>> {
        let kept = {
            let mut checked = self.checked();
            let kept = checked.bytes.remove(hash);
            checked.kept -= kept.as_ref().map_or(0, Vec::len);
            kept
        };
        match kept {
            Some(bytes) => Ok(Some(bytes)),
            None => self.get(hash),
        }
    }

    /// The raw blob of `hash`, opened to copy from (see [`Blobs::open_raw`]); checked unless
    /// [`verify`] checked it already.
    fn open_raw(&self, hash: &ContentHash) -> std::io::Result<Option<(std::fs::File, u64)>> {
        let checked = self.checked();
        if checked.raw.contains(hash) {
            drop(checked);
            self.blobs.open_raw_checked_already(hash)
        } else if checked.bytes.contains_key(hash) {
            // Read already, and kept: [`Stored::take`] has them.
            Ok(None)
        } else {
            drop(checked);
            match self.blobs.open_raw(hash) {
                // A raw blob that cannot be read, where a pack holds the bytes (as
                // [`Stored::check`] found): they are read from the pack.
                Err(_) if self.in_packs(hash) => Ok(None),
                opened => opened,
            }
        }
    }

    /// The bytes of `hash`, checked; `Ok(None)` when none holds them. Every pack that holds
    /// them is tried, then the blobs: a damaged copy in one is no loss while another holds it.
    pub(crate) fn get(&self, hash: &ContentHash) -> std::io::Result<Option<Vec<u8>>> {
        let mut damage = None;
        for pack in self.packs.iter().filter(|pack| pack.contains(hash)) {
            match pack.get(hash) {
                Ok(found) => return Ok(found),
                Err(err) => damage = Some(err),
            }
        }
        match (self.blobs.get(hash), damage) {
            (Ok(None), Some(err)) => Err(err),
            (found, _) => found,
        }
    }
}

/// Keeps a copy of each file the restore will replace that the store lacks, so that the
/// opposite operation can bring it back: all of them in one new pack, flushed once (see
/// [`crate::pack`]), at `target`. Each file is read again, compressed and appended at once,
/// so memory stays bounded however much the turn touched; a file of `stream` bytes or more
/// is copied into a raw blob of its own a piece at a time instead. Returns whether it wrote
/// the pack (none was needed otherwise), or the paths whose bytes no longer match what the
/// plan saw (changed meanwhile): their copies are not kept, and the caller must not go on.
pub(crate) async fn keep_copies(
    mutator: &dyn Mutator,
    stored: &Stored<'_>,
    plan: &[Planned],
    target: &std::path::Path,
    stream: u64,
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
        if let Image::File { len, .. } = item.now
            && len >= stream
        {
            match keep_raw(mutator, stored.blobs, &item.path, &item.now).await? {
                Ok(()) => continue,
                Err(conflict) => return Ok(Err(vec![conflict])),
            }
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

/// Copies the file at `path` into a raw blob of its own, a piece at a time, if it still is
/// `expected`; otherwise nothing is kept and the change is the conflict.
async fn keep_raw(
    mutator: &dyn Mutator,
    blobs: &Blobs,
    path: &WorkspacePath,
    expected: &Image,
) -> Result<Result<(), Conflict>, UndoError> {
    let changed = |found: Image| Conflict {
        path: path.clone(),
        kind: ConflictKind::Changed {
            expected: expected.clone(),
            found,
        },
    };
    let Stat::File { mode, .. } = mutator.real_stat(path).await? else {
        let found = real_image(mutator, path, &Spares::none()).await?.0;
        return Ok(Err(changed(found)));
    };
    let failed = |err| UndoError::io("keep a copy in", blobs.dir(), err);
    let mut writer = blobs.raw_writer().map_err(failed)?;
    copy_into(
        mutator,
        path,
        &mut |piece| writer.write(piece),
        "keep a copy of",
    )
    .await?;
    let (hash, len) = writer.peek();
    let found = Image::File { mode, len, hash };
    if found != *expected {
        return Ok(Err(changed(found)));
    }
    writer.finish().map_err(failed)?;
    Ok(Ok(()))
}

/// Reads every stored copy a restore will write to `targets` in full and checks it against its
/// hash, before anything is changed: a restore must never stop half-way for a copy it could
/// have known was missing or damaged. A big file's raw copy is read a piece at a time; other
/// copies are decoded one at a time and dropped, so memory stays bounded.
///
/// A copy found damaged (it does not read back as its hash) is removed from the blobs, so that
/// a later turn stores those bytes afresh instead of trusting the damaged copy.
pub(crate) fn verify<'a>(
    stored: &Stored<'_>,
    targets: impl IntoIterator<Item = (&'a WorkspacePath, &'a Image)>,
) -> Result<(), UndoError> {
    let mut seen = BTreeSet::new();
    let wanted: Vec<(&WorkspacePath, &ContentHash)> = targets
        .into_iter()
        .filter_map(|(path, target)| match target {
            Image::File { hash, .. } => Some((path, hash)),
            _ => None,
        })
        .filter(|(_, hash)| seen.insert(**hash))
        .collect();
    // Checking a copy is decoding and hashing it, work for a processor: the copies are split
    // between a few threads. The first failure in the restore's own order is reported.
    let threads = match wanted.len() {
        0..4 => 1,
        _ => crate::pack::worker_threads(VERIFY_THREADS),
    };
    let first_failure = if threads < 2 || wanted.len() < 2 * threads {
        first_bad(stored, &wanted, 0)
    } else {
        on_threads(
            &wanted,
            wanted.len().div_ceil(threads),
            |at, part| first_bad(stored, part, at),
            |at, _| Some((at, Err(std::io::Error::other("a checking thread failed")))),
        )
        .into_iter()
        .flatten()
        .min_by_key(|(at, _)| *at)
    };
    let Some((at, failure)) = first_failure else {
        return Ok(());
    };
    let (path, hash) = wanted[at];
    // Best effort: what matters is that the restore stops. Damage seldom stops at one copy,
    // nor shows the same way in each (a hash in a pack's index changed reads as missing):
    // every pack of the turn is rewritten without the copies it holds that do not read back,
    // and a damaged blob is removed, so that no later turn trusts them.
    for pack in &stored.packs {
        let _ = pack.scrub();
    }
    match failure {
        Ok(()) => Err(UndoError::Blob {
            path: path.clone(),
            hash: hash.to_hex(),
            reason: stored.missing_reason(),
        }),
        Err(err) => {
            if err.kind() == std::io::ErrorKind::InvalidData {
                let _ = stored.blobs.discard_damaged([hash]);
            }
            Err(blob_error(path, hash, &err))
        }
    }
}

/// How many threads [`verify`] checks copies on at most.
const VERIFY_THREADS: usize = 4;

/// Checks each copy of `part` in turn; the first that is missing (`Ok(())`) or damaged
/// (`Err`), with its index in the whole list (`offset` is the index of `part[0]`).
#[allow(clippy::type_complexity)]
fn first_bad(
    stored: &Stored<'_>,
    part: &[(&WorkspacePath, &ContentHash)],
    offset: usize,
) -> Option<(usize, std::io::Result<()>)> {
    part.iter()
        .enumerate()
        .find_map(|(n, (_, hash))| match stored.check(hash) {
            Ok(true) => None,
            Ok(false) => Some((offset + n, Ok(()))),
            Err(err) => Some((offset + n, Err(err))),
        })
}

/// Where a path of an interrupted restore stands, judged from what is there now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// As the restore found it, or on the way (removed to be replaced by another kind).
    NotReached,
    /// As the restore makes it.
    Done,
    /// The path the restore was writing when it stopped: it may hold a mix of both.
    Started,
    /// Neither: changed by someone else since the restore began.
    Changed(Image),
}

/// Judges every path of `turn`, whose restore in `direction` began and did not end, from
/// what is there now. `started` is the path the restore marked as being written (see
/// [`Progress`]). The images on the side the restore leaves are what it found there (its
/// `begin` record holds them), so a path that is neither those nor the target changed since.
pub(crate) async fn standings(
    mutator: &dyn Mutator,
    turn: &TurnRecord,
    direction: Direction,
    started: Option<usize>,
) -> Result<Vec<(WorkspacePath, Standing)>, UndoError> {
    let paths = turn.paths()?;
    let mut out = Vec::with_capacity(paths.len());
    for (index, record) in paths.iter().enumerate() {
        let Ok(path) = WorkspacePath::from_relative(&record.path) else {
            continue;
        };
        let (from, to) = sides(record, direction);
        let found = hashed_image(mutator, &path).await?;
        let standing = if alike(&found, to) {
            Standing::Done
        } else if alike(&found, from)
            // Replacing one kind of entry by another removes it first.
            || (found == Image::Absent && from.exists() && to.exists())
        {
            Standing::NotReached
        } else if started == Some(index) {
            Standing::Started
        } else {
            Standing::Changed(found)
        };
        out.push((path, standing));
    }
    Ok(out)
}

/// Whether `found` is `image` as far as a restore under way can tell: a file with its bytes
/// (its mode is set after them), a directory (its mode is set last), or the same entry.
fn alike(found: &Image, image: &Image) -> bool {
    match (found, image) {
        (Image::File { hash: a, .. }, Image::File { hash: b, .. }) => a == b,
        (Image::Dir { .. }, Image::Dir { .. }) => true,
        (a, b) => a == b,
    }
}

/// Marks which path a restore is writing, in the store's `progress` file: 16 bytes, the
/// restore's run number and the index of the path (plus one) in its turn, rewritten in place
/// before each file is written and never flushed (a flush per file would cost a restore of
/// many files most of its time). After a crash of the process the mark is exact (the kernel
/// keeps it); after a power cut it may be older, and the half-written path then reads as
/// changed by someone else: the restore is rolled back and that path left as it is, never
/// overwritten blindly.
#[derive(Debug)]
pub(crate) struct Progress {
    file: Option<std::fs::File>,
    run: u64,
    /// The index (plus one) of the path marked last; 0 for none.
    current: std::sync::atomic::AtomicU64,
}

impl Progress {
    /// The progress file at `path`, created if missing, never through a link; `None` when it
    /// cannot be opened.
    fn open_file(path: &std::path::Path) -> Option<std::fs::File> {
        crate::ground::no_follow()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ok()
    }

    /// Opens (creating) the progress file at `path` for the restore `run`, clearing its mark.
    /// Should it fail, the restore runs without marks (see above: never unsafe).
    pub(crate) fn open(path: &std::path::Path, run: u64) -> Self {
        let file = Self::open_file(path);
        let progress = Self {
            file,
            run,
            current: std::sync::atomic::AtomicU64::new(0),
        };
        progress.mark(None);
        progress
    }

    /// Opens the progress file of the restore `run` to go on with it, keeping the mark it
    /// holds (`started`): that path may still be half-written, so the mark must stay until
    /// it is rewritten (see [`apply_marked_first`]).
    pub(crate) fn resume(path: &std::path::Path, run: u64, started: Option<usize>) -> Self {
        let file = Self::open_file(path);
        Self {
            file,
            run,
            current: std::sync::atomic::AtomicU64::new(started.map_or(0, |i| i as u64 + 1)),
        }
    }

    /// The path marked last, if any.
    pub(crate) fn current(&self) -> Option<usize> {
        let value = self.current.load(std::sync::atomic::Ordering::SeqCst);
        usize::try_from(value.checked_sub(1)?).ok()
    }

    /// Marks the path at `index` of the turn as being written.
    pub(crate) fn start(&self, index: usize) {
        self.mark(Some(index));
    }

    fn mark(&self, index: Option<usize>) {
        use std::os::unix::fs::FileExt;
        let index = index.map_or(0, |i| i as u64 + 1);
        self.current
            .store(index, std::sync::atomic::Ordering::SeqCst);
        if let Some(file) = &self.file {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&self.run.to_le_bytes());
            bytes[8..].copy_from_slice(&index.to_le_bytes());
            // A mark that cannot be written only makes a crash here read as a change by
            // someone else: safe, so not worth failing the restore for.
            let _ = file.write_all_at(&bytes, 0);
        }
    }

    /// The path the restore `run` marked last, if the file at `path` holds a mark of it.
    pub(crate) fn read(path: &std::path::Path, run: Option<u64>) -> Option<usize> {
        let run = run?;
        let bytes = crate::ground::read_optional(path).ok()??;
        let field = |at: usize| {
            let mut field = [0u8; 8];
            field.copy_from_slice(bytes.get(at..at + 8)?);
            Some(u64::from_le_bytes(field))
        };
        if field(0)? != run {
            return None;
        }
        usize::try_from(field(8)?.checked_sub(1)?).ok()
    }
}

/// A number for a new restore, to tell its progress marks from an earlier restore's: the
/// time in nanoseconds with the process id, which no two restores of one store share.
pub(crate) fn new_run() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 48)
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
/// Borrowed from the plan: a restore may list many paths.
pub(crate) type Seen<'a> = BTreeMap<&'a WorkspacePath, &'a Image>;

/// Makes every path of `turn` what `direction` says it becomes. Returns the paths whose
/// action differs from the plain one (kept or skipped directories).
///
/// Files are written with [`Mutator::overwrite`]: in place, like `cp`, since a restore
/// interrupted half-way is finished from its `begin` record in the log, and creating a new file per path (then
/// deleting the old one) was most of a restore's cost on a real disk.
///
/// Paths in `leave` are not touched at all (a rollback leaves the paths someone else changed
/// as they are). Before each file is written, `progress` marks it.
pub(crate) async fn apply(
    mutator: &dyn Mutator,
    stored: &Stored<'_>,
    turn: &TurnRecord,
    direction: Direction,
    seen: &Seen<'_>,
    leave: &BTreeSet<WorkspacePath>,
    progress: &Progress,
) -> Result<BTreeMap<WorkspacePath, Action>, UndoError> {
    // The targets borrowed from the turn: it may list many paths.
    let mut items: Vec<(WorkspacePath, &Image, usize)> = (turn.paths()?.iter().enumerate())
        .filter_map(|(index, record)| {
            let path = WorkspacePath::from_relative(&record.path).ok()?;
            let target = sides(record, direction).1;
            (!leave.contains(&path)).then_some((path, target, index))
        })
        .collect();
    let mut notes = BTreeMap::new();

    // 1. Removals, deepest first, so a directory is emptied before it is removed.
    items.sort_by(|(a, ..), (b, ..)| b.depth().cmp(&a.depth()).then_with(|| b.cmp(a)));
    for (path, target, _) in &items {
        match mutator.real_stat(path).await? {
            Stat::Absent => {}
            Stat::File { .. } if matches!(target, Image::File { .. }) => {}
            Stat::Symlink { target: now }
                if **target
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
    for (path, target, _) in &items {
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
    for (path, target, index) in &items {
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
                progress.start(*index);
                // A blob stored raw (a big file's) is copied into place a piece at a time;
                // others are read into memory.
                let raw = stored.open_raw(hash);
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
    for (path, target, _) in items.iter().rev() {
        if let Image::Dir { mode } = target
            && let Stat::Dir { mode: now } = mutator.real_stat(path).await?
            && now != *mode
        {
            mutator.set_mode(path, *mode).await?;
        }
    }
    // Single writes are not flushed; one sync makes the whole restore durable before the
    // caller logs it as done. A crash before that re-runs it from its `begin` record.
    let paths: Vec<WorkspacePath> = items.into_iter().map(|(path, ..)| path).collect();
    mutator.sync(&paths).await?;
    Ok(notes)
}

/// The directories [`apply`] kept because they held entries it did not make: where its
/// target has nothing ([`Action::KeptNotEmpty`]), and where a forced restore's target is a
/// file or a link ([`Action::Skipped`]; a skipped path that is not a directory is told
/// apart by the log, which takes only the paths the restore found as directories and whose
/// target is none). The `done` record names them, so that the opposite restore expects
/// them as they were left. Sorted, each once.
pub(crate) fn kept_dirs(notes: &BTreeMap<WorkspacePath, Action>) -> Vec<String> {
    (notes.iter())
        .filter(|(_, action)| matches!(action, Action::KeptNotEmpty | Action::Skipped))
        .map(|(path, _)| path.as_str().to_owned())
        .collect()
}

/// Like [`apply`], but first brings the path `progress` marks (the one being written when the
/// restore stopped, which may hold a mix of two versions) to its target on its own: writing
/// other paths first would move the mark, and a crash then would leave that mix unmarked.
pub(crate) async fn apply_marked_first(
    mutator: &dyn Mutator,
    stored: &Stored<'_>,
    turn: &TurnRecord,
    direction: Direction,
    leave: &BTreeSet<WorkspacePath>,
    progress: &Progress,
) -> Result<BTreeMap<WorkspacePath, Action>, UndoError> {
    let seen = Seen::new();
    let paths = turn.paths()?;
    if let Some(marked) = progress.current().and_then(|i| paths.get(i)) {
        let others: BTreeSet<WorkspacePath> = (paths.iter())
            .filter(|record| record.path != marked.path)
            .filter_map(|record| WorkspacePath::from_relative(&record.path).ok())
            .chain(leave.iter().cloned())
            .collect();
        apply(mutator, stored, turn, direction, &seen, &others, progress).await?;
    }
    apply(mutator, stored, turn, direction, &seen, leave, progress).await
}

/// Whether the file at `path` holds the bytes of `hash`: what the restore saw there, or else
/// what it reads there now.
async fn holds(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    hash: &ContentHash,
    seen: &Seen<'_>,
) -> Result<bool, UndoError> {
    Ok(match seen.get(path) {
        Some(image) => image.hash().as_ref() == Some(hash),
        None => hash_file(mutator, path, None).await?.1 == *hash,
    })
}

/// The stored bytes of `hash`, which `path` is to hold.
fn load_blob(
    stored: &Stored<'_>,
    path: &WorkspacePath,
    hash: &ContentHash,
) -> Result<Vec<u8>, UndoError> {
    match stored.take(hash) {
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

    /// A path left half-written by a restore that stopped (marked in the progress file) is
    /// rewritten before any other, so that the mark stays on it until it is whole: writing
    /// another path first would move the mark, and a crash then would leave the mix unmarked.
    #[tokio::test]
    async fn the_marked_path_is_rewritten_first() {
        use std::sync::{Arc, Mutex};

        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let mut turn = TurnRecord::empty(1);
        let mut batch = Vec::new();
        for name in ["a", "b", "c"] {
            let before = format!("{name} before");
            let after = format!("{name} after");
            batch.push((ContentHash::of(before.as_bytes()), before));
            turn.paths_mut().unwrap().push(crate::format::PathRecord {
                path: name.to_owned(),
                before: file(batch.last().unwrap().1.as_bytes()),
                after: file(after.as_bytes()),
            });
        }
        blobs
            .put_all(batch.iter().map(|(hash, bytes)| {
                (
                    *hash,
                    crate::blob::Form::Zlib(bytes.as_bytes(), flate2::Compression::fast()),
                )
            }))
            .unwrap();
        let ws = MemMutator::new();
        for name in ["a", "b", "c"] {
            let path = WorkspacePath::from_relative(name).unwrap();
            ws.write(&path, format!("{name} after").as_bytes(), None)
                .await
                .unwrap();
        }
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&order);
        let hooked = shiro_tools::Hooked::new(ws.clone(), move |m| {
            seen.lock().unwrap().push(m.path().to_string());
            Ok(())
        });
        let progress = Progress::resume(&dir.path().join("progress"), 9, Some(1));
        let stored = Stored::open(&blobs, &turn);
        apply_marked_first(
            &hooked,
            &stored,
            &turn,
            Direction::Undo,
            &BTreeSet::new(),
            &progress,
        )
        .await
        .unwrap();
        assert_eq!(*order.lock().unwrap(), ["b", "a", "c"]);
        assert_eq!(
            Progress::read(&dir.path().join("progress"), Some(9)),
            Some(2)
        );
        let b = WorkspacePath::from_relative("b").unwrap();
        assert_eq!(ws.read(&b).await.unwrap(), b"b before");
    }

    /// With enough copies to check on several threads, the first one missing in the
    /// restore's own order is the one reported, and every other is found whole.
    #[test]
    fn verify_reports_the_first_missing_copy_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let turn = TurnRecord {
            packs: vec!["1-0".to_owned()],
            ..TurnRecord::empty(1)
        };
        let contents: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("copy {i}\n").into_bytes())
            .collect();
        let mut writer = PackWriter::create(dir.path()).unwrap();
        for (i, bytes) in contents.iter().enumerate() {
            if i != 23 && i != 31 {
                writer.add(ContentHash::of(bytes), bytes).unwrap();
            }
        }
        writer.finish(&pack_path(dir.path(), "1-0")).unwrap();
        let stored = Stored::open(&blobs, &turn);
        let targets: Vec<(WorkspacePath, Image)> = contents
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                (
                    WorkspacePath::from_relative(&format!("f{i:02}")).unwrap(),
                    file(bytes),
                )
            })
            .collect();
        let err = verify(&stored, targets.iter().map(|(p, i)| (p, i))).unwrap_err();
        match err {
            UndoError::Blob { path, reason, .. } => {
                assert_eq!(path.as_str(), "f23");
                assert_eq!(reason, "missing");
            }
            other => panic!("{other:?}"),
        }
        let whole: Vec<_> = targets
            .iter()
            .filter(|(p, _)| !matches!(p.as_str(), "f23" | "f31"))
            .map(|(p, i)| (p, i))
            .collect();
        verify(&stored, whole).unwrap();
    }

    /// A copy is read from the pack that holds it, even with a raw blob of the same bytes
    /// beside it; where the pack's copy does not read back, from a blob that holds it too;
    /// and where neither does, the pack's damage is what is reported.
    #[test]
    fn a_copy_is_read_from_its_pack_else_from_a_blob_that_holds_it_too() {
        use crate::blob::Form;
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let (a, b) = (b"copy a".repeat(50), b"copy b".repeat(50));
        for (name, bytes) in [("1-0", &a), ("1-1", &b)] {
            let mut writer = PackWriter::create(dir.path()).unwrap();
            writer.add(ContentHash::of(bytes), bytes).unwrap();
            writer.finish(&pack_path(dir.path(), name)).unwrap();
        }
        let (hash_a, hash_b) = (ContentHash::of(&a), ContentHash::of(&b));
        blobs
            .put_all([(hash_a, Form::Raw(&a)), (hash_b, Form::Raw(&b))])
            .unwrap();
        // The second pack's copy damaged (as `pack.rs` damages one): its index still reads.
        let damaged = pack_path(dir.path(), "1-1");
        let mut bytes = std::fs::read(&damaged).unwrap();
        bytes[crate::pack::MAGIC.len() + 3] ^= 0x40;
        std::fs::write(&damaged, &bytes).unwrap();
        let turn = TurnRecord {
            packs: vec!["1-0".to_owned(), "1-1".to_owned()],
            ..TurnRecord::empty(1)
        };
        let targets = [
            (WorkspacePath::from_relative("a").unwrap(), file(&a)),
            (WorkspacePath::from_relative("b").unwrap(), file(&b)),
        ];
        let stored = Stored::open(&blobs, &turn);
        verify(&stored, targets.iter().map(|(p, i)| (p, i))).unwrap();
        // Both read and kept by the check; neither is a raw blob to copy from.
        for (hash, bytes) in [(&hash_a, &a), (&hash_b, &b)] {
            assert!(stored.open_raw(hash).unwrap().is_none());
            assert_eq!(stored.take(hash).unwrap().as_ref(), Some(bytes));
        }

        // Without the blobs, the damaged copy is reported, and the other still reads.
        blobs.remove_raw(&[hash_a, hash_b]).unwrap();
        let stored = Stored::open(&blobs, &turn);
        let err = verify(&stored, targets.iter().map(|(p, i)| (p, i))).unwrap_err();
        assert!(
            matches!(&err, UndoError::Blob { path, .. } if path.as_str() == "b"),
            "{err:?}"
        );
        assert_eq!(stored.get(&hash_a).unwrap(), Some(a));
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
        let wrote = keep_copies(&ws, &none_yet, &unchanged, &target, u64::MAX).await;
        assert!(matches!(wrote, Ok(Ok(true))), "{wrote:?}");
        let stored = Stored::open(&blobs, &turn);
        let hash = ContentHash::of(b"as planned");
        assert_eq!(stored.get(&hash).unwrap().unwrap(), b"as planned");
        // Kept already: no second pack.
        let again = keep_copies(
            &ws,
            &stored,
            &unchanged,
            &pack_path(dir.path(), "1-1"),
            u64::MAX,
        )
        .await;
        assert!(matches!(again, Ok(Ok(false))), "{again:?}");

        let raced = [planned(&changed, b"what the plan saw")];
        let other = pack_path(dir.path(), "1-2");
        let Ok(Err(conflicts)) = keep_copies(&ws, &stored, &raced, &other, u64::MAX).await else {
            panic!("the change is not reported");
        };
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, changed);
        assert!(!other.exists());
        assert!(!stored.contains(&ContentHash::of(b"what the plan saw")));
    }
}
