//! The real shell runner: `sh -c` in the workspace root, bounded in time and output.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::expand::{ShellCall, ShellOutcome, ShellRunner};

/// Runs shell substitutions as `sh -c COMMAND shiro ARGS…` in the workspace root, with the
/// typed text in the `ARGUMENTS` environment variable: stdin closed, stderr discarded,
/// stdout capped, and the whole process group killed on timeout.
///
/// Needs a Tokio runtime with the I/O and time drivers enabled.
#[derive(Debug, Clone)]
pub struct ShRunner {
    root: PathBuf,
    timeout: Duration,
    stdout_cap: usize,
}

impl ShRunner {
    /// The default timeout: 10 seconds.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default stdout cap: 64 KiB.
    pub const DEFAULT_STDOUT_CAP: usize = 64 * 1024;

    /// A runner that runs commands in `workspace_root` with the default limits.
    pub fn new(workspace_root: impl Into<PathBuf>) -> ShRunner {
        ShRunner {
            root: workspace_root.into(),
            timeout: ShRunner::DEFAULT_TIMEOUT,
            stdout_cap: ShRunner::DEFAULT_STDOUT_CAP,
        }
    }

    /// Sets the timeout after which the command's process group is killed.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> ShRunner {
        self.timeout = timeout;
        self
    }

    /// Sets how many bytes of stdout are kept; the rest is read and dropped.
    #[must_use]
    pub fn with_stdout_cap(mut self, bytes: usize) -> ShRunner {
        self.stdout_cap = bytes;
        self
    }
}

/// Kills the command's process group when dropped: when the command ends, and when the
/// substitution's future is dropped (an expansion cancelled by Ctrl-C), so that nothing it
/// started keeps running.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0.take());
    }
}

/// Kills the process group led by `pid`; errors (e.g. the group is already gone) are moot.
fn kill_group(pid: Option<u32>) {
    let pid = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

#[async_trait::async_trait]
impl ShellRunner for ShRunner {
    async fn run(&self, call: &ShellCall<'_>) -> ShellOutcome {
        let mut child = match tokio::process::Command::new("sh")
            .arg("-c")
            .arg(call.command)
            // `$0` of the command; the typed arguments follow as `$1`, `$2`, ….
            .arg("shiro")
            .args(call.args)
            .env("ARGUMENTS", call.arguments)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group, so a timeout can kill everything it started.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                return ShellOutcome::SpawnFailed {
                    reason: e.to_string(),
                };
            }
        };
        let pid = child.id();
        let _group = GroupGuard(pid);
        let stdout = child.stdout.take();
        let cap = self.stdout_cap;
        let work = async {
            let mut kept = Vec::new();
            let mut truncated = false;
            if let Some(mut stdout) = stdout {
                let mut buf = [0u8; 8192];
                loop {
                    match stdout.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let room = cap.saturating_sub(kept.len());
                            if n > room {
                                truncated = true;
                            }
                            kept.extend_from_slice(&buf[..n.min(room)]);
                        }
                    }
                }
            }
            (kept, truncated, child.wait().await)
        };
        let result = tokio::time::timeout(self.timeout, work).await;
        match result {
            Err(_elapsed) => {
                kill_group(pid);
                ShellOutcome::TimedOut {
                    after: self.timeout,
                }
            }
            Ok((_, _, Err(e))) => ShellOutcome::SpawnFailed {
                reason: e.to_string(),
            },
            Ok((kept, truncated, Ok(status))) => {
                if status.success() {
                    ShellOutcome::Success {
                        stdout: String::from_utf8_lossy(&kept).into_owned(),
                        truncated,
                    }
                } else {
                    ShellOutcome::Failed {
                        code: status.code(),
                    }
                }
            }
        }
    }
}
