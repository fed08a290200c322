//! Reading the places commands come from: a `commands.md`, a folder of command files, a
//! folder of skills. Each file is read whole, up to a limit, and only if it is a regular file;
//! in a project, the place and every link in it must resolve inside the workspace.

use std::path::{Path, PathBuf};

use crate::parse::{
    Diagnostic, Ecosystem, Origin, Parsed, SKILL_FILE, Severity, parse_command_file,
    parse_commands_md, parse_gemini_file, parse_skill_file,
};
use crate::regular_file::{OpenError, not_regular, open_regular};
use crate::walk::{self, Seen};

/// What a [`Location`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationKind {
    /// A `commands.md` file of `## name` sections.
    CommandsMd,
    /// A folder of command files, one command per file.
    Folder,
    /// A folder of skills: folders holding a `SKILL.md`, at any depth.
    Skills,
}

impl LocationKind {
    /// Whether it is a folder (of command files or of skills).
    pub(crate) fn is_folder(self) -> bool {
        matches!(self, LocationKind::Folder | LocationKind::Skills)
    }
}

/// One place commands are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Project or user.
    pub origin: Origin,
    /// Whose format the files there are in.
    pub ecosystem: Ecosystem,
    /// The file or folder.
    pub path: PathBuf,
    /// File or folder.
    pub kind: LocationKind,
}

/// Command files larger than this are not read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads a command file's text; `None` (with a diagnostic) when it cannot be used.
fn read_text(path: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    read_text_at(path, path, diagnostics)
}

/// Reads the command file `path` from `real` (where it resolves to); `None` (with a
/// diagnostic at `path`) when it cannot be used.
fn read_text_at(path: &Path, real: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    use std::io::Read as _;
    // Only regular files, opened so that a named pipe cannot block the load.
    let file = match open_regular(real) {
        Ok(file) => file,
        Err(OpenError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(OpenError::Io(err)) => {
            diagnostics.push(Diagnostic::whole_file(
                path,
                Severity::Error,
                format!("cannot read: {err}"),
            ));
            return None;
        }
        Err(OpenError::NotRegular(what)) => {
            diagnostics.push(not_regular(path, what));
            return None;
        }
    };
    let mut bytes = Vec::new();
    if let Err(err) = file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes) {
        diagnostics.push(Diagnostic::whole_file(
            path,
            Severity::Error,
            format!("cannot read: {err}"),
        ));
        return None;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        diagnostics.push(Diagnostic::whole_file(
            path,
            Severity::Error,
            format!(
                "larger than {} KiB, skipped: a command file is a prompt",
                MAX_FILE_BYTES / 1024
            ),
        ));
        return None;
    }
    match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(err) => {
            // Where the first invalid byte is: the line, and the characters before it.
            let valid = &err.as_bytes()[..err.utf8_error().valid_up_to()];
            let valid = std::str::from_utf8(valid).unwrap_or_default();
            let line_start = valid.rfind('\n').map_or(0, |at| at + 1);
            diagnostics.push(Diagnostic {
                file: path.to_path_buf(),
                line: valid.matches('\n').count() + 1,
                column: valid[line_start..].chars().count() + 1,
                severity: Severity::Warning,
                message: "not valid UTF-8: the invalid bytes are read as \u{fffd}".to_owned(),
            });
            Some(String::from_utf8_lossy(err.as_bytes()).into_owned())
        }
    }
}

/// Reads one location into `parsed`. With `jail`, the location and every link in it must
/// resolve inside it.
pub(crate) fn load_location(
    location: &Location,
    jail: Option<&Path>,
    seen: &mut Seen,
    parsed: &mut Parsed,
) {
    let Location {
        origin,
        ecosystem,
        path,
        kind,
    } = location;
    match kind {
        LocationKind::CommandsMd => {
            let real = match path.canonicalize() {
                Ok(real) => real,
                // A broken link is a warning, as in a command folder.
                Err(err) if path.symlink_metadata().is_ok_and(|m| m.is_symlink()) => {
                    parsed.diagnostics.push(Diagnostic::whole_file(
                        path,
                        Severity::Warning,
                        format!("broken link, skipped: {err}"),
                    ));
                    return;
                }
                // A missing file (or a `.shiro` that is a file) is no source.
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    return;
                }
                Err(err) => {
                    parsed.diagnostics.push(Diagnostic::whole_file(
                        path,
                        Severity::Error,
                        format!("cannot read: {err}"),
                    ));
                    return;
                }
            };
            // The rule of the command folders: a project's file, and every folder on the
            // way to it, must resolve inside the workspace.
            if let Some(jail) = jail
                && !real.starts_with(jail)
            {
                parsed.diagnostics.push(Diagnostic::whole_file(
                    path,
                    Severity::Error,
                    format!(
                        "leads outside the workspace (to {}), so it is not read: a project's commands.md must live in the project",
                        real.display()
                    ),
                ));
                return;
            }
            if !seen.file(real.clone()) {
                return;
            }
            // The resolved path is read, so that what was checked is what is read.
            if let Some(text) = read_text_at(path, &real, &mut parsed.diagnostics) {
                parsed.merge(parse_commands_md(path, &text, *origin));
            }
        }
        LocationKind::Skills => {
            let found = walk::skills(path, jail, seen, &mut parsed.diagnostics);
            for skill in found {
                let file = skill.path.join(SKILL_FILE);
                let Some(text) = read_text(&file, &mut parsed.diagnostics) else {
                    continue;
                };
                parsed.merge(parse_skill_file(
                    &file,
                    &skill.name,
                    &text,
                    *origin,
                    *ecosystem,
                ));
            }
        }
        LocationKind::Folder => {
            let extension = match ecosystem {
                Ecosystem::Gemini => "toml",
                _ => "md",
            };
            let found = walk::walk(path, extension, jail, seen, &mut parsed.diagnostics);
            for file in found {
                let Some(text) = read_text(&file.path, &mut parsed.diagnostics) else {
                    continue;
                };
                parsed.merge(match ecosystem {
                    Ecosystem::Gemini => parse_gemini_file(&file.path, &file.name, &text, *origin),
                    _ => parse_command_file(&file.path, &file.name, &text, *origin, *ecosystem),
                });
            }
        }
    }
}

/// Reads one shiro source directory (`<workspace>/.shiro` or the user config directory): its
/// `commands.md`, then every `commands/**/*.md` in sorted order. Missing files are not an
/// error; unreadable ones are diagnostics.
pub fn load_source(dir: &Path, origin: Origin) -> Parsed {
    let mut parsed = Parsed::default();
    let mut seen = Seen::default();
    for (path, kind) in [
        (dir.join("commands.md"), LocationKind::CommandsMd),
        (dir.join("commands"), LocationKind::Folder),
    ] {
        let location = Location {
            origin,
            ecosystem: Ecosystem::Shiro,
            path,
            kind,
        };
        load_location(&location, None, &mut seen, &mut parsed);
    }
    parsed
}
