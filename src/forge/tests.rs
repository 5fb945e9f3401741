#![allow(clippy::unwrap_used)]

use super::*;
use crate::status::{AppStatus, SyncRecord};

fn cfg(yaml: &str) -> CommitStatusConfig {
    serde_saphyr::from_str(yaml).unwrap()
}

fn target(provider: &str, url: &str) -> Target {
    Target::new(&cfg(&format!("provider: {provider}\ntokenFile: /t\n")), url).unwrap()
}

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn owner_and_repo_come_from_every_url_shape() {
    for url in [
        "https://github.com/acme/fleet.git",
        "https://github.com/acme/fleet",
        "git@github.com:acme/fleet.git",
        "ssh://git@github.com:22/acme/fleet.git",
        "https://user@github.com:443/acme/fleet/",
    ] {
        let t = target("github", url);
        assert_eq!(
            (t.owner.as_str(), t.repo.as_str(), t.api_url.as_str()),
            ("acme", "fleet", "https://api.github.com")
        );
    }
    // Gitea under a sub-path: owner/repo are the last two segments
    let t = target("gitea", "http://127.0.0.1:3000/git/plumb/fleet.git");
    assert_eq!((t.owner.as_str(), t.repo.as_str()), ("plumb", "fleet"));
    assert_eq!(t.api_url, "http://127.0.0.1:3000/api/v1", "default is the origin + /api/v1");
}

#[test]
fn bad_targets_are_explained() {
    let e = Target::new(&cfg("provider: github\ntokenFile: /t\n"), "https://github.com/fleet").unwrap_err();
    assert!(matches!(e, Error::Destination(DestinationError::NoOwnerRepo { .. })), "{e}");
    let e = Target::new(&cfg("provider: gitea\ntokenFile: /t\n"), "git@gitea.example:acme/fleet.git").unwrap_err();
    assert!(e.to_string().contains("set commitStatus.apiUrl"), "{e}");
    let e = Target::new(&cfg("provider: gitea\ntokenFile: /t\napiUrl: ftp://x/api\n"), "https://g.example/a/b")
        .unwrap_err();
    assert!(matches!(e, Error::Destination(DestinationError::ApiUrl { .. })), "{e}");
    let t = Target::new(
        &cfg("provider: gitea\ntokenFile: /t\napiUrl: https://g.example/gitea/api/v1/\n"),
        "git@g.example:acme/fleet.git",
    )
    .unwrap();
    assert_eq!(t.url(SHA).unwrap().as_str(), format!("https://g.example/gitea/api/v1/repos/acme/fleet/statuses/{SHA}"));
}

fn status(state: State) -> CommitStatus {
    CommitStatus {
        sha: SHA.into(),
        state,
        context: "plumb/web".into(),
        description: "Synced, Healthy: applied 4, pruned 0".into(),
    }
}

#[test]
fn gitea_request_matches_the_gitea_api() {
    let mut t = target("gitea", "http://127.0.0.1:3000/plumb/fleet.git");
    t.target_url = Some("http://plumb.example/api/v1/applications".into());
    let req = t.request(&status(State::Success), b"tok3n").unwrap();
    assert_eq!(req.method(), "POST");
    assert_eq!(req.uri().to_string(), format!("http://127.0.0.1:3000/api/v1/repos/plumb/fleet/statuses/{SHA}"));
    assert_eq!(req.headers()["authorization"], "token tok3n");
    assert!(req.headers()["authorization"].is_sensitive());
    assert_eq!(req.headers()["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_slice(req.body()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "state": "success", "context": "plumb/web",
            "description": "Synced, Healthy: applied 4, pruned 0",
            "target_url": "http://plumb.example/api/v1/applications",
        })
    );
}

#[test]
fn github_request_matches_the_github_api() {
    let t = target("github", "https://github.com/acme/fleet.git");
    let req = t.request(&status(State::Pending), b"ghp_x").unwrap();
    assert_eq!(req.uri().to_string(), format!("https://api.github.com/repos/acme/fleet/statuses/{SHA}"));
    assert_eq!(req.headers()["authorization"], "Bearer ghp_x");
    assert_eq!(req.headers()["accept"], "application/vnd.github+json");
    assert_eq!(req.headers()["x-github-api-version"], "2022-11-28");
    assert!(req.headers()["user-agent"].to_str().unwrap().starts_with("plumb/"));
    let body: serde_json::Value = serde_json::from_slice(req.body()).unwrap();
    assert_eq!(body["state"], "pending");
    assert!(body.get("target_url").is_none(), "no target URL configured: none sent");
}

#[test]
fn tokens_that_cannot_be_headers_are_refused_without_echo() {
    let t = target("gitea", "http://g.example/a/b");
    for bad in [&b""[..], b"s3cr\nQz", b"s3cr\x00Qz"] {
        let e = t.request(&status(State::Success), bad).unwrap_err();
        assert!(matches!(e, Error::BadToken { .. }), "{e}");
        let text = format!("{e} {e:?}");
        assert!(!text.contains("s3cr") && !text.contains("Qz"), "the token never appears in errors: {text}");
    }
}

#[test]
fn states_follow_result_and_health() {
    use HealthStatus::*;
    use SyncResult::*;
    for (r, h, want) in [
        (Succeeded, Healthy, State::Success),
        (Succeeded, Suspended, State::Success),
        (Succeeded, Progressing, State::Pending),
        (Succeeded, Degraded, State::Failure),
        (Succeeded, Missing, State::Failure),
        (Succeeded, Unknown, State::Error),
        (Failed, Healthy, State::Failure),
        (Refused, Healthy, State::Error),
    ] {
        assert_eq!(state_for(r, h), want, "{r:?} {h:?}");
    }
}

#[test]
fn descriptions_carry_sync_and_health_and_fit_github() {
    assert_eq!(describe(SyncStatus::Synced, HealthStatus::Healthy, ""), "Synced, Healthy");
    let long = describe(SyncStatus::OutOfSync, HealthStatus::Degraded, &"é".repeat(500));
    assert_eq!(long.chars().count(), MAX_DESCRIPTION_CHARS);
    assert!(long.starts_with("OutOfSync, Degraded: ") && long.ends_with('…'));
}

/// [`next_status`] after a pass that left `r.0` and synced `r.1`.
fn next(app: &str, r: &(AppStatus, Option<SyncRecord>), last: Option<&CommitStatus>) -> Option<CommitStatus> {
    next_status(app, &r.0, r.1.as_ref(), last)
}

fn report(sync: Option<SyncResult>, health: HealthStatus) -> (AppStatus, Option<SyncRecord>) {
    (
        AppStatus {
            app: "web".into(),
            revision: SHA.into(),
            synced_revision: SHA.into(),
            sync: SyncStatus::Synced,
            health,
            ..AppStatus::default()
        },
        sync.map(|result| SyncRecord {
            subject: "s".into(),
            result,
            message: if result == SyncResult::Succeeded { String::new() } else { "apply web: forbidden".into() },
            applied: vec!["a".into(), "b".into()],
            ..SyncRecord::new(SHA, crate::status::SyncReason::NewRevision)
        }),
    )
}

#[test]
fn a_sync_posts_then_the_rollout_settles_once() {
    // sync while the Deployment rolls out: pending
    let first = next("web", &report(Some(SyncResult::Succeeded), HealthStatus::Progressing), None).unwrap();
    assert_eq!((first.state, first.context.as_str()), (State::Pending, "plumb/web"));
    assert_eq!(first.description, "Synced, Progressing: applied 2, pruned 0");
    // the next pass, still progressing: nothing new to say
    assert_eq!(next("web", &report(None, HealthStatus::Progressing), Some(&first)), None);
    // healthy: success on the same commit
    let done = next("web", &report(None, HealthStatus::Healthy), Some(&first)).unwrap();
    assert_eq!((done.sha.as_str(), done.state), (SHA, State::Success));
    assert!(done.description.starts_with("Synced, Healthy"));
    // after success, passes without a sync post nothing
    assert_eq!(next("web", &report(None, HealthStatus::Degraded), Some(&done)), None);
    // nothing was ever posted and nothing synced: nothing to say
    assert_eq!(next("web", &report(None, HealthStatus::Healthy), None), None);
}

/// The description is plumb's own words: the record's message (API error text quoting
/// Git values and cluster internals) never reaches the forge.
#[test]
fn commit_status_descriptions_never_quote_the_sync_error() {
    let leak = "admission webhook \"x.internal.svc:443\" denied: <!channel> secret=hunter2";
    for (result, state, words) in [
        (SyncResult::Failed, State::Failure, "sync failed after applying 2; see plumb history"),
        (SyncResult::Refused, State::Error, "sync refused by a guard, nothing written; see plumb history"),
        (SyncResult::Running, State::Pending, "sync running: applied 2, a later wave waits for health"),
    ] {
        let mut r = report(Some(result), HealthStatus::Healthy);
        if let Some(rec) = r.1.as_mut() {
            rec.message = leak.into();
        }
        let s = next("web", &r, None).unwrap();
        assert_eq!(s.state, state);
        assert_eq!(s.description, format!("Synced, Healthy: {words}"));
    }
}

/// `{app}` in `targetUrl` becomes the application's name, one path segment, so the
/// status links to the application's status page; a URL without it is sent unchanged.
#[test]
fn target_url_links_to_the_application_page() {
    let t = Target::new(
        &cfg("provider: gitea\ntokenFile: /t\ntargetUrl: https://plumb.example/applications/{app}\n"),
        "http://127.0.0.1:3000/plumb/fleet.git",
    )
    .unwrap();
    let req = t.request(&status(State::Success), b"tok3n").unwrap();
    let body: serde_json::Value = serde_json::from_slice(req.body()).unwrap();
    assert_eq!(body["target_url"], "https://plumb.example/applications/web");
    assert_eq!(t.link("a b/../c?d"), Some("https://plumb.example/applications/a%20b%2F..%2Fc%3Fd".into()));
    let plain = Target { target_url: Some("https://plumb.example/".into()), ..t.clone() };
    assert_eq!(plain.link("web"), Some("https://plumb.example/".into()));
    assert_eq!(Target { target_url: None, ..t }.link("web"), None);
    assert_eq!(status(State::Success).app(), "web");
}

#[test]
fn an_untrusted_commit_is_marked_not_deployed_once() {
    let untrusted = "b".repeat(40);
    let (mut st, _) = report(None, HealthStatus::Healthy);
    st.sync = SyncStatus::OutOfSync;
    st.verification = Some(crate::status::Verification {
        revision: untrusted.clone(),
        mode: "head".into(),
        reason: "unsigned".into(),
        ..crate::status::Verification::default()
    });
    let held = next_status("web", &st, None, None).unwrap();
    assert_eq!((held.sha.as_str(), held.state), (untrusted.as_str(), State::Error));
    assert_eq!(held.description, "OutOfSync, Healthy: not deployed: not signed by a trusted key; see plumb get");
    assert_eq!(next_status("web", &st, None, Some(&held)), None);
    // verified, or allowed by a person: the usual statuses
    st.verification.as_mut().unwrap().verified = true;
    assert_eq!(next_status("web", &st, None, None), None);
}
