//! Which workspaces the user trusts to run their commands' shell substitutions.
//!
//! The list lives in `trusted-workspaces` in the user's config directory, one canonical
//! path a line, so a cloned repository can never trust itself.

use std::path::Path;

use anyhow::{Context, Result};

const FILE: &str = "trusted-workspaces";

/// Whether `root` is on the user's trusted list.
pub fn is_trusted(user_dir: Option<&Path>, root: &Path) -> bool {
    let (Some(dir), Ok(root)) = (user_dir, root.canonicalize()) else {
        return false;
    };
    let Ok(text) = std::fs::read_to_string(dir.join(FILE)) else {
        return false;
    };
    text.lines().any(|line| Path::new(line) == root)
}

/// Adds `root` to the user's trusted list.
pub fn trust(user_dir: Option<&Path>, root: &Path) -> Result<()> {
    let dir = user_dir.context("no user config directory (set HOME or SHIRO_CONFIG_DIR)")?;
    if is_trusted(Some(dir), root) {
        return Ok(());
    }
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", root.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(FILE);
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&root.to_string_lossy());
    text.push('\n');
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusts_only_listed_workspaces() {
        let user = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        assert!(!is_trusted(Some(user.path()), ws.path()));
        trust(Some(user.path()), ws.path()).unwrap();
        trust(Some(user.path()), ws.path()).unwrap();
        assert!(is_trusted(Some(user.path()), ws.path()));
        assert!(!is_trusted(Some(user.path()), other.path()));
        assert!(!is_trusted(None, ws.path()));
        let text = std::fs::read_to_string(user.path().join(FILE)).unwrap();
        assert_eq!(
            text.lines().count(),
            1,
            "trusting twice added a second line"
        );
    }
}
