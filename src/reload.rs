//! Policy reload for `plumb serve`: the policy file is read again every few seconds
//! (a ConfigMap volume is updated by a symlink swap, which file notifications miss) and
//! acted on when its bytes changed. A new file that does not load or validate is
//! rejected: its errors (file:line) are logged, `plumb_policy_reloads_total{result=
//! "rejected"}` counts it, `plumb_policy_rejected` is 1 until a good file replaces it,
//! and the policy in force stays. A good one is returned to the caller, which restarts
//! the actors and the HTTP server with it.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use sha2::{Digest, Sha256};

use crate::{config::Config, metrics::Metrics};

/// What to do with the bytes of the policy file read now, given the digest of the
/// last bytes acted on. Pure.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Same bytes: nothing to do.
    Unchanged,
    /// New bytes with this digest: load and validate them.
    Changed([u8; 32]),
}

/// The [`Change`] of `bytes` after `last` (a SHA-256 digest).
pub fn change(last: &[u8; 32], bytes: &[u8]) -> Change {
    let digest: [u8; 32] = Sha256::digest(bytes).into();
    if &digest == last { Change::Unchanged } else { Change::Changed(digest) }
}

/// Why the policy file on disk is not in force (its errors, file:line), while it is
/// rejected; shared with the passes, which show it as a `PolicyWarning` condition.
pub type Rejected = std::sync::Arc<std::sync::RwLock<Option<String>>>;

/// Watches one policy file.
pub struct PolicyWatch {
    path: PathBuf,
    last: [u8; 32],
    every: Duration,
    rejected: Rejected,
}

impl PolicyWatch {
    /// Watches `path`, whose current content is in force, reading it every `every`.
    pub fn new(path: &Path, every: Duration) -> Self {
        let last = std::fs::read(path).map(|b| Sha256::digest(&b).into()).unwrap_or([0; 32]);
        Self { path: path.into(), last, every, rejected: Rejected::default() }
    }

    /// The rejection of the file on disk, while there is one.
    pub fn rejected(&self) -> Rejected {
        self.rejected.clone()
    }

    /// Resolves with the next changed policy that loads and validates. Rejected
    /// versions are logged and counted on `metrics` in the meantime; an unreadable file
    /// (between the steps of a symlink swap) is read again at the next tick.
    pub async fn next_valid(&mut self, metrics: &Metrics) -> Config {
        loop {
            tokio::time::sleep(self.every).await;
            let Ok(bytes) = tokio::fs::read(&self.path).await else { continue };
            let Change::Changed(digest) = change(&self.last, &bytes) else { continue };
            self.last = digest;
            let text = String::from_utf8_lossy(&bytes);
            let base = self.path.parent().unwrap_or(Path::new("."));
            match crate::config::load_str(&text, &self.path, base) {
                Ok(config) => {
                    tracing::info!(file = %self.path.display(), "policy changed: reloading");
                    for w in crate::config::warnings(&config) {
                        tracing::warn!(file = %self.path.display(), "{w}");
                    }
                    metrics.policy_reloads.get_or_create(&vec![("result".to_string(), "applied".to_string())]).inc();
                    metrics.policy_rejected.set(0);
                    if let Ok(mut r) = self.rejected.write() {
                        *r = None;
                    }
                    return config;
                }
                Err(e) => {
                    tracing::error!(file = %self.path.display(), "new policy rejected, the previous one stays in force: {e}");
                    metrics.policy_reloads.get_or_create(&vec![("result".to_string(), "rejected".to_string())]).inc();
                    metrics.policy_rejected.set(1);
                    if let Ok(mut r) = self.rejected.write() {
                        *r = Some(format!(
                            "the policy file on disk was rejected, this application runs the previous one: {e}"
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_bytes_are_a_change() {
        let digest: [u8; 32] = Sha256::digest(b"a: 1\n").into();
        assert_eq!(change(&digest, b"a: 1\n"), Change::Unchanged);
        assert!(matches!(change(&digest, b"a: 2\n"), Change::Changed(d) if d != digest));
    }
}
