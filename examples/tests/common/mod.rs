//! Running an example binary the way its user would, against a testbed.

use std::process::Output;

use smb3_tests::Testbed;

/// Run the example `name` in the testbed's client namespace with the test user's password
/// in SMB_PASSWORD, as `name SERVER:445 SHARE ARGS... USER DOMAIN`.
pub(crate) fn run_example(tb: &Testbed, name: &str, share: &str, args: &[&str]) -> Output {
    // Cargo builds the package's examples before its integration tests, in `examples/`
    // beside the `deps/` this test runs from (wherever CARGO_TARGET_DIR puts them).
    let exe = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("../examples")
        .join(name);
    let server = format!("{}:445", tb.server_addr(1));
    let mut all = vec![server.as_str(), share];
    all.extend_from_slice(args);
    all.extend([tb.user(), tb.domain()]);
    tb.client_command(&exe)
        .env("SMB_PASSWORD", tb.password())
        .args(&all)
        .output()
        .unwrap_or_else(|e| panic!("run the example {}: {e}", exe.display()))
}
