//! The dedup backends the suite runs on.

use std::sync::Arc;
use std::time::Duration;

use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore, StoreError, Transition};

/// A dedup backend under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The in-process moka store.
    Memory,
}

impl Backend {
    /// Every backend compiled in.
    pub fn all() -> Vec<Backend> {
        vec![Backend::Memory]
    }

    /// Its name in test names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
        }
    }

    /// A fresh store, or `Ok(None)` when its server is missing outside CI.
    ///
    /// # Errors
    ///
    /// When the server is missing under CI, or the store cannot be built.
    pub async fn store(self) -> Result<Option<Arc<dyn DedupStore>>, String> {
        match self {
            Self::Memory => Ok(Some(Arc::new(MemoryStore::new()))),
        }
    }

    /// A store of this kind whose server cannot be reached.
    ///
    /// # Errors
    ///
    /// When the store cannot be built.
    pub async fn unreachable(self) -> Result<Arc<dyn DedupStore>, String> {
        match self {
            Self::Memory => Ok(Arc::new(DownStore)),
        }
    }
}

/// A store that is always down (the in-process store cannot be).
#[derive(Debug)]
pub struct DownStore;

fn down() -> StoreError {
    StoreError::unavailable(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "store is down",
    ))
}

#[async_trait::async_trait]
impl DedupStore for DownStore {
    async fn claim(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Claim, StoreError> {
        Err(down())
    }
    async fn complete(
        &self,
        _: &str,
        _: ClaimToken,
        _: Duration,
    ) -> Result<Transition, StoreError> {
        Err(down())
    }
    async fn release(&self, _: &str, _: ClaimToken) -> Result<Transition, StoreError> {
        Err(down())
    }
    async fn extend(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Transition, StoreError> {
        Err(down())
    }
}
