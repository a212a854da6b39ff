//! A session's channels, multichannel state, failover counters and the library's tasks as
//! JSON: what `smbcp --json`, `smbctl --json` and a mount's status socket show (and
//! `smbctl status` reads back).

use smb3_client::{ChannelInfo, FailoverCounters, MultichannelStatus};

/// One channel as JSON: the fields `smbcp --json` promises (`local`, `server`, `bytes`,
/// `requests`) and the rest of what is known.
pub fn channel_json(c: &ChannelInfo) -> serde_json::Value {
    serde_json::json!({
        "transport": c.transport.to_string(),
        "sealing_left_to_tls": c.sealing_left_to_tls,
        "local": c.local.ip().to_string(),
        "server": c.server.ip().to_string(),
        "local_port": c.local.port(),
        "server_port": c.server.port(),
        "bytes": c.bytes_sent + c.bytes_received,
        "bytes_sent": c.bytes_sent,
        "bytes_received": c.bytes_received,
        "requests": c.requests,
        "credits": c.credits,
        "outstanding": c.outstanding,
        "cancels_sent": c.cancels_sent,
        "local_interface": c.local_interface,
        "local_if_index": c.local_if_index,
        "server_if_index": c.server_if_index,
        "rss": c.rss,
        "rdma": c.rdma,
        "link_speed": c.link_speed,
        "primary": c.primary,
        "state": c.state.to_string(),
        "failure": c.failure,
    })
}

/// The multichannel state as JSON.
pub fn multichannel_json(s: &MultichannelStatus) -> serde_json::Value {
    let pairs: Vec<_> = s
        .pairs
        .iter()
        .map(|p| {
            serde_json::json!({
                "local": p.local.map(|a| a.to_string()),
                "local_interface": p.local_interface,
                "server": p.server.map(|a| a.to_string()),
                "server_if_index": p.server_if_index,
                "rss": p.rss,
                "link_speed": p.link_speed,
                "max_channels": p.max_channels,
                "planned": p.planned,
                "current": p.current,
                "binds_tried": p.binds_tried,
                "binds_ok": p.binds_ok,
                "binds_refused": p.binds_refused,
                "binds_failed": p.binds_failed,
                "channel_failures": p.channel_failures,
                "last_error": p.last_error,
            })
        })
        .collect();
    let server: Vec<_> = s
        .server_interfaces
        .iter()
        .map(|i| {
            serde_json::json!({
                "if_index": i.if_index, "address": i.address.to_string(), "rss": i.rss,
                "rdma": i.rdma, "link_speed": i.link_speed,
            })
        })
        .collect();
    let local: Vec<_> = s
        .local_interfaces
        .iter()
        .map(|i| {
            serde_json::json!({
                "name": i.name, "if_index": i.if_index, "address": i.address.to_string(),
                "rx_queues": i.rx_queues, "rss": i.rss, "link_speed": i.link_speed,
            })
        })
        .collect();
    serde_json::json!({
        "enabled": s.off_reason.is_none(),
        "off_reason": s.off_reason,
        "dispatch": s.dispatch.to_string(),
        "planned": s.planned(),
        "current": s.current(),
        "server_interfaces": server,
        "local_interfaces": local,
        "pairs": pairs,
        "notes": s.notes,
        "interface_queries": s.interface_queries,
        "query_error": s.query_error,
        "failover": failover_json(&s.failover),
        "explain": s.explain(),
    })
}

/// Failover counters as JSON; durations in milliseconds.
pub fn failover_json(f: &FailoverCounters) -> serde_json::Value {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
    serde_json::json!({
        "channel_sequence": f.channel_sequence,
        "channel_losses": f.channel_losses,
        "silent_losses": f.silent_losses,
        "false_alarms": f.false_alarms,
        "replays": f.replays,
        "not_replayed": f.not_replayed,
        "reconnects": f.reconnects,
        "last_failover_ms": ms(f.last_failover),
        "max_failover_ms": ms(f.max_failover),
        "last_reconnect_ms": ms(f.last_reconnect),
        "max_reconnect_ms": ms(f.max_reconnect),
        "sessions_reestablished": f.sessions_reestablished,
        "opens_reclaimed": f.opens_reclaimed,
        "opens_reopened": f.opens_reopened,
        "opens_lost": f.opens_lost,
        "last_reestablish_ms": ms(f.last_reestablish),
        "listings_resumed": f.listings_resumed,
    })
}

/// The library's background tasks in this process as JSON: per kind, those alive and those
/// ever started.
pub fn tasks_json() -> serde_json::Value {
    let kinds: serde_json::Map<String, serde_json::Value> = smb3_client::tasks::live()
        .iter()
        .map(|c| {
            (
                c.kind.label().to_string(),
                serde_json::json!({"live": c.live, "started": c.started}),
            )
        })
        .collect();
    serde_json::Value::Object(kinds)
}
