//! Running the built `shiro` binary in temporary workspaces.
#![allow(dead_code, clippy::unwrap_used)] // Each test file uses a different part of this.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `shiro` binary of this build. `cargo test --workspace` (and so `cargo xtask test`)
/// builds every binary before running any test; it sits beside the `deps` folder.
pub fn shiro_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("shiro");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p shiro-cli` (cargo xtask test does)",
        bin.display()
    );
    bin
}

/// A temporary workspace with its own user config directory.
pub struct Ws {
    pub dir: tempfile::TempDir,
    pub config: tempfile::TempDir,
}

/// What one run printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// `exit N`, stdout and stderr in one block, for snapshots.
    pub fn show(&self) -> String {
        let mut out = format!("exit {}\n", self.code);
        if !self.stdout.is_empty() {
            out += &format!("--- stdout\n{}", self.stdout);
        }
        if !self.stderr.is_empty() {
            out += &format!("--- stderr\n{}", self.stderr);
        }
        out
    }
}

impl Ws {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            config: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The workspace's state directory, where the `shiro` of [`Ws::command`] keeps it (its
    /// `HOME` is the config directory) and where tests that open the store in-process do.
    pub fn state(&self) -> shiro_undo::StateDir {
        let home = self.config.path().join(".local/state/shiro");
        shiro_undo::StateDir::of_workspace(&home, &self.path().canonicalize().unwrap())
    }

    /// [`Ws::tree`] without `.git`: an undo restores HEAD, the refs, the stash list and the
    /// index there, but objects and reflogs only grow (tests/tests/bash_git.rs reads the
    /// repository's state through git).
    pub fn worktree(&self) -> BTreeMap<String, String> {
        let mut tree = self.tree();
        tree.retain(|path, _| path != ".git" && !path.starts_with(".git/"));
        tree
    }

    /// The workspace's undo store directory.
    pub fn store(&self) -> PathBuf {
        self.state().undo_dir()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path().join(rel).symlink_metadata().is_ok()
    }

    /// A workspace in a new directory under `parent` (a tmpfs, say), with its config
    /// directory, and so its state (see [`Ws::state`]), on the same file system.
    pub fn new_in(parent: &Path) -> Self {
        Self {
            dir: tempfile::tempdir_in(parent).unwrap(),
            config: tempfile::tempdir_in(parent).unwrap(),
        }
    }

    /// `shiro -C <ws> ARGS`, ready to spawn, in the environment every run gets: its own
    /// config directory, no model, every stream piped.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of(&shiro_bin(), args)
    }

    /// [`Ws::command`] for the `shiro` binary at `shiro` (a copy elsewhere, say).
    pub fn command_of(&self, shiro: &Path, args: &[&str]) -> Command {
        self.command_in(shiro, self.path(), args)
    }

    /// [`Ws::command_of`] in another workspace, `root` (a worktree of this one, say), with
    /// this one's environment.
    pub fn command_in(&self, shiro: &Path, root: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(shiro);
        self.isolate(&mut command)
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Gives `command` (shiro, or a shell that runs it) the environment every run gets: its
    /// own config directory and home, so nothing of the user's is read or written, and no
    /// model.
    pub fn isolate<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        command
            .env("SHIRO_CONFIG_DIR", self.config.path())
            // The user's own command folders (`~/.claude/commands`, …) are never seen.
            .env("HOME", self.config.path())
            .env_remove("XDG_CONFIG_HOME")
            // Its state goes under `<config>/.local/state/shiro` (see [`Ws::state`]).
            .env_remove("XDG_STATE_HOME")
            .env_remove("SHIRO_STATE_DIR")
            .env("NO_COLOR", "1")
            .env_remove("SHIRO_MODEL")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
    }

    /// Runs `shiro -C <ws> ARGS` with `stdin` as input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let mut child = self.command(args).spawn().unwrap();
        // A child that ends without reading its input (a refusal, say) may close the pipe
        // before this write: what it did without the input is what the test checks.
        match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
            written => written.unwrap(),
        }
        self.finish(child)
    }

    /// Runs `shiro -C <ws> ARGS` with no input, failing the test (rather than hanging it)
    /// when it takes more than a minute.
    pub fn run_bounded(&self, args: &[&str]) -> Run {
        let mut child = self.command(args).stdin(Stdio::null()).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("shiro {args:?} hung");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.finish(child)
    }

    /// Waits for a child spawned from [`Ws::command`] and returns what it printed, with the
    /// workspace's state directory, the workspace and the config paths replaced by
    /// `<state>`, `<ws>` and `<config>`.
    pub fn finish(&self, child: std::process::Child) -> Run {
        let out = child.wait_with_output().unwrap();
        let clean = |bytes: Vec<u8>| {
            let text = String::from_utf8(bytes).unwrap();
            let root = self.path().canonicalize().unwrap();
            // The state directory first: its name is made from the workspace's path.
            text.replace(self.state().dir().to_str().unwrap(), "<state>")
                .replace(root.to_str().unwrap(), "<ws>")
                .replace(self.config.path().to_str().unwrap(), "<config>")
        };
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: clean(out.stdout),
            stderr: clean(out.stderr),
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "")
    }

    /// Runs and asserts the exit code, returning the run.
    pub fn ok(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert_eq!(run.code, 0, "shiro {args:?} failed:\n{}", run.show());
        run
    }

    /// Every entry under the root (`.shiro/` holds only the user's files: shiro's state is
    /// elsewhere): kind, mode and bytes.
    pub fn tree(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(self.path(), self.path(), &mut out);
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = path.symlink_metadata().unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            out.insert(
                rel,
                format!("link -> {}", std::fs::read_link(&path).unwrap().display()),
            );
        } else if meta.is_dir() {
            out.insert(rel.clone(), format!("dir {mode:o}"));
            walk(root, &path, out);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.insert(
                rel,
                format!("file {mode:o} {:?}", String::from_utf8_lossy(&bytes)),
            );
        }
    }
}

/// Replaces `YYYY-MM-DD HH:MM:SS UTC` timestamps and `"time": N` fields with placeholders.
pub fn normalize_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut line = line.to_owned();
        if let Some(pos) = line.find(" UTC")
            && pos >= 19
            && line.is_char_boundary(pos - 19)
        {
            line.replace_range(pos - 19..pos + 4, "<time>");
        }
        if let Some(pos) = line.find("\"time\": ") {
            let end = line[pos + 8..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(line.len(), |e| pos + 8 + e);
            line.replace_range(pos + 8..end, "<time>");
        }
        out.push_str(&line);
    }
    out
}

/// A tiny xorshift generator: the seed alone replays a run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The number in the environment variable `name`, if it holds one.
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The seed in the environment variable `name`, or a new one from the clock (never 0, which
/// xorshift cannot leave). Print it, so that a failing run can be replayed.
pub fn seed_from(name: &str) -> u64 {
    env_number(name).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    })
}

/// Why bash's overlay cannot be used on this machine, if it cannot (printed, so a skipped
/// test says why): asks a scratch workspace once per test process.
#[allow(clippy::print_stderr)]
pub fn overlay_refused() -> Option<String> {
    static ANSWER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let answer = ANSWER.get_or_init(|| {
        let ws = Ws::new();
        let run = ws.run(&["tool", "bash", "--args", r#"{"command":"true"}"#]);
        let marker = "bash capture fell back to detect-only: ";
        run.stdout.find(marker).map(|at| {
            let rest = &run.stdout[at + marker.len()..];
            rest.split("; from now on")
                .next()
                .unwrap_or(rest)
                .to_owned()
        })
    });
    if let Some(why) = answer {
        eprintln!("skipped: overlays are refused on this machine ({why})");
    }
    answer.clone()
}

/// The bash layers in the directory `layers` (a removed layer, renamed `trash-…` while it is
/// deleted in the background, is not one).
pub fn bash_layers(layers: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(layers)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit())
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The user id of `nobody`, as whom tests run `shiro` without privilege.
pub const NOBODY: u32 = 65534;

/// `setpriv`, to drop root's privileges with; `None` (the caller skips) without it.
#[allow(clippy::print_stderr)] // The skip is said where a test's output is read.
pub fn setpriv() -> Option<&'static str> {
    let found = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        eprintln!("skipped: no setpriv to drop privileges with");
    }
    found
}

/// Gives `dirs`, and everything in them, to nobody.
pub fn give_to_nobody(dirs: &[&Path]) {
    for dir in dirs {
        Command::new("chown")
            .args(["-R", &format!("{NOBODY}:{NOBODY}")])
            .arg(dir)
            .status()
            .unwrap();
    }
}

/// `PROGRAM ARGS…` as nobody, through `setpriv`.
pub fn nobody_command(setpriv: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(setpriv);
    command
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ])
        .arg(program);
    command
}

impl Ws {
    /// `shiro -C ws ARGS` as nobody, with the workspace's config directory as its home:
    /// its exit code, stdout and stderr.
    pub fn run_as_nobody(&self, setpriv: &str, args: &[&str]) -> (Option<i32>, String, String) {
        let out = nobody_command(setpriv, shiro_bin())
            .arg("-C")
            .arg(self.path())
            .args(args)
            .env("SHIRO_CONFIG_DIR", self.config.path())
            .env("HOME", self.config.path())
            .env_remove("XDG_STATE_HOME")
            .env_remove("SHIRO_STATE_DIR")
            .env("NO_COLOR", "1")
            .env_remove("SHIRO_MODEL")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Whether `git` is missing here, saying so for the test that then skips.
#[allow(clippy::print_stderr)] // The skip is said where a test's output is read.
pub fn git_missing() -> bool {
    let missing = Command::new("git").arg("--version").output().is_err();
    if missing {
        eprintln!("skipped: git is not installed");
    }
    missing
}

/// Runs `git ARGS` in `root` as a made-up committer, failing the test when it fails.
pub fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A proptest runner of `default` cases, or `PROPTEST_CASES` up to `most`: for properties
/// whose every case runs commands, which the soak's 20,000 would make last hours. The
/// `proptest!` macro would let `PROPTEST_CASES` override any configured count, so the runner
/// is built here, from this config alone.
pub fn capped_runner(default: u32, most: u32) -> proptest::test_runner::TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .map_or(default, |n: u32| n.min(most));
    proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        ..proptest::test_runner::Config::default()
    })
}
