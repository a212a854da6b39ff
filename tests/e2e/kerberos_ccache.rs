//! Kerberos without a password, against the testbed's Samba AD DC: tickets from credential
//! caches MIT's `kinit` filled (FILE:, DIR:, KEYRING:, and KCM: served by Heimdal's `kcm`
//! daemon, package heimdal-kcm) and from a keytab the DC exported,
//! through the system's GSS-API (smb3-gss loading libgssapi_krb5.so.2).
//!
//! The DC refuses NTLM (`ntlm auth = disabled`), and the credentials handed to the library
//! carry no password at all, so every session that works here was authenticated with the
//! cached or keytab tickets. Each test binds a second channel, which runs a GSS context of
//! its own (MS-SMB2 3.2.4.1.7, 3.2.5.3.3).
//!
//! MIT reads `KRB5_CONFIG` (and `KRB5CCNAME`, `KRB5_CLIENT_KTNAME`) from the environment of
//! the process: the tests set it to their testbed's krb5.conf (realm TESTBED.LAN, its KDC by
//! address, `rdns = false`), so they take turns (`KerberosBed`) whatever `--test-threads`
//! says: a test that read another's krb5.conf, or one already removed, would ask the wrong
//! KDC or none.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use smb3_client::{
    Auth, AuthDetail, Client, ClientConfig, ConfigError, Dialect, Error, KerberosHint,
    UserCredentials,
};
use smb3_tests::{client_block_on, pattern, write_then_read, Testbed, TestbedConfig};

const PRINCIPAL: &str = "smbtest@TESTBED.LAN";

/// The process's environment is one for all tests: each holds it while it runs.
static ENVIRONMENT: Mutex<()> = Mutex::new(());

/// A Kerberos testbed and this test's turn with the process's environment; the testbed goes
/// down before the turn passes on (fields drop in order).
struct KerberosBed {
    tb: Testbed,
    _turn: MutexGuard<'static, ()>,
}

impl std::ops::Deref for KerberosBed {
    type Target = Testbed;
    fn deref(&self) -> &Testbed {
        &self.tb
    }
}

/// A Kerberos testbed with two links, and the process pointed at its krb5.conf.
fn testbed() -> KerberosBed {
    // A test that failed while holding the turn leaves the lock poisoned: the environment is
    // set again below, so the next test can take it all the same.
    let turn = ENVIRONMENT.lock().unwrap_or_else(PoisonError::into_inner);
    let tb = Testbed::start(TestbedConfig {
        kerberos: true,
        // Level 3 makes the KDC log every ticket it issues (see `service_tickets`).
        log_level: 3,
        ..TestbedConfig::unshaped(2)
    })
    .unwrap_or_else(|e| panic!("testbed: {e}"));
    let k = tb.kerberos().expect("a Kerberos testbed");
    // This test holds the turn: no other test reads or writes the environment meanwhile.
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    std::env::remove_var("KRB5CCNAME");
    std::env::remove_var("KRB5_CLIENT_KTNAME");
    KerberosBed { tb, _turn: turn }
}

/// Credentials with no password at all: only a ticket can authenticate them.
fn no_password() -> UserCredentials {
    UserCredentials {
        user: String::new(),
        domain: String::new(),
        password: "".into(),
    }
}

/// 3.1.1, the server reached by address and named by its host name for the SPN.
fn config(tb: &Testbed) -> ClientConfig {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut config = ClientConfig::default();
    config.min_dialect = Dialect::Smb311;
    config.kerberos_service_host = Some(k.server_host.clone());
    config.connect_timeout = Duration::from_secs(5);
    config
}

/// `kinit -c CACHE smbtest@TESTBED.LAN` in the client namespace (where the KDC is
/// reachable), the password on stdin; extra arguments (e.g. `-l 5s`) go before the
/// principal.
fn kinit(tb: &Testbed, cache: &str, extra: &[&str]) {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let mut child = tb
        .client_command("kinit")
        .env("KRB5_CONFIG", &k.krb5_conf)
        .args(["-c", cache])
        .args(extra)
        .arg(PRINCIPAL)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kinit (krb5-user) is installed");
    writeln!(child.stdin.take().unwrap(), "{}", tb.password()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kinit -c {cache}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kdestroy(tb: &Testbed, cache: &str) {
    let k = tb.kerberos().expect("a Kerberos testbed");
    let _ = Command::new("kdestroy")
        .env("KRB5_CONFIG", &k.krb5_conf)
        .args(["-c", cache])
        .output();
}

/// Service tickets the KDC issued to the test user for cifs/dc.testbed.lan (its log at level
/// 3: "TGS-REQ SUCCESS  smbtest@TESTBED.LAN cifs/dc.testbed.lan@TESTBED.LAN ...").
fn service_tickets(tb: &Testbed) -> usize {
    let log = std::fs::read(tb.log_file()).expect("the DC's log");
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| {
            l.contains("TGS-REQ SUCCESS")
                && l.contains("smbtest@TESTBED.LAN cifs/dc.testbed.lan@TESTBED.LAN")
        })
        .count()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Connect with no password, wait for the second channel, round-trip `len` bytes through
/// the plain share; check them on the client and on the server's disk, and that every
/// channel the planner wanted is bound.
fn round_trip(tb: &Testbed, config: ClientConfig, name: &'static str, seed: u64) -> Client {
    let rt = tb.client_runtime();
    let srv = format!("{}:445", tb.server_addr(1));
    let len = 2 * 1024 * 1024 + 5;
    let data = Bytes::from(pattern(seed, len));
    let want = hex(&Sha256::digest(&data));
    let (client, back) = client_block_on(&rt, async move {
        let client = Client::connect(&srv, &no_password(), config)
            .await
            .unwrap_or_else(|e| panic!("Kerberos connect without a password: {e}"));
        client.wait_for_channels(Duration::from_secs(15)).await;
        let share = client.share("plain").await.expect("tree connect");
        let back = write_then_read(&share, name, data).await;
        (client, hex(&Sha256::digest(&back)))
    });
    assert_eq!(back, want, "{name}: bytes read back");
    let on_disk = std::fs::read(tb.share_path("plain").join(name)).unwrap();
    assert_eq!(
        hex(&Sha256::digest(&on_disk)),
        want,
        "{name}: bytes on disk"
    );
    assert!(client.signing().is_some(), "a Kerberos session is signed");
    let mc = client.multichannel();
    let bound: u64 = mc.pairs.iter().map(|p| p.binds_ok).sum();
    let refused: u64 = mc.pairs.iter().map(|p| p.binds_refused).sum();
    eprintln!(
        "{name}: {} channel(s), {bound} bound, {refused} refused",
        client.channels().len()
    );
    assert!(client.channels().len() >= 2, "{mc:#?}");
    assert!(bound >= 1, "no channel bound: {mc:#?}");
    assert_eq!(refused, 0, "a binding was refused: {mc:#?}");
    drop(rt);
    client
}

/// FILE:, DIR: and KEYRING: caches filled by MIT kinit, each named through the option and
/// (FILE:) through KRB5CCNAME: a session with no password over two channels, every channel
/// bound with a service ticket of its own.
#[test]
fn ticket_caches_of_every_kind_authenticate_every_channel() {
    let tb = testbed();
    let dir = tb.run_dir().join("ccaches");
    std::fs::create_dir_all(dir.join("dir-cache")).unwrap();
    let keyring = format!("KEYRING:session:smb3-test-{}", std::process::id());
    let caches = [
        format!("FILE:{}", dir.join("file-cache").display()),
        format!("DIR:{}", dir.join("dir-cache").display()),
        keyring.clone(),
    ];
    for (i, cache) in caches.iter().enumerate() {
        kinit(&tb, cache, &[]);
        let before = service_tickets(&tb);
        let mut c = config(&tb);
        c.kerberos_ccache = Some(cache.clone());
        let name = ["ccache-file", "ccache-dir", "ccache-keyring"][i];
        let client = round_trip(&tb, c, name, 40 + i as u64);
        let channels = client.channels().len();
        drop(client);
        // The first session setup and every binding each sent an AP-REQ; MIT fetched the
        // service ticket once and kept it in the cache, so the KDC saw exactly one TGS-REQ.
        let tickets = service_tickets(&tb) - before;
        eprintln!("{cache}: {tickets} service ticket(s) for {channels} channels");
        assert_eq!(
            tickets, 1,
            "{cache}: one service ticket, cached for the bindings"
        );
    }
    // The default cache of the environment: KRB5CCNAME.
    std::env::set_var("KRB5CCNAME", &caches[0]);
    let client = round_trip(&tb, config(&tb), "ccache-env", 50);
    drop(client);
    std::env::remove_var("KRB5CCNAME");
    kdestroy(&tb, &keyring);
}

/// Where MIT's KCM client looks for the daemon (krb5.conf's `kcm_socket` default), and where
/// Heimdal's `kcm` listens whatever `-s` says (seen with 7.8).
const KCM_SOCKET: &str = "/var/run/.heim_org.h5l.kcm-socket";

/// Heimdal's KCM daemon for the test, stopped by its PID when dropped; `None` when a KCM
/// daemon (sssd-kcm, say) already listens, which the test then uses as it is.
struct KcmDaemon(Option<std::process::Child>);

impl KcmDaemon {
    fn start() -> KcmDaemon {
        if std::os::unix::net::UnixStream::connect(KCM_SOCKET).is_ok() {
            return KcmDaemon(None);
        }
        let _ = std::fs::remove_file(KCM_SOCKET);
        let child = Command::new("/usr/sbin/kcm")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Heimdal's kcm (package heimdal-kcm, scripts/install-deps.sh)");
        let began = Instant::now();
        while std::os::unix::net::UnixStream::connect(KCM_SOCKET).is_err() {
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "kcm did not listen on {KCM_SOCKET}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        KcmDaemon(Some(child))
    }
}

impl Drop for KcmDaemon {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(KCM_SOCKET);
        }
    }
}

/// KCM:, the cache SSSD keeps tickets in on RHEL/Fedora: MIT's client library talks to a
/// KCM daemon over a Unix socket; here Heimdal's.
#[test]
fn a_kcm_cache_authenticates_every_channel() {
    let tb = testbed();
    let kcm = KcmDaemon::start();
    let cache = format!("KCM:0:smb3-test-{}", std::process::id());
    kinit(&tb, &cache, &[]);
    let mut c = config(&tb);
    c.kerberos_ccache = Some(cache.clone());
    drop(round_trip(&tb, c, "ccache-kcm", 70));
    kdestroy(&tb, &cache);
    drop(kcm);
}

/// Auth::Kerberos with a realm and a password still goes through sspi (as today); with no
/// password it takes the cache. Auth::Ntlm with no password is refused by the DC.
#[test]
fn the_mechanism_follows_the_choice() {
    let tb = testbed();
    let cache = format!("FILE:{}", tb.run_dir().join("cc-choice").display());
    kinit(&tb, &cache, &[]);
    std::env::set_var("KRB5CCNAME", &cache);
    let rt = tb.client_runtime();
    let srv = format!("{}:445", tb.server_addr(1));
    let connect = |c: ClientConfig, creds: UserCredentials| {
        let srv = srv.clone();
        client_block_on(&rt, async move { Client::connect(&srv, &creds, c).await })
    };
    let mut c = config(&tb);
    c.auth = Auth::Kerberos;
    connect(c.clone(), no_password()).expect("Auth::Kerberos from the cache");
    c.auth = Auth::Ntlm;
    match connect(c, tb.credentials()) {
        Err(Error::Status { .. }) => {}
        other => panic!("NTLM must be refused by the DC: {other:?}"),
    }
    // The password path, unchanged: a realm and a password.
    let k = tb.kerberos().unwrap().clone();
    let mut c = config(&tb);
    c.kerberos_realm = Some(k.realm.clone());
    c.kerberos_kdc = Some(k.kdc.to_string());
    std::env::remove_var("KRB5CCNAME");
    connect(c, tb.credentials()).expect("Kerberos with the password through sspi");
    drop(rt);
}

/// The keytab the DC exports for the test user (`samba-tool domain exportkeytab`).
fn export_keytab(tb: &Testbed, path: &Path, principal: &str) {
    let out = tb
        .server_command("samba-tool")
        .args(["domain", "exportkeytab"])
        .arg(path)
        .arg(format!("--principal={principal}"))
        .arg("-s")
        .arg(tb.smb_conf())
        .output()
        .expect("samba-tool");
    assert!(
        out.status.success(),
        "exportkeytab: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A keytab through the option (principal given, and the keytab's first entry) and through
/// KRB5_CLIENT_KTNAME: no cache anywhere, the TGT fetched from the keytab once and kept in
/// memory for the bindings.
#[test]
fn keytabs_through_the_option_and_the_environment() {
    let tb = testbed();
    let keytab: PathBuf = tb.run_dir().join("smbtest.keytab");
    export_keytab(&tb, &keytab, PRINCIPAL);
    // No default cache may exist behind the test's back: point the default at nothing.
    let nowhere = format!("FILE:{}", tb.run_dir().join("no-default-cache").display());
    std::env::set_var("KRB5CCNAME", &nowhere);

    let mut c = config(&tb);
    c.kerberos_keytab = Some(keytab.clone());
    c.kerberos_principal = Some(PRINCIPAL.to_string());
    drop(round_trip(&tb, c, "keytab-principal", 60));

    let mut c = config(&tb);
    c.kerberos_keytab = Some(keytab.clone());
    drop(round_trip(&tb, c, "keytab-first-entry", 61));

    // MIT's own: KRB5_CLIENT_KTNAME is used when the cache has no ticket; the tickets go
    // into the default cache (MIT's rule), here a private file.
    let env_cache = format!("FILE:{}", tb.run_dir().join("kt-env-cache").display());
    std::env::set_var("KRB5CCNAME", &env_cache);
    std::env::set_var("KRB5_CLIENT_KTNAME", &keytab);
    drop(round_trip(&tb, config(&tb), "keytab-env", 62));
    std::env::remove_var("KRB5_CLIENT_KTNAME");
    std::env::remove_var("KRB5CCNAME");
    assert!(
        !Path::new(&nowhere["FILE:".len()..]).exists(),
        "the option's tickets stay in memory"
    );
}

fn expect_kerberos_error(r: Result<Client, Error>, what: &str) -> (Option<KerberosHint>, String) {
    match r {
        Err(
            e @ Error::Auth {
                detail: AuthDetail::KerberosCache { .. },
                ..
            },
        ) => {
            let text = e.to_string();
            let Error::Auth {
                detail: AuthDetail::KerberosCache { hint, .. },
                ..
            } = e
            else {
                unreachable!()
            };
            (hint, text)
        }
        other => panic!("{what}: expected a Kerberos cache error, got {other:?}"),
    }
}

/// Bad input, each a typed error with a message that says what to do, in bounded time: no
/// cache, an empty one, an expired ticket, a keytab without the principal, a wrong SPN, and
/// an address where a host name is needed.
#[test]
fn bad_caches_keytabs_and_names_are_clear_errors() {
    let tb = testbed();
    let rt = tb.client_runtime();
    let srv = format!("{}:445", tb.server_addr(1));
    let connect = |c: ClientConfig| {
        let srv = srv.clone();
        client_block_on(&rt, async move {
            let began = Instant::now();
            let r = Client::connect(&srv, &no_password(), c).await;
            (r, began.elapsed())
        })
    };
    let run = tb.run_dir().to_path_buf();

    // No cache at all.
    let missing = format!("FILE:{}", run.join("missing-cache").display());
    let mut c = config(&tb);
    c.kerberos_ccache = Some(missing.clone());
    let (r, took) = connect(c);
    let (hint, text) = expect_kerberos_error(r, "missing cache");
    assert_eq!(hint, Some(KerberosHint::NoTicket), "{text}");
    assert!(
        text.contains(&format!("no Kerberos ticket in {missing} (run kinit)")),
        "{text}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    // An empty cache file.
    let empty = run.join("empty-cache");
    std::fs::write(&empty, b"").unwrap();
    let mut c = config(&tb);
    c.kerberos_ccache = Some(format!("FILE:{}", empty.display()));
    let (r, _) = connect(c);
    let (hint, text) = expect_kerberos_error(r, "empty cache");
    eprintln!("empty cache: {text}");
    assert!(
        matches!(hint, Some(KerberosHint::NoTicket) | None),
        "{hint:?}: {text}"
    );

    // An expired ticket: kinit -l 5s, then wait it out (MIT refuses a lifetime below ~5 s).
    let short = format!("FILE:{}", run.join("short-cache").display());
    kinit(&tb, &short, &["-l", "5s"]);
    std::thread::sleep(Duration::from_secs(7));
    let mut c = config(&tb);
    c.kerberos_ccache = Some(short.clone());
    let (r, took) = connect(c);
    let (hint, text) = expect_kerberos_error(r, "expired ticket");
    eprintln!("expired: {text}");
    assert_eq!(hint, Some(KerberosHint::TicketExpired), "{text}");
    assert!(text.contains("has expired (run kinit)"), "{text}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    // A keytab that holds only smbtest's keys, asked for another principal.
    let keytab = run.join("other.keytab");
    export_keytab(&tb, &keytab, PRINCIPAL);
    let mut c = config(&tb);
    c.kerberos_keytab = Some(keytab.clone());
    c.kerberos_principal = Some("nobody@TESTBED.LAN".into());
    let (r, took) = connect(c);
    let (hint, text) = expect_kerberos_error(r, "keytab without the principal");
    eprintln!("keytab without the principal: {text}");
    assert_eq!(hint, Some(KerberosHint::NotInKeytab), "{text}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A wrong SPN: a host name the KDC has no cifs/ service for.
    let good = format!("FILE:{}", run.join("good-cache").display());
    kinit(&tb, &good, &[]);
    let mut c = config(&tb);
    c.kerberos_ccache = Some(good.clone());
    c.kerberos_service_host = Some("nosuchhost.testbed.lan".into());
    let (r, took) = connect(c);
    let (hint, text) = expect_kerberos_error(r, "wrong SPN");
    eprintln!("wrong SPN: {text}");
    assert_eq!(hint, Some(KerberosHint::UnknownService), "{text}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // An address and no host name: a configuration error that says Kerberos needs a name.
    let mut c = config(&tb);
    c.kerberos_ccache = Some(good);
    c.kerberos_service_host = None;
    let (r, _) = connect(c);
    match r {
        Err(Error::Config(ConfigError::Setting { name, reason })) => {
            assert_eq!(name, "kerberos_service_host");
            assert!(reason.contains("host name"), "{reason}");
        }
        other => panic!("an address for Kerberos: {other:?}"),
    }
    drop(rt);
}

/// A ticket that ends while the session works. The server then answers
/// STATUS_NETWORK_SESSION_EXPIRED (MS-SMB2 3.3.5.2.9) and the library authenticates the
/// session again with what the cache holds now (3.2.4.2.3.1) and sends the request again.
/// Service tickets are asked to last 15 s (`kerberos_ticket_lifetime`; the DC refuses
/// ticket-granting tickets in their last two minutes, so those cannot be short):
/// - with a valid ticket-granting ticket in the cache (as `kinit` or SSSD keep it), nothing
///   shows: a file kept open across several expiries is written and read back byte-exact,
///   over both channels;
/// - with only an expired one, the write fails with the error that says to run kinit, and
///   after kinit the next write on the same open file goes on, with no new connection.
#[test]
fn an_expiring_ticket_is_renewed_in_place_and_an_expired_one_says_run_kinit() {
    const CHUNK: usize = 1 << 20;
    const NAME: &str = "outlives-its-ticket.bin";
    let tb = testbed();
    let cache = format!("FILE:{}", tb.run_dir().join("short-lived").display());
    kinit(&tb, &cache, &[]);
    let mut c = config(&tb);
    c.kerberos_ccache = Some(cache.clone());
    c.kerberos_ticket_lifetime = Some(Duration::from_secs(15));
    let rt = tb.client_runtime();
    let srv = format!("{}:445", tb.server_addr(1));
    let (client, file) = client_block_on(&rt, async move {
        let client = Client::connect(&srv, &no_password(), c)
            .await
            .unwrap_or_else(|e| panic!("Kerberos connect without a password: {e}"));
        client.wait_for_channels(Duration::from_secs(15)).await;
        let share = client.share("plain").await.expect("tree connect");
        let opts = smb3_client::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true);
        let file = share.open(NAME, &opts).await.expect("open");
        (client, file)
    });
    assert!(client.channels().len() >= 2, "{:#?}", client.multichannel());
    let mut expected = Vec::new();
    let write = |file: &smb3_client::File, at: usize, seed: u64| {
        let data = Bytes::from(pattern(seed, CHUNK));
        let f = file.clone();
        let r = client_block_on(&rt, async move { f.write_at(at as u64, data).await });
        (r, pattern(seed, CHUNK))
    };

    // Two service tickets end while the file is written, a chunk a second.
    let started = Instant::now();
    let mut seed = 0u64;
    while started.elapsed() < Duration::from_secs(40) {
        let (r, data) = write(&file, expected.len(), seed);
        r.unwrap_or_else(|e| panic!("write at {:?}: {e}", started.elapsed()));
        expected.extend_from_slice(&data);
        seed += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    let renewals = client.reauthentications();
    eprintln!("with a valid TGT: {renewals:?}, {seed} MiB written");
    assert!(renewals.renewed >= 2, "{renewals:?}");
    assert_eq!(renewals.failed, 0, "{renewals:?}");

    // Only an expired ticket in the cache (MIT will not issue one shorter than ~5 s): once
    // the session's service ticket ends too, the write fails and says what to do.
    kinit(&tb, &cache, &["-l", "5s"]);
    std::thread::sleep(Duration::from_secs(17));
    let (r, _) = write(&file, expected.len(), seed);
    let err = r.expect_err("a write with the session's ticket expired and none in the cache");
    let text = err.to_string();
    eprintln!("expired: {text}");
    assert!(text.contains("run kinit"), "{text}");
    assert_eq!(client.reauthentications().failed, 1);

    // kinit, and the same open file goes on.
    kinit(&tb, &cache, &[]);
    let (r, data) = write(&file, expected.len(), seed);
    r.unwrap_or_else(|e| panic!("write after kinit: {e}"));
    expected.extend_from_slice(&data);
    let f = file.clone();
    let len = expected.len();
    let back = client_block_on(&rt, async move {
        let back = f.read_at(0, len + 1).await.expect("read back");
        f.close().await.expect("close");
        back
    });
    assert_eq!(back.len(), expected.len(), "bytes read back");
    assert!(back[..] == expected[..], "bytes read back differ");
    let on_disk = std::fs::read(tb.share_path("plain").join(NAME)).unwrap();
    assert!(on_disk == expected, "bytes on the server's disk differ");
    let renewals = client.reauthentications();
    assert!(renewals.renewed >= 3, "{renewals:?}");
    drop(file);
    drop(client);
    drop(rt);
    kdestroy(&tb, &cache);
}
