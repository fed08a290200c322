//! The shiro binary's internals: the model providers, and (as they land) the session, the
//! agent loop, the REPL and the wiring that `src/main.rs` drives.
//!
//! Invariant: only this crate prints, reads the environment, or exits — and within it only
//! `main.rs` and the modules it names for that do ([`signals`] among them). Modules such as
//! [`headless`] take everything they need as arguments and report through return values and
//! callbacks.

pub mod agent;
pub mod cli;
pub mod config;
pub mod environment;
pub mod headless;
pub mod mcp;
pub mod permissions;
pub mod render;
pub mod run;
pub mod signals;
pub mod trust;
pub mod tui;
pub mod workspace;
