//! What someone else changes at a turn's paths while the turn runs, or after its process
//! died, is theirs: the turn leaves it out (it names it), so that neither its undo nor its
//! redo touches it. On a real disk, where the turn tells the two apart by the stamps
//! (inode, length, mode, modification time) of what its own changes left.

#![allow(clippy::unwrap_used)]

use std::fs;

use crate::common;

use common::p;
use shiro_tools::{FsMutator, Mutator as _};
use shiro_undo::{Recording, StoreOptions, TurnStart, UndoOptions, UndoStore};

/// A workspace on disk holding `files`, and its state directory.
fn workspace(files: &[(&str, &str)]) -> (tempfile::TempDir, FsMutator, shiro_undo::StateDir) {
    let dir = common::fast_tempdir();
    let root = dir.path().join("ws");
    fs::create_dir(&root).unwrap();
    for (name, text) in files {
        fs::write(root.join(name), text).unwrap();
    }
    let ws = FsMutator::new(&root).unwrap();
    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    (dir, ws, state)
}

fn start() -> TurnStart {
    TurnStart {
        summary: "edit a and b".to_owned(),
        ..TurnStart::default()
    }
}

fn text(ws: &FsMutator, name: &str) -> String {
    fs::read_to_string(ws.root().join(name)).unwrap()
}

#[tokio::test]
async fn your_edit_between_two_calls_of_a_turn_stays_out_of_it() {
    let (_dir, ws, state) = workspace(&[("a.txt", "a before\n"), ("b.txt", "b before\n")]);
    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    let rec: Recording<FsMutator> = store.recorder(ws.clone());
    rec.begin_turn(start()).await.unwrap();
    rec.write(&p("a.txt"), b"a, the turn's\n", None)
        .await
        .unwrap();
    // Between two tool calls, you edit what the first one wrote.
    fs::write(ws.root().join("a.txt"), "a, the turn's, and then yours\n").unwrap();
    rec.write(&p("b.txt"), b"b, the turn's\n", None)
        .await
        .unwrap();
    rec.finish_turn().await.unwrap().unwrap();

    let log = store.log().unwrap();
    assert_eq!(log[0].changed_since, [p("a.txt")]);
    insta::assert_snapshot!(log[0].to_string(), @r#"#1 "edit a and b": M b.txt (kept 1 file as changed after it: a.txt)"#);
    let undone = store.undo(&ws, UndoOptions::default()).await.unwrap();
    insta::assert_snapshot!(undone.to_string(), @r#"
    undid turn #1 "edit a and b"
      restored  b.txt
    note: undo does not touch 1 file changed (by you or another program) after this turn changed them: a.txt
    "#);
    assert_eq!(text(&ws, "a.txt"), "a, the turn's, and then yours\n");
    assert_eq!(text(&ws, "b.txt"), "b before\n");
    store.redo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(text(&ws, "a.txt"), "a, the turn's, and then yours\n");
    assert_eq!(text(&ws, "b.txt"), "b, the turn's\n");
}

#[tokio::test]
async fn a_turn_whose_every_change_you_changed_again_is_kept_to_say_so() {
    let (_dir, ws, state) = workspace(&[("a.txt", "a before\n")]);
    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    let rec: Recording<FsMutator> = store.recorder(ws.clone());
    rec.begin_turn(start()).await.unwrap();
    rec.remove_file(&p("a.txt")).await.unwrap();
    // You put it back, other than it was.
    fs::write(ws.root().join("a.txt"), "a, yours\n").unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    let log = store.log().unwrap();
    assert_eq!(log[0].changed_since, [p("a.txt")]);
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(text(&ws, "a.txt"), "a, yours\n");
}

#[tokio::test]
async fn after_a_crash_what_you_changed_since_is_kept_and_the_rest_undone() {
    let (_dir, ws, state) = workspace(&[
        ("a.txt", "a before\n"),
        ("b.txt", "b before\n"),
        ("c.txt", "c before\n"),
    ]);
    {
        let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
            .await
            .unwrap();
        let rec: Recording<FsMutator> = store.recorder(ws.clone());
        rec.begin_turn(start()).await.unwrap();
        rec.write(&p("a.txt"), b"a, the turn's\n", None)
            .await
            .unwrap();
        rec.write(&p("b.txt"), b"b, the turn's\n", None)
            .await
            .unwrap();
        // The tool was about to change c.txt when its process was killed.
        rec.capture_ahead(&[p("c.txt")]).await.unwrap();
    }
    // After the crash, you edit a.txt and c.txt.
    fs::write(ws.root().join("a.txt"), "a, the turn's, and then yours\n").unwrap();
    fs::write(ws.root().join("c.txt"), "c, yours\n").unwrap();

    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    let notices: Vec<String> = store.take_notices().iter().map(|n| n.to_string()).collect();
    insta::assert_snapshot!(notices.join("\n"), @r#"recovered turn #1 "edit a and b", interrupted before it finished; it changed 1 path and can be undone; kept as they are, out of the turn, since they are not what it left (changed after it stopped, or its change was cut short): a.txt, c.txt"#);
    let log = store.log().unwrap();
    assert_eq!(log[0].changed_since, [p("a.txt"), p("c.txt")]);
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(text(&ws, "a.txt"), "a, the turn's, and then yours\n");
    assert_eq!(text(&ws, "b.txt"), "b before\n");
    assert_eq!(text(&ws, "c.txt"), "c, yours\n");
}
