//! The C API called from Rust (through the rlib, as C would through the header) against the
//! in-memory SMB server: the logic of handles, errors, listings and copies, in milliseconds
//! and without root. The real-server tests (`tests/c_api.rs`) stay the proof.

use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr;

use smb3::*;
use smb3_testserver::{ServerConfig, TestServer};

/// A server on its own runtime (the library refuses to block inside one), and a connected
/// client and share.
struct Fixture {
    server: TestServer,
    _rt: tokio::runtime::Runtime,
    client: *mut smb3_client,
    share: *mut smb3_share,
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_message() -> String {
    // SAFETY: never NULL; valid until the next call on this thread.
    unsafe { CStr::from_ptr(smb3_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

impl Fixture {
    fn new() -> Fixture {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = rt
            .block_on(TestServer::start(ServerConfig::default()))
            .unwrap();
        let (rc, client) = Fixture::connect_to(&server, &server.config().password.clone());
        assert_eq!(rc, 0, "{}", last_message());
        let mut share = ptr::null_mut();
        let name = c("data");
        // SAFETY: a live client, a valid string, a valid out-pointer.
        let rc = unsafe { smb3_client_share(client, name.as_ptr(), &mut share) };
        assert_eq!(rc, 0, "{}", last_message());
        Fixture {
            server,
            _rt: rt,
            client,
            share,
        }
    }

    fn connect_to(server: &TestServer, password: &str) -> (c_int, *mut smb3_client) {
        let (host, user, pw) = (
            c(&server.addr().to_string()),
            c(&server.config().user),
            c(password),
        );
        let mut o = std::mem::MaybeUninit::<smb3_connect_options>::uninit();
        // SAFETY: room for one options struct; initialised by the call.
        let mut o = unsafe {
            assert_eq!(smb3_connect_options_init(o.as_mut_ptr()), 0);
            o.assume_init()
        };
        o.user = user.as_ptr();
        o.password = pw.as_ptr();
        let mut client = ptr::null_mut();
        // SAFETY: valid strings and options for the call, a valid out-pointer.
        let rc = unsafe { smb3_connect(host.as_ptr(), &o, &mut client) };
        (rc, client)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // SAFETY: handles made by the fixture, freed once.
        unsafe {
            smb3_share_free(self.share);
            smb3_client_free(self.client);
        }
    }
}

#[test]
fn a_wrong_password_is_auth_with_logon_failure_and_no_handle() {
    let f = Fixture::new();
    let (rc, client) = Fixture::connect_to(&f.server, "wrong");
    assert_eq!(
        rc,
        smb3_error_kind::SMB3_ERR_AUTH as c_int,
        "{}",
        last_message()
    );
    assert_eq!(smb3_last_error_ntstatus(), 0xC000_006D);
    assert!(client.is_null());
}

#[test]
fn files_are_written_read_stated_and_missing_ones_named() {
    let f = Fixture::new();
    let path = c("dir/a.bin");
    // SAFETY: live handles, valid strings and buffers throughout.
    unsafe {
        assert_eq!(smb3_share_mkdir(f.share, c("dir").as_ptr()), 0);
        let mut file = ptr::null_mut();
        let flags = SMB3_OPEN_READ | SMB3_OPEN_WRITE | SMB3_OPEN_CREATE_NEW;
        assert_eq!(
            smb3_share_open(f.share, path.as_ptr(), flags, ptr::null(), &mut file),
            0,
            "{}",
            last_message()
        );
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(
            smb3_file_write_at(file, 0, data.as_ptr().cast::<c_void>(), data.len()),
            0
        );
        let mut back = vec![0u8; data.len() + 10];
        let mut n = 0;
        assert_eq!(
            smb3_file_read_at(file, 0, back.as_mut_ptr().cast(), back.len(), &mut n),
            0
        );
        assert_eq!(n, data.len());
        assert!(back[..n] == data[..]);
        assert_eq!(smb3_file_close(file), 0);
        assert_eq!(f.server.read_file("data", "dir/a.bin").unwrap(), data);

        let mut st = std::mem::zeroed::<smb3_stat>();
        assert_eq!(smb3_share_stat(f.share, path.as_ptr(), &mut st), 0);
        assert_eq!(st.size, 3_000_000);

        let rc = smb3_share_open(
            f.share,
            c("dir/none").as_ptr(),
            SMB3_OPEN_READ,
            ptr::null(),
            &mut file,
        );
        assert_eq!(rc, smb3_error_kind::SMB3_ERR_NOT_FOUND as c_int);
        assert_eq!(smb3_last_error_ntstatus(), 0xC000_0034);
        assert!(last_message().contains("dir/none"), "{}", last_message());

        // Not UTF-8, and NULL: refused before anything is sent.
        let bad = [0xffu8, 0xfe, 0];
        let rc = smb3_share_stat(f.share, bad.as_ptr().cast(), &mut st);
        assert_eq!(rc, smb3_error_kind::SMB3_ERR_INVALID_ARGUMENT as c_int);
        let rc = smb3_share_stat(ptr::null(), path.as_ptr(), &mut st);
        assert_eq!(rc, smb3_error_kind::SMB3_ERR_INVALID_ARGUMENT as c_int);
    }
    assert_eq!(f.server.open_handles(), 0);
}

unsafe extern "C" fn cancel_on_second_call(_p: *const smb3_progress, data: *mut c_void) -> c_int {
    // SAFETY: the test passes a pointer to its counter.
    let calls = unsafe { &mut *data.cast::<u32>() };
    *calls += 1;
    c_int::from(*calls >= 2)
}

#[test]
fn a_tree_is_listed_walked_and_copied_down_and_a_cancelled_copy_leaves_nothing() {
    let f = Fixture::new();
    f.server.put_file("data", "t/a.txt", b"alpha");
    f.server
        .put_file("data", "t/sub/b.bin", &vec![9u8; 2_500_000]);
    f.server.put_file("data", "t/sub/deeper/c", b"");
    let local = std::env::temp_dir().join(format!("smb3-ffi-mem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&local);
    // SAFETY: live handles, valid strings and out-pointers throughout.
    unsafe {
        let mut dir = ptr::null_mut();
        assert_eq!(smb3_share_list(f.share, c("t").as_ptr(), &mut dir), 0);
        let mut names = Vec::new();
        let mut name = ptr::null();
        while smb3_dir_next(dir, &mut name, ptr::null_mut()) == 1 {
            names.push(CStr::from_ptr(name).to_str().unwrap().to_string());
        }
        smb3_dir_close(dir);
        names.sort();
        assert_eq!(names, ["a.txt", "sub"]);

        let mut walk = ptr::null_mut();
        assert_eq!(smb3_share_walk(f.share, c("t").as_ptr(), 0, &mut walk), 0);
        let mut paths = Vec::new();
        let mut path = ptr::null();
        while smb3_walk_next(walk, &mut path, ptr::null_mut(), ptr::null_mut()) == 1 {
            paths.push(CStr::from_ptr(path).to_str().unwrap().to_string());
        }
        smb3_walk_free(walk);
        assert_eq!(paths.len(), 5, "{paths:?}");

        let dest = c(local.join("tree").to_str().unwrap());
        let rc = smb3_download_tree(
            f.share,
            c("t").as_ptr(),
            dest.as_ptr(),
            0,
            None,
            ptr::null_mut(),
            ptr::null(),
        );
        assert_eq!(rc, 0, "{}", last_message());
        assert_eq!(std::fs::read(local.join("tree/a.txt")).unwrap(), b"alpha");
        assert_eq!(
            std::fs::read(local.join("tree/sub/b.bin")).unwrap(),
            vec![9u8; 2_500_000]
        );
        assert!(local.join("tree/sub/deeper/c").exists());

        let one = c(local.join("one.bin").to_str().unwrap());
        let mut calls = 0u32;
        let rc = smb3_download(
            f.share,
            c("t/sub/b.bin").as_ptr(),
            one.as_ptr(),
            0,
            Some(cancel_on_second_call),
            (&mut calls as *mut u32).cast(),
            ptr::null(),
        );
        assert_eq!(rc, smb3_error_kind::SMB3_ERR_CANCELLED as c_int);
        assert!(calls >= 2);
        assert!(
            !local.join("one.bin").exists(),
            "a cancelled copy left a file"
        );
    }
    let _ = std::fs::remove_dir_all(&local);
}
