//! Raw TCP over several links at once: one iperf3 stream per link, all running at the same
//! time, so their sum is what the links together carry while they share the machine's CPUs -
//! the yardstick for a multichannel copy that uses every link.
//!
//! The testbed's own `Testbed::iperf3_mbit` measures one link with the default port; this runs
//! one one-off iperf3 server per link on its own port (bound to that link's server address),
//! then starts all clients together, each bound to its link's client address.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smb3_tests::Testbed;

/// The first iperf3 port; link K uses `BASE_PORT + K`, clear of the default 5201 a concurrent
/// `Testbed::iperf3_mbit` would use.
const BASE_PORT: u16 = 5300;

/// Receiver-side goodput of each link in Mbit/s, measured concurrently for `seconds` (links are
/// 1-based testbed link numbers). `reverse`: server to client (download).
pub fn concurrent_mbit(
    tb: &Testbed,
    links: &[usize],
    seconds: u32,
    reverse: bool,
) -> Result<Vec<f64>, String> {
    let ports = links
        .iter()
        .map(|&k| port_of(k))
        .collect::<Result<Vec<u16>, String>>()?;
    let mut servers = Servers(Vec::new());
    for (&k, port) in links.iter().zip(&ports) {
        let child = tb
            .server_command("iperf3")
            .args(["-s", "-1", "-B", &tb.server_addr(k).to_string()])
            .args(["-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start iperf3 server for link {k}: {e}"))?;
        servers.0.push(child);
    }
    for &port in &ports {
        wait_listening(tb, port)?;
    }
    let clients: Vec<_> = links
        .iter()
        .zip(&ports)
        .map(|(&k, port)| {
            let mut cmd = tb.client_command("iperf3");
            cmd.args(["-c", &tb.server_addr(k).to_string()])
                .args(["-B", &tb.client_addr(k).to_string()])
                .args(["-p", &port.to_string()])
                .args([
                    "-t",
                    &seconds.to_string(),
                    "-J",
                    "--connect-timeout",
                    "3000",
                ]);
            if reverse {
                cmd.arg("-R");
            }
            std::thread::spawn(move || run_client(cmd))
        })
        .collect();
    let mut mbit = Vec::with_capacity(links.len());
    for (handle, &k) in clients.into_iter().zip(links) {
        let result = handle
            .join()
            .map_err(|_| format!("iperf3 client thread for link {k} panicked"))?;
        mbit.push(result.map_err(|e| format!("link {k}: {e}"))?);
    }
    servers.reap();
    Ok(mbit)
}

fn port_of(k: usize) -> Result<u16, String> {
    u16::try_from(k)
        .ok()
        .and_then(|k| BASE_PORT.checked_add(k))
        .ok_or_else(|| format!("no iperf3 port for link {k}"))
}

fn run_client(cmd: Command) -> Result<f64, String> {
    receiver_mbit(&smb3_tests::run_iperf3_client(cmd)?)
}

/// The receiver's average rate from iperf3's `-J` report (`end.sum_received`), in Mbit/s.
pub fn receiver_mbit(json_text: &str) -> Result<f64, String> {
    let json: serde_json::Value = serde_json::from_str(json_text)
        .map_err(|e| format!("iperf3 -J printed no JSON ({e}): {json_text}"))?;
    json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .filter(|bps| bps.is_finite() && *bps >= 0.0)
        .map(|bps| bps / 1e6)
        .ok_or_else(|| format!("no end.sum_received.bits_per_second in iperf3's report: {json}"))
}

/// Waits (at most 5 s) until something listens on `port` in the server namespace.
fn wait_listening(tb: &Testbed, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ss = tb
            .server_command("ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
            .map_err(|e| format!("cannot run ss: {e}"))?;
        if !ss.stdout.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "iperf3 server on port {port} did not listen within 5 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The one-off servers; each exits after its test. Whatever has not exited by the time they are
/// reaped (or dropped, on an error path) is killed, so none is ever left behind.
struct Servers(Vec<Child>);

impl Servers {
    fn reap(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for server in &mut self.0 {
            loop {
                match server.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    _ => {
                        let _ = server.kill();
                        let _ = server.wait();
                        break;
                    }
                }
            }
        }
        self.0.clear();
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.reap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_receiver_rate() {
        let report = r#"{"start":{},"intervals":[],"end":{
            "sum_sent":{"bits_per_second":501000000.0},
            "sum_received":{"bits_per_second":478123456.0}}}"#;
        assert_eq!(receiver_mbit(report), Ok(478.123456));
        assert!(receiver_mbit(r#"{"end":{}}"#)
            .unwrap_err()
            .contains("sum_received"));
        assert!(receiver_mbit("iperf3: error").is_err());
    }

    #[test]
    fn ports_per_link() {
        assert_eq!(port_of(1), Ok(5301));
        assert_eq!(port_of(32), Ok(5332));
        assert!(port_of(usize::MAX).is_err());
    }
}
