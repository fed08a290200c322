//! A background command's output: what is kept of it between two reads (its start and its
//! end), and what a read shows the model.

use std::collections::VecDeque;

/// How much of a command's output is kept from its start.
const KEEP_HEAD: usize = 64 * 1024;
/// How much of a command's output is kept from its end.
const KEEP_TAIL: usize = 1024 * 1024;

/// A command's output: the first [`KEEP_HEAD`] bytes and the last [`KEEP_TAIL`], and how far
/// it has been read.
#[derive(Debug, Default)]
pub(super) struct Buffer {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    read: u64,
    /// Whether the last byte dropped from the front of `tail` ended a line, so that `tail`
    /// starts a line of its own.
    tail_starts_line: bool,
}

/// What a read takes from a [`Buffer`]: the bytes not read yet, with those that were not
/// kept counted where they were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unread {
    /// The unread bytes before those not kept (the start's), or all of them.
    pub before: Vec<u8>,
    /// How many bytes between `before` and `after` were not kept.
    pub not_kept: u64,
    /// The unread bytes after those not kept (the end's).
    pub after: Vec<u8>,
    /// Whether `after` starts a line of its own (the last byte not kept ended one).
    pub after_starts_line: bool,
}

impl Buffer {
    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < KEEP_HEAD {
            let take = bytes.len().min(KEEP_HEAD - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(KEEP_TAIL);
        if over > 0 {
            self.tail_starts_line = self.tail[over - 1] == b'\n';
        }
        self.tail.drain(..over);
    }

    /// How many bytes the command has written.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// The bytes not read yet; marks them read.
    pub(super) fn unread(&mut self) -> Unread {
        let mut from = self.read;
        let mut before = Vec::new();
        let head = self.head.len() as u64;
        if from < head {
            before.extend_from_slice(&self.head[from as usize..]);
            from = head;
        }
        let tail_start = self.total - self.tail.len() as u64;
        let not_kept = tail_start.saturating_sub(from);
        from = from.max(tail_start);
        let skip = usize::try_from(from - tail_start).unwrap_or(usize::MAX);
        let after = self.tail.iter().skip(skip).copied().collect();
        self.read = self.total;
        Unread {
            before,
            not_kept,
            after,
            after_starts_line: self.tail_starts_line,
        }
    }

    /// The end of the output, at most `max` bytes from a line start, without marking
    /// anything read.
    pub(super) fn end(&self, max: usize) -> String {
        let mut bytes: Vec<u8> = if self.tail.is_empty() {
            self.head.clone()
        } else {
            let start = self.tail.len().saturating_sub(max);
            self.tail.range(start..).copied().collect()
        };
        if bytes.len() > max {
            bytes.drain(..bytes.len() - max);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match text.find('\n') {
            Some(at) if bytes.len() == max => text[at + 1..].to_owned(),
            _ => text,
        }
    }

    /// The last line with something on it.
    pub(super) fn last_line(&self) -> Option<String> {
        let end: Vec<u8> = if self.tail.is_empty() {
            self.head.clone()
        } else {
            let start = self.tail.len().saturating_sub(4096);
            self.tail.range(start..).copied().collect()
        };
        String::from_utf8_lossy(&end)
            .lines()
            .rev()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_owned)
    }
}

/// How many bytes of output one read shows at most, as for a foreground command.
const SHOWN: usize = crate::output::BASH_MAX_OUTPUT_BYTES;

/// What a read shows the model: `unread`, its lines kept only where `filter` matches them,
/// bounded like a foreground command's output (its start and its end, cut at line breaks),
/// with one note where anything was left out: the bytes that were not kept between reads,
/// and what is over [`SHOWN`], are left out at the same place.
pub(super) fn render(unread: &Unread, filter: Option<&regex::Regex>) -> String {
    let (mut before, mut after) = (unread.before.as_slice(), unread.after.as_slice());
    let gap = unread.not_kept > 0;
    // The lines the gap cuts are not shown in part; their parts count as left out.
    let mut cut = Vec::new();
    if gap {
        if let Some(end) = before.iter().rposition(|&b| b == b'\n') {
            cut.extend_from_slice(&before[end + 1..]);
            before = &before[..=end];
        }
        if !unread.after_starts_line
            && let Some(start) = after.iter().position(|&b| b == b'\n')
        {
            cut.extend_from_slice(&after[..=start]);
            after = &after[start + 1..];
        }
    }
    // Filtered apart only when the gap parts them: a line is never filtered in pieces.
    let (before, after) = if gap {
        (filtered(before, filter), filtered(after, filter))
    } else {
        (filtered(&[before, after].concat(), filter), Vec::new())
    };
    let at = before.len();
    let bytes = [before, after].concat();
    let len = bytes.len();
    // What is shown: `bytes[..head]` and `bytes[tail..]`; the gap, if any, lies between.
    let (mut head, mut tail) = if gap {
        let head = at.min(SHOWN / 2);
        (head, at.max(len.saturating_sub(SHOWN - head)))
    } else if len > SHOWN {
        (SHOWN / 2, len - SHOWN / 2)
    } else {
        (len, len)
    };
    if head < tail {
        if let Some(end) = bytes[..head].iter().rposition(|&b| b == b'\n') {
            head = end + 1;
        }
        // Where the gap parts `bytes`, whether `tail` starts a line was settled above.
        if (!gap || tail > at)
            && bytes[tail - 1] != b'\n'
            && let Some(start) = bytes[tail..].iter().position(|&b| b == b'\n')
        {
            tail += start + 1;
        }
    }
    let mut out = String::from_utf8_lossy(&bytes[..head]).into_owned();
    let over = &bytes[head..tail];
    if gap || !over.is_empty() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&note(unread.not_kept, &cut, over));
        out.push('\n');
    }
    out.push_str(&String::from_utf8_lossy(&bytes[tail..]));
    if out.is_empty() {
        out.push_str("(no output)\n");
    } else if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// `bytes`, its lines kept only where `filter` matches them.
fn filtered(bytes: &[u8], filter: Option<&regex::Regex>) -> Vec<u8> {
    let Some(filter) = filter else {
        return bytes.to_vec();
    };
    String::from_utf8_lossy(bytes)
        .split_inclusive('\n')
        .filter(|line| filter.is_match(line.trim_end_matches('\n')))
        .flat_map(|line| line.as_bytes().to_vec())
        .collect()
}

/// The note where a read left output out: `not_kept` bytes that were not kept between
/// reads, the parts `cut` of the lines they cut, and the bytes `over` what a read shows.
/// Its advice is what the model can do while the command runs: redirecting the output to
/// a file is too late for a command already running.
fn note(not_kept: u64, cut: &[u8], over: &[u8]) -> String {
    let lines = |bytes: &[u8]| bytes.iter().filter(|&&b| b == b'\n').count();
    let kept_back = (cut.len() + over.len()) as u64;
    let (total, known) = (not_kept + kept_back, lines(cut) + lines(over));
    if not_kept == 0 {
        return format!(
            "[… {total} bytes ({known} lines) left out here, more than the {SHOWN} bytes one read \
             shows; call bash_output more often to read the output in smaller pieces, or pass \
             filter to keep only the lines you need …]"
        );
    }
    let over = if over.is_empty() {
        String::new()
    } else {
        format!(", and one read shows at most {SHOWN} bytes")
    };
    format!(
        "[… {total} bytes left out here: the command printed more between two reads than \
         shiro keeps (the first {} KiB of its output and the last {} MiB){over}; call \
         bash_output more often, so that less is left out, and pass filter to keep only the \
         lines you need …]",
        KEEP_HEAD / 1024,
        KEEP_TAIL / (1024 * 1024)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `lines` numbered lines, `line 0000001` on, 13 bytes each.
    fn numbered(from: usize, lines: usize) -> Vec<u8> {
        (from..from + lines)
            .flat_map(|n| format!("line {n:07}\n").into_bytes())
            .collect()
    }

    /// What a reviewer reads of a long read: its first and last two lines and those around
    /// each note, with how many lines lie between, and how many bytes it shows.
    fn excerpt(text: &str) -> String {
        let lines: Vec<&str> = text.lines().collect();
        let last = lines.len().saturating_sub(1);
        let mut keep = std::collections::BTreeSet::from([0, 1, last.saturating_sub(1), last]);
        for (at, _) in lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.starts_with("[…"))
        {
            keep.extend([at.saturating_sub(1), at, (at + 1).min(last)]);
        }
        let mut out = String::new();
        let mut next = 0;
        for at in keep {
            if at > next {
                out.push_str(&format!("({} lines)\n", at - next));
            }
            out.push_str(lines[at]);
            out.push('\n');
            next = at + 1;
        }
        out.push_str(&format!("-- {} bytes", text.len()));
        out
    }

    /// The first read of a command that printed past both ends of what is kept: its
    /// start, then one note where the output was left out, then its end. The note's advice
    /// is something the model can do while the command runs: read sooner, or filter.
    #[test]
    fn a_read_past_what_was_kept_notes_the_gap_where_it_is() {
        let mut buffer = Buffer::default();
        let lines = (KEEP_HEAD + KEEP_TAIL) / 13 + 1_000;
        buffer.push(&numbered(1, lines));
        let text = render(&buffer.unread(), None);
        assert!(text.starts_with("line 0000001\n"), "{}", &text[..200]);
        assert_eq!(text.matches("[…").count(), 1, "{}", excerpt(&text));
        assert!(!text.contains("redirect"), "{}", excerpt(&text));
        insta::assert_snapshot!(excerpt(&text), @r"
        line 0000001
        line 0000002
        (1150 lines)
        line 0001153
        [… 1097122 bytes left out here: the command printed more between two reads than shiro keeps (the first 64 KiB of its output and the last 1 MiB), and one read shows at most 30000 bytes; call bash_output more often, so that less is left out, and pass filter to keep only the lines you need …]
        line 0085548
        (1150 lines)
        line 0086699
        line 0086700
        -- 30273 bytes
        ");

        // The next read begins where the gap is: the note comes first.
        buffer.push(&numbered(lines + 1, KEEP_TAIL / 13 + 1_000));
        let text = render(&buffer.unread(), None);
        insta::assert_snapshot!(excerpt(&text), @r"
        [… 1031576 bytes left out here: the command printed more between two reads than shiro keeps (the first 64 KiB of its output and the last 1 MiB), and one read shows at most 30000 bytes; call bash_output more often, so that less is left out, and pass filter to keep only the lines you need …]
        line 0166053
        (2304 lines)
        line 0168358
        line 0168359
        -- 30286 bytes
        ");

        // A filter keeps the matching lines on either side of the gap; what was not kept
        // was never filtered.
        let mut buffer = Buffer::default();
        buffer.push(&numbered(1, lines));
        let filter = regex::Regex::new("^line (0000005|0005500|0086700)$").unwrap();
        let text = render(&buffer.unread(), Some(&filter));
        insta::assert_snapshot!(text, @r"
        line 0000005
        [… 13000 bytes left out here: the command printed more between two reads than shiro keeps (the first 64 KiB of its output and the last 1 MiB); call bash_output more often, so that less is left out, and pass filter to keep only the lines you need …]
        line 0086700
        ");
    }

    /// A read longer than one read shows, with nothing lost between reads: its start and
    /// its end, and the note between them.
    #[test]
    fn a_long_read_shows_its_start_and_end_with_the_note_between() {
        let mut buffer = Buffer::default();
        buffer.push(b"one\ntwo\n");
        assert_eq!(render(&buffer.unread(), None), "one\ntwo\n");
        assert_eq!(render(&buffer.unread(), None), "(no output)\n");
        buffer.push(&numbered(1, 10_000));
        let text = render(&buffer.unread(), None);
        assert!(!text.contains("redirect"), "{}", excerpt(&text));
        insta::assert_snapshot!(excerpt(&text), @r"
        line 0000001
        line 0000002
        (1150 lines)
        line 0001153
        [… 100022 bytes (7694 lines) left out here, more than the 30000 bytes one read shows; call bash_output more often to read the output in smaller pieces, or pass filter to keep only the lines you need …]
        line 0008848
        (1150 lines)
        line 0009999
        line 0010000
        -- 30184 bytes
        ");
    }

    /// Output with no line breaks at all, or nothing but line breaks, past every bound: the
    /// read still shows at most what one read may (cut where it must be, with no line break
    /// to cut at), with its one note, and a filter that matches nothing leaves the note.
    #[test]
    fn output_without_lines_is_bounded_all_the_same() {
        let nothing = regex::Regex::new("^nothing$").unwrap();
        for byte in [b'x', b'\n', 0xff] {
            let mut buffer = Buffer::default();
            buffer.push(&vec![byte; KEEP_HEAD + KEEP_TAIL + 5]);
            let unread = buffer.unread();
            let text = render(&unread, None);
            assert_eq!(text.matches("[…").count(), 1, "{}", excerpt(&text));
            let shown = text.lines().filter(|line| !line.starts_with("[…"));
            assert!(shown.map(str::len).sum::<usize>() <= 3 * SHOWN, "{byte}");
            let text = render(&unread, Some(&nothing));
            assert!(text.starts_with("[… ") && text.ends_with(" …]\n"), "{text}");
        }
    }

    #[test]
    fn reads_return_what_came_since_the_last_and_say_what_was_not_kept() {
        let mut buffer = Buffer::default();
        let unread = |before: &[u8], not_kept, after: &[u8]| Unread {
            before: before.to_vec(),
            not_kept,
            after: after.to_vec(),
            after_starts_line: false,
        };
        buffer.push(b"one\n");
        assert_eq!(buffer.unread(), unread(b"one\n", 0, b""));
        assert_eq!(buffer.unread(), unread(b"", 0, b""));
        buffer.push(b"two\n");
        assert_eq!(buffer.unread(), unread(b"two\n", 0, b""));
        // More than both ends hold between two reads: the middle is counted, not kept.
        let big = vec![b'x'; KEEP_HEAD + KEEP_TAIL + 10];
        buffer.push(&big);
        let read = buffer.unread();
        let kept = read.before.len() + read.after.len();
        assert_eq!(kept as u64 + read.not_kept, big.len() as u64);
        assert_eq!(read.not_kept, 18);
        assert_eq!(buffer.last_line().map(|line| line.len()), Some(4096));
    }
}
