//! What the receiver is configured with: the repositories it accepts deliveries for
//! (with their secrets) and the applications watching refs of them. Plain data, shared
//! by the signature check, the matching and the receiver.

use super::provider::Provider;
use super::repo_key::RepoKey;
use super::secret::Secret;

/// A configured repository the receiver accepts deliveries for.
#[derive(Debug, Clone)]
pub struct WatchedRepository {
    /// Normalized identity, compared for equality with the payload's keys.
    pub key: RepoKey,
    /// HMAC key or GitLab token. `None` (or empty) means no verification is configured:
    /// plumb requires secrets, so no delivery can ever match this repository.
    pub secret: Option<Secret>,
    /// Accept GitHub's legacy `X-Hub-Signature: sha1=…` when `X-Hub-Signature-256` is
    /// absent. Default `false`: SHA-1 fallback is a downgrade path (tektoncd/triggers #1892).
    pub allow_sha1: bool,
    /// The forge this repository's deliveries come from. `Some(p)`: only a delivery
    /// recognised as `p` or its family ([`Provider::signs_like`]) can authenticate with
    /// this repository's secret, by that forge's scheme. `None` (not configured and not
    /// inferred): every provider's HMAC signature is accepted, never a plain token
    /// (GitLab's `X-Gitlab-Token`, which carries the secret itself and proves nothing
    /// about the body).
    pub provider: Option<Provider>,
}

impl WatchedRepository {
    /// Whether a delivery recognised as coming from `sender` may authenticate with this
    /// repository's secret (see [`WatchedRepository::provider`]).
    pub fn accepts(&self, sender: Provider) -> bool {
        match self.provider {
            Some(p) => p.signs_like(sender),
            None => sender != Provider::GitLab,
        }
    }
}

/// One application watching a ref of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// Application name, reported in [`super::Decision::apps`].
    pub app: String,
    /// Repository, matched by key equality against [`WatchedRepository::key`].
    pub repo: RepoKey,
    /// Branch name (`main`, `release/1.2`), full ref (`refs/heads/main`, `refs/tags/v1`),
    /// glob (`release/*`, `v*`, `refs/tags/v*`) or a commit SHA (never matches a push);
    /// see [`super::revision_matches`].
    pub revision: String,
    /// `Some(path)` when the application asked for the changed-path filter
    /// (`webhookPathFilter`): a push whose complete file lists touch nothing under `path`
    /// does not reconcile it (see [`super::path_verdict`]). `None`: every matching push
    /// reconciles.
    pub path_filter: Option<String>,
}
