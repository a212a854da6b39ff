//! One TCP connection: frames in, replies out. A frame may be sealed (TRANSFORM_HEADER) and
//! may hold a compound; each request in it is checked (session, signature), handed to its
//! command's handler, and answered in one frame, compounded, signed and sealed as the
//! request was (MS-SMB2 3.3.4.1, 3.3.5.2).

use std::sync::Arc;

use smb3_proto::crypto::Signer;
use smb3_proto::header::{HEADER_LEN, PROTOCOL_ID};
use smb3_proto::msg::transform::TRANSFORM_PROTOCOL_ID;
use smb3_proto::{Command, Header, HeaderFlags, NtStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::connection::Conn;
use crate::ops::{self, Previous};
use crate::protection::{Protection, Sealing};
use crate::reply::{error_body, frame_replies, reply_message, MessageOutcome, Outcome};
use crate::state::State;
use crate::wire::{Handled, Reply};
use crate::{FaultAction, Shared};

/// Frames above this are refused (the connection is closed): the largest request the
/// server's MaxWriteSize allows is far below.
const MAX_FRAME: usize = 16 << 20;

/// Serve one connection until the client closes it, a frame is malformed, or the test cuts it.
pub(crate) async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let local_ip = stream.local_addr().ok().map(|a| a.ip());
    let mut cut = shared.cut.subscribe();
    let (mut rd, mut wr) = stream.into_split();
    // Frames are read by a task of their own so that waiting for one can be interrupted by
    // a cut without losing a frame half read.
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel(4);
    let reader = tokio::spawn(async move {
        while let Ok(frame) = read_frame(&mut rd).await {
            if frames_tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    let (mut conn, mut outbox) = Conn::new(shared);
    let reset = loop {
        let (outcome, reply_to_frame) = tokio::select! {
            frame = frames.recv() => match frame {
                Some(frame) => (conn.handle(frame).await, true),
                None => break false,
            },
            Some(out) = outbox.recv() => (out, false),
            changed = cut.changed() => {
                let order = *cut.borrow_and_update();
                if changed.is_err() || order.applies_to(local_ip) {
                    break true;
                }
                continue;
            }
        };
        if matches!(outcome, Outcome::Cut) {
            break true;
        }
        // What the request queued while it was handled goes out before its own reply: a
        // server sends those the moment they happen. A CLOSE completes the CHANGE_NOTIFY
        // waiting on the handle (STATUS_NOTIFY_CLEANUP) before it is answered, and clients
        // rely on that order; an interim response is queued before any final one, since
        // both are queued under the state lock.
        let mut ready = Vec::new();
        if reply_to_frame {
            while let Ok(queued) = outbox.try_recv() {
                ready.push(queued);
            }
        }
        ready.push(outcome);
        let mut end = None;
        for out in ready {
            match out {
                Outcome::Send(bytes) => {
                    if wr.write_all(&bytes).await.is_err() {
                        end = Some(false);
                        break;
                    }
                }
                Outcome::Nothing => {}
                Outcome::Cut => {
                    end = Some(true);
                    break;
                }
            }
        }
        if let Some(reset) = end {
            break reset;
        }
    };
    if reset {
        // Zero linger: the close sends a reset and drops what is queued, as a dead link or a
        // killed server does.
        let _ = wr.as_ref().set_zero_linger();
    }
    reader.abort();
    // The read half lives in the reader task: the socket is closed once that has ended.
    let _ = reader.await;
    drop(wr);
    conn.closed();
}

async fn read_frame(rd: &mut tokio::net::tcp::OwnedReadHalf) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    rd.read_exact(&mut len).await?;
    let n = u32::from_be_bytes(len) as usize;
    if len[0] != 0 || !(4..=MAX_FRAME).contains(&n) {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut frame = vec![0u8; n];
    rd.read_exact(&mut frame).await?;
    Ok(frame)
}

impl Conn {
    async fn handle(&mut self, mut frame: Vec<u8>) -> Outcome {
        let mut sealing = None;
        if frame.starts_with(&TRANSFORM_PROTOCOL_ID) {
            // MS-SMB2 3.3.5.2.1.1: a message that does not decrypt ends the connection.
            let Some(session_id) = frame
                .get(44..52)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            else {
                return Outcome::Cut;
            };
            let Some(s) = self.sealing_of(session_id) else {
                return Outcome::Cut;
            };
            match s.open.open_in_place(&mut frame) {
                Ok(start) => {
                    frame.drain(..start);
                }
                Err(_) => return Outcome::Cut,
            }
            sealing = Some(s);
        }
        let Some(messages) = split(&frame) else {
            return Outcome::Cut;
        };
        let work = FrameWork {
            handler: Handler {
                shared: self.shared.clone(),
                negotiated: self.negotiated.clone(),
                conn: self.id,
            },
            signers: self.signers.clone(),
            signing_required: self.signing_required(),
            sealing,
            frame,
            messages,
        };
        let commands = || work.messages.iter().map(|(h, _)| h.command);
        if commands().any(|c| matches!(c, Command::NEGOTIATE | Command::SESSION_SETUP)) {
            return self.setup(work);
        }
        // A CREATE or SET_INFO may have to wait for other clients to acknowledge lease
        // breaks: its frame is then worked on in a task of its own, as a server answers it
        // asynchronously, so that this connection goes on with the next frames (the
        // acknowledgments among them). Its replies go out through the outbox.
        let may_wait = commands().any(|c| matches!(c, Command::CREATE | Command::SET_INFO))
            && !self.shared.lock().leases.is_empty();
        if may_wait {
            if let Some(outbox) = self.shared.lock().outboxes.get(&self.id).cloned() {
                tokio::spawn(async move {
                    let _ = outbox.send(work.run().await);
                });
                return Outcome::Nothing;
            }
        }
        work.run().await
    }

    /// A frame with NEGOTIATE or SESSION_SETUP, which change this connection: its requests
    /// one by one, in place.
    fn setup(&mut self, work: FrameWork) -> Outcome {
        let mut built = Vec::new();
        for (header, range) in &work.messages {
            let msg = &work.frame[range.clone()];
            *self
                .shared
                .lock()
                .requests
                .entry(header.command)
                .or_default() += 1;
            let outcome = match header.command {
                Command::NEGOTIATE => self.negotiate(msg, header),
                Command::SESSION_SETUP => self.session_setup(msg, header),
                // Nothing else shares a frame with them in practice; refuse it.
                _ => return Outcome::Cut,
            };
            match outcome {
                MessageOutcome::Reply(b) => built.push(b),
                MessageOutcome::NoReply => {}
                MessageOutcome::Cut | MessageOutcome::CutAfter => return Outcome::Cut,
            }
        }
        if built.is_empty() {
            return Outcome::Nothing;
        }
        match frame_replies(built, work.sealing.as_deref()) {
            Some(out) => Outcome::Send(out),
            None => Outcome::Cut,
        }
    }

    fn sealing_of(&self, session_id: u64) -> Option<Arc<Sealing>> {
        self.shared
            .lock()
            .sessions
            .get(&session_id)
            .and_then(|s| s.sealing.clone())
    }
}

/// The messages of a frame: each one's header and where it lies. None when the chain is
/// malformed (the connection is then closed, MS-SMB2 3.3.5.2.7).
fn split(frame: &[u8]) -> Option<Vec<(Header, std::ops::Range<usize>)>> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let header = Header::decode(frame.get(at..)?).ok()?;
        let next = header.next_command as usize;
        let end = if next == 0 { frame.len() } else { at + next };
        if (next != 0 && (next % 8 != 0 || next < HEADER_LEN)) || end > frame.len() {
            return None;
        }
        if header.is_response() || frame.get(at..at + 4) != Some(&PROTOCOL_ID[..]) {
            return None;
        }
        out.push((header, at..end));
        if next == 0 {
            return Some(out);
        }
        at = end;
    }
}

/// A frame of requests other than NEGOTIATE and SESSION_SETUP, with what checking and
/// answering them needs of the connection.
struct FrameWork {
    handler: Handler,
    /// The signing key of each session on the connection.
    signers: std::collections::HashMap<u64, Arc<Signer>>,
    signing_required: bool,
    /// The session's sealers, when the frame came sealed: the replies are sealed too.
    sealing: Option<Arc<Sealing>>,
    frame: Vec<u8>,
    messages: Vec<(Header, std::ops::Range<usize>)>,
}

impl FrameWork {
    async fn run(self) -> Outcome {
        let mut previous = Previous::default();
        let mut built = Vec::new();
        let mut cut_after = false;
        for (header, range) in &self.messages {
            let msg = &self.frame[range.clone()];
            match self.one(msg, header.clone(), &mut previous).await {
                MessageOutcome::Reply(b) => built.push(b),
                MessageOutcome::NoReply => {}
                MessageOutcome::Cut => return Outcome::Cut,
                MessageOutcome::CutAfter => cut_after = true,
            }
        }
        if cut_after {
            return Outcome::Cut;
        }
        if built.is_empty() {
            return Outcome::Nothing;
        }
        match frame_replies(built, self.sealing.as_deref()) {
            Some(out) => Outcome::Send(out),
            None => Outcome::Cut,
        }
    }

    /// One request: its session and signature checked, the lease breaks it causes sent and
    /// (bounded) waited for, then run.
    async fn one(&self, msg: &[u8], mut header: Header, previous: &mut Previous) -> MessageOutcome {
        if header.flags.has(HeaderFlags::RELATED_OPERATIONS) {
            header.session_id = previous.session_id;
            header.tree_id = previous.tree_id;
        }
        let shared = &self.handler.shared;
        *shared.lock().requests.entry(header.command).or_default() += 1;
        let protection = Protection {
            signer: self.signers.get(&header.session_id).cloned(),
            sealing: self.sealing.clone(),
        };
        let checked = check_session(
            msg,
            &header,
            protection.signer.as_deref(),
            protection.sealing.is_some(),
            self.signing_required,
        )
        .and_then(|()| not_expired(shared, &header));
        if header.command == Command::CANCEL {
            // A CANCEL is never answered itself; the request it names is, when it can still
            // be cancelled (MS-SMB2 3.3.5.16). One that fails the session checks is dropped.
            if checked.is_ok() {
                ops::notify::cancel(&mut shared.lock(), self.handler.conn, &header);
            }
            return MessageOutcome::NoReply;
        }
        if checked.is_ok() {
            let client = self.handler.negotiated.as_ref().map(|n| n.client_guid);
            let waiting = ops::breaks_before(&mut shared.lock(), &header, msg, previous, client);
            if !waiting.is_empty() {
                wait_for_acknowledgments(shared, &waiting).await;
            }
        }
        self.handler
            .run(&header, msg, previous, checked, &protection)
    }
}

/// The session named must be established on this connection, and a signed request's
/// signature right (MS-SMB2 3.3.5.2.4); a session that requires signing refuses unsigned
/// requests that were not sealed either.
fn check_session(
    msg: &[u8],
    header: &Header,
    signer: Option<&Signer>,
    sealed: bool,
    signing_required: bool,
) -> Result<(), NtStatus> {
    let Some(signer) = signer else {
        return Err(NtStatus::USER_SESSION_DELETED);
    };
    if sealed {
        return Ok(());
    }
    if header.flags.has(HeaderFlags::SIGNED) {
        if !signer.verify(msg) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        return Ok(());
    }
    if signing_required {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// A session whose authentication expired refuses all but LOGOFF, CLOSE, LOCK, CANCEL and
/// ECHO (MS-SMB2 3.3.5.2.9; Samba lets the last two through too).
fn not_expired(shared: &Shared, header: &Header) -> Result<(), NtStatus> {
    let expired = shared
        .lock()
        .sessions
        .get(&header.session_id)
        .is_some_and(|s| s.expired);
    let runs_anyway = matches!(
        header.command,
        Command::LOGOFF | Command::CLOSE | Command::LOCK | Command::CANCEL | Command::ECHO
    );
    if expired && !runs_anyway {
        return Err(NtStatus::NETWORK_SESSION_EXPIRED);
    }
    Ok(())
}

/// What running a request needs of its connection, cheap to hand to a task.
struct Handler {
    shared: Arc<Shared>,
    negotiated: Option<crate::connection::Negotiated>,
    conn: u64,
}

impl Handler {
    /// Run one checked request (planned faults first) and build its reply.
    fn run(
        &self,
        header: &Header,
        msg: &[u8],
        previous: &mut Previous,
        session_checked: Result<(), NtStatus>,
        protection: &Protection,
    ) -> MessageOutcome {
        let related = header.flags.has(HeaderFlags::RELATED_OPERATIONS);
        let result = match session_checked {
            Err(status) => Err(status),
            Ok(()) => {
                let mut state = self.shared.lock();
                let path = ops::request_path(&state, header, msg, previous);
                match state.take_fault(header.command, path.as_deref()) {
                    Some(FaultAction::Fail(status)) => Err(status),
                    Some(FaultAction::Cut) => return MessageOutcome::Cut,
                    Some(FaultAction::Ignore) => return MessageOutcome::NoReply,
                    Some(FaultAction::CutAfter) => {
                        let _ = self.dispatch(&mut state, header, msg, previous, protection);
                        return MessageOutcome::CutAfter;
                    }
                    None => self.dispatch(&mut state, header, msg, previous, protection),
                }
            }
        };
        if header.command == Command::OPLOCK_BREAK {
            self.shared.acked.notify_waiters();
        }
        previous.session_id = header.session_id;
        if header.command != Command::TREE_CONNECT {
            previous.tree_id = header.tree_id;
        }
        // A failed CREATE hands its error to the related requests after it that need its
        // FileId. MS-SMB2 3.3.5.2.7.2 says any failed request that carried one SHOULD;
        // Windows (note <260>) and Samba do it for a CREATE only, and so does this server
        // unless told to follow the letter (`fail_whole_chain`).
        if let Err(status) = &result {
            let carried_file = previous.file.is_some() && self.shared.config.fail_whole_chain;
            if header.command == Command::CREATE || carried_file {
                previous.file = Some(Err(*status));
            }
        }
        let (status, body, tree_id) = match result {
            Ok((reply, _)) if reply.sent_apart => return MessageOutcome::NoReply,
            Ok((reply, tree_id)) => (reply.status, reply.body, tree_id.unwrap_or(header.tree_id)),
            Err(status) => (status, error_body(), header.tree_id),
        };
        let reply = reply_message(header, status, &body, header.session_id, tree_id, related);
        MessageOutcome::reply(reply, protection.sign_with())
    }

    fn dispatch(
        &self,
        state: &mut State,
        header: &Header,
        msg: &[u8],
        previous: &mut Previous,
        protection: &Protection,
    ) -> Result<(Reply, Option<u32>), NtStatus> {
        let mut ctx = ops::Ctx {
            state,
            config: &self.shared.config,
            server_guid: self.shared.server_guid,
            conn: self.conn,
            negotiated: self.negotiated.as_ref(),
            header,
            msg,
            previous,
            protection,
        };
        let handled: Handled = match header.command {
            Command::TREE_CONNECT => {
                let (reply, tree) = ops::tree::connect(&mut ctx)?;
                return Ok((reply, Some(tree)));
            }
            Command::LOGOFF => ops::tree::logoff(&mut ctx),
            Command::TREE_DISCONNECT => ops::tree::disconnect(&mut ctx),
            Command::CREATE => ops::create::create(&mut ctx),
            Command::CLOSE => ops::create::close(&mut ctx),
            Command::FLUSH => ops::io::flush(&mut ctx),
            Command::READ => ops::io::read(&mut ctx),
            Command::WRITE => ops::io::write(&mut ctx),
            Command::LOCK => ops::lock::lock(&mut ctx),
            Command::IOCTL => ops::ioctl::ioctl(&mut ctx),
            Command::ECHO => Ok(Reply::empty(4)),
            Command::QUERY_DIRECTORY => ops::dir::query_directory(&mut ctx),
            Command::QUERY_INFO => ops::info::query(&mut ctx),
            Command::SET_INFO => ops::info::set(&mut ctx),
            Command::OPLOCK_BREAK => ops::lease::acknowledge(&mut ctx),
            Command::CHANGE_NOTIFY => ops::notify::change_notify(&mut ctx),
            _ => Err(NtStatus::NOT_SUPPORTED),
        };
        handled.map(|r| (r, None))
    }
}

/// Wait (bounded) until every lease in `waiting` has acknowledged its break; past the
/// timeout the breaks take effect anyway (MS-SMB2 3.3.2.5).
async fn wait_for_acknowledgments(shared: &Shared, waiting: &[crate::state::LeaseId]) {
    let deadline = tokio::time::Instant::now() + shared.config.lease_break_timeout;
    loop {
        let acked = shared.acked.notified();
        tokio::pin!(acked);
        acked.as_mut().enable();
        if ops::lease::all_acknowledged(&shared.lock(), waiting) {
            return;
        }
        if tokio::time::timeout_at(deadline, acked).await.is_err() {
            ops::lease::force(&mut shared.lock(), waiting);
            return;
        }
    }
}
