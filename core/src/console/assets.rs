//! The console's stylesheet and script, embedded in the binary (no CDN: the
//! pages work offline and under `Content-Security-Policy: default-src 'self'`).

/// The stylesheet.
pub(super) const CSS: &str = include_str!("assets/console.css");
/// The script: refresh while visible, selection, confirmations.
pub(super) const JS: &str = include_str!("assets/console.js");
