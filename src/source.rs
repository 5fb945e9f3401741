//! Source: fetch one ref of a Git repository with git2 and read an application's files
//! from the commit's tree.
//!
//! One bare mirror per repository URL lives under the cache directory. A fetch asks the
//! remote for its refs (its advertisement, one round trip) and downloads only when the
//! ref points at a commit the mirror does not have, in the same round for a branch or a
//! full ref — a pass that finds no new commit downloads nothing. Files are read from the
//! commit's tree, never from a working tree, so there is nothing to race with; a
//! symlink is followed only when its target stays inside the repository. git2 is
//! blocking: call these functions from `tokio::task::spawn_blocking`.
//!
//! A mirror's disk use is bounded: after a download that leaves more than
//! [`MAINTAIN_PACKS`] packs or [`MAINTAIN_LOOSE`] loose objects, it is repacked to the
//! objects its refs reach ([`Mirror::maintain`]), so what a force-push left behind goes.

pub mod chart;
mod directories;
mod pool;
pub mod refs;

use std::{
    path::{Component, Path, PathBuf},
    sync::Arc,
};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, Direction, FetchOptions, ObjectType, Oid, RemoteCallbacks,
    RemoteUpdateFlags, Repository,
};
use sha2::Digest;

pub use directories::MAX_LISTED_DIRECTORIES;
pub use pool::{CAPABILITIES_MAX_AGE_SECONDS, Desired, FetchError, Pool};

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
    /// (path inside the repository, content) of every manifest file under the
    /// application path (directory symlinks followed: a file is named by the path it is
    /// seen at).
    pub files: Vec<(String, Vec<u8>)>,
    /// SHA-256 of `files` (each path and content with its length), hex: what a plain
    /// render of the path reads, kept when the files are not ([`pool::Pool::desired`]).
    pub files_digest: String,
    /// Id of the commit's root tree (40 hex): a render tool that may read outside the
    /// application path (kustomize bases) renders the same output for the same tree.
    pub root_tree: String,
    /// Names of the entries directly under the application path (`kustomization.yaml`,
    /// `Chart.yaml`, …), for source detection.
    pub top_level: Vec<String>,
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
    /// A symlink points outside the application's path and the environment's
    /// `sharedPaths`: another application's files are not this one's.
    #[error("{path}: symlink to `{target}` leaves the application's path (allowed: {within}); not followed")]
    SymlinkOutside {
        /// The symlink's path.
        path: String,
        /// Its target.
        target: String,
        /// The paths it may point into.
        within: String,
    },
    /// A symlink points outside the repository, at nothing, or at a directory that
    /// contains it (a loop).
    #[error("{path}: symlink to `{target}` leaves the repository, points at nothing or loops; not followed")]
    Symlink {
        /// The symlink's path.
        path: String,
        /// Its target.
        target: String,
    },
    /// A directory of the application path is a git submodule (a gitlink): its files
    /// are in another repository, which plumb does not fetch.
    #[error("{path} is a git submodule ({}@{commit}); plumb does not fetch submodules: commit the files, or point an application at that repository", url.as_deref().unwrap_or("no .gitmodules entry"))]
    Submodule {
        /// The gitlink's path.
        path: String,
        /// Its URL in `.gitmodules` (user info removed), when listed.
        url: Option<String>,
        /// The submodule commit the gitlink records.
        commit: String,
    },
    /// A file is too large, or there are too many (see [`crate::limits`]).
    #[error(transparent)]
    Limit(#[from] crate::limits::Exceeded),
    /// A directory listing for an applicationSet's `directories` generator found more
    /// than [`MAX_LISTED_DIRECTORIES`] directories down to the depth its globs reach.
    #[error("{revision}: more than {limit} directories down to depth {depth}; narrow the generator's include globs")]
    TooManyDirectories {
        /// Commit SHA.
        revision: String,
        /// The depth listed (path segments).
        depth: usize,
        /// [`MAX_LISTED_DIRECTORIES`].
        limit: usize,
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

/// The refs a remote advertised (`ls-remote`): (name, object id), each annotated tag
/// followed by its peeled `^{}` entry.
pub type Refs = Arc<Vec<(String, Oid)>>;

/// When the request for an advertisement of the remote's refs started, and the refs
/// it listed.
type Advertisement = (std::time::Instant, Refs);

/// How recent the advertisement of the remote's refs a pass reads must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Asked for after the pass started: the pass sees every push made before it
    /// started. For passes asked for (webhook, request, drift, a moved ref) and
    /// one-shot commands.
    Now,
    /// Asked for at most this long before the pass started: a pass of the poll timer
    /// reads the refs its repository's poller asked for last instead of asking again
    /// (see `crate::poller`).
    Within(std::time::Duration),
    /// Asked for at or after this instant, whenever the pass started: the passes of a
    /// shard this replica took then (`crate::scheduler::Trigger::Take`) see every push
    /// the replica that held it before could have seen, and one advertisement answers
    /// them all.
    AskedAfter(std::time::Instant),
}

impl Freshness {
    /// Which advertisements answer a pass that started at `started`.
    pub fn since(self, started: std::time::Instant) -> Since {
        match self {
            Freshness::Now => Since::at(started),
            Freshness::AskedAfter(at) => Since::at(at),
            Freshness::Within(age) => Since { at: started, age },
        }
    }
}

/// Which advertisement of the remote's refs answers a request: one whose request
/// started at most `age` before `at` (see [`Freshness::since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since {
    at: std::time::Instant,
    age: std::time::Duration,
}

impl Since {
    /// An advertisement whose request started at or after `at`.
    pub fn at(at: std::time::Instant) -> Self {
        Self { at, age: std::time::Duration::ZERO }
    }

    /// Whether the advertisement whose request started at `started` answers.
    pub fn answers(self, started: std::time::Instant) -> bool {
        self.at.saturating_duration_since(started) <= self.age
    }
}

/// An advertisement's refs as (full name, id), in the remote's order.
fn named_ids(heads: &[git2::RemoteHead<'_>]) -> Vec<(String, Oid)> {
    heads.iter().map(|h| (h.name().to_string(), h.oid())).collect()
}

/// A bare mirror of one repository.
pub struct Mirror {
    repo: Repository,
    url: String,
    credentials: Credentials,
    limits: crate::limits::Limits,
    /// The last advertisement of the remote's refs (`ls-remote`) and when the request
    /// for it started: see [`Mirror::resolve_since`].
    advertised: std::sync::Mutex<Option<Advertisement>>,
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
        Ok(Self {
            repo,
            url: url.to_string(),
            credentials,
            limits: crate::limits::Limits::default(),
            advertised: std::sync::Mutex::default(),
        })
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
        self.resolve_since(revision, Since::at(std::time::Instant::now()))
    }

    /// [`Mirror::resolve`], reading the last advertisement of the remote's refs when
    /// `asked` accepts it: with [`Since::at`] the request's start, one asked for after
    /// it (at least as new as one made for this request), so passes of applications
    /// sharing a repository that ask at about the same time cost one advertisement
    /// together; with an age, one asked for up to that long before (a repository
    /// poller's: see [`Freshness`]).
    ///
    /// # Errors
    /// As [`Mirror::resolve`].
    pub fn resolve_since(&self, revision: &str, asked: Since) -> Result<Resolved, Error> {
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
        let (advertised, mut downloaded) = self.advertisement(asked, Some(revision)).map_err(fetch_err)?;
        let (name, oid) = match refs::named(&advertised, revision) {
            refs::Named::Ref(name, oid) => (name, oid),
            refs::Named::Ambiguous => {
                return Err(Error::AmbiguousRevision { url: self.url.clone(), revision: revision.into() });
            }
            refs::Named::Unadvertised => return self.resolve_short_sha(revision),
        };
        // an advertisement read again (asked for by an earlier request) downloaded nothing
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

    /// The commit `revision` names in the advertisement already read, when that one
    /// answers `asked` ([`Mirror::resolve_since`] would read it too): no IO, no fetch;
    /// `None` when a resolve would have to ask the remote or the mirror, or for a
    /// revision that is no advertised ref (a full SHA is returned as it is).
    pub fn peek(&self, revision: &str, asked: Since) -> Option<String> {
        if is_sha(revision) {
            return Some(revision.to_string());
        }
        let last = self.advertised.lock().ok()?;
        let (started, refs) = last.as_ref()?;
        if !asked.answers(*started) {
            return None;
        }
        match refs::named(refs, revision) {
            refs::Named::Ref(_, oid) => Some(oid.to_string()),
            _ => None,
        }
    }

    /// The remote's refs asked for now (one `ls-remote`: one round trip, no objects),
    /// and the advertisement asked for before, if any (by a pass or an earlier call):
    /// what a repository poller compares. Later resolves that accept refs asked for
    /// when this call started read these instead of asking again.
    ///
    /// # Errors
    /// [`Error::Fetch`] on network/auth failures.
    pub fn ask_refs(&self) -> Result<(Option<Refs>, Refs), Error> {
        let earlier = self.advertised.lock().ok().and_then(|a| a.as_ref().map(|(_, refs)| refs.clone()));
        let (now, _) = self
            .advertisement(Since::at(std::time::Instant::now()), None)
            .map_err(|source| Error::Fetch { url: self.url.clone(), source })?;
        Ok((earlier, now))
    }

    /// The remote's refs: the last advertisement when `asked` accepts it, else a new
    /// one (one round trip). A failed one forgets the last: the requests after it ask
    /// again (and report the failure) rather than read refs the remote may no longer
    /// advertise.
    ///
    /// When it asks anew for `wanted`, the ref `wanted` names first (`refs/heads/<name>`
    /// for a short name, a full ref as written: [`refs::candidates`]) is fetched in the
    /// same round (`true` when a pack came): a fetch starts with an advertisement, so a
    /// new commit of a branch costs one advertisement and one negotiation, not two
    /// advertisements; with nothing new, no negotiation follows. A tag, or a name that
    /// is both a branch and a tag, is fetched (or refused) by the caller once the
    /// advertisement says what it names: a tag named like a tracked branch brings
    /// nothing. A name Git refuses as a ref name (`*`, `a:b`) is not fetched.
    fn advertisement(&self, asked: Since, wanted: Option<&str>) -> Result<(Refs, bool), git2::Error> {
        if let Ok(last) = self.advertised.lock()
            && let Some((started, refs)) = last.as_ref()
            && asked.answers(*started)
        {
            return Ok((refs.clone(), false));
        }
        let started = std::time::Instant::now();
        let spec = wanted
            .and_then(|w| refs::candidates(w).into_iter().next())
            .filter(|c| git2::Reference::is_valid_name(c))
            .map(|c| format!("+{c}:refs/plumb/{}", c.trim_start_matches("refs/")));
        // made before the remote, dropped after it: the connection holds their callbacks
        let mut options = self.fetch_options();
        let listed = self.repo.remote_anonymous(&self.url).and_then(|mut remote| {
            let Some(spec) = &spec else {
                let conn = remote.connect_auth(Direction::Fetch, Some(self.callbacks()), Some(proxy_options()))?;
                return Ok((named_ids(conn.list()?), false));
            };
            // `download` connects with the fetch options, each request on a connection
            // of its own (see `Mirror::fetch`); a refspec naming no advertised ref
            // matches nothing
            remote.download(&[spec], Some(&mut options))?;
            let refs = named_ids(remote.list()?);
            let downloaded = remote.stats().total_objects() > 0;
            // the mirror's own ref: the objects are in, and resolving reads the
            // advertisement, so a ref that cannot be written (a stale lock) is no
            // reason to fail this pass and the next ones
            if let Err(e) = remote.update_tips(None, RemoteUpdateFlags::empty(), AutotagOption::None, None) {
                tracing::warn!(url = %crate::config::repo_url::redact(&self.url), "mirror ref {spec} not updated: {e}");
            }
            remote.disconnect()?;
            Ok((refs, downloaded))
        });
        let listed = listed.map(|(refs, downloaded)| (Arc::new(refs), downloaded));
        if let Ok(mut last) = self.advertised.lock() {
            *last = listed.as_ref().ok().map(|(refs, _)| (started, refs.clone()));
        }
        listed
    }

    /// An abbreviated commit SHA no branch or tag is named after: the commit of the
    /// remote's branches and tags it abbreviates (fetched when not in the mirror).
    ///
    /// # Errors
    /// [`Error::RevisionNotFound`] when it is no short SHA, or abbreviates no commit
    /// or several; [`Error::Fetch`].
    fn resolve_short_sha(&self, revision: &str) -> Result<Resolved, Error> {
        let not_found = || Error::RevisionNotFound { url: self.url.clone(), revision: revision.into() };
        if !is_short_sha(revision) {
            return Err(not_found());
        }
        let find = || self.repo.revparse_single(revision).and_then(|o| o.peel_to_commit()).ok();
        if let Some(c) = find() {
            return Ok(Resolved { revision: c.id().to_string(), downloaded: false });
        }
        self.fetch(&["+refs/heads/*:refs/plumb/heads/*", "+refs/tags/*:refs/plumb/tags/*"])
            .map_err(|source| Error::Fetch { url: self.url.clone(), source })?;
        find().map(|c| Resolved { revision: c.id().to_string(), downloaded: true }).ok_or_else(not_found)
    }

    /// What a signature check of `revision` reads (see [`crate::verify`]): the commit it
    /// names now ([`Mirror::resolve_since`]) and, as `git cat-file` prints them, the raw
    /// commit object, or with `tag` the raw annotated tag object the advertised tag
    /// names (fetched when the mirror lacks it; `None` when `revision` is no tag or a
    /// lightweight one, which carries no signature).
    ///
    /// # Errors
    /// As [`Mirror::resolve_since`]; [`Error::Local`] when an object cannot be read.
    pub fn signed_object(&self, revision: &str, asked: Since, tag: bool) -> Result<(Resolved, Option<Vec<u8>>), Error> {
        let resolved = self.resolve_since(revision, asked)?;
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let read = |oid: Oid| -> Result<Option<Vec<u8>>, Error> {
            let db = self.repo.odb().map_err(local)?;
            let object = db.read(oid).map_err(local)?;
            let want = if tag { git2::ObjectType::Tag } else { git2::ObjectType::Commit };
            Ok((object.kind() == want).then(|| object.data().to_vec()))
        };
        if !tag {
            let oid = Oid::from_str(&resolved.revision).map_err(local)?;
            let raw = read(oid)?;
            return Ok((resolved, raw));
        }
        // the advertisement the resolve read: the tag's own id, not its peeled commit
        let advertised = self.advertised.lock().ok().and_then(|a| a.as_ref().map(|(_, refs)| refs.clone()));
        let named = advertised.as_deref().map(|refs| (refs, refs::named(refs, revision)));
        let Some((refs, refs::Named::Ref(name, _))) = named else { return Ok((resolved, None)) };
        let Some(oid) = refs.iter().find(|(n, _)| *n == name && n.starts_with("refs/tags/")).map(|(_, o)| *o) else {
            return Ok((resolved, None));
        };
        if self.repo.odb().and_then(|db| db.read_header(oid)).is_err() {
            let spec = format!("+{name}:refs/plumb/{}", name.trim_start_matches("refs/"));
            self.fetch(&[&spec]).map_err(|source| Error::Fetch { url: self.url.clone(), source })?;
        }
        let raw = read(oid)?;
        Ok((resolved, raw))
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

    /// The best common ancestor of commits `a` and `b` (`git merge-base`), both in the
    /// mirror; `None` when either is missing or they share no history.
    pub fn merge_base(&self, a: &str, b: &str) -> Option<String> {
        let (a, b) = (Oid::from_str(a).ok()?, Oid::from_str(b).ok()?);
        self.repo.merge_base(a, b).ok().map(|o| o.to_string())
    }

    /// Repacks the mirror when it holds more than [`MAINTAIN_PACKS`] packs or
    /// [`MAINTAIN_LOOSE`] loose objects ([`Mirror::repack`]), then opens it again, so
    /// that the removed files' space is freed (an open repository keeps its packs
    /// open). Call it after a download (`Resolved::downloaded`) under the mirror's lock,
    /// as the [`Pool`] does. Returns the objects kept when it repacked. A failure is
    /// logged: the mirror stays usable and the next download tries again.
    pub fn maintain(&mut self) -> Option<usize> {
        let objects = self.repo.path().join("objects");
        let (packs, loose) = object_files(&objects);
        if packs <= MAINTAIN_PACKS && loose <= MAINTAIN_LOOSE {
            return None;
        }
        let url = crate::config::repo_url::redact(&self.url);
        let kept = self.repack();
        let reopened = Repository::open_bare(self.repo.path()).map(|repo| self.repo = repo);
        match (kept, reopened) {
            (Ok(kept), Ok(())) => {
                tracing::info!(url = %url, packs, loose, kept, "mirror repacked");
                Some(kept)
            }
            (Err(e), _) => {
                tracing::warn!(url = %url, "mirror not repacked: {e}");
                None
            }
            (Ok(_), Err(e)) => {
                tracing::warn!(url = %url, "mirror repacked but not opened again: {e}");
                None
            }
        }
    }

    /// Writes one pack of the objects the mirror's refs reach (their commits, history,
    /// trees, blobs and annotated tags: git2's `PackBuilder`), then removes every other
    /// pack and every loose object, so that what no ref reaches any more (a force-pushed
    /// branch's old commits and files) leaves the disk; libgit2 has no `git gc`. Returns
    /// the number of objects kept. A mirror without refs is left alone. This handle still
    /// reads the removed packs until the mirror is opened again ([`Mirror::maintain`]).
    ///
    /// The new pack is complete before anything is removed; an interruption leaves
    /// extra copies, never a missing object.
    ///
    /// # Errors
    /// [`Error::Local`] when the refs cannot be walked or the pack cannot be written or
    /// the old files removed.
    fn repack(&self) -> Result<usize, Error> {
        let dir = self.repo.path().to_path_buf();
        let local = |source: git2::Error| Error::Local { dir: dir.clone(), source };
        let io = |e: std::io::Error| local(git2::Error::from_str(&e.to_string()));
        let mut pb = self.repo.packbuilder().map_err(local)?;
        pb.set_threads(1);
        let mut walk = self.repo.revwalk().map_err(local)?;
        let mut tips = 0;
        for r in self.repo.references().map_err(local)? {
            let Some(target) = r.map_err(local)?.target() else { continue };
            if self.repo.find_tag(target).is_ok() {
                pb.insert_object(target, None).map_err(local)?;
            }
            if let Ok(commit) = self.repo.find_object(target, None).and_then(|o| o.peel_to_commit()) {
                walk.push(commit.id()).map_err(local)?;
                tips += 1;
            }
        }
        if tips == 0 {
            return Ok(0);
        }
        pb.insert_walk(&mut walk).map_err(local)?;
        let pack_dir = dir.join("objects").join("pack");
        pb.write(&pack_dir, 0).map_err(local)?;
        let kept = pb.object_count();
        let name = pb.name().map_err(local)?.map(|n| format!("pack-{n}."));
        let Some(name) = name else {
            return Err(local(git2::Error::from_str("the new pack has no name")));
        };
        for entry in std::fs::read_dir(&pack_dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if file.starts_with("pack-") && !file.starts_with(&name) {
                std::fs::remove_file(&path).map_err(io)?;
            }
        }
        for entry in std::fs::read_dir(dir.join("objects")).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(is_loose_dir) {
                std::fs::remove_dir_all(&path).map_err(io)?;
            }
        }
        self.repo.odb().and_then(|odb| odb.refresh()).map_err(local)?;
        Ok(kept)
    }

    /// Downloads `refspecs` into the mirror.
    ///
    /// Over HTTP each request of the fetch goes on a connection of its own
    /// (`Connection: close`). libgit2 writes a request's headers and its body in two
    /// writes without `TCP_NODELAY`; on a kept-alive connection, after the advertisement
    /// was answered, the server's delayed ACK (40 ms on Linux) holds the negotiation's
    /// body back. A new connection starts in quick-ACK mode: on the lab's Git server a
    /// push's pass went from 112 to 69 ms (P1 of `scripts/bench`).
    fn fetch(&self, refspecs: &[&str]) -> Result<(), git2::Error> {
        let mut remote = self.repo.remote_anonymous(&self.url)?;
        remote.fetch(refspecs, Some(&mut self.fetch_options()), None)
    }

    /// How the mirror downloads: its credentials, no tags beyond the refspecs, each
    /// request on a connection of its own (see [`Mirror::fetch`]).
    fn fetch_options(&self) -> FetchOptions<'_> {
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(self.callbacks())
            .download_tags(AutotagOption::None)
            .custom_headers(&["Connection: close"])
            .proxy_options(proxy_options());
        fo
    }

    /// Reads the manifest files under `path` (`""` = whole repository) at commit
    /// `revision`. Directory symlinks that stay inside the repository are followed
    /// (their files named under the link's path); a symlink that leaves the repository,
    /// points at nothing or loops is an error naming it, unless its name has an
    /// extension other than a manifest's (`README.md`: not a directory, not read). A
    /// submodule (gitlink) anywhere under the path is an error naming it: its files are
    /// not in this repository, and reading it as empty would prune its objects.
    ///
    /// # Errors
    /// [`Error::PathNotFound`], [`Error::Symlink`], [`Error::Submodule`], [`Error::Local`],
    /// [`Error::Limit`] (a file over `maxFileBytes`, checked before it is read; more
    /// than `maxFiles`).
    pub fn snapshot(&self, revision: &str, path: &str) -> Result<Snapshot, Error> {
        // the whole repository ("" contains every path)
        self.snapshot_within(revision, path, &[String::new()])
    }

    /// [`Mirror::snapshot`], where a symlink may only point into `path` or one of
    /// `shared` (repository paths): one application's files cannot pull in another's
    /// through a link.
    ///
    /// # Errors
    /// As [`Mirror::snapshot`]; [`Error::SymlinkOutside`].
    pub fn snapshot_within(&self, revision: &str, path: &str, shared: &[String]) -> Result<Snapshot, Error> {
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let commit = Oid::from_str(revision).and_then(|o| self.repo.find_commit(o)).map_err(local)?;
        let subject = commit.summary().ok().flatten().unwrap_or("").to_string();
        let root = commit.tree().map_err(local)?;
        let path = path.trim_matches('/');
        let within: Vec<String> = if shared.is_empty() && path.is_empty() {
            vec![]
        } else {
            std::iter::once(path).chain(shared.iter().map(|s| s.trim_matches('/'))).map(String::from).collect()
        };
        let walk = Walk { mirror: self, root: &root, within: &within };
        let (tree, real) = if path.is_empty() {
            (root.clone(), String::new())
        } else {
            let not_found = || Error::PathNotFound { path: path.into(), revision: revision.into() };
            let entry = root.get_path(Path::new(path)).map_err(|_| not_found())?;
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Tree), _) => (self.repo.find_tree(entry.id()).map_err(local)?, path.to_string()),
                (Some(ObjectType::Commit), _) => return Err(walk.submodule(path, path, entry.id())),
                (Some(ObjectType::Blob), 0o120000) => match walk.resolve(path, path, entry.id())? {
                    (target, Some(tree), _) => (tree, target),
                    (_, None, _) => return Err(not_found()),
                },
                _ => return Err(not_found()),
            }
        };
        let top_level = tree.iter().filter_map(|e| e.name().ok().map(str::to_string)).collect();
        let mut files = Vec::new();
        walk.collect(&tree, path, &mut vec![real], &mut files)?;
        let files_digest = files_digest(&files);
        Ok(Snapshot {
            revision: revision.into(),
            subject,
            files,
            files_digest,
            root_tree: root.id().to_string(),
            top_level,
        })
    }

    /// A snapshot of `revision` without files (its subject only): what a render that
    /// failed before reading files reports.
    pub fn empty_snapshot(&self, revision: &str) -> Snapshot {
        let commit = Oid::from_str(revision).and_then(|o| self.repo.find_commit(o)).ok();
        Snapshot {
            revision: revision.into(),
            subject: commit.as_ref().and_then(|c| c.summary().ok().flatten()).unwrap_or("").to_string(),
            files: vec![],
            files_digest: files_digest(&[]),
            root_tree: commit.and_then(|c| c.tree().ok()).map(|t| t.id().to_string()).unwrap_or_default(),
            top_level: vec![],
        }
    }

    /// A read-only view of commit `revision`'s tree, for telling what a render reads
    /// before anything is written ([`View`]).
    ///
    /// # Errors
    /// [`Error::Local`] (no such commit in the mirror).
    pub fn view(&self, revision: &str) -> Result<View<'_>, Error> {
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let root =
            Oid::from_str(revision).and_then(|o| self.repo.find_commit(o)).and_then(|c| c.tree()).map_err(local)?;
        Ok(View { mirror: self, root })
    }

    /// Writes the parts `roots` (repository paths of directories or files; `""` is the
    /// whole commit) of the commit's tree under `dest` (an empty directory): a working
    /// copy for a render tool, holding only what the render may read. A blob's size is
    /// checked against `maxFileBytes` before it is read, and the files written against
    /// `maxFiles`: a large file elsewhere in the repository is never read. A symlink is
    /// written only when it points into one of `roots` (confined like a plain
    /// snapshot's: a link leaving them, the repository, pointing at nothing or looping is
    /// an error naming it, unless its name has an extension other than a manifest's —
    /// then it is left out). Submodules stay empty directories.
    ///
    /// # Errors
    /// [`Error::Local`] (reading the mirror or writing `dest`), [`Error::Limit`],
    /// [`Error::Symlink`], [`Error::SymlinkOutside`].
    pub fn export(&self, revision: &str, dest: &Path, roots: &[String]) -> Result<(), Error> {
        let view = self.view(revision)?;
        let mut roots: Vec<String> = roots.iter().map(|r| r.trim_matches('/').to_string()).collect();
        roots.sort();
        roots.dedup();
        let inside = |p: &str, r: &str| r.is_empty() || p == r || p.starts_with(&format!("{r}/"));
        // a root inside another is written with it
        let kept: Vec<String> =
            roots.iter().filter(|r| !roots.iter().any(|o| o != *r && inside(r, o))).cloned().collect();
        let within: Vec<String> = if kept.iter().any(String::is_empty) { vec![] } else { kept.clone() };
        let walk = Walk { mirror: self, root: &view.root, within: &within };
        let mut copy = WorkingCopy { walk: &walk, dest, written: 0 };
        for r in &kept {
            if r.is_empty() {
                copy.tree(&view.root, "")?;
                continue;
            }
            let Ok(entry) = view.root.get_path(Path::new(r)) else { continue };
            if let Some(parent) = Path::new(r).parent() {
                std::fs::create_dir_all(dest.join(parent)).map_err(|e| copy.io(e))?;
            }
            copy.entry(r, entry.id(), entry.kind(), entry.filemode())?;
        }
        Ok(())
    }
}

/// A read-only view of one commit's tree ([`Mirror::view`]).
pub struct View<'a> {
    mirror: &'a Mirror,
    root: git2::Tree<'a>,
}

impl View<'_> {
    /// What `path` is at this commit (symlinks not followed: a link is a file).
    pub fn node(&self, path: &str) -> crate::render::kustomize::Node {
        use crate::render::kustomize::Node;
        let path = path.trim_matches('/');
        if path.is_empty() {
            return Node::Dir;
        }
        match self.root.get_path(Path::new(path)).ok().map(|e| e.kind()) {
            Some(Some(ObjectType::Tree)) => Node::Dir,
            Some(Some(ObjectType::Blob)) => Node::File,
            _ => Node::Missing,
        }
    }

    /// The content of the file at `path` (`None`: no file there), its size checked
    /// against `maxFileBytes` before it is read.
    ///
    /// # Errors
    /// [`Error::Limit`], [`Error::Local`].
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>, Error> {
        let Ok(entry) = self.root.get_path(Path::new(path.trim_matches('/'))) else { return Ok(None) };
        if entry.kind() != Some(ObjectType::Blob) || entry.filemode() == 0o120000 {
            return Ok(None);
        }
        let walk = Walk { mirror: self.mirror, root: &self.root, within: &[] };
        walk.read_blob(path, entry.id(), 1).map(Some)
    }

    /// The object id (40 hex) of `path` (`""`: the root tree); `None` when missing.
    pub fn id(&self, path: &str) -> Option<String> {
        let path = path.trim_matches('/');
        if path.is_empty() {
            return Some(self.root.id().to_string());
        }
        self.root.get_path(Path::new(path)).ok().map(|e| e.id().to_string())
    }
}

/// Writing a working copy ([`Mirror::export`]).
struct WorkingCopy<'a> {
    walk: &'a Walk<'a>,
    dest: &'a Path,
    /// Files written so far.
    written: usize,
}

impl WorkingCopy<'_> {
    fn io(&self, e: std::io::Error) -> Error {
        self.walk.local(git2::Error::from_str(&format!("{}: {e}", self.dest.display())))
    }

    /// Writes the entries of `tree`, at repository path `dir`.
    fn tree(&mut self, tree: &git2::Tree<'_>, dir: &str) -> Result<(), Error> {
        for e in tree.iter() {
            let name = e.name().unwrap_or("");
            let rel = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
            self.entry(&rel, e.id(), e.kind(), e.filemode())?;
        }
        Ok(())
    }

    /// Writes the entry at repository path `rel` (object `id`).
    fn entry(&mut self, rel: &str, id: Oid, kind: Option<ObjectType>, mode: i32) -> Result<(), Error> {
        let out = self.dest.join(rel);
        match (kind, mode) {
            (Some(ObjectType::Tree), _) => {
                std::fs::create_dir_all(&out).map_err(|e| self.io(e))?;
                let tree = self.walk.mirror.repo.find_tree(id).map_err(|e| self.walk.local(e))?;
                self.tree(&tree, rel)
            }
            (Some(ObjectType::Commit), _) => std::fs::create_dir_all(&out).map_err(|e| self.io(e)),
            (Some(ObjectType::Blob), 0o120000) => {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                let guessed_file = name.rsplit_once('.').is_some_and(|(_, ext)| !ext.is_empty());
                match self.walk.resolve(rel, rel, id) {
                    Ok((target, _, _)) => {
                        let up = "../".repeat(rel.matches('/').count());
                        let link =
                            if up.is_empty() && target.is_empty() { ".".to_string() } else { format!("{up}{target}") };
                        std::os::unix::fs::symlink(link, &out).map_err(|e| self.io(e))
                    }
                    Err(_) if guessed_file && !crate::render::is_manifest_file(name) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            (Some(ObjectType::Blob), _) => {
                self.written += 1;
                let limits = self.walk.mirror.limits;
                if self.written > limits.max_files {
                    return Err(crate::limits::Exceeded::WorkingCopyFiles { limit: limits.max_files }.into());
                }
                let content = self.walk.read_blob(rel, id, 1)?;
                std::fs::write(&out, content).map_err(|e| self.io(e))
            }
            _ => Ok(()),
        }
    }
}

/// A walk over one commit's tree.
struct Walk<'a> {
    mirror: &'a Mirror,
    root: &'a git2::Tree<'a>,
    /// Repository paths a symlink may point into (the application's path and its
    /// environment's `sharedPaths`); empty: anywhere in the repository.
    within: &'a [String],
}

/// How many directory symlinks a walk follows inside one another at most.
const MAX_LINK_DEPTH: usize = 16;

impl Walk<'_> {
    fn local(&self, source: git2::Error) -> Error {
        Error::Local { dir: self.mirror.repo.path().into(), source }
    }

    /// Adds the manifest files of `tree` (seen at `shown`) to `out`. `stack` holds the
    /// real paths of the directories being walked, the innermost last: a symlink to one
    /// of them (or to an ancestor) is a loop.
    fn collect(
        &self,
        tree: &git2::Tree<'_>,
        shown: &str,
        stack: &mut Vec<String>,
        out: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<(), Error> {
        let join = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { format!("{a}/{b}") };
        let real_dir = stack.last().cloned().unwrap_or_default();
        for e in tree.iter() {
            let name = e.name().unwrap_or("");
            let (seen, real) = (join(shown, name), join(&real_dir, name));
            match (e.kind(), e.filemode()) {
                (Some(ObjectType::Tree), _) => {
                    let sub = self.mirror.repo.find_tree(e.id()).map_err(|err| self.local(err))?;
                    stack.push(real);
                    let r = self.collect(&sub, &seen, stack, out);
                    stack.pop();
                    r?;
                }
                (Some(ObjectType::Commit), _) => return Err(self.submodule(&seen, &real, e.id())),
                (Some(ObjectType::Blob), 0o120000) => {
                    let guessed_file = name.rsplit_once('.').is_some_and(|(_, ext)| !ext.is_empty());
                    let resolved = match self.resolve(&real, &seen, e.id()) {
                        Ok(r) => r,
                        Err(_) if guessed_file && !crate::render::is_manifest_file(name) => continue,
                        Err(err) => return Err(err),
                    };
                    match resolved {
                        (target, Some(sub), _) => {
                            let inside = |dir: &String| {
                                target.is_empty() || *dir == target || dir.starts_with(&format!("{target}/"))
                            };
                            if stack.iter().any(inside) || stack.len() > MAX_LINK_DEPTH {
                                let link = self.link_target(e.id())?;
                                return Err(Error::Symlink { path: seen, target: link });
                            }
                            stack.push(target);
                            let r = self.collect(&sub, &seen, stack, out);
                            stack.pop();
                            r?;
                        }
                        (_, None, blob) if crate::render::is_manifest_file(&seen) => {
                            let content = self.read_blob(&seen, blob, out.len() + 1)?;
                            out.push((seen, content));
                        }
                        _ => {}
                    }
                }
                (Some(ObjectType::Blob), _) if crate::render::is_manifest_file(name) => {
                    let content = self.read_blob(&seen, e.id(), out.len() + 1)?;
                    out.push((seen, content));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The content of blob `id` (file `seen`, the `count`th read), within the mirror's
    /// limits: its size is checked before it is read.
    fn read_blob(&self, seen: &str, id: Oid, count: usize) -> Result<Vec<u8>, Error> {
        let odb = self.mirror.repo.odb().map_err(|e| self.local(e))?;
        let (size, _) = odb.read_header(id).map_err(|e| self.local(e))?;
        self.mirror.limits.check_file(seen, size as u64, count)?;
        Ok(self.mirror.repo.find_blob(id).map_err(|e| self.local(e))?.content().to_vec())
    }

    fn link_target(&self, id: Oid) -> Result<String, Error> {
        let blob = self.mirror.repo.find_blob(id).map_err(|e| self.local(e))?;
        Ok(String::from_utf8_lossy(blob.content()).to_string())
    }

    /// Follows the symlink at `real` (blob `id`; chains of at most 8 links) to a path
    /// inside the repository; returns that path, its tree when it is a directory, and
    /// its object id. Errors name the link as seen (`seen`).
    fn resolve(&self, real: &str, seen: &str, mut id: Oid) -> Result<(String, Option<git2::Tree<'_>>, Oid), Error> {
        let path = seen;
        let mut current = PathBuf::from(real);
        for _ in 0..8 {
            let target = self.link_target(id)?;
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
            let norm_str = norm.to_string_lossy().to_string();
            let inside = |p: &String| p.is_empty() || norm_str == *p || norm_str.starts_with(&format!("{p}/"));
            if !self.within.is_empty() && !self.within.iter().any(inside) {
                return Err(Error::SymlinkOutside {
                    path: path.into(),
                    target: target.clone(),
                    within: self.within.join(", "),
                });
            }
            if norm_str.is_empty() {
                return Ok((norm_str, Some(self.root.clone()), self.root.id()));
            }
            let entry = self.root.get_path(&norm).map_err(|_| bad())?;
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Blob), 0o120000) => {
                    id = entry.id();
                    current = norm;
                }
                (Some(ObjectType::Blob), _) => return Ok((norm_str, None, entry.id())),
                (Some(ObjectType::Tree), _) => {
                    let tree = self.mirror.repo.find_tree(entry.id()).map_err(|e| self.local(e))?;
                    return Ok((norm_str, Some(tree), entry.id()));
                }
                _ => return Err(bad()),
            }
        }
        Err(Error::Symlink { path: path.into(), target: "(too many levels)".into() })
    }

    /// The error for the gitlink at `seen` (real path `real`, commit `id`), with its
    /// URL from the root's `.gitmodules` when listed.
    fn submodule(&self, seen: &str, real: &str, id: Oid) -> Error {
        let gitmodules = self
            .root
            .get_path(Path::new(".gitmodules"))
            .ok()
            .and_then(|e| self.mirror.repo.find_blob(e.id()).ok())
            .map(|b| String::from_utf8_lossy(b.content()).to_string());
        let url = gitmodules.and_then(|text| submodule_url(&text, real));
        Error::Submodule { path: seen.into(), url, commit: id.to_string() }
    }
}

/// The `url` of the `.gitmodules` section whose `path` is `path` (git-config syntax:
/// `[submodule "name"]` sections of `key = value` lines), user info removed.
fn submodule_url(gitmodules: &str, path: &str) -> Option<String> {
    let mut sections: Vec<(Option<String>, Option<String>)> = Vec::new();
    for line in gitmodules.lines().map(str::trim) {
        if line.starts_with('[') {
            sections.push((None, None));
        } else if let (Some(last), Some((k, v))) = (sections.last_mut(), line.split_once('=')) {
            let v = v.trim().trim_matches('"').to_string();
            match k.trim() {
                "path" => last.0 = Some(v),
                "url" => last.1 = Some(v),
                _ => {}
            }
        }
    }
    let url = sections.into_iter().find(|(p, _)| p.as_deref().map(|p| p.trim_matches('/')) == Some(path))?.1?;
    Some(match url::Url::parse(&url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url,
    })
}

/// Packs a mirror may hold before a download repacks it: each download adds one.
pub const MAINTAIN_PACKS: usize = 16;
/// Loose objects a mirror may hold before a download repacks it.
pub const MAINTAIN_LOOSE: usize = 1024;

/// `objects/` subdirectory of loose objects: two hex digits.
fn is_loose_dir(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Packs (`objects/pack/*.pack`) and loose objects (files in `objects/XX/`) under
/// `objects`; what cannot be read counts as nothing.
fn object_files(objects: &Path) -> (usize, usize) {
    let count = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries.filter_map(Result::ok).filter(|e| e.file_name().to_str().is_some_and(keep)).count()
        })
    };
    let packs = count(&objects.join("pack"), &|n| n.ends_with(".pack"));
    let loose = std::fs::read_dir(objects).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(is_loose_dir))
            .map(|e| count(&e.path(), &|_| true))
            .sum()
    });
    (packs, loose)
}

fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `s` can be an abbreviated commit SHA (7 to 39 hex digits), as plumb and Git
/// print them.
fn is_short_sha(s: &str) -> bool {
    (7..40).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether the OpenSSH `known_hosts` file lists `host` on `port` (`None`: the URL names
/// none, port 22) with exactly `key` (the raw key blob the server sent), parsed with
/// `ssh-key`'s known_hosts parser.
///
/// The name looked up is OpenSSH's (`sshd(8)` "SSH_KNOWN_HOSTS FILE FORMAT", `put_host_port`
/// in OpenSSH's `misc.c`): `host` on port 22, `[host]:port` on any other port.
/// - Plain names are compared exactly, ASCII case-insensitively (no wildcards): a bare
///   `host` entry matches port 22 only, a `[host]:port` entry that port only.
/// - Hashed entries (`|1|salt|hash`, `ssh-keygen -H`) match when the HMAC-SHA1 of that
///   name under the salt is the hash.
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

/// Whether a known_hosts entry's host field names `host` on `port` (see
/// [`known_host_matches`]).
fn host_listed(patterns: &ssh_key::known_hosts::HostPatterns, host: &str, port: Option<u16>) -> bool {
    use hmac::{Hmac, KeyInit, Mac};
    use ssh_key::known_hosts::HostPatterns;
    let name = match port {
        Some(p) if p != 22 => format!("[{host}]:{p}"),
        _ => host.to_owned(),
    };
    match patterns {
        HostPatterns::Patterns(list) => list.iter().any(|h| h.eq_ignore_ascii_case(&name)),
        HostPatterns::HashedName { salt, hash } => Hmac::<sha1::Sha1>::new_from_slice(salt).is_ok_and(|mut mac| {
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }),
    }
}

/// The port an `ssh://` repository URL names, if any (scp-style `git@host:path` URLs
/// have none: port 22).
fn url_port(url: &str) -> Option<u16> {
    url::Url::parse(url).ok().and_then(|u| u.port())
}

/// [`Snapshot::files_digest`] of `files`.
pub(crate) fn files_digest(files: &[(String, Vec<u8>)]) -> String {
    let mut h = sha2::Sha256::new();
    for (path, bytes) in files {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex::encode(h.finalize())
}

/// The proxy of a Git connection: libgit2's automatic detection, which reads Git's
/// `http.proxy` and the environment (`HTTPS_PROXY` / `HTTP_PROXY`, lower case too, and
/// `NO_PROXY` for the hosts reached directly), as `git` does.
fn proxy_options() -> git2::ProxyOptions<'static> {
    let mut proxy = git2::ProxyOptions::new();
    proxy.auto();
    proxy
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A repository with branch `main` of one empty commit (`c1`) in `<tmp>/work`, and a
    /// mirror of it in `<tmp>/cache`.
    fn one_commit() -> (tempfile::TempDir, PathBuf, Mirror) {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", "c1"]);
        let mirror = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open");
        (tmp, work, mirror)
    }

    /// Runs git in `dir` with a fixed identity (also the directories listing's tests).
    pub(super) fn git(dir: &Path, args: &[&str]) {
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
        // an abbreviated SHA, as plumb prints it
        assert_eq!(mirror.resolve(&first.revision[..7]).expect("short sha").revision, first.revision);
        assert!(matches!(mirror.resolve("0000000"), Err(Error::RevisionNotFound { .. })), "abbreviates nothing");

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

    /// Test helper: blob id of `path` in the tree of commit `rev` of `work`.
    fn blob_in(work: &Path, rev: &str, path: &str) -> Oid {
        let repo = Repository::open(work).expect("open work");
        let tree = repo.revparse_single(rev).and_then(|o| o.peel_to_tree()).expect("tree");
        tree.get_path(Path::new(path)).expect("entry").id()
    }

    /// A file that a force-push removed from every ref is gone from the mirror once
    /// downloads have piled up [`MAINTAIN_PACKS`] packs (the pool maintains the mirror after
    /// each download); what the refs reach stays readable.
    #[test]
    fn a_force_pushed_away_file_leaves_the_mirror_after_maintenance() {
        let (tmp, work, mut mirror) = one_commit();
        write(&work, "app/secret.yaml", "kind: ConfigMap # pushed by mistake\n");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "oops"]);
        let mistake = blob_in(&work, "HEAD", "app/secret.yaml");
        assert!(mirror.resolve("main").expect("resolve").downloaded);
        assert!(mirror.repo.find_blob(mistake).is_ok(), "fetched");
        // force-push: the commit is replaced by one without the file
        git(&work, &["reset", "-q", "--hard", "HEAD~1"]);
        git(&work, &["reflog", "expire", "--expire=now", "--all"]);
        git(&work, &["gc", "-q", "--prune=now"]);
        let mut last = String::new();
        for i in 0..=MAINTAIN_PACKS {
            write(&work, "app/cm.yaml", &format!("kind: ConfigMap # {i}\n"));
            git(&work, &["add", "-A"]);
            git(&work, &["commit", "-qm", &format!("c{i}")]);
            let resolved = mirror.resolve("main").expect("resolve");
            assert!(resolved.downloaded);
            mirror.maintain();
            last = resolved.revision;
        }
        assert!(mirror.repo.find_blob(mistake).is_err(), "the force-pushed-away file is still in the mirror");
        let (packs, loose) = object_files(&mirror.repo.path().join("objects"));
        assert!(packs <= MAINTAIN_PACKS && loose <= MAINTAIN_LOOSE, "{packs} packs, {loose} loose");
        let snap = mirror.snapshot(&last, "app").expect("snapshot after maintenance");
        assert_eq!(
            snap.files,
            [("app/cm.yaml".to_string(), format!("kind: ConfigMap # {MAINTAIN_PACKS}\n").into_bytes())]
        );
        // a mirror opened again reads the same
        let again = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open");
        assert!(again.resolve("main").is_ok_and(|r| r.revision == last && !r.downloaded));
        assert!(again.descends(&last, &mirror.resolve("main").expect("resolve").revision).unwrap_or(false));
    }

    /// A resolve reads the last advertisement when its freshness accepts it (a poll
    /// pass's), and asks again otherwise (a webhook's pass): a commit pushed after the
    /// last ask is seen only by the latter. A poller's ask returns the advertisement
    /// before it, to compare.
    #[test]
    fn an_earlier_advertisement_answers_only_the_passes_that_accept_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("a.yaml"), "a: 1\n").expect("write");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "c1"]);
        let mirror = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open");
        let polled = std::time::Instant::now();
        let (earlier, first) = mirror.ask_refs().expect("ask");
        assert!(earlier.is_none(), "nothing asked before");
        let c1 = mirror.resolve_since("main", Since::at(polled)).expect("resolve").revision;
        std::fs::write(work.join("a.yaml"), "a: 2\n").expect("write");
        git(&work, &["commit", "-qam", "c2"]);

        let again = Freshness::Within(std::time::Duration::from_secs(3600)).since(std::time::Instant::now());
        assert_eq!(mirror.resolve_since("main", again).expect("resolve").revision, c1, "the ask's refs, reused");
        // a peek reads the same refs without IO, and only when they answer
        assert_eq!(mirror.peek("main", again).as_deref(), Some(c1.as_str()));
        assert_eq!(mirror.peek("main", Freshness::Now.since(std::time::Instant::now())), None);
        assert_eq!(mirror.peek("nope", again), None);
        let now = Freshness::Now.since(std::time::Instant::now());
        let c2 = mirror.resolve_since("main", now).expect("resolve").revision;
        assert_ne!(c2, c1, "a fresh pass asks again and sees the push");

        let (earlier, latest) = mirror.ask_refs().expect("ask");
        assert_eq!(earlier.as_deref(), Some(&*latest), "the fresh pass's refs are the last before this ask");
        assert_eq!(refs::moved(&first, &latest, [("web", "main"), ("pinned", c1.as_str())]), ["web"]);
    }

    /// A revision that is no valid ref name (`*`, a refspec, a name Git refuses) is
    /// looked up in the advertisement only: it fetches nothing.
    #[test]
    fn a_revision_that_is_no_ref_name_fetches_nothing() {
        let (_tmp, work, mirror) = one_commit();
        git(&work, &["tag", "v1"]);
        git(&work, &["checkout", "-q", "-b", "other"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", "c2"]);
        for odd in ["*", "refs/heads/*", "refs/tags/*", "main:refs/plumb/heads/x", "+main", "ma..in"] {
            assert!(matches!(mirror.resolve(odd), Err(Error::RevisionNotFound { .. })), "{odd}");
        }
        let refs = || -> Vec<String> {
            let all = mirror.repo.references().expect("refs");
            all.filter_map(|r| r.ok().and_then(|r| r.name().ok().map(String::from))).collect()
        };
        let fetched = refs();
        assert!(fetched.is_empty(), "{fetched:?}");
        mirror.resolve("other").expect("a branch");
        assert_eq!(refs(), ["refs/plumb/heads/other"]);
    }

    /// A name that is both a branch and a tag is refused without fetching the tag (a tag
    /// named like a tracked branch brings nothing into the mirror); a branch moved back
    /// to a commit the mirror has downloads nothing.
    #[test]
    fn an_ambiguous_name_fetches_no_tag_and_a_branch_moved_back_downloads_nothing() {
        let (_tmp, work, mirror) = one_commit();
        let c1 = mirror.resolve("main").expect("resolve").revision;
        git(&work, &["commit", "-q", "--allow-empty", "-m", "c2"]);
        let c2 = mirror.resolve("main").expect("resolve");
        assert!(c2.downloaded && c2.revision != c1);
        git(&work, &["reset", "-q", "--hard", &c1]);
        assert_eq!(mirror.resolve("main").expect("moved back"), Resolved { revision: c1, downloaded: false });

        git(&work, &["checkout", "-q", "--orphan", "side"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", "tag only"]);
        git(&work, &["tag", "main"]);
        let out = std::process::Command::new("git").current_dir(&work).args(["rev-parse", "HEAD"]).output();
        let tagged = Oid::from_str(String::from_utf8_lossy(&out.expect("rev-parse").stdout).trim()).expect("sha");
        assert!(matches!(mirror.resolve("main"), Err(Error::AmbiguousRevision { .. })));
        assert!(mirror.repo.find_reference("refs/plumb/tags/main").is_err(), "no ref of the tag");
        assert!(mirror.repo.find_commit(tagged).is_err(), "nor its commit");
    }

    /// Once an ask fails, a pass that would read the last refs asks again and fails too
    /// (its status says so) instead of reading refs the remote may no longer have.
    #[test]
    fn a_failed_ask_forgets_the_last_refs() {
        let (tmp, work, mirror) = one_commit();
        let hour = Freshness::Within(std::time::Duration::from_secs(3600));
        mirror.ask_refs().expect("ask");
        assert!(mirror.resolve_since("main", hour.since(std::time::Instant::now())).is_ok(), "the ask's refs");
        std::fs::rename(&work, tmp.path().join("gone")).expect("rename");
        assert!(matches!(mirror.ask_refs(), Err(Error::Fetch { .. })), "the remote is gone");
        let read = mirror.resolve_since("main", hour.since(std::time::Instant::now()));
        assert!(matches!(read, Err(Error::Fetch { .. })), "asked again: {read:?}");
    }

    /// A pass reads refs asked for at most the freshness's age before it started (at or
    /// after its start for `Now`), however far back the monotonic clock reaches.
    #[test]
    fn freshness_bounds_the_age_of_the_refs_read() {
        let secs = std::time::Duration::from_secs;
        let t0 = std::time::Instant::now();
        let t1 = t0 + secs(10);
        assert!(Freshness::Now.since(t0).answers(t0));
        assert!(Freshness::Now.since(t0).answers(t1), "asked for after the pass started");
        assert!(!Freshness::Now.since(t1).answers(t0));
        assert!(Freshness::Within(secs(10)).since(t1).answers(t0));
        assert!(!Freshness::Within(secs(9)).since(t1).answers(t0));
        assert!(Freshness::Within(secs(1 << 40)).since(t1).answers(t0), "longer than the clock reaches back");
    }

    /// A repository at `work` with one commit of what `setup` wrote; its snapshot of
    /// `path` (the mirror lives under `work/../cache`).
    fn snapshot_of(work: &Path, path: &str, setup: impl FnOnce(&Path)) -> Result<Snapshot, Error> {
        std::fs::create_dir_all(work).expect("mkdir");
        git(work, &["init", "-q", "-b", "main"]);
        setup(work);
        // (--ignore-removal keeps the gitlinks a setup staged without a checkout)
        git(work, &["add", "--ignore-removal", "."]);
        git(work, &["commit", "-qm", "c"]);
        let cache = work.parent().expect("parent").join("cache");
        let mirror = Mirror::open(&cache, work.to_str().expect("utf8"), Credentials::default()).expect("open");
        let rev = mirror.resolve("main").expect("resolve").revision;
        mirror.snapshot(&rev, path)
    }

    fn write(root: &Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn link(root: &Path, path: &str, target: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, p).expect("symlink");
    }

    /// argocd-16: a gitlink under the path (or as the path) fails naming the entry, the
    /// submodule's URL (user info removed) and commit.
    #[test]
    fn submodules_fail_naming_the_entry() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let gitlink = |w: &Path| {
            write(w, "apps/web/deploy.yaml", "a: 1\n");
            write(
                w,
                ".gitmodules",
                "[submodule \"shared\"]\n\tpath = apps/web/shared\n\turl = https://user:tok@git.example.test/acme/shared-config.git\n",
            );
            git(w, &["update-index", "--add", "--cacheinfo", &format!("160000,{sha},apps/web/shared")]);
        };
        let tmp = tempfile::tempdir().expect("tmp");
        let err = snapshot_of(&tmp.path().join("w"), "apps/web", gitlink).expect_err("submodule");
        assert_eq!(
            err.to_string(),
            format!(
                "apps/web/shared is a git submodule (https://git.example.test/acme/shared-config.git@{sha}); plumb does not fetch submodules: commit the files, or point an application at that repository"
            )
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let err = snapshot_of(&tmp.path().join("w"), "apps/web/shared", gitlink).expect_err("the path itself");
        assert!(matches!(&err, Error::Submodule { path, .. } if path == "apps/web/shared"), "{err}");
        let tmp = tempfile::tempdir().expect("tmp");
        let err = snapshot_of(&tmp.path().join("w"), "apps/web", |w| {
            git(w, &["update-index", "--add", "--cacheinfo", &format!("160000,{sha},apps/web/lib")]);
        })
        .expect_err("no .gitmodules");
        assert!(err.to_string().starts_with("apps/web/lib is a git submodule (no .gitmodules entry@0123"), "{err}");
    }

    /// Directory symlinks inside the repository are followed (files named under the
    /// link); loops and escapes are errors naming the link; a non-manifest file link
    /// that points nowhere is left alone.
    #[test]
    fn directory_symlinks_are_followed_inside_the_repository() {
        let cm = |n: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}}}\n");
        let tmp = tempfile::tempdir().expect("tmp");
        let snap = snapshot_of(&tmp.path().join("w"), "apps/web", |w| {
            write(w, "apps/web/own.yaml", &cm("own"));
            write(w, "common/shared/a.yaml", &cm("a"));
            write(w, "common/other.yaml", &cm("b"));
            link(w, "common/shared/b.yaml", "../other.yaml"); // relative to the real place
            link(w, "apps/web/shared", "../../common/shared");
            link(w, "apps/web/NOTES.md", "../../nowhere.md");
        })
        .expect("snapshot");
        let names: Vec<_> = snap.files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["apps/web/own.yaml", "apps/web/shared/a.yaml", "apps/web/shared/b.yaml"]);
        assert_eq!(snap.files[2].1, cm("b").as_bytes());
        assert!(snap.top_level.contains(&"shared".to_string()));

        for (target, why) in [
            ("..", "an ancestor: a loop"),
            (".", "itself"),
            ("../../../etc", "leaves the repository"),
            ("../../missing", "nothing"),
        ] {
            let tmp = tempfile::tempdir().expect("tmp");
            let err = snapshot_of(&tmp.path().join("w"), "apps/web", |w| {
                write(w, "apps/web/own.yaml", &cm("own"));
                link(w, "apps/web/sub/up", target);
            })
            .expect_err(why);
            assert!(matches!(&err, Error::Symlink { path, .. } if path == "apps/web/sub/up"), "{why}: {err}");
        }
        // two links pointing at each other's directories
        let tmp = tempfile::tempdir().expect("tmp");
        let err = snapshot_of(&tmp.path().join("w"), "", |w| {
            link(w, "a/to-b", "../b");
            link(w, "b/to-a", "../a");
        })
        .expect_err("a loop through two links");
        assert!(matches!(err, Error::Symlink { .. }), "{err}");
    }

    /// A working copy holds only its roots: another application's files are not
    /// written, a file elsewhere over `maxFileBytes` is never read, one inside is refused
    /// naming it, links are written only into the roots.
    #[test]
    fn export_writes_only_the_roots_and_confines_links() {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("w");
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        write(&work, "base/kustomization.yaml", "resources: [cm.yaml]\n");
        write(&work, "other/secret.yaml", "token: b\n");
        write(&work, "other/big.bin", &"0".repeat(5000));
        write(&work, "shared/values.yaml", "a: 1\n");
        link(&work, "overlay/base", "../base");
        link(&work, "overlay/values.yaml", "../shared/values.yaml");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "c"]);
        let limits = crate::limits::Limits { max_file_bytes: 1000, ..crate::limits::Limits::default() };
        let mirror = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open")
            .with_limits(limits);
        let rev = mirror.resolve("main").expect("resolve").revision;
        let export = |roots: &[&str]| {
            let out = tempfile::tempdir().expect("out");
            let roots: Vec<String> = roots.iter().map(|r| (*r).to_string()).collect();
            mirror.export(&rev, out.path(), &roots).map(|()| out)
        };
        let out = export(&["overlay", "base", "shared"]).expect("export");
        assert_eq!(
            std::fs::read_to_string(out.path().join("overlay/base/kustomization.yaml")).expect("via link"),
            "resources: [cm.yaml]\n"
        );
        assert_eq!(std::fs::read_to_string(out.path().join("overlay/values.yaml")).expect("via link"), "a: 1\n");
        assert!(!out.path().join("other").exists(), "another path is not written (nor its big file read)");
        // a link out of the roots: a file-like name is left out, a directory is an error
        let err = export(&["overlay", "base"]).expect_err("link into shared/ without it").to_string();
        assert_eq!(
            err,
            "overlay/values.yaml: symlink to `../shared/values.yaml` leaves the application's path (allowed: base, overlay); not followed"
        );
        let err = export(&["other"]).expect_err("big file inside").to_string();
        assert_eq!(
            err,
            "other/big.bin is 5000 bytes, over the limit of 1000 bytes per file (settings.limits.maxFileBytes)"
        );
        let few = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open")
            .with_limits(crate::limits::Limits { max_files: 1, ..crate::limits::Limits::default() });
        let out = tempfile::tempdir().expect("out");
        let err = few.export(&rev, out.path(), &["shared".into(), "base".into()]).expect_err("two files");
        assert!(matches!(err, Error::Limit(crate::limits::Exceeded::WorkingCopyFiles { limit: 1 })), "{err}");
    }

    /// A link with a file-like, non-manifest name that leaves the roots is left out (as a
    /// plain snapshot leaves it): a chart cannot read another application's file through it.
    #[test]
    fn a_chart_file_linking_to_another_application_is_not_written() {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("w");
        std::fs::create_dir_all(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        write(&work, "apps/web/Chart.yaml", "name: web\n");
        write(&work, "apps/pay/secret.txt", "s3cret\n");
        link(&work, "apps/web/files/stolen.txt", "../../pay/secret.txt");
        link(&work, "apps/web/files/passwd.txt", "../../../../../../etc/passwd");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "c"]);
        let mirror = Mirror::open(&tmp.path().join("cache"), work.to_str().expect("utf8"), Credentials::default())
            .expect("open");
        let rev = mirror.resolve("main").expect("resolve").revision;
        let out = tempfile::tempdir().expect("out");
        mirror.export(&rev, out.path(), &["apps/web".into()]).expect("export");
        assert!(out.path().join("apps/web/Chart.yaml").is_file());
        for f in ["apps/web/files/stolen.txt", "apps/web/files/passwd.txt", "apps/pay"] {
            assert!(std::fs::symlink_metadata(out.path().join(f)).is_err(), "{f} is not in the working copy");
        }
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
        assert!(known_host_matches(&file, "ssh.example.test", Some(2222), &key));
        assert!(!known_host_matches(&file.with_file_name("absent"), "git.example.test", None, &key));
    }

    /// OpenSSH's rule: a bare name is port 22, `[host]:port` is that port alone.
    #[test]
    fn a_host_key_pinned_for_one_port_is_not_trusted_on_another() {
        let key = key_blob(KEY_B64);
        let (_dir, file) = known_hosts(&format!(
            "git.example.test ssh-ed25519 {KEY_B64}\n[ssh.example.test]:2222 ssh-ed25519 {KEY_B64}\n"
        ));
        assert!(known_host_matches(&file, "git.example.test", None, &key));
        assert!(known_host_matches(&file, "git.example.test", Some(22), &key));
        assert!(known_host_matches(&file, "GIT.example.test", None, &key), "names are case-insensitive");
        assert!(!known_host_matches(&file, "git.example.test", Some(2222), &key), "a bare entry is port 22");
        assert!(known_host_matches(&file, "ssh.example.test", Some(2222), &key));
        assert!(!known_host_matches(&file, "ssh.example.test", None, &key), "[host]:2222 is not port 22");
        assert!(!known_host_matches(&file, "ssh.example.test", Some(2223), &key), "nor another port");
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
        assert!(!known_host_matches(&file, "git.example.test", Some(2222), &key), "the bare name is port 22");
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
