//! Payload parsing, done only after the delivery authenticated.
//!
//! The JSON is read as a [`serde_json::Value`] and only the fields we need are picked, so
//! unknown fields and providers' type quirks (GitHub's integer `created_at` in push
//! payloads, woodpecker-ci/woodpecker #5713) never fail a delivery. Field sources
//! (`shared/reference/webhooks.md` §9):
//!
//! | need | Gitea / Forgejo / Gogs | GitHub | GitLab | Bitbucket Cloud | Bitbucket Server |
//! |---|---|---|---|---|---|
//! | ref | `ref` | `ref` | `ref` | `new/old.type` + `.name` | `changes[].refId` |
//! | old / new | `before` / `after` | same | same | `old/new.target.hash` | `fromHash` / `toHash` |
//! | commit to deploy | `head_commit.id`, else `after` on branches (Gogs) | `head_commit.id` | `checkout_sha` | `new.target.hash` | `toHash` |
//! | created / deleted | zero SHA | `created` / `deleted` | zero SHA | `created` / `closed` | `type` ADD / DELETE |
//! | commits total | `total_commits` | — | `total_commits_count` | `truncated` flag | — |
//! | repo URLs | `clone_url`, `ssh_url`, `html_url` | + `git_url` | `project.git_http_url`, `git_ssh_url`, `web_url` | `links.html.href` | `links.clone[].href` |
//!
//! Deliberately **not** used as repository URLs: `repository.url` (an API URL on Gitea and
//! in most GitHub events), `homepage` (free text set by the repository owner).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::provider::Provider;
use super::refs::{RefKind, split_ref};
use super::repo_key::RepoKey;

/// Why an authenticated payload could not be used (answered with 400). Messages never
/// echo payload content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The JSON does not parse (truncated, not UTF-8, trailing garbage).
    #[error("payload is not valid JSON (line {line}, column {column})")]
    Json {
        /// 1-based line of the syntax error.
        line: usize,
        /// 1-based column of the syntax error.
        column: usize,
    },
    /// Valid JSON, but not an object.
    #[error("payload is not a JSON object")]
    NotObject,
    /// A form-encoded body without a `payload` field.
    #[error("form body has no payload field")]
    NoFormPayload,
    /// A push payload lacks a field every sender includes.
    #[error("push payload has no string field `{0}`")]
    MissingField(&'static str),
    /// A push payload names no repository URL that can be normalized.
    #[error("push payload names no repository URL")]
    NoRepository,
    /// A pull request payload lacks what a preview needs.
    #[error(transparent)]
    Pull(#[from] super::pull::PullError),
}

/// Repository URLs found in a payload and their normalized keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoIdentity {
    /// Every URL in the payload that identifies the repository, deduplicated, in payload
    /// order (clone URL first).
    pub urls: Vec<String>,
    /// Distinct keys of those URLs, first-seen order. Usually one; more when the SSH host
    /// differs from the web host.
    pub keys: Vec<RepoKey>,
}

/// Most distinct URLs kept for one repository: forges send two to four (clone, SSH,
/// web); further ones in a payload are ignored. Every ref change of a delivery carries
/// these URLs, so the bound keeps a delivery's cost proportional to its size.
pub const MAX_REPO_URLS: usize = 16;

impl RepoIdentity {
    /// The first [`MAX_REPO_URLS`] distinct non-empty `urls`, and their distinct keys;
    /// linear in the number of URLs.
    fn from_urls<'a>(urls: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let mut identity = RepoIdentity { urls: Vec::new(), keys: Vec::new() };
        let mut seen = std::collections::HashSet::new();
        for url in urls.into_iter().filter(|u| !u.trim().is_empty()) {
            if identity.urls.len() == MAX_REPO_URLS {
                break;
            }
            if !seen.insert(url) {
                continue;
            }
            identity.urls.push(url.to_owned());
            if let Some(key) = RepoKey::from_url(url)
                && !identity.keys.contains(&key)
            {
                identity.keys.push(key);
            }
        }
        (!identity.urls.is_empty()).then_some(identity)
    }
}

/// One pushed ref, as the reconciler needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Push {
    /// Repository URLs named by the payload (see [`RepoIdentity::urls`]).
    pub repo_urls: Vec<String>,
    /// Key of the first URL that normalizes (the clone URL when present).
    pub repo_key: RepoKey,
    /// All distinct keys of `repo_urls`; matching accepts any of them.
    pub repo_keys: Vec<RepoKey>,
    /// Full ref, `refs/heads/…` or `refs/tags/…`.
    pub r#ref: String,
    /// Branch or tag.
    pub ref_kind: RefKind,
    /// `ref` without `refs/heads/` / `refs/tags/`; may contain `/`.
    pub ref_name: String,
    /// Old tip as sent; all zeros when the ref did not exist. Empty if not sent.
    pub before: String,
    /// New tip as sent; all zeros on deletion (and in Gitea test deliveries). For
    /// annotated tags this is the tag object, not a commit.
    pub after: String,
    /// Commit to deploy (the peeled commit for annotated tags); `None` on deletions, test
    /// deliveries, or when the sender does not say. A hint: the reconciler resolves the
    /// ref itself.
    pub target_commit: Option<String>,
    /// The ref did not exist before this push.
    pub created: bool,
    /// The push deleted the ref.
    pub deleted: bool,
    /// Force push, where the sender reports it (GitHub, Bitbucket Cloud); else `None`.
    pub forced: Option<bool>,
    /// Length of the payload's commit list.
    pub commits_listed: usize,
    /// The sender's count of pushed commits when it sends one (Gitea `total_commits`,
    /// GitLab `total_commits_count`); `None` otherwise.
    pub commits_total: Option<usize>,
    /// The commit list is known or likely to be incomplete: fewer listed than the total
    /// (Gitea lists at most `FEED_MAX_COMMIT_NUM`, default 5; GitLab 20), Bitbucket Cloud's
    /// `truncated`, GitHub at its 2048-commit cap, Bitbucket Server (no list at all).
    pub commits_truncated: bool,
    /// Every listed commit carries `added`, `removed` and `modified` arrays (Bitbucket
    /// sends none; see [`super::file_lists_complete`]).
    pub file_lists: bool,
    /// Union of `added`, `removed` and `modified` over the listed commits, sorted and
    /// deduplicated. Complete only when `!commits_truncated`; informational only.
    pub changed_paths: Vec<String>,
}

impl Push {
    /// True for the Gitea family's "Test Delivery" (`before == after`, all zeros in
    /// current Gitea): Gitea `routers/web/repo/setting/webhook.go` `TestWebhook`.
    pub fn is_test_delivery(&self, provider: Provider) -> bool {
        provider.is_gitea_family() && !self.after.is_empty() && self.before == self.after
    }

    /// True when there is nothing to deploy because the ref is gone.
    pub fn is_deletion(&self) -> bool {
        self.deleted || is_zero_sha(&self.after)
    }
}

/// A ref deleted by a dedicated delete event (Gitea/Forgejo/Gogs `delete`; Gitea deletes
/// branches this way, not with a push, `services/repository/push.go`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefDeletion {
    /// Full ref, rebuilt from the short `ref` and `ref_type` when needed.
    pub r#ref: String,
    /// Branch or tag.
    pub ref_kind: RefKind,
    /// Name without prefix.
    pub ref_name: String,
}

/// Authenticated events we acknowledge without acting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ignored {
    Ping,
    NotAPush,
    NotBranchOrTag,
    NoRefChanges,
}

impl Ignored {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Ignored::Ping => "ping acknowledged",
            Ignored::NotAPush => "event is not a push; acknowledged",
            Ignored::NotBranchOrTag => "pushed ref is neither a branch nor a tag; acknowledged",
            Ignored::NoRefChanges => "push names no branch or tag change; acknowledged",
        }
    }
}

pub(crate) enum Event {
    /// One or more pushed refs (more only for Bitbucket, which batches ref changes).
    Push(Vec<Push>),
    /// A pull (merge) request opened, pushed to, reopened or closed.
    PullRequest(super::pull::PullRequest),
    Deletion(RefDeletion),
    Ignored(Ignored),
}

pub(crate) struct Parsed {
    /// GitLab `object_kind`; the Gitea family's event type comes from a header.
    pub(crate) event_type: Option<String>,
    pub(crate) repository: Option<RepoIdentity>,
    pub(crate) event: Event,
}

/// Parses an authenticated JSON payload and routes it on the **event header**, not on
/// the body's shape (a body that looks like a push under an unknown event is ignored).
pub(crate) fn parse(provider: Provider, event: &str, json: &[u8]) -> Result<Parsed, PayloadError> {
    let root: Value =
        serde_json::from_slice(json).map_err(|e| PayloadError::Json { line: e.line(), column: e.column() })?;
    if !root.is_object() {
        return Err(PayloadError::NotObject);
    }
    let repository = repository(provider, &root);
    let object_kind = str_at(&root, &["object_kind"]);
    let event_type = (provider == Provider::GitLab).then(|| object_kind.map(str::to_owned)).flatten();
    if super::pull::is_pull_event(provider, event) {
        let identity = repository.as_ref().filter(|r| !r.keys.is_empty()).ok_or(PayloadError::NoRepository)?;
        let pr = super::pull::parse(provider, &root, (&identity.urls, &identity.keys))?;
        return Ok(Parsed { event_type, repository, event: Event::PullRequest(pr) });
    }

    let push_event = match provider {
        Provider::Gitea | Provider::Forgejo | Provider::Gogs => match event {
            "push" => true,
            "delete" => {
                return Ok(Parsed { event_type, repository, event: gitea_delete(&root)? });
            }
            _ => false,
        },
        Provider::GitHub => match event {
            "push" => true,
            "ping" => {
                return Ok(Parsed { event_type, repository, event: Event::Ignored(Ignored::Ping) });
            }
            _ => false,
        },
        // "System Hook" also carries pushes; object_kind tells them apart.
        Provider::GitLab => match event {
            "Push Hook" | "Tag Push Hook" => true,
            "System Hook" => matches!(object_kind, Some("push" | "tag_push")),
            _ => false,
        },
        Provider::BitbucketCloud => event == "repo:push",
        Provider::BitbucketServer => match event {
            "repo:refs_changed" => true,
            "diagnostics:ping" => {
                return Ok(Parsed { event_type, repository, event: Event::Ignored(Ignored::Ping) });
            }
            _ => false,
        },
    };
    if !push_event {
        return Ok(Parsed { event_type, repository, event: Event::Ignored(Ignored::NotAPush) });
    }

    let identity = repository.as_ref().filter(|r| !r.keys.is_empty()).ok_or(PayloadError::NoRepository)?;
    let changes = match provider {
        Provider::Gitea | Provider::Forgejo | Provider::Gogs => vec![gitea_change(&root)?],
        Provider::GitHub => vec![github_change(&root)?],
        Provider::GitLab => vec![gitlab_change(&root)?],
        Provider::BitbucketCloud => bitbucket_cloud_changes(&root),
        Provider::BitbucketServer => bitbucket_server_changes(&root),
    };
    let single = changes.len() == 1;
    let pushes: Vec<Push> = changes.into_iter().filter_map(|c| c.into_push(identity)).collect();
    let event = if !pushes.is_empty() {
        Event::Push(pushes)
    } else if single {
        Event::Ignored(Ignored::NotBranchOrTag)
    } else {
        Event::Ignored(Ignored::NoRefChanges)
    };
    Ok(Parsed { event_type, repository, event })
}

/// A ref change in provider-neutral form, before the ref is split.
struct Change<'v> {
    full_ref: String,
    before: String,
    after: String,
    target: Option<String>,
    created: bool,
    deleted: bool,
    forced: Option<bool>,
    commits: &'v [Value],
    total: Option<usize>,
    truncated: bool,
}

impl Change<'_> {
    fn into_push(self, identity: &RepoIdentity) -> Option<Push> {
        let (ref_kind, ref_name) = split_ref(&self.full_ref)?;
        let ref_name = ref_name.to_owned();
        let repo_key = identity.keys.first()?.clone();
        let listed = self.commits.len();
        Some(Push {
            repo_urls: identity.urls.clone(),
            repo_key,
            repo_keys: identity.keys.clone(),
            r#ref: self.full_ref,
            ref_kind,
            ref_name,
            target_commit: self.target.filter(|t| !t.is_empty() && !is_zero_sha(t)),
            before: self.before,
            after: self.after,
            created: self.created,
            deleted: self.deleted,
            forced: self.forced,
            commits_listed: listed,
            commits_total: self.total,
            commits_truncated: self.truncated || self.total.is_some_and(|t| t > listed),
            file_lists: self.commits.iter().all(has_file_lists),
            changed_paths: changed_paths(self.commits),
        })
    }
}

/// GitHub lists at most 2048 commits in a push webhook ("Webhook events and payloads",
/// push); a full list may have been cut.
const GITHUB_MAX_COMMITS: usize = 2048;

const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

fn gitea_change(root: &Value) -> Result<Change<'_>, PayloadError> {
    let full_ref = required(root, "ref")?;
    let before = required(root, "before")?;
    let after = required(root, "after")?;
    let head = str_at(root, &["head_commit", "id"]).map(str::to_owned);
    // Gogs sends no head_commit: on a branch, `after` is the commit.
    let target = head
        .or_else(|| (!is_zero_sha(&after) && full_ref.starts_with(RefKind::Branch.prefix())).then(|| after.clone()));
    Ok(Change {
        created: is_zero_sha(&before) && !is_zero_sha(&after),
        deleted: is_zero_sha(&after) && !is_zero_sha(&before),
        forced: None,
        commits: array_at(root, &["commits"]),
        total: count_at(root, &["total_commits"]),
        truncated: false,
        full_ref,
        before,
        after,
        target,
    })
}

/// Gitea `delete`: `{ref: "<short name>", ref_type: "branch"|"tag"}`; Forgejo hooks of
/// type "forgejo" may send the full ref (Codeberg community #1556).
fn gitea_delete(root: &Value) -> Result<Event, PayloadError> {
    let raw = required(root, "ref")?;
    let full_ref = if raw.starts_with("refs/") {
        raw
    } else if str_at(root, &["ref_type"]) == Some("tag") {
        format!("{}{raw}", RefKind::Tag.prefix())
    } else {
        format!("{}{raw}", RefKind::Branch.prefix())
    };
    Ok(match split_ref(&full_ref) {
        Some((ref_kind, name)) => {
            Event::Deletion(RefDeletion { ref_name: name.to_owned(), ref_kind, r#ref: full_ref.clone() })
        }
        None => Event::Ignored(Ignored::NotBranchOrTag),
    })
}

fn github_change(root: &Value) -> Result<Change<'_>, PayloadError> {
    let full_ref = required(root, "ref")?;
    let before = required(root, "before")?;
    let after = required(root, "after")?;
    let commits = array_at(root, &["commits"]);
    Ok(Change {
        target: str_at(root, &["head_commit", "id"]).map(str::to_owned),
        created: bool_at(root, &["created"]).unwrap_or(is_zero_sha(&before)),
        deleted: bool_at(root, &["deleted"]).unwrap_or(is_zero_sha(&after)),
        forced: bool_at(root, &["forced"]),
        truncated: commits.len() >= GITHUB_MAX_COMMITS,
        commits,
        total: None,
        full_ref,
        before,
        after,
    })
}

fn gitlab_change(root: &Value) -> Result<Change<'_>, PayloadError> {
    let full_ref = required(root, "ref")?;
    let before = required(root, "before")?;
    let after = required(root, "after")?;
    Ok(Change {
        target: str_at(root, &["checkout_sha"]).map(str::to_owned),
        created: is_zero_sha(&before) && !is_zero_sha(&after),
        deleted: is_zero_sha(&after) && !is_zero_sha(&before),
        forced: None,
        commits: array_at(root, &["commits"]),
        total: count_at(root, &["total_commits_count"]),
        truncated: false,
        full_ref,
        before,
        after,
    })
}

/// Bitbucket Cloud `repo:push`: `push.changes[]{old, new, created, closed, forced,
/// truncated, commits}`; `old`/`new` are `{type: branch|tag|annotated_tag, name,
/// target.hash}` or null.
fn bitbucket_cloud_changes(root: &Value) -> Vec<Change<'_>> {
    array_at(root, &["push", "changes"])
        .iter()
        .filter_map(|change| {
            let new = change.get("new").filter(|v| v.is_object());
            let old = change.get("old").filter(|v| v.is_object());
            let side = new.or(old)?;
            let prefix = match str_at(side, &["type"])? {
                "branch" => RefKind::Branch.prefix(),
                "tag" | "annotated_tag" => RefKind::Tag.prefix(),
                _ => return None,
            };
            let name = str_at(side, &["name"])?;
            let hash =
                |v: Option<&Value>| v.and_then(|v| str_at(v, &["target", "hash"])).unwrap_or(ZERO_SHA).to_owned();
            let after = hash(new);
            Some(Change {
                full_ref: format!("{prefix}{name}"),
                before: hash(old),
                target: Some(after.clone()),
                after,
                created: bool_at(change, &["created"]).unwrap_or(old.is_none()),
                deleted: bool_at(change, &["closed"]).unwrap_or(new.is_none()),
                forced: bool_at(change, &["forced"]),
                commits: array_at(change, &["commits"]),
                total: None,
                truncated: bool_at(change, &["truncated"]).unwrap_or(false),
            })
        })
        .collect()
}

/// Bitbucket Server `repo:refs_changed`: `changes[]{ref{id, type}, refId, fromHash,
/// toHash, type: ADD|UPDATE|DELETE}`; no commit list (BSERV-11847).
fn bitbucket_server_changes(root: &Value) -> Vec<Change<'_>> {
    array_at(root, &["changes"])
        .iter()
        .filter_map(|change| {
            let full_ref = str_at(change, &["refId"]).or_else(|| str_at(change, &["ref", "id"]))?;
            let kind = str_at(change, &["type"]).unwrap_or("UPDATE");
            let before = str_at(change, &["fromHash"]).unwrap_or(ZERO_SHA).to_owned();
            let after = str_at(change, &["toHash"]).unwrap_or(ZERO_SHA).to_owned();
            Some(Change {
                full_ref: full_ref.to_owned(),
                target: Some(after.clone()),
                created: kind.eq_ignore_ascii_case("ADD"),
                deleted: kind.eq_ignore_ascii_case("DELETE") || is_zero_sha(&after),
                before,
                after,
                forced: None,
                commits: &[],
                total: None,
                truncated: true,
            })
        })
        .collect()
}

fn repository(provider: Provider, root: &Value) -> Option<RepoIdentity> {
    let at = |path: &[&str]| str_at(root, path);
    match provider {
        Provider::Gitea | Provider::Forgejo | Provider::Gogs => RepoIdentity::from_urls(
            [at(&["repository", "clone_url"]), at(&["repository", "ssh_url"]), at(&["repository", "html_url"])]
                .into_iter()
                .flatten(),
        ),
        Provider::GitHub => RepoIdentity::from_urls(
            [
                at(&["repository", "clone_url"]),
                at(&["repository", "ssh_url"]),
                at(&["repository", "git_url"]),
                at(&["repository", "html_url"]),
            ]
            .into_iter()
            .flatten(),
        ),
        Provider::GitLab => RepoIdentity::from_urls(
            [at(&["project", "git_http_url"]), at(&["project", "git_ssh_url"]), at(&["project", "web_url"])]
                .into_iter()
                .flatten(),
        )
        // Older GitLab: only the deprecated `repository` object.
        .or_else(|| {
            RepoIdentity::from_urls(
                [at(&["repository", "git_http_url"]), at(&["repository", "git_ssh_url"])].into_iter().flatten(),
            )
        }),
        Provider::BitbucketCloud => RepoIdentity::from_urls(at(&["repository", "links", "html", "href"])),
        Provider::BitbucketServer => RepoIdentity::from_urls(
            array_at(root, &["repository", "links", "clone"]).iter().filter_map(|link| str_at(link, &["href"])),
        ),
    }
}

fn has_file_lists(commit: &Value) -> bool {
    ["added", "removed", "modified"].iter().all(|field| commit.get(field).is_some_and(Value::is_array))
}

fn changed_paths(commits: &[Value]) -> Vec<String> {
    let mut paths = BTreeSet::new();
    for commit in commits {
        for field in ["added", "removed", "modified"] {
            paths.extend(array_at(commit, &[field]).iter().filter_map(Value::as_str).map(str::to_owned));
        }
    }
    paths.into_iter().collect()
}

/// All zeros (40 for SHA-1 repositories, 64 for SHA-256 ones: test "all zeros", not a
/// fixed length).
pub(crate) fn is_zero_sha(sha: &str) -> bool {
    !sha.is_empty() && sha.bytes().all(|b| b == b'0')
}

fn value_at<'v>(root: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(root, |v, key| v.get(key))
}

fn str_at<'v>(root: &'v Value, path: &[&str]) -> Option<&'v str> {
    value_at(root, path)?.as_str()
}

fn bool_at(root: &Value, path: &[&str]) -> Option<bool> {
    value_at(root, path)?.as_bool()
}

fn array_at<'v>(root: &'v Value, path: &[&str]) -> &'v [Value] {
    value_at(root, path).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A count sent as a number or a numeric string.
fn count_at(root: &Value, path: &[&str]) -> Option<usize> {
    match value_at(root, path)? {
        Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn required(root: &Value, field: &'static str) -> Result<String, PayloadError> {
    str_at(root, &[field]).map(str::to_owned).ok_or(PayloadError::MissingField(field))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn parse_value(provider: Provider, event: &str, v: &Value) -> Result<Parsed, PayloadError> {
        parse(provider, event, v.to_string().as_bytes())
    }

    fn pushes(parsed: Parsed) -> Vec<Push> {
        match parsed.event {
            Event::Push(p) => p,
            _ => panic!("not a push"),
        }
    }

    fn gitea_repo() -> Value {
        json!({
            "clone_url": "https://gitea.example.invalid/acme/platform-config.git",
            "ssh_url": "git@ssh.gitea.example.invalid:acme/platform-config.git",
            "html_url": "https://gitea.example.invalid/acme/platform-config",
            "url": "https://gitea.example.invalid/api/v1/repos/acme/platform-config"
        })
    }

    #[test]
    fn malformed_payloads() {
        assert_eq!(
            parse(Provider::GitHub, "push", b"{\"ref\": ").err(),
            Some(PayloadError::Json { line: 1, column: 8 })
        );
        assert_eq!(parse(Provider::GitHub, "push", b"[1]").err(), Some(PayloadError::NotObject));
        assert_eq!(
            parse(Provider::GitHub, "push", b"\xff").err().map(|e| matches!(e, PayloadError::Json { .. })),
            Some(true)
        );
        let no_ref = json!({"before": "a", "after": "b", "repository": gitea_repo()});
        assert_eq!(parse_value(Provider::Gitea, "push", &no_ref).err(), Some(PayloadError::MissingField("ref")));
        let no_repo = json!({"ref": "refs/heads/main", "before": "a", "after": "b"});
        assert_eq!(parse_value(Provider::Gitea, "push", &no_repo).err(), Some(PayloadError::NoRepository));
        // Same shapes under a non-push event are fine: nothing is required.
        assert!(parse_value(Provider::Gitea, "issues", &no_repo).is_ok());
    }

    #[test]
    fn api_url_is_not_a_candidate_and_ssh_host_alias_is_kept() {
        let body = json!({"ref": "refs/heads/main", "before": "a", "after": "b", "repository": gitea_repo()});
        let push = pushes(parse_value(Provider::Forgejo, "push", &body).unwrap()).remove(0);
        assert_eq!(push.repo_urls.len(), 3);
        let keys: Vec<&str> = push.repo_keys.iter().map(RepoKey::as_str).collect();
        assert_eq!(
            keys,
            ["gitea.example.invalid/acme/platform-config", "ssh.gitea.example.invalid/acme/platform-config"]
        );
        assert_eq!(push.repo_key.as_str(), "gitea.example.invalid/acme/platform-config");
    }

    #[test]
    fn gogs_push_deploys_after_and_has_no_total() {
        let body = json!({
            "ref": "refs/heads/main",
            "before": "1111111111111111111111111111111111111111",
            "after": "2222222222222222222222222222222222222222",
            "commits": [{"id": "2222222222222222222222222222222222222222", "added": ["a"], "modified": ["b", "a"]}],
            "repository": gitea_repo()
        });
        let push = pushes(parse_value(Provider::Gogs, "push", &body).unwrap()).remove(0);
        assert_eq!(push.target_commit.as_deref(), Some("2222222222222222222222222222222222222222"));
        assert_eq!((push.commits_listed, push.commits_total, push.commits_truncated), (1, None, false));
        assert_eq!(push.changed_paths, ["a", "b"]);
    }

    #[test]
    fn gitea_truncated_commit_list() {
        let body = json!({
            "ref": "refs/heads/main", "before": "1", "after": "2",
            "commits": [{}, {}, {}, {}, {}], "total_commits": 12,
            "head_commit": {"id": "2"}, "repository": gitea_repo()
        });
        let push = pushes(parse_value(Provider::Gitea, "push", &body).unwrap()).remove(0);
        assert_eq!((push.commits_listed, push.commits_total, push.commits_truncated), (5, Some(12), true));
    }

    #[test]
    fn gitea_tag_deletion_push_and_delete_event() {
        let body = json!({
            "ref": "refs/tags/v1", "before": "1111111111111111111111111111111111111111",
            "after": ZERO_SHA, "commits": [], "head_commit": null, "repository": gitea_repo()
        });
        let push = pushes(parse_value(Provider::Gitea, "push", &body).unwrap()).remove(0);
        assert!(push.deleted && push.is_deletion());
        assert_eq!(push.target_commit, None);

        let tag = json!({"ref": "v1", "ref_type": "tag", "repository": gitea_repo()});
        let Event::Deletion(d) = parse_value(Provider::Gitea, "delete", &tag).unwrap().event else {
            panic!("not a deletion")
        };
        assert_eq!((d.r#ref.as_str(), d.ref_kind, d.ref_name.as_str()), ("refs/tags/v1", RefKind::Tag, "v1"));
        let full = json!({"ref": "refs/heads/a/b", "ref_type": "branch"});
        let Event::Deletion(d) = parse_value(Provider::Forgejo, "delete", &full).unwrap().event else {
            panic!("not a deletion")
        };
        assert_eq!(d.ref_name, "a/b");
    }

    #[test]
    fn other_refs_are_ignored() {
        let body = json!({"ref": "refs/notes/commits", "before": "1", "after": "2", "repository": gitea_repo()});
        let parsed = parse_value(Provider::Gitea, "push", &body).unwrap();
        assert!(matches!(parsed.event, Event::Ignored(Ignored::NotBranchOrTag)));
    }

    #[test]
    fn gitlab_system_hook_and_tag_push() {
        let body = json!({
            "object_kind": "tag_push", "ref": "refs/tags/v2", "before": ZERO_SHA,
            "after": "3333333333333333333333333333333333333333",
            "checkout_sha": "4444444444444444444444444444444444444444",
            "total_commits_count": 0, "commits": [],
            "project": {"git_http_url": "https://gitlab.example.invalid/acme/infra/platform-config.git"}
        });
        for event in ["Tag Push Hook", "System Hook"] {
            let parsed = parse_value(Provider::GitLab, event, &body).unwrap();
            assert_eq!(parsed.event_type.as_deref(), Some("tag_push"));
            let push = pushes(parsed).remove(0);
            assert_eq!(push.repo_key.as_str(), "gitlab.example.invalid/acme/infra/platform-config");
            assert_eq!(push.target_commit.as_deref(), Some("4444444444444444444444444444444444444444"));
            assert!(push.created);
        }
        let mr = json!({"object_kind": "merge_request"});
        assert!(matches!(
            parse_value(Provider::GitLab, "System Hook", &mr).unwrap().event,
            Event::Ignored(Ignored::NotAPush)
        ));
    }

    #[test]
    fn bitbucket_cloud_multiple_changes() {
        let body = json!({
            "push": {"changes": [
                {"new": {"type": "branch", "name": "main", "target": {"hash": "aaaa"}},
                 "old": {"type": "branch", "name": "main", "target": {"hash": "bbbb"}},
                 "created": false, "closed": false, "forced": true, "truncated": true,
                 "commits": [{"hash": "aaaa"}]},
                {"new": null,
                 "old": {"type": "tag", "name": "v1", "target": {"hash": "cccc"}},
                 "created": false, "closed": true, "forced": false},
                {"new": {"type": "named_branch", "name": "x"}}
            ]},
            "repository": {"full_name": "acme/platform-config",
                           "links": {"html": {"href": "https://bitbucket.example.invalid/acme/platform-config"}}}
        });
        let list = pushes(parse_value(Provider::BitbucketCloud, "repo:push", &body).unwrap());
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].r#ref.as_str(), list[0].forced, list[0].commits_truncated),
            ("refs/heads/main", Some(true), true)
        );
        assert_eq!(list[0].target_commit.as_deref(), Some("aaaa"));
        assert_eq!((list[1].r#ref.as_str(), list[1].deleted, list[1].after.as_str()), ("refs/tags/v1", true, ZERO_SHA));
        assert_eq!(list[1].target_commit, None);
    }

    #[test]
    fn bitbucket_server_refs_changed() {
        let body = json!({
            "changes": [{"ref": {"id": "refs/heads/main", "type": "BRANCH"}, "refId": "refs/heads/main",
                         "fromHash": "1111", "toHash": "2222", "type": "UPDATE"}],
            "repository": {"slug": "platform-config", "project": {"key": "ACME"},
                           "links": {"clone": [
                               {"href": "https://bitbucket.example.invalid/scm/acme/platform-config.git", "name": "http"},
                               {"href": "ssh://git@bitbucket.example.invalid:7999/acme/platform-config.git", "name": "ssh"}]}}
        });
        let push = pushes(parse_value(Provider::BitbucketServer, "repo:refs_changed", &body).unwrap()).remove(0);
        assert_eq!(push.target_commit.as_deref(), Some("2222"));
        assert!(push.commits_truncated);
        assert_eq!(push.repo_keys.len(), 2);
        assert!(matches!(
            parse_value(Provider::BitbucketServer, "diagnostics:ping", &json!({})).unwrap().event,
            Event::Ignored(Ignored::Ping)
        ));
    }

    #[test]
    fn counts_are_lenient() {
        let v = json!({"a": 3, "b": "4", "c": -1, "d": null});
        assert_eq!(count_at(&v, &["a"]), Some(3));
        assert_eq!(count_at(&v, &["b"]), Some(4));
        assert_eq!(count_at(&v, &["c"]), None);
        assert_eq!(count_at(&v, &["d"]), None);
    }

    #[test]
    fn zero_shas() {
        assert!(is_zero_sha(ZERO_SHA));
        assert!(is_zero_sha(&"0".repeat(64)));
        assert!(!is_zero_sha(""));
        assert!(!is_zero_sha("0000a"));
    }
}
