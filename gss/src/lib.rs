//! Kerberos through the system's GSS-API, loaded at run time.
//!
//! The library (`libgssapi_krb5.so.2` from MIT krb5 on Linux, `GSS.framework` on macOS, or
//! whatever `SMB3_GSSAPI_LIBRARY` names) is opened with dlopen(3) the first time Kerberos is
//! asked for, so nothing is needed to build this crate, and a host without krb5 only fails
//! when it asks for Kerberos. Going through the system's GSS-API rather than reading caches
//! ourselves is what makes every cache type work (`FILE:`, `DIR:`, `KEYRING:`, `KCM:`, and
//! whatever comes next) and honours the standard environment (`KRB5CCNAME`, `KRB5_CONFIG`,
//! `KRB5_CLIENT_KTNAME`) and `krb5.conf` (realms, KDCs, DNS lookup, `rdns`) exactly as the
//! site's own tools do.
//!
//! The API is the three objects an SMB client needs:
//! - [`Credential`]: the user's tickets, from the default cache, a named cache or a client
//!   keytab ([`CredStore`]), acquired once and shared by every context of a session;
//! - [`Context`]: one SPNEGO/Kerberos exchange with `cifs@host` (one per SESSION_SETUP,
//!   including each channel binding), mutual authentication required;
//! - [`Context::session_key`]: the key SMB derives its signing and encryption keys from.
//!
//! All unsafe code of the workspace's Kerberos support is in this crate; each call's
//! preconditions are written beside it.

mod ffi;

use std::ffi::CString;
use std::fmt;
use std::ptr;
use std::sync::{Arc, OnceLock};

use zeroize::Zeroizing;

use ffi::{BufferDesc, Functions, OidDesc, OidSetDesc, OmUint32};

/// Object identifiers, DER-encoded without tag and length (RFC 2743 3.1).
pub mod oid {
    /// The Kerberos 5 mechanism, 1.2.840.113554.1.2.2 (RFC 1964).
    pub const KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
    /// SPNEGO, 1.3.6.1.5.5.2 (RFC 4178): what SMB2 SESSION_SETUP carries (MS-SMB2 3.2.4.2.3).
    pub const SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
    /// GSS_C_NT_HOSTBASED_SERVICE, 1.2.840.113554.1.2.1.4 (RFC 2743 4.1): `service@host`.
    pub const NT_HOSTBASED_SERVICE: &[u8] =
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04];
    /// GSS_KRB5_NT_PRINCIPAL_NAME, 1.2.840.113554.1.2.2.1 (RFC 1964 2.1.1): `user@REALM`.
    pub const KRB5_NT_PRINCIPAL_NAME: &[u8] =
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01];
    /// GSS_C_INQ_SSPI_SESSION_KEY, 1.2.840.113554.1.2.2.5.5: the context's session key as
    /// Windows' SSPI gives it (the acceptor's subkey when the AP-REP carried one).
    pub const INQ_SSPI_SESSION_KEY: &[u8] = &[
        0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x05, 0x05,
    ];
}

/// `GSS_C_MUTUAL_FLAG`, `GSS_C_REPLAY_FLAG`, `GSS_C_SEQUENCE_FLAG`, `GSS_C_CONF_FLAG`,
/// `GSS_C_INTEG_FLAG` (RFC 2744 3.9).
const MUTUAL: OmUint32 = 2;
const REPLAY: OmUint32 = 4;
const SEQUENCE: OmUint32 = 8;
const CONF: OmUint32 = 16;
const INTEG: OmUint32 = 32;

/// Major status values (RFC 2744 3.9.1).
pub mod major {
    /// GSS_S_BAD_NAME.
    pub const BAD_NAME: u32 = 2 << 16;
    /// GSS_S_BAD_NAMETYPE.
    pub const BAD_NAMETYPE: u32 = 3 << 16;
    /// GSS_S_NO_CRED.
    pub const NO_CRED: u32 = 7 << 16;
    /// GSS_S_DEFECTIVE_TOKEN.
    pub const DEFECTIVE_TOKEN: u32 = 9 << 16;
    /// GSS_S_CREDENTIALS_EXPIRED.
    pub const CREDENTIALS_EXPIRED: u32 = 11 << 16;
    /// GSS_S_FAILURE: the mechanism's minor status says why.
    pub const FAILURE: u32 = 13 << 16;
    /// GSS_S_CONTINUE_NEEDED (a supplementary bit, not an error).
    pub const CONTINUE_NEEDED: u32 = 1;
    /// Routine and calling errors live in the upper 16 bits.
    pub const ERROR_MASK: u32 = 0xffff_0000;
}

/// MIT krb5 minor status codes (`krb5_err.h`, `k5e1_err.h`) the callers tell apart. Heimdal
/// and Apple use other numbers; there only the major status and the message are reliable.
pub mod krb5_minor {
    /// KRB5KDC_ERR_S_PRINCIPAL_UNKNOWN: "Server not found in Kerberos database" (wrong SPN).
    pub const S_PRINCIPAL_UNKNOWN: u32 = 0x96c7_3a07;
    /// KRB5KDC_ERR_C_PRINCIPAL_UNKNOWN: "Client not found in Kerberos database".
    pub const C_PRINCIPAL_UNKNOWN: u32 = 0x96c7_3a06;
    /// KRB5KRB_AP_ERR_TKT_EXPIRED: "Ticket expired".
    pub const TKT_EXPIRED: u32 = 0x96c7_3a20;
    /// KRB5KRB_AP_ERR_SKEW: "Clock skew too great".
    pub const SKEW: u32 = 0x96c7_3a25;
    /// KRB5_FCC_NOFILE: "No credentials cache found".
    pub const FCC_NOFILE: u32 = 0x96c7_3ac3;
    /// KRB5_CC_NOTFOUND: "Matching credential not found".
    pub const CC_NOTFOUND: u32 = 0x96c7_3a8d;
    /// KRB5_KDC_UNREACH: "Cannot contact any KDC for requested realm".
    pub const KDC_UNREACH: u32 = 0x96c7_3a9c;
    /// KRB5_REALM_UNKNOWN: "Cannot find KDC for requested realm".
    pub const REALM_UNKNOWN: u32 = 0x96c7_3a9a;
    /// KRB5_KT_NOTFOUND: "Key table entry not found".
    pub const KT_NOTFOUND: u32 = 0x96c7_3ab5;
    /// KG_EMPTY_CCACHE: "Credential cache is empty" (`k5g_err`).
    pub const KG_EMPTY_CCACHE: u32 = 0x025e_a10c;

    /// Every code above.
    pub const ALL: [u32; 10] = [
        S_PRINCIPAL_UNKNOWN,
        C_PRINCIPAL_UNKNOWN,
        TKT_EXPIRED,
        SKEW,
        FCC_NOFILE,
        CC_NOTFOUND,
        KDC_UNREACH,
        REALM_UNKNOWN,
        KT_NOTFOUND,
        KG_EMPTY_CCACHE,
    ];
}

/// What went wrong, as far as the caller acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No GSS-API library could be loaded (krb5 is not installed).
    LibraryMissing,
    /// The library lacks something asked for (a keytab or cache per credential needs
    /// `gss_acquire_cred_from`).
    Unsupported,
    /// No usable credentials: no cache, an empty one, or a keytab without the principal.
    NoCredentials,
    /// The credentials (the TGT) have expired.
    Expired,
    /// A name could not be imported.
    BadName,
    /// The context completed without mutual authentication.
    NoMutualAuthentication,
    /// The context yielded no usable session key.
    NoSessionKey,
    /// Anything else the mechanism reported; [`Error::minor`] and the message say what.
    Failure,
}

/// A GSS-API error: the call, its status codes and the library's own words for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The GSS-API function that failed (`gss_init_sec_context`), or what was attempted.
    pub call: &'static str,
    /// What it means for the caller.
    pub kind: ErrorKind,
    /// The major status (RFC 2744 3.9.1), 0 when the error is not a status.
    pub major: u32,
    /// The mechanism's minor status as the library returned it. MIT's mechanism glue hands
    /// out a krb5 error code unchanged the first time, but renumbers it (from 100000 up)
    /// once the same code came through another mechanism, which SPNEGO over Kerberos always
    /// does: use [`krb5_code`](Self::krb5_code) to tell codes apart.
    pub minor: u32,
    /// The krb5 error code behind the minor status, when it is one of [`krb5_minor`]'s and
    /// could be recognised (by number, or by MIT's text for it).
    pub krb5_code: Option<u32>,
    /// `gss_display_status` of both, e.g. "No Kerberos credentials available (default
    /// cache: FILE:/tmp/krb5cc_0)".
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn plain(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            call,
            kind,
            major: 0,
            minor: 0,
            krb5_code: None,
            message: message.into(),
        }
    }

    fn status(f: &Functions, call: &'static str, major: u32, minor: u32) -> Error {
        let routine = major & 0x00ff_0000;
        let minor_text = display_status(f, minor, ffi::C_MECH_CODE).join(" ");
        let krb5_code = recognise(f, minor, &minor_text);
        let kind = match routine {
            major::NO_CRED => ErrorKind::NoCredentials,
            major::CREDENTIALS_EXPIRED => ErrorKind::Expired,
            major::BAD_NAME | major::BAD_NAMETYPE => ErrorKind::BadName,
            _ => match krb5_code {
                Some(
                    krb5_minor::FCC_NOFILE | krb5_minor::CC_NOTFOUND | krb5_minor::KG_EMPTY_CCACHE,
                ) => ErrorKind::NoCredentials,
                Some(krb5_minor::TKT_EXPIRED) => ErrorKind::Expired,
                _ => ErrorKind::Failure,
            },
        };
        Error {
            call,
            kind,
            major,
            minor,
            krb5_code,
            message: describe(f, major, minor),
        }
    }
}

/// The krb5 error code of [`krb5_minor`] behind `minor`: itself when it is one, else the
/// one whose com_err text the library's text for `minor` starts with (MIT appends details,
/// "Bad format in credentials cache (filename: ...)"). Both texts come through the same
/// message catalogue, so a translated locale matches too.
fn recognise(f: &Functions, minor: u32, text: &str) -> Option<u32> {
    if krb5_minor::ALL.contains(&minor) {
        return Some(minor);
    }
    let error_message = f.error_message?;
    if text.is_empty() {
        return None;
    }
    krb5_minor::ALL.iter().copied().find(|code| {
        // SAFETY: com_err's error_message returns a static string or a thread-local
        // buffer, valid until the next call on this thread; it is copied at once.
        let known = unsafe { error_message(*code as i32 as std::ffi::c_long) };
        if known.is_null() {
            return false;
        }
        // SAFETY: a NUL-terminated C string (see above).
        let known = unsafe { std::ffi::CStr::from_ptr(known) }.to_string_lossy();
        !known.is_empty() && text.starts_with(known.as_ref())
    })
}

/// `gss_display_status` of the major status and, when there is one, the minor status, as
/// one line.
fn describe(f: &Functions, major: u32, minor: u32) -> String {
    let mut parts = Vec::new();
    if major & major::ERROR_MASK != 0 {
        parts.extend(display_status(f, major, ffi::C_GSS_CODE));
    }
    if minor != 0 {
        // A renumbered minor status of 0 reads "Success": no news.
        parts.extend(
            display_status(f, minor, ffi::C_MECH_CODE)
                .into_iter()
                .filter(|t| t != "Success"),
        );
    }
    // MIT's major text for GSS_S_FAILURE ("Unspecified GSS failure.  Minor code may provide
    // more information") adds nothing once the minor text is there.
    if parts.len() > 1 && major & 0x00ff_0000 == major::FAILURE {
        parts.remove(0);
    }
    if parts.is_empty() {
        format!("major status {major:#x}, minor status {minor:#x}")
    } else {
        parts.join(": ")
    }
}

fn display_status(f: &Functions, code: u32, kind: std::ffi::c_int) -> Vec<String> {
    let krb5 = oid_desc(oid::KRB5);
    let mut out = Vec::new();
    let mut message_context: OmUint32 = 0;
    // A status has one message per "line"; a library that never sets the context back to 0
    // must not loop us forever.
    for _ in 0..8 {
        let mut minor = 0;
        let mut buf = BufferDesc::EMPTY;
        // SAFETY: every pointer is to a live local; the OID points to a static array; the
        // library fills `buf`, released below.
        let major = unsafe {
            (f.display_status)(
                &mut minor,
                code,
                kind,
                &krb5,
                &mut message_context,
                &mut buf,
            )
        };
        if major & major::ERROR_MASK != 0 {
            break;
        }
        let text = take_buffer(f, &mut buf);
        let text = String::from_utf8_lossy(&text).trim().to_string();
        if !text.is_empty() {
            out.push(text);
        }
        if message_context == 0 {
            break;
        }
    }
    out
}

/// Copy a buffer the library allocated, then release it.
fn take_buffer(f: &Functions, buf: &mut BufferDesc) -> Vec<u8> {
    let (length, value) = (buf.length, buf.value);
    let bytes = if value.is_null() || length == 0 {
        Vec::new()
    } else {
        // SAFETY: the library returned `length` readable bytes at `value`.
        unsafe { std::slice::from_raw_parts(value.cast::<u8>(), length) }.to_vec()
    };
    let mut minor = 0;
    // SAFETY: `buf` was filled by the library and is released exactly once.
    unsafe { (f.release_buffer)(&mut minor, buf) };
    bytes
}

fn oid_desc(der: &'static [u8]) -> OidDesc {
    OidDesc {
        length: der.len() as OmUint32,
        // The library only reads OIDs passed in; the cast to *mut is C's const-blindness.
        elements: der.as_ptr().cast_mut().cast(),
    }
}

static LIBRARY: OnceLock<Result<Functions, String>> = OnceLock::new();

/// The environment variable that names the GSS-API library to load instead of the
/// platform's (e.g. Heimdal's `libgssapi.so.3`).
pub const LIBRARY_ENV: &str = "SMB3_GSSAPI_LIBRARY";

fn functions() -> Result<&'static Functions, Error> {
    let loaded = LIBRARY.get_or_init(|| {
        let chosen = std::env::var(LIBRARY_ENV).ok().filter(|s| !s.is_empty());
        let candidates: Vec<String> = match chosen {
            Some(path) => vec![path],
            None => ffi::CANDIDATES.iter().map(|s| s.to_string()).collect(),
        };
        let mut tried = Vec::new();
        for path in &candidates {
            match Functions::load(path) {
                Ok(f) => return Ok(f),
                Err(e) => tried.push(e),
            }
        }
        Err(tried.join("; "))
    });
    loaded.as_ref().map_err(|why| {
        Error::plain(
            "loading the GSS-API library",
            ErrorKind::LibraryMissing,
            format!(
                "{why} (install MIT Kerberos: libgssapi-krb5-2 on Debian/Ubuntu, krb5-libs on \
                 Fedora/RHEL; or set {LIBRARY_ENV})"
            ),
        )
    })
}

/// Where the GSS-API library was loaded from, loading it if need be.
pub fn library_path() -> Result<&'static str, Error> {
    functions().map(|f| f.path.as_str())
}

/// An imported GSS name, released on drop.
struct Name {
    raw: ffi::Name,
    f: &'static Functions,
}

impl Name {
    fn import(f: &'static Functions, text: &str, kind: &'static [u8]) -> Result<Name, Error> {
        let buf = BufferDesc::borrowing(text.as_bytes());
        let name_type = oid_desc(kind);
        let mut raw: ffi::Name = ptr::null_mut();
        let mut minor = 0;
        // SAFETY: `buf` points into `text`, alive for the call; the library copies it.
        let major = unsafe { (f.import_name)(&mut minor, &buf, &name_type, &mut raw) };
        if major & major::ERROR_MASK != 0 {
            return Err(Error::status(f, "gss_import_name", major, minor));
        }
        Ok(Name { raw, f })
    }

    fn display(&self) -> Result<String, Error> {
        let mut buf = BufferDesc::EMPTY;
        let mut minor = 0;
        let mut name_type: *const OidDesc = ptr::null();
        // SAFETY: `self.raw` is a live name; `buf` is released by take_buffer.
        let major =
            unsafe { (self.f.display_name)(&mut minor, self.raw, &mut buf, &mut name_type) };
        if major & major::ERROR_MASK != 0 {
            return Err(Error::status(self.f, "gss_display_name", major, minor));
        }
        Ok(String::from_utf8_lossy(&take_buffer(self.f, &mut buf)).into_owned())
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: the name came from gss_import_name/gss_inquire_cred and is released once.
        unsafe { (self.f.release_name)(&mut minor, &mut self.raw) };
    }
}

/// Where credentials come from. All `None`: the process's defaults (`KRB5CCNAME` or
/// krb5.conf's `default_ccache_name`, and `KRB5_CLIENT_KTNAME` when the cache holds nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredStore {
    /// A credential cache (`FILE:/tmp/krb5cc_1000`, `DIR:/run/user/1000/krb5cc`,
    /// `KEYRING:persistent:1000`, `KCM:1000`).
    pub ccache: Option<String>,
    /// A client keytab to get tickets from. Tickets obtained are kept in a private in-memory
    /// cache of this process (`MEMORY:`) unless [`ccache`](Self::ccache) names one.
    pub client_keytab: Option<String>,
    /// The client principal (`alice@CORP.EXAMPLE`); `None`: the cache's default principal,
    /// or the keytab's first entry.
    pub principal: Option<String>,
}

impl CredStore {
    /// The MIT credential store (`gss_acquire_cred_from`) entries for this store.
    fn entries(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(kt) = &self.client_keytab {
            v.push(("client_keytab", kt.clone()));
            // Tickets from a keytab go to a cache private to this process, one per keytab
            // and principal, so that clients of one process share them and nothing is
            // written to the user's cache or to disk.
            let ccache = self.ccache.clone().unwrap_or_else(|| {
                format!(
                    "MEMORY:smb3-gss-{}-{:016x}",
                    std::process::id(),
                    fnv1a(format!("{kt}\0{}", self.principal.as_deref().unwrap_or("")).as_bytes())
                )
            });
            v.push(("ccache", ccache));
        } else if let Some(cc) = &self.ccache {
            v.push(("ccache", cc.clone()));
        }
        v
    }
}

/// A small stable hash for cache names (not for security: the name is private anyway).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Who the credentials are for and how long they last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialInfo {
    /// The client principal, `alice@CORP.EXAMPLE`.
    pub principal: String,
    /// Seconds the credentials remain valid; `None` for "indefinite" (a keytab can always
    /// get new tickets).
    pub lifetime: Option<u32>,
}

/// Initiator credentials for SPNEGO with Kerberos only, released on drop. Cheap to share
/// (`Arc`): every context of a session, one per channel binding, uses the same credentials,
/// so a keytab's TGT is fetched once.
pub struct Credential {
    raw: ffi::Cred,
    f: &'static Functions,
    store: CredStore,
}

// SAFETY: GSS-API credential handles may be used from any thread; MIT and Heimdal lock
// inside the credential for the few operations that change it (getting a TGT from a keytab).
unsafe impl Send for Credential {}
// SAFETY: as above; the handle itself is never changed after acquisition.
unsafe impl Sync for Credential {}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// Acquire initiator credentials from `store`. Fails with [`ErrorKind::NoCredentials`]
    /// or [`ErrorKind::Expired`] when the cache has no valid ticket and no keytab can get
    /// one; the message names the cache.
    pub fn acquire(store: &CredStore) -> Result<Credential, Error> {
        let f = functions()?;
        let principal = match &store.principal {
            Some(p) => Some(Name::import(f, p, oid::KRB5_NT_PRINCIPAL_NAME)?),
            None => None,
        };
        let desired_name = principal.as_ref().map_or(ptr::null_mut(), |n| n.raw);
        let entries = store.entries();
        // First for Kerberos alone: when the cache holds no ticket, MIT's Kerberos mechanism
        // says so and names the cache ("No Kerberos credentials available (default cache:
        // FILE:/tmp/krb5cc_0)"), where SPNEGO would only say it found no mechanism.
        let probe = acquire_raw(f, desired_name, oid::KRB5, &entries)?;
        drop(Credential {
            raw: probe,
            f,
            store: store.clone(),
        });
        // Then for SPNEGO, which is what the contexts use: MIT's SPNEGO only uses a
        // credential given to gss_init_sec_context if it holds a SPNEGO element; a
        // Kerberos-only one would be replaced by the process's default credentials, ignoring
        // the chosen cache or keytab.
        let raw = acquire_raw(f, desired_name, oid::SPNEGO, &entries)?;
        let cred = Credential {
            raw,
            f,
            store: store.clone(),
        };
        // SPNEGO may offer only Kerberos: no NTLM (gss-ntlmssp), no IAKERB, no NegoEx
        // mechanisms a site may have installed. Without gss_set_neg_mechs (old Apple GSS)
        // SPNEGO offers what the credential holds, which is Kerberos for a ticket cache.
        if let Some(set_neg_mechs) = f.set_neg_mechs {
            let mut krb5 = oid_desc(oid::KRB5);
            let only_krb5 = OidSetDesc {
                count: 1,
                elements: &mut krb5,
            };
            let mut minor = 0;
            // SAFETY: `cred.raw` is live; the OID set points to locals alive for the call.
            let major = unsafe { set_neg_mechs(&mut minor, cred.raw, &only_krb5) };
            if major & major::ERROR_MASK != 0 {
                return Err(Error::status(f, "gss_set_neg_mechs", major, minor));
            }
        }
        Ok(cred)
    }

    /// The store the credential was acquired from.
    pub fn store(&self) -> &CredStore {
        &self.store
    }

    /// The principal and the remaining lifetime. For a cache MIT checks the TGT here, so an
    /// expired one is [`ErrorKind::Expired`].
    pub fn info(&self) -> Result<CredentialInfo, Error> {
        let mut name: ffi::Name = ptr::null_mut();
        let mut lifetime: OmUint32 = 0;
        let mut usage = 0;
        let mut mechs: *mut OidSetDesc = ptr::null_mut();
        let mut minor = 0;
        // SAFETY: the credential is live; the name and mechanism set returned are released
        // below.
        let major = unsafe {
            (self.f.inquire_cred)(
                &mut minor,
                self.raw,
                &mut name,
                &mut lifetime,
                &mut usage,
                &mut mechs,
            )
        };
        if !mechs.is_null() {
            let mut minor = 0;
            // SAFETY: the set was allocated by the library for us.
            unsafe { (self.f.release_oid_set)(&mut minor, &mut mechs) };
        }
        if major & major::ERROR_MASK != 0 {
            return Err(Error::status(self.f, "gss_inquire_cred", major, minor));
        }
        let name = Name {
            raw: name,
            f: self.f,
        };
        let principal = if name.raw.is_null() {
            String::new()
        } else {
            name.display()?
        };
        Ok(CredentialInfo {
            principal,
            lifetime: (lifetime != ffi::C_INDEFINITE).then_some(lifetime),
        })
    }
}

/// gss_acquire_cred (no store) or gss_acquire_cred_from for initiating with `mech`.
fn acquire_raw(
    f: &'static Functions,
    desired_name: ffi::Name,
    mech: &'static [u8],
    entries: &[(&'static str, String)],
) -> Result<ffi::Cred, Error> {
    let mut mech = oid_desc(mech);
    let mechs = OidSetDesc {
        count: 1,
        elements: &mut mech,
    };
    let mut raw: ffi::Cred = ptr::null_mut();
    let mut minor = 0;
    let major = if entries.is_empty() {
        // SAFETY: the name (or null), the OID set and the out pointers are live locals.
        unsafe {
            (f.acquire_cred)(
                &mut minor,
                desired_name,
                ffi::C_INDEFINITE,
                &mechs,
                ffi::C_INITIATE,
                &mut raw,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        }
    } else {
        let Some(acquire_from) = f.acquire_cred_from else {
            return Err(Error::plain(
                "gss_acquire_cred_from",
                ErrorKind::Unsupported,
                format!(
                    "{} cannot take a cache or keytab per connection (use KRB5CCNAME or \
                     KRB5_CLIENT_KTNAME instead)",
                    f.path
                ),
            ));
        };
        let c_strings: Vec<(CString, CString)> = entries
            .iter()
            .map(|(k, v)| {
                let value = CString::new(v.as_str()).map_err(|_| {
                    Error::plain(
                        "gss_acquire_cred_from",
                        ErrorKind::BadName,
                        format!("{k} contains a NUL byte"),
                    )
                })?;
                Ok((CString::new(*k).expect("static key"), value))
            })
            .collect::<Result<_, Error>>()?;
        let mut elements: Vec<ffi::KeyValueElement> = c_strings
            .iter()
            .map(|(k, v)| ffi::KeyValueElement {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let set = ffi::KeyValueSet {
            count: elements.len() as OmUint32,
            elements: elements.as_mut_ptr(),
        };
        // SAFETY: the key/value strings live in `c_strings` and `elements` until after the
        // call; the library copies what it keeps.
        unsafe {
            acquire_from(
                &mut minor,
                desired_name,
                ffi::C_INDEFINITE,
                &mechs,
                ffi::C_INITIATE,
                &set,
                &mut raw,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        }
    };
    if major & major::ERROR_MASK != 0 {
        let call = if entries.is_empty() {
            "gss_acquire_cred"
        } else {
            "gss_acquire_cred_from"
        };
        return Err(Error::status(f, call, major, minor));
    }
    Ok(raw)
}

impl Drop for Credential {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: acquired by gss_acquire_cred(_from), released once.
        unsafe { (self.f.release_cred)(&mut minor, &mut self.raw) };
    }
}

/// One SPNEGO exchange with Kerberos as the only mechanism, mutual authentication required.
pub struct Context {
    raw: ffi::Ctx,
    f: &'static Functions,
    cred: Arc<Credential>,
    target: Name,
    complete: bool,
    rounds: u32,
    /// Seconds the service ticket is asked to last (`time_req`); 0: the library's default,
    /// as long as the ticket-granting ticket.
    lifetime: u32,
}

// SAFETY: a context handle may move between threads; it is used by one at a time (&mut).
unsafe impl Send for Context {}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("complete", &self.complete)
            .field("rounds", &self.rounds)
            .finish_non_exhaustive()
    }
}

/// Rounds no SPNEGO/Kerberos exchange needs more of (it needs two).
const MAX_ROUNDS: u32 = 8;

impl Context {
    /// A context for the host-based service `service@host` (`cifs@nas.corp.example`), which
    /// the library turns into the principal `service/host@REALM` by krb5.conf's rules.
    pub fn new(cred: Arc<Credential>, service: &str, host: &str) -> Result<Context, Error> {
        let f = cred.f;
        let target = Name::import(f, &format!("{service}@{host}"), oid::NT_HOSTBASED_SERVICE)?;
        Ok(Context {
            raw: ptr::null_mut(),
            f,
            cred,
            target,
            complete: false,
            rounds: 0,
            lifetime: 0,
        })
    }

    /// Ask for a service ticket that lasts at most `secs` seconds (RFC 2744 `time_req`; MIT
    /// puts it in the TGS request's end time): the server ends the session's authority when
    /// that ticket ends.
    pub fn with_lifetime(mut self, secs: u32) -> Context {
        self.lifetime = secs;
        self
    }

    /// Feed the server's token (none on the first call) and return the token to send, if
    /// any. The server's tokens are untrusted: the library parses and verifies them.
    pub fn step(&mut self, input: Option<&[u8]>) -> Result<Option<Vec<u8>>, Error> {
        if self.complete {
            return Ok(None);
        }
        self.rounds += 1;
        if self.rounds > MAX_ROUNDS {
            return Err(Error::plain(
                "gss_init_sec_context",
                ErrorKind::Failure,
                format!("more than {MAX_ROUNDS} rounds"),
            ));
        }
        let spnego = oid_desc(oid::SPNEGO);
        let input_desc = input.map(BufferDesc::borrowing);
        let input_ptr = input_desc
            .as_ref()
            .map_or(ptr::null(), |d| d as *const BufferDesc);
        let mut output = BufferDesc::EMPTY;
        let mut ret_flags: OmUint32 = 0;
        let mut minor = 0;
        // SAFETY: credential, name and context are live (the context starts null, and the
        // library creates it on the first call); the input token borrows the caller's slice
        // for the call only; the output buffer is released by take_buffer.
        let major = unsafe {
            (self.f.init_sec_context)(
                &mut minor,
                self.cred.raw,
                &mut self.raw,
                self.target.raw,
                &spnego,
                MUTUAL | REPLAY | SEQUENCE | CONF | INTEG,
                self.lifetime,
                ptr::null(),
                input_ptr,
                ptr::null_mut(),
                &mut output,
                &mut ret_flags,
                ptr::null_mut(),
            )
        };
        let token = take_buffer(self.f, &mut output);
        if major & major::ERROR_MASK != 0 {
            return Err(Error::status(self.f, "gss_init_sec_context", major, minor));
        }
        if major & major::CONTINUE_NEEDED == 0 {
            // Mutual authentication (RFC 4120 3.2.4): the server proved it holds the
            // service key. A library that completed without it must not be trusted with the
            // session.
            if ret_flags & MUTUAL == 0 {
                return Err(Error::plain(
                    "gss_init_sec_context",
                    ErrorKind::NoMutualAuthentication,
                    "the context completed without mutual authentication",
                ));
            }
            self.complete = true;
        }
        Ok((!token.is_empty()).then_some(token))
    }

    /// Whether the exchange is complete on the client side (mutual authentication done).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The session key (GSS_C_INQ_SSPI_SESSION_KEY), wiped on drop. Only once complete.
    pub fn session_key(&self) -> Result<Zeroizing<Vec<u8>>, Error> {
        if !self.complete {
            return Err(Error::plain(
                "gss_inquire_sec_context_by_oid",
                ErrorKind::NoSessionKey,
                "the context is not complete",
            ));
        }
        let wanted = oid_desc(oid::INQ_SSPI_SESSION_KEY);
        let mut set: *mut ffi::BufferSetDesc = ptr::null_mut();
        let mut minor = 0;
        // SAFETY: the context is live and complete; the set is released below.
        let major =
            unsafe { (self.f.inquire_sec_context_by_oid)(&mut minor, self.raw, &wanted, &mut set) };
        if major & major::ERROR_MASK != 0 {
            return Err(Error::status(
                self.f,
                "gss_inquire_sec_context_by_oid",
                major,
                minor,
            ));
        }
        let key = if set.is_null() {
            None
        } else {
            // SAFETY: the library returned a set of `count` buffers.
            let s = unsafe { &*set };
            if s.count == 0 || s.elements.is_null() {
                None
            } else {
                // SAFETY: element 0 exists (count >= 1); it is the key (element 1, when
                // present, the enctype OID).
                let b = unsafe { *s.elements };
                let (length, value) = (b.length, b.value);
                (!value.is_null()).then(|| {
                    // SAFETY: `length` readable bytes at `value`, owned by the set.
                    Zeroizing::new(
                        unsafe { std::slice::from_raw_parts(value.cast::<u8>(), length) }.to_vec(),
                    )
                })
            }
        };
        if !set.is_null() {
            let mut minor = 0;
            // SAFETY: allocated by the library for us, released once.
            unsafe { (self.f.release_buffer_set)(&mut minor, &mut set) };
        }
        // Kerberos keys are 16 (AES128, RC4) or 32 (AES256) bytes; anything else is not a
        // key SMB can derive from.
        match key {
            Some(k) if (16..=64).contains(&k.len()) => Ok(k),
            other => Err(Error::plain(
                "gss_inquire_sec_context_by_oid",
                ErrorKind::NoSessionKey,
                format!(
                    "no session key (got {} bytes)",
                    other.map_or(0, |k| k.len())
                ),
            )),
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let mut minor = 0;
            // SAFETY: created by gss_init_sec_context, deleted once.
            unsafe { (self.f.delete_sec_context)(&mut minor, &mut self.raw, ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests;
