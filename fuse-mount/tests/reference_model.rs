//! SmbFs against a reference model: random sequences of file system operations run on the
//! mount's file system (over the in-memory SMB server) and on a plain in-memory model of a
//! POSIX file system; any difference fails, shrunk by proptest to the shortest sequence that
//! still shows it.
//!
//! The operations are driven the way the kernel drives them: a path is resolved by LOOKUPs,
//! the checks the VFS makes before calling a file system (EEXIST before MKDIR, EISDIR before
//! UNLINK of a directory, ...) are made here too, and a close is a FLUSH then a RELEASE.
//! After the sequence every handle is closed and the server's tree must equal the model's:
//! what write-behind and deferred closes held back has reached the server.
//!
//! What SMB cannot do the model does not ask: removing or replacing a file that is open
//! (POSIX keeps it alive; SMB holds it as delete-pending) and renaming a directory with open
//! files below it (servers refuse it). Those sequences skip the operation on both sides.
//!
//! Runs a fixed seed in CI; `SMBFS_MODEL_SEED=<number>` and `SMBFS_MODEL_CASES=<n>` explore.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use smb3_testserver::{ServerConfig, TestServer};
use smbfuse::fs::{FsConfig, Kind, OpenMode, SetAttr, SmbFs};
use smbfuse::inode::ROOT;

mod common;

const SHARE: &str = "data";

/// Handle slots a sequence can hold open at once.
const SLOTS: usize = 2;

#[derive(Clone, Debug)]
enum Op {
    Mkdir(String),
    Create(String, Vec<u8>),
    Write(String, u16, Vec<u8>),
    Read(String),
    Truncate(String, u16),
    Rename(String, String, bool),
    Unlink(String),
    Rmdir(String),
    List(String),
    Stat(String),
    Open(usize, String),
    HandleWrite(usize, u16, Vec<u8>),
    HandleRead(usize),
    Close(usize),
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

/// Paths one or two levels deep over three names: small enough that operations collide.
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        name(),
        (name(), name()).prop_map(|(a, b)| format!("{a}/{b}"))
    ]
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..48)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        path().prop_map(Op::Mkdir),
        (path(), data()).prop_map(|(p, d)| Op::Create(p, d)),
        (path(), 0..80u16, data()).prop_map(|(p, o, d)| Op::Write(p, o, d)),
        path().prop_map(Op::Read),
        (path(), 0..80u16).prop_map(|(p, n)| Op::Truncate(p, n)),
        (path(), path(), any::<bool>()).prop_map(|(a, b, n)| Op::Rename(a, b, n)),
        path().prop_map(Op::Unlink),
        path().prop_map(Op::Rmdir),
        prop_oneof![Just(String::new()), name()].prop_map(Op::List),
        path().prop_map(Op::Stat),
        (0..SLOTS, path()).prop_map(|(s, p)| Op::Open(s, p)),
        (0..SLOTS, 0..80u16, data()).prop_map(|(s, o, d)| Op::HandleWrite(s, o, d)),
        (0..SLOTS).prop_map(Op::HandleRead),
        (0..SLOTS).prop_map(Op::Close),
    ]
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>),
}

/// The reference: a POSIX file system as a map from path to node.
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
    /// Each open slot's file, by its current path.
    handles: [Option<String>; SLOTS],
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

fn is_below(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

type Expect = Result<(), i32>;

impl Model {
    fn is_dir(&self, path: &str) -> bool {
        path.is_empty() || self.nodes.get(path) == Some(&Node::Dir)
    }

    /// The errno resolving `path`'s parent gives, if any.
    fn parent_error(&self, path: &str) -> Option<i32> {
        let p = parent(path);
        if p.is_empty() {
            return None;
        }
        match self.nodes.get(p) {
            None => Some(libc::ENOENT),
            Some(Node::File(_)) => Some(libc::ENOTDIR),
            Some(Node::Dir) => None,
        }
    }

    /// Whether `path` or anything below it is held open.
    fn open_at_or_below(&self, path: &str) -> bool {
        self.handles
            .iter()
            .flatten()
            .any(|h| h == path || is_below(h, path))
    }

    fn children(&self, dir: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|k| parent(k) == dir)
            .map(|k| k.rsplit('/').next().unwrap_or(k).to_string())
            .collect()
    }

    fn lookup(&self, path: &str) -> Result<&Node, i32> {
        if let Some(e) = self.parent_error(path) {
            return Err(e);
        }
        self.nodes.get(path).ok_or(libc::ENOENT)
    }

    /// Ok when `path` is a file; a directory is EISDIR (what opening it for data gives).
    fn file(&self, path: &str) -> Result<(), i32> {
        match self.lookup(path)? {
            Node::Dir => Err(libc::EISDIR),
            Node::File(_) => Ok(()),
        }
    }

    fn write(&mut self, path: &str, offset: usize, data: &[u8]) {
        if let Some(Node::File(bytes)) = self.nodes.get_mut(path) {
            if bytes.len() < offset + data.len() {
                bytes.resize(offset + data.len(), 0);
            }
            bytes[offset..offset + data.len()].copy_from_slice(data);
        }
    }

    fn rename(&mut self, from: &str, to: &str) {
        let moved: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(k, _)| *k == from || is_below(k, from))
            .map(|(k, v)| (format!("{to}{}", &k[from.len()..]), v.clone()))
            .collect();
        self.nodes.retain(|k, _| k != from && !is_below(k, from));
        self.nodes.remove(to);
        self.nodes.extend(moved);
        for h in self.handles.iter_mut().flatten() {
            if h == from || is_below(h, from) {
                *h = format!("{to}{}", &h[from.len()..]);
            }
        }
    }
}

/// The mount's file system driven as the kernel drives it.
struct Kernel {
    fs: SmbFs,
    handles: [Option<u64>; SLOTS],
}

fn errno(e: smbfuse::fs::FsError) -> i32 {
    e.errno
}

impl Kernel {
    /// LOOKUP each component; a file on the way is ENOTDIR, as the VFS says before asking.
    async fn resolve(&self, path: &str) -> Result<(u64, Kind, u64), i32> {
        let mut ino = ROOT;
        let mut kind = Kind::Directory;
        let mut size = 0;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if kind != Kind::Directory {
                return Err(libc::ENOTDIR);
            }
            let attr = self.fs.lookup(ino, part).await.map_err(errno)?;
            (ino, kind, size) = (attr.ino, attr.kind, attr.size);
        }
        Ok((ino, kind, size))
    }

    /// The parent's node and the last name of `path`.
    async fn parent_of<'p>(&self, path: &'p str) -> Result<(u64, &'p str), i32> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let (ino, kind, _) = self.resolve(dir).await?;
        if kind != Kind::Directory {
            return Err(libc::ENOTDIR);
        }
        Ok((ino, name))
    }

    /// The node of file `path`; a directory is EISDIR, as open(2) of one for data says.
    async fn file(&self, path: &str) -> Result<u64, i32> {
        match self.resolve(path).await? {
            (_, Kind::Directory, _) => Err(libc::EISDIR),
            (ino, _, _) => Ok(ino),
        }
    }

    /// OPEN of file `path`.
    async fn open(&self, path: &str, read: bool, write: bool) -> Result<u64, i32> {
        let ino = self.file(path).await?;
        let mode = OpenMode {
            read,
            write,
            ..OpenMode::default()
        };
        Ok(self.fs.open(ino, mode).await.map_err(errno)?.fh)
    }

    async fn close(&self, fh: u64) -> Result<(), i32> {
        let flushed = self.fs.flush(fh, None).await.map_err(errno);
        let released = self.fs.release(fh).await.map_err(errno);
        flushed.and(released)
    }

    async fn read_all(&self, fh: u64) -> Result<Vec<u8>, i32> {
        let mut out = Vec::new();
        loop {
            let chunk = self
                .fs
                .read(fh, out.len() as u64, 1 << 16)
                .await
                .map_err(errno)?;
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
        }
    }

    async fn list(&self, path: &str) -> Result<Vec<String>, i32> {
        let (ino, kind, _) = self.resolve(path).await?;
        if kind != Kind::Directory {
            return Err(libc::ENOTDIR);
        }
        let fh = self.fs.opendir(ino).await.map_err(errno)?;
        let mut names = Vec::new();
        loop {
            let mut page = Vec::new();
            let taken = self
                .fs
                // Small replies, so that a listing takes several READDIRs as a big one does.
                .read_dir_at(fh, names.len() as u64, |_, e| {
                    if page.len() == 2 {
                        return true;
                    }
                    page.push(e.name.clone());
                    false
                })
                .await
                .map_err(errno)?;
            if taken == 0 {
                break;
            }
            names.extend(page);
        }
        self.fs.releasedir(fh).await;
        names.retain(|n| n != "." && n != "..");
        names.sort();
        Ok(names)
    }
}

fn check<T: std::fmt::Debug + PartialEq>(op: &Op, got: T, want: T) -> Result<(), TestCaseError> {
    if got == want {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "{op:?}: the mount gave {got:?}, the model {want:?}"
        )))
    }
}

/// Run one operation on both sides and compare.
async fn step(k: &mut Kernel, m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Mkdir(p) => {
            let want = match m.lookup(p) {
                Ok(_) => Err(libc::EEXIST),
                Err(libc::ENOENT) if m.parent_error(p).is_none() => {
                    m.nodes.insert(p.clone(), Node::Dir);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let got = async {
                let (dir, name) = k.parent_of(p).await?;
                match k.fs.lookup(dir, name).await {
                    Ok(_) => Err(libc::EEXIST),
                    Err(e) if e.errno == libc::ENOENT => {
                        k.fs.mkdir(dir, name, 0o755)
                            .await
                            .map(|_| ())
                            .map_err(errno)
                    }
                    Err(e) => Err(e.errno),
                }
            }
            .await;
            check(op, got, want)
        }
        Op::Create(p, d) => {
            let want: Expect = match m.lookup(p) {
                Ok(_) => Err(libc::EEXIST),
                Err(libc::ENOENT) if m.parent_error(p).is_none() => {
                    m.nodes.insert(p.clone(), Node::File(d.clone()));
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let got = async {
                let (dir, name) = k.parent_of(p).await?;
                match k.fs.lookup(dir, name).await {
                    Ok(_) => return Err(libc::EEXIST),
                    Err(e) if e.errno == libc::ENOENT => {}
                    Err(e) => return Err(e.errno),
                }
                let mode = OpenMode {
                    read: true,
                    write: true,
                    truncate: false,
                    exclusive: true,
                };
                let (_, fh) = k.fs.create(dir, name, mode, 0o644).await.map_err(errno)?;
                let wrote =
                    k.fs.write(fh, 0, Bytes::from(d.clone()))
                        .await
                        .map_err(errno);
                let closed = k.close(fh).await;
                wrote.map(|_| ()).and(closed)
            }
            .await;
            check(op, got, want)
        }
        Op::Write(p, offset, d) => {
            let want = m.file(p);
            if want.is_ok() {
                m.write(p, *offset as usize, d);
            }
            let got = async {
                let fh = k.open(p, false, true).await?;
                let data = Bytes::from(d.clone());
                let wrote =
                    k.fs.write(fh, u64::from(*offset), data)
                        .await
                        .map_err(errno);
                let closed = k.close(fh).await;
                wrote.map(|_| ()).and(closed)
            }
            .await;
            check(op, got, want)
        }
        Op::Read(p) => {
            let want = m.file(p).and_then(|()| match m.nodes.get(p) {
                Some(Node::File(d)) => Ok(d.clone()),
                _ => Err(libc::ENOENT),
            });
            let got = async {
                let fh = k.open(p, true, false).await?;
                let data = k.read_all(fh).await;
                let closed = k.close(fh).await;
                closed.and(data)
            }
            .await;
            check(op, got, want)
        }
        Op::Truncate(p, len) => {
            let want = m.file(p);
            if let (Ok(()), Some(Node::File(d))) = (want, m.nodes.get_mut(p)) {
                d.resize(*len as usize, 0);
            }
            let got = async {
                let ino = k.file(p).await?;
                let set = SetAttr {
                    size: Some(u64::from(*len)),
                    ..SetAttr::default()
                };
                k.fs.setattr(ino, None, set)
                    .await
                    .map(|_| ())
                    .map_err(errno)
            }
            .await;
            check(op, got, want)
        }
        Op::Rename(from, to, noreplace) => rename(k, m, op, from, to, *noreplace).await,
        Op::Unlink(p) => {
            if m.open_at_or_below(p) {
                return Ok(());
            }
            let want: Expect = match m.lookup(p) {
                Ok(Node::Dir) => Err(libc::EISDIR),
                Ok(Node::File(_)) => {
                    m.nodes.remove(p);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let got = async {
                let (dir, name) = k.parent_of(p).await?;
                let attr = k.fs.lookup(dir, name).await.map_err(errno)?;
                if attr.kind == Kind::Directory {
                    return Err(libc::EISDIR);
                }
                k.fs.unlink(dir, name).await.map_err(errno)
            }
            .await;
            check(op, got, want)
        }
        Op::Rmdir(p) => {
            if m.open_at_or_below(p) {
                return Ok(());
            }
            let want: Expect = match m.lookup(p) {
                Ok(Node::File(_)) => Err(libc::ENOTDIR),
                Ok(Node::Dir) if !m.children(p).is_empty() => Err(libc::ENOTEMPTY),
                Ok(Node::Dir) => {
                    m.nodes.remove(p);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            let got = async {
                let (dir, name) = k.parent_of(p).await?;
                let attr = k.fs.lookup(dir, name).await.map_err(errno)?;
                if attr.kind != Kind::Directory {
                    return Err(libc::ENOTDIR);
                }
                k.fs.rmdir(dir, name).await.map_err(errno)
            }
            .await;
            check(op, got, want)
        }
        Op::List(p) => {
            let want = match m.lookup(p) {
                _ if p.is_empty() => Ok(m.children("")),
                Ok(Node::Dir) => Ok(m.children(p)),
                Ok(Node::File(_)) => Err(libc::ENOTDIR),
                Err(e) => Err(e),
            };
            check(op, k.list(p).await, want)
        }
        Op::Stat(p) => {
            let want = match m.lookup(p) {
                Ok(Node::Dir) => Ok((Kind::Directory, None)),
                Ok(Node::File(d)) => Ok((Kind::File, Some(d.len() as u64))),
                Err(e) => Err(e),
            };
            let got = k
                .resolve(p)
                .await
                .map(|(_, kind, size)| (kind, (kind == Kind::File).then_some(size)));
            check(op, got, want)
        }
        Op::Open(slot, p) => {
            if m.handles[*slot].is_some() {
                return Ok(());
            }
            let want = m.file(p);
            if want.is_ok() {
                m.handles[*slot] = Some(p.clone());
            }
            let got = k.open(p, true, true).await.map(|fh| {
                k.handles[*slot] = Some(fh);
            });
            check(op, got, want)
        }
        Op::HandleWrite(slot, offset, d) => {
            let (Some(path), Some(fh)) = (m.handles[*slot].clone(), k.handles[*slot]) else {
                return Ok(());
            };
            m.write(&path, *offset as usize, d);
            let got =
                k.fs.write(fh, u64::from(*offset), Bytes::from(d.clone()))
                    .await
                    .map(|_| ())
                    .map_err(errno);
            check(op, got, Ok(()))
        }
        Op::HandleRead(slot) => {
            let (Some(path), Some(fh)) = (m.handles[*slot].clone(), k.handles[*slot]) else {
                return Ok(());
            };
            let want = match m.nodes.get(&path) {
                Some(Node::File(d)) => Ok(d.clone()),
                _ => return Ok(()),
            };
            check(op, k.read_all(fh).await, want)
        }
        Op::Close(slot) => {
            let (Some(_), Some(fh)) = (m.handles[*slot].take(), k.handles[*slot].take()) else {
                return Ok(());
            };
            check(op, k.close(fh).await, Ok(()))
        }
    }
}

async fn rename(
    k: &mut Kernel,
    m: &mut Model,
    op: &Op,
    from: &str,
    to: &str,
    noreplace: bool,
) -> Result<(), TestCaseError> {
    let source_dir = m.is_dir(from) && m.nodes.contains_key(from);
    // SMB refuses to move a directory with open files below it, and to replace an open file.
    if (source_dir && m.open_at_or_below(from)) || m.open_at_or_below(to) {
        return Ok(());
    }
    let want: Expect = (|| {
        let src = m.lookup(from)?.clone();
        if let Some(e) = m.parent_error(to) {
            return Err(e);
        }
        if from == to {
            return Ok(());
        }
        if is_below(to, from) {
            return Err(libc::EINVAL);
        }
        match (m.nodes.get(to), &src) {
            (Some(_), _) if noreplace => Err(libc::EEXIST),
            (Some(Node::Dir), Node::File(_)) => Err(libc::EISDIR),
            (Some(Node::File(_)), Node::Dir) => Err(libc::ENOTDIR),
            (Some(Node::Dir), Node::Dir) if !m.children(to).is_empty() => Err(libc::ENOTEMPTY),
            _ => Ok(()),
        }
    })();
    if want.is_ok() && from != to {
        m.rename(from, to);
    }
    let got = async {
        let (from_dir, from_name) = k.parent_of(from).await?;
        let src = k.fs.lookup(from_dir, from_name).await.map_err(errno)?;
        let (to_dir, to_name) = k.parent_of(to).await?;
        if from == to {
            return Ok(());
        }
        // The VFS refuses a move into the moved directory itself before asking.
        if is_below(to, from) {
            return Err(libc::EINVAL);
        }
        match k.fs.lookup(to_dir, to_name).await {
            Ok(_) if noreplace => return Err(libc::EEXIST),
            Ok(dst) if dst.kind == Kind::Directory && src.kind != Kind::Directory => {
                return Err(libc::EISDIR)
            }
            Ok(dst) if dst.kind != Kind::Directory && src.kind == Kind::Directory => {
                return Err(libc::ENOTDIR)
            }
            _ => {}
        }
        k.fs.rename(from_dir, from_name, to_dir, to_name, noreplace)
            .await
            .map_err(errno)
    }
    .await;
    // POSIX lets a directory over a non-empty one fail with EEXIST as well.
    let got = match (got, want) {
        (Err(libc::EEXIST), Err(libc::ENOTEMPTY)) => Err(libc::ENOTEMPTY),
        (g, _) => g,
    };
    check(op, got, want)
}

/// The server's tree, as the test server holds it, against the model's.
fn compare_server(server: &TestServer, m: &Model) -> Result<(), TestCaseError> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![String::new()];
    while let Some(dir) = dirs.pop() {
        for name in server.list(SHARE, &dir).unwrap_or_default() {
            let path = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            match server.read_file(SHARE, &path) {
                Some(data) => {
                    found.insert(path, Node::File(data));
                }
                None => {
                    found.insert(path.clone(), Node::Dir);
                    dirs.push(path);
                }
            }
        }
    }
    if found == m.nodes {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "after the sequence the server holds {found:?}, the model {:?}",
            m.nodes
        )))
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let server = TestServer::start(ServerConfig::default())
        .await
        .expect("server starts");
    let share = common::share_of(&server, SHARE).await;
    let cfg = FsConfig {
        // Change notification is not served by the in-memory server.
        watch_dirs: 0,
        // Short enough that a parked read handle is still open during the sequence.
        close_delay: Duration::from_millis(500),
        ..FsConfig::default()
    };
    let mut kernel = Kernel {
        fs: SmbFs::new(share, "", cfg),
        handles: [None; SLOTS],
    };
    let mut model = Model::default();
    for op in &ops {
        step(&mut kernel, &mut model, op).await?;
    }
    for slot in 0..SLOTS {
        if let Some(fh) = kernel.handles[slot].take() {
            let op = Op::Close(slot);
            check(&op, kernel.close(fh).await, Ok(()))?;
        }
    }
    kernel.fs.shutdown().await;
    compare_server(&server, &model)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn smbfs_behaves_like_a_posix_file_system() {
    let seed = env_number("SMBFS_MODEL_SEED", 20261127);
    let cases = env_number("SMBFS_MODEL_CASES", 256) as u32;
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let result = runner.run(&vec(op(), 1..40), |ops| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(run(ops))
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}
