//! Stage 4's reads: the health of every compared object (from its live object and its
//! children, a claim's StorageClass), the watches failing, and the objects no
//! application tracks. What they mean for the status is the assessor's
//! ([`super::assess::assessed`]).

use std::{
    collections::BTreeSet,
    hash::{Hash, Hasher},
};

use serde_json::Value;

use super::{Found, Io, assess::Observed, inventory::Children};
use crate::{
    compare::{Compared, ObjectReason, SyncStatus, object},
    config::{Application, Environment},
    health::{self, Health, HealthStatus},
};

impl Io<'_> {
    /// What stage 4 reads for `found` of application `app` at `now`.
    pub(super) async fn observe(
        self,
        (app, env): (&Application, &Environment),
        found: &Found,
        kinds: &BTreeSet<(String, String)>,
        now: jiff::Timestamp,
    ) -> Observed {
        let settings = health::HealthSettings::from_policy(&env.health);
        let overrides = health::overrides_for(app, env);
        let name = app.name.value.as_str();
        let mut children = Children::default();
        if let Some(live) = &self.live {
            // children watches of namespaces whose workloads are gone stop here
            live.tidy();
        }
        let mut health = Vec::with_capacity(found.compared.len());
        for c in &found.compared {
            health.push(match (&c.reason, c.sync()) {
                (ObjectReason::Finished(f), _) => object::finished_health(f),
                (_, SyncStatus::Unknown) => Health { status: HealthStatus::Unknown, message: String::new() },
                _ => self.health_of(c, name, &mut children, (&settings, &overrides), now).await,
            });
        }
        let mut namespaces: BTreeSet<String> =
            found.compared.iter().map(|c| c.key.namespace.clone()).filter(|n| !n.is_empty()).collect();
        namespaces.insert(app.namespace.value.clone());
        let watch_errors = match &self.live {
            Some(cache) => {
                kinds.iter().filter_map(|(_, k)| cache.error_in(k, &namespaces).map(|e| format!("{k}: {e}"))).collect()
            }
            None => vec![],
        };
        let orphaned = if env.orphaned_resources.warn {
            Some(self.orphaned_resources(env, &namespaces, kinds).await.map_err(|e| e.to_string()))
        } else {
            None
        };
        Observed { health, watch_errors, orphaned }
    }

    /// The health of compared object `c` of application `app`, from its live object
    /// and its children (read through `children`); remembered while neither changed,
    /// when the assessment did not read the clock.
    async fn health_of(
        self,
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
}

/// Whether `obj` is a PersistentVolumeClaim in phase Pending.
fn is_pending_claim(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && obj.pointer("/status/phase").and_then(Value::as_str) == Some("Pending")
}
