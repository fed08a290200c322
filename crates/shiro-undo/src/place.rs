//! Where a workspace's state lives: out of the workspace's tree, so that nothing a command
//! does to the tree (`git clean -fdx`, `git stash --all`, `rm -rf` of a build directory)
//! reaches the undo history, the saved sessions or the overlay layers of bash.
//!
//! A [`StateDir`] is one workspace's directory under the user's state home (the CLI uses
//! `$XDG_STATE_HOME/shiro`), named after the workspace's canonical root:
//! `workspaces/<last component>-<16 hex digits of the root's hash>/`. It holds `undo/` (the
//! store), `bash/` (the layers of commands being run), `sessions/` (for the embedder) and a
//! `workspace` file naming the root, for a person who looks. Every directory of it is a real
//! directory of the user's, made `0700`: transcripts are private.
//!
//! Stores of earlier versions lived in the tree (`.shiro/undo/`, `.shiro/sessions/`); they
//! are moved here the first time the store is opened ([`migrate_legacy`]): by one rename
//! where the state home is on the workspace's file system, else by a copy that becomes the
//! new store by one rename and only then lets the old one go. A crash at any point leaves
//! one of them whole, and the next open finishes the move.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use crate::error::UndoError;
use crate::ground;
use crate::lock;
use crate::report::Notice;

/// The store's directory in a [`StateDir`].
const UNDO: &str = "undo";
/// The overlay layers' directory in a [`StateDir`].
const LAYERS: &str = "bash";
/// The saved sessions' directory in a [`StateDir`].
const SESSIONS: &str = "sessions";
/// The file naming the workspace's root.
const WORKSPACE_FILE: &str = "workspace";
/// Made once the store was first made: a store missing while this is there was deleted.
const STORE_MADE_FILE: &str = "undo-made";
/// In a store copied from another file system: which directory it was copied from.
const MIGRATED_FROM_FILE: &str = "migrated-from";
/// Where earlier versions kept the store and the sessions, relative to the workspace root.
const LEGACY_DIR: &str = ".shiro";

/// One workspace's state directory, out of the workspace's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    dir: PathBuf,
    workspace: PathBuf,
    /// The directories above `dir` that shiro owns too, outermost first: checked (and made
    /// when missing) like `dir` itself.
    owned: Vec<PathBuf>,
}

impl StateDir {
    /// The state directory of the workspace whose canonical root is `root`, under the
    /// user's state home `home` (`~/.local/state/shiro`, say): `home/workspaces/<key>/`.
    pub fn of_workspace(home: &Path, root: &Path) -> Self {
        let workspaces = home.join("workspaces");
        Self {
            dir: workspaces.join(key(root)),
            workspace: root.to_path_buf(),
            owned: vec![home.to_path_buf(), workspaces],
        }
    }

    /// A state directory at `dir` exactly, for the workspace at `root` (tests, embedders
    /// that choose their own place).
    pub fn at(dir: impl Into<PathBuf>, root: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            workspace: root.into(),
            owned: Vec::new(),
        }
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The workspace root it belongs to.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The outermost directory shiro owns: the state home for [`StateDir::of_workspace`],
    /// the directory itself for [`StateDir::at`]. A bash command is kept out of all of it.
    pub fn home(&self) -> &Path {
        self.owned.first().unwrap_or(&self.dir)
    }

    /// Where the undo store is.
    pub fn undo_dir(&self) -> PathBuf {
        self.dir.join(UNDO)
    }

    /// Where the overlay layers of bash commands are made.
    pub fn layers_dir(&self) -> PathBuf {
        self.dir.join(LAYERS)
    }

    /// Where the saved sessions are.
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join(SESSIONS)
    }

    /// Where an earlier version kept the store of this workspace (`.shiro/undo`).
    pub fn legacy_undo_dir(&self) -> PathBuf {
        self.workspace.join(LEGACY_DIR).join(UNDO)
    }

    /// Where an earlier version kept the sessions (`.shiro/sessions`).
    pub fn legacy_sessions_dir(&self) -> PathBuf {
        self.workspace.join(LEGACY_DIR).join(SESSIONS)
    }

    /// Where an earlier version made the overlay layers (`.shiro/bash`).
    pub fn legacy_layers_dir(&self) -> PathBuf {
        self.workspace.join(LEGACY_DIR).join(LAYERS)
    }

    /// Whether the state directory lies inside the workspace (or the workspace inside it):
    /// then the tools and bash could reach it, and [`UndoStore::open`](crate::UndoStore::open)
    /// refuses it.
    pub fn overlaps_workspace(&self) -> bool {
        let home = self.home();
        home.starts_with(&self.workspace) || self.workspace.starts_with(home)
    }

    /// [`StateDir::overlaps_workspace`] as an error that says what to do.
    pub fn check_apart(&self) -> Result<(), UndoError> {
        if !self.overlaps_workspace() {
            return Ok(());
        }
        Err(UndoError::UnsafeStore {
            path: self.home().to_path_buf(),
            problem: format!(
                "shiro's state directory {} and the workspace {} overlap, so the workspace's tools and commands could reach the undo history; keep the state directory outside the workspace",
                self.home().display(),
                self.workspace.display()
            ),
        })
    }

    /// Makes sure the directory is there (and the ones above it that shiro owns): real
    /// directories of the user's, made `0700` when missing.
    pub fn ensure(&self) -> Result<(), UndoError> {
        let top = self.home();
        if let Some(parent) = top.parent() {
            fs::create_dir_all(parent)
                .map_err(|err| UndoError::io("create the directory", parent, err))?;
        }
        for dir in self.owned.iter().chain([&self.dir]) {
            ground::ensure_dir(dir, &dir.display().to_string())?;
        }
        let named = self.dir.join(WORKSPACE_FILE);
        if fs::symlink_metadata(&named).is_err() {
            let mut text = self.workspace.as_os_str().as_bytes().to_vec();
            text.push(b'\n');
            crate::codec::write_atomic(&named, &text)
                .map_err(|err| UndoError::io("write", &named, err))?;
        }
        Ok(())
    }

    /// Makes sure the sessions directory is there, and returns it.
    pub fn ensure_sessions(&self) -> Result<PathBuf, UndoError> {
        self.ensure_sub(SESSIONS)
    }

    /// Makes sure the subdirectory `name` of the state directory is there, and returns it.
    pub(crate) fn ensure_sub(&self, name: &str) -> Result<PathBuf, UndoError> {
        self.ensure()?;
        let dir = self.dir.join(name);
        ground::ensure_dir(&dir, &dir.display().to_string())?;
        Ok(dir)
    }

    /// Whether the store was made here once: a store that is missing now was deleted.
    pub fn store_was_made(&self) -> bool {
        fs::symlink_metadata(self.dir.join(STORE_MADE_FILE)).is_ok()
    }

    /// Notes that the store was made.
    pub(crate) fn mark_store_made(&self) -> Result<(), UndoError> {
        let path = self.dir.join(STORE_MADE_FILE);
        if fs::symlink_metadata(&path).is_err() {
            crate::codec::write_atomic(&path, b"")
                .map_err(|err| UndoError::io("write", &path, err))?;
        }
        Ok(())
    }
}

/// The name of the directory of the workspace at `root`: its last component (letters,
/// digits, `.`, `-` and `_` kept, at most 32 of them) and 16 hex digits of its path's hash,
/// so that two workspaces never share one.
fn key(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    let name = if name.is_empty() || name.starts_with('.') {
        format!("ws{name}")
    } else {
        name
    };
    let hash = blake3::hash(root.as_os_str().as_bytes());
    let hex: String = hash.as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{name}-{hex}")
}

/// How a directory of an earlier version is moved into the state directory.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveBy {
    /// Rename when the two are on one file system, else copy.
    Rename,
    /// Always copy (the crash trials use it to reach the copy's every step).
    Copy,
}

/// Moves a store and sessions that an earlier version kept in the workspace's tree
/// (`.shiro/undo/`, `.shiro/sessions/`) into `state`, and says what it moved. Holding the
/// old store's lock while it moves, so that two processes never move it at once. A crash at
/// any point leaves the old or the new directory whole, and the next call finishes the move.
pub fn migrate_legacy(state: &StateDir) -> Result<Vec<Notice>, UndoError> {
    migrate_legacy_by(state, MoveBy::Rename)
}

/// [`migrate_legacy`], choosing how.
#[doc(hidden)]
pub fn migrate_legacy_by(state: &StateDir, by: MoveBy) -> Result<Vec<Notice>, UndoError> {
    migrate(state, by, LEGACY_LOCK_TIMEOUT)
}

/// How long a move waits for the old store's lock: as long as any store operation does by
/// default.
const LEGACY_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// [`migrate_legacy`], waiting `lock_timeout` for the old store's lock.
pub(crate) fn migrate(
    state: &StateDir,
    by: MoveBy,
    lock_timeout: std::time::Duration,
) -> Result<Vec<Notice>, UndoError> {
    let old_undo = state.legacy_undo_dir();
    let old_sessions = state.legacy_sessions_dir();
    if old_undo == state.undo_dir() {
        // The state directory is the old place itself: nothing to move.
        return Ok(Vec::new());
    }
    // Through a `.shiro` that is a link (a checkout can hold one), the "old store" would be
    // a directory elsewhere, which is not shiro's to move.
    if !is_own_dir(&state.workspace.join(LEGACY_DIR))
        || !is_own_dir(&old_undo) && !is_own_dir(&old_sessions)
    {
        return Ok(Vec::new());
    }
    state.ensure()?;
    let mut notices = Vec::new();
    let _guard = if is_own_dir(&old_undo) {
        Some(lock::acquire(
            &old_undo.join(crate::format::LOCK_FILE),
            lock_timeout,
        )?)
    } else {
        None
    };
    for (old, new) in [
        (old_undo, state.undo_dir()),
        (old_sessions, state.sessions_dir()),
    ] {
        if let Some(notice) = move_dir(&old, &new, by)? {
            if new == state.undo_dir() {
                state.mark_store_made()?;
            }
            notices.push(notice);
        }
    }
    Ok(notices)
}

/// Removes the directories an earlier version left in the tree once they hold nothing of
/// the user's: `.shiro/bash` (its layers were recovered) and then `.shiro` itself, when
/// that leaves it empty. An empty `.shiro` that held no `.shiro/bash` is left: it may be
/// the user's. Best effort: what stays is harmless.
pub(crate) fn tidy_legacy(state: &StateDir) {
    let layers = state.legacy_layers_dir();
    if !is_own_dir(&state.workspace.join(LEGACY_DIR)) || !is_own_dir(&layers) {
        return;
    }
    // What recovery left: the `.gitignore`, and layers it discarded, renamed `trash-…` and
    // still being deleted in the background.
    let leftovers = fs::read_dir(&layers).is_ok_and(|entries| {
        entries.flatten().all(|entry| {
            let name = entry.file_name();
            name == ".gitignore" || name.to_string_lossy().starts_with("trash-")
        })
    });
    if !leftovers {
        return;
    }
    let _ = fs::remove_file(layers.join(".gitignore"));
    if remove_tree(&layers).is_ok()
        && let Some(shiro) = layers.parent()
    {
        // Fails, as it should, when anything is left in it.
        let _ = fs::remove_dir(shiro);
    }
}

/// Whether `dir` is a real directory (not a link) of the current user.
fn is_own_dir(dir: &Path) -> bool {
    fs::symlink_metadata(dir)
        .is_ok_and(|meta| meta.is_dir() && meta.uid() == rustix::process::geteuid().as_raw())
}

/// `dev:ino` of a directory: what a copy of it remembers, so that the original is known
/// again after a crash.
fn identity(dir: &Path) -> io::Result<String> {
    let meta = fs::symlink_metadata(dir)?;
    Ok(format!("{}:{}", meta.dev(), meta.ino()))
}

/// Moves the directory `old` to `new` (missing), crash-safely; says what it did.
fn move_dir(old: &Path, new: &Path, by: MoveBy) -> Result<Option<Notice>, UndoError> {
    if !is_own_dir(old) || old == new {
        return Ok(None);
    }
    let io_err = |op: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |err| UndoError::io(op, &path, err)
    };
    let moved = || Notice::MovedState {
        from: old.to_path_buf(),
        to: new.to_path_buf(),
    };
    let was = identity(old).map_err(io_err("inspect", old))?;
    if fs::symlink_metadata(new).is_ok() {
        let copied_from = fs::read_to_string(new.join(MIGRATED_FROM_FILE)).ok();
        if copied_from.as_deref().map(str::trim) == Some(was.as_str()) {
            // A copy that a crash stopped before the original was removed.
            remove_tree(old).map_err(io_err("remove", old))?;
            return Ok(Some(moved()));
        }
        return Ok(Some(Notice::KeptLegacyState {
            path: old.to_path_buf(),
            store: new.to_path_buf(),
        }));
    }
    let name = new
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A copy a crash cut short: redone from the start.
    let partial = new.with_file_name(format!("{name}.moving"));
    remove_tree(&partial).map_err(io_err("remove", &partial))?;
    if by == MoveBy::Rename {
        match fs::rename(old, new) {
            Ok(()) => {
                sync_parent(new).map_err(io_err("flush", new))?;
                return Ok(Some(moved()));
            }
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {}
            Err(err) => return Err(UndoError::io("move", old, err)),
        }
    }
    copy_tree(old, &partial).map_err(io_err("copy", old))?;
    let marker = partial.join(MIGRATED_FROM_FILE);
    crate::codec::write_atomic(&marker, was.as_bytes()).map_err(io_err("write", &marker))?;
    fs::rename(&partial, new).map_err(io_err("move", &partial))?;
    sync_parent(new).map_err(io_err("flush", new))?;
    remove_tree(old).map_err(io_err("remove", old))?;
    Ok(Some(moved()))
}

/// Copies the tree of directories and regular files at `from` to `to` (missing), flushing
/// every file and directory; anything else in it (a link, say) is left out.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            let mut source = ground::open_read(&entry.path())?;
            let mut copy = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)?;
            io::copy(&mut source, &mut copy)?;
            copy.sync_all()?;
        }
    }
    fs::File::open(to)?.sync_all()
}

fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) => fs::File::open(parent)?.sync_all(),
        None => Ok(()),
    }
}

/// Removes a tree if it is there, never following a link.
fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_workspace_and_tell_two_apart() {
        let a = key(Path::new("/home/ada/shop"));
        let b = key(Path::new("/home/bob/shop"));
        assert!(a.starts_with("shop-") && b.starts_with("shop-"));
        assert_eq!(a.len(), "shop-".len() + 16);
        assert_ne!(a, b);
        assert_eq!(a, key(Path::new("/home/ada/shop")));
        assert!(key(Path::new("/")).starts_with("ws-"));
        assert!(key(Path::new("/x/.hidden")).starts_with("ws.hidden-"));
        assert!(key(Path::new("/x/a b/c:d")).starts_with("c_d-"));
    }

    #[test]
    fn a_state_dir_inside_the_workspace_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let inside = StateDir::of_workspace(&root.path().join(".state"), root.path());
        assert!(inside.overlaps_workspace());
        let err = inside.check_apart().unwrap_err().to_string();
        assert!(err.contains("overlap"), "{err}");
        let around = StateDir::of_workspace(root.path(), &root.path().join("project"));
        assert!(around.overlaps_workspace());
        let apart = StateDir::of_workspace(Path::new("/state/shiro"), root.path());
        assert!(!apart.overlaps_workspace());
    }

    /// A workspace `ws` with an earlier version's `.shiro/undo` and `.shiro/sessions`, and
    /// the state directory it moves to, all in one temporary directory.
    fn legacy() -> (tempfile::TempDir, StateDir) {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("ws");
        for (path, text) in [
            (".shiro/undo/log.jsonl", "the log\n"),
            (".shiro/undo/blobs/abc", "a blob"),
            (".shiro/undo/.gitignore", "*\n"),
            (".shiro/sessions/s1.jsonl", "a session\n"),
            (".shiro/commands.md", "## mine\n"),
        ] {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let state = StateDir::of_workspace(&top.path().join("state"), &root);
        (top, state)
    }

    fn moved_whole(state: &StateDir) {
        let read = |path: PathBuf| fs::read_to_string(path).unwrap();
        assert_eq!(read(state.undo_dir().join("log.jsonl")), "the log\n");
        assert_eq!(read(state.undo_dir().join("blobs/abc")), "a blob");
        assert_eq!(read(state.sessions_dir().join("s1.jsonl")), "a session\n");
        assert!(!state.legacy_undo_dir().exists() && !state.legacy_sessions_dir().exists());
        assert_eq!(
            read(state.workspace().join(".shiro/commands.md")),
            "## mine\n",
            "the user's files stay"
        );
        assert!(state.store_was_made());
    }

    #[test]
    fn an_old_store_is_moved_by_rename_or_by_copy() {
        for by in [MoveBy::Rename, MoveBy::Copy] {
            let (_top, state) = legacy();
            let notices = migrate_legacy_by(&state, by).unwrap();
            assert_eq!(notices.len(), 2, "{by:?}: {notices:?}");
            assert!(matches!(notices[0], Notice::MovedState { .. }));
            moved_whole(&state);
            assert_eq!(
                fs::read_to_string(state.dir().join(WORKSPACE_FILE)).unwrap(),
                format!("{}\n", state.workspace().display())
            );
            // Nothing is left to move.
            assert!(migrate_legacy_by(&state, by).unwrap().is_empty());
        }
    }

    /// A copy that a crash stopped after it became the new store, before the old one was
    /// removed: the next move removes the old one. One that stopped before: it is redone.
    #[test]
    fn a_move_cut_short_is_finished() {
        let (_top, state) = legacy();
        let old = state.legacy_undo_dir();
        state.ensure().unwrap();
        copy_tree(&old, &state.undo_dir()).unwrap();
        fs::write(
            state.undo_dir().join(MIGRATED_FROM_FILE),
            identity(&old).unwrap(),
        )
        .unwrap();
        let partial = state.dir().join("sessions.moving");
        fs::create_dir_all(&partial).unwrap();
        fs::write(partial.join("half"), "torn").unwrap();
        migrate_legacy(&state).unwrap();
        moved_whole(&state);
        assert!(!partial.exists());
    }

    #[test]
    fn an_old_store_beside_a_new_one_is_left_and_named() {
        let (_top, state) = legacy();
        fs::create_dir_all(state.undo_dir()).unwrap();
        let notices = migrate_legacy(&state).unwrap();
        assert!(
            matches!(&notices[0], Notice::KeptLegacyState { path, .. } if *path == state.legacy_undo_dir()),
            "{notices:?}"
        );
        assert!(state.legacy_undo_dir().join("log.jsonl").is_file());
    }

    /// Through a `.shiro` that is a link, or at a `.shiro/undo` that is one, nothing is
    /// shiro's to move.
    #[test]
    fn nothing_is_moved_through_a_link() {
        let (top, state) = legacy();
        let elsewhere = top.path().join("elsewhere");
        fs::rename(state.workspace().join(".shiro"), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.workspace().join(".shiro")).unwrap();
        assert!(migrate_legacy(&state).unwrap().is_empty());
        assert!(elsewhere.join("undo/log.jsonl").is_file());
        assert!(!state.dir().exists());

        fs::remove_file(state.workspace().join(".shiro")).unwrap();
        fs::create_dir(state.workspace().join(".shiro")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("undo"), state.legacy_undo_dir()).unwrap();
        assert!(migrate_legacy(&state).unwrap().is_empty());
        assert!(elsewhere.join("undo/log.jsonl").is_file());
    }
}
