//! How `smbctl` shows a session's interfaces and channels to people (the JSON is
//! `smb3_frontend::status_json`).

use smb3_client::{
    Cipher, Client, FailoverCounters, MultichannelStatus, SessionIdentity, SigningAlgorithm,
};

/// A link speed for people: `10 Gb/s`, `100 Mb/s`, `?`.
pub fn speed(bits: Option<u64>) -> String {
    match bits {
        None => "?".into(),
        Some(b) if b >= 1_000_000_000 && b % 1_000_000_000 == 0 => {
            format!("{} Gb/s", b / 1_000_000_000)
        }
        Some(b) if b >= 1_000_000 => format!("{} Mb/s", b / 1_000_000),
        Some(b) => format!("{b} b/s"),
    }
}

/// The live tasks of `smb3_frontend::status_json::tasks_json` in one line for people: the
/// total, then each kind with any alive, most first.
pub fn tasks_line(tasks: &serde_json::Value) -> String {
    let mut live: Vec<(String, u64)> = tasks
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(kind, c)| Some((kind.clone(), c["live"].as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .collect();
    live.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = live.iter().map(|(_, n)| n).sum();
    let each: Vec<String> = live.iter().map(|(k, n)| format!("{n} {k}")).collect();
    if each.is_empty() {
        "library tasks: none".to_string()
    } else {
        format!("library tasks: {total} ({})", each.join(", "))
    }
}

/// One line of failover counters for people.
pub fn failover_line(f: &FailoverCounters) -> String {
    let ms = |d: Option<std::time::Duration>| {
        d.map_or("-".to_string(), |d| format!("{} ms", d.as_millis()))
    };
    let mut line = format!(
        "failover: {} channel(s) lost ({} silent, {} false alarms), {} request(s) replayed, \
         {} not replayable, {} reconnect(s); last failover {}, longest {}; last reconnect {}",
        f.channel_losses,
        f.silent_losses,
        f.false_alarms,
        f.replays,
        f.not_replayed,
        f.reconnects,
        ms(f.last_failover),
        ms(f.max_failover),
        ms(f.last_reconnect),
    );
    if f.listings_resumed > 0 {
        line.push_str(&format!(
            "; {} listing(s) resumed after losing a request",
            f.listings_resumed
        ));
    }
    if f.sessions_reestablished > 0 {
        line.push_str(&format!(
            "; session re-established {} time(s), last in {}: {} open(s) reclaimed, {} reopened, \
             {} lost",
            f.sessions_reestablished,
            ms(f.last_reestablish),
            f.opens_reclaimed,
            f.opens_reopened,
            f.opens_lost
        ));
    }
    line
}

/// What carries a channel, in the OVER column: `tcp`, `quic`, or `quic*` where the server
/// took QUIC's TLS in place of sealing.
fn transport_words(c: &smb3_client::ChannelInfo) -> String {
    if c.sealing_left_to_tls {
        format!("{}*", c.transport)
    } else {
        c.transport.to_string()
    }
}

/// `smbctl channels` as text: the pairs (as Windows' Get-SmbMultichannelConnection shows
/// them), then every channel, then with `explain` the reasons in words.
pub fn print_channels(client: &Client, explain: bool) {
    let s = client.multichannel();
    println!(
        "server {}  dialect {}  signing {}  cipher {}  multichannel {}  dispatch {}",
        client.server_addr(),
        client.dialect(),
        client
            .signing()
            .map_or("off".to_string(), |a| format!("{a:?}")),
        client
            .cipher()
            .map_or("none".to_string(), |c| format!("{c:?}")),
        if s.off_reason.is_none() { "on" } else { "off" },
        s.dispatch,
    );
    if !s.pairs.is_empty() {
        println!();
        println!(
            "{:<16} {:<8} {:<16} {:>5} {:>4} {:>9} {:>4} {:>4} {:>12}",
            "CLIENT IP", "IF", "SERVER IP", "SRVIF", "RSS", "SPEED", "MAX", "CUR", "BINDS ok/no/x"
        );
        for p in &s.pairs {
            println!(
                "{:<16} {:<8} {:<16} {:>5} {:>4} {:>9} {:>4} {:>4} {:>12}",
                p.local.map_or("?".into(), |a| a.to_string()),
                p.local_interface,
                p.server.map_or("?".into(), |a| a.to_string()),
                p.server_if_index,
                if p.rss { "yes" } else { "no" },
                speed(p.link_speed),
                p.planned,
                p.current,
                format!("{}/{}/{}", p.binds_ok, p.binds_refused, p.binds_failed),
            );
        }
    }
    println!();
    println!(
        "{:<5} {:<22} {:<22} {:<8} {:>9} {:>14} {:>7} {:>7}  FAILURE",
        "OVER", "LOCAL", "SERVER", "STATE", "REQUESTS", "BYTES", "CREDITS", "CANCELS"
    );
    for c in client.channels() {
        println!(
            "{:<5} {:<22} {:<22} {:<8} {:>9} {:>14} {:>7} {:>7}  {}",
            transport_words(&c),
            c.local.to_string(),
            c.server.to_string(),
            c.state.to_string(),
            c.requests,
            c.bytes_sent + c.bytes_received,
            c.credits,
            c.cancels_sent,
            c.failure.as_deref().unwrap_or("")
        );
    }
    println!();
    println!("{}", failover_line(&s.failover));
    if explain {
        println!();
        for line in s.explain() {
            println!("{line}");
        }
    }
}

/// `smbctl interfaces` as text: what the server advertises, the local NICs, the plan.
pub fn print_interfaces(s: &MultichannelStatus) {
    if let Some(reason) = &s.off_reason {
        println!("multichannel is off: {reason}");
    }
    if let Some(e) = &s.query_error {
        println!("interface query failed: {e}");
    }
    println!("server interfaces:");
    println!(
        "  {:>5} {:<40} {:>4} {:>5} {:>9}",
        "IF", "ADDRESS", "RSS", "RDMA", "SPEED"
    );
    for i in &s.server_interfaces {
        println!(
            "  {:>5} {:<40} {:>4} {:>5} {:>9}",
            i.if_index,
            i.address.to_string(),
            yes(i.rss),
            yes(i.rdma),
            speed(i.link_speed)
        );
    }
    println!("local interfaces:");
    println!(
        "  {:<10} {:>5} {:<40} {:>6} {:>4} {:>9}",
        "NAME", "IF", "ADDRESS", "QUEUES", "RSS", "SPEED"
    );
    for i in &s.local_interfaces {
        println!(
            "  {:<10} {:>5} {:<40} {:>6} {:>4} {:>9}",
            i.name,
            i.if_index,
            i.address.to_string(),
            i.rx_queues,
            yes(i.rss),
            speed(i.link_speed)
        );
    }
    println!("planned pairs:");
    for p in s.pairs.iter().filter(|p| p.planned > 0) {
        println!(
            "  {} ({}) -> {} (if {}): {} channel(s){}",
            p.local.map_or("?".into(), |a| a.to_string()),
            p.local_interface,
            p.server.map_or("?".into(), |a| a.to_string()),
            p.server_if_index,
            p.planned,
            if p.planned < p.max_channels {
                format!(" of {} (max_channels shared out)", p.max_channels)
            } else {
                String::new()
            }
        );
    }
    for note in &s.notes {
        println!("  note: {note}");
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A duration for people: `9 h 59 min`, `4 min 10 s`, `12 s`.
fn time_left(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// How the session authenticated, in words: `Kerberos, tickets from FILE:/tmp/cc (the
/// ticket-granting ticket ends in 9 h 59 min)`.
fn how(id: &SessionIdentity) -> String {
    let mut how = id.mechanism.to_string();
    if let Some(from) = &id.tickets_from {
        how += &format!(", tickets from {from}");
        match id.ticket_expires_in {
            Some(left) if left.is_zero() => how += " (expired: run kinit)",
            Some(left) => {
                how += &format!(" (the ticket-granting ticket ends in {})", time_left(left))
            }
            None => {}
        }
    }
    let r = id.reauthentications;
    if r.renewed + r.failed > 0 {
        how += &format!("; renewed {} time(s), {} failed", r.renewed, r.failed);
    }
    how
}

/// A signing algorithm as MS-SMB2 names it.
fn signing_name(alg: SigningAlgorithm) -> &'static str {
    match alg {
        SigningAlgorithm::HmacSha256 => "HMAC-SHA256",
        SigningAlgorithm::AesCmac => "AES-128-CMAC",
        SigningAlgorithm::AesGmac => "AES-128-GMAC",
    }
}

/// A cipher as MS-SMB2 names it.
fn cipher_name(cipher: Cipher) -> &'static str {
    match cipher {
        Cipher::Aes128Ccm => "AES-128-CCM",
        Cipher::Aes128Gcm => "AES-128-GCM",
        Cipher::Aes256Ccm => "AES-256-CCM",
        Cipher::Aes256Gcm => "AES-256-GCM",
    }
}

/// `smbctl whoami`: who the session is, how it authenticated, and how it is protected.
pub fn print_identity(client: &Client, host: &str) {
    let id = client.identity();
    println!("server:     {host}, SMB {}", client.dialect());
    println!("user:       {}", id.user);
    println!("auth:       {}", how(&id));
    match client.signing() {
        Some(alg) => println!("signing:    {}, every message", signing_name(alg)),
        None => println!("signing:    none"),
    }
    match (client.cipher(), client.encrypts_everything()) {
        (Some(c), true) => println!("encryption: {}, every message", cipher_name(c)),
        (Some(c), false) => println!("encryption: {}, for shares that ask for it", cipher_name(c)),
        (None, _) => println!("encryption: none negotiated"),
    }
}

/// `smbctl whoami --json`.
pub fn identity_json(client: &Client) -> serde_json::Value {
    let id = client.identity();
    serde_json::json!({
        "dialect": client.dialect().to_string(),
        "user": id.user,
        "mechanism": id.mechanism.to_string(),
        "tickets_from": id.tickets_from,
        "ticket_expires_in_s": id.ticket_expires_in.map(|d| d.as_secs()),
        "reauthentications": {
            "renewed": id.reauthentications.renewed,
            "failed": id.reauthentications.failed,
        },
        "signing": client.signing().map(signing_name),
        "cipher": client.cipher().map(cipher_name),
        "encrypts_everything": client.encrypts_everything(),
    })
}

#[cfg(test)]
mod tests {
    use super::{speed, tasks_line};

    #[test]
    fn live_tasks_read_as_a_total_and_the_kinds_with_most_first() {
        let v = serde_json::json!({
            "channel-reader": {"live": 4, "started": 9},
            "probe": {"live": 0, "started": 3},
            "watchdog": {"live": 1, "started": 1},
            "channel-writer": {"live": 4, "started": 9},
        });
        assert_eq!(
            tasks_line(&v),
            "library tasks: 9 (4 channel-reader, 4 channel-writer, 1 watchdog)"
        );
        assert_eq!(
            tasks_line(&serde_json::json!({"probe": {"live": 0, "started": 3}})),
            "library tasks: none"
        );
    }

    #[test]
    fn speeds_read_naturally() {
        assert_eq!(speed(None), "?");
        assert_eq!(speed(Some(10_000_000_000)), "10 Gb/s");
        assert_eq!(speed(Some(1_000_000_000)), "1 Gb/s");
        assert_eq!(speed(Some(2_500_000_000)), "2500 Mb/s");
        assert_eq!(speed(Some(100_000_000)), "100 Mb/s");
        assert_eq!(speed(Some(9600)), "9600 b/s");
    }
}
