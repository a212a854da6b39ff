//! Download one file from a share with the library, keeping many chunk requests in flight, and
//! print the throughput.
//!
//! ```sh
//! SMB_PASSWORD=... cargo run --release -p smb3-examples --example copy_down -- \
//!     SERVER[:PORT] SHARE REMOTE/PATH LOCAL_FILE USER [DOMAIN]
//! ```

use std::time::Instant;

use smb3_client::{Client, ClientConfig, OpenOptions, UserCredentials};
use tokio::io::AsyncWriteExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 || args[0] == "--help" {
        eprintln!("usage: copy_down SERVER[:PORT] SHARE REMOTE/PATH LOCAL_FILE USER [DOMAIN]  (password in SMB_PASSWORD)");
        std::process::exit(2);
    }
    let creds = UserCredentials {
        user: args[4].clone(),
        domain: args.get(5).cloned().unwrap_or_default(),
        password: std::env::var("SMB_PASSWORD")
            .map_err(|_| "set SMB_PASSWORD")?
            .into(),
    };
    let client = Client::connect(&args[0], &creds, ClientConfig::default()).await?;
    println!(
        "connected: SMB {}, signing {:?}, cipher {:?}",
        client.dialect(),
        client.signing(),
        client.cipher()
    );
    let share = client.share(&args[1]).await?;
    let file = share.open(&args[2], &OpenOptions::new().read(true)).await?;
    let size = file.size_at_open();

    // The reader keeps `io_depth` READs in flight; copying it into a local file streams the
    // whole thing without holding it in memory.
    let start = Instant::now();
    let mut local = tokio::fs::File::create(&args[3]).await?;
    let copied = tokio::io::copy(&mut file.reader(), &mut local).await?;
    local.flush().await?;
    let secs = start.elapsed().as_secs_f64();
    file.close().await?;
    assert_eq!(copied, size, "file changed size while copying");
    println!(
        "{copied} bytes in {secs:.2} s ({:.1} MB/s)",
        copied as f64 / secs / 1e6
    );
    Ok(())
}
