//! The mirrors of one process and the renders made from them.
//!
//! One [`Mirror`] per repository (opened on first use with the repository's
//! credentials: token file, SSH key, pinned host keys), locked while a fetch runs, and
//! always used off the async threads (git2 is blocking). The manifests rendered for an
//! application are remembered by (revision, path): a pass at a known commit renders
//! nothing again.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use super::{Credentials, Mirror, Snapshot};
use crate::{
    config::{Repository, read_secret},
    render::{self, Rendered},
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
    /// The commit and its manifests (with the render's warnings).
    Rendered(Snapshot, Rendered),
    /// The repository could not be read.
    FetchFailed(FetchError),
    /// The commit was read but does not render.
    RenderFailed(Snapshot, render::Error),
}

/// (revision, path, render) last rendered for an application.
type RenderMemo = (String, String, Rendered);

/// Mirrors by repository name, and each application's last render.
pub struct Pool {
    cache_dir: PathBuf,
    mirrors: Mutex<HashMap<String, Arc<Mutex<Mirror>>>>,
    rendered: Mutex<HashMap<String, RenderMemo>>,
}

impl Pool {
    /// A pool keeping its mirrors under `cache_dir`.
    pub fn new(cache_dir: PathBuf) -> Self {
        Self { cache_dir, mirrors: Mutex::default(), rendered: Mutex::default() }
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
        let m = Arc::new(Mutex::new(Mirror::open(&self.cache_dir, &repo.url.value, creds)?));
        mirrors.insert(repo.name.value.clone(), m.clone());
        Ok(m)
    }

    /// Fetches `wanted` (branch, tag or SHA) of `repo` off the async threads and renders
    /// the files under `path` for application `app`; a render is remembered by revision
    /// and path.
    pub async fn desired(&self, app: &str, repo: &Repository, wanted: &str, path: &str) -> Desired {
        let (wanted, dir) = (wanted.to_string(), path.to_string());
        let fetched = match self.mirror(repo) {
            Err(e) => Err(e),
            Ok(m) => tokio::task::spawn_blocking(move || -> Result<(Snapshot, Option<String>), FetchError> {
                let m = m.lock().map_err(|_| FetchError::Poisoned)?;
                let resolved = m.resolve(&wanted)?;
                match m.snapshot(&resolved.revision, &dir) {
                    // the commit is there but its tree cannot be rendered as it is
                    Err(e @ (super::Error::Submodule { .. } | super::Error::Symlink { .. })) => {
                        Ok((m.empty_snapshot(&resolved.revision), Some(e.to_string())))
                    }
                    other => Ok((other?, None)),
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
        let memo = self.rendered.lock().ok().and_then(|m| {
            m.get(app).filter(|(rev, p, _)| *rev == snapshot.revision && p == path).map(|(_, _, v)| v.clone())
        });
        match memo.map_or_else(|| render::render_files(&snapshot.files), Ok) {
            Ok(m) => {
                if let Ok(mut r) = self.rendered.lock() {
                    r.insert(app.to_string(), (snapshot.revision.clone(), path.to_string(), m.clone()));
                }
                Desired::Rendered(snapshot, m)
            }
            Err(e) => Desired::RenderFailed(snapshot, e),
        }
    }
}
