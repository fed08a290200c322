//! The recording decorator: a `Mutator` that captures pre-images, then delegates.
//!
//! It writes the in-flight file of the turn it records, and reaches the store it records
//! into only through [`Ledger`], which the store implements: a lock with the next turn's id at
//! the start of a turn, and a commit at its end.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use shiro_tools::{
    Change, DirEntry, Incoming, Looked, Mutator, MutatorError, Stamp, Stat, WorkspacePath,
    on_threads,
};
use tokio::sync::Mutex;

use crate::blob::RawWriter;
use crate::codec::{empty_file, open_emptied};
use crate::error::UndoError;
use crate::file_hash::hash_pair;
use crate::flight::{Batch, Finished, Flight, Keep, Pending, append_line, append_lines};
use crate::format::{
    BashCapture, ChangeRecord, FORMAT_VERSION, GitRecord, INFLIGHT_FILE, IndexRecord, InflightLine,
    TurnMeta,
};
use crate::image::{ContentHash, FileStamp, Image, KnownHash, Spares, copy_into, image_of};
use crate::lock::LockGuard;
use crate::report::TurnId;

/// How a turn begins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnStart {
    /// What the turn is about, for `shiro log` (usually the user's prompt).
    pub summary: String,
    /// An opaque marker the caller rewinds to when the turn is undone (e.g. the length of the
    /// message history at the start of the turn).
    pub history_marker: u64,
    /// The session making the turn; `None` for a headless command.
    pub session: Option<String>,
}

/// What capturing a pre-image is called in an error.
const OP_CAPTURE: &str = "record the undo pre-image of";

/// What a recorder needs of the store it records turns into, which
/// [`UndoStore`](crate::UndoStore) provides. The recorder writes the in-flight file; the store
/// keeps the log, its lock, the blobs, and recovery.
#[async_trait]
pub(crate) trait Ledger: Send + Sync + 'static {
    /// The store's directory, where the in-flight file is.
    fn dir(&self) -> &Path;

    /// The size from which a file is big (`StoreOptions::big_file_bytes`).
    fn big_file_bytes(&self) -> u64;

    /// The most bytes of small files' after-images a turn stores as it finishes
    /// (`StoreOptions::max_small_after_bytes`).
    fn max_small_after_bytes(&self) -> u64;

    /// The size from which a file is streamed rather than read whole
    /// (`StoreOptions::stream_file_bytes`).
    fn stream_file_bytes(&self) -> u64;

    /// The most bytes of new pre-images a turn holds in memory
    /// (`StoreOptions::max_held_bytes`).
    fn max_held_bytes(&self) -> u64;

    /// A new raw blob, to write a file's bytes into a piece at a time.
    fn raw_writer(&self) -> std::io::Result<RawWriter>;

    /// A name for [`Mutator::link_out`] to give a file the recorder keeps as a blob.
    fn keep_name(&self) -> PathBuf;

    /// Makes the file given the name `kept` the blob of `hash`; `false` when a blob holds
    /// those bytes already (see [`Blobs::keep_file`](crate::blob::Blobs::keep_file)).
    fn keep_file(&self, kept: &Path, hash: &ContentHash) -> std::io::Result<bool>;

    /// Gives the kept file of `hash` a copy of its own if it still shares its file with the
    /// workspace (see [`Blobs::unshare_if_shared`](crate::blob::Blobs::unshare_if_shared)).
    fn unshare_kept(&self, hash: &ContentHash) -> std::io::Result<()>;

    /// Removes `other`, a name outside the workspace that the kept file of `hash` also has
    /// (a tree moved out of the workspace whole), when it is that file's.
    fn release_kept(&self, hash: &ContentHash, other: &Path) -> std::io::Result<()>;

    /// Under the lock: removes the blobs of `hashes`, which the in-flight turn stored as it
    /// captured them (none held those bytes before) and then did not keep.
    fn discard_streamed(&self, hashes: &[ContentHash]) -> Result<(), UndoError>;

    /// Whether a blob holds the bytes of `hash` already.
    fn holds(&self, hash: &ContentHash) -> bool;

    /// [`Ledger::holds`] for a caller under the lock about to ask it of `questions` hashes:
    /// see [`Blobs::contains_many`](crate::blob::Blobs::contains_many).
    fn holds_many(&self, questions: usize) -> Box<dyn Fn(&ContentHash) -> bool + Send + Sync + '_>;

    /// Takes the store's lock (waiting up to the lock timeout), finishes what an earlier
    /// crash left through `workspace`, and returns the lock with the id of the next turn.
    async fn begin(&self, workspace: &dyn Mutator) -> Result<(LockGuard, TurnId), UndoError>;

    /// Under the lock that `begin` returned: stores the blobs of a finished turn and pushes
    /// the turn onto the log. Until it returns, the in-flight file is the turn's only record.
    fn commit(&self, finished: Finished, spares: &Spares) -> Result<(), UndoError>;
}

/// A [`Mutator`] that records every mutation of the in-flight turn, then performs it
/// through the `Mutator` it wraps. Tools use it like any other `Mutator`.
///
/// Before the first mutation of a path within a turn it stores the path's exact pre-image
/// (bytes, mode, link target, or absence) durably; later mutations of that path in the same
/// turn capture nothing. Reads pass straight through. Mutations outside a turn are passed
/// through unrecorded (the caller is expected to wrap every tool call in a turn). Mutations
/// are serialised while a turn is recorded, so a capture and its mutation are never split by
/// another one.
pub struct Recording<M> {
    inner: M,
    store: Box<dyn Ledger>,
    turn: Arc<Mutex<Option<InFlight>>>,
    /// Buffers of big files kept from one turn for the next.
    spares: Arc<Spares>,
}

/// The turn being recorded: it holds the store's lock until it finishes.
struct InFlight {
    _lock: LockGuard,
    file: File,
    flight: Flight,
    /// The blobs this turn stored as it captured files too big to hold: a turn that ends up
    /// changing nothing removes them, since no turn refers to them.
    streamed: Vec<ContentHash>,
    /// The `done` record of the last change, written with the next change's `doing` record
    /// (one write for both): until then, that change's `doing` record stands for it.
    ended: Option<InflightLine>,
}

impl<M> std::fmt::Debug for Recording<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("store", &self.store.dir())
            .finish_non_exhaustive()
    }
}

impl<M: Mutator> Recording<M> {
    pub(crate) fn new(store: impl Ledger, inner: M) -> Self {
        let spares = Arc::new(Spares::new(store.big_file_bytes()));
        Self {
            inner,
            store: Box::new(store),
            turn: Arc::new(Mutex::new(None)),
            spares,
        }
    }

    /// The wrapped mutator (whose changes are not recorded).
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Whether a turn is being recorded.
    pub async fn in_turn(&self) -> bool {
        self.turn.lock().await.is_some()
    }

    /// Begins a turn: takes the store's lock (waiting up to the lock timeout), finishes what
    /// an earlier crash left, and starts the durable in-flight record.
    pub async fn begin_turn(&self, start: TurnStart) -> Result<TurnId, UndoError> {
        let mut slot = self.turn.lock().await;
        if slot.is_some() {
            return Err(UndoError::TurnInProgress);
        }
        let (lock, id) = self.store.begin(&self.inner).await?;
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let meta = TurnMeta {
            id,
            time,
            summary: start.summary,
            history_marker: start.history_marker,
            session: start.session,
        };
        let path = self.store.dir().join(INFLIGHT_FILE);
        // The file is reused: creating one per turn cost a directory flush, which waits
        // behind whatever else the disk is writing. Records of an earlier turn that an
        // emptying lost in a crash are told apart by the turn they name.
        let mut file = open_emptied(&path).map_err(|err| UndoError::io("open", &path, err))?;
        append_line(
            &mut file,
            &InflightLine::Start {
                version: FORMAT_VERSION,
                turn: meta.clone(),
            },
            None,
            // The first capture flushes it; until then nothing needs it.
            false,
        )
        .map_err(|err| UndoError::io("write", &path, err))?;
        *slot = Some(InFlight {
            _lock: lock,
            file,
            flight: Flight::new(meta),
            streamed: Vec::new(),
            ended: None,
        });
        Ok(id)
    }

    /// Notes that a tool ran in this turn and the changes it reported (for `shiro log`).
    /// Ignored outside a turn.
    pub async fn note_tool(&self, name: &str, changes: &[Change]) {
        let mut slot = self.turn.lock().await;
        if let Some(turn) = slot.as_mut() {
            let line = InflightLine::Tool {
                turn: Some(turn.flight.meta.id),
                name: name.to_owned(),
                changes: changes.iter().map(ChangeRecord::from).collect(),
            };
            // Notes are not worth a flush of their own; the next capture flushes them. If the
            // write fails, the turn's summary is poorer but its undo is intact.
            let _ = append_line(&mut turn.file, &line, None, false);
            turn.flight.apply(line, None);
        }
    }

    /// Notes that a `bash` call ran in this turn, how its changes were captured, and, for
    /// [`BashCapture::Detect`], the paths it changed, which cannot be restored (a path this
    /// turn captured before the call can: undoing the turn puts back its earlier image).
    /// `shiro log` and undo name those paths, and say when a call ran with capture off.
    /// Ignored outside a turn.
    pub async fn note_bash(&self, capture: BashCapture, unrestorable: &[WorkspacePath]) {
        let mut slot = self.turn.lock().await;
        if let Some(turn) = slot.as_mut() {
            let line = InflightLine::Bash {
                turn: Some(turn.flight.meta.id),
                capture,
                unrestorable: unrestorable.iter().map(ToString::to_string).collect(),
            };
            // Flushed when it says what undo cannot do, lest a crash make that silent. If the
            // write fails, only a crash loses the note: the turn still holds it.
            let sync = capture == BashCapture::Off || !unrestorable.is_empty();
            let _ = append_line(&mut turn.file, &line, None, sync);
            turn.flight.apply(line, None);
            // What the call changed at paths captured before it is the turn's.
            let captured: Vec<&WorkspacePath> = (unrestorable.iter())
                .filter(|path| turn.flight.before.contains_key(*path))
                .collect();
            if !captured.is_empty() {
                self.stamp(&mut slot, &captured, false, false).await;
            }
        }
    }

    /// Records what a `bash` call moved in the git repository at the workspace root (HEAD,
    /// refs, the stash list, the index), so that undoing the turn moves it back. The index's
    /// bytes, before and after, are stored with the turn. Flushed before it returns: the
    /// call has happened, and a crash must not make it silent. Ignored outside a turn.
    pub async fn note_git(&self, change: &shiro_tools::git::GitChange) -> Result<(), UndoError> {
        let mut slot = self.turn.lock().await;
        let Some(turn) = slot.as_mut() else {
            return Ok(());
        };
        if change.is_empty() {
            return Ok(());
        }
        let path = self.store.dir().join(INFLIGHT_FILE);
        let failed = |err| UndoError::io("write", &path, err);
        let id = Some(turn.flight.meta.id);
        let mut index = None;
        if let Some(change) = &change.index {
            let mut hash_of = |bytes: &Option<Vec<u8>>| -> Result<_, UndoError> {
                let Some(bytes) = bytes else {
                    return Ok(None);
                };
                let hash = ContentHash::of(bytes);
                if !self.store.holds(&hash) && !turn.flight.pending.contains_key(&hash) {
                    let line = InflightLine::Blob {
                        turn: id,
                        hash,
                        bytes: bytes.len() as u64,
                    };
                    append_line(&mut turn.file, &line, Some(bytes), false).map_err(failed)?;
                    turn.flight.apply(line, Some(Pending::Held(bytes.clone())));
                }
                Ok(Some(hash))
            };
            index = Some(IndexRecord {
                before: hash_of(&change.before)?,
                after: hash_of(&change.after)?,
            });
        }
        let line = InflightLine::Git {
            turn: id,
            git: GitRecord {
                moved: change.moved.clone(),
                index,
            },
        };
        append_line(&mut turn.file, &line, None, true).map_err(failed)?;
        turn.flight.apply(line, None);
        Ok(())
    }

    /// Finishes the turn. A turn that changed at least one path is pushed onto the log (which
    /// clears the redo stack) and its id returned; otherwise nothing is recorded and `None`
    /// is returned. Call it also when the turn failed or was interrupted: what it changed is
    /// then still undoable. Releases the store's lock.
    ///
    /// Should this fail, the in-flight record stays on disk and the turn is recovered by the
    /// next operation on the store.
    pub async fn finish_turn(&self) -> Result<Option<TurnId>, UndoError> {
        let Some(InFlight {
            _lock,
            file,
            flight,
            streamed,
            ..
        }) = self.turn.lock().await.take()
        else {
            return Ok(None);
        };
        drop(file);
        let id = flight.meta.id;
        let keep = Keep {
            big: self.store.big_file_bytes(),
            small: self.store.max_small_after_bytes(),
            stream: self.store.stream_file_bytes(),
        };
        let record = flight
            .finish(&self.inner, false, keep, &self.spares)
            .await?;
        let path = self.store.dir().join(INFLIGHT_FILE);
        // Only after the commit: until the log holds the turn, the in-flight file is its only
        // record (and holds the bytes of its new pre-images).
        match record {
            Some(finished) => {
                self.store.commit(finished, &self.spares)?;
                // Not flushed: should a crash bring the records back, their turn id is below
                // the log's next id, and recovery knows them for a leftover.
                empty_file(&path, false).map_err(|err| UndoError::io("empty", &path, err))?;
                drop(_lock);
                Ok(Some(id))
            }
            None => {
                // Flushed: a leftover of an empty turn would be recovered against whatever
                // the workspace holds by then.
                empty_file(&path, true).map_err(|err| UndoError::io("empty", &path, err))?;
                self.store.discard_streamed(&streamed)?;
                drop(_lock);
                Ok(None)
            }
        }
    }

    /// Captures now the pre-images of `paths`, which a tool call is about to change (see
    /// `Tool::touched_paths`), with one flush for all of them: a call that changes a thousand
    /// files then costs one flush, not a thousand. A path the call then leaves alone is not
    /// recorded. Outside a turn it does nothing; a path captured already is skipped.
    pub async fn capture_ahead(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        self.prepare(paths, &[]).await
    }

    /// Notes that a change of `paths` begins (see [`InflightLine::Doing`]), unflushed, as
    /// [`Recording::stamp`] notes its end: a kill in between leaves them to the turn.
    fn doing(&self, slot: &mut Option<InFlight>, paths: &[&WorkspacePath]) {
        let Some(turn) = slot.as_mut() else {
            return;
        };
        let line = InflightLine::Doing {
            turn: Some(turn.flight.meta.id),
            paths: paths.iter().map(ToString::to_string).collect(),
        };
        let lines: Vec<&InflightLine> = turn.ended.iter().chain([&line]).collect();
        // Should the write fail, a crash before the change's end takes what it made for
        // someone else's, and keeps it.
        let _ = append_lines(&mut turn.file, &lines);
        turn.ended = None;
    }

    /// Notes what a change of the turn just left at `paths` (see [`InflightLine::Done`]):
    /// their stamps, or with `gone` absence, without looking. So the end of the turn, or
    /// the recovery after a crash, can tell a later change by someone else from the turn's
    /// own. Not flushed: the page cache keeps it through a kill, and where a power cut loses
    /// it, the path is taken as someone else's and kept as it is (never the other way). The
    /// end of a change whose start was noted (`after_doing`) is written with the next one's
    /// start; another is written now.
    async fn stamp(
        &self,
        slot: &mut Option<InFlight>,
        paths: &[&WorkspacePath],
        gone: bool,
        after_doing: bool,
    ) {
        let Some(turn) = slot.as_mut() else {
            return;
        };
        let stamps = if gone {
            vec![Some(Stamp::Absent); paths.len()]
        } else {
            let owned: Vec<WorkspacePath> = paths.iter().map(|path| (*path).clone()).collect();
            self.inner.stamps(&owned).await
        };
        let line = InflightLine::Done {
            turn: Some(turn.flight.meta.id),
            stamps: (paths.iter().zip(&stamps))
                .map(|(path, stamp)| (path.to_string(), *stamp))
                .collect(),
        };
        if after_doing {
            turn.ended = Some(line);
        } else {
            // Should the write fail, only a crash loses the stamps: the turn still holds them.
            let lines: Vec<&InflightLine> = turn.ended.iter().chain([&line]).collect();
            let _ = append_lines(&mut turn.file, &lines);
            turn.ended = None;
        }
        for (path, stamp) in paths.iter().zip(stamps) {
            turn.flight.done.insert((*path).clone(), stamp);
        }
    }

    /// Keeps the file at `path`, too big to hold, as a blob without copying it: gives it a
    /// second name in the store ([`Mutator::link_out`]), hashes it through that name, and makes
    /// it the blob of its hash. Returns the hash, the length, and whether the blob is new;
    /// `None` when the file cannot be kept so (the caller copies it).
    ///
    /// `incoming` is the new version about to replace the file, if the caller named it: when
    /// it is big too, the two are hashed together (see [`hash_pair`]), and the new one's hash
    /// is noted in `known_after`, for the end of the turn.
    ///
    /// The blob shares the file with the workspace until the change replaces the file (a
    /// bash command's new version moved in, a removal); meanwhile it does not count as stored,
    /// and a turn that ends without replacing it stores a copy of its own (see
    /// [`Blobs::unshare`](crate::blob::Blobs::unshare)).
    async fn keep(
        &self,
        path: &WorkspacePath,
        incoming: Option<&Path>,
        known_after: &mut BTreeMap<WorkspacePath, KnownHash>,
    ) -> Result<Option<(ContentHash, u64, bool)>, MutatorError> {
        let kept = self.store.keep_name();
        if !self.inner.link_out(path, &kept).await? {
            return Ok(None);
        }
        let stream = self.store.stream_file_bytes();
        let hashed = match incoming {
            Some(source) => hash_with_incoming(&kept, source, stream),
            None => hash_file(&kept).map(|(hash, len)| (hash, len, None)),
        };
        let stored = hashed.and_then(|(hash, len, after)| {
            if let Some(after) = after {
                known_after.insert(path.clone(), after);
            }
            let new = self.store.keep_file(&kept, &hash)?;
            Ok((hash, len, new))
        });
        match stored {
            Ok(stored) => Ok(Some(stored)),
            Err(source) => {
                let _ = std::fs::remove_file(&kept);
                Err(MutatorError::Io {
                    op: OP_CAPTURE,
                    path: path.clone(),
                    source,
                })
            }
        }
    }

    /// Captures the pre-image of each path not yet captured in the in-flight turn, durably:
    /// their records are appended, then flushed once, and only then count as captured.
    async fn capture(
        &self,
        slot: &mut Option<InFlight>,
        paths: &[&WorkspacePath],
        incoming: &[Incoming<'_>],
    ) -> Result<(), MutatorError> {
        let (Some(turn), Some(&first)) = (slot.as_mut(), paths.first()) else {
            return Ok(());
        };
        let batch_failed = |source| MutatorError::Io {
            op: OP_CAPTURE,
            path: first.clone(),
            source,
        };
        // Looking on disk for each of many paths took a third of a small file's capture.
        let holds = self.store.holds_many(paths.len());
        let mut appended = Vec::new();
        let mut held_in_batch = 0u64;
        let mut seen = std::collections::BTreeSet::new();
        // Internal paths are refused by every mutator; there is nothing to protect.
        let todo: Vec<&WorkspacePath> = (paths.iter().copied())
            .filter(|path| {
                !(path.is_internal() || turn.flight.before.contains_key(*path))
                    && seen.insert(*path)
            })
            .collect();
        // Many paths (a bash command's) are looked at a window at a time, on several threads
        // where the mutator can; their small files are read then too.
        let many = todo.len() >= LOOK_AHEAD_FROM;
        let hashers = if many {
            crate::pack::worker_threads(HASH_THREADS)
        } else {
            1
        };
        let mut ahead = std::collections::VecDeque::new();
        // Written as one batch, flushed once.
        let mut records = Batch::new(&mut turn.file).map_err(batch_failed)?;
        for (index, &path) in todo.iter().enumerate() {
            if many && ahead.is_empty() {
                let window: Vec<WorkspacePath> = (todo.iter().skip(index).take(LOOK_AHEAD))
                    .map(|path| (*path).clone())
                    .collect();
                let looked = self.inner.real_stat_many(&window, LOOK_AHEAD_READ).await;
                // An answer missing would give later paths earlier ones' entries.
                if looked.len() == window.len() {
                    let hashes = hash_read(&looked, hashers);
                    ahead = looked.into_iter().zip(hashes).collect();
                }
            }
            let failed = |source: std::io::Error| MutatorError::Io {
                op: OP_CAPTURE,
                path: path.clone(),
                source,
            };
            // The entry at the path itself: a mutation never acts through a link, so what a
            // link on the way leads to is another path's, and this one is absent.
            let (stat, read, hashed) = match ahead.pop_front() {
                Some((looked, hash)) => {
                    let Looked { stat, bytes } = looked?;
                    (stat, bytes, hash)
                }
                None => (self.inner.real_stat(path).await?, None, None),
            };
            let (image, bytes) = match (stat, read) {
                // Too big to hold: kept under a second name when it can be (the change to
                // come replaces it whole, never writes into it), else copied into a blob of
                // its own on the way; either durably, before its record says the store holds
                // it.
                (Stat::File { mode, len }, _) if len >= self.store.stream_file_bytes() => {
                    let source = (incoming.iter())
                        .find(|new| new.path == path)
                        .map(|new| new.source);
                    let known_after = &mut turn.flight.known_after;
                    let (hash, len) = match self.keep(path, source, known_after).await? {
                        Some((hash, len, stored)) => {
                            if stored {
                                turn.streamed.push(hash);
                            }
                            (hash, len)
                        }
                        None => {
                            let mut writer = self.store.raw_writer().map_err(failed)?;
                            copy_into(
                                &self.inner,
                                path,
                                &mut |piece| writer.write(piece),
                                OP_CAPTURE,
                            )
                            .await?;
                            let (hash, len) = writer.peek();
                            if !self.store.holds(&hash) {
                                writer.finish().map_err(failed)?;
                                turn.streamed.push(hash);
                            }
                            (hash, len)
                        }
                    };
                    (Image::File { mode, len, hash }, None)
                }
                (Stat::File { mode, .. }, Some(bytes)) => {
                    let hash = hashed.unwrap_or_else(|| ContentHash::of(&bytes));
                    let image = Image::File {
                        mode,
                        len: bytes.len() as u64,
                        hash,
                    };
                    (image, Some(bytes))
                }
                (stat, _) => image_of(&self.inner, path, stat, &self.spares).await?,
            };
            // The bytes go into the in-flight file with their record (one flush for both),
            // unless a blob already holds them or this turn already carries them; they become
            // a blob when the turn finishes. A big file's bytes, stored already, stay in
            // memory until then: its new version is stored as a delta against them.
            let big = self.store.big_file_bytes();
            let payload = match (&image, bytes) {
                (Image::File { hash, .. }, Some(bytes))
                    if !turn.flight.pending.contains_key(hash) =>
                {
                    if !holds(hash) {
                        Some(bytes)
                    } else {
                        if bytes.len() as u64 >= big {
                            turn.flight.held.insert(*hash, bytes);
                        }
                        None
                    }
                }
                _ => None,
            };
            let line = InflightLine::Path {
                turn: Some(turn.flight.meta.id),
                path: path.to_string(),
                before: image,
                bytes: payload.as_ref().map(|bytes| bytes.len() as u64),
            };
            let offset = records.push(&line, payload.as_deref()).map_err(failed)?;
            // Held until the turn is stored while the turn's budget allows (a big file's
            // always: its delta is made against it); else read back from the file then.
            let payload = payload.map(|bytes| {
                let len = bytes.len() as u64;
                let budget = turn.flight.held_bytes.saturating_add(held_in_batch);
                if Pending::is_held(len, budget, big, self.store.max_held_bytes()) {
                    held_in_batch += len;
                    Pending::Held(bytes)
                } else {
                    self.spares.give([bytes]);
                    Pending::Filed { offset, len }
                }
            });
            appended.push((line, payload));
        }
        let durable = !records.is_empty();
        records.finish(durable).map_err(batch_failed)?;
        for (line, payload) in appended {
            turn.flight.apply(line, payload);
        }
        Ok(())
    }
}

/// From this many paths to capture at once, they are looked at through
/// [`Mutator::real_stat_many`], [`LOOK_AHEAD`] at a time.
const LOOK_AHEAD_FROM: usize = 64;
/// How many paths [`Mutator::real_stat_many`] is asked about at once.
const LOOK_AHEAD: usize = 256;
/// Files shorter than this are read as they are looked at: a window of [`LOOK_AHEAD`] paths
/// then holds at most 64 MiB. Longer ones are read one at a time, into spare buffers.
const LOOK_AHEAD_READ: u64 = 256 << 10;

/// At most how many threads hash the files of a window that [`Mutator::real_stat_many`]
/// read: on an `rm -rf` of 100,000 files, hashing them one by one on the capturing thread
/// took 0.3 s, while the other processors waited.
const HASH_THREADS: usize = 4;
/// Fewer bytes read than this are hashed on the capturing thread: a thread costs more.
const HASH_IN_PARALLEL_FROM: usize = 256 << 10;

/// The hash of each file that `looked` holds the bytes of, in order, hashed on up to
/// `threads` threads.
fn hash_read(looked: &[Result<Looked, MutatorError>], threads: usize) -> Vec<Option<ContentHash>> {
    let hash_part = |_, part: &[Result<Looked, MutatorError>]| -> Vec<Option<ContentHash>> {
        (part.iter())
            .map(|looked| match looked {
                Ok(Looked {
                    stat: Stat::File { .. },
                    bytes: Some(bytes),
                }) => Some(ContentHash::of(bytes)),
                _ => None,
            })
            .collect()
    };
    let read: usize = (looked.iter())
        .filter_map(|looked| looked.as_ref().ok()?.bytes.as_ref().map(Vec::len))
        .sum();
    if threads < 2 || read < HASH_IN_PARALLEL_FROM {
        return hash_part(0, looked);
    }
    // A part whose thread failed is hashed as its files come.
    let lost = |_, part: &[Result<Looked, MutatorError>]| vec![None; part.len()];
    on_threads(looked, looked.len().div_ceil(threads), hash_part, lost)
        .into_iter()
        .flatten()
        .collect()
}

/// The BLAKE3 hash and the length of the file at `path` (see [`crate::file_hash::hash_file_from`]).
fn hash_file(path: &Path) -> std::io::Result<(ContentHash, u64)> {
    let (hash, len) = crate::file_hash::hash_file_from(&mut crate::ground::open_read(path)?, 0)?;
    Ok((hash.into(), len))
}

/// The hash and the length of the file at `kept`, and, when the file at `source` (its new
/// version) has `stream` bytes or more, that file's hash with its stamp, the two hashed
/// together (see [`hash_pair`]). The new version's hash is left out should its stamp change
/// while it is read.
///
/// The new version is the caller's to move in, or fail to, later: should it fail to be read
/// now, the old one is hashed alone, as it would be without it, and only a failure to read
/// that fails the capture.
fn hash_with_incoming(
    kept: &Path,
    source: &Path,
    stream: u64,
) -> std::io::Result<(ContentHash, u64, Option<KnownHash>)> {
    let alone = || hash_file(kept).map(|(hash, len)| (hash, len, None));
    let Ok(mut new) = crate::ground::open_read(source) else {
        return alone();
    };
    let stamp = match new.metadata() {
        Ok(meta) if meta.is_file() && meta.len() >= stream => FileStamp::of(&meta),
        _ => return alone(),
    };
    let mut old = crate::ground::open_read(kept)?;
    let Ok([(old_hash, old_len), (new_hash, _)]) = hash_pair(&mut old, &mut new) else {
        return alone();
    };
    let unchanged = (new.metadata()).is_ok_and(|meta| FileStamp::of(&meta) == stamp);
    let after = unchanged.then_some((stamp, new_hash.into()));
    Ok((old_hash.into(), old_len, after))
}

#[async_trait]
impl<M: Mutator> Mutator for Recording<M> {
    fn root(&self) -> &Path {
        self.inner.root()
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.stat(path).await
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        self.inner.read(path).await
    }

    async fn open_read(&self, path: &WorkspacePath) -> Result<Option<std::fs::File>, MutatorError> {
        self.inner.open_read(path).await
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        self.inner.read_dir(path).await
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.write(path, bytes, mode).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn adopt(
        &self,
        source: &Path,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        // A new version with other names is copied into place rather than moved: the file it
        // replaces would then be read whole into memory (a write never goes into a file that a
        // kept blob shares), unless the blob gets a copy of its own first.
        let moves = std::fs::symlink_metadata(source).is_ok_and(|meta| meta.nlink() == 1);
        if !moves
            && let Some(turn) = slot.as_ref()
            && let Some(hash) = (turn.flight.before.get(path))
                .and_then(|image| image.streamed_hash(self.store.stream_file_bytes()))
        {
            (self.store.unshare_kept(&hash)).map_err(|source| MutatorError::Io {
                op: OP_CAPTURE,
                path: path.clone(),
                source,
            })?;
        }
        self.doing(&mut slot, &[path]);
        let result = self.inner.adopt(source, path, mode).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.real_stat(path).await
    }

    async fn real_stat_many(
        &self,
        paths: &[WorkspacePath],
        read_below: u64,
    ) -> Vec<Result<Looked, MutatorError>> {
        self.inner.real_stat_many(paths, read_below).await
    }

    async fn link_out(&self, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
        self.inner.link_out(path, to).await
    }

    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        self.inner.real_path(path).await
    }

    async fn remove_partial_writes(&self, paths: &[WorkspacePath]) -> Result<usize, MutatorError> {
        self.inner.remove_partial_writes(paths).await
    }

    /// Captures the pre-images of `paths` now, with one flush (see
    /// [`Recording::capture_ahead`]); a big file that one of `incoming` replaces is hashed
    /// with it.
    async fn prepare(
        &self,
        paths: &[WorkspacePath],
        incoming: &[Incoming<'_>],
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        let paths: Vec<&WorkspacePath> = paths.iter().collect();
        self.capture(&mut slot, &paths, incoming).await
    }

    async fn read_into(&self, path: &WorkspacePath, buf: Vec<u8>) -> Result<Vec<u8>, MutatorError> {
        self.inner.read_into(path, buf).await
    }

    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        self.inner.read_with(path, sink).await
    }

    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.overwrite(path, bytes, mode).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn std::io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.overwrite_from(path, source, len, mode).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.set_mode(path, mode).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.create_dir(path).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.symlink(target, path).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.remove_file(path).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[path], &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.remove_dir(path).await;
        self.stamp(&mut slot, &[path], false, true).await;
        result
    }

    /// Captures the directory and every path listed under it, each absent before the call (in
    /// one batch, unless the caller prepared them), then moves the tree in.
    async fn move_tree_in(
        &self,
        source: &Path,
        path: &WorkspacePath,
        listed: &[WorkspacePath],
    ) -> Result<bool, MutatorError> {
        let mut slot = self.turn.lock().await;
        let paths: Vec<&WorkspacePath> = std::iter::once(path).chain(listed).collect();
        self.capture(&mut slot, &paths, &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.move_tree_in(source, path, listed).await;
        self.stamp(&mut slot, &paths, false, true).await;
        result
    }

    /// Captures the directory and everything listed under it (in one batch, unless the
    /// caller prepared them), then removes it.
    async fn remove_tree(
        &self,
        path: &WorkspacePath,
        listed: &[DirEntry],
        aside: &Path,
    ) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        let paths: Vec<&WorkspacePath> = std::iter::once(path)
            .chain(listed.iter().map(|entry| &entry.path))
            .collect();
        self.capture(&mut slot, &paths, &[]).await?;
        self.doing(&mut slot, &[path]);
        let result = self.inner.remove_tree(path, listed, aside).await;
        // Removed, the tree is gone whole: no need to look.
        self.stamp(&mut slot, &paths, result.is_ok(), true).await;
        result?;
        // Moved out whole, the tree still names the big files kept from it, until its removal
        // in the background; those names go now, so that the blobs are left theirs alone
        // rather than copied as the turn is stored.
        let Some(turn) = slot.as_ref() else {
            return Ok(());
        };
        let stream = self.store.stream_file_bytes();
        for entry in listed {
            let (Some(hash), Some(rest)) = (
                (turn.flight.before.get(&entry.path)).and_then(|image| image.streamed_hash(stream)),
                (entry.path.as_str().strip_prefix(path.as_str()))
                    .and_then(|rest| rest.strip_prefix('/')),
            ) else {
                continue;
            };
            self.store
                .release_kept(&hash, &aside.join(rest))
                .map_err(|source| MutatorError::Io {
                    op: OP_CAPTURE,
                    path: entry.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        let mut slot = self.turn.lock().await;
        self.capture(&mut slot, &[from, to], &[]).await?;
        self.doing(&mut slot, &[from, to]);
        let result = self.inner.rename(from, to).await;
        self.stamp(&mut slot, &[from, to], false, true).await;
        result
    }

    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        self.inner.sync(paths).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shiro_tools::{Looked, MutatorError, Stat};

    use crate::image::ContentHash;

    /// Each file read is hashed, in order, on one thread or several; what holds no bytes
    /// (a directory, a file too long to read, a failure) gets no hash.
    #[test]
    fn a_window_is_hashed_in_order_on_any_number_of_threads() {
        let file = |len: usize, seed: u8| {
            let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
            Ok(Looked {
                stat: Stat::File {
                    mode: 0o644,
                    len: len as u64,
                },
                bytes: Some(bytes),
            })
        };
        let mut looked = Vec::new();
        for i in 0..40u8 {
            looked.push(file(usize::from(i) * 1000, i | 1));
            looked.push(match i % 3 {
                0 => Ok(Looked {
                    stat: Stat::Dir { mode: 0o755 },
                    bytes: None,
                }),
                1 => Ok(Looked {
                    stat: Stat::File {
                        mode: 0o644,
                        len: 1 << 30,
                    },
                    bytes: None,
                }),
                _ => Err(MutatorError::Interrupted("gone".to_owned())),
            });
        }
        let expected: Vec<Option<ContentHash>> = (looked.iter())
            .map(|looked| {
                let bytes = looked.as_ref().ok()?.bytes.as_ref()?;
                Some(ContentHash::of(bytes))
            })
            .collect();
        assert!(
            expected.iter().flatten().count() == 40,
            "every file read is hashed"
        );
        for threads in [1, 2, 3, 4] {
            assert_eq!(super::hash_read(&looked, threads), expected, "{threads}");
        }
        // Too few bytes to split: hashed here, the same.
        assert_eq!(super::hash_read(&looked[..4], 4), expected[..4]);
    }

    // The store is `Send + Sync` because `Ledger`, which it implements, requires it.
    #[test]
    fn a_recording_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Recording<shiro_tools::MemMutator>>();
    }
}
