//! The two halves of a channel's connection, and what happens when the last of them goes.
//!
//! A request handed back to its caller as lost is replayed elsewhere (see
//! `engine::replay`). That is only harmless if the original can no longer reach the server:
//! a CREATE that a link held while it was down, delivered by TCP once the link came back and
//! after its replay had been answered and the file written and closed, would run as a new
//! open and an OVERWRITE disposition would empty the file (MS-SMB2 3.3.5.2.10 protects the
//! requests on an open from stale copies, not the CREATE that makes one). So the requests
//! outstanding on a closed channel are handed back only once the socket itself is closed, and
//! closing it discards what it still queues (zero linger: the kernel sends a reset and drops
//! the unsent and unacknowledged bytes). [`SocketHalf`] carries the signal: each half holds a
//! share of a [`SocketClosed`], whose drop, after both halves are gone, hands the requests back.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::OwnedWriteHalf;

/// Runs its action when dropped: once the last [`SocketHalf`] holding it is gone.
pub(super) struct SocketClosed(Option<Box<dyn FnOnce() + Send + Sync>>);

impl SocketClosed {
    pub(super) fn new(action: impl FnOnce() + Send + Sync + 'static) -> Arc<SocketClosed> {
        Arc::new(SocketClosed(Some(Box::new(action))))
    }
}

impl Drop for SocketClosed {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}

/// One half of a connection, holding a share of the connection's [`SocketClosed`].
pub(super) struct SocketHalf<T> {
    // Field order matters: the half is dropped (and the socket closed with it) before the
    // share of `SocketClosed`, so its action runs only after the socket is gone.
    io: T,
    _closed: Arc<SocketClosed>,
}

impl<T> SocketHalf<T> {
    pub(super) fn new(io: T, closed: Arc<SocketClosed>) -> Self {
        SocketHalf {
            io,
            _closed: closed,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SocketHalf<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SocketHalf<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The write half of a TCP connection that, dropped without an orderly shutdown (its task
/// aborted), does not send a FIN. Tokio's own write half shuts the sending side down when
/// dropped, and a FIN pushes out whatever data is still queued: on a link that has just come
/// back, the very requests the channel is being closed to keep from the server. Forgotten
/// instead, the socket closes with the read half, abortively.
pub(super) struct QuietWriteHalf(Option<OwnedWriteHalf>);

impl QuietWriteHalf {
    pub(super) fn new(half: OwnedWriteHalf) -> Self {
        QuietWriteHalf(Some(half))
    }

    fn half(&mut self) -> Pin<&mut OwnedWriteHalf> {
        Pin::new(self.0.as_mut().expect("present until dropped"))
    }
}

impl Drop for QuietWriteHalf {
    fn drop(&mut self) {
        if let Some(half) = self.0.take() {
            half.forget();
        }
    }
}

impl AsyncWrite for QuietWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().half().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().half().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.as_ref().is_some_and(|h| h.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().half().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().half().poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn the_action_runs_once_both_halves_are_gone() {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let closed = SocketClosed::new(move || flag.store(true, Ordering::SeqCst));
        let a = SocketHalf::new((), closed.clone());
        let b = SocketHalf::new((), closed);
        drop(a);
        assert!(!ran.load(Ordering::SeqCst));
        drop(b);
        assert!(ran.load(Ordering::SeqCst));
    }
}
