//! Direct TCP transport framing (MS-SMB2 2.1): each SMB2 message or compound is preceded by a
//! 4-byte header, a zero byte and a 24-bit big-endian length.

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

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

/// Reads whole frames from a byte stream. Small frames are carved out of one shared buffer;
/// a large frame (an 8 MiB READ reply) gets a buffer of exactly its size that the socket reads
/// into directly, so the payload is never copied after it leaves the kernel.
pub(crate) struct FrameReader<R> {
    io: R,
    buf: BytesMut,
}

const READ_CHUNK: usize = 256 * 1024;

/// How much of the following frame a read may take along with the end of a large one: enough
/// for its header and any small replies behind it.
const NEXT_FRAME_PEEK: usize = 4096;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(io: R) -> Self {
        FrameReader {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
        }
    }

    /// The next frame, without its transport header.
    pub(crate) async fn next(&mut self) -> Result<BytesMut, FrameError> {
        loop {
            if let Some(len) = self.frame_len() {
                if self.buf[0] != 0 {
                    return Err(FrameError::BadPrefix(self.buf[0]));
                }
                if self.buf.len() >= 4 + len {
                    self.buf.advance(4);
                    return Ok(self.buf.split_to(len));
                }
                // Room for the rest of this frame plus a little of the next one.
                let want = 4 + len - self.buf.len();
                if want > READ_CHUNK {
                    self.room_for_large_frame(want + NEXT_FRAME_PEEK);
                } else {
                    self.buf.reserve(READ_CHUNK.min(want + NEXT_FRAME_PEEK));
                }
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

    /// Make room for `additional` bytes of a large frame whose start is in the buffer.
    /// `BytesMut::reserve` would do, except when the buffer is no longer shared with the frames
    /// handed out before (they were dropped, usual on a shaped link where the reader waits):
    /// it then grows the old allocation in place, and glibc's realloc copies everything
    /// from the allocation's start, the consumed 1 MiB frame included (7 % of a download's
    /// CPU at 1 Gbit/s). A fresh buffer costs a copy of the unconsumed bytes only.
    fn room_for_large_frame(&mut self, additional: usize) {
        if self.buf.capacity() - self.buf.len() >= additional {
            return;
        }
        let mut fresh = BytesMut::with_capacity(self.buf.len() + additional);
        fresh.extend_from_slice(&self.buf);
        self.buf = fresh;
    }

    /// One read into the buffer's spare room, but, while a large frame is incomplete, no more
    /// than its rest plus [`NEXT_FRAME_PEEK`]: bytes of the next frame read now are copied
    /// again when that frame turns out to need a buffer of its own (the spare room after a
    /// `reserve` can be twice what was asked, so without the limit a 1 MiB READ reply dragged
    /// up to 1 MiB of its successor along, and a download spent ~4 % of its CPU moving it).
    /// For the same reason a read that starts with no transport header in the buffer (the
    /// last frame ended exactly where the previous read did, usual on a shaped link) takes
    /// only [`NEXT_FRAME_PEEK`]: the frame's length decides where the rest goes.
    async fn read_some(&mut self) -> std::io::Result<usize> {
        let limit = match self.frame_rest() {
            Some(rest) if rest > READ_CHUNK => rest + NEXT_FRAME_PEEK,
            Some(_) => usize::MAX,
            None => NEXT_FRAME_PEEK,
        };
        if limit >= self.buf.capacity() - self.buf.len() {
            return self.io.read_buf(&mut self.buf).await;
        }
        let mut room = (&mut self.buf).limit(limit);
        self.io.read_buf(&mut room).await
    }

    /// Bytes still missing from the frame at the front of the buffer, once its header is in.
    fn frame_rest(&self) -> Option<usize> {
        (4 + self.frame_len()?).checked_sub(self.buf.len())
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
        let mut r = FrameReader::new(b);
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
    async fn rejects_bad_prefix_and_midframe_eof() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&[1, 0, 0, 1, 0]).await.unwrap();
        let mut r = FrameReader::new(b);
        assert!(matches!(r.next().await, Err(FrameError::BadPrefix(1))));

        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0, 9, 1, 2]).await.unwrap();
        drop(a);
        let mut r = FrameReader::new(b);
        assert!(matches!(r.next().await, Err(FrameError::Io(_))));
    }
}
