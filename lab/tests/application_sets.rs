//! An applicationSet with a `directories` generator under `plumb serve`, on a real
//! control plane: one application per directory of `apps/*` (an excluded one left
//! out); a directory pushed later becomes an application; a directory removed takes its
//! application out of the policy, whose objects stay (orphaned, reported); a commit that
//! empties the generator is held at the previous applications, across a restart too. `plumb diff` lists the
//! directories as well.
#![allow(clippy::unwrap_used)]

mod support;

use std::{sync::Arc, time::Duration};

use plumb::{metrics::Metrics, serve};
use support::{Lab, control_plane, kubectl, plumb_cli, wait_for};

const STATUS_NS: &str = "gen-status";
const NS: &str = "gen-apps";

fn policy(url: &str) -> String {
    format!(
        "settings: {{statusNamespace: {STATUS_NS}}}
repositories:
  - {{name: r, url: {url}, webhookSecretFile: webhook-secret}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
    reconcileInterval: 1h
applications:
  - {{name: gen-static, repository: r, revision: main, path: static, namespace: {NS}, environment: e}}
applicationSets:
  - name: apps
    generator:
      directories: {{repository: r, revision: main, include: ['apps/*'], exclude: [apps/legacy]}}
    template:
      name: 'gen-{{{{path.basename}}}}'
      repository: r
      revision: main
      path: '{{{{path}}}}'
      namespace: {NS}
      environment: e
"
    )
}

fn cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n")
}

fn resource(app: &str) -> Option<serde_json::Value> {
    let text = control_plane().kubectl(&["-n", STATUS_NS, "get", "applications.plumb.dev", app, "-o", "json"]).ok()?;
    serde_json::from_str(&text).ok()
}

async fn synced(app: &str) -> serde_json::Value {
    wait_for(&format!("{app} synced"), Duration::from_secs(120), || async {
        resource(app).filter(|r| r["status"]["sync"] == "Synced")
    })
    .await
}

fn metric(metrics: &Metrics, line_start: &str) -> Option<String> {
    metrics.encode().lines().find(|l| l.starts_with(line_start)).map(|l| l.rsplit(' ').next().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_generator_follows_the_repository_and_never_mass_deletes() {
    let lab = Lab::new("appsets");
    for d in ["web", "api", "legacy"] {
        lab.repo.write(&format!("apps/{d}/cm.yaml"), &cm(&format!("gen-{d}"))).unwrap();
    }
    lab.repo.write("static/cm.yaml", &cm("gen-static")).unwrap();
    lab.repo.write("apps/README.md", "not a directory\n").unwrap();
    lab.repo.commit("first").unwrap();
    let file = lab.policy("policy.yaml", &policy(&lab.url));
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
    let running = tokio::spawn(serve::run(process.clone(), metrics.clone(), async move {
        let _ = stopped.await;
    }));

    // one application per directory of apps/*, the excluded one left out
    let web = synced("gen-web").await;
    assert_eq!(web["spec"]["applicationSet"], "apps", "{web}");
    assert_eq!(web["spec"]["path"], "apps/web");
    synced("gen-api").await;
    synced("gen-static").await;
    assert!(resource("gen-legacy").is_none(), "apps/legacy is excluded");
    assert!(control_plane().kubectl(&["-n", NS, "get", "configmap", "gen-legacy"]).is_err());
    assert_eq!(metric(&metrics, "plumb_application_set_applications{set=\"apps\"}").as_deref(), Some("2"));
    // one-shot commands list the directories too (their own mirror)
    let (policy, cache) = (file.to_str().unwrap(), lab.tmp.path().join("cli-cache"));
    let (code, out, err) = plumb_cli(&["diff", "gen-web", "-c", policy, "--cache-dir", cache.to_str().unwrap()]);
    assert_eq!(code, 0, "gen-web is synced: no drift\n{out}{err}");
    let (code, out, err) = plumb_cli(&["diff", "gen-legacy", "-c", policy, "--cache-dir", cache.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("no application `gen-legacy`"), "{out}{err}");

    // a directory pushed becomes an application
    lab.repo.write("apps/db/cm.yaml", &cm("gen-db")).unwrap();
    lab.repo.commit("add db").unwrap();
    synced("gen-db").await;
    assert!(kubectl(&["-n", NS, "get", "configmap", "gen-db", "-o", "name"]).contains("gen-db"));

    // a directory removed: its application leaves the policy, its objects stay (orphan)
    lab.repo.remove("apps/api").unwrap();
    lab.repo.commit("remove api").unwrap();
    wait_for("gen-api's Application resource deleted", Duration::from_secs(120), || async {
        resource("gen-api").is_none().then_some(())
    })
    .await;
    let tracking = kubectl(&[
        "-n",
        NS,
        "get",
        "configmap",
        "gen-api",
        "-o",
        "jsonpath={.metadata.annotations.plumb\\.dev/tracking-id}",
    ]);
    assert!(tracking.starts_with("gen-api:"), "orphaned, its tracking marks left: {tracking}");
    let events =
        kubectl(&["-n", STATUS_NS, "get", "events", "--field-selector", "reason=Decommissioned", "-o", "json"]);
    assert!(events.contains("gen-api") && events.contains("deletionPolicy orphan"), "{events}");

    // a commit that empties the generator (apps/ moved away) is held: nothing leaves
    for d in ["web", "db", "legacy"] {
        lab.repo.remove(&format!("apps/{d}")).unwrap();
        lab.repo.write(&format!("services/{d}/cm.yaml"), &cm(&format!("gen-{d}"))).unwrap();
    }
    lab.repo.commit("move apps/ to services/").unwrap();
    wait_for("the emptied set held", Duration::from_secs(120), || async {
        (metric(&metrics, "plumb_application_set_held{set=\"apps\"}").as_deref() == Some("1")).then_some(())
    })
    .await;
    // each kept application says why
    let why = wait_for("gen-web's PolicyWarning", Duration::from_secs(60), || async {
        let r = resource("gen-web")?;
        let c = r["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PolicyWarning")?.clone();
        c["message"].as_str().map(String::from)
    })
    .await;
    assert!(why.contains("applicationSet `apps` generates no application now (it generated 2)"), "{why}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    for app in ["gen-web", "gen-db", "gen-static"] {
        assert!(resource(app).is_some(), "{app} kept while its set is held");
    }
    for cm in ["gen-web", "gen-db", "gen-static", "gen-api"] {
        assert!(control_plane().kubectl(&["-n", NS, "get", "configmap", cm]).is_ok(), "{cm} stays");
    }
    assert_eq!(metric(&metrics, "plumb_application_set_applications{set=\"apps\"}").as_deref(), Some("2"));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    // a restart while held: the applications are rebuilt from their resources, still held
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve::run(
        serve::Process { listen: serve::Listeners { public: free(), internal: free(), probes: free() }, ..process },
        metrics.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    wait_for("the set held after a restart", Duration::from_secs(60), || async {
        (metric(&metrics, "plumb_application_set_held{set=\"apps\"}").as_deref() == Some("1")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    for app in ["gen-web", "gen-db"] {
        assert!(resource(app).is_some(), "{app} kept across the restart");
    }
    assert_eq!(metric(&metrics, "plumb_application_set_applications{set=\"apps\"}").as_deref(), Some("2"));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
