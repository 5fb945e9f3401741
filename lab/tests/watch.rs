//! What plumb's watches see and what they start, against the real control plane, with
//! `plumb serve`'s actors running in this process: labelled objects outside an
//! application's destinations are neither cached nor a reason for a pass, and a child
//! of a synced workload turning unhealthy shows in the application's health without
//! any other trigger (the reconcile interval is an hour: no poll finds it).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{compare::SyncStatus, health::HealthStatus};
use support::*;

/// A policy of one application `app` reading `app/` into `ns`, automated, selfHeal off,
/// reconcile interval one hour, statuses in `plumb-watch`.
fn policy(lab: &Lab, app: &str, ns: &str) -> std::path::PathBuf {
    lab.app_policy(
        "plumb-watch",
        app,
        ns,
        "    syncPolicy: {automated: true, prune: true, selfHeal: false, syncOptions: [CreateNamespace=true]}\n    reconcileInterval: 1h",
    )
}

/// Waits until `app` has had no pass for 6 s (longer than the settle look after a
/// sync), and returns its pass count then.
async fn quiet_passes(plumb: &Plumb, app: &str) -> u64 {
    let mut last = plumb.passes(app).await;
    loop {
        tokio::time::sleep(Duration::from_secs(6)).await;
        let now = plumb.passes(app).await;
        if now == last {
            return now;
        }
        last = now;
    }
}

/// A ConfigMap labelled with an application's name, in a namespace that is not among
/// its destinations, is changed 30 times: no pass starts, and the watch cache holds
/// only the application's own object. A hand edit of that object still starts exactly
/// one pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_objects_outside_the_destinations_start_no_pass_and_are_not_cached() {
    let (app, ns, outside) = ("watch-bounds", "watch-bounds", "watch-bounds-other");
    let lab = Lab::new(app);
    lab.repo
        .write(
            "app/cm.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: own, namespace: {ns}}}\ndata: {{k: v}}\n"),
        )
        .unwrap();
    lab.repo.commit("one ConfigMap").unwrap();
    let plumb = Plumb::start(&policy(&lab, app, ns), &lab.tmp.path().join("cache")).await;
    wait_for("the first sync", Duration::from_secs(60), || async {
        plumb.status(app).await.filter(|s| s.sync == SyncStatus::Synced).map(|_| ())
    })
    .await;
    kubectl(&["create", "namespace", outside]);
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: stray, namespace: {outside}, labels: {{plumb.dev/app: {app}}}}}\ndata: {{k: v}}\n"
    ));
    let before = quiet_passes(&plumb, app).await;
    for i in 0..30 {
        kubectl(&["-n", outside, "label", "configmap", "stray", &format!("flip={i}"), "--overwrite"]);
    }
    // the application's own object, edited by hand: its watch still starts a pass
    kubectl(&["-n", ns, "patch", "configmap", "own", "--type=merge", "-p", r#"{"data":{"k":"by-hand"}}"#]);
    wait_for("the hand edit seen", Duration::from_secs(30), || async {
        plumb.status(app).await.filter(|s| s.sync == SyncStatus::OutOfSync).map(|_| ())
    })
    .await;
    let after = quiet_passes(&plumb, app).await;
    println!("passes: {before} before the 30 label changes, {after} after them and the hand edit");
    assert_eq!(after - before, 1, "only the hand edit of the application's own object started a pass");
    assert_eq!(plumb.ctx.cached_objects(), 1, "the cache holds the application's ConfigMap only");
    let watches = plumb.ctx.watches();
    assert!(watches.contains(&format!("ConfigMap (v1), labelled, in {ns}")), "{watches:?}");
    assert!(!watches.iter().any(|w| w.contains(outside)), "{watches:?}");
    plumb.stop().await;
}

/// A Deployment plumb synced runs Healthy (kwok runs its pod); its pod then reports
/// CrashLoopBackOff, as the kubelet would. With no push, no poll (one hour) and no
/// change to the Deployment's spec, the application turns Degraded, naming the pod,
/// and stays Synced: the pod's change asked for a health look, which never syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_pod_turns_its_application_degraded_without_another_trigger() {
    let (app, ns) = ("watch-health", "watch-health");
    let lab = Lab::new(app);
    lab.repo.write("app/deploy.yaml", &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"nginx:1.27.3\"}}]}}\n")).unwrap();
    lab.repo.commit("web").unwrap();
    let plumb = Plumb::start(&policy(&lab, app, ns), &lab.tmp.path().join("cache")).await;
    let healthy = wait_for("Synced and Healthy (kwok runs the pod)", Duration::from_secs(90), || async {
        plumb.status(app).await.filter(|s| s.sync == SyncStatus::Synced && s.health == HealthStatus::Healthy)
    })
    .await;
    let synced_at = healthy.last_sync.as_ref().map(|s| s.started_at.clone());
    quiet_passes(&plumb, app).await;
    let pod = kubectl(&["-n", ns, "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}"]);
    kubectl(&[
        "-n",
        ns,
        "patch",
        "pod",
        &pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","containerStatuses":[{"name":"web","image":"nginx:1.27.3","imageID":"","ready":false,"restartCount":4,"started":false,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 40s restarting failed container"}},"lastState":{}}]}}"#,
    ]);
    let st = wait_for("Degraded from the pod's change alone", Duration::from_secs(30), || async {
        plumb.status(app).await.filter(|s| s.health == HealthStatus::Degraded)
    })
    .await;
    assert_eq!(st.sync, SyncStatus::Synced, "{:?}", st.resources);
    let deployment = st.resources.iter().find(|r| r.object.starts_with("Deployment")).unwrap();
    assert!(
        deployment.health_message.contains(&pod) && deployment.health_message.contains("CrashLoopBackOff"),
        "{deployment:?}"
    );
    assert_eq!(st.last_sync.as_ref().map(|s| s.started_at.clone()), synced_at, "a health look never syncs");
    plumb.stop().await;
}

/// `plumb serve`'s client buffers at most `READ_BUFFER_BYTES` (64 KiB) per connection
/// for reading: a LIST whose body is several times that, an object larger than it, and
/// a watch event carrying such an object all arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_client_reads_responses_and_events_larger_than_its_read_buffer() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{
        Api,
        api::{PostParams, WatchParams},
        core::WatchEvent,
    };

    let limit = plumb::kube_metrics::READ_BUFFER_BYTES;
    let config = plumb::cluster::config(Some(&control_plane().kubeconfig)).await.unwrap();
    let client = plumb::kube_metrics::client(config, std::sync::Arc::new(plumb::metrics::Metrics::default())).unwrap();
    let ns = "watch-read-buffer";
    kubectl(&["create", "namespace", ns]);
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let cm = |name: &str, bytes: usize| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "data": {"value": "x".repeat(bytes)},
        }))
        .unwrap()
    };
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("small-{i:02}"), limit / 8)).await.unwrap();
    }
    api.create(&PostParams::default(), &cm("large", 3 * limit)).await.unwrap();
    let listed = api.list(&Default::default()).await.unwrap();
    // and the namespace's kube-root-ca.crt
    let ours = listed.items.iter().filter(|c| c.metadata.name.as_deref().is_some_and(|n| n != "kube-root-ca.crt"));
    assert_eq!(ours.count(), 21, "a LIST of more than {} KiB", (20 * limit / 8 + 3 * limit) / 1024);
    let large = listed.items.iter().find(|c| c.metadata.name.as_deref() == Some("large")).unwrap();
    assert_eq!(large.data.as_ref().unwrap()["value"].len(), 3 * limit);

    let version = listed.metadata.resource_version.clone().unwrap();
    let mut events = api.watch(&WatchParams::default(), &version).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("larger", 5 * limit)).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.next().await {
                Some(Ok(WatchEvent::Added(c))) => return c,
                None => panic!("the watch ended"),
                Some(_) => {}
            }
        }
    })
    .await
    .expect("the watch event of a 320 KiB ConfigMap");
    assert_eq!(seen.metadata.name.as_deref(), Some("larger"));
    assert_eq!(seen.data.unwrap()["value"].len(), 5 * limit);
    kubectl(&["delete", "namespace", ns, "--wait=false"]);
}
