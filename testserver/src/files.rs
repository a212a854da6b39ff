//! The in-memory file tree of one share: directories and files with data, attributes and
//! times, looked up case-insensitively and kept case-preserving, as NTFS and Samba's default
//! do.

use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use smb3_proto::NtStatus;

/// FILE_ATTRIBUTE_READONLY (MS-FSCC 2.6).
pub(crate) const ATTR_READONLY: u32 = 0x0001;
/// FILE_ATTRIBUTE_DIRECTORY.
pub(crate) const ATTR_DIRECTORY: u32 = 0x0010;
/// FILE_ATTRIBUTE_ARCHIVE.
pub(crate) const ATTR_ARCHIVE: u32 = 0x0020;
/// FILE_ATTRIBUTE_NORMAL: what a file with no other attribute reports.
pub(crate) const ATTR_NORMAL: u32 = 0x0080;

/// Files are refused beyond this size (STATUS_DISK_FULL), so that a client bug writing at a
/// wild offset fails the test instead of exhausting the machine's memory.
pub(crate) const MAX_FILE_SIZE: u64 = 8 << 30;

pub(crate) type NodeId = u64;

/// The root directory's id.
pub(crate) const ROOT: NodeId = 1;

/// FILETIME (100 ns since 1601) of now.
pub(crate) fn filetime_now() -> u64 {
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    116_444_736_000_000_000 + since_unix.as_nanos() as u64 / 100
}

#[derive(Clone, Debug)]
pub(crate) enum Content {
    File(Vec<u8>),
    /// Children by lower-cased name.
    Dir(BTreeMap<String, NodeId>),
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) id: NodeId,
    pub(crate) parent: NodeId,
    /// The name as created (case kept).
    pub(crate) name: String,
    pub(crate) content: Content,
    /// FILE_ATTRIBUTE_* other than DIRECTORY, which follows from the content.
    pub(crate) attributes: u32,
    pub(crate) created: u64,
    pub(crate) accessed: u64,
    pub(crate) written: u64,
    pub(crate) changed: u64,
    /// Set by a delete disposition or a delete-on-close open: gone once the last open closes,
    /// and no new open may be made meanwhile (STATUS_DELETE_PENDING).
    pub(crate) delete_pending: bool,
    /// The self-relative security descriptor a SET_INFO gave (or a test planted, bytes as
    /// they are); none: the empty descriptor.
    pub(crate) security: Option<Vec<u8>>,
}

impl Node {
    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.content, Content::Dir(_))
    }

    pub(crate) fn size(&self) -> u64 {
        match &self.content {
            Content::File(data) => data.len() as u64,
            Content::Dir(_) => 0,
        }
    }

    /// Allocation size as a file system with 4 KiB clusters reports it.
    pub(crate) fn allocation(&self) -> u64 {
        self.size().next_multiple_of(4096)
    }

    /// The FileAttributes field as the wire carries it.
    pub(crate) fn wire_attributes(&self) -> u32 {
        let mut a = self.attributes;
        if self.is_dir() {
            a |= ATTR_DIRECTORY;
        }
        if a == 0 {
            a = ATTR_NORMAL;
        }
        a
    }

    pub(crate) fn data(&self) -> Option<&Vec<u8>> {
        match &self.content {
            Content::File(d) => Some(d),
            Content::Dir(_) => None,
        }
    }

    pub(crate) fn children(&self) -> Option<&BTreeMap<String, NodeId>> {
        match &self.content {
            Content::Dir(c) => Some(c),
            Content::File(_) => None,
        }
    }

    /// Mark a change to the data (write, truncate).
    pub(crate) fn touch_data(&mut self) {
        let now = filetime_now();
        self.written = now;
        self.changed = now;
        self.attributes |= ATTR_ARCHIVE;
    }
}

/// One share's tree.
pub(crate) struct Files {
    nodes: HashMap<NodeId, Node>,
    next_id: NodeId,
}

/// The key a name is looked up by.
fn key(name: &str) -> String {
    name.to_lowercase()
}

/// Split a share-relative wire path (`a\b\c`, empty for the root) into its components,
/// refusing what no server accepts: empty components, `.` and `..`, and the characters
/// MS-FSCC 2.1.5.2 forbids in a name.
pub(crate) fn components(path: &str) -> Result<Vec<&str>, NtStatus> {
    let path = path.strip_prefix('\\').unwrap_or(path);
    if path.is_empty() {
        return Ok(Vec::new());
    }
    path.split('\\')
        .map(|c| {
            let bad = c.is_empty()
                || c == "."
                || c == ".."
                || c.chars().any(|ch| {
                    ch < ' ' || matches!(ch, '"' | '*' | '/' | ':' | '<' | '>' | '?' | '|')
                });
            if bad {
                Err(NtStatus::OBJECT_NAME_INVALID)
            } else {
                Ok(c)
            }
        })
        .collect()
}

impl Files {
    pub(crate) fn new() -> Files {
        let now = filetime_now();
        let root = Node {
            id: ROOT,
            parent: ROOT,
            name: String::new(),
            content: Content::Dir(BTreeMap::new()),
            attributes: 0,
            created: now,
            accessed: now,
            written: now,
            changed: now,
            delete_pending: false,
            security: None,
        };
        Files {
            nodes: HashMap::from([(ROOT, root)]),
            next_id: ROOT + 1,
        }
    }

    pub(crate) fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(&id)
    }

    /// The child `name` of directory `dir`.
    pub(crate) fn child(&self, dir: NodeId, name: &str) -> Option<NodeId> {
        self.get(dir)?.children()?.get(&key(name)).copied()
    }

    /// Resolve `parts`: Ok(id) when it exists; Err(OBJECT_PATH_NOT_FOUND) when a directory on
    /// the way is missing or is a file; Err(OBJECT_NAME_NOT_FOUND) when only the last is.
    pub(crate) fn lookup(&self, parts: &[&str]) -> Result<NodeId, NtStatus> {
        let mut at = ROOT;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let node = self.get(at).ok_or(NtStatus::OBJECT_PATH_NOT_FOUND)?;
            if !node.is_dir() {
                return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
            }
            at = match self.child(at, part) {
                Some(id) => id,
                None if last => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
                None => return Err(NtStatus::OBJECT_PATH_NOT_FOUND),
            };
        }
        Ok(at)
    }

    /// The directory that holds (or would hold) the last of `parts`.
    pub(crate) fn parent_of(&self, parts: &[&str]) -> Result<NodeId, NtStatus> {
        let Some((_, dirs)) = parts.split_last() else {
            return Ok(ROOT);
        };
        let dir = self
            .lookup(dirs)
            .map_err(|_| NtStatus::OBJECT_PATH_NOT_FOUND)?;
        if self.get(dir).is_some_and(Node::is_dir) {
            Ok(dir)
        } else {
            Err(NtStatus::OBJECT_PATH_NOT_FOUND)
        }
    }

    /// Make a new file or directory `name` in `dir`.
    pub(crate) fn create(
        &mut self,
        dir: NodeId,
        name: &str,
        is_dir: bool,
        attributes: u32,
    ) -> NodeId {
        let id = self.next_id;
        self.next_id += 1;
        let now = filetime_now();
        let content = if is_dir {
            Content::Dir(BTreeMap::new())
        } else {
            Content::File(Vec::new())
        };
        let node = Node {
            id,
            parent: dir,
            name: name.to_string(),
            content,
            attributes: attributes & !ATTR_DIRECTORY & !ATTR_NORMAL,
            created: now,
            accessed: now,
            written: now,
            changed: now,
            delete_pending: false,
            security: None,
        };
        self.nodes.insert(id, node);
        if let Some(Content::Dir(children)) = self.nodes.get_mut(&dir).map(|n| &mut n.content) {
            children.insert(key(name), id);
        }
        if let Some(parent) = self.nodes.get_mut(&dir) {
            parent.written = now;
            parent.changed = now;
        }
        id
    }

    /// Unlink `id` from its directory and forget it (and, for a directory, what it holds).
    pub(crate) fn remove(&mut self, id: NodeId) {
        let Some(node) = self.nodes.remove(&id) else {
            return;
        };
        if let Some(Content::Dir(children)) =
            self.nodes.get_mut(&node.parent).map(|n| &mut n.content)
        {
            children.remove(&key(&node.name));
        }
        if let Content::Dir(children) = node.content {
            for child in children.into_values() {
                self.remove(child);
            }
        }
    }

    /// Move `id` to `dir` under `name`; the caller has checked that nothing is in the way.
    pub(crate) fn rename(&mut self, id: NodeId, dir: NodeId, name: &str) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let (old_parent, old_key) = (node.parent, key(&node.name));
        if let Some(Content::Dir(children)) =
            self.nodes.get_mut(&old_parent).map(|n| &mut n.content)
        {
            children.remove(&old_key);
        }
        if let Some(Content::Dir(children)) = self.nodes.get_mut(&dir).map(|n| &mut n.content) {
            children.insert(key(name), id);
        }
        let now = filetime_now();
        if let Some(node) = self.nodes.get_mut(&id) {
            node.parent = dir;
            node.name = name.to_string();
            node.changed = now;
        }
    }

    /// Whether `ancestor` is `id` or one of the directories above it.
    pub(crate) fn is_within(&self, id: NodeId, ancestor: NodeId) -> bool {
        let mut at = id;
        loop {
            if at == ancestor {
                return true;
            }
            match self.get(at) {
                Some(n) if n.id != ROOT => at = n.parent,
                _ => return false,
            }
        }
    }

    /// The share-relative path of `id` (`a\b`), empty for the root.
    pub(crate) fn path_of(&self, id: NodeId) -> String {
        let mut parts = Vec::new();
        let mut at = id;
        while at != ROOT {
            let Some(n) = self.get(at) else { break };
            parts.push(n.name.clone());
            at = n.parent;
        }
        parts.reverse();
        parts.join("\\")
    }

    /// Total bytes held, for the FS size queries.
    pub(crate) fn used_bytes(&self) -> u64 {
        self.nodes.values().map(Node::allocation).sum()
    }
}
