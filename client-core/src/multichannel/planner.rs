//! TEMPORARY contract stub; replaced by wt/planner on merge.
#![allow(dead_code)]
use crate::multichannel::inventory::LocalInterface;
use smb3_proto::msg::ioctl::NetworkInterfaceInfo;
use std::net::IpAddr;
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerInterface {
    pub(crate) if_index: u32,
    pub(crate) address: IpAddr,
    pub(crate) rss: bool,
    pub(crate) rdma: bool,
    pub(crate) link_speed: Option<u64>,
}
impl ServerInterface {
    pub(crate) fn from_wire(info: &NetworkInterfaceInfo) -> Self {
        todo!("{info:?}")
    }
}
#[derive(Clone, Debug)]
pub(crate) struct PlanConfig {
    pub(crate) max_channels: usize,
    pub(crate) channels_per_rss_nic: usize,
    pub(crate) channels_per_nic: usize,
}
impl From<&crate::config::ClientConfig> for PlanConfig {
    fn from(c: &crate::config::ClientConfig) -> Self {
        PlanConfig {
            max_channels: c.max_channels,
            channels_per_rss_nic: c.channels_per_rss_nic,
            channels_per_nic: c.channels_per_nic,
        }
    }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SlotKey {
    pub(crate) local: IpAddr,
    pub(crate) server: IpAddr,
    pub(crate) ordinal: u16,
}
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub(crate) key: SlotKey,
    pub(crate) local_name: String,
    pub(crate) local_if_index: u32,
    pub(crate) server_if_index: u32,
    pub(crate) rss: bool,
    pub(crate) rdma: bool,
    pub(crate) link_speed: Option<u64>,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PairClass;
#[derive(Clone, Debug)]
pub(crate) struct PairPlan {
    pub(crate) local: IpAddr,
    pub(crate) local_name: String,
    pub(crate) server: IpAddr,
    pub(crate) server_if_index: u32,
    pub(crate) class: PairClass,
    pub(crate) max_channels: usize,
    pub(crate) planned: usize,
}
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(crate) slots: Vec<Slot>,
    pub(crate) pairs: Vec<PairPlan>,
    pub(crate) notes: Vec<String>,
}
pub(crate) fn plan(server: &[ServerInterface], local: &[LocalInterface], cfg: &PlanConfig) -> Plan {
    todo!("{server:?}{local:?}{cfg:?}")
}
pub(crate) fn diff(current: &[SlotKey], plan: &Plan) -> (Vec<SlotKey>, Vec<SlotKey>) {
    todo!("{current:?}{plan:?}")
}
