//! Sync hooks on the real control plane: PreSync, Sync, PostSync and SyncFail Jobs
//! (`plumb.dev/hook`), a Helm chart's hooks, delete policies, the boundary.
//!
//! The lab's kwok completes a Job's pods through its stock pod stages (a pod owned by a
//! Job goes Running, then Succeeded), so the Job controller marks the Job Complete. A
//! failing Job: its pod is bound (`nodeName`) to a node no kubelet (nor kwok) runs, so
//! it stays Pending, and `activeDeadlineSeconds: 1` makes the Job controller mark the
//! Job Failed (`DeadlineExceeded`) a second later.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{plan::hooks::run_name, reconcile::Mode, status::SyncResult};
use support::*;

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

/// A Deployment `web` of `image`.
fn deploy(ns: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: web, image: \"{image}\"}}]\n"
    )
}

/// A Job `name` annotated `annotations` (YAML flow map entries) running `image`; a
/// failing one when `fail` (see the module docs).
fn job(ns: &str, name: &str, annotations: &str, image: &str, fail: bool) -> String {
    let failing = if fail { "  activeDeadlineSeconds: 1\n  backoffLimit: 0\n" } else { "" };
    let node = if fail { "      nodeName: no-kubelet-here\n" } else { "" };
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations: {{{annotations}}}\nspec:\n{failing}  template:\n    spec:\n      restartPolicy: Never\n{node}      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: m, image: \"{image}\"}}]\n"
    )
}

fn image_of(ns: &str) -> String {
    kubectl(&["-n", ns, "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
}

/// The creationTimestamp of the ReplicaSet of `web` running `image` (empty when none).
fn replica_set_created(ns: &str, image: &str) -> String {
    let out = kubectl(&[
        "-n",
        ns,
        "get",
        "rs",
        "-o",
        "jsonpath={range .items[*]}{.spec.template.spec.containers[0].image} {.metadata.creationTimestamp}{\"\\n\"}{end}",
    ]);
    out.lines().find_map(|l| l.strip_prefix(&format!("{image} "))).unwrap_or_default().to_string()
}

fn job_field(ns: &str, name: &str, path: &str) -> String {
    kubectl(&["-n", ns, "get", "job", name, "--ignore-not-found", "-o", &format!("jsonpath={path}")])
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    !kubectl(&["-n", ns, "get", kind, name, "--ignore-not-found", "-o", "name"]).is_empty()
}

fn ts(t: &str) -> jiff::Timestamp {
    t.parse().unwrap_or_else(|e| panic!("`{t}`: {e}"))
}

async fn app(name: &str, ns: &str, files: &[(&str, &str)]) -> App {
    App::new("plumb-hooks", name, ns, AUTO, files).await
}

/// Policy passes until the sync is no longer Running; its record.
async fn finish(a: &App) -> plumb::status::SyncRecord {
    let r = a.settle().await;
    r.status.last_sync.clone().unwrap()
}

/// Required (1): a PreSync migration Job runs, and completes, before the new
/// ReplicaSet exists: while it runs the sync is Running naming it and the Deployment
/// keeps its image; its completionTime is not after the new ReplicaSet's creation.
/// The run is neither an object of the status nor pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presync_migration_completes_before_the_new_replica_set_exists() {
    let ns = "hooks-pre";
    let a = app("hooks-pre", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1"))]).await;
    assert_eq!(finish(&a).await.result, SyncResult::Succeeded);
    a.commit(
        &[
            ("web.yaml", &deploy(ns, "registry.example/web:2")),
            ("migrate.yaml", &job(ns, "migrate", "plumb.dev/hook: PreSync", "registry.example/migrate:2", false)),
        ],
        &[],
    );
    let r = a.pass(Mode::Policy).await;
    let rec = r.sync.unwrap();
    let run = run_name("migrate", &rec.revision);
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    assert!(rec.message.contains(&format!("PreSync hook(s): Job.batch/{ns}/{run}")), "{}", rec.message);
    assert_eq!(image_of(ns), "registry.example/web:1", "nothing else is applied while PreSync runs");
    assert!(exists(ns, "job", &run));
    assert_eq!(replica_set_created(ns, "registry.example/web:2"), "");

    let rec = finish(&a).await;
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert_eq!(image_of(ns), "registry.example/web:2");
    let completed = job_field(ns, &run, "{.status.completionTime}");
    let rs = wait_for("the new ReplicaSet", Duration::from_secs(30), || async {
        Some(replica_set_created(ns, "registry.example/web:2")).filter(|t| !t.is_empty())
    })
    .await;
    assert!(ts(&completed) <= ts(&rs), "the migration completed at {completed}, the new ReplicaSet exists since {rs}");
    let hook = rec.hooks.iter().find(|h| h.phase == "PreSync").unwrap();
    assert_eq!((hook.object.as_str(), hook.result.as_str()), (format!("Job.batch/{ns}/{run}").as_str(), "Succeeded"));
    assert!(!hook.started_at.is_empty() && !hook.finished_at.is_empty(), "{hook:?}");
    // never an object of the application: not in its status, not an orphan, not pruned
    let r = a.pass(Mode::Policy).await;
    assert!(r.status.resources.iter().all(|o| !o.object.starts_with("Job")), "{:?}", r.status.resources);
    assert!(r.sync.is_none(), "nothing to sync: {:?}", r.sync);
    assert!(exists(ns, "job", &run), "the run is kept (BeforeHookCreation deletes it before the next one)");
    // `plumb history` prints the hook line
    let (code, out, err) = plumb_cli(&["history", "hooks-pre", "--config", a.policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("hook PreSync Job.batch/{ns}/{run} Succeeded")), "{out}");
    let (code, out, err) = plumb_cli(&["history", "hooks-pre", "--config", a.policy.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let history: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hooks = history.as_array().and_then(|h| h.first()).and_then(|r| r.get("hooks")).unwrap();
    assert_eq!(hooks[0]["phase"], "PreSync", "{hooks}");
    assert_eq!(hooks[0]["object"], format!("Job.batch/{ns}/{run}"), "{hooks}");
    assert_eq!(hooks[0]["result"], "Succeeded", "{hooks}");
    assert!(hooks[0]["durationSeconds"].is_u64() && hooks[0]["startedAt"].is_string(), "{hooks}");
}

/// A PreSync hook still running after its `plumb.dev/hook-timeout` fails the sync as
/// TimedOut, and nothing else is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presync_hook_past_its_timeout_fails_the_sync() {
    let ns = "hooks-slow";
    // its pod is bound to a node nothing runs (module docs) and no deadline ends it
    let slow =
        job(ns, "migrate", "plumb.dev/hook: PreSync, plumb.dev/hook-timeout: \"2\"", "registry.example/m:1", true)
            .replace("  activeDeadlineSeconds: 1\n", "");
    let a =
        app("hooks-slow", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("migrate.yaml", &slow)]).await;
    let rec = wait_for("the hook to time out", Duration::from_secs(60), || async {
        let rec = a.pass(Mode::Policy).await.sync?;
        if rec.result == SyncResult::Running {
            tokio::time::sleep(Duration::from_millis(500)).await;
            return None;
        }
        Some(rec)
    })
    .await;
    let run = run_name("migrate", &rec.revision);
    assert_eq!(rec.result, SyncResult::Failed, "{}", rec.message);
    assert!(rec.message.contains(&format!("PreSync hook Job.batch/{ns}/{run} timed out")), "{}", rec.message);
    assert!(rec.hooks.iter().any(|h| h.result == "TimedOut"), "{:?}", rec.hooks);
    assert!(!exists(ns, "deploy", "web"), "nothing else is applied");
}

/// A person's sync while a PreSync hook runs goes on with that sync: the run is not
/// deleted and created again (a half-done migration is never interrupted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_sync_while_a_hook_runs_goes_on_with_it() {
    let ns = "hooks-manual";
    let slow =
        job(ns, "migrate", "plumb.dev/hook: PreSync, plumb.dev/hook-timeout: \"120\"", "registry.example/m:1", true)
            .replace("  activeDeadlineSeconds: 1\n", "");
    let a =
        app("hooks-manual", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("migrate.yaml", &slow)]).await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    let run = run_name("migrate", &rec.revision);
    let uid = job_field(ns, &run, "{.metadata.uid}");
    assert!(!uid.is_empty(), "the run exists");
    let manual = a.pass(Mode::Manual { prune: false, approve: false }).await.sync.unwrap();
    assert_eq!(manual.result, SyncResult::Running, "{}", manual.message);
    assert_eq!(manual.started_at, rec.started_at, "the same sync goes on");
    assert_eq!(job_field(ns, &run, "{.metadata.uid}"), uid, "the run was re-created");
    assert!(!exists(ns, "deploy", "web"), "nothing else is applied while the hook runs");
}

/// Required (2): a failing PreSync Job stops the sync: the Deployment keeps its image,
/// the sync is Failed naming the hook, the SyncFail Job runs, and a Warning Event
/// `HookFailed` is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_presync_leaves_the_deployment_untouched_and_runs_sync_fail() {
    let ns = "hooks-fail";
    let a = app("hooks-fail", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1"))]).await;
    assert_eq!(finish(&a).await.result, SyncResult::Succeeded);
    a.commit(
        &[
            ("web.yaml", &deploy(ns, "registry.example/web:2")),
            ("migrate.yaml", &job(ns, "migrate", "plumb.dev/hook: PreSync", "registry.example/migrate:2", true)),
            ("cleanup.yaml", &job(ns, "cleanup", "plumb.dev/hook: SyncFail", "registry.example/cleanup:1", false)),
        ],
        &[],
    );
    let rec = wait_for("the PreSync hook to fail the sync", Duration::from_secs(60), || async {
        let rec = a.pass(Mode::Policy).await.sync?;
        (rec.result != SyncResult::Running).then_some(rec)
    })
    .await;
    let (migrate, cleanup) = (run_name("migrate", &rec.revision), run_name("cleanup", &rec.revision));
    assert_eq!(rec.result, SyncResult::Failed, "{}", rec.message);
    assert!(
        rec.message.contains(&format!("PreSync hook Job.batch/{ns}/{migrate} failed: DeadlineExceeded")),
        "{}",
        rec.message
    );
    assert!(rec.applied.is_empty() && rec.pruned.is_empty(), "{:?} {:?}", rec.applied, rec.pruned);
    assert_eq!(image_of(ns), "registry.example/web:1", "the Deployment is untouched");
    assert_eq!(replica_set_created(ns, "registry.example/web:2"), "");
    assert!(exists(ns, "job", &cleanup), "the SyncFail hook runs");
    let results: Vec<(&str, &str)> = rec.hooks.iter().map(|h| (h.phase.as_str(), h.result.as_str())).collect();
    assert!(results.contains(&("PreSync", "Failed")) && results.contains(&("SyncFail", "Running")), "{results:?}");
    let events = wait_for("the HookFailed Event", Duration::from_secs(30), || async {
        let out = kubectl(&[
            "get",
            "events",
            "-A",
            "--field-selector",
            "reason=HookFailed",
            "-o",
            "jsonpath={range .items[*]}{.type} {.note}{.message}{\"\\n\"}{end}",
        ]);
        out.lines().any(|l| l.contains(&migrate)).then_some(out)
    })
    .await;
    assert!(events.lines().any(|l| l.starts_with("Warning ") && l.contains(&migrate)), "{events}");
}

/// Required (3): a PostSync Job is created only once the Deployment is Healthy: the
/// first pass applies the Deployment and waits; the Job's creation is not before the
/// Deployment became Available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_sync_job_is_created_only_after_the_deployment_is_healthy() {
    let ns = "hooks-post";
    let smoke = job(
        ns,
        "smoke",
        "plumb.dev/hook: PostSync, plumb.dev/hook-delete-policy: HookFailed",
        "registry.example/smoke:1",
        false,
    );
    let a = app("hooks-post", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("smoke.yaml", &smoke)]).await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    let run = run_name("smoke", &rec.revision);
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    assert!(rec.message.contains("PostSync hooks wait until every object is Healthy"), "{}", rec.message);
    assert_eq!(image_of(ns), "registry.example/web:1", "the objects are applied first");
    assert!(!exists(ns, "job", &run), "not before the Deployment is Healthy");
    let rec = finish(&a).await;
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    let available = kubectl(&[
        "-n",
        ns,
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].lastTransitionTime}",
    ]);
    let created = job_field(ns, &run, "{.metadata.creationTimestamp}");
    assert!(ts(&available) <= ts(&created), "Available at {available}, the PostSync Job created at {created}");
    assert!(!job_field(ns, &run, "{.status.completionTime}").is_empty(), "the sync waited for it to complete");
    assert!(rec.hooks.iter().any(|h| h.phase == "PostSync" && h.result == "Succeeded"), "{:?}", rec.hooks);
}

/// Required (5): a hook Job kept after it succeeded (`HookFailed` only) does not fail
/// the next sync on its immutable template: the next revision's run is a new Job (the
/// revision in its name). A hook under the default `BeforeHookCreation` has its last
/// run deleted before the next one is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_hook_job_does_not_fail_the_next_sync_on_its_immutable_template() {
    let ns = "hooks-keep";
    let kept = |image: &str| {
        job(ns, "migrate", "plumb.dev/hook: PreSync, plumb.dev/hook-delete-policy: HookFailed", image, false)
    };
    let seed = |image: &str| job(ns, "seed", "plumb.dev/hook: Sync", image, false);
    let a = app(
        "hooks-keep",
        ns,
        &[
            ("web.yaml", &deploy(ns, "registry.example/web:1")),
            ("migrate.yaml", &kept("registry.example/migrate:1")),
            ("seed.yaml", &seed("registry.example/seed:1")),
        ],
    )
    .await;
    let first = finish(&a).await;
    assert_eq!(first.result, SyncResult::Succeeded, "{}", first.message);
    a.commit(
        &[
            ("web.yaml", &deploy(ns, "registry.example/web:2")),
            ("migrate.yaml", &kept("registry.example/migrate:2")),
            ("seed.yaml", &seed("registry.example/seed:2")),
        ],
        &[],
    );
    let second = finish(&a).await;
    assert_eq!(second.result, SyncResult::Succeeded, "{}", second.message);
    assert_eq!(image_of(ns), "registry.example/web:2");
    let image = |name: &str| job_field(ns, name, "{.spec.template.spec.containers[0].image}");
    assert_eq!(image(&run_name("migrate", &first.revision)), "registry.example/migrate:1", "kept");
    assert_eq!(image(&run_name("migrate", &second.revision)), "registry.example/migrate:2");
    wait_for("the last seed run to go", Duration::from_secs(30), || async {
        (!exists(ns, "job", &run_name("seed", &first.revision))).then_some(())
    })
    .await;
    assert_eq!(image(&run_name("seed", &second.revision)), "registry.example/seed:2");
}

/// A hook's run is checked under its own name too: a Namespace hook named like the
/// application's namespace would create another Namespace (`<name>-<rev>`) outside the
/// destinations, and is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_hook_whose_run_leaves_the_destinations_is_refused() {
    let ns = "hooks-nsrun";
    let namespace = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations: {{plumb.dev/hook: PreSync}}\n"
    );
    let a =
        app("hooks-nsrun", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("ns.yaml", &namespace)]).await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Refused, "{}", rec.message);
    let run = run_name(ns, &rec.revision);
    assert!(rec.message.contains(&format!("hook Namespace/{ns} (run {run})")), "{}", rec.message);
    assert!(control_plane().kubectl(&["get", "namespace", &run]).is_err(), "the run's Namespace was created");
}

/// A hook is an object of its application: one in a namespace the application may not
/// write is refused like any object, and nothing runs (neither the hook nor the rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_outside_the_boundary_is_refused_and_nothing_runs() {
    let ns = "hooks-fence";
    let a = app(
        "hooks-fence",
        ns,
        &[
            ("web.yaml", &deploy(ns, "registry.example/web:1")),
            ("escape.yaml", &job("kube-system", "escape", "plumb.dev/hook: PreSync", "registry.example/x:1", false)),
        ],
    )
    .await;
    let rec = a.pass(Mode::Policy).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Refused, "{}", rec.message);
    assert!(
        rec.message
            .contains("hook Job.batch/kube-system/escape namespace \"kube-system\" is not among the destinations"),
        "{}",
        rec.message
    );
    assert!(!exists("kube-system", "job", &run_name("escape", &rec.revision)));
    assert!(!exists(ns, "deploy", "web"), "nothing of the sync is written");
}

fn helm_bin() -> std::path::PathBuf {
    let bin = plumb_lab::testbins_dir().join("helm/current/bin/helm");
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh helm", bin.display());
    bin
}

const CHART_DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: web, image: "registry.example/web:{{ .Values.tag }}"}]
"#;

fn chart_hook(name: &str, hook: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations: {{helm.sh/hook: {hook}, helm.sh/hook-delete-policy: before-hook-creation}}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]
      containers: [{{name: m, image: "registry.example/{name}:{{{{ .Values.tag }}}}"}}]
"#
    )
}

const CHART_TEST: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: web-test
  annotations: {helm.sh/hook: test}
spec:
  restartPolicy: Never
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers: [{name: t, image: "registry.example/test:1"}]
"#;

/// Required (4): a local Helm chart with pre-upgrade, post-install and test hooks syncs
/// as `helm install` / `helm upgrade` order them: the first sync runs post-install
/// after the Deployment is Healthy (no pre-upgrade), the test Pod is never created; a
/// values change runs pre-upgrade before the Deployment changes, and not post-install.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helm_chart_s_hooks_run_as_install_and_upgrade_order_them() {
    let ns = "hooks-helm";
    let lab = Lab::new("hooks-helm");
    let files = [
        ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n".to_string()),
        ("charts/web/values.yaml", "tag: \"1\"\n".to_string()),
        ("charts/web/templates/deployment.yaml", CHART_DEPLOYMENT.to_string()),
        ("charts/web/templates/post-install.yaml", chart_hook("welcome", "post-install")),
        ("charts/web/templates/pre-upgrade.yaml", chart_hook("migrate", "pre-upgrade")),
        ("charts/web/templates/tests/test.yaml", CHART_TEST.to_string()),
    ];
    for (f, text) in &files {
        lab.repo.write(f, text).unwrap();
    }
    lab.repo.commit("web chart").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-hooks, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    {AUTO}
applications:
  - {{name: hooks-helm, repository: r, path: charts/web, namespace: {ns}, environment: e, source: {{type: helm, releaseName: web}}}}
",
            helm_bin().display(),
            lab.url
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let pass = || async { ctx.run_pass("hooks-helm", Mode::Policy, None).await.unwrap() };
    let settle = || async {
        wait_for("the sync to finish", Duration::from_secs(120), || async {
            let r = pass().await;
            if r.sync.as_ref().is_some_and(|s| s.result == SyncResult::Running) {
                tokio::time::sleep(Duration::from_millis(500)).await;
                return None;
            }
            Some(r.status.last_sync.unwrap())
        })
        .await
    };
    // install: the objects, then post-install once the Deployment is Healthy
    let first = pass().await.sync.unwrap();
    assert_eq!(first.result, SyncResult::Running, "{}", first.message);
    assert!(first.message.contains("PostSync hooks wait until every object is Healthy"), "{}", first.message);
    assert!(first.install, "the first sync is Helm's install");
    let first = settle().await;
    assert_eq!(first.result, SyncResult::Succeeded, "{}", first.message);
    let welcome = run_name("welcome", &first.revision);
    assert!(!job_field(ns, &welcome, "{.status.completionTime}").is_empty(), "post-install ran and completed");
    assert!(!exists(ns, "job", &run_name("migrate", &first.revision)), "no pre-upgrade on install");
    assert!(kubectl(&["-n", ns, "get", "pods", "-o", "name"]).lines().all(|p| !p.contains("web-test")), "no test Pod");
    assert!(
        first.hooks.iter().any(|h| h.result == "Skipped" && h.object == "Pod/web-test"),
        "the test hook is reported skipped: {:?}",
        first.hooks
    );
    // upgrade: pre-upgrade before the Deployment changes, no post-install
    lab.repo.write("charts/web/values.yaml", "tag: \"2\"\n").unwrap();
    lab.repo.commit("web 2").unwrap();
    let second = pass().await.sync.unwrap();
    let migrate = run_name("migrate", &second.revision);
    assert_eq!(second.result, SyncResult::Running, "{}", second.message);
    assert!(second.message.contains(&format!("PreSync hook(s): Job.batch/{ns}/{migrate}")), "{}", second.message);
    assert_eq!(image_of(ns), "registry.example/web:1");
    let second = settle().await;
    assert_eq!(second.result, SyncResult::Succeeded, "{}", second.message);
    assert!(!second.install);
    assert_eq!(image_of(ns), "registry.example/web:2");
    let completed = job_field(ns, &migrate, "{.status.completionTime}");
    let rs = wait_for("the new ReplicaSet", Duration::from_secs(30), || async {
        Some(replica_set_created(ns, "registry.example/web:2")).filter(|t| !t.is_empty())
    })
    .await;
    assert!(ts(&completed) <= ts(&rs), "pre-upgrade completed at {completed}, the new ReplicaSet exists since {rs}");
    assert!(!exists(ns, "job", &run_name("welcome", &second.revision)), "post-install only on install");
    assert!(kubectl(&["-n", ns, "get", "pods", "-o", "name"]).lines().all(|p| !p.contains("web-test")), "no test Pod");
}

/// An unknown hook name is a render error naming the file, the object and the value:
/// nothing of the application is compared or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_hook_name_is_a_render_error_naming_the_object() {
    let ns = "hooks-typo";
    let typo = job(ns, "migrate", "plumb.dev/hook: PreSynk", "registry.example/m:1", false);
    let a =
        app("hooks-typo", ns, &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("migrate.yaml", &typo)]).await;
    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.is_none());
    let messages: Vec<&str> = r.status.conditions.iter().map(|c| c.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains(&format!(
            "app/migrate.yaml#1: Job.batch/{ns}/migrate: annotation plumb.dev/hook: unknown hook `PreSynk`"
        ))),
        "{messages:?}"
    );
    assert!(!exists(ns, "deploy", "web"));
}

/// `plumb sync --local` goes on through the hooks' phases (a person's sync, pass after
/// pass) and ends Succeeded once the PostSync hook completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_sync_runs_its_hooks_to_the_end() {
    let ns = "hooks-cli";
    let pre = job(ns, "migrate", "plumb.dev/hook: PreSync", "registry.example/m:1", false);
    let post = job(ns, "smoke", "plumb.dev/hook: PostSync", "registry.example/s:1", false);
    let a = app(
        "hooks-cli",
        ns,
        &[("web.yaml", &deploy(ns, "registry.example/web:1")), ("migrate.yaml", &pre), ("smoke.yaml", &post)],
    )
    .await;
    let (code, out, err) =
        plumb_cli(&["sync", "hooks-cli", "--local", "--config", a.policy.to_str().unwrap(), "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("PreSync hook(s): Job.batch/hooks-cli/migrate-"), "{out}");
    assert!(out.contains("PostSync hooks wait until every object is Healthy"), "{out}");
    assert!(out.contains("Succeeded"), "{out}");
    let r = a.pass(Mode::Policy).await;
    let rec = r.status.last_sync.unwrap();
    assert_eq!((rec.result, rec.reason), (SyncResult::Succeeded, plumb::status::SyncReason::Manual));
    let results: Vec<(&str, &str)> = rec.hooks.iter().map(|h| (h.phase.as_str(), h.result.as_str())).collect();
    assert_eq!(results, [("PreSync", "Succeeded"), ("PostSync", "Succeeded")], "{:?}", rec.hooks);
    assert!(!job_field(ns, &run_name("smoke", &rec.revision), "{.status.completionTime}").is_empty());
}
