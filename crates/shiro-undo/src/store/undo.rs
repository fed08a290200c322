//! Undo and redo applied to the workspace: a restore checked for conflicts, then journaled,
//! applied path by path and committed; a rollback when it fails part-way; and `--abandon`.

use std::collections::{BTreeMap, BTreeSet};

use shiro_tools::{Mutator, WorkspacePath};

use crate::error::UndoError;
use crate::format::{LogLine, PROGRESS_FILE};
use crate::log::LogState;
use crate::pack::pack_path;
use crate::report::{Action, ConflictReport, Direction, PathOutcome, UndoOutcome};
use crate::restore;

use super::{Abandoned, PathStanding, UndoOptions, UndoStore, direction_verb, needed_writes};

impl UndoStore {
    pub(super) async fn restore(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
        direction: Direction,
    ) -> Result<UndoOutcome, UndoError> {
        let _guard = self.lock()?;
        let mut state = self.recover(workspace).await?;
        let stack = match direction {
            Direction::Undo => &state.undo,
            Direction::Redo => &state.redo,
        };
        let Some(turn) = stack.last().cloned() else {
            return Err(match direction {
                Direction::Undo => UndoError::NothingToUndo,
                Direction::Redo => UndoError::NothingToRedo,
            });
        };
        let plan = restore::plan(workspace, &turn, direction).await?;
        let conflicts = restore::conflicts(workspace, &plan).await?;
        if !conflicts.is_empty() && !options.force && !options.dry_run {
            return Err(UndoError::Conflict(ConflictReport {
                turn: turn.meta.id,
                summary: turn.meta.summary.clone(),
                direction,
                conflicts,
            }));
        }
        let stored = restore::Stored::open(&self.inner.blobs, &turn);
        // Every copy the restore writes is read back whole before anything changes.
        let writes = (plan.iter())
            .filter(|item| item.now != item.becomes)
            .map(|item| (&item.path, &item.becomes));
        if let Err(err) = restore::verify(&stored, writes) {
            let id = turn.meta.id;
            self.append(
                &mut state,
                LogLine::Damaged {
                    id,
                    reason: format!("its {} cannot be made: {err}", direction_verb(direction)),
                },
            )?;
            return Err(UndoError::Unrestorable {
                turn: id,
                direction,
                source: Box::new(err),
            });
        }
        let outcome = |notes: &BTreeMap<WorkspacePath, Action>, dry_run: bool| UndoOutcome {
            turn: turn.summary(),
            direction,
            dry_run,
            conflicts: conflicts.clone(),
            paths: plan
                .iter()
                .map(|item| PathOutcome {
                    path: item.path.clone(),
                    now: item.now.clone(),
                    becomes: item.becomes.clone(),
                    action: notes
                        .get(&item.path)
                        .copied()
                        .unwrap_or_else(|| Action::between(&item.now, &item.becomes)),
                })
                .collect(),
        };
        if options.dry_run {
            return Ok(outcome(&BTreeMap::new(), true));
        }

        // Keep the state being replaced, so the opposite operation can bring it back exactly
        // (after a forced restore, that includes the changes it overwrote).
        // A copy another turn's pack holds already is not kept again: the turn names that
        // pack too. The others go in a new pack of the turn's, named after the turn and how
        // many it names.
        let mut restored = turn.clone();
        {
            let packed = self.packed(&state);
            for hash in plan.iter().filter_map(|item| item.now.hash()) {
                if let Some(name) = packed.find(&hash)
                    && !restored.packs.iter().any(|named| named == name)
                    && !stored.contains(&hash)
                {
                    restored.packs.push(name.to_owned());
                }
            }
        }
        let stored = restore::Stored::open(&self.inner.blobs, &restored);
        let pack = format!("{}-{}", turn.meta.id.0, restored.packs.len());
        let target = pack_path(self.inner.blobs.dir(), &pack);
        match restore::keep_copies(workspace, &stored, &plan, &target).await? {
            Ok(true) => restored.packs.push(pack),
            Ok(false) => {}
            Err(changed) => {
                // Changed while this restore ran: refused even when forced, since the copy
                // that the opposite operation would need is not the state the plan saw.
                return Err(UndoError::Conflict(ConflictReport {
                    turn: turn.meta.id,
                    summary: turn.meta.summary.clone(),
                    direction,
                    conflicts: changed,
                }));
            }
        }
        for (record, item) in restored.paths.iter_mut().zip(&plan) {
            match direction {
                Direction::Undo => record.after = item.now.clone(),
                Direction::Redo => record.before = item.now.clone(),
            }
        }
        // Durable before anything changes: a crash from here on is completed on the next open.
        let id = turn.meta.id;
        let run = restore::new_run();
        self.append(
            &mut state,
            LogLine::Begin {
                direction,
                turn: restored.clone(),
                run: Some(run),
            },
        )?;
        let progress = restore::Progress::open(&self.path(PROGRESS_FILE), run);
        let seen: restore::Seen = plan
            .iter()
            .map(|item| (item.path.clone(), item.now.clone()))
            .collect();
        // The copies kept above are in a pack the turn did not name when `stored` was opened.
        let stored = restore::Stored::open(&self.inner.blobs, &restored);
        let applied = restore::apply(
            workspace,
            &stored,
            &restored,
            direction,
            &seen,
            &BTreeSet::new(),
            &progress,
        )
        .await;
        match applied {
            Ok(notes) => {
                self.append(&mut state, LogLine::Done { id })?;
                Ok(outcome(&notes, false))
            }
            Err(err) => {
                // It cannot complete (a full disk, a write refused): put back what it changed.
                let reason = format!("its {} failed part-way: {err}", direction_verb(direction));
                self.roll_back(workspace, &mut state, BTreeSet::new(), reason, &progress)
                    .await?;
                Err(UndoError::RolledBack {
                    turn: id,
                    direction,
                    source: Box::new(err),
                })
            }
        }
    }

    /// Clears a restore that stopped part-way and could neither be completed nor rolled back,
    /// keeping every file exactly as it is: its turn stays where it was on its stack, marked
    /// as abandoned, and the store is free for new turns. Call it on a store opened with
    /// [`UndoStore::open_as_is`] (opening normally tries to complete the restore first).
    /// Returns what was abandoned, with where each path stands; `None` when no restore was
    /// under way.
    pub async fn abandon(&self, workspace: &dyn Mutator) -> Result<Option<Abandoned>, UndoError> {
        let _guard = self.lock()?;
        let mut state = self.load_state()?;
        self.adopt_journal(&mut state)?;
        let Some(pending) = state.pending.clone() else {
            return Ok(None);
        };
        let started = restore::Progress::read(&self.path(PROGRESS_FILE), pending.run);
        let standings =
            restore::standings(workspace, &pending.turn, pending.direction, started).await?;
        let id = pending.turn.meta.id;
        let verb = direction_verb(pending.direction);
        self.append(
            &mut state,
            LogLine::Stopped {
                id,
                reason: format!(
                    "its {verb} stopped part-way and was abandoned (shiro undo --abandon); its files were left as they were"
                ),
            },
        )?;
        Ok(Some(Abandoned {
            turn: pending.turn.summary(),
            direction: pending.direction,
            paths: (standings.into_iter())
                .map(|(path, standing)| {
                    let standing = match standing {
                        restore::Standing::Done => PathStanding::Restored,
                        restore::Standing::NotReached => PathStanding::AsBefore,
                        restore::Standing::Started | restore::Standing::Changed(_) => {
                            PathStanding::Neither
                        }
                    };
                    (path, standing)
                })
                .collect(),
        }))
    }

    /// Rolls back the restore under way in `state`: every path not in `leave` is put back as
    /// the restore found it (the copies kept before it began hold those states), then the log
    /// records that it stopped, and its turn stays where it was, marked with `reason`. The
    /// `rollback` record is flushed first, so a crash during the rollback continues it.
    pub(super) async fn roll_back(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
        leave: BTreeSet<WorkspacePath>,
        reason: String,
        progress: &restore::Progress,
    ) -> Result<(), UndoError> {
        let Some(pending) = state.pending.clone() else {
            return Ok(());
        };
        let id = pending.turn.meta.id;
        let direction = pending.direction;
        let stuck = |err: &UndoError| UndoError::RestoreStuck {
            turn: id,
            direction,
            reason: format!("{reason}; rolling it back failed too: {err}"),
        };
        if pending.rollback.is_none() {
            self.append(
                state,
                LogLine::Rollback {
                    id,
                    reason: reason.clone(),
                },
            )?;
        }
        let back = direction.opposite();
        let stored = restore::Stored::open(&self.inner.blobs, &pending.turn);
        // Only the copies of paths not back already are needed (and checked).
        let standings = restore::standings(workspace, &pending.turn, back, None)
            .await
            .map_err(|err| stuck(&err))?;
        let writes = needed_writes(&pending.turn, back, &standings, &leave);
        restore::verify(&stored, writes.iter().map(|(path, image)| (path, image)))
            .map_err(|err| stuck(&err))?;
        restore::apply_marked_first(workspace, &stored, &pending.turn, back, &leave, progress)
            .await
            .map_err(|err| stuck(&err))?;
        let mut note = reason;
        if !leave.is_empty() {
            let paths: Vec<&str> = leave.iter().map(WorkspacePath::as_str).collect();
            note.push_str(&format!(
                "; left as found, since they changed meanwhile: {}",
                paths.join(", ")
            ));
        }
        self.append(state, LogLine::Stopped { id, reason: note })
    }
}
