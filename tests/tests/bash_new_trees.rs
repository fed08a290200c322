//! A directory that a bash command makes is moved into the workspace whole, with one rename,
//! when nothing in it needs more than a rename; otherwise it is made entry by entry, and so
//! is the part of it that holds what a move must not carry. Either way the turn is undone
//! and redone exactly.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use shiro_tools::capture::{BashRunner, Overlay};
use shiro_tools::tools::Bash;
use shiro_tools::{FsMutator, Hooked, Mutation, Tool};
use shiro_undo::{StoreOptions, TurnStart, UndoOptions, UndoStore};
use support::{Ws, overlay_refused, shiro_bin};

type Hook = dyn Fn(&Mutation<'_>) + Send + Sync;

/// Runs `script` through the overlay in a recorded turn, with `hook` called before each
/// mutation of the commit; returns the mutations (name and path, in order) and the tree
/// after it, having checked that the undo gives back the tree before and the redo the tree
/// after.
async fn commit(ws: &Ws, script: &str, hook: Box<Hook>) -> (Vec<String>, BTreeMap<String, String>) {
    let store = UndoStore::open(&ws.state(), StoreOptions::default())
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let hooked = Hooked::new(FsMutator::new(ws.path()).unwrap(), move |mutation| {
        log.lock()
            .unwrap()
            .push(format!("{} {}", mutation.name(), mutation.path()));
        hook(mutation);
        Ok(())
    });
    let recording = store.recorder(hooked);
    let start = ws.tree();
    recording.begin_turn(TurnStart::default()).await.unwrap();
    let runner: Arc<dyn BashRunner> = Arc::new(Overlay::new(shiro_bin(), ws.state().layers_dir()));
    let bash = Bash::new(runner);
    let args = serde_json::json!({ "command": script });
    let output = bash.call(&recording, args).await.unwrap();
    assert!(output.unrestorable.is_empty(), "{output:?}");
    recording.finish_turn().await.unwrap().unwrap();
    let end = ws.tree();
    let mutations = seen.lock().unwrap().clone();
    let workspace = FsMutator::new(ws.path()).unwrap();
    store
        .undo(&workspace, UndoOptions::default())
        .await
        .unwrap();
    assert_eq!(ws.tree(), start, "after the undo");
    store
        .redo(&workspace, UndoOptions::default())
        .await
        .unwrap();
    assert_eq!(ws.tree(), end, "after the redo");
    assert!(support::bash_layers(&ws.state().layers_dir()).is_empty());
    (mutations, end)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn tree(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    (entries.iter())
        .map(|(path, what)| ((*path).to_owned(), (*what).to_owned()))
        .collect()
}

/// What the first two tests' command makes beside `gen`.
const BESIDE: &str = "printf changed > kept.txt";

/// A tree of directories, files and a link, with modes of their own.
const MAKE_GEN: &str = "mkdir -p gen/a/b && printf one > gen/a/b/f && printf top > gen/top \
    && ln -s top gen/link && chmod 751 gen && chmod 700 gen/a && chmod 755 gen/a/b \
    && chmod 640 gen/a/b/f && chmod 600 gen/top";

fn gen_tree() -> BTreeMap<String, String> {
    tree(&[
        ("gen", "dir 751"),
        ("gen/a", "dir 700"),
        ("gen/a/b", "dir 755"),
        ("gen/a/b/f", "file 640 \"one\""),
        ("gen/link", "link -> top"),
        ("gen/top", "file 600 \"top\""),
        ("kept.txt", "file 644 \"changed\""),
    ])
}

fn seeded() -> Ws {
    let ws = Ws::new();
    ws.write("kept.txt", "start\n");
    std::fs::set_permissions(
        ws.path().join("kept.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    ws
}

#[test]
fn a_new_directory_moves_in_whole_with_one_rename() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let script = format!("{MAKE_GEN} && {BESIDE}");
    let (mutations, end) = runtime().block_on(commit(&ws, &script, Box::new(|_| {})));
    assert_eq!(mutations, ["move tree in gen", "write kept.txt"]);
    assert_eq!(end, gen_tree());
}

#[test]
fn a_new_directory_is_made_entry_by_entry_when_its_path_is_taken_meanwhile() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let root = ws.path().to_owned();
    // Made by someone else between the command and its commit: the move is refused, and
    // the commit makes the rest of the tree inside it.
    let hook = move |mutation: &Mutation<'_>| {
        if let Mutation::MoveTreeIn(path) = mutation {
            std::fs::create_dir(root.join(path.as_str())).unwrap();
        }
    };
    let script = format!("{MAKE_GEN} && {BESIDE}");
    let (mutations, end) = runtime().block_on(commit(&ws, &script, Box::new(hook)));
    assert_eq!(
        mutations,
        [
            "move tree in gen",
            "create directory gen",
            "move tree in gen/a",
            "create directory gen/a",
            "move tree in gen/a/b",
            "create directory gen/a/b",
            "write gen/a/b/f",
            "chmod gen/a/b",
            "chmod gen/a",
            "symlink gen/link",
            "write gen/top",
            "chmod gen",
            "write kept.txt",
        ]
    );
    assert_eq!(end, gen_tree());
}

#[test]
fn what_a_move_must_not_carry_keeps_its_directories_entry_by_entry() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    // `pipe` holds a named pipe (never carried over), `linked` a file with two names,
    // `deep` a nested repository's `.git` with a hook (not inert, so not carried over: see
    // docs/undo.md, "Bash"), and `sub` nothing of the kind.
    let script = "mkdir -p gen/sub gen/pipe gen/linked gen/deep/.git/hooks \
        && printf s > gen/sub/s && mkfifo gen/pipe/p && printf h > gen/linked/h1 \
        && ln gen/linked/h1 gen/linked/h2 && printf x > gen/deep/.git/hooks/pre-commit \
        && chmod 755 gen gen/sub gen/pipe gen/linked gen/deep && chmod 644 gen/sub/s gen/linked/h1";
    let (mutations, end) = runtime().block_on(commit(&ws, script, Box::new(|_| {})));
    assert_eq!(
        mutations,
        [
            "create directory gen",
            "create directory gen/deep",
            "chmod gen/deep",
            "create directory gen/linked",
            "write gen/linked/h1",
            "write gen/linked/h2",
            "chmod gen/linked",
            "create directory gen/pipe",
            "chmod gen/pipe",
            "move tree in gen/sub",
            "chmod gen",
        ]
    );
    assert_eq!(
        end,
        tree(&[
            ("gen", "dir 755"),
            ("gen/deep", "dir 755"),
            ("gen/linked", "dir 755"),
            ("gen/linked/h1", "file 644 \"h\""),
            ("gen/linked/h2", "file 644 \"h\""),
            ("gen/pipe", "dir 755"),
            ("gen/sub", "dir 755"),
            ("gen/sub/s", "file 644 \"s\""),
            ("kept.txt", "file 644 \"start\\n\""),
        ])
    );
}

/// A directory made where the workspace had a file is marked by the overlay (opaque, since
/// it replaced the file's whiteout): the mark must not reach the workspace, so it is made
/// entry by entry.
#[test]
fn a_directory_the_overlay_marked_is_made_entry_by_entry() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let script = "rm kept.txt && mkdir kept.txt && printf in > kept.txt/in \
        && chmod 755 kept.txt && chmod 644 kept.txt/in";
    let (mutations, end) = runtime().block_on(commit(&ws, script, Box::new(|_| {})));
    assert_eq!(
        mutations,
        [
            "remove kept.txt",
            "create directory kept.txt",
            "write kept.txt/in",
            "chmod kept.txt",
        ]
    );
    assert_eq!(
        end,
        tree(&[("kept.txt", "dir 755"), ("kept.txt/in", "file 644 \"in\"")])
    );
}
