//! Undo and redo applied to the workspace: a restore checked for conflicts, then journaled,
//! applied path by path and committed; a rollback when it fails part-way; and `--abandon`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shiro_tools::{Mutator, WorkspacePath};

use crate::error::UndoError;
use crate::format::TurnRecord;
use crate::format::{Begun, LogLine, PROGRESS_FILE};
use crate::git;
use crate::log::LogState;
use crate::pack::pack_path;
use crate::report::{Action, Conflict, ConflictKind, Direction, PathOutcome, TurnId, UndoOutcome};
use crate::restore;

use super::select::{self, Selection};
use super::{Abandoned, PathStanding, UndoOptions, UndoStore, direction_verb, needed_writes};

/// What a restore finds before it begins: what is there now, and what stops it.
struct Prospect {
    /// Every path of the restore, read now.
    plan: Vec<restore::Planned>,
    /// Paths and git things not as the restore expects them (sorted by path): the restore
    /// refuses unless forced (over a later turn's, even then).
    conflicts: Vec<Conflict>,
    /// git's lock files on what it moves: the restore stops, even when forced.
    locked: Vec<WorkspacePath>,
}

/// The one check of what stands in the way of restoring `selection` now (`stored` holds its
/// copies): both a restore and [`UndoStore::check`] (`shiro log`) make it, so that the log
/// never calls clean a turn the undo refuses. It reads the restore's paths and the git
/// things it moves, never the rest of the workspace.
async fn prospect(
    workspace: &dyn Mutator,
    selection: &Selection,
    stored: &restore::Stored<'_>,
) -> Result<Prospect, UndoError> {
    let (turn, direction) = (&selection.turn, selection.direction);
    let plan = restore::plan(workspace, turn, direction).await?;
    let mut conflicts = restore::conflicts(workspace, &plan).await?;
    let mut locked = Vec::new();
    if let Some(record) = &turn.git {
        let root = workspace.root();
        conflicts.extend(git::conflicts(root, record, direction, stored)?);
        locked = git::locked(root, record, direction);
    }
    conflicts.extend(selection.between.iter().cloned());
    conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Prospect {
        plan,
        conflicts,
        locked,
    })
}

impl UndoStore {
    /// What would stop undoing the newest turn right now, as `shiro log` shows it; empty
    /// when it can be undone cleanly. It is the check [`UndoStore::undo`] makes: each path
    /// and git thing (`.git/<name>`) changed since the turn, then each lock file of git's
    /// that would stop the undo ([`ConflictKind::GitLocked`], on the lock's path). Only that
    /// turn is read, and the log is not locked.
    pub async fn check(&self, workspace: &dyn Mutator) -> Result<Vec<Conflict>, UndoError> {
        let state = self.read_state()?;
        let selection = select::newest(&state)?;
        let stored = restore::Stored::open(&self.inner.blobs, &selection.turn);
        let Prospect {
            mut conflicts,
            locked,
            ..
        } = prospect(workspace, &selection, &stored).await?;
        conflicts.extend(locked.into_iter().map(|path| Conflict {
            path,
            kind: ConflictKind::GitLocked,
        }));
        Ok(conflicts)
    }

    pub(super) async fn restore(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
        direction: Direction,
    ) -> Result<UndoOutcome, UndoError> {
        let (_guard, mut state) = self.lock_and_recover(workspace).await?;
        let selection = match direction {
            Direction::Undo => select::newest(&state)?,
            Direction::Redo => select::next_redo(&state)?,
        };
        self.restore_selected(workspace, &mut state, selection, options)
            .await
    }

    /// Undoes turn `id` and every later turn of its session as one restore.
    pub(super) async fn rewind_to(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        let (_guard, mut state) = self.lock_and_recover(workspace).await?;
        let selection = select::rewind(&state, id)?;
        self.restore_selected(workspace, &mut state, selection, options)
            .await
    }

    /// Undoes exactly the turns `ids` as one restore.
    pub(super) async fn rewind_set(
        &self,
        workspace: &dyn Mutator,
        ids: &[TurnId],
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        let (_guard, mut state) = self.lock_and_recover(workspace).await?;
        let selection = select::rewind_turns(&state, ids)?;
        self.restore_selected(workspace, &mut state, selection, options)
            .await
    }

    /// Redoes turn `id` with its group, wherever it lies on the redo stack.
    pub(super) async fn redo_of(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        let (_guard, mut state) = self.lock_and_recover(workspace).await?;
        let selection = select::redo_of(&state, id)?;
        self.restore_selected(workspace, &mut state, selection, options)
            .await
    }

    /// Restores what `selection` names, under the lock, `state` being the log as recovered.
    async fn restore_selected(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
        mut selection: Selection,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        let direction = selection.direction;
        let turn = &selection.turn;
        let mut stored = restore::Stored::open(&self.inner.blobs, turn);
        let Prospect {
            plan,
            conflicts,
            locked,
        } = prospect(workspace, &selection, &stored).await?;
        if !conflicts.is_empty() && !options.force && !options.dry_run {
            return Err(selection.refusal(conflicts));
        }
        if !locked.is_empty() && !options.dry_run {
            return Err(UndoError::GitLocked {
                turn: turn.meta.id,
                direction,
                locks: locked,
            });
        }
        // Every copy the restore writes is read back whole before anything changes.
        let writes = (plan.iter())
            .filter(|item| item.now != item.becomes)
            .map(|item| (&item.path, &item.becomes));
        let verified = restore::verify(&stored, writes).and_then(|()| match &turn.git {
            Some(record) => git::index_to_write(record, direction, &stored)
                .map_err(|err| UndoError::io("read", stored.dir(), err)),
            None => Ok(None),
        });
        let index = match verified {
            Ok(index) => index,
            Err(err) => {
                let id = turn.meta.id;
                self.append(
                    state,
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
        };
        let (first, also) = match selection.members.split_first() {
            Some((first, later)) => (first.summary(), later.iter().map(|t| t.summary()).collect()),
            None => (turn.summary(), Vec::new()),
        };
        let git = (turn.git.as_ref()).map(|record| git::describe(record, direction));
        let outcome = |notes: &BTreeMap<WorkspacePath, Action>, dry_run: bool| UndoOutcome {
            turn: first.clone(),
            also: also.clone(),
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
            git: git.clone(),
        };
        if options.dry_run {
            // The locks the restore would stop on stand in its way too, as `check` says.
            let mut planned = outcome(&BTreeMap::new(), true);
            (planned.conflicts).extend(locked.into_iter().map(|path| Conflict {
                path,
                kind: ConflictKind::GitLocked,
            }));
            return Ok(planned);
        }

        // Keep the state being replaced, so the opposite operation can bring it back exactly
        // (after a forced restore, that includes the changes it overwrote).
        // A copy another turn's pack holds already is not kept again: the turn names that
        // pack too. The others go in a new pack of the turn's, named after the turn and how
        // many it names.
        let mut restored = TurnRecord::clone(turn);
        {
            let packed = self.packed(state);
            for hash in plan.iter().filter_map(|item| item.now.hash()) {
                if let Some(name) = packed.find(&hash)
                    && !restored.packs.iter().any(|named| named == name)
                    && !stored.contains(&hash)
                {
                    restored.packs.push(name.to_owned());
                }
            }
        }
        for name in &restored.packs[turn.packs.len()..] {
            stored.open_pack(name);
        }
        let pack = fresh_pack_name(state, &restored);
        let target = pack_path(self.inner.blobs.dir(), &pack);
        match restore::keep_copies(
            workspace,
            &stored,
            &plan,
            &target,
            self.inner.options.stream_file_bytes,
        )
        .await?
        {
            Ok(true) => {
                stored.open_pack(&pack);
                restored.packs.push(pack);
            }
            Ok(false) => {}
            Err(changed) => {
                // Changed while this restore ran: refused even when forced, since the copy
                // that the opposite operation would need is not the state the plan saw.
                return Err(selection.refusal(changed));
            }
        }
        for (record, item) in restored.paths_mut()?.iter_mut().zip(&plan) {
            match direction {
                Direction::Undo => record.after = item.now.clone(),
                Direction::Redo => record.before = item.now.clone(),
            }
        }
        if let Some(record) = &mut restored.git
            && options.force
        {
            // What a forced restore moves away from is what the opposite one brings back.
            git::settle(workspace.root(), record, direction)?;
        }
        let (id, kept_from) = (turn.meta.id, turn.packs.len());
        selection.settle(&plan, restored.git.as_ref(), &restored.packs[kept_from..])?;
        // Durable before anything changes: a crash from here on is completed on the next open.
        let run = restore::new_run();
        self.append(
            state,
            LogLine::Begin(Begun {
                direction,
                turn: Arc::new(restored),
                run: Some(run),
                members: selection.members,
                reverts: None,
            }),
        )?;
        // The turn as begun, read from the log's state rather than copied: a turn may list
        // many paths.
        let restored = self.pending_turn(state)?;
        let progress = restore::Progress::open(&self.path(PROGRESS_FILE), run);
        let seen: restore::Seen<'_> = plan.iter().map(|item| (&item.path, &item.now)).collect();
        // The same `stored` as verified: what it read is written without reading it again.
        let applied = restore::apply(
            workspace,
            &stored,
            restored,
            direction,
            &seen,
            &BTreeSet::new(),
            &progress,
        )
        .await;
        // The repository's state moves once the paths are restored: a crash before `done`
        // has the recovery move it (again).
        let applied = match (applied, &restored.git) {
            (Ok(notes), Some(record)) => {
                git::apply(workspace.root(), record, direction, index).map(|()| notes)
            }
            (applied, _) => applied,
        };
        match applied {
            Ok(notes) => {
                let kept = restore::kept_dirs(&notes);
                self.append(state, LogLine::Done { id, kept })?;
                Ok(outcome(&notes, false))
            }
            Err(err) => {
                // It cannot complete (a full disk, a write refused): put back what it changed.
                let reason = format!("its {} failed part-way: {err}", direction_verb(direction));
                self.roll_back(workspace, state, BTreeSet::new(), reason, &progress)
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
        let verb = match pending.reverts {
            Some(_) => "revert",
            None => direction_verb(pending.direction),
        };
        self.append(
            &mut state,
            LogLine::Stopped {
                id,
                reason: format!(
                    "its {verb} stopped part-way and was abandoned (shiro undo --abandon); its files were left as they were"
                ),
                abandoned: true,
            },
        )?;
        Ok(Some(Abandoned {
            turn: pending.turn.summary(),
            direction: pending.direction,
            reverting: pending.reverts,
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
            reverting: pending.reverts,
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
        let writes = needed_writes(&pending.turn, back, &standings, &leave)?;
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
        self.append(
            state,
            LogLine::Stopped {
                id,
                reason: note,
                abandoned: false,
            },
        )
    }
}

/// A name for a new pack of the turn `restored` is a restore of: `<id>-<n>`, with `n` the
/// first from the number of packs it names that no kept turn's pack has (a rewind names
/// the packs of several turns, so that count alone can meet a name in use).
pub(super) fn fresh_pack_name(state: &LogState, restored: &TurnRecord) -> String {
    let named = state.packs();
    let id = restored.meta.id.0;
    (restored.packs.len()..)
        .map(|n| format!("{id}-{n}"))
        .find(|name| !named.contains(name) && !restored.packs.contains(name))
        .unwrap_or_else(|| format!("{id}-x"))
}
