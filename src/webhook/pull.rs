//! Pull (merge) request events: what a preview needs of them, picked from an
//! authenticated payload like a push's fields ([`super::payload`]).
//!
//! | need | Gitea / Forgejo | GitHub | GitLab |
//! |---|---|---|---|
//! | event | header `pull_request` | header `pull_request` | header `Merge Request Hook` |
//! | action | `action`: `opened`, `synchronized`, `reopened`, `closed` | `action`: `opened`, `synchronize`, `reopened`, `closed` | `object_attributes.action`: `open`, `update` (with `oldrev` when commits came), `reopen`, `close`, `merge` |
//! | number | `number` | `number` | `object_attributes.iid` |
//! | head commit | `pull_request.head.sha` | `pull_request.head.sha` | `object_attributes.last_commit.id` |
//! | base branch | `pull_request.base.ref` | `pull_request.base.ref` | `object_attributes.target_branch` |
//! | from a fork | `head.repo_id` ≠ `base.repo_id` | `head.repo.full_name` ≠ `base.repo.full_name` (no head repository: a deleted fork) | `source_project_id` ≠ `target_project_id` |
//! | labels | `pull_request.labels[].name` | `pull_request.labels[].name` | `labels[].title` |
//!
//! Sources: Gitea `modules/structs/hook.go` (`PullRequestPayload`, `HookIssueAction`),
//! GitHub "Webhook events and payloads" (`pull_request`), GitLab "Webhook events"
//! (merge request events). The head is read from the base repository: Gitea and GitHub
//! keep every pull request's head at `refs/pull/N/head`, GitLab at
//! `refs/merge-requests/N/head`, forks included.

use serde::Serialize;
use serde_json::Value;

use super::provider::Provider;
use super::repo_key::RepoKey;

/// What happened to the pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PullAction {
    /// Opened: preview.
    Opened,
    /// New commits on its head: preview again.
    Synchronized,
    /// Reopened: preview.
    Reopened,
    /// Closed or merged: nothing to preview.
    Closed,
    /// Anything else (edited, labelled, assigned, a GitLab `update` without commits):
    /// acknowledged.
    Other,
}

impl PullAction {
    /// Whether the head is to be previewed.
    pub fn previews(self) -> bool {
        matches!(self, PullAction::Opened | PullAction::Synchronized | PullAction::Reopened)
    }
}

/// A pull (merge) request event, as a preview needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullRequest {
    /// Its number (GitLab's `iid`).
    pub number: u64,
    /// What happened.
    pub action: PullAction,
    /// The branch it merges into (`main`).
    pub base: String,
    /// The head commit (full SHA).
    pub head_sha: String,
    /// The ref of the base repository holding the head (`refs/pull/7/head`,
    /// `refs/merge-requests/7/head`).
    pub head_ref: String,
    /// Whether the head comes from another repository (a fork).
    pub fork: bool,
    /// Whether a close merged it.
    pub merged: bool,
    /// Its labels.
    pub labels: Vec<String>,
    /// The base repository's URLs, as a push's ([`RepoIdentity::urls`]).
    pub repo_urls: Vec<String>,
    /// Their distinct keys; matching accepts any.
    pub repo_keys: Vec<RepoKey>,
}

/// Why a pull request payload cannot be used (answered with 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// A field every sender includes is missing or of the wrong type.
    #[error("pull request payload has no field `{0}` of the expected type")]
    MissingField(&'static str),
}

/// Most labels kept of one pull request (a bound on a delivery's cost).
pub const MAX_LABELS: usize = 64;

/// Whether `event` (the provider's event header) names a pull request event.
pub(crate) fn is_pull_event(provider: Provider, event: &str) -> bool {
    match provider {
        Provider::Gitea | Provider::Forgejo | Provider::GitHub => event == "pull_request",
        Provider::GitLab => event == "Merge Request Hook",
        _ => false,
    }
}

/// The pull request of an authenticated payload `root` of `provider`, whose base
/// repository has URLs `urls` and keys `keys` (the payload's repository identity).
///
/// # Errors
/// [`PullError::MissingField`].
pub(crate) fn parse(
    provider: Provider,
    root: &Value,
    (urls, keys): (&[String], &[RepoKey]),
) -> Result<PullRequest, PullError> {
    let at = |path: &[&str]| path.iter().try_fold(root, |v, k| v.get(k));
    let text =
        |path: &[&str], name| at(path).and_then(Value::as_str).map(str::to_owned).ok_or(PullError::MissingField(name));
    let number = |path: &[&str], name| at(path).and_then(Value::as_u64).ok_or(PullError::MissingField(name));
    let labels = |path: &[&str], field: &str| -> Vec<String> {
        let list = at(path).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        list.iter().filter_map(|l| l.get(field)?.as_str().map(str::to_owned)).take(MAX_LABELS).collect()
    };
    let (number, action, base, head_sha, fork, merged, labels, head_ref) = match provider {
        Provider::GitLab => {
            let number = number(&["object_attributes", "iid"], "object_attributes.iid")?;
            let action = match at(&["object_attributes", "action"]).and_then(Value::as_str) {
                Some("open") => PullAction::Opened,
                Some("reopen") => PullAction::Reopened,
                Some("update") if at(&["object_attributes", "oldrev"]).is_some() => PullAction::Synchronized,
                Some("close" | "merge") => PullAction::Closed,
                _ => PullAction::Other,
            };
            let source = at(&["object_attributes", "source_project_id"]).and_then(Value::as_u64);
            let target = at(&["object_attributes", "target_project_id"]).and_then(Value::as_u64);
            (
                number,
                action,
                text(&["object_attributes", "target_branch"], "object_attributes.target_branch")?,
                text(&["object_attributes", "last_commit", "id"], "object_attributes.last_commit.id")?,
                source != target,
                at(&["object_attributes", "action"]).and_then(Value::as_str) == Some("merge"),
                labels(&["labels"], "title"),
                format!("refs/merge-requests/{number}/head"),
            )
        }
        _ => {
            let number = number(&["number"], "number")?;
            let action = match at(&["action"]).and_then(Value::as_str) {
                Some("opened") => PullAction::Opened,
                Some("synchronized" | "synchronize") => PullAction::Synchronized,
                Some("reopened") => PullAction::Reopened,
                Some("closed") => PullAction::Closed,
                _ => PullAction::Other,
            };
            let fork = if provider == Provider::GitHub {
                let name = |side| at(&["pull_request", side, "repo", "full_name"]).and_then(Value::as_str);
                name("head").is_none() || name("head") != name("base")
            } else {
                let id = |side| at(&["pull_request", side, "repo_id"]).and_then(Value::as_u64);
                id("head").is_none() || id("head") != id("base")
            };
            (
                number,
                action,
                text(&["pull_request", "base", "ref"], "pull_request.base.ref")?,
                text(&["pull_request", "head", "sha"], "pull_request.head.sha")?,
                fork,
                at(&["pull_request", "merged"]).and_then(Value::as_bool).unwrap_or(false),
                labels(&["pull_request", "labels"], "name"),
                format!("refs/pull/{number}/head"),
            )
        }
    };
    if !super::refs::is_commit_sha(&head_sha) {
        return Err(PullError::MissingField("head commit SHA"));
    }
    Ok(PullRequest {
        number,
        action,
        base,
        head_sha,
        head_ref,
        fork,
        merged,
        labels,
        repo_urls: urls.to_vec(),
        repo_keys: keys.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn identity() -> (Vec<String>, Vec<RepoKey>) {
        let url = "https://git.example.invalid/acme/config.git";
        (vec![url.into()], vec![RepoKey::from_url(url).unwrap()])
    }

    fn parse(provider: Provider, root: &Value, id: &(Vec<String>, Vec<RepoKey>)) -> Result<PullRequest, PullError> {
        super::parse(provider, root, (&id.0, &id.1))
    }

    const SHA: &str = "6c7b091f75b5d420c243d39dea5c2f558e62c682";

    #[test]
    fn gitea_synchronized_from_the_same_repository() {
        let body = json!({"action": "synchronized", "number": 7, "pull_request": {"number": 7,
            "labels": [{"name": "preview"}], "merged": false,
            "head": {"ref": "feature", "sha": SHA, "repo_id": 3}, "base": {"ref": "main", "repo_id": 3}}});
        let pr = parse(Provider::Gitea, &body, &identity()).unwrap();
        assert_eq!(
            (pr.number, pr.action, pr.base.as_str(), pr.head_sha.as_str(), pr.head_ref.as_str(), pr.fork),
            (7, PullAction::Synchronized, "main", SHA, "refs/pull/7/head", false)
        );
        assert_eq!(pr.labels, ["preview"]);
    }

    #[test]
    fn github_fork_and_deleted_fork() {
        let body = |head: Value| {
            json!({"action": "opened", "number": 9, "pull_request": {"head": {"sha": SHA, "repo": head},
                "base": {"ref": "main", "repo": {"full_name": "acme/config"}}}})
        };
        let fork = parse(Provider::GitHub, &body(json!({"full_name": "mallory/config"})), &identity()).unwrap();
        assert!(fork.fork && fork.action == PullAction::Opened);
        let same = parse(Provider::GitHub, &body(json!({"full_name": "acme/config"})), &identity()).unwrap();
        assert!(!same.fork);
        let gone = parse(Provider::GitHub, &body(Value::Null), &identity()).unwrap();
        assert!(gone.fork, "a head repository GitHub no longer names is taken as a fork");
    }

    #[test]
    fn gitlab_update_previews_only_with_new_commits() {
        let body = |extra: Value| {
            let mut attrs = json!({"iid": 4, "action": "update", "target_branch": "main",
                "last_commit": {"id": SHA}, "source_project_id": 1, "target_project_id": 1});
            attrs.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!({"object_kind": "merge_request", "object_attributes": attrs, "labels": [{"title": "x"}]})
        };
        let title_only = parse(Provider::GitLab, &body(json!({})), &identity()).unwrap();
        assert_eq!(title_only.action, PullAction::Other);
        let pushed = parse(Provider::GitLab, &body(json!({"oldrev": SHA})), &identity()).unwrap();
        assert_eq!((pushed.action, pushed.head_ref.as_str()), (PullAction::Synchronized, "refs/merge-requests/4/head"));
        let merged = parse(Provider::GitLab, &body(json!({"action": "merge"})), &identity()).unwrap();
        assert!(merged.merged && merged.action == PullAction::Closed);
        let fork = parse(Provider::GitLab, &body(json!({"source_project_id": 2})), &identity()).unwrap();
        assert!(fork.fork);
    }

    #[test]
    fn a_head_that_is_no_sha_is_refused() {
        let body = json!({"action": "opened", "number": 1, "pull_request": {"head": {"sha": "main; rm -rf"},
            "base": {"ref": "main"}}});
        assert_eq!(parse(Provider::Gitea, &body, &identity()), Err(PullError::MissingField("head commit SHA")));
        let no_base = json!({"action": "opened", "number": 1, "pull_request": {"head": {"sha": SHA}}});
        assert_eq!(
            parse(Provider::Gitea, &no_base, &identity()),
            Err(PullError::MissingField("pull_request.base.ref"))
        );
    }
}
