//! Keeping secrets out of logs. At debug and trace the security package this crate
//! authenticates with (sspi) writes the NTLM AUTHENTICATE message (crackable offline),
//! Kerberos tickets, the ticket's session key and the SMB session key. A program that logs
//! through `tracing` puts [`without_secrets`] beside its own filter:
//!
//! ```
//! use tracing_subscriber::{filter::filter_fn, layer::SubscriberExt as _, Layer as _};
//! let layer = tracing_subscriber::fmt::layer()
//!     .with_filter(tracing_subscriber::EnvFilter::new("trace"))
//!     .with_filter(filter_fn(smb3_client::log_filter::without_secrets));
//! let _subscriber = tracing_subscriber::registry().with(layer);
//! ```
//!
//! A second filter on the layer rather than `sspi=info` directives added to the program's
//! own: such a directive loses to a more specific `sspi::ntlm=trace` or a span directive
//! (`[span]=trace`), and it raises those targets to info when the program asks for less.

/// Crates that log secrets below `info`: the security package (sspi 0.23) and its Kerberos
/// codecs (the picky crates).
pub const SECRET_LOGGING_TARGETS: &[&str] = &["sspi", "picky", "picky_krb", "picky_asn1"];

/// Whether a log line or span may be written: nothing below `info` from the targets of
/// [`SECRET_LOGGING_TARGETS`], whatever the program's filter asks, a more specific directive
/// such as `sspi::ntlm=trace` included.
pub fn without_secrets(meta: &tracing::Metadata<'_>) -> bool {
    let target = meta.target();
    let secret = SECRET_LOGGING_TARGETS.iter().any(|t| {
        target
            .strip_prefix(t)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    });
    !secret || *meta.level() <= tracing::Level::INFO
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;

    /// Whether logging at `level` is on for an sspi target (or another) under
    /// `RUST_LOG=rust_log`, filtered as the module's example does.
    fn enabled(rust_log: &str, sspi: bool, level: Level) -> bool {
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new(rust_log))
            .with_filter(tracing_subscriber::filter::filter_fn(without_secrets));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || match (sspi, level) {
            (true, Level::TRACE) => tracing::enabled!(target: "sspi::ntlm", Level::TRACE),
            (true, Level::DEBUG) => tracing::enabled!(target: "sspi", Level::DEBUG),
            (true, _) => tracing::enabled!(target: "sspi::negotiate", Level::INFO),
            (false, _) => tracing::enabled!(target: "smb3_client::channel", Level::TRACE),
        })
    }

    #[test]
    fn no_log_level_lets_the_security_package_write_secrets() {
        for rust_log in [
            "trace",
            "sspi=trace",
            "trace,sspi=trace",
            "sspi::ntlm=trace",
        ] {
            assert!(!enabled(rust_log, true, Level::TRACE), "{rust_log}");
            assert!(!enabled(rust_log, true, Level::DEBUG), "{rust_log}");
        }
        assert!(enabled("trace", true, Level::INFO));
        assert!(
            enabled("trace", false, Level::TRACE),
            "the rest still traces"
        );
        assert!(
            Level::TRACE > Level::INFO,
            "levels order from error up to trace"
        );
    }
}
