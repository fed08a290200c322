//! The rule an "always" answer keeps for one simple command of a bash line: the narrowest
//! that allows it again and calls like it, never a rule that allows any script.
//!
//! A prefix rule allows its words followed by anything, so it is written only where the
//! words after it cannot change what program runs:
//!
//! - most commands keep their first word and, unless it is an option, their second
//!   (`rm notes.txt` gives `rm notes.txt:*`, `ls -la` gives `ls:*`);
//! - a tool with subcommands keeps its options up to the subcommand (`git -C lib status`
//!   gives `git -C lib status:*`), and a line whose options shiro cannot read gives its
//!   exact text;
//! - a wrapper that runs a command (the ones deny rules see through: `env`, `sudo`,
//!   `timeout`, …) keeps its options, followed by the rule of the command it runs
//!   (`timeout 60 cargo test -p x` gives `timeout 60 cargo test:*`);
//! - a shell or an interpreter keeps the script file it runs (`bash build.sh` gives
//!   `bash build.sh:*`, `python -m pytest` gives `python -m pytest:*`), and for program text
//!   (`sh -c '…'`, `python -c`, `eval`) or any other option gives its exact text;
//! - a program whose later arguments can name a command or a program to run (`find -exec`,
//!   `ssh HOST CMD`, `awk`, `sed`, `npx`, …) gives its exact text.
//!
//! An exact rule is written only when the text is what it matches: no `*` (which a rule
//! reads as "any text"), no `$` or backquote outside single quotes (whose value changes from
//! run to run), no control characters. Otherwise no rule is offered. This holds because
//! `simple_commands` keeps blanks inside quotes and after a backslash as written: a command
//! with the same text passes the same words.

use crate::allowed::{BashRule, simple_commands};
use crate::disguise;
use crate::programs::{self, INTERPRETERS, RUNS_ARGUMENTS, SHELLS, SUBCOMMANDS, is_assignment};

/// What a command's words allow.
enum Narrow {
    /// A prefix rule of its first this many words.
    Prefix(usize),
    /// Only its exact text.
    Exact,
}

/// The narrowest rules that allow the bash line `line` again, one per simple command: its
/// first word and, unless it is an option, its second (`git status -s` gives
/// `git status:*`, `rm notes.txt` gives `rm notes.txt:*`); for a tool with subcommands its
/// options up to the subcommand (`git -C lib status:*`); for a wrapper its options and the
/// rule of the command it runs (`timeout 60 cargo test:*`); and the exact text of a command
/// that runs a script or a command it is given (`sh -c '…'`, `python -c`, `find -exec`). See
/// the rest of this module. `None` for a line no rule can cover (see
/// [`every_command`](crate::allowed::every_command)), or one with a command no rule can pin
/// down (`sh -c "$X"`, `sh -c 'ls *.rs'`).
pub fn narrowest_bash_rules(line: &str) -> Option<Vec<BashRule>> {
    let parts = simple_commands(line).filter(|parts| !parts.is_empty())?;
    let mut rules: Vec<BashRule> = Vec::new();
    for part in parts {
        let rule = rule(&part)?;
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    Some(rules)
}

/// The narrowest rule that allows the simple command `part` again (words separated by one
/// space, as `simple_commands` gives them), if one can be written.
pub(crate) fn rule(part: &str) -> Option<BashRule> {
    let raw = raw_words(part);
    let words: Vec<String> = raw.iter().map(|word| disguise::unquote(word)).collect();
    // A rule's text is trimmed when it is read: one that ends in an escaped blank would
    // read back as another.
    let reads_back = |text: &str| !text.is_empty() && text.trim() == text;
    match narrow(&raw, &words, 0) {
        Narrow::Prefix(end) if reads_back(&raw[..end].join(" ")) => {
            Some(BashRule::Prefix(raw[..end].join(" ")))
        }
        Narrow::Prefix(_) | Narrow::Exact => exact(part).filter(|_| reads_back(part)),
    }
}

/// The command that starts at `words[start]`, after the wrappers before it.
fn narrow(raw: &[&str], words: &[String], start: usize) -> Narrow {
    let at = start
        + words[start.min(words.len())..]
            .iter()
            .take_while(|word| is_assignment(word))
            .count();
    let Some(first) = words.get(at) else {
        // Only assignments: they would prefix any command.
        return Narrow::Exact;
    };
    // What runs must not hang on a variable (`$SHELL -c`, `PATH=$X ls`, `git $SUB`); the
    // arguments may.
    let fixed = |end: usize| !raw[start..end].iter().any(|word| expands(word));
    if first.is_empty() || first.starts_with('-') || !fixed(at + 1) {
        return Narrow::Exact;
    }
    let name = first.rsplit('/').next().unwrap_or(first);
    // `python3.12`, `lua5.4`: the interpreter's version is not another program.
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let rest = &words[at + 1..];
    if let Some(wrapper) = programs::wrapper(name) {
        return match wrapper.command_at(rest) {
            Some(inner) => narrow(raw, words, at + 1 + inner),
            None => Narrow::Exact,
        };
    }
    if SHELLS.contains(&bare) || INTERPRETERS.contains(&bare) {
        let runs_file = |word: Option<&String>| word.is_some_and(|w| !w.starts_with('-'));
        return match rest.first().map(String::as_str) {
            Some(_) if runs_file(rest.first()) && fixed(at + 2) => Narrow::Prefix(at + 2),
            Some("-m")
                if matches!(bare, "python" | "pypy") && runs_file(rest.get(1)) && fixed(at + 3) =>
            {
                Narrow::Prefix(at + 3)
            }
            _ => Narrow::Exact,
        };
    }
    if RUNS_ARGUMENTS.contains(&name) {
        return Narrow::Exact;
    }
    if let Some(tool) = SUBCOMMANDS.iter().find(|tool| tool.name == name) {
        return match tool.subcommand_at(rest) {
            Some(sub) if !tool.runs.contains(&rest[sub].as_str()) && fixed(at + sub + 2) => {
                Narrow::Prefix(at + sub + 2)
            }
            _ => Narrow::Exact,
        };
    }
    match rest.first() {
        Some(second) if !second.starts_with('-') => Narrow::Prefix(at + 2),
        _ => Narrow::Prefix(at + 1),
    }
}

/// `part` as an exact rule, when a rule reads back as exactly that text.
fn exact(part: &str) -> Option<BashRule> {
    let writable = !part.is_empty()
        && !part.contains('*')
        && !expands(part)
        && !part.chars().any(char::is_control);
    writable.then(|| BashRule::Exact(part.to_owned()))
}

/// Whether the shell expands something in `text` before running it: a `$` or a backquote
/// outside single quotes.
fn expands(text: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '$' | '`') => return true,
            (_, '\\') => {
                chars.next();
            }
            (Some(_), '"') => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            _ => {}
        }
    }
    false
}

/// The words of `part` as written (quotes kept), split at the spaces between them.
fn raw_words(part: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut chars = part.char_indices();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (Some(_), '"') => quote = None,
            (_, '\\') => {
                chars.next();
            }
            (None, '\'' | '"') => quote = Some(c),
            (None, ' ') => {
                words.push(&part[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    words.push(&part[start..]);
    words.retain(|word| !word.is_empty());
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allowed::{Rule, RuleSpec, every_command, simple_commands};

    #[test]
    fn narrowest_rules_name_the_command_and_its_subcommand() {
        let rules = |line: &str| {
            narrowest_bash_rules(line)
                .map(|rules| rules.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(
            rules("git status -s"),
            Some(vec!["git status:*".to_owned()])
        );
        assert_eq!(
            rules("  cargo   test -p x"),
            Some(vec!["cargo test:*".to_owned()])
        );
        assert_eq!(
            rules("rm notes.txt"),
            Some(vec!["rm notes.txt:*".to_owned()])
        );
        assert_eq!(rules("ls -la"), Some(vec!["ls:*".to_owned()]));
        assert_eq!(
            rules("git add . && git commit -m x"),
            Some(vec!["git add:*".to_owned(), "git commit:*".to_owned()])
        );
        assert_eq!(rules("echo $(id)"), None);
        assert_eq!(rules(""), None);
        for line in [
            "git status -s",
            "cargo test -p x && cargo test",
            "ls -la | wc -l",
        ] {
            let made = narrowest_bash_rules(line).unwrap();
            assert!(
                every_command(line, |part| made.iter().any(|r| r.matches(part))),
                "{line}"
            );
        }
    }

    /// A kept exact rule pins the whole text: whitespace inside quotes or after a backslash
    /// is part of a word, so a line that differs there is another line.
    #[test]
    fn whitespace_is_collapsed_only_between_words() {
        let approved = "sh -c 'echo rm -rf ~'";
        let made = narrowest_bash_rules(approved).unwrap();
        let allows = |line: &str| every_command(line, |part| made.iter().any(|r| r.matches(part)));
        assert!(allows(approved));
        assert!(allows("sh  -c   'echo rm -rf ~'"));
        assert!(!allows("sh -c 'echo\nrm -rf ~'"));
        assert!(!allows("sh -c 'echo  rm -rf ~'"));
        let escaped = |line: &str| {
            every_command(line, |part| {
                BashRule::Exact("echo a\\ b".into()).matches(part)
            })
        };
        assert!(escaped("echo a\\ b"));
        assert!(!escaped("echo a\\  b"));
    }

    #[test]
    fn words_keep_their_quotes() {
        assert_eq!(
            raw_words("sh -c 'a  b' \"c d\" e\\ f"),
            ["sh", "-c", "'a  b'", "\"c d\"", "e\\ f"]
        );
        assert_eq!(raw_words("a"), ["a"]);
        assert_eq!(raw_words(""), Vec::<&str>::new());
    }

    /// A rule's text is trimmed when it is read, so one ending in an escaped blank is not
    /// offered: it would read back as another rule.
    #[test]
    fn a_rule_ending_in_an_escaped_blank_is_not_offered() {
        assert_eq!(rule("\\ "), None);
        assert_eq!(rule("ls a\\ "), None);
        assert_eq!(rule("ls a\\ b"), Some(BashRule::Prefix("ls a\\ b".into())));
    }

    #[test]
    fn dollars_in_single_quotes_expand_nothing() {
        assert!(!expands("awk '{print $1}' f"));
        assert!(!expands("echo \\$HOME"));
        assert!(expands("echo \"$HOME\""));
        assert!(expands("echo $HOME"));
        assert!(expands("echo \"'$HOME'\""));
    }

    /// "Always" on a command run through a shell, an interpreter or a wrapper never keeps a
    /// prefix that covers any script: it keeps the exact line, the wrapper with the rule of
    /// the command it runs, or nothing.
    #[test]
    fn narrowest_rules_never_cover_a_script_or_a_wrapped_command() {
        let rules = |line: &str| {
            narrowest_bash_rules(line)
                .map(|rules| {
                    rules
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "(none)".to_owned())
        };
        let table = [
            "sh -c 'echo harmless'",
            "/bin/sh -c 'echo harmless'",
            "bash -lc 'cargo test'",
            "zsh -c ls",
            "\\sh -c ls",
            "'bash' -c ls",
            "${SH:-sh} -c ls",
            "$SHELL -c ls",
            "eval ls",
            "python3 -c 'print(1)'",
            "python -m pytest -x",
            "python3.12 manage.py test",
            "node -e 'console.log(1)'",
            "perl -e 'print 1'",
            "awk '{print $1}' f",
            "sed -n 1,5p notes.txt",
            "find . -name x -print",
            "find . -name '*.rs'",
            "ssh host ls",
            "env FOO=1 cargo test -p x",
            "env -S 'sh -c ls'",
            "FOO=1 cargo test",
            "FOO=1",
            "sudo apt update",
            "sudo -s ls",
            "sudo -u root rm x",
            "timeout 60 cargo test --all",
            "timeout -k 5 60 sh -c 'rm x'",
            "nice -n 5 make",
            "nohup ./server &&  true",
            "time cargo build",
            "xargs rm",
            "xargs -0 -I {} sh -c 'rm {}'",
            "busybox sh -c ls",
            "exec -a name ls -l",
            "command -v git",
            "git -C dir status -s",
            "git -C dir",
            "git --no-pager log -5",
            "git -c core.pager=cat -C sub diff HEAD",
            "git --frobnicate x status",
            "git status -s",
            "cargo +nightly build",
            "cargo -Z unstable-options test",
            "npm --prefix web run build",
            "npm exec cowsay",
            "npx cowsay",
            "docker -H tcp://h ps",
            "docker run alpine",
            "kubectl -n prod get pods",
            "make -C sub -j4 test",
            "ls -la",
            "rm \"my notes.txt\"",
            "echo 'a  b'",
            "sh -c 'echo a\nrm x'",
            "sh -c 'ls *.rs'",
            "sh -c \"$X\"",
            "echo $HOME",
            "PATH=/tmp/x:$PATH ls",
            "git $SUB x",
            "env - rm x",
            "timeout 5s",
        ];
        let got: Vec<String> = table
            .iter()
            .map(|line| format!("{}  →  {}", line.replace('\n', "\\n"), rules(line)))
            .collect();
        insta::assert_snapshot!(got.join("\n"));
    }

    proptest::proptest! {
        /// Whatever line "always" is answered for, the rules it keeps allow that line again
        /// and never a script the person did not see, behind the same wrappers.
        #[test]
        fn kept_rules_allow_their_line_and_no_other_script(
            wrapper in proptest::sample::select(vec![
                "", "sudo ", "env A=1 ", "timeout 5 ", "nice -n 2 ", "xargs ", "command ",
                "/usr/bin/", "A=1 ", "busybox ",
            ]),
            program in proptest::sample::select(vec![
                "sh", "bash", "python3", "node", "eval", "git", "cargo", "ls", "rm", "find",
            ]),
            args in proptest::collection::vec("[a-c]{1,3}|-[a-c]|'[a-c ;]{1,6}'", 0..4),
            shell in proptest::sample::select(vec!["sh -c", "bash -c", "python3 -c", "eval"]),
            script in "[a-c ;]{1,8}",
        ) {
            let line = format!("{wrapper}{program} {}", args.join(" "));
            if let Some(made) = narrowest_bash_rules(&line) {
                let allows = |line: &str| {
                    every_command(line, |part| made.iter().any(|rule| rule.matches(part)))
                };
                proptest::prop_assert!(allows(&line), "{line}: {made:?}");
                let other = format!("{wrapper}{shell} '{script}'");
                let same = simple_commands(&other) == simple_commands(&line);
                proptest::prop_assert!(same || !allows(&other), "{line}: {made:?} allows {other}");
            }
        }
    }

    proptest::proptest! {
        /// Any text gives rules or none, without panicking, and rules it gives allow it.
        #[test]
        fn any_line_gives_rules_that_allow_it_or_none(line in "[a-c/= \t\n'\"\\\\$*;|&-]{0,24}") {
            if let Some(made) = narrowest_bash_rules(&line) {
                let texts: Vec<String> = made.iter().map(|rule| format!("bash({rule})")).collect();
                let reread: Vec<BashRule> = texts
                    .iter()
                    .filter_map(|text| match Rule::parse(text).ok()?.spec {
                        RuleSpec::Bash(rule) => Some(rule),
                        _ => None,
                    })
                    .collect();
                proptest::prop_assert_eq!(&reread, &made);
                let allowed = every_command(&line, |part| made.iter().any(|rule| rule.matches(part)));
                proptest::prop_assert!(allowed, "{:?}: {:?}", line, made);
            }
        }
    }
}
