//! End-to-end runs of `shiro undo` and `shiro redo` across several turns: the dry run of a
//! rewind and of its redo, the redo of a forced rewind, and the redo of an undo that kept
//! the user's directories. Each transcript is a reviewed snapshot, and each tree is checked
//! against the one the operation must leave.
#![allow(clippy::unwrap_used)]

use crate::support;

use support::Ws;

fn write_args(path: &str, content: &str) -> String {
    serde_json::json!({"path": path, "content": content}).to_string()
}

/// A transcript of runs, for one snapshot: each command with what it printed and its exit.
#[derive(Default)]
struct Transcript(String);

impl Transcript {
    /// Runs `shiro ARGS` in `ws`, notes it, and checks that it exits with `code`.
    fn run(&mut self, ws: &Ws, args: &[&str], code: i32) -> support::Run {
        let run = ws.run(args);
        self.0 += &format!("$ shiro {}\n{}\n", args.join(" "), run.show());
        assert_eq!(run.code, code, "shiro {args:?}:\n{}", run.show());
        run
    }
}

/// A dry run of a rewind, and of its redo, prints the diff the real one makes, though a file
/// that was there before the turns is first touched by the second of them (its stored copy
/// is in that turn's pack, not the first one's); and neither changes a thing.
#[test]
fn dry_runs_of_a_rewind_and_of_its_redo_show_every_turns_files() {
    let ws = Ws::new();
    ws.write("f1", "1\n");
    let start = ws.tree();
    ws.ok(&["tool", "write_file", "--args", &write_args("f2", "2\n")]);
    ws.ok(&["tool", "write_file", "--args", &write_args("f1", "1b\n")]);
    let made = ws.tree();
    let mut t = Transcript::default();
    t.run(&ws, &["undo", "--to", "1", "--dry-run"], 0);
    assert_eq!(ws.tree(), made, "a dry run changed the workspace");
    t.run(&ws, &["undo", "--to", "1"], 0);
    assert_eq!(ws.tree(), start);
    t.run(&ws, &["redo", "--dry-run"], 0);
    assert_eq!(ws.tree(), start, "a dry run changed the workspace");
    t.run(&ws, &["redo"], 0);
    assert_eq!(ws.tree(), made);
    insta::assert_snapshot!(t.0);
}

/// `undo --to ID --force` over an edit of the user's between two of the turns is redone
/// without `--force`, since nothing changed after it: the tree is back exactly as before the
/// rewind, and the edit stays in the later turn's record, so undoing that turn alone brings
/// it back. An edit made after the rewind still refuses the redo, and changes nothing.
#[test]
fn a_forced_rewind_is_redone_without_force_and_keeps_the_edit_it_went_over() {
    let ws = Ws::new();
    ws.ok(&["tool", "write_file", "--args", &write_args("a", "1\n")]);
    ws.write("a", "user\n");
    ws.ok(&["tool", "write_file", "--args", &write_args("a", "2\n")]);
    let before = ws.tree();
    let mut t = Transcript::default();
    t.run(&ws, &["undo", "--to", "1"], 3);
    assert_eq!(ws.tree(), before, "a refused rewind changed the workspace");
    t.run(&ws, &["undo", "--to", "1", "--force"], 0);
    assert!(!ws.exists("a"));
    t.run(&ws, &["redo"], 0);
    assert_eq!(ws.tree(), before);
    t.run(&ws, &["undo"], 0);
    assert_eq!(ws.read("a"), "user\n", "the edit between the turns is lost");
    t.run(&ws, &["redo"], 0);
    assert_eq!(ws.tree(), before);

    t.run(&ws, &["undo", "--to", "1", "--force"], 0);
    ws.write("a", "after the rewind\n");
    let edited = ws.tree();
    t.run(&ws, &["redo"], 3);
    assert_eq!(ws.tree(), edited, "a refused redo changed the workspace");
    insta::assert_snapshot!(t.0);
}

/// An undo that keeps the directories a turn made, since the user put a file in them, is
/// redone: the redo expects them where the undo left them, brings the turn's file back and
/// keeps the user's. A file written after the undo where the turn's goes still refuses it.
#[test]
fn an_undo_that_kept_a_directory_is_redone() {
    let ws = Ws::new();
    let args = write_args("newdir/sub/a.txt", "agent\n");
    ws.ok(&["tool", "write_file", "--args", &args]);
    ws.write("newdir/sub/mine.txt", "mine\n");
    let made = ws.tree();
    let mut t = Transcript::default();
    t.run(&ws, &["undo"], 0);
    let undone = ws.tree();
    assert!(!ws.exists("newdir/sub/a.txt"));
    assert_eq!(ws.read("newdir/sub/mine.txt"), "mine\n");
    t.run(&ws, &["redo", "--dry-run"], 0);
    assert_eq!(ws.tree(), undone, "a dry run changed the workspace");
    t.run(&ws, &["redo"], 0);
    assert_eq!(ws.tree(), made);
    t.run(&ws, &["undo"], 0);
    assert_eq!(ws.tree(), undone);

    ws.write("newdir/sub/a.txt", "mine too\n");
    let edited = ws.tree();
    t.run(&ws, &["redo"], 3);
    assert_eq!(ws.tree(), edited, "a refused redo changed the workspace");
    insta::assert_snapshot!(t.0);
}
