//! The overlay's upper layer: where it lives, and how it is committed through the
//! `Mutator` (how a layer left by a killed shiro is finished or discarded is `recovery`'s).
//!
//! A layer is a directory `<layers>/<16 hex digits>/` holding `up/` (the upper layer) and
//! `work/` (the overlay's work directory). The shiro process running its command holds an
//! exclusive `flock` on it; a layer nobody holds is left over from a process that died.
//! Before the first change is applied, the pre-images of every path the commit will touch
//! are captured (one batch) and a `commit` marker is created: a leftover layer with the marker
//! is applied again by recovery (which is idempotent: each step compares before it acts, and
//! runs only where the path still holds its captured pre-image),
//! one without it is discarded, as its command was cut short before its changes counted.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};

use super::{CaptureError, CaptureMode, Captured, repository};
use crate::change::Change;
use crate::mutator::{DirEntry, Incoming, Mutator, MutatorError, Stat};
use crate::path::WorkspacePath;

pub(super) const UPPER_DIR: &str = "up";
pub(super) const WORK_DIR: &str = "work";
/// Written by a helper that could not set the overlay up: why.
pub(super) const SETUP_ERROR_FILE: &str = "setup-error";
/// Written by the overlay helper once it started the command's init process: that
/// process's id, which stopping the command kills (see `CommandCapture::kill`).
pub(super) const INIT_PID_FILE: &str = "init-pid";
/// Created once every pre-image of the commit is captured: from then on the layer's changes
/// count, and recovery applies what a crash left unapplied. It holds the system's boot id.
const COMMIT_MARKER: &str = "commit";
/// A removed layer's new name, until it is deleted.
pub(super) const TRASH_PREFIX: &str = "trash-";
/// Where the commit moves the workspace directories the command removed whole (see
/// `Mutator::remove_tree`): removed with the layer, after the commit.
const ASIDE_DIR: &str = "gone";

/// What a layer's `commit` marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// No marker: the command was cut short before its changes counted.
    None,
    /// Its commit began in this boot of the system: the layer is whole.
    ThisBoot,
    /// Its commit began before a restart: the layer may be torn.
    EarlierBoot,
}

/// A layer, locked by this process.
pub(super) struct Layer {
    dir: PathBuf,
    _lock: OwnedFd,
}

impl Layer {
    /// Makes a fresh layer in the directory `layers` (made when missing; its parent must
    /// be there), locked.
    pub(super) fn create(layers: &Path) -> io::Result<Self> {
        real_dir(layers, 0o700)?;
        let random = std::collections::hash_map::RandomState::new();
        for attempt in 0u32..8 {
            let mut hasher = random.build_hasher();
            hasher.write_u32(attempt);
            hasher.write_u32(std::process::id());
            let dir = layers.join(format!("{:016x}", hasher.finish()));
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
            let lock = lock(&dir)?.ok_or_else(|| io::Error::other("the new layer is locked"))?;
            fs::create_dir(dir.join(UPPER_DIR))?;
            fs::create_dir(dir.join(WORK_DIR))?;
            return Ok(Self { dir, _lock: lock });
        }
        Err(io::Error::other("no free layer name"))
    }

    /// The layer at `dir`, locked, unless a live process holds it.
    pub(super) fn take(dir: PathBuf) -> io::Result<Option<Self>> {
        Ok(lock(&dir)?.map(|lock| Self { dir, _lock: lock }))
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn upper(&self) -> PathBuf {
        self.dir.join(UPPER_DIR)
    }

    /// A fresh path in the layer for a workspace directory the commit moves out whole.
    fn aside(&self) -> io::Result<PathBuf> {
        let dir = self.dir.join(ASIDE_DIR);
        real_dir(&dir, 0o700)?;
        for n in 0u32.. {
            let path = dir.join(n.to_string());
            if !fs::exists(&path)? {
                return Ok(path);
            }
        }
        Err(io::Error::other("no free name to move a directory aside"))
    }

    /// Why the helper could not set the overlay up, if it said.
    pub(super) fn setup_error(&self) -> Option<String> {
        fs::read_to_string(self.dir.join(SETUP_ERROR_FILE))
            .ok()
            .map(|why| why.trim_end().to_owned())
    }

    /// The id of the command's init process, once the helper has said it.
    pub(super) fn init_pid(&self) -> Option<i32> {
        fs::read_to_string(self.dir.join(INIT_PID_FILE))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Whether its commit began, and in which boot of the system. The overlay is mounted
    /// `volatile` (nothing in it is flushed), so only a commit of this boot has a whole upper
    /// layer; after a power cut the layer may hold torn files.
    pub(super) fn commit_mark(&self) -> Mark {
        match fs::read_to_string(self.dir.join(COMMIT_MARKER)) {
            Err(_) => Mark::None,
            Ok(boot) if Some(boot.trim()) == boot_id().as_deref() => Mark::ThisBoot,
            Ok(_) => Mark::EarlierBoot,
        }
    }

    /// Marks the commit as begun, naming this boot of the system.
    fn mark_committing(&self) -> io::Result<()> {
        use std::io::Write as _;
        let mut marker = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.dir.join(COMMIT_MARKER))?;
        marker.write_all(boot_id().unwrap_or_default().as_bytes())
    }

    /// Removes the layer: renamed out of the way at once (recovery never takes it for a
    /// layer again), then deleted on a blocking thread, with the directories the commit moved
    /// into it, so the command's result does not wait for a disk that frees blocks slowly.
    /// What a failure or an exit leaves is removed by the next recovery.
    pub(super) fn discard(self) {
        let trash = self.dir.with_file_name(format!(
            "{TRASH_PREFIX}{}",
            self.dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        let doomed = match fs::rename(&self.dir, &trash) {
            Ok(()) => trash,
            Err(_) => self.dir.clone(),
        };
        drop(self);
        remove_later(doomed);
    }
}

/// Removes the tree `dir` on a blocking thread when there is a runtime (which waits for it
/// before the process exits), else now.
pub(super) fn remove_later(dir: PathBuf) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || remove_meekly(dir))),
        Err(_) => drop(remove_tree(&dir)),
    }
}

/// Removes the tree `dir` on a thread of its own at the lowest priority, and waits for it.
///
/// Freeing a big tree (a `rm -rf` turn moves the removed tree into the layer) keeps a core
/// busy for as long as the command took, right while the turn is being stored; at the
/// lowest priority it takes only what the store leaves. The thread is its own because a
/// priority, once lowered, cannot be raised again without privilege, and the blocking pool
/// reuses its threads. Should the thread not start, the removal runs here; so does that of a
/// layer that holds no tree moved aside (one more thread would cost a small turn more than
/// its removal).
fn remove_meekly(dir: PathBuf) -> io::Result<()> {
    if fs::symlink_metadata(dir.join(ASIDE_DIR)).is_err() {
        return remove_tree(&dir);
    }
    let spare = dir.clone();
    let meek = std::thread::Builder::new()
        .name("shiro-remove-layer".to_owned())
        .spawn(move || {
            // Linux's nice value is the calling thread's; failing to lower it changes nothing
            // but the speed.
            let _ = rustix::process::setpriority_process(None, LOWEST_PRIORITY);
            remove_tree(&dir)
        });
    match meek {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the removing thread failed"))),
        Err(_) => remove_tree(&spare),
    }
}

/// The highest nice value: the lowest priority of the normal scheduling class.
const LOWEST_PRIORITY: i32 = 19;

/// This boot of the system (Linux), to tell a layer written before a restart.
fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
}

/// Whether `name` is one shiro gives a layer: 16 lowercase hex digits.
pub(super) fn is_layer_name(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| {
        name.len() == 16
            && name
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `path` as a real directory (not a link), made with `mode` when missing.
fn real_dir(path: &Path, mode: u32) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a real directory",
            path.display()
        ))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt as _;
            fs::DirBuilder::new().mode(mode).create(path)
        }
        Err(err) => Err(err),
    }
}

/// An exclusive lock on the directory `dir`, or `None` when another process holds one.
fn lock(dir: &Path) -> io::Result<Option<OwnedFd>> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(fd)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Removes a directory tree without following links; directories the command made
/// unreadable are opened up first.
fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            open_up(dir);
            fs::remove_dir_all(dir)
        }
    }
}

fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
}

/// Commits `layer` through `mutator`: captures every pre-image, marks the layer, applies the
/// changes, and removes the layer. On a failure part-way, what was applied stays (and is
/// recorded) and the layer is discarded; the error says how far it got.
pub(super) async fn commit_layer(
    mutator: &dyn Mutator,
    layer: Layer,
) -> Result<Captured, CaptureError> {
    let plan = match Plan::of(&layer.upper(), mutator).await {
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
}

impl Plan {
    pub(super) async fn of(upper: &Path, mutator: &dyn Mutator) -> Result<Self, MutatorError> {
        let mut plan = Plan::default();
        plan.merge_dir(upper, None, Merge::Over, mutator).await?;
        Ok(plan)
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
                    if matches!(now, Stat::File { mode: was, .. } if was != mode) {
                        self.steps.push(Step::SetMode(path.clone(), mode));
                        self.show(&path, true, true);
                    }
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
                if matches!(&now, Stat::Symlink { target: was } if *was == target) {
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
