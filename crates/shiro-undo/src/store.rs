//! The store: the log on disk, its lock, recovery, undo and redo. It makes the recorders
//! ([`UndoStore::recorder`]), which reach it only through the [`Ledger`] it implements.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use shiro_tools::capture::LayerRecovery;
use shiro_tools::{FsMutator, Mutator, WorkspacePath};

use crate::blob::{Blobs, Form, Listing, MAX_DELTA_DEPTH};
use crate::codec::{
    decode_all, decode_framed, empty_file, read_optional, remove_durably, write_atomic,
};
use crate::delta;
use crate::error::UndoError;
use crate::flight::{Finished, Flight};
use crate::format::{
    BLOBS_DIR, DAMAGED_LOG_FILE, FORMAT_VERSION, INFLIGHT_FILE, InflightLine, JOURNAL_FILE,
    Journal, LOCK_FILE, LOG_FILE, LogLine, PROGRESS_FILE, TurnRecord,
};
use crate::ground;
use crate::image::{ContentHash, Image, Spares};
use crate::lock::{self, LockGuard};
use crate::log::{self, LogState, Refused};
use crate::pack::{Pack, PackWriter, Packed, pack_path};
use crate::place::{MoveBy, StateDir};
use crate::recorder::{Ledger, Recording};
use crate::report::{
    Action, Conflict, ConflictReport, Direction, Notice, PathOutcome, TurnId, TurnSummary,
    UndoOutcome,
};
use crate::restore;

/// The store's directory in its [`StateDir`].
const UNDO_SUBDIR: &str = "undo";

/// The store's own files in its directory: a link planted at one of these names is removed.
const STORE_FILES: &[&str] = &[
    LOG_FILE,
    INFLIGHT_FILE,
    JOURNAL_FILE,
    LOCK_FILE,
    DAMAGED_LOG_FILE,
    PROGRESS_FILE,
];

/// How a store behaves; the defaults suit an interactive agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How many turns can be undone; older turns are dropped when a new one is recorded.
    /// Default 20.
    pub depth: usize,
    /// The most bytes the stored copies (blobs) may take; past it the oldest turns are dropped
    /// (never the newest) and a [`Notice::DroppedForSize`] says so. Default 1 GiB.
    pub max_store_bytes: u64,
    /// How long an operation waits for another process to release the store's lock before it
    /// fails with [`UndoError::Locked`]. Default 10 seconds.
    pub lock_timeout: Duration,
    /// Files of at least this many bytes are big: a turn that changes one stores the new
    /// version as a delta against the previous one (a chain starts with a version stored
    /// whole and uncompressed), so a turn costs about what it changed and needs no slow
    /// compression. Default 1 MiB.
    pub big_file_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            depth: 20,
            max_store_bytes: 1 << 30,
            lock_timeout: Duration::from_secs(10),
            big_file_bytes: 1 << 20,
        }
    }
}

/// How an undo or a redo runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UndoOptions {
    /// Overwrite paths that changed since the turn instead of refusing.
    pub force: bool,
    /// Change nothing: return the plan, with any conflicts.
    pub dry_run: bool,
}

/// The undo log of one workspace, kept in its `.shiro/undo/` directory.
///
/// Cheap to clone (clones share one store). Every operation takes the store's lock for its
/// own duration only, so several processes (sessions, `shiro undo` in another terminal) share
/// one log safely; recording a turn holds the lock from `begin_turn` to `finish_turn`.
#[derive(Debug, Clone)]
pub struct UndoStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    state: StateDir,
    options: StoreOptions,
    blobs: Blobs,
    /// What the packs the log names hold, as last read under the lock.
    packed: Mutex<Packed>,
    notices: Mutex<Vec<Notice>>,
}

impl UndoStore {
    /// Opens (creating when needed) the store of the workspace that `state` belongs to, in
    /// its `undo/` directory. The state directory must lie outside the workspace
    /// ([`StateDir::check_apart`]). A store an earlier version kept in the workspace's tree
    /// (`.shiro/undo/`, with `.shiro/sessions/`) is moved there first, with a [`Notice`].
    ///
    /// Opening finishes what a crash interrupted: a restore in progress is completed from its
    /// record in the log, and a turn whose process stopped mid-turn becomes a finished,
    /// undoable turn. Both leave a [`Notice`].
    pub async fn open(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
        state.check_apart()?;
        let root = state.workspace();
        let workspace =
            FsMutator::new(root).map_err(|err| UndoError::io("open the workspace", root, err))?;
        Self::open_with(state, &workspace, options).await
    }

    /// Like [`UndoStore::open`], with the store in `state` on disk but recovery going through
    /// `workspace` (an in-memory workspace in tests and embeddings).
    pub async fn open_with(
        state: &StateDir,
        workspace: &dyn Mutator,
        options: StoreOptions,
    ) -> Result<Self, UndoError> {
        let moved = crate::place::migrate(state, MoveBy::Rename, options.lock_timeout)?;
        let store = Self::create(state, options)?;
        for notice in moved {
            store.notify(notice);
        }
        let _guard = store.lock()?;
        // Only a crash leaves blobs no turn refers to (and temporary files) behind; every
        // recorded turn collects them too. Listing `blobs/` on every open would cost each
        // command time that grows with the store.
        let mut state = store.load_state()?;
        // (The in-flight file stays between turns, emptied.)
        let crashed = state.pending.is_some()
            || fs::symlink_metadata(store.path(JOURNAL_FILE)).is_ok()
            || fs::symlink_metadata(store.path(INFLIGHT_FILE)).is_ok_and(|meta| meta.len() > 0);
        store.recover_loaded(workspace, &mut state).await?;
        if crashed {
            store.collect(&state)?;
        }
        crate::place::tidy_legacy(&store.inner.state);
        Ok(store)
    }

    /// Opens the store as it is, completing nothing a crash left (no restore, no turn): for
    /// [`UndoStore::abandon`], which must see a stuck restore as it stands.
    pub async fn open_as_is(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
        state.check_apart()?;
        let moved = crate::place::migrate(state, MoveBy::Rename, options.lock_timeout)?;
        let store = Self::create(state, options)?;
        for notice in moved {
            store.notify(notice);
        }
        Ok(store)
    }

    /// Checks the store's ground and makes its directories; recovers nothing.
    fn create(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
        let dir = state.undo_dir();
        let store = Self {
            inner: Arc::new(Inner {
                blobs: Blobs::new(dir.join(BLOBS_DIR)),
                packed: Mutex::default(),
                dir,
                state: state.clone(),
                options,
                notices: Mutex::new(Vec::new()),
            }),
        };
        store.make_ground()?;
        Ok(store)
    }

    /// Makes sure the store's directories are there (each checked before anything is opened
    /// in it, see `crate::ground`), and says so when a store made here earlier was deleted.
    fn make_ground(&self) -> Result<(), UndoError> {
        let state = &self.inner.state;
        let dir = &self.inner.dir;
        let gone = state.store_was_made() && fs::symlink_metadata(dir).is_err();
        let shown = dir.display().to_string();
        state.ensure_sub(UNDO_SUBDIR)?;
        state.mark_store_made()?;
        let blobs_dir = dir.join(BLOBS_DIR);
        ground::ensure_dir(&blobs_dir, &format!("{shown}/{BLOBS_DIR}"))?;
        for link in ground::clear_planted_links(dir, STORE_FILES, &shown)? {
            self.notify(Notice::RemovedLink { link });
        }
        if gone {
            self.notify(Notice::HistoryGone { dir: dir.clone() });
        }
        Ok(())
    }

    /// The store directory (`undo/` of its [`StateDir`]). Removing it, when no shiro is
    /// running, forgets every turn and nothing else.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The state directory the store is in.
    pub fn state(&self) -> &StateDir {
        &self.inner.state
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Takes the notices gathered since the last call (recoveries, damaged records, turns
    /// dropped for size), oldest first.
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut *self.notices())
    }

    /// Wraps `inner` in a recorder: a [`Mutator`] that records the turns of this store.
    pub fn recorder<M: Mutator>(&self, inner: M) -> Recording<M> {
        Recording::new(self.clone(), inner)
    }

    /// The turns that can be undone, newest (the next to undo) first. A turn whose restore is
    /// under way (stuck, when the store is open) says so in its `damage`.
    pub fn log(&self) -> Result<Vec<TurnSummary>, UndoError> {
        let state = self.read_state()?;
        Ok(state
            .undo
            .iter()
            .rev()
            .map(|t| summary_of(&state, t))
            .collect())
    }

    /// The turns that can be redone, the next to redo first.
    pub fn redo_log(&self) -> Result<Vec<TurnSummary>, UndoError> {
        let state = self.read_state()?;
        Ok(state
            .redo
            .iter()
            .rev()
            .map(|t| summary_of(&state, t))
            .collect())
    }

    /// The bytes of a stored file, checked against `hash`; `None` when the store does not hold
    /// them. A copy a restore kept (in a pack) is looked for in the turns that refer to `hash`,
    /// which reads the log: for the paths of one turn, [`UndoStore::copies`] reads it once.
    pub fn blob(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, UndoError> {
        if let Some(bytes) = Copies::of(self, None).get(hash)? {
            return Ok(Some(bytes));
        }
        let state = self.read_state()?;
        let turns = state.undo.iter().chain(&state.redo);
        for turn in turns.filter(|turn| turn.hashes().any(|h| h == *hash)) {
            if let Some(bytes) = Copies::of(self, Some(turn)).get(hash)? {
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// The stored files a restore of turn `id` reads (its blobs, and its packs): for a dry run
    /// to show as a diff, with [`PathOutcome::becomes`]. A turn no longer in the log has only
    /// its blobs.
    pub fn copies(&self, id: TurnId) -> Result<Copies<'_>, UndoError> {
        let state = self.read_state()?;
        let turn = state
            .undo
            .iter()
            .chain(&state.redo)
            .find(|t| t.meta.id == id);
        Ok(Copies::of(self, turn))
    }

    /// The bytes the stored copies take on disk.
    pub fn store_bytes(&self) -> Result<u64, UndoError> {
        let listing = self
            .inner
            .blobs
            .list()
            .map_err(|err| UndoError::io("list", self.inner.blobs.dir(), err))?;
        Ok(listing.bytes())
    }

    /// The conflicts that would stop undoing the newest turn right now; empty when it can be
    /// undone cleanly.
    pub async fn check(&self, workspace: &dyn Mutator) -> Result<Vec<Conflict>, UndoError> {
        let state = self.read_state()?;
        let turn = state.undo.last().ok_or(UndoError::NothingToUndo)?;
        let plan = restore::plan(workspace, turn, Direction::Undo).await?;
        restore::conflicts(workspace, &plan).await
    }

    /// Undoes the newest turn through `workspace`: every path it touched is put back as it
    /// was before the turn, and the turn moves to the redo stack. Refuses with
    /// [`UndoError::Conflict`] (changing nothing) when a path changed since the turn, unless
    /// forced. The outcome carries the turn's history marker for the caller to rewind to.
    pub async fn undo(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.restore(workspace, options, Direction::Undo).await
    }

    /// Redoes the most recently undone turn, under the same conflict rule as undo.
    pub async fn redo(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.restore(workspace, options, Direction::Redo).await
    }

    async fn restore(
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
    async fn roll_back(
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

    /// Notices a store deleted while this process had it open: says so, once, and begins a
    /// new history.
    fn regrow_if_gone(&self) -> Result<(), UndoError> {
        if fs::symlink_metadata(&self.inner.dir).is_ok() {
            return Ok(());
        }
        self.make_ground()?;
        let dir = self.inner.dir.clone();
        let mut notices = self.notices();
        if !notices
            .iter()
            .any(|n| matches!(n, Notice::HistoryGone { .. }))
        {
            notices.push(Notice::HistoryGone { dir });
        }
        Ok(())
    }

    fn lock(&self) -> Result<LockGuard, UndoError> {
        self.regrow_if_gone()?;
        lock::acquire(&self.path(LOCK_FILE), self.inner.options.lock_timeout)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.inner.dir.join(name)
    }

    fn notices(&self) -> MutexGuard<'_, Vec<Notice>> {
        // A poisoned lock only means a panic elsewhere; the list itself is intact.
        self.inner
            .notices
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self, notice: Notice) {
        self.notices().push(notice);
    }

    /// What the packs hold, refreshed from the names in `state`; under the lock.
    fn packed(&self, state: &LogState) -> MutexGuard<'_, Packed> {
        // A poisoned lock only means a panic elsewhere; refreshing makes it right again.
        let mut packed =
            (self.inner.packed.lock()).unwrap_or_else(|poisoned| poisoned.into_inner());
        packed.refresh(self.inner.blobs.dir(), &state.packs());
        packed
    }

    /// Reads the log without the lock: it is replaced atomically, and an append still being
    /// written reads as torn, hence as not yet there. Damaged records are skipped and reported.
    fn read_state(&self) -> Result<LogState, UndoError> {
        self.regrow_if_gone()?;
        let (state, bad) = self.parse_log()?;
        for notice in bad {
            self.notify(notice);
        }
        Ok(state)
    }

    fn parse_log(&self) -> Result<(LogState, Vec<Notice>), UndoError> {
        let path = self.path(LOG_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| UndoError::io("read", &path, err))?
        else {
            return Ok((LogState::empty(), Vec::new()));
        };
        let parsed = log::parse(&bytes).map_err(|Refused::Version(found)| {
            UndoError::UnsupportedVersion {
                path: path.clone(),
                found,
                supported: FORMAT_VERSION,
            }
        })?;
        let notices = parsed
            .bad
            .into_iter()
            .map(|b| Notice::CorruptRecord {
                file: LOG_FILE.to_owned(),
                line: b.line,
                reason: b.reason,
            })
            .collect();
        Ok((parsed.state, notices))
    }

    /// Reads the log under the lock; a damaged log is copied aside, reported, and rewritten
    /// with its good records so the damage is reported once.
    fn load_state(&self) -> Result<LogState, UndoError> {
        let (mut state, bad) = self.parse_log()?;
        if !bad.is_empty() {
            let path = self.path(LOG_FILE);
            let damaged = self.path(DAMAGED_LOG_FILE);
            // Read and written anew rather than copied: `fs::copy` would follow a link
            // planted at the copy's name.
            let bytes = read_optional(&path)
                .map_err(|err| UndoError::io("read", &path, err))?
                .unwrap_or_default();
            write_atomic(&damaged, &bytes)
                .map_err(|err| UndoError::io("keep a copy of the damaged log at", &damaged, err))?;
            log::rewrite(&path, &mut state).map_err(|err| UndoError::io("write", &path, err))?;
            for notice in bad {
                self.notify(notice);
            }
        }
        Ok(state)
    }

    /// Applies `record` to `state` and makes it durable in the log (see [`log::append`]).
    fn append(&self, state: &mut LogState, record: LogLine) -> Result<(), UndoError> {
        let path = self.path(LOG_FILE);
        log::append(&path, state, record).map_err(|err| UndoError::io("write", &path, err))
    }

    /// Under the lock: completes an interrupted restore, recovers an interrupted turn, and
    /// returns the log.
    async fn recover(&self, workspace: &dyn Mutator) -> Result<LogState, UndoError> {
        let mut state = self.load_state()?;
        self.recover_strictly(workspace, &mut state).await?;
        Ok(state)
    }

    async fn recover_loaded(
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
                reason,
            }) => {
                self.notify(Notice::StuckRestore {
                    id: turn,
                    direction,
                    reason,
                });
                return Ok(());
            }
            Err(err) => return Err(err),
        }
        self.recover_inflight(workspace, state).await
    }

    /// Like [`Self::recover_loaded`], failing when a restore is stuck.
    async fn recover_strictly(
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
    async fn recover_restore(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        let Some(pending) = state.pending.clone() else {
            return Ok(());
        };
        let id = pending.turn.meta.id;
        let direction = pending.direction;
        let stuck = |err: &UndoError| UndoError::RestoreStuck {
            turn: id,
            direction,
            reason: err.to_string(),
        };
        let paths = pending.turn.workspace_paths();
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
        let verb = direction_verb(direction);
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
            let writes = needed_writes(&pending.turn, direction, &standings, &BTreeSet::new());
            let progress = restore::Progress::resume(&progress_path, run, started);
            let completed = match restore::verify(&stored, writes.iter().map(|(p, i)| (p, i))) {
                Ok(()) => {
                    restore::apply_marked_first(
                        workspace,
                        &stored,
                        &pending.turn,
                        direction,
                        &BTreeSet::new(),
                        &progress,
                    )
                    .await
                }
                Err(err) => Err(err),
            };
            match completed {
                Ok(_) => {
                    self.append(state, LogLine::Done { id })?;
                    self.notify(Notice::CompletedRestore { id, direction });
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
            reason,
            left: changed.into_iter().collect(),
        });
        Ok(())
    }

    /// Moves the journal of a restore that a store of format 3 or older began into the log,
    /// as its `begin` record, for [`Self::recover_restore`] to complete.
    fn adopt_journal(&self, state: &mut LogState) -> Result<(), UndoError> {
        let path = self.path(JOURNAL_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| UndoError::io("read", &path, err))?
        else {
            return Ok(());
        };
        let (mut good, bad) = decode_all::<Journal>(&bytes);
        match good.pop() {
            Some((_, journal))
                if bad.is_empty() && journal.turn.validate().is_ok() && state.pending.is_none() =>
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
                    LogLine::Begin {
                        direction: journal.direction,
                        turn,
                        run: None,
                    },
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

    async fn recover_inflight(
        &self,
        workspace: &dyn Mutator,
        state: &mut LogState,
    ) -> Result<(), UndoError> {
        // First a bash command's overlay layer that a crash left: a commit cut short is
        // finished (the in-flight record below holds the pre-images of all it changes), a
        // command cut short is discarded.
        let state_dir = &self.inner.state;
        let mut recovered_layers = Vec::new();
        for layers in [state_dir.layers_dir(), state_dir.legacy_layers_dir()] {
            recovered_layers.extend(
                shiro_tools::capture::recover_layers(workspace, &layers)
                    .await
                    .map_err(UndoError::Mutator)?,
            );
        }
        for recovered in recovered_layers {
            self.notify(match recovered {
                LayerRecovery::Finished { steps } => Notice::FinishedBashCommit { steps },
                LayerRecovery::Discarded => Notice::DiscardedBashLayer,
                LayerRecovery::DiscardedAfterRestart => Notice::DiscardedBashCommit,
            });
        }
        let path = self.path(INFLIGHT_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| UndoError::io("read", &path, err))?
        else {
            return Ok(());
        };
        if bytes.is_empty() {
            // Between turns.
            return Ok(());
        }
        let (records, bad) = decode_framed::<InflightLine>(&bytes, |line| match line {
            InflightLine::Path { bytes, .. } => *bytes,
            _ => None,
        });
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
        // Whether the log now holds this file's turn, so that emptying the file need not be
        // flushed: should the emptying be lost, the turn's id is below the log's next id.
        let mut committed = false;
        if let Some(meta) = meta {
            // The log's next id passes a turn's id only when that turn is committed (ids are
            // handed out from it under the lock): such a file is a leftover whose emptying a
            // crash undid, even if its turn has since left the log.
            let stale = meta.id.0 < state.next_id || state.contains(meta.id);
            state.next_id = state.next_id.max(meta.id.0 + 1);
            if !stale {
                let id = meta.id;
                let mut flight = Flight::new(meta);
                // A record of another turn was left by an earlier turn (the emptying of the
                // file, not flushed, was lost): this turn's records end there.
                let own = records.take_while(|(_, line, _)| line.turn().is_none_or(|t| t == id));
                for (number, line, payload) in own {
                    let payload = match (&line, payload) {
                        (
                            InflightLine::Path {
                                before: Image::File { hash, .. },
                                ..
                            },
                            Some(bytes),
                        ) => {
                            if ContentHash::of(bytes) == *hash {
                                Some(bytes.to_vec())
                            } else {
                                self.notify(Notice::CorruptRecord {
                                    file: INFLIGHT_FILE.to_owned(),
                                    line: number,
                                    reason: "stored bytes do not match their hash".to_owned(),
                                });
                                None
                            }
                        }
                        _ => None,
                    };
                    flight.apply(line, payload);
                }
                let id = flight.meta.id;
                let summary = flight.meta.summary.clone();
                // A write killed before its rename left its temporary file beside the path;
                // every such path was captured first, so it is among these.
                restore::sweep_partial_writes(workspace, flight.before.keys()).await;
                let spares = Spares::none();
                match flight
                    .finish(workspace, true, self.inner.options.big_file_bytes, &spares)
                    .await?
                {
                    Some(finished) => {
                        let paths = finished.record.paths.len();
                        let unrestorable = finished.record.summary().bash_unrestorable;
                        // A blob an earlier attempt to finish this turn left damaged (a disk
                        // error) must not count as stored.
                        let blobs = &self.inner.blobs;
                        blobs
                            .discard_damaged(finished.pending.keys().chain(finished.afters.keys()))
                            .map_err(|err| UndoError::io("check blobs in", blobs.dir(), err))?;
                        self.commit_flight(state, finished, &spares)?;
                        committed = true;
                        self.notify(Notice::RecoveredTurn {
                            id,
                            summary,
                            paths,
                            unrestorable,
                        });
                    }
                    None => self.notify(Notice::DiscardedEmptyTurn { id }),
                }
            } else {
                committed = true;
            }
        }
        empty_file(&path, !committed).map_err(|err| UndoError::io("empty", &path, err))
    }

    /// Stores the new pre-images of a finished turn in one pack, `<id>-0`, written and
    /// flushed once, then pushes the turn (see [`UndoStore::commit_turn`]). Until the log
    /// holds the turn, its in-flight file still holds the bytes of the new ones. A pre-image
    /// stored already, as a blob or in a pack the log names, is not stored again; the turn
    /// names the pack that holds it.
    ///
    /// A big file's after-image is stored too, as a delta against its pre-image (a new one is
    /// stored raw, the start of a chain): the next turn on the file finds its pre-image
    /// stored already, and stores only its own delta. A chain [`MAX_DELTA_DEPTH`] deep starts
    /// again with the after-image whole. These stay blob files of their own: chains are
    /// followed from file to file.
    fn commit_flight(
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
        } = finished;
        let mut record = record;
        let packed = self.packed(state);
        let in_store = |hash: &ContentHash| blobs.contains(hash) || packed.find(hash).is_some();
        let mut items = Vec::new();
        let mut raw = BTreeSet::new();
        let mut stored = BTreeSet::new();
        for path in &record.paths {
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
            let (before_bytes, depth) = if let Some(bytes) = pending.get(&before) {
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
        // of deltas are blobs of their own, on disk before their deltas are.
        let failed = |err| UndoError::io("store a copy in", blobs.dir(), err);
        let mut batch: Vec<(ContentHash, Form<'_>)> = Vec::new();
        let mut pack: Option<PackWriter> = None;
        for (hash, bytes) in &pending {
            if raw.contains(hash) {
                batch.push((*hash, Form::Raw(bytes)));
            } else if !in_store(hash) {
                let writer = match &mut pack {
                    Some(writer) => writer,
                    None => pack.insert(PackWriter::create(blobs.dir()).map_err(failed)?),
                };
                (writer.add_at(*hash, bytes, Blobs::finish_level(bytes.len()))).map_err(failed)?;
            }
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
        let hashes: BTreeSet<ContentHash> = record.hashes().collect();
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
                .chain(held.into_values())
                .chain(afters.into_values()),
        );
        committed
    }

    /// Pushes a finished turn: clears the redo stack, keeps `depth` turns, saves the log,
    /// collects unreferenced blobs and applies the size cap.
    fn commit_turn(&self, state: &mut LogState, record: TurnRecord) -> Result<(), UndoError> {
        // Past the depth, the oldest turns go.
        let depth = self.inner.options.depth.max(1);
        let excess = (state.undo.len() + 1).saturating_sub(depth);
        let dropped: Vec<TurnId> = state.undo.iter().take(excess).map(|t| t.meta.id).collect();
        let earlier = named_packs(state);
        self.append(
            state,
            LogLine::Push {
                turn: record,
                dropped,
            },
        )?;
        let listing = self.collect_after(state, &earlier)?;
        self.enforce_cap(state, &listing)
    }

    /// Removes the blobs `state` does not need; returns what remains.
    fn collect(&self, state: &LogState) -> Result<Listing, UndoError> {
        self.inner
            .blobs
            .collect(&state.hashes(), &state.packs())
            .map_err(|err| UndoError::io("collect unused blobs in", self.inner.blobs.dir(), err))
    }

    /// Collects after turns left the log (`earlier` is what the turns named before), and
    /// rewrites each pack a turn that left named whose live copies now take less than half
    /// of it (see [`Pack::rewrite`]: crash-safe, under the same name, so no record changes).
    /// Returns what remains.
    fn collect_after(
        &self,
        state: &LogState,
        earlier: &[(TurnId, Vec<String>)],
    ) -> Result<Listing, UndoError> {
        let listing = self.collect(state)?;
        let named = state.packs();
        let candidates: BTreeSet<&String> = (earlier.iter())
            .filter(|(id, _)| !state.contains(*id))
            .flat_map(|(_, packs)| packs)
            .filter(|name| named.contains(*name))
            .collect();
        if candidates.is_empty() {
            return Ok(listing);
        }
        let live = state.hashes();
        let dir = self.inner.blobs.dir();
        let mut rewrote = false;
        for name in candidates {
            // A pack that cannot be read is left as it is: its turns report it on restore.
            let Ok(pack) = Pack::open(&pack_path(dir, name)) else {
                continue;
            };
            let (total, kept) = pack.live_share(|hash| live.contains(hash));
            if kept.saturating_mul(2) < total {
                pack.rewrite(|hash| live.contains(hash))
                    .map_err(|err| UndoError::io("rewrite a pack in", dir, err))?;
                rewrote = true;
            }
        }
        if !rewrote {
            return Ok(listing);
        }
        (self.inner.blobs.list()).map_err(|err| UndoError::io("list", dir, err))
    }

    /// Drops the oldest turns while what the kept ones need (`listing`, after collection)
    /// is over the size cap.
    fn enforce_cap(&self, state: &mut LogState, listing: &Listing) -> Result<(), UndoError> {
        let cap = self.inner.options.max_store_bytes;
        let blobs = &self.inner.blobs;
        // What the kept turns need, with the bases of their deltas.
        let used =
            |state: &LogState| -> u64 { blobs.size_of(&state.hashes(), &state.packs(), listing) };
        let mut total = used(state);
        let mut dropped = Vec::new();
        let earlier = named_packs(state);
        while total > cap && state.undo.len() > 1 {
            dropped.push(state.undo.remove(0).meta.id);
            total = used(state);
        }
        if !dropped.is_empty() {
            self.append(
                state,
                LogLine::Drop {
                    ids: dropped.clone(),
                },
            )?;
            self.collect_after(state, &earlier)?;
            self.notify(Notice::DroppedForSize {
                dropped,
                store_bytes: total,
                cap,
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Ledger for UndoStore {
    fn dir(&self) -> &Path {
        &self.inner.dir
    }

    fn big_file_bytes(&self) -> u64 {
        self.inner.options.big_file_bytes
    }

    fn holds(&self, hash: &ContentHash) -> bool {
        self.inner.blobs.contains(hash)
            || (self.inner.packed.lock())
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .find(hash)
                .is_some()
    }

    async fn begin(&self, workspace: &dyn Mutator) -> Result<(LockGuard, TurnId), UndoError> {
        let lock = self.lock()?;
        let state = self.recover(workspace).await?;
        // What the packs hold, as of this lock: `holds` looks there during the turn.
        drop(self.packed(&state));
        Ok((lock, TurnId(state.next_id)))
    }

    fn commit(&self, finished: Finished, spares: &Spares) -> Result<(), UndoError> {
        // Not `recover`: the in-flight file is the recorder's own turn, and it is finishing.
        let mut state = self.load_state()?;
        self.commit_flight(&mut state, finished, spares)
    }
}

/// The paths of `turn` a restore in `direction` still has to write, with their targets: those
/// not done already by `standings`, and not to be left.
fn needed_writes(
    turn: &TurnRecord,
    direction: Direction,
    standings: &[(WorkspacePath, restore::Standing)],
    leave: &BTreeSet<WorkspacePath>,
) -> Vec<(WorkspacePath, Image)> {
    let done: BTreeSet<&WorkspacePath> = (standings.iter())
        .filter(|(_, standing)| *standing == restore::Standing::Done)
        .map(|(path, _)| path)
        .collect();
    (turn.paths.iter())
        .filter_map(|record| {
            let path = WorkspacePath::from_relative(&record.path).ok()?;
            let needed = !done.contains(&path) && !leave.contains(&path);
            needed.then(|| (path, restore::sides(record, direction).1.clone()))
        })
        .collect()
}

#[cfg(test)]
impl UndoStore {
    /// The log, and the blobs, for the crate's own tests to check the store against.
    pub(crate) fn inside(&self) -> (LogState, &Blobs) {
        (self.read_state().expect("the log reads"), &self.inner.blobs)
    }
}

/// The packs each kept turn of `state` names.
fn named_packs(state: &LogState) -> Vec<(TurnId, Vec<String>)> {
    (state.undo.iter())
        .chain(&state.redo)
        .map(|turn| (turn.meta.id, turn.packs.clone()))
        .collect()
}

/// The summary of `turn`, saying so when its restore is under way in `state`.
fn summary_of(state: &LogState, turn: &TurnRecord) -> TurnSummary {
    let mut summary = turn.summary();
    if let Some(pending) = state
        .pending
        .as_ref()
        .filter(|p| p.turn.meta.id == turn.meta.id)
    {
        let verb = direction_verb(pending.direction);
        summary.damage = Some(match &pending.rollback {
            Some(reason) => format!(
                "its {verb} is stuck part-way: {reason}; the rollback will be retried; `shiro undo --abandon` keeps every file as it is"
            ),
            None => format!(
                "its {verb} was interrupted; it is completed the next time the store is opened"
            ),
        });
    }
    summary
}

fn direction_verb(direction: Direction) -> &'static str {
    match direction {
        Direction::Undo => "undo",
        Direction::Redo => "redo",
    }
}

/// A restore cleared by [`UndoStore::abandon`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Abandoned {
    /// Its turn.
    pub turn: TurnSummary,
    /// Which way it went.
    pub direction: Direction,
    /// Where each path of the turn stands, sorted by path.
    pub paths: Vec<(WorkspacePath, PathStanding)>,
}

/// Where a path of an abandoned restore was left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathStanding {
    /// As the restore would have made it.
    Restored,
    /// As it was before the restore.
    AsBefore,
    /// Neither: changed since, or half-written when the restore stopped.
    Neither,
}

impl std::fmt::Display for Abandoned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = direction_verb(self.direction);
        writeln!(
            f,
            "abandoned the {verb} of turn {} {:?}, which had stopped part-way; every file was left as it is:",
            self.turn.id, self.turn.summary
        )?;
        let text = |standing: &PathStanding| match standing {
            PathStanding::Restored => format!("{verb}ne"),
            PathStanding::AsBefore => format!("as before the {verb}"),
            PathStanding::Neither => "neither (changed since, or half-written)".to_owned(),
        };
        let width = (self.paths.iter())
            .map(|(_, standing)| text(standing).len())
            .max()
            .unwrap_or(0);
        for (path, standing) in &self.paths {
            writeln!(f, "  {:<width$}  {path}", text(standing))?;
        }
        write!(
            f,
            "turn {} stays in the log, marked; `shiro {verb} --force` finishes the job",
            self.turn.id
        )
    }
}

/// The stored files of one turn; see [`UndoStore::copies`].
#[derive(Debug)]
pub struct Copies<'a> {
    stored: restore::Stored<'a>,
}

impl<'a> Copies<'a> {
    fn of(store: &'a UndoStore, turn: Option<&TurnRecord>) -> Self {
        let blobs = &store.inner.blobs;
        let stored = match turn {
            Some(turn) => restore::Stored::open(blobs, turn),
            None => restore::Stored::blobs_only(blobs),
        };
        Self { stored }
    }

    /// The bytes of `hash`, checked against it; `None` when neither the blobs nor the turn's
    /// packs hold them.
    pub fn get(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, UndoError> {
        self.stored
            .get(hash)
            .map_err(|err| UndoError::io("read the stored copy in", self.stored.dir(), err))
    }
}
