//! The plan of a preview: what a sync of one application at one revision would do,
//! as values — objects to create, to update (each field's path, live value → Git's
//! value, sensitive values masked as everywhere), to prune (with its data-loss class and
//! whether a guard would hold it), objects a boundary refuses, render and comparison
//! errors. `plumb sync --dry-run`, `plumb preview` and the comment plumb posts on a
//! pull request ([`comment`]) all print this one plan, with the same words.
//!
//! Pure: [`AppPlan::of`] reads a [`PassReport`] of a pass in
//! [`Mode::Preview`](crate::reconcile::Mode::Preview) (which writes nothing); the
//! renderings take values and return text.

use std::fmt::Write as _;

use serde::Serialize;

use crate::{
    compare::{ObjectReason, SyncStatus},
    reconcile::PassReport,
    status::{ConditionType, short},
};

/// What a sync would do to one object, or a fact about the whole application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Created (not in the cluster).
    Create,
    /// Fields changed by server-side apply.
    Update,
    /// Applied although Synced (`ApplyOutOfSyncOnly=false`).
    Apply,
    /// Deleted and created again (`Force=true` on an immutable field).
    Recreate,
    /// Deleted: Git no longer declares it.
    Prune,
    /// Left alone: the reason says why (a prune guard, another owner).
    Skip,
    /// Cannot be compared or rendered: never applied, holds every prune back.
    Error,
    /// The whole sync is refused (a boundary, a guard): nothing would be written.
    Refused,
    /// A warning about the application (objects left orphaned).
    Warning,
}

impl Action {
    /// The word the text plan starts its line with, padded to 8 characters.
    fn word(&self) -> &'static str {
        match self {
            Action::Create => "create  ",
            Action::Update => "update  ",
            Action::Apply => "apply   ",
            Action::Recreate => "recreate",
            Action::Prune => "prune   ",
            Action::Skip => "skip    ",
            Action::Error => "error   ",
            Action::Refused => "refused ",
            Action::Warning => "warning ",
        }
    }
}

/// One field an update changes: its RFC 6901 path, the live value and Git's value
/// (`None`: absent on that side), both masked when sensitive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// `/spec/template/spec/containers/0/image`.
    pub path: String,
    /// The live value.
    pub old: Option<serde_json::Value>,
    /// Git's value.
    pub new: Option<serde_json::Value>,
}

/// One line of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What happens.
    pub action: Action,
    /// `Kind/namespace/name` (empty for a fact about the whole application).
    pub object: String,
    /// Why, or what (the reason of an error, a skip, a refusal; the differing paths of
    /// an update).
    pub detail: String,
    /// The sync wave the step runs in, when the plan has more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<i64>,
    /// The fields an update changes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// The data-loss class of a prune (`PersistentVolumeClaim (its volume's data)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_loss: Option<String>,
}

/// What a sync of one application at one revision would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppPlan {
    /// The application.
    pub app: String,
    /// The commit compared (full SHA; empty when nothing could be fetched).
    pub revision: String,
    /// Its sync status against the live cluster.
    pub sync: SyncStatus,
    /// The steps, in the order a sync runs them: per wave the creates and updates, then
    /// the prunes, the skips, warnings, errors and a refusal.
    pub steps: Vec<Step>,
}

impl AppPlan {
    /// The plan of a preview pass's `report` of application `app`.
    pub fn of(app: &str, report: &PassReport) -> AppPlan {
        let p = &report.plan;
        let diffs = report.diffs();
        let mut steps = vec![];
        let step = |action, object: &str, detail: String| Step {
            action,
            object: object.to_string(),
            detail,
            wave: None,
            fields: vec![],
            data_loss: None,
        };
        if let Some(r) = &p.refused {
            steps.push(step(Action::Refused, "", r.clone()));
        }
        let multi = p.waves.len() > 1;
        for w in &p.waves {
            for &i in &w.members {
                let d = &diffs[i];
                let unknown = report.status.resources.get(i).is_some_and(|r| r.sync == SyncStatus::Unknown);
                if !unknown && !w.apply.contains(&i) {
                    continue; // Synced: nothing to do
                }
                let immutable = matches!(d.verdict, Some(ObjectReason::Immutable(_)));
                let mut s = if unknown || (immutable && !p.recreate.contains(&i)) {
                    step(Action::Error, &d.object, d.reason.clone())
                } else if d.live.is_none() {
                    let why = if d.verdict == Some(ObjectReason::Missing) { String::new() } else { d.reason.clone() };
                    step(Action::Create, &d.object, why)
                } else if immutable {
                    step(Action::Recreate, &d.object, format!("delete and create (Force=true): {}", d.reason))
                } else if d.verdict == Some(ObjectReason::Synced) {
                    step(Action::Apply, &d.object, "ApplyOutOfSyncOnly=false".into())
                } else {
                    let paths: Vec<&str> = d.differences.iter().map(|x| x.path.as_str()).collect();
                    let mut s = step(Action::Update, &d.object, paths.join(", "));
                    s.fields = d
                        .differences
                        .iter()
                        .map(|x| FieldChange { path: x.path.clone(), old: x.live.clone(), new: x.desired.clone() })
                        .collect();
                    s
                };
                s.wave = multi.then_some(w.wave.into());
                steps.push(s);
            }
        }
        for c in &p.prune {
            let mut s = step(Action::Prune, &c.key.to_string(), String::new());
            s.data_loss = crate::plan::data_loss_class(&c.key.group, &c.key.kind).map(str::to_string);
            steps.push(s);
        }
        for c in &p.prune_last {
            let mut s = step(Action::Prune, &c.key.to_string(), "PruneLast: once everything is Healthy".into());
            s.data_loss = crate::plan::data_loss_class(&c.key.group, &c.key.kind).map(str::to_string);
            steps.push(s);
        }
        for (object, why) in &p.skipped {
            let mut s = step(Action::Skip, object, why.to_string());
            // `Kind[.group]/namespace/name`
            let kind = object.split('/').next().unwrap_or_default();
            let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
            s.data_loss =
                why.is_prune().then(|| crate::plan::data_loss_class(group, kind).map(str::to_string)).flatten();
            steps.push(s);
        }
        let conditions = |t: ConditionType| report.status.conditions.iter().filter(move |c| c.type_ == t);
        for c in conditions(ConditionType::OrphanedResourceWarning) {
            steps.push(step(Action::Warning, "", c.message.clone()));
        }
        if report.status.sync == SyncStatus::Unknown {
            // nothing could be compared (a path that does not exist at the revision, a
            // fetch or render error): say so, never "nothing to do"
            for c in conditions(ConditionType::ComparisonError) {
                steps.push(step(Action::Error, "", c.message.clone()));
            }
        }
        for c in conditions(ConditionType::SyncError) {
            steps.push(step(Action::Refused, "", c.message.clone()));
        }
        AppPlan { app: app.to_string(), revision: report.status.revision.clone(), sync: report.status.sync, steps }
    }

    /// Whether a sync would write anything (create, update, apply, re-create, prune).
    pub fn changes(&self) -> bool {
        self.steps.iter().any(|s| {
            matches!(s.action, Action::Create | Action::Update | Action::Apply | Action::Recreate | Action::Prune)
        })
    }

    /// Whether the plan could not be computed or would be refused (an error, a refusal,
    /// a sync status of Unknown).
    pub fn failed(&self) -> bool {
        self.sync == SyncStatus::Unknown || self.steps.iter().any(|s| matches!(s.action, Action::Refused))
    }

    /// The plan as `plumb sync --dry-run` prints it: one line per step (`create
    /// ConfigMap/web/settings`, `update Deployment/web/web  /spec/replicas`, `prune
    /// PersistentVolumeClaim/web/data  [PersistentVolumeClaim (its volume's data)]`),
    /// under `wave N:` headers when there are several waves; `nothing to do: …` when
    /// there is no step. Control characters of Git's and the cluster's text are shown
    /// escaped.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut wave = None;
        for s in &self.steps {
            if s.wave.is_some() && s.wave != wave {
                let _ = writeln!(out, "wave {}:", s.wave.unwrap_or_default());
                wave = s.wave;
            }
            let indent = if s.wave.is_some() { "  " } else { "" };
            let detail = match (&s.action, s.detail.is_empty(), &s.data_loss) {
                (Action::Prune, _, Some(class)) if s.detail.is_empty() => format!("  [{class}]"),
                (Action::Prune, false, _) | (Action::Create, false, _) => format!("  ({})", s.detail),
                (Action::Apply, _, _) => format!("  ({})", s.detail),
                (_, true, _) => String::new(),
                _ => format!("  {}", s.detail),
            };
            let line = match s.object.as_str() {
                "" => format!("{} {}", s.action.word(), s.detail),
                o => format!("{} {o}{detail}", s.action.word()),
            };
            let _ = writeln!(out, "{indent}{}", sanitize(&line));
        }
        if out.is_empty() {
            let _ = writeln!(out, "nothing to do: {} at {}", self.sync, short(&self.revision));
        }
        out
    }
}

/// `text` with control characters (but newlines) escaped, so a Git or API string
/// cannot move a terminal's cursor or forge a line of the plan.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\n' { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

/// The line a comment starts with: plumb finds its own comment on a pull request by it
/// and edits that one rather than adding another.
pub const COMMENT_MARKER: &str = "<!-- plumb-preview -->";

/// Longest comment plumb posts, in bytes: GitHub refuses bodies over 65,536 characters
/// ("Create an issue comment": `body` is limited to 65536 characters), and Gitea and
/// GitLab take at least as much.
pub const MAX_COMMENT_BYTES: usize = 60_000;

/// The pull request a comment is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullHead {
    /// The pull (merge) request's number.
    pub number: u64,
    /// The head commit previewed (full SHA).
    pub sha: String,
    /// The branch it would merge into.
    pub base: String,
}

/// The pull request comment for `plans` (one per application the pull request touches,
/// in name order): a summary table, then each application's steps, updates with their
/// fields `old → new` (values masked as in the plans). Cut at `max_bytes` (at most
/// [`MAX_COMMENT_BYTES`]) on a line boundary, saying so and pointing at `link` (the
/// status page's preview view) when there is one. Starts with [`COMMENT_MARKER`].
/// Markdown: text from Git or the cluster is put in code spans with its backticks and
/// line breaks neutralised, so it cannot close a span, open a link or mention anyone.
pub fn comment(pr: &PullHead, plans: &[AppPlan], link: Option<&str>, max_bytes: usize) -> String {
    let max_bytes = max_bytes.min(MAX_COMMENT_BYTES);
    let mut head = format!("{COMMENT_MARKER}\n### plumb preview of {} into `{}`\n\n", short(&pr.sha), code(&pr.base));
    if plans.is_empty() {
        head.push_str("This pull request changes no input of an application following this branch: nothing to sync.\n");
        return head;
    }
    head.push_str("| application | sync | create | update | prune | held | errors |\n|---|---|---|---|---|---|---|\n");
    for p in plans {
        let n = |a: Action| p.steps.iter().filter(|s| s.action == a).count();
        let held = p.steps.iter().filter(|s| s.action == Action::Skip).count();
        let errors = n(Action::Error) + n(Action::Refused);
        let _ = writeln!(
            head,
            "| `{}` | {} | {} | {} | {} | {held} | {errors} |",
            code(&p.app),
            p.sync,
            n(Action::Create),
            n(Action::Update) + n(Action::Apply) + n(Action::Recreate),
            n(Action::Prune),
        );
    }
    let mut body = String::new();
    for p in plans {
        let _ = writeln!(body, "\n#### `{}`\n", code(&p.app));
        if p.steps.is_empty() {
            let _ = writeln!(body, "Nothing to do: {} at `{}`.", p.sync, short(&p.revision));
        }
        for s in &p.steps {
            let _ = writeln!(body, "{}", markdown_step(s));
            for f in &s.fields {
                let show = |v: &Option<serde_json::Value>| match v {
                    None => "(absent)".to_string(),
                    Some(serde_json::Value::String(s)) => format!("`{}`", code(&cut(s, 200))),
                    Some(v) => format!("`{}`", code(&cut(&v.to_string(), 200))),
                };
                let _ = writeln!(body, "  - `{}`: {} → {}", code(&f.path), show(&f.old), show(&f.new));
            }
        }
    }
    let mut out = head;
    if out.len() + body.len() <= max_bytes {
        out.push_str(&body);
        return out;
    }
    let tail = match link {
        Some(l) => format!("\n… cut at {max_bytes} bytes: the whole plan is at {l}\n"),
        None => format!("\n… cut at {max_bytes} bytes: run `plumb preview` for the whole plan\n"),
    };
    let room = max_bytes.saturating_sub(out.len() + tail.len());
    let mut used = 0;
    for line in body.split_inclusive('\n') {
        if used + line.len() > room {
            break;
        }
        out.push_str(line);
        used += line.len();
    }
    out.push_str(&tail);
    out
}

/// One step as a Markdown list item.
fn markdown_step(s: &Step) -> String {
    let verb = match s.action {
        Action::Create => "➕ create",
        Action::Update => "✏️ update",
        Action::Apply => "✏️ apply",
        Action::Recreate => "♻️ recreate",
        Action::Prune => "🗑️ prune",
        Action::Skip => "⏸️ skip",
        Action::Error => "❌ error",
        Action::Refused => "⛔ refused",
        Action::Warning => "⚠️ warning",
    };
    let mut line = format!("- {verb}");
    if !s.object.is_empty() {
        let _ = write!(line, " `{}`", code(&s.object));
    }
    if let Some(class) = &s.data_loss {
        let _ = write!(line, " — **data loss: {}**", code(class));
    }
    if !s.detail.is_empty() && s.action != Action::Update {
        let _ = write!(line, ": `{}`", code(&cut(&s.detail, 500)));
    }
    line
}

/// `text` safe inside a Markdown code span on one line: backticks become `'`, line
/// breaks and other control characters spaces.
fn code(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '`' {
                '\''
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max { text.to_string() } else { format!("{}…", &text[..text.floor_char_boundary(max)]) }
}

pub mod page;
pub mod queue;
pub mod run;

#[cfg(test)]
mod tests;
