//! The decommission loop of `plumb serve` (leader only): every [`ROUND_EVERY`] it lists
//! the `Application` resources, finds those whose application the policy no longer
//! declares, and does what [`crate::plan::decommission`] decides for each — leave the
//! objects (`orphan`), delete them (`delete`, `wait`), or hold (the mass guard, the
//! data-loss classes) — then deletes the resource. Everything it does is an Event on
//! the resource and a log line; while it works or waits, the resource's conditions
//! (`Decommissioning`, `DecommissionPending`) say what is left and which command a
//! person runs.
//!
//! What a leaving application may delete is bounded three ways: only objects whose
//! tracking-id names it (plumb wrote those when it synced them, inside the
//! application's boundaries), never one that a live application lists among its
//! objects (nothing at all until every application of the policy has been compared
//! once), and every delete runs as the identity the application wrote with.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
    time::Duration,
};

use kube::api::DynamicObject;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{
    cluster::{Cluster, Kind},
    leader::Leadership,
    plan::decommission::{
        self as decom, APPROVE_ANNOTATION, Action, CONFIRM_ANNOTATION, DeletePlan, Hooks, Leaving, Owned, Phase, Record,
    },
    plan::hooks::HookState,
    reconcile::Context,
    status::{
        AppStatus, Condition, ConditionType, EventReason,
        store::{DECOMMISSION_FIELD, HOOKS_FIELD, event_object, from_object},
    },
    tracking::{ObjectKey, group_of},
};

/// How often the loop looks for applications that left the policy.
pub const ROUND_EVERY: Duration = Duration::from_secs(3);

/// The longest a hook may take to complete (Job `Complete`, Pod `Succeeded`): a sync
/// hook's default ([`crate::plan::hooks::DEFAULT_TIMEOUT`]).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(crate::plan::hooks::DEFAULT_TIMEOUT);

pub use crate::status::store::HOOKS_RAN_ANNOTATION;

/// How many object names a condition or Event lists before `… and N more`.
const NAMES_SHOWN: usize = 10;

/// Runs the loop until `token` is cancelled; rounds run while this replica holds a
/// shard, and act on the leaving applications of its shards only (each inside its
/// shard's fence, [`crate::fence`]); the mass guard weighs every leaving application.
pub async fn run(ctx: Arc<Context>, leadership: Leadership, token: CancellationToken) {
    loop {
        if leadership.holds_any() {
            // a reload or shutdown does not wait for a hook: every step is done again
            // (or found done) by the next round
            tokio::select! {
                () = token.cancelled() => return,
                r = round(&ctx, &leadership) => if let Err(e) = r {
                    tracing::warn!("decommission: {e:#}");
                },
            }
        }
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(ROUND_EVERY) => {}
        }
    }
}

/// A leaving application's resource, read.
struct Found {
    leaving: Leaving,
    status: AppStatus,
    hooks: Hooks,
    annotations: BTreeMap<String, String>,
    /// Its `spec.namespace` (the application's default namespace).
    namespace: String,
    uid: String,
    /// Its `spec` record or hooks differ from what plumb kept ([`decom::trusted`]).
    tampered: bool,
}

impl Found {
    fn app(&self) -> &str {
        &self.leaving.app
    }

    fn ran(&self, phase: Phase) -> bool {
        let word = format!("{phase:?}");
        self.annotations.get(HOOKS_RAN_ANNOTATION).is_some_and(|v| v.split(',').any(|p| p.trim() == word))
    }

    fn record(&self) -> Record {
        self.leaving.record.clone().unwrap_or_default()
    }
}

/// What the live applications claim: every object their statuses list, and whether
/// that list is complete (each has been compared, none left objects out).
struct Claims {
    objects: HashSet<String>,
    complete: bool,
}

fn read(obj: &DynamicObject) -> Found {
    let app = obj.metadata.name.clone().unwrap_or_default();
    let (status, _) = from_object(obj);
    let spec = &obj.data["spec"];
    let record = spec.get(DECOMMISSION_FIELD).and_then(|r| serde_json::from_value::<Record>(r.clone()).ok());
    let hooks = spec.get(HOOKS_FIELD).and_then(|h| serde_json::from_value(h.clone()).ok()).unwrap_or_default();
    // `spec` is writable by whoever may patch the resource; the digest in the status
    // only by plumb: a changed record or hook is not trusted (orphan, no hook)
    let (record, hooks, tampered) = decom::trusted(record, hooks, &status.decommission_digest);
    if tampered {
        tracing::warn!(
            app = %app,
            "spec.decommission or spec.decommissionHooks differ from what plumb kept (status.decommissionDigest): not trusted; the application is orphaned, no hook runs"
        );
    }
    let annotations = obj.metadata.annotations.clone().unwrap_or_default();
    let has = |t: ConditionType| status.conditions.iter().any(|c| c.type_ == t);
    let started = has(ConditionType::Decommissioning);
    let leaving = Leaving {
        app,
        record,
        confirmed: annotations.get(CONFIRM_ANNOTATION).cloned(),
        started,
        held: !started && has(ConditionType::DecommissionPending),
    };
    Found {
        leaving,
        status,
        hooks,
        annotations,
        namespace: spec["namespace"].as_str().unwrap_or_default().to_string(),
        uid: obj.metadata.uid.clone().unwrap_or_default(),
        tampered,
    }
}

/// Whether `obj` is the resource of an application generated by an applicationSet
/// whose directories are not known now ([`crate::config::Config::unlisted_sets`]): not
/// leaving, only not listed.
fn unlisted(config: &crate::config::Config, obj: &DynamicObject) -> bool {
    let set = obj.data["spec"]["applicationSet"].as_str();
    set.is_some_and(|set| config.unlisted_sets.iter().any(|s| s == set))
}

/// One round: every leaving application handled once. Reads every resource only when
/// one of them may be leaving ([`Context::undeclared_resources`]).
async fn round(ctx: &Context, leadership: &Leadership) -> anyhow::Result<()> {
    let declared: HashSet<&str> = ctx.config.applications.iter().map(|a| a.name.value.as_str()).collect();
    // every resource declared, as the watch of the requests knows their names: nothing
    // leaves, and reading every status (tens of MB with thousands of applications, each
    // round in every replica) would find nothing
    if ctx.undeclared_resources(&declared) == Some(false) {
        return Ok(());
    }
    let resources = ctx.store.list_resources().await?;
    let mut claims = Claims { objects: HashSet::new(), complete: true };
    let mut found = Vec::new();
    for obj in &resources {
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        if declared.contains(name) {
            let (status, _) = from_object(obj);
            // a pass that failed before comparing (Unknown) has not claimed its objects yet:
            // an application renamed in the same edit may be the one that fails
            claims.complete &= !status.revision.is_empty()
                && status.sync != crate::compare::SyncStatus::Unknown
                && status.resources_omitted == 0;
            claims.objects.extend(status.resources.into_iter().map(|r| r.object));
        } else if obj.metadata.deletion_timestamp.is_none() && !unlisted(&ctx.config, obj) {
            found.push(read(obj));
        }
    }
    // declared applications whose resource does not exist yet have not been compared
    claims.complete &= declared.iter().all(|d| resources.iter().any(|o| o.metadata.name.as_deref() == Some(*d)));
    if found.is_empty() {
        return Ok(());
    }
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    for a in &ctx.config.applications {
        *remaining.entry(a.environment.value.clone()).or_default() += 1;
    }
    let leaving: Vec<Leaving> = found.iter().map(|f| f.leaving.clone()).collect();
    let actions = decom::decide(&leaving, &remaining, jiff::Timestamp::now());
    for (f, action) in found.iter().zip(actions) {
        let Some(fence) = leadership.fence(f.app()) else { continue };
        let done = crate::fence::within(Some(fence), async {
            match action {
                Action::Hold(why) => hold(ctx, f, &why).await,
                Action::Orphan => orphan(ctx, f).await,
                Action::Delete { wait } => delete(ctx, f, wait, &claims).await,
            }
        })
        .await;
        if let Err(e) = done {
            tracing::warn!(app = %f.app(), "decommission: {e:#}");
        }
    }
    Ok(())
}

/// An Event on `f`'s resource.
async fn event(ctx: &Context, f: &Found, warning: bool, reason: EventReason, note: String) {
    let object = event_object(ctx.store.namespace(), f.app(), Some(&f.uid));
    ctx.cluster.event(&object, warning, reason, note).await;
}

/// Sets `f`'s conditions to `conditions` (the decommission's only); true when they
/// changed.
async fn set_conditions(ctx: &Context, f: &Found, conditions: Vec<Condition>) -> anyhow::Result<bool> {
    if f.status.conditions == conditions {
        return Ok(false);
    }
    let mut status = f.status.clone();
    status.app = f.app().to_string();
    status.conditions = conditions;
    ctx.store.save(&status, &[]).await?;
    // the status API and the page show it while it goes
    ctx.published().publish(Arc::new(status));
    Ok(true)
}

async fn hold(ctx: &Context, f: &Found, why: &str) -> anyhow::Result<()> {
    let message = format!("{} left the policy; {why}", f.app());
    if set_conditions(ctx, f, vec![Condition::new(ConditionType::DecommissionPending, &message)]).await? {
        tracing::warn!(app = %f.app(), "decommission held: {message}");
        event(ctx, f, true, EventReason::DecommissionHeld, message).await;
    }
    Ok(())
}

async fn orphan(ctx: &Context, f: &Found) -> anyhow::Result<()> {
    let note = format!(
        "{} left the policy (deletionPolicy orphan): its objects stay in the cluster, plumb's tracking marks left on them; its Application resource is deleted",
        f.app()
    );
    let note = if f.tampered {
        format!(
            "{note}; its spec.decommission or spec.decommissionHooks differ from what plumb kept (status.decommissionDigest), so they are not trusted: nothing deleted, no hook run"
        )
    } else {
        note
    };
    event(ctx, f, f.tampered, EventReason::Decommissioned, note.clone()).await;
    remove(ctx, f).await?;
    tracing::info!(app = %f.app(), "decommissioned: {note}");
    Ok(())
}

/// Deletes `f`'s resource; the status API and page forget it.
async fn remove(ctx: &Context, f: &Found) -> anyhow::Result<()> {
    ctx.store.remove(f.app(), &f.uid).await?;
    ctx.published().forget(f.app());
    Ok(())
}

/// Names, at most [`NAMES_SHOWN`] of them, then `… and N more`.
fn names(list: &[String]) -> String {
    let mut out = list.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if list.len() > NAMES_SHOWN {
        out.push_str(&format!(" … and {} more", list.len() - NAMES_SHOWN));
    }
    out
}

/// The decommission's progress as a condition message. Pure.
pub fn progress(app: &str, plan: &DeletePlan, deleting: &[String], wait: bool) -> String {
    let mut parts = vec![format!("{app} left the policy (deletionPolicy {})", if wait { "wait" } else { "delete" })];
    if !deleting.is_empty() {
        parts.push(format!("deleting {}: {}", deleting.len(), names(deleting)));
    }
    if !plan.terminating.is_empty() {
        parts.push(format!("waiting for {} to go: {}", plan.terminating.len(), names(&plan.terminating)));
    }
    if !plan.held.is_empty() {
        parts.push(format!("held for approval: {}", names(&plan.held)));
    }
    if !plan.claimed.is_empty() {
        parts.push(format!("left (a live application claims them): {}", names(&plan.claimed)));
    }
    if !plan.kept.is_empty() {
        parts.push(format!(
            "left (Prune=false, resource-policy keep, or plumb's own installation): {}",
            names(&plan.kept)
        ));
    }
    parts.join("; ")
}

async fn delete(ctx: &Context, f: &Found, wait: bool, claims: &Claims) -> anyhow::Result<()> {
    let app = f.app();
    let working = |m: String| vec![Condition::new(ConditionType::Decommissioning, m)];
    if !f.leaving.started {
        let note = format!(
            "{app} left the policy: deleting its objects (deletionPolicy {})",
            if wait { "wait" } else { "delete" }
        );
        event(ctx, f, false, EventReason::Decommissioning, note.clone()).await;
        tracing::info!(app = %app, "{note}");
    }
    let approved =
        decom::stamp_valid(f.annotations.get(APPROVE_ANNOTATION).map(String::as_str), jiff::Timestamp::now());
    if f.hooks.omitted > 0 && !approved {
        let why = format!(
            "{} of its delete hooks were not kept on its resource (over {} KiB, or a Secret, which readers of the resource would see) and will not run: nothing deleted until `plumb decommission {app} --approve` (valid 24 h)",
            f.hooks.omitted,
            decom::MAX_HOOK_BYTES / 1024
        );
        return hold(ctx, f, &why).await;
    }
    if !claims.complete {
        let m = format!(
            "{app} left the policy; waiting until every application of the policy has been compared (what they claim must be known before anything is deleted)"
        );
        set_conditions(ctx, f, working(m)).await?;
        return Ok(());
    }
    let record = f.record();
    let writer = match &record.impersonate {
        Some(user) => match ctx.cluster.impersonate(user).await {
            Ok(c) => Some(c),
            Err(e) => {
                set_conditions(ctx, f, working(format!("{app}: impersonate {user}: {e:#}; nothing deleted"))).await?;
                return Ok(());
            }
        },
        None => None,
    };
    let cluster = writer.as_ref().unwrap_or(&ctx.cluster);
    if !f.ran(Phase::PreDelete) && f.hooks.of(Phase::PreDelete).next().is_some() {
        set_conditions(ctx, f, working(format!("{app} left the policy; running its PreDelete hooks"))).await?;
        if let Err(e) = run_hooks(cluster, f, Phase::PreDelete, &ctx.config.settings).await {
            let m = format!(
                "{app}: PreDelete hook failed: {e}; nothing deleted (delete the hook's object to run it again)"
            );
            if set_conditions(ctx, f, working(m.clone())).await? {
                event(ctx, f, true, EventReason::DecommissionHeld, m).await;
            }
            return Ok(());
        }
        mark_ran(ctx, f, Phase::PreDelete).await?;
    }
    let objects = owned_objects(ctx, f).await?;
    let owned: Vec<Owned> = objects.iter().map(|(o, _)| o.clone()).collect();
    let plan = decom::delete_plan(&owned, &claims.objects, record.protect_data_loss, approved);
    let mut deleting = Vec::new();
    for &i in &plan.now {
        let (o, kind) = &objects[i];
        match cluster.delete(kind, &o.key, &o.uid, o.propagation).await {
            Ok(_) => deleting.push(o.key.to_string()),
            Err(e) => tracing::warn!(app = %app, "decommission: delete {}: {e}", o.key),
        }
    }
    let finished = plan.now.is_empty() && plan.held.is_empty() && (!wait || plan.terminating.is_empty());
    if finished {
        return finish(ctx, f, cluster, &plan).await;
    }
    let mut conditions = working(progress(app, &plan, &deleting, wait));
    if !plan.held.is_empty() {
        conditions.push(Condition::new(
            ConditionType::DecommissionPending,
            format!(
                "{app}: {} held (data-loss classes, Prune=confirm, adopted): delete them with `plumb decommission {app} --approve` (valid 24 h)",
                names(&plan.held)
            ),
        ));
    }
    let newly_held =
        !plan.held.is_empty() && !f.status.conditions.iter().any(|c| c.type_ == ConditionType::DecommissionPending);
    if set_conditions(ctx, f, conditions.clone()).await? && newly_held {
        event(ctx, f, true, EventReason::DecommissionHeld, conditions[1].message.clone()).await;
    }
    Ok(())
}

/// The end of a `delete` / `wait` decommission: PostDelete hooks (a failure is
/// reported, the decommission still ends: the objects are gone), the Event, the
/// resource deleted.
async fn finish(ctx: &Context, f: &Found, cluster: &Cluster, plan: &DeletePlan) -> anyhow::Result<()> {
    let app = f.app();
    let mut note = format!("{app} left the policy: its objects are deleted");
    if !f.ran(Phase::PostDelete) && f.hooks.of(Phase::PostDelete).next().is_some() {
        match run_hooks(cluster, f, Phase::PostDelete, &ctx.config.settings).await {
            Ok(()) => note.push_str("; PostDelete hooks completed"),
            Err(e) => note.push_str(&format!("; PostDelete hook failed: {e}")),
        }
    }
    if !plan.claimed.is_empty() {
        note.push_str(&format!("; left (a live application claims them): {}", names(&plan.claimed)));
    }
    if !plan.kept.is_empty() {
        note.push_str(&format!(
            "; left (Prune=false, resource-policy keep, or plumb's own installation): {}",
            names(&plan.kept)
        ));
    }
    if !plan.terminating.is_empty() {
        note.push_str(&format!("; still going: {}", names(&plan.terminating)));
    }
    event(ctx, f, false, EventReason::Decommissioned, note.clone()).await;
    remove(ctx, f).await?;
    tracing::info!(app = %app, "decommissioned: {note}");
    Ok(())
}

async fn mark_ran(ctx: &Context, f: &Found, phase: Phase) -> anyhow::Result<()> {
    let mut ran: Vec<String> = f
        .annotations
        .get(HOOKS_RAN_ANNOTATION)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    ran.push(format!("{phase:?}"));
    let value = ran.join(",");
    ctx.store.annotate_existing(f.app(), &[(HOOKS_RAN_ANNOTATION, Some(&value))]).await?;
    Ok(())
}

/// The live objects of `f`'s application: of every kind it ever applied
/// (`status.kinds`), those whose tracking-id names it, hooks left out, each with its
/// kind.
///
/// # Errors
/// A kind could not be listed: nothing is judged gone on a partial list.
async fn owned_objects(ctx: &Context, f: &Found) -> anyhow::Result<Vec<(Owned, Kind)>> {
    let installation = ctx.config.settings.installation_id.as_deref();
    // whatever the application was: plumb's own installation is never decommissioned
    // (the self application's deletion policy is `orphan`, and this holds if it was not)
    let own = &ctx.config.settings.status_namespace;
    let installed = crate::config::Boundaries { self_management: true, ..Default::default() };
    let leases = ctx.config.settings.lease_namespaces();
    let installed = crate::plan::Boundary::new(&installed, own, own).map_err(anyhow::Error::msg)?;
    let installed = installed.with_lease_namespaces(leases.iter().copied());
    // and what no application may write: plumb's namespaces (an object adopted there before)
    let plain = crate::plan::Boundary::new(&crate::config::Boundaries::default(), &f.namespace, own)
        .map_err(anyhow::Error::msg)?
        .with_lease_namespaces(leases);
    let groups: std::collections::BTreeSet<(&str, &str)> =
        f.status.kinds.iter().map(|(av, k)| (group_of(av), k.as_str())).collect();
    let mut out = Vec::new();
    for (group, kind_name) in groups {
        let kind = match ctx.cluster.served(group, kind_name).await {
            Ok(k) => k,
            Err(crate::cluster::Error::UnknownKind { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        for obj in ctx.cluster.list_app(&kind, f.app()).await? {
            if crate::tracking::is_owned_by(&obj, f.app(), installation)
                && !decom::is_hook(&obj)
                && let Some(mut o) = Owned::of(&obj)
            {
                o.kept |= installed.never_pruned(&o.key).is_some() || plain.never_pruned(&o.key).is_some();
                out.push((o, kind.clone()));
            }
        }
    }
    Ok(out)
}

/// Applies the hooks of `phase` in order, each waiting until it completes (a Job
/// `Complete`, a Pod `Succeeded`; other kinds once applied), at most [`HOOK_TIMEOUT`].
///
/// A delete hook is written only inside the application's own namespace (its policy,
/// and with it its destinations, is gone; plumb's namespace, its Leases' namespace and
/// RBAC objects never, [`crate::plan::Boundary`]), and never over an object that is not a
/// hook of this application (label [`crate::plan::hooks::HOOK_OF_LABEL`]): what a
/// Git author kept on the resource cannot reach beyond what the application could
/// write, nor take over a namesake.
///
/// # Errors
/// The hook named with why: outside those bounds, not applied, failed, or not complete
/// in time.
async fn run_hooks(
    cluster: &Cluster,
    f: &Found,
    phase: Phase,
    settings: &crate::config::Settings,
) -> Result<(), String> {
    let own = &settings.status_namespace;
    let boundary = crate::plan::Boundary::new(&crate::config::Boundaries::default(), &f.namespace, own)?
        .with_lease_namespaces(settings.lease_namespaces());
    for h in f.hooks.of(phase) {
        let mut obj = h.manifest.clone();
        let av = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind_name = obj["kind"].as_str().unwrap_or_default().to_string();
        let kind = cluster.kind(&av, &kind_name).await.map_err(|e| format!("{kind_name}: {e}"))?;
        if kind.namespaced && obj.pointer("/metadata/namespace").is_none() {
            obj["metadata"]["namespace"] = Value::from(f.namespace.clone());
        }
        let key = ObjectKey::of(&obj).ok_or_else(|| format!("{kind_name} hook without a name"))?;
        boundary.check(&key, kind.namespaced, &obj).map_err(|why| format!("hook {key} refused: {why}"))?;
        if let Some(live) = cluster.get(&kind, &key).await.map_err(|e| format!("{key}: {e}"))?
            && crate::plan::hooks::hook_of(&live) != Some(f.app())
        {
            return Err(format!(
                "{key} exists and is not a hook of application {} (label {}): it is left alone",
                f.app(),
                crate::plan::hooks::HOOK_OF_LABEL
            ));
        }
        match obj.pointer_mut("/metadata/labels") {
            Some(Value::Object(labels)) => {
                labels.insert(crate::plan::hooks::HOOK_OF_LABEL.into(), Value::from(f.app()));
            }
            Some(_) => return Err(format!("{key}: metadata.labels is not a map")),
            None => obj["metadata"]["labels"] = serde_json::json!({crate::plan::hooks::HOOK_OF_LABEL: f.app()}),
        }
        cluster.apply(&kind, &key, &obj, false).await.map_err(|e| format!("{key}: {e}"))?;
        let deadline = tokio::time::Instant::now() + HOOK_TIMEOUT;
        loop {
            let live = cluster.get(&kind, &key).await.map_err(|e| format!("{key}: {e}"))?;
            let Some(live) = live else { return Err(format!("{key}: gone before it completed")) };
            match crate::plan::hooks::state_of(&live, jiff::Timestamp::now()) {
                HookState::Succeeded(_) => break,
                HookState::Failed(_, why) => return Err(format!("{key}: {why}")),
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(format!("{key}: not complete after {}s", HOOK_TIMEOUT.as_secs()));
                }
                _ => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_names_what_is_deleted_waited_for_held_and_left() {
        let plan = DeletePlan {
            now: vec![0],
            terminating: vec!["ConfigMap/ns/a (finalizers: f)".into()],
            held: vec!["PersistentVolumeClaim/ns/data".into()],
            claimed: vec!["ConfigMap/ns/shared".into()],
            kept: vec![],
        };
        let m = progress("web", &plan, &["Deployment.apps/ns/web".into()], true);
        assert_eq!(
            m,
            "web left the policy (deletionPolicy wait); deleting 1: Deployment.apps/ns/web; waiting for 1 to go: ConfigMap/ns/a (finalizers: f); held for approval: PersistentVolumeClaim/ns/data; left (a live application claims them): ConfigMap/ns/shared"
        );
        let many: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
        assert!(names(&many).ends_with("c9 … and 2 more"));
    }
}
