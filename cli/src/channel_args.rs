//! The multichannel options `smbcp` and `smbctl` share.

use smb3_client::{ClientConfig, Dispatch};

/// How many channels to open and how to spread requests over them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ChannelArgs {
    /// Most channels for the session, the first included (default 32).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub max_channels: Option<u16>,
    /// Channels per interface pair, RSS-capable or not (default 4 where both ends are RSS,
    /// else 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub channels_per_nic: Option<u16>,
    /// Use only the connection the session starts on.
    #[arg(long)]
    pub no_multichannel: bool,
    /// How requests are spread: least-loaded (each to the channel with the fewest bytes in
    /// flight; smbcp's default) or round-robin (the library's and smbctl's default).
    #[arg(long, value_name = "POLICY", value_parser = parse_dispatch)]
    pub dispatch: Option<Dispatch>,
}

fn parse_dispatch(s: &str) -> Result<Dispatch, String> {
    s.parse()
}

impl ChannelArgs {
    /// Apply the options to `config`.
    pub fn apply(&self, config: &mut ClientConfig) {
        if let Some(n) = self.max_channels {
            config.max_channels = usize::from(n);
        }
        if let Some(n) = self.channels_per_nic {
            config.channels_per_rss_nic = usize::from(n);
            config.channels_per_nic = usize::from(n);
        }
        if self.no_multichannel {
            config.multichannel = false;
        }
        if let Some(d) = self.dispatch {
            config.dispatch = d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        channels: ChannelArgs,
    }

    #[test]
    fn options_reach_the_config() {
        let cli = Cli::parse_from([
            "x",
            "--max-channels",
            "6",
            "--channels-per-nic",
            "2",
            "--dispatch",
            "least-loaded",
        ]);
        let mut config = ClientConfig::default();
        cli.channels.apply(&mut config);
        assert_eq!(config.max_channels, 6);
        assert_eq!(config.channels_per_rss_nic, 2);
        assert_eq!(config.channels_per_nic, 2);
        assert_eq!(config.dispatch, Dispatch::LeastLoaded);
        assert!(config.multichannel);
        let cli = Cli::parse_from(["x", "--no-multichannel"]);
        cli.channels.apply(&mut config);
        assert!(!config.multichannel);
        assert!(Cli::try_parse_from(["x", "--dispatch", "random"]).is_err());
        assert!(Cli::try_parse_from(["x", "--max-channels", "0"]).is_err());
    }
}
