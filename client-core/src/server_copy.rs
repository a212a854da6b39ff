//! Server-side copy (MS-SMB2 3.2.4.20.1-2, 3.3.5.15.6): the server copies ranges of one open
//! file into another, so the bytes never cross the network. Both files must be open in the
//! same session; they may be on different shares of the server.
//!
//! The source is named by a resume key (FSCTL_SRV_REQUEST_RESUME_KEY on the source open); each
//! FSCTL_SRV_COPYCHUNK_WRITE on the destination carries up to the server's number of chunks
//! of up to its chunk size, up to its total per request. Those limits are not announced: the
//! first request uses the defaults MS-SMB2 3.3.3 gives servers (which Samba keeps), and a
//! server with smaller ones refuses it with STATUS_INVALID_PARAMETER and its limits in the
//! reply, which the copy then uses. The requests after the first go out several at a time,
//! spread over the session's channels like any other.

use futures_util::stream::{self, StreamExt, TryStreamExt};
use smb3_proto::msg::copychunk::{encode_copychunk, Chunk, CopyChunkResponse, ResumeKey};
use smb3_proto::msg::ioctl::{
    IoctlRequest, FSCTL_SRV_COPYCHUNK_WRITE, FSCTL_SRV_REQUEST_RESUME_KEY,
};
use smb3_proto::{Command, NtStatus};

use crate::error::{decode_ioctl, Error, ProtocolError, Result, ServerCopyFault};
use crate::file::File;
use crate::open_options::OpenOptions;
use crate::share::Share;

/// What one copy request may carry, as the server allows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limits {
    chunks: u32,
    chunk_bytes: u32,
    request_bytes: u32,
}

/// The defaults of MS-SMB2 3.3.3 (ServerSideCopyMaxNumberofChunks, ...MaxChunkSize,
/// ...MaxDataSize), which Samba uses.
const DEFAULT_LIMITS: Limits = Limits {
    chunks: 256,
    chunk_bytes: 1 << 20,
    request_bytes: 16 << 20,
};

/// Copy requests in flight per usable channel. Fewer than a read's chunks: each request
/// asks the server to move up to 16 MiB on its own disks, so two keep it busy while the
/// reply of the first travels back.
const COPY_REQUESTS_PER_CHANNEL: usize = 2;

/// Room for a resume key response (24-byte key, 4-byte length, a small context).
const RESUME_KEY_OUTPUT: u32 = 32;
/// SRV_COPYCHUNK_RESPONSE is 12 bytes.
const COPYCHUNK_OUTPUT: u32 = 12;

impl File {
    /// Copy `len` bytes of `source`, from `source_offset`, into this file at `offset`, on the
    /// server (see the module docs): nothing crosses the network but the requests. `source`
    /// must be open for reading and this file for writing, in the same session (any shares of
    /// the server). The range must lie within `source` (else the server's
    /// `STATUS_INVALID_VIEW_SIZE`); this file grows as needed. Returns `len`: a server that
    /// copies less than asked is an error. A server that does not copy
    /// (`STATUS_NOT_SUPPORTED`, `INVALID_DEVICE_REQUEST`) answers with that status in
    /// [`Error::Status`], and the caller copies through the client instead.
    pub async fn copy_range_from(
        &self,
        source: &File,
        source_offset: u64,
        offset: u64,
        len: u64,
    ) -> Result<u64> {
        if !std::ptr::eq(self.core(), source.core()) {
            return Err(Error::ApiMisuse(
                "a server-side copy needs both files open in the same session",
            ));
        }
        if len == 0 {
            return Ok(0);
        }
        let key = source.resume_key().await?;
        let mut limits = DEFAULT_LIMITS;
        // The first request alone: it learns the server's limits if they are smaller.
        let (first_len, first) = loop {
            let first_len = len.min(per_request(limits));
            let pieces = chunks(source_offset, offset, first_len, limits);
            match self.copy_chunks(&key, &pieces).await? {
                Copied::Done(n) => break (first_len, n),
                Copied::Limits(server) if server != limits && usable(server) => limits = server,
                Copied::Limits(server) => {
                    return Err(ProtocolError::ServerCopy(if usable(server) {
                        ServerCopyFault::RefusedWithinLimits
                    } else {
                        ServerCopyFault::ZeroLimits
                    })
                    .into())
                }
            }
        };
        if first != first_len {
            return Err(ProtocolError::IncompleteWrite {
                command: Command::IOCTL,
                sent: first_len,
                written: first,
            }
            .into());
        }
        let request_bytes = per_request(limits);
        let requests: Vec<(u64, u64)> = (first_len..len)
            .step_by(request_bytes as usize)
            .map(|done| (done, (len - done).min(request_bytes)))
            .collect();
        let in_flight = crate::file::depth_over_channels(
            COPY_REQUESTS_PER_CHANNEL,
            self.core().multichannel.channels.usable_count(),
        );
        let copied: Vec<u64> = stream::iter(requests)
            .map(|(done, n)| {
                let pieces = chunks(source_offset + done, offset + done, n, limits);
                async move {
                    match self.copy_chunks(&key, &pieces).await? {
                        Copied::Done(got) if got == n => Ok(got),
                        Copied::Done(got) => Err(Error::from(ProtocolError::IncompleteWrite {
                            command: Command::IOCTL,
                            sent: n,
                            written: got,
                        })),
                        Copied::Limits(_) => {
                            Err(ProtocolError::ServerCopy(ServerCopyFault::LimitsChanged).into())
                        }
                    }
                }
            })
            .buffer_unordered(in_flight)
            .try_collect()
            .await?;
        Ok(first + copied.iter().sum::<u64>())
    }

    /// FSCTL_SRV_REQUEST_RESUME_KEY on this (source) open.
    async fn resume_key(&self) -> Result<ResumeKey> {
        let req = IoctlRequest::fsctl(
            FSCTL_SRV_REQUEST_RESUME_KEY,
            self.file_id(),
            bytes::Bytes::new(),
            RESUME_KEY_OUTPUT,
        );
        let resp = self
            .core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e))?;
        let out = decode_ioctl(&req, &resp.msg)?;
        crate::error::decode(smb3_proto::Command::IOCTL, ResumeKey::decode(&out.output))
    }

    /// One FSCTL_SRV_COPYCHUNK_WRITE on this (destination) open.
    async fn copy_chunks(&self, key: &ResumeKey, pieces: &[Chunk]) -> Result<Copied> {
        let req = IoctlRequest::fsctl(
            FSCTL_SRV_COPYCHUNK_WRITE,
            self.file_id(),
            encode_copychunk(key, pieces),
            COPYCHUNK_OUTPUT,
        );
        let resp = self
            .core()
            .send(
                &req,
                self.on_open().allowing(&[NtStatus::INVALID_PARAMETER]),
            )
            .await
            .map_err(|e| self.err(e))?;
        let refused = resp.header.status == NtStatus::INVALID_PARAMETER;
        let out = match decode_ioctl(&req, &resp.msg) {
            Ok(out) => out,
            // INVALID_PARAMETER with an ERROR body: a plain refusal, not limits.
            Err(_) if refused => {
                return Err(self.err(Error::Status {
                    status: NtStatus::INVALID_PARAMETER,
                    command: smb3_proto::Command::IOCTL,
                    path: None,
                }))
            }
            Err(e) => return Err(e),
        };
        let r = crate::error::decode(
            smb3_proto::Command::IOCTL,
            CopyChunkResponse::decode(&out.output),
        )?;
        Ok(if refused {
            Copied::Limits(Limits {
                chunks: r.chunks_written,
                chunk_bytes: r.chunk_bytes_written,
                request_bytes: r.total_bytes_written,
            })
        } else {
            Copied::Done(u64::from(r.total_bytes_written))
        })
    }
}

impl Share {
    /// Copy the file `from` of this share to `to` on `dest` (this share, or another share of
    /// the same server opened through the same [`Client`](crate::Client)), on the server:
    /// the bytes do not cross the network. `to` is created, or replaced if it exists.
    /// Returns the bytes copied. If the copy fails, `to` is removed again: no partial copy
    /// is left behind. A server that does not copy answers with [`Error::Status`]
    /// (`STATUS_NOT_SUPPORTED` or `STATUS_INVALID_DEVICE_REQUEST`); copy through the client
    /// then.
    pub async fn copy_file_on_server(&self, from: &str, dest: &Share, to: &str) -> Result<u64> {
        let source = self.open(from, &OpenOptions::new().read(true)).await?;
        let target = match dest
            .open(
                to,
                &OpenOptions::new().write(true).create(true).truncate(true),
            )
            .await
        {
            Ok(t) => t,
            Err(e) => {
                let _ = source.close().await;
                return Err(e);
            }
        };
        let len = source.size_at_open();
        let copied = target.copy_range_from(&source, 0, 0, len).await;
        let closed = target.close().await;
        let _ = source.close().await;
        match copied.and_then(|n| closed.map(|()| n)) {
            Ok(n) => Ok(n),
            Err(e) => {
                let _ = dest.remove_file(to).await;
                Err(e)
            }
        }
    }
}

/// What a copy request came to.
enum Copied {
    /// Copied this many bytes.
    Done(u64),
    /// Refused as too large: the server's limits.
    Limits(Limits),
}

/// Limits a copy can work with.
fn usable(l: Limits) -> bool {
    l.chunks > 0 && l.chunk_bytes > 0 && l.request_bytes > 0
}

/// Most bytes one request can copy under `limits`.
fn per_request(limits: Limits) -> u64 {
    u64::from(limits.request_bytes).min(u64::from(limits.chunks) * u64::from(limits.chunk_bytes))
}

/// `len` bytes from `source`/`target` as chunks within `limits` (at most one request's
/// worth: the rest is left out).
fn chunks(source: u64, target: u64, len: u64, limits: Limits) -> Vec<Chunk> {
    let len = len.min(per_request(limits));
    let step = u64::from(limits.chunk_bytes);
    (0..len)
        .step_by(step as usize)
        .map(|at| Chunk {
            source_offset: source + at,
            target_offset: target + at,
            length: (len - at).min(step) as u32,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_cut_into_chunks_within_every_limit() {
        let limits = Limits {
            chunks: 3,
            chunk_bytes: 100,
            request_bytes: 250,
        };
        let c = chunks(1000, 5000, 250, limits);
        assert_eq!(
            c.iter()
                .map(|c| (c.source_offset, c.target_offset, c.length))
                .collect::<Vec<_>>(),
            vec![(1000, 5000, 100), (1100, 5100, 100), (1200, 5200, 50)]
        );
        // Never more than chunks × chunk_bytes, whatever the total allows.
        let tight = Limits {
            chunks: 2,
            chunk_bytes: 100,
            request_bytes: 1000,
        };
        assert_eq!(chunks(0, 0, 1000, tight).len(), 2);
        assert_eq!(chunks(0, 0, 1, DEFAULT_LIMITS).len(), 1);
        assert_eq!(chunks(0, 0, 16 << 20, DEFAULT_LIMITS).len(), 16);
    }
}
