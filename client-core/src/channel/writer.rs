//! The writer task of a channel: takes finished frames from a queue and writes them with
//! vectored writes, several frames per system call when they queue up. Each frame is
//! `[4-byte prefix][header + body][payload]`; the payload (WRITE data) is never copied.

use std::io::IoSlice;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// One frame ready for the wire.
pub(crate) struct OutFrame {
    pub(crate) prefix: [u8; 4],
    pub(crate) head: Bytes,
    pub(crate) payload: Bytes,
}

/// Frames per batched write; bounded well below IOV_MAX (1024).
const MAX_BATCH: usize = 64;

/// Runs until the queue closes or the socket fails. Returns the socket error, if any.
pub(crate) async fn run_writer<W: AsyncWrite + Unpin>(
    mut io: W,
    mut queue: mpsc::UnboundedReceiver<OutFrame>,
) -> std::io::Result<()> {
    let mut batch: Vec<OutFrame> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(f) => batch.push(f),
                Err(_) => break,
            }
        }
        write_batch(&mut io, &batch).await?;
        batch.clear();
    }
    io.shutdown().await.ok();
    Ok(())
}

async fn write_batch<W: AsyncWrite + Unpin>(io: &mut W, batch: &[OutFrame]) -> std::io::Result<()> {
    // Flatten to slices, then write them, resuming after partial writes.
    let mut parts: Vec<&[u8]> = Vec::with_capacity(batch.len() * 3);
    for f in batch {
        parts.push(&f.prefix);
        parts.push(&f.head);
        if !f.payload.is_empty() {
            parts.push(&f.payload);
        }
    }
    let mut first = 0; // index of the first part not fully written
    let mut offset = 0; // bytes of parts[first] already written
    while first < parts.len() {
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len() - first);
        slices.push(IoSlice::new(&parts[first][offset..]));
        slices.extend(parts[first + 1..].iter().map(|p| IoSlice::new(p)));
        let mut n = io.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while first < parts.len() && n >= parts[first].len() - offset {
            n -= parts[first].len() - offset;
            first += 1;
            offset = 0;
        }
        offset += n;
    }
    io.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn writes_all_parts_in_order_despite_partial_writes() {
        // A tiny duplex buffer forces many partial writes.
        let (a, mut b) = tokio::io::duplex(7);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run_writer(a, rx));
        let mut expected = Vec::new();
        for i in 0..20u8 {
            let head = Bytes::from(vec![i; 10 + i as usize]);
            let payload = Bytes::from(vec![255 - i; i as usize * 3]);
            let prefix = super::super::frame::frame_prefix(head.len() + payload.len());
            expected.extend_from_slice(&prefix);
            expected.extend_from_slice(&head);
            expected.extend_from_slice(&payload);
            tx.send(OutFrame {
                prefix,
                head,
                payload,
            })
            .unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        task.await.unwrap().unwrap();
        assert_eq!(got, expected);
    }
}
