//! Direct TCP transport framing (MS-SMB2 2.1): each SMB2 message or compound is preceded by a
//! 4-byte header, a zero byte and a 24-bit big-endian length.

use std::ops::Deref;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::frame_buffers::{BufferPool, PooledFrame};

/// Largest frame the 24-bit length can express.
pub(crate) const MAX_FRAME: usize = 0x00FF_FFFF;

/// The 4-byte transport header for a frame of `len` bytes.
pub(crate) fn frame_prefix(len: usize) -> [u8; 4] {
    debug_assert!(len <= MAX_FRAME);
    let l = len as u32;
    [0, (l >> 16) as u8, (l >> 8) as u8, l as u8]
}

/// Why a frame could not be read.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The peer closed the connection between frames.
    Eof,
    /// A socket error, or EOF in the middle of a frame.
    Io(std::io::Error),
    /// The first byte of the transport header was not zero.
    BadPrefix(u8),
}

/// One received frame, without its transport header, still ours to change in place (to
/// decrypt it or verify its signature) before it is frozen into `Bytes`.
pub(crate) enum Frame {
    /// A small frame, carved out of the reader's shared buffer.
    Carved(BytesMut),
    /// A large frame in a buffer of its own from the client's pool.
    Pooled(PooledFrame),
}

impl Frame {
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Frame::Carved(b) => b,
            Frame::Pooled(p) => p.as_mut_slice(),
        }
    }

    /// Drop `n` bytes from the front (a transform header once decrypted).
    pub(crate) fn advance(&mut self, n: usize) {
        match self {
            Frame::Carved(b) => b.advance(n.min(b.len())),
            Frame::Pooled(p) => p.advance(n),
        }
    }

    /// The frame as shared bytes; a pooled buffer returns to its pool when the last clone
    /// (or slice) is dropped.
    pub(crate) fn freeze(self) -> Bytes {
        match self {
            Frame::Carved(b) => b.freeze(),
            Frame::Pooled(p) => Bytes::from_owner(p),
        }
    }
}

impl Deref for Frame {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Frame::Carved(b) => b,
            Frame::Pooled(p) => p.as_ref(),
        }
    }
}

/// Reads whole frames from a byte stream. Small frames are carved out of one shared buffer;
/// a large frame (a 1-8 MiB READ reply) gets a pooled buffer of its own that the socket reads
/// into directly, so the payload is never copied after it leaves the kernel.
///
/// Not cancel-safe: a large frame being read lives in the future; the reader is dropped with
/// its connection.
pub(crate) struct FrameReader<R> {
    io: R,
    buf: BytesMut,
    buffers: BufferPool,
}

/// Frames up to this size are carved from the shared buffer; larger ones get their own.
const READ_CHUNK: usize = 256 * 1024;

/// How much a read takes when the buffer holds no transport header: a whole 4 or 8 KiB READ
/// reply with its header, little enough that the start of a large frame read into the shared
/// buffer costs next to nothing to move into its own.
const NEXT_FRAME_PEEK: usize = 16 * 1024;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(io: R, buffers: BufferPool) -> Self {
        FrameReader {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
            buffers,
        }
    }

    /// The next frame, without its transport header.
    pub(crate) async fn next(&mut self) -> Result<Frame, FrameError> {
        loop {
            if let Some(len) = self.frame_len() {
                if self.buf[0] != 0 {
                    return Err(FrameError::BadPrefix(self.buf[0]));
                }
                if self.buf.len() >= 4 + len {
                    self.buf.advance(4);
                    return Ok(Frame::Carved(self.buf.split_to(len)));
                }
                if len > READ_CHUNK {
                    return self.read_large(len).await;
                }
                // Room for the rest of this frame plus a little of the next one.
                let want = 4 + len - self.buf.len();
                self.buf.reserve(READ_CHUNK.min(want + NEXT_FRAME_PEEK));
            } else if self.buf.capacity() - self.buf.len() < NEXT_FRAME_PEEK {
                self.buf.reserve(READ_CHUNK);
            }
            let n = self.read_some().await.map_err(FrameError::Io)?;
            if n == 0 {
                return Err(if self.buf.is_empty() {
                    FrameError::Eof
                } else {
                    FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())
                });
            }
        }
    }

    /// The large frame of `len` bytes whose start is in the buffer: moved into a pooled
    /// buffer, and the rest read straight into it (exactly the rest, so the next frame starts
    /// in the shared buffer again).
    async fn read_large(&mut self, len: usize) -> Result<Frame, FrameError> {
        let mut own = self.buffers.take(len);
        self.buf.advance(4);
        let mut filled = self.buf.len();
        own[..filled].copy_from_slice(&self.buf);
        self.buf.clear();
        while filled < len {
            let n = self
                .io
                .read(&mut own[filled..len])
                .await
                .map_err(FrameError::Io)?;
            if n == 0 {
                return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            filled += n;
        }
        Ok(Frame::Pooled(PooledFrame::new(
            own,
            len,
            self.buffers.clone(),
        )))
    }

    /// One read into the buffer's spare room; only [`NEXT_FRAME_PEEK`] bytes while no
    /// transport header is in (the frame's length decides where the rest goes).
    async fn read_some(&mut self) -> std::io::Result<usize> {
        let limit = if self.frame_len().is_some() {
            usize::MAX
        } else {
            NEXT_FRAME_PEEK
        };
        if limit >= self.buf.capacity() - self.buf.len() {
            return self.io.read_buf(&mut self.buf).await;
        }
        let mut room = (&mut self.buf).limit(limit);
        self.io.read_buf(&mut room).await
    }

    /// The length of the frame at the front of the buffer, once its transport header is in.
    fn frame_len(&self) -> Option<usize> {
        let header = self.buf.get(..4)?;
        Some(
            (usize::from(header[1]) << 16) | (usize::from(header[2]) << 8) | usize::from(header[3]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn splits_frames_of_any_size_across_reads() {
        let (mut a, b) = tokio::io::duplex(1000);
        let big = vec![7u8; 3 * READ_CHUNK + 5];
        let writer = tokio::spawn(async move {
            for payload in [&b"abc"[..], &big[..], &b""[..], &b"z"[..]] {
                a.write_all(&frame_prefix(payload.len())).await.unwrap();
                a.write_all(payload).await.unwrap();
            }
        });
        let mut r = FrameReader::new(b, BufferPool::new(1 << 20));
        assert_eq!(&r.next().await.unwrap()[..], b"abc");
        let f = r.next().await.unwrap();
        assert_eq!(f.len(), 3 * READ_CHUNK + 5);
        assert!(f.iter().all(|&x| x == 7));
        assert_eq!(r.next().await.unwrap().len(), 0);
        assert_eq!(&r.next().await.unwrap()[..], b"z");
        writer.await.unwrap();
        assert!(matches!(r.next().await, Err(FrameError::Eof)));
    }

    #[tokio::test]
    async fn large_frames_are_read_into_pooled_buffers_that_come_back() {
        let (mut a, b) = tokio::io::duplex(64 * 1024);
        let first: Vec<u8> = (0..READ_CHUNK + 1000).map(|i| i as u8).collect();
        let second = vec![9u8; READ_CHUNK + 7];
        let (f1, f2) = (first.clone(), second.clone());
        let writer = tokio::spawn(async move {
            for payload in [&f1[..], &b"small"[..], &f2[..], &b"tail"[..]] {
                a.write_all(&frame_prefix(payload.len())).await.unwrap();
                a.write_all(payload).await.unwrap();
            }
        });
        let pool = BufferPool::new(8 << 20);
        let mut r = FrameReader::new(b, pool.clone());
        let big = r.next().await.unwrap();
        assert!(matches!(big, Frame::Pooled(_)));
        assert_eq!(&big[..], &first[..]);
        let payload = big.freeze().slice(100..200);
        assert_eq!(&r.next().await.unwrap()[..], b"small");
        assert_eq!(pool.idle_bytes(), 0, "the payload still holds its buffer");
        drop(payload);
        let idle = pool.idle_bytes();
        assert!(idle > READ_CHUNK, "buffer returned: {idle}");
        let big = r.next().await.unwrap();
        assert_eq!(&big[..], &second[..]);
        assert_eq!(pool.idle_bytes(), 0, "the second frame reused it");
        assert_eq!(&r.next().await.unwrap()[..], b"tail");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn rejects_bad_prefix_and_midframe_eof() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&[1, 0, 0, 1, 0]).await.unwrap();
        let mut r = FrameReader::new(b, BufferPool::new(1 << 20));
        assert!(matches!(r.next().await, Err(FrameError::BadPrefix(1))));

        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0, 9, 1, 2]).await.unwrap();
        drop(a);
        let mut r = FrameReader::new(b, BufferPool::new(1 << 20));
        assert!(matches!(r.next().await, Err(FrameError::Io(_))));
    }
}
