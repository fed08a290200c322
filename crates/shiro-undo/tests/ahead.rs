//! Many paths captured at once (a bash command's pre-images): the recorder looks at them a
//! window at a time through `Mutator::real_stat_many`, on several threads on disk, and reads
//! the small files then. Every pre-image must still be the one at its own path.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::fs;

use common::{noise, p};
use shiro_tools::{FsMutator, Mutator, WorkspacePath, create_parent_dirs};
use shiro_undo::{StoreOptions, TurnStart, UndoOptions, UndoStore};

/// Sizes around the length below which files are read as they are looked at (256 KiB).
fn size(index: usize) -> usize {
    match index % 50 {
        0 => 0,
        7 => (256 << 10) - 1,
        8 => 256 << 10,
        9 => (256 << 10) + 1,
        10 => 300_000,
        _ => 1 + index * 37 % 3000,
    }
}

/// A turn that removes, rewrites and adds files among 716 paths captured ahead in one call
/// (664 distinct, three windows of the look-ahead; across directories, with repeats, a
/// symlink, a directory, a path through a symlink and a missing one): undo, redo and undo are
/// exact.
#[tokio::test]
async fn many_paths_captured_ahead_each_keep_their_own_pre_image() {
    let dir = common::fast_tempdir();
    let root = dir.path().join("ws");
    fs::create_dir(&root).unwrap();
    let ws = FsMutator::new(&root).unwrap();
    let mut paths = Vec::new();
    for index in 0..600 {
        let path = p(&format!("d{}/f{index:03}", index % 7));
        create_parent_dirs(&ws, &path).await.unwrap();
        // Files 100 apart hold the same bytes: one copy stored, two paths.
        let bytes = noise(size(index), (index % 100) as u32);
        ws.write(&path, &bytes, None).await.unwrap();
        paths.push(path);
    }
    ws.symlink("d0/f000", &p("link")).await.unwrap();
    ws.symlink("d1", &p("linkdir")).await.unwrap();
    ws.create_dir(&p("empty")).await.unwrap();
    let mut asked: Vec<WorkspacePath> = paths.clone();
    asked.extend(
        [
            "link",
            "linkdir/f001",
            "empty",
            "missing/x",
            "d2/f002",
            "d3/f003",
        ]
        .map(p),
    );
    asked.extend(paths.iter().take(50).cloned());
    asked.extend((0..60).map(|n| p(&format!("new/n{n}"))));
    let before = common::disk_tree(&root);

    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    rec.begin_turn(TurnStart {
        summary: "many".to_owned(),
        ..TurnStart::default()
    })
    .await
    .unwrap();
    rec.capture_ahead(&asked).await.unwrap();
    for (index, path) in paths.iter().enumerate() {
        match index % 3 {
            0 => rec.remove_file(path).await.unwrap(),
            1 => rec.write(path, &noise(40, 7), None).await.unwrap(),
            _ => {}
        }
    }
    rec.remove_file(&p("link")).await.unwrap();
    rec.remove_dir(&p("empty")).await.unwrap();
    create_parent_dirs(&rec, &p("new/n0")).await.unwrap();
    for n in 0..60 {
        rec.write(&p(&format!("new/n{n}")), b"new", None)
            .await
            .unwrap();
    }
    rec.finish_turn().await.unwrap().unwrap();
    let after = common::disk_tree(&root);
    assert_ne!(after, before);

    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), before, "the undo is not exact");
    store.redo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), after, "the redo is not exact");
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), before, "the undo is not exact");
}
