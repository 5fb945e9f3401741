//! An applicationSet with a `pullRequests` generator under `plumb serve`, against a real
//! Gitea and control plane: a pull request opened with the `preview` label becomes an
//! application `pr-N` deployed from `refs/pull/N/head` into namespace `pr-N`; one
//! without the label does not, until it is labelled; closing a pull request takes its
//! application out of the policy and deletes its objects (`deletionPolicy: delete`,
//! this generator's default).
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{metrics::Metrics, serve};
use plumb_lab::Repo;
use support::{control_plane, wait_for};

const STATUS_NS: &str = "prgen-status";
const OWNER: &str = "prgen-owner";

fn resource(app: &str) -> Option<serde_json::Value> {
    let text = control_plane().kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", app, "-o", "json"]).ok()?;
    serde_json::from_str(&text).ok()
}

fn cm(value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: preview}}\ndata: {{k: {value}}}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_gets_a_preview_environment_until_it_closes() {
    let _cp = control_plane();
    let gitea = plumb_lab::Gitea::start().await.unwrap_or_else(|e| panic!("gitea: {e:#}"));
    let password = "Prgen-owner-Passw0rd";
    gitea.create_user(OWNER, password).await.unwrap();
    let scopes = ["write:repository", "write:user", "write:issue"];
    let token = gitea.create_token(OWNER, password, "plumb", &scopes).await.unwrap();
    let repo = gitea.create_repo(&token, "fleet", false).await.unwrap();
    // the label the generator asks for
    let path = format!("/api/v1/repos/{OWNER}/fleet/labels");
    let label = serde_json::json!({"name": "preview", "color": "#00aabb"});
    let (code, answer) =
        gitea.call("POST", &path, Some(plumb_lab::GiteaAuth::Token(&token)), Some(&label)).await.unwrap();
    assert_eq!(code, 201, "{answer}");
    let label_id = answer["id"].as_i64().unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let work = Repo::init(tmp.path(), "fleet").unwrap();
    work.set_origin(&repo.clone_url.replacen("http://", &format!("http://{OWNER}:{token}@"), 1)).unwrap();
    work.write("app/cm.yaml", &cm("main")).unwrap();
    work.commit("main").unwrap();
    std::fs::write(tmp.path().join("gitea-token"), format!("{token}\n")).unwrap();
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "settings: {{statusNamespace: {STATUS_NS}}}
repositories:
  - name: fleet
    url: {url}
    insecure: true
    commitStatus: {{provider: gitea, tokenFile: gitea-token}}
environments:
  - name: previews
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
    reconcileInterval: 1h
applicationSets:
  - name: previews
    generator:
      pullRequests: {{repository: fleet, labels: [preview]}}
    template:
      name: 'pr-{{{{number}}}}'
      repository: fleet
      revision: 'refs/pull/{{{{number}}}}/head'
      path: app
      namespace: 'pr-{{{{number}}}}'
      environment: previews
",
            url = repo.clone_url
        ),
    )
    .unwrap();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: policy.clone(),
        cache_dir: tmp.path().join("cache"),
        listen: serve::Listeners { public: free(), internal: free(), probes: free() },
        lease: None,
        reload_every: Duration::from_millis(500),
        notify_url: None,
    };
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve::run(process, metrics, async move {
        let _ = stopped.await;
    }));

    // gives pull request `number` the label the generator asks for
    let label = |number: u64| {
        let (gitea, token) = (&gitea, &token);
        async move {
            let path = format!("/api/v1/repos/{OWNER}/fleet/issues/{number}/labels");
            let body = serde_json::json!({"labels": [label_id]});
            let auth = Some(plumb_lab::GiteaAuth::Token(token));
            let (code, answer) = gitea.call("POST", &path, auth, Some(&body)).await.unwrap();
            assert_eq!(code, 200, "{answer}");
        }
    };
    // a labelled pull request: its preview environment, from its head
    work.switch("feature").unwrap();
    work.write("app/cm.yaml", &cm("feature")).unwrap();
    let head = work.commit_branch("feature").unwrap();
    // Gitea takes a moment after a push before it knows the branch (404 until then)
    let labelled = wait_for("the labelled pull request opened", Duration::from_secs(60), || async {
        gitea.create_pull(&token, &repo, "feature", "main", "feature").await.ok()
    })
    .await;
    label(labelled).await;
    // an unlabelled one: no application
    work.switch("other").unwrap();
    work.write("app/cm.yaml", &cm("other")).unwrap();
    work.commit_branch("other").unwrap();
    let unlabelled = wait_for("the unlabelled pull request opened", Duration::from_secs(60), || async {
        gitea.create_pull(&token, &repo, "other", "main", "other").await.ok()
    })
    .await;

    let app = format!("pr-{labelled}");
    let ns = app.clone();
    let r = wait_for(&format!("{app} synced"), Duration::from_secs(180), || async {
        resource(&app).filter(|r| r["status"]["sync"] == "Synced")
    })
    .await;
    assert_eq!(r["spec"]["applicationSet"], "previews", "{r}");
    let value =
        control_plane().kubectl(&["-n", &ns, "get", "configmap", "preview", "-o", "jsonpath={.data.k}"]).unwrap();
    assert_eq!(value.trim(), "feature", "deployed from the pull request's head {head}");
    assert!(resource(&format!("pr-{unlabelled}")).is_none(), "no preview label, no application");

    // labelled later: its preview environment too
    label(unlabelled).await;
    let other = format!("pr-{unlabelled}");
    wait_for(&format!("{other} synced"), Duration::from_secs(180), || async {
        resource(&other).filter(|r| r["status"]["sync"] == "Synced")
    })
    .await;

    // closed, one after the other: each application goes and its objects are deleted
    for (number, app, ns) in [(labelled, &app, &ns), (unlabelled, &other, &other)] {
        gitea.close_pull(&token, &repo, number).await.unwrap();
        wait_for(&format!("{app}'s Application resource deleted"), Duration::from_secs(180), || async {
            resource(app).is_none().then_some(())
        })
        .await;
        wait_for(&format!("{app}'s ConfigMap deleted"), Duration::from_secs(60), || async {
            control_plane().kubectl(&["-n", ns, "get", "configmap", "preview"]).is_err().then_some(())
        })
        .await;
    }
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
