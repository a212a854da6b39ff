//! Where a person says a file is: `smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH`,
//! `//HOST/SHARE/PATH` (or `\\HOST\SHARE\PATH`), or a local path.
//!
//! The text comes from a command line or a configuration file, so it is checked rather than
//! trusted: a URL must name a host and a share, its port must be a number, its `%`-escapes
//! must be whole and form UTF-8, and a password in it is refused (it would end up in shell
//! histories and process lists) without being repeated in the error.
//!
//! ```
//! use smb3_client::location::{Location, RemotePath};
//! let Location::Remote(r) = Location::parse("smb://CORP;alice@nas:4455/data/reports/q3.csv")?
//! else { unreachable!() };
//! assert_eq!((r.host.as_str(), r.port, r.share.as_str()), ("nas", Some(4455), "data"));
//! assert_eq!(r.path, "reports/q3.csv");
//! assert_eq!(r.server(), "nas:4455"); // what `Client::connect` takes
//! # Ok::<(), smb3_client::location::LocationError>(())
//! ```

use std::fmt;

/// A remote location on a share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemotePath {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// The port the location names. `None`: the transport's own, which `Client::connect`
    /// picks (445 over TCP, 443 over QUIC).
    pub port: Option<u16>,
    /// User from the URL.
    pub user: Option<String>,
    /// Domain from the URL.
    pub domain: Option<String>,
    /// Share name.
    pub share: String,
    /// Path inside the share, `/`-separated, without a leading slash ("" = share root).
    pub path: String,
    /// The location ended in `/` (or `\`): it names a directory, as it does for `cp`.
    pub names_dir: bool,
}

impl RemotePath {
    /// `host:port`, or `host` when the location names no port, as `Client::connect` takes
    /// it.
    pub fn server(&self) -> String {
        match (self.host.contains(':'), self.port) {
            (true, Some(port)) => format!("[{}]:{port}", self.host),
            (true, None) => format!("[{}]", self.host),
            (false, Some(port)) => format!("{}:{port}", self.host),
            (false, None) => self.host.clone(),
        }
    }

    /// The same server and share with another path.
    pub fn with_path(&self, path: String) -> RemotePath {
        RemotePath {
            path,
            names_dir: false,
            ..self.clone()
        }
    }

    /// `//host/share/path` for messages.
    pub fn display(&self) -> String {
        if self.path.is_empty() {
            format!("//{}/{}", self.host, self.share)
        } else {
            format!("//{}/{}/{}", self.host, self.share, self.path)
        }
    }
}

/// A source or destination as a person gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// On a share.
    Remote(RemotePath),
    /// On the local file system.
    Local(std::path::PathBuf),
}

impl Location {
    /// Parse an argument: URLs and UNC paths are remote, anything else local.
    pub fn parse(arg: &str) -> Result<Location, LocationError> {
        if let Some(rest) = arg.strip_prefix("smb://") {
            return parse_remote(arg, rest, true).map(Location::Remote);
        }
        if let Some(rest) = arg.strip_prefix("//").or_else(|| arg.strip_prefix("\\\\")) {
            return parse_remote(arg, &rest.replace('\\', "/"), false).map(Location::Remote);
        }
        Ok(Location::Local(arg.into()))
    }
}

/// Why a location is not a valid one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocationProblem {
    /// Nothing names a share (`smb://host`, `smb://host/`).
    NoShareName,
    /// Nothing names a host (`smb://:445/share`).
    NoHost,
    /// The port is not a number from 0 to 65535.
    BadPort,
    /// A `[` opens an IPv6 address that no `]` closes.
    UnterminatedIpv6,
    /// A UNC path (`//user@host/...`) names a user: only `smb://` URLs can.
    UserInUncPath,
    /// The URL holds a password (`smb://user:password@host/...`).
    PasswordInUrl,
    /// A `%` is not followed by two characters.
    TruncatedEscape,
    /// A `%` is not followed by two hexadecimal digits.
    BadEscape,
    /// The bytes the `%`-escapes stand for are not UTF-8.
    EscapesNotUtf8,
}

impl fmt::Display for LocationProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LocationProblem::NoShareName => "no share name",
            LocationProblem::NoHost => "no host",
            LocationProblem::BadPort => "bad port",
            LocationProblem::UnterminatedIpv6 => "unterminated [IPv6]",
            LocationProblem::UserInUncPath => "user names go in smb:// URLs, not UNC paths",
            LocationProblem::PasswordInUrl => "passwords are not accepted in URLs",
            LocationProblem::TruncatedEscape => "truncated %-escape",
            LocationProblem::BadEscape => "bad %-escape",
            LocationProblem::EscapesNotUtf8 => "%-escapes do not form UTF-8",
        })
    }
}

/// A location that could not be parsed: `LOCATION: invalid location: PROBLEM`. A password
/// in the URL is never part of the message: it shows as `<hidden>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationError {
    shown: String,
    problem: LocationProblem,
}

impl LocationError {
    /// What is wrong.
    pub fn problem(&self) -> LocationProblem {
        self.problem
    }

    /// The location as given, with any password replaced by `<hidden>`.
    pub fn location(&self) -> &str {
        &self.shown
    }
}

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: invalid location: {}", self.shown, self.problem)
    }
}

impl std::error::Error for LocationError {}

fn percent_decode(s: &str) -> Result<String, LocationProblem> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or(LocationProblem::TruncatedEscape)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| LocationProblem::BadEscape)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| LocationProblem::EscapesNotUtf8)
}

fn parse_remote(orig: &str, rest: &str, url: bool) -> Result<RemotePath, LocationError> {
    let bad = |problem| LocationError {
        shown: orig.to_string(),
        problem,
    };
    let (authority, path) = rest
        .split_once('/')
        .ok_or_else(|| bad(LocationProblem::NoShareName))?;
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) if url => (Some(u), h),
        Some(_) => return Err(bad(LocationProblem::UserInUncPath)),
        None => (None, authority),
    };
    let (mut domain, mut user) = (None, None);
    if let Some(u) = userinfo {
        // A password in the URL would end up in shell history and process lists. The error
        // shows the URL with the password left out: it would otherwise be echoed into
        // terminals, logs and CI output too.
        let u = match percent_decode(u) {
            Ok(u) if !u.contains(':') => u,
            _ if u.contains(':') || u.to_ascii_lowercase().contains("%3a") => {
                let name = u.split([':', '%']).next().unwrap_or_default();
                return Err(LocationError {
                    shown: format!("smb://{name}:<hidden>@{hostport}/{path}"),
                    problem: LocationProblem::PasswordInUrl,
                });
            }
            Ok(u) => u,
            Err(e) => return Err(bad(e)),
        };
        match u.split_once(';') {
            Some((d, n)) => {
                domain = Some(d.to_string());
                user = Some(n.to_string());
            }
            None => user = Some(u),
        }
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad(LocationProblem::UnterminatedIpv6))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad(LocationProblem::BadPort))?),
            None => None,
        };
        (h.to_string(), port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (
                h.to_string(),
                Some(p.parse().map_err(|_| bad(LocationProblem::BadPort))?),
            ),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(bad(LocationProblem::NoHost));
    }
    let path = if url {
        percent_decode(path).map_err(bad)?
    } else {
        path.to_string()
    };
    let (share, inner) = path.split_once('/').unwrap_or((&path, ""));
    if share.is_empty() {
        return Err(bad(LocationProblem::NoShareName));
    }
    let names_dir = inner.ends_with('/');
    let inner = inner
        .split('/')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    Ok(RemotePath {
        host,
        port,
        user,
        domain,
        share: share.to_string(),
        path: inner,
        names_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(s: &str) -> RemotePath {
        match Location::parse(s).unwrap() {
            Location::Remote(r) => r,
            Location::Local(_) => panic!("{s} parsed as local"),
        }
    }

    fn problem(s: &str) -> LocationProblem {
        Location::parse(s).unwrap_err().problem()
    }

    #[test]
    fn urls() {
        let r = remote("smb://CORP;alice@nas.example:4455/data/dir/f%C3%A9.txt");
        assert_eq!(r.host, "nas.example");
        assert_eq!(r.port, Some(4455));
        assert_eq!(r.server(), "nas.example:4455");
        assert_eq!(r.domain.as_deref(), Some("CORP"));
        assert_eq!(r.user.as_deref(), Some("alice"));
        assert_eq!(r.share, "data");
        assert_eq!(r.path, "dir/fé.txt");
        assert!(!r.names_dir);
        assert!(remote("smb://h/s/dir/").names_dir);
        assert!(remote(r"\\h\s\dir\").names_dir);
        assert!(
            !remote("smb://h/s/").names_dir,
            "the share's root is a directory anyway"
        );
        let r = remote("smb://[fd00::1]/s");
        assert_eq!(
            (r.host.as_str(), r.port, r.path.as_str()),
            ("fd00::1", None, "")
        );
        assert_eq!(r.server(), "[fd00::1]", "the transport picks the port");
        assert_eq!(remote("smb://[fd00::1]:446/s").server(), "[fd00::1]:446");
        assert_eq!(remote("//h/s").server(), "h");
    }

    #[test]
    fn unc() {
        let r = remote("//10.0.0.1/plain/a//b/");
        assert_eq!(
            (r.host.as_str(), r.share.as_str(), r.path.as_str()),
            ("10.0.0.1", "plain", "a/b")
        );
        let r = remote(r"\\srv\share\x\y");
        assert_eq!((r.share.as_str(), r.path.as_str()), ("share", "x/y"));
    }

    #[test]
    fn errors_and_local() {
        assert_eq!(problem("smb://host"), LocationProblem::NoShareName);
        assert_eq!(problem("smb://host/"), LocationProblem::NoShareName);
        assert_eq!(problem("smb://u:pw@host/s"), LocationProblem::PasswordInUrl);
        for url in [
            "smb://u:s3cret@host/s/p",
            "smb://u%3As3cret@host/s",
            "smb://d;u:s3cret@h/s",
        ] {
            let e = Location::parse(url).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "the password is echoed: {e}");
            assert!(
                e.contains("<hidden>") && e.contains("passwords are not accepted"),
                "{e}"
            );
        }
        assert_eq!(problem("smb://:12/s"), LocationProblem::NoHost);
        assert_eq!(problem("smb://h:99999/s"), LocationProblem::BadPort);
        assert_eq!(
            problem("smb://[fd00::1/s"),
            LocationProblem::UnterminatedIpv6
        );
        assert_eq!(problem("//u@h/s"), LocationProblem::UserInUncPath);
        assert_eq!(problem("smb://h/s/a%4"), LocationProblem::TruncatedEscape);
        assert_eq!(problem("smb://h/s/a%zz"), LocationProblem::BadEscape);
        assert_eq!(problem("smb://h/s/%ff"), LocationProblem::EscapesNotUtf8);
        assert_eq!(
            Location::parse("smb://h").unwrap_err().to_string(),
            "smb://h: invalid location: no share name"
        );
        assert_eq!(
            Location::parse("./x").unwrap(),
            Location::Local("./x".into())
        );
    }
}
