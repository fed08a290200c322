//! The shiro binary's internals: the front ends of the agent (`shiro-agent`) and the wiring
//! that `src/main.rs` drives.
//!
//! - [`cli`]: the command line (clap); [`run`]: a session's wiring, from the flags, the
//!   environment and the terminal; [`places`]: the user's directories, from the environment;
//! - [`line_editor`]: the line interface's editor (the terminal UI is `shiro-tui`'s);
//! - [`mcp`]: `shiro mcp`, the MCP server; [`signals`]: SIGINT, SIGTERM and SIGHUP.
//!
//! Invariant: only this crate prints, reads the environment, or exits — and within it only
//! `main.rs` and the modules it names for that do ([`signals`] among them).

pub mod cli;
pub mod line_editor;
pub mod mcp;
pub mod places;
pub mod run;
pub mod signals;
