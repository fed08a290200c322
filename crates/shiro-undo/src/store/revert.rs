//! Reverting one turn as a new turn: planned against the workspace ([`crate::revert`]), then
//! applied as a restore of that new turn, journaled like any undo or redo, so that a crash
//! at any point completes it or rolls it back on the next open.
//!
//! Before anything changes: the copies it writes are read back (the reverted turn's, and the
//! merged contents, which go into a pack of the new turn's first), and copies are kept of
//! what it replaces. Then a `begin` record naming the reverted turn (`reverts`) carries the
//! new turn with its images, the restore runs, and `done` pushes the new turn onto the undo
//! stack. A rollback forgets it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use shiro_tools::{Mutator, WorkspacePath};

use crate::PREVIEW_MAX_BYTES;
use crate::deferred::Deferred;
use crate::error::UndoError;
use crate::format::{Begun, LogLine, PROGRESS_FILE, PathRecord, TurnMeta, TurnRecord};
use crate::image::{ContentHash, Image};
use crate::log::LogState;
use crate::pack::{Pack, PackWriter, pack_path};
use crate::recorder::TurnStart;
use crate::report::{Action, Direction, TurnId};
use crate::restore;
use crate::revert::report::{
    RevertConflict, RevertConflictKind, RevertConflicts, RevertOutcome, RevertPath,
};
use crate::revert::{self, Copies, Step};

use super::UndoStore;
use super::collect::named_packs;
use super::undo::fresh_pack_name;

/// Where a revert's plan finds stored bytes: the reverted turn's copies, and for what the
/// turn left (the base of a merge), any pack the log names.
struct Sources<'a> {
    store: &'a UndoStore,
    state: &'a LogState,
    /// The reverted turn's copies.
    stored: &'a restore::Stored<'a>,
}

impl Copies for Sources<'_> {
    fn before(&self, path: &WorkspacePath, hash: &ContentHash) -> Result<Vec<u8>, UndoError> {
        let blob = |reason: String| UndoError::Blob {
            path: path.clone(),
            hash: hash.to_hex(),
            reason,
        };
        match self.stored.get(hash) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(blob("missing".to_owned())),
            Err(err) => Err(blob(format!("damaged ({err})"))),
        }
    }

    fn after(&self, hash: &ContentHash) -> Option<Vec<u8>> {
        if let Ok(Some(bytes)) = self.stored.get(hash) {
            return Some(bytes);
        }
        // A later turn found what this one left (its pre-image), or an undo kept it.
        let name = self.store.packed(self.state).find(hash)?.to_owned();
        let pack = Pack::open(&pack_path(self.store.inner.blobs.dir(), &name)).ok()?;
        pack.get(hash).ok().flatten()
    }
}

impl UndoStore {
    /// Reverts turn `id` as a new turn recorded with `start`; with no `start`, a dry run.
    pub(super) async fn revert_turn(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        start: Option<TurnStart>,
    ) -> Result<RevertOutcome, UndoError> {
        let (_guard, mut state) = self.lock_and_recover(workspace).await?;
        let Some(turn) = state.undo.iter().find(|t| t.meta.id == id).cloned() else {
            let undone = state.redo.iter().any(|t| t.meta.id == id);
            return Err(UndoError::NoTurnToRevert { id, undone });
        };
        let stored = restore::Stored::open(&self.inner.blobs, &turn);
        let planned = {
            let sources = Sources {
                store: self,
                state: &state,
                stored: &stored,
            };
            revert::plan(workspace, &turn, &sources).await
        };
        let mut plan = match planned {
            Ok(plan) => plan,
            Err(err @ UndoError::Blob { .. }) => {
                return Err(self.unrevertible(&mut state, id, err)?);
            }
            Err(err) => return Err(err),
        };
        if !plan.conflicts.is_empty() {
            return Err(UndoError::RevertConflict(RevertConflicts {
                turn: id,
                summary: turn.meta.summary.clone(),
                conflicts: plan.conflicts,
            }));
        }
        if !plan.steps.iter().any(Step::changes) {
            let undone = plan.undone;
            return Err(UndoError::NothingToRevert { id, undone });
        }
        // Every stored copy it writes is read back whole before anything changes.
        let copied = (plan.steps.iter())
            .filter(|step| step.changes() && step.merged.is_none())
            .map(|step| (&step.path, &step.becomes));
        if let Err(err) = restore::verify(&stored, copied) {
            return Err(self.unrevertible(&mut state, id, err)?);
        }
        let Some(start) = start else {
            return dry_run(workspace, &turn, &stored, &mut plan.steps).await;
        };
        let record = self.new_turn(&state, start, &plan.steps)?;
        self.apply_revert(workspace, &mut state, &turn, record, plan.steps)
            .await
    }

    /// Marks the reverted turn damaged, since a copy of it that the revert needs is missing
    /// or damaged (`err`), and returns the error saying so.
    fn unrevertible(
        &self,
        state: &mut LogState,
        id: TurnId,
        err: UndoError,
    ) -> Result<UndoError, UndoError> {
        self.append(
            state,
            LogLine::Damaged {
                id,
                reason: format!("its revert cannot be made: {err}"),
            },
        )?;
        Ok(UndoError::Unrevertible {
            turn: id,
            source: Box::new(err),
        })
    }

    /// The new turn of a revert, with the next id, and its copies stored: the merged
    /// contents in a pack of its own, and the packs that hold its other copies named.
    fn new_turn(
        &self,
        state: &LogState,
        start: TurnStart,
        steps: &[Step],
    ) -> Result<TurnRecord, UndoError> {
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut record = TurnRecord {
            meta: TurnMeta {
                id: TurnId(state.next_id),
                time,
                summary: start.summary,
                history_marker: start.history_marker,
                session: start.session,
            },
            tools: Vec::new(),
            changes: Deferred::new(Vec::new()),
            ran_bash: false,
            bash_uncaptured: false,
            bash_unrestorable: Vec::new(),
            changed_since: Vec::new(),
            recovered: false,
            paths: Deferred::new(
                (steps.iter())
                    .filter(|step| step.changes())
                    .map(|step| PathRecord {
                        path: step.path.to_string(),
                        before: step.now.clone(),
                        after: step.becomes.clone(),
                    })
                    .collect(),
            ),
            packs: Vec::new(),
            damage: None,
            group: None,
            git: None,
        };
        let blobs = &self.inner.blobs;
        let failed = |err| UndoError::io("store a copy in", blobs.dir(), err);
        let packed = self.packed(state);
        let mut writer: Option<PackWriter> = None;
        for step in steps {
            let (Some(bytes), Some(hash)) = (&step.merged, step.becomes.hash()) else {
                continue;
            };
            if blobs.contains(&hash) || packed.find(&hash).is_some() {
                continue;
            }
            let writer = match &mut writer {
                Some(writer) => writer,
                None => writer.insert(PackWriter::create(blobs.dir()).map_err(failed)?),
            };
            writer.add(hash, bytes).map_err(failed)?;
        }
        if let Some(writer) = writer.filter(|writer| !writer.is_empty()) {
            let name = fresh_pack_name(state, &record);
            (writer.finish(&pack_path(blobs.dir(), &name))).map_err(failed)?;
            record.packs.push(name);
        }
        // The copies stored already (the reverted turn's, what is there now): the turn names
        // the packs that hold them, so that they stay as long as it does.
        let hashes: BTreeSet<ContentHash> = record.hashes()?.collect();
        for hash in &hashes {
            if let Some(name) = packed.find(hash)
                && !record.packs.iter().any(|named| named == name)
            {
                record.packs.push(name.to_owned());
            }
        }
        Ok(record)
    }

    /// Applies the revert's new turn `record` (its steps), under the lock.
    async fn apply_revert(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
        reverted: &TurnRecord,
        mut record: TurnRecord,
        steps: Vec<Step>,
    ) -> Result<RevertOutcome, UndoError> {
        let id = reverted.meta.id;
        let merged: Vec<(WorkspacePath, &Image)> = (steps.iter())
            .filter(|step| step.merged.is_some())
            .map(|step| (step.path.clone(), &step.becomes))
            .collect();
        let stored = restore::Stored::open(&self.inner.blobs, &record);
        restore::verify(&stored, merged.iter().map(|(path, image)| (path, *image)))?;
        // Keep a copy of what it replaces, for its undo (and a rollback).
        let planned: Vec<restore::Planned> = (steps.iter())
            .filter(|step| step.changes())
            .map(|step| restore::Planned {
                path: step.path.clone(),
                now: step.now.clone(),
                expected: step.now.clone(),
                becomes: step.becomes.clone(),
            })
            .collect();
        let kept = fresh_pack_name(state, &record);
        let target = pack_path(self.inner.blobs.dir(), &kept);
        match restore::keep_copies(
            workspace,
            &stored,
            &planned,
            &target,
            self.inner.options.stream_file_bytes,
        )
        .await?
        {
            Ok(true) => record.packs.push(kept),
            Ok(false) => {}
            Err(changed) => {
                // Changed while the revert was planned: what it merged is no longer current.
                let conflicts = (changed.into_iter())
                    .filter_map(|conflict| match conflict.kind {
                        crate::report::ConflictKind::Changed { expected, found } => {
                            Some(RevertConflict {
                                path: conflict.path,
                                kind: RevertConflictKind::Changed { expected, found },
                            })
                        }
                        _ => None,
                    })
                    .collect();
                return Err(UndoError::RevertConflict(RevertConflicts {
                    turn: id,
                    summary: reverted.meta.summary.clone(),
                    conflicts,
                }));
            }
        }
        // Durable before anything changes: a crash from here on is completed (or rolled
        // back) on the next open.
        let new_id = record.meta.id;
        let record = Arc::new(record);
        let run = restore::new_run();
        self.append(
            state,
            LogLine::Begin(Begun {
                direction: Direction::Redo,
                turn: Arc::clone(&record),
                run: Some(run),
                members: Vec::new(),
                reverts: Some(id),
            }),
        )?;
        let progress = restore::Progress::open(&self.path(PROGRESS_FILE), run);
        let seen: restore::Seen<'_> = (planned.iter())
            .map(|item| (&item.path, &item.now))
            .collect();
        let stored = restore::Stored::open(&self.inner.blobs, &record);
        let applied = restore::apply(
            workspace,
            &stored,
            &record,
            Direction::Redo,
            &seen,
            &BTreeSet::new(),
            &progress,
        )
        .await;
        match applied {
            Ok(notes) => {
                let earlier = named_packs(state);
                let kept = restore::kept_dirs(&notes);
                self.append(state, LogLine::Done { id: new_id, kept })?;
                self.settle_new_turn(state, &earlier)?;
                Ok(RevertOutcome {
                    reverted: reverted.summary(),
                    turn: Some(record.summary()),
                    dry_run: false,
                    paths: outcome_paths(&steps, &notes),
                })
            }
            Err(err) => {
                // It cannot complete (a full disk, a write refused): put back what it changed.
                let reason = format!("its revert failed part-way: {err}");
                self.roll_back(workspace, state, BTreeSet::new(), reason, &progress)
                    .await?;
                Err(UndoError::RevertRolledBack {
                    turn: id,
                    source: Box::new(err),
                })
            }
        }
    }
}

/// The plan of a revert of `turn` as a dry run's outcome: every path with the bytes of each
/// file it changes, now and as it would write them, up to [`PREVIEW_MAX_BYTES`] each.
async fn dry_run(
    workspace: &dyn Mutator,
    turn: &TurnRecord,
    stored: &restore::Stored<'_>,
    steps: &mut [Step],
) -> Result<RevertOutcome, UndoError> {
    let mut paths = outcome_paths(steps, &BTreeMap::new());
    for (step, path) in steps.iter_mut().zip(&mut paths) {
        if !step.changes() {
            continue;
        }
        if let Image::File { len, .. } = step.now
            && len <= PREVIEW_MAX_BYTES
        {
            path.now_bytes = match step.now_bytes.take() {
                Some(bytes) => Some(bytes),
                None => Some(workspace.read(&step.path).await?),
            };
        }
        if let Image::File { len, hash, .. } = step.becomes
            && len <= PREVIEW_MAX_BYTES
        {
            path.becomes_bytes = match step.merged.take() {
                Some(bytes) => Some(bytes),
                None => stored
                    .get(&hash)
                    .map_err(|err| UndoError::io("read the stored copy in", stored.dir(), err))?,
            };
        }
    }
    Ok(RevertOutcome {
        reverted: turn.summary(),
        turn: None,
        dry_run: true,
        paths,
    })
}

/// The outcome of each step, with the actions a restore noted (`notes`).
fn outcome_paths(steps: &[Step], notes: &BTreeMap<WorkspacePath, Action>) -> Vec<RevertPath> {
    (steps.iter())
        .map(|step| RevertPath {
            path: step.path.clone(),
            now: step.now.clone(),
            becomes: step.becomes.clone(),
            action: (notes.get(&step.path).copied())
                .unwrap_or_else(|| Action::between(&step.now, &step.becomes)),
            merged: step.merged.is_some(),
            now_bytes: None,
            becomes_bytes: None,
        })
        .collect()
}
