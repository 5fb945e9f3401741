//! `deploy/` against the real control plane: the kustomize base and the prod overlay
//! pass server-side validation, the Pod they make is admitted under the restricted Pod
//! Security Standard, and `plumb serve` running with exactly the ServiceAccount token of
//! each RBAC profile syncs, self-heals and prunes; under least-privilege a destination
//! the profile does not bind shows the missing right as a SyncError condition; and each
//! profile grants plumb's ServiceAccount exactly its rights (`kubectl auth can-i --list`).
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use support::{Lab, control_plane, kubectl, wait_for};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");

fn kubectl_ok(args: &[&str]) -> Result<String, String> {
    control_plane().kubectl(args).map_err(|e| format!("{e:#}"))
}

/// The namespaces both kustomizations create, plumb's ServiceAccount and its CRD (a
/// server-side dry-run persists nothing, so namespaced objects would otherwise be
/// checked against a namespace that does not exist yet, and a Pod against a missing
/// ServiceAccount; and the dry-run's create of the CRD would race the other tests'
/// real apply of it: AlreadyExists). Once per test binary.
fn namespaces() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for ns in ["plumb-system", "web"] {
            if kubectl_ok(&["get", "namespace", ns]).is_err() {
                kubectl(&["create", "namespace", ns]);
            }
        }
        if kubectl_ok(&["-n", "plumb-system", "get", "serviceaccount", "plumb"]).is_err() {
            kubectl(&["-n", "plumb-system", "create", "serviceaccount", "plumb"]);
        }
        kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &format!("{DEPLOY}/base/crd.yaml")]);
    });
}

#[test]
fn base_and_prod_overlay_pass_server_side_dry_run() {
    // apart from the tests that apply the overlays for real: a live PodDisruptionBudget
    // of the prod overlay, applied client-side (`minAvailable`), would merge into the
    // sharded overlay's dry-run (`maxUnavailable`) and make it invalid
    let _profiles = PROFILES.blocking_lock();
    namespaces();
    kubectl(&["-n", "plumb-system", "delete", "poddisruptionbudget", "plumb", "--ignore-not-found"]);
    for dir in ["", "/overlays/prod", "/overlays/sharded"] {
        let path = format!("{DEPLOY}{dir}");
        let out = kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-k", &path, "--dry-run=server"])
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(out.contains("deployment.apps/plumb") && out.contains("(server dry run)"), "{out}");
        assert!(out.contains("service/plumb-webhook") && out.contains("service/plumb-internal"), "{out}");
    }
    let prod = kubectl(&["kustomize", &format!("{DEPLOY}/overlays/prod")]);
    assert!(prod.contains("kind: PodDisruptionBudget") && prod.contains("replicas: 2"), "{prod}");
    let sharded = kubectl(&["kustomize", &format!("{DEPLOY}/overlays/sharded")]);
    for part in ["replicas: 3", "- --shards=6", "- --leader-elect", "podAntiAffinity:", "maxUnavailable: 1"] {
        assert!(sharded.contains(part), "{part}: {sharded}");
    }
    assert!(!sharded.contains("minAvailable"), "{sharded}");
    let base = kubectl(&["kustomize", DEPLOY]);
    assert!(!base.contains("kind: PodDisruptionBudget"), "one replica: no PDB");
    assert!(!base.contains("change-me") && !prod.contains("change-me"));
}

/// A kubeconfig for the control plane with a fresh token of plumb's ServiceAccount
/// (TokenRequest through `kubectl create token`).
fn service_account_kubeconfig(dir: &Path) -> PathBuf {
    let token = kubectl(&["-n", "plumb-system", "create", "token", "plumb", "--duration", "1h"]);
    let admin = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
    let (head, _) = admin.split_once("    token: ").unwrap();
    let (_, tail) = admin.split_once("    token: ").unwrap().1.split_once('\n').unwrap();
    let text = format!("{head}    token: {}\n{tail}", token.trim());
    let path = dir.join("plumb-sa.kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_of(app: &str) -> serde_json::Value {
    let text = kubectl_ok(&["-n", "plumb-system", "get", "applications.plumb.dev", app, "-o", "jsonpath={.status}"])
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

/// Under `profile` (applied with `kubectl apply -k`), `plumb serve` with only the
/// ServiceAccount's token: a ConfigMap is created, a hand edit is reverted (selfHeal),
/// and a file removed from Git is pruned.
async fn sync_heal_prune_as_service_account(profile: &str, kustomization: &str) -> String {
    let app = format!("rbac-{profile}");
    kubectl(&["apply", "-k", kustomization]);
    let lab = Lab::new(&app);
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: web}}\ndata: {{k: v}}\n")
    };
    lab.repo.write("app/keep.yaml", &cm(&format!("{app}-keep"))).unwrap();
    lab.repo.write("app/gone.yaml", &cm(&format!("{app}-gone"))).unwrap();
    lab.repo
        .write("denied/cm.yaml", &cm(&format!("{app}-denied")).replace("namespace: web", "namespace: web-denied"))
        .unwrap();
    lab.repo.commit("first").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-system}}\nrepositories:\n  - {{name: r, url: {}, webhookSecretFile: webhook-secret}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true}}\n    reconcileInterval: 5s\napplications:\n  - {{name: {app}, repository: r, revision: main, path: app, namespace: web, environment: e}}\n  - {{name: {app}-denied, repository: r, revision: main, path: denied, namespace: web-denied, environment: e}}\n",
            lab.url
        ),
    );
    let kubeconfig = service_account_kubeconfig(lab.tmp.path());
    let who = Command::new("kubectl")
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&who.stdout), "system:serviceaccount:plumb-system:plumb");
    let log = lab.tmp.path().join("serve.log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--internal-listen",
                "127.0.0.1:0",
                "--probe-listen",
                "127.0.0.1:0",
            ])
            .args(["--leader-elect", "--lease-name", &app, "--config"])
            .arg(&policy)
            .arg("--cache-dir")
            .arg(lab.tmp.path().join("cache"))
            .env("KUBECONFIG", &kubeconfig)
            .env("PLUMB_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let keep = format!("{app}-keep");
    wait_for(&format!("{profile}: the sync ({})", logs()), Duration::from_secs(90), || async {
        (status_of(&app)["sync"] == "Synced").then_some(())
    })
    .await;
    assert_eq!(kubectl(&["-n", "web", "get", "configmap", &keep, "-o", "jsonpath={.data.k}"]), "v");

    kubectl(&["-n", "web", "patch", "configmap", &keep, "--type=merge", "-p", r#"{"data":{"k":"by-hand"}}"#]);
    wait_for(&format!("{profile}: selfHeal"), Duration::from_secs(60), || async {
        (kubectl(&["-n", "web", "get", "configmap", &keep, "-o", "jsonpath={.data.k}"]) == "v").then_some(())
    })
    .await;

    lab.repo.remove("app/gone.yaml").unwrap();
    lab.repo.commit("second").unwrap();
    let gone = format!("{app}-gone");
    wait_for(&format!("{profile}: prune ({})", logs()), Duration::from_secs(60), || async {
        (!kubectl(&["-n", "web", "get", "configmaps", "-o", "name"]).contains(&gone)).then_some(())
    })
    .await;
    app
}

/// The tests that apply an RBAC profile to plumb's ServiceAccount or an overlay for real,
/// and the overlays' dry-run, one at a time.
static PROFILES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Both profiles, one after the other (they bind the same ServiceAccount).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rbac_profile_syncs_heals_and_prunes_as_plumbs_service_account() {
    let _profiles = PROFILES.lock().await;
    namespaces();
    if kubectl_ok(&["get", "namespace", "web-denied"]).is_err() {
        kubectl(&["create", "namespace", "web-denied"]);
    }
    let app = sync_heal_prune_as_service_account("cluster-admin", DEPLOY).await;
    assert_eq!(status_of(&format!("{app}-denied"))["sync"], "Synced", "cluster-admin may write anywhere");
    kubectl(&["delete", "clusterrolebinding", "plumb-cluster-admin"]);
    let app = sync_heal_prune_as_service_account("least-privilege", &format!("{DEPLOY}/overlays/prod")).await;
    // A destination the profile does not bind: the missing right is in the status.
    let denied = wait_for("the missing right in the status", Duration::from_secs(60), || async {
        let st = status_of(&format!("{app}-denied"));
        st.to_string().contains("forbidden").then_some(st)
    })
    .await;
    println!("least-privilege, unbound namespace: {denied}");
    assert_ne!(denied["sync"], "Synced", "{denied}");
    // Nothing but the profile's rights: the identity may not write outside `web`.
    let kubeconfig = service_account_kubeconfig(&std::env::temp_dir());
    let can = |args: &[&str]| {
        let out = Command::new("kubectl")
            .args(["--kubeconfig", kubeconfig.to_str().unwrap(), "auth", "can-i"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(can(&["create", "configmaps", "-n", "web"]), "yes");
    assert_eq!(can(&["create", "configmaps", "-n", "default"]), "no");
    assert_eq!(can(&["create", "namespaces"]), "no");
    assert_eq!(can(&["create", "leases.coordination.k8s.io", "-n", "plumb-system"]), "yes");
    let _ = std::fs::remove_file(kubeconfig);
}

/// plumb's ServiceAccount as the API server sees it.
const PLUMB: &str = "system:serviceaccount:plumb-system:plumb";

/// The rules `user` holds in namespace `ns` (`kubectl auth can-i --list`), one line per
/// rule (`resources | non-resource URLs | resource names | verbs`), without those every
/// ServiceAccount holds (those of an account nothing binds: discovery, self reviews).
fn rights(user: &str, ns: &str) -> std::collections::BTreeSet<String> {
    let rows = |who: &str| -> std::collections::BTreeSet<String> {
        let out = kubectl(&["auth", "can-i", "--list", "-n", ns, "--as", who]);
        out.lines()
            .skip(1)
            .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect::<Vec<_>>().join(" | "))
            .collect()
    };
    let everyone = rows("system:serviceaccount:plumb-system:bound-to-nothing");
    rows(user).difference(&everyone).cloned().collect()
}

fn can(user: &str, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .args(["--kubeconfig", control_plane().kubeconfig.to_str().unwrap(), "auth", "can-i", "--as", user])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Under least-privilege (with the impersonation block for `web/deployer` added, as its
/// kustomization says to when a policy names that account), plumb holds exactly: in
/// its destination `web`, every kind there and impersonating `deployer` alone; cluster-
/// wide, Namespaces, StorageClasses, its own resource definition, the rollback-override
/// and allow-unverified admission policies and their bindings (by name), and the token and access reviews of its
/// internal listener; in plumb-system, what the base's Role
/// gives. It cannot read Secrets outside its namespaces, impersonate another account,
/// or reach a node (`nodes/proxy`). Under cluster-admin it may do everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rbac_profile_grants_plumb_exactly_its_rights() {
    let _profiles = PROFILES.lock().await;
    namespaces();
    kubectl(&["apply", "-k", DEPLOY]);
    assert_eq!(can(PLUMB, &["*", "*", "--all-namespaces"]), "yes", "cluster-admin: everything");
    kubectl(&["delete", "clusterrolebinding", "plumb-cluster-admin", "--ignore-not-found"]);
    kubectl(&["apply", "-k", &format!("{DEPLOY}/overlays/prod")]);
    let impersonate = format!("{DEPLOY}/profiles/least-privilege/impersonate.yaml");
    kubectl(&["apply", "-f", &impersonate]);
    let lines = |rows: &[&str]| rows.iter().map(|r| (*r).to_string()).collect::<std::collections::BTreeSet<_>>();
    let cluster_wide = [
        "customresourcedefinitions.apiextensions.k8s.io | [] | [applications.plumb.dev] | [get]",
        "namespaces | [] | [] | [get list watch]",
        "storageclasses.storage.k8s.io | [] | [] | [get]",
        "validatingadmissionpolicies.admissionregistration.k8s.io | [] | [plumb-allow-unverified] | [get]",
        "validatingadmissionpolicies.admissionregistration.k8s.io | [] | [plumb-rollback-override] | [get]",
        "validatingadmissionpolicybindings.admissionregistration.k8s.io | [] | [plumb-allow-unverified] | [get]",
        "validatingadmissionpolicybindings.admissionregistration.k8s.io | [] | [plumb-rollback-override] | [get]",
        "subjectaccessreviews.authorization.k8s.io | [] | [] | [create]",
        "tokenreviews.authentication.k8s.io | [] | [] | [create]",
    ];
    let in_web = [
        &cluster_wide[..],
        &[
            "*.* | [] | [] | [get list watch create update patch delete]",
            "serviceaccounts | [] | [deployer] | [impersonate]",
        ],
    ]
    .concat();
    assert_eq!(rights(PLUMB, "web"), lines(&in_web), "in the destination");
    assert_eq!(rights(PLUMB, "default"), lines(&cluster_wide), "outside the destinations");
    let own = [
        &cluster_wide[..],
        &[
            "applications.plumb.dev | [] | [] | [get list watch create update patch delete]",
            "applications.plumb.dev/status | [] | [] | [get update patch]",
            "configmaps | [] | [] | [get list watch delete]",
            "events | [] | [] | [create patch update]",
            "events.events.k8s.io | [] | [] | [create patch update]",
            "leases.coordination.k8s.io | [] | [] | [get list watch create update patch delete]",
            "secrets | [] | [] | [get list watch create]",
            "secrets | [] | [plumb-mask-key] | [get]",
        ],
    ]
    .concat();
    assert_eq!(rights(PLUMB, "plumb-system"), lines(&own), "in its own namespace");
    for (args, answer) in [
        (&["get", "secrets", "-n", "web"][..], "yes"),
        (&["get", "secrets", "-n", "default"], "no"),
        (&["list", "secrets", "--all-namespaces"], "no"),
        (&["get", "secrets", "-n", "kube-system"], "no"),
        (&["impersonate", "serviceaccounts/deployer", "-n", "web"], "yes"),
        (&["impersonate", "serviceaccounts/default", "-n", "web"], "no"),
        (&["impersonate", "serviceaccounts/namespace-controller", "-n", "kube-system"], "no"),
        (&["get", "nodes", "--subresource=proxy"], "no"),
        (&["create", "nodes", "--subresource=proxy"], "no"),
        (&["create", "configmaps", "-n", "default"], "no"),
        (&["create", "namespaces"], "no"),
        (&["create", "clusterrolebindings"], "no"),
    ] {
        assert_eq!(can(PLUMB, args), answer, "can-i {args:?}");
    }
    kubectl(&["delete", "-f", &impersonate]);
}

/// The Pod the base makes is admitted in plumb-system, whose namespace enforces the
/// restricted Pod Security Standard (a non-compliant Pod is refused by admission).
#[test]
fn the_pod_meets_the_restricted_pod_security_standard() {
    namespaces();
    let rendered = kubectl(&["kustomize", DEPLOY]);
    assert!(rendered.contains("pod-security.kubernetes.io/enforce: restricted"));
    let template: serde_json::Value = {
        let out = Command::new("kubectl")
            .args(["--kubeconfig", control_plane().kubeconfig.to_str().unwrap(), "apply", "-k", DEPLOY])
            .args(["--dry-run=client", "-o", "json"])
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        list["items"].as_array().unwrap().iter().find(|o| o["kind"] == "Deployment").unwrap()["spec"]["template"]
            .clone()
    };
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "plumb-pss-check", "namespace": "plumb-system", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    });
    kubectl(&["label", "namespace", "plumb-system", "pod-security.kubernetes.io/enforce=restricted", "--overwrite"]);
    let file = std::env::temp_dir().join(format!("plumb-pss-{}.json", std::process::id()));
    std::fs::write(&file, pod.to_string()).unwrap();
    let out = kubectl_ok(&["apply", "--dry-run=server", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(out.as_ref().is_ok_and(|o| o.contains("created (server dry run)")), "{out:?}");
    // The check can fail: the same Pod with root allowed is refused.
    let mut bad = pod.clone();
    bad["spec"]["securityContext"]["runAsNonRoot"] = serde_json::json!(false);
    bad["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = serde_json::json!(false);
    let file = std::env::temp_dir().join(format!("plumb-pss-bad-{}.json", std::process::id()));
    std::fs::write(&file, bad.to_string()).unwrap();
    let out = kubectl_ok(&["apply", "--dry-run=server", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(out.as_ref().is_err_and(|e| e.contains("restricted")), "{out:?}");
}

/// The ClusterRoles `deploy/` ships for people: with `plumb-viewer` the CLI reads the
/// Application resources and cannot ask for anything; with `plumb-operator` it may
/// pause an application. RBAC on the resource is the permission model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_read_with_plumb_viewer_and_request_with_plumb_operator() {
    namespaces();
    let ns = "plumb-people";
    let roles = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/role.yaml")).unwrap();
    for doc in roles.split("\n---\n").filter(|d| d.contains("name: plumb-viewer") || d.contains("name: plumb-operator"))
    {
        support::kubectl_apply(doc);
    }
    let admin = plumb::cluster::client(Some(&control_plane().kubeconfig)).await.unwrap();
    let store = plumb::status::store::Store::new(admin, ns);
    store.ensure_namespace().await.unwrap();
    let status = plumb::status::AppStatus { app: "web".into(), environment: "e".into(), ..Default::default() };
    store.save(&status, &[]).await.unwrap();
    let admin_text = std::fs::read_to_string(&control_plane().kubeconfig).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig_of = |who: &str| {
        let token = support::service_account_token(ns, who);
        let (head, rest) = admin_text.split_once("    token: ").unwrap();
        let (_, tail) = rest.split_once('\n').unwrap();
        let path = dir.path().join(format!("{who}.kubeconfig"));
        std::fs::write(&path, format!("{head}    token: {token}\n{tail}")).unwrap();
        path
    };
    let (viewer, operator) = (kubeconfig_of("viewer"), kubeconfig_of("operator"));
    kubectl(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "viewer",
        "--clusterrole=plumb-viewer",
        &format!("--serviceaccount={ns}:viewer"),
    ]);
    kubectl(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "operator",
        "--clusterrole=plumb-operator",
        &format!("--serviceaccount={ns}:operator"),
    ]);
    let plumb = |kubeconfig: &Path, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
            .args(args)
            .args(["-n", ns, "--kubeconfig"])
            .arg(kubeconfig)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, out, err) = plumb(&viewer, &["status", "-o", "json"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("\"web\""), "{out}");
    let (code, out, err) = plumb(&viewer, &["suspend", "web", "--for", "1h", "--reason", "r"]);
    assert_ne!(code, Some(0), "a viewer may not pause: {out}\n{err}");
    assert!(err.contains("forbidden") || err.contains("403"), "{err}");
    assert!(!kubectl(&["-n", ns, "get", "applications.plumb.dev", "web", "-o", "yaml"]).contains("plumb.dev/suspend"));
    let (code, out, err) = plumb(&operator, &["suspend", "web", "--for", "1h", "--reason", "maintenance"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let annotations =
        kubectl(&["-n", ns, "get", "applications.plumb.dev", "web", "-o", "jsonpath={.metadata.annotations}"]);
    assert!(
        annotations.contains("maintenance") && annotations.contains("system:serviceaccount:plumb-people:operator"),
        "{annotations}"
    );

    // a name nobody serves: exit 1 with one short line for either role, at once, and
    // no request creates an application (a phantom that no server would answer)
    for who in [&viewer, &operator] {
        for args in [&["get", "nope"][..], &["history", "nope"], &["events", "nope"]] {
            let (code, out, err) = plumb(who, args);
            assert_eq!(code, Some(1), "{args:?}: {out}\n{err}");
            assert!(err.contains("no status of application `nope`") && err.len() < 300, "{args:?}: {err}");
        }
    }
    let started = std::time::Instant::now();
    for args in [
        &["sync", "nope"][..],
        &["refresh", "nope"],
        &["suspend", "nope", "--for", "1h", "--reason", "r"],
        &["resume", "nope"],
    ] {
        let (code, out, err) = plumb(&operator, args);
        assert_eq!(code, Some(1), "{args:?}: {out}\n{err}");
        assert!(err.contains("no status of application `nope`"), "{args:?}: {err}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "{:?}", started.elapsed());
    let listed = kubectl(&["-n", ns, "get", "applications.plumb.dev", "-o", "name"]);
    assert!(!listed.contains("nope"), "{listed}");
    let (code, out, err) = support::plumb_cli(&["status", "-n", "nowhere"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("no applications in namespace nowhere"), "{err}");
}

/// A definition of an earlier revision (no `plumb.dev/definition-revision` label, no
/// short names) is replaced when plumb prepares its status store: `kubectl get
/// plumbapps` then names plumb's kind alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_application_definition_is_replaced() {
    let _profiles = PROFILES.lock().await;
    let admin = plumb::cluster::client(Some(&control_plane().kubeconfig)).await.unwrap();
    let store = plumb::status::store::Store::new(admin, "plumb-definition");
    store.ensure_definition().await.unwrap();
    let older = plumb::status::store::CRD_YAML
        .replace(", plumb.dev/definition-revision: \"2\"", "")
        .replace("    shortNames: [plumbapp, plumbapps]\n", "");
    assert_ne!(older, plumb::status::store::CRD_YAML);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("older.yaml");
    std::fs::write(&file, older).unwrap();
    kubectl(&["replace", "-f", file.to_str().unwrap()]);
    let labels = |path: &str| kubectl(&["get", "crd", "applications.plumb.dev", "-o", &format!("jsonpath={path}")]);
    assert_eq!(labels("{.spec.names.shortNames}"), "");
    store.ensure_definition().await.unwrap();
    assert_eq!(labels("{.metadata.labels.plumb\\.dev/definition-revision}"), "2");
    assert_eq!(labels("{.spec.names.shortNames}"), r#"["plumbapp","plumbapps"]"#);
    wait_for("kubectl get plumbapps", Duration::from_secs(30), || async {
        control_plane().kubectl(&["get", "plumbapps", "-A"]).ok()
    })
    .await;
}
