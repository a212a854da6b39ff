#![no_main]
// The body is shared with the replay test: see smb3_client::fuzzing::reply_dispatch.
libfuzzer_sys::fuzz_target!(|data: &[u8]| smb3_client::fuzzing::reply_dispatch(data));
