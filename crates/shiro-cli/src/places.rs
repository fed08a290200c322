//! Where the user's files are, from the environment: the config directory, the state home
//! and the home directory. Only the binary reads the environment; the libraries are given
//! these paths.

use std::path::PathBuf;

/// The user's config directory: `$SHIRO_CONFIG_DIR`, else `$XDG_CONFIG_HOME/shiro`, else
/// `~/.config/shiro`.
pub fn user_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SHIRO_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("shiro"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config").join("shiro"))
}

/// Where shiro keeps the state of every workspace (undo histories, sessions, bash layers):
/// `$SHIRO_STATE_DIR`, else `$XDG_STATE_HOME/shiro`, else `~/.local/state/shiro`. Relative
/// paths are ignored, as the XDG specification asks.
pub fn state_home() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    };
    absolute("SHIRO_STATE_DIR")
        .or_else(|| absolute("XDG_STATE_HOME").map(|dir| dir.join("shiro")))
        .or_else(|| {
            home_dir()
                .filter(|home| home.is_absolute())
                .map(|home| home.join(".local").join("state").join("shiro"))
        })
}

/// The user's home directory: `$HOME`, when set.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// The user's config home: `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home_dir().map(|home| home.join(".config")))
}
