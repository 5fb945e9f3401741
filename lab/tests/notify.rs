//! The outgoing webhook of `plumb serve --notify-url`: a successful sync is not posted;
//! a refused one (an empty render, refused by the allowEmpty guard) is, as
//! Slack-compatible JSON.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, routing::post};
use plumb::{metrics::Metrics, serve};
use support::{Lab, control_plane, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sync_is_posted_to_the_notify_url() {
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = received.clone();
    let router = Router::new().route(
        "/hook",
        post(move |body: String| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let lab = Lab::new("notify");
    lab.repo
        .write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notified}\ndata: {k: v}\n")
        .unwrap();
    lab.repo.commit("first").unwrap();
    let file = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: notify-status}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 2s\napplications:\n  - {{name: notified, repository: r, revision: main, path: app, namespace: notify-app, environment: e}}\n",
            lab.url
        ),
    );
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: file,
        cache_dir: lab.tmp.path().join("cache"),
        listen: serve::Listeners::free([127, 0, 0, 1].into()),
        lease: None,
        reload_every: Duration::from_secs(60),
        notify_url: Some(hook),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve::run(process, Arc::new(Metrics::default()), async move {
        let _ = stopped.await;
    }));
    let synced = || {
        let text = control_plane()
            .kubectl(&["-n", "notify-status", "get", "applications.plumb.dev", "notified", "-o", "jsonpath={.status}"])
            .unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|s| s["sync"] == "Synced")
    };
    wait_for("the first sync", Duration::from_secs(60), || async { synced().then_some(()) }).await;
    assert!(received.lock().unwrap().is_empty(), "a successful sync is not posted");
    // Everything removed from Git: the allowEmpty guard refuses the sync.
    lab.repo.write("app/README.md", "nothing to deploy\n").unwrap();
    lab.repo.remove("app/cm.yaml").unwrap();
    lab.repo.commit("empty").unwrap();
    let body =
        wait_for("the notification", Duration::from_secs(60), || async { received.lock().unwrap().first().cloned() })
            .await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let text = json["text"].as_str().unwrap();
    assert!(text.starts_with("plumb: sync of notified (e) at ") && text.contains("refused"), "{text}");
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
