//! Issue 13's link, temp-name, protected-path and special-file failures, end to end through
//! the `shiro` binary: each test reproduces one report and fails on the jail that came before.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::process::Command;

use support::Ws;

fn write_args(path: &str, content: &str) -> String {
    serde_json::json!({ "path": path, "content": content }).to_string()
}

fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Issue 13, item 1: a write through a link to a directory inside the workspace is recorded
/// under its real path, so a later edit of the real file is a conflict, never overwritten.
#[test]
fn undo_sees_an_edit_made_behind_a_directory_link() {
    let ws = Ws::new();
    ws.write("real/x", "orig\n");
    symlink("real", ws.path().join("lnk")).unwrap();

    let run = ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &write_args("lnk/x", "agent\n"),
    ]);
    assert!(run.stdout.contains("real/x"), "{}", run.show());
    assert_eq!(ws.read("real/x"), "agent\n");
    ws.write("real/x", "my edit\n");
    let undo = ws.run(&["undo"]);
    assert_eq!(undo.code, 3, "{}", undo.show());
    assert!(undo.stderr.contains("real/x"), "{}", undo.show());
    assert_eq!(ws.read("real/x"), "my edit\n");
    // Forced, it restores the real file, and the link is still a link.
    ws.ok(&["undo", "--force"]);
    assert_eq!(ws.read("real/x"), "orig\n");
    assert!(ws.path().join("lnk").is_symlink());

    // A new file through the link is a recorded turn that undo removes.
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &write_args("lnk/new", "n\n"),
    ]);
    assert_eq!(ws.read("real/new"), "n\n");
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("write_file"), "{}", log.show());
    ws.ok(&["undo"]);
    assert!(!ws.exists("real/new"));
    assert!(ws.path().join("lnk").is_symlink());
}

/// Issue 13, item 2: a link or hard link planted under the old fixed temporary name
/// (`.foo.shiro-tmp`) is never written through, by any tool or by undo.
#[test]
fn a_planted_temporary_name_never_redirects_a_write() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    let ws = Ws::new();
    let plant = |how: &str| {
        std::fs::write(&victim, "SECRET\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let temp = ws.path().join(".foo.shiro-tmp");
        let _ = std::fs::remove_file(&temp);
        match how {
            "symlink" => symlink(&victim, &temp).unwrap(),
            // A hard link needs the same file system; a temporary directory beside the
            // workspace is on it.
            _ => std::fs::hard_link(&victim, &temp).unwrap(),
        }
    };
    let unharmed = |what: &str| {
        assert_eq!(std::fs::read(&victim).unwrap(), b"SECRET\n", "{what}");
        assert_eq!(mode_of(&victim), 0o600, "{what}");
        let foo = ws.path().join("foo");
        if foo.symlink_metadata().is_ok() {
            assert!(!foo.is_symlink(), "{what}: foo became a link");
        }
    };
    for how in ["symlink", "hard link"] {
        ws.write("foo", "orig\n");
        plant(how);
        ws.ok(&[
            "tool",
            "write_file",
            "--args",
            &write_args("foo", "PWNED\n"),
        ]);
        unharmed(&format!("write_file, {how}"));
        assert_eq!(ws.read("foo"), "PWNED\n");

        let edit =
            serde_json::json!({"path": "foo", "old_string": "PWNED", "new_string": "edited"});
        ws.ok(&["tool", "edit_file", "--args", &edit.to_string()]);
        unharmed(&format!("edit_file, {how}"));

        let patch = "*** Begin Patch\n*** Update File: foo\n@@\n-edited\n+patched\n*** End Patch\n";
        let run = ws.run_with_stdin(&["apply-patch"], patch);
        assert_eq!(run.code, 0, "{}", run.show());
        unharmed(&format!("apply_patch, {how}"));
        assert_eq!(ws.read("foo"), "patched\n");

        // A deletion, then undo recreates the file: through the planted name, it must not.
        let delete = "*** Begin Patch\n*** Delete File: foo\n*** End Patch\n";
        let run = ws.run_with_stdin(&["apply-patch"], delete);
        assert_eq!(run.code, 0, "{}", run.show());
        plant(how);
        ws.ok(&["undo"]);
        unharmed(&format!("undo recreating foo, {how}"));
        assert_eq!(ws.read("foo"), "patched\n");
        // The user's own entry under that name is left alone.
        assert!(ws.path().join(".foo.shiro-tmp").symlink_metadata().is_ok());
        std::fs::remove_file(ws.path().join(".foo.shiro-tmp")).unwrap();
    }
}

/// Issue 13, items 5 and 11: links into `.git/` and `.shiro/` are resolved before the
/// protection check, and `.shiro/config.toml` is protected like the rest of `.shiro/` but the
/// user's commands. (The undo store is not in the workspace at all.)
#[test]
fn links_into_protected_directories_are_refused() {
    let ws = Ws::new();
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    ws.write(".shiro/commands.md", "## hi\nhello\n");
    // A folder of `.shiro` that is not the user's commands: protected from the tools.
    ws.write(".shiro/skills/x/log.jsonl", "{}\n");
    ws.write("a.txt", "a\n");
    ws.ok(&["tool", "write_file", "--args", &write_args("a.txt", "b\n")]);
    symlink(".git", ws.path().join("g")).unwrap();
    symlink(".shiro/skills/x", ws.path().join("s")).unwrap();
    symlink(".shiro", ws.path().join("dot")).unwrap();
    let log_before = std::fs::read(ws.store().join("log.jsonl")).unwrap();

    let mut refusals = String::new();
    for (label, args) in [
        (
            "g/hooks/pre-commit",
            write_args("g/hooks/pre-commit", "#!/bin/sh\n"),
        ),
        ("s/log.jsonl", write_args("s/log.jsonl", "[]\n")),
        (
            "dot/config.toml",
            write_args("dot/config.toml", "[undo]\ndepth = 1\n"),
        ),
        (
            ".shiro/config.toml",
            write_args(".shiro/config.toml", "[undo]\ndepth = 1\n"),
        ),
        (".GIT/config", write_args(".GIT/config", "x")),
    ] {
        let run = ws.run(&["tool", "write_file", "--args", &args]);
        assert_eq!(run.code, 1, "{label}: {}", run.show());
        refusals += &format!("write_file {label}: {}", run.stderr);
    }
    let delete = "*** Begin Patch\n*** Delete File: s/log.jsonl\n*** End Patch\n";
    let run = ws.run_with_stdin(&["apply-patch"], delete);
    assert_eq!(run.code, 1, "{}", run.show());
    refusals += &format!("apply-patch Delete File s/log.jsonl: {}", run.stderr);
    insta::assert_snapshot!(refusals);

    assert!(!ws.exists(".git/hooks"));
    assert!(!ws.exists(".shiro/config.toml"));
    assert_eq!(
        std::fs::read(ws.store().join("log.jsonl")).unwrap(),
        log_before
    );
    assert_eq!(ws.read(".shiro/skills/x/log.jsonl"), "{}\n");
    ws.ok(&["undo"]);
    assert_eq!(ws.read("a.txt"), "a\n");

    // The user's commands stay writable by tools, through a link too.
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &write_args("dot/commands/hi.md", "Say hi\n"),
    ]);
    assert_eq!(ws.read(".shiro/commands/hi.md"), "Say hi\n");
}

/// Issue 13, item 10: a named pipe is refused by every tool, at once, never opened to block.
#[test]
fn named_pipes_are_refused_without_blocking() {
    let ws = Ws::new();
    let made = Command::new("mkfifo")
        .arg(ws.path().join("pipe"))
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        eprintln!("skipped: mkfifo is not available here");
        return;
    }
    let edit = serde_json::json!({"path": "pipe", "old_string": "a", "new_string": "b"});
    let mut out = String::new();
    for (label, args) in [
        (
            "read_file",
            vec!["tool", "read_file", "--args", r#"{"path":"pipe"}"#],
        ),
        (
            "write_file",
            vec![
                "tool",
                "write_file",
                "--args",
                r#"{"path":"pipe","content":"x"}"#,
            ],
        ),
        (
            "edit_file",
            vec!["tool", "edit_file", "--args", &edit.to_string()],
        ),
    ] {
        let run = ws.run_bounded(&args);
        assert_eq!(run.code, 1, "{label}: {}", run.show());
        out += &format!("{label}: {}", run.stderr);
    }
    let patch = ws.path().join("delete.patch");
    std::fs::write(
        &patch,
        "*** Begin Patch\n*** Delete File: pipe\n*** End Patch\n",
    )
    .unwrap();
    let run = ws.run_bounded(&["apply-patch", patch.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.show());
    out += &format!("apply-patch Delete File: {}", run.stderr);
    let grep = ws.run_bounded(&["tool", "grep", "--args", r#"{"pattern":"x"}"#]);
    assert_eq!(grep.code, 0, "{}", grep.show());
    insta::assert_snapshot!(out);
    let kind = std::fs::symlink_metadata(ws.path().join("pipe")).unwrap();
    assert!(kind.file_type().is_fifo());
}

/// An undo that would have to replace a named pipe put where the turn's file was refuses,
/// naming it, and changes nothing: the pipe is not the turn's to remove, and never opened.
#[test]
fn an_undo_that_meets_a_named_pipe_refuses() {
    let ws = Ws::new();
    ws.write("a.txt", "orig\n");
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &write_args("a.txt", "agent\n"),
    ]);
    std::fs::remove_file(ws.path().join("a.txt")).unwrap();
    let made = Command::new("mkfifo")
        .arg(ws.path().join("a.txt"))
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        eprintln!("skipped: mkfifo is not available here");
        return;
    }
    let run = ws.run_bounded(&["undo"]);
    assert_eq!(run.code, 1, "{}", run.show());
    assert!(
        run.stderr.contains("a.txt is a named pipe"),
        "{}",
        run.show()
    );
    let kind = std::fs::symlink_metadata(ws.path().join("a.txt")).unwrap();
    assert!(kind.file_type().is_fifo());
    // The turn is still there to undo once the pipe is gone.
    std::fs::remove_file(ws.path().join("a.txt")).unwrap();
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("write_file"), "{}", log.show());
}
