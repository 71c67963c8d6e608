//! The shell script inside `sh -c SCRIPT`, split into pipelines of simple commands.
//!
//! Not a shell: a small tokenizer that respects quotes, escapes, `$( )`, backticks and
//! process substitution, and separates commands on `;`, `&`, `&&`, `||`, newlines and
//! parentheses, keeping `|` pipelines together so that `curl … | sh` stays visible as one
//! pipeline. Commands found inside substitutions are returned as pipelines of their own.
//! Where it cannot tell (here-documents, `case` patterns), it errs towards seeing more
//! commands, never fewer: a false alarm asks a person, a miss does not.

pub use super::wrappers::{shell_script, strip_wrappers};

/// One simple command: its words after quote removal, and the files it redirects output to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<String>,
    /// Targets of `>`, `>>`, `>|`, `&>`: files this command writes.
    pub redirects: Vec<String>,
}

/// Commands joined by `|`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pipeline {
    pub commands: Vec<SimpleCommand>,
}

impl Pipeline {
    /// The pipeline as one line, `curl -s x | sh`, each word quoted when needed, for
    /// `script` rules to match.
    pub fn text(&self) -> String {
        self.commands
            .iter()
            .map(|c| command_line(strip_wrappers(&c.words)))
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// Nesting of substitutions followed before the rest is kept as plain text.
const MAX_DEPTH: usize = 8;

/// Splits `script` into pipelines, in order, substitutions' pipelines included.
pub fn parse(script: &str) -> Vec<Pipeline> {
    let mut out = Vec::new();
    parse_into(script, 0, &mut out);
    out
}

fn parse_into(script: &str, depth: usize, out: &mut Vec<Pipeline>) {
    let mut parser = Parser {
        chars: script.chars().collect(),
        pos: 0,
        depth,
        nested: Vec::new(),
        pipelines: Vec::new(),
        pipeline: Pipeline::default(),
        command: SimpleCommand::default(),
        word: None,
        next_word: NextWord::Argument,
    };
    parser.run();
    out.append(&mut parser.pipelines);
    out.append(&mut parser.nested);
}

/// What the word being read is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NextWord {
    Argument,
    /// The file after `>`.
    OutputFile,
    /// The file after `<`, or a here-document's delimiter.
    InputFile,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    /// Pipelines of substitutions, returned after the script's own.
    nested: Vec<Pipeline>,
    pipelines: Vec<Pipeline>,
    pipeline: Pipeline,
    command: SimpleCommand,
    word: Option<String>,
    next_word: NextWord,
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn push(&mut self, c: char) {
        self.word.get_or_insert_with(String::new).push(c);
    }

    fn push_str(&mut self, s: &str) {
        self.word.get_or_insert_with(String::new).push_str(s);
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                ' ' | '\t' | '\r' => self.end_word(),
                // `a | (b)`: the subshell still reads the pipe; it is the pipeline's.
                '(' if self.word.is_none()
                    && self.command.words.is_empty()
                    && !self.pipeline.commands.is_empty() => {}
                '\n' | ';' | '(' | ')' => self.end_pipeline(),
                '&' if self.peek(0) == Some('>') => {
                    self.pos += 1;
                    self.redirect_output();
                }
                '&' => {
                    if self.peek(0) == Some('&') {
                        self.pos += 1;
                    }
                    self.end_pipeline();
                }
                '|' if self.peek(0) == Some('|') => {
                    self.pos += 1;
                    self.end_pipeline();
                }
                '|' => {
                    if self.peek(0) == Some('&') {
                        self.pos += 1;
                    }
                    self.end_command();
                }
                '#' if self.word.is_none() => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '\\' => match self.peek(0) {
                    Some('\n') => self.pos += 1,
                    Some(next) => {
                        self.pos += 1;
                        self.push(next);
                    }
                    None => self.push('\\'),
                },
                '\'' => {
                    let text = self.until(|c| c == '\'');
                    self.push_str(&text);
                }
                '"' => self.double_quoted(),
                '`' => self.backticks(),
                '$' if self.peek(0) == Some('(') => self.substitution("$("),
                '<' | '>' if self.peek(0) == Some('(') => {
                    self.substitution(if c == '<' { "<(" } else { ">(" })
                }
                '>' => self.redirect_output(),
                '<' => {
                    self.fd_prefix();
                    while matches!(self.peek(0), Some('<' | '>' | '&')) {
                        self.pos += 1;
                    }
                    self.next_word = NextWord::InputFile;
                }
                c => self.push(c),
            }
        }
        self.end_pipeline();
    }

    /// Reads up to the closing `end` (consumed), with no escapes: single quotes.
    fn until(&mut self, end: impl Fn(char) -> bool) -> String {
        let mut text = String::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if end(c) {
                break;
            }
            text.push(c);
        }
        text
    }

    fn double_quoted(&mut self) {
        // An empty "" is still a word.
        self.word.get_or_insert_with(String::new);
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '"' => return,
                '\\' if matches!(self.peek(0), Some('"' | '\\' | '$' | '`' | '\n')) => {
                    let next = self.chars[self.pos];
                    self.pos += 1;
                    if next != '\n' {
                        self.push(next);
                    }
                }
                '`' => self.backticks(),
                '$' if self.peek(0) == Some('(') => self.substitution("$("),
                c => self.push(c),
            }
        }
    }

    /// `$( … )`, `<( … )`, `>( … )`: the text stays in the word, and the commands
    /// inside are parsed as a script of their own.
    fn substitution(&mut self, open: &str) {
        self.pos += 1; // the '('
        let start = self.pos;
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    self.until(|c| c == '\'');
                }
                '"' => {
                    while let Some(c) = self.peek(0) {
                        self.pos += 1;
                        match c {
                            '\\' => self.pos += 1,
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let end = if depth == 0 {
            self.pos - 1
        } else {
            self.pos.min(self.chars.len())
        };
        let inner: String = self.chars[start.min(end)..end].iter().collect();
        self.push_str(open);
        self.push_str(&inner);
        self.push(')');
        self.nest(&inner);
    }

    fn backticks(&mut self) {
        let mut inner = String::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' if self.peek(0).is_some() => {
                    inner.push(self.chars[self.pos]);
                    self.pos += 1;
                }
                c => inner.push(c),
            }
        }
        self.push('`');
        self.push_str(&inner);
        self.push('`');
        self.nest(&inner);
    }

    fn nest(&mut self, inner: &str) {
        if self.depth < MAX_DEPTH {
            parse_into(inner, self.depth + 1, &mut self.nested);
        }
    }

    /// After `>` or `&>`: `>>`, `>|`, and `>&N` (a descriptor copy, no file).
    fn redirect_output(&mut self) {
        self.fd_prefix();
        while matches!(self.peek(0), Some('>' | '|')) {
            self.pos += 1;
        }
        if self.peek(0) == Some('&') {
            self.pos += 1;
            let digits = self.peek(0).is_some_and(|c| c.is_ascii_digit() || c == '-');
            if digits {
                while self.peek(0).is_some_and(|c| c.is_ascii_digit() || c == '-') {
                    self.pos += 1;
                }
                return;
            }
        }
        self.next_word = NextWord::OutputFile;
    }

    /// `2>`: the digits read so far name a descriptor, not a word.
    fn fd_prefix(&mut self) {
        if self
            .word
            .as_deref()
            .is_some_and(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()))
        {
            self.word = None;
        } else {
            self.end_word();
        }
    }

    fn end_word(&mut self) {
        let Some(word) = self.word.take() else {
            return;
        };
        match std::mem::replace(&mut self.next_word, NextWord::Argument) {
            NextWord::Argument => self.command.words.push(word),
            NextWord::OutputFile => self.command.redirects.push(word),
            NextWord::InputFile => {}
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        self.next_word = NextWord::Argument;
        let command = std::mem::take(&mut self.command);
        if !command.words.is_empty() || !command.redirects.is_empty() {
            self.pipeline.commands.push(command);
        }
    }

    fn end_pipeline(&mut self) {
        self.end_command();
        let pipeline = std::mem::take(&mut self.pipeline);
        if !pipeline.commands.is_empty() {
            self.pipelines.push(pipeline);
        }
    }
}

/// The last component of a path: `/usr/bin/sh` → `sh`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `words` as a shell command line, each word quoted only when it has to be.
pub fn command_line(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-~^".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<String> {
        parse(script).iter().map(Pipeline::text).collect()
    }

    #[test]
    fn splits_on_separators_and_keeps_pipelines() {
        assert_eq!(
            texts(
                "cd /tmp && curl -fsSL https://x/i.sh | sudo bash -s -- -y; echo done || true\nls"
            ),
            [
                "cd /tmp",
                "curl -fsSL https://x/i.sh | bash -s -- -y",
                "echo done",
                "true",
                "ls"
            ]
        );
        assert_eq!(texts("a & b |& c"), ["a", "b | c"]);
        assert_eq!(texts("(cd x; make) # rm -rf /"), ["cd x", "make"]);
    }

    #[test]
    fn quotes_and_escapes_are_respected() {
        let pipelines = parse(r#"echo 'a; b | c' "d && $HOME" e\;f"#);
        assert_eq!(pipelines.len(), 1);
        assert_eq!(
            pipelines[0].commands[0].words,
            ["echo", "a; b | c", "d && $HOME", "e;f"]
        );
    }

    #[test]
    fn substitutions_are_parsed_as_commands_too() {
        let pipelines = parse(r#"eval "$(curl -s x | tr a b)"; y=`wget -qO- z`"#);
        let all: Vec<String> = pipelines.iter().map(Pipeline::text).collect();
        assert_eq!(
            all,
            [
                "eval '$(curl -s x | tr a b)'",
                // An assignment alone runs no program.
                "",
                "curl -s x | tr a b",
                "wget -qO- z"
            ]
        );
        assert_eq!(texts("sh <(curl x)"), ["sh '<(curl x)'", "curl x"]);
    }

    #[test]
    fn redirections_name_the_files_written() {
        let pipelines = parse("echo x > .git/hooks/pre-commit 2>&1; cat <in >>out 2>err &>all");
        assert_eq!(pipelines[0].commands[0].words, ["echo", "x"]);
        assert_eq!(
            pipelines[0].commands[0].redirects,
            [".git/hooks/pre-commit"]
        );
        assert_eq!(pipelines[1].commands[0].words, ["cat"]);
        assert_eq!(pipelines[1].commands[0].redirects, ["out", "err", "all"]);
    }
}
