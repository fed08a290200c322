//! What the headless commands say, and exit with, where people trying the binary found them
//! wanting: a rewind to a turn undone already, the dry run of a revert that conflicts, a dry
//! run over one of git's locks, `--args` that are no JSON object, and SIGTERM while `shiro
//! commands check` runs.
#![allow(clippy::unwrap_used)]

use crate::agent_common;

use std::collections::BTreeMap;

use agent_common::{Run, World};
use shiro_tools::git::{GitChange, IndexChange, Move};
use shiro_tools::{FsMutator, Mutator as _, WorkspacePath};
use shiro_undo::{StoreOptions, TurnStart, UndoStore};
use tokio::io::AsyncReadExt as _;

/// A run as a person reads it: the exit code, then stdout and stderr, paths normalised.
fn show(world: &World, run: &Run) -> String {
    let code = run.code.map_or("none".to_owned(), |code| code.to_string());
    let mut out = format!("exit {code}\n");
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        if !text.is_empty() {
            out.push_str(&format!("--- {name}\n{}", world.normalize(text)));
        }
    }
    out
}

/// `shiro ARGS`, which must succeed.
async fn ok(world: &World, args: &[&str]) -> Run {
    let run = world.run(args, "", &[]).await;
    assert_eq!(run.code, Some(0), "{}", show(world, &run));
    run
}

/// `shiro tool write_file` of `text` into `path`: one turn.
async fn write_turn(world: &World, path: &str, text: &str) {
    let args = serde_json::json!({"path": path, "content": text}).to_string();
    ok(world, &["tool", "write_file", "--args", &args]).await;
}

/// A rewind to a turn undone already says so, and how `shiro redo` brings it back, whether
/// it is the next turn to redo or lies under another; a turn that never was is named as
/// before. Each exits 1, changing nothing.
#[tokio::test]
async fn a_rewind_to_a_turn_undone_already_says_how_to_bring_it_back() {
    let world = World::new();
    write_turn(&world, "a.txt", "one\n").await;
    write_turn(&world, "b.txt", "two\n").await;
    ok(&world, &["undo"]).await;
    let mut seen = Vec::new();
    for (what, args) in [
        ("the next to redo", &["undo", "--to", "2"][..]),
        (
            "the next to redo, dry run",
            &["undo", "--to", "#2", "--dry-run"][..],
        ),
    ] {
        let run = world.run(args, "", &[]).await;
        seen.push(format!("$ {what}\n{}", show(&world, &run)));
    }
    ok(&world, &["undo"]).await;
    for (what, args) in [
        ("under the turn undone since", &["undo", "--to", "2"][..]),
        ("never was", &["undo", "--to", "9"][..]),
    ] {
        let run = world.run(args, "", &[]).await;
        seen.push(format!("$ {what}\n{}", show(&world, &run)));
    }
    insta::assert_snapshot!(seen.join("\n"), @r"
    $ the next to redo
    exit 1
    --- stderr
    shiro: turn #2 is undone already, so there is nothing to rewind; `shiro redo` brings it back

    $ the next to redo, dry run
    exit 1
    --- stderr
    shiro: turn #2 is undone already, so there is nothing to rewind; `shiro redo` brings it back

    $ under the turn undone since
    exit 1
    --- stderr
    shiro: turn #2 is undone already, so there is nothing to rewind; `shiro redo` brings it back once it has brought back what was undone after it (`shiro redo --dry-run` shows what the next one brings back)

    $ never was
    exit 1
    --- stderr
    shiro: no turn #9 to rewind to: it is not among the turns that can be undone (`shiro log` lists them)
    ");
    // And the hint holds: two redos bring both turns back.
    ok(&world, &["redo"]).await;
    ok(&world, &["redo"]).await;
    assert_eq!(world.read("b.txt").as_deref(), Some("two\n"));
}

/// The dry run of a revert that conflicts prints what stands in the way on stdout, as a dry
/// run of undo does, and exits 3 as the revert does; the revert's own refusal says the same.
#[tokio::test]
async fn a_conflicting_revert_s_dry_run_prints_the_conflicts_and_exits_3() {
    let world = World::new();
    write_turn(&world, "a.txt", "one\ntwo\nthree\n").await;
    let edit = serde_json::json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"});
    ok(&world, &["tool", "edit_file", "--args", &edit.to_string()]).await;
    world.write("a.txt", "one\nTWO!\nthree\n");
    let dry = world
        .run(&["undo", "--turn", "2", "--dry-run"], "", &[])
        .await;
    insta::assert_snapshot!(show(&world, &dry), @r#"
    exit 3
    --- stdout
    revert of turn #2 "shiro tool edit_file a.txt" would be refused: 1 path changed since the turn in ways it cannot be taken out of; nothing was changed
      a.txt, line 2: changed by the turn, and since
          before the turn:
            | two
          the turn made it:
            | TWO
          now:
            | TWO!
    only the content of text files is merged, line by line; anything else must be as the turn left it. Change those paths by hand, or undo what changed them, and revert again
    --- stderr
    shiro: revert would be refused; exit 3, as `shiro undo --turn 2` would (`--force` does not apply)
    "#);
    let real = world.run(&["undo", "--turn", "2"], "", &[]).await;
    assert_eq!(real.code, Some(3), "{}", show(&world, &real));
    assert_eq!(
        format!(
            "shiro: {}",
            dry.stdout.replacen("would be refused", "refused", 1)
        ),
        real.stderr
    );
    assert_eq!(world.read("a.txt").as_deref(), Some("one\nTWO!\nthree\n"));
}

/// A lock of git's on what the undo moves stops the undo (exit 1, even forced), and its dry
/// run says so and exits 1 too, rather than call it clean; a change since the turn refuses
/// the undo first (exit 3), and its dry run exits 3. The repository is made by hand, and
/// its turn recorded through the store, as a `bash` call that ran `git checkout -b feature
/// && git commit -am agent` records it.
#[tokio::test]
async fn a_dry_run_stops_on_a_git_lock_as_the_undo_does() {
    let world = World::new();
    world.write(".git/HEAD", "ref: refs/heads/main\n");
    world.write(".git/refs/heads/main", &format!("{}\n", "1".repeat(40)));
    world.write(".git/index", "index of main");
    world.write("a.txt", "a\n");
    {
        let ws = FsMutator::new(world.root()).unwrap();
        let store = UndoStore::open(&world.state(), StoreOptions::default())
            .await
            .unwrap();
        let recording = store.recorder(ws);
        recording
            .begin_turn(TurnStart {
                summary: "branch and commit".to_owned(),
                history_marker: 0,
                session: None,
            })
            .await
            .unwrap();
        let a = WorkspacePath::from_relative("a.txt").unwrap();
        recording.write(&a, b"agent\n", None).await.unwrap();
        world.write(".git/refs/heads/feature", &format!("{}\n", "2".repeat(40)));
        world.write(".git/HEAD", "ref: refs/heads/feature\n");
        world.write(".git/index", "index of the agent's commit");
        let moved = |before: Option<&str>, after: &str| Move {
            before: before.map(str::to_owned),
            after: Some(after.to_owned()),
        };
        let change = GitChange {
            moved: BTreeMap::from([
                (
                    "HEAD".to_owned(),
                    moved(Some("ref: refs/heads/main"), "ref: refs/heads/feature"),
                ),
                (
                    "refs/heads/feature".to_owned(),
                    moved(None, &"2".repeat(40)),
                ),
            ]),
            index: Some(IndexChange {
                before: Some(b"index of main".to_vec()),
                after: Some(b"index of the agent's commit".to_vec()),
            }),
        };
        recording.note_git(&change).await.unwrap();
        recording.finish_turn().await.unwrap().unwrap();
    }
    world.write(".git/index.lock", "");
    let before = agent_common::tree(&world.root());
    let mut seen = Vec::new();
    for args in [
        &["undo", "--dry-run"][..],
        &["undo", "--dry-run", "--force"][..],
        &["undo"][..],
    ] {
        let run = world.run(args, "", &[]).await;
        seen.push(format!(
            "$ shiro {}\n{}",
            args.join(" "),
            show(&world, &run)
        ));
    }
    world.write("a.txt", "user\n");
    for args in [&["undo", "--dry-run"][..], &["undo"][..]] {
        let run = world.run(args, "", &[]).await;
        seen.push(format!(
            "$ shiro {} (a.txt changed since)\n{}",
            args.join(" "),
            show(&world, &run)
        ));
    }
    insta::assert_snapshot!(seen.join("\n"), @r#"
    $ shiro undo --dry-run
    exit 1
    --- stdout
    would undo turn #1 "branch and commit"
      restore  a.txt
      git: HEAD feature → main; refs/heads/feature deleted (was 2222222); index changed
    git's lock files on what it moves (undo stops on these, even forced):
      .git/index.lock: exists: another git process seems to be running in this repository
    --- a/a.txt
    +++ b/a.txt
    @@ -1 +1 @@
    -agent
    +a
    --- stderr
    shiro: undo would stop on git's lock file .git/index.lock (a git is running, or one that stopped left it); exit 1, as `shiro undo` would, even with --force

    $ shiro undo --dry-run --force
    exit 1
    --- stdout
    would undo turn #1 "branch and commit"
      restore  a.txt
      git: HEAD feature → main; refs/heads/feature deleted (was 2222222); index changed
    git's lock files on what it moves (undo stops on these, even forced):
      .git/index.lock: exists: another git process seems to be running in this repository
    --- a/a.txt
    +++ b/a.txt
    @@ -1 +1 @@
    -agent
    +a
    --- stderr
    shiro: undo would stop on git's lock file .git/index.lock (a git is running, or one that stopped left it); exit 1, as `shiro undo` would, even with --force

    $ shiro undo
    exit 1
    --- stderr
    shiro: cannot undo turn #1: .git/index.lock exists: another git process seems to be running in this repository; nothing was changed (run it again once git is done; if no git is running, one that stopped left the lock behind: remove it)

    $ shiro undo --dry-run (a.txt changed since)
    exit 3
    --- stdout
    would undo turn #1 "branch and commit"
      restore  a.txt
      git: HEAD feature → main; refs/heads/feature deleted (was 2222222); index changed
    changed since the turn (undo refuses these unless forced):
      a.txt: now file 644 (5 bytes, d0e2bc5d7c63), expected file 644 (6 bytes, 6855edf28a25)
    git's lock files on what it moves (undo stops on these, even forced):
      .git/index.lock: exists: another git process seems to be running in this repository
    --- a/a.txt
    +++ b/a.txt
    @@ -1 +1 @@
    -user
    +a
    --- stderr
    shiro: undo would be refused: 1 path changed since the turn; exit 3, as `shiro undo` would (`--force` overwrites them)

    $ shiro undo (a.txt changed since)
    exit 3
    --- stderr
    shiro: undo of turn #1 "branch and commit" refused: 1 path changed since the turn; nothing was changed
      a.txt: now file 644 (5 bytes, d0e2bc5d7c63), expected file 644 (6 bytes, 6855edf28a25)
    to overwrite these changes, undo with --force; to see what it would do, use --dry-run
    "#);
    world.write("a.txt", "agent\n");
    assert_eq!(agent_common::tree(&world.root()), before);
}

/// `--args` that are not JSON, or not an object, are a mistake in the command line: exit 2,
/// with what to give instead, and no turn.
#[tokio::test]
async fn tool_arguments_that_are_no_json_object_are_a_usage_error() {
    let world = World::new();
    let mut said = Vec::new();
    for args in ["not json", "[]"] {
        let run = world
            .run(&["tool", "write_file", "--args", args], "", &[])
            .await;
        said.push(show(&world, &run));
    }
    insta::assert_snapshot!(said.join("\n"), @r#"
    exit 2
    --- stderr
    shiro: --args is not valid JSON (expected ident at line 1 column 2): give the tool's arguments as one JSON object, such as {"path": "a.txt"}, or @FILE to read them from a file; nothing was changed

    exit 2
    --- stderr
    shiro: --args must be a JSON object of the tool's arguments, such as {"path": "a.txt"}, not an array; nothing was changed
    "#);
    assert_eq!(ok(&world, &["log"]).await.stdout, "no turns to undo\n");
}

/// The first SIGTERM stops `shiro commands check` at once, with exit 130, as it stops
/// `shiro log`. The check's report is made larger than a pipe holds, and its standard output
/// is not read until the signal is sent: shiro is then still running (writing its report),
/// whatever the machine's speed, and has caught the signal since its start.
#[tokio::test]
async fn the_first_sigterm_stops_commands_check() {
    let world = World::new();
    let mut noisy = String::from("---\ndescription: many unknown keys\n");
    for i in 0..10_000 {
        noisy.push_str(&format!("k{i}: v\n"));
    }
    noisy.push_str("---\nbody\n");
    world.write(".shiro/commands/noisy.md", &noisy);
    let mut child = world.command(&["commands", "check"], &[]).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0_u8; 64];
    let read = stdout.read(&mut first).await.unwrap();
    assert!(read > 0, "shiro printed nothing");
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("sh")
        .args(["-c", "kill -TERM \"$1\"", "sh", &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -TERM {pid}");
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).await.unwrap();
    let run = agent_common::finish(child).await;
    assert!(
        read + rest.len() < 2_000_000,
        "the whole report was written ({} bytes)",
        read + rest.len()
    );
    insta::assert_snapshot!(show(&world, &run), @r"
    exit 130
    --- stderr
    shiro: interrupted
    ");
}
