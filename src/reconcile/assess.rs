//! Stage 4 of a pass: health of every object, the application's status (resources,
//! roll-up, conditions) and the per-object comparisons `plumb diff` shows.

use std::{
    collections::BTreeSet,
    hash::{Hash, Hasher},
    sync::Arc,
};

use serde_json::Value;

use super::{Context, Found, inventory::Children};
use crate::{
    compare::{Compared, ObjectDiff, ObjectReason, SyncStatus, object},
    config::{Application, Environment},
    health::{self, Health, HealthStatus, ProgressingSince},
    plan,
    status::{self, AppStatus, Condition, ConditionType, Exclusions, ResourceStatus},
    tracking,
};

impl Context {
    /// Health of every object and the application's status: resources, roll-up,
    /// conditions (shared objects, comparison errors, stalls, orphaned resources).
    /// Returns what the roll-up leaves out, for the roll-up after a sync.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn assess(
        &self,
        st: &mut AppStatus,
        app: &Application,
        env: &Environment,
        found: &Found,
        the_plan: &plan::Plan,
        kinds: &BTreeSet<(String, String)>,
        progressing: &mut ProgressingSince,
    ) -> Exclusions {
        let settings = health::HealthSettings::from_policy(&env.health);
        let overrides = health::overrides_for(app, env);
        let now = jiff::Timestamp::now();
        let mut excluded = Exclusions { extraneous: found.candidates.extraneous.clone(), ..Exclusions::default() };
        // Jobs that finished: what this render still declares, with the same manifest
        let mut finished = Vec::new();
        let mut children = Children::default();
        if let Some(live) = &self.live {
            // children watches of namespaces whose workloads are gone stop here
            live.tidy();
        }
        for c in &found.compared {
            if c.live
                .as_ref()
                .is_some_and(|l| health::ignores_health_check_by(l.annotation(health::COMPARE_OPTIONS_ANNOTATION)))
            {
                excluded.no_health_check.insert(c.key.to_string());
            }
            let h = match (&c.reason, c.sync()) {
                (ObjectReason::Finished(f), _) => object::finished_health(f),
                (_, SyncStatus::Unknown) => Health { status: HealthStatus::Unknown, message: String::new() },
                _ => self.health_of(c, &st.app, &mut children, (&settings, &overrides), now).await,
            };
            let remembered = object::ran_before(&c.key, c.finished_digest.as_deref(), &st.finished);
            match &c.reason {
                ObjectReason::Finished(f) => finished.push(f.clone()),
                _ => finished.extend(object::finished(c, &h).or_else(|| remembered.cloned())),
            }
            st.resources.push(ResourceStatus {
                object: c.key.to_string(),
                sync: c.sync(),
                reason: c.reason.to_string(),
                health: h.status,
                health_message: h.message,
            });
        }
        st.finished = finished;
        let reasons = plan::prune_reasons(the_plan);
        for (o, _) in &found.candidates.orphans {
            let object = o.key.to_string();
            st.resources.push(ResourceStatus {
                reason: reasons.get(&object).cloned().unwrap_or_else(|| "requires pruning".into()),
                sync: SyncStatus::OutOfSync,
                health: HealthStatus::Healthy,
                health_message: String::new(),
                object: object.clone(),
            });
            excluded.prune_candidates.insert(object);
        }
        for c in &found.compared {
            if let Some(other) = c
                .live
                .as_ref()
                .and_then(|l| tracking::tracked_app_by(l.annotation(tracking::TRACKING_ANNOTATION)?))
                .filter(|a| *a != st.app)
            {
                st.conditions.push(Condition::new(
                    ConditionType::SharedResourceWarning,
                    format!("{} is also tracked by application {other}; both declare it", c.key),
                ));
            }
        }
        let stuck = plan::stuck_deletions(found.candidates.orphans.iter().map(|(o, _)| o), now, settings.stall_after);
        if !stuck.is_empty() {
            st.conditions.push(Condition::new(
                ConditionType::PruneStuck,
                format!(
                    "deleted but still present after {} s, held by finalizers that their controllers did not remove: {}",
                    settings.stall_after.as_secs(),
                    stuck.join("; ")
                ),
            ));
        }
        if let Some(cache) = &self.live {
            let failing: Vec<String> =
                kinds.iter().filter_map(|(_, k)| cache.error(k).map(|e| format!("{k}: {e}"))).collect();
            if !failing.is_empty() {
                st.conditions.push(Condition::new(
                    ConditionType::WatchError,
                    format!(
                        "watches failing (live objects are read with GET and LIST meanwhile): {}",
                        failing.join("; ")
                    ),
                ));
            }
        }
        if !found.errors.is_empty() {
            st.conditions.push(Condition::new(ConditionType::ComparisonError, found.errors.join("; ")));
        }
        (st.sync, st.health) = status::roll_up(&st.resources, &excluded, !found.errors.is_empty());
        // Objects Progressing for too long: a warning, health stays Progressing.
        let statuses = found.compared.iter().zip(&st.resources).map(|(c, r)| (&c.key, r.health));
        *progressing = health::track_progressing(progressing, statuses, now);
        if let Some(stall) = health::stalled(progressing, now, settings.stall_after) {
            st.conditions.push(Condition::new(ConditionType::HealthStalled, stall.message));
        }
        if st.sync == SyncStatus::Synced {
            st.synced_revision = st.revision.clone();
        }
        if env.orphaned_resources.warn {
            self.warn_orphaned(st, env, &found.compared, &app.namespace.value, kinds).await;
        }
        excluded
    }

    /// The health of compared object `c` of application `app`, from its live object
    /// and its children (read through `children`); remembered while neither changed,
    /// when the assessment did not read the clock.
    async fn health_of(
        &self,
        c: &Compared,
        app: &str,
        children: &mut Children,
        (settings, overrides): (&health::HealthSettings, &[&health::HealthOverride]),
        now: jiff::Timestamp,
    ) -> Health {
        let owned = self.children(c, children).await;
        // a Pending claim's health depends on its StorageClass's binding mode (read, not
        // watched: never remembered)
        let claim = c.key.group.is_empty() && c.key.kind == "PersistentVolumeClaim";
        // (read past the metadata only for a claim: `Live` converts the object on first use)
        let pending = claim && c.live.as_deref().is_some_and(is_pending_claim);
        let class = match &c.live {
            Some(l) if pending => self.cluster.storage_class_of(l).await,
            _ => None,
        };
        let version = c.live.as_ref().and_then(|l| l.resource_version());
        let inputs = version.filter(|_| !pending).map(|rv| {
            let mut h = std::hash::DefaultHasher::new();
            (app, rv).hash(&mut h);
            owned.hash_versions(&mut h);
            h.finish()
        });
        if let Some(h) = inputs.and_then(|i| self.memo.health(&c.key, i)) {
            return h;
        }
        let (pods, replica_sets) = owned.values();
        let (pod_refs, rs_refs): (Vec<&Value>, Vec<&Value>) = (pods.iter().collect(), replica_sets.iter().collect());
        let read = std::cell::Cell::new(false);
        let h = health::assess_with(
            &health::HealthInput::new(c.live.as_deref(), now, settings)
                .children(&pod_refs, &rs_refs)
                .overrides(overrides)
                .storage_class(class.as_ref())
                .noting_clock(&read),
        );
        if let Some(i) = inputs
            && !read.get()
        {
            self.memo.remember_health(&c.key, i, h.clone());
        }
        h
    }

    /// `orphanedResources.warn`: the condition and `status.orphaned`.
    async fn warn_orphaned(
        &self,
        st: &mut AppStatus,
        env: &Environment,
        compared: &[Arc<Compared>],
        namespace: &str,
        kinds: &BTreeSet<(String, String)>,
    ) {
        let mut namespaces: BTreeSet<String> =
            compared.iter().map(|c| c.key.namespace.clone()).filter(|n| !n.is_empty()).collect();
        namespaces.insert(namespace.to_string());
        match self.orphaned_resources(env, &namespaces, kinds).await {
            Ok(found) if !found.is_empty() => {
                let shown: Vec<&str> = found.iter().take(10).map(String::as_str).collect();
                let more = found.len().saturating_sub(shown.len());
                st.conditions.push(Condition::new(
                    ConditionType::OrphanedResourceWarning,
                    format!(
                        "{} object(s) in the application's namespaces are tracked by no application (never deleted): {}{}",
                        found.len(),
                        shown.join(", "),
                        if more > 0 { format!(" and {more} more") } else { String::new() }
                    ),
                ));
                st.orphaned = found;
            }
            Ok(_) => {}
            Err(e) => st.conditions.push(Condition::new(
                ConditionType::OrphanedResourceWarning,
                format!("orphaned resources could not be listed: {e}"),
            )),
        }
    }
}

/// Whether `obj` is a PersistentVolumeClaim in phase Pending.
fn is_pending_claim(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && obj.pointer("/status/phase").and_then(Value::as_str) == Some("Pending")
}

/// The prune candidates' rows of `plumb diff` ([`super::PassReport::diffs`]), with the
/// reason the status gives them.
pub(super) fn candidate_diffs(found: &Found, st: &AppStatus) -> Vec<ObjectDiff> {
    let n = found.compared.len();
    st.resources[n..]
        .iter()
        .map(|r| ObjectDiff {
            object: r.object.clone(),
            desired: Value::Null,
            live: None,
            differences: vec![],
            reason: r.reason.clone(),
            verdict: None,
        })
        .collect()
}
