//! The `bash` tool: a shell command in the workspace root, bounded in time and output, with
//! every process it starts killed when it ends, times out or is cancelled.

use std::fmt::Write as _;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::{Pid, Signal, kill_process_group};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::mutator::Mutator;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};

/// The timeout when the model gives none.
pub const BASH_DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The longest timeout a model may ask for.
pub const BASH_MAX_TIMEOUT_SECS: u64 = 600;
/// How many bytes of output are kept: the first half and the last half of this.
pub const BASH_MAX_OUTPUT_BYTES: usize = 30_000;
/// How long output is still read after the shell has exited and its group was killed. Only a
/// process that left the group (`setsid`) can hold the pipe open past that.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs a shell command in the workspace root. Its effects are not recorded for undo.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

/// The `bash` tool.
pub fn bash() -> Bash {
    Bash
}

/// The arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run by `bash -c` in the workspace root.
    pub command: String,
    /// Seconds before the command and everything it started are killed (default 120, at
    /// most 600).
    #[serde(alias = "timeoutSecs")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_secs: Option<u64>,
}

const NAME: &str = "bash";

#[async_trait]
impl Tool for Bash {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Runs a command with `bash -c` in the workspace root (stdin is empty) and returns its \
         combined stdout and stderr and its exit code. Use it to build, run tests, and run git \
         or other programs. It times out after `timeout_secs` (default 120, at most 600); then \
         the command and every process it started are killed. Processes left running in the \
         background are killed when the command exits, so do not start servers expecting them \
         to stay up. Output over 30000 bytes keeps its beginning and end. Changes a command makes \
         to files are NOT recorded for undo and cannot be undone: change files with the edit \
         tools, and read them with read_file, grep, glob and list_dir rather than cat, grep or \
         find."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<BashArgs>()
    }

    /// True: a command can change anything, so it must be approved.
    fn is_mutating(&self) -> bool {
        true
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: BashArgs = parse_args(NAME, args)?;
        let secs = args.timeout_secs.unwrap_or(BASH_DEFAULT_TIMEOUT_SECS);
        if !(1..=BASH_MAX_TIMEOUT_SECS).contains(&secs) {
            return Err(ToolError::refused(format!(
                "timeout_secs must be from 1 to {BASH_MAX_TIMEOUT_SECS}, not {secs}; nothing was run"
            )));
        }
        if args.command.trim().is_empty() {
            return Err(ToolError::refused("command is empty; nothing was run"));
        }
        let root = mutator.root();
        let is_dir = tokio::fs::metadata(root)
            .await
            .is_ok_and(|meta| meta.is_dir());
        if !is_dir {
            return Err(ToolError::refused(format!(
                "bash needs a workspace on disk, and the workspace root {} is not a directory \
                 on disk; nothing was run",
                root.display()
            )));
        }
        let text = run(root, &args.command, Duration::from_secs(secs))
            .await
            .map_err(|err| {
                ToolError::refused(format!("could not start the shell: {err}; nothing was run"))
            })?;
        Ok(ToolOutput {
            text,
            changes: Vec::new(),
        })
    }
}

/// Kills the command's process group when dropped, so that a cancelled turn (its future
/// dropped on Ctrl-C) leaves nothing running.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    /// Kills the group now, once: after that the id may be reused by an unrelated group.
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            // The group may already be gone (ESRCH), which is what we want anyway.
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How the command ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    /// `wait` itself failed; the group was killed.
    Lost(io::Error),
}

async fn run(root: &Path, command: &str, timeout: Duration) -> io::Result<String> {
    // One pipe for stdout and stderr, so the model reads them interleaved as a terminal shows.
    let (writer, mut reader) = tokio::net::unix::pipe::pipe()?;
    let writer = writer.into_blocking_fd()?;
    let mut child = match spawn("bash", root, command, &writer) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => spawn("sh", root, command, &writer)?,
        other => other?,
    };
    // Our copy of the write end must go, or the pipe never reports end of file.
    drop(writer);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let mut group = GroupGuard(pid);

    let mut capture = Capture::default();
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Armed when the shell exits; until then it lies a year ahead.
    let drain = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
    tokio::pin!(drain);
    let mut ending: Option<Ending> = None;
    let mut timed_out = false;
    let mut eof = false;
    while !(eof && ending.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
            status = child.wait(), if ending.is_none() => {
                ending = Some(match status {
                    Ok(_) if timed_out => Ending::TimedOut,
                    Ok(status) => Ending::Exited(status),
                    Err(err) => Ending::Lost(err),
                });
                // Background processes die with the command, and their pipe ends with them.
                group.kill();
                drain.as_mut().reset(Instant::now() + DRAIN_GRACE);
            },
            () = &mut deadline, if ending.is_none() && !timed_out => {
                timed_out = true;
                group.kill();
            },
            () = &mut drain, if ending.is_some() => break,
        }
    }
    let mut out = capture.render();
    if !eof {
        out.push_str(
            "[a process that left the command's process group kept the output open; output \
             after the command exited was not read]\n",
        );
    }
    match ending {
        Some(Ending::Exited(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => {
                let _ = write!(out, "[exit code {code}]");
            }
            (None, Some(signal)) => {
                let _ = write!(out, "[killed by signal {signal}]");
            }
            (None, None) => out.push_str("[ended without an exit code]"),
        },
        Some(Ending::TimedOut) => {
            let _ = write!(
                out,
                "[timed out after {} s: the command and every process it started were killed; \
                 pass a larger timeout_secs (at most {BASH_MAX_TIMEOUT_SECS}) or run less at once]",
                timeout.as_secs()
            );
        }
        Some(Ending::Lost(err)) => {
            let _ = write!(
                out,
                "[lost track of the command ({err}); its processes were killed]"
            );
        }
        None => out.push_str("[the command's end was not seen; its processes were killed]"),
    }
    Ok(out)
}

fn spawn(program: &str, root: &Path, command: &str, writer: &OwnedFd) -> io::Result<Child> {
    Command::new(program)
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer.try_clone()?)
        // Its own process group, so that one signal reaches everything it starts.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
}

/// The output kept: the first and the last `BASH_MAX_OUTPUT_BYTES / 2` bytes, and how much
/// fell in between.
#[derive(Debug, Default)]
struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes dropped from the front of `tail`, and the newlines among them.
    dropped: usize,
    dropped_lines: usize,
    /// Whether the last byte dropped ended a line, so `tail` starts on a line of its own.
    dropped_at_line_end: bool,
}

const HALF: usize = BASH_MAX_OUTPUT_BYTES / 2;

impl Capture {
    fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < HALF {
            let take = bytes.len().min(HALF - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend_from_slice(bytes);
        // Trim in batches so a long stream costs linear time.
        if self.tail.len() > 2 * HALF {
            self.drop_front(self.tail.len() - HALF);
        }
    }

    fn drop_front(&mut self, n: usize) {
        self.dropped += n;
        self.dropped_lines += count_newlines(&self.tail[..n]);
        if n > 0 {
            self.dropped_at_line_end = self.tail[n - 1] == b'\n';
        }
        self.tail.drain(..n);
    }

    fn render(mut self) -> String {
        if self.tail.len() > HALF {
            self.drop_front(self.tail.len() - HALF);
        }
        if self.dropped > 0 {
            // Cut at line breaks where there are any, so no line is shown in part.
            if let Some(last) = self.head.iter().rposition(|&b| b == b'\n') {
                let cut = self.head.split_off(last + 1);
                self.dropped += cut.len();
            }
            let partial = !self.dropped_at_line_end;
            if let Some(first) = self
                .tail
                .iter()
                .position(|&b| b == b'\n')
                .filter(|_| partial)
            {
                self.drop_front(first + 1);
            }
        }
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            let _ = writeln!(
                out,
                "[… {} bytes ({} lines) left out of the middle; to see everything, redirect the \
                 output to a file and read it with read_file or grep …]",
                self.dropped, self.dropped_lines
            );
        }
        out.push_str(&String::from_utf8_lossy(&self.tail));
        if out.is_empty() {
            out.push_str("(no output)\n");
        } else if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}
