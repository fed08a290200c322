//! End-to-end runs of the `shiro` binary's headless commands in temporary workspaces: every
//! command, every exit code, outputs and `--help` as reviewed snapshots.
#![allow(clippy::unwrap_used)]

use crate::support;

use support::{Ws, normalize_times};

fn edit_args(path: &str, old: &str, new: &str) -> String {
    serde_json::json!({"path": path, "old_string": old, "new_string": new}).to_string()
}

#[test]
fn help_texts() {
    let ws = Ws::new();
    let mut out = String::new();
    for args in [
        &["--help"][..],
        &["tool", "--help"],
        &["apply-patch", "--help"],
        &["undo", "--help"],
        &["redo", "--help"],
        &["log", "--help"],
        &["commands", "--help"],
        &["commands", "list", "--help"],
        &["commands", "expand", "--help"],
        &["commands", "check", "--help"],
        &["demo", "--help"],
        &["mcp", "--help"],
    ] {
        let run = ws.run(args);
        assert_eq!(run.code, 0, "{args:?}");
        out += &format!("$ shiro {}\n{}\n", args.join(" "), run.stdout);
    }
    insta::assert_snapshot!(out);
    let version = ws.ok(&["--version"]);
    assert_eq!(
        version.stdout,
        format!("shiro {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2() {
    let ws = Ws::new();
    let mut out = String::new();
    for args in [
        &["--frobnicate"][..],
        &["tool"],
        &["undo", "extra"],
        &["commands", "nope"],
        // An unknown tool is a wrong argument, as clap's own errors are; the message lists
        // the tools there are.
        &["tool", "frob", "--args", "{}"],
        // An empty prompt would go to the model as it is.
        &["-p", ""],
        &["-p", " \n\t"],
    ] {
        let run = ws.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.show());
        // Quoted where a shell would need it, so that an empty argument shows.
        let words: Vec<String> = args
            .iter()
            .map(|arg| {
                if arg.is_empty() || arg.contains(char::is_whitespace) {
                    format!("{arg:?}")
                } else {
                    (*arg).to_owned()
                }
            })
            .collect();
        out += &format!("$ shiro {}\n{}\n", words.join(" "), run.show());
    }
    insta::assert_snapshot!(out);
}

#[test]
fn a_tool_turn_then_undo_redo_and_every_exit_code() {
    let ws = Ws::new();
    ws.write("src/lib.rs", "fn old() {}\n");
    let mut t = String::new();
    let mut step = |label: &str, run: support::Run| {
        t += &format!("$ shiro {label}\n{}\n", normalize_times(&run.show()));
    };

    step("undo (empty log)", ws.run(&["undo"]));
    step("redo (nothing undone)", ws.run(&["redo"]));
    step("log (empty)", ws.run(&["log"]));
    step(
        "tool edit_file",
        ws.run(&[
            "tool",
            "edit_file",
            "--args",
            &edit_args("src/lib.rs", "old", "new"),
        ]),
    );
    assert_eq!(ws.read("src/lib.rs"), "fn new() {}\n");
    step(
        "tool write_file (nested)",
        ws.run(&[
            "tool",
            "write_file",
            "--args",
            r##"{"path":"docs/a/b.md","content":"# B\n"}"##,
        ]),
    );
    step(
        "tool edit_file (no match: nothing changes)",
        ws.run(&[
            "tool",
            "edit_file",
            "--args",
            &edit_args("src/lib.rs", "absent", "x"),
        ]),
    );
    step(
        "tool edit_file (bad JSON)",
        ws.run(&["tool", "edit_file", "--args", "{nope"]),
    );
    step(
        "tool write_file (escape)",
        ws.run(&[
            "tool",
            "write_file",
            "--args",
            r#"{"path":"../x","content":""}"#,
        ]),
    );
    step(
        "tool read_file (read-only: no turn)",
        ws.run(&["tool", "read_file", "--args", r#"{"path":"src/lib.rs"}"#]),
    );
    step("log", ws.run(&["log"]));

    // The user edits the file the newest turn wrote: undo must refuse (exit 3).
    ws.write("docs/a/b.md", "# B, edited by hand\n");
    step("undo (conflict)", ws.run(&["undo"]));
    assert_eq!(ws.read("docs/a/b.md"), "# B, edited by hand\n");
    step("log (conflict shown)", ws.run(&["log"]));
    step(
        "undo --dry-run --force",
        ws.run(&["undo", "--dry-run", "--force"]),
    );
    assert!(ws.exists("docs/a/b.md"), "a dry run changed the workspace");
    step("undo --force", ws.run(&["undo", "--force"]));
    assert!(
        !ws.exists("docs"),
        "undo left the directories the turn created"
    );
    step("undo --dry-run", ws.run(&["undo", "--dry-run"]));
    assert_eq!(ws.read("src/lib.rs"), "fn new() {}\n");
    step("undo", ws.run(&["undo"]));
    assert_eq!(ws.read("src/lib.rs"), "fn old() {}\n");
    step("undo (nothing left)", ws.run(&["undo"]));
    step("redo", ws.run(&["redo"]));
    assert_eq!(ws.read("src/lib.rs"), "fn new() {}\n");
    step("log --json", ws.run(&["log", "--json"]));
    insta::assert_snapshot!(t);
}

#[test]
fn apply_patch_from_a_file_and_from_stdin() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\n");
    ws.write("old.txt", "bye\n");
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+2\n*** Add File: new/b.txt\n+hello\n*** Delete File: old.txt\n*** End Patch\n";
    let patch_file = ws.config.path().join("fix.patch");
    std::fs::write(&patch_file, patch).unwrap();
    let mut t = String::new();
    let run = ws.run(&["apply-patch", patch_file.to_str().unwrap()]);
    t += &format!(
        "$ shiro apply-patch fix.patch\n{}\n",
        run.show()
            .replace(patch_file.to_str().unwrap(), "fix.patch")
    );
    assert_eq!(ws.read("a.txt"), "one\n2\n");
    let moved = "*** Begin Patch\n*** Update File: new/b.txt\n*** Move to: moved/b.txt\n@@\n-hello\n+hello, moved\n*** End Patch\n";
    t += &format!(
        "$ shiro apply-patch < move.patch\n{}\n",
        ws.run_with_stdin(&["apply-patch"], moved).show()
    );
    t += &format!(
        "$ shiro apply-patch < empty\n{}\n",
        ws.run_with_stdin(&["apply-patch"], "").show()
    );
    t += &format!(
        "$ shiro apply-patch missing.patch\n{}\n",
        ws.run(&["apply-patch", "missing.patch"]).show()
    );
    t += &format!("$ shiro undo\n{}\n", ws.run(&["undo"]).show());
    t += &format!("$ shiro undo\n{}\n", ws.run(&["undo"]).show());
    insta::assert_snapshot!(t);
    assert_eq!(ws.read("a.txt"), "one\ntwo\n");
    assert_eq!(ws.read("old.txt"), "bye\n");
    assert!(!ws.exists("new") && !ws.exists("moved"));
}

#[test]
fn bash_without_capture_says_undo_cannot_cover_it() {
    let ws = Ws::new();
    std::fs::write(
        ws.config.path().join("config.toml"),
        "[bash]\ncapture = \"off\"\n",
    )
    .unwrap();
    let run = ws.run(&[
        "tool",
        "bash",
        "--args",
        r#"{"command":"echo hi > made-by-bash.txt"}"#,
    ]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(
        run.stderr
            .contains("bash ran without capture, so `shiro undo` cannot reverse its effects"),
        "{}",
        run.show()
    );
    // Nothing was captured, but the command may have changed anything: its turn is logged,
    // and the log and undo say what undo cannot do.
    let log = ws.ok(&["log"]);
    assert!(
        log.stdout
            .contains("(ran bash without capture: its effects are not recorded)"),
        "{}",
        log.show()
    );
    let undo = ws.ok(&["undo"]);
    assert!(
        undo.stdout.contains(
            "note: this turn ran bash without capture; effects of its commands are not undone"
        ),
        "{}",
        undo.show()
    );
    assert!(ws.exists("made-by-bash.txt"));
    let again = ws.run(&["undo"]);
    assert_eq!(again.code, 1, "nothing left to undo: {}", again.show());
}

#[test]
fn user_commands_list_expand_and_check() {
    let ws = Ws::new();
    ws.write(
        ".shiro/commands.md",
        "## greet\n> Say hello\nHello $1, from !`echo shell` and @name.txt ($ARGUMENTS)\n\n## undo\nhijack\n\n## Bad Name!\nx\n",
    );
    ws.write("name.txt", "the file");
    std::fs::create_dir_all(ws.config.path().join("commands")).unwrap();
    std::fs::write(
        ws.config.path().join("commands/mine.md"),
        "---\ndescription: a user command\n---\nmine $1\n",
    )
    .unwrap();
    let mut t = String::new();
    for args in [
        &["commands", "list"][..],
        &["commands", "list", "--json"],
        &["commands", "expand", "greet", "Ada Lovelace", "x"],
        &["commands", "expand", "--trust", "/greet", "Ada"],
        &["commands", "expand", "mine", "arg"],
        &["commands", "expand", "undo"],
        &["commands", "expand", "nope"],
        &["commands", "check"],
    ] {
        t += &format!("$ shiro {}\n{}\n", args.join(" "), ws.run(args).show());
    }
    ws.write(".shiro/commands.md", "## greet\nHello\n");
    t += &format!(
        "$ shiro commands check (fixed)\n{}\n",
        ws.run(&["commands", "check"]).show()
    );
    insta::assert_snapshot!(t);
}

/// A cloned repository's traps for `shiro commands`: a `commands.md` that links out of the
/// workspace, a `.shiro` that does, a named pipe where `commands.md` should be, a skill
/// whose frontmatter never closes and a `## ::` heading. Nothing outside is read, nothing
/// hangs, and `check` names each; a skill for the model alone is listed as such.
#[test]
fn user_commands_in_a_hostile_workspace() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    std::fs::write(out.join("secret.md"), "## stolen\nSECRET\n").unwrap();
    std::fs::create_dir_all(out.join("shiro")).unwrap();
    std::fs::write(out.join("shiro/commands.md"), "## stolen-too\nSECRET\n").unwrap();
    let mut t = String::new();
    let mut show = |title: &str, ws: &Ws, args: &[&str]| {
        let shown = ws.run_bounded(args).show();
        let shown = shown.replace(out.canonicalize().unwrap().to_str().unwrap(), "<outside>");
        // The built-ins are the same in every listing.
        let shown: String = shown
            .lines()
            .filter(|line| !line.contains(" built-in "))
            .map(|line| format!("{line}\n"))
            .collect();
        t += &format!("$ shiro {} ({title})\n{shown}\n", args.join(" "));
    };

    let linked_file = Ws::new();
    std::fs::create_dir_all(linked_file.path().join(".shiro")).unwrap();
    std::os::unix::fs::symlink(
        out.join("secret.md"),
        linked_file.path().join(".shiro/commands.md"),
    )
    .unwrap();
    for args in [
        &["commands", "list"][..],
        &["commands", "expand", "stolen"],
        &["commands", "check"],
    ] {
        show("commands.md links outside", &linked_file, args);
    }

    let linked_dir = Ws::new();
    std::os::unix::fs::symlink(out.join("shiro"), linked_dir.path().join(".shiro")).unwrap();
    show(".shiro links outside", &linked_dir, &["commands", "check"]);

    let piped = Ws::new();
    std::fs::create_dir_all(piped.path().join(".shiro")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        piped.path().join(".shiro/commands.md"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    show(
        "commands.md is a named pipe",
        &piped,
        &["commands", "check"],
    );

    let skills = Ws::new();
    skills.write(".shiro/commands.md", "## ::\nColons.\n\n## ok\nOk.\n");
    skills.write(
        ".claude/skills/broken/SKILL.md",
        "---\nname: broken\ndescription: Never closed.\nDo this.\n",
    );
    let house_style = skills.config.path().join("skills/house-style");
    std::fs::create_dir_all(&house_style).unwrap();
    std::fs::write(
        house_style.join("SKILL.md"),
        "---\nname: house-style\ndescription: How we name things\nuser-invocable: false\n---\nBody.\n",
    )
    .unwrap();
    for args in [&["commands", "list"][..], &["commands", "check"]] {
        show("names and skills", &skills, args);
    }
    insta::assert_snapshot!(t);
}

#[test]
fn config_depth_limits_the_log() {
    let ws = Ws::new();
    std::fs::write(ws.config.path().join("config.toml"), "[undo]\ndepth = 2\n").unwrap();
    for i in 0..3 {
        ws.ok(&[
            "tool",
            "write_file",
            "--args",
            &format!(r#"{{"path":"f{i}.txt","content":"{i}"}}"#),
        ]);
    }
    let log = ws.ok(&["log", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&log.stdout).unwrap();
    assert_eq!(
        value["turns"].as_array().unwrap().len(),
        2,
        "{}",
        log.stdout
    );
    ws.ok(&["undo"]);
    ws.ok(&["undo"]);
    assert_eq!(ws.run(&["undo"]).code, 1);
    assert!(ws.exists("f0.txt"), "the dropped turn was undone");
    ws.write(".shiro/config.toml", "[undo]\ndepht = 2\n");
    let bad = ws.run(&["log"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("unknown field `depht`"),
        "{}",
        bad.show()
    );
}

/// A small deterministic generator, so a failure names its seed and replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// 50 random `shiro tool` / `shiro apply-patch` turns, undone 50 times (back to the start),
/// then redone 50 times (back to the end), comparing content, mode and kind each way.
#[test]
fn fifty_random_turns_undo_and_redo_exactly() {
    let seed = 0x5eed_u64 ^ u64::from(std::process::id());
    let mut rng = Rng(seed | 1);
    let ws = Ws::new();
    ws.write(".shiro/config.toml", "[undo]\ndepth = 64\n");
    ws.write("keep/a.txt", "alpha\nbeta\ngamma\n");
    ws.write("crlf.txt", "one\r\ntwo\r\n");
    let start = ws.tree();
    let names = [
        "a.txt",
        "b.txt",
        "dir/c.txt",
        "dir/deep/d.txt",
        "keep/a.txt",
        "crlf.txt",
    ];
    let mut turns = 0;
    while turns < 50 {
        let files: Vec<String> = ws
            .tree()
            .into_iter()
            // The user's config is theirs: the file tools refuse it.
            .filter(|(k, v)| v.starts_with("file") && !k.starts_with(".shiro/"))
            .map(|(k, _)| k)
            .collect();
        let pick = |rng: &mut Rng, list: &[String]| list[rng.below(list.len())].clone();
        let n = rng.next();
        let run = match rng.below(5) {
            0 => {
                let path = names[rng.below(names.len())];
                let content = format!("content {n}\nline two\n");
                ws.run(&[
                    "tool",
                    "write_file",
                    "--args",
                    &serde_json::json!({"path": path, "content": content}).to_string(),
                ])
            }
            1 if !files.is_empty() => {
                let path = pick(&mut rng, &files);
                let text = ws.read(&path);
                let Some(line) = text.lines().next().filter(|l| !l.is_empty()) else {
                    continue;
                };
                ws.run(&["tool", "edit_file", "--args", &serde_json::json!({"path": path, "old_string": line, "new_string": format!("edited {n}"), "replace_all": true}).to_string()])
            }
            2 if !files.is_empty() => {
                let path = pick(&mut rng, &files);
                let patch = format!(
                    "*** Begin Patch\n*** Delete File: {path}\n*** Add File: added/{n}.txt\n+new {n}\n*** End Patch\n"
                );
                ws.run_with_stdin(&["apply-patch"], &patch)
            }
            3 if !files.is_empty() => {
                let from = pick(&mut rng, &files);
                let to = format!("moved/{}/{}", n % 3, from.replace('/', "_"));
                if ws.exists(&to) {
                    continue;
                }
                let patch = format!(
                    "*** Begin Patch\n*** Update File: {from}\n*** Move to: {to}\n*** End Patch\n"
                );
                ws.run_with_stdin(&["apply-patch"], &patch)
            }
            _ => {
                let path = names[rng.below(names.len())];
                let args = serde_json::json!({"path": path, "edits": [{"old_string": "line two", "new_string": format!("two {n}")}]});
                let run = ws.run(&["tool", "multi_edit", "--args", &args.to_string()]);
                if run.code != 0 {
                    continue; // No such file or no such line: nothing changed, no turn.
                }
                run
            }
        };
        assert_eq!(run.code, 0, "seed {seed:#x}, turn {turns}:\n{}", run.show());
        turns += 1;
    }
    let end = ws.tree();
    for i in 0..50 {
        let run = ws.run(&["undo"]);
        assert_eq!(run.code, 0, "seed {seed:#x}, undo {i}:\n{}", run.show());
    }
    assert_eq!(
        ws.tree(),
        start,
        "seed {seed:#x}: 50 undos did not restore the start"
    );
    assert_eq!(ws.run(&["undo"]).code, 1);
    for i in 0..50 {
        let run = ws.run(&["redo"]);
        assert_eq!(run.code, 0, "seed {seed:#x}, redo {i}:\n{}", run.show());
    }
    assert_eq!(
        ws.tree(),
        end,
        "seed {seed:#x}: 50 redos did not restore the end"
    );
}

/// Ctrl-C stops a running `bash` call run without capture (its whole process group) and
/// leaves the workspace and the undo log usable: the next command works and sees the earlier
/// turn. (With the overlay, `bash_capture.rs` checks the same through the PID namespace.)
#[test]
fn ctrl_c_stops_bash_and_leaves_the_log_consistent() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let ws = Ws::new();
    std::fs::write(
        ws.config.path().join("config.toml"),
        "[bash]\ncapture = \"off\"\n",
    )
    .unwrap();
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        r#"{"path":"a.txt","content":"a\n"}"#,
    ]);
    let pid_file = ws.config.path().join("sleeper.pid");
    let command = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
    // In the environment every run gets: the same store as the turn above, not the user's.
    let args = serde_json::json!({ "command": command }).to_string();
    let child = ws
        .command(&["tool", "bash", "--args", &args])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !pid_file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "bash never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    let sleeper = std::fs::read_to_string(&pid_file).unwrap();
    // Dead means gone or a zombie: an orphan's zombie waits for a reaper that containers may lack.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{}/stat", sleeper.trim())).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    let killed_at = Instant::now();
    while alive() && killed_at.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(),
        "the sleep in bash's process group outlived Ctrl-C"
    );
    // The interrupted command ran without capture: its turn is logged, saying so, above
    // the write's.
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("A a.txt"), "{}", log.show());
    assert!(log.stdout.contains("without capture"), "{}", log.show());
    ws.ok(&["undo"]);
    assert!(
        ws.exists("a.txt"),
        "the first undo is the command's, which undoes nothing"
    );
    ws.ok(&["undo"]);
    assert!(!ws.exists("a.txt"));
}

#[test]
fn tool_arguments_must_be_an_object() {
    let ws = Ws::new();
    let mut said = Vec::new();
    for args in ["[]", "\"a.txt\"", "null"] {
        let run = ws.run(&["tool", "write_file", "--args", args]);
        // A usage error, as a NAME that is no tool is.
        assert_eq!(run.code, 2, "{}", run.show());
        said.push(run.stderr);
    }
    insta::assert_snapshot!(said.concat(), @r#"
    shiro: --args must be a JSON object of the tool's arguments, such as {"path": "a.txt"}, not an array; nothing was changed
    shiro: --args must be a JSON object of the tool's arguments, such as {"path": "a.txt"}, not a string; nothing was changed
    shiro: --args must be a JSON object of the tool's arguments, such as {"path": "a.txt"}, not null; nothing was changed
    "#);
    assert!(ws.ok(&["log"]).stdout.contains("no turns"));
}

#[test]
fn tool_arguments_can_come_from_a_file() {
    let ws = Ws::new();
    let args = ws.config.path().join("args.json");
    std::fs::write(
        &args,
        r#"{"path": "from-file.txt", "content": "via @file\n"}"#,
    )
    .unwrap();
    let run = ws.ok(&[
        "tool",
        "write_file",
        "--args",
        &format!("@{}", args.display()),
    ]);
    assert_eq!(
        run.stdout,
        "A from-file.txt\ncreated from-file.txt (10 bytes)\n"
    );
    assert_eq!(ws.read("from-file.txt"), "via @file\n");
    let missing = ws.run(&["tool", "write_file", "--args", "@/nonexistent/args.json"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("cannot read the arguments file /nonexistent/args.json"),
        "{}",
        missing.show()
    );
}

#[test]
fn a_call_refused_before_it_runs_records_nothing_and_leaves_no_turn_behind() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap();
    // The path the call names cannot be captured (it leads outside the workspace), so the
    // call does not run at all.
    let args = serde_json::json!({"path": "out/x", "content": "x"}).to_string();
    let refused = ws.run(&["tool", "write_file", "--args", &args]);
    assert_eq!(refused.code, 1, "{}", refused.show());
    assert!(
        refused.stderr.contains("leads outside the workspace"),
        "{}",
        refused.show()
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // No turn was recorded, and the next command finds nothing interrupted to report.
    let log = ws.ok(&["log"]);
    assert_eq!(log.stdout, "no turns to undo\n");
    assert_eq!(log.stderr, "", "{}", log.show());
}

/// A dry run exits as the restore it previews would: 3 when paths changed since the turn,
/// with the plan and the diff still printed, and nothing changed.
#[test]
fn a_dry_run_that_finds_conflicts_exits_3_like_the_undo_it_previews() {
    let ws = Ws::new();
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        r#"{"path":"a.txt","content":"one\n"}"#,
    ]);
    ws.write("a.txt", "mine\n");
    let dry = ws.run(&["undo", "--dry-run"]);
    assert_eq!(dry.code, 3, "{}", dry.show());
    insta::assert_snapshot!(dry.show());
    assert_eq!(ws.read("a.txt"), "mine\n");
    let forced = ws.run(&["undo", "--dry-run", "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.show());
    assert_eq!(ws.run(&["undo"]).code, 3);
}

/// What the store's recovery said is shown even when the command then fails.
#[test]
fn recovery_notices_are_shown_when_the_command_then_fails() {
    let ws = Ws::new();
    // A bash command's layer left by a shiro that was killed while the command ran.
    let layer = ws.state().layers_dir().join("0123456789abcdef");
    std::fs::create_dir_all(layer.join("up")).unwrap();
    std::fs::create_dir_all(layer.join("work")).unwrap();
    std::fs::write(layer.join("up/half.txt"), "half\n").unwrap();
    let undo = ws.run(&["undo"]);
    assert_eq!(undo.code, 1, "{}", undo.show());
    insta::assert_snapshot!(undo.show());
    assert!(!ws.exists("half.txt"));
}

/// `shiro undo --turn ID` reverts one earlier turn and keeps the later ones: three turns edit
/// different hunks of one file, the second is taken out and the first and third stay; a dry
/// run shows the merge as a diff; the revert is a turn `shiro undo` takes back; an edit since
/// that overlaps the turn's change refuses it (exit 3), naming the file and its lines.
#[test]
fn undo_turn_reverts_one_turn_and_keeps_the_later_ones() {
    let ws = Ws::new();
    let lines: Vec<String> = (1..=9).map(|n| format!("line {n}\n")).collect();
    ws.write("notes.txt", &lines.concat());
    for (old, new) in [("line 1", "ONE"), ("line 5", "FIVE"), ("line 9", "NINE")] {
        ws.ok(&[
            "tool",
            "edit_file",
            "--args",
            &edit_args("notes.txt", old, new),
        ]);
    }
    let mut t = String::new();
    let mut step = |label: &str, run: &support::Run| {
        t += &format!("$ shiro {label}\n{}\n", normalize_times(&run.show()));
    };
    let dry = ws.run(&["undo", "--turn", "2", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.show());
    step("undo --turn 2 --dry-run", &dry);
    let reverted = ws.run(&["undo", "--turn", "#2"]);
    assert_eq!(reverted.code, 0, "{}", reverted.show());
    step("undo --turn #2", &reverted);
    let expected = |five: &str| {
        let mut want = lines.clone();
        want[0] = "ONE\n".into();
        want[4] = format!("{five}\n");
        want[8] = "NINE\n".into();
        want.concat()
    };
    assert_eq!(ws.read("notes.txt"), expected("line 5"));

    // The revert is the newest turn: undo takes it back, redo brings it again.
    ws.ok(&["undo"]);
    assert_eq!(ws.read("notes.txt"), expected("FIVE"));
    ws.ok(&["redo"]);
    assert_eq!(ws.read("notes.txt"), expected("line 5"));
    ws.ok(&["undo"]);

    // An edit since over the lines turn 2 changed: refused, nothing changed.
    let edited = expected("FIVE, and more");
    ws.write("notes.txt", &edited);
    let refused = ws.run(&["undo", "--turn", "2"]);
    assert_eq!(refused.code, 3, "{}", refused.show());
    step("undo --turn 2 (an edit over its lines since)", &refused);
    assert_eq!(ws.read("notes.txt"), edited);
    let undone = ws.run(&["undo", "--turn", "9"]);
    assert_eq!(undone.code, 1, "{}", undone.show());
    step("undo --turn 9 (no such turn)", &undone);
    let both = ws.run(&["undo", "--turn", "2", "--to", "1"]);
    assert_eq!(both.code, 2, "{}", both.show());
    insta::assert_snapshot!(t);
}

/// A dry run over a file past `PREVIEW_MAX_BYTES` (8 MiB) shows its lengths, not a diff of
/// its bytes, and reads neither version whole: the undo's preview and the revert's alike.
#[test]
fn dry_runs_show_a_big_file_by_its_lengths() {
    let ws = Ws::new();
    let big = |line: &str| line.repeat((9 << 20) / line.len());
    ws.write("big.txt", &big("before, one line of a big file\n"));
    let args = serde_json::json!({
        "path": "big.txt",
        "content": big("after, one line of the big file\n"),
    });
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("args.json");
    std::fs::write(&file, args.to_string()).unwrap();
    let arg = format!("@{}", file.display());
    ws.ok(&["tool", "write_file", "--args", &arg]);
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        r#"{"path":"small.txt","content":"small\n"}"#,
    ]);

    let mut t = String::new();
    let mut step = |label: &str, run: &support::Run| {
        t += &format!("$ shiro {label}\n{}\n", normalize_times(&run.show()));
    };
    step(
        "undo --turn 1 --dry-run",
        &ws.ok(&["undo", "--turn", "1", "--dry-run"]),
    );
    ws.ok(&["undo"]);
    step("undo --dry-run", &ws.ok(&["undo", "--dry-run"]));
    assert!(
        ws.read("big.txt").starts_with("after"),
        "a dry run changed the file"
    );
    insta::assert_snapshot!(t);
}

/// An empty `.shiro` of yours stays: only one an earlier version of shiro left, holding
/// nothing but its emptied `.shiro/bash`, is tidied away.
#[test]
fn an_empty_dot_shiro_of_yours_is_left_where_it_is() {
    let ws = Ws::new();
    // A store to open: every command that opens it tidies what an earlier version left.
    ws.ok(&[
        "tool",
        "write_file",
        "--args",
        r#"{"path":"a.txt","content":"a\n"}"#,
    ]);
    std::fs::create_dir(ws.path().join(".shiro")).unwrap();
    ws.ok(&["log"]);
    assert!(ws.path().join(".shiro").is_dir(), "yours, kept");

    std::fs::create_dir(ws.path().join(".shiro/bash")).unwrap();
    std::fs::write(ws.path().join(".shiro/bash/.gitignore"), "*\n").unwrap();
    ws.ok(&["log"]);
    assert!(
        !ws.path().join(".shiro").exists(),
        "an earlier version's, emptied and removed"
    );
}
