//! Nothing secret leaves (issue 12), on the real control plane: the shared case k8s-04
//! (a Secret's password changed by hand, reverted by selfHeal) and a Secret the API
//! server refuses. Every output plumb writes — `plumb diff` text and JSON, `plumb sync`,
//! the status ConfigMaps, `GET /api/v1/applications`, `/metrics`, the Events, and the
//! log of a running `plumb serve` — is searched for each value, plain and base64.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::PathBuf,
    process::{Child, Stdio},
    time::Duration,
};

use support::*;

const NS: &str = "case-k04";
const STATUS_NS: &str = "plumb-k04";

/// Each value of k8s-04, plain and base64 (its `username`, `web`, is a common word that
/// appears in names: it cannot be searched for), and the refused Secret's values.
const VALUES: [&str; 10] = [
    "aHVudGVyLXR3bw==",
    "hunter-two",
    "Y2hhbmdlbWUtMQ==",
    "changeme-1",
    "ZGIuZ2l0b3BzLWxhYi5zdmM=",
    "db.gitops-lab.svc",
    "tok-3x4mpl3-n0t-b4se64",
    "stringdata-token-value",
    // a ConfigMap field the environment marks sensitive (`sensitiveFields`)
    "cm-key-original-7f3a",
    "cm-key-handmade-9b2e",
];

/// A ConfigMap whose `data.apiKey` the environment marks sensitive.
const SETTINGS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-settings, namespace: case-k04}\n\
    data: {apiKey: cm-key-original-7f3a, mode: plain}\n";

/// A Secret the API server refuses: its `data` value is not base64.
const REFUSED: &str = "apiVersion: v1\nkind: Secret\nmetadata: {name: api-token, namespace: case-k04}\n\
    data: {token: tok-3x4mpl3-n0t-b4se64}\nstringData: {other: stringdata-token-value}\n";

fn case_file(case: &str, file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases").join(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Panics naming the output and the value when `text` holds any value of [`VALUES`].
fn assert_clean(output: &str, text: &str) {
    for v in VALUES {
        if let Some(at) = text.find(v) {
            let from = text[..at].char_indices().rev().nth(200).map_or(0, |(i, _)| i);
            panic!("{output} holds {v}: …{}…", &text[from..(at + v.len() + 100).min(text.len())]);
        }
    }
}

/// `plumb serve`, killed when dropped; its stdout and stderr go to `log`.
struct Serve {
    child: Child,
    log: PathBuf,
    /// The internal listener (status API, metrics).
    internal: std::net::SocketAddr,
}

impl Serve {
    fn start(policy: &std::path::Path, cache: &std::path::Path, log: PathBuf) -> Serve {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (addr, internal, probes) = (free(), free(), free());
        let out = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(["serve", "--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()])
            .args(["--listen", &addr.to_string(), "--internal-listen", &internal.to_string()])
            .args(["--probe-listen", &probes.to_string()])
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .env("PLUMB_LOG", "plumb=debug,info")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap();
        Serve { child, log, internal }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn password() -> String {
    kubectl(&["-n", NS, "get", "secret", "web-db", "-o", "jsonpath={.data.password}"])
}

/// k8s-04: the drift of a Secret is detected, shown by path, reverted by selfHeal, and
/// no value appears in any output; a Secret the API server refuses fails its sync with an
/// error that quotes no value either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_04_secret_values_never_leave() {
    let lab = Lab::new("k8s-04");
    let desired = case_file("k8s-04", "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {NS}"));
    assert!(desired.contains("Y2hhbmdlbWUtMQ==") && desired.contains("stringData"), "the case changed");
    lab.repo.write("app/secret.yaml", &desired).unwrap();
    lab.repo.write("refused/secret.yaml", REFUSED).unwrap();
    lab.repo.write("app/settings.yaml", SETTINGS).unwrap();
    lab.repo.commit("k8s-04 secrets").unwrap();
    let policy_with = |file: &str, sync_policy: &str| {
        lab.policy(
            file,
            &format!(
                "settings: {{statusNamespace: {STATUS_NS}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\n\
                 environments:\n  - name: e\n    syncPolicy: {sync_policy}\n\
                 \x20   sensitiveFields: [{{group: \"\", kind: ConfigMap, jsonPointers: [/data/apiKey]}}]\n\
                 applications:\n  - {{name: web, repository: r, revision: main, path: app, namespace: {NS}, environment: e}}\n\
                 \x20 - {{name: refused, repository: r, revision: main, path: refused, namespace: {NS}, environment: e}}\n",
                lab.url
            ),
        )
    };
    let policy = policy_with("policy.yaml", "{automated: true, prune: true, selfHeal: true}");
    let manual = policy_with("manual.yaml", "{automated: false}");
    kubectl(&["create", "namespace", NS]);
    kubectl(&["create", "namespace", STATUS_NS]);
    let cache = lab.tmp.path().join("cache");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
        plumb_cli(&all)
    };
    let mut outputs: Vec<(String, String)> = Vec::new();

    let (code, out, err) = cli(&["sync", "web", "--local"]);
    assert_eq!(code, 0, "{out}\n{err}");
    outputs.push(("plumb sync web".into(), format!("{out}\n{err}")));
    assert_eq!(password(), "Y2hhbmdlbWUtMQ==");
    kubectl(&[
        "-n",
        NS,
        "patch",
        "secret",
        "web-db",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"password":"aHVudGVyLXR3bw=="}}"#,
    ]);
    kubectl(&["-n", NS, "patch", "configmap", "web-settings", "-p", r#"{"data":{"apiKey":"cm-key-handmade-9b2e"}}"#]);

    // 1. plumb diff: the object and the path are shown, no value; before any plumb
    // serve made the installation's mask key, no mark either
    let (code, out, err) = cli(&["diff", "web"]);
    assert_eq!(code, 1, "differences: exit 1\n{out}\n{err}");
    assert!(
        out.contains("# Secret/case-k04/web-db (differs at /data/password (sensitive)→(sensitive) (set by"),
        "{out}"
    );
    outputs.push(("plumb diff web, no mask key".into(), format!("{out}\n{err}")));
    // the key a plumb serve creates at start (here, made first): the CLI marks with it
    kubectl(&[
        "-n",
        STATUS_NS,
        "create",
        "secret",
        "generic",
        "plumb-mask-key",
        "--from-literal=key=k8s-04-installation-key-32-bytes",
    ]);
    let (code, out, err) = cli(&["diff", "web"]);
    assert_eq!(code, 1, "differences: exit 1\n{out}\n{err}");
    assert!(out.contains("# Secret/case-k04/web-db (differs at /data/password (sensitive, hmac:"), "{out}");
    let cli_marks = out.lines().find(|l| l.starts_with("# Secret/case-k04/web-db")).unwrap().to_string();
    assert!(
        out.contains("# ConfigMap/case-k04/web-settings (differs at /data/apiKey (sensitive, hmac:"),
        "a field the environment marks sensitive: {out}"
    );
    assert!(out.contains("  mode: plain"), "other fields of it stay readable: {out}");
    assert!(out.contains("-  password: (sensitive, hmac:") && out.contains("+  password: (sensitive, hmac:"), "{out}");
    outputs.push(("plumb diff web".into(), format!("{out}\n{err}")));
    // 2. plumb diff -o json: objects and differences
    let (code, out, err) = cli(&["diff", "web", "-o", "json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let diffs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let secret = diffs.as_array().unwrap().iter().find(|d| d["object"] == "Secret/case-k04/web-db").unwrap();
    assert_eq!(secret["differences"][0]["path"], "/data/password", "{secret:#}");
    assert_eq!(secret["live"]["data"].as_object().unwrap().len(), 3, "keys stay: {secret:#}");
    outputs.push(("plumb diff web -o json".into(), format!("{out}\n{err}")));
    // 3a. a pass that only records (no automated sync): the status says OutOfSync, names
    // the path, and the ConfigMap holds no value
    let ctx = context_for(&manual, &lab.tmp.path().join("ctx-cache"), false).await;
    let r = ctx.run_pass("web", plumb::reconcile::Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.sync, plumb::compare::SyncStatus::OutOfSync);
    let reason = &r.status.resources.iter().find(|x| x.object == "Secret/case-k04/web-db").unwrap().reason;
    assert!(reason.starts_with("differs at /data/password (sensitive"), "{reason}");
    let statuses = kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "-o", "json"]);
    assert!(statuses.contains("differs at /data/password"), "{statuses}");
    outputs.push(("Application resources, OutOfSync".into(), statuses));
    // 4. the refused Secret: the API server's error quotes no value through plumb
    for args in [&["diff", "refused"][..], &["sync", "refused", "--local"]] {
        let (code, out, err) = cli(args);
        assert_ne!(code, 0, "the API server refuses a data value that is not base64\n{out}\n{err}");
        eprintln!("plumb {args:?} → {code}\n{out}\n{err}");
        outputs.push((format!("plumb {args:?}"), format!("{out}\n{err}")));
    }

    // 3. plumb serve reverts the drift (selfHeal) and records it
    let serve = Serve::start(&policy, &lab.tmp.path().join("serve-cache"), lab.tmp.path().join("serve.log"));
    wait_for("selfHeal reverts the password", Duration::from_secs(90), || async {
        (password() == "Y2hhbmdlbWUtMQ==").then_some(())
    })
    .await;
    let events = wait_for("the SelfHealed Event on the Secret", Duration::from_secs(30), || async {
        let ev = kubectl(&["-n", NS, "get", "events", "--field-selector", "involvedObject.name=web-db", "-o", "yaml"]);
        ev.contains("SelfHealed").then_some(ev)
    })
    .await;
    assert!(events.contains("reverted /data/password (sensitive, hmac:"), "{events}");
    let marks = cli_marks.split("/data/password ").nth(1).unwrap().split(" (set by").next().unwrap();
    assert!(events.contains(marks), "the server marks with the key the CLI read: {marks}\n{events}");
    let settings = || kubectl(&["-n", NS, "get", "configmap", "web-settings", "-o", "jsonpath={.data.apiKey}"]);
    wait_for("selfHeal reverts the marked field", Duration::from_secs(60), || async {
        (settings() == "cm-key-original-7f3a").then_some(())
    })
    .await;
    let api = wait_for("the API shows web Synced", Duration::from_secs(60), || async {
        let (code, body) =
            http_request(serve.internal, "GET", "/api/v1/applications", &[bearer(reader_token())], b"").await;
        let apps: serde_json::Value = serde_json::from_str(&body).ok()?;
        let synced = apps.as_array()?.iter().any(|a| a["app"] == "web" && a["sync"] == "Synced");
        (code == 200 && synced && body.contains("\"refused\"")).then_some(body)
    })
    .await;
    let log = wait_for("the revert in plumb's log", Duration::from_secs(30), || async {
        let log = serve.log();
        log.contains("reverted /data/password").then_some(log)
    })
    .await;
    let (_, metrics) = http_request(serve.internal, "GET", "/metrics", &[bearer(reader_token())], b"").await;
    let statuses = kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", "-o", "json"]);
    assert!(statuses.contains("api-token"), "the refused Secret's status is there:\n{statuses}");
    let all_events = kubectl(&["-n", NS, "get", "events", "-o", "yaml"]);
    outputs.extend([
        ("Events".to_string(), all_events),
        ("GET /api/v1/applications".into(), api),
        ("plumb serve log".into(), log),
        ("/metrics".into(), metrics),
        ("status ConfigMaps".into(), statuses),
    ]);
    drop(serve);
    for (what, text) in &outputs {
        assert_clean(what, text);
    }
}

/// The installation's mask key: `plumb serve` creates it once in its namespace (32
/// random bytes) and reads the same one afterwards; the CLI only reads it (no Secret:
/// no key, marks are `(sensitive)`); a key too short is refused naming the Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plumb_makes_its_mask_key_once_and_the_cli_only_reads_it() {
    use plumb::{compare::sensitive::mask, serve::mask_key};
    let ns = "plumb-mask-key";
    kubectl(&["create", "namespace", ns]);
    let client = plumb::cluster::client(Some(&control_plane().kubeconfig)).await.unwrap();
    let value = serde_json::json!("hunter2");
    let cli = mask_key(&client, ns, false).await.unwrap();
    assert_eq!(mask(&value, false, &cli), "(sensitive)", "no key, no mark");
    assert!(kubectl(&["-n", ns, "get", "secrets", "-o", "name"]).is_empty(), "the CLI creates nothing");

    let made = mask_key(&client, ns, true).await.unwrap();
    let stored = kubectl(&["-n", ns, "get", "secret", "plumb-mask-key", "-o", "jsonpath={.data.key}"]);
    assert_eq!(stored.len(), 44, "32 bytes, base64: {stored}");
    let mark = mask(&value, false, &made);
    assert!(mark.starts_with("(sensitive, hmac:"), "{mark}");
    for again in [mask_key(&client, ns, true).await.unwrap(), mask_key(&client, ns, false).await.unwrap()] {
        assert_eq!(mask(&value, false, &again), mark, "the same key, read back");
    }

    kubectl(&["-n", ns, "delete", "secret", "plumb-mask-key"]);
    kubectl(&["-n", ns, "create", "secret", "generic", "plumb-mask-key", "--from-literal=key=short"]);
    let err = format!("{:#}", mask_key(&client, ns, true).await.unwrap_err());
    assert!(err.contains("Secret plumb-mask-key/plumb-mask-key: data.key holds 5 bytes"), "{err}");
}
