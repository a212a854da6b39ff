//! SHA-256 of a byte range, read from a local file or from a remote one, for `--verify` and
//! for checking a partial file before `--resume` trusts it.

use std::fmt::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use sha2::{Digest, Sha256};
use smb3_client::{File, OpenOptions, Share};

use crate::file_error::{Cause, Refusal};
use crate::in_flight::InFlight;

/// A SHA-256 digest.
pub(crate) type Sha = [u8; 32];

/// Lower-case hex of a digest.
pub(crate) fn hex(d: &Sha) -> String {
    d.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Bytes read per step of a local hash.
const LOCAL_BLOCK: usize = 1024 * 1024;

/// SHA-256 of `len` bytes of the local file `path` from `offset`, read on the blocking pool.
/// A file shorter than `offset + len` is an error: the bytes the caller meant are not there.
pub(crate) async fn local_range(path: &Path, offset: u64, len: u64) -> Result<Sha, Cause> {
    let file = std::fs::File::open(path).map_err(|e| Cause::local_at(path.display(), e))?;
    local_range_of(Arc::new(file), path.display().to_string(), offset, len).await
}

/// [`local_range`] of a file already open (`shown` names it in errors).
pub(crate) async fn local_range_of(
    file: Arc<std::fs::File>,
    shown: String,
    offset: u64,
    len: u64,
) -> Result<Sha, Cause> {
    tokio::task::spawn_blocking(move || {
        let err = |e: std::io::Error| Cause::local_at(&shown, e);
        let mut h = Sha256::new();
        let mut at = offset;
        let end = offset + len;
        let mut buf = vec![0u8; LOCAL_BLOCK];
        while at < end {
            let want = (end - at).min(LOCAL_BLOCK as u64) as usize;
            let n = file.read_at(&mut buf[..want], at).map_err(err)?;
            if n == 0 {
                return Err(Refusal::ShortRead(format!("{shown}: shorter than expected")).into());
            }
            h.update(&buf[..n]);
            at += n as u64;
        }
        Ok(h.finalize().into())
    })
    .await
    .map_err(Cause::task)?
}

/// SHA-256 of `len` bytes of an open remote file from `offset`: `depth` chunk READs in flight
/// (spread over the channels by the library), hashed in order as they complete. Each chunk
/// holds its bytes of the run's budget (`in_flight`) from before its READ until it is hashed.
pub(crate) async fn remote_range(
    file: &File,
    offset: u64,
    len: u64,
    chunk: u32,
    depth: usize,
    in_flight: &InFlight,
) -> Result<Sha, Cause> {
    let c = u64::from(chunk.max(1));
    let end = offset + len;
    let mut pieces = stream::iter((offset..end).step_by(c as usize))
        .map(|off| {
            let n = (end - off).min(c) as usize;
            async move {
                // Taken in order (the stream polls its futures in order, the budget serves
                // waiters in order), so an earlier chunk never waits behind a later one.
                let held = in_flight.take(n as u32).await;
                file.read_at(off, n).await.map(|d| (n, d, held))
            }
        })
        .buffered(depth.max(1));
    let mut h = Sha256::new();
    while let Some(piece) = pieces.next().await {
        let (want, data, _held) = piece?;
        if data.len() != want {
            return Err(Refusal::ShortRead("shorter than expected".into()).into());
        }
        h.update(&data);
    }
    Ok(h.finalize().into())
}

/// SHA-256 of the whole remote file at `path` (opened for reading, then closed).
pub(crate) async fn remote_file(
    share: &Share,
    path: &str,
    chunk: u32,
    depth: usize,
    in_flight: &InFlight,
) -> Result<(Sha, u64), Cause> {
    let file = share.open(path, &OpenOptions::new().read(true)).await?;
    let size = file.size_at_open();
    let result = remote_range(&file, 0, size, chunk, depth, in_flight).await;
    let closed = file.close().await;
    let sha = result?;
    closed?;
    Ok((sha, size))
}

/// SHA-256 and size of the whole local file at `path`.
pub(crate) async fn local_file(path: &Path) -> Result<(Sha, u64), Cause> {
    let file = std::fs::File::open(path).map_err(|e| Cause::local_at(path.display(), e))?;
    local_file_of(file, path.display().to_string()).await
}

/// SHA-256 and size of a whole local file already open (`shown` names it in errors).
pub(crate) async fn local_file_of(file: std::fs::File, shown: String) -> Result<(Sha, u64), Cause> {
    let size = file
        .metadata()
        .map_err(|e| Cause::local_at(&shown, e))?
        .len();
    Ok((local_range_of(Arc::new(file), shown, 0, size).await?, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_ranges() {
        let dir = std::env::temp_dir().join(format!("smbcp-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let want: Sha = Sha256::digest(&data[1000..2_500_000]).into();
        assert_eq!(local_range(&p, 1000, 2_499_000).await.unwrap(), want);
        assert!(local_range(&p, 2_999_000, 2000).await.is_err());
        let (whole, size) = local_file(&p).await.unwrap();
        assert_eq!(size, 3_000_000);
        assert_eq!(hex(&whole), hex(&Sha256::digest(&data).into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
