//! `smbctl status MOUNTPOINT`: a mount's status (read with
//! `smb3_frontend::status_socket::read_status`) for people.

/// Whether the mount's messages are sealed, in words: the cipher alone says only what was
/// agreed in NEGOTIATE, not whether the session or the share encrypts.
fn encryption_words(v: &serde_json::Value) -> String {
    let cipher = v["cipher"].as_str().unwrap_or("-");
    let channels = v["channels"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if channels
        .iter()
        .any(|c| c["sealing_left_to_tls"].as_bool() == Some(true))
    {
        "QUIC's TLS (the server takes it in place of sealing)".into()
    } else if v["encrypts_everything"].as_bool() == Some(true) {
        format!("{cipher} (the whole session)")
    } else if v["share_encrypted"].as_bool() == Some(true) {
        format!("{cipher} (this share)")
    } else if cipher == "-" {
        "off".into()
    } else {
        format!("off ({cipher} agreed, not used)")
    }
}

/// The status for people.
pub fn print_status(v: &serde_json::Value) {
    let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    println!("{} on {}", s("source"), s("mountpoint"));
    // Mounts from before the transport was reported say nothing: TCP.
    let transport = v["channels"][0]["transport"].as_str().unwrap_or("tcp");
    println!(
        "SMB {} over {transport}, signing {}, encryption {}; {} open file(s), {} parked after close, {} node(s) known",
        s("dialect"),
        s("signing"),
        encryption_words(v),
        v["open_files"],
        v["parked_handles"],
        v["nodes"],
    );
    if let Some(max) = v["watch_dirs_max"].as_u64() {
        println!(
            "directories watched for other clients' changes: {} (at most {max})",
            v["watched_dirs"]
        );
    }
    for (kind, name) in [("read", "READ"), ("write", "WRITE")] {
        let r = &v["fuse_io"][kind];
        if let Some(requests) = r["requests"].as_u64().filter(|&n| n > 0) {
            println!(
                "{name}s from the kernel: {requests}, {} of them full size (1 MiB), {} bytes",
                r["full_size"], r["bytes"]
            );
        }
    }
    let p = &v["prefetch"];
    if let Some(fetched) = p["fetched_bytes"].as_u64().filter(|&n| n > 0) {
        println!(
            "read ahead by the daemon: {} streak(s), {fetched} bytes fetched, {} served, {} dropped unread",
            p["streaks"], p["served_bytes"], p["dropped_bytes"]
        );
    }
    if v["library_tasks"].is_object() {
        println!("{}", crate::show_session::tasks_line(&v["library_tasks"]));
    }
    if let Some(heap) = v["heap_in_use_bytes"].as_u64() {
        println!("heap in use: {:.1} MiB", heap as f64 / f64::from(1 << 20));
    }
    let channels = v["channels"].as_array().cloned().unwrap_or_default();
    println!(
        "{:<22} {:<22} {:>8} {:>12} {:>9}  STATE",
        "CLIENT", "SERVER", "IF", "BYTES", "REQUESTS"
    );
    for c in &channels {
        println!(
            "{:<22} {:<22} {:>8} {:>12} {:>9}  {}",
            format!("{}:{}", c["local"].as_str().unwrap_or("?"), c["local_port"]),
            format!(
                "{}:{}",
                c["server"].as_str().unwrap_or("?"),
                c["server_port"]
            ),
            c["local_interface"].as_str().unwrap_or("-"),
            c["bytes"].as_u64().unwrap_or(0),
            c["requests"].as_u64().unwrap_or(0),
            c["state"].as_str().unwrap_or("?"),
        );
    }
    for line in v["multichannel"]["explain"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!("{}", line.as_str().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encryption_says_whether_messages_are_sealed() {
        let v = |cipher: &str, session: bool, share: bool| serde_json::json!({"cipher": cipher, "encrypts_everything": session, "share_encrypted": share});
        assert_eq!(
            encryption_words(&v("Aes128Gcm", false, false)),
            "off (Aes128Gcm agreed, not used)"
        );
        assert_eq!(encryption_words(&v("-", false, false)), "off");
        assert_eq!(
            encryption_words(&v("Aes128Gcm", false, true)),
            "Aes128Gcm (this share)"
        );
        assert_eq!(
            encryption_words(&v("Aes256Gcm", true, true)),
            "Aes256Gcm (the whole session)"
        );
        let mut quic = v("Aes128Gcm", true, true);
        quic["channels"] = serde_json::json!([{"transport": "quic", "sealing_left_to_tls": true}]);
        assert_eq!(
            encryption_words(&quic),
            "QUIC's TLS (the server takes it in place of sealing)"
        );
        quic["channels"][0]["sealing_left_to_tls"] = false.into();
        assert_eq!(encryption_words(&quic), "Aes128Gcm (the whole session)");
    }
}
