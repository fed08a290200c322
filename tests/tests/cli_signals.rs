//! Ctrl-C, SIGTERM and SIGHUP through the `shiro` binary (issue 13, item 7): the signals are caught
//! from startup; a file-changing command finishes its change (or, interrupted before it
//! began one, changes nothing), says which, and exits 130; a second signal stops it at once;
//! `bash` is stopped at the first signal, with its process group.
//!
//! The random trials interrupt undo, redo and apply-patch of 20,000 files. Each one costs
//! several full passes over the 20,000 files, so `cargo xtask test` runs one trial of each
//! operation (the suite must stay well within CI's budget on 2 cores);
//! `SHIRO_CRASH_TRIALS` (`cargo xtask soak` sets 200) gives one per 40, and
//! `SHIRO_SIGNAL_SEED` replays a run; the seed is printed with every failure.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{Rng, Run, Ws};

/// A workspace on tmpfs when there is one: the test is about signals, not the disk, and
/// 20,000 files on a slow disk would take minutes for nothing.
fn fast_ws() -> Ws {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
        return Ws::new_in(shm);
    }
    Ws::new()
}

/// The signals `pid` catches, as the bit mask of `/proc/PID/status`'s `SigCgt`.
fn caught(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}

/// Waits until `child` catches SIGINT, SIGTERM and SIGHUP: from then on a signal reaches
/// shiro's handler, never the default one that kills the process part-way. Shiro registers
/// them before it does any work, so the wait is short; the bound only turns a hang into a
/// failure.
fn wait_until_caught(child: &mut Child) {
    // Bit N-1 for signal N: SIGHUP 1, SIGINT 2, SIGTERM 15.
    const ALL: u64 = 1 | 1 << 1 | 1 << 14;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mask = caught(child.id());
        if mask & ALL == ALL {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("shiro ended ({status}) before it caught SIGINT, SIGTERM and SIGHUP");
        }
        assert!(
            Instant::now() < deadline,
            "shiro never caught SIGINT, SIGTERM and SIGHUP (SigCgt {mask:x}): a signal would kill it part-way"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signal(child: &Child, signal: Signal) {
    // A child that exited but was not waited for is a zombie: the signal is then lost, as a
    // late Ctrl-C is, and its pid cannot have been reused.
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// Waits for `child` to end by itself, failing (and killing it) if it does not: a command
/// told to stop at once must not wait for anything.
fn wait_for_exit(ws: &Ws, mut child: Child) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("shiro did not stop: {}", ws.finish(child).show());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    ws.finish(child)
}

const PATCH: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** Add File: new.txt\n+new\n*** End Patch\n";

/// A hang-up (the terminal closed, the SSH connection dropped) is taken for SIGTERM, and
/// SIGTERM does what SIGINT does here.
#[test]
fn a_signal_while_apply_patch_reads_its_patch_stops_it_before_any_change() {
    for sent in [Signal::SIGINT, Signal::SIGHUP] {
        let ws = Ws::new();
        ws.write("a.txt", "one\ntwo\n");
        let before = ws.tree();
        let mut child = ws.command(&["apply-patch"]).spawn().unwrap();
        // It now waits for the patch on its standard input; the signal lands before the change.
        wait_until_caught(&mut child);
        signal(&child, sent);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(PATCH.as_bytes()).unwrap();
        drop(stdin);
        let run = ws.finish(child);
        insta::allow_duplicates! {
            insta::assert_snapshot!(run.show(), @r"
            exit 130
            --- stderr
            shiro: interrupted; finishing the current change so the workspace and the undo log stay consistent (interrupt again to stop at once)
            shiro: interrupted before the change began; nothing was changed
            ");
        }
        assert_eq!(ws.tree(), before, "{sent}");
        assert_eq!(ws.ok(&["log"]).stdout, "no turns to undo\n");
    }
}

#[test]
fn sigterm_then_sigint_stops_at_once() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\n");
    let before = ws.tree();
    let mut child = ws.command(&["apply-patch"]).spawn().unwrap();
    wait_until_caught(&mut child);
    // The patch never comes: only "stop now" ends the command.
    signal(&child, Signal::SIGTERM);
    signal(&child, Signal::SIGINT);
    let run = wait_for_exit(&ws, child);
    insta::assert_snapshot!(run.show(), @r"
    exit 130
    --- stderr
    shiro: interrupted; finishing the current change so the workspace and the undo log stay consistent (interrupt again to stop at once)
    shiro: stopped at once; the change may be partly made: the next shiro command completes an undo or redo that was under way, and records a turn that was under way so that `shiro undo` reverts it
    ");
    assert_eq!(ws.tree(), before);
    ws.ok(&["log"]);
}

#[test]
fn bash_stops_at_the_first_signal_and_its_processes_are_killed() {
    let ws = Ws::new();
    // Without capture, so the pid file is written straight into the workspace (with the
    // overlay, `bash_capture.rs` checks the same through the command's PID namespace).
    std::fs::write(
        ws.config.path().join("config.toml"),
        "[bash]\ncapture = \"off\"\n",
    )
    .unwrap();
    // `exec` makes the shell itself the sleeping process, with the pid it wrote.
    let args = serde_json::json!({"command": "echo $$ > pid.txt; exec sleep 600"}).to_string();
    let mut child = ws
        .command(&["tool", "bash", "--args", &args])
        .spawn()
        .unwrap();
    wait_until_caught(&mut child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(ws.path().join("pid.txt"))
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "bash never started its command");
        std::thread::sleep(Duration::from_millis(5));
    };
    signal(&child, Signal::SIGINT);
    let run = wait_for_exit(&ws, child);
    assert_eq!(run.code, 130, "{}", run.show());
    assert!(
        run.stderr
            .contains("shiro: interrupted; the command was stopped\n"),
        "{}",
        run.show()
    );
    // Killed with its group when shiro stopped the call: gone, or a zombie waiting to be
    // reaped by whoever inherited it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(") ")
            .next()
            .and_then(|rest| rest.chars().next());
        if stat.is_empty() || state == Some('Z') {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "bash's command {pid} outlived shiro: {stat}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 200;

type Tree = BTreeMap<String, String>;

/// Writes the 20,000 files, and the patch that changes them all (outside the workspace).
fn setup(ws: &Ws, patch: &Path) {
    let mut text = String::from("*** Begin Patch\n");
    for d in 0..DIRS {
        let dir = ws.path().join(format!("d{d:03}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(
                dir.join(format!("f{f:03}")),
                format!("file {d} {f}\nsame\n"),
            )
            .unwrap();
            text +=
                &format!("*** Update File: d{d:03}/f{f:03}\n@@\n-file {d} {f}\n+FILE {d} {f}\n");
        }
    }
    text += "*** End Patch\n";
    std::fs::write(patch, text).unwrap();
}

/// Where two trees differ, in short: 20,000 entries are too many to print.
fn differ(tree: &Tree, expected: &Tree) -> String {
    let wrong: Vec<&String> = expected
        .keys()
        .chain(tree.keys())
        .filter(|path| tree.get(*path) != expected.get(*path))
        .collect();
    format!(
        "{} paths differ, e.g. {:?}",
        wrong.len(),
        wrong.iter().take(5).collect::<Vec<_>>()
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    ApplyPatch,
    Undo,
    Redo,
}

struct Bench<'a> {
    ws: &'a Ws,
    patch: String,
    before: Tree,
    after: Tree,
    seed: u64,
}

impl Bench<'_> {
    fn args(&self, op: Op) -> Vec<&str> {
        match op {
            Op::ApplyPatch => vec!["apply-patch", &self.patch],
            Op::Undo => vec!["undo"],
            Op::Redo => vec!["redo"],
        }
    }

    /// The tree `op` starts from and the one it leaves.
    fn ends(&self, op: Op) -> (&Tree, &Tree) {
        match op {
            Op::ApplyPatch | Op::Redo => (&self.before, &self.after),
            Op::Undo => (&self.after, &self.before),
        }
    }

    /// Runs `op` to its end, checks it, and returns how long it took.
    fn run(&self, op: Op) -> Duration {
        let start = Instant::now();
        let run = self.ws.run(&self.args(op));
        let took = start.elapsed();
        assert_eq!(run.code, 0, "{op:?} (seed {}): {}", self.seed, run.show());
        let tree = self.ws.tree();
        let (_, end) = self.ends(op);
        assert!(
            tree == *end,
            "{op:?} (seed {}): {}",
            self.seed,
            differ(&tree, end)
        );
        took
    }

    /// Runs `op`, interrupts it after `delay`, and checks that the tree is exactly where it
    /// started or where it ends, as the exit code and the message say. Returns whether the
    /// change was made.
    fn interrupt(&self, op: Op, delay: Duration) -> bool {
        let mut child = self.ws.command(&self.args(op)).spawn().unwrap();
        wait_until_caught(&mut child);
        std::thread::sleep(delay);
        signal(&child, Signal::SIGINT);
        let run = self.ws.finish(child);
        let context = format!("{op:?} interrupted after {delay:?} (seed {})", self.seed);
        let tree = self.ws.tree();
        let (start, end) = self.ends(op);
        let reverse = if op == Op::Undo { "redo" } else { "undo" };
        let finished = format!(
            "shiro: interrupted; the change was finished and recorded (`shiro {reverse}` reverts it)\n"
        );
        let made = match run.code {
            // The signal came after the command was done.
            0 => true,
            130 if run.stderr.ends_with(&finished) => true,
            130 if run
                .stderr
                .ends_with("shiro: interrupted before the change began; nothing was changed\n") =>
            {
                false
            }
            _ => panic!("{context}: unexpected ending\n{}", run.show()),
        };
        if run.code == 130 {
            assert!(
                run.stderr
                    .starts_with("shiro: interrupted; finishing the current change"),
                "{context}\n{}",
                run.show()
            );
        }
        let expected = if made { end } else { start };
        assert!(
            tree == *expected,
            "{context}: the exit code and message say the change was {}made, but {}\n{}",
            if made { "" } else { "not " },
            differ(&tree, expected),
            run.show()
        );
        made
    }

    /// Runs `op` and sends SIGINT then SIGTERM after `delay`: "stop now". Whatever the
    /// command was doing, the next command (`shiro log`) finishes an undo or redo that was
    /// under way, and records a turn that was under way, which undo takes back. Returns the
    /// tree after that next command.
    fn stop_now(&self, op: Op, delay: Duration) -> Tree {
        let mut child = self.ws.command(&self.args(op)).spawn().unwrap();
        wait_until_caught(&mut child);
        std::thread::sleep(delay);
        signal(&child, Signal::SIGINT);
        signal(&child, Signal::SIGTERM);
        let run = self.ws.finish(child);
        let context = format!(
            "{op:?} stopped now after {delay:?} (seed {})\n{}",
            self.seed,
            run.show()
        );
        assert!(matches!(run.code, 0 | 130), "{context}");
        let log = self.ws.run(&["log"]);
        assert_eq!(log.code, 0, "{context}\nthen log: {}", log.show());
        let tree = self.ws.tree();
        let (start, end) = self.ends(op);
        let stopped = run.stderr.contains("shiro: stopped at once");
        if !stopped && run.stderr.contains("nothing was changed") {
            assert!(tree == *start, "{context}: {}", differ(&tree, start));
        } else if !stopped {
            assert!(tree == *end, "{context}: {}", differ(&tree, end));
        } else if op != Op::ApplyPatch {
            assert!(
                tree == *start || tree == *end,
                "{context}: the next command did not complete the {op:?}: {}",
                differ(&tree, end)
            );
        }
        tree
    }
}

#[test]
fn interrupting_undo_redo_and_apply_patch_of_20000_files_leaves_before_or_after() {
    let trials: u64 = std::env::var("SHIRO_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .map_or(1, |n: u64| (n / 40).max(1));
    let seed: u64 = support::seed_from("SHIRO_SIGNAL_SEED");
    eprintln!("seed {seed} (SHIRO_SIGNAL_SEED replays it), {trials} trial(s) per operation");
    let mut rng = Rng(seed);
    let ws = fast_ws();
    let patches = tempfile::tempdir().unwrap();
    let patch = patches.path().join("all.patch");
    setup(&ws, &patch);
    let before = ws.tree();
    let mut bench = Bench {
        ws: &ws,
        patch: patch.to_str().unwrap().to_owned(),
        before,
        after: Tree::new(),
        seed,
    };
    // One uninterrupted pass of each gives the after tree and how long each takes, so the
    // signals land anywhere from the start to a little past the end.
    let start = Instant::now();
    ws.ok(&bench.args(Op::ApplyPatch));
    let mut took = BTreeMap::from([(Op::ApplyPatch, start.elapsed())]);
    bench.after = ws.tree();
    assert_ne!(bench.after, bench.before);
    took.insert(Op::Undo, bench.run(Op::Undo));
    took.insert(Op::Redo, bench.run(Op::Redo));
    let moment = |rng: &mut Rng, op: Op| {
        let span = took[&op].as_micros() as u64 * 6 / 5;
        Duration::from_micros(rng.below(span))
    };
    // The tree is now after the patch, its turn the newest.
    for _ in 0..trials {
        if !bench.interrupt(Op::Undo, moment(&mut rng, Op::Undo)) {
            bench.run(Op::Undo);
        }
        if !bench.interrupt(Op::Redo, moment(&mut rng, Op::Redo)) {
            bench.run(Op::Redo);
        }
        bench.run(Op::Undo);
        // Applying it again records a new turn, the newest, and the tree is after it.
        if !bench.interrupt(Op::ApplyPatch, moment(&mut rng, Op::ApplyPatch)) {
            bench.run(Op::ApplyPatch);
        }
    }
    // Stop now, at a random moment of each; the next command finishes or records the
    // change, and the tree goes back to after the patch.
    if bench.stop_now(Op::Undo, moment(&mut rng, Op::Undo)) != bench.before {
        bench.run(Op::Undo);
    }
    if bench.stop_now(Op::Redo, moment(&mut rng, Op::Redo)) != bench.after {
        bench.run(Op::Redo);
    }
    bench.run(Op::Undo);
    let tree = bench.stop_now(Op::ApplyPatch, moment(&mut rng, Op::ApplyPatch));
    if tree != bench.before {
        // A patch stopped part-way is recorded as a turn of what it changed: undo reverts it.
        bench.run(Op::Undo);
    }
    bench.run(Op::ApplyPatch);
    // Nothing was left half done: the log is clean and the newest turn undoes cleanly.
    let log = ws.ok(&["log"]);
    assert!(log.stderr.is_empty(), "seed {seed}: {}", log.show());
    assert!(
        log.stdout.contains("next to undo: clean"),
        "seed {seed}: {}",
        log.show()
    );
}

#[test]
fn the_session_catches_signals_from_its_start_ignores_sigint_between_turns_and_ends_at_sigterm_or_sighup()
 {
    let ws = Ws::new();
    // Between turns, SIGINT finds shiro's handler (at a terminal the line editor reads
    // Ctrl-C as a key), never the default one; the session goes on.
    let mut child = ws.command(&[]).spawn().unwrap();
    wait_until_caught(&mut child);
    signal(&child, Signal::SIGINT);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"/exit\n").unwrap();
    drop(stdin);
    let run = wait_for_exit(&ws, child);
    assert_eq!(run.code, 0, "{}", run.show());
    // SIGTERM ends it, and so does a hang-up (the terminal closed, the SSH connection
    // dropped).
    for sent in [Signal::SIGTERM, Signal::SIGHUP] {
        let mut child = ws.command(&[]).spawn().unwrap();
        wait_until_caught(&mut child);
        signal(&child, sent);
        let run = wait_for_exit(&ws, child);
        assert_eq!(run.code, 130, "{sent}: {}", run.show());
        assert!(
            run.stderr.ends_with("shiro: interrupted\n"),
            "{sent}: {}",
            run.show()
        );
    }
}
