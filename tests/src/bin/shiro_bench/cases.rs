//! The measured cases. Each runs in a child process of the harness (`shiro_bench --case
//! JSON`), so that its peak memory is its own: the child's `VmHWM` for what runs in-process,
//! and `getrusage(RUSAGE_CHILDREN)` for the processes it spawns.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use shiro_tools::{FsMutator, Mutator, Tool, WorkspacePath, tools};
use shiro_undo::{Recording, StateDir, StoreOptions, TurnId, TurnStart, UndoOptions, UndoStore};

use crate::inputs::{MARKER_A, MARKER_B};

/// One thing to measure, with everything it needs; sent to the child as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "case", rename_all = "snake_case")]
pub enum Case {
    /// Nothing: the harness's own baseline memory.
    Idle,
    /// Records the turn the undo cases undo (see `record_rewrite`). The harness runs it before
    /// those cases, as a process of its own: the memory the turn holds must not count as
    /// theirs, and a child spawned by a big process inherits its peak in `ru_maxrss`.
    /// It starts by putting the pre-images back (see `reset`).
    RecordRewrite {
        ws: PathBuf,
        list: PathBuf,
        backup: PathBuf,
    },
    /// `std::fs::read` + replace + `std::fs::write` of the edit target.
    PlainEdit {
        ws: PathBuf,
        file: String,
        reps: usize,
    },
    /// The `edit_file` tool on a bare `FsMutator` (no undo).
    ToolEdit {
        ws: PathBuf,
        file: String,
        reps: usize,
    },
    /// The `edit_file` tool through `Recording<FsMutator>`, one turn per call. With
    /// `after_turn`, first (untimed) one turn that rewrites every other file of the
    /// workspace, as late in a long session: the store's log then lists that many paths.
    RecordedEdit {
        ws: PathBuf,
        file: String,
        reps: usize,
        #[serde(default)]
        after_turn: bool,
    },
    /// `shiro -C ws tool edit_file --args JSON`, a whole process per call.
    CliEdit {
        ws: PathBuf,
        file: String,
        reps: usize,
        shiro: PathBuf,
    },
    /// An untimed plain edit, then a timed `git add -A && git write-tree` into a shadow git dir.
    GitSnapshot {
        ws: PathBuf,
        git: PathBuf,
        file: String,
        reps: usize,
    },
    /// In-process undo of a turn that rewrote the listed files (redo untimed between reps).
    UndoLib { ws: PathBuf, reps: usize },
    /// A rewind of `turns` turns that together rewrote the listed files (each its share), in
    /// process: the turns are recorded (untimed) before each repetition, then rewound as one
    /// restore (`UndoStore::rewind`, timed); with `each`, undone one at a time instead.
    RewindLib {
        ws: PathBuf,
        list: PathBuf,
        backup: PathBuf,
        turns: usize,
        reps: usize,
        each: bool,
    },
    /// `shiro -C ws undo` of such a turn.
    UndoCli {
        ws: PathBuf,
        reps: usize,
        shiro: PathBuf,
        /// MiB another "process" writes beside the workspace, unflushed, before each undo.
        dirty_mib: usize,
    },
    /// `cp -R backup/. ws/`: the same files copied back from a plain backup; with `sync`,
    /// followed by `sync -f ws`, which makes them durable as `shiro undo` does.
    UndoCp {
        ws: PathBuf,
        list: PathBuf,
        backup: PathBuf,
        reps: usize,
        sync: bool,
        /// As for `UndoCli`.
        dirty_mib: usize,
    },
    /// `git checkout TREE -- .` from the shadow git snapshot taken before the turn.
    UndoGit {
        ws: PathBuf,
        list: PathBuf,
        backup: PathBuf,
        git: PathBuf,
        tree: String,
        reps: usize,
    },
    /// A 4 KiB write and `fdatasync` of a small file: what one durable write costs here.
    Fsync { dir: PathBuf, reps: usize },
    /// Spawning `program args` (in `dir`, if given) until it exits.
    Spawn {
        program: PathBuf,
        args: Vec<String>,
        reps: usize,
        #[serde(default)]
        dir: Option<PathBuf>,
    },
    /// The `apply_patch` tool on a bare `FsMutator`.
    PatchTool {
        ws: PathBuf,
        forward: PathBuf,
        reverse: PathBuf,
        reps: usize,
    },
    /// The `apply_patch` tool through `Recording<FsMutator>`, one turn per call.
    PatchRecorded {
        ws: PathBuf,
        forward: PathBuf,
        reverse: PathBuf,
        reps: usize,
    },
    /// `shiro -C ws apply-patch FILE`.
    PatchCli {
        ws: PathBuf,
        forward: PathBuf,
        reverse: PathBuf,
        reps: usize,
        shiro: PathBuf,
    },
    /// 20 recorded turns each changing one line of a big file, with sizes afterwards.
    StoreSize {
        ws: PathBuf,
        git: PathBuf,
        file: String,
        turns: usize,
    },
    /// One file written through the bash tool's overlay runner: fails, saying why, where
    /// overlays are refused.
    BashProbe { ws: PathBuf, shiro: PathBuf },
    /// One bash call that rewrites one line of `file`, bare and through the overlay, in
    /// each workspace in turn (see `bash::one_file`).
    BashOneFile {
        workspaces: Vec<crate::bash::OneFileWs>,
        file: String,
        reps: usize,
        shiro: PathBuf,
        /// MiB written beside the workspace, unflushed, before each call (0: none).
        dirty_mib: usize,
    },
    /// A file-heavy command, bare and through the overlay, and the undo of each (see
    /// `bash::heavy`).
    BashHeavy {
        ws: PathBuf,
        heavy: crate::bash::Heavy,
        reps: usize,
        shiro: PathBuf,
    },
    /// `echo tail >> FILE` on a big file through the overlay, its undo, and `cp` of the file.
    BashBigAppend {
        ws: PathBuf,
        file: String,
        reps: usize,
        shiro: PathBuf,
    },
}

/// What a case measured. Durations are in nanoseconds, sizes in bytes, memory in KiB.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CaseResult {
    /// Timed series by name; most cases have one, named `time`.
    pub series: BTreeMap<String, Vec<u64>>,
    /// Other measured values (sizes).
    pub values: BTreeMap<String, u64>,
    /// Peak resident memory of the child harness process (`VmHWM`), KiB.
    pub peak_self_kib: u64,
    /// Largest peak resident memory among the processes it spawned, KiB (0 when none).
    pub peak_children_kib: u64,
}

/// Runs a case in this (child) process and prints its result as one JSON line.
pub fn run_child(case: &Case) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut result = runtime.block_on(run(case))?;
    result.peak_self_kib = vm_hwm_kib()?;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    // Linux reports ru_maxrss in KiB.
    result.peak_children_kib = u64::try_from(usage.max_rss()).unwrap_or(0);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&result)?)?;
    Ok(())
}

fn vm_hwm_kib() -> Result<u64> {
    let status = fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    let kib = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim();
    Ok(kib.parse()?)
}

fn timed(result: &mut CaseResult, start: Instant) {
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    result
        .series
        .entry("time".to_owned())
        .or_default()
        .push(nanos);
}

/// The edit of repetition `rep`: A → B on even repetitions, back on odd ones, so every
/// repetition does the same work and an even count leaves the file as it was.
fn flip(rep: usize) -> (&'static str, &'static str) {
    if rep.is_multiple_of(2) {
        (MARKER_A, MARKER_B)
    } else {
        (MARKER_B, MARKER_A)
    }
}

fn edit_args(file: &str, rep: usize) -> serde_json::Value {
    let (old, new) = flip(rep);
    serde_json::json!({"path": file, "old_string": old, "new_string": new})
}

fn plain_edit(path: &Path, old: &str, new: &str) -> Result<()> {
    let text = fs::read_to_string(path)?;
    fs::write(path, text.replacen(old, new, 1))?;
    Ok(())
}

fn turn(summary: &str) -> TurnStart {
    TurnStart {
        summary: summary.to_owned(),
        history_marker: 0,
        session: None,
    }
}

/// The workspace as the CLI uses it: operations run inline, not on tokio's blocking pool.
fn workspace(ws: &Path) -> Result<FsMutator> {
    Ok(FsMutator::new(ws)?.inline())
}

async fn open(ws: &Path) -> Result<(UndoStore, FsMutator)> {
    let store = UndoStore::open(&state_of(ws)?, StoreOptions::default()).await?;
    Ok((store, workspace(ws)?))
}

/// The state directory of the workspace `ws` where the `shiro` a case starts finds it too:
/// under `SHIRO_STATE_DIR`, which the harness sets for every case process, so that a turn
/// recorded in process is the one `shiro undo` undoes.
fn state_of(ws: &Path) -> Result<StateDir> {
    let home = std::env::var_os("SHIRO_STATE_DIR")
        .context("SHIRO_STATE_DIR is not set (the harness sets it for its cases)")?;
    Ok(StateDir::of_workspace(
        Path::new(&home),
        &fs::canonicalize(ws)?,
    ))
}

async fn run(case: &Case) -> Result<CaseResult> {
    let mut r = CaseResult::default();
    if let Case::PlainEdit { ws, file, .. }
    | Case::ToolEdit { ws, file, .. }
    | Case::RecordedEdit { ws, file, .. }
    | Case::CliEdit { ws, file, .. }
    | Case::GitSnapshot { ws, file, .. } = case
    {
        // An odd repetition count leaves the marker flipped; every case starts from A.
        let path = ws.join(file);
        let text = fs::read_to_string(&path)?;
        if text.contains(MARKER_B) {
            fs::write(&path, text.replacen(MARKER_B, MARKER_A, 1))?;
        }
    }
    match case {
        Case::Idle => {}
        Case::RecordRewrite { ws, list, backup } => {
            let list = read_list(list)?;
            reset(ws, backup, &list)?;
            let (store, fs) = open(ws).await?;
            record_rewrite(&store, &fs, &list).await?;
        }
        Case::PlainEdit { ws, file, reps } => {
            let path = ws.join(file);
            for rep in 0..*reps {
                let (old, new) = flip(rep);
                let start = Instant::now();
                plain_edit(&path, old, new)?;
                timed(&mut r, start);
            }
        }
        Case::ToolEdit { ws, file, reps } => {
            let fs = workspace(ws)?;
            for rep in 0..*reps {
                let start = Instant::now();
                tools::edit_file().call(&fs, edit_args(file, rep)).await?;
                timed(&mut r, start);
            }
        }
        Case::RecordedEdit {
            ws,
            file,
            reps,
            after_turn,
        } => {
            let (store, fs) = open(ws).await?;
            if *after_turn {
                let mut others = Vec::new();
                files_under(ws, Path::new(""), &mut others)?;
                others.retain(|other| other != file);
                record_rewrite(&store, &fs, &others).await?;
                // Its writes flushed, lest the timed turns' flushes wait behind them.
                crate::bash::settle(ws)?;
            }
            let recording = store.recorder(fs);
            for rep in 0..*reps {
                let start = Instant::now();
                recording.begin_turn(turn("bench edit")).await?;
                let called =
                    recorded_call(&recording, &tools::edit_file(), edit_args(file, rep)).await;
                recording.finish_turn().await?;
                called?;
                timed(&mut r, start);
            }
        }
        Case::CliEdit {
            ws,
            file,
            reps,
            shiro,
        } => {
            for rep in 0..*reps {
                let args = edit_args(file, rep).to_string();
                let mut cmd = Command::new(shiro);
                cmd.arg("-C")
                    .arg(ws)
                    .args(["tool", "edit_file", "--args", &args]);
                let start = Instant::now();
                run_ok(cmd)?;
                timed(&mut r, start);
            }
        }
        Case::GitSnapshot {
            ws,
            git,
            file,
            reps,
        } => {
            for rep in 0..*reps {
                let (old, new) = flip(rep);
                plain_edit(&ws.join(file), old, new)?;
                let start = Instant::now();
                run_ok(git_snapshot(ws, git))?;
                timed(&mut r, start);
            }
        }
        Case::UndoLib { ws, reps } => {
            let (store, fs) = open(ws).await?;
            for rep in 0..*reps {
                let start = Instant::now();
                store.undo(&fs, UndoOptions::default()).await?;
                timed(&mut r, start);
                if rep + 1 < *reps {
                    store.redo(&fs, UndoOptions::default()).await?;
                }
            }
        }
        Case::RewindLib {
            ws,
            list,
            backup,
            turns,
            reps,
            each,
        } => {
            let list = read_list(list)?;
            let (store, fs) = open(ws).await?;
            let share = list.len().div_ceil((*turns).max(1)).max(1);
            for _ in 0..*reps {
                reset(ws, backup, &list)?;
                let mut first = None;
                for part in list.chunks(share) {
                    let id = record_rewrite(&store, &fs, part).await?;
                    first = first.or(Some(id));
                }
                let first = first.context("no turn to rewind")?;
                let start = Instant::now();
                if *each {
                    for _ in list.chunks(share) {
                        store.undo(&fs, UndoOptions::default()).await?;
                    }
                } else {
                    store.rewind(&fs, first, UndoOptions::default()).await?;
                }
                timed(&mut r, start);
            }
        }
        Case::UndoCli {
            ws,
            reps,
            shiro,
            dirty_mib,
        } => {
            let (store, fs) = open(ws).await?;
            for rep in 0..*reps {
                let mut cmd = Command::new(shiro);
                cmd.arg("-C").arg(ws).arg("undo");
                let dirty = write_unflushed(ws, *dirty_mib)?;
                let start = Instant::now();
                run_ok(cmd)?;
                timed(&mut r, start);
                remove_unflushed(dirty)?;
                if rep + 1 < *reps {
                    store.redo(&fs, UndoOptions::default()).await?;
                }
            }
        }
        Case::UndoCp {
            ws,
            list,
            backup,
            reps,
            sync,
            dirty_mib,
        } => {
            let list = read_list(list)?;
            reset(ws, backup, &list)?;
            for _ in 0..*reps {
                rewrite_plain(ws, &list)?;
                let dirty = write_unflushed(ws, *dirty_mib)?;
                let mut cmd = Command::new("cp");
                cmd.arg("-R")
                    .arg(format!("{}/.", backup.display()))
                    .arg(format!("{}/", ws.display()));
                let mut flush = Command::new("sync");
                flush.arg("-f").arg(ws);
                let start = Instant::now();
                run_ok(cmd)?;
                if *sync {
                    run_ok(flush)?;
                }
                timed(&mut r, start);
                remove_unflushed(dirty)?;
            }
        }
        Case::UndoGit {
            ws,
            list,
            backup,
            git,
            tree,
            reps,
        } => {
            let list = read_list(list)?;
            reset(ws, backup, &list)?;
            for _ in 0..*reps {
                rewrite_plain(ws, &list)?;
                let mut cmd = git_cmd(ws, git);
                cmd.args(["checkout", tree, "--", "."]);
                let start = Instant::now();
                run_ok(cmd)?;
                timed(&mut r, start);
            }
        }
        Case::PatchTool {
            ws,
            forward,
            reverse,
            reps,
        } => {
            let fs = workspace(ws)?;
            let (fwd, back) = (patch_args(forward)?, patch_args(reverse)?);
            for _ in 0..*reps {
                let start = Instant::now();
                tools::apply_patch().call(&fs, fwd.clone()).await?;
                timed(&mut r, start);
                tools::apply_patch().call(&fs, back.clone()).await?;
            }
        }
        Case::PatchRecorded {
            ws,
            forward,
            reverse,
            reps,
        } => {
            let (store, fs) = open(ws).await?;
            let recording = store.recorder(fs.clone());
            let (fwd, back) = (patch_args(forward)?, patch_args(reverse)?);
            for _ in 0..*reps {
                let start = Instant::now();
                recording.begin_turn(turn("bench patch")).await?;
                let called = recorded_call(&recording, &tools::apply_patch(), fwd.clone()).await;
                recording.finish_turn().await?;
                called?;
                timed(&mut r, start);
                tools::apply_patch().call(&fs, back.clone()).await?;
            }
        }
        Case::PatchCli {
            ws,
            forward,
            reverse,
            reps,
            shiro,
        } => {
            let fs = workspace(ws)?;
            let back = patch_args(reverse)?;
            for _ in 0..*reps {
                let mut cmd = Command::new(shiro);
                cmd.arg("-C").arg(ws).arg("apply-patch").arg(forward);
                let start = Instant::now();
                run_ok(cmd)?;
                timed(&mut r, start);
                tools::apply_patch().call(&fs, back.clone()).await?;
            }
        }
        Case::Fsync { dir, reps } => {
            let path = dir.join("fsync-probe");
            for _ in 0..*reps {
                let start = Instant::now();
                let mut file = fs::File::create(&path)?;
                file.write_all(&[b'x'; 4096])?;
                file.sync_data()?;
                timed(&mut r, start);
            }
            fs::remove_file(&path)?;
        }
        Case::Spawn {
            program,
            args,
            reps,
            dir,
        } => {
            for _ in 0..*reps {
                let mut cmd = Command::new(program);
                cmd.args(args);
                if let Some(dir) = dir {
                    cmd.current_dir(dir);
                }
                let start = Instant::now();
                run_ok(cmd)?;
                timed(&mut r, start);
            }
            // This process's only children are those runs.
            let usage =
                nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
            let faults = u64::try_from(usage.minor_page_faults()).unwrap_or(0);
            r.values.insert(
                "minor_faults_per_run".into(),
                faults / (*reps as u64).max(1),
            );
        }
        Case::StoreSize {
            ws,
            git,
            file,
            turns,
        } => store_size(&mut r, ws, git, file, *turns).await?,
        Case::BashProbe { ws, shiro } => {
            crate::bash::probe(ws, &crate::bash::helper_of(shiro)).await?;
        }
        Case::BashOneFile {
            workspaces,
            file,
            reps,
            shiro,
            dirty_mib,
        } => {
            let helper = crate::bash::helper_of(shiro);
            crate::bash::one_file(&mut r, workspaces, file, *reps, &helper, *dirty_mib).await?;
        }
        Case::BashHeavy {
            ws,
            heavy,
            reps,
            shiro,
        } => crate::bash::heavy(&mut r, ws, heavy, *reps, &crate::bash::helper_of(shiro)).await?,
        Case::BashBigAppend {
            ws,
            file,
            reps,
            shiro,
        } => {
            let helper = crate::bash::helper_of(shiro);
            crate::bash::big_append(&mut r, ws, file, *reps, &helper).await?;
        }
    }
    Ok(r)
}

/// The turns of the store-size case: each changes one line of `file`, spread over the file.
async fn store_size(
    r: &mut CaseResult,
    ws: &Path,
    git: &Path,
    file: &str,
    turns: usize,
) -> Result<()> {
    use flate2::Compression;
    use flate2::write::ZlibEncoder;

    let path = ws.join(file);
    let (store, fs) = open(ws).await?;
    let recording = store.recorder(fs.clone());
    let lines = fs::read_to_string(&path)?.lines().count();
    let mut raw = 0u64;
    let (mut zlib6, mut zlib1) = (0u64, 0u64);
    for t in 0..turns {
        let before = fs::read(&path)?;
        raw += before.len() as u64;
        for (level, sum) in [
            (Compression::default(), &mut zlib6),
            (Compression::fast(), &mut zlib1),
        ] {
            let mut encoder = ZlibEncoder::new(Vec::new(), level);
            encoder.write_all(&before)?;
            *sum += encoder.finish()?.len() as u64;
        }
        // Each turn changes a different line, so every pre-image is distinct.
        let target = (t * 7919 + 11) % lines;
        let text = String::from_utf8(before)?;
        let line = text
            .lines()
            .nth(target)
            .context("line out of range")?
            .to_owned();
        let (old, new) = (format!("\n{line}\n"), format!("\n{line} // turn {t}\n"));

        // The same edit unrecorded, by std::fs and by the bare tool, then undone by hand, as
        // baselines for the capture overhead on a large file. The bare tool runs before the
        // recorded turn on even turns and after it on odd ones (on the same pre-image, the
        // recorded result put back after it), so that neither always follows the other's
        // unflushed writes; the overhead is the median of the per-turn differences.
        let start = Instant::now();
        plain_edit(&path, &old, &new)?;
        push(r, "plain", start);
        fs::write(&path, text.as_bytes())?;
        let args = serde_json::json!({"path": file, "old_string": old, "new_string": new});
        let tool_first = t.is_multiple_of(2);
        if tool_first {
            let took = bare_edit(&fs, args.clone(), &path, &text).await?;
            push_nanos(r, "tool", took);
        }
        let start = Instant::now();
        recording.begin_turn(turn("bench store")).await?;
        let called = recorded_call(&recording, &tools::edit_file(), args.clone()).await;
        recording.finish_turn().await?;
        called?;
        push(r, "recorded", start);
        if !tool_first {
            let recorded = fs::read(&path)?;
            fs::write(&path, text.as_bytes())?;
            let took = bare_edit(&fs, args, &path, &text).await?;
            push_nanos(r, "tool", took);
            fs::write(&path, &recorded)?;
        }

        let start = Instant::now();
        run_ok(git_snapshot(ws, git))?;
        push(r, "git", start);
    }
    r.values.insert("preimages_raw".into(), raw);
    r.values.insert("preimages_zlib6".into(), zlib6);
    r.values.insert("preimages_zlib1".into(), zlib1);
    r.values.insert("store_blobs".into(), store.store_bytes()?);
    r.values
        .insert("store_dir".into(), dir_bytes(&state_of(ws)?.undo_dir())?);
    r.values
        .insert("turns_logged".into(), store.log()?.len() as u64);
    let names: Vec<String> = fs::read_dir(state_of(ws)?.undo_dir().join("blobs"))?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    let deltas = names.iter().filter(|n| n.ends_with(".delta")).count() as u64;
    r.values.insert("store_deltas".into(), deltas);
    r.values
        .insert("store_whole".into(), names.len() as u64 - deltas);
    r.values.insert("git_dir".into(), dir_bytes(git)?);
    let mut gc = git_cmd(ws, git);
    gc.args(["gc", "--quiet", "--prune=now"]);
    run_ok(gc)?;
    r.values.insert("git_dir_gc".into(), dir_bytes(git)?);

    // Undo every turn, newest first: the oldest version is rebuilt through the longest chain
    // of deltas.
    for _ in 0..turns {
        let start = Instant::now();
        store.undo(&fs, UndoOptions::default()).await?;
        push(r, "undo", start);
    }
    Ok(())
}

/// A tool call inside a recorded turn, as the agent and `shiro tool` make it: the paths the
/// call will change are captured first, with one flush.
async fn recorded_call(
    recording: &Recording<FsMutator>,
    tool: &dyn Tool,
    args: serde_json::Value,
) -> Result<shiro_tools::ToolOutput> {
    if let Ok(paths) = tool.touched_paths(recording.inner(), &args).await {
        recording.capture_ahead(&paths).await?;
    }
    Ok(tool.call(recording, args).await?)
}

/// The bare tool's edit, timed; then the file is given `text` back.
async fn bare_edit(
    workspace: &FsMutator,
    args: serde_json::Value,
    path: &Path,
    text: &str,
) -> Result<std::time::Duration> {
    let start = Instant::now();
    tools::edit_file().call(workspace, args).await?;
    let took = start.elapsed();
    fs::write(path, text.as_bytes())?;
    Ok(took)
}

fn push(r: &mut CaseResult, series: &str, start: Instant) {
    push_nanos(r, series, start.elapsed());
}

fn push_nanos(r: &mut CaseResult, series: &str, took: std::time::Duration) {
    let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
    r.series.entry(series.to_owned()).or_default().push(nanos);
}

/// The apparent size of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

fn read_list(list: &Path) -> Result<Vec<String>> {
    Ok(fs::read_to_string(list)?
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The turn's change to a file: its first bytes overwritten, same length.
fn post_image(mut bytes: Vec<u8>) -> Vec<u8> {
    const STAMP: &[u8] = b"turn-changed-it\n";
    let n = STAMP.len().min(bytes.len());
    bytes[..n].copy_from_slice(&STAMP[..n]);
    bytes
}

/// The files under `dir` of the workspace `ws`, as workspace paths, into `out`.
fn files_under(ws: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in fs::read_dir(ws.join(dir))? {
        let entry = entry?;
        let path = dir.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            files_under(ws, &path, out)?;
        } else {
            out.push(
                path.to_str()
                    .context("a generated name is UTF-8")?
                    .to_owned(),
            );
        }
    }
    Ok(())
}

/// Records one turn that rewrites every listed file, as a tool would, through the recorder
/// (their pre-images captured ahead, with one flush).
async fn record_rewrite(store: &UndoStore, fs: &FsMutator, list: &[String]) -> Result<TurnId> {
    let recording = store.recorder(fs.clone());
    recording.begin_turn(turn("bench rewrite")).await?;
    let paths = (list.iter())
        .map(|file| WorkspacePath::from_relative(file))
        .collect::<Result<Vec<_>, _>>()?;
    recording.capture_ahead(&paths).await?;
    for file in list {
        let path = WorkspacePath::from_relative(file)?;
        let bytes = fs.read(&path).await?;
        recording.write(&path, &post_image(bytes), None).await?;
    }
    recording
        .finish_turn()
        .await?
        .context("the rewrite turn recorded nothing")
}

/// Writes `mib` MiB beside the workspace (on its file system) without flushing them, as a
/// build running meanwhile would; `None` for none.
pub fn write_unflushed(ws: &Path, mib: usize) -> Result<Option<PathBuf>> {
    if mib == 0 {
        return Ok(None);
    }
    let path = ws.with_extension("unflushed");
    let block = vec![0x5au8; 1 << 20];
    let mut file = fs::File::create(&path)?;
    for _ in 0..mib {
        file.write_all(&block)?;
    }
    Ok(Some(path))
}

pub fn remove_unflushed(path: Option<PathBuf>) -> Result<()> {
    if let Some(path) = path {
        fs::remove_file(path)?;
    }
    Ok(())
}

/// Puts the pre-images back, so that a case starts from them even if an earlier case failed
/// half-way (untimed).
fn reset(ws: &Path, backup: &Path, list: &[String]) -> Result<()> {
    for file in list {
        fs::copy(backup.join(file), ws.join(file))?;
    }
    Ok(())
}

/// The same change as [`record_rewrite`], by plain writes (for the baselines).
fn rewrite_plain(ws: &Path, list: &[String]) -> Result<()> {
    for file in list {
        let path = ws.join(file);
        fs::write(&path, post_image(fs::read(&path)?))?;
    }
    Ok(())
}

fn patch_args(file: &Path) -> Result<serde_json::Value> {
    Ok(serde_json::json!({"patch": fs::read_to_string(file)?}))
}

/// A git command on the shadow git dir `git` whose work tree is `ws`, isolated from the
/// user's and the system's git configuration.
pub fn git_cmd(ws: &Path, git: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(ws)
        .env("GIT_DIR", git)
        .env("GIT_WORK_TREE", ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    cmd
}

/// The per-turn whole-worktree snapshot other agents take.
pub fn git_snapshot(ws: &Path, git: &Path) -> Command {
    let mut cmd = git_cmd(ws, git);
    cmd.env_remove("GIT_INDEX_FILE");
    let mut sh = Command::new("sh");
    sh.args(["-c", "git add -A && git write-tree"]);
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            sh.env(key, value);
        }
    }
    sh.current_dir(ws);
    sh
}

/// Runs a command to completion, failing with its stderr when it fails; returns its stdout.
pub fn run_ok(mut cmd: Command) -> Result<String> {
    let shown = format!("{:?}", cmd.get_program());
    let out = cmd.output().with_context(|| format!("start {shown}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{shown} {:?} failed ({}): {}",
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            stderr.trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
