//! Text handling shared by the editing tools: line endings, a UTF-8 BOM, binary detection.
//!
//! A file is decoded into a [`TextFile`] whose `body` uses `\n` line endings when the file
//! used CRLF consistently, so a model's `\n` strings match it; encoding puts the file's own
//! line endings and BOM back. A file with mixed endings is left exactly as it is.

/// The line endings a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    /// `\n`, or no line break at all, or a mix (kept byte for byte).
    Lf,
    /// `\r\n` on every line.
    CrLf,
}

/// A text file split into its body and the details that must survive an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    /// Whether the file began with a UTF-8 byte order mark.
    pub bom: bool,
    /// The file's line endings; `body` uses `\n` either way.
    pub line_ending: LineEnding,
    /// The text without BOM, with `\n` line endings when `line_ending` is CRLF.
    pub body: String,
}

/// Why a file cannot be edited as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// The file holds NUL bytes, so it is binary.
    #[error("is a binary file (it contains NUL bytes); text edits are refused")]
    Binary,
    /// The file is not valid UTF-8.
    #[error("is not valid UTF-8 (first bad byte at offset {0}); text edits are refused")]
    NotUtf8(usize),
}

const BOM: &str = "\u{feff}";

impl TextFile {
    /// Decodes file bytes for editing.
    ///
    /// ```
    /// use shiro_tools::text::{LineEnding, TextFile};
    ///
    /// let file = TextFile::decode(b"\xef\xbb\xbfa\r\nb\r\n").unwrap();
    /// assert_eq!((file.bom, file.line_ending, file.body.as_str()), (true, LineEnding::CrLf, "a\nb\n"));
    /// assert_eq!(file.encode(), b"\xef\xbb\xbfa\r\nb\r\n");
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<Self, TextError> {
        if bytes.contains(&0) {
            return Err(TextError::Binary);
        }
        let text =
            std::str::from_utf8(bytes).map_err(|err| TextError::NotUtf8(err.valid_up_to()))?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let line_ending = detect_line_ending(text);
        let body = match line_ending {
            LineEnding::CrLf => text.replace("\r\n", "\n"),
            LineEnding::Lf => text.to_owned(),
        };
        Ok(Self {
            bom,
            line_ending,
            body,
        })
    }

    /// A new file with `\n` endings and no BOM.
    pub fn new(body: String) -> Self {
        Self {
            bom: false,
            line_ending: LineEnding::Lf,
            body,
        }
    }

    /// The bytes to write: the BOM and line endings the file had.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = String::with_capacity(self.body.len() + 8);
        if self.bom {
            out.push_str(BOM);
        }
        match self.line_ending {
            LineEnding::CrLf => out.push_str(&self.body.replace('\n', "\r\n")),
            LineEnding::Lf => out.push_str(&self.body),
        }
        out.into_bytes()
    }

    /// Converts a string the model sent into the body's convention (`\r\n` to `\n` when the
    /// body was normalised from CRLF).
    pub fn normalize<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        match self.line_ending {
            LineEnding::CrLf if text.contains("\r\n") => text.replace("\r\n", "\n").into(),
            _ => text.into(),
        }
    }
}

/// CRLF only when every `\n` is preceded by `\r` (and there is at least one).
fn detect_line_ending(text: &str) -> LineEnding {
    let newlines = text.matches('\n').count();
    if newlines > 0 && text.matches("\r\n").count() == newlines {
        LineEnding::CrLf
    } else {
        LineEnding::Lf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_bytes_exactly() {
        for bytes in [
            &b""[..],
            b"no newline",
            b"a\nb\n",
            b"a\r\nb\r\n",
            b"a\r\nb",
            b"mixed\r\nlines\n",
            b"\xef\xbb\xbfbom\n",
            b"lone\rcr\n",
        ] {
            let file = TextFile::decode(bytes).unwrap();
            assert_eq!(file.encode(), bytes, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn refuses_binary_and_invalid_utf8() {
        assert_eq!(TextFile::decode(b"a\0b"), Err(TextError::Binary));
        assert_eq!(TextFile::decode(b"ab\xff"), Err(TextError::NotUtf8(2)));
    }

    #[test]
    fn normalises_model_strings_only_for_crlf_files() {
        let crlf = TextFile::decode(b"a\r\n").unwrap();
        assert_eq!(crlf.normalize("x\r\ny"), "x\ny");
        let mixed = TextFile::decode(b"a\r\nb\n").unwrap();
        assert_eq!(mixed.normalize("x\r\ny"), "x\r\ny");
    }
}
