//! `peak_rss OUT PROGRAM ARGS…`: runs the program with this process's standard streams and
//! writes its peak resident memory, in KiB, to the file `OUT`; exits as the program did.
//!
//! The tests that bound a command's memory run it through this: `getrusage(RUSAGE_CHILDREN)`
//! in a process whose only child is the program counts that program alone, where the test
//! binary's own would count every process any of its tests started.
#![allow(clippy::print_stderr)]

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: peak_rss OUT PROGRAM ARGS…");
        return ExitCode::from(2);
    };
    let status = match Command::new(program).args(rest).status() {
        Ok(status) => status,
        Err(err) => {
            eprintln!("peak_rss: cannot run {}: {err}", program.to_string_lossy());
            return ExitCode::from(127);
        }
    };
    let peak = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map(|usage| usage.max_rss());
    let written = match peak {
        // Linux reports ru_maxrss in KiB.
        Ok(kib) => std::fs::write(out, kib.to_string()),
        Err(err) => Err(std::io::Error::from(err)),
    };
    if let Err(err) = written {
        eprintln!("peak_rss: cannot write {}: {err}", out.to_string_lossy());
        return ExitCode::from(125);
    }
    match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::from(1),
    }
}
