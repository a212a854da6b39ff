//! TEMPORARY contract stub; replaced by wt/planner on merge.
#![allow(dead_code)]
use std::net::IpAddr;
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalInterface {
    pub(crate) name: String,
    pub(crate) if_index: u32,
    pub(crate) address: IpAddr,
    pub(crate) prefix_len: u8,
    pub(crate) link_speed: Option<u64>,
    pub(crate) rx_queues: u32,
    pub(crate) rss: bool,
    pub(crate) rdma: bool,
    pub(crate) loopback: bool,
}
pub(crate) fn local_interfaces(
    overrides: &[crate::config::NicOverride],
) -> std::io::Result<Vec<LocalInterface>> {
    todo!("{overrides:?}")
}
pub(crate) fn usable(all: Vec<LocalInterface>, server_on_loopback: bool) -> Vec<LocalInterface> {
    todo!("{all:?}{server_on_loopback}")
}
