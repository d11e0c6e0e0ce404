//! Where the secret comes from: `--secret` (repeatable where several may
//! be tried), `--secret-file` or `WEBHOOKS_SECRET`. It is never printed.

use std::path::PathBuf;

use clap::Args;

use crate::error::Failure;

/// The secret options.
#[derive(Debug, Clone, Args)]
pub(crate) struct SecretArgs {
    /// The secret (or key) itself. Prefer --secret-file or WEBHOOKS_SECRET:
    /// a command line is visible to other users of the machine.
    // A PEM key starts with dashes: taken as the value, not as a flag (and
    // never echoed back in clap's "unexpected argument" error).
    #[arg(
        long,
        env = "WEBHOOKS_SECRET",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub(crate) secret: Vec<String>,
    /// A file holding the secret (one per line; surrounding whitespace
    /// ignored), or a PEM key.
    #[arg(long, value_name = "PATH")]
    pub(crate) secret_file: Option<PathBuf>,
}

impl SecretArgs {
    /// Every secret given, in order: `--secret`s, then the file's lines.
    pub(crate) fn all(&self) -> Result<Vec<String>, Failure> {
        let mut secrets: Vec<String> = self.secret.clone();
        if let Some(path) = &self.secret_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!("cannot read --secret-file {}: {e}", path.display()))
            })?;
            if text.trim_start().starts_with("-----BEGIN") {
                // A PEM key (Amazon SNS's RSA key): the whole file is one.
                secrets.push(text.trim().to_owned());
            } else {
                secrets.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        if secrets.is_empty() {
            return Err(Failure::usage(
                "no secret: give --secret, --secret-file or WEBHOOKS_SECRET",
            ));
        }
        Ok(secrets)
    }

    /// The one secret to sign with (the first given).
    pub(crate) fn first(&self) -> Result<String, Failure> {
        Ok(self.all()?.swap_remove(0))
    }
}
