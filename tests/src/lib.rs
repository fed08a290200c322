//! Cross-crate property tests and end-to-end tests of the `shiro` binary.
//!
//! This crate holds no library code of its own: everything lives under `tests/tests/`.
//! It must never be depended on by the shipped crates.
