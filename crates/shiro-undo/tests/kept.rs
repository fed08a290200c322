//! Files too big to hold, kept rather than copied (docs/formats.md, "Files too big to hold"):
//! the old version of a file that a turn replaces whole becomes its blob under a second name,
//! `blobs/<hash>.file`. These run on disk, with a streaming size of 1 KiB so that small files
//! take the path a 1 GiB one takes; the store is beside the workspace, on its file system.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use common::{noise, p};
use shiro_tools::{FsMutator, Incoming, Mutator};
use shiro_undo::{Recording, StoreOptions, TurnStart, UndoOptions, UndoStore};

/// Files from 1 KiB on are streamed, and kept where they can be.
fn options() -> StoreOptions {
    StoreOptions {
        stream_file_bytes: 1024,
        ..StoreOptions::default()
    }
}

struct Disk {
    dir: tempfile::TempDir,
    root: PathBuf,
    ws: FsMutator,
}

fn disk() -> Disk {
    let dir = common::fast_tempdir();
    let root = dir.path().join("ws");
    fs::create_dir(&root).unwrap();
    let ws = FsMutator::new(&root).unwrap();
    Disk { dir, root, ws }
}

impl Disk {
    async fn open(&self) -> UndoStore {
        let state = shiro_undo::StateDir::at(self.dir.path().join("state"), &self.root);
        UndoStore::open_with(&state, &self.ws, options())
            .await
            .unwrap()
    }

    /// A file outside the workspace, on its file system, as a bash command's new version in
    /// its layer is.
    fn new_version(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let layer = self.dir.path().join("layer");
        fs::create_dir_all(&layer).unwrap();
        let path = layer.join(name);
        fs::write(&path, bytes).unwrap();
        path
    }
}

/// A workspace on disk holding one file, `big`, of `len` bytes, with its tree.
async fn disk_with_big(len: usize, seed: u32) -> (Disk, common::Tree) {
    let d = disk();
    d.ws.write(&p("big"), &noise(len, seed), None)
        .await
        .unwrap();
    let before = common::disk_tree(&d.root);
    (d, before)
}

/// The files of `blobs/`, by name, with their metadata.
fn blobs(store: &UndoStore) -> Vec<(String, fs::Metadata)> {
    let mut found: Vec<_> = fs::read_dir(store.dir().join("blobs"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, entry.metadata().unwrap())
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn kept_files(store: &UndoStore) -> Vec<(String, fs::Metadata)> {
    (blobs(store).into_iter())
        .filter(|(name, _)| name.ends_with(".file"))
        .collect()
}

fn start(summary: &str) -> TurnStart {
    TurnStart {
        summary: summary.to_owned(),
        ..TurnStart::default()
    }
}

async fn undo_redo_undo(store: &UndoStore, d: &Disk, before: &common::Tree) {
    let after = common::disk_tree(&d.root);
    store.undo(&d.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(&common::disk_tree(&d.root), before, "the undo is not exact");
    store.redo(&d.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&d.root), after, "the redo is not exact");
    store.undo(&d.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(&common::disk_tree(&d.root), before, "the undo is not exact");
}

/// A bash commit's new version moved in over a big file: the old file is the blob, under
/// its one remaining name, and no copy of it was written; undo and redo are exact.
#[tokio::test]
async fn a_big_file_replaced_whole_is_kept_not_copied() {
    let d = disk();
    d.ws.write(&p("big"), &noise(100_000, 1), None)
        .await
        .unwrap();
    let old = fs::metadata(d.root.join("big")).unwrap();
    let before = common::disk_tree(&d.root);
    let store = d.open().await;
    let rec = store.recorder(d.ws.clone());
    rec.begin_turn(start("append")).await.unwrap();
    let source = d.new_version("big", &noise(100_010, 2));
    let incoming = Incoming {
        path: &p("big"),
        source: &source,
    };
    rec.prepare(&[p("big")], &[incoming]).await.unwrap();
    rec.adopt(&source, &p("big"), 0o644).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();

    let kept = kept_files(&store);
    assert_eq!(kept.len(), 1, "{:?}", blobs(&store));
    let meta = &kept[0].1;
    assert_eq!(
        (meta.dev(), meta.ino(), meta.nlink(), meta.len()),
        (old.dev(), old.ino(), 1, 100_000),
        "the blob is the old file itself"
    );
    let copies: Vec<String> = (blobs(&store).into_iter())
        .map(|(name, _)| name)
        .filter(|name| name.len() == 64)
        .collect();
    assert!(copies.is_empty(), "a copy was written: {copies:?}");
    undo_redo_undo(&store, &d, &before).await;
}

/// A new version named to `prepare` is hashed there, with the old one, and that hash is the
/// turn's after-image while the file moved in is the file hashed: its stamp (inode, length,
/// modification time) unchanged. Written into between the two, it is hashed again, and the
/// turn undoes and redoes exactly. Written into with its time set back, its stamp cannot tell:
/// the turn records the hash of what `prepare` read, and the undo takes what the workspace
/// holds for a change made since, and keeps it (the safe side of a stamp that lies).
#[tokio::test]
async fn a_new_version_hashed_at_prepare_counts_only_while_unchanged() {
    for case in ["as read", "written since", "time set back"] {
        let (d, before) = disk_with_big(40_000, 7).await;
        let store = d.open().await;
        let rec = store.recorder(d.ws.clone());
        rec.begin_turn(start(case)).await.unwrap();
        let source = d.new_version("big", &noise(40_010, 8));
        let read = fs::metadata(&source).unwrap();
        let incoming = Incoming {
            path: &p("big"),
            source: &source,
        };
        rec.prepare(&[p("big")], &[incoming]).await.unwrap();
        if case != "as read" {
            // The same length, one byte changed, in place.
            let mut bytes = noise(40_010, 8);
            bytes[20_000] ^= 0xff;
            fs::write(&source, &bytes).unwrap();
        }
        if case == "time set back" {
            let file = fs::File::options().write(true).open(&source).unwrap();
            file.set_modified(read.modified().unwrap()).unwrap();
        }
        rec.adopt(&source, &p("big"), 0o644).await.unwrap();
        rec.finish_turn().await.unwrap().unwrap();
        if case != "time set back" {
            undo_redo_undo(&store, &d, &before).await;
            continue;
        }
        let after = common::disk_tree(&d.root);
        let refused = store.undo(&d.ws, UndoOptions::default()).await;
        assert!(
            matches!(refused, Err(shiro_undo::UndoError::Conflict(_))),
            "{refused:?}"
        );
        assert_eq!(
            common::disk_tree(&d.root),
            after,
            "the undo changed the file"
        );
    }
}

/// A new version named to `prepare` that cannot be read then (here it does not exist yet)
/// leaves the old one hashed alone, and the capture succeeds; the new one is hashed at the
/// end of the turn, and undo and redo are exact.
#[tokio::test]
async fn a_new_version_unreadable_at_prepare_is_hashed_at_the_end() {
    let (d, before) = disk_with_big(40_000, 9).await;
    let store = d.open().await;
    let rec = store.recorder(d.ws.clone());
    rec.begin_turn(start("late")).await.unwrap();
    let source = d.dir.path().join("layer").join("big");
    let incoming = Incoming {
        path: &p("big"),
        source: &source,
    };
    rec.prepare(&[p("big")], &[incoming]).await.unwrap();
    let source = d.new_version("big", &noise(40_010, 10));
    rec.adopt(&source, &p("big"), 0o644).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    undo_redo_undo(&store, &d, &before).await;
}

/// A big file kept and then not replaced (written in place, moved, or left alone) never
/// stays shared with the workspace: a write goes to a new file, and as the turn is stored
/// the blob gets a copy of its own. The workspace's files all end with one name each, and
/// undo and redo are exact.
#[tokio::test]
async fn a_big_file_kept_and_not_replaced_gets_a_copy_of_its_own() {
    let d = disk();
    for (n, name) in ["written", "moved", "left", "small"].iter().enumerate() {
        let len = if *name == "small" { 10 } else { 50_000 };
        d.ws.write(&p(name), &noise(len, n as u32), None)
            .await
            .unwrap();
    }
    let before = common::disk_tree(&d.root);
    let written = fs::metadata(d.root.join("written")).unwrap();
    let store = d.open().await;
    let rec = store.recorder(d.ws.clone());
    rec.begin_turn(start("mixed")).await.unwrap();
    let all = [p("written"), p("moved"), p("left"), p("small")];
    rec.prepare(&all, &[]).await.unwrap();
    assert_eq!(kept_files(&store).len(), 3, "{:?}", blobs(&store));
    rec.overwrite(&p("written"), &noise(50_000, 9), 0o644)
        .await
        .unwrap();
    rec.rename(&p("moved"), &p("moved-to")).await.unwrap();
    rec.write(&p("small"), b"changed", None).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();

    let now = fs::metadata(d.root.join("written")).unwrap();
    assert_ne!(now.ino(), written.ino(), "written into the kept file");
    for name in ["written", "moved-to", "left", "small"] {
        let meta = fs::metadata(d.root.join(name)).unwrap();
        assert_eq!(meta.nlink(), 1, "{name} still shares its file");
    }
    for (name, meta) in blobs(&store) {
        assert_eq!(meta.nlink(), 1, "{name} shares its file");
    }
    undo_redo_undo(&store, &d, &before).await;
}

/// A big file with another name cannot be kept (the blob would share it with that name):
/// it is copied.
#[tokio::test]
async fn a_big_file_with_another_name_is_copied() {
    let d = disk();
    d.ws.write(&p("big"), &noise(20_000, 3), None)
        .await
        .unwrap();
    fs::hard_link(d.root.join("big"), d.dir.path().join("elsewhere")).unwrap();
    let store = d.open().await;
    let rec = store.recorder(d.ws.clone());
    rec.begin_turn(start("append")).await.unwrap();
    let source = d.new_version("big", &noise(20_010, 4));
    rec.adopt(&source, &p("big"), 0o644).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    assert!(kept_files(&store).is_empty(), "{:?}", blobs(&store));
    assert_eq!(
        fs::read(d.dir.path().join("elsewhere")).unwrap(),
        noise(20_000, 3),
        "the other name changed"
    );
    store.undo(&d.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(fs::read(d.root.join("big")).unwrap(), noise(20_000, 3));
}

/// A turn a crash cut short after the big file was kept: when it had replaced the file,
/// recovery makes it an exact undoable turn; when it had not, recovery removes the name it
/// left, still shared with the workspace, and the next turn on the file is exact.
#[tokio::test]
async fn a_kept_file_survives_a_crash_either_way() {
    for replaced in [true, false] {
        let (d, before) = disk_with_big(30_000, 5).await;
        {
            let store = d.open().await;
            let rec: Recording<FsMutator> = store.recorder(d.ws.clone());
            rec.begin_turn(start("cut short")).await.unwrap();
            rec.prepare(&[p("big")], &[]).await.unwrap();
            if replaced {
                let source = d.new_version("big", &noise(30_010, 6));
                rec.adopt(&source, &p("big"), 0o644).await.unwrap();
            }
            // The process dies here: the turn is never finished.
        }
        let store = d.open().await;
        if replaced {
            assert_eq!(store.log().unwrap().len(), 1, "{replaced}");
            undo_redo_undo(&store, &d, &before).await;
            continue;
        }
        assert!(store.log().unwrap().is_empty());
        // Nothing changed: the name it left, still shared with the workspace, is gone.
        assert!(kept_files(&store).is_empty(), "{:?}", blobs(&store));
        let big = d.root.join("big");
        assert_eq!(fs::metadata(&big).unwrap().nlink(), 1);
        assert_eq!(common::disk_tree(&d.root), before);
        let rec = store.recorder(d.ws.clone());
        rec.begin_turn(start("next")).await.unwrap();
        rec.write(&p("big"), b"small now", None).await.unwrap();
        rec.finish_turn().await.unwrap().unwrap();
        store.undo(&d.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(common::disk_tree(&d.root), before, "the undo is not exact");
    }
}

/// A tree removed whole (moved out with one rename, as a bash commit removes what `rm -rf`
/// took) still names its big files until it is deleted: those names are dropped at once, so
/// the kept blobs are not copied as the turn is stored. Undo and redo are exact.
#[tokio::test]
async fn a_big_file_in_a_tree_removed_whole_is_kept_not_copied() {
    let d = disk();
    d.ws.create_dir(&p("tree")).await.unwrap();
    d.ws.write(&p("tree/big"), &noise(40_000, 7), None)
        .await
        .unwrap();
    d.ws.write(&p("tree/small"), b"small\n", None)
        .await
        .unwrap();
    let old = fs::metadata(d.root.join("tree/big")).unwrap();
    let before = common::disk_tree(&d.root);
    let store = d.open().await;
    let rec = store.recorder(d.ws.clone());
    rec.begin_turn(start("rm -rf tree")).await.unwrap();
    let listed = rec.read_dir(&p("tree")).await.unwrap();
    let aside = d.dir.path().join("layer-gone");
    rec.remove_tree(&p("tree"), &listed, &aside).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    assert!(aside.join("small").is_file(), "the tree was not moved out");
    assert!(
        !aside.join("big").exists(),
        "the moved tree still names the kept file"
    );

    let kept = kept_files(&store);
    assert_eq!(kept.len(), 1, "{:?}", blobs(&store));
    assert_eq!(
        (kept[0].1.ino(), kept[0].1.nlink()),
        (old.ino(), 1),
        "the blob is the old file itself"
    );
    fs::remove_dir_all(&aside).unwrap();
    undo_redo_undo(&store, &d, &before).await;
}
