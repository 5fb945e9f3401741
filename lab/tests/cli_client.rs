//! The CLI as a client of the cluster and of the server: read commands with only a
//! kubeconfig (no policy file, `KUBECONFIG=a:b` merged, `--context`), `sync` and
//! `refresh` through a running server, a refused sync exiting non-zero, `diff` and
//! previews writing nothing, a local sync leaving a serving plumb's status alone, and
//! Git-controlled text shown escaped.
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::Path, time::Duration};

use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    status::{AppStatus, SyncResult},
};
use serde_json::Value;
use support::{App, Plumb, control_plane, kubectl, kubectl_apply, plumb_cli, wait_for};

const ESC_SUBJECT: &str = "deploy \x1b[31mred\x1b[0m \x1b]0;pwned\x07 done";

fn cm(ns: &str, name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{k: \"{value}\"}}\n")
}

/// Runs the `plumb` binary with `KUBECONFIG` set to `kubeconfig` (a `:`-list).
fn plumb_with(kubeconfig: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("PLUMB_LOG", "warn")
        .env_remove("PLUMB_NAMESPACE")
        .env_remove("PLUMB_CONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn read_commands_need_only_a_kubeconfig() {
    let (status_ns, ns) = ("plumb-cli-read", "cli-read");
    let app = App::new(
        status_ns,
        "cli-read",
        ns,
        "syncPolicy: {syncOptions: [CreateNamespace=true]}",
        &[("cm.yaml", &cm(ns, "settings", "1"))],
    )
    .await;
    app.commit(&[("cm.yaml", &cm(ns, "settings", "2"))], &[]);
    let c2 = app.lab.repo.commit(ESC_SUBJECT).unwrap();
    let r = app.pass(plumb::reconcile::Mode::Manual { prune: true, approve: false }).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status.conditions);
    // a hand change, so that `get` has a drift line naming its field manager
    kubectl(&[
        "-n",
        ns,
        "patch",
        "configmap",
        "settings",
        "--field-manager",
        "hand-edit",
        "-p",
        r#"{"data":{"k":"9"}}"#,
    ]);
    let r = app.pass(plumb::reconcile::Mode::Observe).await;
    assert_eq!(r.status.sync, SyncStatus::OutOfSync);

    // no policy file: only the namespace
    let (code, out, err) = plumb_cli(&["status", "-n", status_ns, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out);
    let row = rows.as_array().unwrap().iter().find(|s| s["app"] == "cli-read").unwrap_or_else(|| panic!("{out}"));
    assert_eq!((row["sync"].as_str(), row["health"].as_str()), (Some("OutOfSync"), Some("Healthy")), "{row}");
    assert_eq!(row["revision"], c2);
    let (code, table, err) = plumb_cli(&["status", "-n", status_ns]);
    assert_eq!(code, 0, "{err}");
    let line = table.lines().find(|l| l.starts_with("cli-read ")).unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(&c2[..7]) && line.contains("OutOfSync") && line.contains("Healthy"), "{table}");

    // Git-controlled text: escaped in tables, never raw; exact in JSON
    assert_eq!(row["subject"], ESC_SUBJECT, "JSON carries the subject exactly (escaped by JSON itself)");
    assert!(line.contains("deploy \\u{1b}[31mred"), "{table}");
    let (_, history, _) = plumb_cli(&["history", "cli-read", "-n", status_ns]);
    assert!(history.contains("\\u{1b}]0;pwned\\u{7} done"), "{history}");
    for text in [&table, &history, &out] {
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "raw escape in:\n{text}");
    }

    // history as YAML, get as JSON and table (drift line with its field manager)
    let (code, yaml, err) = plumb_cli(&["history", "cli-read", "-n", status_ns, "-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(yaml.contains(&c2) && yaml.contains("result: Succeeded"), "{yaml}");
    let (code, out, err) = plumb_cli(&["get", "cli-read", "-n", status_ns, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let got = json(&out);
    let res = got["resources"].as_array().unwrap();
    let drift =
        res.iter().find(|x| x["object"].as_str().unwrap().contains("settings")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(drift["sync"], "OutOfSync");
    assert!(drift["reason"].as_str().unwrap().contains("hand-edit"), "{drift}");
    let (code, text, _) = plumb_cli(&["get", "cli-read", "-n", status_ns]);
    assert_eq!(code, 0);
    assert!(text.contains("Sync:         OutOfSync") && text.contains("hand-edit"), "{text}");

    // a policy whose secret files live in the cluster only is enough for every reader
    let text = std::fs::read_to_string(&app.policy)
        .unwrap()
        .replace("webhookSecretFile: webhook-secret", "webhookSecretFile: /etc/plumb/secrets/absent");
    let remote = app.lab.policy("in-cluster.yaml", &text);
    let remote = remote.to_str().unwrap();
    for args in
        [&["status", "-c", remote][..], &["history", "cli-read", "-c", remote], &["get", "cli-read", "-c", remote]]
    {
        let (code, out, err) = plumb_cli(args);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    }

    // the shell completes application names from the resources (`plumb completion bash`)
    let complete = |words: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(["--", "plumb"])
            .args(words)
            .env("COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", words.len().to_string())
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .env_remove("PLUMB_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(complete(&["get", "-n", status_ns, "cli-r"]), ["cli-read"]);
    assert_eq!(complete(&["sync", "-n", status_ns, "zz"]), Vec::<String>::new());
    let (code, script, _) = plumb_cli(&["completion", "bash"]);
    assert_eq!(code, 0);
    assert!(script.contains("complete -o nospace") && script.contains("COMPLETE=\"bash\""), "{script}");

    // an application without a status object: exit 1, naming the namespace
    let (code, _, err) = plumb_cli(&["get", "nope", "-n", status_ns]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope") && err.contains(status_ns), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubeconfig_lists_merge_and_context_selects() {
    let lab_config = control_plane().kubeconfig().to_path_buf();
    let parsed = kube::config::Kubeconfig::read_from(&lab_config).unwrap();
    let lab_context = parsed.current_context.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nclusters:\n- {name: nowhere, cluster: {server: \"https://127.0.0.1:9\"}}\nusers:\n- {name: nobody, user: {}}\ncontexts:\n- {name: broken, context: {cluster: nowhere, user: nobody}}\ncurrent-context: broken\n",
    )
    .unwrap();
    let (lab, broken) = (lab_config.to_str().unwrap(), broken.to_str().unwrap());
    // a namespace with one application's status (an empty one exits 1)
    let admin = plumb::cluster::client(Some(&lab_config)).await.unwrap();
    let store = plumb::status::store::Store::new(admin, "plumb-cli-kubeconfig");
    store.ensure_namespace().await.unwrap();
    store.save(&plumb::status::AppStatus { app: "listed".into(), ..Default::default() }, &[]).await.unwrap();
    let ns = ["-n", "plumb-cli-kubeconfig"];
    // the first file to set current-context wins
    let (code, _, err) = plumb_with(&format!("{lab}:{broken}"), &[&["status"][..], &ns].concat());
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = plumb_with(&format!("{broken}:{lab}"), &[&["status"][..], &ns].concat());
    assert_eq!(code, 2, "the broken context is current: {err}");
    // --context picks the lab's context out of the merged files
    let (code, out, err) =
        plumb_with(&format!("{broken}:{lab}"), &[&["status", "--context", &lab_context][..], &ns].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("APP "), "{out}");
    // a listed file that does not exist is skipped, as kubectl skips it
    let (code, _, err) = plumb_with(&format!("/nonexistent/config:{lab}"), &[&["status"][..], &ns].concat());
    assert_eq!(code, 0, "{err}");
    let (code, _, err) =
        plumb_with(&format!("{broken}:{lab}"), &[&["status", "--context", "absent"][..], &ns].concat());
    assert_eq!(code, 2, "{err}");
    assert!(Path::new(&lab_config).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_asks_the_server_and_follows_it() {
    let (status_ns, ns) = ("plumb-cli-server", "cli-server");
    let env = "syncPolicy: {automated: true, prune: true, syncOptions: [CreateNamespace=true]}";
    let app = App::new(status_ns, "cli-server", ns, env, &[("cm.yaml", &cm(ns, "settings", "1"))]).await;
    let plumb = Plumb::start(&app.policy, &app.lab.tmp.path().join("server-cache")).await;
    wait_for("the first sync by the server", Duration::from_secs(60), || async {
        plumb.status("cli-server").await.filter(|s| s.sync == SyncStatus::Synced)
    })
    .await;

    // a new commit: the server polls every 180 s; `plumb sync` asks it now
    app.lab.repo.write("app/cm.yaml", &cm(ns, "settings", "2")).unwrap();
    let c2 = app.lab.repo.commit("settings: 2").unwrap();
    let (code, out, err) = plumb_cli(&["sync", "cli-server", "-n", status_ns, "--timeout", "90s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("plumb.dev/sync-requested on applications.plumb.dev/cli-server"), "{err}");
    assert!(out.contains(&format!("cli-server {} \"settings: 2\": Succeeded", &c2[..7])), "{out}");
    assert!(out.contains("cli-server: Synced / Healthy"), "{out}");
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.k}"]), "2");

    // refresh with -o json: the status, parsed
    let (code, out, err) = plumb_cli(&["refresh", "cli-server", "-n", status_ns, "-o", "json", "--timeout", "90s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let outcome = json(&out);
    assert_eq!(outcome["status"]["sync"], "Synced");
    assert_eq!(outcome["status"]["revision"], c2);

    // the server's Events about the application
    let (code, out, err) = plumb_cli(&["events", "cli-server", "-n", status_ns, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let events = json(&out);
    assert!(events.as_array().unwrap().iter().any(|e| e["reason"] == "SyncSucceeded"), "{out}");

    // an object in plumb's own namespace is refused, for a person's sync too: exit 1
    app.lab.repo.write("app/sneaky.yaml", &cm(status_ns, "sneaky", "x")).unwrap();
    let c3 = app.lab.repo.commit("write into plumb's namespace").unwrap();
    let (code, out, err) = plumb_cli(&["sync", "cli-server", "-n", status_ns, "-o", "json", "--timeout", "90s"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let outcome = json(&out);
    assert_eq!(outcome["sync"]["result"], "Refused", "{out}");
    assert_eq!(outcome["sync"]["revision"], c3);
    assert!(control_plane().kubectl(&["-n", status_ns, "get", "configmap", "sneaky"]).is_err());
    plumb.stop().await;

    // no server any more: the request is not answered (exit 3), and says so
    let (code, _, err) = plumb_cli(&["refresh", "cli-server", "-n", status_ns, "--timeout", "3s"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no plumb server answered"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_and_previews_write_nothing() {
    let (status_ns, ns) = ("plumb-cli-nowrite", "cli-nowrite");
    let env = "syncPolicy: {prune: true, syncOptions: [CreateNamespace=true]}";
    let app = App::new("plumb-cli-scratch", "cli-nowrite", ns, env, &[("cm.yaml", &cm(ns, "settings", "1"))]).await;
    let text = std::fs::read_to_string(&app.policy).unwrap().replace("plumb-cli-scratch", status_ns);
    let policy = app.lab.policy("nowrite.yaml", &text);
    let policy = policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["diff", "cli-nowrite", "-c", policy]);
    assert_eq!(code, 1, "missing objects differ\n{out}\n{err}");
    let (code, out, err) = plumb_cli(&["sync", "cli-nowrite", "-c", policy, "--dry-run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("create") && out.contains("settings"), "{out}");
    assert!(
        control_plane().kubectl(&["get", "namespace", status_ns]).is_err(),
        "diff and --dry-run created the status namespace"
    );

    // a path that does not exist: an error naming path and revision, not "nothing to do"
    let missing = app.lab.policy("missing.yaml", &text.replace("path: app", "path: no-such-dir"));
    let (code, out, err) = plumb_cli(&["sync", "cli-nowrite", "-c", missing.to_str().unwrap(), "--dry-run"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("no-such-dir") && out.contains("does not exist at"), "{out}");
    assert!(!out.contains("nothing to do"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_sync_leaves_a_serving_plumbs_status_alone() {
    let (status_ns, ns) = ("plumb-cli-local", "cli-local");
    let app = App::new(
        status_ns,
        "cli-local",
        ns,
        "syncPolicy: {syncOptions: [CreateNamespace=true]}",
        &[("cm.yaml", &cm(ns, "settings", "1"))],
    )
    .await;
    let policy = app.policy.to_str().unwrap();
    // without a server, a local sync records as the server would
    let (code, out, err) = plumb_cli(&["sync", "cli-local", "--local", "-c", policy, "--wait", "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("local: syncing cli-local from this machine"), "{err}");
    let (stored, history) = app.ctx.store.load("cli-local").await.unwrap();
    assert_eq!(stored.sync, SyncStatus::Synced);
    assert_eq!(history.len(), 1);

    // a server (started with `--lease-name plumb-b`) holds its Lease and has written its
    // judgement
    let renewed = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    kubectl_apply(&format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: plumb-b, namespace: {status_ns}, labels: {{plumb.dev/lease-of: plumb-b, plumb.dev/lease-role: shard}}}}\nspec: {{holderIdentity: plumb-0, leaseDurationSeconds: 3600, renewTime: \"{renewed}\"}}\n"
    ));
    let server_says = AppStatus { health: HealthStatus::Degraded, resources: vec![], ..stored.clone() };
    app.ctx.store.save(&server_says, &history).await.unwrap();
    app.commit(&[("cm.yaml", &cm(ns, "settings", "2"))], &[]);
    let (code, out, err) = plumb_cli(&["sync", "cli-local", "--local", "-c", policy, "--wait", "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("plumb server plumb-0 serves namespace") && err.contains("no status written"), "{err}");
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.k}"]), "2");
    let (after, after_history) = app.ctx.store.load("cli-local").await.unwrap();
    assert_eq!(
        (after.health, after.revision.as_str()),
        (HealthStatus::Degraded, stored.revision.as_str()),
        "the local sync replaced the server's status"
    );
    assert_eq!(after_history.len(), 1);
}

/// A local sync that records (no server serving) announces itself with the server's
/// Events; one that a serving plumb keeps out of the status announces nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_sync_announces_itself_only_when_it_records() {
    let (status_ns, ns) = ("plumb-cli-events", "cli-events");
    let app = App::new(
        status_ns,
        "cli-events",
        ns,
        "syncPolicy: {syncOptions: [CreateNamespace=true]}",
        &[("cm.yaml", &cm(ns, "settings", "1"))],
    )
    .await;
    let policy = app.policy.to_str().unwrap();
    let synced = |events: &[k8s_openapi::api::core::v1::Event]| {
        events.iter().filter(|e| e.reason.as_deref() == Some("SyncSucceeded")).count()
    };
    let (code, out, err) = plumb_cli(&["sync", "cli-events", "--local", "-c", policy]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = wait_for("the local sync's SyncSucceeded Event", Duration::from_secs(30), || async {
        let events = app.ctx.store.events("cli-events").await.unwrap();
        (synced(&events) == 1).then_some(events)
    })
    .await;
    let note = events.iter().find(|e| e.reason.as_deref() == Some("SyncSucceeded")).and_then(|e| e.message.clone());
    assert!(note.as_deref().is_some_and(|n| n.contains("Manual") && n.ends_with("Succeeded")), "{note:?}");

    // a server holds plumb's Lease: the local sync writes no status and no status Event
    let renewed = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    kubectl_apply(&format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: plumb, namespace: {status_ns}, labels: {{plumb.dev/lease-of: plumb, plumb.dev/lease-role: shard}}}}\nspec: {{holderIdentity: plumb-0, leaseDurationSeconds: 3600, renewTime: \"{renewed}\"}}\n"
    ));
    app.commit(&[("cm.yaml", &cm(ns, "settings", "2"))], &[]);
    let (code, out, err) = plumb_cli(&["sync", "cli-events", "--local", "-c", policy]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("no status written"), "{err}");
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.k}"]), "2");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(synced(&app.ctx.store.events("cli-events").await.unwrap()), 1, "the second sync announced itself");
}

/// `plumb diff | head`: a reader that stops early (here, standard output a pipe whose
/// reading end is closed before plumb writes) ends `diff`, `sync --dry-run` and
/// `status` quietly with exit code 0, not a panic's 101.
#[tokio::test(flavor = "multi_thread")]
async fn diff_into_a_reader_that_stops_early_ends_quietly() {
    let ns = "cli-pipe";
    let env = "syncPolicy: {syncOptions: [CreateNamespace=true]}";
    let app = App::new("plumb-cli-pipe", "cli-pipe", ns, env, &[("cm.yaml", &cm(ns, "settings", "1"))]).await;
    let policy = app.policy.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["diff", "cli-pipe", "-c", policy],
        &["sync", "cli-pipe", "-c", policy, "--dry-run"],
        &["status", "-c", policy],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(args)
            .env("KUBECONFIG", &control_plane().kubeconfig)
            .env("PLUMB_LOG", "warn")
            .stdout(writer)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "plumb {args:?}: {err}");
        assert!(!err.contains("panicked"), "plumb {args:?}: {err}");
    }
}

/// `plumb get APP --watch`, piped: the status as it is, then again when it changes;
/// nothing while it does not.
#[tokio::test(flavor = "multi_thread")]
async fn get_watch_prints_again_when_the_status_changes() {
    let ns = "plumb-cli-watch";
    let admin = plumb::cluster::client(Some(&control_plane().kubeconfig)).await.unwrap();
    let store = plumb::status::store::Store::new(admin, ns);
    store.ensure_namespace().await.unwrap();
    let healthy = plumb::status::AppStatus {
        app: "watched".into(),
        environment: "e".into(),
        health: plumb::health::HealthStatus::Healthy,
        ..Default::default()
    };
    store.save(&healthy, &[]).await.unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
        .args(["get", "watched", "-w", "-n", ns])
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .env("PLUMB_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next_health = |rx: &std::sync::mpsc::Receiver<String>| loop {
        let line = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("a line within 30 s");
        if line.starts_with("Health:") {
            return line;
        }
    };
    assert!(next_health(&rx).contains("Healthy"));
    // unchanged: the rest of that first version, nothing more within two reads
    std::thread::sleep(std::time::Duration::from_secs(5));
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(!rest.iter().any(|l| l.starts_with("Health:")), "printed again without a change: {rest:?}");
    let degraded = plumb::status::AppStatus { health: plumb::health::HealthStatus::Degraded, ..healthy };
    store.save(&degraded, &[]).await.unwrap();
    assert!(next_health(&rx).contains("Degraded"));
    child.kill().unwrap();
    let _ = child.wait();
}
