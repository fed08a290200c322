//! Crash recovery of the layers a killed shiro left: a command cut short is discarded, a
//! commit cut short is finished, on the paths nobody changed since it began.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use super::layer::{Layer, Mark, TRASH_PREFIX, is_layer_name, remove_later};
use super::objects;
use super::plan::{Plan, Step};
use super::repository;
use crate::mutator::{Mutator, MutatorError};
use crate::path::WorkspacePath;

/// What recovery did with a layer left by a process that died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayerRecovery {
    /// Its commit had begun: the changes still to apply were applied, except on the paths
    /// that were no longer as the commit found them.
    Finished {
        /// How many steps were left.
        steps: usize,
        /// How many of them were applied.
        applied: usize,
        /// The paths of the steps applied: each is the turn's doing now, and a directory
        /// moved in or removed whole stands for everything under it.
        changed: Vec<WorkspacePath>,
        /// The paths left as they are, unapplied: changed since the commit began (by you,
        /// after the crash), or with no record of what they held before it.
        kept: Vec<WorkspacePath>,
    },
    /// Its command was cut short: the layer, which held changes, was removed.
    Discarded,
    /// Its commit had begun before the system restarted: the layer may be torn, so the
    /// rest of it was removed unapplied.
    DiscardedAfterRestart,
}

/// What crash recovery knows of the paths an interrupted commit was about to change: what
/// each held before the commit began, as the commit's undo record saved it (see
/// [`Mutator::prepare`]).
#[async_trait::async_trait]
pub trait BeforeCommit: Send + Sync {
    /// Whether `path` is still what it was before the commit began; `false` too when nothing
    /// was saved of it. Only then may finishing the commit change it: anything else there
    /// was put there since, by someone else, and is kept.
    async fn unchanged(
        &self,
        mutator: &dyn Mutator,
        path: &WorkspacePath,
    ) -> Result<bool, MutatorError>;
}

/// Finishes or discards the layers in the directory `layers` that no live process holds,
/// applying them through `mutator`, and says what it did (a layer that held nothing is
/// removed without a word). Crash recovery calls it before it recovers an interrupted turn,
/// whose record then holds the pre-images of what a finished commit changed. A step of a
/// commit being finished runs only where every path it changes is still as `before` says
/// it was before the commit began: a path changed since (you edited it after the crash) is
/// kept as it is, and named in the result.
pub async fn recover_layers(
    mutator: &dyn Mutator,
    layers: &Path,
    before: &dyn BeforeCommit,
) -> Result<Vec<LayerRecovery>, MutatorError> {
    // An earlier version kept layers in the tree, where a checkout can hold anything
    // (`.shiro/bash -> ~`): only a real directory is looked in, and only entries named as
    // shiro names layers are touched.
    let real = |path: &Path| fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir());
    if layers.parent().is_none_or(|parent| !real(parent)) || !real(layers) {
        return Ok(Vec::new());
    }
    let Ok(entries) = fs::read_dir(layers) else {
        return Ok(Vec::new());
    };
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        if is_layer_name(&name) {
            dirs.push(entry.path());
        } else if name
            .to_str()
            .and_then(|name| name.strip_prefix(TRASH_PREFIX))
            .is_some_and(|rest| is_layer_name(OsStr::new(rest)))
        {
            // A removal an exit cut short: it may hold a tree the command removed, as big.
            remove_later(entry.path());
        }
    }
    dirs.sort();
    let mut done = Vec::new();
    for dir in dirs {
        let Ok(Some(layer)) = Layer::take(dir) else {
            continue;
        };
        let mark = layer.commit_mark();
        if mark != Mark::EarlierBoot {
            // Whatever else becomes of the layer: the refs its command moved are in `.git`
            // already, and name these (see `objects.rs`). Nobody is told what failed: the
            // command's result was never given.
            let written = objects::written(&layer.upper());
            objects::carry(&written, &mutator.root().join(".git").join("objects"));
        }
        if mark == Mark::EarlierBoot {
            layer.discard();
            done.push(LayerRecovery::DiscardedAfterRestart);
        } else if mark == Mark::ThisBoot {
            // What changed since the command began is judged against the saved pre-images.
            let plan = Plan::of(&layer.upper(), mutator, None).await?;
            // Every step is judged on the workspace as the crash left it, before any runs (a
            // file the commit replaces with a directory is the file before both steps); a
            // step below a kept path is kept with it.
            let mut kept: Vec<WorkspacePath> = Vec::new();
            let mut run = Vec::new();
            for step in &plan.steps {
                let below_kept = kept.iter().any(|path| step.path().starts_with(path));
                match changed_since(step, mutator, before).await? {
                    Some(path) if !kept.contains(&path) => kept.push(path),
                    Some(_) => {}
                    None if below_kept => {}
                    None => run.push(step),
                }
            }
            let applied = run.len();
            let changed = run.iter().map(|step| step.path().clone()).collect();
            for step in run {
                step.apply(mutator, &layer).await?;
            }
            // Nobody is told: the command's result was never given.
            repository::carry_all(&plan.repositories, mutator.root());
            layer.discard();
            done.push(LayerRecovery::Finished {
                steps: plan.steps.len(),
                applied,
                changed,
                kept,
            });
        } else {
            let empty = fs::read_dir(layer.upper()).map_or(true, |mut e| e.next().is_none());
            layer.discard();
            if !empty {
                done.push(LayerRecovery::Discarded);
            }
        }
    }
    Ok(done)
}

/// The first path this step would change that is no longer as it was before the commit
/// began (see [`BeforeCommit`]); `None` when the step may run.
async fn changed_since(
    step: &Step,
    mutator: &dyn Mutator,
    before: &dyn BeforeCommit,
) -> Result<Option<WorkspacePath>, MutatorError> {
    let path = step.path();
    if !before.unchanged(mutator, path).await? {
        return Ok(Some(path.clone()));
    }
    // What a tree's removal takes out with it, as listed now (a file made in it since has
    // no record); a tree moved in goes where nothing was, checked above.
    if let Step::RemoveTree { listed, .. } = step {
        for entry in listed {
            if !before.unchanged(mutator, &entry.path).await? {
                return Ok(Some(entry.path.clone()));
            }
        }
    }
    Ok(None)
}
