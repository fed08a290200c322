//! Background commands through the real helper (the built `shiro`): they see edits as they
//! happen, may write in the workspace only where `.gitignore` leaves paths out, and name
//! every change they make there; `bash_kill` and the end of the session leave no process.
//!
//! They need the helper's namespaces; where the machine refuses them, the tests print why and
//! skip. Waiting for a condition is bounded by generous deadlines that only a hang reaches.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use crate::procs;
use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use procs::processes_with;
use proptest::prelude::*;
use shiro_tools::capture::{Background, Launch, Sandbox, Status};
use shiro_tools::tools::{bash_kill, bash_output};
use shiro_tools::{FsMutator, Tool, tools};
use support::{Ws, overlay_refused, shiro_bin};

/// The session's background commands, with shiro's helper, the state dirs in `state`.
fn background(state: &Path) -> Arc<Background> {
    Arc::new(Background::new(
        Launch::Helper {
            helper: shiro_bin(),
            layers: state.join("layers"),
            hidden: vec![state.to_path_buf()],
            sandbox: Sandbox::off(),
        },
        4,
    ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Reads `id`'s output through `bash_output` until `done` holds for all of it, or the
/// command ended; returns all of it.
async fn read_until(
    tool: &dyn Tool,
    m: &FsMutator,
    id: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let mut all = String::new();
    for _ in 0..600 {
        let out = tool.call(m, serde_json::json!({ "id": id })).await.unwrap();
        all.push_str(&out.text);
        if done(&all) || !out.text.contains(": running]") {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never came: {all}");
}

fn start_args(command: &str) -> serde_json::Value {
    serde_json::json!({ "command": command, "run_in_background": true })
}

/// A loop that prints a file every 200 ms shows an `edit_file` change while it runs: the
/// command sees the live workspace (within the loop's period; the test waits for it rather
/// than timing it).
#[test]
fn a_background_loop_sees_an_edit_as_it_happens() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    ws.write("page.txt", "version one\n");
    // Its own marker, so that another run of the suite beside it is not taken for it.
    let marker = format!("hot-reload-marker-{}", std::process::id());
    let state = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let background = background(state.path());
        let bash = tools::Bash::default().with_background(Arc::clone(&background));
        let m = FsMutator::new(ws.path()).unwrap();
        let started = bash
            .call(
                &m,
                start_args(&format!(
                    "while true; do cat page.txt; sleep 0.2; done # {marker}"
                )),
            )
            .await
            .unwrap();
        assert!(
            started.text.contains("started in the background as b1"),
            "{}",
            started.text
        );
        let output = bash_output(Arc::clone(&background));
        read_until(&output, &m, "b1", |all| all.contains("version one")).await;
        tools::edit_file()
            .call(
                &m,
                serde_json::json!({"path": "page.txt", "old_string": "one", "new_string": "two"}),
            )
            .await
            .unwrap();
        let seen = read_until(&output, &m, "b1", |all| all.contains("version two")).await;
        assert!(seen.contains("version two"), "{seen}");
        let killed = bash_kill(Arc::clone(&background))
            .call(&m, serde_json::json!({ "id": "b1" }))
            .await
            .unwrap();
        assert!(killed.text.contains("b1: stopped"), "{}", killed.text);
        assert_eq!(background.list()[0].status, Status::Killed);
    });
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}

/// A write to a tracked file is refused by the kernel and named; a write in an ignored
/// directory lands and is named as not restorable; `bash_kill` and dropping the session's
/// commands leave no process, including one that left the process group.
#[test]
fn writes_outside_ignored_directories_are_refused_and_the_rest_named() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    ws.write(".gitignore", "target/\n");
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("target/old.o", "old\n");
    let marker = format!("session-end-marker-{}", std::process::id());
    let state = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let background = background(state.path());
        let bash = tools::Bash::default().with_background(Arc::clone(&background));
        let m = FsMutator::new(ws.path()).unwrap();
        let script = "echo changed > src/main.rs; echo built > target/app; rm target/old.o; \
                      echo done";
        let out = bash.call(&m, start_args(script)).await.unwrap();
        let text = read_until(&bash_output(Arc::clone(&background)), &m, "b1", |_| false).await;
        let all = format!("{}{text}", out.text);
        assert!(all.contains("a write to src/main.rs was refused"), "{all}");
        assert!(
            all.contains("may write in the workspace only in target/ (directories"),
            "{all}"
        );
        // Named: by the start's result or the reads after it, and nothing twice.
        let named = background.take_changes().await;
        assert!(named.is_empty(), "already named: {named:?}");
        assert!(
            all.contains("target/app") && all.contains("target/old.o"),
            "{all}"
        );

        // Two commands that outlive their shell's group, then the session ends.
        for _ in 0..2 {
            bash.call(
                &m,
                start_args(&format!("setsid sleep 300 & sleep 300 # {marker}")),
            )
            .await
            .unwrap();
        }
        assert_eq!(background.running(), 2);
        drop(bash);
        drop(background);
    });
    assert_eq!(ws.read("src/main.rs"), "fn main() {}\n");
    assert_eq!(ws.read("target/app"), "built\n");
    // The helpers die with their parent-death signal or their kill: wait for the kernel.
    assert_eq!(procs::left_after_kill(&marker), Vec::<String>::new());
}

/// Runs `script` as a background command in `ws` until it ends: everything its start and
/// its reads said, and the directories it was let write in.
fn run_to_end(ws: &Ws, script: &str) -> (String, Vec<String>) {
    let state = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let background = background(state.path());
        let bash = tools::Bash::default().with_background(Arc::clone(&background));
        let m = FsMutator::new(ws.path()).unwrap();
        let out = bash.call(&m, start_args(script)).await.unwrap();
        let text = read_until(&bash_output(Arc::clone(&background)), &m, "b1", |_| false).await;
        let job = background.job("b1").unwrap();
        let writable = job.writable().iter().map(ToString::to_string).collect();
        (format!("{}{text}", out.text), writable)
    })
}

/// A directory `.gitignore` leaves out but that holds a file git tracks is not writable:
/// Landlock cannot refuse one file beneath a directory it allows, so the directory is kept
/// read-only and only its subdirectories that hold nothing tracked are writable. A file
/// git neither tracks nor ignores (here one only `.ignore` leaves out) is the user's work,
/// and stays unwritable too.
#[test]
fn a_tracked_file_in_an_ignored_directory_cannot_be_written() {
    if overlay_refused().is_some() || support::git_missing() {
        return;
    }
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("src/web/app.js", "app\n");
    ws.write("src/target/old.o", "old\n");
    ws.write("notes/todo.md", "mine\n");
    support::git(ws.path(), &["init", "-q"]);
    support::git(ws.path(), &["add", "src/main.rs", "src/web/app.js"]);
    support::git(ws.path(), &["commit", "-qm", "first"]);
    ws.write(".gitignore", "src/\n");
    ws.write(".ignore", "notes/\n");
    let script = "echo CLOBBERED > src/main.rs; echo new > src/new.rs; \
                  echo CLOBBERED > src/web/app.js; echo CLOBBERED > notes/todo.md; \
                  echo built > src/target/app; echo done";
    let (all, writable) = run_to_end(&ws, script);
    assert_eq!(ws.read("src/main.rs"), "fn main() {}\n", "{all}");
    assert_eq!(ws.read("src/web/app.js"), "app\n", "{all}");
    assert_eq!(ws.read("notes/todo.md"), "mine\n", "{all}");
    assert!(!ws.exists("src/new.rs"), "{all}");
    assert_eq!(ws.read("src/target/app"), "built\n", "{all}");
    assert_eq!(writable, ["src/target"], "{all}");
    assert!(all.contains("a write to src/main.rs was refused"), "{all}");
}

/// A `.gitignore` above the repository (a home directory's that ignores everything, as a
/// dotfiles repository has) is not git's for the workspace's repository: the files it would
/// leave out are untracked and unignored there, the user's work, and stay unwritable.
#[test]
fn an_ignore_file_above_the_repository_opens_nothing() {
    if overlay_refused().is_some() || support::git_missing() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".gitignore"), "*\n").unwrap();
    let ws = Ws::new_in(home.path());
    ws.write("a.txt", "a\n");
    support::git(ws.path(), &["init", "-q"]);
    support::git(ws.path(), &["add", "-f", "a.txt"]);
    support::git(ws.path(), &["commit", "-qm", "first"]);
    ws.write("drafts/idea.md", "mine\n");
    let (all, writable) = run_to_end(&ws, "echo CLOBBERED > drafts/idea.md");
    assert_eq!(ws.read("drafts/idea.md"), "mine\n", "{all}");
    assert_eq!(writable, Vec::<String>::new(), "{all}");
}

/// The note on a refused write reads as a sentence whether the command may write in some
/// directories of the workspace or in none.
#[test]
fn the_note_on_a_refused_write_reads_right_with_no_writable_directory() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    let (all, writable) = run_to_end(&ws, "echo x > out.txt");
    assert!(writable.is_empty(), "{all}");
    let note = all
        .lines()
        .find(|line| line.starts_with("[note: "))
        .unwrap_or_else(|| panic!("no note: {all}"));
    insta::assert_snapshot!(note, @"[note: a write to out.txt was refused: this background command may write nowhere in the workspace (a background command may write only in directories .gitignore leaves out that hold nothing git tracks, and it has none), so that nothing it does goes unrecorded; change files with the edit tools or a foreground bash command, whose changes are recorded and undoable]");
}

/// One write a command may try.
#[derive(Debug, Clone)]
enum Write {
    /// Overwrite (or create) the file.
    Put(&'static str, u8),
    /// Append to it.
    Append(&'static str, u8),
    Remove(&'static str),
    Rename(&'static str, &'static str),
    Mkdir(&'static str),
}

const PATHS: [&str; 8] = [
    "a.txt",
    "src/b.txt",
    "new.txt",
    "build/x.o",
    "build/y.o",
    "build/sub/z.o",
    "logs/run.log",
    "build/new.o",
];

fn write() -> impl Strategy<Value = Write> {
    let path = proptest::sample::select(&PATHS[..]);
    prop_oneof![
        (path.clone(), any::<u8>()).prop_map(|(p, b)| Write::Put(p, b)),
        (path.clone(), any::<u8>()).prop_map(|(p, b)| Write::Append(p, b)),
        path.clone().prop_map(Write::Remove),
        (path.clone(), path).prop_map(|(a, b)| Write::Rename(a, b)),
        proptest::sample::select(&["build/sub", "build/d", "d", "logs/x"][..])
            .prop_map(Write::Mkdir),
    ]
}

fn script(writes: &[Write]) -> String {
    let mut script = String::new();
    for write in writes {
        let line = match write {
            Write::Put(path, byte) => format!("printf '%03d' {byte} > {path}"),
            Write::Append(path, byte) => format!("printf '%03d' {byte} >> {path}"),
            Write::Remove(path) => format!("rm -f {path}"),
            Write::Rename(from, to) => format!("mv -f {from} {to}"),
            Write::Mkdir(dir) => format!("mkdir -p {dir}"),
        };
        script.push_str(&line);
        script.push_str(" 2>/dev/null; ");
    }
    script.push_str("true");
    script
}

/// Whatever a background command tries to write, nothing outside the ignored directories
/// changes, and every path that changed inside them is named.
#[test]
fn no_change_a_background_command_makes_goes_unreported() {
    if overlay_refused().is_some() {
        return;
    }
    let mut runner = support::capped_runner(12, 64);
    runner
        .run(&proptest::collection::vec(write(), 1..12), |writes| {
            let ws = Ws::new();
            ws.write(".gitignore", "build/\nlogs/\n");
            ws.write("a.txt", "a\n");
            ws.write("src/b.txt", "b\n");
            ws.write("build/x.o", "x\n");
            ws.write("build/sub/z.o", "z\n");
            std::fs::create_dir(ws.path().join("logs")).unwrap();
            let before = ws.tree();
            let state = tempfile::tempdir().unwrap();
            let named = runtime().block_on(async {
                let background = background(state.path());
                let bash = tools::Bash::default().with_background(Arc::clone(&background));
                let m = FsMutator::new(ws.path()).unwrap();
                let started = bash.call(&m, start_args(&script(&writes))).await.unwrap();
                let job = background.job("b1").unwrap();
                job.settle(Duration::from_secs(60)).await;
                let mut named = started.unrestorable;
                named.extend(background.take_changes().await);
                named
            });
            let after = ws.tree();
            let writable = |path: &str| path.starts_with("build/") || path.starts_with("logs/");
            for (path, held) in &before {
                if !writable(path) {
                    prop_assert_eq!(after.get(path), Some(held), "{} changed", path);
                }
            }
            for path in after.keys() {
                prop_assert!(
                    before.contains_key(path) || writable(path),
                    "{} appeared",
                    path
                );
            }
            let named: Vec<String> = named.iter().map(ToString::to_string).collect();
            for path in before.keys().chain(after.keys()) {
                if before.get(path) != after.get(path) {
                    prop_assert!(
                        named.contains(path),
                        "{} changed unnamed: {:?}",
                        path,
                        named
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A read returns everything the command wrote before it, even when the task that drains the
/// command's pipe has not run since: the runtime here has one thread, which the test keeps
/// busy from the moment it lets the command write until the command has written all its
/// lines (and made a file to say so).
#[test]
fn a_read_holds_everything_written_before_it() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    let state = tempfile::tempdir().unwrap();
    let flags = tempfile::tempdir().unwrap();
    let (go, written) = (flags.path().join("go"), flags.path().join("written"));
    let marker = format!("read-all-marker-{}", std::process::id());
    let one_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    one_thread.block_on(async {
        let background = background(state.path());
        let bash = tools::Bash::default().with_background(Arc::clone(&background));
        let m = FsMutator::new(ws.path()).unwrap();
        // It writes only once told to, after its start (which reads its first output).
        let command = format!(
            "while [ ! -e {go} ]; do sleep 0.01; done; seq 1 2000; touch {written}; sleep 60 # {marker}",
            go = go.display(),
            written = written.display(),
        );
        let started = bash.call(&m, start_args(&command)).await.unwrap();
        assert!(started.text.contains("(no output)"), "{}", started.text);
        std::fs::write(&go, "").unwrap();
        // Blocks the runtime's one thread: nothing drains the pipe meanwhile.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !written.exists() {
            assert!(std::time::Instant::now() < deadline, "the command never wrote");
            std::thread::sleep(Duration::from_millis(10));
        }
        let output = bash_output(Arc::clone(&background));
        let read = output
            .call(&m, serde_json::json!({ "id": "b1" }))
            .await
            .unwrap();
        assert!(read.text.starts_with("1\n2\n"), "{}", read.text);
        assert!(read.text.contains("\n2000\n"), "{}", read.text);
        background.stop_all().await;
    });
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}
