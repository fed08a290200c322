//! The records of the on-disk format (version 11), as described in `docs/formats.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shiro_tools::git::Move;
use shiro_tools::{Change, Stamp, WorkspacePath};

use crate::deferred::{Checked, Deferred};
use crate::error::UndoError;
use crate::image::{ContentHash, Image};
use crate::report::{Direction, TurnId, TurnSummary};

/// The format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 12;
/// The `format` field of the log's header line.
pub(crate) const LOG_FORMAT: &str = "shiro-undo-log";

/// File names inside the store directory.
pub(crate) const LOG_FILE: &str = "log.jsonl";
pub(crate) const INFLIGHT_FILE: &str = "inflight.jsonl";
/// Where stores of format 3 and older kept a restore under way (now a `begin` record of the
/// log); still read, so that a restore such a store's crash interrupted is completed.
pub(crate) const JOURNAL_FILE: &str = "journal.jsonl";
pub(crate) const LOCK_FILE: &str = "lock";
/// Which path a restore is writing (see `docs/formats.md`, "Restores").
pub(crate) const PROGRESS_FILE: &str = "progress";
pub(crate) const BLOBS_DIR: &str = "blobs";
/// Where a damaged log is copied before it is rewritten without its bad records.
pub(crate) const DAMAGED_LOG_FILE: &str = "log.damaged.jsonl";

/// What is known of a turn from its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TurnMeta {
    pub id: TurnId,
    pub time: u64,
    pub summary: String,
    pub history_marker: u64,
    pub session: Option<String>,
}

/// A tool-reported change, with plain string paths so that reading it back is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ChangeRecord {
    Added { path: String },
    Modified { path: String },
    Deleted { path: String },
    Moved { from: String, to: String },
}

impl From<&Change> for ChangeRecord {
    fn from(change: &Change) -> Self {
        match change {
            Change::Added { path } => ChangeRecord::Added {
                path: path.to_string(),
            },
            Change::Modified { path } => ChangeRecord::Modified {
                path: path.to_string(),
            },
            Change::Deleted { path } => ChangeRecord::Deleted {
                path: path.to_string(),
            },
            Change::Moved { from, to } => ChangeRecord::Moved {
                from: from.to_string(),
                to: to.to_string(),
            },
        }
    }
}

impl ChangeRecord {
    fn to_change(&self) -> Option<Change> {
        let p = |s: &str| WorkspacePath::from_relative(s).ok();
        Some(match self {
            ChangeRecord::Added { path } => Change::Added { path: p(path)? },
            ChangeRecord::Modified { path } => Change::Modified { path: p(path)? },
            ChangeRecord::Deleted { path } => Change::Deleted { path: p(path)? },
            ChangeRecord::Moved { from, to } => Change::Moved {
                from: p(from)?,
                to: p(to)?,
            },
        })
    }
}

/// One path a turn touched: its image before the turn and after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PathRecord {
    pub path: String,
    pub before: Image,
    pub after: Image,
}

/// What tools reported is read as it is: a change naming a path that is not a workspace path
/// is left out of the turn's summary.
impl Checked for Vec<ChangeRecord> {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A turn's paths: each a valid workspace path, once.
impl Checked for Vec<PathRecord> {
    fn check(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for record in self {
            WorkspacePath::from_relative(&record.path)
                .map_err(|err| format!("invalid path {:?}: {err}", record.path))?;
            if !seen.insert(record.path.as_str()) {
                return Err(format!("path {} listed twice", record.path));
            }
        }
        Ok(())
    }
}

/// A finished turn as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TurnRecord {
    pub meta: TurnMeta,
    pub tools: Vec<String>,
    /// What its tools reported, decoded when asked for (see [`Deferred`]): a bash call's
    /// list is as long as its paths'.
    pub changes: Deferred<Vec<ChangeRecord>>,
    pub ran_bash: bool,
    /// Whether a `bash` call of the turn ran with capture off: what it did is not known.
    /// Format 6; read as `ran_bash` from older formats, which never captured bash.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bash_uncaptured: bool,
    /// The paths `bash` calls of the turn changed that cannot be restored (capture `detect`);
    /// sorted, each once. Format 6.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bash_unrestorable: Vec<String>,
    /// The paths the turn changed that someone else (the user, another program) changed
    /// after the turn's last change to them, or while its process was stopped: kept as they
    /// are, so neither undo nor redo touches them. Sorted, each once. Format 12.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_since: Vec<String>,
    pub recovered: bool,
    /// Sorted by path, each path once. Decoded when asked for (see [`Deferred`]): use
    /// [`TurnRecord::paths`].
    pub paths: Deferred<Vec<PathRecord>>,
    /// The packs (`blobs/<name>.pack`) holding the copies its restores kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packs: Vec<String>,
    /// Why its last restore could not be made (a damaged copy, a restore rolled back or
    /// abandoned); cleared when a restore of it completes. Format 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
    /// On the redo stack: the first turn of the rewind that undid it with others (see
    /// [`Begun`]'s `members`), so that a redo brings them all back together.
    /// Format 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<TurnId>,
    /// What the turn's `bash` calls did to the git repository at the workspace root.
    /// Format 9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitRecord>,
}

/// What a turn's `bash` calls moved in the git repository at the workspace root (see
/// [`shiro_tools::git`]): each thing from before the first call that moved it to after the
/// last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GitRecord {
    /// By name: `HEAD`, `refs/…`, `logs/refs/stash`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moved: BTreeMap<String, Move>,
    /// The index, when its entries changed: its bytes before and after, stored as blobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexRecord>,
}

/// The index file before and after a turn, by the hash of its bytes; `None` when there was
/// no index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexRecord {
    pub before: Option<ContentHash>,
    pub after: Option<ContentHash>,
}

impl GitRecord {
    /// Adds what a later call (or turn) moved: a thing moved already keeps its first
    /// `before` and takes the later `after`. Things back where they began are dropped.
    pub(crate) fn then(&mut self, later: &GitRecord) {
        for (name, moved) in &later.moved {
            self.moved
                .entry(name.clone())
                .and_modify(|known| known.after = moved.after.clone())
                .or_insert_with(|| moved.clone());
        }
        self.index = match (self.index, later.index) {
            (Some(first), Some(last)) => Some(IndexRecord {
                before: first.before,
                after: last.after,
            }),
            (first, last) => first.or(last),
        };
        self.moved.retain(|_, moved| moved.before != moved.after);
        self.index = self.index.filter(|index| index.before != index.after);
    }

    /// Whether it moved nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.index.is_none()
    }

    /// The hashes of the index bytes it keeps.
    pub(crate) fn hashes(&self) -> impl Iterator<Item = ContentHash> + '_ {
        self.index
            .iter()
            .flat_map(|index| [index.before, index.after])
            .flatten()
    }

    /// Checks what a checksum cannot: every name is one [`shiro_tools::git`] can set.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match self
            .moved
            .keys()
            .find(|name| !shiro_tools::git::valid_name(name))
        {
            Some(name) => Err(format!("invalid git name {name:?}")),
            None => Ok(()),
        }
    }
}

impl TurnRecord {
    /// A turn `id` that touched nothing, for tests.
    #[cfg(test)]
    pub(crate) fn empty(id: u64) -> Self {
        Self {
            meta: TurnMeta {
                id: TurnId(id),
                time: 0,
                summary: format!("turn {id}"),
                history_marker: id,
                session: None,
            },
            tools: Vec::new(),
            changes: Deferred::new(Vec::new()),
            ran_bash: false,
            bash_uncaptured: false,
            bash_unrestorable: Vec::new(),
            changed_since: Vec::new(),
            recovered: false,
            paths: Deferred::new(Vec::new()),
            packs: Vec::new(),
            damage: None,
            group: None,
            git: None,
        }
    }

    /// Checks what a checksum cannot: its packs, git names and the paths bash changed are
    /// valid. Its paths are checked when decoded (see [`TurnRecord::paths`]).
    pub(crate) fn validate(&self) -> Result<(), String> {
        for pack in &self.packs {
            let plain = |c: char| c.is_ascii_digit() || c.is_ascii_lowercase() || c == '-';
            if pack.is_empty() || pack.len() > 64 || !pack.chars().all(plain) {
                return Err(format!("invalid pack name in turn {}", self.meta.id));
            }
        }
        if let Some(git) = &self.git {
            git.validate()
                .map_err(|err| format!("{err} in turn {}", self.meta.id))?;
        }
        let sorted = |paths: &[String], what: &str| {
            for (i, path) in paths.iter().enumerate() {
                WorkspacePath::from_relative(path)
                    .map_err(|err| format!("invalid path in turn {}: {err}", self.meta.id))?;
                if i > 0 && paths[i - 1] >= *path {
                    return Err(format!(
                        "{what} in turn {} are not sorted, each once",
                        self.meta.id
                    ));
                }
            }
            Ok(())
        };
        sorted(&self.bash_unrestorable, "paths bash changed")?;
        sorted(&self.changed_since, "paths changed since")
    }

    /// Reads a record of format `version` as the current format: before format 6, bash was
    /// never captured.
    pub(crate) fn upgrade(&mut self, version: u32) {
        if version < 6 && self.ran_bash {
            self.bash_uncaptured = true;
        }
    }

    /// The paths it touched, sorted, each once: decoded and checked the first time they are
    /// asked for. `Err` says why they cannot be (see [`Deferred`]).
    pub(crate) fn paths(&self) -> Result<&[PathRecord], UndoError> {
        (self.paths.get().map(Vec::as_slice)).map_err(|reason| self.unreadable(reason))
    }

    /// What its tools reported, decoded the first time it is asked for.
    pub(crate) fn changes(&self) -> Result<&[ChangeRecord], UndoError> {
        (self.changes.get().map(Vec::as_slice)).map_err(|reason| self.unreadable(reason))
    }

    /// [`TurnRecord::paths`], to change.
    pub(crate) fn paths_mut(&mut self) -> Result<&mut Vec<PathRecord>, UndoError> {
        let id = self.meta.id;
        (self.paths.get_mut()).map_err(|reason| UndoError::UnreadableTurn { id, reason })
    }

    fn unreadable(&self, reason: String) -> UndoError {
        UndoError::UnreadableTurn {
            id: self.meta.id,
            reason,
        }
    }

    /// The paths as workspace paths. They are checked when decoded, so none is dropped.
    pub(crate) fn workspace_paths(&self) -> Result<Vec<(WorkspacePath, &PathRecord)>, UndoError> {
        Ok((self.paths()?.iter())
            .filter_map(|record| {
                WorkspacePath::from_relative(&record.path)
                    .ok()
                    .map(|p| (p, record))
            })
            .collect())
    }

    /// Every blob hash the turn refers to; `Err` when its paths cannot be read.
    pub(crate) fn hashes(&self) -> Result<impl Iterator<Item = ContentHash> + '_, UndoError> {
        Ok((self.paths()?.iter())
            .flat_map(|r| [r.before.hash(), r.after.hash()])
            .flatten()
            .chain(self.git.iter().flat_map(GitRecord::hashes)))
    }

    pub(crate) fn summary(&self) -> TurnSummary {
        // What cannot be read shows as the turn's damage (a restore of it reports it too).
        let mut damage = self.damage.clone();
        let mut changes: Vec<Change> = match self.changes() {
            Ok(records) => records.iter().filter_map(ChangeRecord::to_change).collect(),
            Err(err) => {
                damage = damage.or(Some(err.to_string()));
                Vec::new()
            }
        };
        if changes.is_empty() {
            match self.paths() {
                Ok(paths) => changes = paths.iter().filter_map(derived_change).collect(),
                Err(err) => damage = damage.or(Some(err.to_string())),
            }
        }
        TurnSummary {
            id: self.meta.id,
            time: self.meta.time,
            summary: self.meta.summary.clone(),
            session: self.meta.session.clone(),
            history_marker: self.meta.history_marker,
            tools: self.tools.clone(),
            changes,
            ran_bash: self.ran_bash,
            bash_uncaptured: self.bash_uncaptured,
            bash_unrestorable: self
                .bash_unrestorable
                .iter()
                .filter_map(|path| WorkspacePath::from_relative(path).ok())
                .collect(),
            changed_since: (self.changed_since.iter())
                .filter_map(|path| WorkspacePath::from_relative(path).ok())
                .collect(),
            recovered: self.recovered,
            damage,
            git: self
                .git
                .as_ref()
                .map(|git| shiro_tools::git::describe(&git.moved, git.index.is_some())),
        }
    }
}

/// The change a path record shows, for turns whose tools reported none. Directories are left
/// out, as tools leave them out.
fn derived_change(record: &PathRecord) -> Option<Change> {
    let path = WorkspacePath::from_relative(&record.path).ok()?;
    let is_entry = |image: &Image| matches!(image, Image::File { .. } | Image::Symlink { .. });
    match (is_entry(&record.before), is_entry(&record.after)) {
        (false, true) => Some(Change::Added { path }),
        (true, false) => Some(Change::Deleted { path }),
        (true, true) => Some(Change::Modified { path }),
        (false, false) => None,
    }
}

/// Which stack of the log a turn is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Stack {
    Undo,
    Redo,
}

/// A line of `log.jsonl`: a snapshot (`header`, then `turn` lines), then the events appended
/// since it was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub(crate) enum LogLine {
    Header {
        format: String,
        version: u32,
        next_id: u64,
    },
    /// A turn of the snapshot, on its stack.
    Turn(Stacked),
    /// A recorded turn (see [`Pushed`]).
    Push(Pushed),
    /// Turns forgotten (past the depth, or for the size cap).
    Drop { ids: Vec<TurnId> },
    /// A restore about to begin (see [`Begun`]).
    Begin(Begun),
    /// The restore begun last could not complete (`reason`) and is being rolled back: every
    /// path it changed is put back as the restore found it. Format 5.
    Rollback { id: TurnId, reason: String },
    /// The restore begun last ended without completing: rolled back, or abandoned. Its turn
    /// stays on its stack, marked with `reason` (see [`TurnRecord::damage`]). Format 5.
    Stopped {
        id: TurnId,
        reason: String,
        /// Whether it was abandoned (its files left part-way) rather than rolled back. A
        /// revert's new turn is then pushed onto the undo stack, marked, so that an undo can
        /// take its files back. Format 8.
        #[serde(default, skip_serializing_if = "is_false")]
        abandoned: bool,
    },
    /// A turn's stored copies were found damaged before a restore changed anything; the
    /// turn is marked with `reason`. Format 5.
    Damaged { id: TurnId, reason: String },
    /// The restore begun last is complete: its turn moves to the other stack.
    Done {
        id: TurnId,
        /// The directories it kept, as it found them, where its target has nothing or (a
        /// forced restore) a file or a link: they held entries it did not make (see
        /// [`Action::KeptNotEmpty`] and [`Action::Skipped`]). The turns it moves
        /// take each as it was left, on the side the restore went to, so that the opposite
        /// restore expects it there rather than refusing over it. Sorted, each once; absent
        /// when none. Added to format 11 without raising it: a reader that ignores it only
        /// refuses that restore over those directories, as it did before.
        ///
        /// [`Action::KeptNotEmpty`]: crate::Action::KeptNotEmpty
        /// [`Action::Skipped`]: crate::Action::Skipped
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kept: Vec<String>,
    },
}

impl LogLine {
    /// Reads a record from its JSON. The derived reading of an internally tagged enum
    /// buffers the whole record first (as serde's `Content`, which for a turn of many paths
    /// takes several times the memory of the turn itself), so the records that hold a turn
    /// are read straight into their own type once the tag has been found.
    pub(crate) fn from_json(json: &str) -> serde_json::Result<LogLine> {
        #[derive(Deserialize)]
        struct Tag {
            record: String,
        }
        // Written first, as serde writes a tag: found without a scan of the whole line,
        // which for a turn of many paths is megabytes.
        let first = json
            .strip_prefix(r#"{"record":""#)
            .and_then(|rest| rest.split_once('"'))
            .map(|(tag, _)| tag)
            .filter(|tag| !tag.contains('\\'));
        let tag = match first {
            Some(tag) => tag.to_owned(),
            None => serde_json::from_str::<Tag>(json)?.record,
        };
        match tag.as_str() {
            "turn" => serde_json::from_str(json).map(LogLine::Turn),
            "push" => serde_json::from_str(json).map(LogLine::Push),
            "begin" => serde_json::from_str(json).map(LogLine::Begin),
            _ => serde_json::from_str(json),
        }
    }
}

/// A turn of a snapshot, on its stack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stacked {
    pub stack: Stack,
    pub turn: Arc<TurnRecord>,
}

/// A recorded turn: pushed onto the undo stack, which empties the redo stack (with `scoped`,
/// of the turns of its own session only); the turns `dropped` go (past the depth).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pushed {
    pub turn: Arc<TurnRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<TurnId>,
    /// Whether only the redo stack's turns of the same session (for a headless command's
    /// turn, of headless commands) are cleared: another session's undone turns stay redoable
    /// (a fork's parent brings them back). Format 8; absent before, when a push cleared the
    /// whole stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scoped: bool,
}

/// A restore about to begin, with the images it restores (see [`Journal`]); written and
/// flushed before it changes anything. The turn's images on the side the restore leaves
/// are what the restore found there (its plan), so that completing it after a crash can
/// tell a path it has not reached yet from one the user changed meanwhile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Begun {
    pub direction: Direction,
    pub turn: Arc<TurnRecord>,
    /// Names this restore in the progress file (see [`crate::restore::Progress`]), so
    /// that a mark left by an earlier restore is never taken for one of this one's.
    /// Absent in format 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// For a restore of several turns at once (a rewind, or the redo of one): the turns
    /// it moves, oldest first, with the images they keep once it is done. `turn` is then
    /// their images joined (each path from before the first turn that touched it to
    /// after the last), under the first turn's id. Empty for a restore of one turn.
    /// Format 7.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Arc<TurnRecord>>,
    /// For a revert (format 8): the turn it reverts. `turn` is then the new turn the
    /// revert records (not on either stack yet, its id taken from the header's next id),
    /// applied forwards (`direction` is `redo`): `done` pushes it onto the undo stack as
    /// a recorded turn, and `stopped` after a rollback forgets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverts: Option<TurnId>,
}

/// How the changes a `bash` call made to the workspace were captured (see `docs/undo.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BashCapture {
    /// It ran against an overlay whose changes were applied through the
    /// [`Recording`](crate::Recording): they are recorded, and undone, like any tool's.
    Overlay,
    /// It ran directly on the workspace, which was compared before and after: the paths it
    /// was seen to change cannot be restored.
    Detect,
    /// It ran directly on the workspace and nothing is known of what it changed.
    Off,
}

/// A line of `inflight.jsonl`. The file is reused from turn to turn (emptied when a turn
/// begins, and when it is committed), so every record after `start` names its turn: a record
/// of another turn is a leftover that an emptying a crash undid, and ends the turn's records.
/// (Format 3 and older wrote no `turn`, and made a new file per turn.)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub(crate) enum InflightLine {
    Start {
        version: u32,
        turn: TurnMeta,
    },
    Path {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        path: String,
        before: Image,
        /// When present, the file's raw bytes follow this record's line in the file: this
        /// many of them. Absent when the blob is already stored (or the image is no file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    Tool {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        name: String,
        changes: Vec<ChangeRecord>,
    },
    Bash {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        /// Absent before format 6, which never captured bash.
        #[serde(default = "capture_off")]
        capture: BashCapture,
        /// The paths the call changed that cannot be restored (capture `detect`). Format 6.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unrestorable: Vec<String>,
    },
    /// Bytes the turn's records need stored (an index a `git` record names); this many of
    /// them follow the line. Format 9.
    Blob {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        hash: ContentHash,
        bytes: u64,
    },
    /// What a `bash` call moved in the git repository. Format 9.
    Git {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        git: GitRecord,
    },
    /// A change of the turn begins on these paths (a directory moved in or removed whole
    /// stands for everything under it): until the `done` record after it, what is there
    /// may be the change's, half made. Format 12.
    Doing {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        paths: Vec<String>,
    },
    /// What a change of the turn left at each of its paths (see
    /// [`shiro_tools::Mutator::stamps`]); a path not stamped cannot be told. Format 12.
    Done {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<TurnId>,
        stamps: Vec<(String, Option<Stamp>)>,
    },
}

fn capture_off() -> BashCapture {
    BashCapture::Off
}

fn is_false(value: &bool) -> bool {
    !value
}

impl InflightLine {
    /// The turn a record after `start` names; `None` for `start`, and for records of format 3.
    pub(crate) fn turn(&self) -> Option<TurnId> {
        match self {
            InflightLine::Start { .. } => None,
            InflightLine::Path { turn, .. }
            | InflightLine::Tool { turn, .. }
            | InflightLine::Bash { turn, .. }
            | InflightLine::Blob { turn, .. }
            | InflightLine::Git { turn, .. }
            | InflightLine::Doing { turn, .. }
            | InflightLine::Done { turn, .. } => *turn,
        }
    }
}

/// The one line of a format-3 `journal.jsonl`: the restore under way, with the images it
/// restores.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Journal {
    pub version: u32,
    pub direction: Direction,
    pub turn: TurnRecord,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_bash_record_without_capture_reads_as_capture_off() {
        // Format 5, and format 3 (no turn).
        for json in [r#"{"record":"bash","turn":8}"#, r#"{"record":"bash"}"#] {
            let line: InflightLine = serde_json::from_str(json).unwrap();
            let InflightLine::Bash {
                capture,
                unrestorable,
                ..
            } = line
            else {
                panic!("not a bash record: {line:?}");
            };
            assert_eq!(capture, BashCapture::Off);
            assert!(unrestorable.is_empty());
        }
        let line = InflightLine::Bash {
            turn: Some(TurnId(8)),
            capture: BashCapture::Detect,
            unrestorable: vec!["a b/c".to_owned()],
        };
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            r#"{"record":"bash","turn":8,"capture":"detect","unrestorable":["a b/c"]}"#
        );
        let line = InflightLine::Bash {
            turn: Some(TurnId(8)),
            capture: BashCapture::Overlay,
            unrestorable: Vec::new(),
        };
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            r#"{"record":"bash","turn":8,"capture":"overlay"}"#
        );
    }

    #[test]
    fn a_turn_of_format_5_that_ran_bash_reads_as_uncaptured() {
        let mut old = TurnRecord::empty(1);
        old.ran_bash = true;
        let json = serde_json::to_value(&old).unwrap();
        assert!(json.get("bash_uncaptured").is_none(), "skipped when false");
        assert!(
            json.get("bash_unrestorable").is_none(),
            "skipped when empty"
        );
        let mut read: TurnRecord = serde_json::from_value(json).unwrap();
        assert_eq!(read, old, "format 6 reads it as written");
        read.upgrade(5);
        assert!(read.bash_uncaptured);
        assert!(read.summary().bash_uncaptured);
        let mut quiet = TurnRecord::empty(2);
        quiet.upgrade(5);
        assert!(!quiet.bash_uncaptured, "a turn without bash stays so");
    }

    #[test]
    fn the_paths_bash_changed_must_be_valid_sorted_and_once() {
        let check = |paths: &[&str]| {
            let mut turn = TurnRecord::empty(3);
            turn.bash_unrestorable = paths.iter().map(|p| (*p).to_owned()).collect();
            turn.validate()
        };
        assert_eq!(check(&["a", "b/c", "z"]), Ok(()));
        assert!(check(&["../outside"]).unwrap_err().contains("invalid path"));
        assert!(check(&["/abs"]).unwrap_err().contains("invalid path"));
        assert_eq!(
            check(&["b", "a"]),
            Err("paths bash changed in turn #3 are not sorted, each once".to_owned())
        );
        assert!(check(&["a", "a"]).is_err());
    }

    fn moved(before: Option<&str>, after: Option<&str>) -> Move {
        Move {
            before: before.map(str::to_owned),
            after: after.map(str::to_owned),
        }
    }

    #[test]
    fn git_records_add_up_from_the_first_before_to_the_last_after() {
        let hash = |n: u8| ContentHash::of(&[n]);
        let mut sum = GitRecord::default();
        sum.then(&GitRecord {
            moved: BTreeMap::from([
                (
                    "HEAD".to_owned(),
                    moved(Some("ref: refs/heads/main"), Some("ref: refs/heads/x")),
                ),
                ("refs/heads/x".to_owned(), moved(None, Some("1111"))),
            ]),
            index: Some(IndexRecord {
                before: Some(hash(1)),
                after: Some(hash(2)),
            }),
        });
        sum.then(&GitRecord {
            moved: BTreeMap::from([
                (
                    "HEAD".to_owned(),
                    moved(Some("ref: refs/heads/x"), Some("ref: refs/heads/main")),
                ),
                ("refs/heads/x".to_owned(), moved(Some("1111"), Some("2222"))),
                ("refs/tags/t".to_owned(), moved(None, Some("2222"))),
            ]),
            index: Some(IndexRecord {
                before: Some(hash(2)),
                after: None,
            }),
        });
        // HEAD is back where it began: no longer a move.
        assert_eq!(
            sum.moved,
            BTreeMap::from([
                ("refs/heads/x".to_owned(), moved(None, Some("2222"))),
                ("refs/tags/t".to_owned(), moved(None, Some("2222"))),
            ])
        );
        assert_eq!(
            sum.index,
            Some(IndexRecord {
                before: Some(hash(1)),
                after: None
            })
        );
        assert_eq!(sum.hashes().collect::<Vec<_>>(), [hash(1)]);
        let mut turn = TurnRecord::empty(4);
        turn.git = Some(sum.clone());
        assert!(
            turn.hashes().unwrap().any(|h| h == hash(1)),
            "collection keeps the index copies"
        );
        assert_eq!(turn.validate(), Ok(()));
        let back: TurnRecord =
            serde_json::from_value(serde_json::to_value(&turn).unwrap()).unwrap();
        assert_eq!(back, turn);
        // Back where it began altogether: nothing moved.
        sum.then(&GitRecord {
            moved: BTreeMap::from([
                ("refs/heads/x".to_owned(), moved(Some("2222"), None)),
                ("refs/tags/t".to_owned(), moved(Some("2222"), None)),
            ]),
            index: Some(IndexRecord {
                before: None,
                after: Some(hash(1)),
            }),
        });
        assert!(sum.is_empty(), "{sum:?}");
    }

    #[test]
    fn a_git_record_naming_anything_but_head_refs_and_the_stash_list_is_invalid() {
        for name in [
            "config",
            "hooks/pre-commit",
            "refs/../config",
            "objects/ab/cd",
            "/etc/passwd",
        ] {
            let mut turn = TurnRecord::empty(5);
            turn.git = Some(GitRecord {
                moved: BTreeMap::from([(name.to_owned(), moved(None, Some("1111")))]),
                index: None,
            });
            assert!(
                turn.validate().unwrap_err().contains("invalid git name"),
                "{name}"
            );
        }
    }
}
