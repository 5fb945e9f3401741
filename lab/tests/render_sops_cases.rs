//! SOPS wherever Flux decrypts it, keys per application, no secret in any output
//! (issue 30), on the real control plane with the real `sops`/`age` (built by
//! `tools/testbins/build.sh sops`): the shared cases sops-01 (a kustomization whose
//! resources and `secretGenerator` read SOPS files) and sops-02 (sops's error quotes a
//! value), a SOPS-encrypted ConfigMap written with another indentation, a copied SOPS
//! file of another application, a key file relative to the policy file.
#![allow(clippy::unwrap_used)]

mod support;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use base64::Engine as _;
use plumb::{compare::SyncStatus, reconcile::Mode, status::SyncResult};
use support::*;

fn bin(name: &str) -> PathBuf {
    let bin = plumb_lab::testbins_dir().join("sops/current/bin").join(name);
    assert!(bin.is_file(), "{} is missing: run tools/testbins/build.sh sops", bin.display());
    bin
}

fn case_dir(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/cases").join(case)
}

fn case_file(case: &str, file: &str) -> String {
    let p = case_dir(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A new age key file `dir/name`; returns its recipient.
fn age_key(dir: &Path, name: &str) -> String {
    let file = dir.join(name);
    let out = Command::new(bin("age-keygen")).arg("-o").arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    text.lines().find_map(|l| l.strip_prefix("# public key: ")).unwrap().to_string()
}

/// `plain` (YAML) encrypted for `recipient`, the fields matching `regex` only.
fn encrypt(dir: &Path, recipient: &str, regex: &str, plain: &str) -> String {
    let f = dir.join("plain.yaml");
    std::fs::write(&f, plain).unwrap();
    let out = Command::new(bin("sops"))
        .args(["--encrypt", "--age", recipient, "--encrypted-regex", regex, "--disable-version-check"])
        .arg(&f)
        .env_remove("SOPS_AGE_KEY_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `yaml` as sops writes it (four spaces a level) with two spaces a level: a key of a
/// sequence item stays two columns after its dash, a block scalar's lines keep their
/// offset from its key.
fn reindented(yaml: &str) -> String {
    let mut out = String::new();
    let mut block: Option<(usize, usize)> = None; // the key's column: (old, new)
    for l in yaml.lines() {
        let n = l.len() - l.trim_start().len();
        let new = match block {
            Some((old_key, new_key)) if n > old_key && !l.trim().is_empty() => new_key + (n - old_key),
            _ => {
                block = None;
                n / 2 + n % 4 / 2
            }
        };
        let t = l.trim_start();
        if block.is_none() && (t.ends_with('|') || t.ends_with("|-") || t.ends_with('>')) {
            let dash = if t.starts_with("- ") { 2 } else { 0 };
            block = Some((n + dash, new + dash));
        }
        out.push_str(&format!("{}{t}\n", " ".repeat(new)));
    }
    out
}

/// The policy of one environment `e` (automated, prune, selfHeal) and `apps` (YAML
/// flow mappings without `repository`/`environment`), statuses in `status_ns`.
fn policy_of(lab: &Lab, file: &str, status_ns: &str, apps: &[String]) -> PathBuf {
    let apps: String = apps.iter().map(|a| format!("  - {{repository: r, environment: e, {a}}}\n")).collect();
    lab.policy(
        file,
        &format!(
            "settings: {{statusNamespace: {status_ns}, renderTools: {{sops: {}, kustomize: {}, helm: {}}}}}
repositories:
  - {{name: r, url: {}}}
environments:
  - name: e
    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}
applications:
{apps}",
            bin("sops").display(),
            plumb_lab::testbins_dir().join("kustomize/current/bin/kustomize").display(),
            plumb_lab::testbins_dir().join("helm/current/bin/helm").display(),
            lab.url
        ),
    )
}

fn condition(r: &plumb::reconcile::PassReport, type_: &str) -> String {
    r.status.conditions.iter().find(|c| c.type_ == type_).map(|c| c.message.clone()).unwrap_or_default()
}

/// Panics naming the output when `text` holds any of `values`.
fn assert_clean(values: &[&str], output: &str, text: &str) {
    for v in values {
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
    internal: std::net::SocketAddr,
}

impl Serve {
    fn start(policy: &Path, cache: &Path, log: PathBuf) -> Serve {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (addr, internal, probes) = (free(), free(), free());
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_plumb-under-test"))
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

fn secret_field(ns: &str, name: &str, field: &str) -> String {
    let b64 = kubectl(&["-n", ns, "get", "secret", name, "-o", &format!("jsonpath={{.data.{field}}}")]);
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap()
}

/// sops-01: with a key (Flux parity, key file relative to the policy file), the
/// kustomization's encrypted resource and the encrypted dotenv of its
/// `secretGenerator` are decrypted before the build; without one, the render fails
/// naming both files and nothing is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sops_01_kustomize_inputs_are_decrypted_with_the_key_or_refused_without() {
    let ns = "case-s01";
    let lab = Lab::new("sops-01");
    for f in ["deployment.yaml", "db-secret.sops.yaml", "web.env"] {
        lab.repo.write(&format!("apps/web/{f}"), &case_file("sops-01", &format!("repo/apps/web/{f}"))).unwrap();
    }
    let k = case_file("sops-01", "repo/apps/web/kustomization.yaml");
    assert!(k.contains("namespace: gitops-lab\n"), "the case changed");
    lab.repo
        .write("apps/web/kustomization.yaml", &k.replace("namespace: gitops-lab\n", &format!("namespace: {ns}\n")))
        .unwrap();
    lab.repo.commit("sops-01").unwrap();
    // the key beside the policy, named relative to it
    std::fs::create_dir_all(lab.tmp.path().join("keys")).unwrap();
    std::fs::copy(case_dir("sops-01").join("age.key"), lab.tmp.path().join("keys/age.key")).unwrap();
    let with_key = policy_of(
        &lab,
        "with-key.yaml",
        "plumb-s01",
        &[format!(
            "name: s01-web, path: apps/web, namespace: {ns}, source: {{type: kustomize, sops: {{ageKeyFile: keys/age.key}}}}"
        )],
    );
    let without = policy_of(
        &lab,
        "without.yaml",
        "plumb-s01",
        &[format!("name: s01-web, path: apps/web, namespace: {ns}, source: {{type: kustomize}}")],
    );
    let cache = lab.tmp.path().join("cli-cache");
    let cli = |policy: &Path, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
        plumb_cli(&all)
    };

    // 2. (B) no key: exit 2 naming both inputs; the pass is Unknown, nothing applied
    let (code, out, err) = cli(&without, &["render", "s01-web"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("apps/web/db-secret.sops.yaml, apps/web/web.env: SOPS-encrypted; no key configured"), "{err}");
    assert!(!out.contains("ENC[AES256_GCM"), "{out}");
    let ctx = context_for(&without, &lab.tmp.path().join("cache-without"), false).await;
    let r = ctx.run_pass("s01-web", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true), "{:?}", r.status);
    assert!(condition(&r, "ComparisonError").contains("apps/web/web.env: SOPS-encrypted"), "{:?}", r.status);
    assert_eq!(kubectl(&["get", "namespace", ns, "--ignore-not-found", "-o", "name"]), "", "nothing applied");

    // 1. (A) the key: valid, rendered masked, synced with the plaintext values
    let (code, out, err) = plumb_cli(&["validate", with_key.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = cli(&with_key, &["render", "s01-web"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("decrypted (SOPS): apps/web/db-secret.sops.yaml, apps/web/web.env"), "{err}");
    assert!(err.contains("kustomize v") && err.contains(", sops 3."), "{err}");
    assert!(
        out.contains("name: web-db") && !out.contains("sops:") && !out.contains("ENC["),
        "4. no `sops` field: {out}"
    );
    let b64 = base64::engine::general_purpose::STANDARD;
    let values = ["correct-horse-battery-staple-41", "tok-9f3b2c-live"];
    let encoded: Vec<String> = values.iter().map(|v| b64.encode(v)).collect();
    assert_clean(&values, "plumb render", &out);
    assert_clean(&encoded.iter().map(String::as_str).collect::<Vec<_>>(), "plumb render", &out);
    let ctx = context_for(&with_key, &lab.tmp.path().join("cache-with"), false).await;
    let r = ctx.run_pass("s01-web", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    assert_eq!(secret_field(ns, "web-db", "password"), "correct-horse-battery-staple-41");
    let env = kubectl(&["-n", ns, "get", "secret", "-o", "name"]);
    let env = env.lines().find(|l| l.starts_with("secret/web-env-")).unwrap().trim_start_matches("secret/").to_string();
    let data = kubectl(&["-n", ns, "get", "secret", &env, "-o", "jsonpath={.data}"]);
    let data: serde_json::Value = serde_json::from_str(&data).unwrap();
    let mut keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["API_TOKEN", "DB_PASSWORD"], "exactly the two keys, no sops_*");
    assert_eq!(secret_field(ns, &env, "DB_PASSWORD"), "correct-horse-battery-staple-41");
    assert_eq!(secret_field(ns, &env, "API_TOKEN"), "tok-9f3b2c-live");
    // 3. no Secret of the namespace holds ciphertext or a sops_ key
    let all = kubectl(&["-n", ns, "get", "secrets", "-o", "json"]);
    assert!(!all.contains("sops_") && !all.contains(&b64.encode("ENC[AES256_GCM")[..16]), "{all}");
    let r = ctx.run_pass("s01-web", Mode::Policy, None).await.unwrap();
    assert_eq!(r.status.sync, SyncStatus::Synced, "{:?}", r.status);
    assert_clean(&values, "the pass's diffs", &format!("{:?}", r.diffs()));
}

/// sops-02: a value pasted in clear into a SOPS file fails the render naming the file
/// and the key path, and the value is in no output: `plumb diff`, the Application
/// resources, the status API, Events, the server's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sops_02_a_failed_decryption_quotes_no_value() {
    let (ns, status_ns) = ("gitops-lab", "plumb-s02");
    let lab = Lab::new("sops-02");
    for f in ["deployment.yaml", "db-secret.sops.yaml"] {
        lab.repo.write(&format!("apps/web/{f}"), &case_file("sops-02", &format!("repo/apps/web/{f}"))).unwrap();
    }
    lab.repo.commit("sops-02").unwrap();
    std::fs::copy(case_dir("sops-02").join("age.key"), lab.tmp.path().join("age.key")).unwrap();
    let policy = policy_of(
        &lab,
        "policy.yaml",
        status_ns,
        &[format!("name: web, path: apps/web, namespace: {ns}, source: {{sops: {{ageKeyFile: age.key}}}}")],
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    let uid =
        kubectl(&["-n", ns, "get", "secret", "web-db", "-o", "jsonpath={.metadata.uid}:{.metadata.resourceVersion}"]);

    lab.repo
        .write("apps/web/db-secret.sops.yaml", &case_file("sops-02", "commit-2/apps/web/db-secret.sops.yaml"))
        .unwrap();
    lab.repo.commit("paste the password").unwrap();
    const VALUE: &str = "hunter2-plain-7Qx";
    let mut outputs: Vec<(String, String)> = Vec::new();
    let cache = lab.tmp.path().join("cli-cache");
    let (code, out, err) =
        plumb_cli(&["diff", "web", "--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains(
            "apps/web/db-secret.sops.yaml: SOPS-encrypted; a value at `stringData.password` is not SOPS-encrypted"
        ),
        "{err}"
    );
    outputs.push(("plumb diff".into(), format!("{out}\n{err}")));
    let r = ctx.run_pass("web", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    assert!(condition(&r, "ComparisonError").contains("apps/web/db-secret.sops.yaml"), "{:?}", r.status);
    outputs.push(("the pass's status".into(), format!("{:?}", r.status)));

    let serve = Serve::start(&policy, &lab.tmp.path().join("serve-cache"), lab.tmp.path().join("serve.log"));
    let api = wait_for("the API shows web Unknown", Duration::from_secs(90), || async {
        let (code, body) =
            http_request(serve.internal, "GET", "/api/v1/applications", &[bearer(reader_token())], b"").await;
        (code == 200 && body.contains("db-secret.sops.yaml")).then_some(body)
    })
    .await;
    let log = wait_for("the failed render in the log", Duration::from_secs(30), || async {
        let log = serve.log();
        log.contains("db-secret.sops.yaml").then_some(log)
    })
    .await;
    drop(serve);
    assert_eq!(
        kubectl(&["-n", ns, "get", "secret", "web-db", "-o", "jsonpath={.metadata.uid}:{.metadata.resourceVersion}"]),
        uid,
        "web-db unchanged"
    );
    outputs.extend([
        ("GET /api/v1/applications".into(), api),
        ("plumb serve log".into(), log),
        ("Application resources".into(), kubectl(&["-n", status_ns, "get", "applications.plumb.dev", "-o", "yaml"])),
        ("Events".into(), kubectl(&["get", "events", "-A", "-o", "yaml"])),
    ]);
    for (what, text) in &outputs {
        assert_clean(&[VALUE], what, text);
    }
}

/// A SOPS-encrypted ConfigMap, written with two-space indentation (sops writes four):
/// decrypted, its values in the cluster, and absent from every output — `plumb render`,
/// `plumb diff` of a hand edit, the status, the Events and the log of the selfHeal that
/// reverts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sops_configmap_with_other_indentation_is_decrypted_and_masked_everywhere() {
    let (ns, status_ns) = ("case-scm", "plumb-scm");
    let lab = Lab::new("sops-cm");
    let recipient = age_key(lab.tmp.path(), "cm.key");
    let plain = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  apiKey: cm-api-key-5d1e8a\n  mode: plain-mode\n"
    );
    let encrypted = encrypt(lab.tmp.path(), &recipient, "^apiKey$", &plain);
    let two = reindented(&encrypted);
    assert!(two.contains("\n  mac: ") && !two.contains("    mac: ") && !two.contains("cm-api-key"), "{two}");
    lab.repo.write("app/settings.yaml", &two).unwrap();
    lab.repo.commit("an encrypted ConfigMap").unwrap();
    let policy = policy_of(
        &lab,
        "policy.yaml",
        status_ns,
        &[format!("name: web, path: app, namespace: {ns}, source: {{sops: {{ageKeyFile: cm.key}}}}")],
    );
    const VALUES: [&str; 2] = ["cm-api-key-5d1e8a", "cm-handmade-key-77c3"];
    let cache = lab.tmp.path().join("cli-cache");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
        plumb_cli(&all)
    };
    let mut outputs: Vec<(String, String)> = Vec::new();
    let (code, out, err) = cli(&["render", "web"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("apiKey: (sensitive)") && out.contains("mode: plain-mode"), "{out}");
    outputs.push(("plumb render".into(), format!("{out}\n{err}")));
    let (code, out, err) = cli(&["sync", "web", "--local"]);
    assert_eq!(code, 0, "{out}\n{err}");
    outputs.push(("plumb sync".into(), format!("{out}\n{err}")));
    let key = || kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.apiKey}"]);
    assert_eq!(key(), "cm-api-key-5d1e8a", "the value in the cluster");
    kubectl(&["-n", ns, "patch", "configmap", "settings", "-p", r#"{"data":{"apiKey":"cm-handmade-key-77c3"}}"#]);
    let (code, out, err) = cli(&["diff", "web"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("ConfigMap/case-scm/settings (differs at /data/apiKey (sensitive"), "{out}");
    outputs.push(("plumb diff".into(), format!("{out}\n{err}")));

    let serve = Serve::start(&policy, &lab.tmp.path().join("serve-cache"), lab.tmp.path().join("serve.log"));
    wait_for("selfHeal reverts the key", Duration::from_secs(90), || async {
        (key() == "cm-api-key-5d1e8a").then_some(())
    })
    .await;
    let events = wait_for("the SelfHealed Event", Duration::from_secs(30), || async {
        let ev =
            kubectl(&["-n", ns, "get", "events", "--field-selector", "involvedObject.name=settings", "-o", "yaml"]);
        ev.contains("SelfHealed").then_some(ev)
    })
    .await;
    assert!(events.contains("/data/apiKey (sensitive"), "{events}");
    let log = wait_for("the revert in the log", Duration::from_secs(30), || async {
        let log = serve.log();
        log.contains("/data/apiKey").then_some(log)
    })
    .await;
    let (_, api) = http_request(serve.internal, "GET", "/api/v1/applications", &[bearer(reader_token())], b"").await;
    drop(serve);
    outputs.extend([
        ("Events".into(), kubectl(&["-n", ns, "get", "events", "-o", "yaml"])),
        ("plumb serve log".into(), log),
        ("GET /api/v1/applications".into(), api),
        ("Application resources".into(), kubectl(&["-n", status_ns, "get", "applications.plumb.dev", "-o", "yaml"])),
    ]);
    for (what, text) in &outputs {
        assert_clean(&VALUES, what, text);
    }
}

/// Keys per application: team B's SOPS file copied into team A's path, and one a
/// kustomization of A reads from B's path, are refused naming the file (and the
/// recipients); a key file shared by applications of different namespaces is a
/// `plumb validate` warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_sops_file_of_another_application_is_refused() {
    let lab = Lab::new("sops-teams");
    let a = age_key(lab.tmp.path(), "a.key");
    let b = age_key(lab.tmp.path(), "b.key");
    let secret = |ns: &str, v: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: {ns}}}\nstringData: {{password: {v}}}\n"
        )
    };
    let theirs = encrypt(lab.tmp.path(), &b, "^(data|stringData)$", &secret("team-b", "team-b-secret-81f2"));
    lab.repo.write("apps/b/db.yaml", &theirs).unwrap();
    lab.repo
        .write(
            "apps/a/db.yaml",
            &encrypt(lab.tmp.path(), &a, "^(data|stringData)$", &secret("team-a", "team-a-secret-1c9d")),
        )
        .unwrap();
    lab.repo.write("apps/a-copy/db.yaml", &theirs.replace("namespace: team-b", "namespace: team-a")).unwrap();
    lab.repo.write("apps/a-kust/kustomization.yaml", "resources: [../b/db.yaml]\n").unwrap();
    lab.repo.commit("two teams").unwrap();
    let policy = policy_of(
        &lab,
        "policy.yaml",
        "plumb-steams",
        &[
            "name: a, path: apps/a, namespace: team-a, source: {sops: {ageKeyFile: a.key}}".into(),
            "name: a-copy, path: apps/a-copy, namespace: team-a, source: {sops: {ageKeyFile: a.key}}".into(),
            "name: a-kust, path: apps/a-kust, namespace: team-a, source: {type: kustomize, sops: {ageKeyFile: a.key}}"
                .into(),
            "name: b, path: apps/b, namespace: team-b, source: {sops: {ageKeyFile: b.key}}".into(),
        ],
    );
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    for app in ["a", "b"] {
        let r = ctx.run_pass(app, Mode::Policy, None).await.unwrap();
        assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{app}: {:?}", r.status);
    }
    assert_eq!(secret_field("team-a", "db", "password"), "team-a-secret-1c9d");
    let r = ctx.run_pass("a-copy", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    let msg = condition(&r, "ComparisonError");
    assert!(
        msg.contains(&format!(
            "apps/a-copy/db.yaml: SOPS-encrypted; encrypted for {b}, none of which is a key of this application ({a})"
        )),
        "{msg}"
    );
    let r = ctx.run_pass("a-kust", Mode::Policy, None).await.unwrap();
    assert_eq!((r.status.sync, r.sync.is_none()), (SyncStatus::Unknown, true));
    let msg = condition(&r, "ComparisonError");
    assert!(
        msg.contains("apps/b/db.yaml: SOPS-encrypted; outside the application's path `apps/a-kust` and its environment's sharedPaths"),
        "{msg}"
    );
    assert_eq!(secret_field("team-a", "db", "password"), "team-a-secret-1c9d", "team B's value is not applied in A");

    let shared = policy_of(
        &lab,
        "shared.yaml",
        "plumb-steams",
        &[
            "name: a, path: apps/a, namespace: team-a, source: {sops: {ageKeyFile: a.key}}".into(),
            "name: b, path: apps/b, namespace: team-b, source: {sops: {ageKeyFile: ./a.key}}".into(),
        ],
    );
    let (code, out, err) = plumb_cli(&["validate", shared.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning: source.sops.ageKeyFile")
            && err.contains("shared by applications of different namespaces: a (team-a), b (team-b)"),
        "{err}"
    );
}

/// A SOPS-encrypted Helm value file is decrypted before `helm template`: the value
/// reaches the cluster, and `plumb render` masks the field it went into (a ConfigMap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sops_encrypted_helm_value_file_is_decrypted_and_masked() {
    let ns = "case-shelm";
    let lab = Lab::new("sops-helm");
    let recipient = age_key(lab.tmp.path(), "helm.key");
    lab.repo.write("chart/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n").unwrap();
    lab.repo.write("chart/values.yaml", "token: none\n").unwrap();
    lab.repo
        .write(
            "chart/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata:\n  token: {{ .Values.token | quote }}\n  url: \"https://u:{{ .Values.token }}@db\"\n",
        )
        .unwrap();
    let values = encrypt(lab.tmp.path(), &recipient, "^token$", "token: helm-token-3b7e91\n");
    lab.repo.write("chart/secret-values.yaml", &values).unwrap();
    lab.repo.commit("a chart with an encrypted value file").unwrap();
    let policy = policy_of(
        &lab,
        "policy.yaml",
        "plumb-shelm",
        &[format!(
            "name: shelm, path: chart, namespace: {ns}, source: {{type: helm, valueFiles: [chart/secret-values.yaml], sops: {{ageKeyFile: helm.key}}}}"
        )],
    );
    let cache = lab.tmp.path().join("cli-cache");
    let (code, out, err) =
        plumb_cli(&["render", "shelm", "--config", policy.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("decrypted (SOPS): chart/secret-values.yaml"), "{err}");
    assert!(out.contains("token: (sensitive)") && out.contains("url: (sensitive)"), "{out}");
    assert_clean(&["helm-token-3b7e91"], "plumb render", &out);
    let ctx = context_for(&policy, &lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("shelm", Mode::Policy, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status);
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "web", "-o", "jsonpath={.data.token}"]), "helm-token-3b7e91");
}
