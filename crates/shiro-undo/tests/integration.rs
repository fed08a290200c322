//! The integration tests of `shiro-undo`: one module per subject, linked into one test binary
//! (one link instead of one per file). `cargo test -p shiro-undo --test integration
//! MODULE::` runs one subject.

mod common;

mod ahead;
mod changed_since;
mod commit_crash;
mod corruption;
mod format6;
mod kept;
mod revert;
mod rewind;
mod roundtrip;
mod standing;
mod store;
