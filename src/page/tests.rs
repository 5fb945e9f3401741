#![allow(clippy::unwrap_used)]

use super::*;
use crate::{
    health::HealthStatus,
    status::{ConditionType, Pin, RenderTime, Suspension, SyncResult, SyncStatus},
};

const SHA: &str = "3f2c9a1b7d5e4f60718293a4b5c6d7e8f9012345";

fn record(subject: &str) -> SyncRecord {
    SyncRecord {
        subject: subject.into(),
        started_at: "2026-11-30T14:00:00.000Z".into(),
        finished_at: "2026-11-30T14:00:01.250Z".into(),
        applied: vec!["ConfigMap/web/site".into(), "Deployment.apps/web/web".into()],
        applied_omitted: 3,
        ..SyncRecord::new(SHA, crate::status::SyncReason::NewRevision)
    }
}

fn status() -> AppStatus {
    AppStatus {
        app: "web".into(),
        environment: "prod".into(),
        revision: SHA.into(),
        subject: "web: 3 replicas".into(),
        synced_revision: SHA.into(),
        sync: SyncStatus::OutOfSync,
        health: HealthStatus::Healthy,
        resources: vec![
            ResourceStatus {
                object: "Deployment.apps/web/web".into(),
                sync: SyncStatus::OutOfSync,
                reason: "differs at /spec/replicas 5→3 (set by kubectl via scale at 2026-11-29T14:02:11Z); /metadata/labels/team (absent)→a".into(),
                health: HealthStatus::Healthy,
                health_message: String::new(),
            },
            ResourceStatus {
                object: "ConfigMap/web/gone".into(),
                sync: SyncStatus::OutOfSync,
                reason: "missing".into(),
                health: HealthStatus::Missing,
                health_message: "not found".into(),
            },
        ],
        conditions: vec![Condition::new(ConditionType::OutOfSync, "live drifted from Git and selfHeal is off")],
        last_sync: Some(record("web: 3 replicas")),
        render: Some(RenderTime { tool: "kustomize".into(), millis: 1234, revision: SHA.into() }),
        ..AppStatus::default()
    }
}

#[test]
fn escape_covers_markup_and_quotes() {
    assert_eq!(
        escape(r#"<a href="x" onclick='y'>&</a>"#),
        "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
    );
    assert_eq!(escape("web: 3→5 replicas"), "web: 3→5 replicas");
}

#[test]
fn path_segments_cannot_add_segments_or_queries() {
    assert_eq!(path_segment("web-1.a_b~"), "web-1.a_b~");
    assert_eq!(path_segment("a/../b?c#d é"), "a%2F..%2Fb%3Fc%23d%20%C3%A9");
    assert_eq!(app_path("web"), "applications/web");
}

#[test]
fn drift_lines_name_field_change_and_manager() {
    let r = "differs at /spec/replicas 5→3 (set by kubectl via scale at 2026-11-29T14:02:11Z); /data/x a→b; /data/y (absent)→1 (set by kubectl-edit)";
    assert_eq!(
        drift_lines(r),
        [
            DriftLine {
                field: "/spec/replicas",
                change: "5→3",
                set_by: Some("kubectl via scale at 2026-11-29T14:02:11Z")
            },
            DriftLine { field: "/data/x", change: "a→b", set_by: None },
            DriftLine { field: "/data/y", change: "(absent)→1", set_by: Some("kubectl-edit") },
        ]
    );
    let client_side = format!("differs at /data/x a→b (set by kubectl-patch){CLIENT_SIDE}");
    assert_eq!(drift_lines(&client_side)[0].set_by, Some("kubectl-patch"));
    for not_drift in ["missing", "requires pruning", "", "differs at immutable field(s) /spec/selector: …"] {
        assert!(drift_lines(not_drift).is_empty(), "{not_drift}");
    }
}

#[test]
fn list_shows_each_application_with_its_words_and_link() {
    let other = AppStatus { app: "api".into(), environment: "dev".into(), ..AppStatus::default() };
    let html = list(&[other, status()]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<a href=\"applications/web\">web</a>"), "{html}");
    assert!(html.contains("<a href=\"applications/api\">api</a>"));
    assert!(html.contains(">OutOfSync</span>") && html.contains(">Healthy</span>"));
    assert!(html.contains("<code title=\"3f2c9a1b7d5e4f60718293a4b5c6d7e8f9012345\">3f2c9a1</code> web: 3 replicas"));
    assert!(html.contains(">Succeeded</span> <code"), "last sync result: {html}");
    assert!(html.contains("<span class=muted>never</span>"), "api never synced");
    assert!(!html.to_lowercase().contains("<script"), "no JavaScript");
    assert!(list(&[]).contains("No application has been reconciled yet."));
}

fn timings() -> PassTimings {
    PassTimings {
        at: "2026-11-30T10:00:00.000Z".into(),
        source_millis: 1200,
        compare_millis: 40,
        sync_millis: 0,
        total_millis: 1300,
    }
}

#[test]
fn application_page_shows_objects_drift_conditions_timings_history() {
    let mut failed = record("web: broken");
    failed.result = SyncResult::Failed;
    failed.message = "apply Deployment.apps/web/web: forbidden".into();
    let html = application(&status(), &[record("web: 3 replicas"), failed], None, Some(&timings()));
    assert!(html.contains("<h1>web</h1>"));
    assert!(html.contains("<a href=\"../\">"));
    // objects, and the drift table with the manager in its own column
    assert!(html.contains("<h2>Objects (2)</h2>"));
    assert!(html.contains("<td><code>ConfigMap/web/gone</code></td><td><span class=\"w OutOfSync\">OutOfSync</span></td><td><span class=\"w Missing\">Missing</span></td><td>missing<br>not found</td>"), "{html}");
    assert!(html.contains("2 field(s) differ (see <a href=\"#drift\">Drift</a>)"));
    assert!(html.contains("<h2 id=drift>Drift</h2>"));
    assert!(html.contains(
        "<tr><td><code>Deployment.apps/web/web</code></td><td><code>/spec/replicas</code></td><td>5→3</td><td>kubectl via scale at 2026-11-29T14:02:11Z</td></tr>"
    ), "{html}");
    assert!(html.contains(
        "<td><code>/metadata/labels/team</code></td><td>(absent)→a</td><td><span class=muted>unknown</span></td>"
    ));
    assert!(html.contains("<tr><td>OutOfSync</td><td>live drifted from Git and selfHeal is off</td></tr>"));
    // timings: render, last sync, each record
    assert!(html.contains("<dt>Render</dt><dd>kustomize in 1.2 s of <code>3f2c9a1</code></dd>"), "{html}");
    assert!(html.contains("(NewRevision), took 1.2 s"));
    assert!(
        html.contains("<dt>Last pass</dt><dd>at 2026-11-30T10:00:00.000Z: fetch and render 1.2 s, compare 40 ms, sync 0 ms; 1.3 s in all</dd>"),
        "{html}"
    );
    assert!(html.contains("<td class=nowrap>1.2 s</td>"));
    assert!(
        html.contains("<td><a href=\"web/syncs/2026-11-30T14%3A00%3A00.000Z\"><time datetime=\"2026-11-30T14:00:01.250Z\">2026-11-30 14:00:01 UTC</time></a></td>"),
        "{html}"
    );
    // history rows: applied counts what was left out of the names too
    assert!(html.contains("<td>5</td><td>0</td>"), "{html}");
    assert!(html.contains(">Failed</span></td><td>5</td><td>0</td><td>apply Deployment.apps/web/web: forbidden</td>"));
    assert!(html.contains("<dt>Paused / pinned</dt><dd>no</dd>"));
}

#[test]
fn attacker_controlled_text_renders_as_text() {
    let evil = "<script>alert(1)</script>";
    let mut st = status();
    st.app = format!("x\"><img src=x onerror=alert(1)>{evil}");
    st.subject = format!("fix {evil}");
    st.resources[0].object = format!("ConfigMap/web/{evil}");
    st.resources[0].reason = format!("differs at /data/k {evil}→b (set by {evil})");
    st.conditions[0].message = evil.into();
    st.orphaned = vec![evil.into()];
    let history = [record(evil)];
    for html in [list(std::slice::from_ref(&st)), application(&st, &history, Some(evil), None), not_found(evil)] {
        let lower = html.to_lowercase();
        assert!(!lower.contains("<script"), "{html}");
        assert!(!lower.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
    }
    // the link to the page cannot leave the attribute or the path
    let html = list(std::slice::from_ref(&st));
    assert!(
        html.contains("href=\"applications/x%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%3Cscript%3E"),
        "{html}"
    );
}

#[test]
fn paused_and_pinned_are_shown_with_who_why_and_when() {
    let mut st = status();
    st.suspended = Some(Suspension {
        by: "alice".into(),
        reason: "incident 42".into(),
        until: "2026-11-30T16:00:00Z".into(),
        ..Suspension::default()
    });
    st.pinned = Some(Pin {
        revision: SHA.into(),
        by: "bob".into(),
        at: "2026-11-30T13:00:00Z".into(),
        until_next_commit: true,
        force: false,
        ..Pin::default()
    });
    let html = list(std::slice::from_ref(&st));
    assert!(html.contains("<span class=hold>paused</span> until <time datetime=\"2026-11-30T16:00:00Z\">2026-11-30 16:00:00 UTC</time> (claimed by alice, not verified): incident 42"), "{html}");
    assert!(html.contains("<span class=hold>pinned</span> to <code title=\"3f2c9a1b7d5e4f60718293a4b5c6d7e8f9012345\">3f2c9a1</code> (claimed by bob, not verified) at <time datetime=\"2026-11-30T13:00:00Z\">2026-11-30 13:00:00 UTC</time> (until the next commit)"), "{html}");
    assert!(application(&st, &[], None, None).contains("paused</span> until"));
    // and a stored status with only the required fields loads them
    let stored = r#"{"app":"web","environment":"prod","suspended":{"until":"2026-11-30T16:00:00Z"},"pinned":{"revision":"abc"}}"#;
    let loaded: AppStatus = serde_json::from_str(stored).unwrap();
    assert_eq!(loaded.suspended.unwrap().until, "2026-11-30T16:00:00Z");
    assert_eq!(loaded.pinned.unwrap().revision, "abc");
}

#[test]
fn sync_windows_are_shown_with_the_next_change() {
    let mut st = status();
    assert!(!application(&st, &[], None, None).contains("Sync windows"), "none apply: no row");
    st.sync_windows = Some(crate::status::SyncWindows {
        closed: Some("deny window 1 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC".into()),
        manual_closed: Some("same".into()),
        active: vec!["deny window 1 (0 9 * * * UTC, 1h) until 2026-12-02 10:00 UTC".into()],
        next_change: Some("2026-12-02T10:00:00Z".into()),
    });
    let html = application(&st, &[], None, None);
    assert!(
        html.contains("<dt>Sync windows</dt><dd>all syncs held; active: deny window 1 (0 9 * * * UTC, 1h) until 2026-12-02 10:00 UTC; next change at 2026-12-02T10:00:00Z</dd>"),
        "{html}"
    );
}

#[test]
fn the_replica_and_shard_that_reconciled_are_shown() {
    let mut st = status();
    assert!(!application(&st, &[], None, None).contains("Reconciled by"));
    st.reconciler =
        Some(crate::status::Reconciler { replica: "plumb-7c9<b>".into(), shard: 2, shards: 6, lease_transitions: 4 });
    let html = application(&st, &[], None, None);
    assert!(html.contains("<dt>Reconciled by</dt><dd>plumb-7c9&lt;b&gt; (shard 2/6)</dd>"), "{html}");
}

#[test]
fn history_error_and_empty_states_are_said() {
    let st = AppStatus { app: "new".into(), ..AppStatus::default() };
    let html = application(&st, &[], None, None);
    assert!(html.contains("<h2>Objects (0)</h2>\n<p>None.</p>"));
    assert!(html.contains("No sync yet."));
    assert!(html.contains("<span class=muted>none yet</span>"));
    assert!(
        application(&st, &[], Some("configmaps is forbidden"), None)
            .contains("The history could not be read: configmaps is forbidden")
    );
    let capped = AppStatus { resources_omitted: 7, ..status() };
    assert!(application(&capped, &[], None, None).contains("7 more object(s)"));
}

#[test]
fn the_signature_check_is_shown_escaped() {
    let mut st = status();
    assert!(!application(&st, &[], None, None).contains("<dt>Signature</dt>"), "nothing verified: no row");
    st.verification = Some(crate::status::Verification {
        revision: SHA.into(),
        mode: "head".into(),
        author: "Mallory <m@example.com>".into(),
        fingerprint: "SHA256:abc".into(),
        reason: "signed by an unknown key SHA256:abc".into(),
        ..crate::status::Verification::default()
    });
    let html = application(&st, &[], None, None);
    assert!(
        html.contains("<dt>Signature</dt><dd>3f2c9a1 not trusted: signed by an unknown key SHA256:abc [head]</dd>"),
        "{html}"
    );
    st.verification = Some(crate::status::Verification {
        verified: true,
        signer: "<ada>".into(),
        reason: String::new(),
        ..st.verification.clone().unwrap()
    });
    let html = application(&st, &[], None, None);
    assert!(html.contains("<dd>3f2c9a1 signed by &lt;ada&gt; (SHA256:abc) [head]</dd>"), "{html}");
}
