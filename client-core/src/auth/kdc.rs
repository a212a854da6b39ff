//! Talking to a Kerberos KDC for sspi: the transport behind its AS and TGS exchanges.
//!
//! sspi's Kerberos client is a generator that stops at every KDC request and hands out a
//! `NetworkRequest`; whoever drives it sends the bytes and resumes it with the reply. sspi's
//! own transport (feature `network_client`) pulls in reqwest and a second rustls setup, so this
//! small blocking one is used instead: KDC messages are a few hundred bytes, one round trip
//! each (RFC 4120 7.2.1 for TCP, 7.2.2 for UDP). Steps that may reach it run on tokio's
//! blocking pool (`Authenticator::step_off_runtime`), so a slow KDC never stalls the runtime.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use sspi::network_client::NetworkClient;
use sspi::{ErrorKind, NetworkProtocol, NetworkRequest};

/// The KDC's default port (RFC 4120 7.2.3).
pub(crate) const KDC_PORT: u16 = 88;

/// Largest KDC reply accepted over TCP. Tickets with a PAC are a few KiB; the limit only keeps a
/// broken or hostile KDC from making us allocate gigabytes.
const MAX_REPLY: usize = 1 << 20;

/// Largest UDP datagram a KDC may answer with (more than any IPv4/IPv6 datagram can carry).
const MAX_DATAGRAM: usize = 65_536;

/// Turn the configured KDC (`host`, `host:port`, `tcp://host:port`, `udp://host:port`) into the
/// URL sspi expects, TCP on port 88 unless said otherwise. `None` for anything else (an
/// `http(s)://` KDC proxy is not supported, an empty host is an error).
pub(crate) fn kdc_url(kdc: &str) -> Option<String> {
    let kdc = kdc.trim();
    let (scheme, rest) = match kdc.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("tcp".to_string(), kdc),
    };
    if scheme != "tcp" && scheme != "udp" {
        return None;
    }
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') || rest.contains('@') {
        return None;
    }
    // `[v6]:port`, `[v6]`, `host:port`, `host`; a bare IPv6 address needs brackets.
    let has_port = if let Some(after) = rest.strip_prefix('[') {
        let (_, tail) = after.split_once(']')?;
        match tail.strip_prefix(':') {
            Some(port) => {
                port.parse::<u16>().ok()?;
                true
            }
            None if tail.is_empty() => false,
            None => return None,
        }
    } else {
        match rest.split_once(':') {
            Some((host, port)) => {
                if host.is_empty() || port.contains(':') {
                    return None;
                }
                port.parse::<u16>().ok()?;
                true
            }
            None => false,
        }
    };
    Some(if has_port {
        format!("{scheme}://{rest}")
    } else {
        format!("{scheme}://{rest}:{KDC_PORT}")
    })
}

/// Sends sspi's KDC requests over TCP or UDP, each step bounded by `timeout`.
pub(crate) struct KdcTransport {
    pub(crate) timeout: Duration,
}

fn kdc_error(what: impl std::fmt::Display) -> sspi::Error {
    // NoAuthenticatingAuthority is the kind sspi's Negotiate treats as "KDC unreachable" (it
    // falls back to NTLM on it when NTLM is allowed).
    sspi::Error::new(ErrorKind::NoAuthenticatingAuthority, what.to_string())
}

impl KdcTransport {
    fn addresses(request: &NetworkRequest) -> sspi::Result<Vec<SocketAddr>> {
        let url = &request.url;
        let host = url
            .host_str()
            .ok_or_else(|| kdc_error(format!("KDC URL {url} has no host")))?;
        // Url keeps the brackets of an IPv6 literal; ToSocketAddrs wants them off.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port().unwrap_or(KDC_PORT);
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| kdc_error(format!("KDC {host}:{port}: {e}")))?
            .collect();
        if addrs.is_empty() {
            return Err(kdc_error(format!("KDC {host}:{port}: no address")));
        }
        Ok(addrs)
    }

    /// TCP: sspi's message already carries the 4-byte big-endian length (RFC 4120 7.2.2); the
    /// reply is returned with its length prefix, as sspi expects.
    fn send_tcp(&self, request: &NetworkRequest) -> sspi::Result<Vec<u8>> {
        let mut last = kdc_error(format!("KDC {}: no address", request.url));
        for addr in Self::addresses(request)? {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(stream) => return self.exchange_tcp(stream, addr, &request.data),
                Err(e) => last = kdc_error(format!("KDC {addr}: {e}")),
            }
        }
        Err(last)
    }

    fn exchange_tcp(
        &self,
        mut stream: TcpStream,
        addr: SocketAddr,
        data: &[u8],
    ) -> sspi::Result<Vec<u8>> {
        let io = |e: std::io::Error| kdc_error(format!("KDC {addr}: {e}"));
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        stream.write_all(data).map_err(io)?;
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).map_err(io)?;
        let body_len = u32::from_be_bytes(len);
        // The high bit is reserved for extensions a KDC sends only when asked (RFC 4120 7.2.2).
        let body_len = usize::try_from(body_len)
            .ok()
            .filter(|n| *n <= MAX_REPLY)
            .ok_or_else(|| kdc_error(format!("KDC {addr}: reply of {body_len} bytes")))?;
        let mut reply = Vec::with_capacity(4 + body_len);
        reply.extend_from_slice(&len);
        reply.resize(4 + body_len, 0);
        stream.read_exact(&mut reply[4..]).map_err(io)?;
        Ok(reply)
    }

    /// UDP: sspi hands the message without its length; the reply goes back with one added.
    fn send_udp(&self, request: &NetworkRequest) -> sspi::Result<Vec<u8>> {
        let mut last = kdc_error(format!("KDC {}: no address", request.url));
        for addr in Self::addresses(request)? {
            match self.exchange_udp(addr, &request.data) {
                Ok(reply) => return Ok(reply),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn exchange_udp(&self, addr: SocketAddr, data: &[u8]) -> sspi::Result<Vec<u8>> {
        let io = |e: std::io::Error| kdc_error(format!("KDC {addr} (udp): {e}"));
        let local: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(local).map_err(io)?;
        socket.connect(addr).map_err(io)?;
        socket.set_read_timeout(Some(self.timeout)).map_err(io)?;
        socket.send(data).map_err(io)?;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let n = socket.recv(&mut buf).map_err(io)?;
        let len = u32::try_from(n).map_err(|_| kdc_error("oversized datagram"))?;
        let mut reply = Vec::with_capacity(4 + n);
        reply.extend_from_slice(&len.to_be_bytes());
        reply.extend_from_slice(&buf[..n]);
        Ok(reply)
    }
}

impl NetworkClient for KdcTransport {
    fn send(&self, request: &NetworkRequest) -> sspi::Result<Vec<u8>> {
        match request.protocol {
            NetworkProtocol::Tcp => self.send_tcp(request),
            NetworkProtocol::Udp => self.send_udp(request),
            other => Err(sspi::Error::new(
                ErrorKind::UnsupportedFunction,
                format!("KDC over {other:?} is not supported (use tcp:// or udp://)"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn kdc_url_forms() {
        assert_eq!(kdc_url("10.1.1.1").as_deref(), Some("tcp://10.1.1.1:88"));
        assert_eq!(kdc_url("dc.lan:750").as_deref(), Some("tcp://dc.lan:750"));
        assert_eq!(
            kdc_url("tcp://dc.lan:88").as_deref(),
            Some("tcp://dc.lan:88")
        );
        assert_eq!(kdc_url("UDP://dc.lan").as_deref(), Some("udp://dc.lan:88"));
        assert_eq!(kdc_url("[fe80::1]").as_deref(), Some("tcp://[fe80::1]:88"));
        assert_eq!(
            kdc_url("[fe80::1]:99").as_deref(),
            Some("tcp://[fe80::1]:99")
        );
        assert_eq!(kdc_url("https://proxy/KdcProxy"), None);
        assert_eq!(kdc_url(""), None);
        assert_eq!(kdc_url("tcp://"), None);
        assert_eq!(kdc_url("dc:notaport"), None);
        assert_eq!(kdc_url("fe80::1"), None);
        assert_eq!(kdc_url(":88"), None);
        assert_eq!(kdc_url("[fe80::1]x"), None);
    }

    fn request(url: &str, data: &[u8]) -> NetworkRequest {
        let protocol = if url.starts_with("udp") {
            NetworkProtocol::Udp
        } else {
            NetworkProtocol::Tcp
        };
        NetworkRequest {
            protocol,
            url: url.parse().unwrap(),
            data: data.to_vec(),
        }
    }

    #[test]
    fn tcp_frames_request_and_reply() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = [0u8; 7];
            s.read_exact(&mut got).unwrap();
            s.write_all(&[0, 0, 0, 2, 0xAA, 0xBB]).unwrap();
            got
        });
        let t = KdcTransport {
            timeout: Duration::from_secs(5),
        };
        let url = format!("tcp://127.0.0.1:{port}");
        let reply = t.send(&request(&url, &[0, 0, 0, 3, 1, 2, 3])).unwrap();
        assert_eq!(reply, vec![0, 0, 0, 2, 0xAA, 0xBB]);
        assert_eq!(server.join().unwrap(), [0, 0, 0, 3, 1, 2, 3]);
    }

    #[test]
    fn tcp_rejects_absurd_reply_length() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&[0x7F, 0xFF, 0xFF, 0xFF]).unwrap();
        });
        let t = KdcTransport {
            timeout: Duration::from_secs(5),
        };
        let err = t
            .send(&request(&format!("tcp://127.0.0.1:{port}"), &[0, 0, 0, 0]))
            .unwrap_err();
        server.join().unwrap();
        assert_eq!(err.error_type, ErrorKind::NoAuthenticatingAuthority);
        assert!(err.description.contains("2147483647 bytes"), "{err}");
    }

    #[test]
    fn udp_adds_the_length_prefix() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 16];
            let (n, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(&[9, 8, 7], from).unwrap();
            buf[..n].to_vec()
        });
        let t = KdcTransport {
            timeout: Duration::from_secs(5),
        };
        let reply = t
            .send(&request(&format!("udp://127.0.0.1:{port}"), &[5, 6]))
            .unwrap();
        assert_eq!(reply, vec![0, 0, 0, 3, 9, 8, 7]);
        assert_eq!(echo.join().unwrap(), vec![5, 6]);
    }

    #[test]
    fn unreachable_kdc_is_no_authenticating_authority() {
        // A port nobody listens on: bind one, learn its number, close it.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let t = KdcTransport {
            timeout: Duration::from_secs(2),
        };
        let err = t
            .send(&request(&format!("tcp://127.0.0.1:{port}"), &[0, 0, 0, 0]))
            .unwrap_err();
        assert_eq!(err.error_type, ErrorKind::NoAuthenticatingAuthority);
        assert!(err.description.contains("refused"), "{err}");
    }
}
