//! Charts from a chart repository and an OCI registry on the real control plane
//! (issue 30, `source.chart`): a chart repository served by the lab behind basic auth,
//! and `crane registry serve` (built by `tools/testbins/build.sh crane`); charts
//! packaged, indexed and pushed with the real helm; values from the Git repository.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use plumb_lab::{ChartRepo, OciRegistry, helm_bin, package_chart, run_helm};
use support::*;

const CONFIGMAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-chart
data:
  chartVersion: {{ .Chart.Version | quote }}
  color: {{ .Values.color | quote }}
"#;

/// Packages `web` `version` into `dir` and (re)writes the repository's index.
fn publish(work: &Path, dir: &Path, version: &str) -> std::path::PathBuf {
    let tgz =
        package_chart(work, dir, "web", version, &[("values.yaml", "color: grey\n"), ("templates/cm.yaml", CONFIGMAP)])
            .unwrap();
    run_helm(work, &["repo", "index", &dir.display().to_string()]).unwrap();
    tgz
}

fn sha256_of(file: &Path) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(std::fs::read(file).unwrap())))
}

fn comparison_error(r: &plumb::reconcile::PassReport) -> String {
    r.status.conditions.iter().find(|c| c.type_ == "ComparisonError").map(|c| c.message.clone()).unwrap_or_default()
}

fn cm(ns: &str, name: &str, path: &str) -> String {
    kubectl(&["-n", ns, "get", "cm", name, "-o", &format!("jsonpath={path}")])
}

/// A pinned and a ranged application of a chart repository behind basic auth: both
/// sync and report the version and digest they applied; a new version in the index is
/// picked up by the range at the next interval without a commit; a package that does
/// not match its index digest is refused naming the chart; a wrong password fails
/// clearly and shows no secret; an unreachable repository fails the render naming it,
/// and nothing is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_from_a_chart_repository_pinned_and_by_range() {
    assert!(helm_bin().is_file(), "{} is missing: run tools/testbins/build.sh helm", helm_bin().display());
    let lab = Lab::new("cs-fleet");
    let work = lab.tmp.path().join("charts-work");
    let served = lab.tmp.path().join("served");
    let v100 = publish(&work, &served, "1.0.0");
    let v110 = publish(&work, &served, "1.1.0");
    let mut repo = ChartRepo::start(&served, Some(("lab", "s3cret-pw"))).unwrap();
    std::fs::write(lab.tmp.path().join("chart-password"), "s3cret-pw\n").unwrap();
    std::fs::write(lab.tmp.path().join("wrong-password"), "not-the-pw\n").unwrap();
    lab.repo.write("values/web.yaml", "color: blue\n").unwrap();
    lab.repo.commit("web values").unwrap();
    let chart = |version: &str, password: &str| {
        format!(
            "{{chart: {{repository: {}, name: web, version: '{version}', username: lab, passwordFile: {password}, insecure: true}}, valueFiles: [values/web.yaml]}}",
            repo.base
        )
    };
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-charts, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    reconcileInterval: 1s
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: cs-pinned, repository: r, path: values, namespace: cs-pinned, environment: e, source: {}}}
  - {{name: cs-range, repository: r, path: values, namespace: cs-range, environment: e, source: {}}}
  - {{name: cs-wrong, repository: r, path: values, namespace: cs-wrong, environment: e, source: {}}}
",
            helm_bin().display(),
            lab.url,
            chart("1.0.0", "chart-password"),
            chart(">=1.0.0 <2.0.0", "chart-password"),
            chart("^1", "wrong-password"),
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    for (app, tgz, version) in [("cs-pinned", &v100, "1.0.0"), ("cs-range", &v110, "1.1.0")] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        let sync = r.sync.as_ref().unwrap_or_else(|| panic!("{app}: no sync: {:?}", r.status));
        assert_eq!((sync.result, sync.applied.len()), (SyncResult::Succeeded, 1), "{app}: {:?}", r.status);
        let applied = r.status.chart.as_ref().unwrap();
        assert_eq!((applied.name.as_str(), applied.version.as_str()), ("web", version), "{app}");
        assert_eq!(applied.digest, sha256_of(tgz), "{app}: the package's digest");
        assert_eq!(applied.repository, repo.base);
        assert_eq!(sync.chart.as_ref(), Some(applied), "{app}: the sync history names the chart");
        assert_eq!(cm(app, &format!("{app}-chart"), "{.data.chartVersion}"), version);
        assert_eq!(cm(app, &format!("{app}-chart"), "{.data.color}"), "blue", "values from Git");
    }

    // a wrong password: the render fails naming the repository and the status, no secret
    let r = ctx.run_pass("cs-wrong", Mode::Policy, None).await.unwrap();
    let msg = comparison_error(&r);
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true), "{msg}");
    assert!(
        msg.contains("chart `web` from ") && msg.contains("401 Unauthorized") && msg.contains("check the credentials"),
        "{msg}"
    );
    assert!(!msg.contains("not-the-pw") && !msg.contains("s3cret-pw"), "{msg}");

    // a new version in range: picked up by the range after the interval, no commit
    let v120 = publish(&work, &served, "1.2.0");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let uid = cm("cs-range", "cs-range-chart", "{.metadata.uid}");
    let r = ctx.run_pass("cs-range", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.chart.as_ref().map(|c| c.version.as_str()), Some("1.2.0"), "{:?}", r.status);
    assert_eq!(r.status.chart.as_ref().map(|c| c.digest.clone()), Some(sha256_of(&v120)));
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded));
    assert_eq!(cm("cs-range", "cs-range-chart", "{.data.chartVersion}"), "1.2.0");
    assert_eq!(cm("cs-range", "cs-range-chart", "{.metadata.uid}"), uid, "updated in place");
    let r = ctx.run_pass("cs-pinned", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.chart.as_ref().map(|c| c.version.as_str()), Some("1.0.0"), "the pin stays");

    // a package that is not the one the index lists: refused, naming the chart
    publish(&work, &served, "1.3.0");
    let other = package_chart(&work, &work.join("other"), "web", "1.3.0", &[("templates/cm.yaml", "{}\n")]).unwrap();
    std::fs::copy(&other, served.join("web-1.3.0.tgz")).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let r = ctx.run_pass("cs-range", Mode::Policy, None).await.unwrap();
    let msg = comparison_error(&r);
    assert!(msg.contains("chart `web` from ") && msg.contains("web 1.3.0") && msg.contains("digest mismatch"), "{msg}");
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true), "{msg}");
    assert_eq!(cm("cs-range", "cs-range-chart", "{.data.chartVersion}"), "1.2.0", "the cluster keeps 1.2.0");
    assert_eq!(r.status.chart.as_ref().map(|c| c.version.as_str()), Some("1.2.0"), "status names what runs");

    // the repository goes away: the render fails naming it; nothing is pruned
    repo.stop();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let uid = cm("cs-pinned", "cs-pinned-chart", "{.metadata.uid}");
    let r = ctx.run_pass("cs-pinned", Mode::Policy, None).await.unwrap();
    let msg = comparison_error(&r);
    assert!(msg.contains(&format!("{}/index.yaml is unreachable", repo.base)), "{msg}");
    assert!(r.sync.is_none() && r.plan.prune.is_empty() && r.plan.prune_last.is_empty(), "{:?}", r.sync);
    assert_eq!(cm("cs-pinned", "cs-pinned-chart", "{.metadata.uid}"), uid, "nothing deleted");
}

/// A pinned and a ranged application of a chart in a local OCI registry (pushed with
/// `helm push`): both sync and report the version and the manifest digest helm printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_from_an_oci_registry_pinned_and_by_range() {
    assert!(helm_bin().is_file(), "{} is missing: run tools/testbins/build.sh helm", helm_bin().display());
    let registry = OciRegistry::start().unwrap();
    let lab = Lab::new("co-fleet");
    let work = lab.tmp.path().join("charts-work");
    let packages = lab.tmp.path().join("packages");
    let mut digests = std::collections::HashMap::new();
    for v in ["0.9.0", "1.0.0", "1.1.0"] {
        let tgz = package_chart(
            &work,
            &packages,
            "web",
            v,
            &[("values.yaml", "color: grey\n"), ("templates/cm.yaml", CONFIGMAP)],
        )
        .unwrap();
        digests.insert(v, registry.push(&work, &tgz, "charts").unwrap());
    }
    lab.repo.write("values/web.yaml", "color: green\n").unwrap();
    lab.repo.commit("web values").unwrap();
    let chart = |version: &str| {
        format!(
            "{{chart: {{repository: 'oci://{}/charts', name: web, version: '{version}', insecure: true}}, valueFiles: [values/web.yaml]}}",
            registry.host
        )
    };
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-charts-oci, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: co-pinned, repository: r, path: values, namespace: co-pinned, environment: e, source: {}}}
  - {{name: co-range, repository: r, path: values, namespace: co-range, environment: e, source: {}}}
",
            helm_bin().display(),
            lab.url,
            chart("1.0.0"),
            chart("~1.0 || ^1.1"),
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    for (app, version) in [("co-pinned", "1.0.0"), ("co-range", "1.1.0")] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        let sync = r.sync.as_ref().unwrap_or_else(|| panic!("{app}: no sync: {:?}", r.status));
        assert_eq!((sync.result, sync.applied.len()), (SyncResult::Succeeded, 1), "{app}: {:?}", r.status);
        let applied = r.status.chart.as_ref().unwrap();
        assert_eq!(applied.version, version, "{app}");
        assert_eq!(&applied.digest, &digests[version], "{app}: the manifest digest helm push printed");
        assert_eq!(applied.repository, format!("oci://{}/charts", registry.host));
        assert_eq!(sync.chart.as_ref(), Some(applied));
        assert_eq!(cm(app, &format!("{app}-chart"), "{.data.chartVersion}"), version);
        assert_eq!(cm(app, &format!("{app}-chart"), "{.data.color}"), "green");
        // the next pass: cached, nothing to do
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Synced, true), "{app}: {:?}", r.status);
    }
}

/// An OpenPGP key made with the machine's gpg in `home` (a fresh GNUPGHOME): the secret
/// keyring (legacy format, as `helm package --sign` reads it) and the public one.
fn gpg_key(home: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    std::fs::create_dir_all(home).unwrap();
    let gpg = |args: &[&str]| {
        let out = std::process::Command::new("gpg")
            .args(["--batch", "--homedir", &home.display().to_string()])
            .args(args)
            .output()
            .expect("gpg must be installed for the provenance test");
        assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    gpg(&["--passphrase", "", "--quick-gen-key", &format!("{name} <{name}@example.test>"), "rsa2048", "sign", "never"]);
    let (secret, public) = (home.join("secring.gpg"), home.join("pubring.gpg"));
    std::fs::write(&secret, gpg(&["--export-secret-keys"])).unwrap();
    std::fs::write(&public, gpg(&["--export"])).unwrap();
    (secret, public)
}

/// `source.chart.keyringFile`: a signed chart whose provenance file verifies against
/// the keyring syncs; the same chart checked against another key's keyring is refused
/// before anything is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_chart_is_verified_against_the_keyring() {
    assert!(helm_bin().is_file(), "{} is missing: run tools/testbins/build.sh helm", helm_bin().display());
    let lab = Lab::new("cv-fleet");
    let work = lab.tmp.path().join("charts-work");
    let served = lab.tmp.path().join("served");
    let (secret, public) = gpg_key(&lab.tmp.path().join("gpg-lab"), "lab");
    let (_, stranger) = gpg_key(&lab.tmp.path().join("gpg-other"), "other");
    let src = work.join("web");
    std::fs::create_dir_all(src.join("templates")).unwrap();
    std::fs::write(src.join("Chart.yaml"), "apiVersion: v2\nname: web\nversion: 1.0.0\n").unwrap();
    std::fs::write(src.join("values.yaml"), "color: grey\n").unwrap();
    std::fs::write(src.join("templates/cm.yaml"), CONFIGMAP).unwrap();
    let (s, d, k) = (src.display().to_string(), served.display().to_string(), secret.display().to_string());
    run_helm(&work, &["package", &s, "--destination", &d, "--sign", "--key", "lab", "--keyring", &k]).unwrap();
    assert!(served.join("web-1.0.0.tgz.prov").is_file(), "helm wrote the provenance file");
    run_helm(&work, &["repo", "index", &d]).unwrap();
    let repo = ChartRepo::start(&served, None).unwrap();
    lab.repo.write("values/web.yaml", "color: red\n").unwrap();
    lab.repo.commit("web values").unwrap();
    let chart = |keyring: &Path| {
        format!(
            "{{chart: {{repository: {}, name: web, version: 1.0.0, keyringFile: {}}}, valueFiles: [values/web.yaml]}}",
            repo.base,
            keyring.display()
        )
    };
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-charts-prov, renderTools: {{helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
  - {{name: cv-good, repository: r, path: values, namespace: cv-good, environment: e, source: {}}}
  - {{name: cv-stranger, repository: r, path: values, namespace: cv-stranger, environment: e, source: {}}}
",
            helm_bin().display(),
            lab.url,
            chart(&public),
            chart(&stranger),
        ),
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("cv-good", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    assert_eq!(cm("cv-good", "cv-good-chart", "{.data.color}"), "red");
    let r = ctx.run_pass("cv-stranger", Mode::Policy, None).await.unwrap();
    let msg = comparison_error(&r);
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true), "{msg}");
    assert!(msg.contains("--verify") && msg.contains("web-1.0.0.tgz") && msg.contains("openpgp"), "{msg}");
    let absent = kubectl(&["get", "ns", "cv-stranger", "--ignore-not-found", "-o", "name"]);
    assert_eq!(absent, "", "nothing applied for an unverified chart");
}
