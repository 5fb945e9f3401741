#![allow(clippy::unwrap_used)]
use super::*;
use crate::{
    compare::SyncStatus,
    status::{ResourceStatus, SyncReason, SyncResult},
};

const EVIL: &str = "<script>alert(1)</script>";

fn status() -> AppStatus {
    AppStatus {
        app: "web".into(),
        environment: "prod".into(),
        sync: SyncStatus::OutOfSync,
        health: HealthStatus::Healthy,
        revision: "0123456789abcdef".into(),
        subject: format!("bump {EVIL}"),
        resources: vec![
            ResourceStatus {
                object: "Deployment.apps/web/web".into(),
                sync: SyncStatus::OutOfSync,
                reason: "differs at /spec/replicas 5→3 (set by kubectl via scale at 2026-11-29T14:02:11Z)".into(),
                health: HealthStatus::Healthy,
                health_message: String::new(),
            },
            ResourceStatus {
                object: "Secret/web/token".into(),
                sync: SyncStatus::OutOfSync,
                reason: "differs at /data/token (sensitive)→(sensitive)".into(),
                health: HealthStatus::Healthy,
                health_message: String::new(),
            },
        ],
        ..AppStatus::default()
    }
}

fn event(reason: &str, message: &str, at: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("e-{reason}")},
        "involvedObject": {},
        "type": "Normal",
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
    }))
    .unwrap()
}

fn tree() -> Vec<Node> {
    vec![Node {
        object: "Deployment.apps/web/web".into(),
        health: HealthStatus::Healthy,
        children: vec![Node {
            object: "ReplicaSet.apps/web/web-5d4f".into(),
            health: HealthStatus::Healthy,
            children: vec![Node {
                object: format!("Pod/web/web-5d4f-x{EVIL}"),
                health: HealthStatus::Progressing,
                message: "container web: ContainerCreating".into(),
                ..Node::default()
            }],
            omitted: 3,
            ..Node::default()
        }],
        ..Node::default()
    }]
}

#[test]
fn the_application_page_has_actions_tree_events_and_history() {
    let st = status();
    let history = [SyncRecord {
        result: SyncResult::Succeeded,
        finished_at: "2026-11-29T14:00:00Z".into(),
        ..SyncRecord::new("0123456789abcdef", SyncReason::NewRevision)
    }];
    let events = [
        event("SyncSucceeded", "synced 0123456", "2026-11-29T14:00:00Z"),
        event("HealthChanged", &format!("Degraded {EVIL}"), "2026-11-29T15:00:00Z"),
    ];
    let tree = tree();
    let view = AppView { status: &st, history: &history, history_error: None, events: Ok(&events), tree: &tree };
    let html = application(&view, "alice", "plumb-system");
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("<meta http-equiv=refresh content=10>"), "{html}");
    assert!(html.contains("as <code>alice</code>"), "{html}");
    // every action is a GET to its confirmation page, never a change by itself
    assert!(
        html.contains("<form class=a method=get action=\"web/confirm\"><input type=hidden name=action value=sync>")
    );
    assert!(!html.contains("method=post"), "no change without the confirmation page: {html}");
    assert!(!html.contains("value=resume"), "not paused: no resume: {html}");
    // the tree: nested, healths per node, the application's objects linked to their page
    assert!(
        html.contains("<a href=\"web/objects/Deployment.apps%2Fweb%2Fweb\"><code>Deployment.apps/web/web</code></a>")
    );
    assert!(html.contains("<code>ReplicaSet.apps/web/web-5d4f</code> <span class=\"w Healthy\">Healthy</span>"));
    assert!(html.contains("web-5d4f-x&lt;script&gt;") && html.contains(">Progressing</span>"), "{html}");
    assert!(html.contains("… 3 more not shown"), "{html}");
    // the Events, newest first, escaped; then the history
    let (ev, hist) = html.split_once("<h2>History</h2>").unwrap();
    let (newest, oldest) = (ev.find("HealthChanged").unwrap(), ev.find("SyncSucceeded").unwrap());
    assert!(newest < oldest, "newest first: {ev}");
    assert!(ev.contains("Degraded &lt;script&gt;"), "{ev}");
    assert!(hist.contains(">Succeeded</span>"), "{hist}");
    // the Events could not be listed: said so
    let view = AppView { events: Err("events is forbidden"), ..view };
    assert!(application(&view, "alice", "ns").contains("The Events could not be listed: events is forbidden"));
}

#[test]
fn an_object_shows_its_diff_masked() {
    let st = status();
    let node = &tree()[0];
    let html = object(&st, "Deployment.apps/web/web", Some(node)).unwrap();
    assert!(html.contains("<td><code>/spec/replicas</code></td><td>5→3</td><td>kubectl via scale"), "{html}");
    assert!(html.contains("<a href=\"../../web\">"), "back to the application: {html}");
    assert!(html.contains("<h2>Live tree</h2>") && html.contains("ReplicaSet.apps/web/web-5d4f"), "{html}");
    let secret = object(&st, "Secret/web/token", None).unwrap();
    assert!(secret.contains("<td><code>/data/token</code></td><td>(sensitive)→(sensitive)</td>"), "{secret}");
    assert!(object(&st, "Pod/web/nope", None).is_none());
}

#[test]
fn a_confirmation_posts_the_token_and_nothing_else_changes_without_it() {
    let html = confirm("web", Action::Sync, "tok\"en", Err("unused"));
    assert!(html.contains("<h1>Sync web now?</h1>"), "{html}");
    assert!(html.contains("<form method=post action=actions><input type=hidden name=csrf value=\"tok&quot;en\"><input type=hidden name=action value=sync>"), "{html}");
    assert!(!html.contains("http-equiv=refresh"), "a confirmation does not reload itself: {html}");
    let suspend = confirm("web", Action::Suspend, "t", Err("unused"));
    assert!(suspend.contains("name=reason required"), "{suspend}");
    let rollback = confirm("web", Action::Rollback, "t", Ok("aaaa"));
    assert!(rollback.contains("<input type=hidden name=revision value=\"aaaa\">"), "{rollback}");
    let none = confirm("web", Action::Rollback, "t", Err("no earlier successful sync"));
    assert!(!none.contains("<form") && none.contains("no earlier successful sync"), "{none}");
    for a in Action::ALL {
        assert_eq!(Action::parse(a.name()), Some(a));
    }
    assert_eq!(Action::parse("delete"), None);
}

#[test]
fn refusals_and_failed_reads_say_why() {
    let html = outcome("web", Action::Sync, Err(&format!("forbidden {EVIL}")));
    assert!(html.contains("<h1>web: Sync refused</h1>") && html.contains("forbidden &lt;script&gt;"), "{html}");
    let html = read_failed("plumb-system", true, "applications.plumb.dev is forbidden");
    assert!(html.contains("Your kubeconfig&#39;s user may not read applications.plumb.dev in plumb-system"), "{html}");
    let html = list(&[status()], "", "plumb-system");
    assert!(html.contains("(the API server did not say)") && html.contains("bump &lt;script&gt;"), "{html}");
    assert_eq!(object_path("a b", "Pod/x/y"), "applications/a%20b/objects/Pod%2Fx%2Fy");
}

#[test]
fn a_held_prune_has_an_approve_button_and_its_confirmation() {
    let mut st = status();
    let held = "PersistentVolumeClaim/web/data";
    st.resources.push(ResourceStatus {
        object: held.into(),
        sync: SyncStatus::OutOfSync,
        reason: format!(
            "requires pruning; {} (data-loss class …): plumb prune web --approve",
            crate::plan::NEEDS_APPROVAL
        ),
        health: HealthStatus::Healthy,
        health_message: String::new(),
    });
    let tree = tree();
    let view = AppView { status: &st, history: &[], history_error: None, events: Ok(&[]), tree: &tree };
    let html = application(&view, "alice", "plumb-system");
    let button = "<form class=a method=get action=\"web/confirm\"><input type=hidden name=action value=approve><input type=hidden name=object value=\"PersistentVolumeClaim/web/data\"><button>Approve prune…</button></form>";
    assert!(html.contains("Prunes waiting for an approval") && html.contains(button), "{html}");
    // only the held one: a drifted object has no such button
    assert_eq!(html.matches("value=approve").count(), 1, "{html}");
    let page = object(&st, held, None).unwrap();
    assert!(page.contains("action=\"../confirm\"><input type=hidden name=action value=approve"), "{page}");
    assert!(!object(&st, "Deployment.apps/web/web", None).unwrap().contains("value=approve"));
    let confirm_page = confirm("web", Action::Approve, "t", Ok(held));
    assert!(
        confirm_page.contains("<h1>Approve deleting PersistentVolumeClaim/web/data of web?</h1>"),
        "{confirm_page}"
    );
    assert!(confirm_page.contains("<input type=hidden name=action value=approve><input type=hidden name=object value=\"PersistentVolumeClaim/web/data\">"), "{confirm_page}");
    let none = confirm("web", Action::Approve, "t", Err("nothing waits"));
    assert!(!none.contains("<form") && none.contains("Nothing to approve: nothing waits"), "{none}");
    assert_eq!(Action::parse("approve"), Some(Action::Approve));
    assert!(!Action::ALL.contains(&Action::Approve), "not a button of the whole application");
}

#[test]
fn each_sync_of_the_history_has_a_page_with_its_objects() {
    let st = status();
    let record = SyncRecord {
        result: SyncResult::Succeeded,
        started_at: "2026-11-29T13:59:58Z".into(),
        finished_at: "2026-11-29T14:00:00Z".into(),
        applied: vec!["Deployment.apps/web/web".into(), format!("ConfigMap/web/{EVIL}")],
        recreated: vec!["Deployment.apps/web/web".into()],
        pruned: vec!["Service/web/old".into()],
        applied_omitted: 150,
        hooks: vec![crate::status::HookRun {
            phase: "PreSync".into(),
            object: "Job.batch/web/migrate-0123456".into(),
            result: "Succeeded".into(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_seconds: 12,
            message: String::new(),
        }],
        ..SyncRecord::new("0123456789abcdef", SyncReason::NewRevision)
    };
    let history = [record.clone()];
    let tree = tree();
    let view = AppView { status: &st, history: &history, history_error: None, events: Ok(&[]), tree: &tree };
    let html = application(&view, "alice", "plumb-system");
    assert!(html.contains("<a href=\"web/syncs/2026-11-29T13%3A59%3A58Z\">"), "the row links its sync: {html}");
    let page = sync("web", &record);
    assert!(page.contains("<a href=\"../../web\">"), "back to the application: {page}");
    assert!(page.contains("<h2>Applied (151)</h2>") && page.contains("ConfigMap/web/&lt;script&gt;"), "{page}");
    assert!(page.contains("150 more not named"), "{page}");
    assert!(page.contains("<h2>Recreated (deleted and created again: Force=true) (1)</h2>"), "{page}");
    assert!(page.contains("<h2>Pruned (1)</h2>\n<ul>\n<li><code>Service/web/old</code></li>"), "{page}");
    assert!(page.contains("<td>PreSync</td><td><code>Job.batch/web/migrate-0123456</code></td>"), "{page}");
    assert!(!page.contains("http-equiv=refresh"), "a finished sync does not reload: {page}");
    assert!(crate::page::sync_record("web", &history, "2026-11-29T13:59:58Z").is_some());
    assert!(crate::page::sync_record("web", &history, "2026-11-29T00:00:00Z").is_none());
}
