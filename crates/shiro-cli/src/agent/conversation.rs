//! The conversation of a session: the full transcript (every message ever sent or received,
//! as the session file's `message` lines hold them) and the compactions that replaced its
//! older part by a summary in what the model is sent.
//!
//! Positions are always positions in the full transcript, so a compaction never shifts the
//! undo log's `history_marker`s. Rewinding to a marker truncates the transcript and drops
//! every compaction made after that point (when the transcript was longer), so the model's
//! context is exactly what it was when the transcript had that length — with the replaced
//! messages back when the rewind goes past a compaction. The rule is written up in
//! `docs/formats.md`, "Saved sessions".

use serde::{Deserialize, Serialize};

use crate::provider::{Message, Role};

/// The user message that stands before a compaction's summary in the model's context, so
/// the summary reads as the model's own answer and user and assistant messages still
/// alternate.
pub const COMPACTED_NOTE: &str = "The earlier part of this conversation was compacted to save \
context: the messages before this one were replaced by the summary that follows. Summarise \
the conversation so far.";

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

/// A conversation: the full transcript and the compactions in effect, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    messages: Vec<Message>,
    compactions: Vec<Compaction>,
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

impl From<Vec<Message>> for Conversation {
    /// A conversation of `messages`, never compacted.
    fn from(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            compactions: Vec::new(),
        }
    }
}

impl Conversation {
    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Truncates the transcript to its first `to` messages and drops the compactions made
    /// when it was longer than that.
    pub fn rewind(&mut self, to: usize) {
        self.messages.truncate(to);
        self.compactions.retain(|compaction| compaction.at <= to);
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
        self.compactions.push(compaction);
        Ok(())
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
    pub fn context(&self) -> Vec<Message> {
        let system = self.system_len();
        let Some(newest) = self.compactions.last() else {
            return self.messages.clone();
        };
        let mut context = self.messages[..system].to_vec();
        context.push(Message::user(COMPACTED_NOTE));
        context.push(Message::assistant(newest.summary.clone()));
        context.extend_from_slice(&self.messages[newest.keep_from..]);
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

    /// The transcript's length: the position the undo log's markers count in.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the transcript holds no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
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
                _ => Message::tool_result(format!("c{i}"), format!("t{i}")),
            });
        }
        c
    }

    fn contents(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.content.as_str()).collect()
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
    fn estimates_a_quarter_token_a_character_of_the_context() {
        let mut c = Conversation::default();
        c.push(Message::user("x".repeat(40)));
        assert_eq!(c.estimated_tokens(), 10);
    }
}
