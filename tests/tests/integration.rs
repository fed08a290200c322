//! The cross-crate property, crash and end-to-end tests, one module per subject, linked
//! into one test binary (one link instead of one per file; `cargo test -p shiro-tests
//! --test integration bash_git::` runs one subject).

#[path = "../../crates/shiro-cli/tests/support/procs.rs"]
mod procs;
mod support;

mod bash_ahead;
mod bash_background;
mod bash_capture;
mod bash_crash;
mod bash_git;
mod bash_new_trees;
mod bash_property;
mod bash_sandbox;
mod big_files;
mod cli_disk_full;
mod cli_docs;
mod cli_headless;
mod cli_signals;
mod cli_undo_redo;
mod commands_corpus;
mod hostile_tree;
mod jail;
mod jail_race;
mod store_ground;
mod store_reach;
mod undo_crash;
mod workspace_config;
