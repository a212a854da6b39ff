//! SMB over QUIC: a channel's byte stream as one bidirectional QUIC stream.
//!
//! MS-SMB2 2.1 lists QUIC beside Direct TCP, NetBIOS and RDMA as a transport of dialect 3.1.1.
//! The messages on the stream are framed exactly as on a TCP connection: a zero byte and a
//! 24-bit big-endian length before each SMB2 message (the "Direct TCP transport packet
//! header" of 2.1). Samba's client reads every stream transport, QUIC included, with the same
//! `smb_len_tcp` framing (`libcli/smb/smbXcli_base.c`), and smb-rs's QUIC transport sends the
//! same 4-byte header its TCP one does. So this module only makes the stream: the client
//! opens one QUIC connection (TLS 1.3, ALPN `smb`, UDP 443 on servers) and one bidirectional
//! stream on it, and hands the stream's two halves to [`Channel::start_verified_tls`], which frames,
//! signs, seals and replays exactly as over TCP.
//!
//! The server's certificate is checked by rustls's WebPKI verifier (on aws-lc-rs, the one
//! crypto provider the workspace builds) against the CA file given in [`QuicConfig`], or the
//! system's roots, and against the server's name; a refusal is [`Error::Certificate`] naming
//! the host. With keys pinned ([`QuicConfig::pinned_sha256`]) the pin decides instead, as
//! curl's `--pinnedpubkey` and HPKP do it: the SHA-256 of the certificate's
//! SubjectPublicKeyInfo must be one of the pins, and then a certificate no CA vouches for (a
//! self-signed server) is accepted too; a key that is not pinned is refused even when a
//! trusted CA issued it. Either way the server proves in the handshake that it holds the
//! certificate's private key (TLS 1.3 CertificateVerify), so a connection that is up has a
//! verified server: nothing here connects without one.
//!
//! Closing: a channel that is closed or given up must not deliver what it still queues later
//! (see `socket.rs`: a request handed back for replay must never reach the server through the
//! old connection). Over TCP a zero linger does that. Here each half, when dropped, closes the
//! whole QUIC connection (`Connection::close`): quinn then sends CONNECTION_CLOSE at once and
//! abandons every stream, so data not yet sent, or sent and not yet acknowledged, is never
//! (re)transmitted. Dropping a quinn `SendStream` alone would instead *finish* the stream
//! gracefully and keep retransmitting its queued bytes; the connection is closed before the
//! stream is dropped, so that never happens.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Channel, ChannelOptions, Unsolicited};
use crate::error::{CertificateProblem, Error, Result};

/// How a QUIC connection checks the server (`ClientConfig::transport` set to
/// [`Transport::Quic`](crate::Transport::Quic)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuicConfig {
    /// PEM file of the CA certificate(s) the server's certificate must chain to. `None` (the
    /// default): the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured, as
    /// OpenSSL does).
    pub ca_file: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry. `None` (the default): the host given to
    /// [`Client::connect`](crate::Client::connect) (an IP address then needs the address in
    /// the certificate).
    pub server_name: Option<String>,
    /// SHA-256 digests of the server public keys to accept (of the certificate's DER
    /// SubjectPublicKeyInfo, as curl's `--pinnedpubkey sha256//...` and HPKP take them;
    /// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256
    /// -binary | base64` prints one). Empty (the default): the CA and the name decide. Not
    /// empty: the server's key must be one of these, and then neither a trusted CA nor the
    /// name is needed (the CA file and the system's roots are not read), so a self-signed
    /// server can be reached safely.
    pub pinned_sha256: Vec<[u8; 32]>,
}

/// The ALPN protocol id of SMB over QUIC.
pub(crate) const ALPN_SMB: &[u8] = b"smb";

/// How often an idle connection sends a QUIC PING, so that NATs and firewalls keep its UDP
/// flow open and a dead path is noticed (the channel's own watchdog decides what is lost).
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A connection that hears nothing for this long is closed by QUIC itself; with keep-alives
/// every 10 s only a dead path gets there.
const IDLE_TIMEOUT_MS: u32 = 60_000;

/// Connect to `peer` over QUIC, from `local` when given, and start a channel on it.
pub(crate) async fn connect(
    peer: SocketAddr,
    local: Option<IpAddr>,
    quic: &QuicConfig,
    opts: &ChannelOptions,
) -> Result<(Channel, Unsolicited)> {
    let host = quic
        .server_name
        .clone()
        .unwrap_or_else(|| peer.ip().to_string());
    let (client_config, verdict) = client_config(quic)?;
    let bind = SocketAddr::new(
        local.unwrap_or(match peer {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }),
        0,
    );
    let endpoint = quinn::Endpoint::client(bind).map_err(|e| Error::io(Some(peer), e))?;
    let connecting = endpoint
        .connect_with(client_config, peer, &host)
        .map_err(|e| Error::io(Some(peer), std::io::Error::other(e)))?;
    let handshake = async {
        let connection = connecting.await?;
        let (send, recv) = connection.open_bi().await?;
        Ok::<_, quinn::ConnectionError>((connection, send, recv))
    };
    let (connection, send, recv) = match tokio::time::timeout(opts.connect_timeout, handshake).await
    {
        Ok(Ok(parts)) => parts,
        Ok(Err(e)) => {
            // The verifier's own verdict is typed; quinn only has the TLS alert.
            if let Some(refusal) = verdict.take() {
                return Err(certificate_error(host, refusal));
            }
            if alpn_refused(&e) {
                return Err(Error::io(
                    Some(peer),
                    std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        "the server does not speak SMB over QUIC (it refused ALPN \"smb\")",
                    ),
                ));
            }
            return Err(Error::io(Some(peer), connection_io_error(e)));
        }
        Err(_) => {
            endpoint.close(0u32.into(), b"");
            return Err(Error::Timeout {
                what: "QUIC connect",
                after: opts.connect_timeout,
            });
        }
    };
    let local_addr = endpoint
        .local_addr()
        .map(|a| SocketAddr::new(connection.local_ip().unwrap_or(a.ip()), a.port()))
        .map_err(|e| Error::io(Some(peer), e))?;
    let read = QuicHalf::new(recv, connection.clone(), endpoint.clone());
    let write = QuicHalf::new(send, connection, endpoint);
    Ok(Channel::start_verified_tls(
        read, write, peer, local_addr, opts,
    ))
}

/// The rustls and quinn settings of one connection, and the slot its verifier reports a
/// refusal in.
fn client_config(quic: &QuicConfig) -> Result<(quinn::ClientConfig, Arc<Verdict>)> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    // Pinned keys decide alone: no CA is consulted, so none needs to be there.
    let trust = if quic.pinned_sha256.is_empty() {
        let roots = Arc::new(root_store(quic)?);
        Trust::Chain(
            WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| config_error(format!("{e}")))?,
        )
    } else {
        Trust::Pins(quic.pinned_sha256.clone())
    };
    let verdict = Arc::new(Verdict::default());
    let verifier = Arc::new(CertificateCheck {
        trust,
        signatures: provider.signature_verification_algorithms,
        verdict: verdict.clone(),
    });
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| config_error(format!("{e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN_SMB.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| config_error(format!("{e}")))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    transport.max_idle_timeout(Some(quinn::VarInt::from_u32(IDLE_TIMEOUT_MS).into()));
    config.transport_config(Arc::new(transport));
    Ok((config, verdict))
}

/// The CAs a server's certificate may chain to: the CA file when one is given, the system's
/// roots otherwise.
fn root_store(quic: &QuicConfig) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match &quic.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    Error::io(
                        None,
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("CA file {}: {e}", path.display()),
                        ),
                    )
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(Error::io(
                    None,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("CA file {}: no usable certificate in it", path.display()),
                    ),
                ));
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::debug!(error = %e, "a system root certificate could not be loaded");
            }
            roots.add_parsable_certificates(native.certs);
        }
    }
    Ok(roots)
}

fn config_error(reason: String) -> Error {
    Error::io(
        None,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("QUIC TLS settings: {reason}"),
        ),
    )
}

/// The handshake ended on TLS's no_application_protocol alert (120, RFC 8446 6.2; a QUIC
/// CRYPTO_ERROR, RFC 9001 4.8), sent by either side: the server has no ALPN `smb`.
fn alpn_refused(e: &quinn::ConnectionError) -> bool {
    const NO_APPLICATION_PROTOCOL: u8 = 120;
    let code = match e {
        quinn::ConnectionError::ConnectionClosed(close) => close.error_code,
        quinn::ConnectionError::TransportError(t) => t.code,
        _ => return false,
    };
    code == quinn::TransportErrorCode::crypto(NO_APPLICATION_PROTOCOL)
}

fn connection_io_error(e: quinn::ConnectionError) -> std::io::Error {
    use std::io::ErrorKind;
    let kind = match &e {
        quinn::ConnectionError::TimedOut => ErrorKind::TimedOut,
        quinn::ConnectionError::Reset => ErrorKind::ConnectionReset,
        quinn::ConnectionError::ConnectionClosed(_)
        | quinn::ConnectionError::ApplicationClosed(_) => ErrorKind::ConnectionAborted,
        _ => ErrorKind::Other,
    };
    std::io::Error::new(kind, e)
}

fn certificate_error(host: String, refusal: Refusal) -> Error {
    match refusal {
        Refusal::Tls(e) => Error::Certificate {
            host,
            problem: problem_of(&e),
            detail: e.to_string(),
        },
        Refusal::NotPinned { seen } => Error::Certificate {
            host,
            problem: CertificateProblem::PinMismatch,
            detail: format!("the server's key has SHA-256 {}", pin_text(&seen)),
        },
    }
}

/// A pin as people write and paste it: base64 of the 32 bytes.
pub(crate) fn pin_text(pin: &[u8; 32]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pin)
}

/// SHA-256 of the certificate's DER SubjectPublicKeyInfo (the SEQUENCE, tag and length
/// included: what RFC 7469 and curl hash).
fn spki_sha256(cert: &CertificateDer<'_>) -> std::result::Result<[u8; 32], rustls::Error> {
    use sha2::Digest as _;
    let parsed = webpki::EndEntityCert::try_from(cert)
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    Ok(sha2::Sha256::digest(parsed.subject_public_key_info().as_ref()).into())
}

fn problem_of(e: &rustls::Error) -> CertificateProblem {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => CertificateProblem::UnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                CertificateProblem::NameMismatch
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                CertificateProblem::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                CertificateProblem::NotYetValid
            }
            _ => CertificateProblem::Invalid,
        },
        _ => CertificateProblem::Invalid,
    }
}

/// Why the verifier refused the server, for the typed error quinn cannot carry.
#[derive(Clone, Debug)]
enum Refusal {
    /// rustls's own verdict (chain, name, validity, signature).
    Tls(rustls::Error),
    /// Keys are pinned and the server's is not one of them.
    NotPinned { seen: [u8; 32] },
}

/// Where the verifier leaves its refusal.
#[derive(Default)]
struct Verdict(Mutex<Option<Refusal>>);

impl Verdict {
    fn record(&self, refusal: Refusal) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(refusal);
    }

    fn take(&self) -> Option<Refusal> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// What vouches for a server's certificate.
enum Trust {
    /// A CA (the CA file's or the system's) and the server's name: rustls's WebPKI verifier.
    Chain(Arc<WebPkiServerVerifier>),
    /// The SHA-256 of its public key, one of these.
    Pins(Vec<[u8; 32]>),
}

/// The server's certificate check; keeps what it refused.
struct CertificateCheck {
    trust: Trust,
    signatures: rustls::crypto::WebPkiSupportedAlgorithms,
    verdict: Arc<Verdict>,
}

impl fmt::Debug for CertificateCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let trust = match &self.trust {
            Trust::Chain(_) => "chain",
            Trust::Pins(_) => "pins",
        };
        f.debug_struct("CertificateCheck")
            .field("trust", &trust)
            .finish_non_exhaustive()
    }
}

impl CertificateCheck {
    fn refuse<T>(&self, refusal: Refusal) -> std::result::Result<T, rustls::Error> {
        let e = match &refusal {
            Refusal::Tls(e) => e.clone(),
            Refusal::NotPinned { .. } => {
                rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure)
            }
        };
        self.verdict.record(refusal);
        Err(e)
    }
}

impl ServerCertVerifier for CertificateCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match &self.trust {
            // The pin names the key itself, which is more than a CA and a name say: a key
            // that matches is the server, whoever signed its certificate.
            Trust::Pins(pins) => match spki_sha256(end_entity) {
                Ok(seen) if pins.contains(&seen) => Ok(ServerCertVerified::assertion()),
                Ok(seen) => self.refuse(Refusal::NotPinned { seen }),
                Err(e) => self.refuse(Refusal::Tls(e)),
            },
            Trust::Chain(chain) => chain
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .or_else(|e| self.refuse(Refusal::Tls(e))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.signatures)
    }

    /// The handshake's proof that the server holds the certificate's key: what makes a
    /// pinned key, or a trusted certificate, mean anything.
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        match rustls::crypto::verify_tls13_signature(message, cert, dss, &self.signatures) {
            Ok(valid) => Ok(valid),
            Err(e) => self.refuse(Refusal::Tls(e)),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.supported_schemes()
    }
}

/// One half of the channel's stream. Dropped, it closes the whole QUIC connection first, so
/// that nothing the channel queued is sent later (see the module's comment). It also keeps the
/// endpoint, and with it the UDP socket, alive while the channel is.
pub(super) struct QuicHalf<T> {
    io: T,
    connection: quinn::Connection,
    _endpoint: quinn::Endpoint,
}

impl<T> QuicHalf<T> {
    fn new(io: T, connection: quinn::Connection, endpoint: quinn::Endpoint) -> Self {
        QuicHalf {
            io,
            connection,
            _endpoint: endpoint,
        }
    }
}

impl<T> Drop for QuicHalf<T> {
    fn drop(&mut self) {
        // Runs before the fields are dropped: the stream is abandoned with the connection,
        // never finished gracefully with its queued bytes.
        self.connection.close(0u32.into(), b"channel closed");
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for QuicHalf<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for QuicHalf<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_their_problem() {
        let cases = [
            (
                CertificateError::UnknownIssuer,
                CertificateProblem::UnknownIssuer,
            ),
            (
                CertificateError::NotValidForName,
                CertificateProblem::NameMismatch,
            ),
            (CertificateError::Expired, CertificateProblem::Expired),
            (
                CertificateError::NotValidYet,
                CertificateProblem::NotYetValid,
            ),
            (CertificateError::Revoked, CertificateProblem::Invalid),
        ];
        for (cert, problem) in cases {
            let e = certificate_error(
                "nas.example".into(),
                Refusal::Tls(rustls::Error::InvalidCertificate(cert)),
            );
            assert!(
                matches!(&e, Error::Certificate { host, problem: p, .. } if host == "nas.example" && *p == problem),
                "{e:?}"
            );
            assert!(
                e.to_string()
                    .starts_with("certificate of nas.example refused"),
                "{e}"
            );
        }
    }

    /// An ECHO request (MS-SMB2 2.2.28), the smallest there is.
    struct Echo;

    impl smb3_proto::msg::RequestBody for Echo {
        const COMMAND: smb3_proto::Command = smb3_proto::Command::ECHO;
        fn encode_body(&self, msg: &mut bytes::BytesMut) {
            msg.extend_from_slice(&[4, 0, 0, 0]);
        }
    }

    /// A QUIC server on loopback with a certificate for `name` from a new CA; returns its
    /// endpoint and the CA's PEM file.
    fn server(name: &str) -> (quinn::Endpoint, std::path::PathBuf) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
        )
        .unwrap();
        tls.alpn_protocols = vec![ALPN_SMB.to_vec()];
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
        let endpoint = quinn::Endpoint::server(
            quinn::ServerConfig::with_crypto(Arc::new(crypto)),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
        .unwrap();
        let ca_file = std::env::temp_dir().join(format!(
            "smb3-quic-unit-ca-{}-{name}.pem",
            std::process::id()
        ));
        std::fs::write(&ca_file, ca.pem()).unwrap();
        (endpoint, ca_file)
    }

    /// The stream carries Direct TCP framing (a zero byte, a 24-bit length, the message),
    /// replies come back through the same channel code as over TCP, and closing the channel
    /// closes the connection: the server sees it closed by the application, never the
    /// stream finished (which would deliver what was still queued).
    #[tokio::test]
    async fn one_stream_direct_tcp_framing_and_an_abortive_close() {
        use smb3_proto::header::{Header, HeaderFlags};

        let (endpoint, ca_file) = server("quic.unit.test");
        let peer = endpoint.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let connection = endpoint.accept().await.unwrap().await.unwrap();
            assert_eq!(
                connection
                    .handshake_data()
                    .unwrap()
                    .downcast::<quinn::crypto::rustls::HandshakeData>()
                    .unwrap()
                    .protocol
                    .as_deref(),
                Some(ALPN_SMB)
            );
            let (mut send, mut recv) = connection.accept_bi().await.unwrap();
            let mut prefix = [0u8; 4];
            recv.read_exact(&mut prefix).await.unwrap();
            assert_eq!(prefix[0], 0, "Direct TCP header: zero byte first");
            let len = u32::from_be_bytes(prefix) as usize;
            let mut msg = vec![0u8; len];
            recv.read_exact(&mut msg).await.unwrap();
            assert_eq!(&msg[..4], b"\xfeSMB");
            let req = Header::decode(&msg).unwrap();
            assert_eq!(req.command, smb3_proto::Command::ECHO);
            let mut reply = bytes::BytesMut::new();
            Header {
                command: req.command,
                credits: 8,
                credit_charge: req.credit_charge,
                flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR),
                message_id: req.message_id,
                ..Header::default()
            }
            .encode(&mut reply);
            reply.extend_from_slice(&[4, 0, 0, 0]);
            send.write_all(&(reply.len() as u32).to_be_bytes())
                .await
                .unwrap();
            send.write_all(&reply).await.unwrap();
            // The second request is left unanswered; then the client closes.
            let end = recv.read_to_end(1 << 20).await;
            (end.is_err(), connection.close_reason())
        });
        let quic = QuicConfig {
            ca_file: Some(ca_file.clone()),
            server_name: Some("quic.unit.test".into()),
            pinned_sha256: Vec::new(),
        };
        let opts = ChannelOptions::default();
        let (channel, _unsolicited) = connect(peer, None, &quic, &opts).await.unwrap();
        let reply = channel
            .call(super::super::Request::new(&Echo))
            .await
            .unwrap();
        assert_eq!(reply.header.status, smb3_proto::NtStatus::SUCCESS);
        let pending = {
            let channel = channel.clone();
            tokio::spawn(async move { channel.call(super::super::Request::new(&Echo)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        pending.abort();
        drop(channel);
        let (read_failed, reason) = tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the server sees the close")
            .unwrap();
        std::fs::remove_file(&ca_file).unwrap();
        assert!(read_failed, "the stream must not end as a finished stream");
        assert!(
            matches!(reason, Some(quinn::ConnectionError::ApplicationClosed(_))),
            "{reason:?}"
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("smb3-quic-ca-{}", std::process::id()));
        std::fs::write(&dir, "not a certificate\n").unwrap();
        let quic = QuicConfig {
            ca_file: Some(dir.clone()),
            server_name: None,
            pinned_sha256: Vec::new(),
        };
        let e = root_store(&quic).unwrap_err();
        std::fs::remove_file(&dir).unwrap();
        assert!(e.to_string().contains("no usable certificate"), "{e}");
    }
}
