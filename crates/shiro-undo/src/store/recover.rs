//! Recovery, under the lock, each time the store is opened: a restore that stopped part-way
//! is completed, a turn a crash cut short becomes an undoable turn from its in-flight record
//! and bash layers, and the log is read back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use shiro_tools::capture::{BeforeCommit, LayerRecovery};
use shiro_tools::{Mutator, MutatorError, Stat, WorkspacePath};

use crate::blob::{Form, MAX_DELTA_DEPTH};
use crate::codec::{decode_all, empty_file, read_framed, read_optional, remove_durably};
use crate::delta;
use crate::error::UndoError;
use crate::flight::{Finished, Flight, Inflight, Keep, Pending};
use crate::format::{
    Begun, FORMAT_VERSION, INFLIGHT_FILE, InflightLine, JOURNAL_FILE, Journal, LogLine,
    PROGRESS_FILE, PathRecord,
};
use crate::git;
use crate::ground::open_read;
use crate::image::{ContentHash, Image, Spares, hashed_image};
use crate::log::LogState;
use crate::pack::{Check, PackWriter, pack_path};
use crate::report::{MAX_NAMED_IN_LINE, Notice, named};
use crate::restore;

use super::{UndoStore, direction_verb, needed_writes};

/// How many bytes of new pre-images a finishing turn compresses at once (see
/// [`PackWriter::add_all`]); at most this much of them is read back into memory at a time,
/// twice that with the records that lie between them (see [`Inflight::read_places`]).
const PACK_WINDOW: usize = 8 << 20;

impl UndoStore {
    /// Under the lock: completes an interrupted restore, recovers an interrupted turn, and
    /// returns the log.
    pub(super) async fn recover(&self, workspace: &dyn Mutator) -> Result<LogState, UndoError> {
        let mut state = self.load_state()?;
        self.recover_strictly(workspace, &mut state).await?;
        Ok(state)
    }

    pub(super) async fn recover_loaded(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        self.adopt_journal(state)?;
        match self.recover_restore(workspace, state).await {
            Ok(()) => {}
            // Opening still works, so that `shiro log` shows it and `--abandon` can clear it;
            // whatever needs the log to move on (a restore, a new turn) is refused.
            Err(UndoError::RestoreStuck {
                turn,
                direction,
                reverting,
                reason,
            }) => {
                self.notify(Notice::StuckRestore {
                    id: turn,
                    direction,
                    reverting,
                    reason,
                });
                return Ok(());
            }
            Err(err) => return Err(err),
        }
        self.recover_inflight(workspace, state).await
    }

    /// Like [`Self::recover_loaded`], failing when a restore is stuck.
    pub(super) async fn recover_strictly(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        self.adopt_journal(state)?;
        self.recover_restore(workspace, state).await?;
        self.recover_inflight(workspace, state).await
    }

    /// Completes a restore that a crash interrupted (its `begin` is the log's last record),
    /// or rolls it back when it cannot be completed. Every path not done yet is checked
    /// first: one that is neither as the restore found it nor as it makes it (and not the one
    /// it was writing) was changed by someone meanwhile, and is never overwritten; the restore
    /// is then rolled back around it. A restore that can be neither completed nor rolled back
    /// stays in the log, and [`UndoError::RestoreStuck`] says so (see [`UndoStore::abandon`]).
    pub(super) async fn recover_restore(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        let Some(pending) = state.pending.clone() else {
            return Ok(());
        };
        let id = pending.turn.meta.id;
        let direction = pending.direction;
        let reverting = pending.reverts;
        let stuck = |err: &UndoError| UndoError::RestoreStuck {
            turn: id,
            direction,
            reverting,
            reason: err.to_string(),
        };
        let paths = pending.turn.workspace_paths()?;
        restore::sweep_partial_writes(workspace, paths.iter().map(|(path, _)| path)).await;
        let progress_path = self.path(PROGRESS_FILE);
        let started = restore::Progress::read(&progress_path, pending.run);
        let run = pending.run.unwrap_or_else(restore::new_run);
        let standings = restore::standings(workspace, &pending.turn, direction, started)
            .await
            .map_err(|err| stuck(&err))?;
        let changed: BTreeSet<WorkspacePath> = (standings.iter())
            .filter(|(_, standing)| matches!(standing, restore::Standing::Changed(_)))
            .map(|(path, _)| path.clone())
            .collect();
        let verb = match reverting {
            Some(_) => "revert",
            None => direction_verb(direction),
        };
        let reason = if let Some(reason) = &pending.rollback {
            // A rollback was under way: it continues, around what changed since.
            reason.clone()
        } else if !changed.is_empty() {
            let paths: Vec<&str> = changed.iter().map(WorkspacePath::as_str).collect();
            format!(
                "its {verb} was interrupted, and {} changed before it could be completed",
                paths.join(", ")
            )
        } else {
            let stored = restore::Stored::open(&self.inner.blobs, &pending.turn);
            let writes = needed_writes(&pending.turn, direction, &standings, &BTreeSet::new())?;
            let progress = restore::Progress::resume(&progress_path, run, started);
            let git = pending.turn.git.as_ref();
            let verified = restore::verify(&stored, writes.iter().map(|(p, i)| (p, i))).and_then(
                |()| match git {
                    Some(record) => git::index_to_write(record, direction, &stored)
                        .map_err(|err| UndoError::io("read", stored.dir(), err)),
                    None => Ok(None),
                },
            );
            let completed = match verified {
                Ok(index) => {
                    let applied = restore::apply_marked_first(
                        workspace,
                        &stored,
                        &pending.turn,
                        direction,
                        &BTreeSet::new(),
                        &progress,
                    )
                    .await;
                    // The repository's state is moved again: what stands where it goes is
                    // left alone.
                    match (applied, git) {
                        (Ok(notes), Some(record)) => {
                            git::apply(workspace.root(), record, direction, index).map(|()| notes)
                        }
                        (applied, _) => applied,
                    }
                }
                Err(err) => Err(err),
            };
            match completed {
                Ok(notes) => {
                    let earlier = super::collect::named_packs(state);
                    let kept = restore::kept_dirs(&notes);
                    self.append(state, LogLine::Done { id, kept })?;
                    if reverting.is_some() {
                        // The revert's turn is recorded now: the log keeps its depth.
                        self.settle_new_turn(state, &earlier)?;
                    }
                    self.notify(Notice::CompletedRestore {
                        id,
                        direction,
                        reverting,
                    });
                    return Ok(());
                }
                Err(err) => format!("its interrupted {verb} could not be completed: {err}"),
            }
        };
        let progress = restore::Progress::resume(&progress_path, run, started);
        self.roll_back(workspace, state, changed.clone(), reason.clone(), &progress)
            .await?;
        self.notify(Notice::RolledBackRestore {
            id,
            direction,
            reverting,
            reason,
            left: changed.into_iter().collect(),
        });
        Ok(())
    }

    /// Moves the journal of a restore that a store of format 3 or older began into the log,
    /// as its `begin` record, for [`Self::recover_restore`] to complete.
    pub(super) fn adopt_journal(&self, state: &mut LogState) -> Result<(), UndoError> {
        let path = self.path(JOURNAL_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| UndoError::io("read", &path, err))?
        else {
            return Ok(());
        };
        let (mut good, bad) = decode_all::<Journal>(&bytes);
        match good.pop() {
            Some((_, journal))
                if bad.is_empty()
                    && journal.turn.validate().is_ok()
                    && journal.turn.paths().is_ok()
                    && state.pending.is_none() =>
            {
                if journal.version > FORMAT_VERSION {
                    return Err(UndoError::UnsupportedVersion {
                        path,
                        found: journal.version,
                        supported: FORMAT_VERSION,
                    });
                }
                let mut turn = journal.turn;
                turn.upgrade(journal.version);
                self.append(
                    state,
                    LogLine::Begin(Begun {
                        direction: journal.direction,
                        turn: Arc::new(turn),
                        run: None,
                        members: Vec::new(),
                        reverts: None,
                    }),
                )?;
            }
            _ => {
                // The journal was made durable before its restore changed anything, so a
                // damaged journal means the restore never began: dropping it loses nothing.
                for b in bad {
                    self.notify(Notice::CorruptRecord {
                        file: JOURNAL_FILE.to_owned(),
                        line: b.line,
                        reason: b.reason,
                    });
                }
            }
        }
        remove_durably(&path).map_err(|err| UndoError::io("remove", &path, err))
    }

    pub(super) async fn recover_inflight(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        let path = self.path(INFLIGHT_FILE);
        let read = self.read_flight(&path, state)?;
        // Then a bash command's overlay layer that a crash left: a commit cut short is
        // finished where the paths are still what the in-flight record saved of them before
        // it began (their pre-images), a command cut short is discarded.
        let before = match &read {
            Read::Flight(flight, _) => Some(&flight.before),
            _ => None,
        };
        let (kept, changed) = self.recover_layers(workspace, before).await?;
        let committed = match read {
            Read::Nothing => return Ok(()),
            Read::Unusable => false,
            Read::Stale => true,
            Read::Flight(mut flight, damaged) => {
                // What was changed since the commit began is not the command's doing: the
                // turn leaves it out, so that undoing the turn leaves it too.
                for path in &kept {
                    flight.before.retain(|at, _| !at.starts_with(path));
                }
                // What finishing the commit just changed is the turn's, whatever the stamps
                // of earlier changes say.
                let changed: BTreeSet<&WorkspacePath> = changed.iter().collect();
                let applied: Vec<WorkspacePath> = (flight.before.keys())
                    .filter(|at| {
                        changed.contains(at) || at.ancestors().iter().any(|a| changed.contains(a))
                    })
                    .cloned()
                    .collect();
                for at in applied {
                    flight.done.insert(at, None);
                }
                self.finish_flight(workspace, state, *flight, damaged)
                    .await?
            }
        };
        empty_file(&path, !committed).map_err(|err| UndoError::io("empty", &path, err))
    }

    /// Finishes or discards the layers of bash commands that a crash left (see
    /// [`shiro_tools::capture::recover_layers`]), and returns the paths a finished commit
    /// left unapplied because they changed since it began, and those it changed.
    async fn recover_layers(
        &self,
        workspace: &dyn Mutator,
        before: Option<&BTreeMap<WorkspacePath, Image>>,
    ) -> Result<(Vec<WorkspacePath>, Vec<WorkspacePath>), UndoError> {
        let state_dir = &self.inner.state;
        let saved = Saved(before);
        let mut recovered_layers = Vec::new();
        for layers in [state_dir.layers_dir(), state_dir.legacy_layers_dir()] {
            recovered_layers.extend(
                shiro_tools::capture::recover_layers(workspace, &layers, &saved)
                    .await
                    .map_err(UndoError::Mutator)?,
            );
        }
        let mut all_kept = Vec::new();
        let mut all_changed = Vec::new();
        for recovered in recovered_layers {
            self.notify(match recovered {
                LayerRecovery::Finished {
                    steps,
                    applied,
                    changed,
                    kept,
                } => {
                    all_kept.extend(kept.iter().cloned());
                    all_changed.extend(changed);
                    Notice::FinishedBashCommit {
                        steps,
                        applied,
                        kept,
                    }
                }
                LayerRecovery::Discarded => Notice::DiscardedBashLayer,
                LayerRecovery::DiscardedAfterRestart => Notice::DiscardedBashCommit,
            });
        }
        Ok((all_kept, all_changed))
    }

    /// Reads the in-flight file at `path`: the turn a crash cut short, if it holds one that
    /// the log does not.
    fn read_flight(&self, path: &Path, state: &mut LogState) -> Result<Read, UndoError> {
        let file = match open_read(path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Read::Nothing),
            Err(err) => return Err(UndoError::io("read", path, err)),
        };
        let empty = (file.metadata())
            .map_err(|err| UndoError::io("read", path, err))?
            .len()
            == 0;
        if empty {
            // Between turns.
            return Ok(Read::Nothing);
        }
        // The file is read a record at a time, and the bytes it carries are checked as they
        // are read: the pre-images are held as the recorder held them (up to its budget, and
        // a big file's always); the others are noted by their place in the file, and read
        // back from there as the turn is stored. So recovering a turn of many files costs
        // what recording it did, not the whole file in memory.
        let options = &self.inner.options;
        let mut held = 0u64;
        let reader = std::io::BufReader::with_capacity(1 << 16, file);
        let (records, bad) = read_framed::<InflightLine, Payload>(
            reader,
            |line| match line {
                InflightLine::Path { bytes, .. } => *bytes,
                InflightLine::Blob { bytes, .. } => Some(*bytes),
                _ => None,
            },
            |line, offset, bytes| {
                let Some((hash, len)) = carried(line) else {
                    return Ok(Payload::Unused);
                };
                let keep =
                    Pending::is_held(len, held, options.big_file_bytes, options.max_held_bytes);
                let (found, pending) = if keep {
                    let mut kept = Vec::new();
                    bytes.read_to_end(&mut kept)?;
                    (ContentHash::of(&kept), Pending::Held(kept))
                } else {
                    let mut hasher = blake3::Hasher::new();
                    std::io::copy(bytes, &mut hasher)?;
                    let found = ContentHash::from(hasher.finalize());
                    (found, Pending::Filed { offset, len })
                };
                if found != hash {
                    return Ok(Payload::Damaged);
                }
                if keep {
                    held += len;
                }
                Ok(Payload::Kept(pending))
            },
        )
        .map_err(|err| UndoError::io("read", path, err))?;
        // A torn last record is the write a crash interrupted. Each record (with the bytes it
        // carries) is flushed before the mutation it protects runs, so that mutation never
        // ran: ignoring the record loses nothing, and it is not worth a notice. Anything else
        // is damage, and the records after it cannot be framed, so they are not read.
        if let Some((b, torn)) = bad
            && !torn
        {
            self.notify(Notice::CorruptRecord {
                file: INFLIGHT_FILE.to_owned(),
                line: b.line,
                reason: format!("{}; the records after it were not read", b.reason),
            });
        }
        let mut records = records.into_iter();
        let meta = match records.next() {
            Some((1, InflightLine::Start { version, turn }, _)) if version <= FORMAT_VERSION => {
                Some(turn)
            }
            _ => None,
        };
        let Some(meta) = meta else {
            return Ok(Read::Unusable);
        };
        // The log's next id passes a turn's id only when that turn is committed (ids are
        // handed out from it under the lock): such a file is a leftover whose emptying a
        // crash undid, even if its turn has since left the log.
        let stale = meta.id.0 < state.next_id || state.contains(meta.id);
        state.pass_id(meta.id);
        if stale {
            return Ok(Read::Stale);
        }
        let id = meta.id;
        let mut flight = Flight::new(meta);
        // A record of another turn was left by an earlier turn (the emptying of the file, not
        // flushed, was lost): this turn's records end there.
        let own = records.take_while(|(_, line, _)| line.turn().is_none_or(|t| t == id));
        // The pre-images whose bytes are damaged: unless stored already, the turn cannot be
        // undone.
        let mut damaged = BTreeSet::new();
        for (number, line, payload) in own {
            let payload = match payload {
                Some(Payload::Kept(pending)) => Some(pending),
                Some(Payload::Damaged) => {
                    damaged.extend(carried(&line).map(|(hash, _)| hash));
                    self.notify(Notice::CorruptRecord {
                        file: INFLIGHT_FILE.to_owned(),
                        line: number,
                        reason: "stored bytes do not match their hash".to_owned(),
                    });
                    None
                }
                Some(Payload::Unused) | None => None,
            };
            flight.apply(line, payload);
        }
        Ok(Read::Flight(Box::new(flight), damaged))
    }

    /// Stores the turn a crash cut short, read back from the in-flight file (`damaged`: the
    /// pre-images whose bytes were found damaged there); whether the log now holds it.
    async fn finish_flight(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
        flight: Flight,
        damaged: BTreeSet<ContentHash>,
    ) -> Result<bool, UndoError> {
        let id = flight.meta.id;
        let summary = flight.meta.summary.clone();
        // Files the turn kept under a second name (see `Blobs::keep_file`).
        let stream = self.inner.options.stream_file_bytes;
        let kept: Vec<ContentHash> = (flight.before.values())
            .filter_map(|image| image.streamed_hash(stream))
            .collect();
        // A write killed before its rename left its temporary file beside the path;
        // every such path was captured first, so it is among these.
        restore::sweep_partial_writes(workspace, flight.before.keys()).await;
        let spares = Spares::none();
        let options = &self.inner.options;
        let keep = Keep {
            big: options.big_file_bytes,
            small: options.max_small_after_bytes,
            stream: options.stream_file_bytes,
        };
        match flight.finish(workspace, true, keep, &spares).await? {
            Some(finished) => {
                let paths = finished.record.paths()?.len();
                let summary_of = finished.record.summary();
                let (unrestorable, changed_since) =
                    (summary_of.bash_unrestorable, summary_of.changed_since);
                // A blob an earlier attempt to finish this turn left damaged (a disk
                // error) must not count as stored.
                let blobs = &self.inner.blobs;
                blobs
                    .discard_damaged(finished.pending.keys().chain(finished.afters.keys()))
                    .map_err(|err| UndoError::io("check blobs in", blobs.dir(), err))?;
                let lost = self.lost(state, finished.record.paths()?, &damaged);
                self.commit_flight(state, finished, &spares)?;
                if !lost.is_empty() {
                    let reason = format!(
                        "what {} held before it is lost, its copy damaged before it could be stored",
                        named(&lost, MAX_NAMED_IN_LINE)
                    );
                    self.append(state, LogLine::Damaged { id, reason })?;
                }
                self.notify(Notice::RecoveredTurn {
                    id,
                    summary,
                    paths,
                    unrestorable,
                    lost,
                    changed_since,
                });
                Ok(true)
            }
            None => {
                // It changed nothing: what it kept and still shares with the
                // workspace is needed by no turn.
                let blobs = &self.inner.blobs;
                (blobs.remove_shared(&kept))
                    .map_err(|err| UndoError::io("clean up", blobs.dir(), err))?;
                self.notify(Notice::DiscardedEmptyTurn { id });
                Ok(false)
            }
        }
    }

    /// The paths of `paths` whose pre-image is among the `damaged` ones and stored nowhere
    /// else (a capture carries no bytes it finds stored, so only if they came meanwhile):
    /// what they held before the turn is lost.
    fn lost(
        &self,
        state: &LogState,
        paths: &[PathRecord],
        damaged: &BTreeSet<ContentHash>,
    ) -> Vec<WorkspacePath> {
        if damaged.is_empty() {
            return Vec::new();
        }
        let packed = self.packed(state);
        (paths.iter())
            .filter(|path| {
                path.before.hash().is_some_and(|hash| {
                    damaged.contains(&hash)
                        && !self.inner.blobs.contains(&hash)
                        && packed.find(&hash).is_none()
                })
            })
            .filter_map(|path| WorkspacePath::from_relative(&path.path).ok())
            .collect()
    }

    /// Stores the new pre-images of a finished turn in one pack, `<id>-0`, written and
    /// flushed once, then pushes the turn (see [`UndoStore::commit_turn`]). Until the log
    /// holds the turn, its in-flight file still holds the bytes of the new ones. A pre-image
    /// stored already, as a blob or in a pack the log names, is not stored again; the turn
    /// names the pack that holds it.
    ///
    /// The after-images of small files that [`Flight::finish`] kept go into the same pack,
    /// under the same rule: an undo or a rewind of the turn then finds what it replaces
    /// stored already, and writes no pack of its own. They cost the turn their compression
    /// and their bytes in the pack, not another flush; the turn refers to them (its
    /// `after` images), so the pack stays while the turn does.
    ///
    /// A big file's after-image is stored too, as a delta against its pre-image (a new one is
    /// stored raw, the start of a chain): the next turn on the file finds its pre-image
    /// stored already, and stores only its own delta. A chain [`MAX_DELTA_DEPTH`] deep starts
    /// again with the after-image whole. These stay blob files of their own: chains are
    /// followed from file to file.
    pub(super) fn commit_flight(
        &self,
        state: &mut LogState,
        finished: Finished,
        spares: &Spares,
    ) -> Result<(), UndoError> {
        let blobs = &self.inner.blobs;
        let Finished {
            record,
            pending,
            held,
            afters,
            small_afters,
        } = finished;
        let mut record = record;
        let id = record.meta.id;
        // Direct, so that only the field is borrowed: the record's packs are named below.
        let paths =
            (record.paths.get()).map_err(|reason| UndoError::UnreadableTurn { id, reason })?;
        // A file kept under a second name that the turn did not replace after all (it failed,
        // or a crash cut it short) gets a copy of its own now, before any turn relies on it.
        let stream = self.inner.options.stream_file_bytes;
        for hash in (paths.iter()).filter_map(|path| path.before.streamed_hash(stream)) {
            (blobs.unshare_if_shared(&hash))
                .map_err(|err| UndoError::io("store a copy in", blobs.dir(), err))?;
        }
        let packed = self.packed(state);
        let loose = blobs.contains_many(paths.len() + pending.len());
        let in_store = |hash: &ContentHash| loose.contains(hash) || packed.find(hash).is_some();
        let mut items = Vec::new();
        let mut raw = BTreeSet::new();
        let mut stored = BTreeSet::new();
        for path in paths {
            let (Some(before), Some(after)) = (path.before.hash(), path.after.hash()) else {
                continue;
            };
            let Some(after_bytes) = afters.get(&after) else {
                continue;
            };
            if before == after || !stored.insert(after) || in_store(&after) {
                continue;
            }
            // The pre-image: new (stored raw now, starting a chain), or stored already (the
            // previous turn's after-image), its bytes held since it was captured. A delta's
            // base is a blob of its own: one in a pack starts a new chain.
            let (before_bytes, depth) = if let Some(Pending::Held(bytes)) = pending.get(&before) {
                raw.insert(before);
                (bytes, 0)
            } else if let Some(bytes) = held.get(&before) {
                let depth = if blobs.contains(&before) {
                    blobs.chain_depth(&before, MAX_DELTA_DEPTH)
                } else {
                    MAX_DELTA_DEPTH
                };
                (bytes, depth)
            } else {
                continue;
            };
            let delta = (depth < MAX_DELTA_DEPTH)
                .then(|| delta::encode(after_bytes, before_bytes))
                .flatten();
            items.push(match delta {
                Some(ops) => (after, Form::Delta { base: before, ops }),
                None => (after, Form::Raw(after_bytes)),
            });
        }
        // The other new pre-images go into the turn's pack, one file flushed once; the bases
        // of deltas are blobs of their own, on disk before their deltas are. The pack holds
        // them in the order of the turn's paths, the order in which a restore reads them.
        let failed = |err| UndoError::io("store a copy in", blobs.dir(), err);
        let mut batch: Vec<(ContentHash, Form<'_>)> = Vec::new();
        let mut pack: Option<PackWriter> = None;
        let befores = paths.iter().filter_map(|path| path.before.hash());
        let mut seen = BTreeSet::new();
        let in_path_order = (befores.chain(pending.keys().copied()))
            .filter(|hash| seen.insert(*hash))
            .filter_map(|hash| Some((hash, pending.get(&hash)?)));
        // They are compressed a window at a time, on a few threads; those past what the turn
        // held in memory are read back from the in-flight file as their window comes, with a
        // read for those that lie together, and checked against their hashes on the
        // compressing threads.
        let mut inflight = Inflight::at(self.path(INFLIGHT_FILE));
        let mut window: Vec<(ContentHash, &Pending)> = Vec::new();
        let mut window_bytes = 0;
        let mut in_path_order = in_path_order.peekable();
        while let Some((hash, pending)) = in_path_order.next() {
            if raw.contains(&hash)
                && let Pending::Held(bytes) = pending
            {
                batch.push((hash, Form::Raw(bytes)));
            } else if !in_store(&hash) {
                window_bytes += match pending {
                    Pending::Held(bytes) => bytes.len(),
                    Pending::Filed { len, .. } => usize::try_from(*len).unwrap_or(usize::MAX),
                };
                window.push((hash, pending));
            }
            if !window.is_empty() && (window_bytes >= PACK_WINDOW || in_path_order.peek().is_none())
            {
                let writer = match &mut pack {
                    Some(writer) => writer,
                    None => pack.insert(PackWriter::create(blobs.dir()).map_err(failed)?),
                };
                pack_window(writer, &window, &mut inflight, blobs.dir())?;
                window.clear();
                window_bytes = 0;
            }
        }
        // Then what the turn left of small files, but a copy stored already or on its way.
        let big_afters: BTreeSet<ContentHash> = items.iter().map(|(hash, _)| *hash).collect();
        let afters_in_path_order = (paths.iter())
            .filter_map(|path| path.after.hash())
            .filter_map(|hash| Some((hash, small_afters.get(&hash)?)));
        let small: Vec<_> = afters_in_path_order
            .filter(|(hash, _)| {
                !(big_afters.contains(hash)
                    || pending.contains_key(hash)
                    || in_store(hash)
                    || pack.as_ref().is_some_and(|writer| writer.contains(hash)))
            })
            .map(|(hash, bytes)| (hash, bytes.as_slice()))
            .collect();
        if !small.is_empty() {
            let writer = match &mut pack {
                Some(writer) => writer,
                None => pack.insert(PackWriter::create(blobs.dir()).map_err(failed)?),
            };
            writer.add_all(&small).map_err(failed)?;
        }
        batch.extend(items);
        blobs.put_all(batch).map_err(failed)?;
        let own = format!("{}-0", record.meta.id.0);
        let mut named: BTreeSet<String> = BTreeSet::new();
        if let Some(writer) = pack.filter(|writer| !writer.is_empty()) {
            writer
                .finish(&pack_path(blobs.dir(), &own))
                .map_err(failed)?;
            named.insert(own.clone());
            record.packs.push(own);
        }
        // A copy stored already in another turn's pack is not stored again: this turn names
        // that pack too, so that it stays as long as this turn needs it.
        let hashes: BTreeSet<ContentHash> = record.hashes()?.collect();
        for hash in &hashes {
            if let Some(name) = packed.find(hash)
                && named.insert(name.to_owned())
            {
                record.packs.push(name.to_owned());
            }
        }
        drop(packed);
        let committed = self.commit_turn(state, record);
        spares.give(
            pending
                .into_values()
                .filter_map(Pending::into_held)
                .chain(held.into_values())
                .chain(afters.into_values()),
        );
        committed
    }
}

/// Adds the pre-images of `window` to the pack `writer`, in order: those held as they are,
/// those filed read back from `inflight` and checked.
fn pack_window(
    writer: &mut PackWriter,
    window: &[(ContentHash, &Pending)],
    inflight: &mut Inflight,
    blobs_dir: &std::path::Path,
) -> Result<(), UndoError> {
    let places: Vec<(u64, u64)> = (window.iter())
        .filter_map(|(_, pending)| match pending {
            Pending::Filed { offset, len } => Some((*offset, *len)),
            Pending::Held(_) => None,
        })
        .collect();
    let (read, ranges) = (inflight.read_places(&places))
        .map_err(|err| UndoError::io("read", inflight.path(), err))?;
    let mut ranges = ranges.into_iter();
    let items: Vec<(ContentHash, &[u8], Check)> = (window.iter())
        .map(|(hash, pending)| match pending {
            Pending::Held(bytes) => (*hash, bytes.as_slice(), Check::Trusted),
            // A place missing would read as no bytes, which the check refuses.
            Pending::Filed { .. } => {
                let bytes = (ranges.next()).and_then(|range| read.get(range));
                (*hash, bytes.unwrap_or_default(), Check::Hash)
            }
        })
        .collect();
    writer
        .add_all_checked(&items)
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::InvalidData => UndoError::io("read", inflight.path(), err),
            _ => UndoError::io("store a copy in", blobs_dir, err),
        })
}

/// The pre-image whose bytes an in-flight record carries: its hash and length.
fn carried(line: &InflightLine) -> Option<(ContentHash, u64)> {
    match line {
        InflightLine::Path {
            before: Image::File { hash, .. },
            bytes: Some(len),
            ..
        }
        | InflightLine::Blob {
            hash, bytes: len, ..
        } => Some((*hash, *len)),
        _ => None,
    }
}

/// What recovery made of the bytes an in-flight record carries.
enum Payload {
    /// A pre-image whose bytes match its hash: held, or noted by their place in the file.
    Kept(Pending),
    /// Bytes that do not match the hash their record gives.
    Damaged,
    /// Bytes of a record that needs none (skipped).
    Unused,
}

/// What the in-flight file holds.
enum Read {
    /// No turn: there is no file, or it is empty (between turns).
    Nothing,
    /// A file that holds no turn that can be read: it is emptied.
    Unusable,
    /// A turn the log holds already: the emptying of the file was lost.
    Stale,
    /// The turn a crash cut short, and the pre-images whose bytes are damaged.
    Flight(Box<Flight>, BTreeSet<ContentHash>),
}

/// The pre-images the in-flight record saved before a bash commit began: finishing the
/// commit changes only paths that still hold them.
struct Saved<'a>(Option<&'a BTreeMap<WorkspacePath, Image>>);

#[async_trait::async_trait]
impl BeforeCommit for Saved<'_> {
    async fn unchanged(
        &self,
        mutator: &dyn Mutator,
        path: &WorkspacePath,
    ) -> Result<bool, MutatorError> {
        let Some(saved) = self.0.and_then(|before| before.get(path)) else {
            return Ok(false);
        };
        if let (Image::File { len, .. }, Stat::File { len: now, .. }) =
            (saved, mutator.real_stat(path).await?)
            && *len != now
        {
            return Ok(false);
        }
        Ok(&hashed_image(mutator, path).await? == saved)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shiro_tools::{MemMutator, Mutator, WorkspacePath};

    use crate::pack::{Pack, pack_path};
    use crate::{StateDir, StoreOptions, TurnStart, UndoStore};

    /// A turn's pack holds its copies in the order of its paths, which is the order in which
    /// a restore reads them: one pass through the file, not a seek per copy.
    #[tokio::test]
    async fn a_turns_pack_holds_its_copies_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::at(dir.path().join("state"), dir.path());
        let ws = MemMutator::new();
        let paths: Vec<WorkspacePath> = (0..24)
            .map(|n| WorkspacePath::from_relative(&format!("f{n:02}")).unwrap())
            .collect();
        for (n, path) in paths.iter().enumerate() {
            ws.write(path, format!("before {n}\n").as_bytes(), None)
                .await
                .unwrap();
        }
        let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
            .await
            .unwrap();
        let rec = store.recorder(ws.clone());
        rec.begin_turn(TurnStart::default()).await.unwrap();
        for (n, path) in paths.iter().enumerate() {
            rec.write(path, format!("after {n}\n").as_bytes(), None)
                .await
                .unwrap();
        }
        rec.finish_turn().await.unwrap().unwrap();

        let (log, blobs) = store.inside();
        let turn = log.undo.last().unwrap();
        let pack = Pack::open(&pack_path(blobs.dir(), &turn.packs[0])).unwrap();
        let befores = turn
            .paths()
            .unwrap()
            .iter()
            .filter_map(|path| path.before.hash());
        let afters = turn
            .paths()
            .unwrap()
            .iter()
            .filter_map(|path| path.after.hash());
        for copies in [befores.collect::<Vec<_>>(), afters.collect()] {
            let offsets: Vec<u64> = (copies.iter())
                .map(|hash| pack.offset_of(hash).unwrap())
                .collect();
            assert!(offsets.is_sorted(), "{offsets:?}");
        }
    }
}
