//! QUERY_INFO whose answer has no fixed size (the stream list, a security descriptor): ask
//! with a modest buffer, and again with a bigger one while the server says it did not fit.

use std::future::Future;

use bytes::Bytes;
use smb3_proto::msg::error::ErrorResponse;
use smb3_proto::msg::query_info::QueryInfoResponse;
use smb3_proto::{Command, NtStatus};

use crate::channel::Response;
use crate::error::{decode, Error, Result};

/// The statuses that mean "the buffer was too small": BUFFER_OVERFLOW (partial data, what
/// Windows answers for lists) and BUFFER_TOO_SMALL (no data, with the size needed in the
/// ERROR body, MS-SMB2 3.3.5.20.3; what servers answer for security descriptors).
pub(crate) const TOO_SMALL: &[NtStatus] = &[NtStatus::BUFFER_OVERFLOW, NtStatus::BUFFER_TOO_SMALL];

/// First output buffer: holds any ordinary stream list or descriptor.
pub(crate) const FIRST_BUFFER: u32 = 4096;

/// Send the query built by `send` with an output buffer of `first` bytes, growing it (to what
/// the server says it needs, else twice as much) up to `max` while the answer does not fit.
/// `send` must allow [`TOO_SMALL`]. Returns the output buffer of the answer that fit.
pub(crate) async fn query_growing<F, Fut>(first: u32, max: u32, mut send: F) -> Result<Bytes>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<Response>>,
{
    let max = max.max(first);
    let mut len = first;
    loop {
        let resp = send(len).await?;
        let status = resp.header.status;
        if !TOO_SMALL.contains(&status) {
            return decode(Command::QUERY_INFO, QueryInfoResponse::decode(&resp.msg))
                .map(|r| r.output);
        }
        if len >= max {
            // Bigger than the server lets one reply be: say so rather than return a cut list.
            return Err(Error::Status {
                status,
                command: Command::QUERY_INFO,
                path: None,
            });
        }
        let needed = (status == NtStatus::BUFFER_TOO_SMALL)
            .then(|| ErrorResponse::decode(&resp.msg).ok()?.required_buffer_len())
            .flatten();
        len = next_len(len, needed, max);
    }
}

/// The next buffer size: what the server asked for when that is more, else double; never
/// above `max`. Always more than `len` while `len < max`, so the loop ends.
fn next_len(len: u32, needed: Option<u32>, max: u32) -> u32 {
    needed
        .filter(|&n| n > len)
        .unwrap_or(len.saturating_mul(2))
        .min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_grows_to_what_is_needed_and_stops_at_the_cap() {
        assert_eq!(next_len(4096, None, 1 << 20), 8192);
        assert_eq!(next_len(4096, Some(70_000), 1 << 20), 70_000);
        assert_eq!(
            next_len(4096, Some(100), 1 << 20),
            8192,
            "a smaller need is ignored"
        );
        assert_eq!(next_len(4096, Some(u32::MAX), 65536), 65536);
        assert_eq!(next_len(u32::MAX / 2 + 1, None, u32::MAX), u32::MAX);
    }
}
