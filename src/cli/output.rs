//! Output of the commands: `-o table` (for people), `-o json` and `-o yaml` (for
//! scripts: the same value, serialized), and [`sanitize`] for text that comes from Git
//! or from the cluster before it reaches a terminal.

use std::io::Write as _;

use serde::Serialize;

/// Standard output was closed by its reader (`plumb diff | head`: `head` exits after
/// ten lines; the next write fails with `EPIPE`). [`super::main`] ends such a command
/// quietly with exit code 0, as a command whose reader needs no more; it never comes
/// from anything but writing standard output.
#[derive(Debug, thiserror::Error)]
#[error("standard output closed by its reader")]
pub struct StdoutClosed;

/// Writes `text` to standard output (what `out!`/`outln!` call).
///
/// # Errors
/// [`StdoutClosed`] on a closed pipe; any other write error as it is.
pub fn write_out(text: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing standard output")),
    }
}

/// Writes `text` to standard error (what `err!`/`errln!` call); a failed write is
/// dropped: diagnostics have nowhere else to go, and a closed standard error never
/// ends a command.
pub fn write_err(text: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(text);
}

/// Whether `e` is (or was caused by) [`StdoutClosed`].
pub fn closed_stdout(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StdoutClosed>())
}

/// `-o table|wide|json|yaml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Columns and lines for people; text from Git shown with control characters escaped.
    #[default]
    Table,
    /// The table with more columns where a command has them (`plumb status`: the
    /// replica and shard that reconciled each application); else the table.
    Wide,
    /// One JSON document (pretty-printed).
    Json,
    /// One YAML document.
    Yaml,
}

impl Output {
    /// Whether this is a table for people (`table` or `wide`).
    pub fn is_table(self) -> bool {
        matches!(self, Output::Table | Output::Wide)
    }
}

/// Prints `value` as JSON or YAML, or the text `table` makes, to standard output.
///
/// # Errors
/// `value` cannot be serialized; [`StdoutClosed`].
pub fn emit<T: Serialize>(output: Output, value: &T, table: impl FnOnce() -> String) -> anyhow::Result<()> {
    write_out(format_args!("{}", render(output, value, table)?))
}

/// What [`emit`] prints.
///
/// # Errors
/// `value` cannot be serialized.
pub fn render<T: Serialize>(output: Output, value: &T, table: impl FnOnce() -> String) -> anyhow::Result<String> {
    Ok(match output {
        Output::Table | Output::Wide => table(),
        Output::Json => serde_json::to_string_pretty(value)? + "\n",
        Output::Yaml => {
            let text = serde_saphyr::to_string(value)?;
            if text.ends_with('\n') { text } else { text + "\n" }
        }
    })
}

/// `text` as it may be printed on a terminal: control characters (ESC, BEL, CR,
/// backspace, newlines, …; C0, DEL and C1) and the Unicode bidirectional overrides
/// are shown escaped (`\u{1b}`), never sent raw. A commit subject such as
/// `"fix\x1b]0;pwned\x07"` cannot then retitle the terminal, move the cursor or hide
/// text. Everything else is kept as is.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if c.is_control() || bidi {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let cases = [
            ("deploy web 1.2", "deploy web 1.2"),
            ("\x1b[2J\x1b[Hfake clean screen", "\\u{1b}[2J\\u{1b}[Hfake clean screen"),
            ("fix\x1b]0;pwned\x07 title", "fix\\u{1b}]0;pwned\\u{7} title"),
            ("a\rb\nc\td\x08", "a\\u{d}b\\u{a}c\\u{9}d\\u{8}"),
            ("\u{9b}31m C1 CSI, \x7f DEL", "\\u{9b}31m C1 CSI, \\u{7f} DEL"),
            ("abc\u{202e}txt.exe", "abc\\u{202e}txt.exe"),
            ("ünïcödé ✓ 日本", "ünïcödé ✓ 日本"),
        ];
        for (raw, shown) in cases {
            let got = sanitize(raw);
            assert_eq!(got, shown, "{raw:?}");
            assert!(!got.chars().any(char::is_control), "{got:?}");
        }
    }

    #[test]
    fn json_and_yaml_carry_no_raw_escape() {
        let value = serde_json::json!({"subject": "x\x1b[31mred"});
        for output in [Output::Json, Output::Yaml] {
            let text = render(output, &value, String::new).expect("serializes");
            assert!(!text.contains('\x1b'), "{output:?}: {text}");
            assert!(text.contains("red"), "{text}");
        }
        assert_eq!(render(Output::Table, &value, || "t\n".into()).expect("table"), "t\n");
    }
}
