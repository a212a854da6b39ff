//! Raw TCP over links at once: one iperf3 stream per link, all at the same time, so their sum
//! is what the links carry together while they share the machine's CPUs. Each link gets a
//! one-off server on a port of its own, bound to the link's server address, and a client bound
//! to its client address.

use std::process::{Child, Stdio};
use std::time::Duration;

use smb3_tests::{reap, run_iperf3_client, Testbed};

/// Link K's port: clear of the default 5201 the testbed's own iperf3 uses.
fn port(k: usize) -> u16 {
    5300 + k as u16
}

/// Receiver-side goodput of each link in Mbit/s, measured at once for `seconds` (links are
/// the testbed's 1-based numbers). `reverse`: server to client (download).
pub(crate) fn concurrent_mbit(
    tb: &Testbed,
    links: &[usize],
    seconds: u32,
    reverse: bool,
) -> Result<Vec<f64>, String> {
    let mut servers = Servers(Vec::new());
    for &k in links {
        let server = tb
            .server_command("iperf3")
            .args([
                "-s",
                "-1",
                "-B",
                &tb.server_addr(k).to_string(),
                "-p",
                &port(k).to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start iperf3 server for link {k}: {e}"))?;
        servers.0.push(server);
    }
    for &k in links {
        tb.wait_listening(port(k))?;
    }
    let clients: Vec<_> = links
        .iter()
        .map(|&k| {
            let mut cmd = tb.client_command("iperf3");
            cmd.args([
                "-c",
                &tb.server_addr(k).to_string(),
                "-B",
                &tb.client_addr(k).to_string(),
            ])
            .args(["-p", &port(k).to_string(), "-t", &seconds.to_string()])
            .args(["-J", "--connect-timeout", "3000"]);
            if reverse {
                cmd.arg("-R");
            }
            std::thread::spawn(move || receiver_mbit(&run_iperf3_client(cmd)?))
        })
        .collect();
    let mbit = clients
        .into_iter()
        .zip(links)
        .map(|(client, k)| {
            client
                .join()
                .map_err(|_| "iperf3 client thread panicked".to_string())?
                .map_err(|e| format!("link {k}: {e}"))
        })
        .collect();
    drop(servers);
    mbit
}

/// The receiver's average rate from iperf3's `-J` report, Mbit/s.
fn receiver_mbit(json_text: &str) -> Result<f64, String> {
    let json: serde_json::Value = serde_json::from_str(json_text)
        .map_err(|e| format!("iperf3 -J printed no JSON ({e}): {json_text}"))?;
    let bps = json["end"]["sum_received"]["bits_per_second"].as_f64();
    bps.filter(|b| b.is_finite() && *b >= 0.0)
        .map(|b| b / 1e6)
        .ok_or_else(|| format!("no end.sum_received.bits_per_second in iperf3's report: {json}"))
}

/// The one-off servers: each exits after its test; whatever has not by the time they are
/// dropped is killed, so none is left behind.
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for server in &mut self.0 {
            reap(server, Duration::from_secs(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_receiver_rate() {
        let report = r#"{"end":{"sum_sent":{"bits_per_second":501000000.0},
            "sum_received":{"bits_per_second":478123456.0}}}"#;
        assert_eq!(receiver_mbit(report), Ok(478.123456));
        assert!(receiver_mbit(r#"{"end":{}}"#)
            .unwrap_err()
            .contains("sum_received"));
        assert!(receiver_mbit("iperf3: error").is_err());
    }
}
