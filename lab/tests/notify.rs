//! Notifications against the real API server and local sinks. The outgoing webhook of
//! `plumb serve --notify-url`: a successful sync is not posted; a refused one (an empty
//! render, refused by the allowEmpty guard) is, as Slack-compatible JSON. The policy's
//! `notifications:`: every trigger reaches its routed providers (HTTP and SMTP sinks)
//! once per revision.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, routing::post};
use plumb::{metrics::Metrics, serve};
use support::{Lab, control_plane, kubectl, wait_for};

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

/// What the sinks received: (path, signature header, body).
type Received = Arc<Mutex<Vec<(String, String, String)>>>;

/// Local HTTP sinks at `/slack`, `/teams` and `/hook`, recording every POST.
async fn http_sinks() -> (String, Received) {
    let received: Received = Arc::default();
    let record = |path: &'static str, sink: Received| {
        post(move |headers: axum::http::HeaderMap, body: String| {
            let sink = sink.clone();
            async move {
                let sig = headers.get("x-plumb-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
                sink.lock().unwrap().push((path.to_string(), sig.to_string(), body));
                "ok"
            }
        })
    };
    let router = Router::new()
        .route("/slack", record("slack", received.clone()))
        .route("/teams", record("teams", received.clone()))
        .route("/hook", record("hook", received.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (base, received)
}

/// A local SMTP sink (a real socket speaking enough SMTP for one client at a time):
/// records the DATA of every message.
async fn smtp_sink() -> (u16, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mails: Arc<Mutex<Vec<String>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sink = mails.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            write.write_all(b"220 sink ESMTP\r\n").await.unwrap();
            let (mut data, mut in_data) = (String::new(), false);
            while let Ok(Some(line)) = lines.next_line().await {
                if in_data {
                    if line == "." {
                        in_data = false;
                        sink.lock().unwrap().push(std::mem::take(&mut data));
                        write.write_all(b"250 queued\r\n").await.unwrap();
                    } else {
                        data.push_str(&line);
                        data.push('\n');
                    }
                    continue;
                }
                let verb = line.get(..4).unwrap_or_default().to_ascii_uppercase();
                let answer: &[u8] = match verb.as_str() {
                    "EHLO" | "HELO" => b"250 sink\r\n",
                    "DATA" => {
                        in_data = true;
                        b"354 go on\r\n"
                    }
                    "QUIT" => {
                        write.write_all(b"221 bye\r\n").await.unwrap();
                        break;
                    }
                    _ => b"250 ok\r\n",
                };
                write.write_all(answer).await.unwrap();
            }
        }
    });
    (port, mails)
}

/// The notifications of a policy, end to end against the real API server and local
/// sinks: each trigger of `notified` (deployed, a broken-YAML commit, Degraded by a
/// health override, recovered, a prune held for approval, a refused sync) and an
/// unsigned revision of `unsigned` reach the signed webhook once per revision; the
/// webhook's signature verifies with its key; Teams (its address read from a Secret)
/// gets an Adaptive Card; Slack the broken-YAML commit; e-mail the render failure and
/// the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_trigger_reaches_its_sinks_once_per_revision() {
    let (base, received) = http_sinks().await;
    let (smtp_port, mails) = smtp_sink().await;
    let lab = Lab::new("notifications");
    let dir = lab.tmp.path();
    // Teams' address from a Secret in plumb's namespace (see plumb::secret_refs)
    let _ = control_plane().kubectl(&["create", "namespace", "notify-routes"]);
    kubectl(&["-n", "notify-routes", "delete", "secret", "plumb-notify", "--ignore-not-found"]);
    kubectl(&[
        "-n",
        "notify-routes",
        "create",
        "secret",
        "generic",
        "plumb-notify",
        &format!("--from-literal=teams-url={base}/teams"),
    ]);
    std::fs::write(dir.join("hook-key"), "s3cret\n").unwrap();
    std::fs::write(
        dir.join("allowed_signers"),
        "ada@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv1Jq185HE1xbqDizt0AQO14G8vaYGmMXccZyZ8IgQX\n",
    )
    .unwrap();
    let cm = |name: &str, state: &str, extra: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}{extra}}}\ndata: {{state: {state}}}\n")
    };
    let confirm = ", annotations: {plumb.dev/sync-options: Prune=confirm}";
    lab.repo.write("app/state.yaml", &cm("state", "ok", "")).unwrap();
    lab.repo.write("app/keep.yaml", &cm("keep", "ok", confirm)).unwrap();
    lab.repo.write("signed/cm.yaml", &cm("signed", "ok", "")).unwrap();
    let c1 = lab.repo.commit("first").unwrap();
    let policy = format!(
        r#"settings: {{statusNamespace: notify-routes}}
repositories:
  - {{name: r, url: {url}, webhookSecretFile: webhook-secret}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
    reconcileInterval: 2s
    health:
      overrides:
        - {{group: "", kind: ConfigMap, match: {{/data/state: broken}}, conditions: [{{type: Never, health: Healthy}}], otherwise: Degraded}}
  - name: signed
    syncPolicy: {{automated: true, syncOptions: [CreateNamespace=true]}}
    reconcileInterval: 2s
    verifyCommits: {{allowedSignersFile: allowed_signers}}
applications:
  - {{name: notified, repository: r, revision: main, path: app, namespace: notify-routes-app, environment: e}}
  - {{name: unsigned, repository: r, revision: main, path: signed, namespace: notify-routes-signed, environment: signed}}
notifications:
  providers:
    - {{name: chat, type: slack, url: "{base}/slack"}}
    - {{name: teams, type: teams, urlSecretRef: {{name: plumb-notify, key: teams-url}}}}
    - {{name: audit, type: webhook, url: "{base}/hook", secretFile: hook-key}}
    - {{name: mail, type: smtp, url: "smtp+plain://127.0.0.1:{smtp_port}", from: plumb@example.com, to: [oncall@example.com]}}
  routes:
    - {{providers: [audit]}}
    - {{triggers: [sync-succeeded], applications: [notified], providers: [teams]}}
    - {{triggers: [render-failed], environments: [e], providers: [chat], template: "broken {{short}} of {{app}}: {{message}}"}}
    - {{triggers: [render-failed, sync-failed], providers: [mail]}}
"#,
        url = lab.url
    );
    let file = lab.policy("policy.yaml", &policy);
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: file,
        cache_dir: dir.join("cache"),
        listen: serve::Listeners::free([127, 0, 0, 1].into()),
        lease: None,
        reload_every: Duration::from_secs(60),
        notify_url: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve::run(process, Arc::new(Metrics::default()), async move {
        let _ = stopped.await;
    }));
    // the signed webhook's events: (application, trigger, revision), each verified
    let events = || -> Vec<(String, String, String)> {
        received
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, ..)| path == "hook")
            .map(|(_, sig, body)| {
                let want = plumb::notify::body::signature(b"s3cret", body.as_bytes());
                assert_eq!(sig, &want, "the signature verifies with the provider's key");
                let e: serde_json::Value = serde_json::from_str(body).unwrap();
                let s = |k: &str| e[k].as_str().unwrap().to_string();
                (s("application"), s("trigger"), s("revision"))
            })
            .collect()
    };
    let told = |app: &str, trigger: &str, rev: &str| {
        let want = (app.to_string(), trigger.to_string(), rev.to_string());
        let events = events();
        async move { events.contains(&want).then_some(()) }
    };
    let minute = Duration::from_secs(60);
    wait_for("deployed c1", minute, || told("notified", "sync-succeeded", &c1)).await;
    wait_for("c1 not trusted", minute, || told("unsigned", "unverified-revision", &c1)).await;

    // broken YAML: render-failed, to the webhook, Slack (its template) and e-mail
    lab.repo.write("app/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n").unwrap();
    let c2 = lab.repo.commit("broken").unwrap();
    wait_for("render-failed c2", minute, || told("notified", "render-failed", &c2)).await;
    let slack = wait_for("Slack's render-failed", minute, || async {
        received.lock().unwrap().iter().find(|(p, ..)| p == "slack").map(|(.., b)| b.clone())
    })
    .await;
    let text = serde_json::from_str::<serde_json::Value>(&slack).unwrap()["text"].as_str().unwrap().to_string();
    assert!(text.starts_with(&format!("broken {} of notified: render {}", &c2[..7], &c2[..7])), "{text}");
    assert!(text.contains("broken.yaml"), "the message names the file: {text}");
    let mail = wait_for("the render-failed e-mail", minute, || async { mails.lock().unwrap().first().cloned() }).await;
    assert!(
        mail.contains("Subject: plumb: notified (e) cannot render") && mail.contains("oncall@example.com"),
        "{mail}"
    );

    // fixed, but Degraded (the health override), then recovered
    lab.repo.remove("app/broken.yaml").unwrap();
    lab.repo.write("app/state.yaml", &cm("state", "broken", "")).unwrap();
    let c3 = lab.repo.commit("degraded").unwrap();
    wait_for("health-degraded c3", minute, || told("notified", "health-degraded", &c3)).await;
    lab.repo.write("app/state.yaml", &cm("state", "ok", "")).unwrap();
    let c4 = lab.repo.commit("recovered").unwrap();
    wait_for("health-recovered c4", minute, || told("notified", "health-recovered", &c4)).await;

    // a prune that waits for approval
    lab.repo.remove("app/keep.yaml").unwrap();
    let c5 = lab.repo.commit("prune keep").unwrap();
    wait_for("prune-waiting-approval c5", minute, || told("notified", "prune-waiting-approval", &c5)).await;

    // nothing left to deploy: the allowEmpty guard refuses
    lab.repo.remove("app/state.yaml").unwrap();
    lab.repo.write("app/README.md", "nothing to deploy\n").unwrap();
    let c6 = lab.repo.commit("empty").unwrap();
    wait_for("sync-failed c6", minute, || told("notified", "sync-failed", &c6)).await;
    wait_for("c6 not trusted", minute, || told("unsigned", "unverified-revision", &c6)).await;

    // several more passes (2 s apart): nothing is told twice
    tokio::time::sleep(Duration::from_secs(8)).await;
    let events = events();
    for e in &events {
        assert_eq!(events.iter().filter(|x| *x == e).count(), 1, "told once per revision: {e:?} in {events:#?}");
    }
    let teams: Vec<serde_json::Value> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, ..)| p == "teams")
        .map(|(.., b)| serde_json::from_str(b).unwrap())
        .collect();
    assert!(teams.len() >= 2, "deployed c1, c3, c4: {teams:?}");
    for card in &teams {
        assert_eq!(card["type"], "message");
        assert_eq!(card["attachments"][0]["contentType"], "application/vnd.microsoft.card.adaptive");
        let content = &card["attachments"][0]["content"];
        assert_eq!(content["type"], "AdaptiveCard");
        assert!(content["body"][0]["text"].as_str().unwrap().contains("deployed"), "{card}");
        assert_eq!(content["body"][1]["facts"][0]["value"], "notified");
    }
    let mails = mails.lock().unwrap().clone();
    assert!(mails.iter().any(|m| m.contains("refused")), "the refusal is mailed: {mails:#?}");
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
