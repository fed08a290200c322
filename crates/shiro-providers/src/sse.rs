//! An incremental parser for server-sent events (the `text/event-stream` format), reduced
//! to what Chat Completions streams use: `data:` payloads separated by blank lines.
//!
//! Hand-written because it is small, and because it must accept bytes split anywhere (in the
//! middle of a line, of a `\r\n`, or of a UTF-8 character) and never panic on any input.

/// The longest event (or line) accepted; a server that sends more without a line break is
/// broken, and buffering forever would eat memory.
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Why a stream is not valid SSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooLong;

/// Feeds on body chunks and yields the `data` of each complete event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes of the line being received (no line break yet).
    line: Vec<u8>,
    /// The `data` lines of the event being received, joined by `\n`.
    data: String,
    /// Whether the event being received had a `data` field (which may be empty).
    has_data: bool,
}

impl SseParser {
    /// Takes the next chunk of the body and returns the payloads of the events it completed.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, TooLong> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..newline]);
            rest = &rest[newline + 1..];
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            self.take_line(line, &mut events)?;
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > MAX_EVENT_BYTES {
            return Err(TooLong);
        }
        Ok(events)
    }

    /// Ends the stream: returns the last event if the body ended without its blank line
    /// (some servers end with `data: [DONE]\n` and nothing after it).
    pub(crate) fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.line);
        let mut events = Vec::new();
        // A line without its break still counts; the length was checked when it arrived.
        let _ = self.take_line(line.strip_suffix(b"\r").unwrap_or(&line), &mut events);
        let _ = self.take_line(b"", &mut events);
        events.pop()
    }

    fn take_line(&mut self, line: &[u8], events: &mut Vec<String>) -> Result<(), TooLong> {
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                events.push(std::mem::take(&mut self.data));
            }
            return Ok(());
        }
        if line.starts_with(b":") {
            // A comment; servers send them as keep-alives.
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // `event`, `id` and `retry` carry nothing a Chat Completions client needs: an error
        // event's details are in its data, which is read like any other.
        if field == b"data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.has_data = true;
            self.data.push_str(&String::from_utf8_lossy(value));
            if self.data.len() > MAX_EVENT_BYTES {
                return Err(TooLong);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes and returns every event, the final one too.
    fn parse_in_steps(input: &[u8], step: usize) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for piece in input.chunks(step) {
            events.extend(
                parser
                    .push(piece)
                    .expect("no line in these inputs is too long"),
            );
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_survive_any_split() {
        let input = ": keep-alive\r\n\r\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata:no-space\n\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
        let expected = vec!["{\"a\":\"é\"}", "no-space", "one\ntwo", "[DONE]"];
        for step in 1..input.len() {
            assert_eq!(
                parse_in_steps(input.as_bytes(), step),
                expected,
                "step {step}"
            );
        }
    }

    #[test]
    fn a_final_event_without_blank_line_counts() {
        assert_eq!(
            parse_in_steps(b"data: a\n\ndata: [DONE]", 100),
            vec!["a", "[DONE]"]
        );
        assert_eq!(
            parse_in_steps(b"data: a\n\ndata: [DONE]\n", 100),
            vec!["a", "[DONE]"]
        );
    }

    #[test]
    fn garbage_yields_no_events_and_no_panic() {
        assert!(parse_in_steps(b"\xff\xfe\x00garbage\n:\n\n\n::\r\r\n", 3).is_empty());
        assert_eq!(parse_in_steps(b"data\n\n", 3), vec![""]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut parser = SseParser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut result = Ok(Vec::new());
        for _ in 0..17 {
            result = parser.push(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(TooLong));
    }
}
