//! Collecting a request body up to the receiver's limit, as the adapters do.

use bytes::{Buf, Bytes, BytesMut};

use crate::Rejection;

/// A body's chunks, collected up to a limit: what every adapter's body read
/// does with the chunks its framework hands it.
///
/// A chunk that would take the body past the limit is refused before it is
/// kept ([`Rejection::PayloadTooLarge`]). Chunks are kept as they arrive,
/// without a copy (they are usually slices of the server's read buffer, so
/// copying them would hold that memory twice); [`finish`](Self::finish)
/// hands a body of one chunk on as is and joins several once.
///
/// ```
/// use bytes::Bytes;
/// use webhooks_core::{BodyCollector, Rejection};
///
/// let mut body = BodyCollector::new(8);
/// body.push(Bytes::from_static(b"{\"a\""))?;
/// body.push(Bytes::from_static(b":1}"))?;
/// assert_eq!(body.finish(), Bytes::from_static(b"{\"a\":1}"));
///
/// let mut body = BodyCollector::new(4);
/// assert!(matches!(
///     body.push(Bytes::from_static(b"12345")),
///     Err(Rejection::PayloadTooLarge { limit: 4 })
/// ));
/// # Ok::<(), Rejection>(())
/// ```
#[derive(Debug, Default)]
pub struct BodyCollector {
    limit: usize,
    read: usize,
    first: Option<Bytes>,
    rest: Vec<Bytes>,
}

impl BodyCollector {
    /// An empty body that may grow to `limit` bytes.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Adds the next chunk.
    ///
    /// # Errors
    ///
    /// [`Rejection::PayloadTooLarge`] when the body would exceed the limit;
    /// the chunk is not kept.
    pub fn push(&mut self, chunk: Bytes) -> Result<(), Rejection> {
        self.read = match self.read.checked_add(chunk.len()) {
            Some(total) if total <= self.limit => total,
            _ => return Err(Rejection::PayloadTooLarge { limit: self.limit }),
        };
        if chunk.is_empty() {
            return Ok(());
        }
        match self.first {
            None => self.first = Some(chunk),
            Some(_) => self.rest.push(chunk),
        }
        Ok(())
    }

    /// Adds the next chunk from any [`Buf`] (an HTTP body's frame data):
    /// checked against the limit before it is turned into [`Bytes`], which
    /// copies a `Buf` that is not already one.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push).
    pub fn push_buf(&mut self, mut data: impl Buf) -> Result<(), Rejection> {
        let len = data.remaining();
        if self.read.saturating_add(len) > self.limit {
            return Err(Rejection::PayloadTooLarge { limit: self.limit });
        }
        self.push(data.copy_to_bytes(len))
    }

    /// The bytes read so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.read
    }

    /// Whether nothing was read yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.read == 0
    }

    /// The whole body: its one chunk as is, or the chunks joined.
    #[must_use]
    pub fn finish(self) -> Bytes {
        let Some(first) = self.first else {
            return Bytes::new();
        };
        if self.rest.is_empty() {
            return first;
        }
        let mut joined = BytesMut::with_capacity(self.read);
        joined.extend_from_slice(&first);
        for chunk in &self.rest {
            joined.extend_from_slice(chunk);
        }
        joined.freeze()
    }
}
