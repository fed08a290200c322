//! The bash cases: one `bash` call that changes one file, and file-heavy commands, run bare
//! and through the overlay runner inside a recorded turn. An overlay call is also driven the
//! way the tool drives its runner (`begin`, the command, `finish`), with a [`Timed`] mutator
//! between the runner and the recorder, so that each phase of its cost is timed apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use shiro_tools::capture::{BashRunner, Direct, Ended, Overlay, Sandbox, SandboxMode};
use shiro_tools::tools::Bash;
use shiro_tools::{
    DirEntry, FsMutator, Incoming, Looked, Mutator, MutatorError, Stat, Tool, WorkspacePath,
};
use shiro_undo::{BashCapture, Recording, TurnStart, UndoOptions, UndoStore};

use shiro_tests::state_beside;

use crate::cases::{CaseResult, dir_bytes, git_snapshot, run_ok};

/// What a script prints last: how long its command took, in microseconds, timed by bash
/// itself (`$EPOCHREALTIME`, a builtin, so the timing starts no process).
const ELAPSED: &str = "bench-elapsed-us ";

/// The start of the line each one-file call rewrites (the edit target's marker line).
const MARKER: &str = "bench-marker: ";

/// `command` wrapped so that bash prints how long it took; the script fails if the command
/// does.
pub fn timed_script(command: &str) -> String {
    format!(
        "t0=${{EPOCHREALTIME/./}}; {command} || exit 1; t1=${{EPOCHREALTIME/./}}; \
         echo \"{ELAPSED}$((t1 - t0))\""
    )
}

/// The script that creates `files` small files under `gen/`, in 100 directories, with
/// bash builtins only (no process per file).
pub fn create_script(files: usize) -> String {
    let per_dir = files.div_ceil(100);
    format!(
        "mkdir gen && for ((d = 0; d < 100; d++)); do mkdir gen/d$d && \
         for ((f = 0; f < {per_dir}; f++)); do echo \"file $d $f\" > gen/d$d/f$f.txt; done; done"
    )
}

/// A file-heavy command and how the state before it is put back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heavy {
    /// The command (a [`timed_script`] is made of it).
    pub command: String,
    /// The one top-level path the command changes (`gen`, `tree`, `tree2`).
    pub target: String,
    /// Whether the target exists before the command (it removes it) or not (it makes it).
    pub existed: bool,
    /// A copy of the target's contents outside the workspace: what the command removes, or
    /// what it makes. `cp -R` of it is the baseline of the undo.
    pub backup: PathBuf,
}

fn turn(summary: &str) -> TurnStart {
    TurnStart {
        summary: summary.to_owned(),
        history_marker: 0,
        session: None,
    }
}

fn push(r: &mut CaseResult, series: &str, took: Duration) {
    let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
    r.series.entry(series.to_owned()).or_default().push(nanos);
}

/// Flushes the workspace's file system, untimed, so that each timed step starts with no
/// writeback pending (an overlay's unmount would otherwise wait for the previous step's).
pub(crate) fn settle(ws: &Path) -> Result<()> {
    let mut sync = Command::new("sync");
    sync.arg("-f").arg(ws);
    run_ok(sync).map(drop)
}

/// Waits until the layer directory `layers` is empty: the commit removes its layer (and what
/// the command removed, moved into it whole) on a blocking thread after the turn. Returns how
/// long that took from now, so that the next timing does not share the disk with it.
async fn layers_removed(layers: &Path) -> Result<Duration> {
    let start = Instant::now();
    while std::fs::read_dir(layers)?.next().is_some() {
        ensure!(
            start.elapsed() < Duration::from_secs(600),
            "the layers in {} were not removed",
            layers.display()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(start.elapsed())
}

/// Whether overlays can be used here: one file written through the overlay runner, bare,
/// must come back as one change applied to the workspace.
pub async fn probe(ws: &Path, shiro: &Path) -> Result<()> {
    let workspace = FsMutator::new(ws)?.inline();
    // The layers are made in the state directory, which opening a store makes; the probe
    // opens none.
    let state = state_beside(ws);
    std::fs::create_dir_all(state.dir())?;
    let bash = Bash::new(Arc::new(Overlay::new(shiro, state.layers_dir())));
    let out = bash
        .call(
            &workspace,
            serde_json::json!({"command": "echo probe > probe"}),
        )
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    ensure!(
        out.capture == Some(shiro_tools::capture::CaptureMode::Overlay),
        "the overlay runner ran the command another way ({:?})",
        out.capture
    );
    ensure!(
        out.changes.len() == 1 && std::fs::read_to_string(ws.join("probe"))? == "probe\n",
        "a command's write did not come through the overlay: {}",
        out.text
    );
    Ok(())
}

/// The overlay helper the `shiro` binary at `shiro` runs: `shiro-bash-helper` beside it
/// (`cargo xtask bench` builds it), else `shiro` itself (see `headless::overlay_helper`).
pub fn helper_of(shiro: &Path) -> PathBuf {
    shiro_agent::headless::helper_beside(shiro).unwrap_or_else(|| shiro.to_path_buf())
}

/// The ways one repetition of the one-file case runs its `sed -i`.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// `bash -c` spawned directly with `std::process::Command`, output captured.
    Spawn,
    /// The same through the overlay's init helper alone (`shiro-bash-helper
    /// __shiro-bash-init bash -c`), outside any namespace: what one more start of the
    /// helper costs.
    Init,
    /// The bash tool with `Direct`, on a bare `FsMutator`.
    Bare,
    /// The bash tool with `Overlay`, in a recorded turn, with no sandbox.
    Overlay,
    /// The same with the helper started ahead, as the agent runs commands
    /// (`Overlay::start_ahead`).
    Ahead,
    /// The same with the default sandbox (`workspace-write`), as the agent runs commands:
    /// the helper started ahead too.
    Sandboxed,
    /// The same turn driven phase by phase.
    Phased,
}

/// A workspace of the one-file case, with its shadow git directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OneFileWs {
    pub ws: PathBuf,
    pub git: PathBuf,
}

/// The series of the one-file case's workspace `index`, named `series`.
pub fn one_file_series(index: usize, series: &str) -> String {
    format!("{index}/{series}")
}

/// The one-file case: per repetition, in each workspace in turn (so that a change in the
/// machine's load falls on every size alike), the marker line of `file` is rewritten by
/// `sed -i` in each [`Way`] (forward order on even repetitions, backward on odd ones); a
/// shadow-git snapshot is timed right after the overlay call. With `dirty_mib`, only the
/// bare and overlay calls run, each after `dirty_mib` MiB were written beside the workspace
/// and left unflushed. Series are named by [`one_file_series`].
pub async fn one_file(
    r: &mut CaseResult,
    workspaces: &[OneFileWs],
    file: &str,
    reps: usize,
    shiro: &Path,
    dirty_mib: usize,
) -> Result<()> {
    let layers = workspaces
        .first()
        .map(|first| state_beside(&first.ws).layers_dir())
        .unwrap_or_default();
    let sandboxed = Bash::new(Arc::new(
        Overlay::new(shiro, &layers)
            .sandbox(Sandbox::new(SandboxMode::WorkspaceWrite))
            .start_ahead(),
    ));
    let ahead = Bash::new(Arc::new(Overlay::new(shiro, &layers).start_ahead()));
    let overlay: Arc<dyn BashRunner> = Arc::new(Overlay::new(shiro, layers));
    let tool = Bash::new(Arc::clone(&overlay));
    let bare = Bash::new(Arc::new(Direct));
    let mut opened = Vec::new();
    for OneFileWs { ws, .. } in workspaces {
        let workspace = FsMutator::new(ws)?.inline();
        let store = UndoStore::open(&state_beside(ws), shiro_undo::StoreOptions::default()).await?;
        let recording = store.recorder(workspace.clone());
        opened.push((workspace, store, recording));
    }
    let ways: &[Way] = if dirty_mib > 0 {
        &[Way::Bare, Way::Overlay]
    } else {
        &[
            Way::Spawn,
            Way::Init,
            Way::Bare,
            Way::Overlay,
            Way::Ahead,
            Way::Sandboxed,
            Way::Phased,
        ]
    };
    let mut step = 0usize;
    for rep in 0..reps {
        let order: Vec<Way> = if rep % 2 == 0 {
            ways.to_vec()
        } else {
            ways.iter().rev().copied().collect()
        };
        for (i, (OneFileWs { ws, git }, (workspace, store, recording))) in
            workspaces.iter().zip(&opened).enumerate()
        {
            let series = |name: &str| one_file_series(i, name);
            for &way in &order {
                // A new value each time, so that every pre-image is one the store has not
                // seen.
                step += 1;
                let command = format!("sed -i 's/^{MARKER}.*$/{MARKER}{step}/' {file}");
                settle(ws)?;
                let dirty = crate::cases::write_unflushed(ws, dirty_mib)?;
                match way {
                    Way::Spawn => {
                        let mut cmd = Command::new("bash");
                        cmd.arg("-c").arg(&command).current_dir(ws);
                        let start = Instant::now();
                        run_ok(cmd)?;
                        push(r, &series("spawn"), start.elapsed());
                    }
                    Way::Init => {
                        let mut cmd = Command::new(shiro);
                        cmd.arg(shiro_tools::capture::HELPER_INIT)
                            .arg(ws)
                            .args(Sandbox::off().to_args())
                            .args(["bash", "-c", &command])
                            .current_dir(ws);
                        let start = Instant::now();
                        run_ok(cmd)?;
                        push(r, &series("init"), start.elapsed());
                    }
                    Way::Bare => {
                        let start = Instant::now();
                        let out = bare
                            .call(workspace, serde_json::json!({ "command": command }))
                            .await?;
                        push(r, &series("bare"), start.elapsed());
                        ensure!(
                            out.text.contains("[exit code 0]"),
                            "sed failed: {}",
                            out.text
                        );
                    }
                    Way::Overlay | Way::Ahead | Way::Sandboxed => {
                        let (tool, name) = match way {
                            Way::Overlay => (&tool, "overlay"),
                            Way::Ahead => (&ahead, "ahead"),
                            _ => (&sandboxed, "sandboxed"),
                        };
                        let start = Instant::now();
                        let changed = tool_turn(recording, tool, &command).await?;
                        push(r, &series(name), start.elapsed());
                        ensure!(
                            changed == 1,
                            "the {name} call recorded {changed} changes, not 1"
                        );
                        if matches!(way, Way::Overlay) && dirty_mib == 0 {
                            let start = Instant::now();
                            run_ok(git_snapshot(ws, git))?;
                            push(r, &series("git"), start.elapsed());
                        }
                    }
                    Way::Phased => {
                        let phases = phased_turn(store, workspace, &overlay, &command).await?;
                        ensure!(
                            phases.changes == 1,
                            "the phased call recorded {} changes, not 1",
                            phases.changes
                        );
                        phases.push_into(r, &series("ph"));
                    }
                }
                crate::cases::remove_unflushed(dirty)?;
                let text = std::fs::read_to_string(ws.join(file))?;
                ensure!(
                    text.contains(&format!("{MARKER}{step}\n")),
                    "the marker line does not hold the value of step {step}"
                );
            }
        }
    }
    Ok(())
}

/// One recorded turn around one bash call, as `shiro tool bash` makes it; returns how many
/// changes the call reported.
async fn tool_turn(recording: &Recording<FsMutator>, tool: &Bash, command: &str) -> Result<usize> {
    recording.begin_turn(turn("bench bash")).await?;
    recording.note_bash(BashCapture::Overlay, &[]).await;
    let called = tool
        .call(recording, serde_json::json!({ "command": command }))
        .await;
    if let Ok(out) = &called {
        recording.note_tool("bash", &out.changes).await;
        recording.note_bash(BashCapture::Overlay, &[]).await;
    }
    recording.finish_turn().await?;
    let out = called?;
    ensure!(
        out.capture == Some(shiro_tools::capture::CaptureMode::Overlay),
        "the call was not captured by the overlay: {}",
        out.text
    );
    ensure!(
        out.text.contains("[exit code 0]"),
        "the command failed: {}",
        out.text
    );
    Ok(out.changes.len())
}

/// The times of one overlay call driven phase by phase.
struct Phases {
    begin_turn: Duration,
    /// `BashRunner::begin`: the layer made under `.shiro/bash/`.
    layer: Duration,
    /// From spawning the helper to its exit: namespaces, mount, the init helper, the command,
    /// and the unmount when the namespace goes.
    run: Duration,
    /// `finish` until the pre-images are asked for: the walk of the upper layer.
    walk: Duration,
    /// The recorder capturing the pre-images, with one flush (`Mutator::prepare`).
    prepare: Duration,
    /// From then to the end of the last change applied.
    apply: Duration,
    /// From then to the end of `finish`: mostly the layer's removal.
    discard: Duration,
    /// `finish_turn`: the pre-images stored as blobs, the turn committed to the log.
    finish_turn: Duration,
    total: Duration,
    /// What the command printed.
    output: String,
    /// How many changes the commit reported.
    changes: usize,
}

impl Phases {
    fn push_into(&self, r: &mut CaseResult, prefix: &str) {
        for (name, took) in [
            ("begin_turn", self.begin_turn),
            ("layer", self.layer),
            ("run", self.run),
            ("walk", self.walk),
            ("prepare", self.prepare),
            ("apply", self.apply),
            ("discard", self.discard),
            ("finish_turn", self.finish_turn),
            ("total", self.total),
            (
                "commit",
                self.walk + self.prepare + self.apply + self.discard + self.finish_turn,
            ),
        ] {
            push(r, &format!("{prefix}_{name}"), took);
        }
    }
}

/// One recorded turn whose bash call is driven as the tool drives its runner: `begin`, the
/// command (output collected, process group of its own), `finish`.
async fn phased_turn(
    store: &UndoStore,
    workspace: &FsMutator,
    runner: &Arc<dyn BashRunner>,
    command: &str,
) -> Result<Phases> {
    let marks = Arc::new(Mutex::new(Marks::default()));
    let recording = store.recorder(workspace.clone());
    let timed = Timed {
        inner: recording,
        marks: Arc::clone(&marks),
    };
    let t0 = Instant::now();
    timed.inner.begin_turn(turn("bench bash, phased")).await?;
    let t1 = Instant::now();
    let result = phased_call(&timed, runner, command).await;
    let t4 = Instant::now();
    if let Ok((captured, _, _, _)) = &result {
        timed.inner.note_tool("bash", &captured.changes).await;
        timed.inner.note_bash(BashCapture::Overlay, &[]).await;
    }
    timed.inner.finish_turn().await?;
    let t5 = Instant::now();
    let (captured, t2, t3, output) = result?;
    let marks = *marks.lock().expect("no holder of the lock panics");
    let (Some(prepare_start), Some(prepare_end), Some(last)) = (
        marks.prepare_start,
        marks.prepare_end,
        marks.last_change_end,
    ) else {
        bail!("the command changed nothing: {output}");
    };
    Ok(Phases {
        begin_turn: t1 - t0,
        layer: t2 - t1,
        run: t3 - t2,
        walk: prepare_start - t3,
        prepare: prepare_end - prepare_start,
        apply: last - prepare_end,
        discard: t4 - last,
        finish_turn: t5 - t4,
        total: t5 - t0,
        output,
        changes: captured.changes.len(),
    })
}

/// `begin`, the command, `finish`: returns what was captured, when the command was
/// started and when it ended, and its output.
async fn phased_call(
    timed: &Timed<Recording<FsMutator>>,
    runner: &Arc<dyn BashRunner>,
    command: &str,
) -> Result<(shiro_tools::capture::Captured, Instant, Instant, String)> {
    let capture = runner.begin(timed).await?;
    let started = Instant::now();
    let out = capture
        .command("bash", command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .output()
        .await
        .context("run the overlay helper")?;
    let ended = Instant::now();
    let captured = capture.finish(timed, Ended::Exited(out.status)).await?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    ensure!(
        out.status.success(),
        "the command failed ({}): {text}",
        out.status
    );
    Ok((captured, started, ended, text))
}

/// The microseconds a [`timed_script`] printed, as nanoseconds.
fn elapsed_in(output: &str) -> Result<u64> {
    output
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(ELAPSED))
        .and_then(|us| us.trim().parse::<u64>().ok())
        .map(|us| us * 1_000)
        .with_context(|| format!("the script printed no time: {output}"))
}

fn push_nanos(r: &mut CaseResult, series: &str, nanos: u64) {
    r.series.entry(series.to_owned()).or_default().push(nanos);
}

/// `cp -R from to`, then `sync -f` of the workspace's file system: returns the time of the
/// copy, and of the copy and the flush together.
fn copy_timed(from: &Path, to: &Path, ws: &Path) -> Result<(Duration, Duration)> {
    let mut cp = Command::new("cp");
    cp.arg("-R").arg(from).arg(to);
    let mut sync = Command::new("sync");
    sync.arg("-f").arg(ws);
    let start = Instant::now();
    run_ok(cp)?;
    let copied = start.elapsed();
    run_ok(sync)?;
    Ok((copied, start.elapsed()))
}

/// The file-heavy case: per repetition, the command run bare (the bash tool with `Direct`)
/// then undone by hand and the `cp -R` baseline of its undo, and the command run through the
/// overlay in a recorded turn (driven phase by phase) then undone by `UndoStore::undo`; the
/// bare and overlay halves swap order on odd repetitions.
pub async fn heavy(
    r: &mut CaseResult,
    ws: &Path,
    heavy: &Heavy,
    reps: usize,
    shiro: &Path,
) -> Result<()> {
    let workspace = FsMutator::new(ws)?.inline();
    let overlay: Arc<dyn BashRunner> = Arc::new(Overlay::new(shiro, state_beside(ws).layers_dir()));
    let bare = Bash::new(Arc::new(Direct));
    let script = timed_script(&heavy.command);
    let target = ws.join(&heavy.target);
    ensure!(
        target.exists() == heavy.existed,
        "{} is not as the case expects before it starts",
        target.display()
    );
    r.values.insert("bytes".into(), dir_bytes(&heavy.backup)?);
    for rep in 0..reps {
        for overlay_half in [rep % 2 == 1, rep % 2 == 0] {
            if overlay_half {
                // Each repetition starts from an empty store, as a command over files the
                // store has never seen does: every pre-image is stored anew.
                let store =
                    UndoStore::open(&state_beside(ws), shiro_undo::StoreOptions::default()).await?;
                settle(ws)?;
                let phases = phased_turn(&store, &workspace, &overlay, &script).await?;
                push(
                    r,
                    "ov_background",
                    layers_removed(&state_beside(ws).layers_dir()).await?,
                );
                push_nanos(r, "ov_cmd", elapsed_in(&phases.output)?);
                phases.push_into(r, "ov");
                r.values.insert("changes".into(), phases.changes as u64);
                settle(ws)?;
                let start = Instant::now();
                store.undo(&workspace, UndoOptions::default()).await?;
                push(r, "undo", start.elapsed());
                drop(store);
                std::fs::remove_dir_all(state_beside(ws).undo_dir())?;
            } else {
                settle(ws)?;
                let start = Instant::now();
                let out = bare
                    .call(&workspace, serde_json::json!({ "command": script }))
                    .await?;
                push(r, "native_call", start.elapsed());
                ensure!(
                    out.text.contains("[exit code 0]"),
                    "the command failed: {}",
                    out.text
                );
                push_nanos(r, "native_cmd", elapsed_in(&out.text)?);
                // Put back by hand: the removed tree copied back, or what was made removed.
                settle(ws)?;
                let by_hand = if heavy.existed {
                    copy_timed(&heavy.backup, &target, ws)?.0
                } else {
                    let mut rm = Command::new("rm");
                    rm.arg("-rf").arg(&target);
                    let start = Instant::now();
                    run_ok(rm)?;
                    start.elapsed()
                };
                push(r, "by_hand", by_hand);
                // The baseline of the undo: `cp -R` of the files the turn changed.
                if heavy.existed {
                    std::fs::remove_dir_all(&target)?;
                }
                settle(ws)?;
                let (copied, synced) = copy_timed(&heavy.backup, &target, ws)?;
                push(r, "cp", copied);
                push(r, "cp_sync", synced);
                if !heavy.existed {
                    std::fs::remove_dir_all(&target)?;
                }
            }
            ensure!(
                target.exists() == heavy.existed,
                "{} was not put back",
                target.display()
            );
        }
    }
    Ok(())
}

/// The big-file case: per repetition, `cp` of the file `file` of the workspace (the
/// baseline), then `echo tail >> FILE` through the overlay in a recorded turn (driven phase
/// by phase, from an empty store) and its undo. The file is past the store's streaming size,
/// so the case's peak memory (its `VmHWM`) shows what the turn and the undo hold.
pub async fn big_append(
    r: &mut CaseResult,
    ws: &Path,
    file: &str,
    reps: usize,
    shiro: &Path,
) -> Result<()> {
    let workspace = FsMutator::new(ws)?.inline();
    let overlay: Arc<dyn BashRunner> = Arc::new(Overlay::new(shiro, state_beside(ws).layers_dir()));
    let script = timed_script(&format!("echo tail >> {file}"));
    let target = ws.join(file);
    let len = std::fs::metadata(&target)?.len();
    r.values.insert("bytes".into(), len);
    let copy = ws.with_file_name("big-copy");
    for _ in 0..reps {
        settle(ws)?;
        let mut cp = Command::new("cp");
        cp.arg(&target).arg(&copy);
        let start = Instant::now();
        run_ok(cp)?;
        push(r, "cp", start.elapsed());
        std::fs::remove_file(&copy)?;

        let store = UndoStore::open(&state_beside(ws), shiro_undo::StoreOptions::default()).await?;
        settle(ws)?;
        let phases = phased_turn(&store, &workspace, &overlay, &script).await?;
        phases.push_into(r, "ov");
        ensure!(
            std::fs::metadata(&target)?.len() == len + 5,
            "the command did not append to {file}"
        );
        settle(ws)?;
        let start = Instant::now();
        store.undo(&workspace, UndoOptions::default()).await?;
        push(r, "undo", start.elapsed());
        ensure!(
            std::fs::metadata(&target)?.len() == len,
            "the undo did not put {file} back"
        );
        drop(store);
        std::fs::remove_dir_all(state_beside(ws).undo_dir())?;
    }
    Ok(())
}

/// When the commit of a captured command reached each point, as a [`Timed`] mutator saw it.
#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    prepare_start: Option<Instant>,
    prepare_end: Option<Instant>,
    last_change_end: Option<Instant>,
}

/// A mutator that notes when `prepare` starts and ends and when each change ends, and
/// otherwise hands every call to `inner` unchanged (defaults included, so that the inner
/// mutator's own versions run).
struct Timed<M> {
    inner: M,
    marks: Arc<Mutex<Marks>>,
}

impl<M> Timed<M> {
    fn note(&self, what: impl FnOnce(&mut Marks)) {
        what(&mut self.marks.lock().expect("no holder of the lock panics"));
    }

    async fn change<T>(
        &self,
        op: impl Future<Output = Result<T, MutatorError>>,
    ) -> Result<T, MutatorError> {
        let result = op.await;
        self.note(|m| m.last_change_end = Some(Instant::now()));
        result
    }
}

#[async_trait]
impl<M: Mutator> Mutator for Timed<M> {
    fn root(&self) -> &Path {
        self.inner.root()
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.stat(path).await
    }

    async fn real_path(&self, path: &WorkspacePath) -> Result<WorkspacePath, MutatorError> {
        self.inner.real_path(path).await
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        self.inner.read(path).await
    }

    async fn read_into(&self, path: &WorkspacePath, buf: Vec<u8>) -> Result<Vec<u8>, MutatorError> {
        self.inner.read_into(path, buf).await
    }

    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        self.inner.read_with(path, sink).await
    }

    async fn open_read(&self, path: &WorkspacePath) -> Result<Option<std::fs::File>, MutatorError> {
        self.inner.open_read(path).await
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        self.inner.read_dir(path).await
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        self.change(self.inner.write(path, bytes, mode)).await
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        self.change(self.inner.set_mode(path, mode)).await
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.change(self.inner.create_dir(path)).await
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.change(self.inner.symlink(target, path)).await
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.change(self.inner.remove_file(path)).await
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        self.change(self.inner.remove_dir(path)).await
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        self.change(self.inner.rename(from, to)).await
    }

    async fn remove_tree(
        &self,
        path: &WorkspacePath,
        listed: &[DirEntry],
        aside: &Path,
    ) -> Result<(), MutatorError> {
        self.change(self.inner.remove_tree(path, listed, aside))
            .await
    }

    async fn move_tree_in(
        &self,
        source: &Path,
        path: &WorkspacePath,
        listed: &[WorkspacePath],
    ) -> Result<bool, MutatorError> {
        self.change(self.inner.move_tree_in(source, path, listed))
            .await
    }

    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        self.inner.real_stat(path).await
    }

    async fn real_stat_many(
        &self,
        paths: &[WorkspacePath],
        read_below: u64,
    ) -> Vec<Result<Looked, MutatorError>> {
        self.inner.real_stat_many(paths, read_below).await
    }

    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.change(self.inner.overwrite(path, bytes, mode)).await
    }

    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn std::io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.change(self.inner.overwrite_from(path, source, len, mode))
            .await
    }

    // Without this, the trait's default would copy the layer's file in through `write`, and
    // the commit timed would not be the one shiro makes (a rename).
    async fn adopt(
        &self,
        source: &Path,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(), MutatorError> {
        self.change(self.inner.adopt(source, path, mode)).await
    }

    async fn link_out(&self, path: &WorkspacePath, to: &Path) -> Result<bool, MutatorError> {
        self.inner.link_out(path, to).await
    }

    async fn prepare(
        &self,
        paths: &[WorkspacePath],
        incoming: &[Incoming<'_>],
    ) -> Result<(), MutatorError> {
        self.note(|m| m.prepare_start = Some(Instant::now()));
        let result = self.inner.prepare(paths, incoming).await;
        self.note(|m| m.prepare_end = Some(Instant::now()));
        result
    }

    async fn remove_partial_writes(&self, paths: &[WorkspacePath]) -> Result<usize, MutatorError> {
        self.inner.remove_partial_writes(paths).await
    }

    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        self.inner.sync(paths).await
    }
}
