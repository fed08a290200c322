//! An in-memory tree with the same observable behaviour as the disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, DirEntry, Found, Mutator, MutatorError, Stamp, Stat,
    link_destination, resolve_links,
};
use crate::path::{PathError, WorkspacePath};

/// The virtual root of every in-memory workspace.
const MEM_ROOT: &str = "/workspace";
use super::MAX_LINKS;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Symlink { target: String },
}

impl Node {
    fn stat(&self) -> Stat {
        match self {
            Node::File { bytes, mode } => Stat::File {
                mode: *mode,
                len: bytes.len() as u64,
            },
            Node::Dir { mode } => Stat::Dir { mode: *mode },
            Node::Symlink { target } => Stat::Symlink {
                target: target.clone(),
            },
        }
    }
}

/// A [`Mutator`] over an in-memory tree rooted at `/workspace`, for tests and dry runs.
///
/// Clones share one tree.
#[derive(Debug, Clone, Default)]
pub struct MemMutator {
    tree: Arc<Mutex<BTreeMap<String, Node>>>,
}

/// The outcome of resolving the parent directories of a path.
enum Resolved {
    /// The real (link-free) path of the entry.
    At(String),
    /// A parent is missing or not a directory; the entry cannot exist.
    Missing(MutatorError),
}

impl MemMutator {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every entry as `(path, stat)`, sorted; symlinks are not followed. For comparing trees.
    pub fn snapshot(&self) -> BTreeMap<String, (Stat, Option<Vec<u8>>)> {
        self.lock()
            .iter()
            .map(|(path, node)| {
                let bytes = match node {
                    Node::File { bytes, .. } => Some(bytes.clone()),
                    _ => None,
                };
                (path.clone(), (node.stat(), bytes))
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Node>> {
        // A poisoned lock only means another test thread panicked; the tree itself is intact.
        self.tree
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Resolves every link on the parents of `path`; the last component is kept as is.
fn resolve(tree: &BTreeMap<String, Node>, path: &WorkspacePath) -> Result<Resolved, MutatorError> {
    let mut real = String::new();
    let mut links = 0;
    let components: Vec<&str> = path.components().collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(PathError::Empty.into());
    };
    let mut pending: Vec<String> = parents.iter().rev().map(|s| (*s).to_owned()).collect();
    while let Some(part) = pending.pop() {
        let candidate = join(&real, &part);
        match tree.get(&candidate) {
            None => return Ok(Resolved::Missing(MutatorError::NotFound(parent_or(path)))),
            Some(Node::File { .. }) => {
                return Ok(Resolved::Missing(MutatorError::NotDirectory(parent_or(
                    path,
                ))));
            }
            Some(Node::Dir { .. }) => real = candidate,
            Some(Node::Symlink { target }) => {
                links += 1;
                let escape = || PathError::SymlinkEscape {
                    path: path.to_string(),
                    link: candidate.clone(),
                };
                if links > MAX_LINKS {
                    return Err(PathError::SymlinkLoop {
                        path: path.to_string(),
                        link: candidate,
                    }
                    .into());
                }
                let Some(parts) = link_destination(&real, target, Path::new(MEM_ROOT)) else {
                    return Err(escape().into());
                };
                // Start again from the root with the link's target in front of what is left.
                real.clear();
                pending.extend(parts.into_iter().rev());
            }
        }
    }
    Ok(Resolved::At(join(&real, last)))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn parent_or(path: &WorkspacePath) -> WorkspacePath {
    path.parent().unwrap_or_else(|| path.clone())
}

impl MemMutator {
    /// The real key of `path`, or the error an operation that needs it should report.
    fn key(
        &self,
        tree: &BTreeMap<String, Node>,
        path: &WorkspacePath,
    ) -> Result<String, MutatorError> {
        match resolve(tree, path)? {
            Resolved::At(key) => Ok(key),
            Resolved::Missing(err) => Err(err),
        }
    }

    /// The key of a mutation's target: mutations follow no link (as on disk), so a link on
    /// the parents is refused rather than resolved.
    fn writable_key(
        &self,
        tree: &BTreeMap<String, Node>,
        path: &WorkspacePath,
    ) -> Result<String, MutatorError> {
        if path.is_internal() {
            return Err(PathError::Protected(path.to_string()).into());
        }
        for ancestor in path.ancestors() {
            match tree.get(ancestor.as_str()) {
                Some(Node::Dir { .. }) => {}
                Some(Node::Symlink { .. }) => {
                    return Err(PathError::ThroughLink {
                        path: path.to_string(),
                        link: ancestor.to_string(),
                    }
                    .into());
                }
                Some(Node::File { .. }) => {
                    return Err(MutatorError::NotDirectory(parent_or(path)));
                }
                None => return Err(MutatorError::NotFound(parent_or(path))),
            }
        }
        Ok(path.as_str().to_owned())
    }

    /// Follows links in the last component too, as reads do.
    fn follow<'t>(
        tree: &'t BTreeMap<String, Node>,
        path: &WorkspacePath,
        mut key: String,
    ) -> Result<Option<(String, &'t Node)>, MutatorError> {
        for _ in 0..MAX_LINKS {
            match tree.get(&key) {
                Some(Node::Symlink { target }) => {
                    let dir = key.rsplit_once('/').map_or("", |(dir, _)| dir);
                    let escape = || PathError::SymlinkEscape {
                        path: path.to_string(),
                        link: key.clone(),
                    };
                    let parts =
                        link_destination(dir, target, Path::new(MEM_ROOT)).ok_or_else(escape)?;
                    if parts.is_empty() {
                        return Ok(None);
                    }
                    let next = WorkspacePath::from_relative(&parts.join("/"))?;
                    key = match resolve(tree, &next)? {
                        Resolved::At(key) => key,
                        Resolved::Missing(_) => return Ok(None),
                    };
                }
                Some(node) => return Ok(Some((key, node))),
                None => return Ok(None),
            }
        }
        Err(PathError::SymlinkLoop {
            path: path.to_string(),
            link: key,
        }
        .into())
    }
}

fn is_dir_key(tree: &BTreeMap<String, Node>, key: &str) -> bool {
    key.is_empty() || matches!(tree.get(key), Some(Node::Dir { .. }))
}

fn parent_key(key: &str) -> &str {
    key.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The parent of a resolved key must be a directory (links on it were resolved already).
fn require_parent(
    tree: &BTreeMap<String, Node>,
    path: &WorkspacePath,
    key: &str,
) -> Result<(), MutatorError> {
    if is_dir_key(tree, parent_key(key)) {
        Ok(())
    } else {
        Err(MutatorError::NotFound(parent_or(path)))
    }
}

#[async_trait]
impl Mutator for MemMutator {
    fn root(&self) -> &Path {
        Path::new(MEM_ROOT)
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        let tree = self.lock();
        match resolve(&tree, path)? {
            Resolved::At(key) => Ok(tree.get(&key).map_or(Stat::Absent, Node::stat)),
            Resolved::Missing(_) => Ok(Stat::Absent),
        }
    }

    /// In memory an entry has no inode or times: a file or a link is known by what it holds
    /// (a change back to the same bytes goes unseen).
    async fn stamps(&self, paths: &[WorkspacePath]) -> Vec<Option<Stamp>> {
        use std::hash::{Hash as _, Hasher as _};
        let tree = self.lock();
        let stamp = |path: &WorkspacePath| {
            let real = (path.ancestors().iter())
                .all(|ancestor| matches!(tree.get(ancestor.as_str()), Some(Node::Dir { .. })));
            match tree.get(path.as_str()).filter(|_| real) {
                None => Stamp::Absent,
                Some(Node::Dir { mode }) => Stamp::Dir { mode: *mode },
                Some(node) => {
                    let mut hasher = std::hash::DefaultHasher::new();
                    node.hash(&mut hasher);
                    let (len, mode) = match node {
                        Node::File { bytes, mode } => (bytes.len() as u64, *mode),
                        _ => (0, 0o777),
                    };
                    Stamp::Entry {
                        dev: 0,
                        ino: hasher.finish(),
                        len,
                        mode,
                        modified: (0, 0),
                    }
                }
            }
        };
        paths.iter().map(|path| Some(stamp(path))).collect()
    }

    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        let tree = self.lock();
        resolve_links(path, Path::new(MEM_ROOT), &mut |rel| {
            Ok(match tree.get(rel) {
                Some(Node::Dir { .. }) => Found::Dir,
                Some(Node::Symlink { target }) => Found::Link(target.clone()),
                Some(Node::File { .. }) | None => Found::Other,
            })
        })
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        let tree = self.lock();
        let key = self.key(&tree, path)?;
        match Self::follow(&tree, path, key)? {
            Some((_, Node::File { bytes, .. })) => Ok(bytes.clone()),
            Some((_, Node::Dir { .. })) => Err(MutatorError::IsDirectory(path.clone())),
            Some((_, Node::Symlink { .. })) | None => Err(MutatorError::NotFound(path.clone())),
        }
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        let tree = self.lock();
        let key = self.key(&tree, path)?;
        let dir = match Self::follow(&tree, path, key)? {
            Some((dir, Node::Dir { .. })) => dir,
            Some(_) => return Err(MutatorError::NotDirectory(path.clone())),
            None => return Err(MutatorError::NotFound(path.clone())),
        };
        let prefix = format!("{dir}/");
        let mut entries = Vec::new();
        for (key, node) in tree.range(prefix.clone()..) {
            let Some(name) = key.strip_prefix(&prefix) else {
                break;
            };
            if name.contains('/') {
                continue;
            }
            entries.push(DirEntry {
                path: path.join(name)?,
                stat: node.stat(),
            });
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        require_parent(&tree, path, &key)?;
        let mode = match (mode, tree.get(&key)) {
            (_, Some(Node::Dir { .. })) => return Err(MutatorError::IsDirectory(path.clone())),
            (Some(mode), _) => mode,
            (None, Some(Node::File { mode, .. })) => *mode,
            (None, Some(Node::Symlink { .. }) | None) => DEFAULT_FILE_MODE,
        };
        tree.insert(
            key,
            Node::File {
                bytes: bytes.to_vec(),
                mode,
            },
        );
        Ok(())
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        match tree.get_mut(&key) {
            Some(Node::File { mode: current, .. } | Node::Dir { mode: current }) => {
                *current = mode;
                Ok(())
            }
            Some(Node::Symlink { .. }) => Err(MutatorError::Io {
                op: "chmod",
                path: path.clone(),
                source: std::io::Error::other("symbolic links have no mode"),
            }),
            None => Err(MutatorError::NotFound(path.clone())),
        }
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        require_parent(&tree, path, &key)?;
        if tree.contains_key(&key) {
            return Err(MutatorError::AlreadyExists(path.clone()));
        }
        tree.insert(
            key,
            Node::Dir {
                mode: DEFAULT_DIR_MODE,
            },
        );
        Ok(())
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        require_parent(&tree, path, &key)?;
        if tree.contains_key(&key) {
            return Err(MutatorError::AlreadyExists(path.clone()));
        }
        tree.insert(
            key,
            Node::Symlink {
                target: target.to_owned(),
            },
        );
        Ok(())
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        match tree.get(&key) {
            None => Err(MutatorError::NotFound(path.clone())),
            Some(Node::Dir { .. }) => Err(MutatorError::IsDirectory(path.clone())),
            Some(_) => {
                tree.remove(&key);
                Ok(())
            }
        }
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let key = self.writable_key(&tree, path)?;
        match tree.get(&key) {
            None => return Err(MutatorError::NotFound(path.clone())),
            Some(Node::Dir { .. }) => {}
            Some(_) => return Err(MutatorError::NotDirectory(path.clone())),
        }
        let prefix = format!("{key}/");
        if tree
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
        {
            return Err(MutatorError::DirectoryNotEmpty(path.clone()));
        }
        tree.remove(&key);
        Ok(())
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        let mut tree = self.lock();
        let source = self.writable_key(&tree, from)?;
        let dest = self.writable_key(&tree, to)?;
        match tree.get(&source) {
            None => return Err(MutatorError::NotFound(from.clone())),
            Some(Node::Dir { .. }) => return Err(MutatorError::IsDirectory(from.clone())),
            Some(_) => {}
        }
        if let Some(Node::Dir { .. }) = tree.get(&dest) {
            return Err(MutatorError::IsDirectory(to.clone()));
        }
        require_parent(&tree, to, &dest)?;
        if source != dest
            && let Some(node) = tree.remove(&source)
        {
            tree.insert(dest, node);
        }
        Ok(())
    }
}

impl MemMutator {
    /// The root as an owned path (the same for every in-memory workspace).
    pub fn root_path() -> PathBuf {
        PathBuf::from(MEM_ROOT)
    }
}
