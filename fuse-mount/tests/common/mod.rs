//! What the in-process tests of the mount's file system share: a session with the in-memory
//! server.

pub(crate) use smb3_tests::in_memory::share_of;
