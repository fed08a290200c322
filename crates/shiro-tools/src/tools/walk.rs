//! What `list_dir`, `glob` and `grep` share: finding where to start inside the workspace and
//! walking the tree on disk with the `ignore` crate's parallel walker, so `.gitignore` and
//! `.ignore` are honoured and every core does its share, as in ripgrep.
//!
//! The walk goes to disk rather than through the [`Mutator`](crate::Mutator): these tools never
//! write, so there is nothing to record, and the parallel walker and ripgrep's searcher work
//! on the file system, not through one `read_dir` and one whole-file `read` at a time. The
//! start is resolved with [`WorkspacePath::resolve`], canonicalised and checked to lie under
//! the canonical root; symbolic links met on the way are reported, never followed; and since
//! the `ignore` walker opens directories by path, every entry it yields is checked beneath the
//! jail's handle on the root ([`Beneath`]: the same inode, through real directories only)
//! before it is reported, and files are read through that handle too.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::io::ErrorKind;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::mutator::fs_jail::Jail;
use crate::path::{PathError, WorkspacePath};
use crate::tool::ToolError;

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A socket, a FIFO, a device: listed, never read.
    Other,
}

/// The paths a walking tool leaves out, as the agent's permission rules deny reading them:
/// a workspace path (`/`-separated, relative to the root) is hidden when the function says
/// so, and a hidden directory is not entered.
#[derive(Clone)]
pub struct Hidden(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl Hidden {
    /// Hides the paths for which `hides` is true.
    pub fn new(hides: impl Fn(&str) -> bool + Send + Sync + 'static) -> Hidden {
        Hidden(Arc::new(hides))
    }

    /// Whether `rel` is hidden.
    pub fn hides(&self, rel: &str) -> bool {
        (self.0)(rel)
    }
}

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hidden(..)")
    }
}

/// Where a walk starts: an existing file or directory inside the workspace.
#[derive(Debug)]
pub(crate) struct Start {
    /// The canonical workspace root.
    root: PathBuf,
    /// The canonical start, under `root`.
    pub full: PathBuf,
    /// Whether the start is a directory (else a file).
    pub is_dir: bool,
    /// The root, opened: every entry is checked and read beneath it.
    pub jail: Jail,
    /// The paths left out, if any, and how many the walk met.
    hidden: Option<(Hidden, Arc<AtomicUsize>)>,
}

impl Start {
    /// The start for messages: its workspace path, or "the workspace root".
    pub fn describe(&self) -> String {
        match self.rel() {
            rel if rel.is_empty() => "the workspace root".to_owned(),
            rel => rel,
        }
    }

    /// The start relative to the root, `/`-separated; empty for the root itself.
    pub fn rel(&self) -> String {
        relative(&self.root, &self.full)
    }

    /// Leaves the paths `hidden` hides out of the walk.
    pub fn hiding(mut self, hidden: Option<&Hidden>) -> Start {
        self.hidden = hidden.map(|hidden| (hidden.clone(), Arc::default()));
        self
    }

    /// How many paths the walk left out (a directory counts once, its contents not at all).
    pub fn hidden_met(&self) -> usize {
        self.hidden
            .as_ref()
            .map_or(0, |(_, met)| met.load(Ordering::Relaxed))
    }

    /// `text`, with a line saying how many paths the walk left out, when it left some out:
    /// the model should know that the answer is not the whole tree.
    pub fn noting_hidden(&self, mut text: String) -> String {
        let met = self.hidden_met();
        if met > 0 {
            let _ = write!(
                text,
                "\n({met} {} the permission rules deny reading {} left out)",
                if met == 1 { "path" } else { "paths" },
                if met == 1 { "was" } else { "were" }
            );
        }
        text
    }
}

/// Resolves the directory or file a walking tool was asked to start from.
///
/// `input` of `None`, `""` or `"."` means the workspace root. Blocking: call it from
/// [`blocking`].
pub(crate) fn open(tool: &str, root: &Path, input: Option<&str>) -> Result<Start, ToolError> {
    let canonical = root
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            ToolError::refused(format!(
                "{tool} needs a workspace on disk, and the workspace root {} is not a directory on \
             disk; use read_file on paths you know instead",
                root.display()
            ))
        })?;
    let jail = Jail::open(&canonical)
        .map_err(|err| ToolError::refused(format!("cannot open the workspace root: {err}")))?;
    let rel = match input.map(str::trim) {
        None | Some("" | ".") => None,
        Some(text) => match WorkspacePath::resolve(root, text) {
            Ok(path) => Some(path),
            Err(PathError::Empty) => None,
            Err(err) => return Err(ToolError::refused(err.to_string())),
        },
    };
    let Some(rel) = rel else {
        return Ok(Start {
            root: canonical.clone(),
            full: canonical,
            is_dir: true,
            jail,
            hidden: None,
        });
    };
    let full = rel.to_fs_path(&canonical);
    let resolved = full.canonicalize().map_err(|err| match err.kind() {
        ErrorKind::NotFound => ToolError::refused(format!(
            "{rel} does not exist; call list_dir on its parent directory or glob to find the \
             right path"
        )),
        // The walking tools name the looping link when they can (see `or_broken_link`).
        _ if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            ToolError::refused(format!("{rel} goes through a symbolic link that loops"))
        }
        _ => ToolError::refused(format!("cannot open {rel}: {err}")),
    })?;
    if !resolved.starts_with(&canonical) {
        return Err(ToolError::refused(format!(
            "{rel} leads outside the workspace through a symbolic link; give a path inside the \
             workspace"
        )));
    }
    let is_dir = resolved.is_dir();
    Ok(Start {
        root: canonical,
        full: resolved,
        is_dir,
        jail,
        hidden: None,
    })
}

/// One entry the walk found under the start, not yet checked against the jail: check it with
/// [`Beneath`] before reporting or reading it.
#[derive(Debug)]
pub(crate) struct Found<'w> {
    /// The path relative to the root.
    rel: &'w Path,
    /// The path relative to the start.
    below: &'w Path,
    /// The inode the walk saw there.
    ino: Option<u64>,
    pub kind: Kind,
}

impl Found<'_> {
    /// Whether `listing` (from [`direct_entries`]) holds this entry: the same name with the
    /// inode the walk saw.
    pub fn listed_in(&self, listing: &HashMap<Vec<u8>, u64>) -> bool {
        let name = self.rel.file_name().map(OsStr::as_bytes);
        name.and_then(|name| listing.get(name))
            .is_some_and(|ino| Some(*ino) == self.ino)
    }

    /// The workspace path, `/`-separated, relative to the root.
    pub fn rel(&self) -> String {
        self.rel.to_string_lossy().into_owned()
    }

    /// The path relative to the start, for matching globs against.
    pub fn below_start(&self) -> Cow<'_, str> {
        self.below.to_string_lossy()
    }
}

/// `path` below `prefix`, when `path` starts with it: by bytes, since the walker builds every
/// path by joining names onto the one it started from (and the component-wise
/// `Path::strip_prefix` shows in a profile of a walk of 100,000 files).
fn below<'p>(path: &'p Path, prefix: &Path) -> Option<&'p Path> {
    let (path, prefix) = (path.as_os_str().as_bytes(), prefix.as_os_str().as_bytes());
    let rest = path.strip_prefix(prefix)?;
    let rest = match rest {
        [] => rest,
        [b'/', rest @ ..] => rest,
        // The prefix ends in `/` only when it is `/` itself.
        _ if prefix.ends_with(b"/") => rest,
        _ => return None,
    };
    Some(Path::new(OsStr::from_bytes(rest)))
}

/// Checks entries of a walk beneath the jail's handle on the root, and opens them there.
///
/// The `ignore` walker reads directories by path, so a directory swapped for a link while the
/// walk runs could make it list what lies outside. Every entry is therefore looked up again
/// in its directory opened through the jail (real directories only), and only an entry with
/// the inode the walker saw is reported or read. One walker thread meets the entries of a
/// directory together, so the directory handle is kept for the next entry.
pub(crate) struct Beneath<'j> {
    jail: &'j Jail,
    /// The last directory opened: its path relative to the root, and its handle.
    dir: Option<(PathBuf, OwnedFd)>,
}

impl<'j> Beneath<'j> {
    fn new(jail: &'j Jail) -> Self {
        Self { jail, dir: None }
    }

    /// The handle on the directory holding `found`, and `found`'s name in it.
    fn parent<'f>(&mut self, found: &Found<'f>) -> Option<(BorrowedFd<'_>, &'f OsStr)> {
        let name = found.rel.file_name()?;
        let dir = found.rel.parent().unwrap_or(Path::new(""));
        let cached = matches!(&self.dir, Some((path, _)) if path == dir);
        if !cached {
            let fd = self.jail.open_dir(dir.to_str()?).ok()?;
            self.dir = Some((dir.to_path_buf(), fd));
        }
        let (_, fd) = self.dir.as_ref()?;
        Some((fd.as_fd(), name))
    }

    /// Whether `found` is what lies at its path beneath the root.
    pub fn holds(&mut self, found: &Found<'_>) -> bool {
        let ino = found.ino;
        let Some((dir, name)) = self.parent(found) else {
            return false;
        };
        matches!(rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW),
            Ok(stat) if Some(stat.st_ino) == ino)
    }

    /// Opens the regular file `found` for reading beneath the root, with its length; `None`
    /// when something else is there now (a link, a pipe, another file) or it cannot be read.
    /// Without blocking, so a named pipe put there since the walk is never waited on.
    pub fn open_file(&mut self, found: &Found<'_>) -> Option<(fs::File, u64)> {
        let ino = found.ino;
        let (dir, name) = self.parent(found)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = rustix::fs::openat(dir, name, flags | OFlags::CLOEXEC, Mode::empty()).ok()?;
        let stat = rustix::fs::fstat(&fd).ok()?;
        let regular = FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile;
        if !regular || Some(stat.st_ino) != ino {
            return None;
        }
        Some((fs::File::from(fd), u64::try_from(stat.st_size).unwrap_or(0)))
    }
}

/// Walks the tree under `start` (which must be a directory) on several threads, as ripgrep
/// does (on this one for a listing of depth 1). Ignore files are honoured; `.git` and `.shiro/undo` are never entered or reported;
/// symbolic links are reported, not followed. Entries come in no particular order: callers
/// sort what they keep (see [`path_order`]).
///
/// Each thread has a state made by `state` and a [`Beneath`] of its own; `visit` sees every
/// entry below the start (never the start itself) with its thread's state, and the states
/// are returned when the walk ends. `max_depth` counts from the start (1 lists its direct
/// entries). The walk stops early when `cancel` is set. Blocking: call it from [`blocking`].
pub(crate) fn walk<S: Send>(
    start: &Start,
    max_depth: Option<usize>,
    cancel: &AtomicBool,
    state: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, &mut Beneath<'_>, Found<'_>) + Sync,
) -> Vec<S> {
    let walk = Walk {
        start,
        jail: &start.jail,
        cancel,
        reached: AtomicBool::new(false),
        state: &state,
        visit: &visit,
        states: Mutex::new(Vec::new()),
    };
    // Walk from the root so that ignore files between the root and the start apply, pruning
    // every branch that does not lead to the start. If the start itself is ignored, the user
    // asked for it by name: walk it on its own, with only the ignore files inside it.
    walk.from(&start.root, max_depth);
    if !walk.reached.load(Ordering::Relaxed) && !cancel.load(Ordering::Relaxed) {
        walk.from(&start.full, max_depth);
    }
    walk.states
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
}

/// One parallel walk's shared parts.
struct Walk<'w, S, M, V> {
    start: &'w Start,
    jail: &'w Jail,
    cancel: &'w AtomicBool,
    /// Whether the walk from the root met the start.
    reached: AtomicBool,
    state: &'w M,
    visit: &'w V,
    /// The states of the threads that have finished.
    states: Mutex<Vec<S>>,
}

impl<S, M, V> Walk<'_, S, M, V>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &mut Beneath<'_>, Found<'_>) + Sync,
{
    /// One walk from `from` (the root or the start).
    fn from(&self, from: &Path, max_depth: Option<usize>) {
        let start_depth = self
            .start
            .full
            .strip_prefix(from)
            .map_or(0, |rest| rest.components().count());
        let root = Arc::new(self.start.root.clone());
        let target = Arc::new(self.start.full.clone());
        let hidden = self.start.hidden.clone();
        let mut builder = WalkBuilder::new(from);
        builder
            .standard_filters(true)
            // Dotfiles such as `.github/` matter in a code base; `.git/` is pruned below.
            .hidden(false)
            // Ignore files above the workspace root are outside the jail and the model's view.
            .parents(false)
            // The global excludes file lives in the user's home: libraries do not read it.
            .git_global(false)
            // A workspace that is not (yet) a git repository still means its `.gitignore`.
            .require_git(false)
            .follow_links(false)
            .max_depth(max_depth.map(|depth| depth + start_depth))
            .filter_entry(move |entry| {
                let path = entry.path();
                if is_hidden_internal(&root, path) {
                    return false;
                }
                let on_the_way = *target == *root
                    || below(path, &target).is_some()
                    || below(&target, path).is_some();
                if !on_the_way {
                    return false;
                }
                if let (Some((hidden, met)), Some(rel)) = (&hidden, below(path, &root))
                    && !rel.as_os_str().is_empty()
                    && hidden.hides(&rel.to_string_lossy())
                {
                    met.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                true
            });
        if max_depth == Some(1) {
            // One directory's entries: threads would cost more to start than they save.
            let mut visitor = Threads(self).build();
            for entry in builder.build() {
                if let WalkState::Quit = visitor.visit(entry) {
                    break;
                }
            }
        } else {
            builder.build_parallel().visit(&mut Threads(self));
        }
    }
}

/// Makes one [`Visitor`] a thread.
struct Threads<'a, 'w, S, M, V>(&'a Walk<'w, S, M, V>);

impl<'a, S, M, V> ParallelVisitorBuilder<'a> for Threads<'a, '_, S, M, V>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &mut Beneath<'_>, Found<'_>) + Sync,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Visitor {
            walk: self.0,
            state: Some((self.0.state)()),
            beneath: Beneath::new(self.0.jail),
        })
    }
}

/// One walker thread: its state, handed back when the thread is done.
struct Visitor<'a, 'w, S, M, V> {
    walk: &'a Walk<'w, S, M, V>,
    state: Option<S>,
    beneath: Beneath<'a>,
}

impl<S, M, V> ParallelVisitor for Visitor<'_, '_, S, M, V>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &mut Beneath<'_>, Found<'_>) + Sync,
{
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        let walk = self.walk;
        if walk.cancel.load(Ordering::Relaxed) {
            return WalkState::Quit;
        }
        // Unreadable entries (permissions, races with deletion) are skipped, as `rg` does.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        let path = entry.path();
        if path.as_os_str() == walk.start.full.as_os_str() {
            walk.reached.store(true, Ordering::Relaxed);
            return WalkState::Continue;
        }
        let (Ok(below), Ok(rel), Some(state)) = (
            below(path, &walk.start.full).ok_or(()),
            below(path, &walk.start.root).ok_or(()),
            self.state.as_mut(),
        ) else {
            return WalkState::Continue;
        };
        let kind = match entry.file_type() {
            Some(t) if t.is_symlink() => Kind::Symlink,
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        let found = Found {
            rel,
            below,
            ino: entry.ino(),
            kind,
        };
        (walk.visit)(state, &mut self.beneath, found);
        WalkState::Continue
    }
}

impl<S, M, V> Drop for Visitor<'_, '_, S, M, V> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            let mut states = self
                .walk
                .states
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            states.push(state);
        }
    }
}

/// The order of workspace paths that a depth-first walk with each directory's entries sorted
/// by name gives: component by component, so `a/b` comes before `a.txt`.
pub(crate) fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    // No name holds a NUL byte, so reading `/` as one sorts a parent's entries before a
    // longer name that shares its prefix.
    fn key(byte: u8) -> u8 {
        if byte == b'/' { 0 } else { byte }
    }
    a.bytes().map(key).cmp(b.bytes().map(key))
}

/// Keeps the first `keep` of `paths` in [`path_order`], sorted; the rest are dropped
/// without being sorted.
pub(crate) fn first_in_order(paths: &mut Vec<String>, keep: usize) {
    if paths.len() > keep && keep > 0 {
        paths.select_nth_unstable_by(keep - 1, |a, b| path_order(a, b));
    }
    paths.truncate(keep);
    paths.sort_unstable_by(|a, b| path_order(a, b));
}

/// Whether `path` is `.git` (anywhere: submodules have their own) or `.shiro/undo`.
fn is_hidden_internal(root: &Path, path: &Path) -> bool {
    match path.file_name() {
        Some(name) if name == ".git" => true,
        Some(name) if name == "undo" => path.parent().is_some_and(|dir| {
            dir.file_name() == Some(OsStr::new(".shiro")) && dir.parent() == Some(root)
        }),
        _ => false,
    }
}

/// The entries directly in the directory `start`, read beneath the jail's handle on the root:
/// each name with its inode, `.git` (and `.shiro/undo`) left out. What a walk of depth 1
/// reports is checked against it (the same name with the same inode is inside), and what it
/// does not report is what ignore files hid. Blocking.
pub(crate) fn direct_entries(start: &Start) -> Result<HashMap<Vec<u8>, u64>, ToolError> {
    let rel = start.rel();
    let entries = start
        .jail
        .dir_entries(&rel)
        .map_err(|err| ToolError::refused(format!("cannot list {}: {err}", start.describe())))?;
    Ok(entries
        .into_iter()
        .filter(|(name, _)| {
            name.as_slice() != b".git" && !(rel == ".shiro" && name.as_slice() == b"undo")
        })
        .collect())
}

/// `path` relative to `root`, `/`-separated (lossy for names that are not UTF-8).
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).map(slash_path).unwrap_or_default()
}

fn slash_path(path: &Path) -> String {
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// Runs blocking work (a walk, file reads) on Tokio's blocking pool. When the returned future
/// is dropped (the turn was cancelled), `cancel` is set so the work stops early.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce(&AtomicBool) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    struct CancelOnDrop(Arc<AtomicBool>);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(Arc::clone(&cancel));
    let result = tokio::task::spawn_blocking(move || work(&cancel))
        .await
        .unwrap_or_else(|join| {
            Err(ToolError::refused(format!(
                "the tool was interrupted: {join}"
            )))
        });
    drop(guard);
    result
}

/// A glob the model gave, compiled the way `rg -g` and `.gitignore` read one: `*` stays within
/// one path component, and a pattern without `/` matches a file name at any depth.
#[derive(Debug)]
pub(crate) struct PathGlob {
    matcher: globset::GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    /// Compiles `pattern`; the error tells the model how to fix it.
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        let glob = globset::GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| {
                ToolError::refused(format!(
                    "invalid glob {pattern:?}: {}; use `*` within a name, `**` across \
                     directories and `{{a,b}}` for alternatives",
                    err.kind()
                ))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            name_only: !trimmed.contains('/'),
        })
    }

    /// Whether the entry at `below_start` (relative to where the search started) matches.
    pub fn is_match(&self, below_start: &str) -> bool {
        if self.name_only {
            let name = below_start.rsplit('/').next().unwrap_or(below_start);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(below_start)
        }
    }
}
