//! Test harness: drives `tests/testbed/testbed.sh`.
//!
//! A [`Testbed`] is a private Samba server in a server network namespace, reachable from a
//! client namespace over N veth links (link K: server `10.<id>.K.1` on `srvK`, client
//! `10.<id>.K.2` on `cliK`, each end with [`TestbedConfig::queues`] queues so the client sees
//! RSS-capable NICs), each direction optionally shaped with tbf. Optionally one more server
//! address, the service address `10.<id>.200.1`, is reachable over every link (a socket bound
//! to `10.<id>.K.2` reaches it through link K): the "one server address, several client NICs"
//! case. smbd listens on every address of its namespace; which ones it advertises in
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO is chosen by [`Advertise`] and can be changed at run time
//! ([`Testbed::advertise`], [`Testbed::set_interfaces`]) without a restart. [`Testbed::start`] creates it; dropping the value
//! takes it down again, also when the test panics. A testbed whose owner died without dropping
//! it (SIGKILL, abort) is collected by the next `testbed.sh up` (every `start` runs one).
//!
//! Code under test reaches the server from the client namespace in one of three ways:
//! - run a binary there: [`Testbed::client_command`] / [`Testbed::exec_client`];
//! - a tokio runtime whose threads all live there: [`Testbed::client_runtime`] with
//!   [`client_block_on`];
//! - move the current thread there for a while: [`Testbed::enter_client_netns`].
//!
//! Everything here needs root; without it (or without Samba) [`Testbed::start`] returns the
//! script's message as the error, and tests are expected to fail with it, never skip.
//!
//! Linux only: network namespaces, veth links, tc and the namespace calls (`setns`,
//! `unshare`, `mount`, `umount2`) have no macOS counterpart, so elsewhere this crate is empty,
//! and so are the test targets that use it (each starts with the same `cfg`).
#![cfg(target_os = "linux")]

pub mod mitm;
pub mod quic_relay;
pub mod scratch;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::future::Future;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where the script lives (overridable with `SMBTB_SCRIPT`).
const DEFAULT_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testbed/testbed.sh");

/// How the server enforces SMB signing. Samba 4.17 only has a server-wide `server signing`
/// option, so this applies to every share; the `[signed]` share exists only with `Mandatory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// `server signing = mandatory`: unsigned requests of authenticated sessions are refused.
    Mandatory,
    /// `server signing = default`: signing is offered, the client decides.
    Default,
}

impl Signing {
    fn as_arg(self) -> &'static str {
        match self {
            Signing::Mandatory => "mandatory",
            Signing::Default => "default",
        }
    }
}

/// Which server addresses smbd advertises (smb.conf's `interfaces` line, which is what
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO reports). smbd listens on every address of the server
/// namespace whatever is advertised.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Advertise {
    /// Every link's server address with its speed (the default).
    #[default]
    Links,
    /// Only the service address (needs [`TestbedConfig::service_addr`]), with the links'
    /// combined speed: one server address, reachable over every client NIC.
    Service,
    /// The links' addresses, then the service address.
    Both,
    /// Exactly these specs (see [`Testbed::interface_spec`]); e.g. an address with no route.
    Custom(Vec<String>),
}

impl Advertise {
    /// The script's argument for it: a keyword, or the specs themselves.
    fn script_args(&self) -> Vec<String> {
        match self {
            Advertise::Links => vec!["links".into()],
            Advertise::Service => vec!["service".into()],
            Advertise::Both => vec!["both".into()],
            Advertise::Custom(specs) => specs.clone(),
        }
    }
}

/// Which Samba serves a testbed ([`TestbedConfig::samba`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SambaBuild {
    /// The system's smbd (Debian 12: Samba 4.17), with the system's tools.
    #[default]
    System,
    /// Samba 4.22 or newer from a Debian 13 ("trixie") root, for the SMB3 POSIX extensions:
    /// `smb3 unix extensions = yes` in `[global]` (so smbd offers the POSIX negotiate
    /// context) plus one more share, `noposix`, that turns them off. smbd and the server-side
    /// Samba tools ([`Testbed::smbstatus`], [`Testbed::server_command`] for Samba's programs)
    /// run from the root, chrooted, in a mount namespace of their own. The root is built once
    /// per machine with debootstrap (a few minutes) into `/var/cache/smbtb/trixie-root`
    /// (`SMBTB_TRIXIE_ROOT`); see [`Testbed::samba_root`]. Not with [`TestbedConfig::kerberos`].
    Trixie,
}

impl SambaBuild {
    fn as_arg(self) -> &'static str {
        match self {
            SambaBuild::System => "system",
            SambaBuild::Trixie => "trixie",
        }
    }
}

/// What to build. Start from [`TestbedConfig::unshaped`], [`TestbedConfig::shaped`] or
/// [`TestbedConfig::per_link`] and adjust fields.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    /// Number of veth links between the namespaces, 1..=32.
    pub links: usize,
    /// Rate of each link in Mbit/s (`None` = unshaped). Empty = every link unshaped; one
    /// entry = the same for every link; otherwise exactly one entry per link.
    pub rate_mbit: Vec<Option<u32>>,
    /// MTU of every veth end.
    pub mtu: u32,
    /// Size of the tmpfs behind the shares, as `mount -o size=` takes it (e.g. `"6g"`).
    pub tmpfs_size: String,
    /// Server-wide signing requirement.
    pub signing: Signing,
    /// smbd `log level`. At 2 or more the log shows `added interface <if> ip=<addr>` for
    /// every advertised address, at start and at each reload.
    pub log_level: u8,
    /// Receive and transmit queues of every veth end (default 4; `/sys/class/net/cliK/queues`
    /// lists them, which is how a client decides a NIC is RSS-capable). With more than one
    /// the advertised specs carry `capability=RSS`; 1 = plain non-RSS NICs.
    pub queues: u32,
    /// Add the service address `10.<id>.200.1` (see [`Testbed::service_addr`]).
    pub service_addr: bool,
    /// What smbd advertises at start ([`Advertise::Links`] by default).
    pub advertise: Advertise,
    /// Kerberos mode: the server is a Samba AD DC (realm `TESTBED.LAN`, host
    /// `dc.testbed.lan`, a KDC on port 88 of every server address) with the same shares and
    /// user, and NTLM disabled; see [`Testbed::kerberos`]. The first such testbed on a machine
    /// provisions the domain (about 30 s), later ones copy it (`up` about 4 s).
    pub kerberos: bool,
    /// Which Samba serves the shares: the system's (default) or 4.22+ from a Debian 13 root
    /// ([`SambaBuild::Trixie`], also [`TestbedConfig::with_samba_trixie`]).
    pub samba: SambaBuild,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig {
            links: 1,
            rate_mbit: Vec::new(),
            mtu: 1500,
            tmpfs_size: "6g".to_string(),
            signing: Signing::Mandatory,
            log_level: 1,
            queues: 4,
            service_addr: false,
            advertise: Advertise::Links,
            kerberos: false,
            samba: SambaBuild::System,
        }
    }
}

impl TestbedConfig {
    /// `links` unshaped links (veth: several GB/s, advertised as 10 Gb/s).
    pub fn unshaped(links: usize) -> Self {
        TestbedConfig {
            links,
            ..TestbedConfig::default()
        }
    }

    /// `links` links, each shaped to `mbit` Mbit/s in both directions.
    pub fn shaped(links: usize, mbit: u32) -> Self {
        TestbedConfig {
            links,
            rate_mbit: vec![Some(mbit)],
            ..TestbedConfig::default()
        }
    }

    /// One link per entry, shaped to that many Mbit/s (`None` = unshaped).
    pub fn per_link(rates_mbit: &[Option<u32>]) -> Self {
        TestbedConfig {
            links: rates_mbit.len(),
            rate_mbit: rates_mbit.to_vec(),
            ..TestbedConfig::default()
        }
    }

    /// The same, served by Samba 4.22+ from the Debian 13 root ([`SambaBuild::Trixie`]).
    pub fn with_samba_trixie(self) -> Self {
        TestbedConfig {
            samba: SambaBuild::Trixie,
            ..self
        }
    }

    fn rate_arg(&self) -> Option<String> {
        if self.rate_mbit.iter().all(Option::is_none) {
            return None;
        }
        let rates: Vec<String> = self
            .rate_mbit
            .iter()
            .map(|r| r.unwrap_or(0).to_string())
            .collect();
        Some(rates.join(","))
    }
}

/// One entry of the server's FSCTL_QUERY_NETWORK_INTERFACE_INFO response (MS-SMB2 2.2.32.5,
/// NETWORK_INTERFACE_INFO), as `smbtorture` decoded it: a reference to compare a client's own
/// decoding with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInterface {
    /// IfIndex: the kernel ifindex inside the server namespace (`lo` is 1).
    pub if_index: u32,
    /// The RSS_CAPABLE bit of Capability.
    pub rss: bool,
    /// LinkSpeed in bits per second.
    pub speed_bps: u64,
    /// The address (IPv4 or IPv6).
    pub addr: IpAddr,
}

/// How to reach the Kerberos side of a testbed started with [`TestbedConfig::kerberos`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosInfo {
    /// The AD realm, `TESTBED.LAN`.
    pub realm: String,
    /// The DC's host name, `dc.testbed.lan`: the SPN is `cifs/<server_host>`. The client
    /// namespace's `/etc/hosts` (as `ip netns exec` shows it) maps it to link 1's server
    /// address; in-process clients connect by address and name the host separately.
    pub server_host: String,
    /// The KDC: port 88 of link 1's server address (every server address answers).
    pub kdc: SocketAddr,
    /// A krb5.conf for MIT/Heimdal tools such as `smbclient --use-kerberos=required`
    /// (`KRB5_CONFIG=<path>`).
    pub krb5_conf: PathBuf,
    /// `fresh` when this `up` provisioned the domain, `cached` when it copied the template.
    pub provisioned: String,
    /// Seconds `up` spent getting the domain's databases in place (provisioning or copying).
    pub provision_seconds: u32,
}

/// The Debian 13 root a [`SambaBuild::Trixie`] testbed runs its Samba from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SambaRoot {
    /// The root on the host (`/var/cache/smbtb/trixie-root` unless `SMBTB_TRIXIE_ROOT` says
    /// otherwise), shared read-only by every such testbed; delete it to have it rebuilt.
    pub path: PathBuf,
    /// Where the run directory appears for programs run from the root (`/smbtb`): see
    /// [`Testbed::path_in_root`].
    pub run_dir_inside: PathBuf,
    /// `fresh` when this testbed's `up` built the root, `cached` when it was there already.
    pub built: String,
    /// Seconds `up` spent on the root: building it (minutes), or waiting for another
    /// testbed that was building it, or nothing.
    pub seconds: u32,
}

/// One veth link between the namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// 1-based link number K.
    pub index: usize,
    /// `10.<id>.K.1`, where smbd listens.
    pub server_addr: Ipv4Addr,
    /// `10.<id>.K.2`, the client end.
    pub client_addr: Ipv4Addr,
    /// Interface name inside the server namespace (`srvK`).
    pub server_if: String,
    /// Interface name inside the client namespace (`cliK`).
    pub client_if: String,
    /// Shaping rate in Mbit/s, `None` when unshaped.
    pub rate_mbit: Option<u32>,
    /// The link speed smbd advertises for this address (bits per second).
    pub speed_bps: u64,
}

/// A running testbed. Dropping it runs `testbed.sh down`.
#[derive(Debug)]
pub struct Testbed {
    script: PathBuf,
    dir: PathBuf,
    id: u32,
    server_ns: String,
    client_ns: String,
    links: Vec<LinkInfo>,
    user: String,
    password: String,
    domain: String,
    signing: Signing,
    shares: Vec<String>,
    conf: PathBuf,
    log: PathBuf,
    smbd_pid: AtomicU32,
    up_took: Duration,
    queues: u32,
    service_addr: Option<Ipv4Addr>,
    /// The specs of the `interfaces` line, as the script last reported them.
    advertised: Mutex<Vec<String>>,
    kerberos: Option<KerberosInfo>,
    samba: SambaBuild,
    samba_version: String,
    samba_root: Option<SambaRoot>,
}

/// Distinguishes run directories of testbeds started by one process.
static RUN_COUNTER: AtomicUsize = AtomicUsize::new(0);

fn script_path() -> PathBuf {
    std::env::var_os("SMBTB_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SCRIPT))
}

/// The `ip` binary: an absolute path when one exists, because a PATH without the sbin
/// directories (sudo, CI runners, IDEs) is common.
fn ip_binary() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("ip")
}

/// True when a network namespace of that name exists (`/run/netns/<name>`).
pub fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// Runs the script and returns its stdout, or an error carrying its stderr.
fn run_script<S: AsRef<OsStr>>(script: &Path, args: &[S]) -> Result<String, String> {
    let output = Command::new("bash")
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        Err(format!(
            "testbed.sh {} failed ({}):\n{}",
            shown.join(" "),
            output.status,
            stderr.trim_end()
        ))
    }
}

/// The state's `interfaces=` value (specs joined with `|`) as a list.
fn split_specs(joined: &str) -> Vec<String> {
    joined
        .split('|')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// (major, minor) of a Samba version string such as `4.22.11-Debian-4.22.11+dfsg-0+deb13u1`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `key=value` lines into a map (other lines are ignored).
fn parse_key_values(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn field<'a>(kv: &'a HashMap<String, String>, key: &str) -> Result<&'a str, String> {
    kv.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("testbed.sh up printed no '{key}='"))
}

fn parsed<T: std::str::FromStr>(kv: &HashMap<String, String>, key: &str) -> Result<T, String> {
    let raw = field(kv, key)?;
    raw.parse()
        .map_err(|_| format!("testbed.sh up printed an unparsable {key}={raw}"))
}

impl Testbed {
    /// Creates the namespaces, links and smbd (see `testbed.sh up`). The run directory is a
    /// fresh `smbtb.<pid>.<n>` under `SMBTB_RUN_BASE` (default: the system temp dir; kept
    /// short because Samba puts unix sockets in it). Stale testbeds of dead processes are
    /// collected first.
    pub fn start(config: TestbedConfig) -> Result<Testbed, String> {
        let script = script_path();
        if !script.is_file() {
            return Err(format!("testbed script not found at {}", script.display()));
        }
        let base = std::env::var_os("SMBTB_RUN_BASE")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("smbtb.{}.{n}", std::process::id()));
        if dir.exists() {
            // Left by an earlier process with the same PID: take it down and start afresh.
            let _ = run_script(
                &script,
                &["down".as_ref(), "--dir".as_ref(), dir.as_os_str()],
            );
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot clear old run dir {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create run dir {}: {e}", dir.display()))?;

        let mut args: Vec<String> = vec![
            "up".into(),
            "--dir".into(),
            dir.to_string_lossy().into_owned(),
            "--links".into(),
            config.links.to_string(),
            "--mtu".into(),
            config.mtu.to_string(),
            "--size".into(),
            config.tmpfs_size.clone(),
            "--signing".into(),
            config.signing.as_arg().into(),
            "--log-level".into(),
            config.log_level.to_string(),
            "--owner".into(),
            std::process::id().to_string(),
            "--queues".into(),
            config.queues.to_string(),
        ];
        if config.service_addr {
            args.push("--service-addr".into());
        }
        if config.kerberos {
            args.push("--kerberos".into());
        }
        if config.samba != SambaBuild::System {
            args.extend(["--samba".into(), config.samba.as_arg().into()]);
        }
        match &config.advertise {
            Advertise::Links => {}
            Advertise::Service => args.extend(["--advertise".into(), "service".into()]),
            Advertise::Both => args.extend(["--advertise".into(), "both".into()]),
            Advertise::Custom(specs) => {
                for spec in specs {
                    args.extend(["--advertise-spec".into(), spec.clone()]);
                }
            }
        }
        match config.rate_arg() {
            Some(rates) => args.extend(["--rate".to_string(), rates]),
            None => args.push("--unshaped".into()),
        }
        let began = Instant::now();
        let stdout = match run_script(&script, &args) {
            Ok(out) => out,
            Err(e) => {
                // `up` undoes its own partial work; the directory only holds logs now.
                return Err(format!("{e}\n(run dir {})", dir.display()));
            }
        };
        let up_took = began.elapsed();
        let kv = parse_key_values(&stdout);
        let built = Self::from_key_values(script.clone(), &kv, config.signing, up_took);
        match built {
            Ok(tb) => Ok(tb),
            Err(e) => {
                // The testbed is up but we cannot describe it: take it down before failing.
                let _ = run_script(
                    &script,
                    &["down".as_ref(), "--dir".as_ref(), dir.as_os_str()],
                );
                Err(e)
            }
        }
    }

    fn from_key_values(
        script: PathBuf,
        kv: &HashMap<String, String>,
        signing: Signing,
        up_took: Duration,
    ) -> Result<Testbed, String> {
        let link_count: usize = parsed(kv, "links")?;
        let mut links = Vec::with_capacity(link_count);
        for k in 1..=link_count {
            let rate: u32 = parsed(kv, &format!("link{k}_rate_mbit"))?;
            links.push(LinkInfo {
                index: k,
                server_addr: parsed(kv, &format!("link{k}_server_addr"))?,
                client_addr: parsed(kv, &format!("link{k}_client_addr"))?,
                server_if: field(kv, &format!("link{k}_server_if"))?.to_string(),
                client_if: field(kv, &format!("link{k}_client_if"))?.to_string(),
                rate_mbit: (rate > 0).then_some(rate),
                speed_bps: parsed(kv, &format!("link{k}_speed_bps"))?,
            });
        }
        Ok(Testbed {
            script,
            dir: PathBuf::from(field(kv, "dir")?),
            id: parsed(kv, "id")?,
            server_ns: field(kv, "server_ns")?.to_string(),
            client_ns: field(kv, "client_ns")?.to_string(),
            links,
            user: field(kv, "user")?.to_string(),
            password: field(kv, "password")?.to_string(),
            domain: field(kv, "domain")?.to_string(),
            signing,
            shares: field(kv, "shares")?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            conf: PathBuf::from(field(kv, "conf")?),
            log: PathBuf::from(field(kv, "log")?),
            smbd_pid: AtomicU32::new(parsed(kv, "smbd_pid")?),
            up_took,
            queues: parsed(kv, "queues")?,
            service_addr: match kv.get("service_addr") {
                None => None,
                Some(_) => Some(parsed(kv, "service_addr")?),
            },
            advertised: Mutex::new(split_specs(field(kv, "interfaces")?)),
            kerberos: match kv.get("kerberos").map(String::as_str) {
                Some("1") => Some(KerberosInfo {
                    realm: field(kv, "realm")?.to_string(),
                    server_host: field(kv, "server_host")?.to_string(),
                    kdc: parsed(kv, "kdc")?,
                    krb5_conf: PathBuf::from(field(kv, "krb5_conf")?),
                    provisioned: field(kv, "ad_provisioned")?.to_string(),
                    provision_seconds: parsed(kv, "ad_provision_seconds")?,
                }),
                _ => None,
            },
            samba: match field(kv, "samba")? {
                "trixie" => SambaBuild::Trixie,
                _ => SambaBuild::System,
            },
            samba_version: field(kv, "samba_version")?.to_string(),
            samba_root: match kv.get("samba_root") {
                None => None,
                Some(path) => Some(SambaRoot {
                    path: PathBuf::from(path),
                    run_dir_inside: PathBuf::from(field(kv, "samba_root_run_dir")?),
                    built: field(kv, "samba_root_built")?.to_string(),
                    seconds: parsed(kv, "samba_root_seconds")?,
                }),
            },
        })
    }

    fn script(&self, args: &[&str]) -> Result<String, String> {
        let dir = self.dir.to_string_lossy();
        let (cmd, rest) = args.split_first().expect("a testbed.sh command");
        let mut full: Vec<&str> = vec![cmd, "--dir", &dir];
        full.extend_from_slice(rest);
        run_script(&self.script, &full)
    }

    // ------------------------------------------------------------------ what was built

    /// The short id; it names the namespaces (`smbtb-<id>-srv`) and subnets (`10.<id>.K.0/24`).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The run directory (config, Samba databases, logs, the share tmpfs under `shares/`).
    pub fn run_dir(&self) -> &Path {
        &self.dir
    }

    /// Name of the server network namespace.
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }

    /// Name of the client network namespace.
    pub fn client_ns(&self) -> &str {
        &self.client_ns
    }

    /// All links, in order (link K is `links()[K - 1]`).
    pub fn links(&self) -> &[LinkInfo] {
        &self.links
    }

    /// Link K (1-based). Panics when there is no such link.
    pub fn link(&self, k: usize) -> &LinkInfo {
        assert!(
            (1..=self.links.len()).contains(&k),
            "link {k} does not exist (the testbed has {})",
            self.links.len()
        );
        &self.links[k - 1]
    }

    /// Server address of link K (1-based).
    pub fn server_addr(&self, k: usize) -> Ipv4Addr {
        self.link(k).server_addr
    }

    /// Client address of link K (1-based).
    pub fn client_addr(&self, k: usize) -> Ipv4Addr {
        self.link(k).client_addr
    }

    /// Every server address, link 1 first.
    pub fn server_addrs(&self) -> Vec<Ipv4Addr> {
        self.links.iter().map(|l| l.server_addr).collect()
    }

    /// Every client address, link 1 first.
    pub fn client_addrs(&self) -> Vec<Ipv4Addr> {
        self.links.iter().map(|l| l.client_addr).collect()
    }

    /// The client namespace's interface of link K, `cliK` (panics when there is no such
    /// link). Read `/sys/class/net/<it>/...` through [`Testbed::exec_client`]: an in-process
    /// thread in the namespace still sees the host's sysfs.
    pub fn client_nic(&self, k: usize) -> String {
        self.link(k).client_if.clone()
    }

    /// Receive/transmit queues of every veth end ([`TestbedConfig::queues`]).
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The service address `10.<id>.200.1` (on the server namespace's `lo`), when the
    /// testbed was built with [`TestbedConfig::service_addr`]. It is reachable over every
    /// link: in the client namespace a socket bound to `10.<id>.K.2` reaches it through `cliK`
    /// (policy routing, table 100+K), an unbound socket through link 1.
    pub fn service_addr(&self) -> Option<Ipv4Addr> {
        self.service_addr
    }

    /// The specs smbd currently advertises (its `interfaces` line), in order.
    pub fn advertised(&self) -> Vec<String> {
        self.advertised
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The test user (a Unix user, `smbtest`, with a per-testbed Samba password).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Give `path` and everything below it to the test user, for files a test made on a
    /// share's disk as root (smbd serves them as that user).
    pub fn give_to_user(&self, path: &Path) {
        let status = std::process::Command::new("chown")
            .args(["-R", &format!("{}:", self.user)])
            .arg(path)
            .status()
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
        assert!(status.success(), "chown -R {}: {status}", path.display());
    }

    /// The test user's credentials, ready for `Client::connect`.
    pub fn credentials(&self) -> smb3_client::UserCredentials {
        smb3_client::UserCredentials {
            user: self.user().to_string(),
            domain: self.domain().to_string(),
            password: self.password().into(),
        }
    }

    /// The test user's password (random per testbed).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The server's workgroup, usable as NTLM domain (`SMBTB`; `TESTBED` in Kerberos mode).
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The signing requirement the server was started with.
    pub fn signing(&self) -> Signing {
        self.signing
    }

    /// Exported shares: `plain`, `encrypted` (`smb encrypt = required`), `signed` (only with
    /// [`Signing::Mandatory`]), `public` (guest allowed), `backup` (streams, ACLs and
    /// snapshots in xattrs) and, with [`SambaBuild::Trixie`], `noposix` (like `plain`, with
    /// `smb3 unix extensions = no`).
    pub fn shares(&self) -> &[String] {
        &self.shares
    }

    /// The directory behind a share, on the host (read it to check what the client wrote).
    pub fn share_path(&self, share: &str) -> PathBuf {
        assert!(
            self.shares.iter().any(|s| s == share),
            "no share [{share}] in this testbed (shares: {:?})",
            self.shares
        );
        self.dir.join("shares").join(share)
    }

    /// `//<server address of link K>/<share>`.
    pub fn unc(&self, k: usize, share: &str) -> String {
        format!("//{}/{share}", self.server_addr(k))
    }

    /// The private smb.conf.
    pub fn smb_conf(&self) -> &Path {
        &self.conf
    }

    /// smbd's log file.
    pub fn log_file(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of smbd's log (empty when unreadable).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// PID of the smbd parent process (changes with [`Testbed::restart`]); in Kerberos mode
    /// the `samba` AD DC process, which runs smbd, the KDC and winbindd.
    pub fn smbd_pid(&self) -> u32 {
        self.smbd_pid.load(Ordering::Relaxed)
    }

    /// The Kerberos side (realm, DC host name, KDC) when started with
    /// [`TestbedConfig::kerberos`]; `None` for the default smbd testbed.
    pub fn kerberos(&self) -> Option<&KerberosInfo> {
        self.kerberos.as_ref()
    }

    /// Which Samba serves this testbed.
    pub fn samba(&self) -> SambaBuild {
        self.samba
    }

    /// The server's Samba version as its `smbd --version` says it, without the word
    /// `Version` (e.g. `4.17.12-Debian`, or `4.22.11-Debian-4.22.11+dfsg-0+deb13u1` from
    /// the trixie root).
    pub fn server_version(&self) -> &str {
        &self.samba_version
    }

    /// The server's Samba version as (major, minor), e.g. `(4, 22)`.
    pub fn server_version_number(&self) -> Option<(u32, u32)> {
        major_minor(&self.samba_version)
    }

    /// The Debian 13 root Samba runs from ([`SambaBuild::Trixie`]); `None` for the system's.
    pub fn samba_root(&self) -> Option<&SambaRoot> {
        self.samba_root.as_ref()
    }

    /// A path under [`Testbed::run_dir`] as programs run from the root see it (the run dir
    /// is bind-mounted at [`SambaRoot::run_dir_inside`] there), e.g. a local file for
    /// `smbclient ... put` through [`Testbed::client_root_command`]. The path itself for a
    /// system-Samba testbed. Panics for a path outside the run directory.
    pub fn path_in_root(&self, path: &Path) -> PathBuf {
        let Some(root) = &self.samba_root else {
            return path.to_path_buf();
        };
        let rest = path.strip_prefix(&self.dir).unwrap_or_else(|_| {
            panic!(
                "{} is not in the run dir {}, which is all the root sees",
                path.display(),
                self.dir.display()
            )
        });
        root.run_dir_inside.join(rest)
    }

    /// How long `testbed.sh up` took.
    pub fn up_took(&self) -> Duration {
        self.up_took
    }

    /// One entry of smb.conf's `interfaces` list, for [`Testbed::set_interfaces`]:
    /// `"10.x.K.1;speed=<bps>,capability=RSS"` (the RSS part only when `rss`).
    pub fn interface_spec(addr: Ipv4Addr, speed_bps: u64, rss: bool) -> String {
        if rss {
            format!("{addr};speed={speed_bps},capability=RSS")
        } else {
            format!("{addr};speed={speed_bps}")
        }
    }

    // ------------------------------------------------------------------ faults

    /// Takes link K down on the server side: packets on it are silently lost (connects time
    /// out, established connections stall) until [`Testbed::link_up`].
    pub fn link_down(&self, k: usize) -> Result<(), String> {
        self.script(&["link-down", &k.to_string()]).map(drop)
    }

    /// Brings link K back up.
    pub fn link_up(&self, k: usize) -> Result<(), String> {
        self.script(&["link-up", &k.to_string()]).map(drop)
    }

    /// Takes link K down (as [`Testbed::link_down`]) until the returned guard brings it up,
    /// by [`LinkDown::up`] or at the latest when dropped: an early return or a failed
    /// assertion then cannot leave the link down for what runs next.
    pub fn take_link_down(&self, k: usize) -> Result<LinkDown<'_>, String> {
        self.link_down(k)?;
        Ok(LinkDown {
            tb: self,
            link: k,
            down: true,
        })
    }

    /// The server's side of link K silently discards everything it sends (requests still
    /// arrive and run; replies vanish) while the link keeps carrier: a silent loss that only
    /// the client's progress watch can find. Undone by [`Testbed::undrop`].
    pub fn drop_link(&self, k: usize) -> Result<(), String> {
        self.script(&["drop", &k.to_string()]).map(drop)
    }

    /// Link K's server side sends again, shaped as before.
    pub fn undrop(&self, k: usize) -> Result<(), String> {
        self.script(&["undrop", &k.to_string()]).map(drop)
    }

    /// Resets established TCP connections to port 445 (all, or only link K's: those to link
    /// K's server address or from its client address, which includes connections to the
    /// service address over link K) from the server side; the client sees a RST. Returns how
    /// many were cut.
    pub fn cut(&self, link: Option<usize>) -> Result<usize, String> {
        let k = link.map(|k| k.to_string());
        let mut args = vec!["cut"];
        if let Some(k) = &k {
            args.push(k);
        }
        let out = self.script(&args)?;
        let kv = parse_key_values(&out);
        parsed(&kv, "cut")
    }

    /// Cuts the client off from the server long enough to change things behind its back:
    /// takes every link down (so the client can neither notice at once nor reconnect), resets
    /// every connection from the server side, waits until smbd has ended the client's
    /// sessions (their durable opens are then disconnected, their durable cookies taken),
    /// runs `meanwhile`, and brings the links up again. Bounded: the wait gives up after 30 s.
    pub fn while_cut_off<T>(&self, meanwhile: impl FnOnce() -> T) -> Result<T, String> {
        // Guards: a link that fails to go down still brings the ones before it back up.
        let downs = (1..=self.links().len())
            .map(|k| self.take_link_down(k))
            .collect::<Result<Vec<_>, _>>()?;
        let result = self.cut(None).and_then(|_| {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match self.session_count()? {
                    0 => return Ok(meanwhile()),
                    n if Instant::now() > deadline => {
                        return Err(format!(
                            "smbd still lists {n} session(s) 30 s after the cut"
                        ))
                    }
                    _ => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        for mut link in downs {
            link.up()?;
        }
        result
    }

    /// Number of sessions smbd lists (`smbstatus -j`).
    pub fn session_count(&self) -> Result<usize, String> {
        let json = self.smbstatus(&["-j"])?;
        let status: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| format!("smbstatus -j: {e}: {json}"))?;
        Ok(status
            .get("sessions")
            .and_then(|s| s.as_object())
            .map_or(0, |s| s.len()))
    }

    /// Stops smbd (and everything else in the server namespace) and starts it again with the
    /// same config; returns the new PID.
    pub fn restart(&self) -> Result<u32, String> {
        let out = self.script(&["restart"])?;
        let pid: u32 = parsed(&parse_key_values(&out), "smbd_pid")?;
        self.smbd_pid.store(pid, Ordering::Relaxed);
        Ok(pid)
    }

    /// Makes smbd re-read its config (`smbcontrol smbd reload-config`, or SIGHUP).
    pub fn reload(&self) -> Result<(), String> {
        self.script(&["reload"]).map(drop)
    }

    /// Rewrites smb.conf's `interfaces` line (see [`Testbed::interface_spec`]) and reloads:
    /// changes what FSCTL_QUERY_NETWORK_INTERFACE_INFO reports to connections made from now
    /// on (checked with smbtorture; connections already open were not checked). No restart
    /// is needed: smbd listens on every address of the server namespace, advertised or not.
    /// Returns once the script has rewritten the config and asked smbd to reload.
    pub fn set_interfaces<S: AsRef<str>>(&self, specs: &[S]) -> Result<(), String> {
        let mut args = vec!["set-interfaces"];
        args.extend(specs.iter().map(AsRef::as_ref));
        let out = self.script(&args)?;
        let kv = parse_key_values(&out);
        let now = split_specs(field(&kv, "interfaces")?);
        *self
            .advertised
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = now;
        Ok(())
    }

    /// Like [`Testbed::set_interfaces`], with the specs of `what` (the speeds and RSS flag
    /// the testbed was built with). [`Advertise::Service`] and [`Advertise::Both`] need a
    /// service address.
    pub fn advertise(&self, what: &Advertise) -> Result<(), String> {
        self.set_interfaces(&what.script_args())
    }

    // ------------------------------------------------------------------ running things

    /// A command that runs `program` inside the client namespace (`ip netns exec`, so it also
    /// sees the namespace's own `/sys/class/net`).
    pub fn client_command<S: AsRef<OsStr>>(&self, program: S) -> Command {
        let mut cmd = Command::new(ip_binary());
        cmd.args(["netns", "exec", &self.client_ns]).arg(program);
        // The tools log to stderr when RUST_LOG is set; tests that check what they print set
        // it themselves, or not at all.
        cmd.env_remove("RUST_LOG");
        cmd
    }

    /// A command that runs `program` inside the server namespace. In a
    /// [`SambaBuild::Trixie`] testbed Samba's own programs (smbstatus, smbcontrol, pdbedit,
    /// testparm, smbclient, ...: the list is `ROOT_PROGRAMS` in testbed.sh) come from the
    /// root, so they match the server (give them paths as [`Testbed::path_in_root`] makes
    /// them); everything else (ip, ss, tc, iperf3) comes from the host as usual.
    pub fn server_command<S: AsRef<OsStr>>(&self, program: S) -> Command {
        if self.samba == SambaBuild::Trixie {
            return self.script_exec(&["--server"], program.as_ref());
        }
        let mut cmd = Command::new(ip_binary());
        cmd.args(["netns", "exec", &self.server_ns]).arg(program);
        cmd
    }

    /// A command that runs `program` from the Debian 13 root inside the client namespace,
    /// e.g. Samba 4.22's `smbclient` (paths of the run dir as [`Testbed::path_in_root`]
    /// gives them). Only for a [`SambaBuild::Trixie`] testbed: otherwise the command fails
    /// with the script's message.
    pub fn client_root_command<S: AsRef<OsStr>>(&self, program: S) -> Command {
        let mut cmd = self.script_exec(&["--root"], program.as_ref());
        cmd.env_remove("RUST_LOG");
        cmd
    }

    /// `testbed.sh exec --dir D FLAGS -- program`: the script picks host or root.
    fn script_exec(&self, flags: &[&str], program: &OsStr) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script)
            .arg("exec")
            .arg("--dir")
            .arg(&self.dir)
            .args(flags)
            .arg("--")
            .arg(program);
        cmd
    }

    /// Runs `argv` in the client namespace and returns its output (stdin is empty). Panics
    /// when the command cannot be started at all (e.g. `argv` is empty) - this is a test
    /// harness; a command that runs and fails is reported through the returned status.
    pub fn exec_client<S: AsRef<OsStr>>(&self, argv: &[S]) -> Output {
        let (program, args) = argv.split_first().expect("exec_client needs a program");
        self.client_command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {:?} in {}: {e}",
                    program.as_ref(),
                    self.client_ns
                )
            })
    }

    /// `smbstatus -s <conf> ARGS` in the server namespace (e.g. `["-j"]` for JSON with each
    /// session's dialect, signing and encryption).
    pub fn smbstatus(&self, args: &[&str]) -> Result<String, String> {
        let mut full = vec!["smbstatus"];
        full.extend_from_slice(args);
        self.script(&full)
    }

    /// Every handle open at the server right now, as `smbstatus -j` lists them: the file's
    /// share-relative name and the lease its open holds (`RWH`, `RH`, ..., empty for none).
    /// Tests use it to prove the client left no handle behind.
    pub fn open_files(&self) -> Result<Vec<OpenAtServer>, String> {
        let json = self.smbstatus(&["-j"])?;
        let status: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| format!("smbstatus -j: {e}: {json}"))?;
        let mut out = Vec::new();
        let Some(files) = status.get("open_files").and_then(|f| f.as_object()) else {
            return Ok(out); // no open file at all: smbstatus leaves the map out or empty
        };
        for file in files.values() {
            let name = file["filename"].as_str().unwrap_or_default().to_string();
            for open in file["opens"]
                .as_object()
                .into_iter()
                .flat_map(|o| o.values())
            {
                let lease = open["lease"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                out.push(OpenAtServer {
                    name: name.clone(),
                    lease,
                });
            }
        }
        Ok(out)
    }

    /// Raw TCP goodput of link K in Mbit/s as iperf3 measures it (`-t seconds`; `reverse`:
    /// server to client). The iperf3 server runs one-off in the server namespace.
    pub fn iperf3_mbit(&self, k: usize, seconds: u32, reverse: bool) -> Result<f64, String> {
        self.iperf3_mbit_via(self.server_addr(k), None, seconds, reverse)
    }

    /// Raw TCP goodput in Mbit/s between any server address (e.g. the service address) and
    /// the client namespace, the client's sockets bound to `from` when given (`iperf3 -B`;
    /// with the service address, `from = client_addr(K)` sends it over link K).
    pub fn iperf3_mbit_via(
        &self,
        server: Ipv4Addr,
        from: Option<Ipv4Addr>,
        seconds: u32,
        reverse: bool,
    ) -> Result<f64, String> {
        let addr = server.to_string();
        let mut server = self
            .server_command("iperf3")
            .args(["-s", "-1", "-B", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start iperf3 server: {e}"))?;
        let result = self.iperf3_client(&addr, from, seconds, reverse);
        // The one-off server ends with the test; never leave it behind.
        reap(&mut server, Duration::from_secs(5));
        result
    }

    /// Waits (at most 5 s) until something listens on TCP `port` in the server namespace, so
    /// a client started next does not race the server it talks to.
    pub fn wait_listening(&self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let ss = self
                .server_command("ss")
                .args(["-ltnH", &format!("sport = :{port}")])
                .output()
                .map_err(|e| format!("cannot run ss: {e}"))?;
            if !ss.stdout.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("nothing listened on port {port} within 5 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn iperf3_client(
        &self,
        addr: &str,
        from: Option<Ipv4Addr>,
        seconds: u32,
        reverse: bool,
    ) -> Result<f64, String> {
        self.wait_listening(5201)?;
        let secs = seconds.to_string();
        let mut cmd = self.client_command("iperf3");
        cmd.args([
            "-c",
            addr,
            "-t",
            &secs,
            "-f",
            "m",
            "--connect-timeout",
            "3000",
        ]);
        if reverse {
            cmd.arg("-R");
        }
        if let Some(from) = from {
            cmd.args(["-B", &from.to_string()]);
        }
        let text = run_iperf3_client(cmd)?;
        parse_iperf3_receiver_mbit(&text)
            .ok_or_else(|| format!("no receiver line in iperf3 output:\n{text}"))
    }

    /// What the server advertises right now, asked over `server` (any address it answers
    /// on) by `smbtorture smb2.ioctl.network_interface_info` run in the client namespace as
    /// the test user, in the server's order (Samba lists the `interfaces` line backwards).
    /// Needs `smbtorture` (Debian package samba-testsuite).
    pub fn smbtorture_interfaces(&self, server: Ipv4Addr) -> Result<Vec<ServerInterface>, String> {
        let unc = format!("//{server}/plain");
        let creds = format!("{}%{}", self.user, self.password);
        let out = self
            .client_command("timeout")
            .args(["60", "smbtorture", &unc, "-U", &creds])
            .args(["smb2.ioctl.network_interface_info", "-d", "10"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run smbtorture: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !text.contains("success: network_interface_info") {
            let hint = if err.contains("No such file") {
                " (apt-get install -y samba-testsuite)"
            } else {
                ""
            };
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            return Err(format!(
                "smbtorture network_interface_info against {server} failed ({}){hint}:\n{}\n{err}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        // The decoded response is debug output: it goes to stderr.
        parse_smbtorture_interfaces(&err)
    }

    // ------------------------------------------------------------------ in-process clients

    /// Path of the client namespace's handle.
    pub fn client_ns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.client_ns)
    }

    /// Moves the calling thread into the client namespace until the guard is dropped; sockets
    /// created meanwhile live there. Only this thread moves. Note that `/sys/class/net` still
    /// shows the host's interfaces (sysfs follows the mount, not the thread).
    pub fn enter_client_netns(&self) -> Result<NetnsGuard, String> {
        let previous = File::open("/proc/thread-self/ns/net")
            .map_err(|e| format!("cannot open this thread's network namespace: {e}"))?;
        let target = File::open(self.client_ns_path())
            .map_err(|e| format!("cannot open {}: {e}", self.client_ns_path().display()))?;
        setns_net(&target).map_err(|e| format!("setns into {}: {e}", self.client_ns))?;
        Ok(NetnsGuard {
            previous,
            _not_send: PhantomData,
        })
    }

    /// A multi-thread tokio runtime whose worker and blocking threads all enter the client
    /// namespace as they start. Run futures with [`client_block_on`] (plain
    /// `Runtime::block_on` polls on the calling thread, which stays where it is). Drop the
    /// runtime before the testbed. Panics when the namespace cannot be entered.
    pub fn client_runtime(&self) -> tokio::runtime::Runtime {
        log_if_asked();
        let path = self.client_ns_path();
        let ns = Arc::new(
            File::open(&path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display())),
        );
        // Fail here, with a message, rather than in a runtime thread.
        let probe = Arc::clone(&ns);
        std::thread::spawn(move || setns_net(&probe))
            .join()
            .expect("setns probe thread")
            .unwrap_or_else(|e| panic!("setns into {}: {e}", path.display()));
        let name = format!("smbtb-{}-cli", self.id);
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name(name)
            .on_thread_start(move || {
                if let Err(e) = setns_net(&ns) {
                    panic!("runtime thread cannot enter the client namespace: {e}");
                }
                // Like `ip netns exec`: a private mount namespace with a sysfs of the client
                // namespace, so /sys/class/net shows cliK (the client reads link speed and
                // RSS queues there), not the host's devices.
                if let Err(e) = private_sysfs() {
                    panic!("runtime thread cannot mount the client namespace's sysfs: {e}");
                }
            })
            .build()
            .expect("build the client tokio runtime")
    }

    /// Run `test` on a [`Testbed::client_runtime`], handing it the first link's server
    /// address (`ADDR:445`) and the test user's credentials; a panic in it fails the caller.
    pub fn run_as_client<F, Fut>(&self, test: F)
    where
        F: FnOnce(String, smb3_client::UserCredentials) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let rt = self.client_runtime();
        let fut = test(format!("{}:445", self.server_addr(1)), self.credentials());
        client_block_on(&rt, fut);
    }
}

/// Deterministic, incompressible test data (xorshift), cheap enough for a GiB: the same
/// `seed` and `len` always give the same bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Runs `fut` on one of `rt`'s worker threads (so inside the client namespace, for a runtime
/// from [`Testbed::client_runtime`]) and waits for its output. A panic in `fut` is re-raised.
pub fn client_block_on<F>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match rt.block_on(rt.spawn(fut)) {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("client task failed: {e}"),
    }
}

/// One handle open at the server (see [`Testbed::open_files`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAtServer {
    /// The file's path relative to its share (`.` for the share's root).
    pub name: String,
    /// The caching its lease grants (`RWH`, `RH`, ...), empty without a lease.
    pub lease: String,
}

/// Move a file's mtime to now behind smbd's back (what a WRITE landing late does to it).
pub fn touch_on_server(path: &Path) {
    let f = File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {} on the server: {e}", path.display()));
    f.set_modified(std::time::SystemTime::now())
        .unwrap_or_else(|e| panic!("set the mtime of {}: {e}", path.display()));
}

/// Delete a file behind smbd's back and create another under the same name holding
/// `contents`, writable by the test user as a file of theirs would be.
pub fn replace_on_server(path: &Path, contents: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::remove_file(path)
        .unwrap_or_else(|e| panic!("remove {} on the server: {e}", path.display()));
    std::fs::write(path, contents)
        .unwrap_or_else(|e| panic!("create {} on the server: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Link K of a testbed taken down by [`Testbed::take_link_down`]; up again when dropped.
pub struct LinkDown<'a> {
    tb: &'a Testbed,
    link: usize,
    down: bool,
}

impl LinkDown<'_> {
    /// Brings the link up now (once; later calls do nothing).
    pub fn up(&mut self) -> Result<(), String> {
        if self.down {
            self.tb.link_up(self.link)?;
            self.down = false;
        }
        Ok(())
    }

    /// Whether the link is still down.
    pub fn is_down(&self) -> bool {
        self.down
    }
}

impl Drop for LinkDown<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.up() {
            eprintln!("testbed: cannot take link {} up again: {e}", self.link);
        }
    }
}

/// Puts the thread back into the namespace it came from when dropped
/// (see [`Testbed::enter_client_netns`]). Not `Send`: it belongs to the thread that moved.
#[derive(Debug)]
pub struct NetnsGuard {
    previous: File,
    _not_send: PhantomData<*const ()>,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns_net(&self.previous) {
            // Staying in a namespace that is about to disappear would break later tests on
            // this thread in confusing ways.
            panic!("cannot return to the original network namespace: {e}");
        }
    }
}

/// setns(2) with CLONE_NEWNET: moves the calling thread into the namespace `ns` refers to.
#[allow(unsafe_code)]
fn setns_net(ns: &File) -> std::io::Result<()> {
    // SAFETY: setns takes a file descriptor, which `ns` keeps open for the whole call, and a
    // flag; it touches no memory of this process, only the calling thread's namespace.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Give the calling thread its own mount namespace (unshare(2) CLONE_NEWNS, which for one
/// thread also unshares its filesystem attributes), stop mount events from propagating back,
/// and mount a fresh sysfs on /sys: it shows the network namespace the thread is in now.
#[allow(unsafe_code)]
fn private_sysfs() -> std::io::Result<()> {
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let root = c"/";
    let sys = c"/sys";
    let sysfs = c"sysfs";
    // SAFETY: unshare takes only flags and affects only the calling thread.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // SAFETY: the pointers are NUL-terminated static strings (or null where mount(2) allows
    // it) that outlive the calls; mount reads them and keeps nothing.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        )
    })?;
    // SAFETY: as above.
    check(unsafe { libc::umount2(sys.as_ptr(), libc::MNT_DETACH) }).or_else(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    // SAFETY: as above.
    check(unsafe {
        libc::mount(
            sysfs.as_ptr(),
            sys.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        )
    })
}

/// The NETWORK_INTERFACE_INFO entries of `smbtorture ... network_interface_info -d 10`
/// output: each starts at an `ifindex` line; `capability`, `linkspeed` and `ipv4`/`ipv6`
/// follow. Numbers are taken from the decimal in parentheses (`0x...(1)`).
fn parse_smbtorture_interfaces(text: &str) -> Result<Vec<ServerInterface>, String> {
    #[derive(Default)]
    struct Partial {
        if_index: Option<u32>,
        rss: Option<bool>,
        speed_bps: Option<u64>,
        addr: Option<IpAddr>,
    }
    fn finish(p: Partial) -> Result<ServerInterface, String> {
        match (p.if_index, p.rss, p.speed_bps, p.addr) {
            (Some(if_index), Some(rss), Some(speed_bps), Some(addr)) => Ok(ServerInterface {
                if_index,
                rss,
                speed_bps,
                addr,
            }),
            _ => Err("smbtorture printed an incomplete interface entry".to_string()),
        }
    }
    fn decimal<T: std::str::FromStr>(value: &str) -> Option<T> {
        let inner = value.rsplit_once('(')?.1.strip_suffix(')')?;
        inner.parse().ok()
    }
    let mut entries = Vec::new();
    let mut current: Option<Partial> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let bad = || format!("smbtorture line not understood: {line:?}");
        match key {
            "ifindex" => {
                if let Some(done) = current.take() {
                    entries.push(finish(done)?);
                }
                current = Some(Partial {
                    if_index: Some(decimal(value).ok_or_else(bad)?),
                    ..Partial::default()
                });
            }
            "capability" | "linkspeed" | "ipv4" | "ipv6" => {
                let Some(p) = current.as_mut() else {
                    continue;
                };
                match key {
                    "capability" => p.rss = Some(decimal::<u32>(value).ok_or_else(bad)? & 1 != 0),
                    "linkspeed" => p.speed_bps = Some(decimal(value).ok_or_else(bad)?),
                    _ => p.addr = Some(value.parse().map_err(|_| bad())?),
                }
            }
            _ => {}
        }
    }
    if let Some(done) = current {
        entries.push(finish(done)?);
    }
    if entries.is_empty() {
        return Err("smbtorture printed no interface entries".to_string());
    }
    Ok(entries)
}

/// The receiver's rate from `iperf3 -f m` text output.
fn parse_iperf3_receiver_mbit(text: &str) -> Option<f64> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_end().ends_with("receiver"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let unit = words.iter().position(|w| *w == "Mbits/sec")?;
    words.get(unit.checked_sub(1)?)?.parse().ok()
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            eprintln!(
                "---- testbed {}: last lines of {} ----\n{}\n----",
                self.id,
                self.log.display(),
                self.log_tail(30)
            );
        }
        match self.script(&["down"]) {
            Ok(_) => {
                let keep = failed || std::env::var_os("SMBTB_KEEP").is_some();
                if keep {
                    eprintln!(
                        "testbed {}: run dir kept at {}",
                        self.id,
                        self.dir.display()
                    );
                } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                    eprintln!(
                        "testbed {}: cannot remove {}: {e}",
                        self.id,
                        self.dir.display()
                    );
                }
            }
            Err(e) => eprintln!("testbed {}: down failed: {e}", self.id),
        }
    }
}

/// Waits up to `within` for `child` to end by itself, else kills it (SIGKILL, by its PID);
/// reaps it either way, so nothing is left behind. Its exit status, or `None` when it had to be
/// killed.
pub fn reap(child: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Run an iperf3 client command to its end; its standard output, or an error with both
/// outputs when it failed.
pub fn run_iperf3_client(mut cmd: Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run iperf3: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "iperf3 client failed ({}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(text)
}

/// Write `data` to file `name` on `share` (created or truncated) and close it. Panics on any
/// error: for tests.
pub async fn write_file(share: &smb3_client::Share, name: &str, data: bytes::Bytes) {
    let f = share
        .open(
            name,
            &smb3_client::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
        .await
        .expect("create");
    f.write_at(0, data).await.expect("write");
    f.close().await.expect("close");
}

/// Write `data` to a new file `name` on `share`, close it, open it again and read it back (a
/// little more than its length, so a file that grew shows). Panics on any error: for tests.
pub async fn write_then_read(
    share: &smb3_client::Share,
    name: &str,
    data: bytes::Bytes,
) -> bytes::Bytes {
    use smb3_client::OpenOptions;
    write_file(share, name, data.clone()).await;
    let f = share
        .open(name, &OpenOptions::new().read(true))
        .await
        .expect("open");
    assert_eq!(f.size_at_open(), data.len() as u64, "{name}: size at open");
    let back = f.read_at(0, data.len() + 1000).await.expect("read");
    f.close().await.expect("close");
    back
}

/// Print the client library's log to stderr when `SMB_TEST_LOG` holds a filter (for example
/// `SMB_TEST_LOG=smb3_client=info`); silent otherwise.
pub fn log_if_asked() {
    let Ok(filter) = std::env::var("SMB_TEST_LOG") else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iperf3_receiver_line() {
        let text = "[ ID] Interval           Transfer     Bitrate         Retr\n\
            [  5]   0.00-3.00   sec  68.4 MBytes   191 Mbits/sec    0             sender\n\
            [  5]   0.00-3.00   sec  68.2 MBytes   190.5 Mbits/sec                  receiver\n\
            \n\
            iperf Done.\n";
        assert_eq!(parse_iperf3_receiver_mbit(text), Some(190.5));
        assert_eq!(parse_iperf3_receiver_mbit("garbage"), None);
    }

    #[test]
    fn rate_argument() {
        assert_eq!(TestbedConfig::unshaped(2).rate_arg(), None);
        assert_eq!(
            TestbedConfig::shaped(3, 200).rate_arg().as_deref(),
            Some("200")
        );
        let mixed = TestbedConfig::per_link(&[Some(100), None, Some(1000)]);
        assert_eq!(mixed.links, 3);
        assert_eq!(mixed.rate_arg().as_deref(), Some("100,0,1000"));
        assert_eq!(TestbedConfig::per_link(&[None, None]).rate_arg(), None);
    }

    #[test]
    fn samba_versions() {
        assert_eq!(
            major_minor("4.22.11-Debian-4.22.11+dfsg-0+deb13u1"),
            Some((4, 22))
        );
        assert_eq!(major_minor("4.17.12-Debian"), Some((4, 17)));
        assert_eq!(major_minor("garbage"), None);
        assert_eq!(SambaBuild::default(), SambaBuild::System);
        assert_eq!(
            TestbedConfig::shaped(2, 100).with_samba_trixie().samba,
            SambaBuild::Trixie
        );
    }

    #[test]
    fn key_values() {
        let kv = parse_key_values("a=1\nnoise\nb=x=y\n");
        assert_eq!(kv.get("a").map(String::as_str), Some("1"));
        assert_eq!(kv.get("b").map(String::as_str), Some("x=y"));
        assert_eq!(kv.len(), 2);
    }

    #[test]
    fn parses_smbtorture_interface_entries() {
        let text = "     &net_iface: struct fsctl_net_iface_info\n\
            \x20       next                     : *\n\
            \x20       ifindex                  : 0x00000003 (3)\n\
            \x20       capability               : 0x00000001 (1)\n\
            \x20              1: FSCTL_NET_IFACE_RSS_CAPABLE\n\
            \x20              0: FSCTL_NET_IFACE_RDMA_CAPABLE\n\
            \x20       reserved                 : 0x00000000 (0)\n\
            \x20       linkspeed                : 0x000000000bebc200 (200000000)\n\
            \x20           family                   : FSCTL_NET_IFACE_AF_INET (2)\n\
            \x20               port                     : 0x0000 (0)\n\
            \x20               ipv4                     : 10.103.2.1\n\
            \x20   next: struct fsctl_net_iface_info\n\
            \x20       ifindex                  : 0x00000001 (1)\n\
            \x20       capability               : 0x00000000 (0)\n\
            \x20       linkspeed                : 0x0000000017d78400 (400000000)\n\
            \x20               ipv4                     : 10.103.200.1\n\
            time: 2026-11-21 21:41:39.920814\n\
            success: network_interface_info\n";
        let got = parse_smbtorture_interfaces(text).expect("parse");
        assert_eq!(
            got,
            vec![
                ServerInterface {
                    if_index: 3,
                    rss: true,
                    speed_bps: 200_000_000,
                    addr: IpAddr::V4(Ipv4Addr::new(10, 103, 2, 1)),
                },
                ServerInterface {
                    if_index: 1,
                    rss: false,
                    speed_bps: 400_000_000,
                    addr: IpAddr::V4(Ipv4Addr::new(10, 103, 200, 1)),
                },
            ]
        );
        assert!(parse_smbtorture_interfaces("success: x\n").is_err());
        assert!(parse_smbtorture_interfaces("ifindex : 0x1 (1)\n").is_err());
    }

    #[test]
    fn advertise_arguments() {
        assert_eq!(Advertise::default(), Advertise::Links);
        assert_eq!(Advertise::Service.script_args(), ["service"]);
        assert_eq!(
            Advertise::Custom(vec!["10.1.1.1;speed=5".into()]).script_args(),
            ["10.1.1.1;speed=5"]
        );
        let kv = split_specs("a;speed=1|b;speed=2,capability=RSS");
        assert_eq!(kv, ["a;speed=1", "b;speed=2,capability=RSS"]);
        assert!(split_specs("").is_empty());
    }

    #[test]
    fn interface_specs() {
        let a = Ipv4Addr::new(10, 100, 1, 1);
        assert_eq!(
            Testbed::interface_spec(a, 1_000_000_000, true),
            "10.100.1.1;speed=1000000000,capability=RSS"
        );
        assert_eq!(Testbed::interface_spec(a, 5, false), "10.100.1.1;speed=5");
    }
}
