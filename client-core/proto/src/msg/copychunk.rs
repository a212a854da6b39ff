//! Server-side copy: the payloads of FSCTL_SRV_REQUEST_RESUME_KEY and
//! FSCTL_SRV_COPYCHUNK(_WRITE) (MS-SMB2 2.2.31.1, 2.2.32.1, 2.2.32.3). The client asks the
//! server for a key naming the source open, then asks it to copy ranges of that source into
//! the destination open: the data never crosses the network.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};

/// The opaque key naming a source open (2.2.32.3 ResumeKey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeKey(pub [u8; 24]);

impl ResumeKey {
    /// Decode the output of FSCTL_SRV_REQUEST_RESUME_KEY (SRV_REQUEST_RESUME_KEY Response:
    /// ResumeKey, ContextLength, Context; the context is ignored, as the spec lets clients).
    pub fn decode(output: &[u8]) -> Result<ResumeKey, DecodeError> {
        let mut r = Reader::new(output);
        let key = r.array::<24>("SRV_REQUEST_RESUME_KEY ResumeKey")?;
        r.u32("SRV_REQUEST_RESUME_KEY ContextLength")?;
        Ok(ResumeKey(key))
    }
}

/// One range to copy (2.2.31.1.1 SRV_COPYCHUNK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Where in the source the range starts.
    pub source_offset: u64,
    /// Where in the destination it goes.
    pub target_offset: u64,
    /// Its length in bytes.
    pub length: u32,
}

/// Bytes of one [`Chunk`] on the wire.
pub const CHUNK_LEN: usize = 24;

/// The input of FSCTL_SRV_COPYCHUNK(_WRITE): SRV_COPYCHUNK_COPY (2.2.31.1).
pub fn encode_copychunk(key: &ResumeKey, chunks: &[Chunk]) -> Bytes {
    let mut out = BytesMut::with_capacity(32 + CHUNK_LEN * chunks.len());
    out.put_slice(&key.0);
    out.put_u32_le(u32::try_from(chunks.len()).unwrap_or(u32::MAX));
    out.put_u32_le(0); // Reserved
    for c in chunks {
        out.put_u64_le(c.source_offset);
        out.put_u64_le(c.target_offset);
        out.put_u32_le(c.length);
        out.put_u32_le(0); // Reserved
    }
    out.freeze()
}

/// The output of FSCTL_SRV_COPYCHUNK(_WRITE): SRV_COPYCHUNK_RESPONSE (2.2.32.1). Its three
/// numbers mean two things: after a copy (success), what was written; with
/// STATUS_INVALID_PARAMETER, the server's limits (3.3.5.15.6): most chunks per request, most
/// bytes per chunk, most bytes per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyChunkResponse {
    /// ChunksWritten, or the most chunks the server takes in one request.
    pub chunks_written: u32,
    /// ChunkBytesWritten (bytes of a partly written last chunk), or the largest chunk.
    pub chunk_bytes_written: u32,
    /// TotalBytesWritten, or the most bytes the server copies in one request.
    pub total_bytes_written: u32,
}

impl CopyChunkResponse {
    /// Decode the FSCTL output buffer.
    pub fn decode(output: &[u8]) -> Result<CopyChunkResponse, DecodeError> {
        let mut r = Reader::new(output);
        Ok(CopyChunkResponse {
            chunks_written: r.u32("SRV_COPYCHUNK_RESPONSE ChunksWritten")?,
            chunk_bytes_written: r.u32("SRV_COPYCHUNK_RESPONSE ChunkBytesWritten")?,
            total_bytes_written: r.u32("SRV_COPYCHUNK_RESPONSE TotalBytesWritten")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copychunk_input_is_laid_out_as_the_spec_says() {
        let key = ResumeKey([7; 24]);
        let input = encode_copychunk(
            &key,
            &[
                Chunk {
                    source_offset: 0x1000,
                    target_offset: 0x2000,
                    length: 0x30,
                },
                Chunk {
                    source_offset: 1,
                    target_offset: 2,
                    length: 3,
                },
            ],
        );
        assert_eq!(input.len(), 32 + 2 * CHUNK_LEN);
        assert_eq!(&input[..24], &[7; 24]);
        assert_eq!(&input[24..28], &2u32.to_le_bytes(), "ChunkCount");
        assert_eq!(&input[28..32], &[0; 4], "Reserved");
        assert_eq!(&input[32..40], &0x1000u64.to_le_bytes());
        assert_eq!(&input[40..48], &0x2000u64.to_le_bytes());
        assert_eq!(&input[48..52], &0x30u32.to_le_bytes());
        assert_eq!(&input[52..56], &[0; 4]);
        assert_eq!(&input[56..64], &1u64.to_le_bytes());
    }

    #[test]
    fn resume_key_and_copychunk_responses_decode_and_short_ones_are_refused() {
        let mut out = vec![9u8; 24];
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        assert_eq!(ResumeKey::decode(&out).unwrap(), ResumeKey([9; 24]));
        assert!(ResumeKey::decode(&out[..27]).is_err());

        let mut r = Vec::new();
        for v in [256u32, 1 << 20, 16 << 20] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        let limits = CopyChunkResponse::decode(&r).unwrap();
        assert_eq!(
            (
                limits.chunks_written,
                limits.chunk_bytes_written,
                limits.total_bytes_written
            ),
            (256, 1 << 20, 16 << 20)
        );
        assert!(CopyChunkResponse::decode(&r[..11]).is_err());
    }
}
