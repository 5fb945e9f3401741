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

use base64::Engine;
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
    #[error("fetch {url}: {source}")]
    Fetch {
        /// Repository URL.
        url: String,
        /// git2's error.
        #[source]
        source: git2::Error,
    },
    /// The revision is neither a branch, a tag nor a known commit of the remote.
    #[error("{url}: revision `{revision}` not found (no branch, tag or commit of that name)")]
    RevisionNotFound {
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
        Ok(Self { repo, url: url.to_string(), credentials })
    }

    fn callbacks(&self) -> RemoteCallbacks<'_> {
        let mut cb = RemoteCallbacks::new();
        let creds = self.credentials.clone();
        cb.credentials(move |_url, user_from_url, allowed| {
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
            if known_host_matches(file, host, key) {
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

    fn fetch(&self, refspecs: &[&str]) -> Result<(), git2::Error> {
        let mut remote = self.repo.remote_anonymous(&self.url)?;
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(self.callbacks()).download_tags(AutotagOption::None);
        remote.fetch(refspecs, Some(&mut fo), None)
    }

    /// Reads the files under `path` (`""` = whole repository) at commit `revision`.
    ///
    /// # Errors
    /// [`Error::PathNotFound`], [`Error::Symlink`], [`Error::Local`].
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
        for (rel, id, mode) in entries {
            if !crate::render::is_manifest_file(&rel) {
                continue;
            }
            let content = if mode == 0o120000 {
                self.follow_symlink(&root, &rel, id)?
            } else {
                self.repo.find_blob(id).map_err(local)?.content().to_vec()
            };
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

/// Whether `known_hosts` (OpenSSH format, plain host names; `[host]:port` accepted)
/// lists `host` with exactly `key` (raw key blob).
fn known_host_matches(file: &Path, host: &str, key: &[u8]) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    text.lines().filter(|l| !l.trim_start().starts_with('#')).any(|line| {
        let mut parts = line.split_whitespace();
        let (Some(hosts), Some(_kind), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let host_ok = hosts.split(',').any(|h| {
            let h = h.trim_start_matches('[');
            h == host || h.split(']').next() == Some(host)
        });
        host_ok && base64::engine::general_purpose::STANDARD.decode(b64).is_ok_and(|k| k == key)
    })
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
}
