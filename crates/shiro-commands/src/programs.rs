//! What programs do with their arguments, as far as permission rules care: the shells,
//! whose `-c` runs a script; the wrappers, which run the command their arguments name; the
//! interpreters; the programs whose later arguments can run a command; and the tools whose
//! second word is a subcommand, with the options each takes before it.
//!
//! Deny and ask rules read these tables to see through a wrapper or into a script
//! (`crate::disguise`); the rule an "always" answer keeps reads the same ones
//! (`crate::narrow`), so what a deny rule sees through is what a kept allow rule never
//! covers.

/// The shells: `NAME -c SCRIPT` runs a script.
pub(crate) const SHELLS: [&str; 13] = [
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash", "posh",
    "rbash",
];

/// A program that runs the command its arguments name, after options of its own.
pub(crate) struct Wrapper {
    /// Its name.
    pub name: &'static str,
    /// Its options that take the next word as their value (also written attached: `-n5`,
    /// `--signal=KILL`).
    pub values: &'static [&'static str],
    /// Its options that take no value. An option in neither list may take one: deny rules
    /// read it as taking none, the "always" answer gives up on the command.
    pub flags: &'static [&'static str],
    /// What stands between the options and the command.
    pub then: Then,
}

/// What a [`Wrapper`] takes between its options and the command it runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Nothing.
    Command,
    /// A duration (`timeout 5 cmd`).
    Duration,
    /// Assignments (`env FOO=1 cmd`).
    Assignments,
    /// An adjustment written as an option of digits is allowed too (`nice -5 cmd`).
    Niceness,
}

/// The wrappers deny rules see through, and the "always" answer keeps with the command they
/// run.
pub(crate) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "command",
        values: &[],
        flags: &["-p", "-v", "-V"],
        then: Then::Command,
    },
    Wrapper {
        name: "builtin",
        values: &[],
        flags: &[],
        then: Then::Command,
    },
    Wrapper {
        name: "exec",
        values: &["-a"],
        flags: &["-c", "-l"],
        then: Then::Command,
    },
    Wrapper {
        name: "nohup",
        values: &[],
        flags: &[],
        then: Then::Command,
    },
    Wrapper {
        name: "env",
        values: &["-u", "--unset", "-C", "--chdir"],
        flags: &[
            "-",
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
        ],
        then: Then::Assignments,
    },
    Wrapper {
        name: "nice",
        values: &["-n", "--adjustment"],
        flags: &[],
        then: Then::Niceness,
    },
    Wrapper {
        name: "time",
        values: &["-f", "--format", "-o", "--output"],
        flags: &[
            "-p",
            "-a",
            "--append",
            "-v",
            "--verbose",
            "--portability",
            "-q",
            "--quiet",
        ],
        then: Then::Command,
    },
    Wrapper {
        name: "timeout",
        values: &["-s", "--signal", "-k", "--kill-after"],
        flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
        then: Then::Duration,
    },
    Wrapper {
        name: "xargs",
        values: &[
            "-I",
            "-n",
            "-P",
            "-d",
            "-L",
            "-s",
            "-E",
            "-a",
            "-J",
            "-R",
            "-S",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--max-lines",
            "--eof",
        ],
        // GNU's `-i`, `-e` and `-l` take a value only attached (`-i{}`).
        flags: &[
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-p",
            "--interactive",
            "-x",
            "--exit",
            "-o",
            "--open-tty",
            "-i",
            "-e",
            "-l",
        ],
        then: Then::Command,
    },
    Wrapper {
        name: "sudo",
        values: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-U",
            "--other-user",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-T",
            "--command-timeout",
        ],
        // Not `-s`, `-i` (a shell runs the command) or `-e` (files to edit).
        flags: &[
            "-E",
            "--preserve-env",
            "-H",
            "--set-home",
            "-n",
            "--non-interactive",
            "-P",
            "--preserve-groups",
            "-S",
            "--stdin",
            "-b",
            "--background",
            "-k",
            "--reset-timestamp",
            "-A",
            "--askpass",
            "-B",
            "--bell",
            "-N",
            "--no-update",
        ],
        then: Then::Command,
    },
    Wrapper {
        name: "doas",
        values: &["-u", "-C"],
        flags: &["-n"],
        then: Then::Command,
    },
    Wrapper {
        name: "stdbuf",
        values: &["-i", "-o", "-e", "--input", "--output", "--error"],
        flags: &[],
        then: Then::Command,
    },
    Wrapper {
        name: "setsid",
        values: &[],
        flags: &["-f", "--fork", "-w", "--wait", "-c", "--ctty"],
        then: Then::Command,
    },
    Wrapper {
        name: "ionice",
        values: &["-c", "--class", "-n", "--classdata"],
        flags: &["-t", "--ignore"],
        then: Then::Command,
    },
    // `busybox APPLET …`: the applet is the command.
    Wrapper {
        name: "busybox",
        values: &[],
        flags: &[],
        then: Then::Command,
    },
];

/// The wrapper called `name`, if it is one.
pub(crate) fn wrapper(name: &str) -> Option<&'static Wrapper> {
    WRAPPERS.iter().find(|wrapper| wrapper.name == name)
}

impl Wrapper {
    /// Whether `word` is one of its options with the value attached (`-n5`, `--signal=9`).
    fn attached(&self, word: &str) -> bool {
        let name = match word.split_once('=') {
            Some((name, _)) if name.starts_with("--") => name,
            _ if !word.starts_with("--") => word.get(..2).unwrap_or(word),
            _ => return false,
        };
        name != word && self.values.contains(&name)
    }

    /// Where the command it runs starts among `words` (its arguments), when every option
    /// before it is one it knows; `None` when one is not, or when no command follows.
    pub(crate) fn command_at(&self, words: &[String]) -> Option<usize> {
        let mut at = 0;
        loop {
            let word = words.get(at)?;
            if word == "--" {
                at += 1;
                break;
            }
            if self.flags.contains(&word.as_str())
                || self.attached(word)
                || (self.then == Then::Niceness
                    && word
                        .strip_prefix('-')
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())))
            {
                at += 1;
            } else if self.values.contains(&word.as_str()) {
                at += 2;
            } else if word.starts_with('-') && word != "-" {
                return None;
            } else {
                break;
            }
        }
        match self.then {
            Then::Duration => at += 1,
            Then::Assignments => {
                at += words[at.min(words.len())..]
                    .iter()
                    .take_while(|word| is_assignment(word))
                    .count();
            }
            Then::Command | Then::Niceness => {}
        }
        words.get(at).map(|_| at)
    }

    /// The command it runs, read as deny rules read it: any word that starts with `-` is an
    /// option, taking the next word when [`Wrapper::values`] says so.
    pub(crate) fn command<'a>(&self, words: &'a [String]) -> &'a [String] {
        let rest = skip_options(words, self.values, self.flags);
        match self.then {
            // The duration.
            Then::Duration => rest.get(1..).unwrap_or_default(),
            Then::Assignments => {
                let assignments = rest.iter().take_while(|word| is_assignment(word)).count();
                &rest[assignments..]
            }
            Then::Command | Then::Niceness => rest,
        }
    }
}

/// Interpreters of a programming language: `-c`, `-e` and their like run program text.
pub(crate) const INTERPRETERS: [&str; 24] = [
    "python",
    "pypy",
    "node",
    "nodejs",
    "perl",
    "ruby",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "Rscript",
    "R",
    "julia",
    "pwsh",
    "powershell",
    "expect",
    "guile",
    "racket",
    "elixir",
    "erl",
    "escript",
    "ghci",
    "runghc",
];

/// Programs whose later arguments can name a command or program text to run, or which
/// change how later commands run: only their exact text is kept.
pub(crate) const RUNS_ARGUMENTS: [&str; 44] = [
    "eval",
    "trap",
    "alias",
    "hash",
    "enable",
    "find",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "gsed",
    "ssh",
    "watch",
    "su",
    "runuser",
    "sg",
    "script",
    "flock",
    "strace",
    "ltrace",
    "valgrind",
    "gdb",
    "chroot",
    "unshare",
    "nsenter",
    "setpriv",
    "taskset",
    "chrt",
    "prlimit",
    "numactl",
    "firejail",
    "bwrap",
    "systemd-run",
    "fakeroot",
    "faketime",
    "unbuffer",
    "parallel",
    "npx",
    "bunx",
    "uvx",
    "pipx",
    "vim",
    "nvim",
];

/// A tool whose second word names what it does, with the options it takes before it.
pub(crate) struct Subcommands {
    /// Its name.
    pub name: &'static str,
    /// Options that take the next word as their value.
    values: &'static [&'static str],
    /// Options that take none. Any other option before the subcommand makes the rule the
    /// exact text: reading it wrongly could make the rule stop before the subcommand.
    flags: &'static [&'static str],
    /// Subcommands that run a command or program text given to them (`npm exec`,
    /// `docker run`): only their exact text is kept.
    pub runs: &'static [&'static str],
}

/// The options `pip` and `pip3` take before their subcommand.
const PIP_FLAGS: &[&str] = &[
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--isolated",
    "--no-cache-dir",
];

/// The tools with subcommands.
pub(crate) const SUBCOMMANDS: &[Subcommands] = &[
    Subcommands {
        name: "git",
        values: &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
            "--super-prefix",
        ],
        flags: &[
            "-p",
            "--paginate",
            "-P",
            "--no-pager",
            "--bare",
            "--no-replace-objects",
            "--no-lazy-fetch",
            "--literal-pathspecs",
            "--glob-pathspecs",
            "--noglob-pathspecs",
            "--icase-pathspecs",
            "--no-optional-locks",
            "--no-advice",
        ],
        runs: &[],
    },
    Subcommands {
        name: "cargo",
        values: &["--color", "--config", "-Z", "-C"],
        flags: &[
            "-v",
            "-vv",
            "--verbose",
            "-q",
            "--quiet",
            "--locked",
            "--offline",
            "--frozen",
        ],
        runs: &[],
    },
    Subcommands {
        name: "npm",
        values: &["--prefix", "-w", "--workspace", "--loglevel", "--registry"],
        flags: &[
            "-g",
            "--global",
            "-s",
            "--silent",
            "-q",
            "--quiet",
            "--verbose",
        ],
        runs: &["exec", "x"],
    },
    Subcommands {
        name: "pnpm",
        values: &["-C", "--dir", "--filter", "-F"],
        flags: &[
            "-r",
            "--recursive",
            "-w",
            "--workspace-root",
            "-s",
            "--silent",
        ],
        runs: &["exec", "dlx"],
    },
    Subcommands {
        name: "yarn",
        values: &["--cwd"],
        flags: &["-s", "--silent"],
        runs: &["exec", "dlx"],
    },
    Subcommands {
        name: "bun",
        values: &["--cwd"],
        flags: &[],
        runs: &["x", "exec", "repl"],
    },
    Subcommands {
        name: "deno",
        values: &[],
        flags: &["-q", "--quiet"],
        runs: &["eval", "repl"],
    },
    Subcommands {
        name: "go",
        values: &["-C"],
        flags: &[],
        runs: &[],
    },
    Subcommands {
        name: "docker",
        values: &[
            "-H",
            "--host",
            "-c",
            "--context",
            "--config",
            "-l",
            "--log-level",
        ],
        flags: &["-D", "--debug", "--tls", "--tlsverify"],
        runs: &["run", "exec"],
    },
    Subcommands {
        name: "podman",
        values: &["-c", "--connection", "--url", "--log-level"],
        flags: &["--remote", "-r"],
        runs: &["run", "exec"],
    },
    Subcommands {
        name: "kubectl",
        values: &[
            "-n",
            "--namespace",
            "--context",
            "--kubeconfig",
            "--cluster",
            "--user",
            "-s",
            "--server",
        ],
        flags: &[],
        runs: &["exec", "run", "debug"],
    },
    Subcommands {
        name: "helm",
        values: &["-n", "--namespace", "--kube-context", "--kubeconfig"],
        flags: &["--debug"],
        runs: &[],
    },
    Subcommands {
        name: "make",
        // `-j` and `-l` take a value only sometimes: read as taking one, a misreading makes
        // the rule longer, never shorter.
        values: &[
            "-C",
            "--directory",
            "-f",
            "--file",
            "--makefile",
            "-I",
            "--include-dir",
            "-o",
            "-W",
            "-j",
            "-l",
        ],
        flags: &[
            "-s",
            "--silent",
            "--quiet",
            "-k",
            "--keep-going",
            "-n",
            "--dry-run",
            "-B",
            "--always-make",
            "-i",
            "-e",
            "-r",
            "-R",
            "-w",
            "--no-print-directory",
        ],
        runs: &[],
    },
    Subcommands {
        name: "uv",
        values: &[
            "--directory",
            "--project",
            "--cache-dir",
            "--config-file",
            "--color",
        ],
        flags: &[
            "-q",
            "--quiet",
            "-v",
            "--verbose",
            "--offline",
            "--no-cache",
            "--no-progress",
        ],
        runs: &["run", "tool"],
    },
    Subcommands {
        name: "poetry",
        values: &["-C", "--directory", "-P", "--project"],
        flags: &[
            "-q",
            "--quiet",
            "-v",
            "-vv",
            "-vvv",
            "--verbose",
            "-n",
            "--no-interaction",
            "--no-ansi",
            "--ansi",
        ],
        runs: &["run"],
    },
    Subcommands {
        name: "pip",
        values: &[],
        flags: PIP_FLAGS,
        runs: &[],
    },
    Subcommands {
        name: "pip3",
        values: &[],
        flags: PIP_FLAGS,
        runs: &[],
    },
    Subcommands {
        name: "systemctl",
        values: &["-H", "--host", "-M", "--machine"],
        flags: &[
            "--user",
            "--system",
            "--no-pager",
            "-q",
            "--quiet",
            "--no-block",
        ],
        runs: &[],
    },
    Subcommands {
        name: "apt",
        values: &["-o", "-c", "-t"],
        flags: &["-y", "--yes", "-q", "-qq", "-s", "--simulate"],
        runs: &[],
    },
    Subcommands {
        name: "apt-get",
        values: &["-o", "-c", "-t"],
        flags: &["-y", "--yes", "-q", "-qq", "-s", "--simulate"],
        runs: &[],
    },
    Subcommands {
        name: "bundle",
        values: &[],
        flags: &[],
        runs: &["exec"],
    },
    Subcommands {
        name: "nix",
        values: &[],
        flags: &["-v", "--verbose", "-L", "--print-build-logs", "--impure"],
        runs: &["run", "shell", "develop"],
    },
    Subcommands {
        name: "gh",
        values: &[],
        flags: &[],
        runs: &[],
    },
    Subcommands {
        name: "rustup",
        values: &[],
        flags: &["-v", "--verbose", "-q", "--quiet"],
        runs: &["run"],
    },
    Subcommands {
        name: "terraform",
        values: &[],
        flags: &[],
        runs: &[],
    },
];

impl Subcommands {
    /// Where the subcommand stands among `words` (the tool's arguments), when every option
    /// before it is one this table knows; `None` otherwise, or when there is none.
    pub(crate) fn subcommand_at(&self, words: &[String]) -> Option<usize> {
        let mut at = 0;
        loop {
            let word = words.get(at)?;
            let attached = match word.split_once('=') {
                Some((name, _)) => self.values.contains(&name),
                // `cargo +nightly build`: the toolchain is cargo's option.
                None => self.name == "cargo" && word.len() > 1 && word.starts_with('+'),
            };
            if self.flags.contains(&word.as_str()) || attached {
                at += 1;
            } else if self.values.contains(&word.as_str()) {
                at += 2;
            } else if word.starts_with('-') || word.starts_with('+') {
                return None;
            } else if self.name == "make" && is_assignment(word) {
                // `make CC=clang test`: a variable, not the target.
                at += 1;
            } else {
                return Some(at);
            }
        }
    }
}

/// `NAME=value`, as the shell takes it before a command.
pub(crate) fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `words` from the first that is not an option (or after `--`); each option in `with_arg`
/// takes the next word (unless written `-n5` or `--adjustment=5`), and `flags` may name `-`.
fn skip_options<'a>(words: &'a [String], with_arg: &[&str], flags: &[&str]) -> &'a [String] {
    let mut at = 0;
    while let Some(word) = words.get(at) {
        if word == "--" {
            return words.get(at + 1..).unwrap_or_default();
        }
        if !word.starts_with('-') || (word == "-" && !flags.contains(&"-")) {
            break;
        }
        at += if with_arg.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    words.get(at..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_program_is_in_one_table_once() {
        let mut names: Vec<&str> = SHELLS
            .iter()
            .chain(&INTERPRETERS)
            .chain(&RUNS_ARGUMENTS)
            .copied()
            .chain(SUBCOMMANDS.iter().map(|tool| tool.name))
            .chain(WRAPPERS.iter().map(|wrapper| wrapper.name))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn a_wrapper_s_command_is_found_only_after_options_it_knows() {
        let words = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
        let at = |name: &str, args: &str| wrapper(name).and_then(|w| w.command_at(&words(args)));
        assert_eq!(at("timeout", "-k 5 60 cargo test"), Some(3));
        assert_eq!(at("timeout", "--signal=KILL 60 ls"), Some(2));
        assert_eq!(at("env", "- A=1 B=2 ls"), Some(3));
        assert_eq!(at("nice", "-5 ls"), Some(1));
        assert_eq!(at("nice", "-n5 ls"), Some(1));
        assert_eq!(at("stdbuf", "-oL ls"), Some(1));
        assert_eq!(at("sudo", "-u root -E ls"), Some(3));
        // An option it does not know might take a value: no command is named.
        assert_eq!(at("sudo", "-s ls"), None);
        assert_eq!(at("env", "-S ls"), None);
        assert_eq!(at("timeout", "60"), None);
        assert_eq!(at("env", "A=1"), None);
    }
}
