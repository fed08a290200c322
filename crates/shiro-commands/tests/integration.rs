//! The integration tests of `shiro-commands`: one module per subject, linked into one test binary
//! (one link instead of one per file). `cargo test -p shiro-commands --test integration
//! MODULE::` runs one subject.

mod expand;
mod parse;
mod real;
mod registry;
mod skills;
