//! Stores written by earlier code still open, undo and redo exactly: the format-6 code (before
//! turns were packed), in `tests/fixtures/format6-store/`, the format-10 code (a pack per
//! turn, its copies zlib-compressed), in `tests/fixtures/format10-store/`, and the format-11
//! code (LZ4), in `tests/fixtures/format11-store/`, which the next format change must keep
//! reading. Each is the `undo/` directory that code left after recording the turns of
//! [`turns`] and undoing the last one (see its README), as
//! [`a_store_of_this_format_undoes_and_redoes_exactly`] writes one.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{Tree, fast_tempdir, mem_tree, p};
use shiro_tools::{MemMutator, Mutator, create_parent_dirs};
use shiro_undo::{StoreOptions, TurnStart, UndoOptions, UndoStore};

/// One change a turn of the fixture makes.
enum Op {
    Write(&'static str, Vec<u8>, u32),
    Remove(&'static str),
    Link(&'static str, &'static str),
}

/// A big file (over [`BIG`]) whose versions differ in one byte: stored raw, then as deltas.
fn big(version: u8) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    bytes[usize::from(version) * 100] = version;
    bytes
}

/// The big-file threshold the fixture was written with.
const BIG: u64 = 1024;

/// Text that LZ4 compresses, under [`BIG`]: version `version`.
fn notes(version: u8) -> Vec<u8> {
    format!("notes, version {version}\n")
        .repeat(30)
        .into_bytes()
}

/// The turns the fixture of format `format` holds, in order: small files (compressed blobs),
/// a big file (a raw blob, then deltas), a removal, a link, a mode; the last one was undone (a
/// pack). From format 11 (LZ4 in packs), a small file that compresses, in two versions.
fn turns(format: u32) -> Vec<Vec<Op>> {
    let mut turns = base_turns();
    if format >= 11 {
        turns[0].push(Op::Write("notes.txt", notes(1), 0o644));
        turns[2].push(Op::Write("notes.txt", notes(2), 0o644));
    }
    turns
}

fn base_turns() -> Vec<Vec<Op>> {
    vec![
        vec![
            Op::Write("a.txt", b"alpha\n".to_vec(), 0o644),
            Op::Write("b.txt", b"beta\n".to_vec(), 0o644),
            Op::Write("dir/c.txt", b"gamma\n".to_vec(), 0o600),
            Op::Write("big.bin", big(1), 0o644),
        ],
        vec![
            Op::Write("a.txt", b"alpha, edited\n".to_vec(), 0o755),
            Op::Remove("b.txt"),
            Op::Write("big.bin", big(2), 0o644),
        ],
        vec![
            Op::Write("big.bin", big(3), 0o644),
            Op::Link("link", "a.txt"),
            Op::Write("dir/sub/d.txt", b"delta\n".to_vec(), 0o644),
        ],
        vec![
            Op::Write("dir/c.txt", b"gamma, rewritten\n".to_vec(), 0o600),
            Op::Remove("a.txt"),
        ],
    ]
}

/// Applies one turn's changes through `ws` (a recorder, or the workspace itself).
async fn apply(ws: &dyn Mutator, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Write(path, bytes, mode) => {
                create_parent_dirs(ws, &p(path)).await.unwrap();
                ws.write(&p(path), bytes, Some(*mode)).await.unwrap();
            }
            Op::Remove(path) => ws.remove_file(&p(path)).await.unwrap(),
            Op::Link(path, target) => ws.symlink(target, &p(path)).await.unwrap(),
        }
    }
}

/// The workspace after each number of turns of format `format`'s fixture: `states(f)[k]`
/// after the first `k`.
async fn states(format: u32) -> Vec<Tree> {
    let ws = MemMutator::new();
    let mut states = vec![mem_tree(&ws)];
    for ops in turns(format) {
        apply(&ws, &ops).await;
        states.push(mem_tree(&ws));
    }
    states
}

fn options() -> StoreOptions {
    StoreOptions {
        big_file_bytes: BIG,
        ..StoreOptions::default()
    }
}

fn start(n: usize) -> TurnStart {
    TurnStart {
        summary: format!("turn {n}"),
        history_marker: n as u64,
        session: None,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_format_6_store_undoes_and_redoes_exactly() {
    undoes_and_redoes_exactly(&fixture("format6-store"), 6);
}

#[test]
fn a_format_10_store_undoes_and_redoes_exactly() {
    undoes_and_redoes_exactly(&fixture("format10-store"), 10);
}

#[test]
fn a_format_11_store_undoes_and_redoes_exactly() {
    undoes_and_redoes_exactly(&fixture("format11-store"), 11);
}

/// A store of this code's format, written as the fixtures were, undoes and redoes exactly as
/// they do. It is left in `this-format-store` in cargo's temporary directory for tests: when
/// the format changes, that is what to commit as `tests/fixtures/format<N>-store/`, with a
/// README.
#[test]
fn a_store_of_this_format_undoes_and_redoes_exactly() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("this-format-store");
    common::runtime().block_on(async {
        let dir = fast_tempdir();
        let state = common::state(dir.path());
        let ws = MemMutator::new();
        let store = UndoStore::open_with(&state, &ws, options()).await.unwrap();
        for (n, ops) in turns(shiro_undo::FORMAT_VERSION).iter().enumerate() {
            let rec = store.recorder(ws.clone());
            rec.begin_turn(start(n + 1)).await.unwrap();
            apply(&rec, ops).await;
            rec.finish_turn().await.unwrap();
        }
        store.undo(&ws, UndoOptions::default()).await.unwrap();
        drop(store);
        let _ = std::fs::remove_dir_all(&out);
        copy_dir(&state.undo_dir(), &out);
    });
    undoes_and_redoes_exactly(&out, shiro_undo::FORMAT_VERSION);
}

/// Opens a copy of the store in `source` (of format `format`, a fixture's), undoes and redoes
/// every turn, then records a turn on top and undoes and redoes it with the old ones.
fn undoes_and_redoes_exactly(source: &Path, format: u32) {
    common::runtime().block_on(async {
        let states = states(format).await;
        let dir = fast_tempdir();
        let state = common::state(dir.path());
        copy_dir(source, &state.undo_dir());
        // The workspace as the fixture's code left it: three turns done, the fourth undone.
        let ws = MemMutator::new();
        for ops in &turns(format)[..3] {
            apply(&ws, ops).await;
        }
        assert_eq!(mem_tree(&ws), states[3]);
        let store = UndoStore::open_with(&state, &ws, options()).await.unwrap();
        assert_eq!(store.log().unwrap().len(), 3);
        assert_eq!(store.redo_log().unwrap().len(), 1);

        store.redo(&ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&ws), states[4], "redo of the undone turn");
        for k in (0..4).rev() {
            let outcome = store.undo(&ws, UndoOptions::default()).await.unwrap();
            assert_eq!(outcome.turn.history_marker, k as u64 + 1);
            assert_eq!(mem_tree(&ws), states[k], "undo to {k} turns");
        }
        for (k, expected) in states.iter().enumerate().skip(1) {
            store.redo(&ws, UndoOptions::default()).await.unwrap();
            assert_eq!(mem_tree(&ws), *expected, "redo to {k} turns");
        }

        // A turn recorded now, on top of the old turns, undoes too, and the old ones still do.
        let rec = store.recorder(ws.clone());
        rec.begin_turn(start(5)).await.unwrap();
        apply(&rec, &[Op::Write("a.txt", b"new\n".to_vec(), 0o644)]).await;
        rec.finish_turn().await.unwrap();
        let after = mem_tree(&ws);
        store.undo(&ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&ws), states[4]);
        store.undo(&ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&ws), states[3]);
        store.redo(&ws, UndoOptions::default()).await.unwrap();
        store.redo(&ws, UndoOptions::default()).await.unwrap();
        assert_eq!(mem_tree(&ws), after);
        assert!(store.take_notices().is_empty());
    });
}
