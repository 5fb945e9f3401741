//! Repository identity: one normalized key for every URL shape of a repository.

use std::fmt;

use serde::Serialize;

use super::body::percent_decode;

/// Normalized repository identity `host/path`, e.g. `gitea.example.invalid/acme/platform-config`.
///
/// Built only by [`RepoKey::from_url`], so two keys are equal exactly when their URLs name
/// the same repository under these rules: scheme, user, port, `.git`, empty segments and
/// surrounding slashes dropped, everything lower-cased, every path segment kept (GitLab
/// nested groups). Matching is by **equality** of keys, never by prefix or regex
/// (argoproj/argo-cd #20485). Serializes as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RepoKey(String);

impl RepoKey {
    /// Normalizes a clone, web or SSH URL.
    ///
    /// Accepted shapes: `https://[user@]host[:port]/path`, `http://…`, `ssh://[user@]host[:port]/path`,
    /// `git://host/path`, and scp-style `[user@]host:path` (what `ssh_url`/`git_ssh_url` carry
    /// on GitHub, GitLab and Gitea with port 22). Percent-escapes in the path are decoded.
    /// Returns `None` for text with no host or no path (e.g. `https://host/`, a bare word,
    /// a local path).
    ///
    /// ```text
    /// git@github.example.invalid:acme/platform-config.git   ┐
    /// https://GitHub.example.invalid:443/Acme/Platform-Config/ ├─> github.example.invalid/acme/platform-config
    /// ssh://git@github.example.invalid:22/acme/platform-config ┘
    /// ```
    pub fn from_url(url: &str) -> Option<RepoKey> {
        let url = url.trim();
        if url.is_empty() {
            return None;
        }
        let (host, path) = if url.contains("://") { scheme_url(url)? } else { scp_like(url)? };
        build(&host, &path)
    }

    /// The key as text, `host/owner/repo`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RepoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `scheme://[user@]host[:port]/path`: host and decoded path.
fn scheme_url(url: &str) -> Option<(String, String)> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_owned();
    let path = String::from_utf8(percent_decode(parsed.path().as_bytes(), false)).ok()?;
    Some((host, path))
}

/// scp-style `[user@]host:path`, as git itself reads it: the part before the first `:`
/// must contain no `/` (otherwise it is a local path).
fn scp_like(url: &str) -> Option<(String, String)> {
    let (left, path) = url.split_once(':')?;
    if left.contains('/') || path.is_empty() {
        return None;
    }
    let host = left.rsplit('@').next()?;
    let path = String::from_utf8(percent_decode(path.as_bytes(), false)).ok()?;
    Some((host.to_owned(), path))
}

fn build(host: &str, path: &str) -> Option<RepoKey> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '/') {
        return None;
    }
    let path = path.to_lowercase();
    let trimmed = path.trim_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let segments: Vec<&str> = trimmed.split('/').filter(|s| !s.is_empty()).collect();
    if segments.is_empty() {
        return None;
    }
    Some(RepoKey(format!("{host}/{}", segments.join("/"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "gitea.example.invalid/acme/platform-config";

    #[test]
    fn normalization_table() {
        let cases: &[(&str, Option<&str>)] = &[
            // scheme, .git, trailing slash
            ("https://gitea.example.invalid/acme/platform-config.git", Some(KEY)),
            ("https://gitea.example.invalid/acme/platform-config", Some(KEY)),
            ("https://gitea.example.invalid/acme/platform-config/", Some(KEY)),
            ("https://gitea.example.invalid/acme/platform-config.git/", Some(KEY)),
            ("http://gitea.example.invalid/acme/platform-config", Some(KEY)),
            ("git://gitea.example.invalid/acme/platform-config.git", Some(KEY)),
            // user and port
            ("ssh://git@gitea.example.invalid:2222/acme/platform-config.git", Some(KEY)),
            ("https://dev1:token@gitea.example.invalid:8443/acme/platform-config", Some(KEY)),
            // scp-style
            ("git@gitea.example.invalid:acme/platform-config.git", Some(KEY)),
            ("gitea.example.invalid:acme/platform-config", Some(KEY)),
            ("git@gitea.example.invalid:/acme/platform-config.git", Some(KEY)),
            // case, whitespace, duplicate slashes, trailing dot of the host
            ("https://Gitea.Example.INVALID/Acme/Platform-Config", Some(KEY)),
            ("ssh://GIT@GITEA.EXAMPLE.INVALID/ACME/PLATFORM-CONFIG.GIT", Some(KEY)),
            ("  https://gitea.example.invalid//acme//platform-config  ", Some(KEY)),
            ("https://gitea.example.invalid./acme/platform-config", Some(KEY)),
            // percent-escapes
            ("https://gitea.example.invalid/acme/platform%2Dconfig", Some(KEY)),
            // GitLab nested groups keep every segment
            (
                "https://gitlab.example.invalid/acme/infra/team/platform-config.git",
                Some("gitlab.example.invalid/acme/infra/team/platform-config"),
            ),
            (
                "git@gitlab.example.invalid:acme/infra/platform-config.git",
                Some("gitlab.example.invalid/acme/infra/platform-config"),
            ),
            // not repositories
            ("", None),
            ("   ", None),
            ("https://gitea.example.invalid/", None),
            ("https://gitea.example.invalid", None),
            ("platform-config", None),
            ("./acme/repo:x", None),
            ("/srv/git/acme/platform-config.git", None),
            ("file:///srv/git/platform-config.git", None),
            ("git@host:", None),
            ("https://gitea.example.invalid/.git", None),
        ];
        for (url, want) in cases {
            let got = RepoKey::from_url(url);
            assert_eq!(got.as_ref().map(RepoKey::as_str), *want, "{url:?}");
        }
    }

    #[test]
    fn the_watch_list_shapes_of_the_vectors_normalize() {
        let cases = [
            ("https://forgejo.example.invalid/acme/Platform-Config", "forgejo.example.invalid/acme/platform-config"),
            (
                "ssh://git@gogs.example.invalid:2222/acme/platform-config.git",
                "gogs.example.invalid/acme/platform-config",
            ),
            ("https://gitlab.example.invalid/acme/platform-config/", "gitlab.example.invalid/acme/platform-config"),
        ];
        for (url, want) in cases {
            assert_eq!(RepoKey::from_url(url).map(|k| k.to_string()).as_deref(), Some(want));
        }
    }

    #[test]
    fn similar_names_stay_distinct() {
        let a = RepoKey::from_url("https://h.example/acme/hello-appset");
        let b = RepoKey::from_url("https://h.example/acme/hello-appset-copy");
        let c = RepoKey::from_url("https://other.example/acme/hello-appset");
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn serializes_as_plain_string() {
        let key = RepoKey::from_url("https://h.example/a/b");
        assert_eq!(serde_json::to_string(&key).ok().as_deref(), Some("\"h.example/a/b\""));
    }
}
