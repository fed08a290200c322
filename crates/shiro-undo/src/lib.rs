//! shiro-undo: the undo log and restore engine of shiro.
//!
//! It plugs into the tools as a [`shiro_tools::Mutator`] decorator that captures the exact
//! pre-image of every path before the first mutation of that path in a turn, and restores
//! turns through an injected `Mutator`.
//!
//! Invariants:
//! - a pre-image is durable on disk before the mutation it protects happens;
//! - a restore never overwrites a change made after the turn unless the caller forces it;
//! - it never prints, reads the environment or exits the process;
//! - it depends on shiro-tools only, and only for the `Mutator` seam.
