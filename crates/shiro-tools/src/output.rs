//! Output bounded for a model: the beginning and the end of it kept, the middle counted.

use std::fmt::Write as _;

/// How many bytes of output are kept: the first half and the last half of this.
pub const BASH_MAX_OUTPUT_BYTES: usize = 30_000;

/// The output kept: the first and the last `BASH_MAX_OUTPUT_BYTES / 2` bytes, and how much
/// fell in between.
#[derive(Debug, Default)]
pub(crate) struct BoundedOutput {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes dropped from the front of `tail`, and the newlines among them.
    dropped: usize,
    dropped_lines: usize,
    /// Whether the last byte dropped ended a line, so `tail` starts on a line of its own.
    dropped_at_line_end: bool,
}

const HALF: usize = BASH_MAX_OUTPUT_BYTES / 2;

impl BoundedOutput {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
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

    pub(crate) fn render(mut self) -> String {
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
