//! The pages of `plumb ui`: the status page ([`super::list`], [`super::application`])
//! as served on a person's own machine, read with their kubeconfig, with what only a
//! person at a browser needs: a resource tree with health per node, one object's
//! drift, the Events, each sync's objects, actions (sync, refresh, suspend, resume,
//! rollback, approving a held prune) behind a confirmation page, and a reload every
//! [`REFRESH_SECONDS`] (answered `304 Not Modified` when nothing changed: an `ETag`).
//!
//! ```text
//!  GET  /                                   list (reloads itself)
//!  GET  /applications/{app}                 actions, summary, tree, objects, drift, Events, history
//!  GET  /applications/{app}/objects/{obj}   one object: sync, health, drift lines, live children
//!  GET  /applications/{app}/syncs/{start}  one sync: what it applied, recreated and pruned, its hooks
//!  GET  /applications/{app}/confirm?action= "Sync web now?" with a POST form (&object= for approve)
//!  POST /applications/{app}/actions         performs it as the kubeconfig's user
//! ```
//!
//! Pure, like [`super`]: values in, HTML out, every value escaped. The action forms
//! carry a per-process token ([`confirm`]'s `csrf`), never a credential; the pages
//! contain no script (the CSP of [`CONTENT_SECURITY_POLICY`] only differs from the
//! in-cluster page's by letting forms post to the page's own origin).

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Event;

use super::{app_path, application_body, escape, list_body, page_refreshed, path_segment, time, word};
use crate::{
    health::HealthStatus,
    status::{AppStatus, SyncRecord},
};

/// `Content-Security-Policy` of every `plumb ui` page: as
/// [`super::CONTENT_SECURITY_POLICY`], but forms may post to the page's own origin.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Seconds between reloads of the list and an application's page (`<meta
/// http-equiv=refresh>`).
pub const REFRESH_SECONDS: u32 = 10;

/// Events shown on an application's page at most (the newest).
pub const MAX_EVENTS: usize = 50;

const FORM_STYLE: &str = "<style>form.a{display:inline-block;margin:0 .4rem .4rem 0}button{font:inherit;padding:.35rem .8rem}\
ul.tree,ul.tree ul{list-style:none;padding-left:1.1rem;margin:.2rem 0}ul.tree{padding-left:0}ul.tree li{margin:.2rem 0;overflow-wrap:anywhere}\
h1{overflow-wrap:anywhere}\
label{display:block;margin:.5rem 0}input[type=text]{font:inherit;width:100%;max-width:30rem;box-sizing:border-box}</style>\n";

/// What a person may ask from the page; each one what the CLI command of the same name
/// writes on the application's resource (`applications.plumb.dev`), as the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `plumb sync APP`: a manual sync, whatever the policy.
    Sync,
    /// `plumb refresh APP`: a pass under the policy.
    Refresh,
    /// `plumb suspend APP --for D --reason R`: pause automated sync and selfHeal.
    Suspend,
    /// `plumb resume APP`: end a pause.
    Resume,
    /// `plumb rollback APP`: pin the previous successful revision.
    Rollback,
    /// `plumb rollback APP --release`: follow the tracked ref again.
    Release,
    /// Approve the prune of one object held for an approval (`Prune=confirm`, a
    /// data-loss class): `kubectl annotate … plumb.dev/prune-approved=<now>` on the
    /// live object, as the user ([`crate::plan::prune_approval`]).
    Approve,
}

impl Action {
    /// Every action on a whole application, in the order the page shows them
    /// ([`Action::Approve`] is on one object).
    pub const ALL: [Action; 6] =
        [Action::Sync, Action::Refresh, Action::Suspend, Action::Resume, Action::Rollback, Action::Release];

    /// The word in URLs and forms (`sync`, `refresh`, `suspend`, `resume`, `rollback`, `release`).
    pub fn name(self) -> &'static str {
        match self {
            Action::Sync => "sync",
            Action::Refresh => "refresh",
            Action::Suspend => "suspend",
            Action::Resume => "resume",
            Action::Rollback => "rollback",
            Action::Release => "release",
            Action::Approve => "approve",
        }
    }

    /// The action named `s` ([`Action::name`]).
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().chain([Action::Approve]).find(|a| a.name() == s)
    }

    fn label(self) -> &'static str {
        match self {
            Action::Sync => "Sync",
            Action::Refresh => "Refresh",
            Action::Suspend => "Suspend",
            Action::Resume => "Resume",
            Action::Rollback => "Roll back",
            Action::Release => "Release pin",
            Action::Approve => "Approve prune",
        }
    }

    fn explain(self) -> &'static str {
        match self {
            Action::Sync => {
                "plumb fetches the tracked ref and syncs it now, whatever the policy's automated sync says."
            }
            Action::Refresh => "plumb fetches, renders and compares now; it syncs only if the policy would.",
            Action::Suspend => {
                "Automated sync and selfHeal stop until the time below (a manual sync still runs); the environment's maxPause caps it."
            }
            Action::Resume => "Automated sync and selfHeal start again.",
            Action::Rollback => {
                "The application is pinned to the revision below until the pin is released; plumb syncs it."
            }
            Action::Release => "The pin ends; automated sync follows the tracked ref again.",
            Action::Approve => {
                "The object gets plumb.dev/prune-approved with the time now, set as you: plumb deletes it at the application's next sync (a prune the policy allows; the approval lasts 24 h)."
            }
        }
    }
}

/// One node of an application's resource tree: an object and what it owns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    /// `Kind[.group]/namespace/name`.
    pub object: String,
    /// Its health (of the status for the application's objects, assessed live for children).
    pub health: HealthStatus,
    /// The health's reason, when any.
    pub message: String,
    /// The objects it owns (ownerReferences), at most a bounded number.
    pub children: Vec<Node>,
    /// Owned objects not read or not shown (the bound).
    pub omitted: usize,
    /// Why the children could not be read (e.g. the API server's 403), when they could not.
    pub error: Option<String>,
}

/// Everything an application's page shows, fetched by the handler.
#[derive(Debug, Clone, Copy)]
pub struct AppView<'a> {
    /// The status.
    pub status: &'a AppStatus,
    /// Its history, newest first.
    pub history: &'a [SyncRecord],
    /// Why the history could not be read.
    pub history_error: Option<&'a str>,
    /// The Events about it, or why they could not be listed.
    pub events: Result<&'a [Event], &'a str>,
    /// The resource tree: the application's objects and their live children.
    pub tree: &'a [Node],
}

/// The banner every page starts with: who reads (the user the API server names) and
/// where.
fn banner(who: &str, namespace: &str) -> String {
    let who = if who.is_empty() { "<span class=muted>(the API server did not say)</span>".into() } else { escape(who) };
    format!(
        "<p class=muted>plumb ui — reading applications.plumb.dev in <code>{}</code> as <code>{who}</code>; reloads every {REFRESH_SECONDS} s.</p>\n",
        escape(namespace)
    )
}

fn ui_page(title: &str, body: &str, refresh: bool) -> String {
    page_refreshed(title, &format!("{FORM_STYLE}{body}"), refresh.then_some(REFRESH_SECONDS))
}

/// The list of applications, as [`super::list`], under the [`banner`].
pub fn list(statuses: &[AppStatus], who: &str, namespace: &str) -> String {
    let body = format!("<h1>plumb: applications</h1>\n{}{}", banner(who, namespace), list_body(statuses));
    ui_page("plumb: applications", &body, true)
}

/// An application's page: as [`super::application`], with the actions under its title,
/// and the resource tree and the Events before its history.
pub fn application(v: &AppView<'_>, who: &str, namespace: &str) -> String {
    let st = v.status;
    let body = application_body(st, v.history, v.history_error, None);
    let (head, rest) = body.split_once("</h1>\n").unwrap_or(("", body.as_str()));
    let mut b = String::new();
    if !head.is_empty() {
        b.push_str(head);
        b.push_str("</h1>\n");
    }
    b.push_str(&banner(who, namespace));
    actions(&mut b, st);
    let (before, history) = rest.split_once("<h2>History</h2>").unwrap_or((rest, ""));
    b.push_str(before);
    tree(&mut b, &st.app, v.tree);
    events(&mut b, v.events);
    if !history.is_empty() {
        b.push_str("<h2>History</h2>");
        b.push_str(history);
    }
    ui_page(&format!("plumb: {}", st.app), &b, true)
}

/// The action buttons: each a GET to the confirmation page (no change without it).
fn actions(b: &mut String, st: &AppStatus) {
    b.push_str("<h2>Actions</h2>\n<div>");
    for a in Action::ALL {
        let hidden = match a {
            Action::Suspend => st.suspended.is_some(),
            Action::Resume => st.suspended.is_none(),
            Action::Release => st.pinned.is_none(),
            _ => false,
        };
        if hidden {
            continue;
        }
        let _ = write!(
            b,
            "<form class=a method=get action=\"{}/confirm\"><input type=hidden name=action value={}><button>{}…</button></form>",
            escape(&path_segment(&st.app)),
            a.name(),
            a.label()
        );
    }
    b.push_str("</div>\n<p class=muted>Each asks for confirmation first; the API server decides whether your kubeconfig's user may (<code>patch applications.plumb.dev</code>).</p>\n");
    let held: Vec<&str> =
        st.resources.iter().filter(|r| crate::plan::awaits_approval(&r.reason)).map(|r| r.object.as_str()).collect();
    if !held.is_empty() {
        b.push_str("<h3>Prunes waiting for an approval</h3>\n<ul>\n");
        for o in held {
            let _ = writeln!(
                b,
                "<li><code>{}</code> {}</li>",
                escape(o),
                approve_button(&format!("{}/confirm", path_segment(&st.app)), o)
            );
        }
        b.push_str("</ul>\n");
    }
}

/// A button to the confirmation page (`confirm`, a URL relative to the page) of
/// approving `object`'s prune.
fn approve_button(confirm: &str, object: &str) -> String {
    format!(
        "<form class=a method=get action=\"{}\"><input type=hidden name=action value=approve><input type=hidden name=object value=\"{}\"><button>{}…</button></form>",
        escape(confirm),
        escape(object),
        Action::Approve.label()
    )
}

/// The resource tree as nested lists; the application's objects link to their page.
fn tree(b: &mut String, app: &str, nodes: &[Node]) {
    b.push_str("<h2 id=tree>Resource tree</h2>\n");
    if nodes.is_empty() {
        b.push_str("<p>None.</p>\n");
        return;
    }
    b.push_str("<ul class=tree>\n");
    for n in nodes {
        let link = format!("{}/objects/{}", path_segment(app), path_segment(&n.object));
        node(b, n, Some(&link));
    }
    b.push_str("</ul>\n");
}

fn node(b: &mut String, n: &Node, link: Option<&str>) {
    let name = match link {
        Some(l) => format!("<a href=\"{}\"><code>{}</code></a>", escape(l), escape(&n.object)),
        None => format!("<code>{}</code>", escape(&n.object)),
    };
    let _ = write!(b, "<li>{name} {}", word(&n.health.to_string()));
    if !n.message.is_empty() {
        let _ = write!(b, " <span class=muted>{}</span>", escape(&n.message));
    }
    if let Some(e) = &n.error {
        let _ = write!(b, "<br><span class=muted>children not read: {}</span>", escape(e));
    }
    if !n.children.is_empty() || n.omitted > 0 {
        b.push_str("\n<ul>\n");
        for c in &n.children {
            node(b, c, None);
        }
        if n.omitted > 0 {
            let _ = writeln!(b, "<li class=muted>… {} more not shown</li>", n.omitted);
        }
        b.push_str("</ul>");
    }
    b.push_str("</li>\n");
}

/// The Events about the application, newest first, at most [`MAX_EVENTS`].
fn events(b: &mut String, events: Result<&[Event], &str>) {
    b.push_str("<h2 id=events>Events</h2>\n");
    let events = match events {
        Ok(e) => e,
        Err(why) => {
            let _ = writeln!(b, "<p>The Events could not be listed: {}</p>", escape(why));
            return;
        }
    };
    if events.is_empty() {
        b.push_str("<p>None (the API server keeps Events about an hour).</p>\n");
        return;
    }
    let mut rows: Vec<(String, &Event)> = events.iter().map(|e| (crate::status::store::event_time(e), e)).collect();
    // the API lists oldest first: reversed, Events of the same second stay newest first
    rows.reverse();
    rows.sort_by(|a, b| b.0.cmp(&a.0));
    b.push_str(
        "<table>\n<thead><tr><th scope=col>Time</th><th scope=col>Type</th><th scope=col>Reason</th><th scope=col>Count</th><th scope=col>Message</th></tr></thead>\n<tbody>\n",
    );
    for (t, e) in rows.iter().take(MAX_EVENTS) {
        let count = e.series.as_ref().and_then(|s| s.count).or(e.count).unwrap_or(1);
        let type_ = e.type_.as_deref().unwrap_or_default();
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{count}</td><td>{}</td></tr>",
            time(t),
            if type_ == "Warning" {
                format!("<span class=\"w Degraded\">{}</span>", escape(type_))
            } else {
                escape(type_)
            },
            escape(e.reason.as_deref().unwrap_or_default()),
            escape(e.message.as_deref().unwrap_or_default()),
        );
    }
    b.push_str("</tbody>\n</table>\n");
    if rows.len() > MAX_EVENTS {
        let _ = writeln!(b, "<p class=muted>{} older Event(s) not shown.</p>", rows.len() - MAX_EVENTS);
    }
}

/// One object of an application: its sync and health, why, its drift lines (the masked
/// values the status holds: a Secret's values are a hash or `(sensitive)` there), and
/// its live children when `live` is given. `None` when the status has no such object.
pub fn object(st: &AppStatus, object: &str, live: Option<&Node>) -> Option<String> {
    let r = st.resources.iter().find(|r| r.object == object)?;
    let mut b = format!(
        "<p><a href=\"../../{}\">← {}</a></p>\n<h1><code>{}</code></h1>\n<dl>\n<dt>Application</dt><dd>{}</dd>\n<dt>Sync</dt><dd>{}</dd>\n<dt>Health</dt><dd>{}</dd>\n",
        escape(&path_segment(&st.app)),
        escape(&st.app),
        escape(object),
        escape(&st.app),
        word(&r.sync.to_string()),
        word(&r.health.to_string()),
    );
    if !r.health_message.is_empty() {
        let _ = writeln!(b, "<dt>Health reason</dt><dd>{}</dd>", escape(&r.health_message));
    }
    let lines = super::drift_lines(&r.reason);
    if lines.is_empty() && !r.reason.is_empty() {
        let _ = writeln!(b, "<dt>Why</dt><dd>{}</dd>", escape(&r.reason));
    }
    b.push_str("</dl>\n");
    if crate::plan::awaits_approval(&r.reason) {
        let _ = writeln!(b, "<p>{}</p>", approve_button("../confirm", object));
    }
    b.push_str("<h2>Diff (live → Git)</h2>\n");
    if lines.is_empty() {
        b.push_str("<p>No field differs.</p>\n");
    } else {
        b.push_str("<table>\n<thead><tr><th scope=col>Field</th><th scope=col>Live → Git</th><th scope=col>Set by</th></tr></thead>\n<tbody>\n");
        for l in lines {
            let _ = writeln!(
                b,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                escape(l.field),
                escape(l.change),
                l.set_by.map_or_else(|| "<span class=muted>unknown</span>".to_string(), escape)
            );
        }
        b.push_str("</tbody>\n</table>\n<p class=muted>Values as the status stores them: a Secret's values are never shown (a hash or <code>(sensitive)</code>).</p>\n");
    }
    if let Some(n) = live {
        b.push_str("<h2>Live tree</h2>\n<ul class=tree>\n");
        node(&mut b, n, None);
        b.push_str("</ul>\n");
    }
    Some(ui_page(&format!("plumb: {object}"), &b, true))
}

/// One sync of `app`'s history, as [`super::sync_record`]; reloaded while the sync
/// still runs (a finished record changes only when an identical failure is folded in).
pub fn sync(app: &str, r: &SyncRecord) -> String {
    let running = r.result == crate::status::SyncResult::Running;
    ui_page(&format!("plumb: {app} sync"), &super::sync_record_body(app, r), running)
}

/// The confirmation page of `action` on `app`: what it does and a form that posts it
/// with `csrf`. For a rollback, `target` is the revision it would pin; for an
/// approval, the object whose prune it approves (`Err`: why there is none, and no
/// form).
pub fn confirm(app: &str, action: Action, csrf: &str, target: Result<&str, &str>) -> String {
    let question = match action {
        Action::Approve => format!("Approve deleting {} of {app}?", target.unwrap_or("an object")),
        Action::Sync => format!("Sync {app} now?"),
        Action::Refresh => format!("Refresh {app} now?"),
        Action::Suspend => format!("Suspend automated sync of {app}?"),
        Action::Resume => format!("Resume automated sync of {app}?"),
        Action::Rollback => format!("Roll {app} back?"),
        Action::Release => format!("Release the pin of {app}?"),
    };
    let mut b = format!(
        "<p><a href=\"../{}\">← {}</a></p>\n<h1>{}</h1>\n<p>{}</p>\n",
        escape(&path_segment(app)),
        escape(app),
        escape(&question),
        escape(action.explain())
    );
    let mut fields = String::new();
    match (action, target) {
        (Action::Rollback, Err(why)) => {
            let _ = writeln!(b, "<p>Nothing to roll back to: {}</p>", escape(why));
            return ui_page(&question, &b, false);
        }
        (Action::Approve, Err(why)) => {
            let _ = writeln!(b, "<p>Nothing to approve: {}</p>", escape(why));
            return ui_page(&question, &b, false);
        }
        (Action::Approve, Ok(object)) => {
            let _ = write!(fields, "<input type=hidden name=object value=\"{}\">", escape(object));
        }
        (Action::Rollback, Ok(rev)) => {
            let _ = writeln!(b, "<p>Revision: <code>{}</code></p>", escape(rev));
            let _ = write!(fields, "<input type=hidden name=revision value=\"{}\">", escape(rev));
        }
        (Action::Suspend, _) => fields.push_str(
            "<label>For <select name=for><option value=1h>1 hour</option><option value=4h>4 hours</option><option value=24h>24 hours</option></select></label>\
             <label>Reason <input type=text name=reason required maxlength=200></label>",
        ),
        _ => {}
    }
    let _ = writeln!(
        b,
        "<form method=post action=actions><input type=hidden name=csrf value=\"{}\"><input type=hidden name=action value={}>{fields}<button>{}</button> <a href=\"../{}\">Cancel</a></form>",
        escape(csrf),
        action.name(),
        escape(action.label()),
        escape(&path_segment(app))
    );
    ui_page(&question, &b, false)
}

/// The page after an action: `Ok(what was recorded)` or `Err(why it was refused)`
/// (the API server's answer, e.g. its 403 for a user without `patch`).
pub fn outcome(app: &str, action: Action, result: Result<&str, &str>) -> String {
    let (h, text) = match result {
        Ok(done) => (format!("{}: {} recorded", app, action.label()), done),
        Err(why) => (format!("{}: {} refused", app, action.label()), why),
    };
    let body = format!(
        "<p><a href=\"../{}\">← {}</a></p>\n<h1>{}</h1>\n<p>{}</p>\n",
        escape(&path_segment(app)),
        escape(app),
        escape(&h),
        escape(text)
    );
    ui_page(&h, &body, false)
}

/// A page saying the request was refused before anything was done (`403`: the form's
/// token is missing or wrong, or the request came from another site).
pub fn refused(why: &str) -> String {
    ui_page(
        "plumb: refused",
        &format!("<h1>Refused</h1>\n<p>{}</p>\n<p><a href=\"/\">Applications</a></p>\n", escape(why)),
        false,
    )
}

/// A page for a read the API server did not allow or could not serve: `forbidden` when
/// it answered 403 (the kubeconfig's user may not read applications.plumb.dev in
/// `namespace`), with its message.
pub fn read_failed(namespace: &str, forbidden: bool, message: &str) -> String {
    let head = if forbidden {
        format!("Your kubeconfig's user may not read applications.plumb.dev in {namespace}")
    } else {
        format!("Could not read applications.plumb.dev in {namespace}")
    };
    let body = format!(
        "<h1>{}</h1>\n<p>The API server said: {}</p>\n<p class=muted>Check <code>--context</code> and <code>-n</code>, or ask for the role <code>plumb-viewer</code> in that namespace.</p>\n",
        escape(&head),
        escape(message)
    );
    ui_page(&head, &body, true)
}

/// A page for an application with no resource in the namespace.
pub fn not_found(app: &str, namespace: &str) -> String {
    let body = format!(
        "<p><a href=\"../\">← all applications</a></p>\n<h1>{}</h1>\n<p>No applications.plumb.dev/{} in namespace <code>{}</code>.</p>\n",
        escape(app),
        escape(app),
        escape(namespace)
    );
    ui_page(&format!("plumb: {app}"), &body, false)
}

/// The path of `object`'s page of `app`, relative to the list (`applications/web/objects/…`,
/// both percent-encoded as one segment each).
pub fn object_path(app: &str, object: &str) -> String {
    format!("{}/objects/{}", app_path(app), path_segment(object))
}

#[cfg(test)]
mod tests;
