//! Helpers shared by the integration tests: a tree model, tree snapshots, temp stores.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use shiro_tools::{MemMutator, Stat, WorkspacePath};

/// A tree as `path -> (stat, bytes)`, the shape of `MemMutator::snapshot`.
pub type Tree = BTreeMap<String, (Stat, Option<Vec<u8>>)>;

pub fn p(s: &str) -> WorkspacePath {
    WorkspacePath::from_relative(s).unwrap()
}

/// A temporary directory on tmpfs when there is one: the store flushes every record to disk,
/// which costs milliseconds on a real disk and nothing on tmpfs.
pub fn fast_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}

pub fn mem_tree(mem: &MemMutator) -> Tree {
    mem.snapshot()
}

/// The tree on disk under `root`, leaving out the store (`.shiro/`).
pub fn disk_tree(root: &Path) -> Tree {
    let mut tree = Tree::new();
    walk(root, root, &mut tree);
    tree
}

fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == ".shiro" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            tree.insert(rel, (Stat::Symlink { target }, None));
        } else if meta.is_dir() {
            tree.insert(rel, (Stat::Dir { mode }, None));
            walk(root, &path, tree);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            tree.insert(
                rel,
                (
                    Stat::File {
                        mode,
                        len: bytes.len() as u64,
                    },
                    Some(bytes),
                ),
            );
        }
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `PROPTEST_CASES`, as `cargo xtask test` (256) and `cargo xtask soak` (20000) set it.
#[allow(clippy::disallowed_methods)] // The suite's own setting, from xtask.
pub fn base_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// The state directory of a store kept in `dir`, at `dir/.shiro`, so its store is
/// `dir/.shiro/undo` as the tests look for it. The workspace is `dir` too (an in-memory
/// workspace's, or a disk workspace whose state the test keeps beside it): nothing is taken
/// for an earlier version's store to move.
#[allow(dead_code)] // Not every test file opens a store on disk.
pub fn state(dir: &Path) -> shiro_undo::StateDir {
    shiro_undo::StateDir::at(dir.join(".shiro"), dir)
}

/// Bytes that do not compress, so the store's size is predictable; no two seeds share them.
pub fn noise(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
