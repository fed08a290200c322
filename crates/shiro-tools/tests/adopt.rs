//! `Mutator::adopt`: a file from outside the workspace (a bash command's overlay layer)
//! becomes a workspace file by one rename where it can, by a copy otherwise.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use shiro_tools::{FsMutator, MemMutator, Mutator, MutatorError, PathError, Stat, WorkspacePath};

fn path(rel: &str) -> WorkspacePath {
    WorkspacePath::from_relative(rel).unwrap()
}

#[tokio::test]
async fn a_lone_file_is_moved_in_with_its_mode() {
    let ws = tempfile::tempdir().unwrap();
    // The layer lives in the workspace's `.shiro/`, on its file system.
    std::fs::create_dir_all(ws.path().join(".shiro/layer")).unwrap();
    let source = ws.path().join(".shiro/layer/new");
    std::fs::write(&source, "new\n").unwrap();
    let inode = std::fs::metadata(&source).unwrap().ino();
    std::fs::write(ws.path().join("a.txt"), "old\n").unwrap();
    let m = FsMutator::new(ws.path()).unwrap();
    m.adopt(&source, &path("a.txt"), 0o755).await.unwrap();
    let meta = std::fs::metadata(ws.path().join("a.txt")).unwrap();
    assert_eq!(meta.ino(), inode, "moved, not copied");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o755);
    assert_eq!(std::fs::read(ws.path().join("a.txt")).unwrap(), b"new\n");
    assert!(!source.exists());
}

#[tokio::test]
async fn a_file_with_other_names_is_copied_so_no_name_is_shared() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".shiro/layer")).unwrap();
    let source = ws.path().join(".shiro/layer/new");
    std::fs::write(&source, "shared\n").unwrap();
    let other = ws.path().join(".shiro/layer/other");
    std::fs::hard_link(&source, &other).unwrap();
    let m = FsMutator::new(ws.path()).unwrap();
    m.adopt(&source, &path("b.txt"), 0o644).await.unwrap();
    let meta = std::fs::metadata(ws.path().join("b.txt")).unwrap();
    assert_ne!(meta.ino(), std::fs::metadata(&other).unwrap().ino());
    assert_eq!(meta.nlink(), 1);
    assert_eq!(std::fs::read(ws.path().join("b.txt")).unwrap(), b"shared\n");
    assert!(!source.exists());
}

#[tokio::test]
async fn adopt_is_refused_where_a_write_is() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let source = outside.path().join("new");
    std::fs::write(&source, "x\n").unwrap();
    std::fs::create_dir(ws.path().join("dir")).unwrap();
    let m = FsMutator::new(ws.path()).unwrap();
    assert!(matches!(
        m.adopt(&source, &path(".git/config"), 0o644).await,
        Err(MutatorError::Path(PathError::Protected(_)))
    ));
    assert!(matches!(
        m.adopt(&source, &path("dir"), 0o644).await,
        Err(MutatorError::IsDirectory(_))
    ));
    assert!(source.exists(), "a refused adopt leaves its source");
    // A link is never followed, at the source or on the way.
    std::os::unix::fs::symlink(outside.path(), ws.path().join("lnk")).unwrap();
    assert!(m.adopt(&source, &path("lnk/x"), 0o644).await.is_err());
    assert!(!outside.path().join("x").exists());
    let link = outside.path().join("link");
    std::os::unix::fs::symlink(&source, &link).unwrap();
    assert!(m.adopt(&link, &path("y"), 0o644).await.is_err());
    assert!(!ws.path().join("y").exists());
}

#[tokio::test]
async fn an_in_memory_workspace_copies_it_in() {
    let outside = tempfile::tempdir().unwrap();
    let source = outside.path().join("new");
    std::fs::write(&source, "mem\n").unwrap();
    let m = MemMutator::new();
    m.adopt(&source, &path("m.txt"), 0o600).await.unwrap();
    assert_eq!(m.read(&path("m.txt")).await.unwrap(), b"mem\n");
    assert_eq!(
        m.stat(&path("m.txt")).await.unwrap(),
        Stat::File {
            mode: 0o600,
            len: 4
        }
    );
    assert!(!source.exists());
}

/// `Mutator::link_out`: a lone regular file gets a second name outside the workspace; anything
/// else is left alone and says so. A memory workspace keeps no files.
#[tokio::test]
async fn link_out_names_only_a_lone_file() {
    let ws = tempfile::tempdir().unwrap();
    let outside = ws.path().join(".shiro/keep");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.path().join("lone"), "lone\n").unwrap();
    std::fs::write(ws.path().join("twice"), "twice\n").unwrap();
    std::fs::hard_link(ws.path().join("twice"), outside.join("other")).unwrap();
    std::os::unix::fs::symlink("lone", ws.path().join("link")).unwrap();
    std::fs::create_dir(ws.path().join("dir")).unwrap();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let m = FsMutator::new(ws.path()).unwrap();

    let to = outside.join("kept");
    assert!(m.link_out(&path("lone"), &to).await.unwrap());
    let (kept, lone) = (
        std::fs::metadata(&to).unwrap(),
        std::fs::metadata(ws.path().join("lone")).unwrap(),
    );
    assert_eq!((kept.ino(), kept.nlink()), (lone.ino(), 2));
    // Taken already: nothing is replaced.
    std::fs::write(ws.path().join("other-lone"), "x\n").unwrap();
    assert!(!m.link_out(&path("other-lone"), &to).await.unwrap());
    assert_eq!(std::fs::read(&to).unwrap(), b"lone\n");

    for rel in ["twice", "link", "dir", "missing", ".git/config"] {
        let to = outside.join(format!("{}-kept", rel.replace('/', "-")));
        assert!(!m.link_out(&path(rel), &to).await.unwrap(), "{rel}");
        assert!(!to.exists(), "{rel}");
    }
    assert!(
        !(MemMutator::new())
            .link_out(&path("lone"), &outside.join("mem"))
            .await
            .unwrap()
    );
}
