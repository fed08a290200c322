//! Where the agent's ops come from: the [`Input`] a front end gives the agent (the binary's
//! line editor or terminal UI), plain [`Lines`] from a pipe or a script, or a queue of
//! [`Ops`] that another program fills. Prompts for the next message and approval answers
//! both come through here, so a piped session can answer approvals on the lines that follow.

use std::io::BufRead;
use std::sync::mpsc::Receiver;

use super::events::Printer;
use super::protocol::Op;

/// A source of ops. The agent asks for the next one when it waits: at the prompt, at an
/// approval, at the question of where to keep a rule.
pub trait Input {
    /// Shows `prompt` and takes the next op (a typed line is [`Op::Submit`]).
    fn read(&mut self, prompt: &str, printer: &mut Printer) -> Op;

    /// Asks whether `tool` may run: `y`, `a`, or `n` with an optional reason. `always` says
    /// what `a` does (`always: bash(git status:*)`, or `once (…)` when no rule can be kept).
    fn approve(&mut self, tool: &str, always: &str, printer: &mut Printer) -> Op {
        let prompt =
            format!("allow {tool}? [y]es, [a] {always}, [n]o (n REASON tells the model why) ");
        self.read(&prompt, printer)
    }

    /// After an `a`, asks where the rules `rules` are kept: `s` this session (also Enter),
    /// `w` the workspace's config, `u` the user's.
    fn keep(&mut self, rules: &str, printer: &mut Printer) -> Op {
        let prompt = format!(
            "keep {rules} for: [s]ession only, [w]orkspace (.shiro/config.toml), [u]ser config (all your workspaces)? "
        );
        self.read(&prompt, printer)
    }

    /// Adds a line the user sent to the prompt history.
    fn remember(&mut self, _line: &str) {}

    /// Puts `text` where the next prompt is typed, for the person to edit and send (a
    /// rewound turn's prompt). A source that cannot does nothing.
    fn prefill(&mut self, _text: &str) {}
}

/// Plain lines from a reader (a pipe, or the demo's script). Since nothing echoes piped
/// input, each line is printed after its prompt, so a transcript reads like the session.
pub struct Lines {
    reader: Box<dyn BufRead + Send>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines").finish_non_exhaustive()
    }
}

impl Lines {
    /// Lines from `reader`.
    pub fn new(reader: Box<dyn BufRead + Send>) -> Self {
        Lines { reader }
    }
}

impl Input for Lines {
    fn read(&mut self, prompt: &str, printer: &mut Printer) -> Op {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => Op::Quit,
            Ok(_) => {
                let line = line.trim_end_matches(['\n', '\r']).to_owned();
                printer.info(&format!("{prompt}{line}"));
                Op::Submit(line)
            }
        }
    }
}

/// A submission queue: ops another program (a server, a test, an embedding) sends at any
/// time, taken in order as the agent waits. Once every sender is gone, the agent is told
/// [`Op::Quit`].
#[derive(Debug)]
pub struct Ops {
    queue: Receiver<Op>,
}

impl Ops {
    /// The ops sent into `queue`.
    pub fn new(queue: Receiver<Op>) -> Self {
        Ops { queue }
    }
}

impl Input for Ops {
    fn read(&mut self, _prompt: &str, _printer: &mut Printer) -> Op {
        self.queue.recv().unwrap_or(Op::Quit)
    }
}
