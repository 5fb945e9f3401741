//! The status page: the application statuses as server-rendered HTML, for people with a
//! browser (served on the internal listener by [`crate::server::internal_router`], behind
//! the same right as the status API).
//!
//! ```text
//!  GET /                   list: sync, health, revision and subject, last sync, paused/pinned
//!  GET /applications/{app} one application: objects, drift lines with their field
//!                          managers, conditions, timings, history
//! ```
//!
//! Pure: functions from [`AppStatus`] and [`SyncRecord`] values to a `String`; the route
//! handlers only fetch the values. The page has no JavaScript at all and is readable
//! without CSS (headings, definition lists and tables; a small inline `<style>` colours
//! the sync and health words). Every value is HTML-escaped ([`escape`]): a commit
//! subject, an object name or a drifted value is written by whoever can push to Git or
//! edit an object. Secret values never reach the page: the status holds a hash or
//! `(sensitive)` in their place. The size is bounded by the status itself
//! ([`crate::status::fit`]: capped objects and records, [`crate::status::HISTORY_LEN`]
//! records of history). Links are relative (`applications/web`, `../`), so the page works
//! behind a proxy that serves it under a prefix.

use std::fmt::Write as _;

use crate::status::{AppStatus, Condition, PassTimings, ResourceStatus, SyncRecord, short};

/// `Content-Security-Policy` sent with every page: nothing may load or run but the
/// inline style (no scripts, images, frames or form targets), so even markup that
/// slipped through escaping could not run.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What [`crate::compare`] appends to a drift reason when it compared without the API
/// server's dry-run.
const CLIENT_SIDE: &str = " (client-side comparison: the server refused the dry-run)";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1f2328;max-width:80rem}\
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.6rem}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .6rem;border-bottom:1px solid #d0d7de;vertical-align:top}\
thead th{background:#f6f8fa}time,.nowrap{white-space:nowrap}code{font-size:.9em}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}\
.w{font-weight:600}.Synced,.Healthy,.Succeeded{color:#1a7f37}.OutOfSync,.Progressing,.Running,.Suspended{color:#9a6700}\
.Degraded,.Missing,.Failed,.Refused{color:#cf222e}.Unknown{color:#57606a}.hold{color:#8250df;font-weight:600}.muted{color:#57606a}\
td,th,dd{overflow-wrap:break-word}code{overflow-wrap:anywhere}\
@media (max-width:40rem){body{margin:.6rem}dl{grid-template-columns:1fr}dd{margin-bottom:.4rem}th,td{padding:.25rem .3rem}table{font-size:.9rem;display:block;overflow-x:auto}}";

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by character references: safe in element
/// content and in quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` as one URL path segment: every byte but the unreserved characters of RFC 3986
/// (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so a name cannot add segments or a query.
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The path of `app`'s page relative to the list (`applications/<app>`, the name
/// percent-encoded); append it to the URL the list is served at.
pub fn app_path(app: &str) -> String {
    format!("applications/{}", path_segment(app))
}

/// One drifted field, read from an object's reason (`differs at /spec/replicas 5→3 (set
/// by kubectl via scale at 2026-11-29T14:02:11Z); /data/x …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftLine<'a> {
    /// RFC 6901 pointer of the field (`/spec/replicas`).
    pub field: &'a str,
    /// Live and Git values (`5→3`).
    pub change: &'a str,
    /// Who set the live value, when known (`kubectl via scale at 2026-11-29T14:02:11Z`).
    pub set_by: Option<&'a str>,
}

/// The drift lines of an object's reason; empty when it is not `differs at …` (missing,
/// pruning, immutable fields, errors: those are shown as the reason itself).
pub fn drift_lines(reason: &str) -> Vec<DriftLine<'_>> {
    let Some(fields) = reason.strip_prefix("differs at ") else { return Vec::new() };
    if fields.starts_with("immutable field(s) ") {
        return Vec::new();
    }
    let fields = fields.strip_suffix(CLIENT_SIDE).unwrap_or(fields);
    fields
        .split("; ")
        .map(|line| {
            let (field, rest) = line.split_once(' ').unwrap_or((line, ""));
            let (change, set_by) = match rest.rfind(" (set by ") {
                Some(i) if rest.ends_with(')') => (&rest[..i], Some(&rest[i + " (set by ".len()..rest.len() - 1])),
                _ => (rest, None),
            };
            DriftLine { field, change, set_by }
        })
        .collect()
}

/// The list of applications: one row each with sync, health, revision and subject, the
/// last sync, and whether automated sync is paused or pinned.
pub fn list(statuses: &[AppStatus]) -> String {
    let mut b = String::from("<h1>plumb: applications</h1>\n");
    b.push_str(&list_body(statuses));
    page("plumb: applications", &b)
}

/// The table of [`list`] (HTML, values escaped), or a sentence when there is no
/// application, for a page that adds to it (`plumb ui`: [`ui`]).
pub fn list_body(statuses: &[AppStatus]) -> String {
    let mut b = String::new();
    if statuses.is_empty() {
        b.push_str("<p>No application has been reconciled yet.</p>\n");
        return b;
    }
    b.push_str(
        "<table>\n<thead><tr><th scope=col>Application</th><th scope=col>Environment</th><th scope=col>Sync</th>\
         <th scope=col>Health</th><th scope=col>Revision</th><th scope=col>Last sync</th><th scope=col>Paused / pinned</th></tr></thead>\n<tbody>\n",
    );
    for st in statuses {
        let _ = writeln!(
            b,
            "<tr><th scope=row><a href=\"{}\">{}</a></th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&app_path(&st.app)),
            escape(&st.app),
            escape(&st.environment),
            word(&st.sync.to_string()),
            word(&st.health.to_string()),
            revision(&st.revision, &st.subject),
            last_sync(st.last_sync.as_ref()),
            holds(st),
        );
    }
    b.push_str("</tbody>\n</table>\n");
    b
}

/// The page of one application: summary, objects, drift, conditions, orphaned
/// objects, history (newest first). `history_error` is shown in place of the history
/// when it could not be read.
pub fn application(
    st: &AppStatus,
    history: &[SyncRecord],
    history_error: Option<&str>,
    timings: Option<&PassTimings>,
) -> String {
    page(&format!("plumb: {}", st.app), &application_body(st, history, history_error, timings))
}

/// The body of [`application`]'s page (HTML, values escaped), for a page that adds
/// sections to it (`plumb ui`: [`ui`]).
pub fn application_body(
    st: &AppStatus,
    history: &[SyncRecord],
    history_error: Option<&str>,
    timings: Option<&PassTimings>,
) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<p><a href=\"../\">← all applications</a></p>\n<h1>{}</h1>", escape(&st.app));
    summary(&mut b, st, timings);
    objects(&mut b, st);
    drift(&mut b, &st.resources);
    conditions(&mut b, &st.conditions);
    if !st.orphaned.is_empty() {
        b.push_str("<h2>Orphaned objects</h2>\n<p>In the application's namespaces, tracked by no application (reported, never deleted):</p>\n<ul>\n");
        for o in &st.orphaned {
            let _ = writeln!(b, "<li><code>{}</code></li>", escape(o));
        }
        b.push_str("</ul>\n");
    }
    history_table(&mut b, &st.app, history, history_error);
    b
}

/// The page for an application without a status (not in the policy, or no pass yet).
pub fn not_found(app: &str) -> String {
    let body = format!(
        "<p><a href=\"../\">← all applications</a></p>\n<h1>{}</h1>\n<p>No status recorded for this application: it is not in the policy, or no pass has run yet.</p>\n",
        escape(app)
    );
    page(&format!("plumb: {app}"), &body)
}

/// A whole HTML document titled `title` (escaped) around `body` (HTML, already escaped),
/// with the page's inline style; served with [`CONTENT_SECURITY_POLICY`].
pub fn page(title: &str, body: &str) -> String {
    page_refreshed(title, body, None)
}

/// [`page`], reloaded by the browser every `refresh` seconds when given (`<meta
/// http-equiv=refresh>`: no script needed).
pub fn page_refreshed(title: &str, body: &str, refresh: Option<u32>) -> String {
    let refresh = refresh.map_or_else(String::new, |s| format!("<meta http-equiv=refresh content={s}>\n"));
    format!(
        "<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n<meta name=viewport content=\"width=device-width, initial-scale=1\">\n{refresh}<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// A sync or health word, with a class naming it (for colour only; the word is the text).
fn word(w: &str) -> String {
    let w = escape(w);
    format!("<span class=\"w {w}\">{w}</span>")
}

fn revision(sha: &str, subject: &str) -> String {
    if sha.is_empty() {
        return "<span class=muted>none yet</span>".into();
    }
    let mut s = format!("<code title=\"{}\">{}</code>", escape(sha), escape(short(sha)));
    if !subject.is_empty() {
        let _ = write!(s, " {}", escape(subject));
    }
    s
}

fn last_sync(r: Option<&SyncRecord>) -> String {
    let Some(r) = r else { return "<span class=muted>never</span>".into() };
    format!(
        "{} <code title=\"{}\">{}</code> at {}",
        word(r.result.as_str()),
        escape(&r.revision),
        escape(short(&r.revision)),
        time(&r.finished_at)
    )
}

/// Paused and pinned, or `no`.
fn holds(st: &AppStatus) -> String {
    let mut out = Vec::new();
    if let Some(s) = &st.suspended {
        let mut t = format!("<span class=hold>paused</span> until {}", time(&s.until));
        if !s.asked_until.is_empty() {
            let _ = write!(t, " (capped by maxPause; asked until {})", time(&s.asked_until));
        }
        // a name the writing client chose: a claim, never shown as who paused
        if !s.by.is_empty() {
            let _ = write!(t, " (claimed by {}, not verified)", escape(&s.by));
        }
        if !s.reason.is_empty() {
            let _ = write!(t, ": {}", escape(&s.reason));
        }
        out.push(t);
    }
    if let Some(p) = &st.pinned {
        let mut t = format!(
            "<span class=hold>pinned</span> to <code title=\"{}\">{}</code>",
            escape(&p.revision),
            escape(short(&p.revision))
        );
        if !p.by.is_empty() {
            let _ = write!(t, " (claimed by {}, not verified)", escape(&p.by));
        }
        if !p.at.is_empty() {
            let _ = write!(t, " at {}", time(&p.at));
        }
        t.push_str(if p.until_next_commit { " (until the next commit)" } else { " (until released)" });
        out.push(t);
    }
    if out.is_empty() { "no".into() } else { out.join("<br>") }
}

/// An RFC 3339 time as `2026-11-30 14:28:37 UTC` in a `<time>` element (the text as it
/// is when it does not parse).
fn time(rfc3339: &str) -> String {
    match rfc3339.parse::<jiff::Timestamp>() {
        Ok(t) => format!("<time datetime=\"{}\">{}</time>", escape(rfc3339), t.strftime("%Y-%m-%d %H:%M:%S UTC")),
        Err(_) => escape(rfc3339),
    }
}

/// Milliseconds between two RFC 3339 times, when both parse and the second is not
/// earlier.
fn took(started: &str, finished: &str) -> Option<String> {
    let (a, b) = (started.parse::<jiff::Timestamp>().ok()?, finished.parse::<jiff::Timestamp>().ok()?);
    let ms = u64::try_from(b.duration_since(a).as_millis()).ok()?;
    Some(millis(ms))
}

fn millis(ms: u64) -> String {
    if ms < 1000 { format!("{ms} ms") } else { format!("{}.{} s", ms / 1000, (ms % 1000) / 100) }
}

fn summary(b: &mut String, st: &AppStatus, timings: Option<&PassTimings>) {
    b.push_str("<dl>\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(b, "<dt>{k}</dt><dd>{v}</dd>");
    };
    row("Environment", escape(&st.environment));
    row("Sync", word(&st.sync.to_string()));
    row("Health", word(&st.health.to_string()));
    row("Revision", revision(&st.revision, &st.subject));
    row("Synced revision", revision(&st.synced_revision, ""));
    if let Some(v) = &st.verification {
        row("Signature", escape(&v.summary()));
    }
    row("Paused / pinned", holds(st));
    if let Some(w) = &st.sync_windows {
        row("Sync windows", escape(&w.summary()));
    }
    if let Some(r) = &st.reconciler {
        row("Reconciled by", escape(&r.summary()));
    }
    let mut last = last_sync(st.last_sync.as_ref());
    if let Some(r) = &st.last_sync {
        let _ = write!(last, " ({})", escape(r.reason.as_str()));
        if let Some(t) = took(&r.started_at, &r.finished_at) {
            let _ = write!(last, ", took {t}");
        }
    }
    row("Last sync", last);
    if let Some(r) = &st.render {
        row(
            "Render",
            format!("{} in {} of <code>{}</code>", escape(&r.tool), millis(r.millis), escape(short(&r.revision))),
        );
    }
    if let Some(t) = timings {
        row(
            "Last pass",
            format!(
                "at {}: fetch and render {}, compare {}, sync {}; {} in all",
                escape(&t.at),
                millis(t.source_millis),
                millis(t.compare_millis),
                millis(t.sync_millis),
                millis(t.total_millis)
            ),
        );
    }
    b.push_str("</dl>\n");
}

fn objects(b: &mut String, st: &AppStatus) {
    let _ = writeln!(b, "<h2>Objects ({})</h2>", st.resources.len() + st.resources_omitted);
    if st.resources.is_empty() && st.resources_omitted == 0 {
        b.push_str("<p>None.</p>\n");
        return;
    }
    b.push_str(
        "<table>\n<thead><tr><th scope=col>Object</th><th scope=col>Sync</th><th scope=col>Health</th><th scope=col>Why</th></tr></thead>\n<tbody>\n",
    );
    for r in &st.resources {
        let n = drift_lines(&r.reason).len();
        let mut why = if n > 0 {
            format!("{n} field(s) differ (see <a href=\"#drift\">Drift</a>)")
        } else {
            escape(r.reason.as_str())
        };
        if !r.health_message.is_empty() {
            if !why.is_empty() {
                why.push_str("<br>");
            }
            why.push_str(&escape(&r.health_message));
        }
        let _ = writeln!(
            b,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{why}</td></tr>",
            escape(&r.object),
            word(&r.sync.to_string()),
            word(&r.health.to_string()),
        );
    }
    b.push_str("</tbody>\n</table>\n");
    if st.resources_omitted > 0 {
        let _ = writeln!(
            b,
            "<p class=muted>{} more object(s), Synced and Healthy, not listed (the status is capped).</p>",
            st.resources_omitted
        );
    }
}

fn drift(b: &mut String, resources: &[ResourceStatus]) {
    let lines: Vec<(&str, DriftLine<'_>)> =
        resources.iter().flat_map(|r| drift_lines(&r.reason).into_iter().map(|l| (r.object.as_str(), l))).collect();
    if lines.is_empty() {
        return;
    }
    b.push_str(
        "<h2 id=drift>Drift</h2>\n<table>\n<thead><tr><th scope=col>Object</th><th scope=col>Field</th><th scope=col>Live → Git</th><th scope=col>Set by</th></tr></thead>\n<tbody>\n",
    );
    for (object, l) in lines {
        let _ = writeln!(
            b,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(object),
            escape(l.field),
            escape(l.change),
            l.set_by.map_or_else(|| "<span class=muted>unknown</span>".to_string(), escape),
        );
    }
    b.push_str("</tbody>\n</table>\n");
}

fn conditions(b: &mut String, conditions: &[Condition]) {
    b.push_str("<h2>Conditions</h2>\n");
    if conditions.is_empty() {
        b.push_str("<p>None.</p>\n");
        return;
    }
    b.push_str("<table>\n<thead><tr><th scope=col>Type</th><th scope=col>Message</th></tr></thead>\n<tbody>\n");
    for c in conditions {
        let _ = writeln!(b, "<tr><td>{}</td><td>{}</td></tr>", escape(c.type_.as_str()), escape(&c.message));
    }
    b.push_str("</tbody>\n</table>\n");
}

fn history_table(b: &mut String, app: &str, history: &[SyncRecord], error: Option<&str>) {
    b.push_str("<h2>History</h2>\n");
    if let Some(e) = error {
        let _ = writeln!(b, "<p>The history could not be read: {}</p>", escape(e));
        return;
    }
    if history.is_empty() {
        b.push_str("<p>No sync yet.</p>\n");
        return;
    }
    b.push_str(
        "<table>\n<thead><tr><th scope=col>Finished</th><th scope=col>Took</th><th scope=col>Revision</th><th scope=col>Why</th>\
         <th scope=col>Result</th><th scope=col>Applied</th><th scope=col>Pruned</th><th scope=col>Message</th></tr></thead>\n<tbody>\n",
    );
    for r in history {
        let _ = writeln!(
            b,
            "<tr><td><a href=\"{}\">{}</a></td><td class=nowrap>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&sync_path(app, &r.started_at)),
            time(&r.finished_at),
            took(&r.started_at, &r.finished_at).unwrap_or_default(),
            revision(&r.revision, &r.subject),
            escape(r.reason.as_str()),
            word(r.result.as_str()) + &r.times(),
            r.applied.len() + r.applied_omitted,
            r.pruned.len() + r.pruned_omitted,
            escape(&r.message),
        );
    }
    b.push_str("</tbody>\n</table>\n");
}

/// The path of one sync's page, relative to the application's page
/// (`web/syncs/2026-12-03T21:00:00Z`): a sync is named by when it started, which no
/// other sync of the application shares.
pub fn sync_path(app: &str, started_at: &str) -> String {
    format!("{}/syncs/{}", path_segment(app), path_segment(started_at))
}

/// The page of one sync of `app` (the record of its history that started at
/// `started_at`): what it was asked to do and did — every object applied, recreated
/// and pruned that the record names, its hooks, its chart, who allowed an unverified
/// revision. `None` when the history holds no such sync (it keeps the newest only).
pub fn sync_record(app: &str, history: &[SyncRecord], started_at: &str) -> Option<String> {
    let r = history.iter().find(|r| r.started_at == started_at)?;
    Some(page_refreshed(&format!("plumb: {app} sync {}", short(&r.revision)), &sync_record_body(app, r), None))
}

/// The body of [`sync_record`]'s page (HTML, values escaped).
pub fn sync_record_body(app: &str, r: &SyncRecord) -> String {
    let mut b = format!(
        "<p><a href=\"../../{}\">← {}</a></p>\n<h1>Sync of {} at {}</h1>\n<dl>\n",
        escape(&path_segment(app)),
        escape(app),
        escape(app),
        time(&r.started_at)
    );
    let mut row = |term: &str, value: String| {
        let _ = writeln!(b, "<dt>{term}</dt><dd>{value}</dd>");
    };
    row("Revision", revision(&r.revision, &r.subject));
    row("Why", escape(r.reason.as_str()) + if r.install { " (first sync: install)" } else { "" });
    row("Result", word(r.result.as_str()) + &r.times());
    row("Started", time(&r.started_at));
    row("Finished", time(&r.finished_at));
    if let Some(t) = took(&r.started_at, &r.finished_at) {
        row("Took", t);
    }
    if !r.message.is_empty() {
        row("Message", escape(&r.message));
    }
    if let Some(c) = &r.chart {
        row("Chart", escape(&c.to_string()));
    }
    if !r.allowed_unverified_by.is_empty() {
        row("Unverified revision allowed by", escape(&r.allowed_unverified_by));
    }
    b.push_str("</dl>\n");
    let applied: Vec<&String> = r.applied.iter().filter(|o| !r.recreated.contains(o)).collect();
    objects_list(&mut b, "Applied", &applied, r.applied_omitted);
    objects_list(
        &mut b,
        "Recreated (deleted and created again: Force=true)",
        &r.recreated.iter().collect::<Vec<_>>(),
        0,
    );
    objects_list(&mut b, "Pruned", &r.pruned.iter().collect::<Vec<_>>(), r.pruned_omitted);
    if !r.hooks.is_empty() {
        b.push_str("<h2>Hooks</h2>\n<table>\n<thead><tr><th scope=col>Phase</th><th scope=col>Object</th><th scope=col>Result</th><th scope=col>Took</th><th scope=col>Message</th></tr></thead>\n<tbody>\n");
        for h in &r.hooks {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{} s</td><td>{}</td></tr>",
                escape(&h.phase),
                escape(&h.object),
                word(&h.result),
                h.duration_seconds,
                escape(&h.message)
            );
        }
        b.push_str("</tbody>\n</table>\n");
        if r.hooks_omitted > 0 {
            let _ = writeln!(
                b,
                "<p class=muted>{} more hook(s) not named (a record keeps {}).</p>",
                r.hooks_omitted,
                crate::status::HOOK_RUNS
            );
        }
    }
    b
}

/// A section listing `objects` under `title`, `omitted` more counted (the record names
/// at most [`crate::status::fit::RECORD_OBJECTS`]); nothing when both are empty.
fn objects_list(b: &mut String, title: &str, objects: &[&String], omitted: usize) {
    if objects.is_empty() && omitted == 0 {
        return;
    }
    let _ = writeln!(b, "<h2>{} ({})</h2>\n<ul>", escape(title), objects.len() + omitted);
    for o in objects {
        let _ = writeln!(b, "<li><code>{}</code></li>", escape(o));
    }
    b.push_str("</ul>\n");
    if omitted > 0 {
        let _ = writeln!(b, "<p class=muted>{omitted} more not named (the record is capped).</p>");
    }
}

pub mod ui;

#[cfg(test)]
mod tests;
