//! A skill's folder: the files the model is told of when it loads the skill, and the reading
//! of one of them.
//!
//! The rules are the command folders': links are followed, every folder is read once, and a
//! project skill's links stay in the project (a link that leads out is neither listed nor
//! read). A user's own skill may link anywhere.

use std::collections::{HashSet, VecDeque};
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use crate::parse::{Command, Origin};
use crate::registry::Registry;
use crate::regular_file::{OpenError, open_regular};
use crate::walk::visible_entries;

/// How many files a listing names.
const MAX_LISTED: usize = 200;
/// How many entries a listing looks at.
const MAX_SCANNED: usize = 5000;
/// How deep below the skill's folder a listing looks.
const MAX_DEPTH: usize = 8;
/// The most of one file the skill tool hands the model.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The files of a skill's folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillFiles {
    /// Their paths relative to the folder, with `/` between parts, sorted within each
    /// folder, a folder's files before its subfolders'.
    pub files: Vec<String>,
    /// How many more files there are past the listing's limits (0 when it is whole).
    pub more: usize,
    /// Whether links that lead out of the workspace were left out.
    pub links_left_out: bool,
}

/// Why a file of a skill cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SkillFileError {
    /// The name is absolute, has `..`, or is empty.
    #[error(
        "`{0}` is not a path inside the skill's folder: give one of the files its listing names, such as `references/guide.md`"
    )]
    NotInside(String),
    /// No such file.
    #[error("the skill has no file `{0}`; its listing names the files it has")]
    Missing(String),
    /// It resolves outside the workspace (a project skill's link).
    #[error(
        "`{0}` leads outside the workspace, so it is not read: a project skill's files must live in the project"
    )]
    LeadsOut(String),
    /// A folder, a pipe, a device.
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    /// It holds a NUL byte.
    #[error("`{0}` is a binary file; run it or inspect it with bash instead")]
    Binary(String),
    /// Reading failed.
    #[error("cannot read `{file}`: {source}")]
    Io {
        /// The file as asked for.
        file: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// One file of a skill, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Its text; invalid UTF-8 is read as U+FFFD.
    pub text: String,
    /// Its whole size when only its first [`MAX_FILE_BYTES`] are in `text`.
    pub cut: Option<u64>,
}

impl Registry {
    /// The files of `skill`'s folder (nothing for a command). Never fails: what cannot be
    /// read is left out.
    pub fn skill_files(&self, skill: &Command) -> SkillFiles {
        let Some(info) = &skill.skill else {
            return SkillFiles::default();
        };
        let jail = self.jail_of(skill);
        list(&info.dir, jail.as_deref())
    }

    /// Reads the file `name` (relative to the folder, as the listing names it) of `skill`'s
    /// folder, under the listing's rules.
    pub fn read_skill_file(
        &self,
        skill: &Command,
        name: &str,
    ) -> Result<SkillFile, SkillFileError> {
        let Some(info) = &skill.skill else {
            return Err(SkillFileError::Missing(name.to_owned()));
        };
        let relative = Path::new(name);
        let inside = !name.is_empty()
            && !name.contains('\0')
            && relative
                .components()
                .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(SkillFileError::NotInside(name.to_owned()));
        }
        let path = info.dir.join(relative);
        let real = match path.canonicalize() {
            Ok(real) => real,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(SkillFileError::Missing(name.to_owned()));
            }
            Err(source) => {
                return Err(SkillFileError::Io {
                    file: name.to_owned(),
                    source,
                });
            }
        };
        if let Some(jail) = self.jail_of(skill)
            && !real.starts_with(&jail)
        {
            return Err(SkillFileError::LeadsOut(name.to_owned()));
        }
        let io = |source| SkillFileError::Io {
            file: name.to_owned(),
            source,
        };
        // Opened so that a named pipe cannot block (it would wait for a writer).
        let file = match open_regular(&real) {
            Ok(file) => file,
            Err(OpenError::NotRegular(_)) => {
                return Err(SkillFileError::NotAFile(name.to_owned()));
            }
            Err(OpenError::Io(source)) => return Err(io(source)),
        };
        let size = file.metadata().map_err(io)?.len();
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.contains(&0) {
            return Err(SkillFileError::Binary(name.to_owned()));
        }
        Ok(SkillFile {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            cut: (size > MAX_FILE_BYTES).then_some(size),
        })
    }

    /// Where a skill's links must lead: the workspace, for a project skill; anywhere for the
    /// user's own.
    fn jail_of(&self, skill: &Command) -> Option<PathBuf> {
        let root = &self.sources().workspace_root;
        match skill.origin {
            Origin::Project => Some(root.canonicalize().unwrap_or_else(|_| root.clone())),
            _ => None,
        }
    }
}

/// Lists the files under `dir` (see [`SkillFiles`]).
fn list(dir: &Path, jail: Option<&Path>) -> SkillFiles {
    let mut out = SkillFiles::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let Ok(top) = dir.canonicalize() else {
        return out;
    };
    seen.insert(top);
    let mut queue: VecDeque<(PathBuf, String, usize)> = VecDeque::new();
    queue.push_back((dir.to_path_buf(), String::new(), 0));
    let mut scanned = 0;
    while let Some((folder, prefix, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        // Past the scan's limit the listing just ends: it is a guide to the folder, not an
        // inventory.
        let mut cut_short = false;
        let names = visible_entries(entries, &mut scanned, MAX_SCANNED, &mut cut_short);
        let mut folders = Vec::new();
        for (name, file_type) in names {
            let path = folder.join(&name);
            let shown = format!("{prefix}{name}");
            let (is_dir, is_file) = if file_type.is_symlink() {
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                if jail.is_some_and(|jail| !target.starts_with(jail)) {
                    out.links_left_out = true;
                    continue;
                }
                (target.is_dir(), target.is_file())
            } else {
                (file_type.is_dir(), file_type.is_file())
            };
            if is_file {
                if out.files.len() < MAX_LISTED {
                    out.files.push(shown);
                } else {
                    out.more += 1;
                }
            } else if is_dir && depth < MAX_DEPTH {
                let Ok(real) = path.canonicalize() else {
                    continue;
                };
                if seen.insert(real) {
                    folders.push((path, format!("{shown}/"), depth + 1));
                }
            }
        }
        queue.extend(folders);
    }
    out
}
