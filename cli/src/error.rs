//! Why a command failed, and its exit code.

/// A failed command: exit `1` when the check failed (a delivery refused, a
/// request that does not verify), `2` on bad input or a connection error.
/// The message is one line and never holds a secret or a request body.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
    /// Already reported on stdout (the command's own report says why).
    pub(crate) reported: bool,
}

impl Failure {
    /// Bad input, or a server that cannot be reached: exit 2.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
            reported: false,
        }
    }

    /// The check failed, and the command's report already said why: exit 1.
    pub(crate) fn check_reported(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
            reported: true,
        }
    }
}

impl From<webhooks_core::scheme::registry::RegistryError> for Failure {
    fn from(e: webhooks_core::scheme::registry::RegistryError) -> Self {
        Self::usage(e.to_string())
    }
}

impl From<webhooks_core::ConfigError> for Failure {
    fn from(e: webhooks_core::ConfigError) -> Self {
        Self::usage(e.to_string())
    }
}
