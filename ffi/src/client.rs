//! Connecting: the client and share handles.

use std::ffi::{c_char, c_int};
use std::sync::Arc;
use std::time::Duration;

use ::smb3_client::location::Location;
use ::smb3_client::{Auth, Client, ClientConfig, Dispatch, Share, UserCredentials};

use crate::error::{bad_arg, guard, guard_value, guard_void, FfiResult};
use crate::ptr::{c_string, handle, opt_str_arg, out_arg, put, str_arg};
use crate::runtime::Ctx;
use crate::types::*;

/// A connected session with a server, and the runtime its I/O runs on. Thread-safe: any
/// thread may use it, several at once. Free with `smb3_client_free` (shares and files made
/// from it stay usable until they are freed too).
#[derive(Debug)]
pub struct smb3_client {
    pub(crate) inner: Client,
    pub(crate) io_size: u32,
    pub(crate) ctx: Arc<Ctx>,
}

/// A connected share (a tree). Thread-safe. Free with `smb3_share_free`.
#[derive(Debug)]
pub struct smb3_share {
    pub(crate) inner: Share,
    /// Bytes per READ/WRITE a copy asks for at once.
    pub(crate) io_size: u32,
    pub(crate) ctx: Arc<Ctx>,
}

/// Fill `options` with the defaults: multichannel on with the Windows limits, NTLMv2, no
/// encryption beyond what shares require. Strings are left NULL (set user and password, or
/// leave the password NULL for Kerberos from a ticket cache or keytab). Returns `SMB3_ERR_INVALID_ARGUMENT` when `options` is NULL.
///
/// # Safety
/// `options` is NULL (reported) or valid for a write of an `smb3_connect_options`.
#[no_mangle]
pub unsafe extern "C" fn smb3_connect_options_init(options: *mut smb3_connect_options) -> c_int {
    guard(|| {
        out_arg(options, "options")?;
        let d = ClientConfig::default();
        let value = smb3_connect_options {
            user: std::ptr::null(),
            domain: std::ptr::null(),
            password: std::ptr::null(),
            multichannel: d.multichannel,
            max_channels: 0,
            channels_per_rss_nic: 0,
            channels_per_nic: 0,
            io_size: 0,
            dispatch: SMB3_DISPATCH_DEFAULT,
            encrypt: d.encrypt,
            connect_timeout_ms: 0,
            kerberos_realm: std::ptr::null(),
            kerberos_kdc: std::ptr::null(),
            kerberos_service_host: std::ptr::null(),
            ntlm_fallback: d.ntlm_fallback,
            auth: SMB3_AUTH_AUTO,
            kerberos_ccache: std::ptr::null(),
            kerberos_keytab: std::ptr::null(),
            kerberos_principal: std::ptr::null(),
        };
        // SAFETY: checked not NULL; the caller gives room for one smb3_connect_options.
        unsafe { put(options, value) };
        Ok(())
    })
}

/// The library's settings and credentials from the C options; `url_user`/`url_domain`
/// (from an smb:// URL) stand in for what the options leave NULL.
///
/// # Safety
/// The option's strings are NULL or valid NUL-terminated strings.
unsafe fn settings(
    o: &smb3_connect_options,
    url_user: Option<&str>,
    url_domain: Option<&str>,
) -> FfiResult<(ClientConfig, UserCredentials, u32)> {
    // SAFETY: the strings are NULL or valid by the caller's contract.
    let user = unsafe { opt_str_arg(o.user, "options.user") }?.or(url_user);
    // SAFETY: as above.
    let domain = unsafe { opt_str_arg(o.domain, "options.domain") }?.or(url_domain);
    // SAFETY: as above.
    let password = unsafe { opt_str_arg(o.password, "options.password") }?;
    let user = user.unwrap_or_default();
    if password.is_some() && user.is_empty() {
        return bad_arg("options.user is NULL or empty (and the URL names no user)");
    }
    // No password: Kerberos from the ticket cache or a keytab (the library's rule).
    let password = password.unwrap_or_default();
    let mut config = ClientConfig::default();
    config.multichannel = o.multichannel;
    if o.max_channels > 0 {
        config.max_channels = o.max_channels as usize;
    }
    if o.channels_per_rss_nic > 0 {
        config.channels_per_rss_nic = o.channels_per_rss_nic as usize;
    }
    if o.channels_per_nic > 0 {
        config.channels_per_nic = o.channels_per_nic as usize;
    }
    if o.io_size > 0 {
        if !(4096..=8 << 20).contains(&o.io_size) {
            return bad_arg(format!(
                "options.io_size {} is not between 4096 and 8388608",
                o.io_size
            ));
        }
        config.io_size = o.io_size;
    }
    config.dispatch = match o.dispatch {
        SMB3_DISPATCH_DEFAULT => config.dispatch,
        SMB3_DISPATCH_ROUND_ROBIN => Dispatch::RoundRobin,
        SMB3_DISPATCH_LEAST_LOADED => Dispatch::LeastLoaded,
        other => {
            return bad_arg(format!(
                "options.dispatch {other} is not an SMB3_DISPATCH_*"
            ))
        }
    };
    config.encrypt = o.encrypt;
    if o.connect_timeout_ms > 0 {
        config.connect_timeout = Duration::from_millis(u64::from(o.connect_timeout_ms));
    }
    config.kerberos_realm =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_realm, "options.kerberos_realm") }?.map(String::from);
    config.kerberos_kdc =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_kdc, "options.kerberos_kdc") }?.map(String::from);
    config.kerberos_service_host =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_service_host, "options.kerberos_service_host") }?
            .map(String::from);
    config.ntlm_fallback = o.ntlm_fallback;
    config.auth = match o.auth {
        SMB3_AUTH_AUTO => Auth::Auto,
        SMB3_AUTH_KERBEROS => Auth::Kerberos,
        SMB3_AUTH_NTLM => Auth::Ntlm,
        other => return bad_arg(format!("options.auth {other} is not an SMB3_AUTH_*")),
    };
    config.kerberos_ccache =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_ccache, "options.kerberos_ccache") }?.map(String::from);
    config.kerberos_keytab =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_keytab, "options.kerberos_keytab") }?.map(Into::into);
    config.kerberos_principal =
        // SAFETY: as above.
        unsafe { opt_str_arg(o.kerberos_principal, "options.kerberos_principal") }?
            .map(String::from);
    let io_size = config.io_size;
    let creds = UserCredentials {
        user: user.to_string(),
        domain: domain.unwrap_or_default().to_string(),
        password: password.into(),
    };
    Ok((config, creds, io_size))
}

fn connect_to(
    server: String,
    config: ClientConfig,
    creds: UserCredentials,
    io_size: u32,
) -> FfiResult<smb3_client> {
    let ctx = Ctx::new()?;
    let inner = ctx.call(async move { Client::connect(&server, &creds, config).await })?;
    Ok(smb3_client {
        inner,
        io_size,
        ctx,
    })
}

/// Connect to `server` (`host`, `host:port`, `[v6addr]:port`; port 445 by default), set up
/// the session (NTLMv2, or Kerberos when `options->kerberos_realm` is set) and start binding
/// extra channels in the background (the client is usable at once). `options` is required
/// (it holds the credentials). On success `*out` is a new client, freed
/// with `smb3_client_free`; on failure `*out` is untouched.
///
/// # Safety
/// `server` is a NUL-terminated string; `options` points to an initialised
/// `smb3_connect_options`; `out` is valid for a write. NULLs are reported, not followed.
#[no_mangle]
pub unsafe extern "C" fn smb3_connect(
    server: *const c_char,
    options: *const smb3_connect_options,
    out: *mut *mut smb3_client,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked inside; valid by the caller's contract otherwise.
        let server = unsafe { str_arg(server, "server") }?.to_string();
        // SAFETY: as above.
        let options = unsafe { handle(options, "options") }?;
        out_arg(out, "out")?;
        // SAFETY: the options' strings are NULL or valid by the caller's contract.
        let (config, creds, io_size) = unsafe { settings(options, None, None) }?;
        let client = connect_to(server, config, creds, io_size)?;
        // SAFETY: checked not NULL; valid for a write by the caller's contract.
        unsafe { put(out, Box::into_raw(Box::new(client))) };
        Ok(())
    })
}

/// Connect to the server of an URL (`smb://[DOMAIN;]USER@HOST[:PORT]/SHARE[/PATH]`, or
/// `//HOST/SHARE/PATH`) and connect its share. The URL's user and domain are used where
/// `options` leaves them NULL; a password in the URL is refused. On success `*client_out`
/// and `*share_out` are new handles (free each), and `*path_out`, when `path_out` is not
/// NULL, the share-relative path the URL names ("" for the share's root), a string freed
/// with `smb3_string_free`.
///
/// # Safety
/// `url` is a NUL-terminated string, `options` an initialised `smb3_connect_options`, the
/// out-pointers valid for writes (`path_out` may be NULL).
#[no_mangle]
pub unsafe extern "C" fn smb3_connect_url(
    url: *const c_char,
    options: *const smb3_connect_options,
    client_out: *mut *mut smb3_client,
    share_out: *mut *mut smb3_share,
    path_out: *mut *mut c_char,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked inside; valid by the caller's contract otherwise.
        let url = unsafe { str_arg(url, "url") }?;
        // SAFETY: as above.
        let options = unsafe { handle(options, "options") }?;
        out_arg(client_out, "client_out")?;
        out_arg(share_out, "share_out")?;
        let remote = match Location::parse(url) {
            Ok(Location::Remote(r)) => r,
            Ok(Location::Local(_)) => {
                return bad_arg(format!("{url}: not an smb:// URL or //HOST/SHARE path"))
            }
            Err(e) => return bad_arg(e.to_string()),
        };
        // SAFETY: the options' strings are NULL or valid by the caller's contract.
        let (config, creds, io_size) =
            unsafe { settings(options, remote.user.as_deref(), remote.domain.as_deref()) }?;
        let client = connect_to(remote.server(), config, creds, io_size)?;
        let share = share_of(&client, remote.share.clone())?;
        // SAFETY: (all three) checked not NULL (path_out just below); valid for writes by
        // the caller's contract.
        unsafe {
            put(client_out, Box::into_raw(Box::new(client)));
            put(share_out, Box::into_raw(Box::new(share)));
        }
        if !path_out.is_null() {
            // SAFETY: not NULL; valid for a write by the caller's contract.
            unsafe { put(path_out, c_string(&remote.path)) };
        }
        Ok(())
    })
}

fn share_of(client: &smb3_client, name: String) -> FfiResult<smb3_share> {
    let c = client.inner.clone();
    let inner = client.ctx.call(async move { c.share(&name).await })?;
    Ok(smb3_share {
        inner,
        io_size: client.io_size,
        ctx: client.ctx.clone(),
    })
}

/// Connect the share `name` (TREE_CONNECT). On success `*out` is a new share handle, freed
/// with `smb3_share_free`.
///
/// # Safety
/// `client` is a live client handle, `name` a NUL-terminated string, `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn smb3_client_share(
    client: *const smb3_client,
    name: *const c_char,
    out: *mut *mut smb3_share,
) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        // SAFETY: as above.
        let name = unsafe { str_arg(name, "name") }?.to_string();
        out_arg(out, "out")?;
        let share = share_of(client, name)?;
        // SAFETY: checked not NULL; valid for a write.
        unsafe { put(out, Box::into_raw(Box::new(share))) };
        Ok(())
    })
}

/// How many channels carry the session's requests now (1 until extra channels bind), or a
/// negative error.
///
/// # Safety
/// `client` is a live client handle.
#[no_mangle]
pub unsafe extern "C" fn smb3_client_channels(client: *const smb3_client) -> c_int {
    guard_value(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        Ok(c_int::try_from(client.inner.usable_channels()).unwrap_or(c_int::MAX))
    })
}

/// Wait up to `timeout_ms` for every channel multichannel planned to be bound. Returns 1 if
/// they are, 0 if the time ran out first (the session works either way), or a negative error.
///
/// # Safety
/// `client` is a live client handle.
#[no_mangle]
pub unsafe extern "C" fn smb3_client_wait_for_channels(
    client: *const smb3_client,
    timeout_ms: u32,
) -> c_int {
    guard_value(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        let c = client.inner.clone();
        let wait = Duration::from_millis(u64::from(timeout_ms));
        let all = client
            .ctx
            .run(async move { c.wait_for_channels(wait).await })?;
        Ok(c_int::from(all))
    })
}

/// End the session (LOGOFF). The handle must still be freed with `smb3_client_free`.
///
/// # Safety
/// `client` is a live client handle.
#[no_mangle]
pub unsafe extern "C" fn smb3_client_logoff(client: *const smb3_client) -> c_int {
    guard(|| {
        // SAFETY: NULL-checked; live by the caller's contract.
        let client = unsafe { handle(client, "client") }?;
        let c = client.inner.clone();
        client.ctx.call(async move { c.logoff().await })
    })
}

/// Free a client handle. Its session ends when the last handle made from it (shares, files,
/// listings) is freed too. NULL is ignored.
///
/// # Safety
/// `client` is NULL or a live client handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn smb3_client_free(client: *mut smb3_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in this library, freed once by the caller's contract.
    let client = unsafe { Box::from_raw(client) };
    guard_void(move || {
        let ctx = client.ctx.clone();
        ctx.drop_inside(client);
    });
}

/// Free a share handle. NULL is ignored.
///
/// # Safety
/// `share` is NULL or a live share handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn smb3_share_free(share: *mut smb3_share) {
    if share.is_null() {
        return;
    }
    // SAFETY: made by Box::into_raw in this library, freed once by the caller's contract.
    let share = unsafe { Box::from_raw(share) };
    guard_void(move || {
        let ctx = share.ctx.clone();
        ctx.drop_inside(share);
    });
}
