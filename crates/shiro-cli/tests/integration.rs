//! The integration tests of `shiro-cli`: one module per subject, linked into one test binary
//! (one link instead of one per file). `cargo test -p shiro-cli --test integration
//! MODULE::` runs one subject.

mod agent_common;
mod support;

mod agent_headless;
mod agent_instructions;
mod agent_providers;
mod agent_repl;
mod agent_sessions;
mod agent_skills;
mod agent_workspace;
mod headless_refusals;
mod headless_scripts;
mod mcp;
mod mcp_client;
mod mcp_http;
mod permissions;
mod tui_pty;
