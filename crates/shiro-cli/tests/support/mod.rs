//! Helpers shared by the integration tests.
// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

pub mod mock_anthropic;
pub mod mock_openai;
pub mod pty;
