//! The inode table: FUSE node ids to share paths, with the kernel's lookup counts.
//!
//! A node is stored as (parent node, name), so renaming a directory moves everything under
//! it at once. Node ids are the server's file ids (MS-FSCC IndexNumber) where it reports
//! them, so `ls -i`, `find -inum`, hard links and tools that compare `st_ino` see numbers
//! that stay the same across lookups, opens and remounts; the root is always 1 (FUSE_ROOT_ID).
//! A server id that would clash (0, 1, or one in the synthetic range) gets a synthetic id.

use std::collections::HashMap;

/// The root's node id (FUSE_ROOT_ID).
pub const ROOT: u64 = 1;

/// Synthetic ids live above this (no Samba id has the top bit set: it packs a 32-bit device
/// number above a 32-bit inode number).
const SYNTHETIC_BASE: u64 = 1 << 63;

/// Deepest path walked before giving up (guards against a cycle from a confused server).
const MAX_DEPTH: usize = 4096;

/// Whether share path `p` is `path` or a path below it.
pub fn at_or_below(p: &str, path: &str) -> bool {
    p == path || (p.starts_with(path) && p.as_bytes().get(path.len()) == Some(&b'/'))
}

#[derive(Debug)]
struct Node {
    /// The names the node is known by, as (parent node, name); more than one for a file with
    /// hard links. The last is the latest seen, the one paths are built from. Empty once
    /// every name was unlinked or replaced: the node is then unreachable by path.
    names: Vec<(u64, String)>,
    /// Lookups the kernel holds (each entry reply adds one; FORGET takes them back).
    lookups: u64,
}

impl Node {
    fn drop_name(&mut self, parent: u64, name: &str) {
        self.names.retain(|(p, n)| !(*p == parent && n == name));
    }
}

/// Node id ↔ (parent, name), with lookup counts.
#[derive(Debug)]
pub struct InodeTable {
    nodes: HashMap<u64, Node>,
    children: HashMap<(u64, String), u64>,
    next_synthetic: u64,
}

impl Default for InodeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl InodeTable {
    /// A table holding only the root.
    pub fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                names: vec![(ROOT, String::new())],
                lookups: 1,
            },
        );
        InodeTable {
            nodes,
            children: HashMap::new(),
            next_synthetic: SYNTHETIC_BASE,
        }
    }

    /// Number of nodes (the root included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether only the root is known.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// The path of `ino` relative to the mount's root (`a/b/c`, "" for the root); `None`
    /// for an unknown or unlinked node.
    pub fn path(&self, ino: u64) -> Option<String> {
        let mut parts = Vec::new();
        let mut at = ino;
        for _ in 0..MAX_DEPTH {
            if at == ROOT {
                parts.reverse();
                return Some(parts.join("/"));
            }
            let (parent, name) = self.nodes.get(&at)?.names.last()?;
            parts.push(name.as_str());
            at = *parent;
        }
        None
    }

    /// The path of `name` inside the directory `parent`.
    pub fn child_path(&self, parent: u64, name: &str) -> Option<String> {
        let dir = self.path(parent)?;
        Some(if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        })
    }

    /// The id `(parent, name)` with server file id `file_id` is shown as, without taking a
    /// lookup (for plain READDIR entries).
    pub fn peek(&self, parent: u64, name: &str, file_id: u64) -> u64 {
        if let Some(&ino) = self.children.get(&(parent, name.to_string())) {
            return ino;
        }
        if usable(file_id) {
            file_id
        } else {
            // Not remembered: any id unlikely to clash does for d_ino.
            SYNTHETIC_BASE - 1
        }
    }

    /// Record that the kernel now holds one more lookup of `(parent, name)`, whose server
    /// file id is `file_id`; returns its node id.
    pub fn remember(&mut self, parent: u64, name: &str, file_id: u64) -> u64 {
        let key = (parent, name.to_string());
        let existing = self.children.get(&key).copied();
        let ino = if usable(file_id) {
            file_id
        } else if let Some(ino) = existing.filter(|i| *i >= SYNTHETIC_BASE) {
            ino
        } else {
            self.next_synthetic += 1;
            self.next_synthetic
        };
        if let Some(old) = existing.filter(|old| *old != ino) {
            // The name now holds another file (replaced behind our back).
            if let Some(n) = self.nodes.get_mut(&old) {
                n.drop_name(parent, name);
            }
        }
        let node = self.nodes.entry(ino).or_insert_with(|| Node {
            names: Vec::new(),
            lookups: 0,
        });
        // Another name of the same file (a hard link), or the file moved: the latest name is
        // the one paths are built from; the others stay until unlinked.
        node.drop_name(parent, name);
        node.names.push(key.clone());
        node.lookups += 1;
        self.children.insert(key, ino);
        ino
    }

    /// The kernel dropped `n` lookups of `ino`; a node with none left is removed.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            for key in std::mem::take(&mut node.names) {
                if self.children.get(&key) == Some(&ino) {
                    self.children.remove(&key);
                }
            }
            self.nodes.remove(&ino);
        }
    }

    /// `(parent, name)` was removed on the server; the node's other names (hard links) stay.
    pub fn unlinked(&mut self, parent: u64, name: &str) {
        if let Some(ino) = self.children.remove(&(parent, name.to_string())) {
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.drop_name(parent, name);
            }
        }
    }

    /// `(parent, name)` was renamed to `(new_parent, new_name)` on the server, replacing
    /// whatever had that name.
    pub fn renamed(&mut self, parent: u64, name: &str, new_parent: u64, new_name: &str) {
        self.unlinked(new_parent, new_name);
        if let Some(ino) = self.children.remove(&(parent, name.to_string())) {
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.drop_name(parent, name);
                n.names.push((new_parent, new_name.to_string()));
            }
            self.children
                .insert((new_parent, new_name.to_string()), ino);
        }
    }

    /// The node known as `name` in `parent`, if the kernel holds one.
    pub fn child(&self, parent: u64, name: &str) -> Option<u64> {
        self.children.get(&(parent, name.to_string())).copied()
    }

    /// The names known in `parent`, with their nodes.
    pub fn children_of(&self, parent: u64) -> Vec<(String, u64)> {
        self.children
            .iter()
            .filter(|((p, _), _)| *p == parent)
            .map(|((_, name), &ino)| (name.clone(), ino))
            .collect()
    }

    /// Lookups held on `ino` (0 when unknown).
    pub fn lookups(&self, ino: u64) -> u64 {
        self.nodes.get(&ino).map_or(0, |n| n.lookups)
    }
}

fn usable(file_id: u64) -> bool {
    file_id > ROOT && file_id < SYNTHETIC_BASE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_means_a_whole_path_component_further() {
        assert!(at_or_below("d", "d"));
        assert!(at_or_below("d/x", "d"));
        assert!(at_or_below("d/x/y", "d/x"));
        assert!(!at_or_below("dx", "d"));
        assert!(!at_or_below("e/d", "d"));
    }

    #[test]
    fn paths_follow_renames_and_forgets_remove() {
        let mut t = InodeTable::new();
        let d = t.remember(ROOT, "dir", 100);
        assert_eq!(d, 100);
        let f = t.remember(d, "f.txt", 200);
        assert_eq!(t.path(f).as_deref(), Some("dir/f.txt"));
        assert_eq!(t.child_path(d, "x").as_deref(), Some("dir/x"));
        assert_eq!(t.child_path(ROOT, "x").as_deref(), Some("x"));
        // Renaming the directory moves its children.
        t.renamed(ROOT, "dir", ROOT, "moved");
        assert_eq!(t.path(f).as_deref(), Some("moved/f.txt"));
        // A second lookup, then forgetting both.
        assert_eq!(t.remember(d, "f.txt", 200), f);
        assert_eq!(t.lookups(f), 2);
        t.forget(f, 1);
        assert_eq!(t.path(f).as_deref(), Some("moved/f.txt"));
        t.forget(f, 1);
        assert_eq!(t.path(f), None);
        assert_eq!(t.len(), 2);
        t.forget(ROOT, 10);
        assert_eq!(t.path(ROOT).as_deref(), Some(""));
    }

    #[test]
    fn ids_without_a_server_id_are_synthetic_and_stable() {
        let mut t = InodeTable::new();
        let a = t.remember(ROOT, "a", 0);
        let b = t.remember(ROOT, "b", 1);
        assert!(a >= SYNTHETIC_BASE && b >= SYNTHETIC_BASE && a != b);
        assert_eq!(t.remember(ROOT, "a", 0), a);
        assert_eq!(t.peek(ROOT, "a", 0), a);
        assert_eq!(t.peek(ROOT, "zz", 77), 77);
    }

    #[test]
    fn unlink_replace_and_hard_links() {
        let mut t = InodeTable::new();
        let a = t.remember(ROOT, "a", 10);
        let b = t.remember(ROOT, "b", 11);
        t.renamed(ROOT, "a", ROOT, "b");
        assert_eq!(t.path(a).as_deref(), Some("b"));
        assert_eq!(t.path(b), None, "the replaced file has no name");
        t.unlinked(ROOT, "b");
        assert_eq!(t.path(a), None);
        // A hard link: one id, the latest name is used.
        let x = t.remember(ROOT, "x", 20);
        let y = t.remember(ROOT, "y", 20);
        assert_eq!(x, y);
        assert_eq!(t.path(x).as_deref(), Some("y"));
        assert_eq!(t.lookups(x), 2);
        // Unlinking one name leaves the file reachable by the other (link, unlink, link
        // again: pjdfstest link/10.t).
        t.unlinked(ROOT, "y");
        assert_eq!(t.path(x).as_deref(), Some("x"));
        let z = t.remember(ROOT, "z", 20);
        assert_eq!(t.path(z).as_deref(), Some("z"));
        t.unlinked(ROOT, "z");
        t.unlinked(ROOT, "x");
        assert_eq!(t.path(x), None, "no name left");
        // Forgetting the node drops every name it had.
        t.forget(x, 3);
        assert_eq!(t.peek(ROOT, "x", 0), SYNTHETIC_BASE - 1);
    }
}
