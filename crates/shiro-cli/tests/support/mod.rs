//! Helpers shared by the integration tests.
// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

// The mock model servers belong to the providers' tests; the agent's tests talk to them too.
#[path = "../../../shiro-providers/tests/support/mock_anthropic.rs"]
pub mod mock_anthropic;
#[path = "../../../shiro-providers/tests/support/mock_openai.rs"]
pub mod mock_openai;
pub mod procs;
pub mod pty;
