//! Failover (DESIGN §3 step 7): losing a channel loses nothing. This folder holds the pure
//! parts: finding channels that stop answering without a TCP error by watching their progress
//! (`detector`), and the counters that say what happened (`stats`). Sending a request again
//! on a survivor is the engine's (`engine::replay`); the tasks that act are in `background`:
//! the `watchdog` drives the detector, the multichannel `manager` reconnects lost slots as
//! soon as their link is back, and `reconnect` re-establishes a session that lost every
//! channel and reclaims its durable opens.

pub(crate) mod detector;
pub(crate) mod stats;

pub use stats::FailoverCounters;
