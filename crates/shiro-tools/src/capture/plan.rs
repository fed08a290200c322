//! The plan that carries a command's upper layer into the workspace, step by step, and the
//! commit that applies it through the `Mutator` (see `layer` for the layer itself).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::layer::Layer;
use super::{CaptureError, CaptureMode, Captured, repository};
use crate::change::Change;
use crate::mutator::{DirEntry, Incoming, Mutator, MutatorError, Stat};
use crate::path::WorkspacePath;

/// Commits `layer` through `mutator`: captures every pre-image, marks the layer, applies the
/// changes, and removes the layer. On a failure part-way, what was applied stays (and is
/// recorded) and the layer is discarded; the error says how far it got.
pub(super) async fn commit_layer(
    mutator: &dyn Mutator,
    layer: Layer,
) -> Result<Captured, CaptureError> {
    let plan = match Plan::of(&layer.upper(), mutator, layer.made()).await {
        Ok(plan) => plan,
        Err(err) => {
            layer.discard();
            return Err(err.into());
        }
    };
    if !plan.unholdable.is_empty() {
        // Applying the rest would lose what was moved there (`mv a.txt $'\xe9'` would
        // remove a.txt and make nothing), and the store could not undo it.
        layer.discard();
        return Err(CaptureError::NotApplied(format!(
            "it made {}, {} shiro cannot hold (not UTF-8), so shiro could neither apply {} nor \
             undo {}; run it again so that it makes only UTF-8 names",
            plan.unholdable.join(", "),
            if plan.unholdable.len() == 1 {
                "a name"
            } else {
                "names"
            },
            if plan.unholdable.len() == 1 {
                "it"
            } else {
                "them"
            },
            if plan.unholdable.len() == 1 {
                "it"
            } else {
                "them"
            },
        )));
    }
    let mut captured = Captured {
        mode: Some(CaptureMode::Overlay),
        changes: plan.changes(),
        unrestorable: Vec::new(),
        notes: plan.notes.clone(),
        git: None,
    };
    captured.notes.extend(plan.outside_note());
    if plan.steps.is_empty() {
        captured
            .notes
            .extend(repository::carry_all(&plan.repositories, mutator.root()));
        layer.discard();
        return Ok(captured);
    }
    if let Err(err) = mutator.prepare(&plan.paths(), &plan.incoming()).await {
        layer.discard();
        return Err(CaptureError::NotApplied(format!(
            "their undo record could not be made: {err}"
        )));
    }
    if let Err(err) = layer.mark_committing() {
        layer.discard();
        return Err(CaptureError::NotApplied(format!(
            "cannot mark the layer: {err}"
        )));
    }
    let total = plan.steps.len();
    for (done, step) in plan.steps.iter().enumerate() {
        if let Err(err) = step.apply(mutator, &layer).await {
            layer.discard();
            return Err(CaptureError::Other(format!(
                "applying them stopped after {done} of {total} steps: {err}"
            )));
        }
    }
    captured
        .notes
        .extend(repository::carry_all(&plan.repositories, mutator.root()));
    layer.discard();
    Ok(captured)
}

/// One change to the workspace.
#[derive(Debug)]
pub(super) enum Step {
    /// Removes a file or a link.
    RemoveFile(WorkspacePath),
    /// Removes a directory, emptied by the steps before.
    RemoveDir(WorkspacePath),
    /// Removes a directory with everything in it (`listed`, each directory before its
    /// entries), moving it into the layer whole when it can.
    RemoveTree {
        path: WorkspacePath,
        listed: Vec<DirEntry>,
    },
    MakeDir(WorkspacePath),
    /// Moves the layer's directory `source`, new to the workspace, in whole (see
    /// `Mutator::move_tree_in`); `listed` holds every path under it, and `steps` make it
    /// entry by entry where the move cannot be made.
    MoveTreeIn {
        path: WorkspacePath,
        source: PathBuf,
        listed: Vec<WorkspacePath>,
        steps: Vec<Step>,
    },
    /// Writes the upper layer's file `source` at the path.
    Write {
        path: WorkspacePath,
        source: PathBuf,
        mode: u32,
    },
    SetMode(WorkspacePath, u32),
    Link {
        path: WorkspacePath,
        target: String,
    },
}

impl Step {
    pub(super) fn path(&self) -> &WorkspacePath {
        match self {
            Step::RemoveFile(path)
            | Step::RemoveDir(path)
            | Step::RemoveTree { path, .. }
            | Step::MakeDir(path)
            | Step::MoveTreeIn { path, .. }
            | Step::SetMode(path, _)
            | Step::Write { path, .. }
            | Step::Link { path, .. } => path,
        }
    }

    pub(super) async fn apply(
        &self,
        mutator: &dyn Mutator,
        layer: &Layer,
    ) -> Result<(), MutatorError> {
        match self {
            Step::RemoveFile(path) => match mutator.remove_file(path).await {
                Err(MutatorError::NotFound(_)) => Ok(()),
                other => other,
            },
            Step::RemoveDir(path) => match mutator.remove_dir(path).await {
                Err(MutatorError::NotFound(_)) => Ok(()),
                other => other,
            },
            Step::RemoveTree { path, listed } => {
                let aside = layer.aside().map_err(|source| MutatorError::Io {
                    op: "make room in the command's layer for",
                    path: path.clone(),
                    source,
                })?;
                match mutator.remove_tree(path, listed, &aside).await {
                    Err(MutatorError::NotFound(_)) => Ok(()),
                    other => other,
                }
            }
            Step::MakeDir(path) => match mutator.create_dir(path).await {
                Err(MutatorError::AlreadyExists(_))
                    if matches!(mutator.stat(path).await?, Stat::Dir { .. }) =>
                {
                    Ok(())
                }
                other => other,
            },
            Step::MoveTreeIn {
                path,
                source,
                listed,
                steps,
            } => {
                if mutator.move_tree_in(source, path, listed).await? {
                    return Ok(());
                }
                for step in steps {
                    Box::pin(step.apply(mutator, layer)).await?;
                }
                Ok(())
            }
            Step::SetMode(path, mode) => mutator.set_mode(path, *mode).await,
            Step::Link { path, target } => {
                if let Stat::Symlink { target: now } = mutator.stat(path).await?
                    && &now == target
                {
                    return Ok(());
                }
                mutator.symlink(target, path).await
            }
            Step::Write { path, source, mode } => mutator.adopt(source, path, *mode).await,
        }
    }
}

/// How a directory of the layer relates to the workspace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Merge {
    /// It lies over the workspace's: entries it lacks stay.
    Over,
    /// It replaces the workspace's (the overlay marked it opaque, or a parent): entries it
    /// lacks are removed.
    Replace,
    /// The workspace has none: it is made now.
    New,
}

/// The steps that make the workspace what the upper layer says, found by comparing each
/// entry of the layer with the workspace.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) steps: Vec<Step>,
    /// Whether each touched file or link was there before the command, and is after it.
    shown: BTreeMap<WorkspacePath, (bool, bool)>,
    order: Vec<WorkspacePath>,
    notes: Vec<String>,
    /// How many entries were found that a directory moved in whole must not hold (a
    /// whiteout, a file with other names, a directory the overlay marked): a new directory
    /// is moved in whole only when none was found under it.
    unmovable: usize,
    /// The git repositories the command made where the workspace had none, inert (see
    /// `repository`), each with its path: carried over, unrecorded, after the steps.
    pub(super) repositories: Vec<(PathBuf, WorkspacePath)>,
    /// What the command made under a name shiro cannot hold (not UTF-8), as shown to a
    /// person: nothing of the command is applied then (see [`commit_layer`]).
    unholdable: Vec<String>,
    /// When the command began, if known (see [`Plan::outside`]).
    began: Option<SystemTime>,
    /// The files and links the command changed or removed that something else changed
    /// while it ran: kept as they are, the command's change to them not applied.
    outside: Vec<WorkspacePath>,
}

impl Plan {
    /// The plan that makes the workspace what the layer `upper` says. `began`, when the
    /// command began, if known: a file or link that changed since then in the workspace is
    /// kept as it is (see [`Plan::outside`]).
    pub(super) async fn of(
        upper: &Path,
        mutator: &dyn Mutator,
        began: Option<SystemTime>,
    ) -> Result<Self, MutatorError> {
        let mut plan = Plan {
            began,
            ..Plan::default()
        };
        plan.merge_dir(upper, None, Merge::Over, mutator).await?;
        Ok(plan)
    }

    /// Whether the workspace's file or link at `path` changed after the command began: its
    /// status changed later (which no program can set back, as it can a modification
    /// time). Only something else changes it: the command's own writes go to its layer.
    /// Those are your edits made while the command ran, or another program's (a background
    /// command); the command's change there is not applied, so as not to lose them, and the
    /// result says so.
    fn outside(&self, path: &WorkspacePath, mutator: &dyn Mutator) -> bool {
        let Some(began) = self.began else {
            return false;
        };
        let Ok(meta) = fs::symlink_metadata(path.to_fs_path(mutator.root())) else {
            return false;
        };
        let changed = u64::try_from(meta.ctime()).ok().map(|secs| {
            SystemTime::UNIX_EPOCH
                + Duration::new(secs, meta.ctime_nsec().clamp(0, 999_999_999) as u32)
        });
        changed.is_some_and(|changed| changed > began)
    }

    /// Keeps `path` as it is when it changed while the command ran (see [`Plan::outside`]);
    /// whether it did.
    fn keep_outside(&mut self, path: &WorkspacePath, now: &Stat, mutator: &dyn Mutator) -> bool {
        let kept =
            matches!(now, Stat::File { .. } | Stat::Symlink { .. }) && self.outside(path, mutator);
        if kept {
            self.outside.push(path.clone());
        }
        kept
    }

    /// What the result says of the paths kept because they changed while the command ran.
    fn outside_note(&self) -> Option<String> {
        const MOST: usize = 10;
        if self.outside.is_empty() {
            return None;
        }
        let mut named: Vec<&str> = self
            .outside
            .iter()
            .take(MOST)
            .map(WorkspacePath::as_str)
            .collect();
        let more = format!("and {} more", self.outside.len().saturating_sub(MOST));
        if self.outside.len() > MOST {
            named.push(&more);
        }
        Some(format!(
            "not carried over: {} changed while the command ran (by you or another program), \
             so {} kept as {} now, without the command's change; read {} again before changing {}",
            named.join(", "),
            if self.outside.len() == 1 {
                "it is"
            } else {
                "they are"
            },
            if self.outside.len() == 1 {
                "it is"
            } else {
                "they are"
            },
            if self.outside.len() == 1 {
                "it"
            } else {
                "them"
            },
            if self.outside.len() == 1 {
                "it"
            } else {
                "them"
            },
        ))
    }

    fn paths(&self) -> Vec<WorkspacePath> {
        let mut set: BTreeSet<&WorkspacePath> = BTreeSet::new();
        for step in &self.steps {
            set.insert(step.path());
            match step {
                Step::RemoveTree { listed, .. } => {
                    set.extend(listed.iter().map(|entry| &entry.path));
                }
                Step::MoveTreeIn { listed, .. } => set.extend(listed),
                _ => {}
            }
        }
        set.into_iter().cloned().collect()
    }

    /// The files the plan moves in whole over a path, each with its path (see
    /// [`Mutator::prepare`]).
    fn incoming(&self) -> Vec<Incoming<'_>> {
        (self.steps.iter())
            .filter_map(|step| match step {
                Step::Write { path, source, .. } => Some(Incoming { path, source }),
                _ => None,
            })
            .collect()
    }

    fn changes(&self) -> Vec<Change> {
        self.order
            .iter()
            .filter_map(|path| {
                let path = path.clone();
                match self.shown.get(&path)? {
                    (false, true) => Some(Change::Added { path }),
                    (true, true) => Some(Change::Modified { path }),
                    (true, false) => Some(Change::Deleted { path }),
                    (false, false) => None,
                }
            })
            .collect()
    }

    /// Notes a step on a file or link: whether something was there before the command (the
    /// first note of a path counts) and whether something is there after it (the latest).
    fn show(&mut self, path: &WorkspacePath, before: bool, after: bool) {
        let entry = self.shown.entry(path.clone()).or_insert_with(|| {
            self.order.push(path.clone());
            (before, after)
        });
        entry.1 = after;
    }

    /// Makes the workspace directory `dir` (the root when `None`) match the layer's directory
    /// `up`, as `how` says.
    async fn merge_dir(
        &mut self,
        up: &Path,
        dir: Option<&WorkspacePath>,
        how: Merge,
        mutator: &dyn Mutator,
    ) -> Result<(), MutatorError> {
        let complete = how != Merge::Over;
        let io_err = |source| layer_error(dir, source);
        let mut names: Vec<std::ffi::OsString> = fs::read_dir(up)
            .map_err(io_err)?
            .map(|entry| entry.map(|entry| entry.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io_err)?;
        names.sort();
        let mut kept = BTreeSet::new();
        for name in &names {
            let Some(path) = child(dir, name) else {
                let shown = format!("{:?} in {}", name, dir.map_or(".", WorkspacePath::as_str));
                if is_whiteout(&up.join(name)) {
                    // Its removal: what the workspace holds there stays, as shiro could
                    // not undo its removal.
                    self.notes.push(format!(
                        "not carried over: the removal of {shown}, a name shiro cannot hold (not UTF-8); it stays as it was"
                    ));
                } else {
                    self.unholdable.push(shown);
                }
                continue;
            };
            kept.insert(path.file_name().to_owned());
            if path.as_str() == ".git" && !repository::is_made_here(&path, mutator.root()) {
                // The root repository's objects the command wrote (the rest of it is bound
                // through): carried into it before this commit (see `objects.rs`).
                continue;
            }
            if repository::is_made_here(&path, mutator.root()) {
                // A `.git` where the workspace has none (an existing one at the root is bound
                // through and never shows here): a repository the command made.
                match repository::made(up.join(name), &path, marked_by_overlay) {
                    Ok(source) => {
                        self.repositories.push((source, path));
                        // Its directory is made entry by entry, the repository carried after.
                        self.unmovable += 1;
                    }
                    Err(note) => self.notes.push(note),
                }
                continue;
            }
            if path.is_internal() {
                // A nested `.git` (a submodule, a nested repository) shows here, and so does
                // an earlier version's state in a nested workspace's `.shiro`.
                self.notes.push(format!(
                    "not carried over: the command changed {path}, which is protected (a nested \
                     .git, or shiro's own state); shiro neither applies nor undoes changes there"
                ));
                continue;
            }
            let source = up.join(name);
            let meta = fs::symlink_metadata(&source).map_err(io_err)?;
            let kind = meta.file_type();
            // Under a directory the commit makes, the workspace has nothing yet (and what its
            // path names now, a link that loops, say, is removed before).
            let now = if how == Merge::New {
                Stat::Absent
            } else {
                stat_or_absent(mutator, &path).await?
            };
            let mode = meta.mode() & 0o7777;
            if whiteout(&meta) {
                self.unmovable += 1;
                self.remove(&path, &now, mutator).await?;
            } else if kind.is_dir() {
                let how = if complete || is_opaque(&source) {
                    Merge::Replace
                } else {
                    Merge::Over
                };
                match now {
                    Stat::Dir { mode: was } => {
                        Box::pin(self.merge_dir(&source, Some(&path), how, mutator)).await?;
                        if was != mode {
                            // Listed among the changes, as a file's new mode is.
                            self.show(&path, true, true);
                            self.steps.push(Step::SetMode(path, mode));
                        }
                    }
                    _ => {
                        self.remove(&path, &now, mutator).await?;
                        Box::pin(self.new_dir(path, source, mode, mutator)).await?;
                    }
                }
            } else if kind.is_file() {
                if meta.nlink() != 1 {
                    self.unmovable += 1;
                }
                let same = match &now {
                    Stat::File { len, .. } if *len == meta.len() => {
                        same_bytes(mutator, &path, &source).await?
                    }
                    _ => false,
                };
                if same {
                    // Copied up and left as it was (`touch`), or only its mode changed.
                    if matches!(now, Stat::File { mode: was, .. } if was != mode)
                        && !self.keep_outside(&path, &now, mutator)
                    {
                        self.steps.push(Step::SetMode(path.clone(), mode));
                        self.show(&path, true, true);
                    }
                    continue;
                }
                if self.keep_outside(&path, &now, mutator) {
                    continue;
                }
                self.remove_dir(&path, &now, mutator).await?;
                let before = matches!(now, Stat::File { .. } | Stat::Symlink { .. });
                self.show(&path, before, true);
                self.steps.push(Step::Write { path, source, mode });
            } else if kind.is_symlink() {
                let target = fs::read_link(&source).map_err(io_err)?;
                let Some(target) = target.to_str().map(str::to_owned) else {
                    self.notes.push(format!(
                        "not carried over: the link {path} has a target that is not UTF-8"
                    ));
                    continue;
                };
                if matches!(&now, Stat::Symlink { target: was } if *was == target)
                    || self.keep_outside(&path, &now, mutator)
                {
                    continue;
                }
                let before = now.exists();
                self.remove(&path, &now, mutator).await?;
                self.show(&path, before, true);
                self.steps.push(Step::Link { path, target });
            } else {
                let what = if kind.is_fifo() {
                    "a named pipe"
                } else if kind.is_socket() {
                    "a socket"
                } else {
                    "a device"
                };
                self.notes.push(format!(
                    "not carried over: the command made {path} {what}, which shiro never creates"
                ));
            }
        }
        if how == Merge::Replace
            && let Some(dir) = dir
        {
            for entry in mutator.read_dir(dir).await? {
                if !kept.contains(entry.path.file_name()) {
                    self.remove(&entry.path, &entry.stat, mutator).await?;
                }
            }
        }
        Ok(())
    }

    /// Makes the workspace directory `path`, where nothing is now, with everything the layer's
    /// directory `source` holds: with one move of the whole directory when nothing under it
    /// needs more than a rename (a command that made `node_modules` or a build tree, say),
    /// else entry by entry.
    async fn new_dir(
        &mut self,
        path: WorkspacePath,
        source: PathBuf,
        mode: u32,
        mutator: &dyn Mutator,
    ) -> Result<(), MutatorError> {
        let (first, notes, unmovable) = (self.steps.len(), self.notes.len(), self.unmovable);
        self.steps.push(Step::MakeDir(path.clone()));
        self.merge_dir(&source, Some(&path), Merge::New, mutator)
            .await?;
        self.steps.push(Step::SetMode(path.clone(), mode));
        if marked_by_overlay(&source) {
            self.unmovable += 1;
        }
        // A note says something under it is not carried over, so it must not be moved.
        if self.notes.len() != notes || self.unmovable != unmovable {
            return Ok(());
        }
        let steps: Vec<Step> = self.steps.drain(first..).collect();
        let mut listed = Vec::new();
        for step in &steps {
            list_made(step, &mut listed);
        }
        listed.retain(|made| *made != path);
        self.steps.push(Step::MoveTreeIn {
            path,
            source,
            listed,
            steps,
        });
        Ok(())
    }

    /// Removes what is at `path` if it is a directory (a file or link there is replaced by
    /// the write that follows).
    async fn remove_dir(
        &mut self,
        path: &WorkspacePath,
        now: &Stat,
        mutator: &dyn Mutator,
    ) -> Result<(), MutatorError> {
        if matches!(now, Stat::Dir { .. }) {
            self.remove(path, now, mutator).await?;
        }
        Ok(())
    }

    /// Removes whatever `now` says is at `path`, a directory with everything in it.
    async fn remove(
        &mut self,
        path: &WorkspacePath,
        now: &Stat,
        mutator: &dyn Mutator,
    ) -> Result<(), MutatorError> {
        match now {
            Stat::Absent => {}
            Stat::File { .. } | Stat::Symlink { .. } if self.keep_outside(path, now, mutator) => {}
            Stat::File { .. } | Stat::Symlink { .. } => {
                self.show(path, true, false);
                self.steps.push(Step::RemoveFile(path.clone()));
            }
            Stat::Dir { .. } => {
                if path.is_internal() {
                    self.notes.push(format!(
                        "kept {path}: the command removed it, but it is protected"
                    ));
                    return Ok(());
                }
                if let Some(listed) = list_tree(path, mutator).await? {
                    for entry in &listed {
                        if !matches!(entry.stat, Stat::Dir { .. }) {
                            self.show(&entry.path, true, false);
                        }
                    }
                    self.steps.push(Step::RemoveTree {
                        path: path.clone(),
                        listed,
                    });
                    return Ok(());
                }
                for entry in mutator.read_dir(path).await? {
                    Box::pin(self.remove(&entry.path, &entry.stat, mutator)).await?;
                }
                self.steps.push(Step::RemoveDir(path.clone()));
            }
        }
        Ok(())
    }
}

/// Appends the paths `step` makes to `made`.
fn list_made(step: &Step, made: &mut Vec<WorkspacePath>) {
    match step {
        Step::MakeDir(path) | Step::Write { path, .. } | Step::Link { path, .. } => {
            made.push(path.clone());
        }
        Step::MoveTreeIn { path, listed, .. } => {
            made.push(path.clone());
            made.extend(listed.iter().cloned());
        }
        Step::RemoveFile(_) | Step::RemoveDir(_) | Step::RemoveTree { .. } | Step::SetMode(..) => {}
    }
}

/// Everything under the workspace directory `dir`, in the order of a walk (each directory
/// before its entries); `None` when a protected path lies in it (which the removal must keep,
/// entry by entry).
async fn list_tree(
    dir: &WorkspacePath,
    mutator: &dyn Mutator,
) -> Result<Option<Vec<DirEntry>>, MutatorError> {
    let mut listed = Vec::new();
    Ok(list_into(dir, mutator, &mut listed)
        .await?
        .then_some(listed))
}

/// Appends what is under `dir` to `listed`; `false` at the first protected path.
async fn list_into(
    dir: &WorkspacePath,
    mutator: &dyn Mutator,
    listed: &mut Vec<DirEntry>,
) -> Result<bool, MutatorError> {
    for entry in mutator.read_dir(dir).await? {
        if entry.path.is_internal() {
            return Ok(false);
        }
        let sub = matches!(entry.stat, Stat::Dir { .. }).then(|| entry.path.clone());
        listed.push(entry);
        if let Some(sub) = sub
            && !Box::pin(list_into(&sub, mutator, listed)).await?
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A failure to read the layer's directory for the workspace directory `dir` (the root when
/// `None`).
fn layer_error(dir: Option<&WorkspacePath>, source: io::Error) -> MutatorError {
    match dir {
        Some(path) => MutatorError::Io {
            op: "read the command's layer for",
            path: path.clone(),
            source,
        },
        None => MutatorError::Layer(source),
    }
}

fn child(dir: Option<&WorkspacePath>, name: &OsStr) -> Option<WorkspacePath> {
    let name = name.to_str()?;
    match dir {
        Some(dir) => dir.join(name).ok(),
        None => WorkspacePath::from_relative(name).ok(),
    }
}

async fn stat_or_absent(mutator: &dyn Mutator, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    match mutator.real_stat(path).await {
        Ok(stat) => Ok(stat),
        Err(MutatorError::NotFound(_) | MutatorError::NotDirectory(_)) => Ok(Stat::Absent),
        Err(err) => Err(err),
    }
}

/// Whether the overlay left a mark of its own on the layer's directory `dir` (an extended
/// attribute of its namespace: opaque, impure, a redirect), which the workspace must not
/// get; `true` too when its attributes cannot be listed.
fn marked_by_overlay(dir: &Path) -> bool {
    let mut names = vec![0u8; 4096];
    let len = match rustix::fs::llistxattr(dir, &mut names[..]) {
        Ok(len) => len,
        Err(rustix::io::Errno::NOTSUP) => return false,
        Err(_) => return true,
    };
    (names[..len].split(|&byte| byte == 0))
        .any(|name| name.starts_with(b"trusted.overlay.") || name.starts_with(b"user.overlay."))
}

/// Whether the layer's entry `source` is a whiteout: the overlay's mark of a removal (a
/// character device numbered 0/0).
fn is_whiteout(source: &Path) -> bool {
    fs::symlink_metadata(source).is_ok_and(|meta| whiteout(&meta))
}

/// Whether `meta` is a whiteout's (see [`is_whiteout`]).
fn whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether the overlay marked the layer's directory opaque: it replaced a directory, whose
/// old entries are all gone.
fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .into_iter()
        .any(|name| {
            matches!(rustix::fs::lgetxattr(dir, name, &mut value[..]), Ok(n) if value[..n] == *b"y")
        })
}

async fn same_bytes(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    source: &Path,
) -> Result<bool, MutatorError> {
    let mut theirs = Vec::new();
    open_new_version(path, source)?
        .read_to_end(&mut theirs)
        .map_err(|err| new_version_error(path, err))?;
    Ok(mutator.read(path).await? == theirs)
}

/// Opens the layer's file `source`, the command's new version of `path`, never through a
/// link.
fn open_new_version(path: &WorkspacePath, source: &Path) -> Result<fs::File, MutatorError> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(source)
        .map_err(|err| new_version_error(path, err))
}

fn new_version_error(path: &WorkspacePath, source: io::Error) -> MutatorError {
    MutatorError::Io {
        op: "read the command's new version of",
        path: path.clone(),
        source,
    }
}
