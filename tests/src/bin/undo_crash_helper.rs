//! Crash-test helper for shiro-undo: performs one scripted turn, or one undo, on a workspace,
//! and can abort itself (no cleanup, like SIGKILL) at the k-th mutating file operation.
//!
//! `undo_crash_helper WORKSPACE turn|undo|legacy-turn|migrate|many-turn|gc-turn|ten-turns|rewind|revert-turns|revert [K before|after]`
//!
//! `ten-turns` records [`SESSION_TURNS`] turns of session `s1` on the files of `setup`, with
//! two turns of session `s2` between them on files of their own; `rewind` rewinds to before
//! the first turn of `s1`, undoing its turns in one restore and leaving those of `s2`.
//!
//! `revert-turns` records three turns on the files of `setup`: the first writes `lines.txt`,
//! the second ([`REVERTED`]) changes two of its lines and every kind of thing the scripted
//! turn changes, the third changes another line of it and writes `later.txt`; `revert`
//! reverts the second as a new turn, merging `lines.txt`.
//!
//! `many-turn` rewrites [`MANY`] small files (`many/f<i>`) in one turn, so that a kill at a
//! random time lands in the writing of its pack most often; `gc-turn`, on a store opened
//! with depth 1, records a turn whose pre-image (`g`) the previous turn's pack holds: that
//! turn leaves the log and its pack, mostly dead, is rewritten.
//!
//! `legacy-turn` records the turn where an earlier version kept the store (`.shiro/undo` in
//! the workspace); `migrate` moves such a store out of the tree by copying it (the slow way,
//! which has the most steps to interrupt). The state directory is
//! [`shiro_tests::state_beside`] the workspace, or the one `UNDO_CRASH_STATE` names.
//!
//! The test (`tests/tests/undo_crash.rs`) also kills it with SIGKILL at random times, which
//! lands inside the store's own writes.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use shiro_tools::{FsMutator, Hooked, Mutator, MutatorError, WorkspacePath, create_parent_dirs};
use shiro_undo::{MoveBy, StateDir, StoreOptions, TurnStart, UndoOptions, UndoStore};

/// Names the state directory to use instead of the one beside the workspace (the tests of
/// the `shiro` binary pass the one it uses).
const STATE_VAR: &str = "UNDO_CRASH_STATE";

/// Files this big are stored as deltas: `big.bin` (256 KiB) is one. The test opens its store
/// with the same value.
const BIG_FILE_BYTES: u64 = 64 * 1024;

/// Files this big are streamed (never held in memory whole): `huge.bin` (640 KiB) is one.
/// The test opens its store with the same value.
const STREAM_FILE_BYTES: u64 = 512 * 1024;
/// The turn holds this many bytes of new pre-images in memory; the rest it reads back from
/// the in-flight file as it is stored, so a kill lands on that too.
const MAX_HELD_BYTES: u64 = 64;

/// How many files `many-turn` rewrites (the test's setup makes them).
const MANY: usize = 2000;

/// How many turns of session `s1` `ten-turns` records.
const SESSION_TURNS: usize = 10;

/// The summary of the turn that `revert` reverts.
const REVERTED: &str = "the turn to revert";

/// A mutator that aborts the process at its `abort_at`-th mutating call, before or after
/// performing it.
fn aborting(inner: FsMutator, abort_at: Option<usize>, after: bool) -> Hooked<FsMutator> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    Hooked::new(inner, move |_| {
        let call = counted.fetch_add(1, Ordering::SeqCst) + 1;
        if !after && abort_at == Some(call) {
            std::process::abort();
        }
        Ok(())
    })
    .after(move |_| {
        if after && abort_at == Some(calls.load(Ordering::SeqCst)) {
            std::process::abort();
        }
    })
}

fn p(s: &str) -> Result<WorkspacePath, String> {
    WorkspacePath::from_relative(s).map_err(|err| err.to_string())
}

/// The scripted turn: edits, creates (into new nested directories), deletes, moves (also onto
/// a path freed earlier), file <-> directory replacement, a mode change, a link, and a big
/// binary file and a file too big to hold, so that kills land in every kind of step.
async fn turn(m: &dyn Mutator) -> Result<(), String> {
    let e = |err: MutatorError| err.to_string();
    for i in 0..5 {
        m.write(
            &p(&format!("f{i}"))?,
            format!("edited {i}\n").as_bytes(),
            None,
        )
        .await
        .map_err(e)?;
    }
    m.remove_file(&p("f5")?).await.map_err(e)?;
    m.remove_file(&p("f6")?).await.map_err(e)?;
    create_parent_dirs(m, &p("moved/f7")?).await.map_err(e)?;
    m.rename(&p("f7")?, &p("moved/f7")?).await.map_err(e)?;
    m.rename(&p("f8")?, &p("f5")?).await.map_err(e)?;
    m.set_mode(&p("f9")?, 0o755).await.map_err(e)?;
    create_parent_dirs(m, &p("new/a/b/c.txt")?)
        .await
        .map_err(e)?;
    m.write(&p("new/a/b/c.txt")?, b"", None).await.map_err(e)?;
    m.remove_file(&p("swap")?).await.map_err(e)?;
    m.create_dir(&p("swap")?).await.map_err(e)?;
    m.write(&p("swap/inner")?, b"was a file\n", Some(0o600))
        .await
        .map_err(e)?;
    m.remove_file(&p("dswap/file")?).await.map_err(e)?;
    m.remove_dir(&p("dswap")?).await.map_err(e)?;
    m.write(&p("dswap")?, b"was a directory\n", None)
        .await
        .map_err(e)?;
    m.remove_file(&p("link")?).await.map_err(e)?;
    m.symlink("elsewhere", &p("link")?).await.map_err(e)?;
    // A big file (see `BIG_FILE_BYTES`) changed in its middle: its pre-image becomes a delta
    // against its after-image, which is stored raw.
    let mut big = m.read(&p("big.bin")?).await.map_err(e)?;
    let middle = big.len() / 2;
    for byte in big.iter_mut().skip(middle).take(100) {
        *byte = byte.wrapping_add(1);
    }
    m.write(&p("big.bin")?, &big, None).await.map_err(e)?;
    // A file too big to hold (see `STREAM_FILE_BYTES`) grown at its end: its pre-image is
    // kept as it is captured, under a second name in the store, and the write replaces it.
    let mut huge = m.read(&p("huge.bin")?).await.map_err(e)?;
    huge.extend_from_slice(b"appended\n");
    m.write(&p("huge.bin")?, &huge, None).await.map_err(e)?;
    m.write(&p("f0")?, b"edited twice\n", None)
        .await
        .map_err(e)?;
    Ok(())
}

async fn run(args: &[String]) -> Result<(), String> {
    let [root, mode, rest @ ..] = args else {
        return Err(
            "usage: undo_crash_helper WORKSPACE turn|undo|legacy-turn|migrate|many-turn|gc-turn|ten-turns|rewind|revert-turns|revert [K before|after]"
                .to_owned(),
        );
    };
    let abort_at = rest
        .first()
        .map(|k| k.parse::<usize>())
        .transpose()
        .map_err(|err| err.to_string())?;
    let after = rest.get(1).is_some_and(|w| w == "after");
    let root = PathBuf::from(root);
    let fs = FsMutator::new(&root).map_err(|err| err.to_string())?;
    let aborting = aborting(fs, abort_at, after);
    let options = StoreOptions {
        big_file_bytes: BIG_FILE_BYTES,
        stream_file_bytes: STREAM_FILE_BYTES,
        max_held_bytes: MAX_HELD_BYTES,
        depth: if mode == "gc-turn" { 1 } else { 20 },
        ..StoreOptions::default()
    };
    let state = match (mode.as_str(), std::env::var_os(STATE_VAR)) {
        ("legacy-turn", _) => StateDir::at(root.join(".shiro"), &root),
        (_, Some(dir)) => StateDir::at(dir, &root),
        (_, None) => shiro_tests::state_beside(&root),
    };
    if mode == "migrate" {
        return shiro_undo::migrate_legacy_by(&state, MoveBy::Copy)
            .map(drop)
            .map_err(|err| err.to_string());
    }
    // A legacy store is opened as one would have been: in the tree, as is.
    let store = if mode == "legacy-turn" {
        UndoStore::open_with(&state, &fs_of(&root)?, options).await
    } else {
        UndoStore::open(&state, options).await
    }
    .map_err(|err| err.to_string())?;
    match mode.as_str() {
        "turn" | "legacy-turn" => {
            let recording = store.recorder(aborting);
            let start = TurnStart {
                summary: "crash test turn".to_owned(),
                history_marker: 7,
                session: None,
            };
            recording
                .begin_turn(start)
                .await
                .map_err(|err| err.to_string())?;
            // As the agent does for a tool call: the paths it names, captured ahead with one
            // flush (f9 only has its mode changed; "unnamed" is never touched).
            let ahead: Vec<WorkspacePath> = ["f1", "f2", "f3", "f9", "unnamed"]
                .into_iter()
                .map(p)
                .collect::<Result<_, _>>()?;
            let result = match recording.capture_ahead(&ahead).await {
                Ok(()) => turn(&recording).await,
                Err(err) => Err(err.to_string()),
            };
            recording
                .finish_turn()
                .await
                .map_err(|err| err.to_string())?;
            result
        }
        "many-turn" | "gc-turn" => {
            let recording = store.recorder(aborting);
            let start = TurnStart {
                summary: mode.clone(),
                history_marker: if mode == "gc-turn" { 9 } else { 8 },
                session: None,
            };
            recording
                .begin_turn(start)
                .await
                .map_err(|err| err.to_string())?;
            let result = if mode == "gc-turn" {
                recording
                    .write(&p("g")?, b"rewritten by the collecting turn\n", None)
                    .await
                    .map_err(|err| err.to_string())
            } else {
                let paths: Vec<WorkspacePath> = (0..MANY)
                    .map(|i| p(&format!("many/f{i}")))
                    .collect::<Result<_, _>>()?;
                match recording.capture_ahead(&paths).await {
                    Ok(()) => many(&recording, &paths).await,
                    Err(err) => Err(err.to_string()),
                }
            };
            recording
                .finish_turn()
                .await
                .map_err(|err| err.to_string())?;
            result
        }
        "undo" => store
            .undo(&aborting, UndoOptions::default())
            .await
            .map(drop)
            .map_err(|err| err.to_string()),
        "ten-turns" => ten_turns(&store, aborting).await,
        "revert-turns" => revert_turns(&store, aborting).await,
        "revert" => {
            let log = store.log().map_err(|err| err.to_string())?;
            let reverted = (log.iter())
                .find(|turn| turn.summary == REVERTED)
                .ok_or("no turn to revert")?;
            let start = TurnStart {
                summary: format!("revert {}", reverted.id),
                history_marker: 11,
                session: None,
            };
            store
                .revert(&aborting, reverted.id, start)
                .await
                .map(drop)
                .map_err(|err| err.to_string())
        }
        "rewind" => {
            let log = store.log().map_err(|err| err.to_string())?;
            let first = (log.iter().rev())
                .find(|turn| turn.session.as_deref() == Some("s1"))
                .ok_or("no turn of session s1 to rewind to")?;
            store
                .rewind(&aborting, first.id, UndoOptions::default())
                .await
                .map(drop)
                .map_err(|err| err.to_string())
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

/// The turns of `ten-turns`: session `s1` edits, deletes, creates and moves the files of the
/// scripted turn's setup, and edits `f0` in every turn; session `s2` writes `s2/` twice.
async fn ten_turns(store: &UndoStore, m: Hooked<FsMutator>) -> Result<(), String> {
    let e = |err: MutatorError| err.to_string();
    let recording = store.recorder(m);
    for i in 0..SESSION_TURNS {
        for (session, other) in [("s1", false), ("s2", true)] {
            if other && i != 2 && i != 6 {
                continue;
            }
            let start = TurnStart {
                summary: format!("{session} turn {i}"),
                history_marker: i as u64,
                session: Some(session.to_owned()),
            };
            recording
                .begin_turn(start)
                .await
                .map_err(|err| err.to_string())?;
            let result = async {
                if other {
                    create_parent_dirs(&recording, &p(&format!("s2/t{i}"))?)
                        .await
                        .map_err(e)?;
                    return (recording
                        .write(&p(&format!("s2/t{i}"))?, b"s2\n", None)
                        .await)
                        .map_err(e);
                }
                let f0 = format!("f0 after turn {i}\n");
                recording
                    .write(&p("f0")?, f0.as_bytes(), None)
                    .await
                    .map_err(e)?;
                match i {
                    3 => recording.remove_file(&p("f3")?).await.map_err(e),
                    4 => recording.rename(&p("f4")?, &p("f3")?).await.map_err(e),
                    7 => {
                        create_parent_dirs(&recording, &p("made/x")?)
                            .await
                            .map_err(e)?;
                        recording
                            .write(&p("made/x")?, b"made\n", None)
                            .await
                            .map_err(e)
                    }
                    _ => {
                        let name = p(&format!("f{i}"))?;
                        let text = format!("edited in turn {i}\n");
                        recording
                            .write(&name, text.as_bytes(), None)
                            .await
                            .map_err(e)
                    }
                }
            }
            .await;
            recording
                .finish_turn()
                .await
                .map_err(|err| err.to_string())?;
            result?;
        }
    }
    Ok(())
}

/// The lines of `lines.txt` as the first turn of `revert-turns` writes them, with the lines
/// at `changed` replaced by `tag`.
fn lines(changed: &[usize], tag: &str) -> String {
    (0..12)
        .map(|i| {
            if changed.contains(&i) {
                format!("line {i}, {tag}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect()
}

/// The turns of `revert-turns` (see the module's doc).
async fn revert_turns(store: &UndoStore, m: Hooked<FsMutator>) -> Result<(), String> {
    let e = |err: MutatorError| err.to_string();
    let recording = store.recorder(m);
    for (summary, marker) in [("write lines", 1), (REVERTED, 2), ("later", 3)] {
        let start = TurnStart {
            summary: summary.to_owned(),
            history_marker: marker,
            session: None,
        };
        recording
            .begin_turn(start)
            .await
            .map_err(|err| err.to_string())?;
        let result = match marker {
            1 => (recording.write(&p("lines.txt")?, lines(&[], "").as_bytes(), None))
                .await
                .map_err(e),
            2 => {
                async {
                    let text = lines(&[2, 9], "reverted");
                    recording
                        .write(&p("lines.txt")?, text.as_bytes(), None)
                        .await
                        .map_err(e)?;
                    turn(&recording).await
                }
                .await
            }
            _ => {
                async {
                    let text =
                        lines(&[2, 5, 9], "reverted").replace("line 5, reverted", "line 5, later");
                    recording
                        .write(&p("lines.txt")?, text.as_bytes(), None)
                        .await
                        .map_err(e)?;
                    (recording.write(&p("later.txt")?, b"later\n", None))
                        .await
                        .map_err(e)
                }
                .await
            }
        };
        recording
            .finish_turn()
            .await
            .map_err(|err| err.to_string())?;
        result?;
    }
    Ok(())
}

/// Rewrites each of `paths` (the files of `many-turn`).
async fn many(m: &dyn Mutator, paths: &[WorkspacePath]) -> Result<(), String> {
    for (i, path) in paths.iter().enumerate() {
        m.write(path, format!("many {i}, rewritten\n").as_bytes(), None)
            .await
            .map_err(|err| err.to_string())?;
    }
    Ok(())
}

fn fs_of(root: &std::path::Path) -> Result<FsMutator, String> {
    FsMutator::new(root).map_err(|err| err.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("undo_crash_helper: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("undo_crash_helper: {err}");
            ExitCode::FAILURE
        }
    }
}
