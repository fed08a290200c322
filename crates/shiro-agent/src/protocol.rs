//! The agent's protocol with its front ends: what a session reports ([`ToFront`], whose
//! turn events are [`Event`]) and the ops a front end sends in ([`Op`]): a message, a `/`
//! command, undo and redo, an approval's answer, an interrupt, the end.
//!
//! The terminal UI, the line interface, `-p` and `-p --json` are four consumers of the same
//! messages: the UI draws them, the printers write them as text or JSON lines. `--json`
//! writes each [`Event`] as it is serialized here, so this file is the format scripts read
//! (`docs/architecture.md`, "The event protocol").
//!
//! Invariant: nothing here knows how it is shown; a type here names what happened, never
//! how to draw it.

use std::sync::Arc;
use std::sync::mpsc::Sender;

use serde::Serialize;
use shiro_providers::Usage;
use shiro_tools::Change;

use super::conversation::Conversation;

/// Where the agent sends what its front end shows. A front end that is gone takes the
/// message and drops it: the turn's bookkeeping goes on.
pub type FrontSink = Arc<dyn Fn(ToFront) + Send + Sync>;

/// One event of a turn, as `shiro -p … --json` prints it (one JSON object a line, tagged by
/// `type`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A headless run began (`--json` only, first): which session it saves to and where.
    SessionStart {
        /// The session's id: `shiro --resume ID` continues it.
        session_id: String,
        /// The model's name, or `none` when no model is set.
        model: String,
        /// The workspace root.
        workspace: String,
    },
    /// A piece of the model's text as it streams (`--json` only); a step's deltas
    /// concatenate to its `assistant_text`.
    TextDelta {
        /// The text.
        text: String,
    },
    /// What one model request used, as the server counted it (when it says).
    Usage {
        /// The request's tokens.
        #[serde(flatten)]
        usage: Usage,
    },
    /// The model's text of one step, whole (it streamed before).
    AssistantText {
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCall {
        /// The call's id, which its result quotes.
        id: String,
        /// The tool.
        name: String,
        /// The arguments: the parsed JSON, or the raw text when it does not parse.
        arguments: serde_json::Value,
    },
    /// A tool call's result, as sent back to the model.
    ToolResult {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// `ok`, `error` or `denied`.
        status: Status,
        /// The text the model reads.
        output: String,
        /// What the call changed on disk.
        changes: Vec<Change>,
    },
    /// The turn ended.
    TurnEnd {
        /// Every change of the turn, in order.
        changed: Vec<Change>,
        /// The undo log's number for the turn, when it was recorded (it changed a file).
        turn_id: Option<u64>,
        /// How many model calls the turn made.
        steps: usize,
        /// Why the turn ended early (interrupted, a provider error, the step cap), if it did.
        error: Option<String>,
        /// What kind of error `error` is, for a script to act on.
        error_kind: Option<ErrorKind>,
        /// The tokens the turn's requests used together; `null` when the server said nothing.
        usage: Option<Usage>,
        /// The session the turn belongs to.
        session_id: String,
        /// The session's background commands as the turn ended, left out when it has none;
        /// `shiro -p` stops those still running when its turn ends.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        background: Vec<BackgroundCommand>,
    },
}

/// A background command, as `turn_end` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackgroundCommand {
    /// Its id for `bash_output` and `bash_kill` (`b1`, …).
    pub id: String,
    /// The command line.
    pub command: String,
    /// `running`, `exited with code N`, `killed`, …
    pub status: String,
}

/// What kind of error ended a turn, in `turn_end`'s `error_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Esc, Ctrl-C or a signal stopped it.
    Interrupted,
    /// It reached the cap on model calls (`--max-turns`).
    MaxTurns,
    /// No model is set, or its configuration cannot work.
    Config,
    /// The server refused the API key.
    Auth,
    /// The server kept rate limiting after every retry.
    RateLimit,
    /// The server refused the request (a wrong model or endpoint, a context too long, an
    /// exhausted quota).
    InvalidRequest,
    /// The server kept failing (5xx) after every retry.
    Server,
    /// The server could not be reached, timed out, or the connection broke mid-answer.
    Network,
    /// The server's answer could not be read (or a replay script ran out).
    BadResponse,
}

/// How a tool call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran and succeeded.
    Ok,
    /// It ran (or was refused by the tool) and failed.
    Error,
    /// The user (or the approval policy) did not let it run.
    Denied,
}

/// What the agent tells its front end.
#[derive(Debug)]
pub enum ToFront {
    /// A notice or a command's output, for the transcript.
    Info(String),
    /// The diff of a call about to run.
    Preview(String),
    /// Text the model streams.
    Delta(String),
    /// An event of the turn.
    Event(Event),
    /// What the turn is doing now.
    Phase(Phase),
    /// Output of the running `bash` command, as it comes.
    BashOutput(String),
    /// The agent waits for the next op: at the prompt, or for an approval's answer.
    Read {
        /// Which.
        kind: ReadKind,
        /// Where the op goes.
        reply: Sender<Op>,
    },
    /// New facts for the status line.
    Status(StatusInfo),
    /// A resumed session's conversation, to show again: its full transcript, with a note
    /// where each compaction happened.
    Replay(Conversation),
    /// Asks the person to pick a session to resume; `None` when they choose none.
    Pick {
        /// The sessions, newest first.
        sessions: Vec<PickItem>,
        /// Where the choice goes.
        reply: Sender<Option<String>>,
    },
    /// Asks the person to pick a turn of this session to rewind to (`/rewind`, Esc Esc), and
    /// what to take back; `None` when they choose none.
    PickTurn {
        /// The session's turns, newest first.
        turns: Vec<TurnItem>,
        /// Where the choice goes.
        reply: Sender<Option<RewindChoice>>,
    },
    /// Text to put in the input box, for the person to edit and send (a rewound turn's
    /// prompt).
    Prefill(String),
    /// How many background commands run now: one started or ended (between turns too).
    BackgroundRunning(usize),
    /// Asks the person to pick a background command (`/bashes`) and what to do with it;
    /// `None` when they choose none.
    PickBackground {
        /// The session's background commands, oldest first.
        commands: Vec<BackgroundItem>,
        /// Where the choice goes.
        reply: Sender<Option<BackgroundChoice>>,
    },
}

/// A background command, as the `/bashes` picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundItem {
    /// Its id (`b1`).
    pub id: String,
    /// Its command line, on one line.
    pub command: String,
    /// Where it stands (`running`, `exited with status 0`, …).
    pub status: String,
    /// Whether it still runs.
    pub running: bool,
    /// How long ago it started (`2m 05s`).
    pub age: String,
    /// The last line it printed, if any.
    pub last_line: Option<String>,
}

/// What the person chose in the `/bashes` picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundChoice {
    /// The command's id.
    pub id: String,
    /// What to do with it.
    pub action: BackgroundAction,
}

/// What to do with a picked background command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackgroundAction {
    /// Show its output (`/bashes show ID`).
    Show,
    /// Stop it, with everything it started (`/bashes kill ID`).
    Kill,
}

/// A turn of the session, as the rewind picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnItem {
    /// Its number in the session (1 for the first prompt).
    pub number: usize,
    /// The first line of its prompt.
    pub prompt: String,
    /// How long ago it was sent (`5 min ago`), or empty when unknown.
    pub ago: String,
    /// What it changed (`3 M, 1 A, 1 D, bash`), or `no file changes`.
    pub changes: String,
    /// Whether its files can be rewound: `None` when they can (or it changed none), else why
    /// not (`undone`, `left the undo log`, `damaged`).
    pub blocked: Option<String>,
}

/// What a rewind takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RewindScope {
    /// The files and the conversation (the default).
    #[default]
    Both,
    /// The conversation alone: the files stay as they are.
    Conversation,
    /// The files alone: the conversation stays as it is.
    Files,
}

impl RewindScope {
    /// Every scope, in the order a picker offers them.
    pub const ALL: [RewindScope; 3] = [
        RewindScope::Both,
        RewindScope::Conversation,
        RewindScope::Files,
    ];

    /// Its word in `/rewind N WORD`.
    pub fn word(self) -> &'static str {
        match self {
            RewindScope::Both => "both",
            RewindScope::Conversation => "conversation",
            RewindScope::Files => "files",
        }
    }

    /// What it does, for a picker.
    pub fn describe(self) -> &'static str {
        match self {
            RewindScope::Both => "files and conversation",
            RewindScope::Conversation => "conversation only (files stay as they are)",
            RewindScope::Files => "files only (the conversation stays)",
        }
    }

    /// The scope `/rewind N WORD` names.
    pub fn parse(word: &str) -> Option<RewindScope> {
        RewindScope::ALL
            .into_iter()
            .find(|scope| scope.word() == word || (word == "code" && *scope == RewindScope::Files))
    }
}

/// The person's choice in the rewind picker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewindChoice {
    /// The turn to rewind to before ([`TurnItem::number`]).
    pub number: usize,
    /// What to take back.
    pub scope: RewindScope,
}

/// What the agent waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadKind {
    /// The next prompt.
    Prompt,
    /// Whether `tool` may run.
    Approval {
        /// The tool.
        tool: String,
        /// What `a` does: `always: RULE`, or `once (…)` when no rule can be kept.
        always: String,
    },
    /// Where the rules of an "always" answer are kept.
    Keep {
        /// The rules, as one text.
        rules: String,
    },
}

/// What a turn is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the model's answer.
    Waiting,
    /// Running a tool.
    Tool(String),
}

/// What the status line shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusInfo {
    /// The model's name.
    pub model: String,
    /// The workspace, `~` for the home directory.
    pub workspace: String,
    /// Tokens the session has used, when the provider reports them.
    pub tokens: Option<u64>,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// Tokens of the last request (its prompt plus completion): the share of the window in
    /// use.
    pub context_used: Option<u64>,
    /// How many turns `/undo` can take back.
    pub undo_depth: Option<usize>,
    /// Set when bash's changes are detected but cannot all be undone.
    pub capture_note: Option<String>,
    /// How many background commands run; `None` when bash cannot start them.
    pub background: Option<usize>,
}

/// A session the picker offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickItem {
    /// Its id.
    pub id: String,
    /// When it was last written, as shown.
    pub when: String,
    /// Its first prompt.
    pub first_prompt: String,
    /// How many prompts it has.
    pub turns: usize,
    /// For a fork shown under its parent: before which of the parent's turns it was forked.
    /// Forks follow their parent in the list, one level deeper per fork.
    pub forked_at: Option<usize>,
    /// How deep it is in the tree of forks (0: not a fork, or its parent is not listed).
    pub depth: usize,
}

/// What a front end sends the agent, when the agent waits for it ([`ToFront::Read`], or a
/// call of [`crate::input::Input`]). Text front ends send what was typed as
/// [`Op::Submit`], which the agent reads for what it waits for (a message or a `/` command
/// at the prompt, `y`/`a`/`n` at an approval); others may send the typed ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A line as typed, without its newline.
    Submit(String),
    /// Undo the last turn: its files and the conversation (what `/undo` does).
    Undo,
    /// Redo what was undone last, files and conversation (what `/redo` does).
    Redo,
    /// Open the picker of turns to rewind to (what `/rewind` does; Esc Esc in the UI).
    Rewind,
    /// The answer to an approval.
    Approve(Answer),
    /// Where the rules of an "always" answer are kept.
    Keep(Scope),
    /// Ctrl-C at the prompt: nothing to do; at an approval: no.
    Interrupt,
    /// Ctrl-D or the end of the input: leave (at an approval: no).
    Quit,
}

/// The answer to an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `y`: run this call.
    Once,
    /// `a`: run this, and keep a rule that runs calls like it without asking.
    Always,
    /// `n [reason]`: do not run it.
    No(Option<String>),
}

/// Where an "always" answer's rules are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// For this session only.
    Session,
    /// In the workspace's `.shiro/config.toml`.
    Workspace,
    /// In the user's `config.toml`.
    User,
}

/// A one-line view of a tool call's arguments: the path or command when there is one,
/// else the JSON, cut to a readable length.
pub fn brief(arguments: &serde_json::Value) -> String {
    const MAX: usize = 100;
    // A patch is summed up by its file headers: `Update File: a.rs, Delete File: b.rs`.
    let patch_files = arguments
        .get("patch")
        .and_then(|v| v.as_str())
        .map(|patch| {
            patch
                .lines()
                .filter_map(|line| line.strip_prefix("*** "))
                .filter(|rest| !rest.starts_with("Begin Patch") && !rest.starts_with("End "))
                .collect::<Vec<_>>()
                .join(", ")
        });
    let text = ["path", "command", "pattern"]
        .iter()
        .find_map(|key| {
            arguments
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .or(patch_files)
        .unwrap_or_else(|| match arguments {
            serde_json::Value::String(raw) => raw.clone(),
            other => other.to_string(),
        });
    let text = text.replace('\n', "⏎");
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use shiro_tools::WorkspacePath;

    use super::*;

    /// One of every event, as `-p --json` writes them: a change to this format is a diff
    /// here, which a script's author must be able to read.
    #[test]
    fn the_json_events_keep_their_shape() {
        let path = |p: &str| WorkspacePath::from_relative(p).unwrap();
        let usage = Usage {
            prompt_tokens: 120,
            completion_tokens: 30,
            cached_tokens: 100,
        };
        let events = [
            Event::SessionStart {
                session_id: "20261202-120000-abcd".into(),
                model: "gpt-test".into(),
                workspace: "/work/app".into(),
            },
            Event::TextDelta { text: "Fix".into() },
            Event::Usage { usage },
            Event::AssistantText {
                text: "Fixing it.".into(),
            },
            Event::ToolCall {
                id: "call_1".into(),
                name: "edit_file".into(),
                arguments: serde_json::json!({"path": "src/a.rs", "old": "a", "new": "b"}),
            },
            Event::ToolResult {
                id: "call_1".into(),
                name: "edit_file".into(),
                status: Status::Ok,
                output: "edited src/a.rs".into(),
                changes: vec![Change::Modified {
                    path: path("src/a.rs"),
                }],
            },
            Event::ToolResult {
                id: "call_2".into(),
                name: "bash".into(),
                status: Status::Denied,
                output: "denied by the user".into(),
                changes: Vec::new(),
            },
            Event::TurnEnd {
                changed: vec![
                    Change::Modified {
                        path: path("src/a.rs"),
                    },
                    Change::Added { path: path("b.rs") },
                ],
                turn_id: Some(7),
                steps: 2,
                error: None,
                error_kind: None,
                usage: Some(usage),
                session_id: "20261202-120000-abcd".into(),
                background: vec![BackgroundCommand {
                    id: "b1".into(),
                    command: "python3 -m http.server 8000".into(),
                    status: "running".into(),
                }],
            },
            Event::TurnEnd {
                changed: Vec::new(),
                turn_id: None,
                steps: 1,
                error: Some("interrupted".into()),
                error_kind: Some(ErrorKind::Interrupted),
                usage: None,
                session_id: "20261202-120000-abcd".into(),
                background: Vec::new(),
            },
        ];
        let lines: Vec<String> = events
            .iter()
            .map(|event| serde_json::to_string(event).unwrap())
            .collect();
        insta::assert_snapshot!(lines.join("\n"));
    }
}
