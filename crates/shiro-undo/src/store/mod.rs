//! The store: the log on disk, its lock, recovery, undo and redo. It makes the recorders
//! ([`UndoStore::recorder`]), which reach it only through the [`Ledger`] it implements.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use shiro_tools::{FsMutator, Mutator, WorkspacePath};

use crate::blob::{Blobs, RawWriter};
use crate::codec::{read_optional, write_atomic};
use crate::error::UndoError;
use crate::flight::Finished;
use crate::format::{
    BLOBS_DIR, DAMAGED_LOG_FILE, FORMAT_VERSION, INFLIGHT_FILE, JOURNAL_FILE, LOCK_FILE, LOG_FILE,
    LogLine, PROGRESS_FILE, Pushed, TurnRecord,
};
use crate::ground;
use crate::image::{ContentHash, Image, Spares};
use crate::lock::{self, LockGuard};
use crate::log::{self, LogState, Refused};
use crate::pack::Packed;
use crate::place::{MoveBy, StateDir};
use crate::recorder::{Ledger, Recording, TurnStart};
use crate::report::{Direction, Notice, TurnId, TurnSummary, UndoOutcome, restore_name};
use crate::restore;
use crate::revert::report::RevertOutcome;

mod collect;
mod recover;
mod revert;
mod select;
mod undo;

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
    /// The most bytes of smaller files' new versions a turn stores as it finishes, in its
    /// pack with its pre-images (one write, one flush): undoing or rewinding the turn then
    /// finds them stored and has nothing to copy before it restores. Past it (a command that
    /// writes a whole dependency tree), the rest are copied by the undo, if one comes, rather
    /// than by every turn. Default 8 MiB.
    pub max_small_after_bytes: u64,
    /// Files of at least this many bytes are never held in memory whole. Their pre-image is
    /// copied into a blob of its own a piece at a time as it is captured, and stored raw
    /// (no delta); their new version is hashed as it is read, and copied into the store only
    /// when an undo needs it, the same way. A turn on a file of any size then costs bounded
    /// memory. Default 64 MiB.
    pub stream_file_bytes: u64,
    /// The most bytes of new pre-images a turn holds in memory until it finishes. Every
    /// pre-image is in the in-flight file, flushed, before the path changes; past this, the
    /// rest are read back from there when the turn is stored, so that a turn of a hundred
    /// thousand files (an `rm -rf` of a dependency tree) costs bounded memory. Big files'
    /// pre-images are always held: their new versions are stored as deltas against them.
    /// Default 32 MiB.
    pub max_held_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            depth: 20,
            max_store_bytes: 1 << 30,
            lock_timeout: Duration::from_secs(10),
            big_file_bytes: 1 << 20,
            max_small_after_bytes: 8 << 20,
            stream_file_bytes: 64 << 20,
            max_held_bytes: 32 << 20,
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
    /// The log's state as last read or written (see [`UndoStore::parse_log`]).
    parsed: Mutex<Option<Kept>>,
    /// The token of the lock this store took last (see [`LockGuard::token`]).
    held: Mutex<Weak<()>>,
    /// The lock [`UndoStore::open_for_one`] took to open the store, kept for the store's first
    /// operation to take over (see [`UndoStore::lock`]).
    opened: Mutex<Option<LockGuard>>,
    notices: Mutex<Vec<Notice>>,
}

/// The log's state as last read or written, kept for the next read.
#[derive(Debug)]
struct Kept {
    /// The hash of the log's bytes it is the state of.
    hash: blake3::Hash,
    state: LogState,
    /// The lock held when it was last known to be the log's state: while that lock is still
    /// held, no other process can have written the log, and neither has this one (each write
    /// keeps its own state), so it is the log's state without reading the log.
    under: Weak<()>,
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
        let (store, _guard) = Self::open_on_disk(state, options).await?;
        Ok(store)
    }

    /// Like [`UndoStore::open`], for a process that opens the store to do one thing (`shiro
    /// undo`, `shiro tool`): the lock taken to open it is kept, and its first operation takes
    /// it over, so that nothing can have changed the log in between and the operation reads
    /// nothing that opening did not (a log that lists a turn of ten thousand paths is
    /// megabytes). Until then, or until the store is dropped, every other process waits for
    /// the lock: a store that stays open (an agent's) is opened with [`UndoStore::open`].
    pub async fn open_for_one(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
        let (store, guard) = Self::open_on_disk(state, options).await?;
        *lock_or_poisoned(&store.inner.opened) = Some(guard);
        Ok(store)
    }

    /// Opens the store as [`UndoStore::open`] does, recovering through the workspace on disk;
    /// returns it with the lock it took.
    async fn open_on_disk(
        state: &StateDir,
        options: StoreOptions,
    ) -> Result<(Self, LockGuard), UndoError> {
        state.check_apart()?;
        let root = state.workspace();
        let workspace =
            FsMutator::new(root).map_err(|err| UndoError::io("open the workspace", root, err))?;
        Self::open_locked(state, &workspace, options).await
    }

    /// Like [`UndoStore::open`], with the store in `state` on disk but recovery going through
    /// `workspace` (an in-memory workspace in tests and embeddings).
    pub async fn open_with(
        state: &StateDir,
        workspace: &dyn Mutator,
        options: StoreOptions,
    ) -> Result<Self, UndoError> {
        let (store, _guard) = Self::open_locked(state, workspace, options).await?;
        Ok(store)
    }

    /// Opens the store as [`UndoStore::open_with`] does; returns it with the lock it took.
    async fn open_locked(
        state: &StateDir,
        workspace: &dyn Mutator,
        options: StoreOptions,
    ) -> Result<(Self, LockGuard), UndoError> {
        let store = Self::migrate_and_create(state, options)?;
        let guard = store.lock()?;
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
        Ok((store, guard))
    }

    /// Opens the store as it is, completing nothing a crash left (no restore, no turn): for
    /// [`UndoStore::abandon`], which must see a stuck restore as it stands.
    pub async fn open_as_is(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
        state.check_apart()?;
        Self::migrate_and_create(state, options)
    }

    /// Moves a store an earlier version kept in the workspace's tree to `state` (with a
    /// notice), then checks the store's ground and makes its directories.
    fn migrate_and_create(state: &StateDir, options: StoreOptions) -> Result<Self, UndoError> {
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
                parsed: Mutex::default(),
                held: Mutex::default(),
                opened: Mutex::default(),
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
        if let Some(bytes) = Copies::of(self, &[]).get(hash)? {
            return Ok(Some(bytes));
        }
        let state = self.read_state()?;
        let turns = state.undo.iter().chain(&state.redo);
        // A turn whose paths cannot be read is not known to refer to it.
        for turn in turns.filter(|turn| turn.hashes().is_ok_and(|mut h| h.any(|h| h == *hash))) {
            if let Some(bytes) = Copies::of(self, &[turn]).get(hash)? {
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// The stored files a restore of turn `id` reads (the blobs, and the packs of the turns
    /// it moves): for a dry run to show as a diff, with
    /// [`PathOutcome::becomes`](crate::PathOutcome::becomes), `id` being the outcome's turn.
    /// A restore of several turns (a rewind to `id`, or the redo of one) writes what each of
    /// them stored, and a path's copy is in the pack of the turn that first (or last) touched
    /// it, not always `id`'s: on the undo stack, the packs of `id` and of every later turn
    /// (a rewind takes some of them) are read; on the redo stack, those of the turns undone
    /// with `id`. A turn no longer in the log has only its blobs.
    pub fn copies(&self, id: TurnId) -> Result<Copies<'_>, UndoError> {
        let state = self.read_state()?;
        let turns: Vec<&TurnRecord> = match state.redo.iter().find(|t| t.meta.id == id) {
            Some(turn) => match turn.group {
                Some(group) => (state.redo.iter())
                    .filter(|t| t.group == Some(group))
                    .map(Arc::as_ref)
                    .collect(),
                None => vec![turn],
            },
            None => (state.undo.iter())
                .skip_while(|t| t.meta.id != id)
                .map(Arc::as_ref)
                .collect(),
        };
        Ok(Copies::of(self, &turns))
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

    /// Undoes the newest turn through `workspace`: every path it touched is put back as it
    /// was before the turn, and the turn moves to the redo stack. Refuses with
    /// [`UndoError::Conflict`] (changing nothing) when a path changed since the turn, unless
    /// forced, and stops with [`UndoError::GitLocked`] (changing nothing, even forced) when a
    /// lock file of git's is on what it moves; [`UndoStore::check`] makes the same check. The
    /// outcome carries the turn's history marker for the caller to rewind to.
    pub async fn undo(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.restore(workspace, options, Direction::Undo).await
    }

    /// Rewinds to before turn `id`: undoes it and every later turn of its session (for a
    /// headless command's turn, every later headless command's) as one restore, with one
    /// conflict check over all their paths, all or nothing, crash-safe like an undo. The turns
    /// of other sessions stay; when one of them touched the same paths, the rewind is refused
    /// ([`ConflictKind::LaterTurn`](crate::ConflictKind::LaterTurn), even when forced). The
    /// next [`UndoStore::redo`] brings them all back. The outcome's turn is `id`'s (its history
    /// marker is where the conversation goes back to); [`UndoOutcome::also`] lists the rest.
    pub async fn rewind(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.rewind_to(workspace, id, options).await
    }

    /// Rewinds exactly the turns `ids` (all on the undo stack), as [`UndoStore::rewind`] does
    /// a session's: for a conversation whose turns are not all its session's (a fork's,
    /// which begins with its parent's). Refused like a rewind when a later turn not among
    /// them touched one of their paths.
    pub async fn rewind_turns(
        &self,
        workspace: &dyn Mutator,
        ids: &[TurnId],
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.rewind_set(workspace, ids, options).await
    }

    /// Reverts turn `id` alone, keeping every later change, as `git revert` does: a new turn,
    /// recorded with `start`, that takes `id`'s changes out of the workspace as it is now. A
    /// text file changed since is merged three ways (line by line); anything else the turn
    /// changed is put back only if it is still as the turn left it. Any conflict refuses it
    /// all, changing nothing ([`UndoError::RevertConflict`]). The new turn is undone and
    /// redone like any other; the reverted one stays where it was. `id` must be on the undo
    /// stack. See `docs/undo.md`, "Revert one turn".
    pub async fn revert(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        start: TurnStart,
    ) -> Result<RevertOutcome, UndoError> {
        self.revert_turn(workspace, id, Some(start)).await
    }

    /// What [`UndoStore::revert`] would do, changing nothing: every path with what it is now
    /// and what it would become, with the bytes of each file it would change (now, and as it
    /// would write them), for the caller to show as a diff. Refused as the revert would be.
    pub async fn revert_dry_run(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
    ) -> Result<RevertOutcome, UndoError> {
        self.revert_turn(workspace, id, None).await
    }

    /// Redoes the most recently undone turn, under the same conflict rule as undo; after a
    /// rewind, every turn it undid, as one restore.
    pub async fn redo(
        &self,
        workspace: &dyn Mutator,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.restore(workspace, options, Direction::Redo).await
    }

    /// Redoes turn `id` (with the turns a rewind undid with it), wherever it lies on the redo
    /// stack, under the same conflict rule as [`UndoStore::redo`]: for bringing back one
    /// session's undone turns when other undone turns lie above them. Refused with
    /// [`UndoError::NotUndone`] when `id` is not undone.
    pub async fn redo_turn(
        &self,
        workspace: &dyn Mutator,
        id: TurnId,
        options: UndoOptions,
    ) -> Result<UndoOutcome, UndoError> {
        self.redo_of(workspace, id, options).await
    }

    /// Notices a store deleted while this process had it open: says so, once, and begins a
    /// new history.
    fn regrow_if_gone(&self) -> Result<(), UndoError> {
        if fs::symlink_metadata(&self.inner.dir).is_ok() {
            return Ok(());
        }
        // The lock kept from opening is on a file of the store that is gone: it excludes no
        // one, and what was read under it is no longer the log.
        lock_or_poisoned(&self.inner.opened).take();
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

    /// Takes the store's lock: the one [`UndoStore::open_for_one`] kept, the first time, else
    /// waits for it (up to the lock timeout).
    fn lock(&self) -> Result<LockGuard, UndoError> {
        Ok(self.lock_noting_kept()?.0)
    }

    /// [`Self::lock`], and whether the lock is the one [`UndoStore::open_for_one`] kept.
    fn lock_noting_kept(&self) -> Result<(LockGuard, bool), UndoError> {
        self.regrow_if_gone()?;
        if let Some(opened) = lock_or_poisoned(&self.inner.opened).take() {
            return Ok((opened, true));
        }
        let guard = lock::acquire(&self.path(LOCK_FILE), self.inner.options.lock_timeout)?;
        *lock_or_poisoned(&self.inner.held) = guard.token();
        Ok((guard, false))
    }

    /// Takes the lock and finishes what a crash left (see `recover`), for an operation that
    /// changes the log. Under the lock [`UndoStore::open_for_one`] kept, opening recovered
    /// already and no other process has run since: only a restore still pending (one that
    /// opening left stuck, which an operation must refuse to go past) is looked at again.
    /// That spares a `shiro undo` or `shiro tool` looking for a crash's leftovers twice.
    pub(super) async fn lock_and_recover(
        &self,
        workspace: &dyn Mutator,
    ) -> Result<(LockGuard, LogState), UndoError> {
        let (guard, kept) = self.lock_noting_kept()?;
        if !kept {
            return Ok((guard, self.recover(workspace).await?));
        }
        let mut state = self.load_state()?;
        if state.pending.is_some() {
            self.recover_strictly(workspace, &mut state).await?;
        }
        Ok((guard, state))
    }

    /// The token of the lock this store holds, if it holds one (a lock is held by one holder
    /// at a time, also within a process: the last one taken is the one held).
    fn held_lock(&self) -> Weak<()> {
        let held = lock_or_poisoned(&self.inner.held);
        match held.upgrade() {
            Some(_) => held.clone(),
            None => Weak::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.inner.dir.join(name)
    }

    fn notices(&self) -> MutexGuard<'_, Vec<Notice>> {
        lock_or_poisoned(&self.inner.notices)
    }

    fn notify(&self, notice: Notice) {
        self.notices().push(notice);
    }

    /// What the packs hold, refreshed from the names in `state`; under the lock.
    fn packed(&self, state: &LogState) -> MutexGuard<'_, Packed> {
        // A poisoned lock only means a panic elsewhere; refreshing makes it right again.
        let mut packed = lock_or_poisoned(&self.inner.packed);
        packed.refresh(self.inner.blobs.dir(), &state.packs(), &self.held_lock());
        packed
    }

    /// Reads the log without the lock: it is replaced atomically, and an append still being
    /// written reads as torn, hence as not yet there. Damaged records are skipped and reported.
    fn read_state(&self) -> Result<LogState, UndoError> {
        self.regrow_if_gone()?;
        let (state, bad) = self.parse_log(false)?;
        for notice in bad {
            self.notify(notice);
        }
        Ok(state)
    }

    /// Reads and parses the log. The same bytes always parse to the same state, so the state
    /// of a clean parse is kept, by the hash of the bytes, for the next read, and so is the
    /// state each write leaves (see [`UndoStore::append`]): a log read again with no other
    /// process's write between (opening the store, then the operation; one turn, then the
    /// next) is hashed rather than parsed, which for a log that lists turns of many paths is
    /// many times cheaper. The state kept and the ones handed out share their turns.
    ///
    /// A state kept under a lock that is still held is taken without even reading the log: a
    /// turn, which holds the lock from its start to its commit, reads the log once. A read
    /// under the lock (`locked`) keeps what it finds under that lock.
    fn parse_log(&self, locked: bool) -> Result<(LogState, Vec<Notice>), UndoError> {
        let under = if locked {
            self.held_lock()
        } else {
            Weak::new()
        };
        // Kept under a lock still held: by this process, and so by this store (the last one
        // it took; another store of the same directory would wait for it).
        if let Some(kept) = self.kept_state().as_ref()
            && kept.under.upgrade().is_some()
        {
            // Its turns are shared, not copied.
            return Ok((kept.state.clone(), Vec::new()));
        }
        let path = self.path(LOG_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| UndoError::io("read", &path, err))?
        else {
            return Ok((LogState::empty(), Vec::new()));
        };
        let mut hasher = blake3::Hasher::new();
        hasher.update(&bytes);
        let hash = hasher.finalize();
        let mut last = self.kept_state();
        if let Some(kept) = last.as_mut().filter(|kept| kept.hash == hash) {
            if locked {
                kept.under = under;
            }
            return Ok((kept.state.clone(), Vec::new()));
        }
        let len = bytes.len();
        let mut parsed =
            log::parse_shared(&Arc::new(bytes)).map_err(|Refused::Version(found)| {
                UndoError::UnsupportedVersion {
                    path: path.clone(),
                    found,
                    supported: FORMAT_VERSION,
                }
            })?;
        parsed.state.read_from(hasher, len);
        *last = parsed.bad.is_empty().then(|| Kept {
            hash,
            state: parsed.state.clone(),
            under,
        });
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
        let (mut state, bad) = self.parse_log(true)?;
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
    /// The state is then kept for the next read, by the hash of the bytes it wrote: a long
    /// session, whose every turn writes the log, never parses it again.
    fn append(&self, state: &mut LogState, record: LogLine) -> Result<(), UndoError> {
        let path = self.path(LOG_FILE);
        // A state kept from before this write would never be found again; and while it is
        // kept, it shares the turns this write may change (which would copy them).
        *self.kept_state() = None;
        log::append(&path, state, record).map_err(|err| UndoError::io("write", &path, err))?;
        // The turns are shared, not copied.
        *self.kept_state() = state.log_hash().map(|hash| Kept {
            hash,
            state: state.clone(),
            under: self.held_lock(),
        });
        Ok(())
    }

    /// The state kept by [`UndoStore::parse_log`] and [`UndoStore::append`].
    fn kept_state(&self) -> MutexGuard<'_, Option<Kept>> {
        lock_or_poisoned(&self.inner.parsed)
    }

    /// The turn of the restore begun last, which [`LogLine::Begin`] has just made pending.
    fn pending_turn<'s>(&self, state: &'s LogState) -> Result<&'s TurnRecord, UndoError> {
        let pending = state.pending.as_ref().ok_or_else(|| {
            let err = std::io::Error::other("the restore begun is missing from the log's state");
            UndoError::io("read", &self.path(LOG_FILE), err)
        })?;
        Ok(&pending.turn)
    }

    /// Pushes a finished turn: clears the redo stack of the turn's session, keeps `depth`
    /// turns on each stack, saves the log, collects unreferenced blobs and applies the size
    /// cap.
    fn commit_turn(&self, state: &mut LogState, record: TurnRecord) -> Result<(), UndoError> {
        // Past the depth, the oldest turns go.
        let depth = self.inner.options.depth.max(1);
        let excess = (state.undo.len() + 1).saturating_sub(depth);
        let mut dropped: Vec<TurnId> = state.undo.iter().take(excess).map(|t| t.meta.id).collect();
        dropped.extend(redo_past_depth(state, &record, depth));
        let earlier = collect::named_packs(state);
        self.append(
            state,
            LogLine::Push(Pushed {
                turn: Arc::new(record),
                dropped,
                scoped: true,
            }),
        )?;
        let listing = self.collect_after(state, &earlier)?;
        self.enforce_cap(state, &listing)
    }

    /// After a turn was pushed onto the log other than by [`Self::commit_turn`] (a revert's
    /// `done`): drops the turns past the depth, collects what the turns that left named
    /// (`earlier` is what the turns named before), and applies the size cap.
    fn settle_new_turn(
        &self,
        state: &mut LogState,
        earlier: &[(TurnId, Vec<String>)],
    ) -> Result<(), UndoError> {
        let depth = self.inner.options.depth.max(1);
        let excess = state.undo.len().saturating_sub(depth);
        let mut ids: Vec<TurnId> = state.undo.iter().take(excess).map(|t| t.meta.id).collect();
        if let Some(newest) = state.undo.last() {
            ids.extend(redo_past_depth(state, newest, depth));
        }
        if !ids.is_empty() {
            self.append(state, LogLine::Drop { ids })?;
        }
        let listing = self.collect_after(state, earlier)?;
        self.enforce_cap(state, &listing)
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

    fn max_small_after_bytes(&self) -> u64 {
        self.inner.options.max_small_after_bytes
    }

    fn stream_file_bytes(&self) -> u64 {
        self.inner.options.stream_file_bytes
    }

    fn max_held_bytes(&self) -> u64 {
        self.inner.options.max_held_bytes
    }

    fn raw_writer(&self) -> std::io::Result<RawWriter> {
        self.inner.blobs.raw_writer()
    }

    fn keep_name(&self) -> PathBuf {
        self.inner.blobs.keep_name()
    }

    fn keep_file(&self, kept: &Path, hash: &ContentHash) -> std::io::Result<bool> {
        self.inner.blobs.keep_file(kept, hash)
    }

    fn unshare_kept(&self, hash: &ContentHash) -> std::io::Result<()> {
        self.inner.blobs.unshare_if_shared(hash)
    }

    fn release_kept(&self, hash: &ContentHash, other: &Path) -> std::io::Result<()> {
        self.inner.blobs.release(hash, other)
    }

    fn discard_streamed(&self, hashes: &[ContentHash]) -> Result<(), UndoError> {
        let blobs = &self.inner.blobs;
        blobs
            .remove_raw(hashes)
            .map_err(|err| UndoError::io("remove an unused copy in", blobs.dir(), err))
    }

    fn holds(&self, hash: &ContentHash) -> bool {
        // The packs' indexes first: they are in memory, where a look for a blob is two or
        // three lookups of files that are mostly missing.
        lock_or_poisoned(&self.inner.packed).find(hash).is_some() || self.inner.blobs.contains(hash)
    }

    fn holds_many(&self, questions: usize) -> Box<dyn Fn(&ContentHash) -> bool + Send + Sync + '_> {
        let blobs = self.inner.blobs.contains_many(questions);
        Box::new(move |hash| {
            lock_or_poisoned(&self.inner.packed).find(hash).is_some() || blobs.contains(hash)
        })
    }

    async fn begin(&self, workspace: &dyn Mutator) -> Result<(LockGuard, TurnId), UndoError> {
        let (lock, state) = self.lock_and_recover(workspace).await?;
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
) -> Result<Vec<(WorkspacePath, Image)>, UndoError> {
    let done: BTreeSet<&WorkspacePath> = (standings.iter())
        .filter(|(_, standing)| *standing == restore::Standing::Done)
        .map(|(path, _)| path)
        .collect();
    Ok((turn.paths()?.iter())
        .filter_map(|record| {
            let path = WorkspacePath::from_relative(&record.path).ok()?;
            let needed = !done.contains(&path) && !leave.contains(&path);
            needed.then(|| (path, restore::sides(record, direction).1.clone()))
        })
        .collect())
}

#[cfg(test)]
impl UndoStore {
    /// The log, and the blobs, for the crate's own tests to check the store against.
    pub(crate) fn inside(&self) -> (LogState, &Blobs) {
        (self.read_state().expect("the log reads"), &self.inner.blobs)
    }

    /// Checks that the state kept for the next read is the log's, by the hash of the log's
    /// bytes and by what a parse of them says, so that the next read takes it; a store
    /// without a log keeps none.
    pub(crate) fn check_kept(&self) -> Result<(), String> {
        let path = self.path(LOG_FILE);
        let Some(bytes) = read_optional(&path).map_err(|err| err.to_string())? else {
            return Ok(());
        };
        let kept = self.kept_state();
        let Some(Kept { hash, state, .. }) = kept.as_ref() else {
            return Err("no state is kept".to_owned());
        };
        if *hash != blake3::hash(&bytes) {
            return Err("the state kept is not the log's".to_owned());
        }
        let parsed = log::parse(&bytes).map_err(|_| "the log does not parse".to_owned())?;
        match parsed.state.snapshot() == state.snapshot() {
            true => Ok(()),
            false => Err("the state kept says other than the log".to_owned()),
        }
    }
}

/// Locks `mutex`, poisoned or not: a poisoned lock only means a panic elsewhere, and what it
/// guards is changed whole or not at all.
fn lock_or_poisoned<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The undone turns of other sessions than `record`'s that a push of it keeps no longer:
/// those past `depth`, the longest undone first, a rewind's turns all together (a part of
/// one could not be redone).
fn redo_past_depth(state: &LogState, record: &TurnRecord, depth: usize) -> Vec<TurnId> {
    let kept: Vec<&Arc<TurnRecord>> = (state.redo.iter())
        .filter(|t| t.meta.session != record.meta.session)
        .collect();
    let mut excess = kept.len().saturating_sub(depth);
    let mut dropped = Vec::new();
    let mut group = None;
    for turn in kept {
        if excess == 0 && (group.is_none() || turn.group != group) {
            break;
        }
        excess = excess.saturating_sub(1);
        group = turn.group;
        dropped.push(turn.meta.id);
    }
    dropped
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
    /// For a revert, the turn it reverted; `turn` is then the revert's own turn, kept on the
    /// undo stack, marked, so that an undo (forced) takes its files back.
    pub reverting: Option<TurnId>,
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
        let verb = match self.reverting {
            Some(_) => "revert",
            None => direction_verb(self.direction),
        };
        writeln!(
            f,
            "abandoned the {} {:?}, which had stopped part-way; every file was left as it is:",
            restore_name(self.direction, self.turn.id, self.reverting),
            self.turn.summary
        )?;
        let text = |standing: &PathStanding| match standing {
            PathStanding::Restored if self.reverting.is_some() => "reverted".to_owned(),
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
        match self.reverting {
            Some(_) => write!(
                f,
                "turn {} is recorded, marked; `shiro undo --force` takes its files back to before the revert",
                self.turn.id
            ),
            None => write!(
                f,
                "turn {} stays in the log, marked; `shiro {verb} --force` finishes the job",
                self.turn.id
            ),
        }
    }
}

/// The stored files of one turn; see [`UndoStore::copies`].
#[derive(Debug)]
pub struct Copies<'a> {
    stored: restore::Stored<'a>,
}

impl<'a> Copies<'a> {
    /// The blobs, and the packs `turns` name (each opened once).
    fn of(store: &'a UndoStore, turns: &[&TurnRecord]) -> Self {
        let mut stored = restore::Stored::blobs_only(&store.inner.blobs);
        let mut opened = BTreeSet::new();
        for name in turns.iter().flat_map(|turn| &turn.packs) {
            if opened.insert(name) {
                stored.open_pack(name);
            }
        }
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
