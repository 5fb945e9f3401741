//! Fault injection against the real control plane: a broken commit, an empty render, Git
//! down or rewritten, a kind the server does not know, a rejected apply, the API server
//! or plumb dying in the middle of a sync, an object moving between applications, a
//! copied tracking-id. Each test checks that no live object was deleted or wrongly
//! changed (UIDs and content, read back with kubectl) and that the status says why
//! (sync status, condition, history record).
#![allow(clippy::unwrap_used)]

mod support;

use std::{collections::BTreeMap, path::PathBuf, process::Stdio, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    reconcile::{Context, Mode, PassReport},
    status::{AppStatus, Condition, SyncRecord, SyncResult},
};
use plumb_lab::{ControlPlane, ControlPlaneOptions};
use serde_json::Value;
use support::*;

/// One test's world: a Git repository served over HTTP; a policy (automated, prune,
/// selfHeal, CreateNamespace) whose applications each read the directory of their own
/// name and deploy to `faults-<name>`, with statuses in `plumb-faults-<name>`; a Context.
struct Fault {
    lab: Lab,
    ns: String,
    policy: PathBuf,
    kubeconfig: PathBuf,
    ctx: Arc<Context>,
}

/// Live objects by `Kind/name`: UID, and `data`, `spec` and `deletionTimestamp`.
type Live = BTreeMap<String, (String, Value)>;

impl Fault {
    /// Application names must be unique across the tests of this binary: plumb lists an
    /// application's objects by label in every namespace.
    async fn new(name: &str, apps: &[&str], allow_empty: bool) -> Fault {
        Fault::on(control_plane(), name, apps, allow_empty).await
    }

    async fn on(cp: &ControlPlane, name: &str, apps: &[&str], allow_empty: bool) -> Fault {
        let lab = Lab::new(name);
        let ns = format!("faults-{name}");
        let apps: String = apps
            .iter()
            .map(|a| {
                format!(
                    "  - {{name: {a}, repository: r, revision: main, path: {a}, namespace: {ns}, environment: e}}\n"
                )
            })
            .collect();
        let policy = lab.policy(
            "policy.yaml",
            &format!(
                "settings: {{statusNamespace: plumb-{ns}}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, allowEmpty: {allow_empty}, syncOptions: [CreateNamespace=true]}}\napplications:\n{apps}",
                lab.url
            ),
        );
        let ctx = context_on(cp, &policy, &lab.tmp.path().join("cache"), false).await;
        Fault { lab, ns, policy, kubeconfig: cp.kubeconfig.clone(), ctx }
    }

    /// Writes (`Some`) or removes (`None`) files in the work tree.
    fn edit(&self, changes: &[(&str, Option<&str>)]) {
        for (path, text) in changes {
            match text {
                Some(t) => self.lab.repo.write(path, t).unwrap(),
                None => self.lab.repo.remove(path).unwrap(),
            }
        }
    }

    /// [`Fault::edit`], then commit and push; returns the commit SHA.
    fn commit(&self, changes: &[(&str, Option<&str>)], message: &str) -> String {
        self.edit(changes);
        self.lab.repo.commit(message).unwrap()
    }

    /// A ConfigMap `name` in the test's namespace with `data: {value: <value>}`.
    fn cm(&self, name: &str, value: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {}}}\ndata: {{value: \"{value}\"}}\n",
            self.ns
        )
    }

    /// [`Fault::cm`] annotated `plumb.dev/sync-options: Prune=false`.
    fn cm_never_pruned(&self, name: &str, value: &str) -> String {
        self.cm(name, value).replace(
            &format!("metadata: {{name: {name},"),
            &format!("metadata: {{annotations: {{plumb.dev/sync-options: Prune=false}}, name: {name},"),
        )
    }

    /// `ConfigMap/<namespace>/<name>`, as plumb names it in status and history.
    fn cm_id(&self, name: &str) -> String {
        format!("ConfigMap/{}/{name}", self.ns)
    }

    /// One automated pass (what `plumb serve` runs).
    async fn pass(&self, app: &str) -> PassReport {
        self.ctx.run_pass(app, Mode::Policy, None).await.unwrap()
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into()
    }

    /// Every ConfigMap, Service and Deployment of the namespace.
    fn live(&self) -> Live {
        let list: Value =
            serde_json::from_str(&self.kubectl(&["-n", &self.ns, "get", "configmap,service,deployment", "-o", "json"]))
                .unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["metadata"]["name"] != "kube-root-ca.crt")
            .map(|o| {
                let m = &o["metadata"];
                let content =
                    serde_json::json!({"data": o["data"], "spec": o["spec"], "deleting": m["deletionTimestamp"]});
                (
                    format!("{}/{}", o["kind"].as_str().unwrap(), m["name"].as_str().unwrap()),
                    (m["uid"].to_string(), content),
                )
            })
            .collect()
    }

    /// Status and history of `app` as stored in the cluster, parsed strictly: a
    /// half-written or unreadable record fails the test.
    fn stored(&self, app: &str) -> (AppStatus, Vec<SyncRecord>) {
        let cm: Value = serde_json::from_str(&self.kubectl(&[
            "-n",
            &format!("plumb-{}", self.ns),
            "get",
            "applications.plumb.dev",
            app,
            "-o",
            "json",
        ]))
        .unwrap();
        let status = serde_json::from_value(cm["status"].clone()).unwrap_or_else(|e| panic!("status: {e}"));
        let history =
            serde_json::from_value(cm["status"]["history"].clone()).unwrap_or_else(|e| panic!("history: {e}"));
        (status, history)
    }

    /// The plumb binary with this policy and a mirror cache of its own.
    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let cache = self.lab.tmp.path().join("cli-cache");
        let mut all = args.to_vec();
        all.extend(["--config", self.policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
        plumb_cli(&all)
    }
}

/// The condition of type `type_` (panics showing the status when there is none).
fn condition<'a>(st: &'a AppStatus, type_: &str) -> &'a Condition {
    st.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition in {st:#?}"))
}

/// Asserts that every object of `before` is still live with the same UID and, except
/// for those named in `updated` (`Kind/name`), the same content.
fn assert_kept(before: &Live, after: &Live, updated: &[&str]) {
    for (name, (uid, content)) in before {
        let Some((now_uid, now)) = after.get(name) else { panic!("{name} was deleted") };
        assert_eq!(uid, now_uid, "{name} was re-created");
        if !updated.contains(&name.as_str()) {
            assert_eq!(content, now, "{name} changed");
        }
    }
}

/// How many ConfigMaps named `big-*` exist in `ns`.
async fn count_big(client: &kube::Client, ns: &str) -> usize {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.list_metadata(&ListParams::default()).await.map_or(0, |l| {
        l.items.iter().filter(|o| o.metadata.name.as_deref().is_some_and(|n| n.starts_with("big-"))).count()
    })
}

/// How many ConfigMaps the commits that a fault interrupts mid-sync carry: enough that
/// their sync outlasts the test's 200 ms look for the first one plus the fault's own
/// start (400 applied in under that on a quiet machine, and the fault came too late).
const MID_SYNC: usize = 2000;

/// `n` ConfigMaps `big-0` … in one multi-document file.
fn big_commit(f: &Fault, n: usize) -> String {
    (0..n).map(|i| f.cm(&format!("big-{i}"), &"x".repeat(2000))).collect::<Vec<_>>().join("---\n")
}

/// 1. One file of the commit is not valid YAML (prune on, an object removed and one
/// changed in the same commit): the pass stops before comparing; nothing is applied or
/// pruned; Unknown with a ComparisonError naming the file; the last synced revision
/// stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_error_changes_nothing() {
    let app = "render";
    let f = Fault::new(app, &[app], false).await;
    let c1 = f.commit(
        &[("render/a.yaml", Some(&f.cm("a", "1"))), ("render/b.yaml", Some(&f.cm("b", "1")))],
        "two ConfigMaps",
    );
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let before = f.live();

    let c2 = f.commit(
        &[
            ("render/a.yaml", Some(&f.cm("a", "2"))),
            ("render/b.yaml", None),
            ("render/broken.yaml", Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken\n")),
        ],
        "change a, drop b, add a broken file",
    );
    let r = f.pass(app).await;
    assert!(r.sync.is_none(), "no sync after a failed render: {:?}", r.sync);
    let (st, history) = f.stored(app);
    assert_eq!(st, r.status);
    assert_eq!(st.sync, SyncStatus::Unknown);
    let cond = condition(&st, "ComparisonError");
    assert!(cond.message.contains("render/broken.yaml") && cond.message.contains(&c2[..7]), "{cond:?}");
    assert_eq!((st.revision.as_str(), st.synced_revision.as_str()), (c2.as_str(), c1.as_str()));
    assert_eq!(history.len(), 1, "no record for a pass that did not sync: {history:?}");
    assert_kept(&before, &f.live(), &[]);
}

/// argocd-07: a Deployment synced at `c1`, then its only file renamed to `.bak` at `c2`
/// (the render succeeds with zero objects) and one automated pass. Returns the world,
/// both revisions, the Deployment's id and the live objects before `c2`.
async fn empty_render(name: &str, allow_empty: bool) -> (Fault, String, String, String, Live, PassReport) {
    let f = Fault::new(name, &[name], allow_empty).await;
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: solo, namespace: {}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: solo}}}}\n  template:\n    metadata: {{labels: {{app: solo}}}}\n    spec: {{containers: [{{name: solo, image: registry.example.test/solo:3.1.0}}]}}\n",
        f.ns
    );
    let file = format!("{name}/deployment.yaml");
    let c1 = f.commit(&[(&file, Some(&deployment))], "solo");
    assert_eq!(f.pass(name).await.sync.unwrap().applied.len(), 1);
    let before = f.live();
    let bak = format!("{file}.bak");
    let c2 = f.commit(&[(&file, None), (&bak, Some(&deployment))], "rename the only manifest");
    let r = f.pass(name).await;
    let id = format!("Deployment.apps/{}/solo", f.ns);
    (f, c1, c2, id, before, r)
}

/// 2a. Empty render, allowEmpty false: the sync is refused (SyncError naming
/// allowEmpty, a Refused record), the Deployment "requires pruning" and stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_render_is_refused_without_allow_empty() {
    let app = "empty";
    let (f, c1, c2, id, before, r) = empty_render(app, false).await;
    let rec = r.sync.expect("a refused sync is recorded");
    assert_eq!(rec.result, SyncResult::Refused, "{rec:?}");
    assert!(rec.message.contains("allowEmpty") && rec.pruned.is_empty() && rec.applied.is_empty(), "{rec:?}");
    let (st, history) = f.stored(app);
    assert_eq!(st.sync, SyncStatus::OutOfSync);
    let cond = condition(&st, "SyncError");
    assert!(cond.message.contains("allowEmpty") && cond.message.contains("all (1) tracked objects"), "{cond:?}");
    let res = st.resources.iter().find(|x| x.object == id).unwrap_or_else(|| panic!("{st:#?}"));
    assert_eq!(res.reason, "requires pruning");
    assert_eq!((st.revision.as_str(), st.synced_revision.as_str()), (c2.as_str(), c1.as_str()));
    assert_eq!(history[0], rec);
    assert_kept(&before, &f.live(), &[]);
}

/// 2b. argocd-07 variant A, step 3: after the refusal, a person's `plumb sync --prune
/// true` deletes the Deployment (the guard stops automated syncs only, as in Argo CD).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_render_manual_sync_with_prune_deletes() {
    let app = "empty-manual";
    let (f, _, c2, id, _, r) = empty_render(app, false).await;
    assert_eq!(r.sync.unwrap().result, SyncResult::Refused);
    let (code, out, err) = f.cli(&["sync", app, "--local", "--prune", "true"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("pruned  {id}")), "{out}");
    wait_for("Deployment gone", Duration::from_secs(60), || async {
        (!f.live().contains_key("Deployment/solo")).then_some(())
    })
    .await;
    let (st, history) = f.stored(app);
    assert_eq!((st.sync, st.synced_revision.as_str()), (SyncStatus::Synced, c2.as_str()));
    assert_eq!(history[0].pruned, [id]);
}

/// 2c. Empty render, allowEmpty true: the Deployment is pruned; the application is
/// Synced with no resources, and its health is not Missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_render_with_allow_empty_prunes() {
    let app = "empty-allowed";
    let (f, _, c2, id, _, r) = empty_render(app, true).await;
    let rec = r.sync.unwrap();
    assert_eq!((rec.result, rec.pruned.clone()), (SyncResult::Succeeded, vec![id]), "{rec:?}");
    let (st, history) = f.stored(app);
    assert_eq!((st.sync, st.synced_revision.as_str()), (SyncStatus::Synced, c2.as_str()));
    assert!(st.resources.is_empty(), "{st:#?}");
    assert_ne!(st.health, HealthStatus::Missing);
    assert_eq!(history[0], rec);
    wait_for("Deployment gone", Duration::from_secs(60), || async {
        (!f.live().contains_key("Deployment/solo")).then_some(())
    })
    .await;
}

/// 3a. The Git server goes away after a commit that would prune: Unknown with a
/// ComparisonError naming the fetch and the URL; nothing applied or deleted; the
/// revision that runs stays recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_server_down_changes_nothing() {
    let app = "gitdown";
    let mut f = Fault::new(app, &[app], false).await;
    let c1 = f.commit(&[("gitdown/a.yaml", Some(&f.cm("a", "1"))), ("gitdown/b.yaml", Some(&f.cm("b", "1")))], "a, b");
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let before = f.live();
    f.commit(&[("gitdown/a.yaml", Some(&f.cm("a", "2"))), ("gitdown/b.yaml", None)], "change a, drop b");
    f.lab.git.stop();

    let r = f.pass(app).await;
    assert!(r.sync.is_none(), "{:?}", r.sync);
    let (st, history) = f.stored(app);
    assert_eq!(st.sync, SyncStatus::Unknown);
    let cond = condition(&st, "ComparisonError");
    assert!(cond.message.starts_with(&format!("fetch {}", f.lab.url)), "{cond:?}");
    assert_eq!((st.revision.as_str(), st.synced_revision.as_str()), (c1.as_str(), c1.as_str()));
    assert_eq!(history.len(), 1);
    assert_kept(&before, &f.live(), &[]);
}

/// 3b. main is force-pushed to an unrelated history (a new root commit) that changes
/// `a`, adds `d` and lacks `b` and `keep` (`Prune=false`). A rewritten history is a
/// decision for a person: automated sync holds with a `HistoryRewritten` condition
/// naming both commits, writing nothing. Once a person syncs, plumb follows what Git
/// says now and keeps its guards: `a` is updated in place, `d` created, `b` pruned,
/// `keep` kept and reported; the old revision stays readable in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_push_of_unrelated_history_is_followed_with_guards() {
    let app = "rewrite";
    let f = Fault::new(app, &[app], false).await;
    let keep = f.cm_never_pruned("keep", "1");
    let c1 = f.commit(
        &[
            ("rewrite/a.yaml", Some(&f.cm("a", "1"))),
            ("rewrite/b.yaml", Some(&f.cm("b", "1"))),
            ("rewrite/keep.yaml", Some(&keep)),
        ],
        "a, b, keep",
    );
    assert_eq!(f.pass(app).await.sync.unwrap().applied.len(), 3);
    let before = f.live();

    f.edit(&[
        ("rewrite/a.yaml", Some(&f.cm("a", "2"))),
        ("rewrite/b.yaml", None),
        ("rewrite/keep.yaml", None),
        ("rewrite/d.yaml", Some(&f.cm("d", "1"))),
    ]);
    let c2 = f.lab.repo.commit_unrelated("start over").unwrap();
    let held = f.pass(app).await;
    assert!(held.sync.is_none(), "{:?}", held.sync);
    let cond = condition(&held.status, "HistoryRewritten");
    assert!(cond.message.contains(&c2[..7]) && cond.message.contains(&c1[..7]), "{cond:?}");
    assert_kept(&before, &f.live(), &[]);
    let r = f.ctx.run_pass(app, Mode::Manual { prune: true, approve: false }, None).await.unwrap();
    let rec = r.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert_eq!(rec.applied, [f.cm_id("a"), f.cm_id("d")]);
    assert_eq!(rec.pruned, [f.cm_id("b")]);
    let (st, history) = f.stored(app);
    assert_eq!((st.revision.as_str(), st.synced_revision.as_str()), (c2.as_str(), c2.as_str()));
    let kept = st.resources.iter().find(|x| x.object == f.cm_id("keep")).unwrap_or_else(|| panic!("{st:#?}"));
    assert!(kept.reason.contains("Prune=false"), "{kept:?}");
    assert_eq!(history.iter().map(|h| h.revision.as_str()).collect::<Vec<_>>(), [c2.as_str(), c1.as_str()]);

    let after = f.live();
    assert!(!after.contains_key("ConfigMap/b"));
    assert_eq!(after["ConfigMap/a"].1["data"]["value"], "2");
    let without_b: Live = before.into_iter().filter(|(k, _)| k != "ConfigMap/b").collect();
    assert_kept(&without_b, &after, &["ConfigMap/a"]);
    let r = f.pass(app).await;
    assert_eq!((r.status.revision.as_str(), r.status.synced_revision.as_str()), (c2.as_str(), c2.as_str()));
    assert!(r.status.conditions.iter().all(|c| !c.type_.ends_with("Error")), "{:?}", r.status.conditions);
}

/// 3c. (Found by 3b.) An object that Git no longer declares but that a guard keeps
/// (`Prune=false`) is not drift a sync can fix: the application stays OutOfSync
/// ("prune skipped"), and no pass syncs (no empty records) or reports NonConverging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_kept_by_prune_false_is_not_self_heal_drift() {
    let app = "kept";
    let f = Fault::new(app, &[app], false).await;
    f.commit(
        &[("kept/a.yaml", Some(&f.cm("a", "1"))), ("kept/keep.yaml", Some(&f.cm_never_pruned("keep", "1")))],
        "a, keep",
    );
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let c2 = f.commit(&[("kept/keep.yaml", None)], "drop keep from Git");
    let before = f.live();
    for _ in 0..3 {
        let r = f.pass(app).await;
        let stuck = r.status.conditions.iter().find(|c| c.type_ == "NonConverging");
        assert!(r.sync.is_none() && stuck.is_none(), "nothing a sync could do, yet: {:?}\n{stuck:?}", r.sync);
        assert_eq!(r.status.sync, SyncStatus::OutOfSync, "the kept object still differs from Git");
        let kept = r.status.resources.iter().find(|x| x.object == f.cm_id("keep")).unwrap();
        assert!(kept.reason.contains("prune skipped: Prune=false"), "{kept:?}");
        assert_eq!(r.status.synced_revision, c2, "everything Git declares runs at the new revision");
    }
    assert_eq!(f.stored(app).1.len(), 1, "no record beyond the first sync");
    assert_kept(&before, &f.live(), &[]);
}

/// 4. A manifest of a kind the server does not know next to valid objects, with an
/// object removed at the same commit: Unknown, a ComparisonError naming the kind and the
/// file; the removed object is not pruned in that pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kind_holds_prune_back() {
    let app = "unknown-kind";
    let f = Fault::new(app, &[app], false).await;
    let c1 = f.commit(
        &[("unknown-kind/a.yaml", Some(&f.cm("a", "1"))), ("unknown-kind/b.yaml", Some(&f.cm("b", "1")))],
        "a, b",
    );
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let before = f.live();
    let gadget = format!(
        "apiVersion: nope.example.com/v1\nkind: Gadget\nmetadata: {{name: g, namespace: {}}}\nspec: {{}}\n",
        f.ns
    );
    f.commit(&[("unknown-kind/gadget.yaml", Some(&gadget)), ("unknown-kind/b.yaml", None)], "a gadget; drop b");

    let r = f.pass(app).await;
    let (st, history) = f.stored(app);
    assert_eq!(st.sync, SyncStatus::Unknown);
    let cond = condition(&st, "ComparisonError");
    assert!(
        cond.message.contains("Gadget")
            && cond.message.contains("nope.example.com/v1")
            && cond.message.contains("unknown-kind/gadget.yaml"),
        "{cond:?}"
    );
    let b = st.resources.iter().find(|x| x.object == f.cm_id("b")).unwrap_or_else(|| panic!("{st:#?}"));
    assert_eq!(b.reason, "requires pruning");
    if let Some(rec) = &r.sync {
        assert!(rec.result != SyncResult::Succeeded && rec.pruned.is_empty(), "{rec:?}");
        assert!(rec.message.contains("held back"), "{rec:?}");
        assert_eq!(&history[0], rec);
    }
    assert_eq!(st.synced_revision, c1);
    assert_kept(&before, &f.live(), &[]);
}

/// 5. One apply rejected by the API server (a Service of type `Bogus`) in a commit that
/// also changes `a` and removes `b`: `a` is applied, the Service's error is in the
/// SyncError and the Failed record, and `b` is held back, not pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_apply_holds_prune_back() {
    let app = "rejected";
    let f = Fault::new(app, &[app], false).await;
    let c1 =
        f.commit(&[("rejected/a.yaml", Some(&f.cm("a", "1"))), ("rejected/b.yaml", Some(&f.cm("b", "1")))], "a, b");
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let before = f.live();
    let svc = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: {}}}\nspec:\n  type: Bogus\n  selector: {{app: x}}\n  ports: [{{port: 80}}]\n",
        f.ns
    );
    f.commit(
        &[("rejected/a.yaml", Some(&f.cm("a", "2"))), ("rejected/b.yaml", None), ("rejected/svc.yaml", Some(&svc))],
        "change a, drop b, add a bad Service",
    );

    let rec = f.pass(app).await.sync.unwrap();
    assert_eq!(rec.result, SyncResult::Failed, "{rec:?}");
    assert_eq!(rec.applied, [f.cm_id("a")]);
    assert!(rec.pruned.is_empty(), "{rec:?}");
    let svc_id = format!("Service/{}/svc", f.ns);
    assert!(rec.message.contains(&svc_id) && rec.message.contains("Unsupported value: \"Bogus\""), "{rec:?}");
    assert!(rec.message.contains("1 prune(s) held back"), "{rec:?}");
    let (st, history) = f.stored(app);
    assert_eq!(condition(&st, "SyncError").message, rec.message);
    assert_eq!(history[0], rec);
    assert_eq!(st.synced_revision, c1);

    let after = f.live();
    assert_eq!(after["ConfigMap/a"].1["data"]["value"], "2");
    assert!(!after.contains_key("Service/svc"));
    assert_kept(&before, &after, &["ConfigMap/a"]);
}

/// 6. kube-apiserver dies (SIGKILL) while a commit of [`MID_SYNC`] ConfigMaps that also drops
/// `old` is being applied, and comes back on the same port with the same etcd: the pass
/// ends with an error, not a panic; nothing was deleted; after the restart one pass
/// converges. A control plane of its own, so that the other tests keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_stopped_mid_sync_then_restarted() {
    let opts = ControlPlaneOptions { controller_manager: false, scheduler: false, kwok: false };
    let mut cp = tokio::task::block_in_place(|| ControlPlane::start(opts)).unwrap();
    let app = "apiserver";
    let f = Fault::on(&cp, app, &[app], false).await;
    f.commit(
        &[("apiserver/keep.yaml", Some(&f.cm("keep", "1"))), ("apiserver/old.yaml", Some(&f.cm("old", "1")))],
        "keep, old",
    );
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let before = f.live();
    let c2 = f.commit(
        &[("apiserver/old.yaml", None), ("apiserver/big.yaml", Some(&big_commit(&f, MID_SYNC)))],
        "the big commit",
    );

    let ctx = f.ctx.clone();
    let pass = tokio::spawn(async move { ctx.run_pass("apiserver", Mode::Policy, None).await });
    let client = cp.client().await.unwrap();
    wait_for("the first ConfigMap of the commit applied", Duration::from_secs(120), || async {
        (count_big(&client, &f.ns).await > 0).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| cp.stop_apiserver()).unwrap();
    let result = pass.await.expect("the pass must not panic");
    let failed = match &result {
        Err(_) => true,
        Ok(r) => r.status.sync == SyncStatus::Unknown && r.sync.as_ref().is_none_or(|s| s.result == SyncResult::Failed),
    };
    assert!(failed, "the pass must report the lost API server: {result:?}");

    tokio::task::block_in_place(|| cp.start_apiserver()).unwrap();
    let applied = count_big(&client, &f.ns).await;
    eprintln!("kube-apiserver stopped with {applied} of {MID_SYNC} ConfigMaps applied");
    assert!(applied < MID_SYNC, "the API server was stopped only after the whole commit was applied");
    assert_kept(&before, &f.live(), &[]);

    let r = f.pass(app).await;
    let rec = r.sync.as_ref().unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{rec:?}");
    assert_eq!(rec.pruned, [f.cm_id("old")]);
    assert_eq!((r.status.sync, r.status.synced_revision.as_str()), (SyncStatus::Synced, c2.as_str()));
    assert_eq!(count_big(&client, &f.ns).await, MID_SYNC);
    let (st, history) = f.stored(app);
    // what is stored is the status as the pass left it, its sync record capped to the
    // object names a ConfigMap keeps (status::fit)
    let capped = plumb::status::fit::capped_record(rec);
    let expected = plumb::status::AppStatus { last_sync: Some(capped.clone()), ..r.status.clone() };
    assert_eq!(st, expected);
    assert_eq!(history[0], capped);
    let without_old: Live = before.into_iter().filter(|(k, _)| k != "ConfigMap/old").collect();
    assert_kept(&without_old, &f.live(), &[]);
}

/// 7. `plumb sync` is killed (SIGKILL) while applying a commit of [`MID_SYNC`] ConfigMaps, then
/// run again: the second run converges in its one pass; status and every history
/// record parse; nothing was deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plumb_killed_mid_sync_converges_on_restart() {
    let app = "killed";
    let f = Fault::new(app, &[app], false).await;
    let c1 = f.commit(&[("killed/keep.yaml", Some(&f.cm("keep", "1")))], "keep");
    let (code, out, err) = f.cli(&["sync", app, "--local"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let before = f.live();
    let c2 = f.commit(&[("killed/big.yaml", Some(&big_commit(&f, MID_SYNC)))], "the big commit");

    let cache = f.lab.tmp.path().join("cli-cache");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
        .args(["sync", app, "--local", "--config", f.policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()])
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .env("PLUMB_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = f.ctx.cluster.client().clone();
    wait_for("the first ConfigMap of the commit applied", Duration::from_secs(120), || async {
        (count_big(&client, &f.ns).await > 0).then_some(())
    })
    .await;
    assert!(child.try_wait().unwrap().is_none(), "plumb finished before it could be killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let applied = count_big(&client, &f.ns).await;
    eprintln!("plumb killed with {applied} of {MID_SYNC} ConfigMaps applied");
    assert!(applied < MID_SYNC, "plumb was killed only after the whole commit was applied");
    f.stored(app);

    let (code, out, err) = f.cli(&["sync", app, "--local"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Succeeded"), "{out}");
    assert_eq!(count_big(&client, &f.ns).await, MID_SYNC);
    assert_kept(&before, &f.live(), &[]);
    let (st, history) = f.stored(app);
    assert_eq!(
        (st.sync, st.revision.as_str(), st.synced_revision.as_str()),
        (SyncStatus::Synced, c2.as_str(), c2.as_str())
    );
    assert_eq!((history[0].revision.as_str(), history[0].result), (c2.as_str(), SyncResult::Succeeded));
    for h in &history {
        assert!(h.revision == c1 || h.revision == c2, "{h:?}");
        assert!(!h.finished_at.is_empty() && h.result == SyncResult::Succeeded, "{h:?}");
    }
    let (code, out, err) = f.cli(&["diff", app]);
    assert_eq!(code, 0, "converged: no differences left\n{out}\n{err}");
}

/// flux-07: ConfigMap `feature-flags` moves from application A's directory to B's in one
/// commit; the passes after it run in the given order, then once more each. It is never
/// deleted (same UID throughout), ends tracked by B, and only B lists it.
async fn moved_object_is_never_pruned(name: &str, a_first: bool) {
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    let f = Fault::new(name, &[&a, &b], false).await;
    let flags = f.cm("feature-flags", "true");
    let (from, to) = (format!("{a}/flags.yaml"), format!("{b}/flags.yaml"));
    f.commit(
        &[
            (&from, Some(&flags)),
            (&format!("{a}/a-only.yaml"), Some(&f.cm("a-only", "1"))),
            (&format!("{b}/b-only.yaml"), Some(&f.cm("b-only", "1"))),
        ],
        "two applications",
    );
    assert_eq!(f.pass(&a).await.status.sync, SyncStatus::Synced);
    assert_eq!(f.pass(&b).await.status.sync, SyncStatus::Synced);
    let before = f.live();
    f.commit(&[(&from, None), (&to, Some(&flags))], "move feature-flags from A to B");

    let order = if a_first { [&a, &b, &a, &b] } else { [&b, &a, &b, &a] };
    for app in order {
        let r = f.pass(app).await;
        let pruned = r.sync.as_ref().map(|s| s.pruned.clone()).unwrap_or_default();
        assert!(!pruned.contains(&f.cm_id("feature-flags")), "{app} pruned the moved object: {:?}", r.sync);
        assert_kept(&before, &f.live(), &[]);
    }
    let cm: Value =
        serde_json::from_str(&f.kubectl(&["-n", &f.ns, "get", "configmap", "feature-flags", "-o", "json"])).unwrap();
    assert_eq!(
        cm["metadata"]["annotations"]["plumb.dev/tracking-id"],
        format!("{b}:/ConfigMap:{}/feature-flags", f.ns)
    );
    assert_eq!(cm["metadata"]["labels"]["plumb.dev/app"], b.as_str());
    let lists = |st: &AppStatus| st.resources.iter().any(|r| r.object == f.cm_id("feature-flags"));
    let (sa, sb) = (f.stored(&a).0, f.stored(&b).0);
    assert!(!lists(&sa) && lists(&sb), "only B lists it:\n{sa:#?}\n{sb:#?}");
    assert_eq!((sa.sync, sb.sync), (SyncStatus::Synced, SyncStatus::Synced));
}

/// 8a. flux-07 order 1: the new owner (B) syncs first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_object_survives_when_the_new_owner_syncs_first() {
    moved_object_is_never_pruned("move-b-first", false).await;
}

/// 8b. flux-07 order 2: the old owner (A) syncs first; it must see that B's desired
/// set at the same commit claims the object, and hand it over instead of pruning it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_object_survives_when_the_old_owner_syncs_first() {
    moved_object_is_never_pruned("move-a-first", true).await;
}

/// 9. A ConfigMap `intruder` made by hand with the annotations and labels of a tracked
/// one (its tracking-id names `real`, its label the application): in a pass that
/// prunes, it is neither pruned nor listed as the application's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copied_tracking_id_is_never_pruned() {
    let app = "intruder";
    let f = Fault::new(app, &[app], false).await;
    f.commit(
        &[("intruder/real.yaml", Some(&f.cm("real", "1"))), ("intruder/other.yaml", Some(&f.cm("other", "1")))],
        "real, other",
    );
    assert_eq!(f.pass(app).await.status.sync, SyncStatus::Synced);
    let real: Value =
        serde_json::from_str(&f.kubectl(&["-n", &f.ns, "get", "configmap", "real", "-o", "json"])).unwrap();
    let intruder = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "intruder", "namespace": f.ns,
                     "annotations": real["metadata"]["annotations"], "labels": real["metadata"]["labels"]},
        "data": {"value": "made by hand"}});
    assert_eq!(intruder["metadata"]["annotations"]["plumb.dev/tracking-id"], format!("{app}:/ConfigMap:{}/real", f.ns));
    let file = f.lab.tmp.path().join("intruder.json");
    std::fs::write(&file, intruder.to_string()).unwrap();
    f.kubectl(&["create", "-f", file.to_str().unwrap()]);
    let before = f.live();

    f.commit(&[("intruder/other.yaml", None)], "drop other");
    for _ in 0..2 {
        let r = f.pass(app).await;
        if let Some(rec) = &r.sync {
            assert_eq!(rec.pruned, [f.cm_id("other")], "{rec:?}");
        }
        let st = f.stored(app).0;
        assert_eq!(st.sync, SyncStatus::Synced, "{st:#?}");
        assert_eq!(st.resources.iter().map(|r| r.object.as_str()).collect::<Vec<_>>(), [f.cm_id("real")]);
    }
    assert_eq!(f.stored(app).1[0].pruned, [f.cm_id("other")]);
    let without_other: Live = before.into_iter().filter(|(k, _)| k != "ConfigMap/other").collect();
    assert_kept(&without_other, &f.live(), &[]);
    assert!(!f.live().contains_key("ConfigMap/other"));
}

/// argocd-08: an I/O failure while reading the commit must never shrink the desired
/// state. The blob of `config.yaml` at the new commit is made unreadable in plumb's
/// mirror (commit and tree intact, as when the file exists in Git but reading it fails):
/// the pass is Unknown with the error, nothing is applied or pruned (the ConfigMap a
/// renderer skipping the file would drop stays, the Deployment keeps 4 replicas). With
/// the fault gone the new commit syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_file_never_shrinks_the_desired_state_argocd_08() {
    let app = "payments";
    let f = Fault::new(app, &[app], false).await;
    let live = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/cases/argocd-08/live.yaml"))
        .unwrap()
        .replace("namespace: payments", &format!("namespace: {}", f.ns));
    let (deployment, config) = live.split_once("\n---\n").unwrap();
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.contains("argocd.argoproj.io") && !l.contains("annotations:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (deployment, config) = (strip(deployment), strip(config));
    let c1 = f.commit(
        &[("payments/deployment.yaml", Some(&deployment)), ("payments/config.yaml", Some(&config))],
        "payments",
    );
    assert_eq!(f.pass(app).await.sync.unwrap().result, SyncResult::Succeeded);
    let changed = config.replace("PROVIDER_MODE: live", "PROVIDER_MODE: live\n  RETRIES: \"3\"");
    let c2 = f.commit(&[("payments/config.yaml", Some(&changed))], "payments: retries");
    // fetch the new commit into the mirror without syncing
    f.ctx.run_pass(app, Mode::CompareOnly, None).await.unwrap();
    let before = f.live();

    // the fault: the new blob cannot be read (objects unpacked, that one removed)
    let cache = f.lab.tmp.path().join("cache");
    let mirror = std::fs::read_dir(&cache).unwrap().next().unwrap().unwrap().path();
    let blob = git(&f.lab.tmp.path().join(format!("{app}.git")), &["rev-parse", &format!("{c2}:payments/config.yaml")]);
    let packs = mirror.join("objects/pack");
    let moved = f.lab.tmp.path().join("packs");
    std::fs::create_dir_all(&moved).unwrap();
    for e in std::fs::read_dir(&packs).unwrap() {
        let p = e.unwrap().path();
        std::fs::rename(&p, moved.join(p.file_name().unwrap())).unwrap();
    }
    for e in std::fs::read_dir(&moved).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pack") {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&mirror)
                .arg("unpack-objects")
                .stdin(std::fs::File::open(&p).unwrap())
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    std::fs::remove_file(mirror.join("objects").join(&blob[..2]).join(&blob[2..])).unwrap();

    let fresh = context_for(&f.policy, &cache, false).await; // no remembered render
    let r = fresh.run_pass(app, Mode::Policy, None).await.unwrap();
    assert!(r.sync.is_none(), "no apply, no prune: {:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    let cond = condition(&r.status, "ComparisonError");
    assert!(cond.message.contains(&blob[..7]) || cond.message.contains("object not found"), "{cond:?}");
    assert_eq!(r.status.synced_revision, c1, "what runs is still the last good revision");
    assert_ne!(r.status.health, HealthStatus::Unknown, "health is still assessed from live");
    assert_kept(&before, &f.live(), &[]);
    assert_eq!(f.kubectl(&["-n", &f.ns, "get", "deployment", "payments", "-o", "jsonpath={.spec.replicas}"]), "4");

    // fault removed (a fresh mirror): the full render syncs
    std::fs::remove_dir_all(&cache).unwrap();
    let healed = context_for(&f.policy, &cache, false).await;
    let rec = healed.run_pass(app, Mode::Policy, None).await.unwrap().sync.unwrap();
    assert_eq!(rec.result, SyncResult::Succeeded, "{}", rec.message);
    assert_eq!(rec.revision, c2);
    assert!(rec.pruned.is_empty());
    assert_eq!(f.kubectl(&["-n", &f.ns, "get", "configmap", "payments-config", "-o", "jsonpath={.data.RETRIES}"]), "3");
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
