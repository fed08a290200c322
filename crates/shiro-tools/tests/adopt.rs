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

/// Bytes past the size from which a new version is swapped in rather than renamed over the
/// old one (1 MiB).
fn big_bytes(fill: u8) -> Vec<u8> {
    let mut bytes = vec![fill; (1 << 20) + 4096];
    bytes[17] = b'\n';
    bytes
}

/// The names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_big_file_is_swapped_in_and_the_old_one_keeps_its_other_names() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".shiro/layer")).unwrap();
    let source = ws.path().join(".shiro/layer/new");
    std::fs::write(&source, big_bytes(b'n')).unwrap();
    let inode = std::fs::metadata(&source).unwrap().ino();
    // The old version, with a second name as the undo store keeps a big file's.
    let target = ws.path().join("big.bin");
    std::fs::write(&target, big_bytes(b'o')).unwrap();
    let kept = ws.path().join(".shiro/kept");
    std::fs::hard_link(&target, &kept).unwrap();

    let m = FsMutator::new(ws.path()).unwrap();
    m.adopt(&source, &path("big.bin"), 0o640).await.unwrap();
    let meta = std::fs::metadata(&target).unwrap();
    assert_eq!((meta.ino(), meta.nlink()), (inode, 1), "moved, not copied");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(std::fs::read(&target).unwrap(), big_bytes(b'n'));
    assert_eq!(std::fs::read(&kept).unwrap(), big_bytes(b'o'));
    assert_eq!(std::fs::metadata(&kept).unwrap().nlink(), 1);
    assert!(!source.exists());
    assert_eq!(
        names(ws.path()),
        [".shiro", "big.bin"],
        "no name left beside it"
    );

    // Where nothing is replaced, or a link is, the new version is renamed in.
    std::fs::write(&source, big_bytes(b'a')).unwrap();
    m.adopt(&source, &path("fresh.bin"), 0o644).await.unwrap();
    std::os::unix::fs::symlink("big.bin", ws.path().join("link")).unwrap();
    std::fs::write(&source, big_bytes(b'l')).unwrap();
    m.adopt(&source, &path("link"), 0o644).await.unwrap();
    assert_eq!(
        std::fs::read(ws.path().join("fresh.bin")).unwrap(),
        big_bytes(b'a')
    );
    assert_eq!(
        std::fs::read(ws.path().join("link")).unwrap(),
        big_bytes(b'l')
    );
    assert!(
        std::fs::symlink_metadata(ws.path().join("link"))
            .unwrap()
            .is_file()
    );
    assert_eq!(std::fs::read(&target).unwrap(), big_bytes(b'n'));
    assert_eq!(names(ws.path()), [".shiro", "big.bin", "fresh.bin", "link"]);
}

/// A layer whose commit had begun in this boot, holding `big.bin`'s new version, as the
/// process that committed it left it: `layers/<16 hex digits>/up/big.bin`. Returns its file.
fn committing_layer(layers: &std::path::Path, bytes: &[u8]) -> std::path::PathBuf {
    let layer = layers.join("00000000000000aa");
    std::fs::create_dir_all(layer.join("up")).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    std::fs::write(layer.join("commit"), boot.trim()).unwrap();
    let file = layer.join("up/big.bin");
    std::fs::write(&file, bytes).unwrap();
    file
}

/// A commit killed inside a swap leaves the workspace either as it was or with the new
/// version in place: finishing the layer and removing partial writes, as crash recovery does,
/// ends with the new version at the path and nothing beside it, from either point.
#[tokio::test]
async fn a_swap_killed_part_way_is_finished_by_recovery() {
    if !std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
        eprintln!("skipped: no /proc/sys/kernel/random/boot_id to mark a layer with");
        return;
    }
    let spare = ".big.bin.00000000000000ff.shiro-tmp";
    for killed_after_exchange in [false, true] {
        let ws = tempfile::tempdir().unwrap();
        let layers = ws.path().join(".shiro/layers");
        let new = committing_layer(&layers, &big_bytes(b'n'));
        let target = ws.path().join("big.bin");
        std::fs::write(&target, big_bytes(b'o')).unwrap();
        // Killed after the second name was made, or after the exchange too.
        std::fs::hard_link(&new, ws.path().join(spare)).unwrap();
        if killed_after_exchange {
            std::fs::rename(&target, ws.path().join("swap")).unwrap();
            std::fs::rename(ws.path().join(spare), &target).unwrap();
            std::fs::rename(ws.path().join("swap"), ws.path().join(spare)).unwrap();
        }

        let m = FsMutator::new(ws.path()).unwrap();
        let done = shiro_tools::capture::recover_layers(&m, &layers, &Before(big_bytes(b'o')))
            .await
            .unwrap();
        let steps = usize::from(!killed_after_exchange);
        assert_eq!(
            done,
            [shiro_tools::capture::LayerRecovery::Finished {
                steps,
                applied: steps,
                changed: (steps > 0).then(|| path("big.bin")).into_iter().collect(),
                kept: Vec::new()
            }],
            "killed after the exchange: {killed_after_exchange}"
        );
        assert_eq!(
            m.remove_partial_writes(&[path("big.bin")]).await.unwrap(),
            1
        );
        assert_eq!(std::fs::read(&target).unwrap(), big_bytes(b'n'));
        assert_eq!(names(ws.path()), [".shiro", "big.bin"]);
    }
}

/// What a commit saved of `big.bin` before it began: these bytes.
struct Before(Vec<u8>);

#[async_trait::async_trait]
impl shiro_tools::capture::BeforeCommit for Before {
    async fn unchanged(
        &self,
        mutator: &dyn Mutator,
        at: &WorkspacePath,
    ) -> Result<bool, MutatorError> {
        Ok(at == &path("big.bin") && mutator.read(at).await? == self.0)
    }
}

/// A file changed after the crash, before recovery (by you), is not what the commit found:
/// finishing the commit leaves it as it is, and says so; a path nothing was saved of is
/// left too.
#[tokio::test]
async fn recovery_keeps_a_file_changed_since_the_commit_began() {
    if !std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
        eprintln!("skipped: no /proc/sys/kernel/random/boot_id to mark a layer with");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let layers = ws.path().join(".shiro/layers");
    committing_layer(&layers, b"the command's\n");
    let layer = layers.join("00000000000000aa/up");
    std::fs::write(layer.join("unsaved.txt"), "new\n").unwrap();
    std::fs::create_dir(layer.join("dir")).unwrap();
    std::fs::write(layer.join("dir/in.txt"), "in\n").unwrap();
    std::fs::write(ws.path().join("big.bin"), "yours\n").unwrap();
    std::fs::write(ws.path().join("dir"), "a file of yours\n").unwrap();

    let m = FsMutator::new(ws.path()).unwrap();
    let done = shiro_tools::capture::recover_layers(&m, &layers, &Before(b"before\n".to_vec()))
        .await
        .unwrap();
    let [
        shiro_tools::capture::LayerRecovery::Finished {
            steps,
            applied,
            kept,
            ..
        },
    ] = done.as_slice()
    else {
        panic!("{done:?}");
    };
    let kept: Vec<&str> = kept.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(
        (*steps, *applied, kept),
        (4, 0, vec!["big.bin", "dir", "unsaved.txt"])
    );
    assert_eq!(
        std::fs::read(ws.path().join("big.bin")).unwrap(),
        b"yours\n"
    );
    assert_eq!(
        std::fs::read(ws.path().join("dir")).unwrap(),
        b"a file of yours\n"
    );
    assert!(!ws.path().join("unsaved.txt").exists());
}

/// A command cut short (no commit mark) may have moved a ref in `.git` already, to a commit
/// whose objects are in its layer: recovery carries them into the repository before it
/// discards the rest, as it does for a commit cut short. After a restart, when the layer may
/// hold torn files, it does not.
#[tokio::test]
async fn recovery_carries_the_git_objects_a_command_wrote() {
    for (mark, carried) in [(None, true), (Some("an earlier boot"), false)] {
        let ws = tempfile::tempdir().unwrap();
        let objects = ws.path().join(".git/objects");
        std::fs::create_dir_all(objects.join("ab")).unwrap();
        std::fs::write(objects.join("ab/old"), "old").unwrap();
        let layers = ws.path().join(".shiro/layers");
        let layer = layers.join("00000000000000aa");
        std::fs::create_dir_all(layer.join("up/.git/objects/cd")).unwrap();
        std::fs::write(layer.join("up/.git/objects/cd/new"), "new").unwrap();
        if let Some(boot) = mark {
            std::fs::write(layer.join("commit"), boot).unwrap();
        }

        let m = FsMutator::new(ws.path()).unwrap();
        shiro_tools::capture::recover_layers(&m, &layers, &Before(Vec::new()))
            .await
            .unwrap();
        assert_eq!(objects.join("cd/new").exists(), carried, "{mark:?}");
        assert_eq!(std::fs::read(objects.join("ab/old")).unwrap(), b"old");
    }
}
