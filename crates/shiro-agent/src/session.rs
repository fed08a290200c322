//! Saved sessions: `<state>/sessions/<id>.jsonl` in the workspace's state directory (out of
//! its tree), one JSON event a line, appended as the
//! conversation goes, so a crash loses at most the line being written.
//!
//! Loading replays the lines into a [`Conversation`]: `message` appends to the transcript,
//! `rewind` truncates it (an `/undo` that took the conversation back) and drops the
//! compactions and clearings made after that point, `compact` records a compaction, `clear`
//! a clearing of older tool outputs. A damaged last line — a write cut short by a crash — is
//! skipped with a notice; a damaged line elsewhere is an error, because replaying
//! past it would give the model a history that never happened.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use shiro_providers::{Message, Role};
use shiro_undo::StateDir;

use super::conversation::{Clearing, Compaction, Conversation};

/// The line editor's history file in the sessions directory.
pub const HISTORY_FILE: &str = "history.txt";

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    /// A message appended to the history.
    Message {
        /// The message, as the provider sends it.
        message: Message,
        /// For a prompt: when it was sent, in seconds since the Unix epoch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time: Option<u64>,
    },
    /// The history was truncated to its first `to` messages (an `/undo`, a `/rewind`), or,
    /// when `to` is its length, only files went back (`/rewind` of the files alone).
    Rewind {
        /// The history's length after the rewind.
        to: usize,
        /// The undo log's turns whose files went back with it, oldest first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        turns: Vec<u64>,
    },
    /// What the last rewind took away came back (`/redo`).
    Redo,
    /// The first line of a forked session: the session it was forked from, and where.
    Fork {
        /// The parent session's id.
        parent: String,
        /// The parent's transcript length the fork starts from (before its turn `turn`).
        at: usize,
        /// Which of the parent's prompts the fork starts before (1 for the first); one past
        /// the last when it took the whole conversation.
        turn: usize,
    },
    /// The older part of the conversation was replaced by a summary in what the model is
    /// sent (the transcript keeps every message; see [`Conversation`]).
    Compact {
        /// The transcript's length when it ran.
        at: usize,
        /// The first message kept verbatim.
        keep_from: usize,
        /// The model's summary of the messages before `keep_from`.
        summary: String,
    },
    /// The tool outputs before `before` were replaced by a short note in what the model is
    /// sent (the running turn alone filled the window; see [`Conversation`]).
    Clear {
        /// The transcript's length when it ran.
        at: usize,
        /// The first message whose output, if it is a tool's, is still sent verbatim.
        before: usize,
    },
    /// A turn was recorded in the undo log (informational; loading ignores it).
    Turn {
        /// The undo log's number for it.
        turn_id: u64,
        /// The history's length when it began.
        history_marker: usize,
    },
}

/// An open session: its id and its file. A session in a workspace where `.shiro/` cannot
/// be made keeps nothing (see [`Session::unsaved`]).
#[derive(Debug)]
pub struct Session {
    id: String,
    path: PathBuf,
    /// `None` for an unsaved session.
    file: Option<File>,
    /// Why an unsaved session is not saved.
    unsaved: Option<String>,
}

/// A saved session as a picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Its id, for [`Session::reopen`] and `shiro --resume ID`.
    pub id: String,
    /// When its file was last written.
    pub modified: SystemTime,
    /// The first line of its first user message, cut to [`SUMMARY_CHARS`] characters (with
    /// `…` when cut).
    pub first_prompt: String,
    /// How many user messages its history holds (after the rewinds of `/undo`).
    pub turns: usize,
    /// The session it was forked from, and before which of that session's prompts (1 for
    /// the first).
    pub forked_from: Option<(String, usize)>,
}

/// How many characters of a session's first prompt a [`SessionSummary`] keeps.
pub const SUMMARY_CHARS: usize = 80;

/// A session reopened from disk.
#[derive(Debug)]
pub struct Reopened {
    /// The session, ready to append to.
    pub session: Session,
    /// The conversation its lines describe.
    pub history: Conversation,
    /// Things the user should hear (a damaged last line that was skipped).
    pub notices: Vec<String>,
}

impl Session {
    /// Starts a new session with a fresh id.
    pub fn create(state: &StateDir) -> Result<Session> {
        let dir = ensure_dir(state)?;
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let file = shiro_undo::no_follow_options()
            .create_new(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot create the session file {}", path.display()))?;
        Ok(Session {
            id,
            path,
            file: Some(file),
            unsaved: None,
        })
    }

    /// A session that saves nothing, for a workspace where `.shiro/sessions/` cannot be made
    /// (`why` says why): the conversation works, and is lost at the end. It has an id like
    /// any other, so the undo log can still name it.
    pub fn unsaved(why: impl Into<String>) -> Session {
        Session {
            id: new_id(),
            path: PathBuf::new(),
            file: None,
            unsaved: Some(why.into()),
        }
    }

    /// Why this session is not saved; `None` when it is.
    pub fn unsaved_reason(&self) -> Option<&str> {
        self.unsaved.as_deref()
    }

    /// Reopens the session `id`, or the newest one when `id` is `None`.
    pub fn reopen(state: &StateDir, id: Option<&str>) -> Result<Reopened> {
        let dir = ensure_dir(state)?;
        let path = match id {
            Some(id) => {
                let id = id.trim().trim_end_matches(".jsonl");
                if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
                    bail!("invalid session id {id:?}");
                }
                let path = dir.join(format!("{id}.jsonl"));
                if !path.is_file() {
                    bail!(
                        "no session {id} in this workspace's sessions ({}); /resume, or `shiro --resume` on a terminal, lists them",
                        dir.display()
                    );
                }
                path
            }
            None => latest(&dir)?
                .with_context(|| format!("no saved session in {} to continue", dir.display()))?,
        };
        let text = read_no_follow(&path)
            .with_context(|| format!("cannot read the session file {}", path.display()))?;
        let (history, notices) = replay(&text)
            .with_context(|| format!("the session file {} is damaged", path.display()))?;
        let file = shiro_undo::no_follow_options()
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open the session file {}", path.display()))?;
        let id = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Reopened {
            session: Session {
                id,
                path,
                file: Some(file),
                unsaved: None,
            },
            history,
            notices,
        })
    }

    /// Starts a new session forked from the session `parent` before its prompt number
    /// `turn` (1 for the first): its file opens with a `fork` line and holds the lines that
    /// replay into `history`, the parent's conversation up to that point. The parent's file
    /// is not touched.
    pub fn fork(
        state: &StateDir,
        parent: &str,
        turn: usize,
        history: &Conversation,
    ) -> Result<Session> {
        let mut session = Session::create(state)?;
        let mut lines = vec![Line::Fork {
            parent: parent.to_owned(),
            at: history.len(),
            turn,
        }];
        lines.extend(lines_of(history));
        session.append_all(&lines)?;
        Ok(session)
    }

    /// The session's id (its file name without `.jsonl`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session file (empty for an unsaved session).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line and flushes it, so that it survives a crash of this process. An
    /// unsaved session drops it.
    pub fn append(&mut self, line: &Line) -> Result<()> {
        self.append_all(std::slice::from_ref(line))
    }

    /// Appends `lines` with one write.
    fn append_all(&mut self, lines: &[Line]) -> Result<()> {
        let Some(file) = &mut self.file else {
            return Ok(());
        };
        let mut text = String::new();
        for line in lines {
            text.push_str(&serde_json::to_string(line).context("cannot encode a session line")?);
            text.push('\n');
        }
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write the session file {}", self.path.display()))
    }
}

/// The lines that replay into `history` (what it could redo left out): its messages, each
/// prompt's time and turn, and its clearings and compactions where they were made.
pub fn lines_of(history: &Conversation) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut compactions = history.compactions().iter().peekable();
    let mut clearings = history.clearings().iter().peekable();
    for index in 0..=history.len() {
        // Clearings before compactions made at the same length: replayed in that order,
        // each fits whichever order they were made in.
        while let Some(clearing) = clearings.next_if(|c| c.at == index) {
            lines.push(Line::Clear {
                at: clearing.at,
                before: clearing.before,
            });
        }
        while let Some(compaction) = compactions.next_if(|c| c.at == index) {
            lines.push(Line::Compact {
                at: compaction.at,
                keep_from: compaction.keep_from,
                summary: compaction.summary.clone(),
            });
        }
        let Some(message) = history.transcript().get(index) else {
            break;
        };
        let prompt = history.prompt(index);
        lines.push(Line::Message {
            message: message.clone(),
            time: prompt.time,
        });
        if let Some(turn_id) = prompt.turn {
            lines.push(Line::Turn {
                turn_id,
                history_marker: index,
            });
        }
    }
    lines
}

/// Rebuilds the conversation from a session file's text.
pub fn replay(text: &str) -> Result<(Conversation, Vec<String>)> {
    let mut history = Conversation::default();
    let mut notices = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (index, raw) in lines.iter().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(raw) {
            Ok(line) => line,
            // Only the last line can be cut short by a crash mid-write.
            Err(err) if index + 1 == lines.len() => {
                notices.push(format!(
                    "skipped the damaged last line of the session ({err}); the conversation continues from the line before"
                ));
                continue;
            }
            Err(err) => bail!("line {} does not parse: {err}", index + 1),
        };
        match line {
            Line::Message { message, time } => {
                if let Some(time) = time {
                    history.note_time(history.len(), time);
                }
                history.push(message);
            }
            Line::Rewind { to, turns } => history.rewind_with(to, turns),
            Line::Redo => {
                if history.redo().is_none() {
                    bail!("line {}: a redo with no rewind to bring back", index + 1);
                }
            }
            Line::Fork { .. } => {}
            Line::Compact {
                at,
                keep_from,
                summary,
            } => {
                let compaction = Compaction {
                    at,
                    keep_from,
                    summary,
                };
                if let Err(misfit) = history.apply(compaction) {
                    bail!("line {}: {misfit}", index + 1);
                }
            }
            Line::Clear { at, before } => {
                if let Err(misfit) = history.apply_clearing(Clearing { at, before }) {
                    bail!("line {}: {misfit}", index + 1);
                }
            }
            Line::Turn {
                turn_id,
                history_marker,
            } => history.note_turn(history_marker, turn_id),
        }
    }
    Ok((history, notices))
}

/// Makes the sessions directory in the workspace's state directory, out of the tree, so
/// `git clean` and the agent's commands never reach a transcript. Like the undo store's, it
/// must be a real directory of the user's (not a link someone planted), and its files are
/// opened without following links.
fn ensure_dir(state: &StateDir) -> Result<PathBuf> {
    state
        .ensure_sessions()
        .context("cannot use the sessions directory")
}

/// Reads a session file, refusing a link.
fn read_no_follow(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    shiro_undo::no_follow_options()
        .read(true)
        .open(path)?
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The newest `*.jsonl` in `dir` by modification time (names break ties: they start with
/// the creation time, so they sort by age too).
fn latest(dir: &Path) -> Result<Option<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "jsonl") {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(UNIX_EPOCH);
        if best
            .as_ref()
            .is_none_or(|(time, name)| (modified, &path) > (*time, name))
        {
            best = Some((modified, path));
        }
    }
    Ok(best.map(|(_, path)| path))
}

/// The saved sessions of the workspace whose state is `state`, newest first, for a picker.
/// A session without a user message (every start of shiro makes one) is left out, and so is
/// a file that cannot be read or does not replay; nothing is created. An error only when the
/// state or sessions directory is there but is not a real directory (a link is never
/// followed) or cannot be listed.
pub fn list(state: &StateDir) -> Result<Vec<SessionSummary>> {
    for dir in [state.dir().to_path_buf(), state.sessions_dir()] {
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => bail!(
                "{} is not a directory (a link is never followed), so no session is read from it",
                dir.display()
            ),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => {
                return Err(err).with_context(|| format!("cannot inspect {}", dir.display()));
            }
        }
    }
    let dir = state.sessions_dir();
    let entries =
        std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
    let mut sessions: Vec<SessionSummary> = entries
        .flatten()
        .filter_map(|entry| summary(&entry.path()))
        .collect();
    sessions.sort_by(|a, b| (b.modified, &b.id).cmp(&(a.modified, &a.id)));
    Ok(sessions)
}

/// `sessions` (newest first) as a tree of forks: each session followed by its forks, newest
/// first, each with its depth (0 for a session that is no fork, or whose parent is not
/// among them).
pub fn as_tree(sessions: &[SessionSummary]) -> Vec<(SessionSummary, usize)> {
    let ids: std::collections::BTreeSet<String> =
        sessions.iter().map(|summary| summary.id.clone()).collect();
    let parent_of = |summary: &SessionSummary| {
        (summary.forked_from.as_ref())
            .map(|(parent, _)| parent.clone())
            .filter(|parent| ids.contains(parent) && *parent != summary.id)
    };
    let mut out = Vec::with_capacity(sessions.len());
    let mut placed = std::collections::BTreeSet::new();
    // Depth first from each root; `placed` guards against a cycle a hand edit could make.
    let mut stack: Vec<(usize, usize)> = (0..sessions.len())
        .rev()
        .filter(|&i| parent_of(&sessions[i]).is_none())
        .map(|i| (i, 0))
        .collect();
    while let Some((i, depth)) = stack.pop() {
        if !placed.insert(i) {
            continue;
        }
        out.push((sessions[i].clone(), depth));
        let id = &sessions[i].id;
        stack.extend(
            (0..sessions.len())
                .rev()
                .filter(|&c| parent_of(&sessions[c]).as_ref() == Some(id))
                .map(|c| (c, depth + 1)),
        );
    }
    // Sessions only a cycle reaches: listed at the top level, in order.
    for (i, summary) in sessions.iter().enumerate() {
        if !placed.contains(&i) {
            out.push((summary.clone(), 0));
        }
    }
    out
}

/// The summary of one session file; `None` when it is no session, cannot be read or
/// replayed, or holds no user message.
fn summary(path: &Path) -> Option<SessionSummary> {
    if path.extension().is_none_or(|ext| ext != "jsonl") {
        return None;
    }
    let id = path.file_stem()?.to_str()?.to_owned();
    if id.starts_with('.') {
        return None;
    }
    let text = read_no_follow(path).ok()?;
    let modified = std::fs::symlink_metadata(path)
        .and_then(|meta| meta.modified())
        .unwrap_or(UNIX_EPOCH);
    let (history, _) = replay(&text).ok()?;
    let mut prompts = history.transcript().iter().filter(|m| m.role == Role::User);
    let first = prompts.next()?;
    let forked_from = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| match serde_json::from_str(line) {
            Ok(Line::Fork { parent, turn, .. }) => Some((parent, turn)),
            _ => None,
        });
    Some(SessionSummary {
        id,
        modified,
        first_prompt: first_line(&first.content, SUMMARY_CHARS),
        turns: 1 + prompts.count(),
        forked_from,
    })
}

/// The first line of `text` that is not blank, trimmed and cut to `max` characters (`…`
/// marks a cut).
pub fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// `YYYYMMDD-HHMMSS-xxxx`: sortable by creation time, with a random suffix so two sessions
/// started in the same second do not collide.
fn new_id() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let stamp = crate::headless::format_time(now.as_secs());
    // "2026-11-30 00:53:20 UTC" → "20261130-005320".
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    // RandomState is seeded from the OS per process; hashing the clock mixes in the moment.
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    format!("{date}-{time}-{:04x}", hasher.finish() & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_messages_and_rewinds_and_skips_a_torn_last_line() {
        let lines = [
            serde_json::to_string(&Line::Message {
                message: Message::user("one"),
                time: None,
            })
            .unwrap(),
            serde_json::to_string(&Line::Message {
                message: Message::assistant("two"),
                time: None,
            })
            .unwrap(),
            serde_json::to_string(&Line::Rewind {
                to: 1,
                turns: Vec::new(),
            })
            .unwrap(),
            serde_json::to_string(&Line::Message {
                message: Message::user("three"),
                time: None,
            })
            .unwrap(),
            "{\"type\":\"mess".to_owned(),
        ];
        let (history, notices) = replay(&lines.join("\n")).unwrap();
        assert_eq!(
            history.transcript(),
            [Message::user("one"), Message::user("three")]
        );
        assert_eq!(notices.len(), 1, "{notices:?}");
        let damaged_middle = format!("{}\n{}", lines[4], lines[0]);
        assert!(replay(&damaged_middle).is_err());
    }

    /// `compact` lines replay into the conversation; a rewind past one drops it; one that
    /// does not fit the transcript makes the file damaged.
    #[test]
    fn replays_compactions_and_refuses_one_that_does_not_fit() {
        let message = |m: Message| {
            serde_json::to_string(&Line::Message {
                message: m,
                time: None,
            })
            .unwrap()
        };
        let compact = |at, keep_from| {
            serde_json::to_string(&Line::Compact {
                at,
                keep_from,
                summary: "S".into(),
            })
            .unwrap()
        };
        let lines = [
            message(Message::system("s")),
            message(Message::user("one")),
            message(Message::assistant("a")),
            message(Message::user("two")),
            compact(4, 3),
            message(Message::assistant("b")),
        ];
        let (history, _) = replay(&lines.join("\n")).unwrap();
        assert_eq!(history.transcript().len(), 5);
        assert_eq!(history.compactions().len(), 1);
        let rewound = format!(
            "{}\n{}",
            lines.join("\n"),
            serde_json::to_string(&Line::Rewind {
                to: 3,
                turns: Vec::new()
            })
            .unwrap()
        );
        let (history, _) = replay(&rewound).unwrap();
        assert!(history.compactions().is_empty());
        assert_eq!(history.context().len(), 3);
        let misfit = [
            lines[0].clone(),
            lines[1].clone(),
            compact(2, 1),
            lines[2].clone(),
        ];
        let err = replay(&misfit.join("\n")).unwrap_err();
        insta::assert_snapshot!(format!("{err:#}"), @r#"line 3: a compaction at length 2 keeping messages from 1 does not fit a transcript of 2 messages whose compacted part begins at 1"#);
    }

    /// `clear` lines replay into the conversation; a rewind past one drops it; one that
    /// clears nothing makes the file damaged.
    #[test]
    fn replays_clearings_and_refuses_one_that_does_not_fit() {
        let message = |m: Message| {
            serde_json::to_string(&Line::Message {
                message: m,
                time: None,
            })
            .unwrap()
        };
        let clear = |at, before| serde_json::to_string(&Line::Clear { at, before }).unwrap();
        let call = |id: &str| Message {
            tool_calls: vec![shiro_providers::ToolCall {
                id: id.into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            }],
            ..Message::assistant("")
        };
        let lines = [
            message(Message::system("s")),
            message(Message::user("one")),
            message(call("c1")),
            message(Message::tool_result("c1", "long output")),
            message(call("c2")),
            clear(5, 4),
            message(Message::tool_result("c2", "more")),
        ];
        let (history, _) = replay(&lines.join("\n")).unwrap();
        assert_eq!(history.cleared(), 1);
        assert_eq!(
            history.context()[3].content,
            super::super::conversation::CLEARED_NOTE
        );
        let rewound = format!(
            "{}\n{}",
            lines.join("\n"),
            serde_json::to_string(&Line::Rewind {
                to: 4,
                turns: Vec::new()
            })
            .unwrap()
        );
        let (history, _) = replay(&rewound).unwrap();
        assert!(history.clearings().is_empty());
        assert_eq!(history.context()[3].content, "long output");
        let misfit = [lines[0].clone(), lines[1].clone(), clear(2, 2)];
        let err = replay(&misfit.join("\n")).unwrap_err();
        insta::assert_snapshot!(format!("{err:#}"), @"line 3: a clearing at length 2 of the tool outputs before 2 does not fit a transcript of 2 messages: it must be made at the transcript's length and clear an output not cleared yet");
    }

    /// A state directory in a temporary directory of its own, apart from any workspace.
    fn state() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::of_workspace(&dir.path().join("home"), Path::new("/work/ws"));
        (dir, state)
    }

    #[test]
    fn creates_reopens_and_finds_the_latest() {
        let (_dir, root) = state();
        let mut session = Session::create(&root).unwrap();
        session
            .append(&Line::Message {
                message: Message::user("hi"),
                time: None,
            })
            .unwrap();
        let id = session.id().to_owned();
        assert!(root.sessions_dir().join(format!("{id}.jsonl")).is_file());
        let again = Session::reopen(&root, None).unwrap();
        assert_eq!(again.session.id(), id);
        assert_eq!(again.history.transcript(), [Message::user("hi")]);
        assert!(Session::reopen(&root, Some("../x")).is_err());
        assert!(Session::reopen(&root, Some("nope")).is_err());
    }

    /// Someone can plant the sessions directory as a link, or a session file as one:
    /// neither is followed, so no transcript is written, and no file read, elsewhere.
    #[test]
    fn links_in_the_sessions_directory_are_never_followed() {
        let (_dir, root) = state();
        let outside = tempfile::tempdir().unwrap();
        root.ensure().unwrap();
        let sessions = root.sessions_dir();
        std::os::unix::fs::symlink(outside.path(), &sessions).unwrap();
        let err = Session::create(&root).unwrap_err();
        assert!(
            format!("{err:#}").contains("sessions is a symbolic link"),
            "{err:#}"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        std::fs::remove_file(&sessions).unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        std::fs::create_dir(&sessions).unwrap();
        std::os::unix::fs::symlink(&secret, sessions.join("s1.jsonl")).unwrap();
        assert!(Session::reopen(&root, Some("s1")).is_err());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "SECRET");
    }

    /// The picker's list: newest first, with the first prompt and the turns after the
    /// rewinds; sessions without a prompt, damaged files, other files and links are left
    /// out, and nothing is created.
    #[test]
    fn lists_sessions_newest_first_and_skips_what_it_cannot_read() {
        let (_dir, root) = state();
        assert_eq!(list(&root).unwrap(), []);
        assert!(!root.dir().exists(), "listing creates nothing");

        let message = |m: Message| Line::Message {
            message: m,
            time: None,
        };
        let mut old = Session::create(&root).unwrap();
        for line in [
            message(Message::system("system")),
            message(Message::user("\n  fix the parser\nin src/parse.rs")),
            message(Message::assistant("done")),
            message(Message::user("second")),
            message(Message::user("undone")),
            Line::Rewind {
                to: 4,
                turns: Vec::new(),
            },
        ] {
            old.append(&line).unwrap();
        }
        let long = "x".repeat(SUMMARY_CHARS + 5);
        let mut new = Session::create(&root).unwrap();
        new.append(&message(Message::user(long.as_str()))).unwrap();
        let mut empty = Session::create(&root).unwrap();
        empty.append(&message(Message::system("system"))).unwrap();
        let dir = root.sessions_dir();
        let user = serde_json::to_string(&message(Message::user("hidden"))).unwrap();
        std::fs::write(dir.join("damaged.jsonl"), format!("{{oops\n{user}\n")).unwrap();
        std::fs::write(dir.join("history.txt"), "make a.txt\n").unwrap();
        std::fs::write(dir.join("bytes.jsonl"), b"\xff\xfe\0").unwrap();
        std::os::unix::fs::symlink(old.path(), dir.join("link.jsonl")).unwrap();
        std::fs::create_dir(dir.join("folder.jsonl")).unwrap();
        // Modification times one second apart, oldest first.
        let base = SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, session) in [&old, &new, &empty].iter().enumerate() {
            let file = std::fs::File::options()
                .append(true)
                .open(session.path())
                .unwrap();
            file.set_modified(base + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }

        let listed = list(&root).unwrap();
        let shown: Vec<(String, &str, usize)> = listed
            .iter()
            .map(|s| (s.id.clone(), s.first_prompt.as_str(), s.turns))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    new.id().to_owned(),
                    format!("{}…", "x".repeat(SUMMARY_CHARS)).as_str(),
                    1
                ),
                (old.id().to_owned(), "fix the parser", 2),
            ]
        );
        assert_eq!(listed[0].modified, base + std::time::Duration::from_secs(1));

        // A planted link in place of the folder is never followed.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::rename(&dir, elsewhere.path().join("sessions")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("sessions"), &dir).unwrap();
        let err = list(&root).unwrap_err();
        assert!(format!("{err:#}").contains("is not a directory"), "{err:#}");
    }
}
