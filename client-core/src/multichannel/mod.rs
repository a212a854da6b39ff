//! Multichannel (DESIGN §3): which NIC pairs a session should use, and the channels over them.
//!
//! - `inventory`: the local NICs with their speed and RSS, from the OS.
//! - `planner`: a pure function from (server interfaces, local NICs, config) to wanted slots.

pub(crate) mod inventory;
pub(crate) mod planner;
