//! Repository URLs and the credentials that go with them (pure).
//!
//! - [`redact`]: a URL as it may be printed (status, API, logs, errors): without any
//!   `user:password@` part;
//! - [`problems`]: what validation refuses — credentials written into the URL (they
//!   belong in `tokenFile`, which is read at fetch time and never printed), and a token
//!   over plain `http://` unless the repository says `insecure: true`;
//! - [`same_host`]: whether the URL Git asks credentials for (after any redirect) is on
//!   the configured host, so a token is never handed to another host.
//!
//! URLs are `https://`, `http://`, `ssh://`, `git://`, or scp-style
//! `[user@]host:owner/repo.git`.

/// Scheme, host and port of a URL (port defaulted by scheme; scp-style is `ssh`, 22).
fn origin(url: &str) -> Option<(String, String, Option<u16>)> {
    if let Ok(u) = url::Url::parse(url)
        && u.has_host()
    {
        let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        return Some((u.scheme().to_string(), host, u.port_or_known_default().or(default_port(u.scheme()))));
    }
    // scp-style: [user@]host:path (no scheme, a colon before any slash)
    let (before, _) = url.split_once(':')?;
    if before.contains('/') || before.is_empty() {
        return None;
    }
    let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
    Some(("ssh".into(), host.to_ascii_lowercase(), Some(22)))
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "ssh" => Some(22),
        "git" => Some(9418),
        _ => None,
    }
}

/// `url` without its `user:password@` part (an SSH user name alone is kept: `git@` is
/// not a secret), for printing. A URL that does not parse is returned with everything
/// up to the last `@` before the host replaced by `***@`.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.has_host() => {
            let keep_user = u.scheme() == "ssh" && u.password().is_none();
            if !keep_user {
                let _ = u.set_username("");
            }
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => match url.split_once("://") {
            Some((scheme, rest)) => {
                let authority_end = rest.find('/').unwrap_or(rest.len());
                match rest[..authority_end].rfind('@') {
                    Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                    None => url.to_string(),
                }
            }
            None => url.to_string(),
        },
    }
}

/// Whether `url` carries a secret in its user-info: a password, or any user name over
/// HTTP(S) (forges take a token as the user name too).
pub fn has_credentials(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(u) if u.has_host() => u.password().is_some() || (u.scheme().starts_with("http") && !u.username().is_empty()),
        _ => false,
    }
}

/// What is wrong with repository `name`'s `url` given whether it has a `tokenFile`
/// (`token`) and `insecure: true`; empty when nothing is.
pub fn problems(name: &str, url: &str, token: bool, insecure: bool) -> Vec<String> {
    let mut out = Vec::new();
    if has_credentials(url) {
        out.push(format!(
            "repository `{name}`: url {} carries credentials: write the token to a file and name it with tokenFile (and username)",
            redact(url)
        ));
    }
    if token && !insecure && url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
        out.push(format!(
            "repository `{name}`: tokenFile with an http:// url would send the token unencrypted: use https://, or set insecure: true"
        ));
    }
    out
}

/// Whether `asked` (the URL Git asks credentials for, possibly after a redirect) is on
/// the same scheme, host and port as the `configured` URL. Credentials are given only
/// then.
pub fn same_host(configured: &str, asked: &str) -> bool {
    match (origin(configured), origin(asked)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_urls_keep_no_secret() {
        for (url, want) in [
            ("https://user:ghp_s3cret@github.com/acme/fleet.git", "https://github.com/acme/fleet.git"),
            ("https://ghp_s3cret@github.com/acme/fleet.git", "https://github.com/acme/fleet.git"),
            ("http://x:tok@127.0.0.1:3000/fleet.git", "http://127.0.0.1:3000/fleet.git"),
            ("ssh://git@host:2222/fleet.git", "ssh://git@host:2222/fleet.git"),
            ("ssh://git:pw@host/fleet.git", "ssh://host/fleet.git"),
            ("git@github.com:acme/fleet.git", "git@github.com:acme/fleet.git"),
            ("https://git.example/fleet.git", "https://git.example/fleet.git"),
            ("weird://user:pw@", "weird://***@"),
        ] {
            assert_eq!(redact(url), want, "{url}");
        }
    }

    #[test]
    fn validation_points_to_token_file_and_refuses_clear_text_tokens() {
        let p = problems("fleet", "https://oauth2:ghp_s3cret@github.com/acme/fleet.git", false, false);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("tokenFile") && !p[0].contains("ghp_s3cret"), "{}", p[0]);
        assert!(p[0].contains("https://github.com/acme/fleet.git"), "{}", p[0]);
        let p = problems("fleet", "http://git.lab:3000/fleet.git", true, false);
        assert!(p.len() == 1 && p[0].contains("insecure: true"), "{p:?}");
        assert_eq!(problems("fleet", "HTTP://git.lab:3000/fleet.git", true, false).len(), 1, "any case");
        assert!(problems("fleet", "http://git.lab:3000/fleet.git", true, true).is_empty());
        assert!(problems("fleet", "http://git.lab:3000/fleet.git", false, false).is_empty(), "no token, no risk");
        assert!(problems("fleet", "https://git.lab/fleet.git", true, false).is_empty());
        assert!(problems("fleet", "ssh://git@git.lab/fleet.git", false, false).is_empty(), "an SSH user is no secret");
        assert!(problems("fleet", "git@git.lab:fleet.git", false, false).is_empty());
    }

    #[test]
    fn credentials_only_for_the_configured_origin() {
        let configured = "https://git.example/acme/fleet.git";
        for (asked, same) in [
            ("https://git.example/acme/fleet.git/info/refs?service=git-upload-pack", true),
            ("https://GIT.example:443/other.git", true),
            ("https://evil.example/acme/fleet.git", false),
            ("http://git.example/acme/fleet.git", false),
            ("https://git.example:8443/acme/fleet.git", false),
            ("not a url", false),
        ] {
            assert_eq!(same_host(configured, asked), same, "{asked}");
        }
        assert!(same_host("git@git.example:acme/fleet.git", "ssh://git@git.example/acme/fleet.git"));
        assert!(!same_host("git@git.example:acme/fleet.git", "ssh://git@other.example/acme/fleet.git"));
    }
}
