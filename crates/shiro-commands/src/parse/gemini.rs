//! Gemini CLI's command files: `commands/<name>.toml`, with a `prompt` and a `description`.

use std::path::Path;

use super::{Command, Ecosystem, Origin, Parsed, Severity, named_file, strip_bom};
use crate::template::{self, Syntax};

/// The 1-based line and column of byte `offset` in `text`.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses one Gemini CLI command file (`commands/<name>.toml`): `prompt` (required) and
/// `description`. A file that is not valid TOML, or has no `prompt`, is skipped with an error.
pub fn parse_gemini_file(file: &Path, name: &str, text: &str, origin: Origin) -> Parsed {
    let (mut diags, name) = match named_file(file, name) {
        Ok(started) => started,
        Err(parsed) => return parsed,
    };
    let bom = text.len() - strip_bom(text).len();
    let text = strip_bom(text);
    let table = match toml::de::DeTable::parse(text) {
        Ok(table) => table,
        Err(err) => {
            let (line, column) = err.span().map_or((1, 1), |span| position(text, span.start));
            let message = err.message().trim().trim_end_matches('.').to_owned();
            diags.push(
                line,
                column + usize::from(line == 1 && bom > 0),
                Severity::Error,
                format!("invalid TOML: {message}, file skipped"),
            );
            return Parsed {
                commands: Vec::new(),
                diagnostics: diags.out,
            };
        }
    };
    let mut prompt = None;
    let mut description = None;
    for (key, value) in table.get_ref() {
        let (line, column) = position(text, key.span().start);
        match key.get_ref().as_ref() {
            "prompt" => match value.get_ref().as_str() {
                Some(text_value) => prompt = Some((text_value.to_owned(), value.span().start)),
                None => diags.push(
                    line,
                    column,
                    Severity::Error,
                    format!(
                        "`prompt` must be a string, not {}",
                        value.get_ref().type_str()
                    ),
                ),
            },
            "description" => match value.get_ref().as_str() {
                Some(d) if !d.trim().is_empty() => description = Some(d.trim().to_owned()),
                Some(_) => {}
                None => diags.push(
                    line,
                    column,
                    Severity::Warning,
                    format!(
                        "`description` must be a string, not {}, ignored",
                        value.get_ref().type_str()
                    ),
                ),
            },
            other => diags.push(
                line,
                column,
                Severity::Warning,
                format!(
                    "unknown key `{other}` (Gemini CLI commands have `prompt` and `description`), ignored"
                ),
            ),
        }
    }
    let Some((prompt, prompt_at)) = prompt else {
        if !diags.out.iter().any(|d| d.severity == Severity::Error) {
            diags.push(
                1,
                1,
                Severity::Error,
                "missing `prompt`: a Gemini CLI command needs one, file skipped".to_owned(),
            );
        }
        return Parsed {
            commands: Vec::new(),
            diagnostics: diags.out,
        };
    };
    // Positions inside the prompt are counted from the line its string starts on; a `"""`
    // string's first newline is no part of its text.
    let (prompt_line, _) = position(text, prompt_at);
    let skipped_newline = usize::from(
        text[prompt_at..].starts_with("\"\"\"\n") || text[prompt_at..].starts_with("'''\n"),
    );
    let (_, unclosed) = template::pieces(&prompt, Syntax::Gemini);
    for open in unclosed {
        let (line, column) = position(&prompt, open.offset);
        diags.push(
            prompt_line + skipped_newline + line - 1,
            column,
            Severity::Warning,
            format!(
                "`{}` is never closed (its braces must balance), so it stays as text",
                open.opener
            ),
        );
    }
    if prompt.trim().is_empty() {
        diags.push(
            1,
            1,
            Severity::Warning,
            format!("command /{name} has an empty prompt"),
        );
    }
    // Trailing blank lines (a `"""` string ends with one) say nothing.
    let mut command = Command::new(&name, prompt.trim_end(), origin, Ecosystem::Gemini);
    command.description = description;
    command.file = file.to_path_buf();
    diags.out.sort_by_key(|d| (d.line, d.column));
    Parsed {
        commands: vec![command],
        diagnostics: diags.out,
    }
}
