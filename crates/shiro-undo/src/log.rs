//! `log.jsonl`: the undo and redo stacks, as a snapshot followed by the events appended since
//! it was written.
//!
//! Recording a turn appends one `push` record; a restore appends `begin` before it changes
//! anything and `done` after (or, when it cannot complete, `rollback` and then `stopped`). Each append is one write and one `fdatasync` of a file that
//! exists already, so a change to the log costs the same however long the history is (a
//! rewrite of the whole file costs a new file, its flush, a rename and a directory flush).
//! When the events outgrow the snapshot, the next change rewrites the snapshot instead, so
//! reading the log stays proportional to what it holds.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::codec::{
    BadLine, line_sum, raw_lines, write_atomic_with, write_line, write_summed_line,
};
use crate::deferred::SharedSource;
use crate::error::UndoError;
use crate::format::{
    Begun, FORMAT_VERSION, LOG_FORMAT, LogLine, Pushed, Stack, Stacked, TurnRecord,
};
use crate::ground::no_follow;
use crate::image::{ContentHash, Image};
use crate::report::{Direction, TurnId};

/// Events are appended until they take more than this many bytes, or more than the snapshot,
/// whichever is larger; then the snapshot is rewritten.
const APPENDED_MAX: u64 = 16 * 1024;

/// The log as read from disk: the undo stack (oldest first), the redo stack (the next turn to
/// redo last), and a restore that began but did not complete.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogState {
    pub next_id: u64,
    pub undo: Vec<Arc<TurnRecord>>,
    pub redo: Vec<Arc<TurnRecord>>,
    /// A restore whose `begin` is in the log and its `done` is not: a crash interrupted it.
    pub pending: Option<Pending>,
    layout: Layout,
    /// The log's bytes hashed, while this state knows them to be exactly what it was read
    /// from and has written since (see [`LogState::log_hash`]).
    /// (Boxed: a hasher takes 2 KiB, and a state is held across awaits.)
    digest: Option<Box<blake3::Hasher>>,
}

/// A restore under way: the direction, and the turn with the images it restores.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub direction: Direction,
    pub turn: Arc<TurnRecord>,
    /// The restore's name in the progress file; `None` for one begun by format 4.
    pub run: Option<u64>,
    /// Why it is being rolled back, once it is.
    pub rollback: Option<String>,
    /// The turns a restore of several moves, oldest first (see [`LogLine::Begin`]); empty
    /// for a restore of `turn` alone.
    pub members: Vec<Arc<TurnRecord>>,
    /// For a revert, the turn it reverts; `turn` is then the new turn it records.
    pub reverts: Option<TurnId>,
}

/// Where things are in the file, for the next append.
#[derive(Debug, Clone, Copy, Default)]
struct Layout {
    /// The header's version; 0 when there is no log yet.
    version: u32,
    /// Where the last usable record ends: the next append goes there (cutting off a record
    /// that a crash left torn).
    end: u64,
    /// The bytes of the snapshot.
    snapshot: u64,
    /// The bytes of the events after it.
    appended: u64,
}

impl LogState {
    /// The state of a store without a log.
    pub(crate) fn empty() -> Self {
        Self {
            next_id: 1,
            ..Self::default()
        }
    }

    /// Notes that `hasher` hashed the log's whole file, `len` bytes, which this state was
    /// just parsed from: appends then carry the hash on. A file that ends in a torn record,
    /// which the next append cuts off, is not carried on.
    pub(crate) fn read_from(&mut self, hasher: blake3::Hasher, len: usize) {
        self.digest = (self.layout.end == len as u64).then(|| Box::new(hasher));
    }

    /// The hash of the log's bytes as this state last read or wrote them; `None` when it
    /// does not know them (not read with [`LogState::read_from`], or a write failed).
    pub(crate) fn log_hash(&self) -> Option<blake3::Hash> {
        self.digest.as_ref().map(|hasher| hasher.finalize())
    }

    /// Makes the next turn's id at least `id`, as a turn found outside the log (an
    /// interrupted turn's) takes it. The log does not say so until a record does, so the
    /// state no longer reads as the log's bytes.
    pub(crate) fn pass_id(&mut self, id: TurnId) {
        if self.next_id <= id.0 {
            self.next_id = id.0 + 1;
            self.digest = None;
        }
    }

    pub(crate) fn contains(&self, id: TurnId) -> bool {
        self.undo.iter().chain(&self.redo).any(|t| t.meta.id == id)
    }

    /// The kept turns: both stacks, and a restore's under way (its images may differ).
    fn kept(&self) -> impl Iterator<Item = &TurnRecord> {
        (self.undo.iter()).chain(&self.redo).map(Arc::as_ref).chain(
            self.pending
                .iter()
                .flat_map(|p| std::iter::once(&p.turn).chain(&p.members))
                .map(Arc::as_ref),
        )
    }

    /// Every blob the kept turns refer to; `Err` when a turn's paths cannot be read, and so
    /// what it needs is not known.
    pub(crate) fn hashes(&self) -> Result<BTreeSet<ContentHash>, UndoError> {
        // Gathered, then built at once (sorted, then built bottom up): inserted one by one,
        // the 200,000 hashes of a turn of 100,000 paths took a turn late in a session from
        // 38 ms to 66 ms.
        let mut hashes = Vec::new();
        for turn in self.kept() {
            hashes.extend(turn.hashes()?);
        }
        Ok(BTreeSet::from_iter(hashes))
    }

    /// The packs the kept turns name.
    pub(crate) fn packs(&self) -> BTreeSet<String> {
        self.kept()
            .flat_map(|turn| turn.packs.iter().cloned())
            .collect()
    }

    /// Applies one record. `Err` says why the record cannot be applied; the state is then
    /// unchanged.
    fn apply(&mut self, line: LogLine) -> Result<(), String> {
        if let Some(pending) = &self.pending
            && !ends_or_continues_a_restore(&line)
        {
            return Err(format!(
                "the restore of turn {} begun before it never completed",
                pending.turn.meta.id
            ));
        }
        match line {
            LogLine::Header { next_id, .. } => self.next_id = self.next_id.max(next_id),
            LogLine::Turn(Stacked { stack, turn }) => {
                self.check_new(&turn)?;
                match stack {
                    Stack::Undo => self.undo.push(turn),
                    Stack::Redo => self.redo.push(turn),
                }
            }
            LogLine::Push(Pushed {
                turn,
                dropped,
                scoped,
            }) => {
                self.check_new(&turn)?;
                self.push(turn, scoped);
                self.forget(&dropped);
            }
            LogLine::Drop { ids } => self.forget(&ids),
            LogLine::Begin(Begun {
                direction,
                turn,
                run,
                members,
                reverts,
            }) => {
                turn.validate()?;
                check_members(&turn, &members)?;
                if reverts.is_some() {
                    // A revert's new turn: not in the log yet, and its id is taken.
                    if !members.is_empty() || self.contains(turn.meta.id) {
                        return Err(format!(
                            "the revert begun as turn {} is not a new turn",
                            turn.meta.id
                        ));
                    }
                    self.next_id = self.next_id.max(turn.meta.id.0 + 1);
                }
                self.pending = Some(Pending {
                    direction,
                    turn,
                    run,
                    rollback: None,
                    members,
                    reverts,
                });
            }
            LogLine::Done { id, kept } => {
                let Pending {
                    direction,
                    turn,
                    members,
                    reverts,
                    ..
                } = self.take_pending(id)?;
                let kept = kept_as_found(&turn, direction, &kept);
                if reverts.is_some() {
                    // A revert is a new turn, recorded now that it is applied.
                    let mut turns = [turn];
                    leave_kept(&mut turns, direction, kept);
                    let [turn] = turns;
                    let group = turn.group;
                    self.push(marked(turn, None, group), true);
                    return Ok(());
                }
                let group = !members.is_empty();
                let mut moved = if group { members } else { vec![turn] };
                leave_kept(&mut moved, direction, kept);
                let ids: Vec<TurnId> = moved.iter().map(|t| t.meta.id).collect();
                self.forget(&ids);
                match direction {
                    // The next to redo is last: the first of a rewind's turns.
                    Direction::Undo => {
                        for turn in moved.into_iter().rev() {
                            self.redo.push(marked(turn, None, group.then_some(id)));
                        }
                    }
                    // Back among the turns of other sessions that stayed, in the order made.
                    Direction::Redo => {
                        for turn in moved {
                            let turn = marked(turn, None, None);
                            let at = self.undo.partition_point(|t| t.meta.id < turn.meta.id);
                            self.undo.insert(at, turn);
                        }
                    }
                }
            }
            LogLine::Rollback { id, reason } => match &mut self.pending {
                Some(pending) if pending.turn.meta.id == id => pending.rollback = Some(reason),
                _ => return Err(format!("no restore of turn {id} was begun")),
            },
            LogLine::Stopped {
                id,
                reason,
                abandoned,
            } => {
                let pending = self.take_pending(id)?;
                if pending.reverts.is_some() {
                    // Rolled back, a revert leaves no turn; abandoned part-way, its turn is
                    // kept (marked), so that an undo can take its files back.
                    if abandoned {
                        let group = pending.turn.group;
                        self.push(marked(pending.turn, Some(reason), group), true);
                    }
                    return Ok(());
                }
                // The turn stays where it was, with its own images (the workspace is as the
                // restore found it), keeping the copies the restore made.
                if let Some(turn) = self.turn_mut(id) {
                    for pack in pending.turn.packs.iter().cloned() {
                        if !turn.packs.contains(&pack) {
                            turn.packs.push(pack);
                        }
                    }
                    turn.damage = Some(reason);
                }
            }
            LogLine::Damaged { id, reason } => match self.turn_mut(id) {
                Some(turn) => turn.damage = Some(reason),
                None => return Err(format!("no turn {id} to mark damaged")),
            },
        }
        Ok(())
    }

    /// Ends the restore of turn `id` under way.
    fn take_pending(&mut self, id: TurnId) -> Result<Pending, String> {
        match self.pending.take() {
            Some(pending) if pending.turn.meta.id == id => Ok(pending),
            other => {
                self.pending = other;
                Err(format!("no restore of turn {id} was begun"))
            }
        }
    }

    /// The turn `id` of either stack, to change: a copy of its own if another state shares
    /// it.
    fn turn_mut(&mut self, id: TurnId) -> Option<&mut TurnRecord> {
        (self.undo.iter_mut())
            .chain(self.redo.iter_mut())
            .find(|t| t.meta.id == id)
            .map(Arc::make_mut)
    }

    /// Pushes a new turn onto the undo stack, which empties the redo stack.
    /// A new turn joins the undo stack: the redo stack is emptied, of the turns of the new
    /// turn's session only when `scoped` (format 8).
    fn push(&mut self, turn: Arc<TurnRecord>, scoped: bool) {
        if scoped {
            self.redo.retain(|t| t.meta.session != turn.meta.session);
        } else {
            self.redo.clear();
        }
        self.undo.push(turn);
    }

    fn forget(&mut self, ids: &[TurnId]) {
        self.undo.retain(|t| !ids.contains(&t.meta.id));
        self.redo.retain(|t| !ids.contains(&t.meta.id));
    }

    /// Checks a turn about to join a stack, and advances the next id past it.
    fn check_new(&mut self, turn: &TurnRecord) -> Result<(), String> {
        turn.validate()?;
        if self.contains(turn.meta.id) {
            return Err(format!("turn {} is in the log twice", turn.meta.id));
        }
        self.next_id = self.next_id.max(turn.meta.id.0 + 1);
        Ok(())
    }

    /// The log's snapshot of this state, for tests to compare two states.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_snapshot(&mut out)
            .expect("a Vec takes any write");
        out
    }

    /// Writes the log as one snapshot to `out`: the header, the stacks, and a restore under
    /// way.
    fn write_snapshot(&self, out: &mut dyn Write) -> io::Result<()> {
        let header = LogLine::Header {
            format: LOG_FORMAT.to_owned(),
            version: FORMAT_VERSION,
            next_id: self.next_id,
        };
        write_line(&header, out)?;
        let turns = (self.undo.iter().map(|t| (Stack::Undo, t)))
            .chain(self.redo.iter().map(|t| (Stack::Redo, t)));
        for (stack, turn) in turns {
            let turn = Arc::clone(turn);
            write_line(&LogLine::Turn(Stacked { stack, turn }), out)?;
        }
        if let Some(pending) = &self.pending {
            let begun = LogLine::Begin(Begun {
                direction: pending.direction,
                turn: Arc::clone(&pending.turn),
                run: pending.run,
                members: pending.members.clone(),
                reverts: pending.reverts,
            });
            write_line(&begun, out)?;
            if let Some(reason) = &pending.rollback {
                let rollback = LogLine::Rollback {
                    id: pending.turn.meta.id,
                    reason: reason.clone(),
                };
                write_line(&rollback, out)?;
            }
        }
        Ok(())
    }
}

/// `turn` with its damage and group set as given, changed in place unless another state
/// shares it and they differ (then it is copied).
fn marked(
    mut turn: Arc<TurnRecord>,
    damage: Option<String>,
    group: Option<TurnId>,
) -> Arc<TurnRecord> {
    if turn.damage != damage || turn.group != group {
        let record = Arc::make_mut(&mut turn);
        record.damage = damage;
        record.group = group;
    }
    turn
}

/// The images the directories `kept` (see [`LogLine::Done`]) had when the restore of `turn`
/// in `direction` found them: its images on the side it leaves. Only a directory whose
/// target is no directory can have been kept (absent, or a file or link a forced restore
/// skipped); any other path named is left out, as are all of them when the turn's paths
/// cannot be read (the opposite restore then refuses over them, as it did before the
/// restore said what it kept).
fn kept_as_found(turn: &TurnRecord, direction: Direction, kept: &[String]) -> Vec<(String, Image)> {
    if kept.is_empty() {
        return Vec::new();
    }
    let Ok(paths) = turn.paths() else {
        return Vec::new();
    };
    (kept.iter())
        .filter_map(|path| {
            let record = paths.iter().find(|record| record.path == *path)?;
            let (found, target) = match direction {
                Direction::Undo => (&record.after, &record.before),
                Direction::Redo => (&record.before, &record.after),
            };
            (found.is_dir() && !target.is_dir()).then(|| (path.clone(), found.clone()))
        })
        .collect()
}

/// Records in the turns a restore `moved` (oldest first) the directories it kept (`kept`,
/// with the images it found them in): each becomes its image on the side the restore went
/// to, in the turn that holds that side of the path (for an undo the first turn to touch
/// it, for a redo the last), so that the opposite restore expects the directory where the
/// restore left it.
fn leave_kept(moved: &mut [Arc<TurnRecord>], direction: Direction, kept: Vec<(String, Image)>) {
    for (path, image) in kept {
        let holds = |turn: &Arc<TurnRecord>| {
            turn.paths()
                .is_ok_and(|paths| paths.iter().any(|r| r.path == path))
        };
        let holder = match direction {
            Direction::Undo => moved.iter_mut().find(|turn| holds(turn)),
            Direction::Redo => moved.iter_mut().rev().find(|turn| holds(turn)),
        };
        let Some(turn) = holder else { continue };
        if let Ok(paths) = Arc::make_mut(turn).paths_mut()
            && let Some(record) = paths.iter_mut().find(|r| r.path == path)
        {
            match direction {
                Direction::Undo => record.before = image,
                Direction::Redo => record.after = image,
            }
        }
    }
}

/// Checks the turns a restore of several moves: each valid, the first under the restore's
/// id, in the order they were made.
fn check_members(turn: &TurnRecord, members: &[Arc<TurnRecord>]) -> Result<(), String> {
    let Some(first) = members.first() else {
        return Ok(());
    };
    if first.meta.id != turn.meta.id {
        return Err(format!(
            "the restore of turn {} lists turn {} first",
            turn.meta.id, first.meta.id
        ));
    }
    for (i, member) in members.iter().enumerate() {
        member.validate()?;
        if i > 0 && members[i - 1].meta.id >= member.meta.id {
            return Err(format!(
                "the turns the restore of turn {} moves are out of order",
                turn.meta.id
            ));
        }
    }
    Ok(())
}

/// Whether `line` may follow a `begin` whose restore has not ended: only the records that
/// end or roll back that restore.
fn ends_or_continues_a_restore(line: &LogLine) -> bool {
    matches!(
        line,
        LogLine::Done { .. } | LogLine::Rollback { .. } | LogLine::Stopped { .. }
    )
}

/// A log read from disk, with the records that could not be used.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub state: LogState,
    pub bad: Vec<BadLine>,
}

/// Why a log cannot be read at all.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Another format, or a newer version: it is left untouched.
    Version(u32),
}

/// Reads a log as [`parse`] does; the turns' deferred parts share `bytes` rather than copy
/// their JSON out of them (see [`SharedSource`]).
pub(crate) fn parse_shared(bytes: &Arc<Vec<u8>>) -> Result<Parsed, Refused> {
    let _shared = SharedSource::set(Arc::clone(bytes));
    parse(bytes)
}

/// Reads a log. A last record that cannot be used is the append a crash cut short (it was
/// never acknowledged, since an append returns only once flushed; an unlocked reader may
/// also see one still being written): it is ignored, and the next append replaces it. Any
/// other record that cannot be used is skipped and returned in `bad`.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, Refused> {
    let mut state = LogState::empty();
    let mut bad = Vec::new();
    let mut version = 0;
    // Where the snapshot ends (its last line), and where the last usable record ends.
    let mut snapshot_end = 0;
    let mut in_snapshot = true;
    let mut end = 0;
    // The last line, when it could not be used, and where it starts.
    let mut torn: Option<(BadLine, usize)> = None;
    // The line of the last `begin`.
    let mut begun = 0;
    for line in raw_lines(bytes) {
        let start = end;
        end = line.end;
        if let Some((earlier, _)) = torn.take() {
            bad.push(earlier);
        }
        let record = match line.decode_with(LogLine::from_json) {
            Ok(record) => record,
            Err(reason) => {
                let line = BadLine {
                    line: line.number,
                    reason,
                };
                torn = Some((line, start));
                continue;
            }
        };
        if let LogLine::Header {
            format,
            version: found,
            ..
        } = &record
        {
            if format != LOG_FORMAT || *found > FORMAT_VERSION {
                return Err(Refused::Version(*found));
            }
            if line.number == 1 {
                version = *found;
            }
        }
        // A snapshot written while a restore is under way ends with its `begin` (and
        // `rollback`): they count as the snapshot, as the writer counts them. (A `begin`
        // appended just after a snapshot counts in too, which only delays the next rewrite by
        // that one record.)
        in_snapshot &= matches!(
            record,
            LogLine::Header { .. }
                | LogLine::Turn(_)
                | LogLine::Begin(_)
                | LogLine::Rollback { .. }
        );
        if !ends_or_continues_a_restore(&record)
            && let Some(pending) = state.pending.take()
        {
            // Its `done` is damaged, since nothing is appended while a restore is pending.
            bad.push(BadLine {
                line: begun,
                reason: format!(
                    "the restore of turn {} begun here has no record of completing",
                    pending.turn.meta.id
                ),
            });
        }
        if matches!(record, LogLine::Begin(_)) {
            begun = line.number;
        }
        if in_snapshot {
            snapshot_end = line.end;
        }
        if let Err(reason) = state.apply(record) {
            bad.push(BadLine {
                line: line.number,
                reason,
            });
        }
    }
    // A restore under way is completed on the next open without asking: its turns' paths are
    // decoded now, and a `begin` whose paths cannot be read is damaged, as it was before
    // paths were decoded only when asked for.
    if let Some(pending) = &state.pending {
        let turns = std::iter::once(&pending.turn).chain(&pending.members);
        if let Some(err) = turns.filter_map(|turn| turn.paths().err()).next() {
            bad.push(BadLine {
                line: begun,
                reason: err.to_string(),
            });
            state.pending = None;
        }
    }
    if let Some((last, start)) = torn {
        end = start;
        // The snapshot's first line is written atomically with the rest: it is never torn.
        if last.line == 1 {
            bad.push(last);
        }
    }
    if version == 0 && bad.is_empty() && !(state.undo.is_empty() && state.redo.is_empty()) {
        bad.push(BadLine {
            line: 1,
            reason: "missing header".to_owned(),
        });
    }
    if version < FORMAT_VERSION {
        let pending = state.pending.iter_mut().map(|p| &mut p.turn);
        for turn in state.undo.iter_mut().chain(&mut state.redo).chain(pending) {
            Arc::make_mut(turn).upgrade(version);
        }
    }
    let snapshot_end = snapshot_end.min(end);
    state.layout = Layout {
        version,
        end: end as u64,
        snapshot: snapshot_end as u64,
        appended: (end - snapshot_end) as u64,
    };
    Ok(Parsed { state, bad })
}

/// Applies `record` to `state` and makes it durable in the log at `path`: appended and
/// flushed (a crash leaves the record whole or torn, and a torn one is ignored),
/// or, when the events have outgrown the snapshot (or the log is missing, or of an older
/// version), as a new snapshot that replaces the log atomically.
///
/// The state's hash of the log's bytes (see [`LogState::log_hash`]) is carried on when the
/// write succeeds.
pub(crate) fn append(path: &Path, state: &mut LogState, record: LogLine) -> io::Result<()> {
    if state.layout.version < FORMAT_VERSION {
        // A new log, or one an earlier version wrote: written whole, so the record is not
        // encoded for a line first.
        state.digest = None;
        state.apply(record).map_err(io::Error::other)?;
        return rewrite(path, state);
    }
    // Measured and checksummed first, without being held: a turn of many paths makes a
    // record of tens of MiB.
    let (sum, len) = line_sum(&record)?;
    let layout = state.layout;
    let appended = layout.appended + len;
    if appended > APPENDED_MAX.max(layout.snapshot) {
        state.digest = None;
        state.apply(record).map_err(io::Error::other)?;
        return rewrite(path, state);
    }
    // Known again only once the write is done.
    let mut digest = state.digest.take();
    let line = record.clone();
    state.apply(record).map_err(io::Error::other)?;
    let file = no_follow().write(true).open(path)?;
    if file.metadata()?.len() != layout.end {
        file.set_len(layout.end)?;
        digest = None;
    }
    let mut out = io::BufWriter::with_capacity(
        APPEND_BUFFER,
        WriteAt {
            file: &file,
            at: layout.end,
            digest: digest.as_deref_mut(),
        },
    );
    write_summed_line(&line, &sum, &mut out)?;
    let written = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    if written.at != layout.end + len {
        return Err(io::Error::other(
            "a log record came out of another length than measured",
        ));
    }
    file.sync_data()?;
    state.layout.end += len;
    state.layout.appended = appended;
    state.digest = digest;
    Ok(())
}

/// The buffer of an appended record's writes.
const APPEND_BUFFER: usize = 1 << 16;

/// A writer into `file` from offset `at` on, hashing what it writes into `digest` if given.
struct WriteAt<'f, 'd> {
    file: &'f std::fs::File,
    at: u64,
    digest: Option<&'d mut blake3::Hasher>,
}

impl Write for WriteAt<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write_at(buf, self.at)?;
        if let Some(digest) = &mut self.digest {
            digest.update(&buf[..n]);
        }
        self.at += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Replaces the log at `path` with a snapshot of `state`, atomically and durably.
pub(crate) fn rewrite(path: &Path, state: &mut LogState) -> io::Result<()> {
    state.digest = None;
    let mut hasher = blake3::Hasher::new();
    let len = write_atomic_with(path, |out| {
        state.write_snapshot(&mut Hashing {
            out,
            hasher: &mut hasher,
        })
    })?;
    state.layout = Layout {
        version: FORMAT_VERSION,
        end: len,
        snapshot: len,
        appended: 0,
    };
    state.digest = Some(Box::new(hasher));
    Ok(())
}

/// A writer that hashes what it passes on.
struct Hashing<'a> {
    out: &'a mut dyn Write,
    hasher: &'a mut blake3::Hasher,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;
    use crate::codec::encode;
    use crate::deferred::Deferred;
    use crate::format::{ChangeRecord, PathRecord};
    use crate::image::Image;

    fn turn(id: u64) -> Arc<TurnRecord> {
        Arc::new(TurnRecord::empty(id))
    }

    fn push(id: u64) -> LogLine {
        LogLine::Push(Pushed {
            turn: turn(id),
            dropped: Vec::new(),
            scoped: false,
        })
    }

    /// Turn `id`, which made the directory `path` (written as given, checked when read).
    fn made_dir(id: u64, path: &str) -> TurnRecord {
        let mut turn = TurnRecord::empty(id);
        turn.paths = Deferred::new(vec![PathRecord {
            path: path.to_owned(),
            before: Image::Absent,
            after: Image::Dir { mode: 0o755 },
        }]);
        turn
    }

    /// Reading the log decodes no turn's paths or changes: a turn of many paths costs a
    /// command that does not restore it a scan of its bytes. Asked for, they are what was
    /// written, and a snapshot writes them back as they were read.
    #[test]
    fn reading_the_log_leaves_the_turns_paths_and_changes_to_be_decoded_when_asked_for() {
        let mut made = made_dir(3, "a.txt");
        made.changes = Deferred::new(vec![ChangeRecord::Added {
            path: "a.txt".to_owned(),
        }]);
        let bytes = [
            encode(&LogLine::Header {
                format: LOG_FORMAT.to_owned(),
                version: FORMAT_VERSION,
                next_id: 4,
            })
            .unwrap(),
            encode(&LogLine::Turn(Stacked {
                stack: Stack::Undo,
                turn: Arc::new(made.clone()),
            }))
            .unwrap(),
        ]
        .concat();
        // Copied out of the bytes read, or left where they lie in them (as the store reads).
        let copied = parse(bytes.as_bytes()).unwrap().state;
        let shared = parse_shared(&Arc::new(bytes.clone().into_bytes()))
            .unwrap()
            .state;
        for (state, lie_in_the_log) in [(copied, false), (shared, true)] {
            let read = &state.undo[0];
            assert!(read.paths.is_deferred() && read.changes.is_deferred());
            assert_eq!(read.paths.is_shared(), lie_in_the_log);
            assert_eq!(read.changes.is_shared(), lie_in_the_log);
            let snapshot = |state: &LogState| String::from_utf8(state.snapshot()).unwrap();
            assert_eq!(snapshot(&state), bytes);
            assert_eq!(read.paths().unwrap(), made.paths().unwrap());
            assert_eq!(read.changes().unwrap(), made.changes().unwrap());
            assert!(!read.paths.is_deferred() && !read.changes.is_deferred());
            assert_eq!(snapshot(&state), bytes);
        }
    }

    /// A restore under way is completed on the next open without asking: a `begin` whose
    /// turn's paths cannot be read is damaged, and no restore is pending; the turn stays on
    /// its stack.
    #[test]
    fn a_begin_whose_paths_cannot_be_read_leaves_no_restore_pending() {
        let bad = made_dir(2, "../outside");
        let lines = [
            LogLine::Header {
                format: LOG_FORMAT.to_owned(),
                version: FORMAT_VERSION,
                next_id: 3,
            },
            push(2),
            LogLine::Begin(Begun {
                direction: Direction::Undo,
                turn: Arc::new(bad),
                run: Some(1),
                members: Vec::new(),
                reverts: None,
            }),
        ];
        let bytes: String = lines.iter().map(|line| encode(line).unwrap()).collect();
        let parsed = parse(bytes.as_bytes()).unwrap();
        assert!(parsed.state.pending.is_none());
        assert_eq!(parsed.state.undo.len(), 1);
        assert_eq!(parsed.bad.len(), 1);
        assert_eq!(parsed.bad[0].line, 3);
        assert!(
            parsed.bad[0].reason.contains("invalid path \"../outside\""),
            "{}",
            parsed.bad[0].reason
        );
    }

    #[test]
    fn a_record_reads_the_same_whatever_the_order_of_its_fields() {
        let json = serde_json::to_string(&push(4)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        let serde_json::Value::Object(fields) = value else {
            panic!("a record is an object: {json}");
        };
        // The tag last, and an unknown field.
        let mut reordered: Vec<_> = fields.into_iter().collect();
        reordered.rotate_left(1);
        let mut text = String::from("{\"later\":1");
        for (key, value) in reordered {
            text.push_str(&format!(
                ",{}:{}",
                serde_json::to_string(&key).unwrap(),
                value
            ));
        }
        text.push('}');
        assert!(!text.starts_with("{\"record\""), "{text}");
        match LogLine::from_json(&text).unwrap() {
            LogLine::Push(pushed) => assert_eq!(pushed.turn.meta.id, TurnId(4)),
            other => panic!("read as {other:?}"),
        }
        let unknown = LogLine::from_json(r#"{"record":"later","turn":{}}"#).unwrap_err();
        assert!(unknown.to_string().contains("unknown variant"), "{unknown}");
        assert!(LogLine::from_json(r#"{"turn":{}}"#).is_err());
    }

    /// What a state says, for comparing a state with the log read back: the next id, the
    /// ids on each stack (with whether the turn is marked damaged), and the restore under way
    /// (with whether it is being rolled back).
    type View = (
        u64,
        Vec<(u64, bool)>,
        Vec<(u64, bool)>,
        Option<(u64, Direction, bool)>,
    );

    fn view(state: &LogState) -> View {
        let ids = |turns: &[Arc<TurnRecord>]| {
            (turns.iter())
                .map(|t| (t.meta.id.0, t.damage.is_some()))
                .collect()
        };
        (
            state.next_id,
            ids(&state.undo),
            ids(&state.redo),
            state
                .pending
                .as_ref()
                .map(|p| (p.turn.meta.id.0, p.direction, p.rollback.is_some())),
        )
    }

    fn ids(view: &[(u64, bool)]) -> Vec<u64> {
        view.iter().map(|(id, _)| *id).collect()
    }

    fn read(path: &Path) -> Parsed {
        parse(&std::fs::read(path).unwrap()).unwrap()
    }

    /// One change to the log, as the store makes them.
    #[derive(Debug, Clone)]
    enum Op {
        /// Record a turn, keeping at most this many.
        Push { depth: usize },
        /// Drop the oldest turn on the undo stack.
        DropOldest,
        /// Undo or redo the top turn, completely.
        Restore(Direction),
        /// Begin a restore and stop (a crash): always last.
        Begin(Direction),
        /// Begin a restore, roll it back, and stop it: the turn stays, marked.
        RollBack(Direction),
        /// Mark the top turn damaged.
        Damage,
        /// Revert the top turn as a new turn: done (0), rolled back (1) or abandoned (2).
        Revert(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1usize..5).prop_map(|depth| Op::Push { depth }),
            1 => Just(Op::DropOldest),
            2 => Just(Op::Restore(Direction::Undo)),
            1 => Just(Op::Restore(Direction::Redo)),
            1 => Just(Op::RollBack(Direction::Undo)),
            1 => Just(Op::Damage),
            2 => (0u8..3).prop_map(Op::Revert),
        ]
    }

    /// The records the store would append for `op`, one append each; none when it does not
    /// apply.
    fn records(state: &LogState, op: &Op) -> Vec<LogLine> {
        let top = |direction| match direction {
            Direction::Undo => state.undo.last(),
            Direction::Redo => state.redo.last(),
        };
        match op {
            Op::Push { depth } => {
                let excess = (state.undo.len() + 1).saturating_sub(*depth);
                let dropped = state.undo.iter().take(excess).map(|t| t.meta.id).collect();
                vec![LogLine::Push(Pushed {
                    turn: turn(state.next_id),
                    dropped,
                    scoped: false,
                })]
            }
            Op::DropOldest => state
                .undo
                .first()
                .map(|t| LogLine::Drop {
                    ids: vec![t.meta.id],
                })
                .into_iter()
                .collect(),
            Op::Damage => top(Direction::Undo)
                .map(|t| LogLine::Damaged {
                    id: t.meta.id,
                    reason: "a copy is damaged".to_owned(),
                })
                .into_iter()
                .collect(),
            Op::RollBack(direction) => top(*direction)
                .map(|t| {
                    vec![
                        LogLine::Begin(Begun {
                            direction: *direction,
                            turn: t.clone(),
                            run: Some(7),
                            members: Vec::new(),
                            reverts: None,
                        }),
                        LogLine::Rollback {
                            id: t.meta.id,
                            reason: "disk full".to_owned(),
                        },
                        LogLine::Stopped {
                            id: t.meta.id,
                            reason: "disk full".to_owned(),
                            abandoned: false,
                        },
                    ]
                })
                .unwrap_or_default(),
            Op::Revert(end) => top(Direction::Undo)
                .map(|t| revert_records(state.next_id, t.meta.id, *end))
                .unwrap_or_default(),
            Op::Restore(direction) | Op::Begin(direction) => top(*direction)
                .map(|t| {
                    let mut records = vec![LogLine::Begin(Begun {
                        direction: *direction,
                        turn: t.clone(),
                        run: Some(7),
                        members: Vec::new(),
                        reverts: None,
                    })];
                    if matches!(op, Op::Restore(_)) {
                        records.push(LogLine::Done {
                            id: t.meta.id,
                            kept: Vec::new(),
                        });
                    }
                    records
                })
                .unwrap_or_default(),
        }
    }

    /// The records of a revert of `reverted` as the new turn `id`: done (0), rolled back (1)
    /// or abandoned (2).
    fn revert_records(id: u64, reverted: TurnId, end: u8) -> Vec<LogLine> {
        let new = TurnId(id);
        let reason = || "disk full".to_owned();
        let mut records = vec![LogLine::Begin(Begun {
            direction: Direction::Redo,
            turn: turn(id),
            run: Some(9),
            members: Vec::new(),
            reverts: Some(reverted),
        })];
        records.extend(match end {
            0 => vec![LogLine::Done {
                id: new,
                kept: Vec::new(),
            }],
            1 => vec![
                LogLine::Rollback {
                    id: new,
                    reason: reason(),
                },
                LogLine::Stopped {
                    id: new,
                    reason: reason(),
                    abandoned: false,
                },
            ],
            _ => vec![LogLine::Stopped {
                id: new,
                reason: reason(),
                abandoned: true,
            }],
        });
        records
    }

    /// Turn `id`, which touched each `(path, before, after)`.
    fn touched(id: u64, paths: &[(&str, Image, Image)]) -> Arc<TurnRecord> {
        let mut turn = TurnRecord::empty(id);
        turn.paths = Deferred::new(
            (paths.iter())
                .map(|(path, before, after)| PathRecord {
                    path: (*path).to_owned(),
                    before: before.clone(),
                    after: after.clone(),
                })
                .collect(),
        );
        Arc::new(turn)
    }

    /// The images of `path` in turn `id` of either stack.
    fn images_of(state: &LogState, id: u64, path: &str) -> (Image, Image) {
        let turn = (state.undo.iter().chain(&state.redo))
            .find(|turn| turn.meta.id == TurnId(id))
            .unwrap();
        let record = turn.paths().unwrap().iter().find(|r| r.path == path);
        let record = record.unwrap();
        (record.before.clone(), record.after.clone())
    }

    /// A `done` names the directories its restore kept, not empty, where its target had
    /// nothing: each turn it moves takes such a directory as the restore found it, on the
    /// side the restore went to, so that the opposite restore expects it there (for a
    /// rewind, in the turn that holds that side). A `done` of a log written before it named
    /// them (no `kept`) leaves the images as they were, and a path that is not such a
    /// directory is not taken.
    #[test]
    fn a_done_record_leaves_the_directories_its_restore_kept_as_found() {
        let dir = |mode| Image::Dir { mode };
        let file = Image::File {
            mode: 0o644,
            len: 1,
            hash: ContentHash::of(b"x"),
        };
        let absent = || Image::Absent;
        // Turns 1 and 2 make `d`, `d/a` and `e` (2 changes the mode of `d`); 3 removes `r`.
        let one = touched(
            1,
            &[("d", absent(), dir(0o755)), ("d/a", absent(), file.clone())],
        );
        let two = touched(
            2,
            &[("d", dir(0o755), dir(0o700)), ("e", absent(), dir(0o755))],
        );
        let three = touched(3, &[("r", dir(0o755), absent())]);
        // A rewind of 1 and 2 finds `d` with mode 0o711 (the last turn to touch it says so,
        // as does their join), and keeps `d` and `e`.
        let settled_two = touched(
            2,
            &[("d", dir(0o755), dir(0o711)), ("e", absent(), dir(0o755))],
        );
        let joined = touched(
            1,
            &[
                ("d", absent(), dir(0o711)),
                ("d/a", absent(), file.clone()),
                ("e", absent(), dir(0o755)),
            ],
        );
        // Then 3, undone, is redone, finding `r` with mode 0o700, and keeps it.
        let found_r = touched(3, &[("r", dir(0o700), absent())]);
        let log = |kept: &dyn Fn(&[&str]) -> Vec<String>| {
            let lines = [
                LogLine::Header {
                    format: LOG_FORMAT.to_owned(),
                    version: FORMAT_VERSION,
                    next_id: 1,
                },
                LogLine::Push(Pushed {
                    turn: Arc::clone(&one),
                    dropped: Vec::new(),
                    scoped: true,
                }),
                LogLine::Push(Pushed {
                    turn: Arc::clone(&two),
                    dropped: Vec::new(),
                    scoped: true,
                }),
                LogLine::Push(Pushed {
                    turn: Arc::clone(&three),
                    dropped: Vec::new(),
                    scoped: true,
                }),
                LogLine::Begin(Begun {
                    direction: Direction::Undo,
                    turn: Arc::clone(&three),
                    run: Some(1),
                    members: Vec::new(),
                    reverts: None,
                }),
                LogLine::Done {
                    id: TurnId(3),
                    kept: Vec::new(),
                },
                LogLine::Begin(Begun {
                    direction: Direction::Undo,
                    turn: Arc::clone(&joined),
                    run: Some(2),
                    members: vec![Arc::clone(&one), Arc::clone(&settled_two)],
                    reverts: None,
                }),
                LogLine::Done {
                    id: TurnId(1),
                    kept: kept(&["d", "d/a", "e"]),
                },
                LogLine::Begin(Begun {
                    direction: Direction::Redo,
                    turn: Arc::clone(&found_r),
                    run: Some(3),
                    members: Vec::new(),
                    reverts: None,
                }),
                LogLine::Done {
                    id: TurnId(3),
                    kept: kept(&["r"]),
                },
            ];
            let text: String = lines.iter().map(|line| encode(line).unwrap()).collect();
            let parsed = parse(text.as_bytes()).unwrap();
            assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
            parsed.state
        };
        let state = log(&|paths| paths.iter().map(|p| (*p).to_owned()).collect());
        assert!(state.pending.is_none());
        assert_eq!(images_of(&state, 1, "d"), (dir(0o711), dir(0o755)));
        assert_eq!(images_of(&state, 1, "d/a"), (absent(), file));
        assert_eq!(images_of(&state, 2, "d"), (dir(0o755), dir(0o711)));
        assert_eq!(images_of(&state, 2, "e"), (dir(0o755), dir(0o755)));
        assert_eq!(images_of(&state, 3, "r"), (dir(0o700), dir(0o700)));
        // A snapshot keeps them so.
        let again = parse(&state.snapshot()).unwrap().state;
        assert_eq!(images_of(&again, 1, "d"), (dir(0o711), dir(0o755)));
        assert_eq!(images_of(&again, 3, "r"), (dir(0o700), dir(0o700)));

        // As written before: `{"record":"done","id":1}`.
        let plain = serde_json::to_string(&LogLine::Done {
            id: TurnId(1),
            kept: Vec::new(),
        });
        assert_eq!(plain.unwrap(), r#"{"record":"done","id":1}"#);
        let state = log(&|_| Vec::new());
        assert_eq!(images_of(&state, 1, "d"), (absent(), dir(0o755)));
        assert_eq!(images_of(&state, 2, "e"), (absent(), dir(0o755)));
        assert_eq!(images_of(&state, 3, "r"), (dir(0o700), absent()));
    }

    /// A revert's new turn joins the log when the revert is done (emptying the redo stack),
    /// or when it is abandoned part-way (marked); rolled back, it leaves none, but its id
    /// stays taken.
    #[test]
    fn a_revert_is_a_new_turn_once_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut state = LogState::empty();
        for id in 1..=3 {
            append(&path, &mut state, push(id)).unwrap();
        }
        let undo = |state: &mut LogState| {
            let top = state.undo.last().unwrap().clone();
            for record in [
                LogLine::Begin(Begun {
                    direction: Direction::Undo,
                    turn: top.clone(),
                    run: None,
                    members: Vec::new(),
                    reverts: None,
                }),
                LogLine::Done {
                    id: top.meta.id,
                    kept: Vec::new(),
                },
            ] {
                append(&path, state, record).unwrap();
            }
        };
        undo(&mut state);
        for (end, expected) in [
            (1, (5, vec![(1, false), (2, false)], vec![(3, false)], None)),
            (
                0,
                (6, vec![(1, false), (2, false), (5, false)], vec![], None),
            ),
            (
                2,
                (
                    7,
                    vec![(1, false), (2, false), (5, false), (6, true)],
                    vec![],
                    None,
                ),
            ),
        ] {
            // The id of a rolled-back revert (4) is not given again.
            let id = if end == 1 { 4 } else { state.next_id };
            for record in revert_records(id, TurnId(1), end) {
                append(&path, &mut state, record).unwrap();
            }
            assert_eq!(view(&state), expected, "end {end}");
            assert_eq!(view(&read(&path).state), expected, "end {end}, read back");
        }
        // A revert whose turn is in the log already is refused.
        let err = state
            .apply(revert_records(2, TurnId(1), 0).remove(0))
            .unwrap_err();
        assert_eq!(err, "the revert begun as turn #2 is not a new turn");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the changes, the log read back is the state they made, and an append cut
        /// short anywhere reads as the state before it, with nothing reported.
        #[test]
        fn the_log_read_back_is_the_state_written(
            ops in proptest::collection::vec(op(), 1..120),
            crash in proptest::option::of((0..2usize).prop_map(|i| [Direction::Undo, Direction::Redo][i])),
            cut in any::<prop::sample::Index>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("log.jsonl");
            let mut state = LogState::empty();
            let mut ops = ops;
            ops.extend(crash.map(Op::Begin));
            let mut last_len = 0;
            for op in &ops {
              for record in records(&state, op) {
                let before = std::fs::read(&path).unwrap_or_default();
                let view_before = view(&state);
                append(&path, &mut state, record).unwrap();
                let parsed = read(&path);
                prop_assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
                prop_assert_eq!(view(&parsed.state), view(&state));
                let bytes = std::fs::read(&path).unwrap();
                // The state knows the bytes it wrote: a state kept by their hash is this one.
                prop_assert_eq!(state.log_hash(), Some(blake3::hash(&bytes)));
                // Events never take more than the snapshot, or the fixed allowance.
                prop_assert!(parsed.state.layout.appended <= APPENDED_MAX.max(parsed.state.layout.snapshot));
                if bytes.starts_with(&before) && bytes.len() > before.len() && !before.is_empty() {
                    // An append: cut it short anywhere, and it is as if it never happened.
                    let at = before.len() + cut.index(bytes.len() - before.len());
                    let torn = parse(&bytes[..at]).unwrap();
                    prop_assert!(torn.bad.is_empty(), "{:?}", torn.bad);
                    prop_assert_eq!(view(&torn.state), view_before);
                    prop_assert_eq!(torn.state.layout.end, before.len() as u64);
                }
                last_len = bytes.len();
              }
            }
            prop_assert_eq!(std::fs::metadata(&path).map(|m| m.len() as usize).unwrap_or(0), last_len);
        }
    }

    /// A scoped push (format 8) clears the undone turns of its own session only; an older
    /// log's push, read back, still clears them all.
    #[test]
    fn a_push_clears_the_undone_turns_of_its_own_session() {
        let of = |id: u64, session: Option<&str>| {
            let mut turn = TurnRecord::empty(id);
            turn.meta.session = session.map(str::to_owned);
            Arc::new(turn)
        };
        let undone = |session| {
            let mut state = LogState::empty();
            for (id, s) in [(1, Some("a")), (2, Some("b")), (3, None)] {
                state
                    .apply(LogLine::Turn(Stacked {
                        stack: Stack::Redo,
                        turn: of(id, s),
                    }))
                    .unwrap();
            }
            let push = |scoped| {
                LogLine::Push(Pushed {
                    turn: of(4, session),
                    dropped: Vec::new(),
                    scoped,
                })
            };
            let mut scoped = state.clone();
            scoped.apply(push(true)).unwrap();
            state.apply(push(false)).unwrap();
            (ids(&view(&scoped).2), ids(&view(&state).2))
        };
        assert_eq!(undone(Some("a")), (vec![2, 3], vec![]));
        assert_eq!(undone(None), (vec![1, 2], vec![]));
    }

    #[test]
    fn the_next_append_replaces_a_torn_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut state = LogState::empty();
        append(&path, &mut state, push(1)).unwrap();
        append(&path, &mut state, push(2)).unwrap();
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 7]).unwrap();
        let mut state = read(&path).state;
        assert_eq!(ids(&view(&state).1), [1]);
        append(&path, &mut state, push(3)).unwrap();
        let parsed = read(&path);
        assert!(parsed.bad.is_empty());
        assert_eq!(
            view(&parsed.state),
            (4, vec![(1, false), (3, false)], vec![], None)
        );
    }

    #[test]
    fn damage_before_the_last_record_is_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut state = LogState::empty();
        for id in 1..=3 {
            append(&path, &mut state, push(id)).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let damaged = text.replacen("turn 2", "turn X", 1);
        let parsed = parse(damaged.as_bytes()).unwrap();
        assert_eq!(ids(&view(&parsed.state).1), [1, 3]);
        assert_eq!(parsed.bad.len(), 1);
        assert_eq!(parsed.bad[0].line, 3);
        assert_eq!(parsed.bad[0].reason, "checksum mismatch");
        assert_eq!(parsed.state.layout.end, damaged.len() as u64);
    }

    #[test]
    fn records_out_of_order_are_reported() {
        let line = |record: LogLine| encode(&record).unwrap();
        let header = line(LogLine::Header {
            format: LOG_FORMAT.to_owned(),
            version: FORMAT_VERSION,
            next_id: 1,
        });
        let begin = line(LogLine::Begin(Begun {
            direction: Direction::Undo,
            turn: turn(1),
            run: None,
            members: Vec::new(),
            reverts: None,
        }));
        // A `done` without its `begin`, a turn logged twice, and a `begin` whose `done` is
        // missing before the next record.
        let text = [
            header,
            line(LogLine::Done {
                id: TurnId(1),
                kept: Vec::new(),
            }),
            line(push(1)),
            line(push(1)),
            begin,
            line(push(2)),
        ]
        .concat();
        let parsed = parse(text.as_bytes()).unwrap();
        let reasons: Vec<(usize, &str)> = parsed
            .bad
            .iter()
            .map(|b| (b.line, b.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                (2, "no restore of turn #1 was begun"),
                (4, "turn #1 is in the log twice"),
                (
                    5,
                    "the restore of turn #1 begun here has no record of completing"
                ),
            ]
        );
        assert_eq!(
            view(&parsed.state),
            (3, vec![(1, false), (2, false)], vec![], None)
        );

        // Without a header, the turns are read and the header reported missing.
        let headless = line(push(1));
        let parsed = parse(headless.as_bytes()).unwrap();
        assert_eq!(parsed.bad[0].reason, "missing header");
        assert_eq!(ids(&view(&parsed.state).1), [1]);
    }

    #[test]
    fn a_log_of_an_older_version_is_rewritten_before_it_is_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let old = [
            encode(&LogLine::Header {
                format: LOG_FORMAT.to_owned(),
                version: 3,
                next_id: 5,
            })
            .unwrap(),
            encode(&LogLine::Turn(Stacked {
                stack: Stack::Undo,
                turn: turn(4),
            }))
            .unwrap(),
        ]
        .concat();
        std::fs::write(&path, &old).unwrap();
        let mut state = read(&path).state;
        append(&path, &mut state, push(5)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!(r#""version":{FORMAT_VERSION}"#)),
            "{text}"
        );
        assert!(
            !text.contains(r#""record":"push""#),
            "a snapshot, not an append"
        );
        assert_eq!(
            view(&read(&path).state),
            (6, vec![(4, false), (5, false)], vec![], None)
        );

        let newer = encode(&LogLine::Header {
            format: LOG_FORMAT.to_owned(),
            version: FORMAT_VERSION + 1,
            next_id: 1,
        })
        .unwrap();
        assert_eq!(
            parse(newer.as_bytes()).unwrap_err(),
            Refused::Version(FORMAT_VERSION + 1)
        );
    }

    #[test]
    fn turns_of_a_log_before_format_6_that_ran_bash_read_as_uncaptured() {
        let ran_bash = |id| {
            let mut turn = TurnRecord::empty(id);
            turn.ran_bash = true;
            Arc::new(turn)
        };
        let log = |version| {
            [
                encode(&LogLine::Header {
                    format: LOG_FORMAT.to_owned(),
                    version,
                    next_id: 4,
                })
                .unwrap(),
                encode(&LogLine::Turn(Stacked {
                    stack: Stack::Undo,
                    turn: ran_bash(1),
                }))
                .unwrap(),
                encode(&LogLine::Turn(Stacked {
                    stack: Stack::Redo,
                    turn: turn(2),
                }))
                .unwrap(),
                encode(&LogLine::Begin(Begun {
                    direction: Direction::Undo,
                    turn: ran_bash(1),
                    run: None,
                    members: Vec::new(),
                    reverts: None,
                }))
                .unwrap(),
            ]
            .concat()
        };
        let uncaptured = |state: &LogState| {
            let pending = state.pending.iter().map(|p| &p.turn);
            (state.undo.iter().chain(&state.redo).chain(pending))
                .map(|t| t.bash_uncaptured)
                .collect::<Vec<_>>()
        };
        let old = parse(log(5).as_bytes()).unwrap();
        assert!(old.bad.is_empty());
        assert_eq!(uncaptured(&old.state), [true, false, true]);
        let current = parse(log(FORMAT_VERSION).as_bytes()).unwrap();
        assert_eq!(uncaptured(&current.state), [false, false, false]);
    }
}
