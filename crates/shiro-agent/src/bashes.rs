//! `/bashes`: the session's background commands, listed, shown or stopped, and what the end
//! of a session says of those it stopped.

use std::fmt::Write as _;
use std::time::Duration;

use shiro_providers::{Message, Role};
use shiro_tools::capture::{Background, JobSummary, Status};

use crate::events::Printer;
use crate::protocol::{BackgroundAction, BackgroundChoice, BackgroundItem, ToFront};

/// How much of a command's output `/bashes show` prints.
const SHOW_BYTES: usize = 4000;

/// `/bashes [show ID | kill ID]`.
pub async fn command(background: Option<&Background>, args: &str) -> String {
    let Some(background) = background else {
        return "background commands are off ([bash] background_limit = 0)".to_owned();
    };
    let words: Vec<&str> = args.split_whitespace().collect();
    match words.as_slice() {
        [] => list(&background.list()),
        ["show", id] => match background.job(id) {
            Ok(job) => {
                let mut text = job.tail(SHOW_BYTES);
                if text.is_empty() {
                    text.push_str("(no output yet)\n");
                } else if !text.ends_with('\n') {
                    text.push('\n');
                }
                let _ = write!(text, "[{}: {}]", job.id(), job.status());
                text
            }
            Err(err) => err.0,
        },
        ["kill", id] => match background.job(id) {
            Ok(job) if job.status() == Status::Running => {
                job.kill().await;
                format!("{id}: stopped, with every process it started")
            }
            Ok(job) => format!("{id} had already ended: {}", job.status()),
            Err(err) => err.0,
        },
        _ => "usage: /bashes, /bashes show ID, /bashes kill ID".to_owned(),
    }
}

/// `/bashes` in the terminal UI: the person picks a command and what to do with it, and
/// this does it. Nothing is shown when they pick none.
pub(crate) async fn pick(printer: &mut Printer, background: Option<&Background>) -> String {
    let jobs = match background {
        Some(background) => background.list(),
        None => return command(None, "").await,
    };
    if jobs.is_empty() {
        return list(&jobs);
    }
    let (reply, chosen) = std::sync::mpsc::channel();
    printer.ui(ToFront::PickBackground {
        commands: items(&jobs),
        reply,
    });
    // The UI answers at once when it cannot show a picker; waiting blocks this thread as a
    // prompt does.
    match chosen.recv().ok().flatten() {
        Some(BackgroundChoice { id, action }) => {
            let verb = match action {
                BackgroundAction::Show => "show",
                BackgroundAction::Kill => "kill",
            };
            command(background, &format!("{verb} {id}")).await
        }
        None => String::new(),
    }
}

/// The rows of the `/bashes` picker.
pub fn items(jobs: &[JobSummary]) -> Vec<BackgroundItem> {
    jobs.iter()
        .map(|job| BackgroundItem {
            id: job.id.clone(),
            command: one_line(&job.command, 200),
            status: job.status.to_string(),
            running: job.status == Status::Running,
            age: age(job.age),
            last_line: job.last_line.as_deref().map(|line| one_line(line, 200)),
        })
        .collect()
}

/// The table `/bashes` prints.
pub fn list(jobs: &[JobSummary]) -> String {
    if jobs.is_empty() {
        return "no background commands in this session (the model starts them with bash's \
                run_in_background)"
            .to_owned();
    }
    let running = jobs
        .iter()
        .filter(|job| job.status == Status::Running)
        .count();
    let mut text = format!(
        "background commands: {running} running, {} in all\n",
        jobs.len()
    );
    for job in jobs {
        let _ = writeln!(
            text,
            "  {:<4} {:<22} {:>8}  {}",
            job.id,
            job.status.to_string(),
            age(job.age),
            one_line(&job.command, 60)
        );
        if let Some(last) = &job.last_line {
            let _ = writeln!(text, "       last: {}", one_line(last, 70));
        }
    }
    text.push_str("/bashes show ID prints its output, /bashes kill ID stops it");
    text
}

/// What shiro says when a session's end stopped `stopped`; `None` when it stopped none.
pub fn stopped(stopped: &[JobSummary]) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let names: Vec<String> = stopped
        .iter()
        .map(|job| format!("{} ({})", job.id, one_line(&job.command, 40)))
        .collect();
    Some(format!(
        "stopped {} background command{}: {}",
        stopped.len(),
        if stopped.len() == 1 { "" } else { "s" },
        names.join(", ")
    ))
}

/// The background commands a conversation started and never saw end (so they were running
/// when its session ended, and ended with it), as (id, command), and the highest id it gave.
pub fn left_running(messages: &[Message]) -> (Vec<(String, String)>, u32) {
    const STARTED: &str = "started in the background as b";
    let command_of = |call_id: &str| {
        messages
            .iter()
            .flat_map(|message| &message.tool_calls)
            .find(|call| call.id == call_id)
            .and_then(|call| serde_json::from_str::<serde_json::Value>(&call.arguments).ok())
            .and_then(|args| args["command"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let mut started: Vec<(String, String)> = Vec::new();
    let mut highest = 0;
    for message in messages.iter().filter(|message| message.role == Role::Tool) {
        let text = &message.content;
        if let Some(at) = text.find(STARTED) {
            let digits: String = text[at + STARTED.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u32>() {
                highest = highest.max(n);
                let call = message.tool_call_id.as_deref().unwrap_or_default();
                started.push((format!("b{n}"), command_of(call)));
            }
        }
        // An end it saw: a kill, or a read after the command had ended.
        started.retain(|(id, _)| {
            let ended = ["stopped", "had already ended", "exited", "killed"]
                .iter()
                .any(|how| text.contains(&format!("[{id}: {how}")));
            !ended
        });
    }
    (started, highest)
}

/// What a resumed session says of the background commands that were running when it last
/// ended: they are not restarted.
pub fn left_running_note(left: &[(String, String)]) -> Option<String> {
    if left.is_empty() {
        return None;
    }
    let names: Vec<String> = left
        .iter()
        .map(|(id, command)| format!("{id} ({})", one_line(command, 40)))
        .collect();
    Some(format!(
        "when this session last ended, background commands were running: {}; they ended with it \
         and are not restarted (ask for them again if you need them)",
        names.join(", ")
    ))
}

/// `45s`, `3m 04s`, `2h 05m`.
fn age(age: Duration) -> String {
    let secs = age.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `text` on one line, cut at `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, command: &str, secs: u64, status: Status, last: Option<&str>) -> JobSummary {
        JobSummary {
            id: id.to_owned(),
            command: command.to_owned(),
            age: Duration::from_secs(secs),
            status,
            last_line: last.map(str::to_owned),
        }
    }

    #[test]
    fn a_resumed_conversation_names_the_commands_it_never_saw_end() {
        let call = |id: &str, name: &str, args: &str| Message {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: vec![shiro_providers::ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: args.to_owned(),
            }],
            tool_call_id: None,
        };
        let result = |id: &str, text: &str| Message {
            role: Role::Tool,
            content: text.to_owned(),
            tool_calls: Vec::new(),
            tool_call_id: Some(id.to_owned()),
        };
        let messages = [
            call(
                "c1",
                "bash",
                r#"{"command": "npm run dev", "run_in_background": true}"#,
            ),
            result(
                "c1",
                "[started in the background as b1: read …]\n[b1: running]",
            ),
            call(
                "c2",
                "bash",
                r#"{"command": "cargo watch", "run_in_background": true}"#,
            ),
            result(
                "c2",
                "[started in the background as b2: read …]\n[b2: running]",
            ),
            call(
                "c3",
                "bash",
                r#"{"command": "true", "run_in_background": true}"#,
            ),
            result(
                "c3",
                "[started in the background as b3: read …]\n[b3: exited with code 0]",
            ),
            call("c4", "bash_kill", r#"{"id": "b2"}"#),
            result("c4", "[b2: stopped, with every process it started]"),
        ];
        let (left, highest) = left_running(&messages);
        assert_eq!(left, [("b1".to_owned(), "npm run dev".to_owned())]);
        assert_eq!(highest, 3);
        insta::assert_snapshot!(left_running_note(&left).unwrap_or_default());
        assert_eq!(left_running_note(&[]), None);
    }

    #[test]
    fn the_list_shows_each_command_its_status_age_and_last_line() {
        let jobs = [
            job(
                "b1",
                "python3 -m http.server 8000",
                184,
                Status::Running,
                Some("127.0.0.1 - - \"GET / HTTP/1.1\" 200 -"),
            ),
            job(
                "b2",
                "cargo watch -x test -- --include-ignored a-very-long-argument-list-to-cut",
                7300,
                Status::Exited(101),
                None,
            ),
            job("b3", "sleep 1000", 9, Status::Killed, None),
        ];
        insta::assert_snapshot!(list(&jobs));
        insta::assert_snapshot!(list(&[]));
        insta::assert_snapshot!(stopped(&jobs[..1]).unwrap_or_default());
        assert_eq!(stopped(&[]), None);
    }
}
