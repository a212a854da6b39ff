//! An SMB over QUIC endpoint of the tests' own in front of the testbed's smbd, which speaks
//! only TCP (Samba's QUIC server needs a kernel module these machines lack).
//!
//! [`QuicRelay::start`] makes a test CA and a server certificate for a chosen name at run
//! time (`rcgen`), listens on UDP 127.0.0.1 of the namespace it runs in (start it on
//! [`crate::Testbed::client_runtime`]) with ALPN `smb` and TLS 1.3, and relays each
//! bidirectional stream's bytes, unchanged, to a new TCP connection to `upstream` (smbd's
//! port 445). The framing is the same on both sides (MS-SMB2 2.1: the Direct TCP header on
//! the QUIC stream too), so no byte needs rewriting. Tests point the client at
//! [`QuicRelay::addr`] with [`QuicRelay::ca_file`] as its CA file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The ALPN protocol id of SMB over QUIC.
pub const ALPN_SMB: &[u8] = b"smb";

/// A QUIC endpoint relaying every stream to smbd's TCP port; stops when dropped.
pub struct QuicRelay {
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    dir: PathBuf,
    streams: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
    key_sha256: [u8; 32],
    acceptor: tokio::task::JoinHandle<()>,
}

/// How the relay's TLS differs from a good server's, for tests of the client's refusals.
#[derive(Clone, Debug)]
pub struct RelayTls {
    listen: SocketAddr,
    alpn: Vec<u8>,
    expired: bool,
}

impl Default for RelayTls {
    /// UDP 127.0.0.1 on a free port, ALPN `smb`, a certificate valid now.
    fn default() -> Self {
        RelayTls {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            alpn: ALPN_SMB.to_vec(),
            expired: false,
        }
    }
}

impl RelayTls {
    /// Listen here.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Offer this ALPN protocol id instead of `smb`.
    pub fn alpn(mut self, id: &[u8]) -> Self {
        self.alpn = id.to_vec();
        self
    }

    /// Present a certificate that expired in 2021.
    pub fn expired(mut self) -> Self {
        self.expired = true;
        self
    }
}

/// What the relay saw the clients send, for tests of what goes on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The ContextType of each negotiate context of every NEGOTIATE request, in order.
    pub negotiate_contexts: Vec<Vec<u16>>,
    /// Messages sent sealed (an SMB2 TRANSFORM_HEADER, `0xFD 'S' 'M' 'B'`).
    pub sealed: u64,
    /// Messages sent in the clear (`0xFE 'S' 'M' 'B'`).
    pub plain: u64,
}

/// A CA made for one test run: its certificate (PEM) and key.
struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-sign the CA");
        TestCa { cert, key }
    }

    /// A server certificate for `name` (a DNS name or an IP address) signed by this CA, its
    /// key, and the SHA-256 of its public key (the SubjectPublicKeyInfo) as a pin; one that
    /// expired in 2021 when `expired`.
    fn issue(
        &self,
        name: &str,
        expired: bool,
    ) -> (CertificateDer<'static>, PrivateKeyDer<'static>, [u8; 32]) {
        use sha2::Digest as _;
        let key = KeyPair::generate().expect("server key");
        let pin = sha2::Sha256::digest(key.public_key_der()).into();
        let mut params = CertificateParams::new(vec![name.to_string()]).expect("server params");
        params.distinguished_name.push(DnType::CommonName, name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign the server certificate");
        (
            cert.der().clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            pin,
        )
    }
}

impl QuicRelay {
    /// Listen on UDP 127.0.0.1 with a certificate for `cert_name` issued by a new test CA,
    /// relaying every stream to `upstream`.
    pub async fn start(upstream: SocketAddr, cert_name: &str) -> QuicRelay {
        QuicRelay::start_with(upstream, cert_name, RelayTls::default()).await
    }

    /// [`QuicRelay::start`] listening on `listen` (UDP 443, where a client looks when the
    /// URL names no port: the tests' namespaces leave it free).
    pub async fn start_at(listen: SocketAddr, upstream: SocketAddr, cert_name: &str) -> QuicRelay {
        QuicRelay::start_with(upstream, cert_name, RelayTls::default().listen(listen)).await
    }

    /// [`QuicRelay::start`] with the TLS of `tls`: a wrong ALPN or an expired certificate, for
    /// the client's refusals.
    pub async fn start_with(upstream: SocketAddr, cert_name: &str, tls: RelayTls) -> QuicRelay {
        let listen = tls.listen;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "smb3-quic-relay-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("relay temp dir");
        let ca = TestCa::new("smb3 tests QUIC CA");
        std::fs::write(dir.join("ca.pem"), ca.cert.pem()).expect("write ca.pem");
        // A CA that signed nothing here, for the "unknown issuer" case.
        let other = TestCa::new("smb3 tests unrelated CA");
        std::fs::write(dir.join("other-ca.pem"), other.cert.pem()).expect("write other-ca.pem");
        let (cert, key, key_sha256) = ca.issue(cert_name, tls.expired);

        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut server_tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server certificate");
        server_tls.alpn_protocols = vec![tls.alpn];
        let crypto =
            quinn::crypto::rustls::QuicServerConfig::try_from(server_tls).expect("QUIC TLS config");
        let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let endpoint =
            quinn::Endpoint::server(config, listen).expect("bind the relay's UDP socket");
        let addr = endpoint.local_addr().expect("relay address");
        let streams = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let acceptor = tokio::spawn(accept_loop(
            endpoint.clone(),
            upstream,
            streams.clone(),
            seen.clone(),
        ));
        QuicRelay {
            endpoint,
            addr,
            dir,
            streams,
            seen,
            key_sha256,
            acceptor,
        }
    }

    /// Where the relay listens (UDP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// PEM of the CA that issued the relay's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// PEM of a CA that issued nothing the relay presents.
    pub fn unrelated_ca_file(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// SHA-256 of the relay's public key (its certificate's SubjectPublicKeyInfo): what a
    /// client pins.
    pub fn key_sha256(&self) -> [u8; 32] {
        self.key_sha256
    }

    /// What the clients sent so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Streams relayed so far.
    pub fn streams(&self) -> u64 {
        self.streams.load(Ordering::Relaxed)
    }
}

impl Drop for QuicRelay {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.endpoint.close(0u32.into(), b"relay stopped");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    upstream: SocketAddr,
    streams: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
) {
    while let Some(incoming) = endpoint.accept().await {
        let streams = streams.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            // A handshake the client refuses (unknown CA) ends here.
            let Ok(connection) = incoming.await else {
                return;
            };
            while let Ok((send, recv)) = connection.accept_bi().await {
                streams.fetch_add(1, Ordering::Relaxed);
                let connection = connection.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    relay_stream(send, recv, upstream, seen).await;
                    // The SMB connection behind the stream is gone: so is the QUIC one, as
                    // a server's would be.
                    connection.close(0u32.into(), b"upstream closed");
                });
            }
        });
    }
}

/// Copy bytes both ways between one QUIC stream and a new TCP connection to `upstream`,
/// until either side ends; what the client sends is noted in `seen` on its way.
async fn relay_stream(
    mut send: quinn::SendStream,
    recv: quinn::RecvStream,
    upstream: SocketAddr,
    seen: Arc<Mutex<Seen>>,
) {
    let Ok(tcp) = TcpStream::connect(upstream).await else {
        let _ = send.reset(1u32.into());
        return;
    };
    let _ = tcp.set_nodelay(true);
    let (mut tcp_rd, mut tcp_wr) = tcp.into_split();
    let up = relay_up(recv, &mut tcp_wr, &seen);
    let down = tokio::io::copy(&mut tcp_rd, &mut send);
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Client to server, message by message (the Direct TCP framing of MS-SMB2 2.1: a zero
/// byte, a 24-bit length, the message), noting each in `seen`.
async fn relay_up(
    mut recv: quinn::RecvStream,
    tcp: &mut tokio::net::tcp::OwnedWriteHalf,
    seen: &Mutex<Seen>,
) -> std::io::Result<()> {
    loop {
        let mut prefix = [0u8; 4];
        if recv.read_exact(&mut prefix).await.is_err() {
            return Ok(());
        }
        let mut msg = vec![0u8; u32::from_be_bytes(prefix) as usize & 0x00FF_FFFF];
        if recv.read_exact(&mut msg).await.is_err() {
            return Ok(());
        }
        note(&msg, &mut seen.lock().unwrap());
        tcp.write_all(&prefix).await?;
        tcp.write_all(&msg).await?;
    }
}

/// Count `msg` as sealed or plain; for a NEGOTIATE request, keep its context types
/// (MS-SMB2 2.2.3: NegotiateContextOffset at body offset 28, the count at 32, each context
/// 8-byte aligned).
fn note(msg: &[u8], seen: &mut Seen) {
    match msg.get(..4) {
        Some(b"\xfdSMB") => seen.sealed += 1,
        Some(b"\xfeSMB") => seen.plain += 1,
        _ => return,
    }
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes(msg.get(at..at + 2)?.try_into().ok()?))
    };
    // Command 0 (NEGOTIATE) at header offset 12, body after the 64-byte header.
    if &msg[..4] != b"\xfeSMB" || u16_at(12) != Some(0) {
        return;
    }
    let Some(offset) = msg
        .get(64 + 28..64 + 32)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
    else {
        return;
    };
    let mut types = Vec::new();
    let mut pos = offset;
    for i in 0..u16_at(64 + 32).unwrap_or(0) {
        if i > 0 {
            pos = pos.next_multiple_of(8);
        }
        let (Some(ty), Some(len)) = (u16_at(pos), u16_at(pos + 2)) else {
            break;
        };
        types.push(ty);
        pos += 8 + usize::from(len);
    }
    seen.negotiate_contexts.push(types);
}
