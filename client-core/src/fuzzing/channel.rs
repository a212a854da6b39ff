//! The channel's receive path driven by arbitrary bytes, for the fuzz targets in `fuzz/` (see
//! `crate::fuzzing`). Nothing here is used by the client itself.
//!
//! The byte stream plays the server: it reaches [`FrameReader`] and the reader task exactly as
//! a socket's bytes would, cut into reads of a size the input chooses, with a yield to the
//! scheduler between reads so that callers waiting for credits get to send before the next
//! reply is read (a real server cannot answer a request before it arrives).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use smb3_proto::crypto::keys::derive_session_keys;
use smb3_proto::crypto::preauth::PreauthHash;
use smb3_proto::crypto::seal::Sealer;
use smb3_proto::crypto::signing::Signer;
use smb3_proto::crypto::CryptoBackend;
use smb3_proto::header::Header;
use smb3_proto::msg::compound::split_compound;
use smb3_proto::msg::negotiate::{Capabilities, SecurityMode};
use smb3_proto::msg::RequestBody;
use smb3_proto::{Cipher, Command, Dialect, SigningAlgorithm};
use tokio::io::{AsyncRead, ReadBuf};

use crate::background::lease_breaks::plan_ack;
use crate::channel::frame::{frame_prefix, FrameError, FrameReader, MAX_FRAME};
use crate::channel::{BufferPool, Channel, ChannelOptions, Request};
use crate::lease::LeaseTable;
use crate::negotiated::Negotiated;
use crate::security::SessionSecurity;

/// Requests the dispatch target keeps outstanding at most: MessageIds 0 to this - 1.
const MAX_REQUESTS: u64 = 64;

/// The buffers large frames are read into, kept from one input to the next as a client keeps
/// them from one reply to the next (and as large as its default pool). A frame header
/// announcing up to 16 MiB makes the reader take a buffer that large before the bytes arrive;
/// a fresh one each time would make zeroing it most of what the fuzzer does.
fn pool() -> BufferPool {
    thread_local! {
        static POOL: BufferPool = BufferPool::new(64 << 20);
    }
    POOL.with(BufferPool::clone)
}

/// A byte stream handed out in reads of at most `chunk` bytes (the first [`CUT_READS`] reads;
/// then as much as the reader asks, so a long stream cut into single bytes does not make one
/// input take seconds), optionally each read preceded by one `Pending` so the other tasks run
/// in between.
struct Trickle {
    data: Bytes,
    chunk: usize,
    reads: usize,
    yield_between: bool,
    yielded: bool,
}

/// How many reads are cut to the chosen size.
const CUT_READS: usize = 256;

impl Trickle {
    fn new(data: Bytes, chunk: usize, yield_between: bool) -> Trickle {
        Trickle {
            data,
            chunk,
            reads: 0,
            yield_between,
            yielded: false,
        }
    }
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.yield_between && !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.reads += 1;
        let chunk = if self.reads <= CUT_READS {
            self.chunk
        } else {
            usize::MAX
        };
        let n = chunk.min(self.data.len()).min(buf.remaining());
        let head = self.data.split_to(n);
        buf.put_slice(&head);
        Poll::Ready(Ok(()))
    }
}

/// How big each read is: `selector` 0 gives everything at once, others a size from 1 byte to
/// beyond a frame header plus a small message.
fn chunk_size(selector: u8) -> usize {
    match selector {
        0 => usize::MAX,
        s => usize::from(s) * usize::from(s),
    }
}

/// One runtime per thread, made once: a fuzzer runs many thousands of inputs a second.
fn block_on<F: Future>(f: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime");
    }
    RUNTIME.with(|rt| rt.block_on(f))
}

/// The transport framing alone (MS-SMB2 2.1): `data[0]` sets the read size, the rest is the
/// stream. Every frame read must have come from the stream, whole.
pub(crate) fn transport_frames(data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let reader = Trickle::new(Bytes::copy_from_slice(stream), chunk_size(selector), false);
    block_on(async {
        let mut frames = FrameReader::new(reader, pool());
        let mut consumed = 0usize;
        loop {
            match frames.next().await {
                Ok(frame) => {
                    consumed += 4 + frame.len();
                    assert!(consumed <= stream.len(), "a frame longer than the stream");
                    let _ = frame.freeze();
                }
                Err(FrameError::Eof) => {
                    assert_eq!(consumed, stream.len(), "EOF with bytes left");
                    return;
                }
                Err(FrameError::BadPrefix(_) | FrameError::Io(_)) => return,
            }
        }
    });
}

/// The body of every request the dispatch target sends: an ECHO's, whatever the command the
/// header names (nothing reads it: the peer is the fuzz input).
struct Probe;

impl RequestBody for Probe {
    const COMMAND: Command = Command::ECHO;
    fn encode_body(&self, msg: &mut BytesMut) {
        msg.put_u16_le(4);
        msg.put_u16_le(0);
    }
}

const SESSION_ID: u64 = 0x0000_0400_0000_0019;

/// The keys of a fixed 3.1.1 session (AES-GMAC signing, AES-128-GCM): the channel's
/// `SessionSecurity` (one that accepts unsigned replies, one that requires signed ones), and
/// the server's side of them, so the harness can sign and seal the stream like a server holding
/// the session key (a hostile server does). Derived once: key derivation would otherwise be
/// most of the time an input takes.
struct Keys {
    client: [Arc<SessionSecurity>; 2],
    server_signer: Signer,
    server_sealer: Sealer,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let negotiated = Negotiated {
            dialect: Dialect::Smb311,
            server_guid: [7; 16],
            server_capabilities: Capabilities(Capabilities::ENCRYPTION),
            server_security_mode: SecurityMode(SecurityMode::SIGNING_ENABLED),
            max_read: 1 << 20,
            max_write: 1 << 20,
            max_transact: 1 << 20,
            cipher: Some(Cipher::Aes128Gcm),
            signing_algorithm: SigningAlgorithm::AesGmac,
            preauth: None,
            gss_token: Bytes::new(),
            posix_extensions: false,
        };
        let session_key = [0x42u8; 16];
        let preauth = PreauthHash::from_bytes([0x17; 64]);
        let client = |must_sign| {
            let s = SessionSecurity::derive(
                &negotiated,
                &session_key,
                Some(&preauth),
                SESSION_ID,
                must_sign,
                None,
            );
            Arc::new(s.expect("fixed keys derive"))
        };
        let keys = derive_session_keys(
            Dialect::Smb311,
            &session_key,
            Some(Cipher::Aes128Gcm),
            Some(&preauth),
        )
        .expect("fixed keys derive");
        let backend = CryptoBackend::default();
        let signing = keys.signing_key.as_bytes();
        let server_signer =
            Signer::new(SigningAlgorithm::AesGmac, signing, backend).expect("fixed key fits");
        let decryption = keys.decryption_key.expect("a cipher was negotiated");
        let server_sealer =
            Sealer::new(Cipher::Aes128Gcm, decryption.as_bytes(), backend).expect("fixed key fits");
        Keys {
            client: [client(false), client(true)],
            server_signer,
            server_sealer,
        }
    })
}

/// The frames at the front of `stream`, as far as their transport headers are consistent.
fn frames_of(stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = stream;
    while let [0, a, b, c, tail @ ..] = rest {
        let len = (usize::from(*a) << 16) | (usize::from(*b) << 8) | usize::from(*c);
        if len > tail.len() {
            break;
        }
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    out
}

/// What each MessageId the stream answers is a reply to, so the harness can send matching
/// requests: the command of the first message carrying it (unnamed ones become ECHO).
fn commands_answered(frames: &[&[u8]]) -> Vec<Command> {
    let mut commands = vec![None; MAX_REQUESTS as usize];
    for frame in frames {
        let frame = Bytes::copy_from_slice(frame);
        let messages = split_compound(&frame).unwrap_or_else(|_| vec![frame.clone()]);
        for m in messages {
            if let Ok(h) = Header::decode(&m) {
                if let Some(slot) = commands.get_mut(h.message_id as usize) {
                    slot.get_or_insert(h.command);
                }
            }
        }
    }
    let last = commands
        .iter()
        .rposition(Option::is_some)
        .map_or(0, |i| i + 1);
    commands[..last]
        .iter()
        .map(|c| c.unwrap_or(Command::ECHO))
        .collect()
}

/// Sign every message of `frame` in place as the server would (each compound member on its
/// own, MS-SMB2 3.3.4.1.1); frames that do not split are signed whole.
fn sign_frame(signer: &Signer, frame: &[u8]) -> Vec<u8> {
    let mut out = frame.to_vec();
    let bytes = Bytes::copy_from_slice(frame);
    let lens: Vec<usize> = match split_compound(&bytes) {
        Ok(messages) => messages.iter().map(Bytes::len).collect(),
        Err(_) => vec![out.len()],
    };
    let mut start = 0;
    for len in lens {
        let _ = signer.sign_in_place(&mut out[start..start + len], &[]);
        start += len;
    }
    out
}

/// How the dispatch target treats the stream, from `data[0]`.
#[derive(Clone, Copy)]
struct Mode {
    /// Install session keys in the channel.
    crypto: bool,
    /// Sign (1) or seal (2) every frame with the server's keys before it is sent.
    rewrite: u8,
    replies_must_be_signed: bool,
    chunk: usize,
}

impl Mode {
    fn from_byte(b: u8) -> Mode {
        Mode {
            crypto: b & 3 != 0,
            rewrite: (b & 3).saturating_sub(1),
            replies_must_be_signed: b & 4 != 0,
            chunk: chunk_size(b >> 3),
        }
    }
}

/// The client's reply dispatch: `data[0]` picks the mode ([`Mode`]), the rest is what the
/// server sends. The harness first sends one request for every MessageId the stream answers
/// (up to [`MAX_REQUESTS`], each of the command its reply names), then lets the channel read
/// the stream to its end. Whatever the stream holds, every call must end (the stream's end
/// closes the connection), the channel must end dead and empty, and unsolicited messages go
/// through the client's break handling.
pub(crate) fn reply_dispatch(data: &[u8]) {
    dispatch(data);
}

/// [`reply_dispatch`], returning how many calls got a reply (for the tests of the harness).
fn dispatch(data: &[u8]) -> usize {
    let Some((&mode, stream)) = data.split_first() else {
        return 0;
    };
    let mode = Mode::from_byte(mode);
    let frames = frames_of(stream);
    let commands = commands_answered(&frames);
    let keys = keys();
    let stream = match (mode.crypto, mode.rewrite) {
        (true, 1) => rewrite(stream, &frames, |f| sign_frame(&keys.server_signer, f)),
        (true, 2) => rewrite(stream, &frames, |f| {
            keys.server_sealer
                .seal(SESSION_ID, &[f])
                .map(|s| s.to_vec())
                .unwrap_or_default()
        }),
        _ => Bytes::copy_from_slice(stream),
    };
    let reader = Trickle::new(stream, mode.chunk, true);
    let addr: SocketAddr = ([192, 0, 2, 1], 445).into();
    let opts = ChannelOptions {
        credit_target: 64,
        frame_buffers: pool(),
        ..ChannelOptions::default()
    };
    block_on(async move {
        let (channel, mut unsolicited) =
            Channel::start(reader, tokio::io::sink(), addr, addr, &opts);
        if mode.crypto {
            let security = &keys.client[usize::from(mode.replies_must_be_signed)];
            channel.set_crypto(security.clone());
        }
        let calls: Vec<_> = commands
            .into_iter()
            .map(|command| {
                let channel = channel.clone();
                let mut req = Request::new(&Probe);
                req.pretend_command(command);
                req.sign = mode.crypto;
                req.timeout = Duration::from_secs(3600);
                tokio::spawn(async move { channel.call(req).await })
            })
            .collect();
        let mut replies = 0;
        for call in calls {
            // Ok or a typed error: a panic in the channel would surface here.
            match call.await {
                Ok(reply) => replies += usize::from(reply.is_ok()),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        // The stream ended, so the connection did; wait for the reader to say so.
        channel.death_watch().wait().await;
        assert_eq!(channel.outstanding(), 0, "a dead channel keeps requests");
        let table = LeaseTable::default();
        while let Ok(msg) = unsolicited.try_recv() {
            let _ = plan_ack(&table, &msg);
        }
        replies
    })
}

/// The stream with each of its leading `frames` replaced by `f(frame)` under a new transport
/// header; bytes after the last whole frame are kept as they are.
fn rewrite(stream: &[u8], frames: &[&[u8]], f: impl Fn(&[u8]) -> Vec<u8>) -> Bytes {
    let mut out = BytesMut::new();
    let mut used = 0;
    for frame in frames {
        let new = f(frame);
        if new.len() <= MAX_FRAME {
            out.put_slice(&frame_prefix(new.len()));
            out.put_slice(&new);
        }
        used += 4 + frame.len();
    }
    out.put_slice(&stream[used..]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb3_proto::header::HEADER_LEN;

    #[test]
    fn commands_follow_the_replies() {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::READ);
        h.message_id = 2;
        h.encode(&mut msg);
        let mut stream = frame_prefix(msg.len()).to_vec();
        stream.extend_from_slice(&msg);
        let frames = frames_of(&stream);
        assert_eq!(
            commands_answered(&frames),
            vec![Command::ECHO, Command::ECHO, Command::READ]
        );
    }

    /// An ECHO reply to MessageId 0 granting 8 credits, as a one-frame stream after `mode`.
    fn echo_reply(mode: u8) -> Vec<u8> {
        let mut msg = BytesMut::new();
        let mut h = Header::request(Command::ECHO);
        h.flags.0 |= smb3_proto::HeaderFlags::SERVER_TO_REDIR;
        h.credits = 8;
        h.session_id = SESSION_ID;
        h.encode(&mut msg);
        msg.put_u16_le(4);
        msg.put_u16_le(0);
        let mut data = vec![mode];
        data.extend_from_slice(&frame_prefix(msg.len()));
        data.extend_from_slice(&msg);
        assert_eq!(msg.len(), HEADER_LEN + 4);
        data
    }

    #[test]
    fn replies_reach_their_callers_in_every_mode() {
        // Plain; keys installed and the reply unsigned but not required to be; signed by the
        // harness; sealed by the harness; each with reads of 1 byte and of everything.
        for mode in [0u8, 1, 2, 3] {
            for chunk in [1u8 << 3, 0] {
                assert_eq!(dispatch(&echo_reply(mode | chunk)), 1, "mode {mode}");
            }
        }
        // Unsigned where signing is required: refused.
        assert_eq!(dispatch(&echo_reply(1 | 4)), 0);
        // Signed by the harness where signing is required: accepted.
        assert_eq!(dispatch(&echo_reply(2 | 4)), 1);
    }

    #[test]
    fn the_frame_reader_takes_the_stream_in_any_cut() {
        for chunk in 0..=255u8 {
            let mut data = echo_reply(0);
            data[0] = chunk;
            transport_frames(&data);
        }
    }
}
