//! Multichannel (DESIGN §3): one session over several TCP connections, one or more per usable
//! NIC pair, with requests spread over them. This folder holds what the session knows about
//! its channels and the pure decisions over it; the task that acts on them (discovering,
//! binding, draining) is `background::manager`, with `background::binding`.
//!
//! - `eligibility`: whether the session may have more channels, and if not why.
//! - `inventory`: the local NICs with their addresses, speed and RSS.
//! - `nic_facts`: what each OS says about a NIC (speed, queues, link up), one source per OS.
//! - `planner`: a pure function from (server interfaces, local NICs, config) to wanted slots.
//! - `channel_set`: the session's channels and which one carries the next request.
//! - `state`: what the session knows of its channels, both sides' interfaces and the plan.
//! - `report`: what embedders and `smbctl channels` see of the channels and the plan.

pub(crate) mod channel_set;
pub(crate) mod eligibility;
pub(crate) mod inventory;
pub(crate) mod nic_facts;
pub(crate) mod planner;
pub(crate) mod report;
pub(crate) mod state;
