//! The blocking facade (`smb3_client::blocking`) against the testbed's real smbd, from plain
//! threads: `std::io::copy` up and down, `Seek`, EOF, path operations, and close on drop.

// The testbed (network namespaces, veth links, smbd) exists on Linux only.
#![cfg(target_os = "linux")]

use std::io::{BufWriter, Read, Seek, SeekFrom, Write};

use smb3_client::{blocking, ClientConfig, Error, OpenOptions};
use smb3_tests::{pattern, Testbed, TestbedConfig};

const TEN_MIB: usize = 10 * 1024 * 1024;

#[test]
fn std_io_copy_up_and_down_with_seek() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let server = format!("{}:445", tb.server_addr(1));
    // A runtime whose threads live in the client namespace; the client owns it. The calling
    // thread is this plain test thread.
    let client = blocking::Client::connect_on(
        tb.client_runtime(),
        &server,
        &tb.credentials(),
        ClientConfig::default(),
    )
    .expect("connect");
    let share = client.share("plain").expect("tree connect");
    let data = pattern(15, TEN_MIB);

    // Up: std::io::copy through a BufWriter (1 MiB writes).
    let file = share
        .open(
            "big.bin",
            &OpenOptions::new().write(true).create(true).truncate(true),
        )
        .expect("create");
    let mut writer = BufWriter::with_capacity(1024 * 1024, file);
    let copied = std::io::copy(&mut &data[..], &mut writer).expect("copy up");
    assert_eq!(copied, TEN_MIB as u64);
    let mut file = writer.into_inner().map_err(|e| e.into_error()).unwrap();
    file.flush().expect("flush");
    file.close().expect("close");
    assert!(
        std::fs::read(disk.join("big.bin")).unwrap() == data,
        "server copy differs"
    );

    // Down: std::io::copy into a Vec; the read after the end returns 0.
    let mut file = share
        .open("big.bin", &OpenOptions::new().read(true))
        .expect("open");
    let mut back = Vec::new();
    let n = std::io::copy(&mut file, &mut back).expect("copy down");
    assert_eq!(n, TEN_MIB as u64);
    assert!(back == data, "downloaded copy differs");
    let mut byte = [0u8; 1];
    assert_eq!(file.read(&mut byte).unwrap(), 0, "EOF");

    // Seek to the middle and read; relative and from-the-end seeks.
    let mid = (TEN_MIB / 2 + 123) as u64;
    assert_eq!(file.seek(SeekFrom::Start(mid)).unwrap(), mid);
    let mut buf = vec![0u8; 4000];
    file.read_exact(&mut buf).unwrap();
    assert_eq!(buf, data[mid as usize..mid as usize + 4000]);
    file.seek(SeekFrom::Current(-2000)).unwrap();
    file.read_exact(&mut buf[..10]).unwrap();
    assert_eq!(buf[..10], data[mid as usize + 2000..mid as usize + 2010]);
    assert_eq!(file.seek(SeekFrom::End(-10)).unwrap(), TEN_MIB as u64 - 10);
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, data[TEN_MIB - 10..]);
    assert!(file.seek(SeekFrom::Current(-(TEN_MIB as i64) - 1)).is_err());

    // Writing through a read-only handle fails as an io::Error carrying the server's answer.
    let e = file.write(b"x").unwrap_err();
    let inner = e.get_ref().and_then(|e| e.downcast_ref::<Error>()).unwrap();
    assert!(inner.status().is_some(), "{inner:?}");
    drop(file);

    // Path operations.
    share.create_dir("d").unwrap();
    share
        .rename("big.bin", "d/moved.bin", smb3_client::IfExists::Fail)
        .unwrap();
    let names: Vec<String> = share
        .read_dir("d")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["moved.bin"]);
    assert_eq!(share.metadata("d/moved.bin").unwrap().len, TEN_MIB as u64);
    assert!(!share.exists("big.bin").unwrap());

    // Dropping a file closes it at the server.
    let f = share
        .open("d/moved.bin", &OpenOptions::new().read(true))
        .unwrap();
    assert!(tb
        .open_files()
        .unwrap()
        .iter()
        .any(|o| o.name.contains("moved.bin")));
    drop(f);
    let still: Vec<String> = tb
        .open_files()
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .filter(|n| n.contains("moved.bin"))
        .collect();
    assert!(still.is_empty(), "still open after drop: {still:?}");

    share.remove_file("d/moved.bin").unwrap();
    share.remove_dir("d").unwrap();
    assert!(!disk.join("d").exists());
    client.logoff().unwrap();
}

#[test]
fn connect_on_its_own_runtime_from_a_plain_thread() {
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("plain");
    let server = format!("{}:445", tb.server_addr(1));
    let creds = tb.credentials();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Threads inherit the namespace of the thread that starts them: the runtime
            // `connect` builds here has its workers in the client namespace too.
            let _in_ns = tb.enter_client_netns().expect("enter the client namespace");
            // One channel: multichannel would read this thread's /sys/class/net, the host's.
            let mut config = ClientConfig::default();
            config.multichannel = false;
            let client = blocking::Client::connect(&server, &creds, config).expect("connect");
            let share = client.share("plain").expect("tree connect");
            let mut f = share
                .open("small.txt", &OpenOptions::new().write(true).create(true))
                .unwrap();
            f.write_all(b"hello, ").unwrap();
            f.write_all(b"blocking world").unwrap();
            f.close().unwrap();
            let mut f = share
                .open("small.txt", &OpenOptions::new().read(true))
                .unwrap();
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            assert_eq!(s, "hello, blocking world");
            drop(f);
            drop(share);
            client.logoff().unwrap();
        })
        .join()
        .expect("client thread");
    });
    assert_eq!(
        std::fs::read(disk.join("small.txt")).unwrap(),
        b"hello, blocking world"
    );
}

#[test]
fn listings_walks_and_backup_calls_without_tokio() {
    use std::time::{Duration, UNIX_EPOCH};

    use smb3_client::{DosAttributes, FileTimes, IfExists, SecurityParts, WalkOptions};

    const ENTRIES: usize = 3_000;
    let tb = Testbed::start(TestbedConfig::unshaped(1)).unwrap_or_else(|e| panic!("testbed: {e}"));
    let disk = tb.share_path("backup");
    // Made on the server's disk: a directory of several pages, and a small tree.
    std::fs::create_dir(disk.join("many")).unwrap();
    for i in 0..ENTRIES {
        std::fs::File::create(disk.join(format!("many/f{i:04}"))).unwrap();
    }
    std::fs::create_dir_all(disk.join("tree/a/b")).unwrap();
    for f in ["tree/1.txt", "tree/a/2.txt", "tree/a/b/3.txt"] {
        std::fs::write(disk.join(f), f.as_bytes()).unwrap();
    }
    tb.give_to_user(&disk);

    let server = format!("{}:445", tb.server_addr(1));
    let client = blocking::Client::connect_on(
        tb.client_runtime(),
        &server,
        &tb.credentials(),
        ClientConfig::default(),
    )
    .expect("connect");
    let share = client.share("backup").expect("tree connect");

    // A listing as an iterator: every entry once, over several pages.
    let mut names: Vec<String> = share
        .list("many")
        .unwrap()
        .map(|e| e.unwrap().name)
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ENTRIES);
    // Page by page, and one dropped half-way (closed at the server, checked at the end).
    let mut listing = share.list("many").unwrap();
    let first = listing.next_page().unwrap().unwrap();
    assert!(
        !first.is_empty() && first.len() < ENTRIES,
        "{}",
        first.len()
    );
    assert!(listing.next().is_some());
    drop(listing);
    // A missing directory is an error naming it.
    let e = share.list("no/such").unwrap_err();
    assert!(e.to_string().contains("no/such"), "{e}");

    // The walk: every path once, directories first.
    let paths: Vec<String> = share
        .walk("tree", WalkOptions::default())
        .map(|item| item.unwrap().path)
        .collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "tree/1.txt",
            "tree/a",
            "tree/a/2.txt",
            "tree/a/b",
            "tree/a/b/3.txt"
        ]
    );
    // A walk dropped after its first entry stops.
    assert!(share.walk("", WalkOptions::default()).next().is_some());

    // Times and attributes, a hard link, a named stream, the security descriptor.
    let when = UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    let times = FileTimes {
        modified: Some(when),
        ..FileTimes::default()
    };
    share
        .set_times_and_attributes("tree/1.txt", &times, DosAttributes::HIDDEN)
        .unwrap();
    let m = share.metadata("tree/1.txt").unwrap();
    assert_eq!(m.modified, Some(when));
    assert!(m.attributes.contains(DosAttributes::HIDDEN), "{m:?}");
    share
        .hard_link("tree/1.txt", "tree/1-link.txt", IfExists::Fail)
        .unwrap();
    assert_eq!(share.metadata("tree/1-link.txt").unwrap().links, 2);
    let mut stream = share
        .open(
            "tree/1.txt:extra",
            &OpenOptions::new().write(true).create(true),
        )
        .unwrap();
    stream.write_all(b"named stream").unwrap();
    stream.close().unwrap();
    let streams = share.streams("tree/1.txt").unwrap();
    assert!(
        streams
            .iter()
            .any(|s| s.name == ":extra:$DATA" && s.size == 12),
        "{streams:?}"
    );
    let sd = share
        .security_descriptor("tree/1.txt", SecurityParts::standard())
        .unwrap();
    assert!(
        sd.descriptor.owner.is_some() && sd.descriptor.dacl.is_some(),
        "{sd:?}"
    );
    let file = share
        .open(
            "tree/1.txt",
            &OpenOptions::new().read(true).read_security(true),
        )
        .unwrap();
    assert_eq!(
        file.security_descriptor(SecurityParts::standard())
            .unwrap()
            .raw,
        sd.raw
    );
    assert_eq!(file.streams().unwrap().len(), streams.len());
    drop(file);
    drop(share);
    client.logoff().unwrap();
    // No handle left by the dropped listing and walk, nor by anything else.
    assert!(tb.open_files().unwrap().is_empty());
}
