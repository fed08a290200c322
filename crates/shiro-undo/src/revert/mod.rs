//! Reverting one earlier turn: what each path it touched becomes, decided against the
//! workspace as it is now. The store (`store/revert.rs`) applies the plan as a new turn.
//!
//! Per path, with the turn's images `before` and `after` and what is there `now`:
//! - `now` is `before`: the change is undone already; nothing to do.
//! - `before` is `after`: the turn left the path as it found it (a forced undo can make it
//!   so, keeping what it wrote over as the turn's after-image); nothing to do.
//! - `now` is `after` (nothing changed it since): it goes back to `before`, whatever kind of
//!   change the turn made (content, mode, link, creation, deletion, kind).
//! - otherwise, a text file whose content alone the turn changed is merged three ways
//!   ([`merge`]): the turn's after-image is the base, its before-image "theirs", the current
//!   file "ours"; the result keeps the current mode. Anything else is a conflict.
//!
//! Text is what [`merge::is_text`] says of all three versions, each at most
//! [`MAX_MERGE_BYTES`]. Then the plan is checked as a whole: a directory it removes (or
//! replaces) must hold nothing it does not remove, and what it creates must have a real
//! directory above it, there now or made by the revert. Any conflict refuses all of it.

use std::collections::{BTreeMap, BTreeSet};

use shiro_tools::{Mutator, Stat, WorkspacePath};

use crate::error::UndoError;
use crate::format::TurnRecord;
use crate::image::{ContentHash, Image, Spares, hashed_image, real_image};
use crate::restore::foreign_entries;

pub(crate) mod merge;
pub(crate) mod report;

use merge::Merged;
use report::{RevertConflict, RevertConflictKind};

/// Files bigger than this (in any of the three versions) are not merged: they are reverted
/// only when unchanged since the turn, like binary files. A merge holds the three versions
/// and their lines in memory.
pub(crate) const MAX_MERGE_BYTES: u64 = 16 << 20;

/// One path of a revert's plan.
#[derive(Debug)]
pub(crate) struct Step {
    pub path: WorkspacePath,
    /// What is there now.
    pub now: Image,
    /// What the revert makes it (`now` when it leaves it as it is).
    pub becomes: Image,
    /// The bytes it writes when a merge made them (no stored copy holds them yet).
    pub merged: Option<Vec<u8>>,
    /// The bytes of the file now, when the plan read them to merge.
    pub now_bytes: Option<Vec<u8>>,
}

impl Step {
    /// Whether the revert changes the path.
    pub(crate) fn changes(&self) -> bool {
        self.now != self.becomes
    }
}

/// A revert's plan: a step for every path of the turn, sorted, and what stands in its way.
#[derive(Debug)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    /// Sorted by path.
    pub conflicts: Vec<RevertConflict>,
    /// Whether every path of the turn is as it was before it.
    pub undone: bool,
}

/// Where the plan finds the stored bytes it merges.
pub(crate) trait Copies: Sync {
    /// The bytes of the reverted turn's before-image `hash` of `path`; an error when the
    /// store cannot produce them (they are missing or damaged).
    fn before(&self, path: &WorkspacePath, hash: &ContentHash) -> Result<Vec<u8>, UndoError>;

    /// The bytes of the turn's after-image `hash`, when the store keeps an intact copy.
    fn after(&self, hash: &ContentHash) -> Option<Vec<u8>>;
}

/// Plans the revert of `turn` against `workspace` as it is now.
pub(crate) async fn plan(
    workspace: &dyn Mutator,
    turn: &TurnRecord,
    copies: &dyn Copies,
) -> Result<Plan, UndoError> {
    let paths = turn.workspace_paths()?;
    let mut steps = Vec::with_capacity(paths.len());
    let mut conflicts = Vec::new();
    let mut undone = true;
    for (path, record) in paths {
        let (before, after) = (&record.before, &record.after);
        let now = hashed_image(workspace, &path).await?;
        let step = |now: Image, becomes: Image| Step {
            path: path.clone(),
            now,
            becomes,
            merged: None,
            now_bytes: None,
        };
        undone &= now == *before;
        if now == *before || before == after {
            steps.push(step(now.clone(), now));
        } else if now == *after {
            steps.push(step(now, before.clone()));
        } else if mergeable(before, after, &now) {
            match merge_file(workspace, &path, before, after, copies).await? {
                Ok(step) => steps.push(step),
                Err(kind) => conflicts.push(RevertConflict { path, kind }),
            }
        } else {
            let kind = RevertConflictKind::Changed {
                expected: after.clone(),
                found: now,
            };
            conflicts.push(RevertConflict { path, kind });
        }
    }
    conflicts.extend(structure(workspace, &steps).await?);
    conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    steps.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan {
        steps,
        conflicts,
        undone,
    })
}

/// Whether a path changed since the turn may be merged: a file before, after and now, whose
/// mode the turn left as it was, none of them too big to merge.
fn mergeable(before: &Image, after: &Image, now: &Image) -> bool {
    match (before, after, now) {
        (
            Image::File {
                mode: before_mode,
                len: before_len,
                ..
            },
            Image::File {
                mode: after_mode,
                len: after_len,
                ..
            },
            Image::File { len: now_len, .. },
        ) => {
            before_mode == after_mode
                && [before_len, after_len, now_len]
                    .iter()
                    .all(|len| **len <= MAX_MERGE_BYTES)
        }
        _ => false,
    }
}

/// Merges the file at `path` (changed since the turn): the step, or why it cannot be merged.
async fn merge_file(
    workspace: &dyn Mutator,
    path: &WorkspacePath,
    before: &Image,
    after: &Image,
    copies: &dyn Copies,
) -> Result<Result<Step, RevertConflictKind>, UndoError> {
    // Read again, with the bytes: the image merged is the one these bytes have.
    let (now, bytes) = real_image(workspace, path, &Spares::none()).await?;
    let (Some(ours), Some(before_hash), Some(after_hash), Image::File { mode, .. }) =
        (bytes, before.hash(), after.hash(), &now)
    else {
        return Ok(Err(RevertConflictKind::Changed {
            expected: after.clone(),
            found: now,
        }));
    };
    let mode = *mode;
    let theirs = copies.before(path, &before_hash)?;
    if !merge::is_text(&ours) || !merge::is_text(&theirs) {
        return Ok(Err(RevertConflictKind::Changed {
            expected: after.clone(),
            found: now,
        }));
    }
    let Some(base) = copies.after(&after_hash) else {
        return Ok(Err(RevertConflictKind::NotKept {
            expected: after.clone(),
            found: now,
        }));
    };
    if !merge::is_text(&base) {
        return Ok(Err(RevertConflictKind::Changed {
            expected: after.clone(),
            found: now,
        }));
    }
    Ok(match merge::merge(&base, &ours, &theirs) {
        Merged::Clean(merged) => {
            let becomes = Image::File {
                mode,
                len: merged.len() as u64,
                hash: ContentHash::of(&merged),
            };
            let merged = (becomes != now).then_some(merged);
            Ok(Step {
                path: path.clone(),
                now,
                becomes,
                merged,
                now_bytes: Some(ours),
            })
        }
        Merged::Conflicts(hunks) => Err(RevertConflictKind::Overlapping { hunks }),
    })
}

/// What stands in the way of the plan's structural changes: a directory it removes or
/// replaces that holds entries it does not remove, and something it creates whose parent is
/// not a real directory (now, or made by the revert).
async fn structure(
    workspace: &dyn Mutator,
    steps: &[Step],
) -> Result<Vec<RevertConflict>, UndoError> {
    let changing: Vec<&Step> = steps.iter().filter(|step| step.changes()).collect();
    let going: BTreeSet<&WorkspacePath> = (changing.iter())
        .filter(|step| !step.becomes.exists())
        .map(|step| &step.path)
        .collect();
    let made: BTreeMap<&WorkspacePath, &Image> = (changing.iter())
        .map(|step| (&step.path, &step.becomes))
        .collect();
    let mut conflicts = Vec::new();
    for step in &changing {
        if step.now.is_dir() && !step.becomes.is_dir() {
            let entries = foreign_entries(workspace, &step.path, &going).await?;
            if !entries.is_empty() {
                conflicts.push(RevertConflict {
                    path: step.path.clone(),
                    kind: RevertConflictKind::NotEmpty { entries },
                });
            }
        }
        let creates = step.becomes.exists()
            && (!step.now.exists() || step.now.is_dir() != step.becomes.is_dir());
        if !creates {
            continue;
        }
        for parent in step.path.ancestors() {
            let found = match made.get(&parent) {
                Some(image) if image.is_dir() => continue,
                Some(image) => (*image).clone(),
                None => match workspace.real_stat(&parent).await? {
                    Stat::Dir { .. } => continue,
                    _ => hashed_image(workspace, &parent).await?,
                },
            };
            conflicts.push(RevertConflict {
                path: step.path.clone(),
                kind: RevertConflictKind::NoParent { parent, found },
            });
            break;
        }
    }
    Ok(conflicts)
}
