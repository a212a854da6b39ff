//! Moving one file's bytes: a download writes chunks with positional writes as they arrive,
//! an upload reads chunks (`chunk_read.rs`) and sends them unordered; both within the span
//! `window.rs` keeps, so `--resume` can continue an interrupted partial file after checking
//! it (`resume.rs`). A sparse source is copied sparse: only its data moves, its holes stay
//! holes (`holes.rs`).

use std::os::unix::fs::FileExt;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;

use smb3_client::{BufferPool, File, OpenOptions, Share};

use crate::chunk_read::{read_chunk, ChunkSource};
use crate::file_error::{Cause, Refusal};
use crate::hashing::{local_range, local_range_of, remote_range, Sha};
use crate::holes::{self, DataRanges};
use crate::in_flight::InFlight;
use crate::local_dest::Partial;
use crate::progress::Progress;
use crate::resume::{self, Plan};
use crate::source_change::{remote_changed, LocalVersion};
use crate::window::for_each_chunk;

/// How one transfer runs.
pub(crate) struct TransferOptions<'a> {
    pub(crate) chunk: u32,
    /// Chunks in flight, at least (`--depth`); see [`depth_now`].
    pub(crate) depth: usize,
    /// The run's budget of chunk bytes in flight, shared with the other files.
    pub(crate) in_flight: &'a InFlight,
    /// Continue from an existing partial file after checking it.
    pub(crate) resume: bool,
    /// With `resume`: compare every byte kept, not just the last chunk.
    pub(crate) full_check: bool,
}

/// Chunks in flight for one file now. Read before each chunk starts, so a copy begun right
/// after connecting, on the first channel only, widens as the others bind instead of waiting
/// for them.
///
/// While channels are still binding: the library's
/// [`Client::busy_depth`](smb3_client::Client::busy_depth)
/// ([`CHUNKS_PER_CHANNEL`](smb3_client::CHUNKS_PER_CHANNEL) per usable channel) and no more,
/// so the channels that are up first get no backlog the others must make up for. Under
/// round-robin dispatch (`--dispatch round-robin`) such a backlog lasts to the end of the copy
/// (measured: 16 chunks queued on the first of 16 channels over four 1 Gbit/s links made that
/// link carry 26.6 % of a 1 GiB file instead of 25 %, and it finished last); smbcp's default,
/// least-loaded, works it off, and the per-link split was still more even with the narrow
/// start. Afterwards: `depth` (`--depth`), or `busy_depth` when that is more. A binding round
/// held up by an unreachable address (up to the 10 s bind timeout) keeps every channel that is
/// up busy meanwhile, instead of holding the copy back until the round ends.
pub(crate) fn depth_now(depth: usize, share: &Share) -> usize {
    let client = share.client();
    let busy = client.busy_depth();
    if client.binding_channels() {
        busy
    } else {
        depth.max(busy)
    }
}

impl TransferOptions<'_> {
    /// SHA-256 of `len` bytes of the remote `file` from `from`, read with this transfer's
    /// chunk size, depth and budget (the checks of `--resume`).
    async fn remote_sha(
        &self,
        share: &Share,
        file: &File,
        from: u64,
        len: u64,
    ) -> Result<Sha, Cause> {
        remote_range(
            file,
            from,
            len,
            self.chunk,
            depth_now(self.depth, share),
            self.in_flight,
        )
        .await
    }
}

/// What a transfer did.
pub(crate) struct Transferred {
    /// Bytes sent or received.
    pub(crate) bytes: u64,
    /// Where it started: above 0 when a partial file was continued.
    pub(crate) resumed_from: u64,
    /// A download's local file, still open once renamed into place: `-p` sets its times
    /// and mode through it rather than by a path that could lead elsewhere by then.
    pub(crate) local_file: Option<Arc<std::fs::File>>,
    /// An upload sent only the data of a sparse source into a file it marked sparse.
    pub(crate) sparse: bool,
}

/// Why one transfer failed.
pub(crate) struct TransferError {
    pub(crate) cause: Cause,
    /// The remote partial file may exist (uploads; downloads always remove theirs).
    pub(crate) partial_created: bool,
}

impl TransferError {
    /// A failure before anything was created.
    pub(crate) fn before(cause: impl Into<Cause>) -> Self {
        TransferError {
            cause: cause.into(),
            partial_created: false,
        }
    }

    /// A failure once the transfer started (the destination's partial file exists).
    pub(crate) fn started(cause: impl Into<Cause>) -> Self {
        TransferError {
            cause: cause.into(),
            partial_created: true,
        }
    }
}

/// Where a partial file of `partial_len` bytes lets the copy continue, after comparing what
/// the plan says with the source. `hash_pair(from, len)` gives (partial's, source's) digests.
/// Says on stderr why a partial file is not used.
async fn resume_point<H, Fut>(
    partial_len: u64,
    source_len: u64,
    opts: &TransferOptions<'_>,
    shown: &str,
    progress: &Progress,
    hash_pair: H,
) -> u64
where
    H: FnOnce(u64, u64) -> Fut,
    Fut: std::future::Future<Output = Result<(crate::hashing::Sha, crate::hashing::Sha), Cause>>,
{
    match resume::plan(partial_len, source_len, opts.chunk, opts.full_check) {
        Plan::Mismatch => {
            progress.say(&format!(
                "{shown}: partial file ({partial_len} bytes) is longer than the source ({source_len}); copying from the start"
            ));
            0
        }
        Plan::FromStart => {
            if partial_len > 0 {
                progress.say(&format!(
                    "{shown}: partial file ({partial_len} bytes) has no part that is sure to be complete (its last {} MiB may have holes); copying from the start",
                    crate::window::SPAN >> 20
                ));
            }
            0
        }
        Plan::Continue {
            offset,
            check_from,
            check_len,
        } => match hash_pair(check_from, check_len).await {
            Ok((partial, source)) if partial == source => {
                progress.say(&format!(
                    "{shown}: resuming at byte {offset} of {source_len} (bytes {check_from}..{offset} match the source)"
                ));
                offset
            }
            Ok(_) => {
                progress.say(&format!(
                    "{shown}: partial file does not match the source (SHA-256 of bytes {check_from}..{offset} differs); copying from the start"
                ));
                0
            }
            Err(e) => {
                progress.say(&format!(
                    "{shown}: partial file cannot be checked ({e}); copying from the start"
                ));
                0
            }
        },
    }
}

/// Download `remote` into the local `partial` file (see `local_dest.rs`); returns what was
/// transferred.
pub(crate) async fn download(
    share: &Share,
    remote: &str,
    partial: &Partial,
    opts: &TransferOptions<'_>,
    progress: &Progress,
) -> Result<Transferred, TransferError> {
    let file = share
        .open(remote, &OpenOptions::new().read(true))
        .await
        .map_err(TransferError::started)?;
    let size = file.size_at_open();
    let shown = partial.path().display().to_string();
    let out = partial.file.clone();
    let mut start = 0;
    if let Some(kept) = partial.existing_len.filter(|_| opts.resume) {
        let file_ref = &file;
        let (mine, shown_ref) = (&out, &shown);
        start = resume_point(kept, size, opts, &shown, progress, |from, len| async move {
            let mine = local_range_of(mine.clone(), shown_ref.clone(), from, len).await?;
            let theirs = opts.remote_sha(share, file_ref, from, len).await?;
            Ok((mine, theirs))
        })
        .await;
        // Drop what lies beyond: the tail may have holes, and a shorter source must not
        // leave old bytes at the end.
        out.set_len(start)
            .map_err(|e| TransferError::started(Cause::local_at(&shown, e)))?;
        progress.not_copied(start);
    }
    let data = holes::remote(&file, size).await;
    let (file_ref, data_ref) = (&file, &data);
    let depth = || depth_now(opts.depth, share);
    let shown = &shown;
    for_each_chunk(start, size, opts.chunk, depth, |off, len| {
        let out = out.clone();
        async move {
            let _held = opts.in_flight.take(len).await;
            for (at, n) in pieces(data_ref, off, len) {
                let bytes = file_ref
                    .read_at(at, n as usize)
                    .await
                    .map_err(TransferError::started)?;
                if bytes.len() as u64 != n {
                    return Err(TransferError::started(Refusal::ShortRead(format!(
                        "file shrank while being copied (short read at offset {at})"
                    ))));
                }
                let out = out.clone();
                // The chunk counts as done (for the span) only once it is in the file.
                tokio::task::spawn_blocking(move || out.write_all_at(&bytes, at))
                    .await
                    .map_err(|e| TransferError::started(Cause::task(e)))?
                    .map_err(|e| TransferError::started(Cause::local_at(shown, e)))?;
            }
            progress.add(u64::from(len));
            Ok(())
        }
    })
    .await?;
    if data.is_some() {
        // Holes were skipped: the length makes the last one (never written) part of the file.
        out.set_len(size)
            .map_err(|e| TransferError::started(Cause::local_at(shown, e)))?;
    }
    let now = file.metadata().await.map_err(TransferError::started)?;
    let changed = remote_changed(file.metadata_at_open(), &now);
    file.close().await.map_err(TransferError::started)?;
    if changed {
        return Err(TransferError::started(Refusal::SourceChanged));
    }
    Ok(Transferred {
        bytes: moved(&data, start, size),
        resumed_from: start,
        local_file: None,
        sparse: false,
    })
}

/// The pieces of the chunk of `len` bytes at `offset` to copy: the whole chunk, or with
/// `data` known only the data in it (none when it is all hole).
fn pieces(data: &Option<DataRanges>, offset: u64, len: u32) -> Vec<(u64, u64)> {
    match data {
        None => vec![(offset, u64::from(len))],
        Some(d) => d.within(offset, u64::from(len)).collect(),
    }
}

/// Bytes sent or received for `[start, size)`: the data in it, holes left out.
fn moved(data: &Option<DataRanges>, start: u64, size: u64) -> u64 {
    let len = size.saturating_sub(start);
    match data {
        None => len,
        Some(d) => d.within(start, len).map(|(_, n)| n).sum(),
    }
}

/// The data of the local source when it has holes and the server took the copy's sparse
/// mark: then only that is sent. Otherwise (no hole, or a server or file system that cannot
/// say or keep them) `None`, and every byte is sent, holes as zeros.
async fn sparse_upload(
    file: &File,
    src: &std::fs::File,
    size: u64,
    local: &Path,
) -> Option<DataRanges> {
    let data = match holes::local(src, size) {
        Ok(d) => d?,
        Err(e) => {
            tracing::info!(file = %local.display(), error = %e, "holes not found; copied whole");
            return None;
        }
    };
    match file.set_sparse(true).await {
        Ok(()) => Some(data),
        Err(e) => {
            tracing::info!(file = %local.display(), error = %e, "the server keeps no holes; copied whole");
            None
        }
    }
}

/// Upload the local file into the remote `partial` file; returns what was transferred.
pub(crate) async fn upload(
    share: &Share,
    local: &Path,
    partial: &str,
    opts: &TransferOptions<'_>,
    buffers: &BufferPool,
    progress: &Progress,
) -> Result<Transferred, TransferError> {
    let src = ChunkSource::new(
        std::fs::File::open(local).map_err(|e| TransferError::before(Cause::local(e)))?,
    );
    let opened = src
        .file()
        .metadata()
        .map_err(|e| TransferError::before(Cause::local(e)))?;
    let version = LocalVersion::of(&opened);
    let size = opened.len();
    let existing = if opts.resume {
        share.metadata(partial).await.ok().filter(|m| m.is_file())
    } else {
        None
    };
    let file = share
        .open(
            partial,
            &OpenOptions::new()
                .read(existing.is_some())
                .write(true)
                .create(true)
                .truncate(existing.is_none())
                .mode(crate::preserve::plain_copy_mode(
                    opened.permissions().mode(),
                )),
        )
        .await
        .map_err(TransferError::before)?;
    let mut start = 0;
    if let Some(m) = existing {
        let file_ref: &File = &file;
        start = resume_point(
            m.len,
            size,
            opts,
            &crate::plan::remote_name(share, partial),
            progress,
            |from, len| async move {
                let mine = opts.remote_sha(share, file_ref, from, len).await?;
                let theirs = local_range(local, from, len).await?;
                Ok((mine, theirs))
            },
        )
        .await;
        file.set_len(start).await.map_err(TransferError::started)?;
        progress.not_copied(start);
    }
    let data = sparse_upload(&file, src.file(), size, local).await;
    let (file_ref, src, data_ref) = (&file, &src, &data);
    let depth = || depth_now(opts.depth, share);
    for_each_chunk(start, size, opts.chunk, depth, |off, len| async move {
        let _held = opts.in_flight.take(len).await;
        for (at, n) in pieces(data_ref, off, len) {
            let bytes = read_chunk(buffers, src, at, n as usize)
                .await
                .map_err(|e| TransferError::started(Cause::local_at(local.display(), e)))?;
            file_ref
                .write_at(at, bytes)
                .await
                .map_err(TransferError::started)?;
        }
        progress.add(u64::from(len));
        Ok(())
    })
    .await?;
    if data.is_some() {
        file.set_len(size).await.map_err(TransferError::started)?;
    }
    file.close().await.map_err(TransferError::started)?;
    let unchanged = version
        .still(src.file(), local)
        .map_err(|e| TransferError::started(Cause::local_at(local.display(), e)))?;
    if !unchanged {
        return Err(TransferError::started(Refusal::SourceChanged));
    }
    Ok(Transferred {
        bytes: moved(&data, start, size),
        resumed_from: start,
        local_file: None,
        sparse: data.is_some(),
    })
}
