//! The process's environment, as data: read once by `main`, then handed down, so that what
//! the agent does with a variable (a provider's key, an MCP server's `${VAR}`) can be given
//! any environment by a test or an embedding program, and nothing below `main` reads the
//! process's own.

use std::collections::BTreeMap;
use std::env::VarError;

/// Variables and their values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// An environment of `vars`; a later value of a name replaces an earlier one.
    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        Environment {
            vars: vars.into_iter().collect(),
        }
    }

    /// The value of `name`, if it is set.
    pub fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    /// The value of `name`, as `std::env::var` answers (for the code written against it).
    pub fn var(&self, name: &str) -> Result<String, VarError> {
        self.get(name).ok_or(VarError::NotPresent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_is_set_or_not_present() {
        let env = Environment::new([
            ("A".to_owned(), "1".to_owned()),
            ("A".to_owned(), "2".to_owned()),
        ]);
        assert_eq!(env.get("A").as_deref(), Some("2"));
        assert_eq!(env.var("B"), Err(VarError::NotPresent));
    }
}
