//! Shell quoting of argv for `commands.log`, so a recorded line can be pasted
//! back into a shell and yields the same argv.
//!
//! Rules, per word:
//! - words made only of `A-Z a-z 0-9 _ @ % + = : , . / -` are written bare;
//! - the empty word is `''`;
//! - other printable text goes in single quotes, a `'` inside becoming `'\''`;
//! - control characters, invisible Unicode (every format and default-ignorable
//!   character: bidi controls, zero-width and tag characters, variation selectors) and bytes that are not UTF-8 are written in ANSI-C
//!   quotes, `$'\n'`, `$'\t'`, `$'\xff'`, next to the quoted printable parts
//!   (`'a b'$'\n''c'`). A recorded line therefore never spans two lines and
//!   never hides characters from a terminal.
//!
//! `$'...'` is understood by bash, zsh, ksh, busybox sh and POSIX.1-2024 sh;
//! older dash (Debian 12's `/bin/sh`) lacks it, so paste such lines into bash.

/// Characters that never need quoting anywhere in a word.
fn is_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b)
}

/// Characters a terminal would not show faithfully: controls, and the format and
/// default-ignorable characters of [`crate::invisible`].
fn needs_escape(c: char) -> bool {
    c.is_control() || crate::invisible::is_invisible(c)
}

enum Segment {
    Text(String),
    Escaped(Vec<u8>),
}

fn push_escaped(segs: &mut Vec<Segment>, bytes: &[u8]) {
    if let Some(Segment::Escaped(v)) = segs.last_mut() {
        v.extend_from_slice(bytes);
    } else {
        segs.push(Segment::Escaped(bytes.to_vec()));
    }
}

fn push_text(segs: &mut Vec<Segment>, c: char) {
    if let Some(Segment::Text(s)) = segs.last_mut() {
        s.push(c);
    } else {
        segs.push(Segment::Text(c.to_string()));
    }
}

fn single_quote(out: &mut String, s: &str) {
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
}

fn ansi_c_quote(out: &mut String, bytes: &[u8]) {
    out.push_str("$'");
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            _ => {
                out.push_str("\\x");
                out.push_str(&crate::layout::hex_encode(&[b]));
            }
        }
    }
    out.push('\'');
}

/// Quotes one word.
pub fn quote_arg(word: &[u8]) -> String {
    if word.is_empty() {
        return "''".to_owned();
    }
    if word.iter().all(|&b| is_safe(b)) {
        // All ASCII by construction.
        return String::from_utf8_lossy(word).into_owned();
    }
    let mut segs = Vec::new();
    for chunk in word.utf8_chunks() {
        for c in chunk.valid().chars() {
            if needs_escape(c) {
                let mut buf = [0u8; 4];
                push_escaped(&mut segs, c.encode_utf8(&mut buf).as_bytes());
            } else {
                push_text(&mut segs, c);
            }
        }
        if !chunk.invalid().is_empty() {
            push_escaped(&mut segs, chunk.invalid());
        }
    }
    let mut out = String::with_capacity(word.len() + 2);
    for seg in &segs {
        match seg {
            Segment::Text(s) if s.bytes().all(is_safe) => out.push_str(s),
            Segment::Text(s) => single_quote(&mut out, s),
            Segment::Escaped(b) => ansi_c_quote(&mut out, b),
        }
    }
    out
}

/// Words that would change meaning as the first word of a command.
fn is_special_command_word(word: &[u8]) -> bool {
    word.contains(&b'=')
        || matches!(
            word,
            b"if"
                | b"then"
                | b"else"
                | b"elif"
                | b"fi"
                | b"case"
                | b"esac"
                | b"for"
                | b"while"
                | b"until"
                | b"do"
                | b"done"
                | b"in"
                | b"function"
                | b"select"
                | b"time"
                | b"coproc"
        )
}

/// Quotes a whole argv, words separated by one space. The first word is
/// also quoted when it would read as an assignment or a reserved word.
pub fn quote_argv<I, W>(argv: I) -> String
where
    I: IntoIterator<Item = W>,
    W: AsRef<[u8]>,
{
    let mut out = String::new();
    for (i, w) in argv.into_iter().enumerate() {
        let w = w.as_ref();
        if i > 0 {
            out.push(' ');
        }
        if i == 0 && !w.is_empty() && w.iter().all(|&b| is_safe(b)) && is_special_command_word(w) {
            single_quote(&mut out, &String::from_utf8_lossy(w));
        } else {
            out.push_str(&quote_arg(w));
        }
    }
    out
}

/// Text safe to show on a terminal: characters it would not show faithfully
/// (controls, bidi overrides, zero-width characters) are written as Rust
/// escapes (`\n`, `\u{1b}`, `\u{202e}`); other text is returned unchanged.
pub fn escape_hidden(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Reads one word written by [`quote_arg`] at the start of `text`, up to an
/// unquoted space or the end. Returns the word's bytes and the rest of the
/// text (starting at the space). `None` when the quoting is malformed.
pub fn unquote_word(text: &str) -> Option<(Vec<u8>, &str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b' ' => break,
            b'\'' => {
                let len = b.get(i + 1..)?.iter().position(|&c| c == b'\'')?;
                out.extend_from_slice(&b[i + 1..i + 1 + len]);
                i += len + 2;
            }
            b'$' if b.get(i + 1) == Some(&b'\'') => i = ansi_c_unquote(b, i + 2, &mut out)?,
            b'\\' => {
                // Outside quotes a backslash escapes the next byte (`'\''`).
                out.push(*b.get(i + 1)?);
                i += 2;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    // The empty word is always written `''`, never as nothing.
    (i > 0).then(|| (out, &text[i..]))
}

/// Decodes the body of `$'...'` starting at `b[i]`; returns the index after
/// the closing quote.
fn ansi_c_unquote(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    loop {
        match *b.get(i)? {
            b'\'' => return Some(i + 1),
            b'\\' => {
                let (byte, used) = match *b.get(i + 1)? {
                    b'n' => (b'\n', 2),
                    b't' => (b'\t', 2),
                    b'r' => (b'\r', 2),
                    b'\\' => (b'\\', 2),
                    b'\'' => (b'\'', 2),
                    b'x' => (hex_byte(b.get(i + 2..i + 4)?)?, 4),
                    _ => return None,
                };
                out.push(byte);
                i += used;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    let s = std::str::from_utf8(pair).ok()?;
    u8::from_str_radix(s, 16).ok()
}

/// Splits a line written by [`quote_argv`] back into the argv's bytes.
/// `None` when the quoting is malformed.
pub fn unquote_argv(text: &str) -> Option<Vec<Vec<u8>>> {
    let mut argv = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (word, after) = unquote_word(rest)?;
        argv.push(word);
        rest = match after.strip_prefix(' ') {
            Some(r) if !r.is_empty() => r,
            Some(_) => return None,
            None => after,
        };
    }
    Some(argv)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn plain_and_quoted_words() {
        assert_eq!(quote_arg(b"ls"), "ls");
        assert_eq!(quote_arg(b"/usr/bin/env"), "/usr/bin/env");
        assert_eq!(quote_arg(b"--opt=a,b:c"), "--opt=a,b:c");
        assert_eq!(quote_arg(b""), "''");
        assert_eq!(quote_arg(b"a b"), "'a b'");
        assert_eq!(quote_arg(b"it's"), "'it'\\''s'");
        assert_eq!(quote_arg(b"$HOME"), "'$HOME'");
        assert_eq!(quote_arg(b"~"), "'~'");
        assert_eq!(quote_arg(b"a\nb"), "a$'\\n'b");
        assert_eq!(quote_arg(b"x y\n"), "'x y'$'\\n'");
        assert_eq!(quote_arg(b"\xff\xfe"), "$'\\xff\\xfe'");
        assert_eq!(quote_arg("é".as_bytes()), "'é'");
        assert_eq!(quote_arg("a\u{202E}b".as_bytes()), "a$'\\xe2\\x80\\xae'b");
        assert_eq!(quote_argv(["FOO=1", "x"]), "'FOO=1' x");
        assert_eq!(quote_argv(["env", "FOO=1"]), "env FOO=1");
        assert_eq!(quote_argv(["if"]), "'if'");
    }

    #[test]
    fn quoted_lines_are_single_lines() {
        let q = quote_argv([&b"a\nb\r\n"[..], b"\x1b[31m", b"\x00"]);
        assert!(
            !q.contains('\n') && !q.contains('\r') && !q.contains('\x1b'),
            "{q}"
        );
    }

    /// Runs `printf '%s\0' <quoted argv>` in `shell` and splits the output.
    fn through_shell(shell: &str, argv: &[&[u8]]) -> Vec<Vec<u8>> {
        let line = format!("printf '%s\\0' {}", quote_argv(argv));
        let out = Command::new(shell)
            .arg("-c")
            .arg(OsStr::from_bytes(line.as_bytes()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell} failed on {line}: {out:?}");
        let mut words: Vec<Vec<u8>> = out.stdout.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
        assert_eq!(words.pop(), Some(Vec::new()), "output ends with NUL");
        words
    }

    #[test]
    fn printable_argv_round_trips_through_posix_sh() {
        let argv: &[&[u8]] = &[
            b"plain",
            b"two words",
            b"it's",
            b"\"double\"",
            b"$HOME `id` $(id)",
            b"back\\slash",
            b"*.rs",
            b"~",
            b"#comment",
            b"!bang",
            b"",
            b"a;b|c&d>e<f",
            "unicodé ✓".as_bytes(),
            b"{a,b}",
        ];
        assert_eq!(through_shell("sh", argv), argv);
    }

    #[test]
    fn tricky_argv_round_trips_through_bash() {
        let argv: &[&[u8]] = &[
            b"line1\nline2",
            b"tab\there",
            b"cr\r",
            b"\xff\xfe not utf-8 \x80",
            b"esc \x1b[31m red",
            "bidi \u{202E}txt".as_bytes(),
            b"it's $x\n'",
            b"\x7f",
            b"-",
            b"\n",
        ];
        // Never a silent pass: without bash this test cannot check anything.
        assert!(
            Command::new("bash").arg("-c").arg("true").status().is_ok(),
            "this test needs bash (Debian package bash): scripts/test installs it"
        );
        assert_eq!(through_shell("bash", argv), argv);
    }

    #[test]
    fn quoted_words_unquote_to_the_same_bytes() {
        let words: &[&[u8]] = &[
            b"plain",
            b"",
            b"two words",
            b"it's",
            b"$HOME `id`",
            b"back\\slash",
            b"line1\nline2",
            b"\xff\xfe not utf-8 \x80",
            b"esc \x1b[31m",
            "bidi \u{202E}txt é".as_bytes(),
            b"it's $x\n'",
            b"\x00",
            b"FOO=1",
            b"if",
        ];
        for w in words {
            let q = quote_arg(w);
            assert_eq!(unquote_word(&q), Some((w.to_vec(), "")), "{q}");
        }
        let q = quote_argv(words);
        assert_eq!(unquote_argv(&q).unwrap(), words, "{q}");
        assert_eq!(unquote_argv("").unwrap(), Vec::<Vec<u8>>::new());
        let (w, rest) = unquote_word("'/a b' -- x").unwrap();
        assert_eq!((w.as_slice(), rest), (&b"/a b"[..], " -- x"));
    }

    #[test]
    fn malformed_quoting_is_rejected() {
        for bad in ["'open", "$'\\q'", "$'\\x4", "a\\", "a  b", "a "] {
            assert_eq!(unquote_argv(bad), None, "{bad:?}");
        }
        assert_eq!(unquote_word(""), None);
        assert_eq!(unquote_word(" x"), None);
    }

    #[test]
    fn hidden_characters_are_escaped_for_display() {
        assert!(matches!(
            escape_hidden("plain é"),
            std::borrow::Cow::Borrowed("plain é")
        ));
        assert_eq!(escape_hidden("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(escape_hidden("x\u{202E}y"), "x\\u{202e}y");
        // Tag characters spell hidden ASCII; a variation selector, a Hangul filler and
        // U+034F are invisible too.
        assert_eq!(
            escape_hidden("ok\u{E0069}\u{E0067}\u{FE0F}\u{3164}\u{034F}."),
            "ok\\u{e0069}\\u{e0067}\\u{fe0f}\\u{3164}\\u{34f}."
        );
        assert_eq!(
            quote_arg("a\u{E0041}b".as_bytes()),
            "a$'\\xf3\\xa0\\x81\\x81'b"
        );
    }
}
