#![no_main]
// The body is shared with the replay test: see smb3_client::fuzzing::transport_frames.
libfuzzer_sys::fuzz_target!(|data: &[u8]| smb3_client::fuzzing::transport_frames(data));
