//! Collecting a request body up to the receiver's limit, as the adapters do.

use bytes::{Buf, Bytes, BytesMut};

use crate::Rejection;

/// A body's chunks, collected up to a limit: what every adapter's body read
/// does with the chunks its framework hands it.
///
/// A chunk that would take the body past the limit is refused before it is
/// kept ([`Rejection::PayloadTooLarge`]). The first chunk, and every later
/// one of at least 4 KiB, is kept as it arrives, without a
/// copy (they are usually slices of the server's read buffer, so copying
/// them would hold that memory twice); smaller later chunks are copied into
/// one buffer and released at once, so that a body trickled a byte at a time
/// holds about its own size, not one read buffer per byte.
/// [`finish`](Self::finish) hands a body of one chunk on as is and joins
/// several once.
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
    /// Small chunks since the last one kept in `rest`, copied together.
    small: BytesMut,
}

/// Chunks after the first that are smaller than this (in bytes) are copied
/// into one buffer instead of being kept: each may pin a whole read buffer
/// of the server (8 KiB or more) for a byte or two of body.
const COALESCE_BELOW: usize = 4096;

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
        if self.first.is_none() {
            self.first = Some(chunk);
        } else if chunk.len() < COALESCE_BELOW {
            // Copied; the chunk (and the buffer it slices) is released here.
            self.small.extend_from_slice(&chunk);
        } else {
            if !self.small.is_empty() {
                self.rest.push(self.small.split().freeze());
            }
            self.rest.push(chunk);
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
        if self.rest.is_empty() && self.small.is_empty() {
            return first;
        }
        let mut joined = BytesMut::with_capacity(self.read);
        joined.extend_from_slice(&first);
        for chunk in &self.rest {
            joined.extend_from_slice(chunk);
        }
        // The small chunks since the last kept one come last.
        joined.extend_from_slice(&self.small);
        joined.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25, item 3: small chunks after the first are copied and
    /// released, so they do not pin the buffers they were sliced from;
    /// large ones are kept without a copy; the bytes come out in order.
    #[test]
    fn small_chunks_are_coalesced_and_release_their_buffers() {
        let mut body = BodyCollector::new(1 << 20);
        body.push(Bytes::from_static(b"{")).unwrap();
        let read_buffer = Bytes::from(vec![b'a'; 8192]);
        for i in 0..100 {
            body.push(read_buffer.slice(i..=i)).unwrap();
        }
        assert!(
            read_buffer.is_unique(),
            "a 1-byte chunk still pins its buffer"
        );
        let big = Bytes::from(vec![b'b'; COALESCE_BELOW]);
        body.push(big.clone()).unwrap();
        assert!(!big.is_unique(), "a large chunk is kept as is");
        body.push(Bytes::from_static(b"}")).unwrap();
        let mut expected = b"{".to_vec();
        expected.extend_from_slice(&[b'a'; 100]);
        expected.extend_from_slice(&[b'b'; COALESCE_BELOW]);
        expected.push(b'}');
        assert_eq!(body.len(), expected.len());
        assert_eq!(body.finish(), expected);
    }

    #[test]
    fn one_chunk_is_handed_on_without_a_copy() {
        let chunk = Bytes::from(vec![7u8; 10]);
        let mut body = BodyCollector::new(10);
        body.push(chunk.clone()).unwrap();
        assert_eq!(body.finish().as_ptr(), chunk.as_ptr());
    }
}
