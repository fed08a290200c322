//! The terminal UI's building blocks: Markdown and code rendered to ratatui lines.

pub mod highlight;
pub mod markdown;
