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
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpStream;

/// The ALPN protocol id of SMB over QUIC.
pub const ALPN_SMB: &[u8] = b"smb";

/// A QUIC endpoint relaying every stream to smbd's TCP port; stops when dropped.
pub struct QuicRelay {
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    dir: PathBuf,
    streams: Arc<AtomicU64>,
    key_sha256: [u8; 32],
    acceptor: tokio::task::JoinHandle<()>,
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
    /// key, and the SHA-256 of its public key (the SubjectPublicKeyInfo) as a pin.
    fn issue(&self, name: &str) -> (CertificateDer<'static>, PrivateKeyDer<'static>, [u8; 32]) {
        use sha2::Digest as _;
        let key = KeyPair::generate().expect("server key");
        let pin = sha2::Sha256::digest(key.public_key_der()).into();
        let mut params = CertificateParams::new(vec![name.to_string()]).expect("server params");
        params.distinguished_name.push(DnType::CommonName, name);
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
        QuicRelay::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), upstream, cert_name).await
    }

    /// [`QuicRelay::start`] listening on `listen` (UDP 443, where a client looks when the
    /// URL names no port: the tests' namespaces leave it free).
    pub async fn start_at(listen: SocketAddr, upstream: SocketAddr, cert_name: &str) -> QuicRelay {
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
        let (cert, key, key_sha256) = ca.issue(cert_name);

        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server certificate");
        tls.alpn_protocols = vec![ALPN_SMB.to_vec()];
        let crypto =
            quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS config");
        let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let endpoint =
            quinn::Endpoint::server(config, listen).expect("bind the relay's UDP socket");
        let addr = endpoint.local_addr().expect("relay address");
        let streams = Arc::new(AtomicU64::new(0));
        let acceptor = tokio::spawn(accept_loop(endpoint.clone(), upstream, streams.clone()));
        QuicRelay {
            endpoint,
            addr,
            dir,
            streams,
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

async fn accept_loop(endpoint: quinn::Endpoint, upstream: SocketAddr, streams: Arc<AtomicU64>) {
    while let Some(incoming) = endpoint.accept().await {
        let streams = streams.clone();
        tokio::spawn(async move {
            // A handshake the client refuses (unknown CA) ends here.
            let Ok(connection) = incoming.await else {
                return;
            };
            while let Ok((send, recv)) = connection.accept_bi().await {
                streams.fetch_add(1, Ordering::Relaxed);
                let connection = connection.clone();
                tokio::spawn(async move {
                    relay_stream(send, recv, upstream).await;
                    // The SMB connection behind the stream is gone: so is the QUIC one, as
                    // a server's would be.
                    connection.close(0u32.into(), b"upstream closed");
                });
            }
        });
    }
}

/// Copy bytes both ways between one QUIC stream and a new TCP connection to `upstream`,
/// until either side ends.
async fn relay_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    upstream: SocketAddr,
) {
    let Ok(tcp) = TcpStream::connect(upstream).await else {
        let _ = send.reset(1u32.into());
        return;
    };
    let _ = tcp.set_nodelay(true);
    let (mut tcp_rd, mut tcp_wr) = tcp.into_split();
    let up = tokio::io::copy(&mut recv, &mut tcp_wr);
    let down = tokio::io::copy(&mut tcp_rd, &mut send);
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}
