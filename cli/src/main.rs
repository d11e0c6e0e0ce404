//! `webhooks`: send signed test deliveries exactly as each provider would,
//! print signed headers, explain why a captured request does not verify, and
//! receive deliveries locally, all through webhooks-core's own signers and
//! verifiers.
//!
//! Exit codes: `0` success, `1` the check failed (a delivery refused, a
//! request that does not verify), `2` usage or connection error.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod body;
mod capture;
mod error;
mod fixtures;
mod http_client;
mod inbox;
mod listen;
mod output;
mod raw_http;
mod secret;
mod send;
mod sign;
mod signed;
mod tamper;
mod verify;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::error::Failure;
use crate::output::Out;

const EXAMPLES: &str = "\
Examples:
  webhooks send stripe http://localhost:3000/webhooks --event invoice.paid
  webhooks send github https://hooks.example.com/gh --tamper signature
  webhooks sign slack --body-file event.json --curl --url http://localhost:3000/slack
  webhooks verify stripe captured.http --secret whsec_...
  webhooks listen github --port 4000
  webhooks send hmac http://localhost:3000/acme --hmac-spec 'header=X-Acme-Signature;prefix=sha256='
  webhooks inbox --url sqlite://inbox.db stats
  webhooks events stripe

The secret comes from --secret, --secret-file or WEBHOOKS_SECRET; it is never printed.
Any other HMAC provider is the scheme `hmac`, described by --hmac-spec (or --hmac-spec-file).
Exit codes: 0 success, 1 the check failed, 2 usage or connection error.";

/// Send, sign, verify and receive webhooks as each provider does.
#[derive(Debug, Parser)]
#[command(name = "webhooks", version, after_help = EXAMPLES)]
struct Cli {
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sign a delivery and POST it as the provider would.
    Send(send::SendArgs),
    /// Print the signed headers (or a curl command, or the raw request) for a body.
    Sign(sign::SignArgs),
    /// Explain, check by check, whether a captured request verifies.
    Verify(verify::VerifyArgs),
    /// Receive deliveries locally through the library's own tower layer.
    Listen(listen::ListenArgs),
    /// Operate a durable inbox: stats, ls, show, replay, discard, purge, pause, resume, gates, tail, migrate, actions.
    Inbox(inbox::InboxArgs),
    /// List the built-in event fixtures of a scheme (or of every scheme).
    #[command(after_help = "Examples:\n  webhooks events stripe\n  webhooks events --json")]
    Events {
        /// The scheme (all schemes when omitted).
        scheme: Option<String>,
    },
    /// List the signing schemes, what each signs and its secret's format
    /// (and `hmac`: any other HMAC provider, described by --hmac-spec).
    #[command(after_help = "Examples:\n  webhooks schemes\n  webhooks schemes --json")]
    Schemes,
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  webhooks completions bash > /etc/bash_completion.d/webhooks\n  webhooks completions zsh > \"${fpath[1]}/_webhooks\"\n  webhooks completions fish > ~/.config/fish/completions/webhooks.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = Out::new(cli.json);
    let result = match cli.command {
        // One thread: `--repeat`'s senders share it, with no hand-off
        // between threads per request (the receiver keeps the other cores).
        Command::Send(args) => current_thread().and_then(|rt| rt.block_on(send::run(args, &out))),
        Command::Sign(args) => sign::run(args, &out),
        Command::Verify(args) => verify::run(args, &out),
        Command::Listen(args) => runtime().and_then(|rt| rt.block_on(listen::run(args, &out))),
        Command::Inbox(args) => runtime().and_then(|rt| rt.block_on(inbox::run(args, &out))),
        Command::Events { scheme } => fixtures::list(scheme.as_deref(), &out),
        Command::Schemes => fixtures::schemes(&out),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "webhooks", &mut std::io::stdout());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => out.failure(&failure),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("cannot start the async runtime: {e}")))
}

fn current_thread() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("cannot start the async runtime: {e}")))
}
