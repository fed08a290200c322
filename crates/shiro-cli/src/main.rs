//! The `shiro` binary: the composition root that wires shiro-tools, shiro-undo and
//! shiro-commands together, and the only place that prints, reads the environment, or exits.

fn main() {}
