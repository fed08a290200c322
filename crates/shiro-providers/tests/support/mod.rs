//! Mock model servers on 127.0.0.1, for the providers' tests and (by path) shiro-cli's.
// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

pub mod mock_anthropic;
pub mod mock_openai;
