//! Saved sessions: `<state>/sessions/<id>.jsonl` in the workspace's state directory (out of
//! its tree), one JSON event a line, appended as the
//! conversation goes, so a crash loses at most the line being written.
//!
//! Loading replays the lines into a [`Conversation`]: `message` appends to the transcript,
//! `rewind` truncates it (an `/undo` that took the conversation back) and drops the
//! compactions and clearings made after that point, `compact` records a compaction, `clear`
//! a clearing of older tool outputs. A damaged last line — a write cut short by a crash — is
//! skipped with a notice; a damaged line elsewhere is an error, because replaying
//! past it would give the model a history that never happened. So a reopened session cuts
//! that line off before its first append (its record never completed), rather than
//! appending after it.
//!
//! One process at a time appends to a session: an open [`Session`] holds the lock on its
//! file, and a second open for appending is refused with [`InUse`] (see `session/lock.rs`).
//! Reading one ([`list`], [`load`]) takes no lock.

mod lock;

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use shiro_providers::{Message, Role};
use shiro_undo::StateDir;

pub use self::lock::{Asked, InUse};
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
    /// `None` for an unsaved session. While it is open it holds the file's lock, which
    /// closing it (dropping the session) releases.
    file: Option<File>,
    /// Why an unsaved session is not saved.
    unsaved: Option<String>,
    /// How the file ended when it was reopened, until the first append has mended it.
    tail: Tail,
}

/// How a session file ended when it was read: what the next append must do first so that
/// its lines start a line of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tail {
    /// The file was empty or ended with a newline: nothing.
    Whole,
    /// Its last line was whole but had no newline (a write cut just before it), and the
    /// file was `len` bytes long: the append begins with one.
    Unended { len: u64 },
    /// Its last line, the bytes `torn` from byte `from` to the end, was damaged (a write
    /// cut short) and was skipped: it is cut off.
    Torn { from: u64, torn: Vec<u8> },
}

/// A session file's text, replayed.
struct Replayed {
    history: Conversation,
    notices: Vec<String>,
    tail: Tail,
    /// What its first line says, when it is a fork's: the parent, and the turn it was
    /// forked before.
    forked_from: Option<(String, usize)>,
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
    /// How many user messages its history holds (after the rewinds of `/undo`); 0 for a
    /// session whose every turn was undone, whose `first_prompt` is then the first of those
    /// `/redo` can bring back.
    pub turns: usize,
    /// The session it was forked from, and before which of that session's prompts (1 for
    /// the first).
    pub forked_from: Option<(String, usize)>,
    /// Whether another open session holds its lock (another shiro process has it open, or
    /// this one does, for the session it is in): resuming it is refused until that ends.
    pub in_use: bool,
}

/// How many characters of a session's first prompt a [`SessionSummary`] keeps.
pub const SUMMARY_CHARS: usize = 80;

/// A saved session read, and not opened for appending (see [`load`]).
#[derive(Debug)]
pub struct Loaded {
    /// Its id.
    pub id: String,
    /// The conversation its lines describe.
    pub history: Conversation,
    /// Things the user should hear, as for [`Reopened`].
    pub notices: Vec<String>,
}

/// A session reopened from disk.
#[derive(Debug)]
pub struct Reopened {
    /// The session, ready to append to.
    pub session: Session,
    /// The conversation its lines describe.
    pub history: Conversation,
    /// Things the user should hear (a damaged last line that was skipped, a newer session
    /// `--continue` passed over because its file is damaged).
    pub notices: Vec<String>,
}

impl Session {
    /// Starts a new session with a fresh id, holding its lock.
    pub fn create(state: &StateDir) -> Result<Session> {
        let dir = ensure_dir(state)?;
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let file = shiro_undo::no_follow_options()
            .create_new(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot create the session file {}", path.display()))?;
        // Nobody knows the id yet, and the empty file is no session to resume; should
        // another process have locked it all the same, it may append to it, so it is not
        // used.
        if !lock::try_lock(&file)
            .with_context(|| format!("cannot lock the session file {}", path.display()))?
        {
            bail!(
                "another process locked the new session file {} as it was made",
                path.display()
            );
        }
        Ok(Session {
            id,
            path,
            file: Some(file),
            unsaved: None,
            tail: Tail::Whole,
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
            tail: Tail::Whole,
        }
    }

    /// Why this session is not saved; `None` when it is.
    pub fn unsaved_reason(&self) -> Option<&str> {
        self.unsaved.as_deref()
    }

    /// Reopens the session `id`, or, when `id` is `None`, the newest one [`list`] shows (see
    /// [`load`] for which), to go on with it.
    ///
    /// It is opened for appending, so it takes the session file's lock first and reads the
    /// file under it. When another open session holds the lock (another process's), the
    /// error is [`InUse`] and nothing is changed. With `id` `None`, an older session is not
    /// taken in place of a newest one that is in use: `--continue` means the last
    /// conversation, and one under way elsewhere is still that one.
    pub fn reopen(state: &StateDir, id: Option<&str>) -> Result<Reopened> {
        let (path, mut notices) = locate(state, id)?;
        let session_id = id_of(&path);
        // Read too: the file is read through it, under the lock, and the first append
        // checks the end it mends (see `Session::mend`).
        let file = shiro_undo::no_follow_options()
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open the session file {}", path.display()))?;
        if !lock::try_lock_patiently(&file)
            .with_context(|| format!("cannot lock the session file {}", path.display()))?
        {
            let asked = match id {
                Some(_) => Asked::ById,
                None => Asked::Newest,
            };
            return Err(InUse {
                id: session_id,
                asked,
            }
            .into());
        }
        let bytes = read_all(&file)
            .with_context(|| format!("cannot read the session file {}", path.display()))?;
        let replayed = replay_bytes(&bytes)
            .with_context(|| format!("the session file {} is damaged", path.display()))?;
        notices.extend(replayed.notices);
        Ok(Reopened {
            session: Session {
                id: session_id,
                path,
                file: Some(file),
                unsaved: None,
                tail: replayed.tail,
            },
            history: replayed.history,
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

    /// Appends `lines` with one write. The first append to a reopened file whose last line
    /// was cut short first mends it, so that the lines start a line of their own (see
    /// [`Session::mend`]).
    fn append_all(&mut self, lines: &[Line]) -> Result<()> {
        let Some(file) = &mut self.file else {
            return Ok(());
        };
        let mut text = String::new();
        let mend = Session::mend(file, &self.tail)
            .with_context(|| format!("cannot mend the session file {}", self.path.display()))?;
        if mend == Mended::NeedsNewline {
            text.push('\n');
        }
        for line in lines {
            text.push_str(&serde_json::to_string(line).context("cannot encode a session line")?);
            text.push('\n');
        }
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write the session file {}", self.path.display()))?;
        self.tail = Tail::Whole;
        Ok(())
    }

    /// Readies the end of the file for an append, as `tail` says it was read. A damaged last
    /// line is the torn write of a record whose operation never completed (the conversation
    /// was reopened without it), so it is cut off: appended after, it would be a damaged line
    /// in the middle, and the file would no longer load. A whole last line without its
    /// newline gets one. Only when the file still ends as it was read: the lock keeps other
    /// shiro processes out, but a version of shiro from before it, or another program, may
    /// have mended it and appended since (to the same length, even), and cutting at a stale
    /// offset would take its lines. Until the append succeeds the tail stays as it is, so a
    /// failed write is retried the same way.
    fn mend(file: &File, tail: &Tail) -> std::io::Result<Mended> {
        use std::os::unix::fs::FileExt as _;
        match tail {
            Tail::Whole => Ok(Mended::Ready),
            Tail::Unended { len } if file.metadata()?.len() == *len => Ok(Mended::NeedsNewline),
            Tail::Unended { .. } => Ok(Mended::Ready),
            Tail::Torn { from, torn } => {
                if file.metadata()?.len() == from + torn.len() as u64 {
                    let mut found = vec![0; torn.len()];
                    file.read_exact_at(&mut found, *from)?;
                    if found == *torn {
                        file.set_len(*from)?;
                    }
                }
                Ok(Mended::Ready)
            }
        }
    }
}

/// What [`Session::mend`] left for the append to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mended {
    /// Nothing: the file ends where a line begins.
    Ready,
    /// To begin with a newline, ending the file's last line.
    NeedsNewline,
}

/// Reads the saved session `id`, or, when `id` is `None`, the newest one [`list`] shows (one
/// with a prompt, or with prompts `/redo` can bring back): a session file with nothing to go
/// on from (every start of shiro makes one) is passed over, and so, with a notice, is a
/// newer one that is damaged.
///
/// It is not opened for appending, and takes no lock: a session another process has open
/// can be read, and forked (`--fork-session`). A line that process is writing at that moment
/// may be read cut short, and is skipped as a damaged last line is.
pub fn load(state: &StateDir, id: Option<&str>) -> Result<Loaded> {
    let (path, mut notices) = locate(state, id)?;
    let bytes = read_no_follow(&path)
        .with_context(|| format!("cannot read the session file {}", path.display()))?;
    let replayed = replay_bytes(&bytes)
        .with_context(|| format!("the session file {} is damaged", path.display()))?;
    notices.extend(replayed.notices);
    Ok(Loaded {
        id: id_of(&path),
        history: replayed.history,
        notices,
    })
}

/// The file of the session `id`, or of the newest session (see [`load`]), with the notices
/// of the newer damaged ones passed over.
fn locate(state: &StateDir, id: Option<&str>) -> Result<(PathBuf, Vec<String>)> {
    let dir = ensure_dir(state)?;
    let mut notices = Vec::new();
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
        None => {
            let survey = survey(&dir)?;
            let Some(newest) = survey.sessions.first() else {
                let damaged = match survey.damaged.first() {
                    Some(damaged) => format!(
                        " (the session {} there does not replay: {})",
                        damaged.id, damaged.why
                    ),
                    None => String::new(),
                };
                bail!(
                    "no saved session with a prompt in {} to continue{damaged}",
                    dir.display()
                );
            };
            for damaged in &survey.damaged {
                if (damaged.modified, &damaged.id) > (newest.modified, &newest.id) {
                    notices.push(format!(
                        "passed over the newer session {}, whose file does not replay ({})",
                        damaged.id, damaged.why
                    ));
                }
            }
            dir.join(format!("{}.jsonl", newest.id))
        }
    };
    Ok((path, notices))
}

/// A session's id: its file's name without `.jsonl`.
fn id_of(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
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

/// Rebuilds the conversation from a session file's text, with the notices for the user.
pub fn replay(text: &str) -> Result<(Conversation, Vec<String>)> {
    replay_bytes(text.as_bytes()).map(|replayed| (replayed.history, replayed.notices))
}

/// Rebuilds the conversation from a session file's bytes. A line that is not UTF-8 is
/// damaged like one that does not parse: a crash can cut a write inside a character.
fn replay_bytes(bytes: &[u8]) -> Result<Replayed> {
    let mut history = Conversation::default();
    let mut notices = Vec::new();
    let mut tail = Tail::Whole;
    let mut forked_from = None;
    let len = bytes.len() as u64;
    let count = bytes.split_inclusive(|&b| b == b'\n').count();
    let mut from = 0;
    let mut first = true;
    for (index, whole) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let start = from;
        from += whole.len() as u64;
        let last = index + 1 == count;
        let ended = whole.ends_with(b"\n");
        let raw = whole.strip_suffix(b"\n").unwrap_or(whole);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let parsed = match std::str::from_utf8(raw) {
            Ok(text) if text.trim().is_empty() => Ok(None),
            Ok(text) => serde_json::from_str::<Line>(text)
                .map(Some)
                .map_err(|err| err.to_string()),
            Err(err) => Err(err.to_string()),
        };
        let line = match parsed {
            Ok(line) => {
                if last && !ended {
                    tail = Tail::Unended { len };
                }
                match line {
                    Some(line) => line,
                    None => continue,
                }
            }
            // Only the last line can be cut short by a crash mid-write.
            Err(err) if last => {
                notices.push(format!(
                    "skipped the damaged last line of the session ({err}); the conversation continues from the line before (the damaged line leaves the file when the session goes on)"
                ));
                tail = Tail::Torn {
                    from: start,
                    torn: whole.to_vec(),
                };
                continue;
            }
            Err(err) => bail!("line {} does not parse: {err}", index + 1),
        };
        if std::mem::take(&mut first)
            && let Line::Fork { parent, turn, .. } = &line
        {
            forked_from = Some((parent.clone(), *turn));
        }
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
    Ok(Replayed {
        history,
        notices,
        tail,
        forked_from,
    })
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
fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    read_all(&shiro_undo::no_follow_options().read(true).open(path)?)
}

/// Reads an open session file from where its reads are (its start, when just opened).
fn read_all(mut file: &File) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The saved sessions of the workspace whose state is `state`, newest first, for a picker.
/// A session without a prompt (every start of shiro makes one) is left out, unless `/redo`
/// can bring prompts back (its every turn was undone), and so is a file that cannot be read
/// or does not replay; nothing is created. Each is marked [`SessionSummary::in_use`] when an
/// open session holds its lock. An error only when the state or sessions directory is there
/// but is not a real directory (a link is never followed) or cannot be listed. `--continue`
/// takes the first of them (see [`Session::reopen`]).
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
    Ok(survey(&state.sessions_dir())?.sessions)
}

/// What a sessions directory holds, newest first.
struct Survey {
    /// The sessions a picker lists.
    sessions: Vec<SessionSummary>,
    /// The session files that cannot be read or do not replay.
    damaged: Vec<Damaged>,
}

/// A session file that cannot be read or does not replay.
struct Damaged {
    id: String,
    modified: SystemTime,
    why: String,
}

/// One file of a sessions directory, examined.
enum Examined {
    /// A session with a prompt, or prompts `/redo` can bring back.
    Listed(SessionSummary),
    /// A session file that cannot be read or does not replay.
    Damaged(Damaged),
    /// No session file, or one with no prompt.
    Skipped,
}

/// Examines every file of the sessions directory `dir`.
fn survey(dir: &Path) -> Result<Survey> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    let mut survey = Survey {
        sessions: Vec::new(),
        damaged: Vec::new(),
    };
    for entry in entries.flatten() {
        match examine(&entry.path()) {
            Examined::Listed(summary) => survey.sessions.push(summary),
            Examined::Damaged(damaged) => survey.damaged.push(damaged),
            Examined::Skipped => {}
        }
    }
    // Names break ties: they start with the creation time, so they sort by age too.
    (survey.sessions).sort_by(|a, b| (b.modified, &b.id).cmp(&(a.modified, &a.id)));
    (survey.damaged).sort_by(|a, b| (b.modified, &b.id).cmp(&(a.modified, &a.id)));
    Ok(survey)
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

/// One file of a sessions directory: a session to list when it has a prompt, or prompts
/// `/redo` can bring back (the first of those is then its first prompt, and it has 0
/// turns). Links and other files are skipped.
fn examine(path: &Path) -> Examined {
    if path.extension().is_none_or(|ext| ext != "jsonl") {
        return Examined::Skipped;
    }
    let Some(id) = path.file_stem().and_then(|stem| stem.to_str()) else {
        return Examined::Skipped;
    };
    let id = id.to_owned();
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Examined::Skipped;
    };
    if id.starts_with('.') || !meta.is_file() {
        return Examined::Skipped;
    }
    let modified = meta.modified().unwrap_or(UNIX_EPOCH);
    // Opened once: read, and then looked at for its lock.
    let file = shiro_undo::no_follow_options().read(true).open(path);
    let replayed = match file.as_ref().map(read_all) {
        Ok(Ok(bytes)) => replay_bytes(&bytes).map_err(|err| format!("{err:#}")),
        Ok(Err(err)) => Err(format!("cannot read it: {err}")),
        Err(err) => Err(format!("cannot read it: {err}")),
    };
    let replayed = match replayed {
        Ok(replayed) => replayed,
        Err(why) => return Examined::Damaged(Damaged { id, modified, why }),
    };
    let history = &replayed.history;
    let mut prompts = history.transcript().iter().filter(|m| m.role == Role::User);
    let (first, turns) = match prompts.next() {
        Some(first) => (first, 1 + prompts.count()),
        None => match history.redoable().find(|m| m.role == Role::User) {
            Some(first) => (first, 0),
            None => return Examined::Skipped,
        },
    };
    // Only a session with a prompt is looked at: a file just made is empty until its
    // maker holds its lock, so a look never gets in the way of that lock.
    let in_use = file.is_ok_and(|file| lock::held_elsewhere(&file).unwrap_or(false));
    Examined::Listed(SessionSummary {
        id,
        modified,
        first_prompt: first_line(&first.content, SUMMARY_CHARS),
        turns,
        forked_from: replayed.forked_from,
        in_use,
    })
}

/// Whether `history` is a conversation to go back to: it has a prompt, or prompts `/redo`
/// can bring back (its every turn was undone). [`list`] shows such sessions, and
/// `--continue` takes the newest of them.
pub fn has_prompts(history: &Conversation) -> bool {
    history.prompts() > 0 || history.redoable().any(|m| m.role == Role::User)
}

/// For a conversation whose every turn was undone (resumed, it shows nothing): what it
/// was, and that `/redo` brings it back. `None` for any other.
pub fn all_undone_note(history: &Conversation) -> Option<String> {
    if history.prompts() > 0 {
        return None;
    }
    let first = history.redoable().find(|m| m.role == Role::User)?;
    Some(format!(
        "every turn of this conversation was undone (the first: \"{}\"); /redo brings them back",
        first_line(&first.content, SUMMARY_CHARS)
    ))
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
        drop(session);
        let again = Session::reopen(&root, None).unwrap();
        assert_eq!(again.session.id(), id);
        assert_eq!(again.history.transcript(), [Message::user("hi")]);
        assert!(Session::reopen(&root, Some("../x")).is_err());
        assert!(Session::reopen(&root, Some("nope")).is_err());
    }

    fn user(text: &str) -> Line {
        Line::Message {
            message: Message::user(text),
            time: None,
        }
    }

    /// A session file whose last write a crash cut short: `before` and then `torn`.
    fn torn_session(root: &StateDir, before: &[Line], torn: &[u8]) -> (String, PathBuf) {
        let mut session = Session::create(root).unwrap();
        for line in before {
            session.append(line).unwrap();
        }
        let mut file = std::fs::File::options()
            .append(true)
            .open(session.path())
            .unwrap();
        file.write_all(torn).unwrap();
        (session.id().to_owned(), session.path().to_owned())
    }

    /// Reopens `id`, and says what the notices were and what the history holds.
    fn reopened(root: &StateDir, id: &str) -> (Session, Vec<&'static str>, Vec<String>) {
        let reopened = Session::reopen(root, Some(id)).unwrap();
        let notices = (reopened.notices.iter())
            .map(|notice| match notice {
                n if n.starts_with("skipped the damaged last line") => "damaged last line",
                _ => "other",
            })
            .collect();
        let contents = (reopened.history.transcript().iter())
            .map(|m| m.content.clone())
            .collect();
        (reopened.session, notices, contents)
    }

    /// A session resumed past a damaged last line (a crash mid-write) goes on without it:
    /// the line is cut off before the first append, so the file stays whole and the next
    /// reopen reads every line without a notice. A write cut inside a character is damaged
    /// the same way, not an unreadable file.
    #[test]
    fn resuming_past_a_torn_last_line_cuts_it_off_before_appending() {
        let (_dir, root) = state();
        for torn in [
            &b"{\"type\":\"message\",\"mess"[..],
            "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"日"
                .as_bytes()
                .split_last()
                .unwrap()
                .1,
            b"{\"type\":\"mess\n",
        ] {
            let (id, path) = torn_session(&root, &[user("one")], torn);
            let (mut session, notices, history) = reopened(&root, &id);
            assert_eq!(
                (notices, history),
                (vec!["damaged last line"], vec!["one".to_owned()])
            );
            session.append(&user("two")).unwrap();
            session.append(&user("three")).unwrap();
            drop(session);
            let (_, notices, history) = reopened(&root, &id);
            assert_eq!(notices, Vec::<&str>::new(), "{torn:?}");
            assert_eq!(history, ["one", "two", "three"]);
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), 3, "{text}");
        }
    }

    /// A last line written whole but for its newline counts, and the next append ends it
    /// first rather than running on from it.
    #[test]
    fn a_whole_last_line_without_its_newline_is_ended_before_appending() {
        let (_dir, root) = state();
        let unended = serde_json::to_string(&user("two")).unwrap();
        let (id, _) = torn_session(&root, &[user("one")], unended.as_bytes());
        let (mut session, notices, history) = reopened(&root, &id);
        assert_eq!(
            (notices, history),
            (vec![], vec!["one".to_owned(), "two".to_owned()])
        );
        session.append(&user("three")).unwrap();
        drop(session);
        let (_, notices, history) = reopened(&root, &id);
        assert_eq!(
            (notices, history),
            (
                vec![],
                vec!["one".to_owned(), "two".to_owned(), "three".to_owned()]
            )
        );
    }

    /// A torn session resumed here, and mended meanwhile by a writer that takes no lock (a
    /// shiro from before the lock): that writer cut the line off and appended its own, as
    /// long as the torn one. The first append here finds the file changed since it read it
    /// and cuts nothing, so the other's line is kept.
    #[test]
    fn a_torn_line_another_writer_mended_already_is_left_alone() {
        let (_dir, root) = state();
        let line = serde_json::to_string(&user("from the other")).unwrap();
        let torn = format!("{{\"type\":\"mess{}", "x".repeat(line.len() - 12));
        assert_eq!(
            torn.len(),
            line.len() + 1,
            "as long as the line and its newline"
        );
        let (id, path) = torn_session(&root, &[user("one")], torn.as_bytes());
        let len = std::fs::metadata(&path).unwrap().len();
        let (mut session, _, _) = reopened(&root, &id);
        let other = std::fs::File::options().write(true).open(&path).unwrap();
        other.set_len(len - torn.len() as u64).unwrap();
        drop(other);
        let mut other = std::fs::File::options().append(true).open(&path).unwrap();
        other.write_all(format!("{line}\n").as_bytes()).unwrap();
        drop(other);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
        session.append(&user("from here")).unwrap();
        drop(session);
        let (_, notices, history) = reopened(&root, &id);
        assert_eq!(notices, Vec::<&str>::new());
        assert_eq!(history, ["one", "from the other", "from here"]);
    }

    /// `--continue` (a reopen without an id) takes the newest session `list` shows: newer
    /// files without a prompt are passed over, a session whose every turn was undone is
    /// taken, and a newer damaged one is passed over with a notice.
    #[test]
    fn continue_takes_the_newest_session_with_a_prompt() {
        let (_dir, root) = state();
        let err = Session::reopen(&root, None).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("no saved session with a prompt in "),
            "{err:#}"
        );
        let system = Line::Message {
            message: Message::system("system"),
            time: None,
        };
        let mut old = Session::create(&root).unwrap();
        for line in [
            system.clone(),
            user("important"),
            Line::Message {
                message: Message::assistant("a"),
                time: None,
            },
        ] {
            old.append(&line).unwrap();
        }
        let mut undone = Session::create(&root).unwrap();
        for line in [
            system.clone(),
            user("taken back"),
            Line::Rewind {
                to: 1,
                turns: vec![1],
            },
        ] {
            undone.append(&line).unwrap();
        }
        let mut empty = Session::create(&root).unwrap();
        empty.append(&system).unwrap();
        let mut damaged = Session::create(&root).unwrap();
        damaged.append(&user("lost")).unwrap();
        let mut file = std::fs::File::options()
            .append(true)
            .open(damaged.path())
            .unwrap();
        file.write_all(b"{oops\n{\"type\":\"redo\"}\n").unwrap();
        let base = SystemTime::now() - std::time::Duration::from_secs(100);
        let age = |session: &Session, secs| {
            let file = std::fs::File::options()
                .append(true)
                .open(session.path())
                .unwrap();
            file.set_modified(base + std::time::Duration::from_secs(secs))
                .unwrap();
        };
        age(&old, 1);
        age(&undone, 2);
        age(&damaged, 3);
        age(&empty, 4);
        // Closed, as at the end of the processes that wrote them: their locks go with them.
        let (old_id, old_path) = (old.id().to_owned(), old.path().to_owned());
        let (undone_id, undone_path) = (undone.id().to_owned(), undone.path().to_owned());
        drop((old, undone));

        let listed: Vec<(String, String, usize)> = (list(&root).unwrap().into_iter())
            .map(|s| (s.id, s.first_prompt, s.turns))
            .collect();
        assert_eq!(
            listed,
            [
                (undone_id.clone(), "taken back".to_owned(), 0),
                (old_id.clone(), "important".to_owned(), 1)
            ]
        );
        let reopened = Session::reopen(&root, None).unwrap();
        assert_eq!(reopened.session.id(), undone_id);
        assert_eq!(reopened.history.prompts(), 0);
        assert!(has_prompts(&reopened.history));
        insta::assert_snapshot!(reopened.notices.join("\n").replace(damaged.id(), "[ID]"), @"passed over the newer session [ID], whose file does not replay (line 2 does not parse: key must be a string at line 1 column 2)");
        insta::assert_snapshot!(all_undone_note(&reopened.history).unwrap(), @r#"every turn of this conversation was undone (the first: "taken back"); /redo brings them back"#);
        assert_eq!(
            all_undone_note(&Session::reopen(&root, Some(&old_id)).unwrap().history),
            None
        );

        // With no session that has a prompt, the error names the damaged one.
        std::fs::remove_file(&old_path).unwrap();
        std::fs::remove_file(&undone_path).unwrap();
        let err = Session::reopen(&root, None).unwrap_err();
        let err = format!("{err:#}").replace(damaged.id(), "[ID]");
        assert!(err.ends_with("to continue (the session [ID] there does not replay: line 2 does not parse: key must be a string at line 1 column 2)"), "{err}");
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
