//! The read commands — `plumb status`, `history APP`, `get APP`, `events APP` — read
//! the status objects the server writes, with nothing but a kubeconfig: no policy
//! file, no Git, no secret files. The status goes through [`Store`] only, so where it
//! is kept (today ConfigMaps `plumb-app-<app>`) is one place's business.

use std::{fmt::Write as _, io::IsTerminal as _, path::PathBuf, process::ExitCode};

use k8s_openapi::api::core::v1::Event;
use serde::Serialize;

use super::output::{Output, emit, render, sanitize};
use crate::{
    config::Config,
    status::{AppStatus, SyncRecord, short, store::Store},
};

/// The default of `-n/--namespace`: plumb's status namespace.
pub const DEFAULT_NAMESPACE: &str = "plumb-system";

/// How to reach the cluster and plumb in it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// kubeconfig file; default: the files of `KUBECONFIG` (`a:b` merged as kubectl
    /// merges them), else `~/.kube/config`, else the in-cluster service account.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context; default: the current context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// plumb's status namespace; default: the policy's `statusNamespace` when `-c` is
    /// given, else `plumb-system`.
    #[arg(long, short = 'n', env = "PLUMB_NAMESPACE", global = true)]
    pub namespace: Option<String>,
}

impl KubeArgs {
    /// The status namespace: `-n`, else the policy's, else [`DEFAULT_NAMESPACE`].
    pub fn namespace(&self, policy: Option<&Config>) -> String {
        self.namespace
            .clone()
            .or_else(|| policy.map(|c| c.settings.status_namespace.clone()))
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
    }

    /// A client for the cluster.
    ///
    /// # Errors
    /// No or invalid kubeconfig, no such context.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        crate::cluster::client_in(self.kubeconfig.as_deref(), self.context.as_deref()).await
    }

    /// The status store in the status namespace.
    ///
    /// # Errors
    /// As [`KubeArgs::client`].
    pub async fn store(&self, policy: Option<&Config>) -> anyhow::Result<Store> {
        Ok(Store::new(self.client().await?, &self.namespace(policy)))
    }
}

/// Exit codes of the read commands, for their `--help`.
pub const READ_EXIT_CODES: &str = "Exit codes: 0 printed; 1 no such application (no status object in the \
namespace: check -n and --context); 2 error (kubeconfig, cluster unreachable, not allowed).";

/// Loads the optional policy of a read command, without its secret files.
///
/// # Errors
/// The policy cannot be read or is invalid.
pub fn policy(file: Option<&std::path::Path>) -> anyhow::Result<Option<Config>> {
    Ok(match file {
        Some(f) => Some(crate::config::load_without_secrets(f)?),
        None => None,
    })
}

/// `plumb status`: every application with a status object, in name order; with a
/// policy, its applications in its order, those that never ran included.
///
/// # Errors
/// Cluster unreachable or the status cannot be read.
pub async fn status(kube: &KubeArgs, policy: Option<&Config>, output: Output) -> anyhow::Result<ExitCode> {
    once(status_text(kube, policy, output).await?)
}

/// What `plumb status` prints, or its exit code when there is nothing to print.
///
/// # Errors
/// As [`status`].
pub async fn status_text(
    kube: &KubeArgs,
    policy: Option<&Config>,
    output: Output,
) -> anyhow::Result<Result<String, ExitCode>> {
    let listed = kube.store(policy).await?.list().await?;
    let rows = match policy {
        None => listed,
        Some(config) => config
            .applications
            .iter()
            .map(|a| {
                listed.iter().find(|s| s.app == a.name.value).cloned().unwrap_or_else(|| AppStatus {
                    app: a.name.value.clone(),
                    environment: a.environment.value.clone(),
                    ..AppStatus::default()
                })
            })
            .collect(),
    };
    if rows.is_empty() {
        let namespace = kube.namespace(policy);
        errln!("error: no applications in namespace {namespace} (is plumb's namespace another one: -n?)");
        return Ok(Err(ExitCode::from(1)));
    }
    Ok(Ok(render(output, &rows, || if output == Output::Wide { status_wide(&rows) } else { status_table(&rows) })?))
}

/// Prints a command's text once; its exit code.
fn once(text: Result<String, ExitCode>) -> anyhow::Result<ExitCode> {
    match text {
        Ok(text) => {
            out!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Err(code) => Ok(code),
    }
}

/// `--watch`: prints what `read` gives, then again each time it changes (read every
/// 2 s) until interrupted (Ctrl-C, exit 0); on a terminal the screen is cleared first,
/// piped each new version follows the last. Ends with `read`'s exit code when it has
/// nothing to print (the application was removed).
///
/// # Errors
/// As `read`.
pub async fn watch<F, Fut>(mut read: F) -> anyhow::Result<ExitCode>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Result<String, ExitCode>>>,
{
    let terminal = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        match read().await? {
            Err(code) => return Ok(code),
            Ok(text) if text != last => {
                if terminal {
                    out!("\x1b[H\x1b[2J");
                }
                out!("{text}");
                last = text;
            }
            Ok(_) => {}
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
    }
}

/// The `plumb status -o wide` table: [`status_table`]'s, and the replica and shard
/// that last reconciled each application (`status.reconciler`).
pub fn status_wide(statuses: &[AppStatus]) -> String {
    table_of(statuses, true)
}

/// The `plumb status` table: one row per application, its conditions under it.
pub fn status_table(statuses: &[AppStatus]) -> String {
    table_of(statuses, false)
}

fn table_of(statuses: &[AppStatus], wide: bool) -> String {
    let mut out = format!(
        "{:<16} {:<8} {:<9} {:<11} {:<12} {:<36} {}{}\n",
        "APP",
        "ENV",
        "REVISION",
        "SYNC",
        "HEALTH",
        "SUBJECT",
        if wide { format!("{:<34} ", "LAST SYNC") } else { "LAST SYNC".into() },
        if wide { "RECONCILER" } else { "" }
    );
    for s in statuses {
        let never = s.revision.is_empty() && s.last_sync.is_none() && s.conditions.is_empty();
        let subject = if never { "(no pass yet)".to_string() } else { sanitize(&s.subject).chars().take(36).collect() };
        let last = s.last_sync.as_ref().map_or_else(|| "-".to_string(), |r| format!("{} {}", r.result, r.finished_at));
        let rev = if s.revision.is_empty() { "-" } else { short(&s.revision) };
        let last = if wide {
            let by = s.reconciler.as_ref().map_or_else(|| "-".to_string(), crate::status::Reconciler::summary);
            format!("{last:<34} {}", sanitize(&by))
        } else {
            last
        };
        let _ = writeln!(
            out,
            "{:<16} {:<8} {rev:<9} {:<11} {:<12} {subject:<36} {last}",
            s.app,
            s.environment,
            s.sync.to_string(),
            s.health.to_string()
        );
        for c in &s.conditions {
            let text: String = sanitize(&c.message).chars().take(160).collect();
            let more = if c.message.chars().count() > 160 { "…" } else { "" };
            let _ = writeln!(out, "  {}: {text}{more}", c.type_);
        }
    }
    out
}

/// `plumb history APP`: the last syncs, newest first.
///
/// # Errors
/// Cluster unreachable or the status cannot be read.
pub async fn history(kube: &KubeArgs, policy: Option<&Config>, app: &str, output: Output) -> anyhow::Result<ExitCode> {
    let store = kube.store(policy).await?;
    let Some((_, history)) = store.find(app).await? else {
        return Ok(not_found(app, &kube.namespace(policy)));
    };
    emit(output, &history, || history_table(&history))?;
    Ok(ExitCode::SUCCESS)
}

/// The `plumb history` lines: finished, revision, result, reason, subject, counts,
/// message.
pub fn history_table(history: &[SyncRecord]) -> String {
    let mut out = String::new();
    for r in history {
        let _ = writeln!(
            out,
            "{}  {}  {:<9} {:<11} {}  (+{} -{}) {}",
            r.finished_at,
            short(&r.revision),
            format!("{}{}", r.result, r.times()),
            r.reason,
            sanitize(&r.subject),
            // stored records name at most 100 objects; the counts cover all
            r.applied.len() + r.applied_omitted,
            r.pruned.len() + r.pruned_omitted,
            sanitize(&r.message)
        );
        if !r.allowed_unverified_by.is_empty() {
            let _ = writeln!(out, "    unverified, allowed by {}", sanitize(&r.allowed_unverified_by));
        }
        for h in &r.hooks {
            let _ = writeln!(out, "    {}", sanitize(&h.line()));
        }
        if r.hooks_omitted > 0 {
            let _ = writeln!(out, "    … {} more hook(s)", r.hooks_omitted);
        }
    }
    out
}

/// `plumb get APP`: the application's status, its objects with sync and health, and
/// why each is not Synced (the drift lines name the field manager of a hand change).
///
/// # Errors
/// Cluster unreachable or the status cannot be read.
pub async fn get(kube: &KubeArgs, policy: Option<&Config>, app: &str, output: Output) -> anyhow::Result<ExitCode> {
    once(get_text(kube, policy, app, output).await?)
}

/// What `plumb get APP` prints, or its exit code when there is nothing to print.
///
/// # Errors
/// As [`get`].
pub async fn get_text(
    kube: &KubeArgs,
    policy: Option<&Config>,
    app: &str,
    output: Output,
) -> anyhow::Result<Result<String, ExitCode>> {
    let store = kube.store(policy).await?;
    let Some((status, _)) = store.find(app).await? else {
        return Ok(Err(not_found(app, &kube.namespace(policy))));
    };
    Ok(Ok(render(output, &status, || get_table(&status))?))
}

/// The `plumb get` text.
pub fn get_table(s: &AppStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Application:  {}", s.app);
    let _ = writeln!(out, "Environment:  {}", s.environment);
    let _ = writeln!(out, "Revision:     {} {}", short(&s.revision), sanitize(&s.subject));
    if !s.synced_revision.is_empty() && s.synced_revision != s.revision {
        let _ = writeln!(out, "Synced at:    {}", short(&s.synced_revision));
    }
    if let Some(v) = &s.verification {
        let _ = writeln!(out, "Signature:    {}", sanitize(&v.summary()));
    }
    let _ = writeln!(out, "Sync:         {}", s.sync);
    let _ = writeln!(out, "Health:       {}", s.health);
    if let Some(r) = &s.last_sync {
        let _ = writeln!(out, "Last sync:    {} {} ({})", r.result, r.finished_at, r.reason);
        for h in &r.hooks {
            let _ = writeln!(out, "Hook:         {}", sanitize(&h.line()));
        }
    }
    if let Some(w) = &s.sync_windows {
        let _ = writeln!(out, "Sync windows: {}", sanitize(&w.summary()));
    }
    for c in &s.conditions {
        let _ = writeln!(out, "Condition:    {}: {}", c.type_, sanitize(&c.message));
    }
    let _ = writeln!(out, "\n{:<60} {:<10} {:<12} DETAIL", "OBJECT", "SYNC", "HEALTH");
    for r in &s.resources {
        let detail = [r.reason.as_str(), r.health_message.as_str()]
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(sanitize)
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(out, "{:<60} {:<10} {:<12} {detail}", r.object, r.sync.to_string(), r.health.to_string());
    }
    if s.resources_omitted > 0 {
        let _ = writeln!(out, "(+{} more objects, Synced and Healthy, not stored)", s.resources_omitted);
    }
    out
}

/// One Event as `plumb events` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventLine {
    /// When it happened last (RFC 3339).
    pub time: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `SyncSucceeded`, `SyncFailed`, `HealthChanged`, `Pruned`, …
    pub reason: String,
    /// How often it happened.
    pub count: i32,
    /// What happened.
    pub message: String,
}

impl From<&Event> for EventLine {
    fn from(e: &Event) -> Self {
        let count = e.series.as_ref().and_then(|s| s.count).or(e.count).unwrap_or(1);
        Self {
            time: crate::status::store::event_time(e),
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            count,
            message: e.message.clone().unwrap_or_default(),
        }
    }
}

/// `plumb events APP`: the Kubernetes Events about the application's status object,
/// oldest first (the API server keeps them about an hour by default).
///
/// # Errors
/// Cluster unreachable or the Events cannot be listed.
pub async fn events(kube: &KubeArgs, policy: Option<&Config>, app: &str, output: Output) -> anyhow::Result<ExitCode> {
    let store = kube.store(policy).await?;
    if store.find(app).await?.is_none() {
        return Ok(not_found(app, &kube.namespace(policy)));
    }
    let lines: Vec<EventLine> = store.events(app).await?.iter().map(EventLine::from).collect();
    emit(output, &lines, || events_table(&lines))?;
    Ok(ExitCode::SUCCESS)
}

/// The `plumb events` lines.
pub fn events_table(lines: &[EventLine]) -> String {
    let mut out = format!("{:<21} {:<8} {:<14} {:>5} MESSAGE\n", "TIME", "TYPE", "REASON", "COUNT");
    for e in lines {
        let _ = writeln!(out, "{:<21} {:<8} {:<14} {:>5} {}", e.time, e.type_, e.reason, e.count, sanitize(&e.message));
    }
    out
}

pub(super) fn not_found(app: &str, namespace: &str) -> ExitCode {
    errln!(
        "error: no status of application `{app}` in namespace {namespace} (has plumb served it? is plumb's namespace another one: -n?)"
    );
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Condition, ConditionType};

    #[test]
    fn tables_show_git_text_escaped() {
        let record = SyncRecord {
            subject: "bump\x1b]0;owned\x07 nginx".into(),
            started_at: "t0".into(),
            finished_at: "t1".into(),
            applied: vec!["Deployment.apps/web/web".into()],
            ..SyncRecord::new("0123456789abcdef", crate::status::SyncReason::Manual)
        };
        let status = AppStatus {
            app: "web".into(),
            environment: "dev".into(),
            revision: record.revision.clone(),
            subject: record.subject.clone(),
            conditions: vec![Condition::new(ConditionType::SyncError, "refused: \x1b[2J")],
            last_sync: Some(record.clone()),
            ..AppStatus::default()
        };
        let mut hooked = record.clone();
        hooked.hooks.push(crate::status::HookRun {
            phase: "PreSync".into(),
            object: "Job.batch/web/migrate-0123456".into(),
            result: "Failed".into(),
            started_at: "t0".into(),
            finished_at: "t1".into(),
            duration_seconds: 12,
            message: "BackoffLimitExceeded\x1b[2J".into(),
        });
        hooked.hooks_omitted = 2;
        let lines = history_table(&[hooked]);
        assert!(
            lines.contains("\n    hook PreSync Job.batch/web/migrate-0123456 Failed 12s: BackoffLimitExceeded\\u{1b}[2J\n    … 2 more hook(s)\n"),
            "{lines}"
        );
        let held = crate::status::SyncWindows {
            closed: Some("deny window 1 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC".into()),
            active: vec!["deny window 1 (0 9 * * * UTC, 1h) until 2026-12-02 10:00 UTC".into()],
            next_change: Some("2026-12-02T10:00:00Z".into()),
            ..Default::default()
        };
        let windowed = AppStatus { sync_windows: Some(held), ..status.clone() };
        assert!(
            get_table(&windowed).contains(
                "Sync windows: automated sync held, manual sync allowed; active: deny window 1 (0 9 * * * UTC, 1h) until 2026-12-02 10:00 UTC; next change at 2026-12-02T10:00:00Z\n"
            ),
            "{}",
            get_table(&windowed)
        );
        for text in [status_table(std::slice::from_ref(&status)), history_table(&[record]), get_table(&status)] {
            assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
            assert!(text.contains("bump\\u{1b}]0;owned\\u{7} nginx"), "{text}");
        }
        let table = status_table(&[status, AppStatus { app: "new".into(), ..AppStatus::default() }]);
        assert!(
            table.lines().any(|l| l.starts_with("web ") && l.contains("0123456") && l.contains("Unknown")),
            "{table}"
        );
        assert!(table.contains("  SyncError: refused: \\u{1b}[2J"), "{table}");
        assert!(table.lines().any(|l| l.starts_with("new ") && l.contains("(no pass yet)")), "{table}");
    }
}
