//! The conversation of a session: the full transcript (every message ever sent or received,
//! as the session file's `message` lines hold them), the compactions that replaced its
//! older part by a summary in what the model is sent, and the clearings that replaced the
//! older tool outputs of a turn too long to summarise by a short note.
//!
//! Positions are always positions in the full transcript, so neither shifts the undo log's
//! `history_marker`s. Rewinding to a marker truncates the transcript and drops every
//! compaction and clearing made after that point (when the transcript was longer), so the
//! model's context is exactly what it was when the transcript had that length — with the
//! replaced messages back when the rewind goes past one. The rule is written up in
//! `docs/formats.md`, "Saved sessions".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use shiro_providers::{Message, Role};

/// The user message that stands before a compaction's summary in the model's context, so
/// the summary reads as the model's own answer and user and assistant messages still
/// alternate.
pub const COMPACTED_NOTE: &str = "The earlier part of this conversation was compacted to save \
context: the messages before this one were replaced by the summary that follows. Summarise \
the conversation so far.";

/// What stands in the model's context for a tool output that a clearing replaced.
pub const CLEARED_NOTE: &str = "[shiro cleared this tool output from the conversation to keep \
it within the model's context window; call the tool again if you still need it]";

/// One compaction: the messages from the end of the leading system messages up to
/// `keep_from` are replaced by `summary` in the model's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// The transcript's length when it ran.
    pub at: usize,
    /// The first message kept verbatim: a user message, so that the kept part starts a turn.
    pub keep_from: usize,
    /// The model's summary of everything before `keep_from`.
    pub summary: String,
}

/// One clearing: the output of every tool call before `before` (in the transcript) is
/// replaced by [`CLEARED_NOTE`] in the model's context. It is what is left when the running
/// turn alone fills the window, since a compaction always keeps that turn verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clearing {
    /// The transcript's length when it ran.
    pub at: usize,
    /// The first message whose output, if it is a tool's, is still sent verbatim.
    pub before: usize,
}

/// A conversation: the full transcript, and the compactions and clearings in effect, oldest
/// first; what is known of each prompt; and what rewinds took away, for redo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    messages: Vec<Message>,
    compactions: Vec<Compaction>,
    clearings: Vec<Clearing>,
    /// Each prompt's facts, by the position of its user message.
    prompts: BTreeMap<usize, Prompt>,
    /// What the rewinds since the last new message took away, the next to bring back last.
    undone: Vec<Undone>,
}

/// What is known of one prompt besides its message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prompt {
    /// When it was sent, in seconds since the Unix epoch (unknown in sessions saved by
    /// versions before 0.1 of time travel).
    pub time: Option<u64>,
    /// The undo log's number for the turn it started, when that turn changed files.
    pub turn: Option<u64>,
}

/// What one rewind took away, for a redo to bring back: the messages after `to`, with the
/// compactions, clearings and prompt facts made past that point, and the undo log's turns
/// whose files went back with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The transcript's length after the rewind.
    pub to: usize,
    /// The turns of the undo log whose files were restored with it, oldest first; empty when
    /// only the conversation went back.
    pub turns: Vec<u64>,
    messages: Vec<Message>,
    compactions: Vec<Compaction>,
    clearings: Vec<Clearing>,
    prompts: BTreeMap<usize, Prompt>,
}

impl Undone {
    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it holds no message (only files went back).
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// Why a compaction record does not fit the transcript it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a compaction at length {at} keeping messages from {keep_from} does not fit a transcript of {len} messages whose compacted part begins at {start}"
)]
pub struct Misfit {
    at: usize,
    keep_from: usize,
    len: usize,
    start: usize,
}

/// Why a clearing record does not fit the transcript it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a clearing at length {at} of the tool outputs before {before} does not fit a transcript of {len} messages: it must be made at the transcript's length and clear an output not cleared yet"
)]
pub struct ClearingMisfit {
    at: usize,
    before: usize,
    len: usize,
}

impl From<Vec<Message>> for Conversation {
    /// A conversation of `messages`, never compacted.
    fn from(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            ..Conversation::default()
        }
    }
}

impl Conversation {
    /// Appends a message. The conversation then goes on from here: what rewinds took away
    /// can no longer be redone.
    pub fn push(&mut self, message: Message) {
        self.undone.clear();
        self.messages.push(message);
    }

    /// Notes when the prompt at `index` (a user message) was sent.
    pub fn note_time(&mut self, index: usize, time: u64) {
        self.prompts.entry(index).or_default().time = Some(time);
    }

    /// Notes the undo log's turn that the prompt at `index` started.
    pub fn note_turn(&mut self, index: usize, turn: u64) {
        self.prompts.entry(index).or_default().turn = Some(turn);
    }

    /// The facts noted of the prompt at `index`.
    pub fn prompt(&self, index: usize) -> Prompt {
        self.prompts.get(&index).copied().unwrap_or_default()
    }

    /// Truncates the transcript to its first `to` messages and drops the compactions and
    /// clearings made when it was longer than that, keeping what it took away for
    /// [`Conversation::redo`].
    pub fn rewind(&mut self, to: usize) {
        self.rewind_with(to, Vec::new());
    }

    /// [`Conversation::rewind`], noting the undo log's `turns` whose files went back with it
    /// (a rewind to the transcript's own length notes files alone going back).
    pub fn rewind_with(&mut self, to: usize, turns: Vec<u64>) {
        let to = to.min(self.messages.len());
        let messages = self.messages.split_off(to);
        let (compactions, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.compactions)
            .into_iter()
            .partition(|compaction| compaction.at > to);
        self.compactions = kept;
        let (clearings, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.clearings)
            .into_iter()
            .partition(|clearing| clearing.at > to);
        self.clearings = kept;
        let prompts = self.prompts.split_off(&to);
        self.undone.push(Undone {
            to,
            turns,
            messages,
            compactions,
            clearings,
            prompts,
        });
    }

    /// Whether the messages that rewinds took away, still there for a redo, hold the prompt
    /// that started the undo log's `turn`.
    pub fn rewound_turn(&self, turn: u64) -> bool {
        (self.undone.iter()).any(|undone| undone.prompts.values().any(|p| p.turn == Some(turn)))
    }

    /// What the next [`Conversation::redo`] brings back, if anything.
    pub fn next_redo(&self) -> Option<&Undone> {
        self.undone.last()
    }

    /// The messages that redos could bring back, in the order they would come back: the
    /// next redo's first.
    pub fn redoable(&self) -> impl Iterator<Item = &Message> {
        self.undone.iter().rev().flat_map(|undone| &undone.messages)
    }

    /// Brings back what the last rewind took away; `None` (changing nothing) when no rewind
    /// happened since the last new message.
    pub fn redo(&mut self) -> Option<Undone> {
        let undone = self.undone.pop()?;
        if undone.to != self.messages.len() {
            // Cannot happen: anything that changes the transcript empties the stack.
            self.undone.push(undone);
            return None;
        }
        self.messages.extend(undone.messages.iter().cloned());
        self.compactions.extend(undone.compactions.iter().cloned());
        self.clearings.extend(undone.clearings.iter().copied());
        self.prompts.extend(undone.prompts.clone());
        Some(undone)
    }

    /// Records a compaction of the transcript as it is now, keeping the messages from
    /// `keep_from` on verbatim. Refused (nothing changes) unless `keep_from` is a user
    /// message after the part already compacted.
    pub fn compact(&mut self, keep_from: usize, summary: String) -> Result<(), Misfit> {
        self.apply(Compaction {
            at: self.messages.len(),
            keep_from,
            summary,
        })
    }

    /// Applies a compaction record (one of a session file's `compact` lines), checking that
    /// it fits this transcript.
    pub fn apply(&mut self, compaction: Compaction) -> Result<(), Misfit> {
        let start = self.start();
        let len = self.messages.len();
        let fits = compaction.at == len
            && compaction.keep_from > start
            && self
                .messages
                .get(compaction.keep_from)
                .is_some_and(|m| m.role == Role::User);
        if !fits {
            return Err(Misfit {
                at: compaction.at,
                keep_from: compaction.keep_from,
                len,
                start,
            });
        }
        self.undone.clear();
        self.compactions.push(compaction);
        Ok(())
    }

    /// Records a clearing of the tool outputs before `before`, in the transcript as it is
    /// now, and returns how many outputs it cleared. Refused (nothing changes) unless it
    /// clears an output still sent verbatim.
    pub fn clear(&mut self, before: usize) -> Result<usize, ClearingMisfit> {
        self.apply_clearing(Clearing {
            at: self.messages.len(),
            before,
        })
    }

    /// Applies a clearing record (one of a session file's `clear` lines), checking that it
    /// fits this transcript: made at its length, and clearing at least one tool output the
    /// model still sees verbatim. Returns how many outputs it cleared.
    pub fn apply_clearing(&mut self, clearing: Clearing) -> Result<usize, ClearingMisfit> {
        let len = self.messages.len();
        let clears = self.clears(clearing.before);
        if clearing.at != len || clearing.before > len || clears == 0 {
            return Err(ClearingMisfit {
                at: clearing.at,
                before: clearing.before,
                len,
            });
        }
        self.undone.clear();
        self.clearings.push(clearing);
        Ok(clears)
    }

    /// Where a clearing would go now: before the newest assistant message that calls tools,
    /// so the outputs of the latest step stay, and every call keeps a result. `None` when
    /// that would clear no output the model still sees verbatim.
    pub fn clearing_point(&self) -> Option<usize> {
        self.messages
            .iter()
            .rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
            .filter(|&before| self.clears(before) > 0)
    }

    /// How many tool outputs the model still sees verbatim that a clearing before `before`
    /// would replace.
    fn clears(&self, before: usize) -> usize {
        self.tool_outputs(self.start().max(self.cleared_before()), before)
    }

    /// The newest clearing's `before`: the outputs before it are cleared.
    fn cleared_before(&self) -> usize {
        self.clearings.last().map_or(0, |c| c.before)
    }

    /// How many tool outputs the model is sent as [`CLEARED_NOTE`].
    pub fn cleared(&self) -> usize {
        self.tool_outputs(self.start(), self.cleared_before())
    }

    /// How many tool outputs the transcript holds from `from` up to `before`.
    fn tool_outputs(&self, from: usize, before: usize) -> usize {
        self.messages.get(from..before).map_or(0, |part| {
            part.iter().filter(|m| m.role == Role::Tool).count()
        })
    }

    /// Where a compaction would cut now: at the newest user message, so that the last turn
    /// stays verbatim, every tool call stays with its result, and the kept part starts a
    /// turn. `None` when no turn begins after the part already compacted (the last turn
    /// is all there is to keep).
    pub fn cut(&self) -> Option<usize> {
        let start = self.start();
        self.messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .filter(|&index| index > start)
    }

    /// The first message the next compaction would summarise: after the leading system
    /// messages, or where the newest compaction kept messages from.
    fn start(&self) -> usize {
        self.compactions
            .last()
            .map_or_else(|| self.system_len(), |c| c.keep_from)
    }

    /// How many system messages lead the transcript (they are never compacted).
    fn system_len(&self) -> usize {
        self.messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count()
    }

    /// What the model is sent: the leading system messages, then, after a compaction, the
    /// newest summary (as a user note and the model's answer), then the messages kept.
    /// Tool outputs before the newest clearing's `before` are sent as [`CLEARED_NOTE`].
    pub fn context(&self) -> Vec<Message> {
        let system = self.system_len();
        let mut context = self.messages[..system].to_vec();
        let from = match self.compactions.last() {
            Some(newest) => {
                context.push(Message::user(COMPACTED_NOTE));
                context.push(Message::assistant(newest.summary.clone()));
                newest.keep_from
            }
            None => system,
        };
        let cleared = self.cleared_before();
        context.extend(self.messages[from..].iter().enumerate().map(|(i, m)| {
            if m.role == Role::Tool && from + i < cleared {
                Message {
                    content: CLEARED_NOTE.to_owned(),
                    ..m.clone()
                }
            } else {
                m.clone()
            }
        }));
        context
    }

    /// How many transcript messages a compaction keeping messages from `keep_from` would
    /// replace that the model still sees verbatim now (besides an earlier summary).
    pub fn len_to_summarise(&self, keep_from: usize) -> usize {
        keep_from.saturating_sub(self.start())
    }

    /// How many transcript messages the model sees only as a summary.
    pub fn summarised(&self) -> usize {
        self.compactions
            .last()
            .map_or(0, |newest| newest.keep_from - self.system_len())
    }

    /// The full transcript, every message the session ever had (after rewinds).
    pub fn transcript(&self) -> &[Message] {
        &self.messages
    }

    /// The compactions in effect, oldest first.
    pub fn compactions(&self) -> &[Compaction] {
        &self.compactions
    }

    /// The clearings in effect, oldest first.
    pub fn clearings(&self) -> &[Clearing] {
        &self.clearings
    }

    /// The transcript's length: the position the undo log's markers count in.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the transcript holds no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The prompts (user messages), oldest first: each one's position in the transcript, its
    /// message and what is known of it.
    pub fn prompt_list(&self) -> Vec<(usize, &Message, Prompt)> {
        (self.messages.iter().enumerate())
            .filter(|(_, m)| m.role == Role::User)
            .map(|(index, m)| (index, m, self.prompt(index)))
            .collect()
    }

    /// The conversation as it was when the transcript had `to` messages, with nothing to
    /// redo: the start of a fork.
    pub fn before(&self, to: usize) -> Conversation {
        let mut copy = self.clone();
        copy.rewind(to);
        copy.undone.clear();
        copy
    }

    /// How many user messages the transcript holds (a session's turns).
    pub fn prompts(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count()
    }

    /// A rough count of the tokens of the model's context: its characters over four (the
    /// usual rule of thumb for English and code), for when no request has measured it.
    pub fn estimated_tokens(&self) -> u64 {
        let chars: usize = self
            .context()
            .iter()
            .map(|m| {
                m.content.chars().count()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.chars().count())
                        .sum::<usize>()
            })
            .sum();
        (chars / 4) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(roles: &str) -> Conversation {
        let mut c = Conversation::default();
        for (i, role) in roles.chars().enumerate() {
            c.push(match role {
                's' => Message::system(format!("s{i}")),
                'u' => Message::user(format!("u{i}")),
                'a' => Message::assistant(format!("a{i}")),
                // An assistant message that calls a tool.
                'c' => Message {
                    tool_calls: vec![shiro_providers::ToolCall {
                        id: format!("c{i}"),
                        name: "read_file".into(),
                        arguments: "{}".into(),
                    }],
                    ..Message::assistant(format!("c{i}"))
                },
                _ => Message::tool_result(format!("c{}", i.saturating_sub(1)), format!("t{i}")),
            });
        }
        c
    }

    fn contents(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.content.as_str()).collect()
    }

    /// What redos could bring back is listed in the order they would bring it, and a new
    /// message empties it.
    #[test]
    fn redoable_lists_what_redos_bring_back_in_order() {
        let mut c = conversation("suaua");
        c.rewind(3);
        c.rewind(1);
        c.rewind(1);
        assert_eq!(
            (c.redoable().map(|m| m.content.as_str())).collect::<Vec<_>>(),
            ["u1", "a2", "u3", "a4"]
        );
        c.redo();
        c.redo();
        assert_eq!(contents(&c.transcript()[1..]), ["u1", "a2"]);
        assert_eq!(
            (c.redoable().map(|m| m.content.as_str())).collect::<Vec<_>>(),
            ["u3", "a4"]
        );
        c.push(Message::user("u5"));
        assert_eq!(c.redoable().count(), 0);
    }

    #[test]
    fn compaction_keeps_the_last_turn_and_rewind_past_it_brings_the_messages_back() {
        let mut c = conversation("suatauat");
        let before = c.context();
        assert_eq!(c.cut(), Some(5), "the newest user message");
        c.compact(5, "S1".into()).unwrap();
        assert_eq!(
            contents(&c.context()),
            ["s0", COMPACTED_NOTE, "S1", "u5", "a6", "t7"]
        );
        assert_eq!(c.len(), 8, "the transcript keeps every message");
        c.push(Message::user("u8"));
        c.rewind(8);
        assert_eq!(c.compactions().len(), 1, "made at 8: still in effect at 8");
        c.rewind(5);
        assert_eq!(c.context(), before[..5], "the replaced messages are back");
        assert!(c.compactions().is_empty());
    }

    #[test]
    fn a_second_compaction_summarises_the_first_and_rewinds_undo_one_at_a_time() {
        let mut c = conversation("suaua");
        c.compact(3, "S1".into()).unwrap();
        let after_first = c.context();
        c.push(Message::user("u5"));
        c.push(Message::assistant("a6"));
        assert_eq!(c.cut(), Some(5));
        assert_eq!(c.len_to_summarise(5), 2, "u3 and a4, besides the summary");
        c.compact(5, "S2".into()).unwrap();
        assert_eq!(
            contents(&c.context()),
            ["s0", COMPACTED_NOTE, "S2", "u5", "a6"]
        );
        c.rewind(5);
        assert_eq!(
            c.context(),
            after_first,
            "the first compaction is in effect"
        );
        c.rewind(3);
        assert_eq!(contents(&c.context()), ["s0", "u1", "a2"]);
    }

    #[test]
    fn cuts_only_at_a_user_message_after_the_compacted_part() {
        assert_eq!(conversation("s").cut(), None, "nothing to summarise");
        assert_eq!(conversation("suat").cut(), None, "one turn: it is kept");
        let mut c = conversation("suatua");
        assert_eq!(c.cut(), Some(4));
        for bad in [0, 1, 2, 3, 5, 6, 7] {
            assert!(c.compact(bad, "x".into()).is_err(), "{bad}");
        }
        assert!(c.compactions().is_empty());
        c.compact(4, "S".into()).unwrap();
        assert_eq!(c.cut(), None, "the kept turn is all there is");
        c.push(Message::user("u6"));
        assert_eq!(c.cut(), Some(6));
        let misfit = Compaction {
            at: 6,
            keep_from: 4,
            summary: String::new(),
        };
        assert!(c.apply(misfit).is_err(), "not after the compacted part");
        let misfit = Compaction {
            at: 5,
            keep_from: 6,
            summary: String::new(),
        };
        assert!(c.apply(misfit).is_err(), "not at the transcript's length");
    }

    #[test]
    fn clearing_replaces_the_older_outputs_and_rewind_past_it_brings_them_back() {
        let mut c = conversation("suctctct");
        let before = c.context();
        assert_eq!(c.cut(), None, "one turn: nothing to summarise");
        assert_eq!(
            c.clearing_point(),
            Some(6),
            "the newest call keeps its output"
        );
        c.clear(6).unwrap();
        assert_eq!(
            contents(&c.context()),
            [
                "s0",
                "u1",
                "c2",
                CLEARED_NOTE,
                "c4",
                CLEARED_NOTE,
                "c6",
                "t7"
            ]
        );
        assert_eq!(c.context()[3].tool_call_id.as_deref(), Some("c2"));
        assert_eq!(c.cleared(), 2);
        assert_eq!(c.clearing_point(), None, "nothing more to clear");
        assert!(c.clear(6).is_err(), "clears nothing new");
        c.push(Message::assistant("c8"));
        assert_eq!(c.clearing_point(), None, "a message without calls");
        c.rewind(8);
        assert_eq!(c.clearings().len(), 1, "made at 8: still in effect at 8");
        c.rewind(7);
        assert_eq!(c.context(), before[..7], "the cleared outputs are back");
        assert!(c.clearings().is_empty());
    }

    #[test]
    fn clearings_and_compactions_compose() {
        let mut c = conversation("suctct");
        assert!(c.clear(3).is_err(), "t3 is after 3");
        c.clear(4).unwrap();
        assert_eq!(c.cleared(), 1);
        assert!(c.clear(4).is_err(), "t3 is cleared already");
        assert!(c.clear(7).is_err(), "past the transcript");
        c.push(Message::user("u6"));
        c.push(Message::assistant("a7"));
        c.compact(6, "S".into()).unwrap();
        assert_eq!(c.cleared(), 0, "the cleared output is summarised now");
        assert_eq!(
            contents(&c.context()),
            ["s0", COMPACTED_NOTE, "S", "u6", "a7"]
        );
        c.rewind(7);
        assert!(c.compactions().is_empty(), "made at 8");
        assert_eq!(
            contents(&c.context()),
            ["s0", "u1", "c2", CLEARED_NOTE, "c4", "t5", "u6"],
            "the clearing made at 6 stays"
        );
        let misfit = Clearing { at: 3, before: 4 };
        assert!(
            c.apply_clearing(misfit).is_err(),
            "not at the transcript's length"
        );
    }

    #[test]
    fn a_rewound_turn_is_known_until_its_messages_come_back_or_a_new_one_is_sent() {
        let mut c = conversation("suaua");
        c.note_turn(1, 7);
        c.note_turn(3, 8);
        c.rewind(3);
        assert!(c.rewound_turn(8));
        assert!(!c.rewound_turn(7), "still in the conversation");
        c.rewind_with(3, vec![7]);
        assert!(c.rewound_turn(8), "under a rewind of files alone");
        c.redo();
        c.redo();
        assert!(!c.rewound_turn(8), "back in the conversation");
        c.rewind(3);
        c.push(Message::user("u3"));
        assert!(!c.rewound_turn(8), "a new message ends the redo");
    }

    #[test]
    fn estimates_a_quarter_token_a_character_of_the_context() {
        let mut c = Conversation::default();
        c.push(Message::user("x".repeat(40)));
        assert_eq!(c.estimated_tokens(), 10);
    }
}
