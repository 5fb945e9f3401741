//! A real forge end to end: Gitea (built from its Go module) holds the repository; a
//! `git push` makes Gitea deliver a signed push webhook to plumb; plumb fetches the
//! commit from Gitea over HTTP with a token, applies it to the real API server, and
//! reports the outcome back to Gitea as a commit status.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, health::HealthStatus};
use plumb_lab::{Gitea, Repo};
use support::*;

const NAMESPACE: &str = "gitea-e2e";
const USER: &str = "fleet-owner";
const HOOK_SECRET: &str = "gitea-hook-secret-\u{e9}\u{1f510}";

fn manifests(image: &str) -> Vec<(&'static str, String)> {
    vec![
        ("namespace.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n")),
        (
            "configmap.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: site\n  namespace: {NAMESPACE}\ndata:\n  image: {image}\n"
            ),
        ),
        (
            "deployment.yaml",
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {NAMESPACE}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n"
            ),
        ),
    ]
}

/// Waits until Gitea shows a `plumb/web` status on `sha` in `state`; returns it.
async fn wait_for_status(
    gitea: &Gitea,
    token: &str,
    repo: &plumb_lab::GiteaRepo,
    sha: &str,
    state: &str,
) -> serde_json::Value {
    let what = format!("commit status {state} on {sha}");
    let found = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            let statuses = gitea.commit_statuses(token, repo, sha).await.unwrap();
            if let Some(s) = statuses.iter().find(|s| s["context"] == "plumb/web" && s["status"] == state) {
                return s.clone();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("timed out waiting for {what}; gitea log:\n{}", gitea.logs()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_gitea_is_applied_and_reported_back() {
    let cp = control_plane();
    let gitea = Gitea::start().await.unwrap_or_else(|e| panic!("gitea: {e:#}"));

    // A user, its token, a private repository — all through Gitea's API.
    let password = "Fleet-owner-Passw0rd";
    gitea.create_user(USER, password).await.unwrap();
    let token = gitea.create_token(USER, password, "plumb", &["write:repository", "write:user"]).await.unwrap();
    let repo = gitea.create_repo(&token, "fleet", true).await.unwrap();
    assert_eq!(repo.clone_url, format!("{}/{USER}/fleet.git", gitea.base));

    // A first commit, pushed with `git` (the token as basic-auth password), before plumb
    // or the webhook exist.
    let tmp = tempfile::tempdir().unwrap();
    let work = Repo::init(tmp.path(), "fleet").unwrap();
    let authed = repo.clone_url.replacen("http://", &format!("http://{USER}:{token}@"), 1);
    work.set_origin(&authed).unwrap();
    work.write("README.md", "fleet\n").unwrap();
    let c0 = work.commit("readme").unwrap();

    // plumb reads the private repository with the same token; a reconcile interval of an
    // hour means only the webhook can bring the next commit in.
    std::fs::write(tmp.path().join("gitea-token"), format!("{token}\n")).unwrap();
    std::fs::write(tmp.path().join("webhook-secret"), HOOK_SECRET).unwrap();
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "settings: {{statusNamespace: plumb-gitea}}
repositories:
  - name: fleet
    url: {url}
    username: {USER}
    tokenFile: gitea-token
    insecure: true
    webhookSecretFile: webhook-secret
    commitStatus:
      provider: gitea
      tokenFile: gitea-token
      targetUrl: http://plumb.example.invalid/api/v1/applications
environments:
  - name: dev
    syncPolicy: {{automated: true, prune: true, selfHeal: true}}
    reconcileInterval: 1h
applications:
  - {{name: web, repository: fleet, revision: main, path: apps/web, namespace: {NAMESPACE}, environment: dev}}
",
            url = repo.clone_url
        ),
    )
    .unwrap();
    let plumb = Plumb::start(&policy, &tmp.path().join("cache")).await;
    // the start pass fetched c0 from Gitea with the token (no apps/web yet: nothing applied)
    let st = wait_for("start pass saw c0", Duration::from_secs(60), || async {
        plumb.status("web").await.filter(|s| s.conditions.iter().any(|c| c.message.contains(&c0)))
    })
    .await;
    assert!(st.conditions.iter().any(|c| c.message.contains("apps/web")), "{st:?}");
    assert!(
        kubectl(&["get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "name"]).trim().is_empty(),
        "nothing applied before the push"
    );

    // The webhook, with a secret, through Gitea's API.
    let hook_url = format!("http://{}/api/webhook", plumb.addr);
    gitea.create_push_webhook(&token, &repo, &hook_url, HOOK_SECRET).await.unwrap();

    // Push the manifests; Gitea delivers the signed push; plumb applies it.
    for (f, text) in manifests("nginx:1.27.3") {
        work.write(&format!("apps/web/{f}"), &text).unwrap();
    }
    let c1 = work.commit("web: first deploy").unwrap();
    let st = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(s) = plumb.status("web").await.filter(|s| s.sync == SyncStatus::Synced && s.revision == c1) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("web not Synced at {c1} after the push; gitea log:\n{}", gitea.logs()));
    assert_eq!(st.synced_revision, c1);
    assert_eq!(st.subject, "web: first deploy");
    assert_eq!(
        cp.kubectl(&["-n", NAMESPACE, "get", "configmap", "site", "-o", "jsonpath={.data.image}"]).unwrap(),
        "nginx:1.27.3"
    );
    assert_eq!(
        kubectl(&["-n", NAMESPACE, "get", "deployment", "web", "-o", "jsonpath={.metadata.labels.plumb\\.dev/app}"]),
        "web"
    );
    assert_eq!(plumb.ctx.history("web").await.unwrap()[0].revision, c1);

    // The commit status on Gitea: pending while the Deployment rolls out (kwok runs its
    // pods), then success with sync and health in the description.
    let done = wait_for_status(&gitea, &token, &repo, &c1, "success").await;
    let desc = done["description"].as_str().unwrap();
    assert!(desc.starts_with("Synced, Healthy"), "{done}");
    assert_eq!(done["target_url"], "http://plumb.example.invalid/api/v1/applications");
    wait_for("web Healthy", Duration::from_secs(10), || async {
        plumb.status("web").await.filter(|s| s.health == HealthStatus::Healthy)
    })
    .await;

    // A second push: the next commit gets its own status; the first keeps its own.
    for (f, text) in manifests("nginx:1.27.4") {
        work.write(&format!("apps/web/{f}"), &text).unwrap();
    }
    let c2 = work.commit("web: bump nginx").unwrap();
    let done2 = wait_for_status(&gitea, &token, &repo, &c2, "success").await;
    assert!(done2["description"].as_str().unwrap().starts_with("Synced, Healthy"), "{done2}");
    assert_eq!(kubectl(&["-n", NAMESPACE, "get", "configmap", "site", "-o", "jsonpath={.data.image}"]), "nginx:1.27.4");
    // Gitea keeps every status posted: c1 went pending (sync done, pods starting) → success.
    let first = gitea.commit_statuses(&token, &repo, &c1).await.unwrap();
    assert!(first.iter().all(|s| s["context"] == "plumb/web"), "{first:?}");
    let mut states: Vec<&str> = first.iter().filter_map(|s| s["status"].as_str()).collect();
    states.sort_unstable();
    assert_eq!(states, ["pending", "success"], "{first:?}");
    plumb.stop().await;
}
