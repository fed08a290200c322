//! The smallest Rust program: what starting any Rust binary costs on this machine, for the
//! bench's process-start table (`docs/performance.md`), beside `true` and `shiro --version`.
#![allow(clippy::print_stdout)]

fn main() {
    println!("start_floor");
}
