//! `plumb suspend`, `resume` and `rollback`: requests recorded as annotations on the
//! application's resource (`applications.plumb.dev`), which the serving plumb acts on
//! (see [`crate::status::store::Controls`]). Kubernetes RBAC on that resource (`patch
//! applications.plumb.dev`) decides who may make them; they need a kubeconfig, not the
//! policy file.

use std::process::ExitCode;

use anyhow::Context as _;

use super::read::KubeArgs;
use crate::status::{
    Pin, ROLLBACK_ANNOTATION, ROLLBACK_OVERRIDE_ANNOTATION, SUSPEND_ANNOTATION, Suspension, SyncRecord, SyncResult,
    store::Store,
};

/// A client and the status store in plumb's namespace (`--kubeconfig`, `--context`,
/// `-n`; see [`KubeArgs`]).
async fn store(target: &KubeArgs) -> anyhow::Result<(kube::Client, Store)> {
    let client = target.client().await?;
    Ok((client.clone(), Store::new(client, &target.namespace(None))))
}

/// Who the API server says the caller is (a `SelfSubjectReview`, as `kubectl auth
/// whoami`), recorded with a pause or pin; `""` when it cannot say.
pub(super) async fn whoami(client: &kube::Client) -> String {
    let review = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap_or_default());
    let Ok(request) = request else { return String::new() };
    match client.request::<serde_json::Value>(request).await {
        Ok(v) => v["status"]["userInfo"]["username"].as_str().unwrap_or_default().to_string(),
        Err(e) => {
            tracing::debug!("SelfSubjectReview: {e}");
            String::new()
        }
    }
}

/// The longest pause `app`'s environment allows in `policy` (`maxPause`), if the
/// policy names the application.
fn max_pause(policy: Option<&crate::config::Config>, app: &str) -> Option<std::time::Duration> {
    let c = policy?;
    let a = c.applications.iter().find(|a| a.name.value == app)?;
    c.environments.iter().find(|e| e.name.value == a.environment.value).map(crate::config::Environment::max_pause)
}

/// `plumb suspend APP --for D --reason R [-c POLICY]`: `D` cut to the environment's
/// `maxPause` when the policy is given (the server cuts it anyway, from when it first
/// sees the pause).
///
/// # Errors
/// The duration is invalid; the resource cannot be written (e.g. 403: no `patch` on
/// `applications.plumb.dev`).
pub async fn suspend(
    app: &str,
    asked: std::time::Duration,
    reason: &str,
    (target, policy): (&KubeArgs, Option<&crate::config::Config>),
) -> anyhow::Result<ExitCode> {
    let client = target.client().await?;
    let store = Store::new(client.clone(), &target.namespace(policy));
    let max = max_pause(policy, app);
    let duration = max.map_or(asked, |m| asked.min(m));
    let span = jiff::SignedDuration::try_from(duration).context("--for")?;
    let until = jiff::Timestamp::now().checked_add(span).context("--for")?;
    let pause = Suspension {
        until: until.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        by: whoami(&client).await,
        reason: reason.to_string(),
        ..Suspension::default()
    };
    let value = serde_json::to_string(&pause)?;
    if !store.annotate_existing(app, &[(SUSPEND_ANNOTATION, Some(&value))]).await? {
        return Ok(super::read::not_found(app, &target.namespace(policy)));
    }
    if duration < asked {
        let shown = crate::config::shown_duration;
        errln!("{app}: --for {} cut to the environment's maxPause ({})", shown(asked), shown(duration));
    }
    let cap = match max {
        Some(_) => String::new(),
        None => " (or at the environment's maxPause, default 7 days, if that comes first)".to_string(),
    };
    outln!(
        "{app}: automated sync and selfHeal paused until {}{cap} ({reason}); `plumb resume {app}` ends it",
        pause.until
    );
    Ok(ExitCode::SUCCESS)
}

/// `plumb decommission APP… [--confirm] [--approve]`: records on each application's
/// resource the confirmation that lets its decommission pass the mass guard
/// ([`crate::plan::decommission::CONFIRM_ANNOTATION`]) and/or the approval that lets it
/// delete its PersistentVolumeClaims, Namespaces and CRDs
/// ([`crate::plan::decommission::APPROVE_ANNOTATION`]); both valid 24 h. An
/// application the policy still declares may be confirmed ahead of the edit that
/// removes it.
///
/// # Errors
/// Neither flag; the resource cannot be written (e.g. 403: no `patch` on
/// `applications.plumb.dev`). An application without a resource is reported and
/// makes the exit code 1.
pub async fn decommission(
    apps: &[String],
    (confirm, approve): (bool, bool),
    (target, policy): (&KubeArgs, Option<&crate::config::Config>),
) -> anyhow::Result<ExitCode> {
    use crate::plan::decommission::{APPROVE_ANNOTATION, CONFIRM_ANNOTATION};
    anyhow::ensure!(
        confirm || approve,
        "give --confirm (pass the mass guard), --approve (delete data-loss classes), or both"
    );
    let client = target.client().await?;
    let namespace = target.namespace(policy);
    let store = Store::new(client, &namespace);
    let now = crate::status::now();
    let mut pairs = Vec::new();
    if confirm {
        pairs.push((CONFIRM_ANNOTATION, Some(now.as_str())));
    }
    if approve {
        pairs.push((APPROVE_ANNOTATION, Some(now.as_str())));
    }
    let mut missing = false;
    for app in apps {
        if !store.annotate_existing(app, &pairs).await? {
            errln!("{app}: no applications.plumb.dev/{app} in namespace {namespace}: nothing to decommission");
            missing = true;
            continue;
        }
        let what: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
        let declared = policy.is_some_and(|c| c.applications.iter().any(|a| a.name.value == *app));
        let note =
            if declared { " (the policy still declares it: this counts once it leaves, within 24 h)" } else { "" };
        outln!(
            "{app}: {} = {now}{note}; the server goes on within seconds (`plumb get {app}` shows its progress)",
            what.join(", ")
        );
    }
    Ok(if missing { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `plumb resume APP`.
///
/// # Errors
/// The resource cannot be written.
pub async fn resume(app: &str, target: &KubeArgs) -> anyhow::Result<ExitCode> {
    let (_, store) = store(target).await?;
    if !store.annotate_existing(app, &[(SUSPEND_ANNOTATION, None)]).await? {
        return Ok(super::read::not_found(app, &target.namespace(None)));
    }
    outln!("{app}: automated sync resumed");
    Ok(ExitCode::SUCCESS)
}

/// The revision `wanted` names in `history` (newest first): `None` → the newest
/// successful sync of another revision than the newest sync's (the one before); a
/// number `N` → the revision of the `N`th entry (1 = newest, as `plumb history`
/// numbers them); else a commit SHA or a prefix of one, taken as given when no entry
/// has it. Pure.
///
/// # Errors
/// No earlier successful sync; `N` beyond the history.
pub fn rollback_revision(history: &[SyncRecord], wanted: Option<&str>) -> Result<String, String> {
    match wanted {
        None => {
            let current = history.iter().find(|r| r.result == SyncResult::Succeeded).map(|r| r.revision.as_str());
            history
                .iter()
                .find(|r| r.result == SyncResult::Succeeded && Some(r.revision.as_str()) != current)
                .map(|r| r.revision.clone())
                .ok_or_else(|| "no earlier successful sync in the history: name a revision".to_string())
        }
        Some(n) if n.len() < 4 && n.chars().all(|c| c.is_ascii_digit()) => {
            let i: usize = n.parse().map_err(|_| format!("history entry {n}"))?;
            history
                .get(i.wrapping_sub(1))
                .map(|r| r.revision.clone())
                .ok_or_else(|| format!("history entry {n}: the history has {} entries (1 = newest)", history.len()))
        }
        Some(rev) => Ok(history
            .iter()
            .find(|r| r.revision.starts_with(rev))
            .map_or_else(|| rev.to_string(), |r| r.revision.clone())),
    }
}

/// `plumb rollback APP [REVISION|N]`, or `--release`.
///
/// # Errors
/// The history cannot be read or names no such revision; the resource cannot be
/// written.
pub async fn rollback(
    app: &str,
    wanted: Option<&str>,
    (release, until_next_commit, force): (bool, bool, bool),
    target: &KubeArgs,
) -> anyhow::Result<ExitCode> {
    let (client, store) = store(target).await?;
    if release {
        if !store.annotate_existing(app, &[(ROLLBACK_ANNOTATION, None), (ROLLBACK_OVERRIDE_ANNOTATION, None)]).await? {
            return Ok(super::read::not_found(app, &target.namespace(None)));
        }
        outln!("{app}: pin released; automated sync follows the tracked ref again");
        return Ok(ExitCode::SUCCESS);
    }
    let Some((_, history)) = store.find(app).await? else {
        return Ok(super::read::not_found(app, &target.namespace(None)));
    };
    let revision = rollback_revision(&history, wanted).map_err(anyhow::Error::msg)?;
    let pin = Pin {
        revision: revision.clone(),
        by: whoami(&client).await,
        at: crate::status::now(),
        until_next_commit,
        force,
        ..Pin::default()
    };
    let value = serde_json::to_string(&pin)?;
    // with --force, the override in the same write: the API server checks the right
    // `override` for it (deploy/admission/rollback-override.yaml)
    let over = force.then_some(revision.as_str());
    store
        .annotate_existing(app, &[(ROLLBACK_ANNOTATION, Some(&value)), (ROLLBACK_OVERRIDE_ANNOTATION, over)])
        .await
        .with_context(|| format!("rollback of {app} to {revision} not recorded"))?;
    let short: String = revision.chars().take(7).collect();
    let until =
        if until_next_commit { "the next commit".to_string() } else { format!("`plumb rollback {app} --release`") };
    outln!("{app}: rollback to {short} requested; pinned there until {until}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rec(revision: &str, result: SyncResult) -> SyncRecord {
        SyncRecord { result, ..SyncRecord::new(revision, crate::status::SyncReason::NewRevision) }
    }

    #[test]
    fn the_revision_of_a_rollback() {
        let h = [
            rec("cccc", SyncResult::Succeeded),
            rec("cccc", SyncResult::Succeeded),
            rec("bbbb", SyncResult::Failed),
            rec("aaaa", SyncResult::Succeeded),
        ];
        assert_eq!(rollback_revision(&h, None).unwrap(), "aaaa", "the previous successful revision");
        assert_eq!(rollback_revision(&h, Some("3")).unwrap(), "bbbb");
        assert!(rollback_revision(&h, Some("9")).unwrap_err().contains("has 4 entries"));
        assert!(rollback_revision(&h, Some("0")).is_err());
        assert_eq!(rollback_revision(&h, Some("aa")).unwrap(), "aaaa", "a prefix of a recorded revision");
        assert_eq!(rollback_revision(&h, Some("deadbeef")).unwrap(), "deadbeef", "else as given");
        assert!(rollback_revision(&h[..2], None).is_err());
    }
}
