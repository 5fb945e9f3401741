//! The mirrors of one process and the renders made from them.
//!
//! One [`Mirror`] per repository (opened on first use with the repository's
//! credentials: token file, SSH key, pinned host keys), locked while a fetch runs (and
//! while it is repacked after a download: [`Mirror::maintain`]), and always used off the
//! async threads (git2 is blocking). Renders are remembered by
//! (renderer, the commit's root tree or the path's files, path, application, namespace,
//! source options), so a pass at a known commit (or a commit that did not change its
//! inputs) renders nothing again and starts no child process. At most
//! [`RENDERS_PER_APP`] renders of one application and [`RENDER_CACHE_ENTRIES`] in all
//! are kept (least recently used dropped): however many commits one application's
//! authors push, the cache holds at most its current render and one more (each within
//! `maxRenderedBytes`). Renders of an application no longer configured age out under
//! the overall bound.
//!
//! A chart of `source.chart` is resolved before the cache is asked ([`super::chart`]:
//! the index or tag list read at most once per reconcile interval), and its digest is
//! part of the key: a new version in range renders again, the same one does not.
//!
//! The render tools, located once, and the dispatch on the source type are
//! [`render::tools`]'s: on a miss the pool gives them the commit (a
//! [`render::tools::Tree`]), the target cluster's capabilities and the limits.

use std::{
    borrow::Cow,
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use super::{Credentials, Mirror, Refs, Since, Snapshot};
use crate::{
    config::{Config, Repository, SourceType, read_secret},
    render::{
        self, Rendered,
        tools::{Capabilities, Files, Target, Tools, Tree},
    },
};

/// Why an application's source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The repository's token file could not be read.
    #[error("tokenFile {}: {source}", file.display())]
    Token {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Git failed (open, resolve, fetch, read).
    #[error(transparent)]
    Git(#[from] super::Error),
    /// The blocking fetch task failed (panicked or was cancelled).
    #[error("source task: {0}")]
    Task(String),
    /// A thread panicked while holding the mirror.
    #[error("mirror lock poisoned")]
    Poisoned,
    /// A thread panicked while opening a mirror.
    #[error("mirror cache poisoned")]
    PoolPoisoned,
}

/// The outcome of fetching and rendering an application's source.
#[derive(Debug)]
pub enum Desired {
    /// The commit and its manifests (with the render's warnings), shared with the
    /// render cache (one copy, however many passes hold it); then whether this call
    /// rendered (`false`: the render cache answered, nothing ran).
    Rendered(Snapshot, Arc<Rendered>, bool),
    /// The repository could not be read.
    FetchFailed(FetchError),
    /// The commit was read but does not render.
    RenderFailed(Snapshot, render::Error),
}

/// How many snapshots without their files a pool keeps (a few hundred bytes each).
pub const SNAPSHOT_HEADS: usize = 4096;

/// How many renders a pool keeps: more than the applications of a large policy (1,000
/// in the benchmarks), so that each keeps its current render while older ones age out;
/// with fewer, a round of passes over every application in turn found none cached.
/// A render is kept as text: a few hundred bytes per small object.
pub const RENDER_CACHE_ENTRIES: usize = 2048;

/// How many renders of one application a pool keeps: its current commit's and one
/// more — a pinned application's pin beside its tracked ref's head (which other
/// applications' passes render to see whether it still declares an object, before a
/// prune and when an object's tracking moved), or the commit before. Pushed commits
/// replace them.
pub const RENDERS_PER_APP: usize = 2;

/// Renders by key, with the tick of their last use and their application.
#[derive(Default)]
struct RenderCache {
    tick: u64,
    entries: HashMap<String, (u64, Arc<Rendered>, String)>,
}

impl RenderCache {
    fn get(&mut self, key: &str) -> Option<Arc<Rendered>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|(t, r, _)| {
            *t = tick;
            r.clone()
        })
    }

    /// Keeps `rendered` of application `app` under `key`, dropping the least recently
    /// used render of `app` past [`RENDERS_PER_APP`], and of all past
    /// [`RENDER_CACHE_ENTRIES`].
    fn put(&mut self, app: &str, key: String, rendered: Arc<Rendered>) {
        self.tick += 1;
        let oldest = |entries: &HashMap<String, (u64, Arc<Rendered>, String)>, of_app: bool| {
            let held = entries.iter().filter(|(k, (_, _, a))| **k != key && (!of_app || a == app));
            held.min_by_key(|(_, (t, _, _))| *t).map(|(k, _)| k.clone())
        };
        if self.entries.iter().filter(|(k, (_, _, a))| **k != key && a == app).count() >= RENDERS_PER_APP
            && let Some(old) = oldest(&self.entries, true)
        {
            self.entries.remove(&old);
        }
        if self.entries.len() >= RENDER_CACHE_ENTRIES
            && !self.entries.contains_key(&key)
            && let Some(old) = oldest(&self.entries, false)
        {
            self.entries.remove(&old);
        }
        self.entries.insert(key, (self.tick, rendered, app.to_string()));
    }
}

/// The repository paths a tool render reads and their object ids, or why they cannot
/// be told (a refused kustomization entry).
type ToolInputs = Result<(Vec<String>, String), render::Error>;

/// How many failed renders a pool remembers (their backoff); past it, all are forgotten.
pub const FAILURES_KEPT: usize = 4096;

/// Renders that failed, by render key: the error, how many times in a row, and until
/// when the same inputs are not rendered again.
#[derive(Default)]
struct Failures {
    entries: HashMap<String, (render::Error, u32, std::time::Instant)>,
}

impl Failures {
    /// The error of `key` while its backoff lasts at `now`.
    fn get(&self, key: &str, now: std::time::Instant) -> Option<render::Error> {
        self.entries.get(key).filter(|(_, _, until)| now < *until).map(|(e, _, _)| e.clone())
    }

    /// Records that `key` failed with `error` at `now`: it backs off `base` after its
    /// first failure, doubled after each further one, at most `cap`.
    fn failed(
        &mut self,
        key: String,
        error: render::Error,
        now: std::time::Instant,
        base: std::time::Duration,
        cap: std::time::Duration,
    ) {
        if self.entries.len() >= FAILURES_KEPT && !self.entries.contains_key(&key) {
            self.entries.clear();
        }
        let times = self.entries.get(&key).map_or(1, |(_, n, _)| n.saturating_add(1));
        self.entries.insert(key, (error, times, now + backoff(times, base, cap)));
    }
}

/// The backoff after the `times`-th failure in a row: `base`, doubled each time, at
/// most `cap`.
fn backoff(times: u32, base: std::time::Duration, cap: std::time::Duration) -> std::time::Duration {
    base.saturating_mul(2u32.saturating_pow(times.saturating_sub(1))).min(cap)
}

/// Mirrors by repository name, the render cache, and the render tools.
pub struct Pool {
    cache_dir: PathBuf,
    config: Arc<Config>,
    mirrors: Mutex<HashMap<String, Arc<Mutex<Mirror>>>>,
    renders: Mutex<RenderCache>,
    /// The snapshots read, without their files, by commit, repository, path and shared
    /// paths (see [`Pool::desired`]); emptied when [`SNAPSHOT_HEADS`] are kept.
    heads: Arc<Mutex<HashMap<String, Snapshot>>>,
    tools: Tools,
    charts: super::chart::Charts,
    limits: crate::limits::Limits,
    /// What tool renders read, by revision, application and source (see
    /// [`Pool::tool_inputs`]); emptied when [`SNAPSHOT_HEADS`] are kept.
    inputs: Mutex<HashMap<String, ToolInputs>>,
    /// Renders that failed, by render key: not tried again before their backoff ends.
    failures: Mutex<Failures>,
    /// The target cluster's version and served `group/version`s, given to the render
    /// tools (see [`Pool::set_cluster`]), and when they were set.
    cluster: std::sync::RwLock<(Capabilities, Option<std::time::Instant>)>,
    /// The applications that have synced before ([`Pool::set_installed`]): Helm renders
    /// them as an upgrade.
    installed: Mutex<std::collections::HashSet<String>>,
}

/// How long the capabilities given to the render tools serve before the next pass asks
/// the cluster's discovery again (seconds): a CRD installed by someone else is seen by
/// renders within this time, without a restart.
pub const CAPABILITIES_MAX_AGE_SECONDS: u64 = 30;

impl Pool {
    /// A pool keeping its mirrors under `cache_dir`, rendering the applications of
    /// `config` (their `source`, and `settings.renderTools`).
    pub fn new(cache_dir: PathBuf, config: Arc<Config>) -> Self {
        Self {
            mirrors: Mutex::default(),
            renders: Mutex::default(),
            heads: Arc::default(),
            tools: Tools::new(config.settings.render_tools.clone()),
            charts: super::chart::Charts::new(&cache_dir, super::chart::ChartLimits::default()),
            config,
            cluster: std::sync::RwLock::default(),
            installed: Mutex::default(),
            limits: crate::limits::Limits::default(),
            inputs: Mutex::default(),
            failures: Mutex::default(),
            cache_dir,
        }
    }

    /// This pool, reading and rendering within `limits` (see [`crate::limits`]).
    #[must_use]
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How many render-tool child processes this pool has started (builds, templates
    /// and version queries).
    pub fn tool_runs(&self) -> u64 {
        self.tools.runs()
    }

    fn mirror(&self, repo: &Repository) -> Result<Arc<Mutex<Mirror>>, FetchError> {
        let mut mirrors = self.mirrors.lock().map_err(|_| FetchError::PoolPoisoned)?;
        if let Some(m) = mirrors.get(&repo.name.value) {
            return Ok(m.clone());
        }
        let mut creds = Credentials::default();
        if let Some(f) = &repo.token_file {
            let token = read_secret(&f.value).map_err(|source| FetchError::Token { file: f.value.clone(), source })?;
            creds.token = Some((repo.username.clone().unwrap_or_else(|| "git".into()), token));
        }
        creds.ssh_key = repo.ssh_key_file.as_ref().map(|f| f.value.clone());
        creds.known_hosts = repo.known_hosts_file.as_ref().map(|f| f.value.clone());
        let m = Arc::new(Mutex::new(Mirror::open(&self.cache_dir, &repo.url.value, creds)?.with_limits(self.limits)));
        mirrors.insert(repo.name.value.clone(), m.clone());
        Ok(m)
    }

    /// The merge base of commits `a` and `b` of `repo` ([`super::Mirror::merge_base`]),
    /// read off the async threads.
    pub async fn merge_base(&self, repo: &Repository, a: &str, b: &str) -> Option<String> {
        let m = self.mirror(repo).ok()?;
        let (a, b) = (a.to_string(), b.to_string());
        tokio::task::spawn_blocking(move || m.lock().ok()?.merge_base(&a, &b)).await.ok().flatten()
    }

    /// Whether commit `new` of `repo` descends from commit `old` (see
    /// [`super::Mirror::descends`]), read off the async threads; `None` when it cannot
    /// be told.
    pub async fn descends(&self, repo: &Repository, new: &str, old: &str) -> Option<bool> {
        let m = self.mirror(repo).ok()?;
        let (new, old) = (new.to_string(), old.to_string());
        tokio::task::spawn_blocking(move || m.lock().ok()?.descends(&new, &old)).await.ok().flatten()
    }

    /// The commit `wanted` of `repo` names (refs as recent as `asked` accepts) and the
    /// raw object a signature check reads: the commit, or with `tag` the annotated tag
    /// (see [`super::Mirror::signed_object`]), off the async threads.
    ///
    /// # Errors
    /// As [`super::Mirror::resolve`].
    pub async fn signed_object(
        &self,
        repo: &Repository,
        wanted: &str,
        asked: Since,
        tag: bool,
    ) -> Result<(String, Option<Vec<u8>>), FetchError> {
        let m = self.mirror(repo)?;
        let wanted = wanted.to_string();
        tokio::task::spawn_blocking(move || -> Result<(String, Option<Vec<u8>>), FetchError> {
            let mut m = m.lock().map_err(|_| FetchError::Poisoned)?;
            let (resolved, raw) = m.signed_object(&wanted, asked, tag)?;
            if resolved.downloaded {
                m.maintain();
            }
            Ok((resolved.revision, raw))
        })
        .await
        .unwrap_or_else(|e| Err(FetchError::Task(e.to_string())))
    }

    /// The commit `wanted` of `repo` names in the refs already read as recent as
    /// `asked` accepts ([`super::Mirror::peek`]), without waiting: `None` when the
    /// mirror is busy or would have to ask the remote. For a verdict kept by commit id,
    /// before [`Pool::signed_object`] pays a trip to the blocking pool.
    pub fn peek(&self, repo: &Repository, wanted: &str, asked: Since) -> Option<String> {
        let m = self.mirrors.lock().ok()?.get(&repo.name.value).cloned()?;
        let m = m.try_lock().ok()?;
        m.peek(wanted, asked)
    }

    /// The commit `wanted` (branch, tag or SHA) of `repo` names now, fetched into the
    /// mirror when missing (see [`super::Mirror::resolve`]), off the async threads.
    ///
    /// # Errors
    /// As [`super::Mirror::resolve`].
    pub async fn resolve(&self, repo: &Repository, wanted: &str) -> Result<String, FetchError> {
        self.resolve_since(repo, wanted, Since::at(std::time::Instant::now())).await
    }

    /// [`Pool::resolve`], reading an advertisement of the remote's refs that `asked`
    /// accepts ([`super::Mirror::resolve_since`]): refs of one repository resolved
    /// together cost one advertisement.
    ///
    /// # Errors
    /// As [`Pool::resolve`].
    pub async fn resolve_since(&self, repo: &Repository, wanted: &str, asked: Since) -> Result<String, FetchError> {
        let m = self.mirror(repo)?;
        let wanted = wanted.to_string();
        tokio::task::spawn_blocking(move || -> Result<String, FetchError> {
            let mut m = m.lock().map_err(|_| FetchError::Poisoned)?;
            let resolved = m.resolve_since(&wanted, asked)?;
            if resolved.downloaded {
                m.maintain();
            }
            Ok(resolved.revision)
        })
        .await
        .unwrap_or_else(|e| Err(FetchError::Task(e.to_string())))
    }

    /// The commit `wanted` of `repo` names now (fetched into the mirror when missing)
    /// and its directories down to `depth` path segments (see
    /// [`super::Mirror::directories`]), off the async threads: what an applicationSet's
    /// `directories` generator expands ([`crate::config::generators::Listing`]).
    ///
    /// # Errors
    /// As [`super::Mirror::resolve`]; [`super::Error::TooManyDirectories`].
    pub async fn directories(
        &self,
        repo: &Repository,
        wanted: &str,
        depth: usize,
    ) -> Result<crate::config::generators::Listing, FetchError> {
        let m = self.mirror(repo)?;
        let wanted = wanted.to_string();
        tokio::task::spawn_blocking(move || -> Result<crate::config::generators::Listing, FetchError> {
            let mut m = m.lock().map_err(|_| FetchError::Poisoned)?;
            let resolved = m.resolve(&wanted)?;
            if resolved.downloaded {
                m.maintain();
            }
            let directories = m.directories(&resolved.revision, depth)?;
            Ok(crate::config::generators::Listing { commit: resolved.revision, directories, pulls: Vec::new() })
        })
        .await
        .unwrap_or_else(|e| Err(FetchError::Task(e.to_string())))
    }

    /// The repository paths application `app`'s symlinks may point into besides its own
    /// path: its environment's `sharedPaths`.
    fn shared_paths(&self, app: &str) -> Vec<String> {
        let c = &self.config;
        let env = c
            .applications
            .iter()
            .find(|a| a.name.value == app)
            .and_then(|a| c.environments.iter().find(|e| e.name.value == a.environment.value));
        env.map(|e| e.shared_paths.clone()).unwrap_or_default()
    }

    /// Whether [`Pool::set_cluster`] was called less than `max_age` ago.
    pub fn knows_cluster(&self, max_age: std::time::Duration) -> bool {
        self.cluster.read().is_ok_and(|c| c.0.kube_version.is_some() && c.1.is_some_and(|at| at.elapsed() < max_age))
    }

    /// The target cluster's `version` (`v1.36.3`) and served `group/version`s and
    /// `group/version/Kind`s, given to the render tools ([`Capabilities`]) so that charts
    /// see the cluster they are rendered for. Part of the render cache key (as
    /// [`Capabilities::digest`]): when they change, Helm renders again.
    pub fn set_cluster(&self, version: String, mut api_versions: Vec<String>) {
        api_versions.sort_unstable();
        api_versions.dedup();
        if let Ok(mut c) = self.cluster.write() {
            *c = (Capabilities { kube_version: Some(version), api_versions }, Some(std::time::Instant::now()));
        }
    }

    /// The capabilities the render tools get now.
    pub fn capabilities(&self) -> Capabilities {
        self.cluster.read().map(|c| c.0.clone()).unwrap_or_default()
    }

    /// Records whether application `app` has synced before (live tracked objects or a
    /// recorded sync): Helm then renders it with `--is-upgrade` (`.Release.IsUpgrade`),
    /// else as an install. Part of the render cache key.
    pub fn set_installed(&self, app: &str, installed: bool) {
        if let Ok(mut s) = self.installed.lock() {
            if installed {
                s.insert(app.to_string());
            } else {
                s.remove(app);
            }
        }
    }

    /// The refs of `repo` asked for now, and the advertisement asked for before (see
    /// [`super::Mirror::ask_refs`]), off the async threads. Passes that read refs asked
    /// for no earlier than this call read these.
    ///
    /// # Errors
    /// As [`super::Mirror::ask_refs`]; the mirror cannot be opened.
    pub async fn ask_refs(&self, repo: &Repository) -> Result<(Option<Refs>, Refs), FetchError> {
        let m = self.mirror(repo)?;
        tokio::task::spawn_blocking(move || -> Result<(Option<Refs>, Refs), FetchError> {
            Ok(m.lock().map_err(|_| FetchError::Poisoned)?.ask_refs()?)
        })
        .await
        .unwrap_or_else(|e| Err(FetchError::Task(e.to_string())))
    }

    /// Fetches `wanted` (branch, tag or SHA) of `repo` off the async threads and renders
    /// the files under `path` for application `app`; a render is remembered by revision
    /// and path. The files of a path of a commit read before are not read again (the
    /// snapshot comes without them, its `files_digest` keys the render cache; a miss
    /// reads them then): a pass over a commit it has seen reads no file. `wanted` is
    /// looked up in the last advertisement of the remote's refs when `asked` accepts it
    /// (see [`super::Freshness::since`]), else in a new one.
    pub async fn desired(&self, app: &str, repo: &Repository, wanted: &str, path: &str, asked: Since) -> Desired {
        let (wanted, dir) = (wanted.to_string(), path.to_string());
        let shared = self.shared_paths(app);
        let heads = self.heads.clone();
        let place = format!("{}\n{dir}\n{}", repo.name.value, shared.join("\n"));
        let fetched = match self.mirror(repo) {
            Err(e) => Err(e),
            Ok(m) => tokio::task::spawn_blocking(move || -> Result<(Snapshot, Option<String>), FetchError> {
                let mut m = m.lock().map_err(|_| FetchError::Poisoned)?;
                let resolved = m.resolve_since(&wanted, asked)?;
                if resolved.downloaded {
                    m.maintain();
                }
                // a commit's tree never changes: a path read before is not read again
                let id = format!("{}\n{place}", resolved.revision);
                if let Some(head) = heads.lock().ok().and_then(|h| h.get(&id).cloned()) {
                    return Ok((head, None));
                }
                match m.snapshot_within(&resolved.revision, &dir, &shared) {
                    // the commit is there but its tree cannot be rendered as it is
                    Err(
                        e @ (super::Error::Submodule { .. }
                        | super::Error::Symlink { .. }
                        | super::Error::SymlinkOutside { .. }),
                    ) => Ok((m.empty_snapshot(&resolved.revision), Some(e.to_string()))),
                    Ok(mut s) => {
                        if let Ok(mut h) = heads.lock() {
                            if h.len() >= SNAPSHOT_HEADS {
                                h.clear();
                            }
                            // kept without its files (not copied)
                            let files = std::mem::take(&mut s.files);
                            h.insert(id, s.clone());
                            s.files = files;
                        }
                        Ok((s, None))
                    }
                    Err(e) => Err(e.into()),
                }
            })
            .await
            .unwrap_or_else(|e| Err(FetchError::Task(e.to_string()))),
        };
        let snapshot = match fetched {
            Ok((s, None)) => s,
            Ok((s, Some(message))) => return Desired::RenderFailed(s, render::Error::Tree { message }),
            Err(e) => return Desired::FetchFailed(e),
        };
        match self.render(repo, &snapshot, app, path.trim_matches('/')).await {
            Ok((r, ran)) => Desired::Rendered(snapshot, r, ran),
            Err(e) => Desired::RenderFailed(snapshot, e),
        }
    }

    /// Renders `path` of `snapshot` for application `app` with its renderer (configured
    /// or detected), or returns the cached render of the same inputs; `true` when it
    /// rendered.
    async fn render(
        &self,
        repo: &Repository,
        snapshot: &Snapshot,
        app: &str,
        path: &str,
    ) -> Result<(Arc<Rendered>, bool), render::Error> {
        let found = self.config.applications.iter().find(|a| a.name.value == app);
        let (source, namespace) = found.map(|a| (a.source.clone(), a.namespace.value.clone())).unwrap_or_default();
        let kind = match (&source.chart, source.type_) {
            (Some(_), _) => SourceType::Helm,
            (None, t) => t.unwrap_or_else(|| render::detect(&snapshot.top_level)),
        };
        // a chart source: what its version names now (read again each interval)
        let chart = match &source.chart {
            None => None,
            Some(c) => {
                let ttl = found.map_or(crate::config::DEFAULT_RECONCILE_INTERVAL, |a| self.config.interval_of(a));
                Some((c, self.charts.resolve(c, ttl).await?))
            }
        };
        // the app and namespace count: a tool may write them (a release's name, namespace)
        // A plain render reads only the files under the path: keyed by their content, a
        // commit that changes other paths renders nothing again. A tool reads its
        // working copy, which holds only its inputs (the path, the kustomizations it
        // names, value files, sharedPaths): keyed by their object ids, so a commit
        // elsewhere in the repository renders nothing again either.
        // A tool is located once per pool: its version is the same under every key.
        // Helm also reads the cluster's capabilities and whether it installs or upgrades
        let cluster = self.capabilities();
        let is_upgrade = kind == SourceType::Helm && self.installed.lock().is_ok_and(|s| s.contains(app));
        let (inputs, roots) = match kind {
            SourceType::Plain => (format!("files {}", snapshot.files_digest), vec![]),
            _ => {
                let (roots, ids) = self.tool_inputs(repo, &snapshot.revision, kind, app, path, &source).await?;
                let caps = if kind == SourceType::Helm {
                    format!(" caps {} upgrade {is_upgrade}", cluster.digest())
                } else {
                    String::new()
                };
                (format!("inputs {ids}{caps}"), roots)
            }
        };
        let digest = chart.as_ref().map(|(_, r)| r.chart.digest.as_str()).unwrap_or_default();
        let key = format!("{kind:?} {inputs} {path} {app}/{namespace} {source:?} {digest}");
        if let Some(r) = self.renders.lock().ok().and_then(|mut c| c.get(&key)) {
            return Ok((r, false));
        }
        if let Some(e) = self.failures.lock().ok().and_then(|f| f.get(&key, std::time::Instant::now())) {
            return Err(e);
        }
        let package = match &chart {
            Some((c, r)) => Some(self.charts.fetch(c, r).await?),
            None => None,
        };
        let shared = self.shared_paths(app);
        let t = Target {
            app,
            namespace: &namespace,
            path,
            source: &source,
            shared_paths: &shared,
            cluster: &cluster,
            is_upgrade,
            limits: &self.limits,
            chart: package.as_ref(),
        };
        let tree = Commit { pool: self, repo, snapshot, t, roots: &roots };
        let rendered = match self.tools.render(kind, &t, &tree).await {
            Ok(r) => Arc::new(r),
            Err(e) => {
                if let Ok(mut f) = self.failures.lock() {
                    let tools = &self.config.settings.render_tools;
                    let base = std::time::Duration::from_secs(tools.backoff_seconds);
                    let cap = std::time::Duration::from_secs(tools.max_backoff_seconds);
                    f.failed(key, e.clone(), std::time::Instant::now(), base, cap);
                }
                return Err(e);
            }
        };
        if let Ok(mut f) = self.failures.lock() {
            f.entries.remove(&key);
        }
        if let Ok(mut c) = self.renders.lock() {
            c.put(app, key, rendered.clone());
        }
        Ok((rendered, true))
    }

    /// What application `app`'s render of commit `revision` of `repo` reads, as one
    /// string that changes exactly when those inputs change: for a plain directory the
    /// content of its manifests (the path and the environment's `sharedPaths`); for a
    /// tool the object ids of its working copy's roots ([`Pool::tool_inputs`]: the
    /// path, the kustomizations it names, value files, `sharedPaths`). Two commits with
    /// equal inputs render the same objects (a chart source's version aside: it moves
    /// without a commit). Remembered per revision and application.
    ///
    /// # Errors
    /// [`render::Error::Tree`] (the commit, the path, a kustomization that cannot be
    /// read), [`render::Error::Limit`].
    pub async fn render_inputs(&self, app: &str, repo: &Repository, revision: &str) -> Result<String, render::Error> {
        let memo = format!("render inputs {revision} {app}");
        if let Some(found) = self.inputs.lock().ok().and_then(|m| m.get(&memo).cloned()) {
            return found.map(|(_, inputs)| inputs);
        }
        let found = self.config.applications.iter().find(|a| a.name.value == app);
        let (path, source) = found.map(|a| (a.path.value.clone(), a.source.clone())).unwrap_or_default();
        let path = path.trim_matches('/').to_string();
        let tree_err = |message: String| render::Error::Tree { message };
        let m = self.mirror(repo).map_err(|e| tree_err(e.to_string()))?;
        let (rev, dir, shared) = (revision.to_string(), path.clone(), self.shared_paths(app));
        let snapshot = tokio::task::spawn_blocking(move || -> Result<Snapshot, render::Error> {
            let m = m.lock().map_err(|_| tree_err("mirror lock poisoned".into()))?;
            m.snapshot_within(&rev, &dir, &shared).map_err(|e| match e {
                super::Error::Limit(l) => render::Error::Limit(l),
                e => tree_err(e.to_string()),
            })
        })
        .await
        .unwrap_or_else(|e| Err(tree_err(e.to_string())))?;
        let kind = match (&source.chart, source.type_) {
            (Some(_), _) => SourceType::Helm,
            (None, t) => t.unwrap_or_else(|| render::detect(&snapshot.top_level)),
        };
        let inputs = match kind {
            SourceType::Plain => format!("files {}", snapshot.files_digest),
            _ => self.tool_inputs(repo, revision, kind, app, &path, &source).await?.1,
        };
        if let Ok(mut memo_map) = self.inputs.lock() {
            if memo_map.len() >= SNAPSHOT_HEADS {
                memo_map.clear();
            }
            memo_map.insert(memo, Ok((vec![], inputs.clone())));
        }
        Ok(inputs)
    }

    /// What a tool render of `path` (application `app`, `source`) at `revision` reads:
    /// the repository paths its working copy holds (the path; for kustomize the
    /// directories of the kustomizations it names, transitively, checked by
    /// [`render::kustomize::inputs`]; for Helm the value files; the environment's
    /// `sharedPaths`), and their object ids as one string (`path=id` each, sorted).
    /// Remembered per revision and application: a pass at a known commit reads no
    /// kustomization again.
    async fn tool_inputs(
        &self,
        repo: &Repository,
        revision: &str,
        kind: SourceType,
        app: &str,
        path: &str,
        source: &crate::config::Source,
    ) -> Result<(Vec<String>, String), render::Error> {
        let memo = format!("{revision} {kind:?} {path} {app} {source:?}");
        if let Some(found) = self.inputs.lock().ok().and_then(|m| m.get(&memo).cloned()) {
            return found;
        }
        let tree_err = |message: String| render::Error::Tree { message };
        let m = self.mirror(repo).map_err(|e| tree_err(e.to_string()))?;
        let (rev, dir, shared, limits) = (revision.to_string(), path.to_string(), self.shared_paths(app), self.limits);
        let (allow, value_files) = (source.allow_remote_bases, source.value_files.clone());
        let found = tokio::task::spawn_blocking(move || -> Result<(Vec<String>, String), render::Error> {
            let m = m.lock().map_err(|_| tree_err("mirror lock poisoned".into()))?;
            let view = m.view(&rev).map_err(|e| tree_err(e.to_string()))?;
            let read = |p: &str| {
                view.read(p).map_err(|e| match e {
                    super::Error::Limit(l) => render::Error::Limit(l),
                    e => tree_err(e.to_string()),
                })
            };
            let mut roots = match kind {
                SourceType::Kustomize => render::kustomize::inputs(&dir, allow, &limits, &|p| view.node(p), &read)?,
                // value files outside the repository are refused by the helm run
                _ => std::iter::once(dir.clone())
                    .chain(value_files.into_iter().filter(|f| {
                        std::path::Path::new(f).components().all(|c| matches!(c, std::path::Component::Normal(_)))
                    }))
                    .collect(),
            };
            roots.extend(shared.iter().map(|s| s.trim_matches('/').to_string()));
            roots.sort();
            roots.dedup();
            let ids: Vec<String> =
                roots.iter().map(|r| format!("{r}={}", view.id(r).unwrap_or_else(|| "-".into()))).collect();
            Ok((roots, ids.join(" ")))
        })
        .await
        .unwrap_or_else(|e| Err(tree_err(e.to_string())));
        if let Ok(mut memo_map) = self.inputs.lock() {
            if memo_map.len() >= SNAPSHOT_HEADS {
                memo_map.clear();
            }
            memo_map.insert(memo, found.clone());
        }
        found
    }

    /// The files of `t.path` at commit `revision` of `repo` (a render-cache miss of a
    /// snapshot whose files were not read).
    async fn files(
        &self,
        repo: &Repository,
        revision: &str,
        t: &Target<'_>,
    ) -> Result<Vec<(String, Vec<u8>)>, render::Error> {
        let tree_err = |message: String| render::Error::Tree { message };
        let m = self.mirror(repo).map_err(|e| tree_err(e.to_string()))?;
        let (rev, dir, shared) = (revision.to_string(), t.path.to_string(), self.shared_paths(t.app));
        tokio::task::spawn_blocking(move || -> Result<_, String> {
            let m = m.lock().map_err(|_| "mirror lock poisoned".to_string())?;
            Ok(m.snapshot_within(&rev, &dir, &shared).map_err(|e| e.to_string())?.files)
        })
        .await
        .map_err(|e| tree_err(e.to_string()))?
        .map_err(tree_err)
    }

    /// A working copy of `roots` (repository paths) of commit `revision` of `repo` in a
    /// new temporary directory (removed when dropped); see [`super::Mirror::export`].
    async fn working_copy(
        &self,
        repo: &Repository,
        revision: &str,
        roots: &[String],
    ) -> Result<tempfile::TempDir, render::Error> {
        let tool_err = |message: String| render::Error::Tool { message: format!("working copy: {message}") };
        let dir = tempfile::tempdir().map_err(|e| tool_err(e.to_string()))?;
        let m = self.mirror(repo).map_err(|e| tool_err(e.to_string()))?;
        let (rev, dest, roots) = (revision.to_string(), dir.path().to_path_buf(), roots.to_vec());
        tokio::task::spawn_blocking(move || -> Result<(), render::Error> {
            let m = m.lock().map_err(|_| tool_err("mirror lock poisoned".to_string()))?;
            m.export(&rev, &dest, &roots).map_err(|e| match e {
                super::Error::Limit(l) => render::Error::Limit(l),
                e @ (super::Error::Symlink { .. } | super::Error::SymlinkOutside { .. }) => {
                    render::Error::Tree { message: e.to_string() }
                }
                e => tool_err(e.to_string()),
            })
        })
        .await
        .map_err(|e| tool_err(e.to_string()))??;
        Ok(dir)
    }
}

/// The commit one render reads, from the pool's mirror.
struct Commit<'a> {
    pool: &'a Pool,
    repo: &'a Repository,
    snapshot: &'a Snapshot,
    t: Target<'a>,
    /// What the working copy holds (see [`Pool::tool_inputs`]).
    roots: &'a [String],
}

impl Tree for Commit<'_> {
    async fn files(&self) -> Result<Files<'_>, render::Error> {
        // a snapshot the pool knew carries no files: read them now
        let s = self.snapshot;
        if s.files.is_empty() && s.files_digest != super::files_digest(&[]) {
            Ok(Cow::Owned(self.pool.files(self.repo, &s.revision, &self.t).await?))
        } else {
            Ok(Cow::Borrowed(&s.files))
        }
    }

    async fn checkout(&self) -> Result<tempfile::TempDir, render::Error> {
        self.pool.working_copy(self.repo, &self.snapshot.revision, self.roots).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rendered(n: usize) -> Arc<Rendered> {
        Arc::new(Rendered { manifests: vec![], warnings: vec![format!("{n}")], ..Rendered::default() })
    }

    /// Commits pushed to one application replace its renders: the cache keeps
    /// [`RENDERS_PER_APP`] of it (the least recently used dropped), whatever the other
    /// applications hold.
    #[test]
    fn an_application_keeps_its_latest_renders_however_many_commits_it_renders() {
        let mut c = RenderCache::default();
        c.put("other", "other@1".into(), rendered(0));
        for n in 1..=50 {
            c.put("web", format!("web@{n}"), rendered(n));
        }
        let mut keys: Vec<&str> = c.entries.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["other@1", "web@49", "web@50"]);
        // the one read last stays
        assert!(c.get("web@49").is_some());
        c.put("web", "web@51".into(), rendered(51));
        assert!(c.get("web@50").is_none() && c.get("web@49").is_some() && c.get("web@51").is_some());
        // the same key again replaces itself, nothing else
        c.put("web", "web@51".into(), rendered(52));
        assert_eq!(c.entries.len(), 3);
        assert_eq!(c.get("web@51").expect("kept").warnings, ["52"]);
    }

    /// Past [`RENDER_CACHE_ENTRIES`] in all, the least recently used render of any
    /// application goes.
    #[test]
    fn the_cache_keeps_at_most_its_entries() {
        let mut c = RenderCache::default();
        for n in 0..RENDER_CACHE_ENTRIES + 10 {
            c.put(&format!("app-{n}"), format!("k{n}"), rendered(n));
        }
        assert_eq!(c.entries.len(), RENDER_CACHE_ENTRIES);
        assert!(c.get("k0").is_none() && c.get(&format!("k{}", RENDER_CACHE_ENTRIES + 9)).is_some());
    }

    /// A failed render is not tried again before its backoff ends: the first
    /// `base`, doubled after each failure of the same key, at most `cap`; a success
    /// forgets it, another key is not held back.
    #[test]
    fn failed_renders_back_off_exponentially_up_to_the_cap() {
        let (base, cap) = (Duration::from_secs(30), Duration::from_secs(600));
        let waits: Vec<u64> = (1..=7).map(|n| backoff(n, base, cap).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 600, 600]);
        assert_eq!(backoff(u32::MAX, base, cap), cap);
        let mut f = Failures::default();
        let t0 = std::time::Instant::now();
        let e = render::Error::Tool { message: "helm: killed".into() };
        f.failed("k".into(), e.clone(), t0, base, cap);
        assert_eq!(f.get("k", t0 + Duration::from_secs(29)), Some(e.clone()), "same inputs: same error");
        assert_eq!(f.get("k", t0 + Duration::from_secs(30)), None, "tried again after the backoff");
        assert_eq!(f.get("other", t0), None);
        f.failed("k".into(), e.clone(), t0 + Duration::from_secs(30), base, cap);
        assert!(
            f.get("k", t0 + Duration::from_secs(89)).is_some() && f.get("k", t0 + Duration::from_secs(90)).is_none()
        );
    }
}
