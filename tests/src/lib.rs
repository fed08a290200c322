//! Cross-crate property tests and end-to-end tests of the `shiro` binary.
//!
//! This crate holds no library code of its own beyond [`state_beside`]: everything lives
//! under `tests/tests/`. It must never be depended on by the shipped crates.

use std::path::Path;

use shiro_undo::StateDir;

/// Where the tests and benchmarks keep the state of the workspace `ws`: `<ws>.state`, beside
/// it (so a workspace made as a subdirectory of a temporary directory takes its state along
/// when it goes), never inside it.
pub fn state_beside(ws: &Path) -> StateDir {
    let name = ws
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    StateDir::at(ws.with_file_name(format!("{name}.state")), ws)
}
