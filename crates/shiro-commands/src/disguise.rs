//! The commands a bash line runs, seen through the easy disguises, for `deny` and `ask` rules:
//! each simple command as the words the shell would pass it (quotes removed, `$'…'`
//! decoded, `${NAME:-word}` taken as `word`), the commands inside `$(…)`, backquotes,
//! `<(…)`, subshells and braces as commands of their own, and then unwrapped — leading
//! assignments, a path to its program's name (`/bin/rm` → `rm`), the wrappers (`command`,
//! `builtin`, `exec`, `env`, `nice`, `nohup`, `time`, `timeout`, `xargs`, `sudo`, `doas`,
//! `stdbuf`, `setsid`, `ionice`, `busybox`; see `crate::programs`), and the script of
//! `bash -c`, `sh -c` (and the other shells) and `eval`, parsed as a line of its own.
//!
//! Only rules that refuse or ask look through disguises: an allow rule matched against an
//! unwrapped command would allow more than its author wrote. What a line computes at run
//! time (`$(echo rm)`, `x=rm; $x`) cannot be seen here; `docs/cli.md` lists those. The rule
//! an "always" answer keeps (`crate::narrow`) reads the same wrappers and shells, so what
//! deny rules see through is what an allow rule is never offered to cover.

use crate::programs::{SHELLS, is_assignment, wrapper};

/// How deep scripts inside scripts (`bash -c "sh -c '…'"`) are followed.
const MAX_DEPTH: usize = 4;

/// Every form of every command `line` runs that a deny or ask rule is tried against: each
/// simple command's words joined by one space, and each of its unwrapped forms.
pub fn forms(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    collect(line, 0, &mut out);
    out
}

fn collect(line: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut nested = Vec::new();
    for argv in lex(line, &mut nested) {
        unwrap(argv, depth, out);
    }
    for inner in nested {
        collect(&inner, depth + 1, out);
    }
}

/// Adds `argv` and each form it takes as its wrappers come off.
fn unwrap(mut argv: Vec<String>, depth: usize, out: &mut Vec<String>) {
    loop {
        // `VAR=value cmd`: the assignments are not the command.
        let assignments = argv.iter().take_while(|word| is_assignment(word)).count();
        argv.drain(..assignments);
        let Some(first) = argv.first_mut() else {
            return;
        };
        if let Some(name) = first.rsplit('/').next().filter(|_| first.contains('/')) {
            if name.is_empty() {
                return;
            }
            *first = name.to_owned();
        }
        out.push(argv.join(" "));
        let name = argv[0].as_str();
        let rest = if let Some(wrapper) = wrapper(name) {
            wrapper.command(&argv[1..])
        } else if SHELLS.contains(&name) {
            if let Some(script) = shell_script(&argv[1..]) {
                collect(script, depth + 1, out);
            }
            return;
        } else if name == "eval" {
            collect(&argv[1..].join(" "), depth + 1, out);
            return;
        } else {
            return;
        };
        if rest.is_empty() {
            return;
        }
        argv = rest.to_vec();
    }
}

/// The word the shell passes for one word of a command as written (`'a b'` → `a b`, `\\sh`
/// → `sh`, `${X:-sh}` → `sh`).
pub(crate) fn unquote(word: &str) -> String {
    lex(word, &mut Vec::new()).concat().join(" ")
}

/// The script of `sh -c SCRIPT` (the flag may be among others: `-lc`, `-ec`, `-x -c`).
fn shell_script(words: &[String]) -> Option<&str> {
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if !word.starts_with('-') || word == "-" || word == "--" {
            return None;
        }
        if !word.starts_with("--") && word.contains('c') {
            return words.next().map(String::as_str);
        }
    }
    None
}

/// Splits `line` into simple commands of words as the shell would pass them, cutting at
/// `;`, `&`, `|`, newlines, parentheses and braces, leaving out redirections; the text of
/// each `$(…)`, `` `…` `` and `<(…)` goes to `nested`, to be read as a line of its own.
fn lex(line: &str, nested: &mut Vec<String>) -> Vec<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    let mut lexer = Lexer {
        commands: Vec::new(),
        words: Vec::new(),
        word: None,
        skip_next: false,
    };
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            ' ' | '\t' => lexer.end_word(),
            '\n' | ';' | '&' | '|' | '(' | ')' | '{' | '}' => lexer.end_command(),
            '<' | '>' => {
                if c == '<' && chars.get(i) == Some(&'(') {
                    let (inner, next) = balanced(&chars, i + 1, '(', ')');
                    nested.push(inner);
                    i = next;
                    continue;
                }
                // `2>err`, `>>log`, `<in`, `<<EOF`: the target is not a word of the command.
                lexer.take_fd_number();
                lexer.end_word();
                while matches!(chars.get(i), Some('<' | '>' | '&')) {
                    i += 1;
                }
                lexer.skip_next = true;
            }
            '\\' => {
                if let Some(&next) = chars.get(i) {
                    i += 1;
                    if next != '\n' {
                        lexer.push(next);
                    }
                }
            }
            '\'' => {
                let end = find(&chars, i, '\'');
                lexer.push_str(&chars[i..end].iter().collect::<String>());
                i = end + 1;
            }
            '"' => i = lexer.double_quoted(&chars, i, nested),
            '`' => {
                let end = find(&chars, i, '`');
                nested.push(chars[i..end].iter().collect());
                lexer.push_str("`…`");
                i = end + 1;
            }
            '$' => i = lexer.dollar(&chars, i, nested),
            c => lexer.push(c),
        }
    }
    lexer.end_command();
    lexer.commands
}

/// The index of the next `quote` from `from`, or the end of `chars`.
fn find(chars: &[char], from: usize, quote: char) -> usize {
    (from..chars.len())
        .find(|&j| chars[j] == quote)
        .unwrap_or(chars.len())
}

/// The text from `from` up to the `close` that balances the `open` before it, and the index
/// after that `close` (the end of `chars` when it never closes). Quotes are skipped whole.
fn balanced(chars: &[char], from: usize, open: char, close: char) -> (String, usize) {
    let mut depth = 1usize;
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        match c {
            '\'' | '"' => j = find(chars, j + 1, c),
            '\\' => j += 1,
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return (chars[from..j].iter().collect(), j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    (chars[from.min(chars.len())..].iter().collect(), chars.len())
}

struct Lexer {
    commands: Vec<Vec<String>>,
    words: Vec<String>,
    /// The word being read; `None` between words (so `""` makes an empty word).
    word: Option<String>,
    /// The next word is a redirection's target.
    skip_next: bool,
}

impl Lexer {
    fn push(&mut self, c: char) {
        self.word.get_or_insert_with(String::new).push(c);
    }

    fn push_str(&mut self, text: &str) {
        self.word.get_or_insert_with(String::new).push_str(text);
    }

    fn end_word(&mut self) {
        if let Some(word) = self.word.take() {
            if std::mem::take(&mut self.skip_next) {
                return;
            }
            self.words.push(word);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        self.skip_next = false;
        if !self.words.is_empty() {
            self.commands.push(std::mem::take(&mut self.words));
        }
    }

    /// A word of digits just before `>` is the descriptor it redirects, not a word.
    fn take_fd_number(&mut self) {
        if self
            .word
            .as_deref()
            .is_some_and(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()))
        {
            self.word = None;
        }
    }

    /// Reads a `"…"` from `i` (after the quote); returns where it ends.
    fn double_quoted(&mut self, chars: &[char], mut i: usize, nested: &mut Vec<String>) -> usize {
        self.push_str("");
        while let Some(&c) = chars.get(i) {
            i += 1;
            match c {
                '"' => return i,
                '\\' => {
                    if let Some(&next) = chars.get(i) {
                        i += 1;
                        if !matches!(next, '"' | '\\' | '$' | '`') {
                            self.push('\\');
                        }
                        if next != '\n' {
                            self.push(next);
                        }
                    }
                }
                '`' => {
                    let end = find(chars, i, '`');
                    nested.push(chars[i..end].iter().collect());
                    self.push_str("`…`");
                    i = end + 1;
                }
                '$' => i = self.dollar(chars, i, nested),
                c => self.push(c),
            }
        }
        i
    }

    /// Reads what follows a `$` at `i`: `$(…)` (nested), `$'…'` (decoded), `${NAME:-word}`
    /// (its word), or a plain `$`; returns where it ends.
    fn dollar(&mut self, chars: &[char], i: usize, nested: &mut Vec<String>) -> usize {
        match chars.get(i) {
            Some('(') => {
                let (inner, next) = balanced(chars, i + 1, '(', ')');
                nested.push(inner);
                self.push_str("$(…)");
                next
            }
            Some('\'') => {
                let end = find(chars, i + 1, '\'');
                let raw: String = chars[i + 1..end].iter().collect();
                self.push_str(&ansi_c(&raw));
                end + 1
            }
            Some('{') => {
                let (inner, next) = balanced(chars, i + 1, '{', '}');
                let default = [":-", "-", ":=", "="]
                    .iter()
                    .find_map(|op| inner.split_once(op).map(|(_, word)| word.to_owned()));
                match default {
                    Some(word) => {
                        let mut inner_nested = Vec::new();
                        let words = lex(&word, &mut inner_nested);
                        nested.extend(inner_nested);
                        self.push_str(&words.concat().join(" "));
                    }
                    None => self.push_str(&format!("${{{inner}}}")),
                }
                next
            }
            _ => {
                self.push('$');
                i
            }
        }
    }
}

/// The text of `$'…'`: the common escapes decoded.
fn ansi_c(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let hex: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_hexdigit))
                    .take(2)
                    .collect();
                if let Some(c) = u8::from_str_radix(&hex, 16).ok().map(char::from) {
                    out.push(c);
                }
            }
            Some(d @ '0'..='7') => {
                let mut octal = String::from(d);
                while octal.len() < 3
                    && let Some(next) = chars.next_if(|c| ('0'..='7').contains(c))
                {
                    octal.push(next);
                }
                if let Some(c) = u8::from_str_radix(&octal, 8).ok().map(char::from) {
                    out.push(c);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a rule on `rm` (its command word) sees the `rm` of `line`.
    fn sees_rm(line: &str) -> bool {
        forms(line)
            .iter()
            .any(|form| form == "rm" || form.starts_with("rm "))
    }

    #[test]
    fn the_command_word_is_found_through_quoting_paths_and_wrappers() {
        let disguised = [
            "rm a",
            "/bin/rm b",
            "./rm c",
            "\\rm h",
            "\"rm\" x",
            "'rm' x",
            "r\"\"m x",
            "r''m x",
            "$'rm' x",
            "$'\\x72m' x",
            "$'\\162m' x",
            "${RM:-rm} x",
            "${RM-rm} x",
            "FOO=1 rm x",
            "env rm e",
            "env -i FOO=1 BAR=2 rm x",
            "env -u HOME rm x",
            "command rm x",
            "builtin rm x",
            "exec rm x",
            "nice -n 5 rm x",
            "nohup rm x",
            "time rm x",
            "time -p rm x",
            "timeout 5 rm x",
            "timeout -s KILL 5 rm x",
            "xargs rm < list",
            "find . | xargs -I {} rm {}",
            "sudo rm x",
            "sudo -u root rm x",
            "bash -c 'rm f'",
            "sh -c \"rm g\"",
            "bash -lc 'cd /tmp && rm x'",
            "bash -x -c 'rm x'",
            "sh -c \"sh -c 'rm x'\"",
            "eval rm x",
            "eval 'rm x'",
            "echo; rm c",
            "echo $(rm d)",
            "echo \"$(rm d)\"",
            "echo `rm d`",
            "diff <(rm x) y",
            "(rm x)",
            "{ rm y; }",
            "true && rm x",
            "false || rm x",
            "ls | rm x",
            "rm x > /dev/null 2>&1",
            "2>/dev/null rm x",
            "nohup env FOO=1 /usr/bin/rm x &",
            "env - rm x",
            "exec -a name rm x",
            "find . | xargs -i rm {}",
            "stdbuf -oL rm x",
            "setsid -f rm x",
            "ionice -c 3 rm x",
            "busybox rm x",
            "busybox sh -c 'rm x'",
            "fish -c 'rm x'",
        ];
        let missed: Vec<&str> = disguised
            .iter()
            .copied()
            .filter(|line| !sees_rm(line))
            .collect();
        assert_eq!(missed, Vec::<&str>::new());
    }

    #[test]
    fn other_commands_are_not_taken_for_it() {
        for line in [
            "echo rm",
            "echo 'rm x'",
            "grep -r rm .",
            "git rm --cached x",
            "cat rm.txt",
            "ls > rm",
            "printf '%s' \"$(echo hi)\"",
        ] {
            assert!(!sees_rm(line), "{line}: {:?}", forms(line));
        }
    }

    #[test]
    fn any_text_lexes_without_panicking() {
        for line in [
            "",
            "\\",
            "'",
            "\"",
            "$",
            "$(",
            "${",
            "$'",
            "`",
            "<(",
            "$'\\x",
            "$'\\7",
            "a\\\nb",
            ")))",
            "{{{",
            "sh -c",
            "env -u",
            "timeout",
            "eval",
            "\"$(\"",
            "${:-}",
            "$'\\xZZ'",
            "é$'\\377'",
        ] {
            let _ = forms(line);
        }
    }
}
