//! Cutting a template into text, shell substitutions and file references.
//!
//! The template is cut once, from the text its author wrote; expansion then fills each piece
//! in, and never scans what a piece produced. Two syntaxes exist: Markdown command files
//! (`` !`cmd` `` and `@path`) and Gemini CLI's TOML prompts (`!{cmd}` and `@{path}`).

/// Which substitution syntax a template uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// `` !`cmd` `` on one line, `@path`, `$ARGUMENTS` and friends.
    Markdown,
    /// `!{cmd}` and `@{path}` with balanced braces, `{{args}}`.
    Gemini,
}

/// One piece of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Template text; arguments are substituted here.
    Text(&'a str),
    /// A shell substitution.
    Shell {
        /// The command text, between the delimiters.
        command: &'a str,
        /// The whole substitution as written.
        literal: &'a str,
    },
    /// A file reference.
    File {
        /// The path as written.
        path: &'a str,
        /// The whole reference as written.
        literal: &'a str,
        /// Whether the syntax leaves no doubt that a file is meant (`@{path}`), so that a
        /// missing one is always worth a note.
        explicit: bool,
    },
}

/// A substitution opened but never closed, at a byte offset of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unclosed {
    /// Where it opens.
    pub offset: usize,
    /// `!{` or `@{`.
    pub opener: &'static str,
}

/// Cuts `body` into pieces; also returns the substitutions that were never closed (which
/// stay as text).
pub(crate) fn pieces(body: &str, syntax: Syntax) -> (Vec<Piece<'_>>, Vec<Unclosed>) {
    match syntax {
        Syntax::Markdown => (markdown(body), Vec::new()),
        Syntax::Gemini => gemini(body),
    }
}

fn markdown(body: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_start = 0;
    let mut search = 0;
    while let Some(found) = body[search..].find("!`") {
        let start = search + found;
        let after = start + 2;
        let end = body[after..].find(['`', '\n']).map(|len| after + len);
        match end {
            Some(end) if body.as_bytes()[end] == b'`' && !body[after..end].trim().is_empty() => {
                file_refs(body, text_start, start, &mut out);
                out.push(Piece::Shell {
                    command: &body[after..end],
                    literal: &body[start..=end],
                });
                text_start = end + 1;
                search = end + 1;
            }
            // Not a substitution: look again after the `!`.
            _ => search = start + 1,
        }
    }
    file_refs(body, text_start, body.len(), &mut out);
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Characters that end an `@path` (besides whitespace).
fn ends_path(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '<'
                | '>'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | ','
                | ';'
                | '$'
                | '@'
        )
}

/// Pushes the text of `body[start..end]`, cut at its `@path` references. Whether an `@`
/// follows a word character is judged by the template text before it, so that the second
/// `@` of `@scope/pkg@latest` is no reference either.
fn file_refs<'a>(body: &'a str, start: usize, end: usize, out: &mut Vec<Piece<'a>>) {
    let mut text_start = start;
    let mut i = start;
    while i < end {
        let Some(found) = body[i..end].find('@') else {
            break;
        };
        let at = i + found;
        let prev = body[..at].chars().next_back();
        let after = &body[at + 1..end];
        let len = after.find(ends_path).unwrap_or(after.len());
        let path = after[..len].trim_end_matches(['.', ':', '!', '?']);
        if prev.is_some_and(is_word_char) || path.is_empty() {
            i = at + 1;
            continue;
        }
        if text_start < at {
            out.push(Piece::Text(&body[text_start..at]));
        }
        let stop = at + 1 + path.len();
        out.push(Piece::File {
            path,
            literal: &body[at..stop],
            explicit: false,
        });
        text_start = stop;
        i = stop;
    }
    if text_start < end {
        out.push(Piece::Text(&body[text_start..end]));
    }
}

/// The paths of the `@path` references in `text`, in order, by the rules of a Markdown
/// template's (see [`file_refs`]).
pub(crate) fn file_references(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    file_refs(text, 0, text.len(), &mut pieces);
    pieces
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::File { path, .. } => Some(path),
            _ => None,
        })
        .collect()
}

fn gemini(body: &str) -> (Vec<Piece<'_>>, Vec<Unclosed>) {
    let mut out = Vec::new();
    let mut unclosed = Vec::new();
    let mut text_start = 0;
    let mut search = 0;
    while let Some(found) = body[search..].find(['!', '@']) {
        let start = search + found;
        let opener = if body[start..].starts_with("!{") {
            "!{"
        } else if body[start..].starts_with("@{") {
            "@{"
        } else {
            search = start + 1;
            continue;
        };
        let inner_start = start + 2;
        let Some(close) = balanced_close(&body[inner_start..]) else {
            unclosed.push(Unclosed {
                offset: start,
                opener,
            });
            search = start + 1;
            continue;
        };
        let inner_end = inner_start + close;
        let inner = &body[inner_start..inner_end];
        if inner.trim().is_empty() {
            search = inner_end + 1;
            continue;
        }
        if text_start < start {
            out.push(Piece::Text(&body[text_start..start]));
        }
        let literal = &body[start..=inner_end];
        out.push(if opener == "!{" {
            Piece::Shell {
                command: inner,
                literal,
            }
        } else {
            Piece::File {
                path: inner.trim(),
                literal,
                explicit: true,
            }
        });
        text_start = inner_end + 1;
        search = inner_end + 1;
    }
    if text_start < body.len() {
        out.push(Piece::Text(&body[text_start..]));
    }
    (out, unclosed)
}

/// The byte offset of the `}` that closes an opening brace just before `text`.
fn balanced_close(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(body: &str, syntax: Syntax) -> Vec<String> {
        pieces(body, syntax)
            .0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => format!("T[{t}]"),
                Piece::Shell { command, .. } => format!("S[{command}]"),
                Piece::File { path, .. } => format!("F[{path}]"),
            })
            .collect()
    }

    #[test]
    fn markdown_pieces() {
        assert_eq!(
            show("a !`ls` b @x.md, c@d.e @s/p@latest !`\n`", Syntax::Markdown),
            [
                "T[a ]",
                "S[ls]",
                "T[ b ]",
                "F[x.md]",
                "T[, c@d.e ]",
                "F[s/p]",
                "T[@latest !`\n`]"
            ]
        );
        assert_eq!(show("!`a`@b", Syntax::Markdown), ["S[a]", "F[b]"]);
    }

    #[test]
    fn gemini_pieces() {
        let body = "x !{echo '{\"a\": 1}'} @{docs/a b.md} {{args}} !{} !{open";
        let (pieces, unclosed) = pieces(body, Syntax::Gemini);
        assert_eq!(pieces.len(), 5, "{pieces:?}");
        assert_eq!(
            pieces[1],
            Piece::Shell {
                command: "echo '{\"a\": 1}'",
                literal: "!{echo '{\"a\": 1}'}"
            }
        );
        assert!(matches!(
            pieces[3],
            Piece::File {
                path: "docs/a b.md",
                explicit: true,
                ..
            }
        ));
        assert_eq!(
            unclosed,
            [Unclosed {
                offset: body.find("!{open").unwrap_or_default(),
                opener: "!{"
            }]
        );
    }
}
