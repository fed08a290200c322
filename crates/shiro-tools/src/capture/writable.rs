//! Which directories of the workspace a background command may write in (see `docs/undo.md`,
//! "Background commands"): those `.gitignore` leaves out that hold nothing git tracks.
//!
//! The kernel only allows: a bind mount is writable or not as a whole, and Landlock adds
//! rights beneath a directory that no rule can take back for one file. So a directory is
//! writable whole or not at all, and one that holds a file git tracks, or a repository of its
//! own, stays read-only; its subdirectories that hold neither are writable instead. The
//! descent follows only the directories that hold something, so its cost is bounded by what
//! git tracks there.
//!
//! - **What git tracks** is read from the index of the repository the workspace is in (at
//!   its root or above it, a worktree's or a submodule's `.git` file followed) and of each
//!   repository found inside it, without running git. An index that cannot be read leaves
//!   nothing writable under it: not knowing is no licence to write.
//! - **What is ignored** is git's rule: the `.gitignore` files of the repository,
//!   `.git/info/exclude` and the global excludes file, and no file above the repository's
//!   top (a home directory's `.gitignore` is not the project's). `.ignore`, which ripgrep
//!   reads and git does not, opens nothing: what it alone leaves out is, to git, untracked
//!   and unignored, the user's own work. A workspace in no repository, or in one that
//!   tracks nothing in it (a home directory's dotfiles repository), has its own `.gitignore`
//!   files honoured all the same, and none above it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::detect::{Listing, Seen, list};
use crate::git::{Reader, read_entries};
use crate::path::WorkspacePath;

/// The most directories `.gitignore` leaves out that a background command may write in.
pub const BACKGROUND_MAX_WRITABLE: usize = 64;

/// How many of the directories kept read-only a note names.
const MAX_NAMED: usize = 8;

/// Where a background command may write in a workspace, as found when it starts.
#[derive(Debug, Default)]
pub(super) struct Writable {
    /// The directories, relative to the root, sorted; at most [`BACKGROUND_MAX_WRITABLE`].
    pub(super) dirs: Vec<WorkspacePath>,
    /// What the command's output starts with: the directories that were left read-only and
    /// why.
    pub(super) notes: Vec<String>,
    /// The listing of the directories and everything in them.
    pub(super) seen: Listing,
}

/// The directories of the workspace `root` that a background command may write in: those
/// `.gitignore` leaves out that hold nothing git tracks (see the module docs), real
/// directories only, `.git` and shiro's own left out, with their listing.
pub(super) fn writable(root: &Path) -> Writable {
    find(root).unwrap_or_else(|why| Writable {
        notes: vec![format!(
            "the workspace is read-only to it: {why}, so which directories hold files git \
             tracks is not known"
        )],
        ..Writable::default()
    })
}

fn find(root: &Path) -> Result<Writable, String> {
    let mut held = Held::default();
    // A repository above the workspace that tracks nothing in it (a home directory's dotfiles
    // repository, whose `.gitignore` ignores everything) is not the workspace's.
    let in_repository = match enclosing(root)? {
        Some((git_dir, prefix)) => {
            held.add_index(&git_dir, &prefix, b"")?;
            prefix.is_empty() || !held.paths.is_empty()
        }
        None => false,
    };
    let visited = not_ignored(root, in_repository);
    for dir in visited.iter().filter(|dir| *dir != root) {
        let Some(rel) = relative(root, dir) else {
            continue;
        };
        let dot = dir.join(".git");
        if fs::symlink_metadata(&dot).is_err() {
            continue;
        }
        // A repository inside the workspace: its index says what it tracks.
        let rel = rel.as_str().as_bytes();
        let read = git_dir_of(&dot).and_then(|git_dir| held.add_index(&git_dir, b"", rel));
        if read.is_err() {
            held.add_whole(rel.to_vec());
        }
    }
    let mut all = Listing::new();
    let mut granted = Vec::new();
    let mut kept = Vec::new();
    for candidate in candidates(root, &visited) {
        let rel = PathBuf::from(candidate.as_str());
        let mut listing = Listing::new();
        if let Ok(meta) = fs::symlink_metadata(root.join(&rel)) {
            listing.insert(rel.clone(), Seen::of(&meta));
            list(root, &rel, &mut listing);
        }
        // A repository of its own in it (a clone kept in an ignored `vendor/`): its files are
        // tracked there, and its `.git` is no listing's.
        for (path, _) in listing.iter().filter(|(_, seen)| seen.is_dir()) {
            if fs::symlink_metadata(root.join(path).join(".git")).is_ok() {
                held.add_whole(path.as_os_str().as_bytes().to_vec());
            }
        }
        if held.holds(candidate.as_str().as_bytes()) {
            kept.push(candidate.clone());
        }
        grant(root, &held, candidate, &mut granted);
        all.append(&mut listing);
    }
    granted.sort();
    let mut notes = Vec::new();
    if !kept.is_empty() {
        notes.push(format!(
            "read-only to it though .gitignore leaves them out, since they hold files git \
             tracks or a repository of their own (their subdirectories that hold neither are \
             writable): {}",
            named(&kept, MAX_NAMED)
        ));
    }
    if granted.len() > BACKGROUND_MAX_WRITABLE {
        notes.push(format!(
            "only the first {BACKGROUND_MAX_WRITABLE} ignored directories are writable; these \
             are read-only to it: {}",
            named(&granted[BACKGROUND_MAX_WRITABLE..], usize::MAX)
        ));
        granted.truncate(BACKGROUND_MAX_WRITABLE);
    }
    let mut seen = Listing::new();
    for dir in &granted {
        let dir = Path::new(dir.as_str());
        let below = all.range(dir.to_path_buf()..);
        seen.extend(
            below
                .take_while(|(path, _)| path.starts_with(dir))
                .map(|(path, entry)| (path.clone(), entry.clone())),
        );
    }
    Ok(Writable {
        dirs: granted,
        notes,
        seen,
    })
}

/// Adds to `granted` the directory `candidate`, when it holds nothing, else those below it
/// that hold nothing: only the directories that hold something are descended into, and not
/// those held whole (a repository, a submodule, a sparse directory).
fn grant(root: &Path, held: &Held, candidate: WorkspacePath, granted: &mut Vec<WorkspacePath>) {
    let mut stack = vec![candidate];
    while let Some(dir) = stack.pop() {
        let rel = dir.as_str().as_bytes();
        if !held.holds(rel) {
            granted.push(dir);
            continue;
        }
        if held.is_entry(rel) || held.within_whole(rel) {
            continue;
        }
        let Ok(entries) = fs::read_dir(root.join(dir.as_str())) else {
            continue;
        };
        for entry in entries.flatten() {
            let real_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if !real_dir || entry.file_name() == ".git" {
                continue;
            }
            if let Some(child) = relative(root, &entry.path()).filter(|rel| !rel.is_internal()) {
                stack.push(child);
            }
        }
    }
}

/// The directories of `root` the ignore rules do not leave out (see the module docs), `root`
/// among them; `.git` and what is below a link left out. Out of a repository, only the
/// workspace's own `.gitignore` files count, not those above it.
fn not_ignored(root: &Path, in_repository: bool) -> BTreeSet<PathBuf> {
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .parents(in_repository)
        .require_git(in_repository)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    walk.flatten()
        .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_dir()))
        .map(ignore::DirEntry::into_path)
        .collect()
}

/// The outermost directories the ignore rules leave out: the real directories in `visited`
/// ones that were not visited, `.git` and shiro's own left out; sorted.
fn candidates(root: &Path, visited: &BTreeSet<PathBuf>) -> Vec<WorkspacePath> {
    let mut found = Vec::new();
    for dir in visited {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let real_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if !real_dir || visited.contains(&path) || entry.file_name() == ".git" {
                continue;
            }
            if let Some(rel) = relative(root, &path).filter(|rel| !rel.is_internal()) {
                found.push(rel);
            }
        }
    }
    found.sort();
    found
}

/// `path` relative to `root`; `None` outside it, at it, or not UTF-8.
fn relative(root: &Path, path: &Path) -> Option<WorkspacePath> {
    let rel = path.strip_prefix(root).ok()?.to_str()?;
    if rel.is_empty() {
        return None;
    }
    WorkspacePath::from_relative(rel).ok()
}

/// `dirs` as `a/, b/`, at most `most` of them, then how many more.
fn named(dirs: &[WorkspacePath], most: usize) -> String {
    let mut text = String::new();
    for dir in dirs.iter().take(most) {
        let _ = write!(text, "{}{dir}/", if text.is_empty() { "" } else { ", " });
    }
    if dirs.len() > most {
        let _ = write!(text, " and {} more", dirs.len() - most);
    }
    text
}

/// The git directory of the repository the workspace `root` is in, and the root's path in
/// its worktree (`a/b/`, empty at its top); `None` when it is in none.
fn enclosing(root: &Path) -> Result<Option<(PathBuf, Vec<u8>)>, String> {
    let real = fs::canonicalize(root)
        .map_err(|err| format!("cannot resolve {}: {err}", root.display()))?;
    for top in real.ancestors() {
        let dot = top.join(".git");
        match fs::metadata(&dot) {
            Ok(_) => {
                let git_dir = git_dir_of(&dot)?;
                let mut prefix = real
                    .strip_prefix(top)
                    .map(|rel| rel.as_os_str().as_bytes().to_vec())
                    .unwrap_or_default();
                if !prefix.is_empty() {
                    prefix.push(b'/');
                }
                return Ok(Some((git_dir, prefix)));
            }
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
            Err(err) => return Err(format!("cannot read {}: {err}", dot.display())),
        }
    }
    Ok(None)
}

/// The git directory `dot` names: itself, or the one a `.git` file (a worktree's, a
/// submodule's) points to with `gitdir: PATH`.
fn git_dir_of(dot: &Path) -> Result<PathBuf, String> {
    let meta = fs::metadata(dot).map_err(|err| format!("cannot read {}: {err}", dot.display()))?;
    if meta.is_dir() {
        return Ok(dot.to_path_buf());
    }
    let text =
        fs::read_to_string(dot).map_err(|err| format!("cannot read {}: {err}", dot.display()))?;
    let target = text
        .lines()
        .find_map(|line| line.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|target| !target.is_empty())
        .ok_or_else(|| format!("{} names no git directory", dot.display()))?;
    let holder = dot.parent().unwrap_or(Path::new("/"));
    Ok(holder.join(target))
}

/// What the repositories of a workspace hold, by path relative to its root.
#[derive(Debug, Default)]
struct Held {
    /// The paths git tracks, and the directories held whole.
    paths: BTreeSet<Vec<u8>>,
    /// The directories nothing below which may be written, whatever is there: a repository
    /// of its own in an ignored directory, or one whose index could not be read; a sparse
    /// directory of the index.
    whole: BTreeSet<Vec<u8>>,
}

impl Held {
    /// Whether anything is held at `rel` or below it, or all of it is.
    fn holds(&self, rel: &[u8]) -> bool {
        let mut below = rel.to_vec();
        below.push(b'/');
        let inside =
            (self.paths.range(below.clone()..).next()).is_some_and(|path| path.starts_with(&below));
        self.paths.contains(rel) || inside || self.within_whole(rel)
    }

    /// Whether `rel` itself is held: a tracked path (a submodule, or a file where there is
    /// a directory now) or a directory held whole.
    fn is_entry(&self, rel: &[u8]) -> bool {
        self.paths.contains(rel)
    }

    /// Whether `rel` is a directory held whole or lies below one.
    fn within_whole(&self, rel: &[u8]) -> bool {
        let ancestors = rel
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'/')
            .map(|(at, _)| &rel[..at]);
        self.whole.contains(rel) || ancestors.into_iter().any(|dir| self.whole.contains(dir))
    }

    fn add_whole(&mut self, rel: Vec<u8>) {
        self.paths.insert(rel.clone());
        self.whole.insert(rel);
    }

    /// Adds the paths of the index in `git_dir` that start with `within` (of its worktree),
    /// with `within` replaced by `under` (of the workspace). No index: nothing is tracked.
    fn add_index(&mut self, git_dir: &Path, within: &[u8], under: &[u8]) -> Result<(), String> {
        let Some(mut index) = read_index(&git_dir.join("index"))? else {
            return Ok(());
        };
        // A split index (`core.splitIndex`) keeps most entries in a shared index. Those it
        // marks as removed are counted all the same: too many is the safe side.
        if let Some(shared) = index.shared.take() {
            let file = git_dir.join(format!("sharedindex.{shared}"));
            let shared = read_index(&file)?
                .ok_or_else(|| format!("{} is missing, which the index names", file.display()))?;
            index.entries.extend(shared.entries);
        }
        for (path, mode) in index.entries {
            // A split index's entry that replaces a shared one has no path of its own.
            let Some(rest) = path.strip_prefix(within).filter(|_| !path.is_empty()) else {
                continue;
            };
            let mut rel = under.to_vec();
            if !rel.is_empty() && !rest.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(rest);
            // A sparse directory (`index.sparse`): what is below it is in no entry.
            if mode == SPARSE_DIRECTORY {
                while rel.last() == Some(&b'/') {
                    rel.pop();
                }
                self.add_whole(rel);
            } else {
                self.paths.insert(rel);
            }
        }
        Ok(())
    }
}

/// The mode of a sparse directory entry.
const SPARSE_DIRECTORY: u32 = 0o040_000;

/// An index file's entries (path, mode) and the shared index it names, if it is split.
#[derive(Debug, Default, PartialEq, Eq)]
struct Index {
    entries: Vec<(Vec<u8>, u32)>,
    /// The object id of the shared index, in hex.
    shared: Option<String>,
}

/// The index at `file`; `None` when there is none.
fn read_index(file: &Path) -> Result<Option<Index>, String> {
    let bytes = match fs::read(file) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read {}: {err}", file.display())),
    };
    // The hash's length is not in the index: SHA-1's, else SHA-256's.
    [20, 32]
        .into_iter()
        .find_map(|oid_len| parse_index(&bytes, oid_len))
        .map(Some)
        .ok_or_else(|| format!("{} is not an index shiro can read", file.display()))
}

/// The entries of an index file (format versions 2 to 4) whose object ids are `oid_len`
/// bytes long; `None` when it is not one, read to its last byte.
fn parse_index(bytes: &[u8], oid_len: usize) -> Option<Index> {
    let mut at = Reader { bytes, pos: 0 };
    let entries = read_entries(&mut at, oid_len)?;
    let mut index = Index {
        entries: (entries.into_iter())
            .map(|entry| (entry.path, entry.mode))
            .collect(),
        shared: None,
    };
    // The extensions, each a signature and a length, then the checksum.
    while bytes.len().checked_sub(at.pos)? != oid_len {
        let signature = at.take(4)?;
        let len = usize::try_from(at.u32()?).ok()?;
        let data = at.take(len)?;
        if signature == b"link" {
            let oid = data.get(..oid_len)?;
            if oid.iter().any(|&byte| byte != 0) {
                index.shared = Some(oid.iter().map(|byte| format!("{byte:02x}")).collect());
            }
        }
    }
    Some(index)
}

#[cfg(test)]
mod tests;
