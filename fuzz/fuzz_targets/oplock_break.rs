#![no_main]
// The body is shared with the replay test: see smb3_proto::fuzzing::oplock_break.
libfuzzer_sys::fuzz_target!(|data: &[u8]| smb3_proto::fuzzing::oplock_break(data));
