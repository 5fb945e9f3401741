#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn step(action: Action, object: &str, detail: &str) -> Step {
    Step { action, object: object.into(), detail: detail.into(), wave: None, fields: vec![], data_loss: None }
}

/// The plan the lab's pull request makes: an image changed, a ConfigMap added, a
/// PersistentVolumeClaim removed (held: it needs approval).
fn pr_plan() -> AppPlan {
    let mut update = step(Action::Update, "Deployment/web/web", "/spec/template/spec/containers/0/image");
    update.fields = vec![FieldChange {
        path: "/spec/template/spec/containers/0/image".into(),
        old: Some(json!("nginx:1.27")),
        new: Some(json!("nginx:1.28")),
    }];
    let mut held = step(
        Action::Skip,
        "PersistentVolumeClaim/web/data",
        "prune needs approval (data-loss class PersistentVolumeClaim (its volume's data)): plumb prune web --approve",
    );
    held.data_loss = Some("PersistentVolumeClaim (its volume's data)".into());
    AppPlan {
        app: "web".into(),
        revision: "0123456789abcdef0123456789abcdef01234567".into(),
        sync: SyncStatus::OutOfSync,
        steps: vec![step(Action::Create, "ConfigMap/web/settings", ""), update, held],
    }
}

#[test]
fn text_is_the_dry_run_words() {
    let text = pr_plan().text();
    assert_eq!(
        text,
        "create   ConfigMap/web/settings\n\
         update   Deployment/web/web  /spec/template/spec/containers/0/image\n\
         skip     PersistentVolumeClaim/web/data  prune needs approval (data-loss class PersistentVolumeClaim (its volume's data)): plumb prune web --approve\n"
    );
    let mut pruned = step(Action::Prune, "PersistentVolumeClaim/web/data", "");
    pruned.data_loss = Some("PersistentVolumeClaim (its volume's data)".into());
    let plan = AppPlan { steps: vec![pruned], ..pr_plan() };
    assert_eq!(plan.text(), "prune    PersistentVolumeClaim/web/data  [PersistentVolumeClaim (its volume's data)]\n");
    let empty = AppPlan { steps: vec![], sync: SyncStatus::Synced, ..pr_plan() };
    assert_eq!(empty.text(), "nothing to do: Synced at 0123456\n");
    assert!(!empty.changes() && !empty.failed());
    assert!(pr_plan().changes() && !pr_plan().failed());
}

#[test]
fn waves_get_headers_and_control_characters_are_escaped() {
    let mut a = step(Action::Create, "Namespace//web", "");
    a.wave = Some(-1);
    let mut b = step(Action::Error, "ConfigMap/web/x", "bad\x1b[2Jvalue");
    b.wave = Some(2);
    let plan = AppPlan { steps: vec![a, b], ..pr_plan() };
    assert_eq!(
        plan.text(),
        "wave -1:\n  create   Namespace//web\nwave 2:\n  error    ConfigMap/web/x  bad\\u{1b}[2Jvalue\n"
    );
    assert!(!plan.failed(), "an object's error alone leaves the rest of the plan computed");
    let refused = AppPlan { steps: vec![step(Action::Refused, "", "Namespace kube-system is outside")], ..pr_plan() };
    assert!(refused.failed());
    assert_eq!(refused.text(), "refused  Namespace kube-system is outside\n");
}

#[test]
fn comment_lists_every_step_with_old_and_new_values() {
    let pr = PullHead { number: 7, sha: "89abcdef".repeat(5), base: "main".into() };
    let c = comment(&pr, &[pr_plan()], None, MAX_COMMENT_BYTES);
    assert!(c.starts_with(COMMENT_MARKER), "{c}");
    assert!(c.contains("| `web` | OutOfSync | 1 | 1 | 0 | 1 | 0 |"), "{c}");
    assert!(c.contains("- ➕ create `ConfigMap/web/settings`"), "{c}");
    assert!(c.contains("- ✏️ update `Deployment/web/web`\n  - `/spec/template/spec/containers/0/image`: `nginx:1.27` → `nginx:1.28`"), "{c}");
    assert!(
        c.contains(
            "- ⏸️ skip `PersistentVolumeClaim/web/data` — **data loss: PersistentVolumeClaim (its volume's data)**"
        ),
        "{c}"
    );
    let none = comment(&pr, &[], None, MAX_COMMENT_BYTES);
    assert!(none.contains("changes no input of an application"), "{none}");
}

/// Text from Git (an object's name, a value) cannot close its code span and write
/// Markdown of its own (a link, a mention, a fake table row).
#[test]
fn comment_neutralises_markdown_in_values() {
    let mut plan = pr_plan();
    plan.steps[1].fields[0].new = Some(json!("x` [click](https://evil.invalid) @everyone\n| fake |"));
    let pr = PullHead { number: 7, sha: "89abcdef".repeat(5), base: "ma`in".into() };
    let c = comment(&pr, &[plan], None, MAX_COMMENT_BYTES);
    assert!(c.contains("`nginx:1.27` → `x' [click](https://evil.invalid) @everyone | fake |`"), "{c}");
    assert!(c.contains("into `ma'in`"), "{c}");
    assert!(!c.contains("\n| fake |"), "{c}");
}

#[test]
fn comment_is_cut_on_a_line_with_a_link() {
    let mut plan = pr_plan();
    plan.steps = (0..2_000).map(|i| step(Action::Create, &format!("ConfigMap/web/c{i:04}"), "")).collect();
    let pr = PullHead { number: 7, sha: "89abcdef".repeat(5), base: "main".into() };
    let c = comment(&pr, &[plan.clone()], Some("https://plumb.example/previews/x"), 4_000);
    assert!(c.len() <= 4_000, "{}", c.len());
    assert!(c.ends_with("… cut at 4000 bytes: the whole plan is at https://plumb.example/previews/x\n"), "{c}");
    assert!(c.contains("| `web` | OutOfSync | 2000 |"), "the summary survives the cut: {c}");
    let whole = comment(&pr, &[plan], None, usize::MAX);
    assert!(whole.len() <= MAX_COMMENT_BYTES);
}
