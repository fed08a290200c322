//! Helpers for the agent's end-to-end tests: a workspace and a config dir per test, the
//! built `shiro` run as a child process, and normalisation of paths and session ids.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

/// One test's world: a workspace and an (empty) user config directory.
pub struct World {
    pub ws: tempfile::TempDir,
    pub cfg: tempfile::TempDir,
}

/// A finished run of `shiro`.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl World {
    pub fn new() -> World {
        World {
            ws: tempfile::tempdir().unwrap(),
            cfg: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> PathBuf {
        self.ws.path().canonicalize().unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.ws.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.path().join(rel)).ok()
    }

    /// Writes a replay script and returns the `--model` value that plays it.
    pub fn replay(&self, script: &serde_json::Value) -> String {
        let path = self
            .cfg
            .path()
            .join(format!("script-{}.json", rand_suffix()));
        std::fs::write(&path, script.to_string()).unwrap();
        format!("replay:{}", path.display())
    }

    /// Starts `shiro ARGS` in the workspace with `stdin` piped in (and closed). The user's
    /// real config and model settings are never seen.
    pub async fn spawn(
        &self,
        args: &[&str],
        stdin: &str,
        env: &[(&str, &str)],
    ) -> tokio::process::Child {
        spawn_command(self.command(args, env), stdin).await
    }

    /// The command [`World::spawn`] runs, to adjust (another current directory, another
    /// user) before [`run_command`].
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_shiro"));
        command
            .args(args)
            .current_dir(self.ws.path())
            .env("SHIRO_CONFIG_DIR", self.cfg.path())
            // The user's own command folders (`~/.claude/commands`, …) are never seen.
            .env("HOME", self.cfg.path())
            .env("NO_COLOR", "1")
            .env_remove("SHIRO_MODEL")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .env_remove("XDG_CONFIG_HOME")
            // Its state goes under `<cfg>/.local/state/shiro` (see [`World::state`]).
            .env_remove("XDG_STATE_HOME")
            .env_remove("SHIRO_STATE_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        command
    }

    /// Runs `shiro ARGS` to the end; see [`World::spawn`].
    pub async fn run(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
        let child = self.spawn(args, stdin, env).await;
        finish(child).await
    }

    /// The workspace's state directory, where `shiro` keeps it: its `HOME` is `cfg`.
    pub fn state(&self) -> shiro_undo::StateDir {
        self.state_of(&self.root())
    }

    /// The state directory of the workspace at `root` (canonical), for this world's `HOME`.
    pub fn state_of(&self, root: &Path) -> shiro_undo::StateDir {
        let home = self.cfg.path().join(".local/state/shiro");
        shiro_undo::StateDir::of_workspace(&home, root)
    }

    /// The session files, oldest name first.
    pub fn sessions(&self) -> Vec<PathBuf> {
        let dir = self.state().sessions_dir();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    /// The lines of the only session file, as JSON.
    pub fn session_lines(&self) -> Vec<serde_json::Value> {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        std::fs::read_to_string(&sessions[0])
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The tool results the model got in the only session, in order.
    pub fn tool_results(&self) -> Vec<String> {
        replay_history(&self.session_lines())
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Replaces the workspace path with `[WS]` and session ids with `[SESSION]`.
    pub fn normalize(&self, text: &str) -> String {
        // The state directory first: its key is made from the workspace's path.
        let mut text = text.replace(&self.state().dir().display().to_string(), "[STATE]");
        text = text.replace(&self.root().display().to_string(), "[WS]");
        text = text.replace(&self.cfg.path().display().to_string(), "[CFG]");
        normalize_ids(&text)
    }
}

/// Starts `command` with `stdin` piped in (and closed).
pub async fn spawn_command(
    mut command: tokio::process::Command,
    stdin: &str,
) -> tokio::process::Child {
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // A child that ends without reading its input (a refusal, say) may close the pipe
    // before this write: what it did without the input is what the test checks.
    match input.write_all(stdin.as_bytes()).await {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    drop(input);
    child
}

/// Runs `command` (from [`World::command`]) to the end with `stdin` piped in.
pub async fn run_command(command: tokio::process::Command, stdin: &str) -> Run {
    finish(spawn_command(command, stdin).await).await
}

/// Replaces every `YYYY-MM-DD HH:MM:SS UTC` time with `[TIME]`.
pub fn normalize_times(text: &str) -> String {
    replace_shaped(text, "dddd-dd-dd dd:dd:dd UTC", "[TIME]")
}

/// Replaces every run of `text` that has `shape` (`d` a digit, `h` a hex digit, any other
/// character itself) with `with`.
fn replace_shaped(text: &str, shape: &str, with: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let len = shape.chars().count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let fits = i + len <= chars.len()
            && shape.chars().zip(&chars[i..]).all(|(s, c)| match s {
                'd' => c.is_ascii_digit(),
                'h' => c.is_ascii_hexdigit(),
                other => other == *c,
            });
        if fits {
            out.push_str(with);
            i += len;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Waits for a child (at most 120 s) and collects its output.
pub async fn finish(child: tokio::process::Child) -> Run {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("shiro finished within 120 s")
    .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Replaces every `YYYYMMDD-HHMMSS-xxxx` session id with `[SESSION]`.
pub fn normalize_ids(text: &str) -> String {
    replace_shaped(text, "dddddddd-dddddd-hhhh", "[SESSION]")
}

/// The messages a session file describes, replayed (messages appended, rewinds applied,
/// redos bringing back what the last rewind took, until a message is appended).
pub fn replay_history(lines: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let mut history = Vec::new();
    let mut undone: Vec<Vec<serde_json::Value>> = Vec::new();
    for line in lines {
        match line["type"].as_str().unwrap() {
            "message" => {
                undone.clear();
                history.push(line["message"].clone());
            }
            "rewind" => {
                let to = (line["to"].as_u64().unwrap() as usize).min(history.len());
                undone.push(history.split_off(to));
            }
            "redo" => history.extend(undone.pop().expect("a redo follows a rewind")),
            _ => {}
        }
    }
    history
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Every file under `root` (`.shiro/` holds only the user's files), with its bytes.
pub fn tree(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}
