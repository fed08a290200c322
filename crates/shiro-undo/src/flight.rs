//! A turn in flight: what the records of the in-flight file add up to, and how a record is
//! appended to that file. The recorder writes the records and assembles the turn as it goes;
//! the store's recovery reads them back after a crash and assembles the same turn.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;

use shiro_tools::{Mutator, Stamp, WorkspacePath};

use crate::codec::encode;
use crate::deferred::Deferred;
use crate::error::UndoError;
use crate::format::{
    BashCapture, ChangeRecord, GitRecord, InflightLine, PathRecord, TurnMeta, TurnRecord,
};
use crate::image::{ContentHash, Image, KnownHash, Spares, bounded_image};

/// A turn being assembled, from the recorder or from an in-flight file after a crash.
#[derive(Debug)]
pub(crate) struct Flight {
    pub meta: TurnMeta,
    pub before: BTreeMap<WorkspacePath, Image>,
    pub tools: Vec<String>,
    pub changes: Vec<ChangeRecord>,
    pub ran_bash: bool,
    /// Whether a `bash` call ran with capture off.
    pub bash_uncaptured: bool,
    /// The paths `bash` calls changed that cannot be restored.
    pub bash_unrestorable: BTreeSet<String>,
    /// The bytes of pre-images not stored as blobs yet, by hash.
    pub pending: BTreeMap<ContentHash, Pending>,
    /// How many bytes of `pending` are held in memory.
    pub held_bytes: u64,
    /// The bytes of big pre-images stored already (the previous turn's after-images), so
    /// that finishing can store the after-images as deltas against them without reading
    /// them back.
    pub held: BTreeMap<ContentHash, Vec<u8>>,
    /// What its `bash` calls moved in the git repository.
    pub git: GitRecord,
    /// What the turn's last change of each path left there, by path: `None` where the
    /// workspace cannot tell. A path the turn captured but never stamped, or whose entry no
    /// longer has its stamp, was changed by someone else (see [`Flight::finish`]).
    pub done: BTreeMap<WorkspacePath, Option<Stamp>>,
    /// The paths of the change under way, from its `doing` record until its `done` one: a
    /// crash in between leaves them as the change made them, unstamped (see
    /// [`InflightLine::Doing`]).
    pub doing: Vec<WorkspacePath>,
    /// Whether a `bash` call ran without capture: what it changed cannot be told from
    /// anyone else's change, so paths not stamped since are taken as they are.
    pub untold: bool,
    /// The hashes of new versions read before they were moved in (a big file's, hashed with
    /// its pre-image), by path, with the stamp of the file read; not in the in-flight file.
    pub known_after: BTreeMap<WorkspacePath, KnownHash>,
}

/// A finished turn and the bytes its blobs are made from.
#[derive(Debug)]
pub(crate) struct Finished {
    pub record: TurnRecord,
    /// New pre-images, to store.
    pub pending: BTreeMap<ContentHash, Pending>,
    /// Stored big pre-images: the bases of the after-images' deltas.
    pub held: BTreeMap<ContentHash, Vec<u8>>,
    /// The after-images of big files, stored as deltas against their pre-images.
    pub afters: BTreeMap<ContentHash, Vec<u8>>,
    /// The after-images of other files, up to [`Keep::small`] bytes in all: stored in the
    /// turn's pack, so that undoing the turn finds them stored and keeps nothing.
    pub small_afters: BTreeMap<ContentHash, Vec<u8>>,
}

/// The bytes of a new pre-image, until the turn is stored.
#[derive(Debug)]
pub(crate) enum Pending {
    /// Held in memory.
    Held(Vec<u8>),
    /// Only in the in-flight file: `len` bytes at `offset` (past what the turn may hold in
    /// memory, `StoreOptions::max_held_bytes`).
    Filed { offset: u64, len: u64 },
}

impl Pending {
    /// Whether a new pre-image of `len` bytes is held in memory, `held` bytes being held
    /// already: a big file's always (its next version is stored as a delta against it),
    /// others while they fit under `max_held`. The recorder and the recovery of a crashed
    /// turn both go by it, so that recovering a turn holds what recording it did.
    pub(crate) fn is_held(len: u64, held: u64, big: u64, max_held: u64) -> bool {
        len >= big || held.saturating_add(len) <= max_held
    }

    /// The buffer, to give back to the spares, when it is held.
    pub(crate) fn into_held(self) -> Option<Vec<u8>> {
        match self {
            Pending::Held(bytes) => Some(bytes),
            Pending::Filed { .. } => None,
        }
    }
}

/// The in-flight file, opened for reading when a pre-image must be read back from it.
#[derive(Debug)]
pub(crate) struct Inflight {
    path: std::path::PathBuf,
    file: Option<fs::File>,
}

impl Inflight {
    pub(crate) fn at(path: std::path::PathBuf) -> Self {
        Self { path, file: None }
    }

    /// The path of the file, for errors.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The bytes at each of `places` (offset, length) in the file, as one buffer and the
    /// range of each place in it, unchecked. Places that lie close together, as a window of
    /// pre-images filed one after another does, are read with one read rather than one each:
    /// a place joins the read of those before it when the gap before it is at most 64 KiB
    /// and the read stays at most twice the bytes of its places. The buffer so never holds
    /// more than twice what was asked for (tiny files between long records are read one at a
    /// time).
    pub(crate) fn read_places(
        &mut self,
        places: &[(u64, u64)],
    ) -> std::io::Result<(Vec<u8>, Vec<std::ops::Range<usize>>)> {
        use std::os::unix::fs::FileExt as _;
        /// A gap of up to this many bytes between two places is read rather than skipped.
        const GAP: u64 = 64 << 10;
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(crate::ground::open_read(&self.path)?),
        };
        let too_far = || std::io::Error::other("a pre-image's place lies past what memory holds");
        let end_of = |(offset, len): (u64, u64)| offset.checked_add(len).ok_or_else(too_far);
        let mut order: Vec<usize> = (0..places.len()).collect();
        order.sort_by_key(|&i| places[i].0);
        let mut buffer = Vec::new();
        let mut ranges = vec![0..0; places.len()];
        let mut run = order.as_slice();
        while let Some(&first) = run.first() {
            // The places that each start at most `GAP` past the end of those before them, while
            // the read stays at most twice what they ask for.
            let start = places[first].0;
            let mut end = end_of(places[first])?;
            let mut asked = places[first].1;
            let mut taken = 1;
            for &next in &run[1..] {
                let next_end = end.max(end_of(places[next])?);
                let next_asked = asked.saturating_add(places[next].1);
                if places[next].0 > end.saturating_add(GAP)
                    || next_end - start > next_asked.saturating_mul(2)
                {
                    break;
                }
                (end, asked) = (next_end, next_asked);
                taken += 1;
            }
            let at = buffer.len();
            let len = usize::try_from(end - start).map_err(|_| too_far())?;
            buffer.resize(at + len, 0);
            file.read_exact_at(&mut buffer[at..], start)?;
            for &index in &run[..taken] {
                let (offset, len) = places[index];
                let from = at + usize::try_from(offset - start).map_err(|_| too_far())?;
                ranges[index] = from..from + usize::try_from(len).map_err(|_| too_far())?;
            }
            run = &run[taken..];
        }
        Ok((buffer, ranges))
    }
}

/// Which after-images a finishing turn keeps the bytes of, for the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    /// Files of at least this many bytes before the turn are big
    /// (`StoreOptions::big_file_bytes`): each new version of one is kept.
    pub big: u64,
    /// The most bytes of other files' new versions kept, in all
    /// (`StoreOptions::max_small_after_bytes`).
    pub small: u64,
    /// Files of at least this many bytes after the turn are hashed as they are read, and
    /// none of their bytes is kept (`StoreOptions::stream_file_bytes`).
    pub stream: u64,
}

impl Flight {
    pub(crate) fn new(meta: TurnMeta) -> Self {
        Self {
            meta,
            before: BTreeMap::new(),
            tools: Vec::new(),
            changes: Vec::new(),
            ran_bash: false,
            bash_uncaptured: false,
            bash_unrestorable: BTreeSet::new(),
            pending: BTreeMap::new(),
            held_bytes: 0,
            held: BTreeMap::new(),
            git: GitRecord::default(),
            known_after: BTreeMap::new(),
            done: BTreeMap::new(),
            doing: Vec::new(),
            untold: false,
        }
    }

    /// Notes the bytes of the new pre-image `hash`, unless they are noted already.
    fn note_pending(&mut self, hash: ContentHash, bytes: Pending) {
        if let std::collections::btree_map::Entry::Vacant(entry) = self.pending.entry(hash) {
            if let Pending::Held(held) = &bytes {
                self.held_bytes += held.len() as u64;
            }
            entry.insert(bytes);
        }
    }

    /// Replays one in-flight record, with the file bytes it carries; only the first image of
    /// a path counts.
    pub(crate) fn apply(&mut self, line: InflightLine, payload: Option<Pending>) {
        match line {
            InflightLine::Start { .. } => {}
            InflightLine::Path { path, before, .. } => {
                if let Ok(path) = WorkspacePath::from_relative(&path)
                    && !self.before.contains_key(&path)
                {
                    if let (Image::File { hash, .. }, Some(bytes)) = (&before, payload) {
                        self.note_pending(*hash, bytes);
                    }
                    self.before.insert(path, before);
                }
            }
            InflightLine::Tool { name, changes, .. } => {
                if !self.tools.contains(&name) {
                    self.tools.push(name);
                }
                self.changes.extend(changes);
            }
            InflightLine::Bash {
                capture,
                unrestorable,
                ..
            } => {
                self.ran_bash = true;
                if capture == BashCapture::Off {
                    self.bash_uncaptured = true;
                    self.untold = true;
                    self.done.clear();
                }
                for path in unrestorable {
                    // A path captured before the call is restored with the turn: its
                    // pre-image is older than what the call did to it.
                    if let Ok(valid) = WorkspacePath::from_relative(&path)
                        && !self.before.contains_key(&valid)
                    {
                        self.bash_unrestorable.insert(valid.to_string());
                    }
                }
            }
            InflightLine::Blob { hash, .. } => {
                if let Some(bytes) = payload {
                    self.note_pending(hash, bytes);
                }
            }
            InflightLine::Git { git, .. } => self.git.then(&git),
            InflightLine::Doing { paths, .. } => {
                self.doing = (paths.iter())
                    .filter_map(|path| WorkspacePath::from_relative(path).ok())
                    .collect();
            }
            InflightLine::Done { stamps, .. } => {
                self.doing.clear();
                for (path, stamp) in stamps {
                    if let Ok(path) = WorkspacePath::from_relative(&path) {
                        self.done.insert(path, stamp);
                    }
                }
            }
        }
    }

    /// Reads the after-image of every touched path and keeps the paths that changed, with
    /// the bytes their blobs are made from: after-images of files of at least `keep.big`
    /// bytes that were files before, and of other files that the turn made or changed while
    /// they add up to at most `keep.small` bytes (taken in path order, each one that fits:
    /// a turn that writes a whole dependency tree must not double what it stores). `None`
    /// when no path changed and `bash` changed none that cannot be restored (such a turn is
    /// kept, so that the log names them).
    pub(crate) async fn finish(
        mut self,
        workspace: &dyn Mutator,
        recovered: bool,
        keep: Keep,
        spares: &Spares,
    ) -> Result<Option<Finished>, UndoError> {
        let mut paths = Vec::new();
        let mut afters = BTreeMap::new();
        let mut small_afters = BTreeMap::new();
        let mut small_bytes = 0u64;
        let mut changed_since = Vec::new();
        let before_all = std::mem::take(&mut self.before);
        for (path, before) in before_all {
            let known = self.known_after.get(&path);
            let (after, bytes) =
                bounded_image(workspace, &path, keep.stream, spares, known).await?;
            let left = match self.done.get(&path) {
                _ if self.doing.iter().any(|doing| path.starts_with(doing)) => true,
                Some(stamp) => stamp.is_none_or(|stamp| is_left(&stamp, &after)),
                None => self.untold,
            };
            if after != before && !left {
                // Someone else's: kept as it is, and out of the turn's reach.
                spares.give(bytes);
                changed_since.push(path.to_string());
                continue;
            }
            match (&before, &after, bytes) {
                (Image::File { len, .. }, Image::File { hash, .. }, Some(bytes))
                    if *len >= keep.big && after != before =>
                {
                    afters.insert(*hash, bytes);
                }
                // Another file the turn made or changed, while the cap allows; a mode changed
                // alone needs no copy (the bytes are the pre-image's).
                (_, Image::File { hash, len, .. }, Some(bytes))
                    if after != before
                        && *len < keep.big
                        && before.hash() != Some(*hash)
                        && !small_afters.contains_key(hash)
                        && small_bytes.saturating_add(*len) <= keep.small =>
                {
                    small_bytes += len;
                    small_afters.insert(*hash, bytes);
                }
                (_, _, bytes) => spares.give(bytes),
            }
            if after != before {
                paths.push(PathRecord {
                    path: path.to_string(),
                    before,
                    after,
                });
            }
        }
        // A file or link whose stamp is not what the turn left was changed since by someone
        // else. Looked at after the after-images were read: a change made in between shows
        // here, and the turn does not take it.
        let moved = self.moved_since(workspace, &paths).await;
        if !moved.is_empty() {
            paths.retain(|record| !moved.contains(record.path.as_str()));
            changed_since.extend(moved);
            changed_since.sort();
            let left: BTreeSet<ContentHash> = paths
                .iter()
                .filter_map(|record| record.after.hash())
                .collect();
            afters.retain(|hash, _| left.contains(hash));
            small_afters.retain(|hash, _| left.contains(hash));
        }
        // A `bash` call that ran without capture may have changed anything: its turn is kept,
        // so that the log and undo say so, even when nothing else is known.
        if paths.is_empty()
            && changed_since.is_empty()
            && self.bash_unrestorable.is_empty()
            && self.git.is_empty()
            && !self.bash_uncaptured
        {
            return Ok(None);
        }
        let used: BTreeSet<ContentHash> = (paths.iter().filter_map(|p| p.before.hash()))
            .chain(self.git.hashes())
            .collect();
        self.pending.retain(|hash, _| used.contains(hash));
        let (held, unused): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(hash, _)| used.contains(hash));
        self.held = held;
        spares.give(unused.into_values());
        let record = TurnRecord {
            meta: self.meta,
            tools: self.tools,
            changes: Deferred::new(self.changes),
            ran_bash: self.ran_bash,
            bash_uncaptured: self.bash_uncaptured,
            bash_unrestorable: self.bash_unrestorable.into_iter().collect(),
            changed_since,
            recovered,
            paths: Deferred::new(paths),
            packs: Vec::new(),
            damage: None,
            group: None,
            git: Some(self.git).filter(|git| !git.is_empty()),
        };
        Ok(Some(Finished {
            record,
            pending: self.pending,
            held: self.held,
            afters,
            small_afters,
        }))
    }
}

impl Flight {
    /// Those of `changed` whose file or link is no longer the one the turn's last change of
    /// them left, by their stamps: changed since by someone else.
    async fn moved_since(
        &self,
        workspace: &dyn Mutator,
        changed: &[PathRecord],
    ) -> BTreeSet<String> {
        let (paths, stamps): (Vec<WorkspacePath>, Vec<Stamp>) = (changed.iter())
            .filter_map(|record| {
                let path = WorkspacePath::from_relative(&record.path).ok()?;
                if self.doing.iter().any(|doing| path.starts_with(doing)) {
                    return None;
                }
                match self.done.get(&path) {
                    Some(Some(stamp @ Stamp::Entry { .. })) => Some((path, *stamp)),
                    _ => None,
                }
            })
            .unzip();
        if paths.is_empty() {
            return BTreeSet::new();
        }
        let now = workspace.stamps(&paths).await;
        (paths.into_iter().zip(stamps).zip(now))
            .filter(|((_, then), now)| now.is_some_and(|now| now != *then))
            .map(|((path, _), _)| path.to_string())
            .collect()
    }
}

/// Whether `after`, what a path holds now, can be what the turn's last change of it left,
/// stamped `stamp`: absent, a directory of the same mode, or a file or link (whose stamp
/// [`Flight::moved_since`] compares).
fn is_left(stamp: &Stamp, after: &Image) -> bool {
    match (stamp, after) {
        (Stamp::Absent, Image::Absent) => true,
        (Stamp::Dir { mode }, Image::Dir { mode: now }) => mode == now,
        (Stamp::Entry { .. }, Image::File { .. } | Image::Symlink { .. }) => true,
        _ => false,
    }
}

/// Appends a record to the in-flight file, followed by the file bytes it carries (whose
/// length the record states), and with `sync` flushes both (and all before them) at once.
/// Returns the offset of the bytes in the file.
pub(crate) fn append_line(
    file: &mut fs::File,
    line: &InflightLine,
    payload: Option<&[u8]>,
    sync: bool,
) -> std::io::Result<u64> {
    let text = encode(line)?;
    let len = file.metadata()?.len();
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.write_all(payload.unwrap_or_default()))
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(err) = written {
        // Never leave half a record for the next one to be glued to.
        let _ = file.set_len(len);
        return Err(err);
    }
    Ok(len + text.len() as u64)
}

/// Appends records to the in-flight file with one write, unflushed; on a failure none of them
/// is left.
pub(crate) fn append_lines(file: &mut fs::File, lines: &[&InflightLine]) -> std::io::Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(&encode(line)?);
    }
    let len = file.metadata()?.len();
    if let Err(err) = file.write_all(text.as_bytes()) {
        let _ = file.set_len(len);
        return Err(err);
    }
    Ok(())
}

/// Appends a batch of records to the in-flight file (opened to append) through a buffer, each
/// followed by the file bytes it carries: one write per megabyte, not two per record. The
/// batch counts once [`Batch::finish`] has written it all (and flushed it, when asked);
/// dropped before, as when a write fails, the file is cut back to where the batch began, so
/// no half record is left for the next one to be glued to.
pub(crate) struct Batch<'f> {
    out: Option<std::io::BufWriter<&'f mut fs::File>>,
    /// The file's length before the batch.
    start: u64,
    /// Its length once everything pushed so far is written.
    end: u64,
}

impl<'f> Batch<'f> {
    /// How many bytes the buffer gathers before it writes them.
    const BUFFER: usize = 1 << 20;

    /// A batch appended to `file`.
    pub(crate) fn new(file: &'f mut fs::File) -> std::io::Result<Self> {
        let start = file.metadata()?.len();
        Ok(Self {
            out: Some(std::io::BufWriter::with_capacity(Self::BUFFER, file)),
            start,
            end: start,
        })
    }

    /// Adds a record and the bytes it carries; returns where those bytes will lie in the file.
    pub(crate) fn push(
        &mut self,
        line: &InflightLine,
        payload: Option<&[u8]>,
    ) -> std::io::Result<u64> {
        let text = encode(line)?;
        let payload = payload.unwrap_or_default();
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| std::io::Error::other("batch ended"))?;
        out.write_all(text.as_bytes())?;
        out.write_all(payload)?;
        let offset = self.end + text.len() as u64;
        self.end = offset + payload.len() as u64;
        Ok(offset)
    }

    /// Whether nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Writes what is buffered and, with `sync`, flushes the file.
    pub(crate) fn finish(mut self, sync: bool) -> std::io::Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.flush()?;
        if sync {
            out.get_ref().sync_data()?;
        }
        self.out = None;
        Ok(())
    }
}

impl Drop for Batch<'_> {
    /// Unfinished: the file is cut back (it is opened to append, so the next record lands
    /// at the new end).
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            let (file, _unwritten) = out.into_parts();
            let _ = file.set_len(self.start);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::report::TurnId;

    fn bash(capture: BashCapture, paths: &[&str]) -> InflightLine {
        InflightLine::Bash {
            turn: Some(TurnId(1)),
            capture,
            unrestorable: paths.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    fn path(name: &str) -> InflightLine {
        InflightLine::Path {
            turn: Some(TurnId(1)),
            path: name.to_owned(),
            before: Image::Absent,
            bytes: None,
        }
    }

    fn flight(lines: Vec<InflightLine>) -> Flight {
        let mut flight = Flight::new(TurnRecord::empty(1).meta);
        for line in lines {
            flight.apply(line, None);
        }
        flight
    }

    #[test]
    fn a_flight_gathers_what_its_bash_calls_left_unrestorable() {
        let captured = flight(vec![bash(BashCapture::Overlay, &[])]);
        assert!(captured.ran_bash);
        assert!(!captured.bash_uncaptured);
        assert!(captured.bash_unrestorable.is_empty());

        let mixed = flight(vec![
            path("early"),
            bash(BashCapture::Detect, &["z", "early", "b/c"]),
            path("z"),
            bash(BashCapture::Overlay, &[]),
            bash(BashCapture::Detect, &["b/c", "a", "../outside"]),
        ]);
        assert!(mixed.ran_bash);
        assert!(!mixed.bash_uncaptured);
        // `early` was captured before bash changed it, so undo restores it; `z`, captured
        // after, is restored only to what bash made it; the invalid path is dropped.
        assert_eq!(
            mixed.bash_unrestorable.iter().collect::<Vec<_>>(),
            ["a", "b/c", "z"]
        );

        let off = flight(vec![
            bash(BashCapture::Detect, &[]),
            bash(BashCapture::Off, &[]),
            bash(BashCapture::Overlay, &[]),
        ]);
        assert!(off.bash_uncaptured, "one call without capture is enough");
        assert!(off.bash_unrestorable.is_empty());

        let none = flight(vec![path("a")]);
        assert!(!none.ran_bash && !none.bash_uncaptured);
    }

    fn done(paths: &[&str]) -> InflightLine {
        InflightLine::Done {
            turn: Some(TurnId(1)),
            stamps: (paths.iter())
                .map(|p| ((*p).to_owned(), Some(Stamp::Absent)))
                .collect(),
        }
    }

    fn doing(paths: &[&str]) -> InflightLine {
        InflightLine::Doing {
            turn: Some(TurnId(1)),
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    /// A change whose end is not recorded (a crash cut it short) leaves its paths to the turn
    /// until its `done` record comes; a call without capture makes every stamp before it
    /// count for nothing.
    #[test]
    fn a_flight_follows_what_its_changes_began_and_left() {
        let cut_short = flight(vec![path("a"), doing(&["a"]), done(&["a"]), doing(&["d"])]);
        assert_eq!(
            cut_short.doing,
            [WorkspacePath::from_relative("d").unwrap()]
        );
        assert_eq!(cut_short.done.len(), 1);
        let ended = flight(vec![doing(&["a"]), done(&["a"])]);
        assert!(ended.doing.is_empty());
        let uncaptured = flight(vec![done(&["a", "b"]), bash(BashCapture::Off, &[])]);
        assert!(uncaptured.done.is_empty() && uncaptured.untold);
        let after = flight(vec![bash(BashCapture::Off, &[]), done(&["c"])]);
        assert_eq!(after.done.len(), 1);
    }

    /// A path that no longer holds what the turn's change left there (a file where it left
    /// nothing) is someone else's: left out and named. One whose change was cut short, or
    /// whose stamp could not be told, is the turn's.
    #[tokio::test]
    async fn what_is_no_longer_as_the_turn_left_it_is_left_out_and_named() {
        let workspace = shiro_tools::MemMutator::new();
        let spares = Spares::none();
        let keep = no_small_copies();
        let a = WorkspacePath::from_relative("a").unwrap();
        let b = WorkspacePath::from_relative("b").unwrap();
        // The turn removed a (stamped absent), and you wrote it again.
        workspace.write(&a, b"yours", None).await.unwrap();
        workspace.write(&b, b"the turn's", None).await.unwrap();
        let stamped = |cut_short: bool| {
            let mut lines = vec![path("a"), path("b"), done(&["a"])];
            if cut_short {
                lines.push(doing(&["a"]));
            }
            let mut flight = flight(lines);
            // What b holds could not be told: the turn's.
            flight.done.insert(b.clone(), None);
            flight
        };
        let finished = (stamped(false)
            .finish(&workspace, false, keep, &spares)
            .await)
            .unwrap()
            .unwrap();
        let paths: Vec<&str> = (finished.record.paths().unwrap().iter())
            .map(|p| p.path.as_str())
            .collect();
        assert_eq!(paths, ["b"]);
        assert_eq!(finished.record.changed_since, ["a"]);
        assert!(finished.record.validate().is_ok());
        let cut = (stamped(true).finish(&workspace, true, keep, &spares).await)
            .unwrap()
            .unwrap();
        assert_eq!(cut.record.paths().unwrap().len(), 2);
        assert!(cut.record.changed_since.is_empty());
    }

    /// A file of 1,200,000 bytes, none of whose 4-byte runs repeats, in a temporary
    /// directory, as an in-flight file.
    fn inflight_file() -> (tempfile::TempDir, Inflight, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inflight.jsonl");
        let bytes: Vec<u8> = (0..300_000u32).flat_map(u32::to_le_bytes).collect();
        std::fs::write(&path, &bytes).unwrap();
        (dir, Inflight::at(path), bytes)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever the places, in any order, overlapping or far apart, each range read holds
        /// the file's bytes at its place.
        #[test]
        fn places_read_back_as_they_lie(
            places in proptest::collection::vec((0u64..1_100_000, 0u64..70_000), 0..12),
        ) {
            let (_dir, mut inflight, bytes) = inflight_file();
            let places: Vec<(u64, u64)> = (places.into_iter())
                .map(|(offset, len)| (offset, len.min(bytes.len() as u64 - offset)))
                .collect();
            let (read, ranges) = inflight.read_places(&places).unwrap();
            proptest::prop_assert_eq!(ranges.len(), places.len());
            let asked: u64 = places.iter().map(|(_, len)| len).sum();
            proptest::prop_assert!(read.len() as u64 <= 2 * asked);
            for ((offset, len), range) in places.iter().zip(ranges) {
                let at = usize::try_from(*offset).unwrap();
                let len = usize::try_from(*len).unwrap();
                proptest::prop_assert_eq!(&read[range], &bytes[at..at + len]);
            }
        }
    }

    #[test]
    fn places_close_together_are_read_at_once_and_far_ones_apart() {
        let (_dir, mut inflight, bytes) = inflight_file();
        // Close together: one read, the gaps between them included.
        let (read, ranges) = inflight
            .read_places(&[(5_000, 4_000), (0, 4_000), (10_000, 4_000)])
            .unwrap();
        assert_eq!(read.len(), 14_000);
        assert_eq!(ranges, [5_000..9_000, 0..4_000, 10_000..14_000]);
        // Small places with long gaps between them: one read each, lest the buffer hold
        // mostly the gaps.
        let (read, ranges) = inflight.read_places(&[(0, 10), (5_000, 10)]).unwrap();
        assert_eq!(read.len(), 20);
        assert_eq!(ranges, [0..10, 10..20]);
        // Farther apart: each run read on its own, and only those bytes held.
        let (read, ranges) = inflight.read_places(&[(1_000_000, 8), (0, 8)]).unwrap();
        assert_eq!(read.len(), 16);
        assert_eq!(&read[ranges[0].clone()], &bytes[1_000_000..1_000_008]);
        assert_eq!(&read[ranges[1].clone()], &bytes[..8]);
        // A place past the end of the file is an error.
        assert!(inflight.read_places(&[(1_199_999, 8)]).is_err());
        assert!(inflight.read_places(&[(u64::MAX, 8)]).is_err());
    }

    #[tokio::test]
    async fn a_turn_whose_only_change_bash_cannot_restore_or_ran_uncaptured_is_kept() {
        let workspace = shiro_tools::MemMutator::new();
        let spares = Spares::none();
        let keep = no_small_copies();
        let finish = |lines| flight(lines).finish(&workspace, false, keep, &spares);
        let finished = finish(vec![bash(BashCapture::Detect, &["b", "a"])])
            .await
            .unwrap()
            .unwrap();
        assert!(finished.record.paths().unwrap().is_empty());
        assert_eq!(finished.record.bash_unrestorable, ["a", "b"]);
        assert!(finished.record.validate().is_ok());
        // Nothing known, but the call may have changed anything: kept, to say so.
        let off = finish(vec![bash(BashCapture::Off, &[])])
            .await
            .unwrap()
            .unwrap();
        assert!(off.record.paths().unwrap().is_empty());
        assert!(off.record.bash_uncaptured);
        assert!(off.record.validate().is_ok());
        // A turn that changed nothing, bash captured, is still not kept.
        let quiet = finish(vec![bash(BashCapture::Overlay, &[])]).await.unwrap();
        assert!(quiet.is_none());
    }

    /// Keeps the bytes of no after-image: no file counts as big, none is streamed, and no
    /// room is left for small ones.
    fn no_small_copies() -> Keep {
        Keep {
            big: u64::MAX,
            small: 0,
            stream: u64::MAX,
        }
    }
}
