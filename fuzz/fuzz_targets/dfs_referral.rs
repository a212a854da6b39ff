#![no_main]
// The body is shared with the replay test: see smb3_proto::fuzzing::dfs_referral.
libfuzzer_sys::fuzz_target!(|data: &[u8]| smb3_proto::fuzzing::dfs_referral(data));
