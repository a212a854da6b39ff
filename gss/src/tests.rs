//! Tests against the host's GSS-API library (MIT krb5's libgssapi_krb5 on the CI's Debian):
//! what needs no KDC. The exchanges with a KDC and a server are in tests/e2e/kerberos_ccache.rs.

use super::*;

fn lib() -> &'static Functions {
    functions().expect("libgssapi_krb5.so.2 (libgssapi-krb5-2) is installed on the test hosts")
}

/// The MIT minor codes are `ERROR_TABLE_BASE_krb5` (-1765328384) plus their index in
/// krb5_err.et, and k5g's base (39756032) plus theirs. (gss_display_status knows a minor code
/// only once a call has returned it, so the numbers are checked here, and the meaning by the
/// e2e tests that provoke each error against the testbed's KDC.)
#[test]
fn mit_minor_codes_are_table_base_plus_index() {
    let krb5 = |i: i64| (-1_765_328_384i64 + i) as i32 as u32;
    assert_eq!(krb5_minor::C_PRINCIPAL_UNKNOWN, krb5(6));
    assert_eq!(krb5_minor::S_PRINCIPAL_UNKNOWN, krb5(7));
    assert_eq!(krb5_minor::TKT_EXPIRED, krb5(32));
    assert_eq!(krb5_minor::SKEW, krb5(37));
    assert_eq!(krb5_minor::CC_NOTFOUND, krb5(141));
    assert_eq!(krb5_minor::REALM_UNKNOWN, krb5(154));
    assert_eq!(krb5_minor::KDC_UNREACH, krb5(156));
    assert_eq!(krb5_minor::KT_NOTFOUND, krb5(181));
    assert_eq!(krb5_minor::FCC_NOFILE, krb5(195));
    assert_eq!(krb5_minor::KG_EMPTY_CCACHE, 39_756_032 + 12);
    let text = display_status(lib(), major::NO_CRED, ffi::C_GSS_CODE).join(" ");
    assert!(text.contains("No credentials were supplied"), "{text}");
}

/// A renumbered minor status is recognised by MIT's text for the krb5 code.
#[test]
fn renumbered_codes_are_recognised_by_their_text() {
    let f = lib();
    assert!(f.error_message.is_some(), "MIT's libraries carry com_err");
    assert_eq!(
        recognise(f, 100_006, "Server not found in Kerberos database"),
        Some(krb5_minor::S_PRINCIPAL_UNKNOWN)
    );
    assert_eq!(
        recognise(f, 100_001, "No credentials cache found (filename: /tmp/x)"),
        Some(krb5_minor::FCC_NOFILE)
    );
    assert_eq!(recognise(f, 100_002, "Something else"), None);
    assert_eq!(recognise(f, 100_002, ""), None);
}

#[test]
fn errors_are_classified_by_status() {
    let f = lib();
    let e = Error::status(f, "x", major::NO_CRED, 0);
    assert_eq!(e.kind, ErrorKind::NoCredentials);
    let e = Error::status(f, "x", major::CREDENTIALS_EXPIRED, 0);
    assert_eq!(e.kind, ErrorKind::Expired);
    let e = Error::status(f, "x", major::FAILURE, krb5_minor::TKT_EXPIRED);
    assert_eq!(e.kind, ErrorKind::Expired);
    let e = Error::status(f, "x", major::FAILURE, krb5_minor::S_PRINCIPAL_UNKNOWN);
    assert_eq!(e.kind, ErrorKind::Failure);
    assert_eq!(e.krb5_code, Some(krb5_minor::S_PRINCIPAL_UNKNOWN));
    assert!(e.to_string().starts_with("x: "), "{e}");
}

/// A cache that does not exist: a NoCredentials error with MIT's code for it.
#[test]
fn a_missing_cache_is_no_credentials_and_named() {
    let dir = std::env::temp_dir().join(format!("smb3-gss-test-{}", std::process::id()));
    let cache = format!("FILE:{}/no-such-cache", dir.display());
    let err = Credential::acquire(&CredStore {
        ccache: Some(cache.clone()),
        ..CredStore::default()
    })
    .expect_err("no cache, no credentials");
    assert_eq!(err.kind, ErrorKind::NoCredentials, "{err}");
    assert_eq!(err.call, "gss_acquire_cred_from");
    // MIT's own code and words (the caller adds the cache's name to its message).
    assert_eq!(err.krb5_code, Some(krb5_minor::FCC_NOFILE), "{err}");
    assert!(err.message.contains("No credentials cache found"), "{err}");
}

/// An empty file is not a cache; a keytab that does not exist has no principal: both say so
/// at once, before any exchange.
#[test]
fn an_empty_cache_file_and_a_missing_keytab_fail_at_acquisition() {
    let dir = std::env::temp_dir().join(format!("smb3-gss-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty-cache");
    std::fs::write(&empty, b"").unwrap();
    let err = Credential::acquire(&CredStore {
        ccache: Some(format!("FILE:{}", empty.display())),
        ..CredStore::default()
    })
    .expect_err("an empty file holds no tickets");
    assert!(
        matches!(err.kind, ErrorKind::NoCredentials | ErrorKind::Failure),
        "{err:?}"
    );
    let err = Credential::acquire(&CredStore {
        client_keytab: Some(format!("FILE:{}", dir.join("no-keytab").display())),
        principal: Some("nobody@EXAMPLE.INVALID".into()),
        ..CredStore::default()
    })
    .expect_err("no keytab");
    assert_eq!(err.kind, ErrorKind::NoCredentials, "{err:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_with_nul_bytes_are_refused() {
    let err = Credential::acquire(&CredStore {
        ccache: Some("FILE:/tmp/a\0b".into()),
        ..CredStore::default()
    })
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadName);
}

#[test]
fn keytab_tickets_go_to_a_private_memory_cache() {
    let store = CredStore {
        client_keytab: Some("/etc/backup.keytab".into()),
        principal: Some("backup@CORP".into()),
        ccache: None,
    };
    let e = store.entries();
    assert_eq!(e[0], ("client_keytab", "/etc/backup.keytab".to_string()));
    assert_eq!(e[1].0, "ccache");
    assert!(e[1].1.starts_with("MEMORY:smb3-gss-"), "{:?}", e[1]);
    // The same keytab and principal share one cache; another principal gets its own.
    assert_eq!(store.entries(), e);
    let other = CredStore {
        principal: Some("other@CORP".into()),
        ..store.clone()
    };
    assert_ne!(other.entries()[1], e[1]);
    assert!(CredStore::default().entries().is_empty());
    let cache_only = CredStore {
        ccache: Some("DIR:/run/user/0/krb5cc".into()),
        ..CredStore::default()
    };
    assert_eq!(
        cache_only.entries(),
        vec![("ccache", "DIR:/run/user/0/krb5cc".to_string())]
    );
}

/// The service name is imported as a host-based service, locally (no KDC, no DNS).
#[test]
fn a_host_based_service_name_imports_offline() {
    let f = lib();
    let target = Name::import(f, "cifs@nas.example.invalid", oid::NT_HOSTBASED_SERVICE)
        .expect("a host-based name imports without a KDC");
    assert!(target.display().unwrap().contains("nas.example.invalid"));
}
