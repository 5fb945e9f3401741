//! The receiver: configuration and the decision pipeline.

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::body::{ContentType, content_type, form_field};
use super::decision::{Action, Decision};
use super::matching::matching_watches;
use super::paths::path_verdict;
use super::payload::{self, Event, PayloadError};
use super::provider::{Headers, Provider};
use super::signature::{self, Digests, Failure, Streaming};
use super::watched::{Watch, WatchedRepository};

/// Default body limit: 25 MiB (26 214 400 bytes), above the 25 MB that GitHub and GitLab
/// will send at most, so no legitimate delivery is cut (argoproj/argo-events #2088 shows
/// what a 65 KB cap does). Bitbucket Cloud sends at most 256 KB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 26_214_400;

/// Push-webhook receiver: the configured repositories, the watches on them and the body
/// limit. Build it from configuration; [`Receiver::decide`] is pure and cheap to call
/// concurrently.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// Repositories and their secrets.
    pub repositories: Vec<WatchedRepository>,
    /// Applications and the refs they follow.
    pub watches: Vec<Watch>,
    /// Largest accepted body in bytes; larger → 413. See [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
}

impl Receiver {
    /// Decides what to do with one delivery.
    ///
    /// `headers`: `(name, value)` pairs as received (names case-insensitive, first
    /// occurrence wins). `body`: the exact raw bytes; no framework may parse or re-encode
    /// it first (tektoncd/triggers PR #2077). The pipeline is described in the module docs:
    /// size (413) → provider (400) → content type (415) → authentication (401) → parse
    /// (400) → route and match (200 / 202).
    pub fn decide(&self, headers: &[(String, String)], body: &[u8]) -> Decision {
        self.decide_streamed(headers, body, None)
    }

    /// The MACs to feed while a body streams in ([`Receiver::decide_streamed`]).
    pub fn streaming(&self) -> Streaming {
        Streaming::new(&self.repositories)
    }

    /// [`Receiver::decide`], with `digests` the raw body's tags computed while it was
    /// read (from [`Receiver::streaming`] fed every chunk of `body`): a raw-body HMAC is
    /// then not computed again. Same decision as [`Receiver::decide`].
    pub fn decide_streamed(&self, headers: &[(String, String)], body: &[u8], digests: Option<&Digests>) -> Decision {
        let h = Headers::new(headers);
        let provider = Provider::detect_in(&h);
        let decision = Self::start(&h, provider);

        // 1. Size, before any hashing or parsing.
        if body.len() > self.max_body_bytes {
            return decision.finish(Action::Reject, 413, TOO_LARGE);
        }
        // 2. Sender.
        let Some(provider) = provider else {
            return decision.finish(Action::Reject, 400, "no known webhook provider headers");
        };
        // 3. Body encoding.
        let Some(content) = content_type(h.get("content-type")) else {
            return decision.finish(
                Action::Reject,
                415,
                "content type must be application/json or application/x-www-form-urlencoded",
            );
        };
        // 4. Authentication against every configured secret.
        let (verification, verified) = signature::verify(provider, &h, content, body, &self.repositories, digests);
        let failure = verification.failure;
        let mut decision = Decision { verification, ..decision };
        if !decision.verification.valid {
            return decision.finish(Action::Reject, 401, unauthenticated_reason(failure));
        }
        // 5. Parse, only now.
        let json = match content {
            ContentType::Json => Cow::Borrowed(body),
            ContentType::Form => match form_field(body, "payload") {
                Some(json) => Cow::Owned(json),
                None => {
                    return decision.finish(Action::Reject, 400, PayloadError::NoFormPayload.to_string());
                }
            },
        };
        let event = decision.event.clone().unwrap_or_default();
        let parsed = match payload::parse(provider, &event, &json) {
            Ok(parsed) => parsed,
            Err(error) => return decision.finish(Action::Reject, 400, error.to_string()),
        };
        if parsed.event_type.is_some() {
            decision.event_type = parsed.event_type;
        }
        decision.repository = parsed.repository;

        // 6. Route and match.
        match parsed.event {
            Event::Ignored(why) => decision.finish(Action::Ignore, 200, why.reason()),
            Event::Deletion(deletion) => {
                decision.deletion = Some(deletion);
                decision.finish(Action::Ignore, 200, DELETED)
            }
            Event::Push(pushes) => self.route_pushes(decision, provider, &verified, pushes),
            Event::PullRequest(pr) => self.route_pull(decision, &verified, pr),
        }
    }

    /// A pull request: the applications following its base branch in a repository whose
    /// secret verified the delivery are previewed at its head when it was opened, pushed
    /// to or reopened. The answer reads the same whether or not a repository is configured.
    fn route_pull(&self, mut decision: Decision, verified: &[bool], pr: super::pull::PullRequest) -> Decision {
        let kind = super::refs::RefKind::Branch;
        let apps: BTreeSet<String> = super::matching::watches_of(
            &self.repositories,
            verified,
            &self.watches,
            &pr.repo_keys,
            kind,
            pr.base.clone(),
        )
        .map(|w| w.app.clone())
        .collect();
        let previews = pr.action.previews();
        decision.pull_request = Some(pr);
        if !previews {
            return decision.finish(Action::Ignore, 200, "pull request event with nothing to preview; acknowledged");
        }
        if apps.is_empty() {
            return decision.finish(Action::Ignore, 200, NOTHING_WATCHED);
        }
        decision.apps = apps.into_iter().collect();
        decision.finish(Action::Preview, 202, "pull request to a watched branch; preview requested")
    }

    /// The decision [`Receiver::decide`] makes for a body over [`Receiver::max_body_bytes`],
    /// for a caller that stopped reading the body at the limit (the HTTP server): 413,
    /// with the provider, event and delivery id from the headers.
    pub fn too_large(&self, headers: &[(String, String)]) -> Decision {
        let h = Headers::new(headers);
        Self::start(&h, Provider::detect_in(&h)).finish(Action::Reject, 413, TOO_LARGE)
    }

    fn start(h: &Headers<'_>, provider: Option<Provider>) -> Decision {
        Decision::new(
            provider,
            provider.and_then(|p| h.get(p.event_header())),
            provider.and_then(|p| p.event_type(h)),
            provider.and_then(|p| p.delivery_id(h)),
        )
    }

    fn route_pushes(
        &self,
        mut decision: Decision,
        provider: Provider,
        verified: &[bool],
        pushes: Vec<payload::Push>,
    ) -> Decision {
        let (mut apps, mut skipped) = (BTreeSet::new(), BTreeSet::new());
        let (mut live, mut test) = (false, false);
        for push in &pushes {
            if push.is_test_delivery(provider) {
                test = true;
            } else if !push.is_deletion() {
                live = true;
                for watch in matching_watches(&self.repositories, verified, &self.watches, push) {
                    let run =
                        watch.path_filter.as_deref().is_none_or(|path| path_verdict(provider, push, path).must_run());
                    if run {
                        apps.insert(watch.app.clone());
                    } else {
                        skipped.insert(watch.app.clone());
                    }
                }
            }
        }
        // An application another push or watch of this delivery runs is not skipped.
        skipped.retain(|app| !apps.contains(app));
        let mut pushes = pushes.into_iter();
        decision.push = pushes.next();
        decision.extra_pushes = pushes.collect();
        decision.apps = apps.into_iter().collect();
        decision.skipped = skipped.into_iter().collect();
        if !decision.apps.is_empty() {
            decision.finish(Action::Reconcile, 202, "push to a watched ref; reconcile requested")
        } else if !decision.skipped.is_empty() {
            decision.finish(Action::Ignore, 200, UNTOUCHED)
        } else if live {
            // Same words for an unknown repository, a repository whose secret did not sign
            // this delivery, and an unwatched ref: the answer reveals no configuration.
            decision.finish(Action::Ignore, 200, NOTHING_WATCHED)
        } else if test {
            decision.finish(Action::Ignore, 200, "test delivery (before == after); nothing to deploy")
        } else {
            decision.finish(Action::Ignore, 200, DELETED)
        }
    }
}

const TOO_LARGE: &str = "request body exceeds the size limit";
const DELETED: &str = "ref deleted; nothing to deploy";
const UNTOUCHED: &str = "pushed commits touch no path an application follows; acknowledged";
const NOTHING_WATCHED: &str = "no application follows this repository and ref; acknowledged";

/// 401 reasons depend only on what the request carried, never on the configuration.
fn unauthenticated_reason(failure: Option<Failure>) -> &'static str {
    match failure {
        Some(Failure::Missing) => "signature required but missing",
        Some(Failure::Empty) => "signature header is empty; configure the secret on the sender",
        _ => "signature or token does not verify",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use hmac::{Hmac, KeyInit, Mac};
    use serde_json::json;
    use sha2::Sha256;

    use super::super::{Failure, RefKind, RepoKey, Secret};
    use super::*;

    const SECRET: &str = "s3cr3t";
    const URL: &str = "https://github.example.invalid/acme/platform-config.git";

    fn sign(key: &str, body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn key(url: &str) -> RepoKey {
        RepoKey::from_url(url).unwrap()
    }

    fn receiver() -> Receiver {
        Receiver {
            repositories: vec![
                WatchedRepository {
                    key: key(URL),
                    secret: Some(Secret::from(SECRET)),
                    allow_sha1: false,
                    provider: Some(Provider::GitHub),
                },
                WatchedRepository {
                    key: key("https://github.example.invalid/acme/other"),
                    secret: Some(Secret::from("other-secret")),
                    allow_sha1: false,
                    provider: Some(Provider::GitHub),
                },
                WatchedRepository {
                    key: key("https://github.example.invalid/acme/nosecret"),
                    secret: None,
                    allow_sha1: false,
                    provider: Some(Provider::GitHub),
                },
            ],
            watches: vec![
                Watch { app: "web".into(), repo: key(URL), revision: "main".into(), path_filter: None },
                Watch { app: "api".into(), repo: key(URL), revision: "refs/heads/main".into(), path_filter: None },
                Watch { app: "web".into(), repo: key(URL), revision: "release/*".into(), path_filter: None },
                Watch {
                    app: "pinned".into(),
                    repo: key(URL),
                    revision: "02bbd8c995752a69f89ab5f12167a36dd57f5ed0".into(),
                    path_filter: None,
                },
                Watch {
                    app: "other".into(),
                    repo: key("https://github.example.invalid/acme/other"),
                    revision: "main".into(),
                    path_filter: None,
                },
                Watch {
                    app: "nosecret".into(),
                    repo: key("https://github.example.invalid/acme/nosecret"),
                    revision: "main".into(),
                    path_filter: None,
                },
            ],
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    fn push_body(repo: &str, r#ref: &str) -> Vec<u8> {
        json!({
            "ref": r#ref,
            "before": "1111111111111111111111111111111111111111",
            "after": "2222222222222222222222222222222222222222",
            "created": false, "deleted": false, "forced": false,
            "commits": [{"id": "2222222222222222222222222222222222222222", "added": ["x"]}],
            "head_commit": {"id": "2222222222222222222222222222222222222222"},
            "repository": {"clone_url": repo}
        })
        .to_string()
        .into_bytes()
    }

    fn github(event: &str, body: &[u8], secret: &str, content_type: &str) -> Decision {
        let headers = vec![
            ("Content-Type".to_owned(), content_type.to_owned()),
            ("X-GitHub-Event".to_owned(), event.to_owned()),
            ("X-GitHub-Delivery".to_owned(), "d-1".to_owned()),
            ("X-Hub-Signature-256".to_owned(), sign(secret, body)),
        ];
        receiver().decide(&headers, body)
    }

    #[test]
    fn reconcile_collects_apps_sorted_and_deduped() {
        let d = github("push", &push_body(URL, "refs/heads/main"), SECRET, "application/json");
        assert_eq!((d.action, d.http_status), (Action::Reconcile, 202));
        assert_eq!(d.apps, ["api", "web"]);
        let push = d.push.clone().unwrap();
        assert_eq!((push.ref_kind, push.ref_name.as_str()), (RefKind::Branch, "main"));
        assert_eq!(d.dedupe_key().as_deref(), Some("github:d-1"));

        let d = github("push", &push_body(URL, "refs/heads/release/1.2"), SECRET, "application/json; charset=utf-8");
        assert_eq!(d.apps, ["web"]);
    }

    #[test]
    fn unknown_repo_unwatched_ref_and_foreign_secret_read_the_same() {
        let unknown = github(
            "push",
            &push_body("https://github.example.invalid/acme/unknown", "refs/heads/main"),
            SECRET,
            "application/json",
        );
        let unwatched = github("push", &push_body(URL, "refs/heads/dev"), SECRET, "application/json");
        // Signed with the secret of acme/other but naming acme/platform-config.
        let foreign = github("push", &push_body(URL, "refs/heads/main"), "other-secret", "application/json");
        for d in [&unknown, &unwatched, &foreign] {
            assert_eq!((d.action, d.http_status), (Action::Ignore, 200));
            assert!(d.apps.is_empty());
        }
        assert_eq!(unknown.reason, unwatched.reason);
        assert_eq!(unknown.reason, foreign.reason);
    }

    #[test]
    fn repository_without_secret_is_never_reconciled() {
        let body = push_body("https://github.example.invalid/acme/nosecret", "refs/heads/main");
        // Signed with some other configured secret: authenticated, but not for this repo.
        let d = github("push", &body, SECRET, "application/json");
        assert_eq!(d.action, Action::Ignore);
        // Signed with anything else: rejected.
        let d = github("push", &body, "guess", "application/json");
        assert_eq!((d.http_status, d.verification.failure), (401, Some(Failure::Mismatch)));
    }

    #[test]
    fn reasons_for_401_do_not_depend_on_configuration() {
        let body = push_body(URL, "refs/heads/main");
        let a = github("push", &body, "wrong", "application/json");
        let mut empty = receiver();
        empty.repositories.clear();
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("X-GitHub-Event".to_owned(), "push".to_owned()),
            ("X-Hub-Signature-256".to_owned(), sign("wrong", &body)),
        ];
        let b = empty.decide(&headers, &body);
        assert_eq!((a.http_status, b.http_status), (401, 401));
        assert_eq!(a.reason, b.reason);
        assert!(!a.reason.contains("repositor"));
    }

    #[test]
    fn pipeline_order_and_statuses() {
        let body = push_body(URL, "refs/heads/main");
        // 415 before 401
        let d = github("push", &body, "wrong", "text/plain");
        assert_eq!((d.action, d.http_status), (Action::Reject, 415));
        // no provider
        let d = receiver().decide(&[("Content-Type".to_owned(), "application/json".to_owned())], &body);
        assert_eq!((d.http_status, d.provider), (400, None));
        // 413 first, even unsigned
        let mut small = receiver();
        small.max_body_bytes = 10;
        let d = small.decide(&[], &body);
        assert_eq!(d.http_status, 413);
        assert_eq!(d.verification.failure, Some(Failure::NotAttempted));
        // limit is inclusive
        small.max_body_bytes = body.len();
        assert_ne!(small.decide(&[], &body).http_status, 413);
        // ping, other events, malformed
        assert_eq!(github("ping", b"{\"zen\":\"x\"}", SECRET, "application/json").http_status, 200);
        assert_eq!(github("issues", b"{}", SECRET, "application/json").http_status, 200);
        let d = github("push", b"{\"ref\":", SECRET, "application/json");
        assert_eq!((d.http_status, d.verification.valid), (400, true));
        // GitHub's published example authenticates but is not JSON.
        let d = {
            let mut r = receiver();
            r.repositories[0].secret = Some(Secret::from("It's a Secret to Everybody"));
            let headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("X-GitHub-Event".to_owned(), "push".to_owned()),
                (
                    "X-Hub-Signature-256".to_owned(),
                    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".to_owned(),
                ),
            ];
            r.decide(&headers, b"Hello, World!")
        };
        assert_eq!((d.verification.valid, d.http_status), (true, 400));
    }

    fn gitlab_push(token: &str, repo: &str) -> Decision {
        let body = json!({
            "object_kind": "push", "ref": "refs/heads/main",
            "before": "1111111111111111111111111111111111111111",
            "after": "2222222222222222222222222222222222222222",
            "checkout_sha": "2222222222222222222222222222222222222222",
            "total_commits_count": 0, "commits": [],
            "project": {"git_http_url": repo, "web_url": repo}
        })
        .to_string()
        .into_bytes();
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("X-Gitlab-Event".to_owned(), "Push Hook".to_owned()),
            ("X-Gitlab-Token".to_owned(), token.to_owned()),
        ];
        receiver().decide(&headers, &body)
    }

    /// The HMAC key of a GitHub repository sent as a GitLab-style plain token (which
    /// anyone who once saw the secret can replay with any body) does not authenticate:
    /// the scheme is the repository's forge's. The same token for a GitLab repository
    /// does; a repository whose forge is not known takes no plain token at all.
    #[test]
    fn a_github_repositorys_secret_is_refused_as_a_gitlab_token() {
        let d = gitlab_push(SECRET, URL);
        assert_eq!((d.action, d.http_status), (Action::Reject, 401));
        assert_eq!(d.verification.failure, Some(Failure::Mismatch));
        assert_eq!(d.reason, github("push", b"{}", "wrong", "application/json").reason, "reads as any bad token");

        let gitlab = "https://gitlab.example.invalid/acme/fleet";
        let mut r = receiver();
        r.repositories.push(WatchedRepository {
            key: key(gitlab),
            secret: Some(Secret::from("gl-token")),
            allow_sha1: false,
            provider: Some(Provider::GitLab),
        });
        r.watches.push(Watch { app: "gl".into(), repo: key(gitlab), revision: "main".into(), path_filter: None });
        let decide = |r: &Receiver, token: &str| {
            let body = json!({"object_kind": "push", "ref": "refs/heads/main",
                "before": "1111111111111111111111111111111111111111",
                "after": "2222222222222222222222222222222222222222",
                "total_commits_count": 0, "commits": [], "project": {"git_http_url": gitlab}})
            .to_string();
            let headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("X-Gitlab-Event".to_owned(), "Push Hook".to_owned()),
                ("X-Gitlab-Token".to_owned(), token.to_owned()),
            ];
            r.decide(&headers, body.as_bytes())
        };
        let ok = decide(&r, "gl-token");
        assert_eq!((ok.http_status, ok.apps.clone()), (202, vec!["gl".to_owned()]));
        // the GitLab token is no HMAC key for a GitHub-style delivery either
        let mut as_github = r.clone();
        as_github.repositories.retain(|repo| repo.provider == Some(Provider::GitLab));
        let body = push_body(gitlab, "refs/heads/main");
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("X-GitHub-Event".to_owned(), "push".to_owned()),
            ("X-Hub-Signature-256".to_owned(), sign("gl-token", &body)),
        ];
        assert_eq!(as_github.decide(&headers, &body).http_status, 401);
        // forge not known: HMAC yes, plain token no
        r.repositories.last_mut().unwrap().provider = None;
        assert_eq!(decide(&r, "gl-token").http_status, 401);
        assert_eq!(as_github.decide(&headers, &body).http_status, 401, "still bound in the copy");
        let mut unknown = as_github;
        unknown.repositories[0].provider = None;
        assert_eq!(unknown.decide(&headers, &body).http_status, 202);
    }

    /// Forgejo and Gogs deliveries authenticate for a repository configured `gitea`
    /// (one family, one signing rule).
    #[test]
    fn the_gitea_family_signs_alike() {
        for sender in [Provider::Gitea, Provider::Forgejo, Provider::Gogs] {
            assert!(Provider::Gitea.signs_like(sender));
            assert!(!Provider::GitHub.signs_like(sender) && !Provider::GitLab.signs_like(sender));
        }
        assert!(Provider::BitbucketServer.signs_like(Provider::BitbucketCloud));
        assert!(!Provider::GitHub.signs_like(Provider::BitbucketCloud));
    }

    #[test]
    fn form_without_payload_field_is_400_after_auth() {
        let d = github("push", b"other=1", SECRET, "application/x-www-form-urlencoded");
        assert_eq!((d.verification.valid, d.http_status), (true, 400));
    }

    #[test]
    fn reason_never_echoes_payload() {
        let d = github("push", b"{\"ref\": \"SECRET-LOOKING-TEXT\", \"x\": ", SECRET, "application/json");
        assert_eq!(d.http_status, 400);
        assert!(!d.reason.contains("SECRET-LOOKING-TEXT"));
    }
}
