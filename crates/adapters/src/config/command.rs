//! Command lines: a command as written in the file ([`CommandValue`]), one
//! ready to run ([`CommandLine`]), and the shell-like word splitting
//! ([`split_command`], [`join_command`]) that needs no shell.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::ConfigError;

/// A command as written in the file: a string or an argv array (the TOML
/// type tells which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandValue {
    /// `command = "cargo test --workspace"`.
    Text(String),
    /// `command = ["cargo", "test", "--workspace"]`.
    Argv(Vec<String>),
}

impl CommandValue {
    /// The command to run: an array as is, a string split by
    /// [`split_command`], or kept whole for `sh -c` when `shell`. `field`
    /// names the source in errors.
    pub fn resolve(&self, shell: bool, field: &str) -> Result<CommandLine, ConfigError> {
        let error = |message: String| ConfigError::Command {
            field: field.to_owned(),
            message,
        };
        match (self, shell) {
            (CommandValue::Argv(argv), false) => {
                if argv.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(error(
                        "the argv array is empty or its program is blank".into(),
                    ));
                }
                Ok(CommandLine::Argv(argv.clone()))
            }
            (CommandValue::Argv(_), true) => Err(error(
                "shell = true needs a string command, not an argv array".into(),
            )),
            (CommandValue::Text(text), true) => {
                if text.trim().is_empty() {
                    return Err(error("the shell command is empty".into()));
                }
                Ok(CommandLine::Shell(text.clone()))
            }
            (CommandValue::Text(text), false) => split_command(text)
                .map(CommandLine::Argv)
                .map_err(|e| error(e.to_string())),
        }
    }
}

impl Serialize for CommandValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CommandValue::Text(text) => s.serialize_str(text),
            CommandValue::Argv(argv) => argv.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CommandValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CommandVisitor;

        impl<'de> Visitor<'de> for CommandVisitor {
            type Value = CommandValue;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command string or an array of strings")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<CommandValue, E> {
                Ok(CommandValue::Text(v.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CommandValue, A::Error> {
                let mut argv = Vec::new();
                while let Some(word) = seq.next_element::<String>()? {
                    argv.push(word);
                }
                Ok(CommandValue::Argv(argv))
            }
        }

        d.deserialize_any(CommandVisitor)
    }
}

/// A command ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "command", rename_all = "snake_case")]
pub enum CommandLine {
    /// Program and arguments, run directly (no shell).
    Argv(Vec<String>),
    /// A script for `sh -c`.
    Shell(String),
}

impl fmt::Display for CommandLine {
    /// An argv is shown quoted so that [`split_command`] gives it back; a
    /// shell script is shown as is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandLine::Argv(argv) => f.write_str(&join_command(argv)),
            CommandLine::Shell(script) => f.write_str(script),
        }
    }
}

/// Why [`split_command`] refused a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// Nothing but whitespace.
    #[error("the command is empty")]
    Empty,
    /// A quote was opened and never closed.
    #[error("unterminated {quote} quote starting at character {position}")]
    UnterminatedQuote {
        /// `single` or `double`.
        quote: &'static str,
        /// 1-based character position of the opening quote.
        position: usize,
    },
    /// The line ends with a lone backslash.
    #[error("the command ends with a lone backslash")]
    TrailingBackslash,
    /// An unquoted character a shell would interpret.
    #[error(
        "unquoted {character:?} at character {position} needs a shell; quote it, \
         or run the command through sh -c '...' (shell = true in the config file)"
    )]
    ShellSyntax {
        /// The character.
        character: char,
        /// 1-based character position.
        position: usize,
    },
}

/// Splits a command line into words, shell-style but without a shell:
/// - blanks (space, tab, newline) separate words;
/// - `'…'` keeps everything literally;
/// - `"…"` keeps everything literally except `\"`, `\\`, `\$`, `` \` `` and
///   backslash-newline (removed);
/// - outside quotes a backslash makes the next character literal
///   (backslash-newline is removed);
/// - `""` and `''` give an empty word;
/// - no expansion of any kind: `~`, `*`, `?` are passed literally; unquoted
///   `| & ; < > ( )`, and unescaped `$` or backquote outside single quotes,
///   are refused ([`SplitError::ShellSyntax`]) because a reader would expect
///   a shell to act on them.
pub fn split_command(line: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().enumerate().map(|(i, c)| (i + 1, c)).peekable();
    while let Some((position, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                single_quoted(&mut chars, &mut word, position)?;
            }
            '"' => {
                in_word = true;
                double_quoted(&mut chars, &mut word, position)?;
            }
            '\\' => match chars.next() {
                Some((_, '\n')) => {}
                Some((_, c)) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err(SplitError::TrailingBackslash),
            },
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' => {
                return Err(SplitError::ShellSyntax {
                    character: c,
                    position,
                });
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err(SplitError::Empty);
    }
    Ok(words)
}

/// The rest of a single-quoted part (opened at `position`) onto `word`:
/// everything literally, up to the closing quote.
fn single_quoted(
    chars: &mut impl Iterator<Item = (usize, char)>,
    word: &mut String,
    position: usize,
) -> Result<(), SplitError> {
    loop {
        match chars.next() {
            Some((_, '\'')) => return Ok(()),
            Some((_, c)) => word.push(c),
            None => {
                return Err(SplitError::UnterminatedQuote {
                    quote: "single",
                    position,
                });
            }
        }
    }
}

/// The rest of a double-quoted part (opened at `position`) onto `word`, up
/// to the closing quote: literally except the escapes `\"`, `\\`, `\$`,
/// `` \` `` and backslash-newline; an unescaped `$` or backquote is refused.
fn double_quoted(
    chars: &mut impl Iterator<Item = (usize, char)>,
    word: &mut String,
    position: usize,
) -> Result<(), SplitError> {
    let unterminated = SplitError::UnterminatedQuote {
        quote: "double",
        position,
    };
    loop {
        match chars.next() {
            Some((_, '"')) => return Ok(()),
            Some((_, '\\')) => match chars.next() {
                Some((_, '\n')) => {}
                Some((_, c @ ('"' | '\\' | '$' | '`'))) => word.push(c),
                Some((_, c)) => {
                    word.push('\\');
                    word.push(c);
                }
                None => return Err(unterminated),
            },
            Some((at, c @ ('$' | '`'))) => {
                return Err(SplitError::ShellSyntax {
                    character: c,
                    position: at,
                });
            }
            Some((_, c)) => word.push(c),
            None => return Err(unterminated),
        }
    }
}

/// Joins words into a line [`split_command`] splits back into the same
/// words: plain words as is, others in single quotes (`'` written `'\''`).
pub fn join_command(words: &[String]) -> String {
    let mut line = String::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./:=,+@%^".contains(c));
        if plain {
            line.push_str(word);
        } else {
            line.push('\'');
            line.push_str(&word.replace('\'', r"'\''"));
            line.push('\'');
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn split_handles_quotes_and_escapes() {
        let check = |line: &str, expected: &[&str]| {
            assert_eq!(split_command(line), Ok(words(expected)), "{line:?}");
        };
        check("my-agent --json", &["my-agent", "--json"]);
        check("  a\t b\n c  ", &["a", "b", "c"]);
        check(r#"run "two words" 'it''s'"#, &["run", "two words", "its"]);
        check(r#"say 'it'\''s'"#, &["say", "it's"]);
        check(r#"x "a \"q\" \\ \$HOME \n""#, &["x", r#"a "q" \ $HOME \n"#]);
        check(r"a\ b c\\d", &["a b", r"c\d"]);
        check("a '' \"\"", &["a", "", ""]);
        check("line\\\ncontinued", &["linecontinued"]);
        check("'$HOME | `x`'", &["$HOME | `x`"]);
        check("glob *.rs ~/x", &["glob", "*.rs", "~/x"]);
        check(r"esc \| \$x", &["esc", "|", "$x"]);
    }

    #[test]
    fn split_refuses_what_needs_a_shell() {
        let check = |line: &str, expected: SplitError| {
            assert_eq!(split_command(line), Err(expected), "{line:?}");
        };
        check("", SplitError::Empty);
        check("   ", SplitError::Empty);
        check(
            "a 'b",
            SplitError::UnterminatedQuote {
                quote: "single",
                position: 3,
            },
        );
        check(
            "a \"b",
            SplitError::UnterminatedQuote {
                quote: "double",
                position: 3,
            },
        );
        check("a\\", SplitError::TrailingBackslash);
        check(
            "a | b",
            SplitError::ShellSyntax {
                character: '|',
                position: 3,
            },
        );
        check(
            "echo $HOME",
            SplitError::ShellSyntax {
                character: '$',
                position: 6,
            },
        );
        check(
            "echo \"$(id)\"",
            SplitError::ShellSyntax {
                character: '$',
                position: 7,
            },
        );
        check(
            "a>b",
            SplitError::ShellSyntax {
                character: '>',
                position: 2,
            },
        );
    }

    #[test]
    fn join_quotes_only_what_needs_it() {
        assert_eq!(
            join_command(&words(&["cargo", "test", "--", "--nocapture"])),
            "cargo test -- --nocapture"
        );
        assert_eq!(
            join_command(&words(&["say", "it's", "", "a b", "$x"])),
            r"say 'it'\''s' '' 'a b' '$x'"
        );
    }
}
