//! The receiver's verdict on one delivery.

use serde::Serialize;

use super::payload::{Push, RefDeletion, RepoIdentity};
use super::provider::Provider;
use super::signature::Verification;

/// What to do with a delivery. Serializes lower-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Authenticated push to a watched ref: queue a reconcile of [`Decision::apps`] (202).
    Reconcile,
    /// Authenticated pull request opened, pushed to or reopened whose base branch a
    /// watched application follows: queue a preview of [`Decision::apps`] at its head
    /// (202); nothing is synced.
    Preview,
    /// Authenticated, nothing to do: ping, test delivery, deletion, other event, unwatched
    /// repository or ref (200). Senders treat any 2xx as success; 4xx would mark the hook
    /// failing and GitLab disables hooks after repeated failures (gitlab-org/gitlab MR 166329).
    Ignore,
    /// Refused: 400 unknown sender or unparseable, 401 unauthenticated, 413 too large,
    /// 415 unsupported content type.
    Reject,
}

/// The receiver's verdict and everything it extracted, for the HTTP answer, logs and
/// the scheduler.
///
/// Send only [`Decision::http_status`] and [`Decision::reason`] back to the sender; the
/// other fields are for logs, metrics and the reconcile queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Sender recognised from headers; `None` when no provider header was present.
    pub provider: Option<Provider>,
    /// Value of the provider's event header (`push`, `Push Hook`, `repo:push`, …).
    pub event: Option<String>,
    /// Finer event type: `X-Gitea-Event-Type` / `X-Forgejo-Event-Type` /
    /// `X-Gogs-Event-Type`, or GitLab's `object_kind` once the body is parsed.
    pub event_type: Option<String>,
    /// Delivery id header (see [`Decision::dedupe_key`]).
    pub delivery_id: Option<String>,
    /// Authentication outcome.
    pub verification: Verification,
    /// Repository URLs and keys from the payload, for any parsed event.
    pub repository: Option<RepoIdentity>,
    /// The pushed ref, for push events after verification.
    pub push: Option<Push>,
    /// Further ref changes of the same delivery (Bitbucket batches several per delivery);
    /// every one is matched.
    pub extra_pushes: Vec<Push>,
    /// The deleted ref of a Gitea-family `delete` event.
    pub deletion: Option<RefDeletion>,
    /// The pull request of a pull request event.
    pub pull_request: Option<super::pull::PullRequest>,
    /// Applications to reconcile, sorted and deduplicated; empty unless `Reconcile`.
    pub apps: Vec<String>,
    /// Applications whose ref this push matched but whose changed-path filter found no
    /// touched file in complete file lists (see [`super::path_verdict`]); sorted, never
    /// also in `apps`.
    pub skipped: Vec<String>,
    /// What to do.
    pub action: Action,
    /// HTTP status to answer with: 202, 200, 400, 401, 413 or 415.
    pub http_status: u16,
    /// Short human reason, safe to send back: never contains secrets or payload content,
    /// and reads the same whether or not a repository is configured.
    pub reason: String,
}

impl Decision {
    pub(crate) fn new(
        provider: Option<Provider>,
        event: Option<&str>,
        event_type: Option<&str>,
        delivery_id: Option<&str>,
    ) -> Self {
        Decision {
            provider,
            event: event.map(str::to_owned),
            event_type: event_type.map(str::to_owned),
            delivery_id: delivery_id.map(str::to_owned),
            verification: Verification::not_attempted(),
            repository: None,
            push: None,
            extra_pushes: Vec::new(),
            deletion: None,
            pull_request: None,
            apps: Vec::new(),
            skipped: Vec::new(),
            action: Action::Reject,
            http_status: 400,
            reason: String::new(),
        }
    }

    pub(crate) fn finish(mut self, action: Action, http_status: u16, reason: impl Into<String>) -> Self {
        self.action = action;
        self.http_status = http_status;
        self.reason = reason.into();
        self
    }

    /// Key for a short-lived duplicate filter: `<provider>:<delivery id>`, e.g.
    /// `github:69966f09-…`. GitHub redeliveries and GitLab retries/resends keep the id;
    /// Gitea "Replay" makes a new one (dedupe those on repository, ref and `after`).
    pub fn dedupe_key(&self) -> Option<String> {
        let provider = self.provider?;
        let id = self.delivery_id.as_deref().filter(|id| !id.is_empty())?;
        Some(format!("{}:{id}", provider.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupe_key_needs_provider_and_id() {
        let d = Decision::new(Some(Provider::GitHub), Some("push"), None, Some("abc"));
        assert_eq!(d.dedupe_key().as_deref(), Some("github:abc"));
        assert_eq!(Decision::new(None, None, None, Some("abc")).dedupe_key(), None);
        assert_eq!(Decision::new(Some(Provider::Gitea), None, None, Some("")).dedupe_key(), None);
    }

    #[test]
    fn action_serializes_lower_case() {
        let names: Vec<_> = [Action::Reconcile, Action::Ignore, Action::Reject, Action::Preview]
            .iter()
            .filter_map(|a| serde_json::to_value(a).ok())
            .collect();
        assert_eq!(names, ["reconcile", "ignore", "reject", "preview"]);
    }
}
