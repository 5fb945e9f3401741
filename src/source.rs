//! Source: fetch one ref of a Git repository with git2 and read an application's files
//! from the commit's tree.
//!
//! One bare mirror per repository URL lives under the cache directory. A fetch first asks
//! the remote for its refs (`ls-remote`, one round trip, no pack) and downloads only when
//! the ref points at a commit the mirror does not have — a pass that finds no new commit
//! downloads nothing. Files are read from the commit's tree, never from a working tree,
//! so there is nothing to race with; a symlink is followed only when its target stays
//! inside the repository. git2 is blocking: call these functions from
//! `tokio::task::spawn_blocking`.

mod pool;

use std::path::{Component, Path, PathBuf};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, Direction, FetchOptions, ObjectType, Oid, RemoteCallbacks, Repository,
};
use sha2::Digest;

pub use pool::{Desired, FetchError, Pool};

/// How to authenticate to a repository.
#[derive(Clone, Default)]
pub struct Credentials {
    /// HTTPS: user name and token (sent as basic-auth password).
    pub token: Option<(String, Vec<u8>)>,
    /// SSH: private key file.
    pub ssh_key: Option<PathBuf>,
    /// SSH: `known_hosts` file the server's host key must be in.
    pub known_hosts: Option<PathBuf>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|(u, _)| format!("{u}:***")))
            .field("ssh_key", &self.ssh_key)
            .field("known_hosts", &self.known_hosts)
            .finish()
    }
}

/// A commit resolved from a ref, and whether getting it needed a download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Commit SHA (40 hex).
    pub revision: String,
    /// True when a pack was fetched in this call.
    pub downloaded: bool,
}

/// The files of one application at one commit.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Commit SHA.
    pub revision: String,
    /// First line of the commit message.
    pub subject: String,
    /// (path inside the repository, content) of every file under the application path.
    pub files: Vec<(String, Vec<u8>)>,
}

/// What went wrong reading a repository. The URL is always named; credentials never are.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Talking to the remote failed (network, authentication, host key).
    #[error("fetch {}: {source}", crate::config::repo_url::redact(url))]
    Fetch {
        /// Repository URL.
        url: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// The revision is neither a branch, a tag nor a known commit of the remote.
    #[error(
        "{}: revision `{revision}` not found (no branch, tag or commit of that name)",
        crate::config::repo_url::redact(url)
    )]
    RevisionNotFound {
        /// Repository URL.
        url: String,
        /// The configured revision.
        revision: String,
    },
    /// A short revision names both a branch and a tag: which one is meant cannot be
    /// told (write `refs/heads/<name>` or `refs/tags/<name>`).
    #[error(
        "{}: revision `{revision}` is both a branch and a tag; write refs/heads/{revision} or refs/tags/{revision}",
        crate::config::repo_url::redact(url)
    )]
    AmbiguousRevision {
        /// Repository URL.
        url: String,
        /// The configured revision.
        revision: String,
    },
    /// The application path does not exist at that commit.
    #[error("path `{path}` does not exist at {revision}")]
    PathNotFound {
        /// Path inside the repository.
        path: String,
        /// Commit SHA.
        revision: String,
    },
    /// A symlink points outside the repository (or loops).
    #[error("{path}: symlink to `{target}` leaves the repository or loops; not followed")]
    Symlink {
        /// The symlink's path.
        path: String,
        /// Its target.
        target: String,
    },
    /// A file is too large, or there are too many (see [`crate::limits`]).
    #[error(transparent)]
    Limit(#[from] crate::limits::Exceeded),
    /// Reading the local mirror failed.
    #[error("repository cache {dir}: {source}")]
    Local {
        /// Mirror directory.
        dir: PathBuf,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
}

/// A bare mirror of one repository.
pub struct Mirror {
    repo: Repository,
    url: String,
    credentials: Credentials,
    limits: crate::limits::Limits,
}

impl Mirror {
    /// Opens (or creates) the mirror of `url` under `cache_dir`.
    ///
    /// # Errors
    /// [`Error::Local`] when the directory cannot be created or opened.
    pub fn open(cache_dir: &Path, url: &str, credentials: Credentials) -> Result<Self, Error> {
        let digest = sha2::Sha256::digest(url.as_bytes());
        let dir = cache_dir.join(hex::encode(&digest[..8]));
        let repo = match Repository::open_bare(&dir) {
            Ok(r) => r,
            Err(_) => Repository::init_bare(&dir).map_err(|source| Error::Local { dir: dir.clone(), source })?,
        };
        Ok(Self { repo, url: url.to_string(), credentials, limits: crate::limits::Limits::default() })
    }

    /// This mirror, reading files within `limits` (file size and count).
    #[must_use]
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    fn callbacks(&self) -> RemoteCallbacks<'_> {
        let mut cb = RemoteCallbacks::new();
        let creds = self.credentials.clone();
        let configured = self.url.clone();
        cb.credentials(move |url, user_from_url, allowed| {
            // after a redirect Git may ask for another host: it gets nothing
            if !crate::config::repo_url::same_host(&configured, url) {
                return Err(git2::Error::from_str(&format!(
                    "credentials refused to {}: not the configured host",
                    crate::config::repo_url::redact(url)
                )));
            }
            if allowed.contains(git2::CredentialType::SSH_KEY)
                && let Some(key) = &creds.ssh_key
            {
                return Cred::ssh_key(user_from_url.unwrap_or("git"), None, key, None);
            }
            if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT)
                && let Some((user, token)) = &creds.token
            {
                return Cred::userpass_plaintext(user, &String::from_utf8_lossy(token));
            }
            Err(git2::Error::from_str("no credentials configured for this repository"))
        });
        let known_hosts = self.credentials.known_hosts.clone();
        let port = url_port(&self.url);
        cb.certificate_check(move |cert, host| {
            let Some(hostkey) = cert.as_hostkey() else {
                // TLS: libgit2 has already verified the chain; keep its verdict.
                return Ok(CertificateCheckStatus::CertificatePassthrough);
            };
            let Some(file) = &known_hosts else {
                return Err(git2::Error::from_str("SSH host key cannot be checked: no knownHostsFile configured"));
            };
            let Some(key) = hostkey.hostkey() else {
                return Err(git2::Error::from_str("server sent no host key"));
            };
            if known_host_matches(file, host, port, key) {
                Ok(CertificateCheckStatus::CertificateOk)
            } else {
                Err(git2::Error::from_str(&format!("host key of {host} is not in {}", file.display())))
            }
        });
        cb
    }

    /// Resolves `revision` (branch, tag, full ref or commit SHA) on the remote and makes
    /// sure the commit is in the mirror, downloading only when it is not.
    ///
    /// # Errors
    /// [`Error::Fetch`] on network/auth failures, [`Error::RevisionNotFound`].
    pub fn resolve(&self, revision: &str) -> Result<Resolved, Error> {
        let fetch_err = |source| Error::Fetch { url: self.url.clone(), source };
        if is_sha(revision) {
            if let Ok(oid) = Oid::from_str(revision)
                && self.repo.find_commit(oid).is_ok()
            {
                return Ok(Resolved { revision: revision.to_string(), downloaded: false });
            }
            self.fetch(&["+refs/heads/*:refs/plumb/heads/*", "+refs/tags/*:refs/plumb/tags/*"]).map_err(fetch_err)?;
            return match Oid::from_str(revision).ok().and_then(|o| self.repo.find_commit(o).ok()) {
                Some(c) => Ok(Resolved { revision: c.id().to_string(), downloaded: true }),
                None => Err(Error::RevisionNotFound { url: self.url.clone(), revision: revision.into() }),
            };
        }
        // ls-remote: one round trip, no objects.
        let mut remote = self.repo.remote_anonymous(&self.url).map_err(fetch_err)?;
        let advertised: Vec<(String, Oid)> = {
            let conn = remote.connect_auth(Direction::Fetch, Some(self.callbacks()), None).map_err(fetch_err)?;
            conn.list().map_err(fetch_err)?.iter().map(|h| (h.name().to_string(), h.oid())).collect()
        };
        let candidates: Vec<String> = if revision.starts_with("refs/") {
            vec![revision.to_string()]
        } else {
            vec![format!("refs/heads/{revision}"), format!("refs/tags/{revision}")]
        };
        let advertises = |r: &String| advertised.iter().any(|(a, _)| a == r);
        if candidates.len() == 2 && candidates.iter().all(advertises) {
            return Err(Error::AmbiguousRevision { url: self.url.clone(), revision: revision.into() });
        }
        let Some((name, oid)) = candidates.iter().find_map(|c| {
            let peeled = format!("{c}^{{}}");
            let find = |n: &str| advertised.iter().find(|(a, _)| a == n).map(|(_, o)| *o);
            find(c).map(|o| (c.clone(), find(&peeled).unwrap_or(o)))
        }) else {
            return Err(Error::RevisionNotFound { url: self.url.clone(), revision: revision.into() });
        };
        let mut downloaded = false;
        if self.repo.find_commit(oid).is_err() {
            let local = format!("+{name}:refs/plumb/{}", name.trim_start_matches("refs/"));
            self.fetch(&[&local]).map_err(fetch_err)?;
            downloaded = true;
        }
        let commit = self
            .repo
            .find_object(oid, None)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| Error::Local { dir: self.repo.path().into(), source })?;
        Ok(Resolved { revision: commit.id().to_string(), downloaded })
    }

    /// Whether commit `new` descends from (or is) commit `old`, both in the mirror;
    /// `false` when `old` is not there after `new` was fetched with its whole history
    /// (then it is no ancestor of `new`), `None` when `new` cannot be read.
    pub fn descends(&self, new: &str, old: &str) -> Option<bool> {
        let new = Oid::from_str(new).ok().filter(|o| self.repo.find_commit(*o).is_ok())?;
        let Some(old) = Oid::from_str(old).ok().filter(|o| self.repo.find_commit(*o).is_ok()) else {
            return Some(false);
        };
        Some(new == old || self.repo.graph_descendant_of(new, old).unwrap_or(false))
    }

    fn fetch(&self, refspecs: &[&str]) -> Result<(), git2::Error> {
        let mut remote = self.repo.remote_anonymous(&self.url)?;
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(self.callbacks()).download_tags(AutotagOption::None);
        remote.fetch(refspecs, Some(&mut fo), None)
    }

    /// Reads the files under `path` (`""` = whole repository) at commit `revision`.
    ///
    /// # Errors
    /// [`Error::PathNotFound`], [`Error::Symlink`], [`Error::Local`], [`Error::Limit`]
    /// (a file over `maxFileBytes`, checked before it is read; more than `maxFiles`).
    pub fn snapshot(&self, revision: &str, path: &str) -> Result<Snapshot, Error> {
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let commit = Oid::from_str(revision).and_then(|o| self.repo.find_commit(o)).map_err(local)?;
        let subject = commit.summary().ok().flatten().unwrap_or("").to_string();
        let root = commit.tree().map_err(local)?;
        let path = path.trim_matches('/');
        let tree = if path.is_empty() {
            root.clone()
        } else {
            let entry = root
                .get_path(Path::new(path))
                .map_err(|_| Error::PathNotFound { path: path.into(), revision: revision.into() })?;
            if entry.kind() != Some(ObjectType::Tree) {
                return Err(Error::PathNotFound { path: path.into(), revision: revision.into() });
            }
            self.repo.find_tree(entry.id()).map_err(local)?
        };
        let mut entries = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(ObjectType::Blob) {
                let rel = if path.is_empty() {
                    format!("{dir}{}", e.name().unwrap_or(""))
                } else {
                    format!("{path}/{dir}{}", e.name().unwrap_or(""))
                };
                entries.push((rel, e.id(), e.filemode()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(local)?;
        let mut files = Vec::new();
        let odb = self.repo.odb().map_err(local)?;
        for (rel, id, mode) in entries {
            if !crate::render::is_manifest_file(&rel) {
                continue;
            }
            let content = if mode == 0o120000 {
                self.follow_symlink(&root, &rel, id)?
            } else {
                let (size, _) = odb.read_header(id).map_err(local)?;
                self.limits.check_file(&rel, size as u64, files.len() + 1)?;
                self.repo.find_blob(id).map_err(local)?.content().to_vec()
            };
            self.limits.check_file(&rel, content.len() as u64, files.len() + 1)?;
            files.push((rel, content));
        }
        Ok(Snapshot { revision: revision.into(), subject, files })
    }

    fn follow_symlink(&self, root: &git2::Tree<'_>, path: &str, mut id: Oid) -> Result<Vec<u8>, Error> {
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let mut current = PathBuf::from(path);
        for _ in 0..8 {
            let target = String::from_utf8_lossy(self.repo.find_blob(id).map_err(local)?.content()).to_string();
            let bad = || Error::Symlink { path: path.into(), target: target.clone() };
            let joined = current.parent().unwrap_or(Path::new("")).join(&target);
            let mut norm = PathBuf::new();
            for c in joined.components() {
                match c {
                    Component::Normal(s) => norm.push(s),
                    Component::ParentDir => {
                        if !norm.pop() {
                            return Err(bad());
                        }
                    }
                    Component::CurDir => {}
                    Component::RootDir | Component::Prefix(_) => return Err(bad()),
                }
            }
            let entry = root.get_path(&norm).map_err(|_| bad())?;
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Blob), 0o120000) => {
                    id = entry.id();
                    current = norm;
                }
                (Some(ObjectType::Blob), _) => {
                    return Ok(self.repo.find_blob(entry.id()).map_err(local)?.content().to_vec());
                }
                _ => return Err(bad()),
            }
        }
        Err(Error::Symlink { path: path.into(), target: "(too many levels)".into() })
    }
}

fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether the OpenSSH `known_hosts` file lists `host` with exactly `key` (the raw key
/// blob the server sent), parsed with `ssh-key`'s known_hosts parser.
///
/// - Plain host names are compared exactly (no wildcards); a `[host]:port` entry matches
///   `host` whatever the port (libgit2 passes the host name alone).
/// - Hashed entries (`|1|salt|hash`, `ssh-keygen -H`) match when the HMAC-SHA1 of
///   `host` — or of `[host]:port` when the repository URL names a port other than 22 —
///   under the salt is the hash.
/// - A matching `@revoked` entry rejects the key even if another line lists it;
///   `@cert-authority` entries are not host keys and are skipped, as are lines that do
///   not parse. Fields may be separated by any run of blanks.
fn known_host_matches(file: &Path, host: &str, port: Option<u16>, key: &[u8]) -> bool {
    use ssh_key::known_hosts::{KnownHosts, Marker};
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    // ssh-key splits fields at single spaces; OpenSSH accepts any blanks.
    let text: String = text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") + "\n").collect();
    let mut listed = false;
    for entry in KnownHosts::new(&text).filter_map(Result::ok) {
        if !host_listed(entry.host_patterns(), host, port) || !entry.public_key().to_bytes().is_ok_and(|k| k == key) {
            continue;
        }
        match entry.marker() {
            Some(Marker::Revoked) => return false,
            Some(Marker::CertAuthority) => {}
            None => listed = true,
        }
    }
    listed
}

/// Whether a known_hosts entry's host field names `host` (see [`known_host_matches`]).
fn host_listed(patterns: &ssh_key::known_hosts::HostPatterns, host: &str, port: Option<u16>) -> bool {
    use hmac::{Hmac, KeyInit, Mac};
    use ssh_key::known_hosts::HostPatterns;
    match patterns {
        HostPatterns::Patterns(list) => list.iter().any(|h| {
            let h = h.trim_start_matches('[');
            h == host || h.split(']').next() == Some(host)
        }),
        HostPatterns::HashedName { salt, hash } => {
            let bracketed = port.filter(|&p| p != 22).map(|p| format!("[{host}]:{p}"));
            std::iter::once(host).chain(bracketed.as_deref()).any(|name| {
                Hmac::<sha1::Sha1>::new_from_slice(salt).is_ok_and(|mut mac| {
                    mac.update(name.as_bytes());
                    mac.verify_slice(hash).is_ok()
                })
            })
        }
    }
}

/// The port an `ssh://` repository URL names, if any (scp-style `git@host:path` URLs
/// have none: port 22).
fn url_port(url: &str) -> Option<u16> {
    url::Url::parse(url).ok().and_then(|u| u.port())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .status()
            .expect("git runs")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A local repository (file path URL: libgit2's local transport, full fetch).
    #[test]
    fn resolve_reads_tree_and_skips_download_when_unchanged() {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(work.join("apps/web/sub")).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("apps/web/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
            .expect("write");
        std::fs::write(work.join("apps/web/sub/README.md"), "x").expect("write");
        std::fs::write(work.join("secret.yaml"), "outside").expect("write");
        std::os::unix::fs::symlink("../../secret.yaml", work.join("apps/web/link.yaml")).expect("symlink");
        std::os::unix::fs::symlink("../../../../etc/passwd.yaml", work.join("apps/web/escape.yaml")).expect("symlink");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "first commit\n\nbody"]);
        git(&work, &["tag", "-a", "v1", "-m", "annotated"]);

        let mirror = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open");
        let first = mirror.resolve("main").expect("resolve");
        assert!(first.downloaded);
        let again = mirror.resolve("main").expect("resolve");
        assert_eq!(again, Resolved { revision: first.revision.clone(), downloaded: false });
        assert_eq!(mirror.resolve("v1").expect("tag").revision, first.revision, "annotated tag peels to the commit");
        assert_eq!(mirror.resolve(&first.revision).expect("sha").revision, first.revision);
        assert!(matches!(mirror.resolve("nope"), Err(Error::RevisionNotFound { .. })));

        let err = mirror.snapshot(&first.revision, "apps/web").expect_err("escaping symlink");
        assert!(err.to_string().contains("apps/web/escape.yaml"), "{err}");
        std::fs::remove_file(work.join("apps/web/escape.yaml")).expect("rm");
        git(&work, &["commit", "-qam", "drop escape"]);
        let second = mirror.resolve("main").expect("resolve");
        let snap = mirror.snapshot(&second.revision, "apps/web").expect("snapshot");
        assert_eq!(snap.subject, "drop escape");
        let names: Vec<_> = snap.files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["apps/web/cm.yaml", "apps/web/link.yaml"]);
        assert_eq!(snap.files[1].1, b"outside");
        assert!(matches!(mirror.snapshot(&second.revision, "apps/none"), Err(Error::PathNotFound { .. })));
    }

    /// The ed25519 host key of the fixed vectors (`ssh-keygen -t ed25519`), base64.
    const KEY_B64: &str = "AAAAC3NzaC1lZDI1NTE5AAAAICZDrZSlYNDXFCEgV3YBXLiT/EU8KbcFSjvrYE0g8Rfr";

    fn key_blob(b64: &str) -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(b64).expect("base64")
    }

    /// Another valid ed25519 blob: `string "ssh-ed25519"`, `string <32 bytes>`.
    fn other_key() -> Vec<u8> {
        let mut blob = Vec::new();
        for part in [&b"ssh-ed25519"[..], &[7u8; 32][..]] {
            blob.extend_from_slice(&u32::try_from(part.len()).expect("len").to_be_bytes());
            blob.extend_from_slice(part);
        }
        blob
    }

    fn known_hosts(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("known_hosts");
        std::fs::write(&file, text).expect("write");
        (dir, file)
    }

    #[test]
    fn plain_known_hosts_entries() {
        let key = key_blob(KEY_B64);
        let (_dir, file) = known_hosts(&format!(
            "# a comment\ngarbage line\nalias,git.example.test ssh-ed25519 {KEY_B64} comment\n\
             [ssh.example.test]:2222\tssh-ed25519  {KEY_B64}\n"
        ));
        assert!(known_host_matches(&file, "git.example.test", None, &key));
        assert!(known_host_matches(&file, "alias", None, &key));
        assert!(!known_host_matches(&file, "git.example.test", None, &other_key()), "another key");
        assert!(!known_host_matches(&file, "example.test", None, &key), "another host");
        // `[host]:port` names the host on any port, as before (libgit2 gives no port).
        assert!(known_host_matches(&file, "ssh.example.test", Some(2222), &key));
        assert!(known_host_matches(&file, "ssh.example.test", None, &key));
        assert!(!known_host_matches(&file.with_file_name("absent"), "git.example.test", None, &key));
    }

    /// Lines `ssh-keygen -H` wrote on this machine for `[git.example.test]:2222` and
    /// `git.example.test` with the key above.
    #[test]
    fn hashed_entries_from_ssh_keygen() {
        let key = key_blob(KEY_B64);
        let port_line = format!("|1|+hn/EfC0HS+3lea/26COFfxraXA=|QzgvuQhyRotGASaBoJf4nTw1LqQ= ssh-ed25519 {KEY_B64}\n");
        let plain_line =
            format!("|1|500x9LRedzMKUWH0sVFyf8scvkU=|5MbiaxfvmjECbRN+3iqBzIPEjP8= ssh-ed25519 {KEY_B64}\n");
        let (_dir, file) = known_hosts(&port_line);
        assert!(known_host_matches(&file, "git.example.test", Some(2222), &key));
        assert!(!known_host_matches(&file, "git.example.test", Some(2223), &key), "another port");
        assert!(!known_host_matches(&file, "git.example.test", None, &key), "port 22");
        assert!(!known_host_matches(&file, "git.example.test", Some(2222), &other_key()), "another key");
        let (_dir, file) = known_hosts(&plain_line);
        assert!(known_host_matches(&file, "git.example.test", None, &key));
        assert!(known_host_matches(&file, "git.example.test", Some(22), &key));
        assert!(known_host_matches(&file, "git.example.test", Some(2222), &key), "the bare name on any port");
        assert!(!known_host_matches(&file, "gitx.example.test", None, &key));
    }

    /// A hashed entry made here (HMAC-SHA1 of the name under a salt), and markers.
    #[test]
    fn hashed_entry_made_in_the_test_and_revocation() {
        use base64::Engine;
        use hmac::{Hmac, KeyInit, Mac};
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let salt = [42u8; 20];
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(&salt).expect("hmac");
        mac.update(b"[forge.example.test]:2222");
        let hash = mac.finalize().into_bytes();
        let other = b64(&other_key());
        let (_dir, file) = known_hosts(&format!(
            "|1|{}|{} ssh-ed25519 {other}\n@cert-authority ca.example.test ssh-ed25519 {KEY_B64}\n",
            b64(&salt),
            b64(&hash)
        ));
        assert!(known_host_matches(&file, "forge.example.test", Some(2222), &other_key()));
        assert!(!known_host_matches(&file, "forge.example.test", Some(22), &other_key()));
        assert!(!known_host_matches(&file, "ca.example.test", None, &key_blob(KEY_B64)), "a CA key is no host key");
        let (_dir, file) = known_hosts(&format!(
            "git.example.test ssh-ed25519 {KEY_B64}\n@revoked git.example.test ssh-ed25519 {KEY_B64}\n"
        ));
        assert!(!known_host_matches(&file, "git.example.test", None, &key_blob(KEY_B64)), "revoked");
        assert_eq!(url_port("ssh://git@forge.example.test:2222/a/b.git"), Some(2222));
        assert_eq!(url_port("git@forge.example.test:a/b.git"), None);
        assert_eq!(url_port("ssh://git@forge.example.test/a/b.git"), None);
    }
}
