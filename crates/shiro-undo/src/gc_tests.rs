//! The collection property: after any sequence of turns, undos, redos and depth changes,
//! every remaining turn undoes and redoes exactly, and `blobs/` holds no file that no
//! remaining turn needs (a pack no turn names or whose copies none needs, a blob no turn
//! refers to, a temporary file).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use shiro_tools::{MemMutator, Mutator, Stat, WorkspacePath, create_parent_dirs};

use crate::image::ContentHash;
use crate::pack::{Pack, pack_path};
use crate::{StateDir, StoreOptions, TurnStart, UndoOptions, UndoStore};

const PATHS: [&str; 4] = ["a", "b", "d/c", "d/e"];

type Tree = BTreeMap<String, (Stat, Option<Vec<u8>>)>;

#[derive(Debug, Clone)]
enum Step {
    /// Writes (or, for `None`, removes) each path.
    Turn(Vec<(usize, Option<u8>)>),
    Undo,
    Redo,
    /// Reopens the store with this depth.
    Depth(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let write = (0..PATHS.len(), prop::option::weighted(0.8, 0..6u8));
    prop_oneof![
        4 => prop::collection::vec(write, 1..4).prop_map(Step::Turn),
        2 => Just(Step::Undo),
        1 => Just(Step::Redo),
        1 => (1..4usize).prop_map(Step::Depth),
    ]
}

/// A few contents, so that turns share pre-images across packs; one over the big-file size,
/// one over the streaming size.
fn content(seed: u8) -> Vec<u8> {
    match seed {
        4 => return (0..300u32).map(|i| (i % 7) as u8).collect(),
        5 => return (0..600u32).map(|i| (i % 11) as u8).collect(),
        _ => {}
    }
    format!("content {seed}\n").into_bytes()
}

fn options(depth: usize) -> StoreOptions {
    StoreOptions {
        depth,
        big_file_bytes: 256,
        stream_file_bytes: 512,
        // Past a few small pre-images, a turn reads the rest back from its in-flight file.
        max_held_bytes: 32,
        ..StoreOptions::default()
    }
}

fn path(s: &str) -> WorkspacePath {
    WorkspacePath::from_relative(s).unwrap()
}

/// The files of `blobs/` that no turn of the log needs.
fn unneeded(store: &UndoStore) -> Vec<String> {
    let (state, blobs) = store.inside();
    let listing = blobs.list().unwrap();
    let hashes = state.hashes().unwrap();
    let live = blobs.closure(&hashes, &listing);
    let named = state.packs();
    let mut unneeded = Vec::new();
    for entry in std::fs::read_dir(blobs.dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let needed = if let Some(pack) = name.strip_suffix(".pack") {
            named.contains(pack)
                && Pack::open(&pack_path(blobs.dir(), pack))
                    .unwrap()
                    .live_share(|hash| hashes.contains(hash))
                    .1
                    > 0
        } else {
            let hex = name.strip_suffix(".delta").unwrap_or(&name);
            ContentHash::from_hex(hex).is_some_and(|hash| live.contains(&hash))
        };
        if !needed {
            unneeded.push(name);
        }
    }
    unneeded
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::at(dir.path().join("state"), dir.path());
    let ws = MemMutator::new();
    let mut store = UndoStore::open_with(&state, &ws, options(3)).await.unwrap();
    let mut depth = 3;
    // The model: the workspace before each turn of the undo stack, and before each redo.
    let mut undo: Vec<Tree> = Vec::new();
    let mut redo: Vec<Tree> = Vec::new();
    for step in steps {
        let now = ws.snapshot();
        match step {
            Step::Turn(writes) => {
                let rec = store.recorder(ws.clone());
                rec.begin_turn(TurnStart::default()).await.unwrap();
                for (at, seed) in writes {
                    let target = path(PATHS[at]);
                    match seed {
                        Some(seed) => {
                            create_parent_dirs(&rec, &target).await.unwrap();
                            rec.write(&target, &content(seed), None).await.unwrap();
                        }
                        None if matches!(ws.stat(&target).await, Ok(Stat::File { .. })) => {
                            rec.remove_file(&target).await.unwrap();
                        }
                        None => {}
                    }
                }
                if rec.finish_turn().await.unwrap().is_some() {
                    undo.push(now);
                    redo.clear();
                    let excess = undo.len().saturating_sub(depth);
                    undo.drain(..excess);
                }
            }
            Step::Undo => match undo.pop() {
                Some(before) => {
                    store.undo(&ws, UndoOptions::default()).await.unwrap();
                    prop_assert_eq!(ws.snapshot(), before);
                    redo.push(now);
                }
                None => prop_assert!(store.undo(&ws, UndoOptions::default()).await.is_err()),
            },
            Step::Redo => match redo.pop() {
                Some(after) => {
                    store.redo(&ws, UndoOptions::default()).await.unwrap();
                    prop_assert_eq!(ws.snapshot(), after);
                    undo.push(now);
                }
                None => prop_assert!(store.redo(&ws, UndoOptions::default()).await.is_err()),
            },
            Step::Depth(new) => {
                depth = new;
                store = UndoStore::open_with(&state, &ws, options(depth))
                    .await
                    .unwrap();
            }
        }
        // The next operation takes the state the last one left instead of parsing the log
        // (checked first: the reads below would keep a state of their own).
        prop_assert_eq!(store.check_kept(), Ok(()));
        prop_assert_eq!(unneeded(&store), Vec::<String>::new());
    }
    // Every remaining turn undoes and redoes exactly.
    let top = ws.snapshot();
    let mut redone = Vec::new();
    while let Some(before) = undo.pop() {
        redone.push(ws.snapshot());
        store.undo(&ws, UndoOptions::default()).await.unwrap();
        prop_assert_eq!(ws.snapshot(), before);
    }
    while let Some(after) = redone.pop() {
        store.redo(&ws, UndoOptions::default()).await.unwrap();
        prop_assert_eq!(ws.snapshot(), after);
    }
    prop_assert_eq!(ws.snapshot(), top);
    Ok(())
}

proptest! {
    // PROPTEST_CASES cases (256 in `cargo xtask test`, 20,000 in the soak): at 48, a blob
    // left by a turn that changed nothing went unseen.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn collection_keeps_what_turns_need_and_nothing_else(
        steps in prop::collection::vec(step(), 1..16),
    ) {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(run(steps))?;
    }
}
