//! Pull request previews against a real Gitea: a pull request that changes a
//! Deployment's image, adds a ConfigMap and removes a PersistentVolumeClaim gets one
//! comment whose plan lists exactly those (the claim with its data-loss class), edited
//! in place after a second push, and a `plumb/preview` commit status linking to the
//! status page's preview view, which shows the whole plan; nothing in the cluster
//! changes. A fork's pull request is not previewed by default.
#![allow(clippy::unwrap_used)]

mod support;

use std::{process::Command, time::Duration};

use plumb::compare::SyncStatus;
use plumb_lab::{Gitea, GiteaRepo, Repo};
use support::*;

const NAMESPACE: &str = "preview-lab";
const OWNER: &str = "fleet-owner";
const OUTSIDER: &str = "outsider";
const HOOK_SECRET: &str = "preview-hook-secret";
const MARKER: &str = "<!-- plumb-preview -->";

fn deployment(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {NAMESPACE}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n"
    )
}

const PVC: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: preview-lab\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n";

/// `Kind/name=resourceVersion` of every object the applications made, sorted.
fn versions() -> String {
    kubectl(&[
        "-n",
        NAMESPACE,
        "get",
        "deployments,configmaps,persistentvolumeclaims",
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion} {end}",
    ])
}

/// plumb's comments on pull request `number`.
async fn plumb_comments(gitea: &Gitea, token: &str, repo: &GiteaRepo, number: u64) -> Vec<serde_json::Value> {
    let all = gitea.comments(token, repo, number).await.unwrap();
    all.into_iter().filter(|c| c["body"].as_str().is_some_and(|b| b.starts_with(MARKER))).collect()
}

/// The `plumb/preview` status of `sha`, once it is there.
async fn preview_status(gitea: &Gitea, token: &str, repo: &GiteaRepo, sha: &str) -> serde_json::Value {
    wait_for(&format!("plumb/preview status on {sha}"), Duration::from_secs(90), || async {
        let all = gitea.commit_statuses(token, repo, sha).await.unwrap();
        all.into_iter().find(|s| s["context"] == "plumb/preview")
    })
    .await
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=outsider", "-c", "user.email=outsider@plumb.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_gets_one_comment_with_its_plan_and_changes_nothing() {
    let _cp = control_plane();
    let gitea = Gitea::start().await.unwrap_or_else(|e| panic!("gitea: {e:#}"));
    let password = "Fleet-owner-Passw0rd";
    gitea.create_user(OWNER, password).await.unwrap();
    let scopes = ["write:repository", "write:user", "write:issue"];
    let token = gitea.create_token(OWNER, password, "plumb", &scopes).await.unwrap();
    let repo = gitea.create_repo(&token, "fleet", false).await.unwrap();

    // main: web (a Deployment and a claim) and api (a ConfigMap), synced by plumb
    let tmp = tempfile::tempdir().unwrap();
    let work = Repo::init(tmp.path(), "fleet").unwrap();
    work.set_origin(&repo.clone_url.replacen("http://", &format!("http://{OWNER}:{token}@"), 1)).unwrap();
    work.write(
        "apps/web/namespace.yaml",
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"),
    )
    .unwrap();
    work.write("apps/web/deployment.yaml", &deployment("nginx:1.27")).unwrap();
    work.write("apps/web/pvc.yaml", PVC).unwrap();
    work.write(
        "apps/api/configmap.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\n  namespace: {NAMESPACE}\ndata:\n  a: \"1\"\n"
        ),
    )
    .unwrap();
    let c1 = work.commit("web and api").unwrap();
    std::fs::write(tmp.path().join("gitea-token"), format!("{token}\n")).unwrap();
    std::fs::write(tmp.path().join("webhook-secret"), HOOK_SECRET).unwrap();
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "settings: {{statusNamespace: plumb-previews}}
repositories:
  - name: fleet
    url: {url}
    insecure: true
    webhookSecretFile: webhook-secret
    commitStatus: {{provider: gitea, tokenFile: gitea-token, previewUrl: 'https://plumb.example.invalid/previews/{{repository}}/{{number}}'}}
environments:
  - name: dev
    syncPolicy: {{automated: true, prune: true, selfHeal: true}}
    reconcileInterval: 1h
applications:
  - {{name: web, repository: fleet, path: apps/web, namespace: {NAMESPACE}, environment: dev}}
  - {{name: api, repository: fleet, path: apps/api, namespace: {NAMESPACE}, environment: dev}}
",
            url = repo.clone_url
        ),
    )
    .unwrap();
    let plumb = Plumb::start(&policy, &tmp.path().join("cache")).await;
    for app in ["web", "api"] {
        wait_for(&format!("{app} Synced at {c1}"), Duration::from_secs(90), || async {
            plumb.status(app).await.filter(|s| s.sync == SyncStatus::Synced && s.synced_revision == c1)
        })
        .await;
    }
    let hook_url = format!("http://{}/api/webhook", plumb.addr);
    gitea
        .create_webhook(&token, &repo, &hook_url, HOOK_SECRET, &["push", "pull_request", "pull_request_sync"])
        .await
        .unwrap();
    let before = versions();
    assert!(before.contains("PersistentVolumeClaim/data="), "{before}");

    // the pull request: a new image, a new ConfigMap, the claim removed (api untouched)
    work.switch("change").unwrap();
    work.write("apps/web/deployment.yaml", &deployment("nginx:1.28")).unwrap();
    work.write(
        "apps/web/settings.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {NAMESPACE}\ndata:\n  mode: fast\n"),
    )
    .unwrap();
    work.remove("apps/web/pvc.yaml").unwrap();
    let h1 = work.commit_branch("web: nginx 1.28, settings, no claim").unwrap();
    let number = gitea.create_pull(&token, &repo, "change", "main", "web: nginx 1.28").await.unwrap();

    let first = wait_for("the preview comment", Duration::from_secs(90), || async {
        plumb_comments(&gitea, &token, &repo, number).await.into_iter().next()
    })
    .await;
    let body = first["body"].as_str().unwrap();
    assert!(body.contains(&format!("### plumb preview of {}", &h1[..7])), "{body}");
    let items: Vec<&str> = body.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        items,
        [
            "- ➕ create `ConfigMap/preview-lab/settings`",
            "- ✏️ update `Deployment.apps/preview-lab/web`",
            "- ⏸️ skip `PersistentVolumeClaim/preview-lab/data` — **data loss: PersistentVolumeClaim (its volume's data)**: `prune needs approval (data-loss class PersistentVolumeClaim (its volume's data)): plumb prune web --approve, or annotate plumb.dev/prune-approved=<now, RFC 3339>`",
        ],
        "{body}"
    );
    assert!(body.contains("  - `/spec/template/spec/containers/0/image`: `nginx:1.27` → `nginx:1.28`"), "{body}");
    assert!(body.contains("| `web` | OutOfSync | 1 | 1 | 0 | 1 | 0 |"), "{body}");
    assert!(!body.contains("`api`"), "api's inputs did not change: not previewed\n{body}");
    let status = preview_status(&gitea, &token, &repo, &h1).await;
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(status["description"], "1 of 1 applications would change", "{status}");
    let view = format!("/previews/fleet/{number}");
    assert_eq!(status["target_url"], format!("https://plumb.example.invalid{view}"), "{status}");

    // the whole plan on the status page's preview view, behind the status right
    assert_eq!(http_request(plumb.internal, "GET", &view, &[], b"").await.0, 401);
    let (code, page) = http_request(plumb.internal, "GET", &view, &[bearer(reader_token())], b"").await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains(&format!("pull request {number} of fleet")), "{page}");
    assert!(page.contains("<code>nginx:1.27</code> → <code>nginx:1.28</code>"), "{page}");
    assert!(page.contains("PersistentVolumeClaim/preview-lab/data"), "{page}");
    let (code, _) = http_request(plumb.internal, "GET", "/previews/fleet/999", &[bearer(reader_token())], b"").await;
    assert_eq!(code, 404);

    // nothing in the cluster changed, and the application still runs main
    assert_eq!(versions(), before);
    let web = plumb.status("web").await.unwrap();
    assert_eq!((web.synced_revision.as_str(), web.sync), (c1.as_str(), SyncStatus::Synced));

    // the same plan from a laptop: `plumb preview` (exit 1: a sync would change things)
    let pull_ref = format!("refs/pull/{number}/head");
    let config = policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["preview", "web", "--config", config, "--revision", &pull_ref]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert_eq!(
        out,
        "create   ConfigMap/preview-lab/settings\n\
         update   Deployment.apps/preview-lab/web  /spec/template/spec/containers/0/image\n\
         skip     PersistentVolumeClaim/preview-lab/data  prune needs approval (data-loss class PersistentVolumeClaim (its volume's data)): plumb prune web --approve, or annotate plumb.dev/prune-approved=<now, RFC 3339>\n"
    );
    let (code, json, err) = plumb_cli(&["preview", "web", "-c", config, "--revision", &h1, "-o", "json"]);
    assert_eq!(code, 1, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((plan["app"].as_str(), plan["revision"].as_str()), (Some("web"), Some(h1.as_str())));
    let update = &plan["steps"][1];
    assert_eq!(
        (update["action"].as_str(), update["fields"][0]["old"].as_str(), update["fields"][0]["new"].as_str()),
        (Some("update"), Some("nginx:1.27"), Some("nginx:1.28")),
        "{plan}"
    );
    assert_eq!(plan["steps"][2]["dataLoss"], "PersistentVolumeClaim (its volume's data)");
    let (code, out, err) = plumb_cli(&["preview", "api", "-c", config, "--revision", &h1]);
    assert_eq!((code, out.as_str()), (0, format!("nothing to do: Synced at {}\n", &h1[..7]).as_str()), "{err}");
    let (code, _, err) = plumb_cli(&["preview", "web", "-c", config, "--revision", "no-such-branch"]);
    assert_eq!(code, 2, "{err}");

    // a second push edits the same comment
    work.write("apps/web/deployment.yaml", &deployment("nginx:1.29")).unwrap();
    let h2 = work.commit_branch("web: nginx 1.29").unwrap();
    let comment_of = |sha: String| {
        let (gitea, token, repo) = (&gitea, &token, &repo);
        async move {
            let mine = plumb_comments(gitea, token, repo, number).await;
            mine.into_iter().find(|c| c["body"].as_str().is_some_and(|b| b.contains(&sha[..7])))
        }
    };
    let edited =
        wait_for("the comment edited for the second push", Duration::from_secs(90), || comment_of(h2.clone())).await;
    assert_eq!(edited["id"], first["id"], "edited in place");
    assert_eq!(plumb_comments(&gitea, &token, &repo, number).await.len(), 1, "one comment per pull request");
    assert!(edited["body"].as_str().unwrap().contains("`nginx:1.27` → `nginx:1.29`"), "{edited}");
    assert_eq!(preview_status(&gitea, &token, &repo, &h2).await["status"], "success");

    // a third names an object outside web's boundaries (a ConfigMap of kube-system
    // holding the cluster's client CA): the sync would be refused, nothing written; the
    // object is neither read nor shown
    work.write(
        "apps/web/steal.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extension-apiserver-authentication\n  namespace: kube-system\ndata: {}\n",
    )
    .unwrap();
    let h3 = work.commit_branch("web: steal").unwrap();
    let refused = wait_for("the comment of the refused head", Duration::from_secs(90), || comment_of(h3.clone())).await;
    let body = refused["body"].as_str().unwrap();
    assert!(body.contains("| `web` | Unknown | 0 | 0 | 0 | 0 | 2 |"), "{body}");
    assert!(
        body.contains("- ⛔ refused: `sync refused, nothing written: ConfigMap/kube-system/extension-apiserver-authentication (apps/web/steal.yaml#1) outside the application's boundaries"),
        "{body}"
    );
    assert!(!body.contains("BEGIN CERTIFICATE") && !body.contains("client-ca-file"), "{body}");
    let status = preview_status(&gitea, &token, &repo, &h3).await;
    assert_eq!(
        (status["status"].as_str(), status["description"].as_str()),
        (Some("failure"), Some("plan failed for web")),
        "{status}"
    );
    assert_eq!(versions(), before);

    // a fork's pull request: not previewed (previews.forks is false by default)
    let outsider_password = "Outsider-Passw0rd";
    gitea.create_user(OUTSIDER, outsider_password).await.unwrap();
    let outsider = gitea.create_token(OUTSIDER, outsider_password, "fork", &scopes).await.unwrap();
    let fork = gitea.fork(&outsider, &repo).await.unwrap();
    let clone = tmp.path().join("fork");
    let fork_url = fork.clone_url.replacen("http://", &format!("http://{OUTSIDER}:{outsider}@"), 1);
    git(tmp.path(), &["clone", "-q", &fork_url, clone.to_str().unwrap()]);
    git(&clone, &["checkout", "-q", "-b", "evil"]);
    std::fs::write(clone.join("apps/web/deployment.yaml"), deployment("evil:latest")).unwrap();
    git(&clone, &["commit", "-q", "-am", "evil"]);
    git(&clone, &["push", "-q", "origin", "evil"]);
    let skipped = || plumb.ctx.metrics.previews.get_or_create(&vec![("result".into(), "skipped".into())]).get();
    let fork_number = gitea.create_pull(&outsider, &repo, &format!("{OUTSIDER}:evil"), "main", "evil").await.unwrap();
    wait_for("the fork's pull request taken and skipped", Duration::from_secs(90), || async {
        (skipped() >= 1).then_some(())
    })
    .await;
    assert!(plumb_comments(&gitea, &token, &repo, fork_number).await.is_empty());
    let head =
        String::from_utf8(Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&clone).output().unwrap().stdout)
            .unwrap();
    let statuses = gitea.commit_statuses(&token, &repo, head.trim()).await.unwrap();
    assert!(statuses.is_empty(), "{statuses:?}");
    assert_eq!(versions(), before);
    plumb.stop().await;
}
