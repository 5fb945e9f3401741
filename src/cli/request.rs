//! `plumb sync APP` and `plumb refresh APP` ask the server: they record a request on
//! the application's resource ([`crate::leader::request`]: `plumb.dev/sync-requested`,
//! a manual sync whatever the policy; `plumb.dev/refresh-requested`, a pass under the
//! policy; Kubernetes RBAC on `applications.plumb.dev` is the permission), then follow
//! the server's progress by reading the status ([`Store`]) until the server answered
//! the request (`syncRequest` in the status; the annotation
//! [`crate::status::store::OBSERVED_ANNOTATION`] for a refresh) and any sync it started has
//! left `Running` (wave by wave). Git is fetched and the cluster written by the server,
//! with its identity — never from the laptop.

use std::{io::IsTerminal as _, process::ExitCode, time::Duration};

use serde::Serialize;

use super::{
    output::{Output, emit, sanitize},
    read::KubeArgs,
};
use crate::{
    compare::SyncStatus,
    health::HealthStatus,
    status::{AppStatus, SyncRecord, SyncResult, short, store::Store},
};

/// Exit codes of `plumb sync` (through the server), for its `--help`.
pub const SYNC_EXIT_CODES: &str = "Exit codes: 0 the application is Synced (a sync the request started \
Succeeded); 1 the sync Failed or was Refused, or the application is left OutOfSync (held: see its \
conditions); 2 error (cluster, comparison error: fetch, render); 3 no server answered within --timeout \
(is plumb serve running for this namespace?). With --local or --dry-run: 0 done / nothing to do, 1 the \
sync failed, was refused or still runs after --timeout, or the preview found an error or a refusal; 2 error.";

/// Exit codes of `plumb refresh`, for its `--help`.
pub const REFRESH_EXIT_CODES: &str = "Exit codes: 0 the server compared (the status printed is the new \
one); 2 error, or a comparison error (fetch, render); 3 no server answered within --timeout.";

/// What `sync` / `refresh` print with `-o json|yaml`.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The request (RFC 3339 time written to the status object).
    pub request: String,
    /// The sync the request started, if any.
    pub sync: Option<SyncRecord>,
    /// The status after it.
    pub status: AppStatus,
}

/// Whether `plumb sync` or `plumb refresh` asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `plumb sync`: a sync is expected.
    Sync,
    /// `plumb refresh`: a comparison is enough.
    Refresh,
}

/// Records a pass request for `app` and follows it to its end (see the module docs).
///
/// # Errors
/// Cluster unreachable, the request cannot be written (RBAC), the status unreadable.
pub async fn run(
    kube: &KubeArgs,
    policy: Option<&crate::config::Config>,
    app: &str,
    asked: Asked,
    (timeout, output): (Duration, Output),
) -> anyhow::Result<ExitCode> {
    let client = kube.client().await?;
    let namespace = kube.namespace(policy);
    let store = Store::new(client.clone(), &namespace);
    let before = store.find(app).await?.and_then(|(s, _)| s.last_sync);
    let key = match asked {
        Asked::Sync => crate::status::SYNC_ANNOTATION,
        Asked::Refresh => crate::status::REFRESH_ANNOTATION,
    };
    let Some(request) = crate::leader::request(&client, &namespace, app, key).await? else {
        return Ok(super::read::not_found(app, &namespace));
    };
    errln!("{app}: {key} on applications.plumb.dev/{app} in namespace {namespace} ({request})");
    let mut progress = Progress::new(std::io::stdout().is_terminal() && output.is_table(), output.is_table());
    let deadline = tokio::time::Instant::now() + timeout;
    let mut answered = false;
    let status = loop {
        // a refresh is acknowledged after the pass saved its status: read that first
        let refreshed = asked == Asked::Refresh && store.controls(app).await?.answered(&request);
        let (status, _) = store.load(app).await?;
        // a sync request is acknowledged in the status the pass saved (`syncRequest`)
        answered = answered || refreshed || (asked == Asked::Sync && status.sync_request.as_str() >= request.as_str());
        let new_sync = status.last_sync.as_ref().filter(|s| Some(*s) != before.as_ref());
        if let Some(r) = new_sync {
            progress.line(&format!(
                "{app} {} \"{}\": {} (applied {}, pruned {}){}",
                short(&r.revision),
                sanitize(&r.subject),
                r.result,
                r.applied.len() + r.applied_omitted,
                r.pruned.len() + r.pruned_omitted,
                if r.message.is_empty() { String::new() } else { format!(": {}", sanitize(&r.message)) }
            ))?;
        }
        let running = new_sync.is_some_and(|r| r.result == SyncResult::Running);
        if answered && !running {
            break status;
        }
        if tokio::time::Instant::now() >= deadline {
            progress.done();
            let what = if answered { "the sync is still running" } else { "no plumb server answered" };
            errln!(
                "{app}: {what} after {} (namespace {namespace}; is `plumb serve` running?)",
                crate::config::shown_duration(timeout)
            );
            return Ok(ExitCode::from(if answered { 1 } else { 3 }));
        }
        progress.tick(if answered { "sync running" } else { "waiting for the server" });
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    progress.done();
    let sync = status.last_sync.clone().filter(|s| Some(s) != before.as_ref());
    let code = exit_code(asked, &status, sync.as_ref());
    let outcome = Outcome { request, sync, status };
    emit(output, &outcome, || summary(asked, &outcome))?;
    Ok(code)
}

/// `plumb sync APP --allow-unverified`: records on `app`'s resource that the caller
/// allows the commit its status names as failing `verifyCommits` (`COMMIT USER` in
/// [`crate::status::ALLOW_UNVERIFIED_ANNOTATION`], USER as the API server names the
/// caller). The API server checks the right `allow-unverified` for that write when
/// `deploy/admission/allow-unverified.yaml` is installed; plumb honours the allowance
/// only then, and only for that commit.
///
/// # Errors
/// No such application; its revision passed verification or was never checked; the
/// caller's name unknown (SelfSubjectReview refused); the write denied (the admission
/// policy's message names the missing right).
pub async fn allow_unverified(
    kube: &KubeArgs,
    policy: Option<&crate::config::Config>,
    app: &str,
) -> anyhow::Result<Option<ExitCode>> {
    use anyhow::Context as _;
    let client = kube.client().await?;
    let namespace = kube.namespace(policy);
    let store = Store::new(client.clone(), &namespace);
    let Some((status, _)) = store.find(app).await? else {
        return Ok(Some(super::read::not_found(app, &namespace)));
    };
    let Some(v) = status.verification.filter(|v| !v.verified && !v.revision.is_empty()) else {
        anyhow::bail!("{app}: nothing to allow: its revision is not refused by verifyCommits (see `plumb get {app}`)")
    };
    let who = super::day2::whoami(&client).await;
    anyhow::ensure!(!who.is_empty(), "{app}: the API server did not say who you are (SelfSubjectReview)");
    let value = format!("{} {who}", v.revision);
    let pairs = [(crate::status::ALLOW_UNVERIFIED_ANNOTATION, Some(value.as_str()))];
    store
        .annotate_existing(app, &pairs)
        .await
        .with_context(|| format!("{app}: the allowance of {} not recorded", short(&v.revision)))?;
    let by = if v.author.is_empty() { String::new() } else { format!(" by {}", sanitize(&v.author)) };
    errln!(
        "{app}: {}{by} allowed although it is not trusted ({}), recorded as {who}",
        short(&v.revision),
        sanitize(&v.reason)
    );
    Ok(None)
}

/// The exit code of a followed request (see [`SYNC_EXIT_CODES`], [`REFRESH_EXIT_CODES`]).
pub fn exit_code(asked: Asked, status: &AppStatus, sync: Option<&SyncRecord>) -> ExitCode {
    // a refused sync is a refusal even when a refused object leaves the comparison Unknown
    if asked == Asked::Sync && sync.is_some_and(|s| matches!(s.result, SyncResult::Failed | SyncResult::Refused)) {
        return ExitCode::from(1);
    }
    if status.sync == SyncStatus::Unknown {
        return ExitCode::from(2);
    }
    // a sync held back without a record (FailOnSharedResource=true) says so in a SyncError
    let held = status.conditions.iter().any(|c| c.type_ == crate::status::ConditionType::SyncError);
    match (asked, sync.map(|s| s.result)) {
        (Asked::Sync, Some(SyncResult::Failed | SyncResult::Refused)) => ExitCode::from(1),
        (Asked::Sync, _) if held => ExitCode::from(1),
        (Asked::Sync, _) if status.sync != SyncStatus::Synced => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

/// The text printed after a followed request.
pub fn summary(asked: Asked, o: &Outcome) -> String {
    let st = &o.status;
    let mut out =
        format!("{}: {} / {} at {} \"{}\"\n", st.app, st.sync, st.health, short(&st.revision), sanitize(&st.subject));
    if let Some(r) = &o.sync {
        for a in &r.applied {
            out.push_str(&format!("  {} {a}\n", if r.recreated.contains(a) { "recreated" } else { "applied" }));
        }
        for p in &r.pruned {
            out.push_str(&format!("  pruned  {p}\n"));
        }
    } else if asked == Asked::Sync && st.sync == SyncStatus::OutOfSync {
        out.push_str("  the server did not sync (see the conditions)\n");
    }
    for c in &st.conditions {
        out.push_str(&format!("  {}: {}\n", c.type_, sanitize(&c.message)));
    }
    for x in st.resources.iter().filter(|x| x.health == HealthStatus::Degraded || x.sync != SyncStatus::Synced) {
        let why = [x.reason.as_str(), x.health_message.as_str()]
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(sanitize)
            .collect::<Vec<_>>()
            .join("; ");
        out.push_str(&format!("  {}: {} {} {why}\n", x.object, x.sync, x.health));
    }
    out
}

/// Progress of a followed request: each new line once (on standard output with `-o
/// table`, else on standard error, so that JSON and YAML stay one document); on a
/// terminal, a spinner on standard error between them (never when output is piped).
struct Progress {
    terminal: bool,
    stdout: bool,
    said: String,
    frame: usize,
    spinning: bool,
}

impl Progress {
    fn new(terminal: bool, stdout: bool) -> Self {
        Self { terminal, stdout, said: String::new(), frame: 0, spinning: false }
    }

    fn line(&mut self, text: &str) -> anyhow::Result<()> {
        if text == self.said {
            return Ok(());
        }
        self.done();
        if self.stdout {
            outln!("{text}");
        } else {
            errln!("{text}");
        }
        self.said = text.to_string();
        Ok(())
    }

    fn tick(&mut self, what: &str) {
        if !self.terminal {
            return;
        }
        const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
        err!("\r{} {what}…", FRAMES[self.frame % FRAMES.len()]);
        self.frame += 1;
        self.spinning = true;
    }

    fn done(&mut self) {
        if self.spinning {
            err!("\r\x1b[2K");
            self.spinning = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(result: SyncResult) -> SyncRecord {
        SyncRecord {
            subject: "s".into(),
            started_at: "a".into(),
            finished_at: "b".into(),
            result,
            ..SyncRecord::new("abc", crate::status::SyncReason::Manual)
        }
    }

    #[test]
    fn exit_codes_follow_the_outcome() {
        let synced = AppStatus { sync: SyncStatus::Synced, ..AppStatus::default() };
        let out_of_sync = AppStatus { sync: SyncStatus::OutOfSync, ..AppStatus::default() };
        let unknown = AppStatus::default();
        let held = AppStatus {
            sync: SyncStatus::Synced,
            conditions: vec![crate::status::Condition::new(
                crate::status::ConditionType::SyncError,
                "FailOnSharedResource=true: not syncing objects another application tracks",
            )],
            ..AppStatus::default()
        };
        let ok = ExitCode::SUCCESS;
        let cases = [
            (Asked::Sync, &synced, Some(record(SyncResult::Succeeded)), ok),
            (Asked::Sync, &synced, None, ok),
            (Asked::Sync, &synced, Some(record(SyncResult::Refused)), ExitCode::from(1)),
            (Asked::Sync, &out_of_sync, Some(record(SyncResult::Failed)), ExitCode::from(1)),
            (Asked::Sync, &out_of_sync, None, ExitCode::from(1)),
            (Asked::Sync, &unknown, None, ExitCode::from(2)),
            (Asked::Sync, &unknown, Some(record(SyncResult::Refused)), ExitCode::from(1)),
            (Asked::Sync, &held, None, ExitCode::from(1)),
            (Asked::Refresh, &held, None, ok),
            (Asked::Refresh, &out_of_sync, None, ok),
            (Asked::Refresh, &unknown, None, ExitCode::from(2)),
        ];
        for (asked, status, sync, want) in cases {
            assert_eq!(exit_code(asked, status, sync.as_ref()), want, "{asked:?} {:?} {sync:?}", status.sync);
        }
    }
}
