//! Bash capture end to end, through the built `shiro`: a command's changes are committed from
//! its overlay, recorded, undone and redone byte for byte; detection names what it cannot
//! restore; a timeout or Ctrl-C still commits what the command did.
//!
//! The overlay needs a mount namespace (root, or an unprivileged user namespace); where the
//! kernel refuses one, the overlay tests print why and skip, and the detect-only tests still
//! run.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt as _;

use support::{Ws, overlay_refused};

/// A workspace with files, modes, a link, nested directories and a `.git`.
fn seeded() -> Ws {
    let ws = Ws::new();
    ws.write("src/a.txt", "hello\nworld\n");
    ws.write("build.log", "log\n");
    ws.write("keep.txt", "keep\n");
    ws.write("tree/sub/f", "deep\n");
    ws.write("tree/g", "gee\n");
    ws.write("becomes_dir", "was a file\n");
    ws.write("dir_becomes_file/x", "x\n");
    ws.write("moved/one", "1\n");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    std::os::unix::fs::symlink("keep.txt", ws.path().join("lnk")).unwrap();
    ws
}

fn bash(ws: &Ws, script: &str) -> support::Run {
    let args = serde_json::json!({ "command": script }).to_string();
    ws.run_bounded(&["tool", "bash", "--args", &args])
}

const SCRIPT: &str = "sed -i s/hello/HELLO/ src/a.txt && rm build.log && cat src/a.txt \
    && echo new > new.txt && rm -rf tree && mkdir -p d/e && echo x > d/e/x \
    && chmod 755 keep.txt && ln -sf new.txt lnk && rm becomes_dir && mkdir becomes_dir \
    && echo inside > becomes_dir/f && rm -rf dir_becomes_file && echo flat > dir_becomes_file \
    && mv moved moved2 && echo more >> moved2/one && echo 'ref: x' > .git/HEAD";

#[test]
fn a_bash_turn_is_undone_and_redone_byte_for_byte() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let mut before = ws.tree();
    before.remove(".git/HEAD");
    let run = bash(&ws, SCRIPT);
    assert_eq!(run.code, 0, "{}", run.show());
    insta::assert_snapshot!("bash_turn", run.show());
    // Inside the command, reads saw its own writes (`cat` after `sed -i`).
    assert!(run.stdout.starts_with("HELLO\nworld\n"), "{}", run.show());
    // `.git` is passed through: written directly, not captured as files; what the command
    // did to HEAD is recorded as the repository's state (docs/undo.md, "Git").
    assert_eq!(ws.read(".git/HEAD"), "ref: x\n");
    let mut after = ws.tree();
    after.remove(".git/HEAD");
    assert_ne!(before, after);
    assert_eq!(after["becomes_dir/f"], "file 644 \"inside\\n\"");
    assert_eq!(after["lnk"], "link -> new.txt");
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("    M src/a.txt"), "{}", log.show());

    let undo = ws.ok(&["undo"]);
    let mut now = ws.tree();
    now.remove(".git/HEAD");
    assert_eq!(now, before, "{}", undo.show());
    assert_eq!(
        ws.read(".git/HEAD"),
        "ref: refs/heads/main\n",
        "undo puts HEAD back"
    );

    ws.ok(&["redo"]);
    let mut now = ws.tree();
    now.remove(".git/HEAD");
    assert_eq!(now, after);
    assert_eq!(ws.read(".git/HEAD"), "ref: x\n", "redo moves HEAD again");
    assert_no_layers(&ws);
    assert_no_mounts(&ws);
}

#[test]
fn a_directory_s_new_mode_is_listed_logged_and_undone() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let mode = |path: &str| {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(ws.path().join(path)).unwrap();
        meta.permissions().mode() & 0o7777
    };
    let was = mode("tree");
    let run = bash(&ws, "chmod 700 tree");
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(run.stdout.contains("\nM tree\n"), "{}", run.show());
    assert_eq!(mode("tree"), 0o700);
    let log = ws.ok(&["log", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&log.stdout).unwrap();
    assert_eq!(
        json["turns"][0]["changes"],
        serde_json::json!([{"kind": "modified", "path": "tree"}]),
        "{}",
        log.show()
    );
    ws.ok(&["undo"]);
    assert_eq!(mode("tree"), was);
}

#[test]
fn a_command_that_changes_nothing_records_no_turn() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let run = bash(
        &ws,
        "cat src/a.txt > /dev/null && touch keep.txt && ls > /dev/null",
    );
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(!run.stdout.contains("files changed"), "{}", run.show());
    let log = ws.ok(&["log"]);
    assert!(log.stdout.contains("no turns"), "{}", log.show());
    assert_no_layers(&ws);
}

#[test]
fn a_conflict_after_a_bash_turn_exits_3_and_changes_nothing() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    assert_eq!(bash(&ws, "echo bash > src/a.txt").code, 0);
    ws.write("src/a.txt", "the user's own edit\n");
    let undo = ws.run(&["undo"]);
    assert_eq!(undo.code, 3, "{}", undo.show());
    assert_eq!(ws.read("src/a.txt"), "the user's own edit\n");
}

#[test]
fn a_timed_out_command_is_still_committed_and_undoable() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    let args = serde_json::json!({
        "command": "setsid sleep 32.75 & echo early > early.txt && sleep 30",
        "timeout_secs": 1,
    })
    .to_string();
    let run = ws.run_bounded(&["tool", "bash", "--args", &args]);
    assert_eq!(run.code, 0, "{}", run.show());
    assert_gone("32.75");
    assert!(
        run.stdout.contains("[timed out after 1 s"),
        "{}",
        run.show()
    );
    assert!(run.stdout.contains("A early.txt"), "{}", run.show());
    assert_eq!(ws.read("early.txt"), "early\n");
    ws.ok(&["undo"]);
    assert!(!ws.exists("early.txt"));
}

#[test]
fn ctrl_c_stops_the_command_and_commits_what_it_did() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = seeded();
    // A daemon that leaves the process group dies with the command's PID namespace.
    let args = serde_json::json!({
        "command": "setsid sleep 31.25 & echo early > early.txt && sleep 30.5"
    })
    .to_string();
    let child = ws
        .command(&["tool", "bash", "--args", &args])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the command has written into its layer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !layer_holds(&ws, "early.txt") {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never wrote"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let run = ws.finish(child);
    assert_eq!(run.code, 130, "{}", run.show());
    assert!(
        run.stdout.contains("[stopped by the user"),
        "{}",
        run.show()
    );
    assert!(run.stdout.contains("A early.txt"), "{}", run.show());
    assert!(
        run.stderr.contains(
            "interrupted; the command was stopped, and what it changed was recorded (`shiro undo` reverts it)"
        ),
        "{}",
        run.show()
    );
    assert_eq!(ws.read("early.txt"), "early\n");
    let json = ws.ok(&["log", "--json"]);
    assert!(
        json.stdout.contains("\"ran_bash\": true"),
        "{}",
        json.show()
    );
    for marker in ["31.25", "30.5"] {
        assert_gone(marker);
    }
    ws.ok(&["undo"]);
    assert!(!ws.exists("early.txt"));
}

/// A file you change while a command runs, and that the command changes or removes too, is
/// kept as you left it: the command's change to it is not applied, and the result says so.
/// Its other changes are applied and undone as ever. The test edits once the command has
/// opened a FIFO (its open for writing waits for that), and lets the
/// command go on through the FIFO: no timing is involved.
#[test]
fn a_file_you_change_while_the_command_runs_is_kept() {
    if overlay_refused().is_some() {
        return;
    }
    let ws = Ws::new();
    ws.write("mine.txt", "one\n");
    ws.write("gone.txt", "gone\n");
    ws.write("theirs.txt", "two\n");
    // Outside the workspace: through the overlay, a FIFO is one of its own.
    let sync = tempfile::tempdir().unwrap();
    let fifo = sync.path().join("sync.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let script = format!(
        "read go < '{}'; echo agent > mine.txt; echo agent > theirs.txt; rm gone.txt; \
         echo new > new.txt",
        fifo.display()
    );
    let args = serde_json::json!({ "command": script }).to_string();
    let child = ws
        .command(&["tool", "bash", "--args", &args])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Opened for writing once the command has opened it for reading.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut pipe = loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&fifo);
        match opened {
            Ok(pipe) => break pipe,
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {}
            Err(err) => panic!("{err}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never began"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    ws.write("mine.txt", "yours\n");
    ws.write("gone.txt", "yours too\n");
    std::io::Write::write_all(&mut pipe, b"go\n").unwrap();
    drop(pipe);
    let run = ws.finish(child);
    assert_eq!(run.code, 0, "{}", run.show());
    insta::assert_snapshot!("changed_while_it_ran", run.show());
    assert_eq!(ws.read("mine.txt"), "yours\n");
    assert_eq!(ws.read("gone.txt"), "yours too\n");
    assert_eq!(ws.read("theirs.txt"), "agent\n");
    assert_eq!(ws.read("new.txt"), "new\n");
    // The turn holds what the command changed, not your files.
    ws.ok(&["undo"]);
    assert_eq!(ws.read("mine.txt"), "yours\n");
    assert_eq!(ws.read("gone.txt"), "yours too\n");
    assert_eq!(ws.read("theirs.txt"), "two\n");
    assert!(!ws.exists("new.txt"));
}

/// Asserts that no process runs `sleep MARKER`: with the overlay, the command's whole PID
/// namespace is gone by the time the call returns, a process that left the process group
/// (`setsid`) too, so nothing could still write into the layer being committed.
fn assert_gone(marker: &str) {
    let wanted = format!("sleep\0{marker}\0");
    let alive: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmd| cmd == wanted.as_bytes())
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        alive.is_empty(),
        "`sleep {marker}` outlived the command: {alive:?}"
    );
}

#[test]
fn detect_only_names_every_path_it_cannot_restore() {
    let ws = seeded();
    std::fs::write(
        ws.config.path().join("config.toml"),
        "[bash]\ncapture = \"detect\"\n",
    )
    .unwrap();
    // Ignored paths are listed last, though `a_out` sorts first.
    ws.write(".gitignore", "a_out/\n");
    let run = bash(
        &ws,
        "mkdir a_out && echo o > a_out/o && echo x >> keep.txt && rm build.log",
    );
    assert_eq!(run.code, 0, "{}", run.show());
    insta::assert_snapshot!("detect_run", run.show());
    let log = ws.ok(&["log"]);
    insta::assert_snapshot!("detect_log", support::normalize_times(&log.stdout));
    let undo = ws.ok(&["undo"]);
    insta::assert_snapshot!("detect_undo", undo.show());
    // Nothing could be restored: the command's changes stay.
    assert_eq!(ws.read("keep.txt"), "keep\nx\n");
}

/// Whether a layer of a running command holds `name` in its upper directory.
/// `shiro` runs the overlay's helpers from `shiro-bash-helper` beside it, which starts in
/// about half the time; a `shiro` copied alone runs them from itself, and still captures.
/// The helper, run by hand, only says what it is.
#[test]
fn the_overlay_helper_is_the_binary_beside_shiro_or_shiro_itself() {
    let helper = support::shiro_bin().with_file_name("shiro-bash-helper");
    let by_hand = std::process::Command::new(&helper).output().unwrap();
    assert_eq!(by_hand.status.code(), Some(2));
    insta::assert_snapshot!(String::from_utf8_lossy(&by_hand.stderr), @"shiro-bash-helper: this program is started by shiro to capture what a bash command changes; it is not run by hand");
    if overlay_refused().is_some() {
        return;
    }
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("shiro");
    if std::fs::hard_link(support::shiro_bin(), &copy).is_err() {
        std::fs::copy(support::shiro_bin(), &copy).unwrap();
    }
    let ws = Ws::new();
    let args = serde_json::json!({ "command": "echo made > made.txt" }).to_string();
    let child = ws
        .command_of(&copy, &["tool", "bash", "--args", &args])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let run = ws.finish(child);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(!run.stdout.contains("detect-only"), "{}", run.show());
    assert_eq!(ws.read("made.txt"), "made\n");
    ws.ok(&["undo"]);
    assert!(!ws.exists("made.txt"), "captured, so undone");
}

fn layer_holds(ws: &Ws, name: &str) -> bool {
    layers(ws)
        .iter()
        .any(|layer| layer.join("up").join(name).exists())
}

fn layers(ws: &Ws) -> Vec<std::path::PathBuf> {
    support::bash_layers(&ws.state().layers_dir())
}

fn assert_no_layers(ws: &Ws) {
    assert_eq!(layers(ws), Vec::<std::path::PathBuf>::new());
}

/// No mount of this process's namespace lies in the workspace: the overlay lived in the
/// command's own namespace, and went with it.
fn assert_no_mounts(ws: &Ws) {
    let root = ws.path().canonicalize().unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let inside: BTreeMap<usize, &str> = mounts
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains(root.to_str().unwrap()))
        .collect();
    assert!(inside.is_empty(), "{inside:?}");
}

/// Without root, the overlay runs in a user namespace (mapping only the user's own ids) with
/// `userxattr`. Run as root (as CI is), this drops to `nobody` with `setpriv` to check that
/// path too; elsewhere the other tests already take it.
#[test]
#[allow(clippy::print_stderr)]
fn the_overlay_works_without_root_through_a_user_namespace() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root, so the other tests already run without privilege");
        return;
    }
    let Some(setpriv) = support::setpriv() else {
        return;
    };
    let ws = seeded();
    support::give_to_nobody(&[ws.path(), ws.config.path()]);
    let as_nobody = |args: &[&str]| ws.run_as_nobody(setpriv, args);
    let (code, _, stderr) = as_nobody(&["log"]);
    if code != Some(0) {
        eprintln!("skipped: nobody cannot run the shiro binary here ({stderr})");
        return;
    }
    let mut before = ws.tree();
    before.remove(".git/HEAD");
    let args = serde_json::json!({ "command": SCRIPT }).to_string();
    let (code, stdout, stderr) = as_nobody(&["tool", "bash", "--args", &args]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    if let Some(at) = stdout.find("fell back to detect-only") {
        eprintln!(
            "skipped: unprivileged user namespaces are refused here ({})",
            &stdout[at..]
        );
        return;
    }
    assert!(stdout.contains("M src/a.txt"), "{stdout}{stderr}");
    assert_eq!(ws.read(".git/HEAD"), "ref: x\n");
    let (code, stdout, stderr) = as_nobody(&["undo"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let mut now = ws.tree();
    now.remove(".git/HEAD");
    assert_eq!(now, before);
    assert_no_layers(&ws);
}

/// A checkout can ship `.shiro/bash` (where an earlier version made its layers) as a link to
/// somewhere else: recovery never looks through it, so nothing there that looks like a
/// leftover layer is removed.
#[test]
fn recovery_never_follows_a_planted_layers_link() {
    let ws = seeded();
    let elsewhere = tempfile::tempdir().unwrap();
    let victim = elsewhere.path().join("0123456789abcdef");
    std::fs::create_dir_all(victim.join("up")).unwrap();
    std::fs::write(victim.join("up/precious"), "mine\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".shiro")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".shiro/bash")).unwrap();
    let log = ws.run(&["log"]);
    assert_eq!(log.code, 0, "{}", log.show());
    assert_eq!(
        std::fs::read_to_string(victim.join("up/precious")).unwrap(),
        "mine\n"
    );
    // A bash call makes its layer in the state directory, never through the link.
    let run = bash(&ws, "echo hi > hi.txt");
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(std::fs::read_dir(elsewhere.path()).unwrap().count() == 1);
}

/// Recovery finishes a layer whose commit began in this boot of the system, and discards one
/// whose commit began before a restart: the overlay is mounted `volatile`, so after a power
/// cut its files may be torn. Finishing changes only paths whose state before the commit the
/// undo record saved, still as saved; these layers come with no record (one that does is
/// finished in `shiro-undo`'s `commit_crash` test), so nothing of them is applied, and the
/// notice names what was kept.
#[test]
fn recovery_finishes_a_commit_of_this_boot_and_discards_one_from_before_a_restart() {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let cases = [(boot.trim(), true), ("an-earlier-boot", false)];
    // In the state directory, and where an earlier version left its layers.
    for ((marker, applied), legacy) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let ws = seeded();
        let layers = if legacy {
            ws.path().join(".shiro/bash")
        } else {
            ws.state().layers_dir()
        };
        let layer = layers.join("00112233aabbccdd");
        std::fs::create_dir_all(layer.join("up/src")).unwrap();
        std::fs::create_dir_all(layer.join("work")).unwrap();
        std::fs::write(layer.join("up/src/a.txt"), "from the layer\n").unwrap();
        std::fs::write(layer.join("up/fresh.txt"), "fresh\n").unwrap();
        std::fs::write(layer.join("commit"), marker).unwrap();
        let log = ws.run(&["log"]);
        assert_eq!(log.code, 0, "{}", log.show());
        if applied {
            assert!(
                log.stderr.contains(
                    "did not apply the rest of the changes of a bash command that was interrupted while they were applied, and kept the workspace as it is, because they are not what they were when its changes began to be applied (changed since, or never saved): fresh.txt, src/a.txt"
                ),
                "{}",
                log.show()
            );
            assert_eq!(ws.read("src/a.txt"), "hello\nworld\n");
            assert!(!ws.exists("fresh.txt"));
        } else {
            assert!(
                log.stderr.contains(
                    "did not finish applying the changes of a bash command that a restart of the system interrupted"
                ),
                "{}",
                log.show()
            );
            assert_eq!(ws.read("src/a.txt"), "hello\nworld\n");
            assert!(!ws.exists("fresh.txt"));
        }
        assert_no_layers(&ws);
        assert!(
            !ws.exists(".shiro"),
            "the earlier version's directories are tidied away"
        );
    }
}

/// A name that is not UTF-8 is one shiro can neither apply nor undo. A command that makes
/// one changes nothing at all, rather than lose a file it renamed to that name; a removal of
/// such a name (a file of yours) is not carried over, and the file stays.
#[test]
fn a_name_shiro_cannot_hold_is_never_half_applied() {
    use std::os::unix::ffi::OsStrExt as _;
    if let Some(why) = overlay_refused() {
        eprintln!("skipped: {why}");
        return;
    }
    let ws = Ws::new();
    ws.write("good.txt", "important\n");
    ws.write("other.txt", "other\n");
    let moved = bash(
        &ws,
        "echo more >> other.txt && mv good.txt \"$(printf 'bad\\351.txt')\"",
    );
    assert_eq!(moved.code, 0, "{}", moved.show());
    insta::assert_snapshot!(moved.stdout.lines().last().unwrap_or(""), @r#"[the command ran, but none of its file changes was applied to the workspace, which is as it was before the command: it made "bad\xE9.txt" in ., a name shiro cannot hold (not UTF-8), so shiro could neither apply it nor undo it; run it again so that it makes only UTF-8 names]"#);
    assert_eq!(ws.read("good.txt"), "important\n");
    assert_eq!(ws.read("other.txt"), "other\n");
    assert_eq!(ws.run(&["log"]).stdout, "no turns to undo\n");

    let bad = std::ffi::OsStr::from_bytes(b"yours\xe9.txt");
    std::fs::write(ws.path().join(bad), "yours\n").unwrap();
    let removed = bash(&ws, "rm yours*.txt && echo more >> other.txt");
    assert_eq!(removed.code, 0, "{}", removed.show());
    insta::assert_snapshot!(removed.stdout, @r#"
    (no output)
    [exit code 0]
    [files changed (1; recorded, undoable):]
    M other.txt
    [note: not carried over: the removal of "yours\xE9.txt" in ., a name shiro cannot hold (not UTF-8); it stays as it was]
    "#);
    assert_eq!(std::fs::read(ws.path().join(bad)).unwrap(), b"yours\n");
    assert_eq!(ws.read("other.txt"), "other\nmore\n");
}
