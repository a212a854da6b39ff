//! Failover (DESIGN §3 step 7): losing a channel loses nothing. Requests whose channel died
//! are sent again on the survivors (`replay`), channels that stop answering without a TCP
//! error are found by watching their progress (`detector`, driven by `watchdog`), and the
//! counters say what happened (`stats`). Reconnecting lost slots is the multichannel
//! manager's job; it retries them as soon as their link is back. A session that lost every
//! channel is re-established on a new connection and its durable opens reclaimed
//! (`reconnect`).

pub(crate) mod detector;
pub(crate) mod reconnect;
pub(crate) mod replay;
pub(crate) mod stats;
pub(crate) mod watchdog;

pub use stats::FailoverCounters;
