//! `plumb sync --local`, `plumb prune` and `plumb sync --dry-run`: fetch, render,
//! compare and apply from this machine, with the user's identity (clusters without a
//! server, emergencies, previews).
//!
//! What a local run writes to the status object: the passes that sync record their sync
//! and the status they saw (the history names every sync, whoever ran it); a pass that
//! had nothing to sync, and the health waits of `--wait`, write nothing — they compare
//! and print. A server serving the application keeps its own judgement of health (a
//! laptop's `--wait` once replaced the server's Degraded with Progressing).

use std::process::ExitCode;

use crate::{
    reconcile::{AppState, Context, Mode},
    status::ConditionType,
};

use super::output::sanitize;
use crate::status::short;

/// `plumb sync` / `plumb prune`: previews (`dry_run`) or syncs, going on while later
/// sync waves wait for earlier ones to become Healthy (at most `timeout`), then waits
/// for health when `wait` is given.
pub async fn sync_command(
    ctx: &Context,
    app: &str,
    prune: bool,
    approve: bool,
    dry_run: bool,
    wait: Option<std::time::Duration>,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    use crate::status::SyncResult;
    // the command's passes carry their state from one to the next, as an actor's do
    let mut state = AppState::default();
    let now = crate::source::Freshness::Now;
    if dry_run {
        let report = ctx.pass(&mut state, app, Mode::Preview { prune, approve }, None, now).await?;
        out!("{}", preview(&report));
        let held = report.status.conditions.iter().any(|c| c.type_ == ConditionType::SyncError);
        let bad = report.status.sync == crate::compare::SyncStatus::Unknown || report.plan.refused.is_some() || held;
        return Ok(ExitCode::from(u8::from(bad)));
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut report = ctx.pass(&mut state, app, Mode::Manual { prune, approve }, None, now).await?;
    let mut said = String::new();
    while let Some(r) = report.sync.as_ref().filter(|r| r.result == SyncResult::Running) {
        if r.message != said {
            let (a, p) = (r.applied.len(), r.pruned.len());
            outln!("{app} {}: {} (so far applied {a}, pruned {p})", short(&r.revision), r.message);
            said.clone_from(&r.message);
        }
        if tokio::time::Instant::now() >= deadline {
            outln!("{app}: sync still running after {}", crate::config::shown_duration(timeout));
            return Ok(ExitCode::from(1));
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        report = ctx.pass(&mut state, app, Mode::Manual { prune, approve }, None, now).await?;
    }
    if let Some(timeout) = wait {
        return wait_for_health((ctx, &mut state), app, report, timeout).await;
    }
    match &report.sync {
        Some(r) => {
            outln!("{} {} \"{}\": {}", app, short(&r.revision), sanitize(&r.subject), r.result);
            for a in &r.applied {
                outln!("  {} {a}", if r.recreated.contains(a) { "recreated" } else { "applied" });
            }
            for p in &r.pruned {
                outln!("  pruned  {p}");
            }
            for (object, why) in &report.plan.skipped {
                outln!("  skipped {object}: {why}");
            }
            if !r.message.is_empty() {
                outln!("  {}", sanitize(&r.message));
            }
            Ok(if r.result == SyncResult::Succeeded { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        None => {
            outln!("{app}: {} {}, nothing to sync", report.status.sync, short(&report.status.revision));
            for c in &report.status.conditions {
                outln!("  {}: {}", c.type_, sanitize(&c.message));
            }
            // a sync held back (FailOnSharedResource, a guard) is not a success
            let held = report.status.conditions.iter().any(|c| c.type_ == ConditionType::SyncError);
            Ok(if report.status.sync == crate::compare::SyncStatus::Unknown || held {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// The plan of a preview as `plumb sync --dry-run` prints it ([`crate::preview::AppPlan::text`]).
pub fn preview(report: &crate::reconcile::PassReport) -> String {
    crate::preview::AppPlan::of(&report.status.app, report).text()
}

/// `plumb sync --wait`: prints the sync, then re-compares every 2 s until the app is
/// Synced and Healthy (exit 0), something is Degraded (exit 1) or `timeout` passes
/// (exit 1).
async fn wait_for_health(
    (ctx, state): (&Context, &mut AppState),
    app: &str,
    first: crate::reconcile::PassReport,
    timeout: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    use crate::{compare::SyncStatus, health::HealthStatus};
    if let Some(r) = &first.sync {
        outln!(
            "{app} {} \"{}\": {} (applied {}, pruned {})",
            short(&r.revision),
            r.subject,
            r.result,
            r.applied.len(),
            r.pruned.len()
        );
        if r.result != crate::status::SyncResult::Succeeded {
            outln!("  {}", r.message);
            if first.status.sync != SyncStatus::Unknown {
                return Ok(ExitCode::from(1));
            }
        }
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut r = first;
    loop {
        let st = &r.status;
        match (st.sync, st.health) {
            // waiting does not mend a fetch, render or comparison error
            (SyncStatus::Unknown, _) => {
                outln!("{app}: {} at {}", st.sync, short(&st.revision));
                for c in &st.conditions {
                    outln!("  {}: {}", c.type_, c.message);
                }
                return Ok(ExitCode::from(2));
            }
            (SyncStatus::Synced, HealthStatus::Healthy) => {
                outln!("{app}: Synced and Healthy at {}", short(&st.revision));
                return Ok(ExitCode::SUCCESS);
            }
            (_, HealthStatus::Degraded) => {
                outln!("{app}: Degraded");
                for x in st.resources.iter().filter(|x| x.health == HealthStatus::Degraded) {
                    outln!("  {}: {}", x.object, x.health_message);
                }
                return Ok(ExitCode::from(1));
            }
            _ if tokio::time::Instant::now() >= deadline => {
                outln!("{app}: still {} / {} after {}", st.sync, st.health, crate::config::shown_duration(timeout));
                for x in
                    st.resources.iter().filter(|x| x.health != HealthStatus::Healthy || x.sync != SyncStatus::Synced)
                {
                    let why = [x.reason.as_str(), x.health_message.as_str()]
                        .into_iter()
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join("; ");
                    outln!("  {}: {} {} {why}", x.object, x.sync, x.health);
                }
                return Ok(ExitCode::from(1));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
        r = ctx.pass(state, app, Mode::Observe, None, crate::source::Freshness::Now).await?;
    }
}
