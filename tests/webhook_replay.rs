//! `plumb webhook replay` over every delivery in `shared/webhook-vectors`: the built
//! binary, a policy generated from the vectors' `receiver_config.json` (one repository
//! per watched URL with the vectors' `secret.txt`, one application per watched ref),
//! compared with each `expected.json` (action, HTTP status, and provider, event and ref
//! where the vector names them).
#![allow(clippy::unwrap_used)]

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/webhook-vectors");

/// A policy equivalent to `receiver_config.json` with `overrides` applied.
fn policy(root: &Path, overrides: Option<&Value>, out: &Path) -> PathBuf {
    let mut config: Value = serde_json::from_slice(&fs::read(root.join("receiver_config.json")).unwrap()).unwrap();
    if let Some(Value::Object(o)) = overrides {
        for (k, v) in o {
            config[k] = v.clone();
        }
    }
    let secret = root.join(config["secret_file"].as_str().unwrap()).canonicalize().unwrap();
    let mut text = format!(
        "settings:\n  webhookMaxBodyBytes: {}\nenvironments:\n  - name: dev\nrepositories:\n",
        config["max_body_bytes"].as_u64().unwrap()
    );
    let mut apps = String::from("applications:\n");
    for (i, watch) in config["watch"].as_array().unwrap().iter().enumerate() {
        let url = watch["repo_url"].as_str().unwrap();
        // each vector host is named after its forge (gitea.example.invalid, …)
        let host = url.split("://").last().unwrap().trim_start_matches("git@");
        let provider = match host.split('.').next().unwrap() {
            "bitbucket" => "bitbucket-cloud",
            forge => forge,
        };
        text.push_str(&format!(
            "  - name: repo{i}\n    url: \"{url}\"\n    webhookSecretFile: \"{}\"\n    webhookProvider: {provider}\n",
            secret.display()
        ));
        for (j, r) in watch["refs"].as_array().unwrap().iter().enumerate() {
            let r = r.as_str().unwrap();
            apps.push_str(&format!(
                "  - name: app-{i}-{j}\n    repository: repo{i}\n    revision: \"{r}\"\n    namespace: default\n    environment: dev\n"
            ));
        }
    }
    text.push_str(&apps);
    let path = out.join(format!("policy-{}.yaml", config["max_body_bytes"]));
    fs::write(&path, text).unwrap();
    path
}

fn replay(policy: &Path, dir: &Path, body_file: &str) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_plumb"))
        .args(["webhook", "replay", "--config"])
        .arg(policy)
        .arg("--headers")
        .arg(dir.join("headers.txt"))
        .arg("--body")
        .arg(dir.join(body_file))
        .env("PLUMB_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("{}: not JSON ({e}): {stdout}\nstderr: {}", dir.display(), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn replay_matches_every_vector() {
    let root = PathBuf::from(VECTORS);
    let entries = fs::read_dir(&root).unwrap_or_else(|e| panic!("vector folder {} unreadable: {e}", root.display()));
    let mut dirs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no vector folders in {}", root.display());

    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let expected: Value = serde_json::from_slice(&fs::read(dir.join("expected.json")).unwrap())
            .unwrap_or_else(|e| panic!("{name}/expected.json: {e}"));
        let policy = policy(&root, expected.get("receiver_config_override"), tmp.path());
        let body_file = expected["request"]["body_file"].as_str().unwrap();
        let (code, report) = replay(&policy, dir, body_file);

        let mut errors = Vec::new();
        for field in ["action", "http_status", "provider", "event", "ref"] {
            if let Some(want) = expected.get(field)
                && report.get(field) != Some(want)
            {
                errors.push(format!("{field}: got {:?}, expected {want}", report.get(field)));
            }
        }
        let status = report["http_status"].as_u64().unwrap();
        if code != i32::from(!(200..300).contains(&status)) {
            errors.push(format!("exit code {code} for status {status}"));
        }
        if report["action"] == "reconcile" && report["applications"].as_array().is_none_or(Vec::is_empty) {
            errors.push("reconcile without applications".into());
        }
        if !errors.is_empty() {
            failures.push(format!("{name}:\n  {}\n  report: {report}", errors.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{} of {} vectors disagree:\n{}", failures.len(), dirs.len(), failures.join("\n"));
}

/// The report names what a user needs to debug a delivery: the verification verdict,
/// the repository key, the matched applications.
#[test]
fn replay_report_explains_a_decision() {
    let root = PathBuf::from(VECTORS);
    let tmp = tempfile::tempdir().unwrap();
    let policy = policy(&root, None, tmp.path());

    let (code, ok) = replay(&policy, &root.join("github-push"), "body.json");
    assert_eq!(code, 0);
    assert_eq!(ok["verification"]["valid"], true);
    assert_eq!(ok["verification"]["scheme"], "hmac-sha256-hex-prefixed");
    assert_eq!(ok["repository_key"], "github.example.invalid/acme/platform-config");
    assert_eq!(ok["applications"], serde_json::json!(["app-3-0"]));
    assert_eq!(ok["file_lists_complete"], true);

    let (code, bad) = replay(&policy, &root.join("neg-bad-signature"), "body.json");
    assert_eq!(code, 1);
    assert_eq!(bad["verification"]["valid"], false);
    assert_eq!(bad["verification"]["failure"], "mismatch");
    assert_eq!(bad["repository_key"], Value::Null, "rejected deliveries are not parsed");
    let text = bad.to_string();
    assert!(!text.contains("s3cr3t"), "the secret never appears: {text}");
}
