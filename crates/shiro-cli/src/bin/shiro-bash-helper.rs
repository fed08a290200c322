//! `shiro-bash-helper`: the bash overlay's helper processes (see `shiro_tools::capture`),
//! as a binary of their own. `shiro` runs it, when it is installed beside it, instead of
//! starting itself once more: a small binary starts in about half the time, and every
//! command run with capture starts it (see `docs/architecture.md`). It does nothing else.
#![allow(clippy::print_stderr)]

use shiro_tools::capture;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if !capture::is_helper_call(&args) {
        eprintln!(
            "shiro-bash-helper: this program is started by shiro to capture what a bash command changes; it is not run by hand"
        );
        std::process::exit(2);
    }
    let exit = capture::run_helper(&args);
    if let Some(message) = exit.message {
        // The helper's standard error is the command's output, which the model reads.
        eprintln!("shiro: {message}");
    }
    std::process::exit(exit.code);
}
