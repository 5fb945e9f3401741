//! The status page's preview view: the whole plan of the last preview of each pull
//! request, for a comment cut to the forge's size (it links here) and for the
//! `plumb/preview` status's link.
//!
//! ```text
//!  GET /previews/{repository}/{number}   the plans of pull request {number} of the
//!                                        policy's repository {repository}
//! ```
//!
//! [`Shown`] keeps the last [`MAX_SHOWN`] previews in memory (a restart forgets them;
//! the next push shows again); the view is pure ([`html`]), HTML-escaped like the rest
//! of the status page ([`crate::page`]) and behind the same right. A plan holds what
//! the comment holds: values masked as everywhere, no Secret data.

use std::{collections::VecDeque, fmt::Write as _, sync::Mutex};

use super::{Action, AppPlan};
use crate::{
    page::{escape, page},
    status::short,
};

/// Most previews kept, newest first (64: one per pull request; the oldest is forgotten
/// first).
pub const MAX_SHOWN: usize = 64;

/// Most bytes of one value or detail a kept preview holds (4 KiB; `plumb preview`
/// prints them whole): 64 previews stay a few MiB whatever a pull request sets.
pub const MAX_VALUE_BYTES: usize = 4096;

/// `text` cut to [`MAX_VALUE_BYTES`] on a character boundary, with `…` when cut.
fn cut(text: &str) -> String {
    if text.len() <= MAX_VALUE_BYTES {
        return text.to_string();
    }
    format!("{}…", &text[..text.floor_char_boundary(MAX_VALUE_BYTES)])
}

/// The last preview of one pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// The policy's name of the repository.
    pub repository: String,
    /// The pull request's number.
    pub number: u64,
    /// The head commit previewed.
    pub head: String,
    /// The branch it would merge into.
    pub base: String,
    /// When it was computed (RFC 3339).
    pub at: String,
    /// The plans, one per application the pull request touches.
    pub plans: Vec<AppPlan>,
}

/// The last previews, at most [`MAX_SHOWN`], one per pull request.
#[derive(Debug, Default)]
pub struct Shown {
    kept: Mutex<VecDeque<Preview>>,
}

impl Shown {
    /// Keeps `p` as its pull request's preview, replacing the one before; each value
    /// and detail cut at [`MAX_VALUE_BYTES`].
    pub fn put(&self, mut p: Preview) {
        for s in p.plans.iter_mut().flat_map(|plan| plan.steps.iter_mut()) {
            s.detail = cut(&s.detail);
            for f in &mut s.fields {
                for v in [&mut f.old, &mut f.new].into_iter().flatten() {
                    let text = match &*v {
                        serde_json::Value::String(t) => t.clone(),
                        other => other.to_string(),
                    };
                    if text.len() > MAX_VALUE_BYTES {
                        *v = serde_json::Value::String(cut(&text));
                    }
                }
            }
        }
        let Ok(mut kept) = self.kept.lock() else { return };
        kept.retain(|k| (k.repository.as_str(), k.number) != (p.repository.as_str(), p.number));
        kept.push_front(p);
        kept.truncate(MAX_SHOWN);
    }

    /// The preview of pull request `number` of `repository`, if kept.
    pub fn get(&self, repository: &str, number: u64) -> Option<Preview> {
        let kept = self.kept.lock().ok()?;
        kept.iter().find(|k| k.repository == repository && k.number == number).cloned()
    }
}

/// The link to pull request `number`'s preview view: `template` (a repository's
/// `commitStatus.previewUrl`) with every `{repository}` and `{number}` replaced, the
/// repository's name as one percent-encoded path segment.
pub fn link(template: &str, repository: &str, number: u64) -> String {
    template.replace("{repository}", &crate::page::path_segment(repository)).replace("{number}", &number.to_string())
}

/// The preview view of `p`: a summary table, then each application's steps with their
/// fields `old → new`, every value escaped.
pub fn html(p: &Preview) -> String {
    let mut b = format!(
        "<h1>plumb preview of pull request {} of {}</h1>\n<dl><dt>head</dt><dd><code title=\"{}\">{}</code></dd><dt>into</dt><dd><code>{}</code></dd><dt>computed</dt><dd><time>{}</time></dd></dl>\n",
        p.number,
        escape(&p.repository),
        escape(&p.head),
        escape(short(&p.head)),
        escape(&p.base),
        escape(&p.at),
    );
    if p.plans.is_empty() {
        b.push_str(
            "<p>This pull request changes no input of an application following this branch: nothing to sync.</p>\n",
        );
    }
    for plan in &p.plans {
        let _ = write!(
            b,
            "<h2>{}</h2>\n<p><span class=\"w {sync}\">{sync}</span> at <code>{}</code></p>\n",
            escape(&plan.app),
            escape(short(&plan.revision)),
            sync = escape(&plan.sync.to_string()),
        );
        if plan.steps.is_empty() {
            b.push_str("<p>Nothing to do.</p>\n");
            continue;
        }
        b.push_str("<table>\n<thead><tr><th>action</th><th>object</th><th>detail</th></tr></thead>\n<tbody>\n");
        for s in &plan.steps {
            let class = match s.action {
                Action::Error | Action::Refused | Action::Prune => " class=Failed",
                Action::Skip | Action::Warning => " class=hold",
                _ => "",
            };
            let mut detail = escape(&s.detail);
            if let Some(loss) = &s.data_loss {
                let _ = write!(detail, " <strong>[{}]</strong>", escape(loss));
            }
            if let Some(w) = s.wave {
                let _ = write!(detail, " <span class=muted>(wave {w})</span>");
            }
            if !s.fields.is_empty() {
                detail.push_str("<ul>");
                for f in &s.fields {
                    let show = |v: &Option<serde_json::Value>| match v {
                        None => "<span class=muted>(absent)</span>".to_string(),
                        Some(serde_json::Value::String(s)) => format!("<code>{}</code>", escape(s)),
                        Some(v) => format!("<code>{}</code>", escape(&v.to_string())),
                    };
                    let _ = write!(
                        detail,
                        "<li><code>{}</code>: {} → {}</li>",
                        escape(&f.path),
                        show(&f.old),
                        show(&f.new)
                    );
                }
                detail.push_str("</ul>");
            }
            let _ = writeln!(
                b,
                "<tr><td{class}>{}</td><td><code>{}</code></td><td>{detail}</td></tr>",
                escape(s.action.word().trim_end()),
                escape(&s.object),
            );
        }
        b.push_str("</tbody>\n</table>\n");
    }
    page(&format!("plumb preview: {} #{}", p.repository, p.number), &b)
}

/// The page for a pull request with no preview kept.
pub fn not_found(repository: &str, number: u64) -> String {
    page(
        "plumb preview",
        &format!(
            "<h1>No preview of pull request {number} of {}</h1>\n<p>None was computed since plumb started, or it was forgotten (plumb keeps the last {MAX_SHOWN}). The next push to the pull request shows it again.</p>\n",
            escape(repository)
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{
        compare::SyncStatus,
        preview::{FieldChange, Step},
    };

    fn preview(number: u64, object: &str) -> Preview {
        Preview {
            repository: "config".into(),
            number,
            head: "a".repeat(40),
            base: "main".into(),
            at: "2026-12-03T18:00:00Z".into(),
            plans: vec![AppPlan {
                app: "web".into(),
                revision: "a".repeat(40),
                sync: SyncStatus::OutOfSync,
                steps: vec![
                    Step {
                        action: Action::Update,
                        object: object.into(),
                        detail: String::new(),
                        wave: None,
                        fields: vec![FieldChange {
                            path: "/spec/template/spec/containers/0/image".into(),
                            old: Some("nginx:1.26".into()),
                            new: Some("nginx:1.27".into()),
                        }],
                        data_loss: None,
                    },
                    Step {
                        action: Action::Prune,
                        object: "PersistentVolumeClaim/web/data".into(),
                        detail: String::new(),
                        wave: None,
                        fields: vec![],
                        data_loss: Some("PersistentVolumeClaim (its volume's data)".into()),
                    },
                ],
            }],
        }
    }

    #[test]
    fn the_view_shows_every_step_and_escapes_what_git_wrote() {
        let page = html(&preview(7, "Deployment/web/<script>alert(1)</script>"));
        assert!(page.contains("pull request 7 of config"));
        assert!(page.contains(
            "<code>/spec/template/spec/containers/0/image</code>: <code>nginx:1.26</code> → <code>nginx:1.27</code>"
        ));
        assert!(page.contains("PersistentVolumeClaim/web/data"));
        assert!(page.contains("[PersistentVolumeClaim (its volume&#39;s data)]"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("<script>"));
    }

    #[test]
    fn one_preview_per_pull_request_and_at_most_max_shown() {
        let shown = Shown::default();
        shown.put(preview(1, "Deployment/web/a"));
        shown.put(preview(1, "Deployment/web/b"));
        assert_eq!(shown.get("config", 1).unwrap().plans[0].steps[0].object, "Deployment/web/b");
        assert_eq!(shown.get("other", 1), None);
        for n in 2..=(MAX_SHOWN as u64 + 1) {
            shown.put(preview(n, "Deployment/web/a"));
        }
        assert_eq!(shown.get("config", 1), None, "the oldest is forgotten first");
        assert!(shown.get("config", MAX_SHOWN as u64 + 1).is_some());
        assert_eq!(shown.kept.lock().unwrap().len(), MAX_SHOWN);
    }

    /// A pull request that sets a huge value is kept cut: the view stays small.
    #[test]
    fn kept_values_are_cut() {
        let shown = Shown::default();
        let mut p = preview(3, "Deployment/web/a");
        p.plans[0].steps[0].fields[0].new = Some(serde_json::Value::String("x".repeat(1 << 20)));
        p.plans[0].steps[1].detail = "y".repeat(1 << 20);
        shown.put(p);
        let kept = shown.get("config", 3).unwrap();
        let new = kept.plans[0].steps[0].fields[0].new.as_ref().unwrap().as_str().unwrap().to_string();
        assert!(new.len() <= MAX_VALUE_BYTES + 3 && new.ends_with('…'), "{}", new.len());
        assert!(kept.plans[0].steps[1].detail.len() <= MAX_VALUE_BYTES + 3);
        assert_eq!(kept.plans[0].steps[0].fields[0].old, Some("nginx:1.26".into()), "short values stay whole");
    }

    #[test]
    fn the_link_fills_repository_and_number() {
        assert_eq!(
            link("https://plumb.example.com/previews/{repository}/{number}", "team a/config", 12),
            "https://plumb.example.com/previews/team%20a%2Fconfig/12"
        );
    }
}
