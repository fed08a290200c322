//! The integration tests of `shiro-tools`: one module per subject, linked into one test binary
//! (one link instead of one per file). `cargo test -p shiro-tools --test integration
//! MODULE::` runs one subject.

mod adopt;
mod apply_patch;
mod bash;
mod edit_tools;
mod mutator_conformance;
mod read_tools;
mod search_model;
