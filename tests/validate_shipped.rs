//! The repository's own policy files validate: `config/dev.yaml` as it is, the example of
//! `applicationSets:` and of `notifications:` with `--skip-files` (their secret files
//! are on the machine running `plumb serve`), and the
//! install's `deploy/base/policy.yaml` with `--skip-files` (its webhook secret is
//! mounted in plumb's pod, not on the machine running `plumb validate`); without the
//! flag the missing file is named with the way out.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn validate(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_plumb"))
        .arg("validate")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PLUMB_LOG", "warn")
        .output()
        .unwrap();
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_repository_s_own_policies_validate() {
    let (code, out) = validate(&["config/dev.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = validate(&["--skip-files", "deploy/base/policy.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("deploy/base/policy.yaml: ok"), "{out}");
    let (code, out) = validate(&["--skip-files", "config/examples/application-sets.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("config/examples/application-sets.yaml: ok (3 applications"), "{out}");
    assert!(
        out.contains("applicationSet `services`: its applications are the directories of repository `fleet`"),
        "{out}"
    );
    assert!(
        out.contains("applicationSet `pulls`: its applications are the open pull requests of repository `fleet` labelled `preview`"),
        "{out}"
    );
    let (code, out) = validate(&["--skip-files", "config/examples/notifications.yaml"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("config/examples/notifications.yaml: ok"), "{out}");
    let (code, out) = validate(&["deploy/base/policy.yaml"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("/etc/plumb/secrets/webhook-secret does not exist") && out.contains("--skip-files"), "{out}");
}
