//! `plumb serve` reloads its policy file without a restart: a broken new file is
//! rejected (counted, flagged) and the running policy stays in force; a valid one is
//! applied (a new application gets synced). And a pass that failed is tried again
//! within seconds, not at the next poll.
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{metrics::Metrics, serve};
use support::{Lab, bearer, control_plane, http_request, reader_token, wait_for};

const STATUS_NS: &str = "reload-status";

fn policy(url: &str, apps: &[&str]) -> String {
    let apps: String = apps
        .iter()
        .map(|a| {
            format!(
                "  - {{name: {a}, repository: r, revision: main, path: app, namespace: reload-app, environment: e}}\n"
            )
        })
        .collect();
    format!(
        "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: r, url: {url}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n{apps}"
    )
}

fn synced(app: &str) -> bool {
    let text = control_plane()
        .kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", app, "-o", "jsonpath={.status}"])
        .unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|s| s["sync"] == "Synced")
}

/// Replaces the policy file in one step (a new file renamed over it, as a ConfigMap
/// volume's symlink swap does): the watcher never reads it half-written.
fn replace(file: &std::path::Path, text: &str) {
    let tmp = file.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

fn metric(metrics: &Metrics, line_start: &str) -> Option<String> {
    metrics.encode().lines().find(|l| l.starts_with(line_start)).map(|l| l.rsplit(' ').next().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_policy_is_rejected_and_a_good_one_applied_without_restart() {
    let lab = Lab::new("reload");
    lab.repo
        .write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: reloaded}\ndata: {k: v}\n")
        .unwrap();
    lab.repo.commit("first").unwrap();
    // The two applications write the same object: reload-b is given its own path below.
    lab.repo
        .write("b/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: reloaded-b}\ndata: {k: v}\n")
        .unwrap();
    lab.repo.commit("second").unwrap();
    let file = lab.policy("policy.yaml", &policy(&lab.url, &["reload-a"]));
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let listen = serve::Listeners { public: free(), internal: free(), probes: free() };
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: file.clone(),
        cache_dir: lab.tmp.path().join("cache"),
        listen,
        lease: None,
        reload_every: Duration::from_millis(500),
        notify_url: None,
    };
    let running = tokio::spawn(serve::run(process, metrics.clone(), async move {
        let _ = stopped.await;
    }));
    // a serve that ended (an error at start) says why, not only that nothing got Synced
    let serving = wait_for("reload-a synced", Duration::from_secs(60), || async {
        if running.is_finished() { Some(false) } else { synced("reload-a").then_some(true) }
    })
    .await;
    assert!(serving, "plumb serve ended: {:?}", running.await);

    // A broken file: rejected, flagged, the running policy stays.
    replace(&file, "applications:\n  - {name: reload-a, repository: nowhere\n");
    wait_for("the rejection", Duration::from_secs(30), || async {
        metric(&metrics, "plumb_policy_reloads_total{result=\"rejected\"}").filter(|v| v == "1")
    })
    .await;
    assert_eq!(metric(&metrics, "plumb_policy_rejected ").as_deref(), Some("1"));
    // the application's status says so at its next pass (a pass asked for here)
    let client = control_plane().client().await.unwrap();
    assert!(plumb::leader::forward(&client, STATUS_NS, "reload-a").await.unwrap(), "the resource exists");
    let warning = wait_for("the rejection in the status", Duration::from_secs(30), || async {
        let text = control_plane()
            .kubectl(&[
                "-n",
                STATUS_NS,
                "get",
                "applications.plumb.dev",
                "reload-a",
                "-o",
                "jsonpath={.status.conditions}",
            ])
            .unwrap_or_default();
        let conditions: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        conditions.into_iter().find(|c| c["type"] == "PolicyWarning")
    })
    .await;
    let message = warning["message"].as_str().unwrap();
    assert!(message.contains("rejected") && message.contains("policy.yaml"), "{message}");
    let (code, body) =
        http_request(listen.internal, "GET", "/api/v1/applications", &[bearer(reader_token())], b"").await;
    assert!(code == 200 && body.contains("reload-a"), "{code} {body}");

    // A valid file with a second application: applied on the same address.
    let good = policy(&lab.url, &["reload-a", "reload-b"]).replace(
        "  - {name: reload-b, repository: r, revision: main, path: app,",
        "  - {name: reload-b, repository: r, revision: main, path: b,",
    );
    // Connections made while the server restarts wait to be accepted: none is refused.
    let restarting = tokio_util::sync::CancellationToken::new();
    let knocking = tokio::spawn({
        let restarting = restarting.clone();
        async move {
            let (mut made, mut refused) = (0u32, Vec::new());
            while !restarting.is_cancelled() {
                match tokio::net::TcpStream::connect(listen.public).await {
                    Ok(_) => made += 1,
                    Err(e) => refused.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            (made, refused)
        }
    });
    replace(&file, &good);
    wait_for("reload-b synced after the reload", Duration::from_secs(60), || async {
        synced("reload-b").then_some(())
    })
    .await;
    restarting.cancel();
    let (made, refused) = knocking.await.unwrap();
    assert!(made > 0 && refused.is_empty(), "{made} connections made, refused: {refused:?}");
    assert_eq!(metric(&metrics, "plumb_policy_reloads_total{result=\"applied\"}").as_deref(), Some("1"));
    assert_eq!(metric(&metrics, "plumb_policy_rejected ").as_deref(), Some("0"));
    let (code, body) =
        http_request(listen.internal, "GET", "/api/v1/applications", &[bearer(reader_token())], b"").await;
    assert!(code == 200 && body.contains("reload-b"), "{code} {body}");
    assert!(metrics.encode().contains("plumb_app_info{app=\"reload-b\""), "{}", metrics.encode());

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

/// A webhook secret given as `webhookSecretRef` is read through the API, and a rotated
/// value is in force within seconds, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_referenced_webhook_secret_is_read_and_its_rotation_applied() {
    let status_ns = "reload-secretref";
    let lab = Lab::new("secretref");
    lab.repo.write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: refd}\ndata: {k: v}\n").unwrap();
    let head = lab.repo.commit("first").unwrap();
    let kubectl = |args: &[&str]| control_plane().kubectl(args).unwrap();
    let _ = control_plane().kubectl(&["create", "namespace", status_ns]);
    kubectl(&["-n", status_ns, "create", "secret", "generic", "hook", "--from-literal=value=first-secret"]);
    let file = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: {status_ns}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretRef: {{name: hook, key: value}}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n  - {{name: refd, repository: r, revision: main, path: app, namespace: reload-refd, environment: e}}\n",
            lab.url
        ),
    );
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let listen = serve::Listeners { public: free(), internal: free(), probes: free() };
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: file,
        cache_dir: lab.tmp.path().join("cache"),
        listen,
        lease: None,
        reload_every: Duration::from_millis(500),
        notify_url: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve::run(process, Arc::new(Metrics::default()), async move {
        let _ = stopped.await;
    }));
    let deliver = |secret: &'static [u8], n: u32| {
        let (headers, body) = lab.gitea_push(&lab.url, &"0".repeat(40), &head, secret);
        let headers: Vec<_> = headers
            .into_iter()
            .map(|(k, v)| if k == "X-Gitea-Delivery" { (k, format!("{v}-{n}")) } else { (k, v) })
            .collect();
        async move { http_request(listen.public, "POST", "/api/webhook", &headers, &body).await.0 }
    };
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    wait_for("the webhook listener", Duration::from_secs(60), || async {
        tokio::net::TcpStream::connect(listen.public).await.ok().map(|_| ())
    })
    .await;
    wait_for("the server with the first secret", Duration::from_secs(60), || {
        let d = deliver(b"first-secret", next());
        async move { (d.await / 100 == 2).then_some(()) }
    })
    .await;
    assert_eq!(deliver(b"second-secret", next()).await, 401, "a delivery signed with another secret");

    kubectl(&[
        "-n",
        status_ns,
        "patch",
        "secret",
        "hook",
        "--type=merge",
        "-p",
        r#"{"stringData":{"value":"second-secret"}}"#,
    ]);
    wait_for("the rotated secret in force", Duration::from_secs(30), || {
        let d = deliver(b"second-secret", next());
        async move { (d.await / 100 == 2).then_some(()) }
    })
    .await;
    assert_eq!(deliver(b"first-secret", next()).await, 401, "the old secret no longer verifies");
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

/// A pass that fails (here: the API server refuses every write of the application's
/// resource, by a ValidatingAdmissionPolicy, so its status cannot be saved) is tried
/// again within seconds, backing off, not at the next poll an hour later: once the
/// refusal is lifted, the application is Synced. (Before, a failed pass waited for the
/// next trigger or poll: an error at start, say a resource definition still settling,
/// left an application unreconciled for its whole interval.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pass_is_tried_again_soon() {
    const NS: &str = "reload-retry-status";
    let lab = Lab::new("retry");
    lab.repo
        .write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: retried}\ndata: {k: v}\n")
        .unwrap();
    lab.repo.commit("first").unwrap();
    let text = policy(&lab.url, &["retried"])
        .replace(&format!("statusNamespace: {STATUS_NS}"), &format!("statusNamespace: {NS}"))
        .replace("namespace: reload-app", "namespace: reload-retry-app")
        .replace(", webhookSecretFile: webhook-secret", "");
    let file = lab.policy("policy.yaml", &text);
    support::kubectl_apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: plumb-lab-refuse-applications}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [plumb.dev]
        apiVersions: ['*']
        operations: [CREATE, UPDATE]
        resources: [applications, applications/status]
  validations:
    - expression: 'false'
      message: refused by the lab
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: plumb-lab-refuse-applications}}
spec:
  policyName: plumb-lab-refuse-applications
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {{kubernetes.io/metadata.name: {NS}}}
"
    ));
    // the refusal in force before plumb starts: a probe write is refused
    let crd = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/crd.yaml");
    support::kubectl(&["apply", "--server-side", "-f", crd.to_str().unwrap()]);
    let _ = control_plane().kubectl(&["create", "namespace", NS]);
    let probe =
        format!("apiVersion: plumb.dev/v1alpha1\nkind: Application\nmetadata: {{name: probe, namespace: {NS}}}\n");
    wait_for("the admission policy to refuse a write", Duration::from_secs(60), || async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.yaml");
        std::fs::write(&path, &probe).unwrap();
        let out = control_plane().kubectl(&["create", "-f", path.to_str().unwrap()]);
        match out {
            Ok(_) => {
                let _ = control_plane().kubectl(&["-n", NS, "delete", "applications.plumb.dev", "probe"]);
                None
            }
            Err(e) => e.to_string().contains("refused by the lab").then_some(()),
        }
    })
    .await;
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let process = serve::Process {
        kubeconfig: Some(control_plane().kubeconfig().to_path_buf()),
        context: None,
        policy: file,
        cache_dir: lab.tmp.path().join("cache"),
        listen: serve::Listeners { public: free(), internal: free(), probes: free() },
        lease: None,
        reload_every: Duration::from_millis(500),
        notify_url: None,
    };
    let running = tokio::spawn(serve::run(process, metrics.clone(), async move {
        let _ = stopped.await;
    }));
    let refused = |m: &Metrics| {
        let text = m.encode();
        text.lines()
            .filter(|l| l.starts_with("plumb_kube_requests_total{") && l.contains("code=\"403\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    wait_for("a write of the application's resource refused", Duration::from_secs(60), || async {
        (refused(&metrics) > 0.0).then_some(())
    })
    .await;
    // long enough for the passes the first one's own writes ask for (the watch's echo)
    // to have failed too: none is left to save the status once the refusal is lifted
    tokio::time::sleep(Duration::from_secs(8)).await;
    let status = |app: &str| {
        control_plane()
            .kubectl(&["-n", NS, "get", "applications.plumb.dev", app, "-o", "jsonpath={.status.sync}"])
            .unwrap_or_default()
    };
    assert_ne!(status("retried"), "Synced", "no status could be saved so far");
    support::kubectl(&["delete", "validatingadmissionpolicybinding", "plumb-lab-refuse-applications"]);
    support::kubectl(&["delete", "validatingadmissionpolicy", "plumb-lab-refuse-applications"]);
    wait_for("the application Synced by a pass tried again", Duration::from_secs(60), || async {
        (status("retried") == "Synced").then_some(())
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
