//! Where typed lines come from: the [`Input`] a front end gives the agent (the binary's line
//! editor or terminal UI), or plain [`Lines`] from a pipe or a script. Prompts for the next message and approval answers both come through
//! here, so a piped session can answer approvals on the lines that follow.

use std::io::BufRead;

use super::events::Printer;
use super::protocol::Read;

/// A source of typed lines.
pub trait Input {
    /// Shows `prompt` and reads one line.
    fn read(&mut self, prompt: &str, printer: &mut Printer) -> Read;

    /// Asks whether `tool` may run: `y`, `a`, or `n` with an optional reason. `always` says
    /// what `a` does (`always: bash(git status:*)`, or `once (…)` when no rule can be kept).
    fn approve(&mut self, tool: &str, always: &str, printer: &mut Printer) -> Read {
        let prompt =
            format!("allow {tool}? [y]es, [a] {always}, [n]o (n REASON tells the model why) ");
        self.read(&prompt, printer)
    }

    /// After an `a`, asks where the rules `rules` are kept: `s` this session (also Enter),
    /// `w` the workspace's config, `u` the user's.
    fn keep(&mut self, rules: &str, printer: &mut Printer) -> Read {
        let prompt = format!(
            "keep {rules} for: [s]ession only, [w]orkspace (.shiro/config.toml), [u]ser config (all your workspaces)? "
        );
        self.read(&prompt, printer)
    }

    /// Adds a line the user sent to the prompt history.
    fn remember(&mut self, _line: &str) {}
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
    fn read(&mut self, prompt: &str, printer: &mut Printer) -> Read {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => Read::Eof,
            Ok(_) => {
                let line = line.trim_end_matches(['\n', '\r']).to_owned();
                printer.info(&format!("{prompt}{line}"));
                Read::Line(line)
            }
        }
    }
}
