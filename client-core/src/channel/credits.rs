//! The credit window of one connection (MS-SMB2 3.2.4.1.5, 3.2.5.1.4), as plain state.
//!
//! The server hands out credits; each request spends `CreditCharge` of them (one per 64 KiB it
//! moves) and consumes that many consecutive MessageIds. Every response (interim or final)
//! returns `CreditResponse` new credits. The client may never spend more than it holds, or the
//! server drops the connection. This type keeps that arithmetic in one place, free of I/O, so it
//! is tested with plain values; the channel wraps it in a mutex and wakes waiters on grants.
//!
//! MessageIds are reserved only when a request is ready to go out: an id that is never sent
//! would hold the low edge of the server's sequence window forever (MS-SMB2 3.3.1.1).

/// What a request asks of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// First MessageId of the request (it owns `charge` consecutive ids).
    pub(crate) message_id: u64,
    /// Credits spent.
    pub(crate) charge: u16,
    /// CreditRequest to put in the header: the charge plus what it takes to grow the window
    /// back towards the target.
    pub(crate) credit_request: u16,
}

/// Credits and MessageIds of one connection.
#[derive(Debug)]
pub(crate) struct CreditWindow {
    /// Credits the client may spend now.
    available: u32,
    /// Credits spent by requests whose final response has not arrived.
    in_flight: u32,
    /// Next MessageId to hand out.
    next_message_id: u64,
    /// How many credits the client tries to hold (available + in flight).
    target: u32,
}

/// Most credits a connection holds (available + in flight). A server may grant more than
/// asked (MS-SMB2 3.2.5.1.4 has the client add whatever CreditResponse says), but no request
/// needs more than 128 at once, and a hostile one granting 65535 a reply would otherwise grow
/// the count until it wrapped. Credits past the cap are left unused, which the server cannot
/// tell from a client that is not busy.
const MAX_HELD: u32 = u16::MAX as u32;

/// The server left the client with no credit and nothing in flight: no response can ever
/// grant more, so the connection is dead (a server bug or an attack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Starved;

impl CreditWindow {
    /// A fresh connection: one credit, MessageId 0 (MS-SMB2 3.2.1.2: the first NEGOTIATE
    /// uses MessageId 0 and the client starts with one credit).
    pub(crate) fn new(target: u32) -> Self {
        CreditWindow {
            available: 1,
            in_flight: 0,
            next_message_id: 0,
            target: target.max(1),
        }
    }

    /// Credits the client could hold if everything in flight came back.
    pub(crate) fn total(&self) -> u32 {
        self.available + self.in_flight
    }

    /// Credits spent by requests still waiting for their final reply.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Credits available right now.
    pub(crate) fn available(&self) -> u32 {
        self.available
    }

    /// Take `charge` credits and as many MessageIds, or `None` if not enough are available.
    pub(crate) fn reserve(&mut self, charge: u16) -> Option<Reservation> {
        let charge = charge.max(1);
        if self.available < u32::from(charge) {
            return None;
        }
        self.available -= u32::from(charge);
        self.in_flight += u32::from(charge);
        let message_id = self.next_message_id;
        self.next_message_id += u64::from(charge);
        let missing = self.target.saturating_sub(self.total());
        let credit_request = (u32::from(charge) + missing).min(u32::from(u16::MAX)) as u16;
        Some(Reservation {
            message_id,
            charge,
            credit_request,
        })
    }

    /// Credits granted by a response. `final_response` is false for an interim
    /// STATUS_PENDING reply, whose request still occupies its credits until the final reply.
    pub(crate) fn on_response(
        &mut self,
        charge: u16,
        granted: u16,
        final_response: bool,
    ) -> Result<(), Starved> {
        if final_response {
            self.in_flight = self.in_flight.saturating_sub(u32::from(charge.max(1)));
        }
        let room = MAX_HELD.saturating_sub(self.total());
        self.available += u32::from(granted).min(room);
        self.check_starved()
    }

    fn check_starved(&self) -> Result<(), Starved> {
        if self.available == 0 && self.in_flight == 0 {
            Err(Starved)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_granting_65535_a_reply_fills_the_window_to_the_cap_only() {
        let mut w = CreditWindow::new(512);
        for _ in 0..100_000 {
            let r = w.reserve(1).unwrap();
            w.on_response(r.charge, u16::MAX, true).unwrap();
        }
        assert_eq!(w.total(), MAX_HELD);
        assert_eq!(w.in_flight(), 0);
        // In flight counts against the cap too.
        let r = w.reserve(64).unwrap();
        w.on_response(1, u16::MAX, false).unwrap();
        assert_eq!(w.total(), MAX_HELD);
        // The final reply grants none: the 64 spent are gone.
        w.on_response(r.charge, 0, true).unwrap();
        assert_eq!(w.available(), MAX_HELD - 64);
    }

    #[test]
    fn negotiate_uses_id_zero_and_one_credit() {
        let mut w = CreditWindow::new(512);
        let r = w.reserve(1).unwrap();
        assert_eq!(r.message_id, 0);
        assert_eq!(r.credit_request, 512);
        assert!(w.reserve(1).is_none(), "never overspend");
        w.on_response(1, 31, true).unwrap();
        assert_eq!(w.available(), 31);
    }

    #[test]
    fn multi_credit_requests_take_consecutive_ids() {
        let mut w = CreditWindow::new(512);
        w.reserve(1).unwrap();
        w.on_response(1, 200, true).unwrap();
        let a = w.reserve(128).unwrap();
        let b = w.reserve(16).unwrap();
        assert_eq!(a.message_id, 1);
        assert_eq!(b.message_id, 129);
        assert_eq!(w.available(), 56);
        assert!(w.reserve(57).is_none());
        assert_eq!(w.reserve(56).unwrap().message_id, 145);
        assert_eq!(w.available(), 0);
    }

    #[test]
    fn asks_for_the_missing_part_of_the_target() {
        let mut w = CreditWindow::new(100);
        w.reserve(1).unwrap();
        w.on_response(1, 10, true).unwrap();
        // holds 10; spending 4 still leaves a total of 10, so ask 4 back + 90 missing
        assert_eq!(w.reserve(4).unwrap().credit_request, 94);
    }

    #[test]
    fn interim_response_keeps_credits_in_flight() {
        let mut w = CreditWindow::new(8);
        w.reserve(1).unwrap();
        w.on_response(1, 1, false).unwrap(); // STATUS_PENDING granted 1
        assert_eq!(w.total(), 2);
        w.on_response(1, 0, true).unwrap(); // final reply grants nothing
        assert_eq!(w.total(), 1);
    }

    #[test]
    fn survives_server_granting_fewer_and_detects_starvation() {
        let mut w = CreditWindow::new(512);
        w.reserve(1).unwrap();
        w.on_response(1, 2, true).unwrap();
        w.reserve(1).unwrap();
        w.reserve(1).unwrap();
        assert!(w.reserve(1).is_none());
        w.on_response(1, 0, true).unwrap(); // still one in flight: fine
        assert_eq!(w.on_response(1, 0, true), Err(Starved));
    }
}
