//! What holds a sync back besides its own objects, on a real control plane: `dependsOn`
//! (a dependent's objects appear only once its dependency is Healthy, and a serving
//! plumb starts the dependent's pass as soon as it is, not at the next poll), and sync
//! windows (a deny window active now holds an automated sync and selfHeal while drift
//! is still shown; a manual sync goes through only with `manualSync: true`).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use plumb::{
    compare::SyncStatus,
    health::HealthStatus,
    reconcile::Mode,
    status::{AppStatus, ConditionType, SyncResult},
};
use support::*;

fn deployment(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]\n      containers: [{{name: main, image: registry.example/{name}:1}}]\n"
    )
}

fn cm(name: &str, ns: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata: {{value: \"{value}\"}}\n"
    )
}

fn condition(st: &AppStatus, t: ConditionType) -> Option<String> {
    st.conditions.iter().find(|c| c.type_ == t).map(|c| c.message.clone())
}

fn exists(ns: &str, what: &str) -> bool {
    control_plane().kubectl(&["-n", ns, "get", what]).is_ok()
}

/// dependsOn: `web` (a ConfigMap) depends on `db` (a Deployment). Served with a 1 h
/// poll: `web` reports WaitingForDependency naming `db` and why, and writes nothing
/// while `db` is not Healthy; once it is, `web`'s pass follows at once (a dependency
/// trigger, not a poll) and its ConfigMap is created after `db` became Available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on_orders_two_applications() {
    let ns = "gates-deps";
    let lab = Lab::new("gates-deps");
    lab.repo.write("db/db.yaml", &deployment("db", ns)).unwrap();
    lab.repo.write("web/web.yaml", &cm("web-config", ns, "1")).unwrap();
    lab.repo.commit("two applications").unwrap();
    let policy = lab.policy(
        "policy.yaml",
        &format!(
            "settings: {{statusNamespace: plumb-gates}}\nrepositories:\n  - {{name: r, url: {}}}\nenvironments:\n  - name: e\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\napplications:\n  - {{name: web, repository: r, path: web, namespace: {ns}, environment: e, dependsOn: [db]}}\n  - {{name: db, repository: r, path: db, namespace: {ns}, environment: e}}\n",
            lab.url
        ),
    );
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;

    // while db is not Healthy, web waits and says for what
    let waiting = wait_for("web waiting for db", Duration::from_secs(60), || async {
        let st = plumb.status("web").await?;
        condition(&st, ConditionType::WaitingForDependency)
    })
    .await;
    assert!(waiting.starts_with("automated sync waits for its dependencies: db "), "{waiting}");
    assert!(
        ["has never synced", "is Progressing at", "has not synced its revision", "is OutOfSync at", "is Missing at"]
            .iter()
            .any(|w| waiting.contains(w)),
        "{waiting}"
    );
    let db_healthy = plumb.status("db").await.is_some_and(|s| s.health == HealthStatus::Healthy);
    if !db_healthy {
        assert!(!exists(ns, "configmap/web-config"), "nothing of web is written while db is not Healthy");
    }
    let web = plumb.status("web").await.unwrap();
    assert!(web.last_sync.is_none(), "no sync recorded while waiting: {:?}", web.last_sync);

    // db Healthy: web syncs promptly (the poll is an hour away)
    wait_for("db Healthy", Duration::from_secs(90), || async {
        plumb.status("db").await.filter(|s| s.health == HealthStatus::Healthy).map(|_| ())
    })
    .await;
    let st = wait_for("web synced after db", Duration::from_secs(30), || async {
        plumb.status("web").await.filter(|s| s.sync == SyncStatus::Synced && s.last_sync.is_some())
    })
    .await;
    assert_eq!(st.last_sync.as_ref().unwrap().result, SyncResult::Succeeded);
    assert_eq!(condition(&st, ConditionType::WaitingForDependency), None, "{:?}", st.conditions);
    // the order, by the cluster's clocks: db Available no later than web's ConfigMap
    let available = kubectl(&[
        "-n",
        ns,
        "get",
        "deployment",
        "db",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].lastTransitionTime}",
    ]);
    let created =
        kubectl(&["-n", ns, "get", "configmap", "web-config", "-o", "jsonpath={.metadata.creationTimestamp}"]);
    let (available, created): (jiff::Timestamp, jiff::Timestamp) =
        (available.parse().unwrap(), created.parse().unwrap());
    assert!(available <= created, "db Available at {available}, web's ConfigMap created at {created}");
    plumb.stop().await;
}

const DENY_NOW: &str =
    "syncWindows: [{kind: deny, schedule: '* * * * *', duration: 1h, timeZone: Europe/Berlin, manualSync: MANUAL}]";

fn env(manual: bool) -> String {
    format!(
        "syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n{}",
        DENY_NOW.replace("MANUAL", &manual.to_string())
    )
}

/// A deny window active now (every minute, for an hour): an automated sync of a new
/// revision is held (OutOfSync shown, nothing written, the window named); a manual sync
/// is refused without `manualSync`, and goes through with `manualSync: true`; then a
/// drift is shown as OutOfSync and selfHeal writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_window_holds_automated_sync_and_self_heal_not_an_allowed_manual_sync() {
    let ns = "gates-window";
    let a = App::new("plumb-gates", "window", ns, &env(false), &[("cm.yaml", &cm("settings", ns, "1"))]).await;

    let r = a.pass(Mode::Policy).await;
    assert!(r.sync.is_none(), "automated sync held: {:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::OutOfSync, "what is missing is still shown");
    let why = condition(&r.status, ConditionType::SyncWindowClosed).expect("the window is named");
    assert!(
        why.starts_with("automated sync is held: deny window 1 (* * * * * Europe/Berlin, 1h) is active until "),
        "{why}"
    );
    let windows = r.status.sync_windows.clone().expect("the status shows the windows");
    assert_eq!(windows.active.len(), 1, "{windows:?}");
    assert!(windows.next_change.is_none(), "a window that starts every minute for an hour never ends: {windows:?}");
    assert!(!exists(ns, "configmap/settings"), "nothing written");
    let (code, out, err) = plumb_cli(&["get", "window", "-n", "plumb-gates"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Sync windows: all syncs held; active: deny window 1 (* * * * * Europe/Berlin, 1h) until "),
        "plumb get shows the window: {out}"
    );
    assert!(out.contains("Condition:    SyncWindowClosed: automated sync is held: deny window 1"), "{out}");

    let r = a.pass(Mode::Manual { prune: true, approve: false }).await;
    assert!(r.sync.is_none(), "manualSync: false refuses a person's sync too: {:?}", r.sync);
    let why = condition(&r.status, ConditionType::SyncWindowClosed).unwrap();
    assert!(why.starts_with("a manual sync is held: deny window 1"), "{why}");
    assert!(!exists(ns, "configmap/settings"));

    // manualSync: true (the same repository, another policy)
    let policy = a.lab.app_policy(
        "plumb-gates",
        "window",
        ns,
        env(true).lines().map(|l| format!("    {l}\n")).collect::<String>().trim_end(),
    );
    let ctx = context_for(&policy, &a.lab.tmp.path().join("cache"), false).await;
    let r = ctx.run_pass("window", Mode::Manual { prune: true, approve: false }, None).await.unwrap();
    assert_eq!(r.sync.as_ref().map(|s| s.result), Some(SyncResult::Succeeded), "{:?}", r.status.conditions);
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.value}"]), "1");

    // drift: shown, not reverted
    kubectl(&[
        "-n",
        ns,
        "patch",
        "configmap",
        "settings",
        "--type",
        "merge",
        "-p",
        "{\"data\":{\"value\":\"by-hand\"}}",
    ]);
    let r = ctx.run_pass("window", Mode::Policy, None).await.unwrap();
    assert!(r.sync.is_none(), "selfHeal held: {:?}", r.sync);
    assert_eq!(r.status.sync, SyncStatus::OutOfSync);
    let drifted = r.status.resources.iter().find(|x| x.object.ends_with("/settings")).unwrap();
    assert_eq!(drifted.sync, SyncStatus::OutOfSync, "{drifted:?}");
    assert!(condition(&r.status, ConditionType::SyncWindowClosed).is_some(), "{:?}", r.status.conditions);
    assert_eq!(kubectl(&["-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.data.value}"]), "by-hand");
    assert_eq!(ctx.history("window").await.unwrap().len(), 1, "only the manual sync is in the history");
}

/// A pass held by a window wakes when the window opens: an allow window that opens at
/// the next full minute (at least 30 s away), with an hour's poll: served, the
/// application is held until then (its status naming the opening), and synced within
/// seconds of it, not at the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_pass_wakes_when_the_window_opens() {
    let ns = "gates-wake";
    let lab = Lab::new("gates-wake");
    lab.repo.write("app/cm.yaml", &cm("settings", ns, "1")).unwrap();
    lab.repo.commit("first").unwrap();
    let now = jiff::Timestamp::now();
    let opens = jiff::Timestamp::from_second((now.as_second() + 90) / 60 * 60).unwrap();
    let at = opens.to_zoned(jiff::tz::TimeZone::UTC);
    let window =
        format!("    syncWindows: [{{kind: allow, schedule: '{} {} * * *', duration: 1h}}]", at.minute(), at.hour());
    let env = format!(
        "    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 1h\n{window}"
    );
    let policy = lab.app_policy("plumb-gates-wake", "wake", ns, &env);
    let plumb = Plumb::start(&policy, &lab.tmp.path().join("cache")).await;

    let st = wait_for("held by the window", Duration::from_secs(30), || async {
        plumb.status("wake").await.filter(|s| condition(s, ConditionType::SyncWindowClosed).is_some())
    })
    .await;
    let windows = st.sync_windows.clone().unwrap();
    assert_eq!(windows.next_change.as_deref(), Some(opens.to_string().as_str()), "{windows:?}");
    assert!(
        condition(&st, ConditionType::SyncWindowClosed)
            .unwrap()
            .contains(&format!("syncs may start at {}", at.strftime("%Y-%m-%d %H:%M UTC"))),
        "{:?}",
        st.conditions
    );
    assert!(!exists(ns, "configmap/settings"), "nothing written before the window opens");

    let st = wait_for("synced once the window opened", Duration::from_secs(150), || async {
        plumb.status("wake").await.filter(|s| s.last_sync.is_some())
    })
    .await;
    let synced_at: jiff::Timestamp = st.last_sync.as_ref().unwrap().started_at.parse().unwrap();
    assert!(synced_at >= opens, "the sync started at {synced_at}, the window opens at {opens}");
    assert!(
        synced_at.duration_since(opens) < jiff::SignedDuration::from_secs(15),
        "woken at the opening ({opens}), not at the poll: {synced_at}"
    );
    assert_eq!(st.last_sync.unwrap().result, SyncResult::Succeeded);
    plumb.stop().await;
}
