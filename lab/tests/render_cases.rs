//! Plain-YAML parity with kubectl (issue 13), on the real control plane: the shared
//! cases werf-01 (empty annotations/labels), flux-13 (typed lists), argocd-16 (a
//! submodule inside the application path) and k8s-05 (server-set metadata in Git). Each
//! test asserts the case's `expected.md`: what `plumb diff` says and exits with, what is
//! (and is not) deleted, and that surviving objects keep their UID.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;

use plumb::{
    compare::SyncStatus,
    reconcile::{Mode, PassReport},
    status::SyncResult,
};
use support::*;

const AUTO: &str = "syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}";

fn case_file(case: &str, file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases").join(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The case's desired.yaml with its namespace renamed to `ns`.
fn desired(case: &str, ns: &str) -> String {
    case_file(case, "desired.yaml").replace("namespace: gitops-lab", &format!("namespace: {ns}"))
}

fn uid(ns: &str, kind: &str, name: &str) -> String {
    kubectl(&["-n", ns, "get", kind, name, "-o", "jsonpath={.metadata.uid}"])
}

fn exists(ns: &str, kind: &str, name: &str) -> bool {
    !kubectl(&["-n", ns, "get", kind, name, "--ignore-not-found", "-o", "name"]).is_empty()
}

/// `plumb diff` of the application: (exit code, stdout, stderr).
fn diff(app: &App) -> (i32, String, String) {
    plumb_cli(&["diff", &app.name, "--config", app.policy.to_str().unwrap()])
}

/// The objects a comparison lists as differing, with their reasons.
fn differing(r: &PassReport) -> Vec<String> {
    r.diffs().iter().filter(|d| !d.reason.is_empty()).map(|d| format!("{} ({})", d.object, d.reason)).collect()
}

/// werf-01: `annotations:` / `labels:` written empty still get plumb's marks, so the
/// object is found and pruned once Git drops it; the other object is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn werf_01_empty_annotations_and_labels_keep_the_ownership_marks() {
    let ns = "rc-werf01";
    let text = desired("werf-01", ns);
    assert!(text.contains("  annotations:\n  labels:\n"), "the case changed; revisit this test");
    let app = App::new("plumb-render", "rc-werf-01", ns, AUTO, &[("config.yaml", &text)]).await;
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    let marks = kubectl(&[
        "-n",
        ns,
        "get",
        "cm",
        "web-flags",
        "-o",
        "jsonpath={.metadata.annotations.plumb\\.dev/tracking-id} {.metadata.labels.plumb\\.dev/app}",
    ]);
    assert_eq!(marks, format!("rc-werf-01:/ConfigMap:{ns}/web-flags rc-werf-01"));
    assert_eq!(diff(&app).0, 0, "nothing differs after the sync");
    let settings_uid = uid(ns, "cm", "web-settings");

    // commit 2: web-flags leaves Git
    let first = text.split("\n---\n").next().unwrap().to_string();
    app.commit(&[("config.yaml", &first)], &[]);
    let (code, out, err) = diff(&app);
    assert_eq!(code, 1, "{out}{err}");
    let listed: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(listed, [format!("# ConfigMap/{ns}/web-flags (requires pruning)")], "{out}");
    let r = app.pass(Mode::Policy).await;
    let rec = r.sync.expect("the automated sync");
    assert_eq!(rec.pruned, [format!("ConfigMap/{ns}/web-flags")], "{rec:?}");
    assert!(!exists(ns, "cm", "web-flags"), "pruned");
    assert_eq!(uid(ns, "cm", "web-settings"), settings_uid, "web-settings untouched");
    assert_eq!(app.pass(Mode::CompareOnly).await.status.sync, SyncStatus::Synced);

    // variants: only one of the two maps empty — both marks still land
    for (name, meta) in [("only-labels", "  labels:\n"), ("only-annotations", "  annotations:\n")] {
        let doc = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{meta}data: {{a: b}}\n"
        );
        app.commit(&[(&format!("{name}.yaml"), &doc)], &[]);
        app.pass(Mode::Policy).await;
        let ann =
            kubectl(&["-n", ns, "get", "cm", name, "-o", "jsonpath={.metadata.annotations.plumb\\.dev/tracking-id}"]);
        let label = kubectl(&["-n", ns, "get", "cm", name, "-o", "jsonpath={.metadata.labels.plumb\\.dev/app}"]);
        assert_eq!((ann, label), (format!("rc-werf-01:/ConfigMap:{ns}/{name}"), "rc-werf-01".to_string()), "{name}");
    }
}

/// flux-13: `RoleList`, `ConfigMapList` and `List` documents are expanded; the four
/// objects are created, then nothing differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_13_typed_lists_are_expanded() {
    let ns = "rc-flux13";
    let app = App::new("plumb-render", "rc-flux-13", ns, AUTO, &[("rbac.yaml", &desired("flux-13", ns))]).await;
    kubectl(&["create", "namespace", ns]);
    let (code, out, err) = diff(&app);
    assert_eq!(code, 1, "{out}{err}");
    let mut listed: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        [
            format!("# ConfigMap/{ns}/web-settings (missing)"),
            format!("# Role.rbac.authorization.k8s.io/{ns}/web-leases (missing)"),
            format!("# Role.rbac.authorization.k8s.io/{ns}/web-reader (missing)"),
            format!("# ServiceAccount/{ns}/web (missing)"),
        ],
        "{out}"
    );
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| (s.result, s.applied.len())), Some((SyncResult::Succeeded, 4)), "{:?}", r.sync);
    assert!(exists(ns, "role", "web-reader") && exists(ns, "role", "web-leases") && exists(ns, "sa", "web"));
    assert_eq!(diff(&app).0, 0);

    // a *List without items stays an error naming the file and document; nothing is pruned
    app.commit(&[("broken.yaml", "apiVersion: v1\nkind: SecretList\n")], &[]);
    let (code, _, err) = diff(&app);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("app/broken.yaml: document 1: kind SecretList has no `items`"), "{err}");
    let r = app.pass(Mode::Policy).await;
    assert!(r.sync.is_none() && r.status.sync == SyncStatus::Unknown);
    assert!(exists(ns, "cm", "web-settings"), "no prune on a render error");
}

/// argocd-16: `app/shared` becomes a git submodule. The render fails naming the entry,
/// `plumb diff` exits 2, the automated pass prunes nothing, and `web-shared` keeps its
/// UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_16_a_submodule_fails_the_render_and_prunes_nothing() {
    let ns = "rc-argocd16";
    let text = desired("argocd-16", ns);
    let (deploy, shared) = text.split_once("\n---\n").unwrap();
    let app =
        App::new("plumb-render", "rc-argocd-16", ns, AUTO, &[("deploy.yaml", deploy), ("shared/shared.yaml", shared)])
            .await;
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    let (cm_uid, deploy_uid) = (uid(ns, "cm", "web-shared"), uid(ns, "deployment", "web"));
    let synced = r.status.synced_revision.clone();
    assert!(!synced.is_empty());

    // a second repository holds shared.yaml; app/shared becomes a submodule of it
    let sub = plumb_lab::Repo::init(app.lab.tmp.path(), "shared-config").unwrap();
    sub.write("shared.yaml", shared).unwrap();
    sub.commit("shared config").unwrap();
    app.lab.repo.remove("app/shared").unwrap();
    let url = format!("{}/shared-config.git", app.lab.git.base);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&app.lab.repo.work)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["rm", "-r", "-q", "--cached", "app/shared"]);
    git(&["submodule", "add", "-q", &url, "app/shared"]);
    let revision = app.lab.repo.commit("web: shared config comes from shared-config").unwrap();
    let tree = std::process::Command::new("git")
        .args(["ls-tree", "HEAD", "app/"])
        .current_dir(&app.lab.repo.work)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tree.stdout).contains("160000 commit"), "a gitlink was committed");

    let (code, out, err) = diff(&app);
    assert_eq!(code, 2, "{out}{err}");
    let expected = format!("render {}: app/shared is a git submodule ({url}@", &revision[..7]);
    assert!(
        err.contains("ComparisonError") && err.contains(&expected) && err.contains("plumb does not fetch submodules"),
        "{err}"
    );
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.status.sync, SyncStatus::Unknown);
    assert!(r.sync.is_none(), "no sync, so no prune: {:?}", r.sync);
    assert!(
        r.status
            .conditions
            .iter()
            .any(|c| c.type_ == "ComparisonError" && c.message.contains("app/shared is a git submodule"))
    );
    assert_eq!(r.status.synced_revision, synced, "the last synced revision is what runs");
    assert_eq!((uid(ns, "cm", "web-shared"), uid(ns, "deployment", "web")), (cm_uid, deploy_uid), "nothing deleted");
    assert_eq!(
        kubectl(&["-n", ns, "get", "deployment", "web", "-o", "jsonpath={.metadata.generation}"]),
        "1",
        "not restarted"
    );
}

/// k8s-05: server-set metadata in Git is removed before compare and apply, with a
/// warning naming file, document and fields (status condition and `plumb diff`'s
/// stderr); variant A creates, then applies a change (no 409 loop); B (managedFields),
/// C (generation, selfLink) and D (status) sync and then show no drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_05_server_set_metadata_is_removed_with_a_warning() {
    let ns = "rc-k8s05";
    let a = desired("k8s-05", ns);
    let app = App::new("plumb-render", "rc-k8s-05", ns, AUTO, &[("settings.yaml", &a)]).await;
    kubectl(&["create", "namespace", ns]);
    let warning = "app/settings.yaml#1: metadata.resourceVersion, metadata.uid, metadata.creationTimestamp set by the API server; plumb ignores them (remove them from Git)";
    let (code, out, err) = diff(&app);
    assert_eq!(code, 1, "missing: {out}{err}");
    assert!(err.contains(&format!("warning: {warning}")), "{err}");
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.sync);
    assert!(
        r.status.conditions.iter().any(|c| c.type_ == "RenderWarning" && c.message == warning),
        "{:?}",
        r.status.conditions
    );
    let created = uid(ns, "cm", "web-settings");
    assert_ne!(created, "3f0d9c8e-5b1a-4c1e-9a51-000000000042");

    // step 4: LOG_LEVEL debug, exported metadata kept
    app.commit(&[("settings.yaml", &a.replace("LOG_LEVEL: info", "LOG_LEVEL: debug"))], &[]);
    let (code, out, _) = diff(&app);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("# ConfigMap/{ns}/web-settings")), "{out}");
    let r = app.pass(Mode::Policy).await;
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "no 409: {:?}", r.sync);
    assert_eq!(kubectl(&["-n", ns, "get", "cm", "web-settings", "-o", "jsonpath={.data.LOG_LEVEL}"]), "debug");
    for _ in 0..2 {
        let r = app.pass(Mode::Policy).await;
        assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{:?}", r.status);
    }
    assert_eq!(uid(ns, "cm", "web-settings"), created);

    // variants B, C, D: each syncs and then shows no drift
    let meta = |extra: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\n  namespace: {ns}\n{extra}data:\n  LOG_LEVEL: debug\n"
        )
    };
    let b = meta(
        "  managedFields:\n  - manager: kubectl-client-side-apply\n    operation: Update\n    apiVersion: v1\n    fieldsType: FieldsV1\n    fieldsV1: {f:data: {f:LOG_LEVEL: {}}}\n",
    );
    let c = meta("  generation: 4\n  selfLink: /api/v1/namespaces/gitops-lab/configmaps/web-settings\n");
    let d = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: registry.example.test/web:1.0}}]}}\nstatus:\n  replicas: 3\n  readyReplicas: 3\n"
    );
    for (variant, file, text, fields) in [
        ("B", "settings.yaml", b, "metadata.managedFields"),
        ("C", "settings.yaml", c, "metadata.generation, metadata.selfLink"),
        ("D", "deploy.yaml", d, "status"),
    ] {
        app.commit(&[(file, &text)], &[]);
        let (_, _, err) = diff(&app);
        assert!(err.contains(&format!("warning: app/{file}#1: {fields} set by the API server")), "{variant}: {err}");
        let r = app.pass(Mode::Policy).await;
        assert!(r.sync.as_ref().is_none_or(|s| s.result == SyncResult::Succeeded), "{variant}: {:?}", r.sync);
        let (code, out, err) = diff(&app);
        assert_eq!(code, 0, "{variant}: no drift after the sync: {out}{err}");
        assert!(differing(&app.pass(Mode::CompareOnly).await).is_empty(), "{variant}");
    }
    assert_eq!(uid(ns, "cm", "web-settings"), created, "never recreated");
}

/// The rest of issue 13's kubectl parity on the real control plane: a UTF-16 file and a
/// directory symlinked from elsewhere in the repository are applied like any other;
/// a Git LFS pointer then fails the render naming it, and nothing is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf16_files_and_directory_symlinks_render_and_an_lfs_pointer_fails() {
    let ns = "rc-parity";
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{a: b}}\n")
    };
    // the shared directory is outside the application's path: its environment allows it
    let env = format!("{AUTO}\nsharedPaths: [common]");
    let app = App::new("plumb-render", "rc-parity", ns, &env, &[("own.yaml", &cm("own"))]).await;
    let work = &app.lab.repo.work;
    let utf16: Vec<u8> =
        [0xFF, 0xFE].into_iter().chain(cm("windows").encode_utf16().flat_map(u16::to_le_bytes)).collect();
    std::fs::write(work.join("app/windows.yaml"), utf16).unwrap();
    app.lab.repo.write("common/shared/shared.yaml", &cm("shared")).unwrap();
    std::os::unix::fs::symlink("../common/shared", work.join("app/shared")).unwrap();
    app.lab.repo.commit("a UTF-16 file and a shared directory").unwrap();
    let r = app.pass(Mode::Policy).await;
    let mut applied = r.sync.as_ref().map(|s| s.applied.clone()).unwrap_or_default();
    applied.sort();
    let expected: Vec<String> = ["own", "shared", "windows"].iter().map(|n| format!("ConfigMap/{ns}/{n}")).collect();
    assert_eq!(applied, expected, "{:?}", r.status);
    let shared_uid = uid(ns, "cm", "shared");

    app.commit(&[("big.yaml", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")], &[]);
    let (code, _, err) = diff(&app);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("app/big.yaml is a Git LFS pointer (oid sha256:4d7a"), "{err}");
    let r = app.pass(Mode::Policy).await;
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    assert_eq!(uid(ns, "cm", "shared"), shared_uid, "nothing pruned");
    assert!(exists(ns, "cm", "windows") && exists(ns, "cm", "own"));
}
