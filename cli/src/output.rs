//! Text and JSON output: colour only on a terminal and never with
//! `NO_COLOR` (anstream strips the styles otherwise), one JSON document on
//! stdout with `--json`.

use std::io::Write as _;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};

use crate::error::Failure;

/// Where a command writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Out {
    pub(crate) json: bool,
}

/// Green: accepted, verified.
pub(crate) const OK: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
/// Red: refused, failed.
pub(crate) const BAD: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
/// Yellow: a hint.
pub(crate) const HINT: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
/// Dim: details.
pub(crate) const DIM: Style = Style::new().dimmed();
/// Bold: names.
pub(crate) const BOLD: Style = Style::new().bold();

impl Out {
    pub(crate) fn new(json: bool) -> Self {
        Self { json }
    }

    /// Writes a line of text (styles stripped unless stdout is a colour
    /// terminal without `NO_COLOR`).
    pub(crate) fn line(&self, text: impl std::fmt::Display) {
        let mut stdout = anstream::stdout().lock();
        let _ = writeln!(stdout, "{text}");
    }

    /// Writes a warning on stderr (JSON output stays one document on stdout).
    pub(crate) fn warn(&self, text: impl std::fmt::Display) {
        let mut stderr = anstream::stderr().lock();
        let _ = writeln!(stderr, "{HINT}warning:{HINT:#} {text}");
    }

    /// Writes `text` as it is, without a final newline.
    pub(crate) fn raw(&self, text: &str) {
        let mut stdout = anstream::stdout().lock();
        let _ = write!(stdout, "{text}");
    }

    /// Writes `value` as one JSON document.
    pub(crate) fn json(&self, value: &serde_json::Value) {
        let mut stdout = std::io::stdout().lock();
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        let _ = writeln!(stdout, "{text}");
    }

    /// Reports `failure` (unless already reported) and gives its exit code.
    pub(crate) fn failure(&self, failure: &Failure) -> ExitCode {
        if !failure.reported {
            if self.json {
                self.json(&serde_json::json!({
                    "error": failure.message,
                    "exit_code": failure.code,
                }));
            } else {
                let mut stderr = anstream::stderr().lock();
                let _ = writeln!(stderr, "{BAD}error:{BAD:#} {}", failure.message);
            }
        }
        ExitCode::from(failure.code)
    }
}

/// `text` styled with `style`.
pub(crate) fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}
