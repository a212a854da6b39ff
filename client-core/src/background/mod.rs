//! The background tasks of a session (the "background" layer of docs/ARCHITECTURE.md): each
//! holds the session weakly, above the engine whose request path it uses, and below the
//! public API that starts it. Nothing under the engine imports them.
//!
//! - `manager`: keeps the channels matching the multichannel plan (interface polls, planning,
//!   binding, draining).
//! - `binding`: opening one more channel of the session (NEGOTIATE + SESSION_SETUP BINDING).
//! - `watchdog`: applies the loss detector (`failover::detector`) to the channels and probes
//!   the suspects.
//! - `reconnect`: re-establishes a session that lost every channel and reclaims its opens.
//! - `lease_breaks`: acknowledges lease and oplock breaks.

pub(crate) mod binding;
pub(crate) mod lease_breaks;
pub(crate) mod manager;
pub(crate) mod reconnect;
pub(crate) mod watchdog;
