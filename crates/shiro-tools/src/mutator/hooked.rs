//! A `Mutator` that calls a hook before every mutation: for fault injection in tests,
//! crash simulation, or auditing, without re-implementing the whole trait each time.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::{DirEntry, Incoming, Looked, Mutator, MutatorError, Stamp, Stat};
use crate::path::WorkspacePath;

/// One mutation about to happen, as a hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation<'a> {
    /// [`Mutator::write`].
    Write(&'a WorkspacePath),
    /// [`Mutator::set_mode`].
    SetMode(&'a WorkspacePath),
    /// [`Mutator::create_dir`].
    CreateDir(&'a WorkspacePath),
    /// [`Mutator::symlink`].
    Symlink(&'a WorkspacePath),
    /// [`Mutator::remove_file`].
    RemoveFile(&'a WorkspacePath),
    /// [`Mutator::remove_dir`].
    RemoveDir(&'a WorkspacePath),
    /// [`Mutator::remove_tree`]: the directory removed with everything in it.
    RemoveTree(&'a WorkspacePath),
    /// [`Mutator::move_tree_in`]: a new directory moved in with everything in it.
    MoveTreeIn(&'a WorkspacePath),
    /// [`Mutator::rename`].
    Rename {
        /// The source.
        from: &'a WorkspacePath,
        /// The destination.
        to: &'a WorkspacePath,
    },
}

impl Mutation<'_> {
    /// The path the mutation is about (the source, for a rename).
    pub fn path(&self) -> &WorkspacePath {
        match self {
            Mutation::Write(path)
            | Mutation::SetMode(path)
            | Mutation::CreateDir(path)
            | Mutation::Symlink(path)
            | Mutation::RemoveFile(path)
            | Mutation::RemoveDir(path)
            | Mutation::RemoveTree(path)
            | Mutation::MoveTreeIn(path)
            | Mutation::Rename { from: path, .. } => path,
        }
    }

    /// The operation's name, e.g. `write`.
    pub fn name(&self) -> &'static str {
        match self {
            Mutation::Write(_) => "write",
            Mutation::SetMode(_) => "chmod",
            Mutation::CreateDir(_) => "create directory",
            Mutation::Symlink(_) => "symlink",
            Mutation::RemoveFile(_) => "remove",
            Mutation::RemoveDir(_) => "remove directory",
            Mutation::RemoveTree(_) => "remove tree",
            Mutation::MoveTreeIn(_) => "move tree in",
            Mutation::Rename { .. } => "rename",
        }
    }

    /// An I/O error for this mutation, as an injected fault would report it.
    pub fn fault(&self, message: &str) -> MutatorError {
        MutatorError::Io {
            op: self.name(),
            path: self.path().clone(),
            source: std::io::Error::other(message.to_owned()),
        }
    }
}

/// The hook: `Err` stops the mutation before it reaches the inner mutator.
pub type Hook = dyn Fn(&Mutation<'_>) -> Result<(), MutatorError> + Send + Sync;

/// A hook called after a mutation the first hook let through, whatever its outcome.
pub type AfterHook = dyn Fn(&Mutation<'_>) + Send + Sync;

/// Delegates to `inner`, calling a hook before every mutation (and, if set with
/// [`Hooked::after`], another after it). Reads pass straight through.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use shiro_tools::{Hooked, MemMutator, Mutator, WorkspacePath};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// // Fail the second mutation, as a full disk might.
/// let calls = AtomicUsize::new(0);
/// let faulty = Hooked::new(MemMutator::new(), move |m| {
///     if calls.fetch_add(1, Ordering::SeqCst) == 1 { Err(m.fault("disk full")) } else { Ok(()) }
/// });
/// let a = WorkspacePath::from_relative("a").unwrap();
/// assert!(faulty.write(&a, b"1", None).await.is_ok());
/// assert!(faulty.write(&a, b"2", None).await.is_err());
/// assert_eq!(faulty.read(&a).await.unwrap(), b"1");
/// # });
/// ```
#[derive(Clone)]
pub struct Hooked<M> {
    inner: M,
    hook: Arc<Hook>,
    after: Option<Arc<AfterHook>>,
}

impl<M> Hooked<M> {
    /// Wraps `inner`, calling `hook` before each mutation.
    pub fn new(
        inner: M,
        hook: impl Fn(&Mutation<'_>) -> Result<(), MutatorError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            inner,
            hook: Arc::new(hook),
            after: None,
        }
    }

    /// Also calls `hook` after each mutation that the first hook let through, once the
    /// inner mutator has returned (a crash test can stop the process right after a change).
    #[must_use]
    pub fn after(self, hook: impl Fn(&Mutation<'_>) + Send + Sync + 'static) -> Self {
        Self {
            after: Some(Arc::new(hook)),
            ..self
        }
    }

    /// Runs `op` (the mutation `mutation`) between the hooks.
    async fn around<T>(
        &self,
        mutation: Mutation<'_>,
        op: impl Future<Output = Result<T, MutatorError>>,
    ) -> Result<T, MutatorError> {
        (self.hook)(&mutation)?;
        let result = op.await;
        if let Some(after) = &self.after {
            after(&mutation);
        }
        result
    }

    /// The wrapped mutator.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M> std::fmt::Debug for Hooked<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

#[async_trait]
impl<M: Mutator> Mutator for Hooked<M> {
    fn root(&self) -> &Path {
        self.inner.root()
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.stat(path).await
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        self.inner.read(path).await
    }

    async fn open_read(&self, path: &WorkspacePath) -> Result<Option<std::fs::File>, MutatorError> {
        self.inner.open_read(path).await
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        self.inner.read_dir(path).await
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        self.around(Mutation::Write(path), self.inner.write(path, bytes, mode))
            .await
    }

    async fn adopt(
        &self,
        source: &Path,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.around(Mutation::Write(path), self.inner.adopt(source, path, mode))
            .await
    }

    /// Not a change of the workspace: nothing is reported.
    async fn link_out(&self, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
        self.inner.link_out(path, to).await
    }

    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.real_stat(path).await
    }

    async fn real_stat_many(
        &self,
        paths: &[WorkspacePath],
        read_below: u64,
    ) -> Vec<Result<Looked, MutatorError>> {
        self.inner.real_stat_many(paths, read_below).await
    }

    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        self.inner.real_path(path).await
    }

    async fn stamps(&self, paths: &[WorkspacePath]) -> Vec<Option<Stamp>> {
        self.inner.stamps(paths).await
    }

    async fn remove_partial_writes(&self, paths: &[WorkspacePath]) -> Result<usize, MutatorError> {
        self.inner.remove_partial_writes(paths).await
    }

    async fn prepare(
        &self,
        paths: &[WorkspacePath],
        incoming: &[Incoming<'_>],
    ) -> Result<(), MutatorError> {
        self.inner.prepare(paths, incoming).await
    }

    async fn read_into(&self, path: &WorkspacePath, buf: Vec<u8>) -> Result<Vec<u8>, MutatorError> {
        self.inner.read_into(path, buf).await
    }

    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        self.inner.read_with(path, sink).await
    }

    /// Seen by the hook as a [`Mutation::Write`].
    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.around(
            Mutation::Write(path),
            self.inner.overwrite(path, bytes, mode),
        )
        .await
    }

    /// Seen by the hook as a [`Mutation::Write`].
    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn std::io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.around(
            Mutation::Write(path),
            self.inner.overwrite_from(path, source, len, mode),
        )
        .await
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        self.around(Mutation::SetMode(path), self.inner.set_mode(path, mode))
            .await
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.around(Mutation::CreateDir(path), self.inner.create_dir(path))
            .await
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.around(Mutation::Symlink(path), self.inner.symlink(target, path))
            .await
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.around(Mutation::RemoveFile(path), self.inner.remove_file(path))
            .await
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.around(Mutation::RemoveDir(path), self.inner.remove_dir(path))
            .await
    }

    async fn remove_tree(
        &self,
        path: &WorkspacePath,
        listed: &[DirEntry],
        aside: &Path,
    ) -> Result<(), MutatorError> {
        self.around(
            Mutation::RemoveTree(path),
            self.inner.remove_tree(path, listed, aside),
        )
        .await
    }

    async fn move_tree_in(
        &self,
        source: &Path,
        path: &WorkspacePath,
        listed: &[WorkspacePath],
    ) -> Result<bool, MutatorError> {
        self.around(
            Mutation::MoveTreeIn(path),
            self.inner.move_tree_in(source, path, listed),
        )
        .await
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        self.around(Mutation::Rename { from, to }, self.inner.rename(from, to))
            .await
    }

    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        self.inner.sync(paths).await
    }
}
