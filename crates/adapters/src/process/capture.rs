//! Bounded output capture: the tail buffer each stream is read into, the
//! stream reader itself, and the line tap of [`run_streaming`].

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

#[cfg(doc)]
use super::run_streaming;

/// A byte buffer that keeps only the last `limit` bytes pushed into it.
///
/// Memory stays below `2 × limit` plus one chunk: the front is cut whenever
/// the buffer doubles past the limit, so the amortised cost per byte is O(1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailBuffer {
    limit: usize,
    buf: Vec<u8>,
    dropped: u64,
}

impl TailBuffer {
    /// An empty buffer keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            buf: Vec::new(),
            dropped: 0,
        }
    }

    /// Appends bytes, dropping from the front when over the bound.
    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.limit {
            self.dropped += (self.buf.len() + bytes.len() - self.limit) as u64;
            self.buf.clear();
            self.buf
                .extend_from_slice(&bytes[bytes.len() - self.limit..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > self.limit.saturating_mul(2).max(8192) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.limit {
            let cut = self.buf.len() - self.limit;
            self.buf.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// Bytes currently held (may exceed the bound until [`Self::finish`]).
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// The kept tail and the number of bytes dropped from the front.
    pub fn finish(mut self) -> (Vec<u8>, u64) {
        self.trim();
        (self.buf, self.dropped)
    }
}

/// One output stream being read into a bounded buffer, and optionally
/// handed on line by line as it arrives.
pub(super) struct Stream<R> {
    reader: Option<R>,
    pub(super) tail: TailBuffer,
    chunk: Vec<u8>,
    pub(super) tap: Option<LineTap>,
}

/// Sends each complete line of a stream (without its new line, lossily
/// decoded) as soon as it is read; a line longer than [`MAX_TAPPED_LINE`]
/// is sent cut at that length.
pub(super) struct LineTap {
    pub(super) sender: tokio::sync::mpsc::UnboundedSender<String>,
    pub(super) partial: Vec<u8>,
}

/// The longest line [`run_streaming`] hands on whole.
pub const MAX_TAPPED_LINE: usize = 1024 * 1024;

impl LineTap {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.flush();
            } else if self.partial.len() < MAX_TAPPED_LINE {
                self.partial.push(b);
            }
        }
    }

    fn flush(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        // The receiver may have stopped listening; the run goes on.
        let _ = self.sender.send(line);
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.flush();
        }
    }
}

impl<R: AsyncRead + Unpin> Stream<R> {
    /// A stream reading `reader` into a tail of `limit` bytes, with no tap.
    pub(super) fn new(reader: Option<R>, limit: usize) -> Self {
        Self {
            reader,
            tail: TailBuffer::new(limit),
            chunk: vec![0; 64 * 1024],
            tap: None,
        }
    }

    /// Whether the stream is still being read.
    pub(super) fn open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads one chunk; pending forever once closed (guarded in `select!`).
    pub(super) async fn read_chunk(&mut self) -> io::Result<usize> {
        match self.reader.as_mut() {
            Some(r) => r.read(&mut self.chunk).await,
            None => std::future::pending().await,
        }
    }

    /// Takes in the result of [`Stream::read_chunk`]: keeps the bytes,
    /// hands them to the tap, or closes the stream at its end or on an error.
    pub(super) fn consume(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => {
                self.reader = None;
                if let Some(tap) = &mut self.tap {
                    tap.finish();
                }
            }
            Ok(n) => {
                self.tail.push(&self.chunk[..n]);
                if let Some(tap) = &mut self.tap {
                    tap.push(&self.chunk[..n]);
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::debug!(%err, "reading child output failed; closing the stream");
                self.reader = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tail_buffer_keeps_the_end() {
        let mut t = TailBuffer::new(4);
        t.push(b"abc");
        t.push(b"def");
        t.push(b"g");
        assert_eq!(t.finish(), (b"defg".to_vec(), 3));
    }

    #[test]
    fn tail_buffer_with_zero_limit_keeps_nothing() {
        let mut t = TailBuffer::new(0);
        t.push(b"abc");
        assert_eq!(t.finish(), (Vec::new(), 3));
    }

    proptest! {
        #[test]
        fn tail_buffer_equals_suffix_of_concatenation(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 0..40),
            limit in 0usize..120,
        ) {
            let mut t = TailBuffer::new(limit);
            let mut all = Vec::new();
            for c in &chunks {
                t.push(c);
                all.extend_from_slice(c);
                prop_assert!(t.held() <= limit.saturating_mul(2).max(8192) + 50);
            }
            let (kept, dropped) = t.finish();
            let start = all.len().saturating_sub(limit);
            prop_assert_eq!(&kept[..], &all[start..]);
            prop_assert_eq!(dropped, start as u64);
        }
    }
}
