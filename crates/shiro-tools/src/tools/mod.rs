//! The tools a model can call.

mod apply_patch;

pub use apply_patch::apply_patch;
