//! Helm as `helm install` / `helm upgrade` would render it (issue 30), on the real
//! control plane with the real `helm` (built by `tools/testbins/build.sh helm`): a
//! chart's `crds/` applied before its custom resources and never pruned without an
//! approval (case helm-01), the `source.crds` policy, hooks run as Helm orders them
//! and tests never applied (case helm-04),
//! the cluster's capabilities (a CRD installed later is seen without a restart),
//! `.Release.IsInstall`/`IsUpgrade`, and charts that `lookup` or generate their
//! secrets converging instead of rotating — ending with a chart modelled on a public
//! one (`lab/tests/data/certs`).
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::Path, sync::Arc, time::Duration};

use plumb::{
    cluster::Cluster,
    compare::SyncStatus,
    metrics::Metrics,
    reconcile::{Context, Mode, PassReport},
    status::SyncResult,
};
use support::*;

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/cases");

fn helm_bin() -> std::path::PathBuf {
    let bin = plumb_lab::testbins_dir().join("helm/current/bin/helm");
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh helm", bin.display());
    bin
}

/// Writes every file under `from` into the repository under `to`.
fn copy_tree(lab: &Lab, from: &Path, to: &str) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let dest = if to.is_empty() { name.clone() } else { format!("{to}/{name}") };
        if e.file_type().unwrap().is_dir() {
            copy_tree(lab, &e.path(), &dest);
        } else {
            lab.repo.write(&dest, &std::fs::read_to_string(e.path()).unwrap()).unwrap();
        }
    }
}

/// A policy of one Helm application `app` (chart at `path`, namespace `ns`, release
/// `release`, `source` options after them), automated with prune and selfHeal, CRDs
/// allowed.
fn policy(lab: &Lab, app: &str, path: &str, ns: &str, source: &str) -> std::path::PathBuf {
    lab.policy(
        &format!("{app}.yaml"),
        &format!(
            "settings: {{statusNamespace: plumb-{ns}, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
    clusterResources:
      - {{group: '', kind: Namespace}}
      - {{group: apiextensions.k8s.io, kind: CustomResourceDefinition}}
applications:
  - {{name: {app}, repository: r, revision: main, path: {path}, namespace: {ns}, environment: e,
     source: {{type: helm{source}}}}}
",
            helm_bin().display(),
            lab.url
        ),
    )
}

/// A context over the shared control plane that asks discovery for the render tools'
/// capabilities on every pass (a server asks every 30 s).
async fn context(policy: &Path, cache: &Path) -> Arc<Context> {
    context_seeing_crds_after(policy, cache, Duration::ZERO).await
}

/// A context whose renders see the cluster's capabilities of at most `age` ago: a test
/// counting renders takes an hour, since the other tests of this file install and remove
/// CRDs on the same control plane meanwhile (and a Helm render rightly runs again when
/// they change).
async fn context_seeing_crds_after(policy: &Path, cache: &Path, age: Duration) -> Arc<Context> {
    let config = plumb::config::load(policy).unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::connect(Some(&control_plane().kubeconfig)).await.unwrap();
    let ctx = Context::new(cluster, Arc::new(config), cache.to_path_buf(), Arc::new(Metrics::default()))
        .with_capabilities_max_age(age);
    ctx.store.ensure_namespace().await.unwrap();
    Arc::new(ctx)
}

fn get(args: &[&str], path: &str) -> String {
    kubectl(&[args, &["-o", &format!("jsonpath={path}")]].concat())
}

fn exists(args: &[&str]) -> bool {
    !kubectl(&[args, &["--ignore-not-found", "-o", "name"]].concat()).is_empty()
}

fn conditions(r: &PassReport, type_: &str) -> Vec<String> {
    r.status.conditions.iter().filter(|c| c.type_.as_str() == type_).map(|c| c.message.clone()).collect()
}

fn synced_without_writes(r: &PassReport, what: &str) {
    assert_eq!(
        (r.status.sync, r.sync.as_ref().map(|s| s.result)),
        (SyncStatus::Synced, None),
        "{what}: {:?}",
        r.status.resources.iter().filter(|x| x.sync != SyncStatus::Synced).collect::<Vec<_>>()
    );
}

/// helm-01: the chart's `crds/` is rendered (three objects), `plumb diff` on the
/// empty cluster lists three missing (exit 1, not "kind not served"), the sync
/// applies the CRD before the Widget, and once the chart stops shipping the CRD it
/// waits for an approval instead of being deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_01_crds_are_applied_first_and_never_pruned_without_approval() {
    let lab = Lab::new("h01-fleet");
    copy_tree(&lab, &Path::new(CASES).join("helm-01/repo"), "");
    lab.repo.commit("helm-01").unwrap();
    let policy = policy(&lab, "web", "apps/web", "gitops-lab", ", releaseName: web");
    let cfg = policy.to_str().unwrap();
    let cache = lab.tmp.path().join("cache");

    let (code, out, err) = plumb_cli(&["render", "web", "-c", cfg, "--cache-dir", cache.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let kinds: Vec<&str> = out.lines().filter(|l| l.starts_with("kind: ")).collect();
    assert_eq!(kinds, ["kind: CustomResourceDefinition", "kind: ConfigMap", "kind: Widget"], "{out}");
    assert!(err.contains("helm v3.") || err.contains("helm v4."), "{err}");

    let (code, out, err) = plumb_cli(&["diff", "web", "-c", cfg]);
    assert_eq!(code, 1, "{out}\n{err}");
    let mut listed: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        [
            "# ConfigMap/gitops-lab/web-settings (missing)",
            "# CustomResourceDefinition.apiextensions.k8s.io/widgets.cache.acme.example (missing)",
            "# Widget.cache.acme.example/gitops-lab/web-cache (missing (its CustomResourceDefinition is applied first in this sync))",
        ],
        "{out}"
    );

    let ctx = context(&policy, &cache).await;
    let preview =
        plumb::cli::preview(&ctx.run_pass("web", Mode::Preview { prune: true, approve: false }, None).await.unwrap());
    let order: Vec<&str> = preview.lines().filter_map(|l| l.strip_prefix("create   ")).collect();
    let crd = order.iter().position(|o| o.starts_with("CustomResourceDefinition")).unwrap();
    let widget = order.iter().position(|o| o.starts_with("Widget")).unwrap();
    assert!(crd < widget, "the CRD before its resource: {preview}");

    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    let rec = r.sync.unwrap();
    assert_eq!((rec.result, rec.applied.len()), (SyncResult::Succeeded, 3), "{}", rec.message);
    assert_eq!(
        get(&["get", "crd", "widgets.cache.acme.example"], "{.status.conditions[?(@.type==\"Established\")].status}"),
        "True"
    );
    assert!(!get(&["-n", "gitops-lab", "get", "widgets.cache.acme.example", "web-cache"], "{.spec.size}").is_empty());
    assert!(
        get(&["get", "crd", "widgets.cache.acme.example"], "{.metadata.annotations.plumb\\.dev/tracking-id}")
            .starts_with("web:"),
        "the CRD carries the tracking-id"
    );
    synced_without_writes(&ctx.run_pass("web", Mode::Policy, None).await.unwrap(), "after the sync");

    // the chart stops shipping the CRD: it waits for an approval, and stays
    let crd_file = "apps/web/crds/widgets.cache.acme.example.yaml";
    let text = std::fs::read_to_string(Path::new(CASES).join("helm-01/repo").join(crd_file)).unwrap();
    lab.repo.remove(crd_file).unwrap();
    lab.repo.write("docs/widgets.cache.acme.example.yaml", &text).unwrap();
    lab.repo.commit("the CRD leaves the chart").unwrap();
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert!(r.sync.as_ref().is_none_or(|s| s.pruned.is_empty()), "{:?}", r.sync);
    let (code, out, err) = plumb_cli(&["diff", "web", "-c", cfg]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains(
            "# CustomResourceDefinition.apiextensions.k8s.io/widgets.cache.acme.example (requires pruning; prune needs approval (data-loss class CustomResourceDefinition (every resource of that type))"
        ),
        "{out}"
    );
    assert!(exists(&["get", "crd", "widgets.cache.acme.example"]), "not deleted");
}

const CRD_V1: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.policy.lab.example}
spec:
  group: policy.lab.example
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// `source.crds`: `Create` creates a missing CRD but never rewrites an existing one
/// from `crds/` (the application stays Synced, a RenderWarning names it);
/// `CreateReplace` keeps it equal to the chart; `Skip` leaves `crds/` out; a bad value
/// is a policy error naming the option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_policy_create_replace_or_skip() {
    let lab = Lab::new("crd-policy");
    lab.repo.write("chart/Chart.yaml", "apiVersion: v2\nname: gadgets\nversion: 0.1.0\n").unwrap();
    lab.repo.write("chart/crds/gadgets.yaml", CRD_V1).unwrap();
    lab.repo
        .write(
            "chart/templates/gadget.yaml",
            "apiVersion: policy.lab.example/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 1}\n",
        )
        .unwrap();
    lab.repo.commit("gadgets").unwrap();
    let create = policy(&lab, "gadgets", "chart", "crd-policy", "");
    let ctx = context(&create, &lab.tmp.path().join("cache")).await;
    let r = ctx.run_pass("gadgets", Mode::Policy, None).await.unwrap();
    assert_eq!(
        r.sync.as_ref().map(|s| (s.result, s.applied.len())),
        Some((SyncResult::Succeeded, 2)),
        "{:?}",
        r.status
    );
    let uid = get(&["get", "crd", "gadgets.policy.lab.example"], "{.metadata.uid}");

    // the chart's CRD gets a short name: `Create` leaves the live one as it is
    let v2 = CRD_V1.replace("singular: gadget}", "singular: gadget, shortNames: [gd]}");
    lab.repo.write("chart/crds/gadgets.yaml", &v2).unwrap();
    lab.repo.commit("gadgets: a short name").unwrap();
    let r = ctx.run_pass("gadgets", Mode::Policy, None).await.unwrap();
    synced_without_writes(&r, "Create");
    assert_eq!(get(&["get", "crd", "gadgets.policy.lab.example"], "{.spec.names.shortNames}"), "");
    let warnings = conditions(&r, "RenderWarning");
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "CustomResourceDefinition.apiextensions.k8s.io/gadgets.policy.lab.example: the live spec differs"
        )),
        "{warnings:?}"
    );

    // CreateReplace: kept equal to the chart (same object, updated)
    let replace = policy(&lab, "gadgets", "chart", "crd-policy", ", crds: CreateReplace");
    let ctx = context(&replace, &lab.tmp.path().join("cache")).await;
    let r = ctx.run_pass("gadgets", Mode::Policy, None).await.unwrap();
    let rec = r.sync.unwrap();
    assert_eq!(
        (rec.result, rec.applied.as_slice()),
        (
            SyncResult::Succeeded,
            &["CustomResourceDefinition.apiextensions.k8s.io/gadgets.policy.lab.example".to_string()][..]
        ),
        "{}",
        rec.message
    );
    assert_eq!(get(&["get", "crd", "gadgets.policy.lab.example"], "{.spec.names.shortNames}"), "[\"gd\"]");
    assert_eq!(get(&["get", "crd", "gadgets.policy.lab.example"], "{.metadata.uid}"), uid);

    // Skip: the render holds the Gadget only
    let skip = policy(&lab, "gadgets", "chart", "crd-policy", ", crds: Skip");
    let (code, out, err) = plumb_cli(&[
        "render",
        "gadgets",
        "-c",
        skip.to_str().unwrap(),
        "--cache-dir",
        lab.tmp.path().join("c2").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let kinds: Vec<&str> = out.lines().filter(|l| l.starts_with("kind: ")).collect();
    assert_eq!(kinds, ["kind: Gadget"], "{out}");

    let bad = policy(&lab, "gadgets", "chart", "crd-policy", ", crds: replace");
    let err = plumb::config::load(&bad).expect_err("a bad policy").to_string();
    assert!(err.contains("source.crds: `replace` is not one of Create, CreateReplace, Skip"), "{err}");
}

/// helm-04: hook resources are not ordinary objects: the `pre-install,pre-upgrade`
/// migrate Job runs and completes before the Deployment is created, then goes
/// (`hook-succeeded`) and is not created again by a later pass; the `test` Pod is
/// never created (reported as a skipped hook); neither is drift nor a prune candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_04_hooks_run_in_order_and_tests_are_never_applied() {
    let lab = Lab::new("h04-fleet");
    copy_tree(&lab, &Path::new(CASES).join("helm-04/repo"), "");
    lab.repo.commit("helm-04").unwrap();
    let policy = policy(&lab, "web", "apps/web", "h04", ", releaseName: web");
    let ctx = context(&policy, &lab.tmp.path().join("cache")).await;
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    let rec = r.sync.as_ref().unwrap();
    let migrate = plumb::plan::hooks::run_name("web-migrate", &rec.revision);
    assert_eq!(rec.result, SyncResult::Running, "{}", rec.message);
    assert!(rec.message.contains(&format!("PreSync hook(s): Job.batch/h04/{migrate}")), "{}", rec.message);
    assert!(rec.applied.is_empty(), "nothing before the migration: {:?}", rec.applied);
    assert!(conditions(&r, "RenderWarning").is_empty(), "{:?}", r.status.conditions);
    let rec = wait_for("the sync to finish", Duration::from_secs(120), || async {
        let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
        r.sync.filter(|s| s.result != SyncResult::Running)
    })
    .await;
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert!(rec.applied.iter().all(|a| !a.starts_with("Job") && !a.starts_with("Pod")), "{:?}", rec.applied);
    let hook = rec.hooks.iter().find(|h| h.phase == "PreSync").unwrap();
    assert_eq!(hook.result, "Succeeded", "{hook:?}");
    let created = get(&["-n", "h04", "get", "deploy", "web"], "{.metadata.creationTimestamp}");
    let finished: jiff::Timestamp = hook.finished_at.parse().unwrap();
    assert!(
        finished <= created.parse().unwrap(),
        "migrate completed at {finished}, the Deployment created at {created}"
    );
    assert!(
        rec.hooks.iter().any(|h| h.result == "Skipped" && h.object == "Pod/web-test-connection"),
        "{:?}",
        rec.hooks
    );
    assert!(!exists(&["-n", "h04", "get", "pod", "web-test-connection"]));
    assert!(!exists(&["-n", "h04", "get", "job", &migrate]), "hook-succeeded deleted it");
    synced_without_writes(&ctx.run_pass("web", Mode::Policy, None).await.unwrap(), "hooks are no drift");
    assert!(!exists(&["-n", "h04", "get", "job", &migrate]), "not created again");
}

/// `.Release.IsInstall` on the first sync, `.Release.IsUpgrade` once the application
/// has synced (as `helm upgrade`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_is_an_install_then_an_upgrade() {
    let lab = Lab::new("upgrade");
    lab.repo.write("chart/Chart.yaml", "apiVersion: v2\nname: rel\nversion: 0.1.0\n").unwrap();
    lab.repo
        .write(
            "chart/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: release}\ndata:\n  install: {{ .Release.IsInstall | quote }}\n  upgrade: {{ .Release.IsUpgrade | quote }}\n",
        )
        .unwrap();
    lab.repo.commit("rel").unwrap();
    let policy = policy(&lab, "rel", "chart", "rel-upgrade", "");
    let ctx = context(&policy, &lab.tmp.path().join("cache")).await;
    let cm = || get(&["-n", "rel-upgrade", "get", "cm", "release"], "{.data.install} {.data.upgrade}");
    let r = ctx.run_pass("rel", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.map(|s| s.result), Some(SyncResult::Succeeded));
    assert_eq!(cm(), "true false");
    let r = ctx.run_pass("rel", Mode::Policy, None).await.unwrap();
    assert_eq!(
        r.sync.map(|s| (s.result, s.applied)),
        Some((SyncResult::Succeeded, vec!["ConfigMap/rel-upgrade/release".into()]))
    );
    assert_eq!(cm(), "false true");
    synced_without_writes(&ctx.run_pass("rel", Mode::Policy, None).await.unwrap(), "an upgrade again");
}

const RANDOM_SECRET: &str = r#"{{- $old := lookup "v1" "Secret" .Release.Namespace "app-token" -}}
apiVersion: v1
kind: Secret
metadata: {name: app-token}
data:
  user: {{ "app" | b64enc }}
{{- if $old }}
  password: {{ index $old.data "password" }}
{{- else }}
  password: {{ randAlphaNum 24 | b64enc }}
{{- end }}
"#;

/// argo-cd#8551: a Secret the chart looks up or else generates keeps its value (and
/// UID) across an unrelated commit and a restart; those passes write nothing; the
/// NonDeterministicRender condition names the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_or_random_secret_converges_across_commits_and_restarts() {
    let lab = Lab::new("random");
    lab.repo.write("chart/Chart.yaml", "apiVersion: v2\nname: rnd\nversion: 0.1.0\n").unwrap();
    lab.repo.write("chart/templates/secret.yaml", RANDOM_SECRET).unwrap();
    lab.repo
        .write("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {k: v}\n")
        .unwrap();
    lab.repo.commit("rnd").unwrap();
    let policy = policy(&lab, "rnd", "chart", "rnd-secret", "");
    let hour = Duration::from_secs(3600);
    let ctx = context_seeing_crds_after(&policy, &lab.tmp.path().join("cache"), hour).await;
    let r = ctx.run_pass("rnd", Mode::Policy, None).await.unwrap();
    assert_eq!(
        r.sync.as_ref().map(|s| (s.result, s.applied.len())),
        Some((SyncResult::Succeeded, 2)),
        "{:?}",
        r.status
    );
    let noted = conditions(&r, "NonDeterministicRender");
    assert_eq!(
        noted,
        [
            "Secret/app-token /data/password: differs between two renders of the same inputs; the live value is kept (written only when the object is created)"
        ],
        "{:?}",
        r.status.conditions
    );
    let secret = || get(&["-n", "rnd-secret", "get", "secret", "app-token"], "{.metadata.uid} {.data.password}");
    let first = secret();
    assert_eq!(first.split(' ').nth(1).map(str::len), Some(32), "{first}");
    let r = ctx.run_pass("rnd", Mode::Policy, None).await.unwrap();
    synced_without_writes(&r, "the next pass");

    // a commit elsewhere in the repository renders nothing again (the working copy
    // holds only the chart); one changing an unrelated file of the chart renders it
    // again: the same Secret
    lab.repo.write("docs/README.md", "unrelated\n").unwrap();
    lab.repo.commit("docs").unwrap();
    let runs = ctx.render_tool_runs();
    synced_without_writes(&ctx.run_pass("rnd", Mode::Policy, None).await.unwrap(), "after a commit elsewhere");
    assert_eq!(ctx.render_tool_runs(), runs, "a commit outside the chart renders nothing");
    lab.repo
        .write(
            "chart/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {k: v}\n# a comment\n",
        )
        .unwrap();
    lab.repo.commit("a comment in the chart").unwrap();
    let r = ctx.run_pass("rnd", Mode::Policy, None).await.unwrap();
    assert!(ctx.render_tool_runs() > runs, "rendered again");
    synced_without_writes(&r, "after an unrelated commit");
    assert_eq!(conditions(&r, "NonDeterministicRender").len(), 1);
    assert_eq!(secret(), first);

    // a restart: a new context and render cache over the same cluster
    let ctx = context(&policy, &lab.tmp.path().join("cache-2")).await;
    let r = ctx.run_pass("rnd", Mode::Policy, None).await.unwrap();
    synced_without_writes(&r, "after a restart");
    assert_eq!(conditions(&r, "NonDeterministicRender").len(), 1);
    assert_eq!(secret(), first);
    let (code, out, err) = plumb_cli(&["diff", "rnd", "-c", policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
}

const SERVICE_MONITOR_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// A chart modelled on a public one (`lab/tests/data/certs`: cert-manager's layout):
/// it renders (CRDs first), syncs (its post-install Job once everything is Healthy,
/// its test Pod never), is Synced on the next pass with no
/// write and no child process, `plumb diff` exits 0; the ServiceMonitor CRD installed
/// later makes the gated ServiceMonitor appear on a later pass without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_style_chart_end_to_end() {
    let lab = Lab::new("certs-fleet");
    copy_tree(&lab, &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/certs"), "charts/certs");
    lab.repo.commit("certs 1.4.2").unwrap();
    let policy = policy(&lab, "certs", "charts/certs", "certs", ", releaseName: certs");
    let ctx = context(&policy, &lab.tmp.path().join("cache")).await;
    let preview =
        plumb::cli::preview(&ctx.run_pass("certs", Mode::Preview { prune: true, approve: false }, None).await.unwrap());
    let order: Vec<&str> = preview.lines().filter_map(|l| l.strip_prefix("create   ")).collect();
    let issuer = order.iter().position(|o| o.starts_with("Issuer")).unwrap();
    assert!(order[..issuer].iter().filter(|o| o.starts_with("CustomResourceDefinition")).count() == 2, "{preview}");
    let r = ctx.run_pass("certs", Mode::Policy, None).await.unwrap();
    let rec = r.sync.as_ref().unwrap();
    assert_eq!(rec.result, SyncResult::Running, "the post-install hook waits for health: {}", rec.message);
    assert!(conditions(&r, "RenderWarning").is_empty(), "hooks are run, not skipped: {:?}", r.status.conditions);
    assert_eq!(conditions(&r, "NonDeterministicRender").len(), 1, "{:?}", r.status.conditions);
    let rec = wait_for("the sync to finish", Duration::from_secs(120), || async {
        let r = ctx.run_pass("certs", Mode::Policy, None).await.unwrap();
        r.sync.filter(|s| s.result != SyncResult::Running)
    })
    .await;
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    let mut applied = rec.applied.clone();
    applied.sort();
    assert_eq!(
        applied,
        [
            "CustomResourceDefinition.apiextensions.k8s.io/certificates.certs.lab.example",
            "CustomResourceDefinition.apiextensions.k8s.io/issuers.certs.lab.example",
            "Deployment.apps/certs/certs",
            "Issuer.certs.lab.example/certs/selfsigned",
            "Secret/certs/certs-webhook-ca",
            "Service/certs/certs",
        ]
    );
    let check = plumb::plan::hooks::run_name("certs-startupapicheck", &rec.revision);
    let results: Vec<(&str, &str, &str)> =
        rec.hooks.iter().map(|h| (h.phase.as_str(), h.object.as_str(), h.result.as_str())).collect();
    let object = format!("Job.batch/certs/{check}");
    assert!(results.contains(&("PostSync", object.as_str(), "Succeeded")), "{results:?}");
    assert!(results.iter().any(|(_, o, r)| o.starts_with("Pod/") && *r == "Skipped"), "the test Pod: {results:?}");
    let ca = get(&["-n", "certs", "get", "secret", "certs-webhook-ca"], "{.metadata.uid} {.data.tls\\.crt}");

    // the next pass renders as an upgrade (`--is-upgrade`), and writes nothing
    synced_without_writes(&ctx.run_pass("certs", Mode::Policy, None).await.unwrap(), "the next pass");
    // counted on a context that keeps the capabilities it read (the other tests here
    // change CRDs meanwhile, and a Helm render rightly runs again when they change)
    let steady =
        context_seeing_crds_after(&policy, &lab.tmp.path().join("cache-steady"), Duration::from_secs(3600)).await;
    synced_without_writes(&steady.run_pass("certs", Mode::Policy, None).await.unwrap(), "a restart");
    let runs = steady.render_tool_runs();
    synced_without_writes(&steady.run_pass("certs", Mode::Policy, None).await.unwrap(), "a no-op pass");
    assert_eq!(steady.render_tool_runs(), runs, "a no-op pass starts no child process");
    let (code, out, err) = plumb_cli(&["diff", "certs", "-c", policy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");

    // Prometheus' CRD arrives: the next pass renders the gated ServiceMonitor and applies it
    kubectl_apply(SERVICE_MONITOR_CRD);
    let r = wait_for("the ServiceMonitor to be rendered", Duration::from_secs(60), || async {
        let r = ctx.run_pass("certs", Mode::Policy, None).await.unwrap();
        r.sync.as_ref().is_some_and(|s| s.applied.iter().any(|a| a.starts_with("ServiceMonitor"))).then_some(r)
    })
    .await;
    assert_eq!(r.sync.unwrap().result, SyncResult::Succeeded);
    assert!(exists(&["-n", "certs", "get", "servicemonitors.monitoring.coreos.com", "certs"]));
    assert_eq!(get(&["-n", "certs", "get", "secret", "certs-webhook-ca"], "{.metadata.uid} {.data.tls\\.crt}"), ca);
    synced_without_writes(&ctx.run_pass("certs", Mode::Policy, None).await.unwrap(), "with the ServiceMonitor");
    // the command line sees the cluster the server sees
    let cfg = policy.to_str().unwrap();
    let (code, out, err) = plumb_cli(&["diff", "certs", "-c", cfg]);
    assert_eq!(code, 0, "{out}\n{err}");
    let cache = lab.tmp.path().join("cli-cache");
    let rendered = |extra: &[&str]| {
        let (code, out, err) =
            plumb_cli(&[&["render", "certs", "-c", cfg, "--cache-dir", cache.to_str().unwrap()], extra].concat());
        assert_eq!(code, 0, "{err}");
        out.lines().any(|l| l == "kind: ServiceMonitor")
    };
    assert!(rendered(&["--cluster"]), "plumb render --cluster: the cluster's capabilities");
    assert!(!rendered(&[]), "plumb render without a cluster: Helm's defaults");
    // --explain: how it was rendered, on standard error
    let (code, _, err) =
        plumb_cli(&["render", "certs", "-c", cfg, "--cache-dir", cache.to_str().unwrap(), "--cluster", "--explain"]);
    assert_eq!(code, 0, "{err}");
    let explained: Vec<&str> = err.lines().filter(|l| l.starts_with("explain: ")).collect();
    assert!(explained[0].starts_with("explain: tool: helm v3."), "{err}");
    assert!(
        explained
            .iter()
            .any(|l| l.starts_with("explain: capabilities: kube v1.36.3, ") && l.ends_with("(from the cluster)")),
        "{err}"
    );
    assert!(explained.contains(&"explain: decrypted (SOPS): none"), "{err}");
    assert!(
        explained.iter().any(|l| l.starts_with("explain: held: Secret/certs/certs-webhook-ca /data/tls.crt")
            && l.ends_with("— differs between two renders: the live value is kept")),
        "{err}"
    );
    assert!(explained.iter().any(|l| l.starts_with("explain: sandbox: ")), "{err}");
    assert!(explained.last().is_some_and(|l| l.starts_with("explain: reused: no: rendered now (")), "{err}");
}
