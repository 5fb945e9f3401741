//! Issue 29, "Rollback pins to anything", on a real control plane with a serving plumb:
//! a pin runs the commit its name had when plumb first saw it (recorded, never resolved
//! again: pushes to a pinned branch are not followed), and a commit outside the tracked
//! history runs only with `--force` and the right `override` on the application's
//! resource, which the API server checks for the requesting user through the admission
//! policy of `deploy/admission/rollback-override.yaml` — `patch` alone is refused.
#![allow(clippy::unwrap_used)]

mod support;

use std::{path::Path, time::Duration};

use support::{
    Lab, Plumb, application_role, control_plane, kubectl, kubectl_apply, plumb_cli, service_account_kubeconfig,
    wait_for,
};

fn cm(value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {{value: \"{value}\"}}\n")
}

fn policy(lab: &Lab, status_ns: &str, app: &str, ns: &str) -> std::path::PathBuf {
    lab.app_policy(
        status_ns,
        app,
        ns,
        "    syncPolicy: {automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}\n    reconcileInterval: 1h",
    )
}

fn live_value(ns: &str) -> String {
    control_plane()
        .kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.value}"])
        .unwrap_or_default()
}

async fn value_becomes(ns: &str, want: &str) {
    wait_for(&format!("settings = {want}"), Duration::from_secs(60), || async {
        (live_value(ns) == want).then_some(())
    })
    .await;
}

fn status(ns: &str, app: &str) -> serde_json::Value {
    let text = kubectl(&["-n", ns, "get", "applications.plumb.dev", app, "-o", "json"]);
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["status"].clone()
}

fn sync_errors(status: &serde_json::Value) -> Vec<String> {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    conditions.iter().filter(|c| c["type"] == "SyncError").map(|c| c["message"].as_str().unwrap().to_string()).collect()
}

/// Runs git in the lab repository's work tree; its output.
fn git(work: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(work)
        .env("GIT_AUTHOR_NAME", "plumb lab")
        .env("GIT_AUTHOR_EMAIL", "lab@plumb.invalid")
        .env("GIT_COMMITTER_NAME", "plumb lab")
        .env("GIT_COMMITTER_EMAIL", "lab@plumb.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Commits `settings = value` on `branch` (created at `from`), pushes it and goes back
/// to `main`; the new commit.
fn push_to_branch(lab: &Lab, branch: &str, from: &str, value: &str) -> String {
    let work = &lab.repo.work;
    git(work, &["checkout", "-q", "-B", branch, from]);
    lab.repo.write("app/settings.yaml", &cm(value)).unwrap();
    git(work, &["commit", "-q", "-am", &format!("{branch}: {value}")]);
    git(work, &["push", "-q", "origin", branch]);
    let sha = git(work, &["rev-parse", "HEAD"]);
    git(work, &["checkout", "-q", "main"]);
    sha
}

/// `plumb refresh`: returns once the server ran a pass after the request.
fn refresh(app: &str, status_ns: &str) {
    let (code, out, err) = plumb_cli(&["refresh", app, "-n", status_ns, "--timeout", "60s"]);
    assert!(code == 0 || code == 2, "plumb refresh: {out}\n{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_runs_the_commit_its_name_had_and_does_not_follow_the_branch() {
    let (status_ns, ns, app) = ("plumb-rb-once", "rb-once", "onceweb");
    let lab = Lab::new("rbonce");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    let c1 = lab.repo.commit("one").unwrap();
    lab.repo.write("app/settings.yaml", &cm("2")).unwrap();
    lab.repo.commit("two").unwrap();
    git(&lab.repo.work, &["push", "-q", "origin", &format!("{c1}:refs/heads/stable")]);
    let plumb = Plumb::start(&policy(&lab, status_ns, app, ns), &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "2").await;

    // a rollback naming a branch: its commit then (in the tracked history) is pinned
    let (code, out, err) = plumb_cli(&["rollback", app, "stable", "-n", status_ns]);
    assert_eq!(code, 0, "{out}\n{err}");
    value_becomes(ns, "1").await;
    let pinned = wait_for("the pin recorded", Duration::from_secs(30), || async {
        let s = status(status_ns, app);
        (s["pinned"]["revision"] == c1.as_str()).then_some(s)
    })
    .await;
    assert_eq!(pinned["pinned"]["requested"], "stable", "{pinned}");
    // `plumb diff` compares the pin, and says so
    let file = lab.tmp.path().join("policy.yaml");
    let cache = lab.tmp.path().join("diff-cache");
    let (code, out, err) =
        plumb_cli(&["diff", app, "-c", file.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
    assert_eq!(code, 0, "the pin is what runs: {out}\n{err}");
    assert!(err.contains(&format!("comparing the pinned revision {}", &c1[..7])), "{err}");

    // a push to that branch (a commit nobody reviewed for main) is not followed
    let pushed = push_to_branch(&lab, "stable", &c1, "unreviewed");
    refresh(app, status_ns);
    let after = status(status_ns, app);
    assert_eq!(after["pinned"]["revision"], c1.as_str(), "the recorded commit, not the branch's new head: {after}");
    assert_eq!(after["revision"], c1.as_str(), "{after}");
    assert!(sync_errors(&after).is_empty(), "{after}");
    assert_eq!(live_value(ns), "1", "{pushed} was not synced");
    plumb.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_outside_the_tracked_history_needs_the_override_right() {
    let (status_ns, ns, app) = ("plumb-rb-over", "rb-over", "overweb");
    let lab = Lab::new("rbover");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    let c1 = lab.repo.commit("one").unwrap();
    let unreviewed = push_to_branch(&lab, "unreviewed", &c1, "unreviewed");
    let plumb = Plumb::start(&policy(&lab, status_ns, app, ns), &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "1").await;

    // `patch` (the admin here) without the admission policy installed: refused, naming
    // the commit, the tracked branch and the right
    let (code, out, err) = plumb_cli(&["rollback", app, &unreviewed, "--force", "-n", status_ns]);
    assert_eq!(code, 0, "recorded: {out}\n{err}");
    let refusal = wait_for("the refusal", Duration::from_secs(30), || async {
        sync_errors(&status(status_ns, app)).into_iter().find(|m| m.contains("refused"))
    })
    .await;
    for part in
        [&unreviewed[..7], "history of main", "`override` on applications.plumb.dev/overweb", "rollback-override"]
    {
        assert!(refusal.contains(part), "{part}: {refusal}");
    }
    refresh(app, status_ns);
    assert_eq!(live_value(ns), "1", "the unreviewed commit did not run");
    assert!(status(status_ns, app).get("pinned").is_none_or(serde_json::Value::is_null));
    plumb_cli(&["rollback", app, "--release", "-n", status_ns]);

    // the admission policy installed: a user holding `patch` but not `override` cannot
    // write the override; the API server names the right
    kubectl_apply(plumb::status::ROLLBACK_OVERRIDE_POLICY_YAML);
    let deployer = service_account_kubeconfig(status_ns, "deployer", &lab.tmp.path().join("deployer.kubeconfig"));
    let role = |name: &str, verbs: &str| application_role(status_ns, name, "deployer", verbs);
    role("deployer", "get, list, watch, patch");
    let as_deployer = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-n", status_ns, "--kubeconfig", deployer.to_str().unwrap()]);
        plumb_cli(&all)
    };
    // Probe with a value no pin has, taken back while the policy is not enforced yet: a
    // real request written before it took effect would stay (an unchanged override is
    // not checked again) and pass every later look.
    let probes = std::sync::atomic::AtomicUsize::new(0);
    wait_for("the API server enforces the policy", Duration::from_secs(90), || async {
        let n = probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = std::process::Command::new("kubectl")
            .args(["--kubeconfig", deployer.to_str().unwrap(), "-n", status_ns, "annotate", "--overwrite"])
            .args(["applications.plumb.dev", app, &format!("plumb.dev/rollback-override=probe-{n}")])
            .output()
            .unwrap();
        if probe.status.success() {
            kubectl(&["-n", status_ns, "annotate", "applications.plumb.dev", app, "plumb.dev/rollback-override-"]);
            return None;
        }
        Some(())
    })
    .await;
    let (code, out, err) = as_deployer(&["rollback", app, &unreviewed, "--force"]);
    assert_ne!(code, 0, "{out}{err}");
    let denied = format!("{out}{err}");
    assert!(denied.contains("needs the right `override`") && denied.contains("deployer"), "{denied}");
    let annotations = kubectl(&["-n", status_ns, "get", "applications.plumb.dev", app, "-o", "jsonpath={.metadata}"]);
    assert!(!annotations.contains("rollback-override"), "{annotations}");
    // `patch` still pins within the tracked history
    let (code, out, err) = as_deployer(&["rollback", app, &c1]);
    assert_eq!(code, 0, "{out}\n{err}");

    // with `override` granted, the same request is recorded and the commit runs
    role("deployer-override", "override");
    wait_for("the forced rollback recorded", Duration::from_secs(30), || async {
        let (code, _, _) = as_deployer(&["rollback", app, &unreviewed, "--force"]);
        (code == 0).then_some(())
    })
    .await;
    value_becomes(ns, "unreviewed").await;
    let s = wait_for("the pin recorded", Duration::from_secs(30), || async {
        let s = status(status_ns, app);
        (s["pinned"]["revision"] == unreviewed.as_str()).then_some(s)
    })
    .await;
    assert!(sync_errors(&s).is_empty(), "{s}");
    plumb.stop().await;
}

/// Issue 29, "Requests that lie": a pause written to last until the year 9000 by a
/// client claiming to be someone ends at the environment's `maxPause` after plumb first
/// saw it, and its name is shown as a claim; `plumb suspend -c` cuts `--for` itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_to_the_year_9000_ends_at_max_pause_and_its_name_is_only_claimed() {
    let (status_ns, ns, app) = ("plumb-rb-pause", "rb-pause", "pauseweb");
    let lab = Lab::new("rbpause");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    lab.repo.commit("one").unwrap();
    let file = lab.app_policy(
        status_ns,
        app,
        ns,
        "    syncPolicy: {automated: true, syncOptions: [CreateNamespace=true]}\n    reconcileInterval: 1h\n    maxPause: 1h",
    );
    let plumb = Plumb::start(&file, &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "1").await;

    let lie = r#"plumb.dev/suspend={"until":"9000-01-01T00:00:00Z","by":"the-ceo","reason":"forever"}"#;
    kubectl(&["-n", status_ns, "annotate", "--overwrite", "applications.plumb.dev", app, lie]);
    let before = jiff::Timestamp::now();
    refresh(app, status_ns);
    let s = status(status_ns, app);
    let until: jiff::Timestamp = s["suspended"]["until"].as_str().unwrap().parse().unwrap();
    assert!(until <= before + jiff::SignedDuration::from_secs(3600 + 60), "capped at 1 h: {s}");
    assert_eq!(s["suspended"]["askedUntil"], "9000-01-01T00:00:00Z", "{s}");
    let paused = s["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "SyncPaused").unwrap().clone();
    let message = paused["message"].as_str().unwrap();
    assert!(message.contains("capped by the environment's maxPause 3600s"), "{message}");
    assert!(message.contains("claimed by the-ceo, not verified") && !message.contains("by the-ceo until"), "{message}");

    // the command line cuts --for to maxPause when it knows the policy
    let (code, out, err) = plumb_cli(&["suspend", app, "--for", "720h", "--reason", "r", "-c", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("--for 2592000s cut to the environment's maxPause (3600s)"), "{err}");
    plumb.stop().await;
}

/// A pause cut short by `maxPause` ends for good: once its cap passed, plumb removes the
/// request from the resource (the same annotation never pauses again) and automated
/// sync goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_cut_short_by_max_pause_ends_for_good() {
    let (status_ns, ns, app) = ("plumb-rb-cap", "rb-cap", "capweb");
    let lab = Lab::new("rbcap");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    lab.repo.commit("one").unwrap();
    let file = lab.app_policy(
        status_ns,
        app,
        ns,
        "    syncPolicy: {automated: true, syncOptions: [CreateNamespace=true]}\n    reconcileInterval: 1h\n    maxPause: 2s",
    );
    let plumb = Plumb::start(&file, &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "1").await;
    let lie = r#"plumb.dev/suspend={"until":"9000-01-01T00:00:00Z","by":"the-ceo","reason":"forever"}"#;
    kubectl(&["-n", status_ns, "annotate", "--overwrite", "applications.plumb.dev", app, lie]);
    refresh(app, status_ns);
    assert_eq!(status(status_ns, app)["suspended"]["askedUntil"], "9000-01-01T00:00:00Z");
    wait_for("the request removed once its cap passed", Duration::from_secs(30), || async {
        refresh(app, status_ns);
        let meta = kubectl(&["-n", status_ns, "get", "applications.plumb.dev", app, "-o", "jsonpath={.metadata}"]);
        (!meta.contains("plumb.dev/suspend")).then_some(())
    })
    .await;
    lab.repo.write("app/settings.yaml", &cm("2")).unwrap();
    lab.repo.commit("two").unwrap();
    refresh(app, status_ns);
    assert_eq!(live_value(ns), "2", "automated sync runs again");
    assert!(status(status_ns, app).get("suspended").is_none_or(serde_json::Value::is_null));
    plumb.stop().await;
}

/// Issue 31, "Rollback pins that end too early": `--until-next-commit` ends on the first
/// commit that changes what the application renders, not on another team's commit
/// elsewhere in the repository (the class of argo-cd#5351 / #9570).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_until_the_next_commit_ends_on_a_commit_to_the_application_only() {
    let (status_ns, ns, app) = ("plumb-rb-next", "rb-next", "nextweb");
    let lab = Lab::new("rbnext");
    lab.repo.write("app/settings.yaml", &cm("1")).unwrap();
    let c1 = lab.repo.commit("one").unwrap();
    lab.repo.write("app/settings.yaml", &cm("2")).unwrap();
    lab.repo.commit("two: broken").unwrap();
    let plumb = Plumb::start(&policy(&lab, status_ns, app, ns), &lab.tmp.path().join("cache")).await;
    value_becomes(ns, "2").await;
    let (code, out, err) = plumb_cli(&["rollback", app, &c1, "--until-next-commit", "-n", status_ns]);
    assert_eq!(code, 0, "{out}\n{err}");
    value_becomes(ns, "1").await;

    // another team's commit: the tracked branch moves, the application's files do not
    lab.repo.write("other-team/service.yaml", &cm("theirs")).unwrap();
    lab.repo.write("app/README.md", "notes, not a manifest\n").unwrap();
    let elsewhere = lab.repo.commit("another team's change").unwrap();
    refresh(app, status_ns);
    let after = status(status_ns, app);
    assert_eq!(after["pinned"]["revision"], c1.as_str(), "still pinned after {elsewhere}: {after}");
    let pinned = after["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Pinned").cloned();
    let message = pinned.as_ref().and_then(|c| c["message"].as_str()).unwrap_or_default().to_string();
    assert!(message.contains(&format!("{} changes nothing {app} renders", &elsewhere[..7])), "{after}");
    assert_eq!(live_value(ns), "1", "the broken release is not redeployed");

    // the fix: a commit to the application's path ends the pin and is synced
    lab.repo.write("app/settings.yaml", &cm("3")).unwrap();
    lab.repo.commit("three: fixed").unwrap();
    refresh(app, status_ns);
    value_becomes(ns, "3").await;
    let after = status(status_ns, app);
    assert!(after.get("pinned").is_none_or(serde_json::Value::is_null), "{after}");
    let events =
        kubectl(&["-n", status_ns, "get", "events", "--field-selector", &format!("involvedObject.name={app}")]);
    assert!(
        events.contains("PinReleased") && events.contains(&format!("which changes what {app} renders")),
        "{events}"
    );
    plumb.stop().await;
}
