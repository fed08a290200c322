//! A bash commit a crash cut short, finished by the recovery of the next process: it never
//! overwrites what was changed after the crash, and the turn it records leaves that out.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::fs;

use common::p;
use shiro_tools::{FsMutator, Mutator as _};
use shiro_undo::{Recording, StoreOptions, TurnStart, UndoOptions, UndoStore};

/// The layer a bash commit left in `layers`, marked as committing in this boot, holding the
/// command's versions of `files`.
fn committing_layer(layers: &std::path::Path, files: &[(&str, &str)]) -> std::path::PathBuf {
    let layer = layers.join("00000000000000ab");
    fs::create_dir_all(layer.join("up")).unwrap();
    fs::create_dir_all(layer.join("work")).unwrap();
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    fs::write(layer.join("commit"), boot.trim()).unwrap();
    for (name, text) in files {
        fs::write(layer.join("up").join(name), text).unwrap();
    }
    layer.join("up")
}

#[tokio::test]
async fn recovery_keeps_what_you_changed_after_the_crash_and_the_turn_leaves_it_out() {
    if !std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
        eprintln!("skipped: no /proc/sys/kernel/random/boot_id to mark a layer with");
        return;
    }
    let dir = common::fast_tempdir();
    let root = dir.path().join("ws");
    fs::create_dir(&root).unwrap();
    let ws = FsMutator::new(&root).unwrap();
    for name in ["a.txt", "b.txt", "c.txt"] {
        fs::write(root.join(name), format!("{name} before\n")).unwrap();
    }
    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    let open = || UndoStore::open_with(&state, &ws, StoreOptions::default());
    {
        let store = open().await.unwrap();
        let rec: Recording<FsMutator> = store.recorder(ws.clone());
        let start = TurnStart {
            summary: "shiro tool bash sed -i s/before/after/ *.txt".to_owned(),
            ..TurnStart::default()
        };
        rec.begin_turn(start).await.unwrap();
        rec.prepare(&[p("a.txt"), p("b.txt"), p("c.txt")], &[])
            .await
            .unwrap();
        let up = committing_layer(
            &state.layers_dir(),
            &[
                ("a.txt", "a.txt after\n"),
                ("b.txt", "b.txt after\n"),
                ("c.txt", "c.txt after\n"),
            ],
        );
        // The commit moved a.txt's new version in (through the recorder, which notes what
        // the move left), and the process died.
        rec.adopt(&up.join("a.txt"), &p("a.txt"), 0o644)
            .await
            .unwrap();
    }
    // You edit b.txt before any shiro runs again.
    fs::write(root.join("b.txt"), "b.txt, yours\n").unwrap();

    let store = open().await.unwrap();
    let notices: Vec<String> = store.take_notices().iter().map(|n| n.to_string()).collect();
    insta::assert_snapshot!(notices.join("\n"), @r#"
    finished applying the changes of a bash command that was interrupted while they were applied (2 steps were left); the turn that ran it can be undone; kept as it is, without the command's changes, because it is not what it was when its changes began to be applied (changed since, or never saved): b.txt (the turn leaves it out, so undoing it leaves it too)
    recovered turn #1 "shiro tool bash sed -i s/before/after/ *.txt", interrupted before it finished; it changed 2 paths and can be undone
    "#);
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        "a.txt after\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("b.txt")).unwrap(),
        "b.txt, yours\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("c.txt")).unwrap(),
        "c.txt after\n"
    );
    let log = store.log().unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    let paths: Vec<String> = log[0].changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(paths, ["M a.txt", "M c.txt"]);
    // Undoing the turn takes back what the command did, and leaves your edit.
    store.undo(&ws, UndoOptions::default()).await.unwrap();
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        "a.txt before\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("b.txt")).unwrap(),
        "b.txt, yours\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("c.txt")).unwrap(),
        "c.txt before\n"
    );
}
