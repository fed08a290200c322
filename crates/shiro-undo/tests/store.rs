//! Conflicts, redo, depth, size cap, collection, lock contention, damaged records, recovery
//! of an interrupted turn and of an interrupted restore: each its own test. Every report meant
//! for people is an insta snapshot.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Tree, fast_tempdir, mem_tree, noise, p};
use shiro_tools::{
    Change, Hooked, MemMutator, Mutation, Mutator, MutatorError, Stat, create_parent_dirs,
};
use shiro_undo::{
    Action, BashCapture, ContentHash, FORMAT_VERSION, Recording, StoreOptions, TurnId, TurnStart,
    UndoError, UndoOptions, UndoStore,
};

const FORCE: UndoOptions = UndoOptions {
    force: true,
    dry_run: false,
};
const DRY_RUN: UndoOptions = UndoOptions {
    force: false,
    dry_run: true,
};

/// A store in a temp dir over an in-memory workspace.
struct Fixture {
    dir: tempfile::TempDir,
    ws: MemMutator,
    store: UndoStore,
    rec: Recording<MemMutator>,
}

async fn fixture(options: StoreOptions) -> Fixture {
    let dir = fast_tempdir();
    let ws = MemMutator::new();
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options)
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    Fixture {
        dir,
        ws,
        store,
        rec,
    }
}

fn start(summary: &str) -> TurnStart {
    TurnStart {
        summary: summary.to_owned(),
        history_marker: 0,
        session: Some("s1".to_owned()),
    }
}

async fn write(m: &dyn Mutator, path: &str, bytes: &[u8]) {
    create_parent_dirs(m, &p(path)).await.unwrap();
    m.write(&p(path), bytes, None).await.unwrap();
}

/// Records one turn that writes each `(path, bytes)`.
async fn turn(f: &Fixture, summary: &str, writes: &[(&str, &[u8])]) -> Option<TurnId> {
    f.rec.begin_turn(start(summary)).await.unwrap();
    for (path, bytes) in writes {
        write(&f.rec, path, bytes).await;
    }
    f.rec.finish_turn().await.unwrap()
}

/// A fixture where files of 1 KiB or more are big (stored as chains of deltas).
async fn big_file_fixture() -> Fixture {
    fixture(StoreOptions {
        big_file_bytes: 1024,
        ..StoreOptions::default()
    })
    .await
}

/// Opens the store again, as the next shiro command would, with the notices it reports.
async fn reopen(dir: &Path, ws: &MemMutator) -> (UndoStore, Vec<String>) {
    let store = UndoStore::open_with(&common::state(dir), ws, StoreOptions::default())
        .await
        .unwrap();
    let notices = store
        .take_notices()
        .iter()
        .map(ToString::to_string)
        .collect();
    (store, notices)
}

fn read(tree: &Tree, path: &str) -> Vec<u8> {
    tree[path].1.clone().unwrap()
}

#[tokio::test]
async fn undo_refuses_on_conflict_and_names_the_paths() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a.txt", b"one\n").await;
    write(&f.ws, "gone.txt", b"bye\n").await;
    f.rec
        .begin_turn(start("edit a, add b, delete gone"))
        .await
        .unwrap();
    write(&f.rec, "a.txt", b"two\n").await;
    write(&f.rec, "b.txt", b"new\n").await;
    f.rec.remove_file(&p("gone.txt")).await.unwrap();
    f.rec.finish_turn().await.unwrap().unwrap();
    // The user edits a.txt and recreates gone.txt after the turn.
    write(&f.ws, "a.txt", b"user's edit\n").await;
    write(&f.ws, "gone.txt", b"user's file\n").await;
    let after_user = mem_tree(&f.ws);

    let Err(UndoError::Conflict(report)) = f.store.undo(&f.ws, UndoOptions::default()).await else {
        panic!("expected a conflict");
    };
    assert_eq!(
        mem_tree(&f.ws),
        after_user,
        "a refused undo changes nothing"
    );
    insta::assert_snapshot!("conflict_report", report.to_string());
    assert_eq!(f.store.check(&f.ws).await.unwrap().len(), 2);

    let plan = f.store.undo(&f.ws, DRY_RUN).await.unwrap();
    assert!(plan.dry_run);
    assert_eq!(mem_tree(&f.ws), after_user, "a dry run changes nothing");
    insta::assert_snapshot!("dry_run_with_conflicts", plan.to_string());
    // The plan gives the bytes of what each path becomes.
    let a = plan.paths.iter().find(|o| o.path == p("a.txt")).unwrap();
    assert_eq!(
        f.store.blob(&a.becomes.hash().unwrap()).unwrap().unwrap(),
        b"one\n"
    );

    let forced = f.store.undo(&f.ws, FORCE).await.unwrap();
    insta::assert_snapshot!("forced_undo", forced.to_string());
    let tree = mem_tree(&f.ws);
    assert_eq!(read(&tree, "a.txt"), b"one\n");
    assert_eq!(read(&tree, "gone.txt"), b"bye\n");
    assert!(!tree.contains_key("b.txt"));

    // Redo brings back what the forced undo replaced, the user's edits included.
    f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), after_user);
}

#[tokio::test]
async fn redo_follows_the_same_conflict_rule_and_a_new_turn_clears_it() {
    let f = fixture(StoreOptions::default()).await;
    turn(&f, "first", &[("a", b"1")]).await.unwrap();
    turn(&f, "second", &[("a", b"2"), ("dir/b", b"b")])
        .await
        .unwrap();
    let end = mem_tree(&f.ws);
    let undone = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    insta::assert_snapshot!("undo_outcome", undone.to_string());
    assert_eq!(f.store.redo_log().unwrap().len(), 1);

    write(&f.ws, "a", b"changed after the undo").await;
    let Err(UndoError::Conflict(report)) = f.store.redo(&f.ws, UndoOptions::default()).await else {
        panic!("expected a conflict");
    };
    insta::assert_snapshot!("redo_conflict_report", report.to_string());
    write(&f.ws, "a", b"1").await;
    let redone = f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    insta::assert_snapshot!("redo_outcome", redone.to_string());
    assert_eq!(mem_tree(&f.ws), end);
    assert!(matches!(
        f.store.redo(&f.ws, UndoOptions::default()).await,
        Err(UndoError::NothingToRedo)
    ));

    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    turn(&f, "third", &[("c", b"c")]).await.unwrap();
    assert!(
        f.store.redo_log().unwrap().is_empty(),
        "a new turn clears the redo stack"
    );
    assert!(matches!(
        f.store.redo(&f.ws, UndoOptions::default()).await,
        Err(UndoError::NothingToRedo)
    ));
}

#[tokio::test]
async fn the_log_keeps_the_newest_turns_up_to_its_depth() {
    let f = fixture(StoreOptions {
        depth: 3,
        ..StoreOptions::default()
    })
    .await;
    for i in 1..=5u8 {
        turn(&f, &format!("turn {i}"), &[("a", &[i])])
            .await
            .unwrap();
    }
    let ids: Vec<u64> = f.store.log().unwrap().iter().map(|t| t.id.0).collect();
    assert_eq!(ids, [5, 4, 3]);
    for _ in 0..3 {
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    }
    assert_eq!(read(&mem_tree(&f.ws), "a"), [2]);
    assert!(matches!(
        f.store.undo(&f.ws, UndoOptions::default()).await,
        Err(UndoError::NothingToUndo)
    ));
    // The blobs of dropped turns are gone: only what the three kept turns refer to remains,
    // the packs of what turns 2 to 5 left (turn 3 found its pre-image in turn 2's); each
    // undo found what it replaced stored, and kept nothing.
    assert_eq!(
        blob_files(f.dir.path(), ""),
        ["2-0.pack", "3-0.pack", "4-0.pack", "5-0.pack"]
    );
}

/// A new turn clears the undone turns of its own session only; another session's stay
/// redoable, at most `depth` of them, a rewind's turns kept or dropped together.
#[tokio::test]
async fn undone_turns_of_other_sessions_stay_redoable_up_to_the_depth() {
    let f = fixture(StoreOptions {
        depth: 3,
        ..StoreOptions::default()
    })
    .await;
    let of = |session: &str, summary: &str| TurnStart {
        summary: summary.to_owned(),
        history_marker: 0,
        session: Some(session.to_owned()),
    };
    let record = |start: TurnStart, path: &'static str, byte: u8| {
        let f = &f;
        async move {
            f.rec.begin_turn(start).await.unwrap();
            write(&f.rec, path, &[byte]).await;
            f.rec.finish_turn().await.unwrap().unwrap()
        }
    };
    let redoable =
        |f: &Fixture| -> Vec<u64> { f.store.redo_log().unwrap().iter().map(|t| t.id.0).collect() };
    // s1 undoes two turns one by one; s2's turn keeps them, and s1's own next turn clears
    // them.
    let one = record(of("s1", "one"), "a", 1).await;
    let two = record(of("s1", "two"), "b", 2).await;
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(redoable(&f), [one.0, two.0]);
    record(of("s2", "other"), "c", 3).await;
    assert_eq!(redoable(&f), [one.0, two.0]);
    f.store
        .redo_turn(&f.ws, two, UndoOptions::default())
        .await
        .unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "b"), [2]);
    assert_eq!(redoable(&f), [one.0]);
    record(of("s1", "three"), "d", 4).await;
    assert_eq!(redoable(&f), Vec::<u64>::new());
    assert!(matches!(
        f.store.redo_turn(&f.ws, one, UndoOptions::default()).await,
        Err(UndoError::NotUndone { .. })
    ));

    // A rewind of three of s3's turns fits the depth; with one more undone turn of s4's
    // above it, the next turn drops its oldest undone turns: the whole rewind.
    let first = record(of("s3", "x"), "x", 1).await;
    record(of("s3", "y"), "y", 1).await;
    record(of("s3", "z"), "z", 1).await;
    f.store
        .rewind(&f.ws, first, UndoOptions::default())
        .await
        .unwrap();
    record(of("s2", "more"), "c", 5).await;
    assert_eq!(redoable(&f).len(), 3);
    let last = record(of("s4", "w"), "w", 1).await;
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    record(of("s2", "again"), "c", 6).await;
    assert_eq!(redoable(&f), [last.0]);
}

/// A pack whose turn left the log, and whose copies still needed take less than half of it,
/// is rewritten with those alone, under its name.
#[tokio::test]
async fn a_pack_mostly_dead_is_rewritten_with_its_live_copies() {
    let f = fixture(StoreOptions {
        depth: 1,
        ..StoreOptions::default()
    })
    .await;
    for i in 0..10u32 {
        write(&f.ws, &format!("f{i}"), &noise(2000, i)).await;
    }
    let writes: Vec<(String, Vec<u8>)> = (0..10u32)
        .map(|i| (format!("f{i}"), b"new".to_vec()))
        .collect();
    let writes: Vec<(&str, &[u8])> = writes.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    turn(&f, "ten files", &writes).await.unwrap();
    let pack = f.dir.path().join(".shiro/undo/blobs/1-0.pack");
    let whole = std::fs::metadata(&pack).unwrap().len();
    // Turn 2's pre-image of `g` is in turn 1's pack; turn 1 leaves the log (depth 1).
    write(&f.ws, "g", &noise(2000, 3)).await;
    turn(&f, "g", &[("g", b"g")]).await.unwrap();
    // (Turn 2's own pack holds what it left of `g`.)
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack", "2-0.pack"]);
    let rewritten = std::fs::metadata(&pack).unwrap().len();
    assert!(
        rewritten * 5 < whole,
        "one copy of ten is left: {rewritten} of {whole} bytes"
    );
    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "g"), noise(2000, 3));
}

/// A pre-image another turn's pack holds already is not stored again: the new turn names
/// that pack, which then stays for as long as the new turn is in the log.
#[tokio::test]
async fn a_packed_pre_image_is_stored_once_and_kept_for_every_turn_that_needs_it() {
    let f = fixture(StoreOptions {
        depth: 2,
        ..StoreOptions::default()
    })
    .await;
    write(&f.ws, "a", b"the first version").await;
    write(&f.ws, "b", b"b").await;
    turn(&f, "one", &[("a", b"x"), ("b", b"b2")]).await.unwrap();
    // Turn 1's pack holds what it found and what it left: turn 2 finds both there, and
    // stores nothing of its own.
    turn(&f, "two", &[("a", b"the first version")])
        .await
        .unwrap();
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack"]);
    // Turn 3's pre-image of `a` is in turn 1's pack, and turn 1, which falls off the depth,
    // leaves its pack to turns 2 and 3; turn 3 stores only what it left.
    turn(&f, "three", &[("a", b"y")]).await.unwrap();
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack", "3-0.pack"]);
    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "a"), b"the first version");
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "a"), b"x");
    // Each undo found what it replaced stored: no copy kept.
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack", "3-0.pack"]);
    store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "a"), b"y");
    assert_eq!(read(&mem_tree(&f.ws), "b"), b"b2");
}

/// The names of the files in `blobs/` with this suffix.
fn blob_files(root: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(".shiro/undo/blobs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(suffix))
        .collect();
    names.sort();
    names
}

/// In a store that keeps no after-image (as past its cap), the undo keeps what it replaces.
#[tokio::test]
async fn an_undo_keeps_its_copies_in_one_pack_for_as_long_as_its_turn() {
    let f = fixture(StoreOptions {
        max_small_after_bytes: 0,
        ..StoreOptions::default()
    })
    .await;
    for i in 0..5u8 {
        write(&f.ws, &format!("d/f{i}"), &[b'a', i]).await;
    }
    let before = mem_tree(&f.ws);
    let writes: Vec<(String, Vec<u8>)> = (0..5u8)
        .map(|i| (format!("d/f{i}"), vec![b'b', i]))
        .collect();
    let writes: Vec<(&str, &[u8])> = writes.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    turn(&f, "five files", &writes).await.unwrap();
    let after = mem_tree(&f.ws);
    // The turn keeps the five pre-images in its pack, not in five blobs.
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack"]);
    let loose = blob_files(f.dir.path(), "");
    assert_eq!(loose.len(), 1, "the pack alone: {loose:?}");

    // The first undo keeps the five files' contents (for redo) in one more pack.
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack", "1-1.pack"]);
    assert_eq!(blob_files(f.dir.path(), "").len(), 2);
    // A dry run of the redo shows the contents from the pack.
    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    let planned = store
        .redo(
            &f.ws,
            UndoOptions {
                dry_run: true,
                ..UndoOptions::default()
            },
        )
        .await
        .unwrap();
    let shown = planned.paths[0].becomes.hash().unwrap();
    assert_eq!(store.blob(&shown).unwrap().unwrap(), read(&after, "d/f0"));
    let copies = store.copies(planned.turn.id).unwrap();
    assert_eq!(copies.get(&shown).unwrap().unwrap(), read(&after, "d/f0"));

    // Redo reads them back; undoing again finds them kept and writes no other pack.
    store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), after);
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack", "1-1.pack"]);

    // A new turn empties the redo stack: the undone turn and its pack go.
    turn(&f, "another", &[("e", b"e")]).await.unwrap();
    assert!(blob_files(f.dir.path(), ".pack").is_empty());
}

/// A turn stores what it leaves of the small files it changes or makes in its own pack:
/// its undo finds those copies there and writes no pack, and redo brings them back exactly.
#[tokio::test]
async fn a_turn_stores_what_it_leaves_so_that_its_undo_writes_no_pack() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a.txt", b"one\n").await;
    write(&f.ws, "d/b.txt", b"two\n").await;
    write(&f.ws, "mode.sh", b"run\n").await;
    let before = mem_tree(&f.ws);
    f.rec.begin_turn(start("edit, make, chmod")).await.unwrap();
    write(&f.rec, "a.txt", b"one, edited\n").await;
    write(&f.rec, "d/b.txt", b"two, edited\n").await;
    write(&f.rec, "d/new.txt", b"made\n").await;
    write(&f.rec, "copy.txt", b"one\n").await;
    f.rec.set_mode(&p("mode.sh"), 0o755).await.unwrap();
    let id = f.rec.finish_turn().await.unwrap().unwrap();
    let after = mem_tree(&f.ws);
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack"]);
    let copies = f.store.copies(id).unwrap();
    for path in ["a.txt", "d/b.txt", "d/new.txt", "copy.txt", "mode.sh"] {
        let bytes = read(&after, path);
        let copy = copies.get(&ContentHash::of(&bytes)).unwrap();
        assert_eq!(copy.as_deref(), Some(&bytes[..]), "{path}");
    }

    for _ in 0..2 {
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), before);
        assert_eq!(
            blob_files(f.dir.path(), ""),
            ["1-0.pack"],
            "the undo kept nothing"
        );
        f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), after);
    }
    // The next turn finds its pre-images in that pack: it stores only what it leaves.
    turn(&f, "again", &[("a.txt", b"one, edited twice\n")])
        .await
        .unwrap();
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack", "2-0.pack"]);
    f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "a.txt"), b"one, edited twice\n");
}

/// A turn stores what it leaves of small files only up to `max_small_after_bytes`, each file
/// that still fits in path order; its undo keeps the rest, as it keeps anything it finds
/// unstored, and undo and redo restore every byte.
#[tokio::test]
async fn a_turn_stores_what_it_leaves_up_to_the_cap() {
    let f = fixture(StoreOptions {
        max_small_after_bytes: 100,
        ..StoreOptions::default()
    })
    .await;
    let before = mem_tree(&f.ws);
    // 60 bytes fit; 60 more would not; 30 more still do.
    let writes: [(&str, Vec<u8>); 3] = [
        ("a", noise(60, 1)),
        ("b", noise(60, 2)),
        ("c", noise(30, 3)),
    ];
    let writes: Vec<(&str, &[u8])> = writes.iter().map(|(p, b)| (*p, &b[..])).collect();
    let id = turn(&f, "three files", &writes).await.unwrap();
    let after = mem_tree(&f.ws);
    let copies = f.store.copies(id).unwrap();
    let stored = |path: &str| {
        copies
            .get(&ContentHash::of(&read(&after, path)))
            .unwrap()
            .is_some()
    };
    assert_eq!([stored("a"), stored("b"), stored("c")], [true, false, true]);
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack"]);

    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
    // The undo kept `b` alone, in a pack of its own.
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack", "1-1.pack"]);
    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), after);
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack", "1-1.pack"]);
}

fn blob_count(root: &Path) -> usize {
    std::fs::read_dir(root.join(".shiro/undo/blobs"))
        .unwrap()
        .count()
}

#[tokio::test]
async fn the_size_cap_drops_the_oldest_turns_and_says_so() {
    let f = fixture(StoreOptions {
        max_store_bytes: 10_000,
        ..StoreOptions::default()
    })
    .await;
    for i in 0..4u32 {
        write(&f.ws, &format!("f{i}"), &noise(4000, i)).await;
    }
    for i in 0..4u32 {
        turn(
            &f,
            &format!("turn {}", i + 1),
            &[(&format!("f{i}"), b"small")],
        )
        .await
        .unwrap();
    }
    let notices = f.store.take_notices();
    let text: Vec<String> = notices.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!("size_cap_notices", text.join("\n"));
    let ids: Vec<u64> = f.store.log().unwrap().iter().map(|t| t.id.0).collect();
    assert_eq!(
        ids,
        [4, 3],
        "two turns of 4000 incompressible bytes fit under 10 000"
    );
    // Every turn needs what the first left ("small", in turn 1's pack): that pack, rewritten
    // with it alone, is counted as it is left, so the turns go one at a time and the notice
    // says what the store takes.
    let Some(shiro_undo::Notice::DroppedForSize { store_bytes, .. }) = notices.last() else {
        panic!("{notices:?}");
    };
    assert_eq!(f.store.store_bytes().unwrap(), *store_bytes);
    assert!(*store_bytes <= 10_000);

    // The newest turn is never dropped, even when it alone is over the cap.
    let g = fixture(StoreOptions {
        max_store_bytes: 100,
        ..StoreOptions::default()
    })
    .await;
    write(&g.ws, "big", &noise(5000, 9)).await;
    turn(&g, "too big", &[("big", b"x")]).await.unwrap();
    assert_eq!(g.store.log().unwrap().len(), 1);
    g.store.undo(&g.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&g.ws), "big"), noise(5000, 9));
}

#[tokio::test]
async fn unreferenced_blobs_are_collected_and_shared_ones_kept() {
    let f = fixture(StoreOptions {
        depth: 1,
        ..StoreOptions::default()
    })
    .await;
    write(&f.ws, "a", b"original a").await;
    write(&f.ws, "b", b"original a").await; // same content: one blob
    turn(&f, "one", &[("a", b"1"), ("b", b"1")]).await.unwrap();
    assert_eq!(
        blob_count(f.dir.path()),
        1,
        "identical pre-images are stored once"
    );
    turn(&f, "two", &[("a", b"2")]).await.unwrap();
    // Turn one was dropped (depth 1). Turn two's pre-image, "1", is in turn one's pack,
    // which stays (rewritten without "original a"); what turn two left is in its own.
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack", "2-0.pack"]);
    let hash = ContentHash::of(b"1");
    assert_eq!(f.store.blob(&hash).unwrap().unwrap(), b"1");
    assert!(
        f.store
            .blob(&ContentHash::of(b"original a"))
            .unwrap()
            .is_none()
    );
    // The state an undo replaced is kept for redo.
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert!(f.store.blob(&ContentHash::of(b"2")).unwrap().is_some());
}

#[tokio::test]
async fn turns_that_change_nothing_are_not_recorded() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"same").await;
    f.rec.begin_turn(start("reads only")).await.unwrap();
    f.rec.read(&p("a")).await.unwrap();
    assert_eq!(f.rec.finish_turn().await.unwrap(), None);
    assert_eq!(
        turn(&f, "writes the same bytes", &[("a", b"same")]).await,
        None
    );
    f.rec
        .begin_turn(start("creates then deletes"))
        .await
        .unwrap();
    write(&f.rec, "tmp/x", b"x").await;
    f.rec.remove_file(&p("tmp/x")).await.unwrap();
    f.rec.remove_dir(&p("tmp")).await.unwrap();
    assert_eq!(f.rec.finish_turn().await.unwrap(), None);
    assert!(f.store.log().unwrap().is_empty());
    assert!(f.rec.begin_turn(start("x")).await.is_ok());
    assert!(matches!(
        f.rec.begin_turn(start("y")).await,
        Err(UndoError::TurnInProgress)
    ));
    f.rec.finish_turn().await.unwrap();
}

#[tokio::test]
async fn the_log_lists_turns_with_their_changes_and_the_bash_note() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "old.rs", b"fn main() {}\n").await;
    f.rec
        .begin_turn(TurnStart {
            summary: "rename and build".into(),
            history_marker: 12,
            session: Some("s1".into()),
        })
        .await
        .unwrap();
    f.rec.rename(&p("old.rs"), &p("new.rs")).await.unwrap();
    f.rec
        .note_tool(
            "apply_patch",
            &[Change::Moved {
                from: p("old.rs"),
                to: p("new.rs"),
            }],
        )
        .await;
    f.rec.note_tool("bash", &[]).await;
    f.rec.note_bash(BashCapture::Off, &[]).await;
    f.rec.finish_turn().await.unwrap().unwrap();
    turn(&f, "headless write", &[("src/lib.rs", b"")])
        .await
        .unwrap();
    let log = f.store.log().unwrap();
    assert_eq!(log[1].tools, ["apply_patch", "bash"]);
    assert_eq!(log[1].history_marker, 12);
    let text: Vec<String> = log.iter().map(|t| t.to_string()).collect();
    insta::assert_snapshot!("log_lines", text.join("\n"));
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    let outcome = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(outcome.turn.history_marker, 12);
    insta::assert_snapshot!("undo_with_bash_note", outcome.to_string());
}

#[tokio::test]
async fn a_log_rewritten_by_another_process_is_read_anew_even_at_the_same_length_and_time() {
    let f = fixture(StoreOptions::default()).await;
    turn(&f, "first aaaa", &[("a.txt", b"1")]).await.unwrap();
    let summaries = |store: &UndoStore| -> Vec<String> {
        (store.log().unwrap().iter())
            .map(|t| t.summary.clone())
            .collect()
    };
    // Reads with no write between: the second finds the state the first kept, the third
    // parses again and keeps it for the next.
    for _ in 0..3 {
        assert_eq!(summaries(&f.store), ["first aaaa"]);
    }
    // Another process rewrites the log: the same length, the same modification time, one
    // record changed (its checksum made anew, so that the record is sound).
    let path = common::state(f.dir.path()).undo_dir().join("log.jsonl");
    let before = std::fs::metadata(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let rewritten: String = (text.lines())
        .map(|line| {
            let (_, json) = line.split_once(' ').unwrap();
            let json = json.replace("first aaaa", "first bbbb");
            format!("{} {json}\n", blake3::hash(json.as_bytes()).to_hex())
        })
        .collect();
    assert_ne!(rewritten, text);
    assert_eq!(rewritten.len(), text.len());
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, rewritten.as_bytes(), 0).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    assert_eq!(summaries(&f.store), ["first bbbb"]);
    assert_eq!(summaries(&f.store), ["first bbbb"]);
    // And an undo goes by the log as it is now.
    let outcome = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(outcome.turn.summary, "first bbbb");
}

/// A store keeps the log's state between operations, and trusts it without reading the log
/// only while it holds the lock it read it under: once the lock is let go, another process
/// may write, and what it wrote is seen by the next read, with the lock or without.
#[tokio::test]
async fn a_store_sees_the_turns_another_process_recorded_since_it_last_read() {
    let f = fixture(StoreOptions::default()).await;
    let (other, _) = reopen(f.dir.path(), &f.ws).await;
    let other_rec = other.recorder(f.ws.clone());
    let summaries = |store: &UndoStore| -> Vec<String> {
        (store.log().unwrap().iter())
            .map(|t| t.summary.clone())
            .collect()
    };
    turn(&f, "mine", &[("a.txt", b"1")]).await.unwrap();
    // Read without the lock, then with it (a turn that changes nothing), then written by
    // the other store each time.
    assert_eq!(summaries(&f.store), ["mine"]);
    other_rec.begin_turn(start("theirs")).await.unwrap();
    write(&other_rec, "b.txt", b"2").await;
    other_rec.finish_turn().await.unwrap().unwrap();
    assert_eq!(summaries(&f.store), ["theirs", "mine"]);
    other_rec
        .begin_turn(start("theirs, read without a lock"))
        .await
        .unwrap();
    write(&other_rec, "b.txt", b"22").await;
    other_rec.finish_turn().await.unwrap().unwrap();
    assert_eq!(
        summaries(&f.store),
        ["theirs, read without a lock", "theirs", "mine"]
    );
    f.rec.begin_turn(start("reads only")).await.unwrap();
    assert_eq!(f.rec.finish_turn().await.unwrap(), None);
    other_rec.begin_turn(start("theirs again")).await.unwrap();
    write(&other_rec, "c.txt", b"3").await;
    other_rec.finish_turn().await.unwrap().unwrap();
    // The undo takes the newest turn, which only the other store wrote.
    let outcome = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(outcome.turn.summary, "theirs again");
    assert_eq!(
        summaries(&other),
        ["theirs, read without a lock", "theirs", "mine"]
    );
}

/// Records a turn that writes `writes`, then runs bash with `capture`, which changed
/// `unrestorable` (made here too, as a bash run directly would).
async fn bash_turn(
    f: &Fixture,
    summary: &str,
    writes: &[&str],
    capture: BashCapture,
    unrestorable: &[&str],
) -> Option<TurnId> {
    f.rec.begin_turn(start(summary)).await.unwrap();
    for path in writes {
        write(&f.rec, path, b"tool").await;
    }
    for path in unrestorable {
        write(&f.ws, path, b"bash").await;
    }
    f.rec.note_tool("bash", &[]).await;
    let paths: Vec<_> = unrestorable.iter().map(|path| p(path)).collect();
    f.rec.note_bash(capture, &paths).await;
    f.rec.finish_turn().await.unwrap()
}

#[tokio::test]
async fn the_log_and_undo_say_how_bash_was_captured() {
    let f = fixture(StoreOptions::default()).await;
    let many: Vec<String> = (1..=12).map(|i| format!("out/{i:02}.o")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    bash_turn(&f, "overlay", &["a"], BashCapture::Overlay, &[]).await;
    bash_turn(&f, "one", &["b"], BashCapture::Detect, &["x"]).await;
    bash_turn(&f, "three", &[], BashCapture::Detect, &["z", "y", "x"]).await;
    bash_turn(&f, "many", &["c"], BashCapture::Detect, &many).await;
    bash_turn(&f, "off", &["d"], BashCapture::Off, &[]).await;
    // Two calls in one turn: one without capture, one that left a path unrestorable.
    f.rec.begin_turn(start("both")).await.unwrap();
    write(&f.rec, "e", b"tool").await;
    f.rec.note_bash(BashCapture::Off, &[]).await;
    f.rec.note_bash(BashCapture::Detect, &[p("w")]).await;
    f.rec.finish_turn().await.unwrap().unwrap();

    let log = f.store.log().unwrap();
    assert_eq!(
        log.len(),
        6,
        "the turn bash alone changed is kept, to name its files"
    );
    let text: Vec<String> = log.iter().map(|t| t.to_string()).collect();
    insta::assert_snapshot!("bash_log_lines", text.join("\n"));
    let mut json = serde_json::to_value(&log[2]).unwrap();
    json["time"] = 0.into();
    insta::assert_snapshot!(
        "bash_log_json",
        serde_json::to_string_pretty(&json).unwrap()
    );
    let mut undone = Vec::new();
    for _ in 0..log.len() {
        let outcome = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        undone.push(outcome.to_string());
    }
    insta::assert_snapshot!("bash_undo_notes", undone.join("\n"));
    // What bash changed stays; what the tools changed is undone.
    let tree = mem_tree(&f.ws);
    assert_eq!(read(&tree, "x"), b"bash");
    assert!(!tree.contains_key("a") && !tree.contains_key("e"));
}

#[tokio::test]
async fn a_directory_with_foreign_entries_blocks_restoring_a_file() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "build", b"a file\n").await;
    f.rec.begin_turn(start("file to dir")).await.unwrap();
    f.rec.remove_file(&p("build")).await.unwrap();
    write(&f.rec, "build/out.o", b"obj").await;
    f.rec.finish_turn().await.unwrap().unwrap();
    write(&f.ws, "build/user.txt", b"mine").await;
    let Err(UndoError::Conflict(report)) = f.store.undo(&f.ws, UndoOptions::default()).await else {
        panic!("expected a conflict");
    };
    insta::assert_snapshot!("not_empty_conflict", report.to_string());
    // Forced, it still never deletes the user's file: the path is skipped and reported.
    let forced = f.store.undo(&f.ws, FORCE).await.unwrap();
    insta::assert_snapshot!("forced_not_empty", forced.to_string());
    assert_eq!(read(&mem_tree(&f.ws), "build/user.txt"), b"mine");

    // A directory the turn created that holds the user's files is kept.
    let g = fixture(StoreOptions::default()).await;
    turn(&g, "make dir", &[("made/x", b"x")]).await.unwrap();
    write(&g.ws, "made/user", b"mine").await;
    let outcome = g.store.undo(&g.ws, UndoOptions::default()).await.unwrap();
    insta::assert_snapshot!("kept_not_empty", outcome.to_string());
    let tree = mem_tree(&g.ws);
    assert!(tree.contains_key("made/user") && !tree.contains_key("made/x"));
}

/// An undo that keeps directories the turn made, since they hold the user's files, records
/// that it left them: its redo expects them there and goes through, bringing the turn's file
/// back beside the user's, as often as asked; so does the redo of an undo that a crash
/// interrupted before its `done`, completed on the next open. A change to a kept directory
/// after the undo still refuses the redo.
#[tokio::test]
async fn a_redo_expects_the_directories_its_undo_kept() {
    let f = fixture(StoreOptions::default()).await;
    turn(&f, "make dirs", &[("made/sub/x", b"x")])
        .await
        .unwrap();
    write(&f.ws, "made/sub/user", b"mine").await;
    let made = mem_tree(&f.ws);
    let outcome = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    let kept: Vec<&str> = (outcome.paths.iter())
        .filter(|path| path.action == Action::KeptNotEmpty)
        .map(|path| path.path.as_str())
        .collect();
    assert_eq!(kept, ["made", "made/sub"]);
    let undone = mem_tree(&f.ws);
    assert!(!undone.contains_key("made/sub/x") && undone.contains_key("made/sub/user"));
    for _ in 0..2 {
        f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), made);
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), undone);
    }
    // A change since the undo: the mode of a kept directory.
    f.ws.set_mode(&p("made/sub"), 0o700).await.unwrap();
    let changed = mem_tree(&f.ws);
    let Err(UndoError::Conflict(report)) = f.store.redo(&f.ws, UndoOptions::default()).await else {
        panic!("expected a conflict");
    };
    let paths: Vec<&str> = report.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["made/sub"]);
    assert_eq!(mem_tree(&f.ws), changed);

    // Cut short after its changes, before its `done`: completed on the next open.
    let g = fixture(StoreOptions::default()).await;
    turn(&g, "make dirs", &[("made/sub/x", b"x")])
        .await
        .unwrap();
    write(&g.ws, "made/sub/user", b"mine").await;
    g.store.undo(&g.ws, UndoOptions::default()).await.unwrap();
    let log = g.store.dir().join("log.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let (begun, done) = text.trim_end().rsplit_once('\n').unwrap();
    assert!(done.contains(r#""record":"done""#), "{done}");
    std::fs::write(&log, format!("{begun}\n")).unwrap();
    drop(g.rec);
    let (store, notices) = reopen(g.dir.path(), &g.ws).await;
    assert_eq!(
        notices,
        ["completed the interrupted undo of turn #1; the workspace is as it was before the turn"]
    );
    assert_eq!(mem_tree(&g.ws), undone);
    store.redo(&g.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&g.ws), made);
}

/// A forced undo that keeps a directory where the turn found a file (the turn replaced the
/// file with a tree, and the user added to the tree) records that it left the directory: the
/// redo expects it there and brings the turn's file back beside the user's, and the next undo
/// takes the turn's file away again, without `--force`.
#[tokio::test]
async fn a_redo_expects_the_directory_a_forced_undo_kept_over_a_file() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "x", b"a file\n").await;
    f.rec.begin_turn(start("file to tree")).await.unwrap();
    f.rec.remove_file(&p("x")).await.unwrap();
    write(&f.rec, "x/y/z", b"z").await;
    f.rec.finish_turn().await.unwrap().unwrap();
    write(&f.ws, "x/y/mine", b"mine").await;
    let forced = f.store.undo(&f.ws, FORCE).await.unwrap();
    let skipped: Vec<&str> = (forced.paths.iter())
        .filter(|path| path.action == Action::Skipped)
        .map(|path| path.path.as_str())
        .collect();
    assert_eq!(skipped, ["x"]);
    let undone = mem_tree(&f.ws);
    assert!(!undone.contains_key("x/y/z") && undone.contains_key("x/y/mine"));
    for _ in 0..2 {
        f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        let redone = mem_tree(&f.ws);
        assert_eq!(read(&redone, "x/y/z"), b"z");
        assert_eq!(read(&redone, "x/y/mine"), b"mine");
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), undone);
    }
}

#[tokio::test]
async fn a_second_opener_waits_then_fails_naming_the_lock() {
    let dir = fast_tempdir();
    let ws = MemMutator::new();
    let short = StoreOptions {
        lock_timeout: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, short.clone())
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    rec.begin_turn(start("holds the lock")).await.unwrap();

    let root = dir.path().to_path_buf();
    let started = std::time::Instant::now();
    let err = UndoStore::open_with(&common::state(&root), &ws, short.clone())
        .await
        .unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waits before failing"
    );
    assert!(matches!(err, UndoError::Locked { .. }));
    let message = err
        .to_string()
        .replace(&root.display().to_string(), "[workspace]");
    insta::assert_snapshot!("lock_timeout", message);
    // The same store, used from elsewhere in this process while a turn records, waits too.
    assert!(matches!(
        store.undo(&ws, UndoOptions::default()).await,
        Err(UndoError::Locked { .. })
    ));

    // Released at finish: a waiting opener then gets in.
    let waiter = {
        let (root, ws, options) = (
            root.clone(),
            ws.clone(),
            StoreOptions {
                lock_timeout: Duration::from_secs(10),
                ..short
            },
        );
        std::thread::spawn(move || {
            common::runtime().block_on(async move {
                UndoStore::open_with(&common::state(&root), &ws, options)
                    .await
                    .map(drop)
            })
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    write(&rec, "a", b"a").await;
    rec.finish_turn().await.unwrap().unwrap();
    waiter.join().unwrap().unwrap();
}

#[tokio::test]
async fn a_damaged_log_record_is_reported_and_skipped() {
    let f = fixture(StoreOptions::default()).await;
    for i in 1..=3u8 {
        turn(&f, &format!("turn {i}"), &[(&format!("f{i}"), &[i])])
            .await
            .unwrap();
    }
    let log = f.dir.path().join(".shiro/undo/log.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    // Line 1 is the header; line 3 is turn 2. Flip one character of its payload.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[2] = lines[2].replacen("turn 2", "turn X", 1);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();

    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!("damaged_record", notices.join("\n"));
    let ids: Vec<u64> = store.log().unwrap().iter().map(|t| t.id.0).collect();
    assert_eq!(ids, [3, 1]);
    assert!(
        f.dir.path().join(".shiro/undo/log.damaged.jsonl").exists(),
        "the damaged log is kept for inspection"
    );
    // Reported once: the log was rewritten without the bad record.
    let again = UndoStore::open_with(&common::state(f.dir.path()), &f.ws, StoreOptions::default())
        .await
        .unwrap();
    assert!(again.take_notices().is_empty());
    again.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert!(!mem_tree(&f.ws).contains_key("f3"));

    // A last record cut short is an append a crash interrupted, not damage: it was never
    // acknowledged. Here it is the `done` of that undo, whose `begin` stays: the next open
    // completes the undo again (there is nothing left to change) and says so.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().last().unwrap().contains(r#""record":"done""#));
    std::fs::write(&log, &text[..text.len() - 10]).unwrap();
    let damaged_copy = std::fs::read(f.dir.path().join(".shiro/undo/log.damaged.jsonl")).unwrap();
    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!("truncated_record", notices.join("\n"));
    assert_eq!(store.log().unwrap().len(), 1);
    assert_eq!(store.redo_log().unwrap().len(), 1);
    assert!(!mem_tree(&f.ws).contains_key("f3"));
    assert_eq!(
        std::fs::read(f.dir.path().join(".shiro/undo/log.damaged.jsonl")).unwrap(),
        damaged_copy,
        "no damage to keep a copy of"
    );
    let again = UndoStore::open_with(&common::state(f.dir.path()), &f.ws, StoreOptions::default())
        .await
        .unwrap();
    assert!(again.take_notices().is_empty());
}

#[tokio::test]
async fn a_newer_format_is_refused_and_left_untouched() {
    let f = fixture(StoreOptions::default()).await;
    let log = f.dir.path().join(".shiro/undo/log.jsonl");
    let json = r#"{"record":"header","format":"shiro-undo-log","version":99,"next_id":1}"#;
    // A record's checksum is the blake3 hash of its JSON, which ContentHash computes too.
    let line = format!("{} {json}\n", ContentHash::of(json.as_bytes()).to_hex());
    std::fs::write(&log, &line).unwrap();
    let err = UndoStore::open_with(&common::state(f.dir.path()), &f.ws, StoreOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, UndoError::UnsupportedVersion { found: 99, .. }),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), line);
}

#[tokio::test]
async fn a_turn_cut_short_is_recovered_on_the_next_open() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"before").await;
    let before = mem_tree(&f.ws);
    f.rec.begin_turn(start("interrupted")).await.unwrap();
    write(&f.rec, "a", b"after").await;
    write(&f.rec, "new/b", b"b").await;
    // The process dies: the recorder is never finished.
    drop(f.rec);
    let after = mem_tree(&f.ws);

    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!("recovered_turn", notices.join("\n"));
    let log = store.log().unwrap();
    assert!(log[0].recovered);
    insta::assert_snapshot!("recovered_turn_log_line", log[0].to_string());
    // Finished as the recorder finishes a turn: what it left is in its pack, and the undo
    // keeps nothing.
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack"]);
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
    assert_eq!(blob_files(f.dir.path(), ""), ["1-0.pack"]);
    store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), after);
}

/// Pre-images past what a turn holds in memory are read back from the in-flight file as the
/// turn is stored (several with one read), and each is checked against its hash: one changed
/// there meanwhile fails the finish with an error naming the file, and the turn is recovered
/// from that file by the next open, as after a crash.
#[tokio::test]
async fn a_pre_image_changed_in_the_in_flight_file_fails_the_finish() {
    let f = fixture(StoreOptions {
        max_held_bytes: 0,
        ..StoreOptions::default()
    })
    .await;
    let olds: Vec<Vec<u8>> = (0..3).map(|seed| noise(3000, 40 + seed)).collect();
    for (i, old) in olds.iter().enumerate() {
        write(&f.ws, &format!("f{i}"), old).await;
    }
    let before = mem_tree(&f.ws);
    f.rec.begin_turn(start("rewrite")).await.unwrap();
    for i in 0..3 {
        write(&f.rec, &format!("f{i}"), format!("new {i}").as_bytes()).await;
    }
    let after = mem_tree(&f.ws);
    let inflight = f.dir.path().join(".shiro/undo/inflight.jsonl");
    let mut bytes = std::fs::read(&inflight).unwrap();
    let at = (bytes.windows(olds[1].len()))
        .position(|window| window == olds[1].as_slice())
        .expect("the in-flight file holds the pre-image");
    bytes[at + 100] ^= 1;
    std::fs::write(&inflight, &bytes).unwrap();

    let err = f.rec.finish_turn().await.unwrap_err().to_string();
    assert!(
        err.contains("inflight.jsonl") && err.contains("do not match that hash"),
        "{err}"
    );
    assert_eq!(mem_tree(&f.ws), after, "the turn's writes stay");
    assert!(f.store.log().unwrap().is_empty());

    // Recovered as a turn cut short, without the damaged pre-image: the notice and the log
    // say the turn cannot be undone, and an undo names the path and changes nothing.
    drop(f.rec);
    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!(notices.join("\n"), @r#"
    ignored a damaged record in the undo store (inflight.jsonl, line 4: stored bytes do not match their hash)
    recovered turn #1 "rewrite", interrupted before it finished; it changed 3 paths, but cannot be undone: what f1 held before it is lost, its copy damaged before it could be stored (the log marks the turn)
    "#);
    let log = store.log().unwrap();
    assert!(log[0].recovered);
    assert_eq!(
        log[0].damage.as_deref(),
        Some("what f1 held before it is lost, its copy damaged before it could be stored")
    );
    let err = (store.undo(&f.ws, UndoOptions::default()).await).unwrap_err();
    assert!(
        matches!(&err, UndoError::Unrestorable { source, .. }
            if matches!(&**source, UndoError::Blob { path, .. } if path.as_str() == "f1")),
        "{err:?}"
    );
    assert_eq!(mem_tree(&f.ws), after);
    assert_ne!(after, before);
}

/// A checksummed record line of the store's files, as the store writes them.
fn record_line(json: &serde_json::Value) -> String {
    let json = json.to_string();
    format!("{} {json}\n", ContentHash::of(json.as_bytes()).to_hex())
}

#[tokio::test]
async fn the_in_flight_file_is_reused_and_an_earlier_turns_records_are_not_recovered() {
    let f = fixture(StoreOptions::default()).await;
    let inflight = f.store.dir().join("inflight.jsonl");
    f.rec.begin_turn(start("one")).await.unwrap();
    write(&f.rec, "a", b"a").await;
    f.rec.finish_turn().await.unwrap().unwrap();
    assert_eq!(
        std::fs::metadata(&inflight).unwrap().len(),
        0,
        "kept, emptied"
    );
    let after_one = mem_tree(&f.ws);

    // Turn 2 began, then the process died before its first capture, and the emptying of the
    // file was lost: turn 2's start is followed by turn 1's record of `a` (absent before).
    let start_two = serde_json::json!({"record": "start", "version": FORMAT_VERSION,
        "turn": {"id": 2, "time": 0, "summary": "two", "history_marker": 0, "session": null}});
    let path_of_one = serde_json::json!({"record": "path", "turn": 1, "path": "a",
        "before": {"kind": "absent"}});
    std::fs::write(
        &inflight,
        record_line(&start_two) + &record_line(&path_of_one),
    )
    .unwrap();
    drop(f.rec);

    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    assert_eq!(
        notices,
        ["turn #2 was interrupted before it changed anything; nothing to recover"]
    );
    assert_eq!(
        store.log().unwrap().len(),
        1,
        "no turn 2 that would remove `a`"
    );
    assert_eq!(mem_tree(&f.ws), after_one);
    assert_eq!(std::fs::metadata(&inflight).unwrap().len(), 0);
}

#[tokio::test]
async fn a_turn_cut_short_after_bash_keeps_what_bash_could_not_capture() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"before").await;
    f.rec.begin_turn(start("build")).await.unwrap();
    write(&f.rec, "a", b"tool").await;
    // Bash, run directly, changed `a` again and made `gen/out`.
    write(&f.ws, "a", b"bash").await;
    write(&f.ws, "gen/out", b"bash").await;
    f.rec
        .note_bash(BashCapture::Detect, &[p("gen/out"), p("gen"), p("a")])
        .await;
    // The process dies: the recorder is never finished.
    drop(f.rec);

    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!(notices.join("\n"), @r#"recovered turn #1 "build", interrupted before it finished; it changed 1 path and can be undone; bash changed 2 files that cannot be restored: gen, gen/out"#);
    let log = store.log().unwrap();
    insta::assert_snapshot!(log[0].to_string(), @r#"#1 "build" (session s1) [recovered after a crash]: M a (bash changed 2 files that cannot be restored: gen, gen/out)"#);
    let outcome = store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    insta::assert_snapshot!(outcome.to_string(), @r#"
    undid turn #1 "build" of session s1
      restored  a
    note: bash changed 2 files that cannot be restored: gen, gen/out
    "#);
    // `a` was captured before bash changed it: undo restored it, bash's change too.
    let tree = mem_tree(&f.ws);
    assert_eq!(read(&tree, "a"), b"before");
    assert_eq!(read(&tree, "gen/out"), b"bash");
}

#[tokio::test]
async fn in_flight_bash_records_are_recovered_with_their_capture() {
    let f = fixture(StoreOptions::default()).await;
    let inflight = f.store.dir().join("inflight.jsonl");
    drop(f.rec);
    let start = |version: u32, id: u64| {
        serde_json::json!({"record": "start", "version": version, "turn": {"id": id,
            "time": 0, "summary": "crashed", "history_marker": 0, "session": null}})
    };

    // Format 6: a turn whose only change is one bash made, which cannot be restored.
    write(&f.ws, "made-by-bash", b"x").await;
    let detect = serde_json::json!({"record": "bash", "turn": 1, "capture": "detect",
        "unrestorable": ["made-by-bash"]});
    std::fs::write(
        &inflight,
        record_line(&start(FORMAT_VERSION, 1)) + &record_line(&detect),
    )
    .unwrap();
    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    insta::assert_snapshot!(notices.join("\n"), @r#"recovered turn #1 "crashed", interrupted before it finished; bash changed 1 file that cannot be restored: made-by-bash"#);
    let turn = &store.log().unwrap()[0];
    assert_eq!(turn.bash_unrestorable, [p("made-by-bash")]);
    assert!(turn.ran_bash && !turn.bash_uncaptured);
    drop(store);

    // Format 5 wrote no capture: bash was never captured then.
    let path = serde_json::json!({"record": "path", "turn": 2, "path": "a",
        "before": {"kind": "absent"}});
    write(&f.ws, "a", b"a").await;
    let bash = serde_json::json!({"record": "bash", "turn": 2});
    std::fs::write(
        &inflight,
        record_line(&start(5, 2)) + &record_line(&path) + &record_line(&bash),
    )
    .unwrap();
    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    let turn = &store.log().unwrap()[0];
    assert_eq!(turn.id, TurnId(2));
    assert!(turn.ran_bash && turn.bash_uncaptured);
    assert!(turn.bash_unrestorable.is_empty());
}

#[tokio::test]
async fn paths_captured_ahead_are_recorded_only_if_the_call_changes_them() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"a").await;
    write(&f.ws, "b", b"b").await;
    let before = mem_tree(&f.ws);
    // Outside a turn, nothing is captured (and nothing fails).
    f.rec.capture_ahead(&[p("a")]).await.unwrap();

    f.rec.begin_turn(start("ahead")).await.unwrap();
    f.rec
        .capture_ahead(&[p("a"), p("b"), p("new/c"), p("a")])
        .await
        .unwrap();
    write(&f.rec, "a", b"a2").await;
    write(&f.rec, "new/c", b"c").await;
    f.rec.finish_turn().await.unwrap().unwrap();

    let turn = &f.store.log().unwrap()[0];
    let changed: Vec<String> = turn.changes.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!("captured_ahead", changed.join("\n"));
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
}

/// Checks, at a path's first mutation in the turn, that its pre-image is already in the
/// store (its in-flight record, and its bytes when it is a file). Returns how many it checked.
fn write_ahead_probe(
    ws: MemMutator,
    store_dir: std::path::PathBuf,
) -> (Hooked<MemMutator>, Arc<AtomicUsize>) {
    let checked = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&checked);
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let tree = ws.clone();
    let probe = Hooked::new(ws, move |m| {
        let paths = match m {
            Mutation::Rename { from, to } => vec![*from, *to],
            other => vec![other.path()],
        };
        for path in paths {
            if !seen.lock().unwrap().insert(path.clone()) {
                continue;
            }
            let inflight = std::fs::read(store_dir.join("inflight.jsonl")).unwrap();
            let has = |needle: &[u8]| inflight.windows(needle.len()).any(|w| w == needle);
            assert!(
                has(format!("\"path\":\"{path}\"").as_bytes()),
                "no in-flight record for {path} before its mutation"
            );
            if let Some((Stat::File { .. }, Some(bytes))) = tree.snapshot().get(path.as_str()) {
                // The bytes are in a blob already, or carried by the in-flight record.
                let hash = ContentHash::of(bytes);
                assert!(
                    store_dir.join("blobs").join(hash.to_hex()).exists()
                        || (has(format!("\"bytes\":{}", bytes.len()).as_bytes()) && has(bytes)),
                    "no stored bytes for {path} before its mutation"
                );
            }
            count.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    (probe, checked)
}

#[tokio::test]
async fn pre_images_are_stored_before_the_mutation_they_protect() {
    let dir = fast_tempdir();
    let ws = MemMutator::new();
    write(&ws, "a", b"a").await;
    write(&ws, "d/b", b"b").await;
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, StoreOptions::default())
        .await
        .unwrap();
    let (probe, checked) = write_ahead_probe(ws.clone(), store.dir().to_path_buf());
    let rec = store.recorder(probe);
    rec.begin_turn(start("probe")).await.unwrap();
    write(&rec, "a", b"a2").await;
    write(&rec, "x/y/z", b"z").await;
    rec.rename(&p("d/b"), &p("a")).await.unwrap();
    rec.set_mode(&p("d"), 0o700).await.unwrap();
    rec.symlink("t", &p("l")).await.unwrap();
    rec.remove_file(&p("a")).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    assert_eq!(
        checked.load(Ordering::SeqCst),
        7,
        "a, x, x/y, x/y/z, d/b, d, l"
    );
}

/// Fails every mutating call from the `fail_at`-th on, as a crash mid-restore would stop it.
fn failing_after(inner: MemMutator, fail_at: usize) -> Hooked<MemMutator> {
    let calls = AtomicUsize::new(0);
    Hooked::new(inner, move |m| {
        if calls.fetch_add(1, Ordering::SeqCst) + 1 >= fail_at {
            return Err(MutatorError::Interrupted(format!(
                "simulated crash before touching {}",
                m.path()
            )));
        }
        Ok(())
    })
}

/// A restore whose writes start failing part-way (a full disk) is rolled back to where it
/// began; when the rollback fails too (every write fails here), the next open finishes the
/// rollback. Either way the workspace ends as the restore found it, the turn stays undoable
/// and marked, and undo and redo then work.
#[tokio::test]
async fn a_restore_that_fails_at_any_step_is_rolled_back() {
    let mut steps = 0;
    for fail_at in 1.. {
        let f = fixture(StoreOptions::default()).await;
        write(&f.ws, "a", b"a").await;
        write(&f.ws, "swap", b"file").await;
        let before = mem_tree(&f.ws);
        f.rec.begin_turn(start("many steps")).await.unwrap();
        write(&f.rec, "a", b"a2").await;
        write(&f.rec, "n/m/x", b"x").await;
        f.rec.remove_file(&p("swap")).await.unwrap();
        write(&f.rec, "swap/inner", b"i").await;
        f.rec.finish_turn().await.unwrap().unwrap();
        let after = mem_tree(&f.ws);

        let failing = failing_after(f.ws.clone(), fail_at);
        let Err(err) = f.store.undo(&failing, UndoOptions::default()).await else {
            // The undo needed fewer steps than this: every step has been interrupted once.
            assert_eq!(mem_tree(&f.ws), before);
            break;
        };
        steps += 1;
        match &err {
            // Nothing was changed yet: the rollback had nothing to write.
            UndoError::RolledBack { .. } => {
                assert_eq!(mem_tree(&f.ws), after, "fail_at {fail_at}");
                assert_eq!(last_record(f.store.dir()), "stopped");
            }
            UndoError::RestoreStuck { .. } => {
                if steps == 2 {
                    insta::assert_snapshot!("restore_stuck", err.to_string());
                }
                assert_eq!(last_record(f.store.dir()), "rollback");
            }
            other => panic!("fail_at {fail_at}: {other}"),
        }

        let (store, notices) = reopen(f.dir.path(), &f.ws).await;
        if steps == 2 {
            insta::assert_snapshot!("rolled_back_restore", notices.join("\n"));
        }
        assert_eq!(mem_tree(&f.ws), after, "fail_at {fail_at}");
        let log = store.log().unwrap();
        assert!(log.len() == 1 && store.redo_log().unwrap().is_empty());
        assert!(log[0].damage.is_some(), "the turn is marked: {log:?}");
        assert_eq!(last_record(store.dir()), "stopped");
        store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), before, "fail_at {fail_at}");
        assert!(store.redo_log().unwrap()[0].damage.is_none(), "cleared");
        store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&f.ws), after, "fail_at {fail_at}");
    }
    assert!(
        steps >= 6,
        "the undo takes at least six mutating steps, each interrupted once ({steps})"
    );
}

/// The kind of the last record of the store's log (`begin`, `done`, `turn`, …).
fn last_record(store_dir: &Path) -> String {
    let text = std::fs::read_to_string(store_dir.join("log.jsonl")).unwrap();
    let line = text.lines().last().unwrap();
    let (_, json) = line.split_once(' ').unwrap();
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["record"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_restore_journaled_by_a_format_3_store_is_completed() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"before").await;
    f.rec.begin_turn(start("old store")).await.unwrap();
    write(&f.rec, "a", b"after").await;
    f.rec.finish_turn().await.unwrap().unwrap();
    // What a format-3 shiro left when it crashed mid-undo: the journal, holding the turn with
    // the images to restore (for an undo of an unchanged file, the turn as logged).
    let log = std::fs::read_to_string(f.store.dir().join("log.jsonl")).unwrap();
    let turn_line = log.lines().last().unwrap().split_once(' ').unwrap().1;
    let turn: serde_json::Value = serde_json::from_str(turn_line).unwrap();
    let mut turn = turn["turn"].clone();
    turn["ran_bash"] = true.into();
    let json = serde_json::json!({"version": 3, "direction": "undo", "turn": turn}).to_string();
    let line = format!("{} {json}\n", ContentHash::of(json.as_bytes()).to_hex());
    std::fs::write(f.store.dir().join("journal.jsonl"), line).unwrap();
    drop(f.rec);

    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    assert_eq!(
        notices,
        ["completed the interrupted undo of turn #1; the workspace is as it was before the turn"]
    );
    assert_eq!(mem_tree(&f.ws)["a"].1.as_deref(), Some(&b"before"[..]));
    assert!(store.log().unwrap().is_empty());
    let redo = store.redo_log().unwrap();
    assert_eq!(redo.len(), 1);
    assert!(redo[0].bash_uncaptured, "format 3 never captured bash");
    assert!(!store.dir().join("journal.jsonl").exists());
}

#[tokio::test]
async fn the_store_lives_in_its_state_directory_and_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = fast_tempdir();
    let ws = MemMutator::new();
    let state = shiro_undo::StateDir::of_workspace(home.path(), Path::new("/work/shop"));
    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(store.dir(), state.undo_dir());
    assert!(store.dir().starts_with(home.path().join("workspaces")));
    for dir in [state.dir(), store.dir()] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    assert_eq!(
        std::fs::read_to_string(state.dir().join("workspace")).unwrap(),
        "/work/shop\n"
    );
}

/// A text of `lines` lines where line `changed` (if any) says which version it is.
fn version_of(lines: usize, changed: &[usize]) -> Vec<u8> {
    (0..lines)
        .map(|i| {
            if changed.contains(&i) {
                format!("line {i} was edited by a turn\n")
            } else {
                format!("line {i}: the original words of a long source file\n")
            }
        })
        .collect::<String>()
        .into_bytes()
}

fn blob_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(".shiro/undo/blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Each version is a delta against the one before; the first of a chain is whole, and a
/// chain 16 deltas deep starts again with a whole version.
#[tokio::test]
async fn a_big_file_is_stored_as_chains_of_deltas() {
    let f = big_file_fixture().await;
    let lines = 2000;
    let mut versions = vec![version_of(lines, &[])];
    write(&f.ws, "big.txt", &versions[0]).await;
    for turn_number in 0..20 {
        let changed: Vec<usize> = (0..=turn_number).map(|t| t * 97).collect();
        versions.push(version_of(lines, &changed));
        let summary = format!("edit {turn_number}");
        turn(&f, &summary, &[("big.txt", versions.last().unwrap())])
            .await
            .unwrap();
    }
    let names = blob_names(f.dir.path());
    let deltas = names.iter().filter(|n| n.ends_with(".delta")).count();
    assert_eq!(
        (deltas, names.len()),
        (19, 21),
        "21 versions: the first and the 18th whole, 19 deltas: {names:?}"
    );
    let size = versions[0].len() as u64;
    assert!(
        f.store.store_bytes().unwrap() < 2 * size + 20 * 200,
        "{} bytes stored for 20 versions of {size} bytes",
        f.store.store_bytes().unwrap()
    );

    for k in (0..20).rev() {
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(
            read(&mem_tree(&f.ws), "big.txt"),
            versions[k],
            "undo to {k}"
        );
    }
    for (k, version) in versions.iter().enumerate().skip(1) {
        f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(&read(&mem_tree(&f.ws), "big.txt"), version, "redo to {k}");
    }
    // A store reopened by the next command reads the same chain.
    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    assert_eq!(notices, Vec::<String>::new());
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "big.txt"), versions[19]);
}

#[tokio::test]
async fn dropping_old_turns_keeps_the_bases_newer_ones_need() {
    let f = fixture(StoreOptions {
        big_file_bytes: 1024,
        depth: 3,
        ..StoreOptions::default()
    })
    .await;
    let mut versions = vec![version_of(500, &[])];
    write(&f.ws, "big.txt", &versions[0]).await;
    write(&f.ws, "other.txt", b"small").await;
    for t in 0..8 {
        versions.push(version_of(500, &[t * 11]));
        turn(&f, "edit", &[("big.txt", versions.last().unwrap())])
            .await
            .unwrap();
    }
    // An unrelated turn after an undo clears the redo stack, dropping the newest version's
    // turn while older deltas still lean on its blob.
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    turn(&f, "other", &[("other.txt", b"changed")])
        .await
        .unwrap();
    assert_eq!(f.store.log().unwrap().len(), 3);
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    for k in [6, 5] {
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(read(&mem_tree(&f.ws), "big.txt"), versions[k]);
    }
    assert!(matches!(
        f.store.undo(&f.ws, UndoOptions::default()).await,
        Err(UndoError::NothingToUndo)
    ));
}

#[tokio::test]
async fn a_delta_whose_base_is_lost_refuses_before_changing_anything() {
    let f = big_file_fixture().await;
    let first = version_of(500, &[]);
    let second = version_of(500, &[7]);
    let third = version_of(500, &[7, 300]);
    write(&f.ws, "big.txt", &first).await;
    turn(&f, "edit", &[("big.txt", &second)]).await.unwrap();
    turn(&f, "edit again", &[("big.txt", &third)])
        .await
        .unwrap();
    // The second version, the pre-image of the newest turn, is a delta against the first.
    let blobs = f.dir.path().join(".shiro/undo/blobs");
    let second_hex = ContentHash::of(&second).to_hex();
    assert!(blobs.join(format!("{second_hex}.delta")).exists());
    std::fs::remove_file(blobs.join(ContentHash::of(&first).to_hex())).unwrap();
    let err = f
        .store
        .undo(&f.ws, UndoOptions::default())
        .await
        .unwrap_err();
    insta::assert_snapshot!("lost_delta_base", err.to_string());
    assert_eq!(
        read(&mem_tree(&f.ws), "big.txt"),
        third,
        "nothing was changed"
    );
}

#[tokio::test]
async fn a_damaged_raw_blob_refuses_before_changing_anything() {
    let f = big_file_fixture().await;
    let first = version_of(500, &[]);
    let second = version_of(500, &[42]);
    write(&f.ws, "big.txt", &first).await;
    turn(&f, "edit", &[("big.txt", &second)]).await.unwrap();
    // The pre-image starts the file's chain: stored raw (a zero byte, then the bytes), and
    // copied into place a piece at a time. One flipped bit is caught before any write.
    let blob = (f.dir.path().join(".shiro/undo/blobs")).join(ContentHash::of(&first).to_hex());
    let mut stored = std::fs::read(&blob).unwrap();
    assert_eq!(stored[0], 0, "stored raw");
    let middle = stored.len() / 2;
    stored[middle] ^= 1;
    std::fs::write(&blob, &stored).unwrap();
    let err = f
        .store
        .undo(&f.ws, UndoOptions::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("blob content does not match its hash"),
        "{err}"
    );
    assert_eq!(
        read(&mem_tree(&f.ws), "big.txt"),
        second,
        "nothing was changed"
    );
}

/// Blobs are flushed once per batch, after their renames: a power cut can leave one named but
/// empty. Recovery must not trust it, or the turn it finishes could never be undone.
#[tokio::test]
async fn recovery_rewrites_a_blob_a_power_cut_left_empty() {
    let f = fixture(StoreOptions::default()).await;
    write(&f.ws, "a", b"the bytes before the turn").await;
    let before = mem_tree(&f.ws);
    f.rec.begin_turn(start("interrupted")).await.unwrap();
    write(&f.rec, "a", b"after").await;
    drop(f.rec);
    // As if a first attempt to finish had renamed the blob into place, then lost its bytes.
    let blob = f
        .dir
        .path()
        .join(".shiro/undo/blobs")
        .join(ContentHash::of(b"the bytes before the turn").to_hex());
    std::fs::write(&blob, b"").unwrap();

    let (store, _) = reopen(f.dir.path(), &f.ws).await;
    // The damaged blob was not trusted: the bytes are in the recovered turn's pack.
    assert!(std::fs::symlink_metadata(&blob).is_err());
    assert_eq!(blob_files(f.dir.path(), ".pack"), ["1-0.pack"]);
    store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(mem_tree(&f.ws), before);
}

/// A store deleted on purpose, while a process has it open or between two processes: shiro
/// says the history is gone, once, and a new one begins, in which turns undo as usual.
#[tokio::test]
async fn a_deleted_store_is_named_and_a_new_history_begins() {
    let f = fixture(StoreOptions::default()).await;
    turn(&f, "first", &[("a", b"1")]).await.unwrap();
    std::fs::remove_dir_all(f.store.dir()).unwrap();

    // The process that had it open.
    assert!(f.store.log().unwrap().is_empty());
    let said: Vec<String> = (f.store.take_notices().iter())
        .map(ToString::to_string)
        .collect();
    let shown = said
        .join("\n")
        .replace(&f.dir.path().display().to_string(), "[dir]");
    insta::assert_snapshot!(shown, @"the undo history in [dir]/.shiro/undo was deleted, so earlier turns can no longer be undone; a new history begins with the next turn");
    turn(&f, "second", &[("a", b"2")]).await.unwrap();
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(read(&mem_tree(&f.ws), "a"), b"1");

    // The next process, after a deletion between the two.
    std::fs::remove_dir_all(f.store.dir()).unwrap();
    let (store, notices) = reopen(f.dir.path(), &f.ws).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("was deleted"), "{notices:?}");
    assert!(store.log().unwrap().is_empty());
    let (_, notices) = reopen(f.dir.path(), &f.ws).await;
    assert!(notices.is_empty(), "said once: {notices:?}");
}

/// A directory removed whole through the recorder (`Mutator::remove_tree`, as a bash commit
/// removes what `rm -rf` took) is moved out with one rename, every entry of it recorded first,
/// and its undo puts back each file, link, directory and mode exactly; redo takes it again.
#[tokio::test]
async fn a_tree_removed_whole_is_recorded_and_undone_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let aside = tempfile::tempdir_in(dir.path()).unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let ws = shiro_tools::FsMutator::new(&root).unwrap();
    for d in ["d", "d/b", "d/e"] {
        ws.create_dir(&p(d)).await.unwrap();
    }
    ws.write(&p("d/a"), b"a\n", Some(0o600)).await.unwrap();
    ws.write(&p("d/b/c"), &noise(100_000, 7), None)
        .await
        .unwrap();
    ws.symlink("../a", &p("d/b/link")).await.unwrap();
    ws.set_mode(&p("d/b"), 0o750).await.unwrap();
    ws.write(&p("keep"), b"k", None).await.unwrap();
    let before = common::disk_tree(&root);

    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    let store = UndoStore::open(&state, StoreOptions::default())
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    rec.begin_turn(start("rm -rf d")).await.unwrap();
    let mut listed = Vec::new();
    let mut dirs = vec![p("d")];
    while let Some(d) = dirs.pop() {
        for entry in rec.read_dir(&d).await.unwrap() {
            if matches!(entry.stat, Stat::Dir { .. }) {
                dirs.push(entry.path.clone());
            }
            listed.push(entry);
        }
    }
    rec.remove_tree(&p("d"), &listed, &aside.path().join("0"))
        .await
        .unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    assert!(
        aside.path().join("0/b/c").is_file(),
        "the tree was not moved out whole"
    );
    let after = common::disk_tree(&root);
    assert_eq!(after.keys().collect::<Vec<_>>(), ["keep"]);

    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), before, "the undo is not exact");
    store.redo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), after);
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(common::disk_tree(&root), before);
}

/// A turn's paths are read only when a restore needs them. A turn whose record names a path
/// that is not a workspace path (its checksum sound: written by another build, or by hand)
/// stays in the log as it is: the turns after it are recorded, undone and redone, and an
/// undo of it is refused with the reason, changing nothing and removing none of its copies.
#[tokio::test]
async fn a_turn_whose_paths_cannot_be_read_is_refused_and_the_others_still_work() {
    let f = fixture(StoreOptions::default()).await;
    turn(&f, "first", &[("a.txt", b"1")]).await.unwrap();
    let path = f.store.dir().join("log.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let rewritten: String = (text.lines())
        .map(|line| {
            let (_, json) = line.split_once(' ').unwrap();
            let json = json.replace(r#""path":"a.txt""#, r#""path":"../a.txt""#);
            format!("{} {json}\n", blake3::hash(json.as_bytes()).to_hex())
        })
        .collect();
    assert_ne!(rewritten, text);
    std::fs::write(&path, &rewritten).unwrap();
    let blobs = || {
        let mut names: Vec<String> = std::fs::read_dir(f.store.dir().join("blobs"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let kept = blobs();

    turn(&f, "second", &[("b.txt", b"2")]).await.unwrap();
    let undone = f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(undone.turn.summary, "second");
    assert!(f.ws.read(&p("b.txt")).await.is_err());
    f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
    assert_eq!(f.ws.read(&p("b.txt")).await.unwrap(), b"2");
    f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();

    let err = f
        .store
        .undo(&f.ws, UndoOptions::default())
        .await
        .unwrap_err();
    insta::assert_snapshot!(err, @"the undo log's record of turn #1 cannot be used: invalid path \"../a.txt\": path \"../a.txt\" uses `..`; give the path relative to the workspace root without `..`");
    assert_eq!(f.ws.read(&p("a.txt")).await.unwrap(), b"1");
    let log = f.store.log().unwrap();
    assert_eq!(log.len(), 1);
    insta::assert_snapshot!(log[0].damage.clone().unwrap_or_default(), @"the undo log's record of turn #1 cannot be used: invalid path \"../a.txt\": path \"../a.txt\" uses `..`; give the path relative to the workspace root without `..`");
    for name in kept {
        assert!(blobs().contains(&name), "{name} was removed");
    }
    // The record is written back as it was read, the bad path included.
    let now = std::fs::read_to_string(&path).unwrap();
    assert!(now.contains(r#""path":"../a.txt""#), "{now}");
}

/// A workspace on disk (`ws` in the returned directory) and its state directory beside it.
fn on_disk() -> (
    tempfile::TempDir,
    shiro_tools::FsMutator,
    shiro_undo::StateDir,
) {
    let dir = fast_tempdir();
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let ws = shiro_tools::FsMutator::new(&root).unwrap();
    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    (dir, ws, state)
}

/// Under the lock a store opened for one operation kept, its operation does not look for a
/// crash's leftovers again, but a restore that opening left stuck still stops it: the undo is
/// refused, as it is under a lock taken anew, and nothing in the workspace changes.
#[tokio::test]
async fn a_store_opened_for_one_operation_still_refuses_to_go_past_a_stuck_restore() {
    let (dir, ws, state) = on_disk();
    let root = dir.path().join("ws");
    let store = UndoStore::open(&state, StoreOptions::default())
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    rec.begin_turn(start("write a and b")).await.unwrap();
    write(&rec, "a", b"a").await;
    write(&rec, "b", b"b").await;
    rec.finish_turn().await.unwrap().unwrap();
    // Every write of the undo fails from the second on, its rollback's too: it is stuck.
    let calls = AtomicUsize::new(0);
    let failing = Hooked::new(ws.clone(), move |m| {
        if calls.fetch_add(1, Ordering::SeqCst) >= 1 {
            return Err(MutatorError::Interrupted(format!(
                "no write to {}",
                m.path()
            )));
        }
        Ok(())
    });
    let err = store
        .undo(&failing, UndoOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, UndoError::RestoreStuck { .. }), "{err}");
    // Without the copies, opening can neither complete it nor roll it back.
    for entry in std::fs::read_dir(store.dir().join("blobs")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    drop(store);
    let stuck_tree = (
        std::fs::read(root.join("a")).ok(),
        std::fs::read(root.join("b")).ok(),
    );

    for fresh_lock in [false, true] {
        let store = UndoStore::open_for_one(&state, StoreOptions::default())
            .await
            .unwrap();
        assert!(
            (store.take_notices().iter())
                .any(|n| matches!(n, shiro_undo::Notice::StuckRestore { .. })),
            "opening reports the stuck restore"
        );
        if fresh_lock {
            // Something that does not change the log, then the lock is taken anew.
            drop(store.log().unwrap());
        }
        let err = store.undo(&ws, UndoOptions::default()).await.unwrap_err();
        assert!(matches!(err, UndoError::RestoreStuck { .. }), "{err}");
        assert_eq!(
            (
                std::fs::read(root.join("a")).ok(),
                std::fs::read(root.join("b")).ok()
            ),
            stuck_tree
        );
    }
}

/// A store opened for one operation keeps the lock it opened with until that operation takes
/// it over: no other process gets in between, and once the operation is done, others do.
/// Should the store be deleted in between, the lock kept (on a file of the store that is gone)
/// is let go, and the operation begins a new history, as it would have without it.
#[tokio::test]
async fn a_store_opened_for_one_operation_keeps_its_lock_for_it() {
    let (dir, ws, state) = on_disk();
    let root = dir.path().join("ws");
    let short = StoreOptions {
        lock_timeout: Duration::from_millis(100),
        ..StoreOptions::default()
    };
    {
        let store = UndoStore::open(&state, short.clone()).await.unwrap();
        let rec = store.recorder(ws.clone());
        rec.begin_turn(start("write a")).await.unwrap();
        write(&rec, "a", b"new").await;
        rec.finish_turn().await.unwrap().unwrap();
    }

    let store = UndoStore::open_for_one(&state, short.clone())
        .await
        .unwrap();
    assert!(matches!(
        UndoStore::open(&state, short.clone()).await,
        Err(UndoError::Locked { .. })
    ));
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert!(!root.join("a").exists());
    // The undo took the lock over and let it go when done.
    let other = UndoStore::open(&state, short.clone()).await.unwrap();
    other.redo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(std::fs::read(root.join("a")).unwrap(), b"new");
    drop(other);

    let store = UndoStore::open_for_one(&state, short.clone())
        .await
        .unwrap();
    std::fs::remove_dir_all(store.dir()).unwrap();
    assert!(matches!(
        store.undo(&ws, UndoOptions::default()).await,
        Err(UndoError::NothingToUndo)
    ));
    assert!(
        (store.take_notices().iter()).any(|n| matches!(n, shiro_undo::Notice::HistoryGone { .. })),
        "the history's loss is not reported"
    );
    assert_eq!(std::fs::read(root.join("a")).unwrap(), b"new");
    // Nothing holds the new store's lock.
    UndoStore::open(&state, short).await.unwrap();
}
