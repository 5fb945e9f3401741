//! The comparisons of a pass in which nothing changed: the compare stage reads only the
//! render, the watch cache, the status it starts from (remembered kinds, finished Jobs)
//! and what the process remembers, and keys its per-object memory by content. When the
//! render is the very same, no watch of a kind it read delivered an event (nor
//! relisted, nor failed) since the previous pass started, and that pass found every
//! object in sync with a live object from the cache and nothing to prune, comparing
//! again would give the same answers: the pass takes them as they were, and still
//! assesses health, decides and records as every pass does.
//!
//! Anything else compares again: a new commit or render, a hand edit or deletion (an
//! event of its kind), a request on the application's resource (sync, refresh, pause,
//! rollback), a mode other than the policy's own pass, objects out of sync, missing,
//! refused or failing, prune candidates, a kind not watched or not listed yet. A
//! policy reload builds a new context, which remembers nothing.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use serde_json::Value;

use crate::{
    compare::{Compared, ObjectReason, SyncStatus},
    plan::DesiredItem,
    render::Rendered,
    status::{AppStatus, Finished, store::Controls},
    tracking::APP_LABEL,
};

/// A (group, kind).
type GroupKind = (String, String);

/// What one pass compared, and everything it compared from.
pub(super) struct Compares {
    /// The render compared (the very same one: a cached render is shared, a new render
    /// is a new one even with equal content).
    render: Arc<Rendered>,
    /// The remembered kinds of the status the pass started from.
    kinds_before: Vec<(String, String)>,
    /// The finished Jobs of the status the pass started from.
    finished: Vec<Finished>,
    /// The requests on the application's resource as the pass read them.
    controls: Controls,
    /// The event count of each kind the pass read, from before it compared.
    epochs: Vec<(GroupKind, u64)>,
    /// What it found of each object, every one in sync, index for index with `items`
    /// (which hold its key and wave): no copy of the object (the render holds the
    /// manifest and the watch cache the live object, see [`Compares::revive`]).
    compared: Vec<Kept>,
    /// The plan's view of them.
    pub items: Arc<Vec<DesiredItem>>,
    /// The remembered kinds after comparing.
    pub kinds_after: BTreeSet<(String, String)>,
}

/// What [`Compares`] keeps of the comparison of an object in sync, besides its key and
/// wave (its [`DesiredItem`]'s): about 90 bytes, where the whole comparison takes 500.
struct Kept {
    kind: crate::cluster::Kind,
    source: Box<str>,
    options: crate::plan::SyncOptions,
    finished_digest: Option<Box<str>>,
    marked: crate::compare::sensitive::Marked,
    mask_key: crate::compare::sensitive::MaskKey,
}

/// What a pass read, to decide whether its comparisons may serve the next pass.
pub(super) struct Read<'a> {
    /// The render compared.
    pub render: &'a Arc<Rendered>,
    /// The status the pass started from.
    pub previous: &'a AppStatus,
    /// The requests as read.
    pub controls: &'a Controls,
}

impl Compares {
    /// What `read` compared, to keep for the next pass, when it may serve one: every
    /// object in sync with a live object that the labelled watches hold (any change
    /// to it is an event of its kind), no comparison error, no prune candidate, and
    /// every kind read watched and listed. `before` holds the event counts from before
    /// the comparison ([`crate::watch::LiveCache::epochs`]); `listed` tells whether a
    /// kind's watches have all listed.
    pub fn keep(
        read: &Read<'_>,
        before: &HashMap<GroupKind, u64>,
        listed: impl Fn(&str, &str) -> bool,
        compared: &[Arc<Compared>],
        items: Arc<Vec<DesiredItem>>,
        kinds_after: &BTreeSet<(String, String)>,
    ) -> Option<Self> {
        if items.len() != compared.len() {
            return None;
        }
        let mut kinds: BTreeSet<GroupKind> = BTreeSet::new();
        let mut kept = Vec::with_capacity(compared.len());
        for c in compared {
            let labelled = c.live.as_ref().and_then(|l| l.label(APP_LABEL));
            let in_sync = c.reason == ObjectReason::Synced && c.sync() == SyncStatus::Synced;
            // in sync with nothing to take over or write whole (ApplyOutOfSyncOnly=false):
            // a pass that reuses it sends nothing, so it needs no `apply`
            if !(in_sync && c.differences.is_empty() && c.takeover.is_none() && labelled.is_some()) {
                return None;
            }
            let kind = c.kind.as_ref()?;
            kinds.insert((kind.resource.group.clone(), kind.resource.kind.clone()));
            kept.push(Kept {
                kind: kind.clone(),
                source: c.source.as_str().into(),
                options: c.options.clone(),
                finished_digest: c.finished_digest.as_deref().map(Into::into),
                marked: c.marked.clone(),
                mask_key: c.mask_key.clone(),
            });
        }
        for (api_version, kind) in kinds_after {
            let group = crate::tracking::group_of(api_version);
            kinds.insert((group.to_string(), kind.clone()));
        }
        let mut epochs = Vec::with_capacity(kinds.len());
        for (group, kind) in kinds {
            if !listed(&group, &kind) {
                return None;
            }
            let count = *before.get(&(group.clone(), kind.clone()))?;
            epochs.push(((group, kind), count));
        }
        Some(Self {
            render: read.render.clone(),
            kinds_before: read.previous.kinds.clone(),
            finished: read.previous.finished.clone(),
            controls: read.controls.clone(),
            epochs,
            compared: kept,
            items,
            kinds_after: kinds_after.clone(),
        })
    }

    /// The comparisons kept, each with the live object `live` gives for its kind and
    /// key (the watch cache's, at the version compared: no event of its kind came
    /// since); `None` when it gives none for one of them.
    pub fn revive(
        &self,
        live: impl Fn(&crate::cluster::Kind, &crate::tracking::ObjectKey) -> Option<crate::compare::Live>,
    ) -> Option<Vec<Arc<Compared>>> {
        let revived = self.compared.iter().zip(self.items.iter()).map(|(k, item)| {
            let live = live(&k.kind, &item.key)?;
            Some(Arc::new(Compared {
                key: item.key.clone(),
                kind: Some(k.kind.clone()),
                apply: Value::Null,
                live: Some(live),
                reason: ObjectReason::Synced,
                desired: Value::Null,
                live_compared: None,
                differences: vec![],
                takeover: None,
                source: k.source.to_string(),
                wave: item.wave,
                options: k.options.clone(),
                finished_digest: k.finished_digest.as_deref().map(str::to_string),
                marked: k.marked.clone(),
                mask_key: k.mask_key.clone(),
            }))
        });
        revived.collect()
    }

    /// What changed since these comparisons, if anything: `None` when they are what
    /// comparing `read` now would give (the same render, status and requests, and no
    /// event of any kind read since; `epoch`: the count of a kind's events now, `None`
    /// when its watches are not all listed).
    pub fn changed(&self, read: &Read<'_>, epoch: impl Fn(&str, &str) -> Option<u64>) -> Option<String> {
        if !Arc::ptr_eq(&self.render, read.render) {
            return Some("another render".into());
        }
        if self.kinds_before != read.previous.kinds || self.finished != read.previous.finished {
            return Some("another status".into());
        }
        if self.controls != *read.controls {
            return Some("a request on the application's resource".into());
        }
        let moved = self.epochs.iter().find(|((group, kind), count)| epoch(group, kind) != Some(*count));
        moved.map(|((group, kind), _)| format!("events of {kind}{}{group}", if group.is_empty() { "" } else { "." }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kube::discovery::ApiResource;
    use serde_json::json;

    use super::*;
    use crate::{cluster::Kind, render::Manifest, tracking::ObjectKey};

    fn config_map(name: &str, labelled: bool, reason: ObjectReason) -> Arc<Compared> {
        let labels = if labelled { json!({APP_LABEL: "web"}) } else { json!({}) };
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "lab", "labels": labels, "resourceVersion": "7"}});
        let key =
            ObjectKey { group: String::new(), kind: "ConfigMap".into(), namespace: "lab".into(), name: name.into() };
        let kind = Kind {
            resource: Arc::new(ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
            }),
            namespaced: true,
        };
        let mut c = Compared::early(key, live.clone(), Some(kind), reason, "cm.yaml#1");
        (c.live, c.desired) = (Some(live.into()), serde_json::Value::Null);
        Arc::new(c)
    }

    fn render() -> Arc<Rendered> {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        Arc::new(Rendered { manifests: vec![Manifest::new("cm.yaml#1".into(), &object)], ..Rendered::default() })
    }

    fn counts(n: u64) -> HashMap<GroupKind, u64> {
        HashMap::from([((String::new(), "ConfigMap".to_string()), n)])
    }

    /// The plan's view of `compared` (index for index).
    fn items(compared: &[Arc<Compared>]) -> Arc<Vec<DesiredItem>> {
        let item = |c: &Arc<Compared>| DesiredItem {
            key: c.key.clone(),
            out_of_sync: false,
            tracked: true,
            error: false,
            immutable: false,
            wave: c.wave,
            options: c.options.clone(),
            refused: None,
            owned_by: None,
        };
        Arc::new(compared.iter().map(item).collect())
    }

    fn kept(render: &Arc<Rendered>, previous: &AppStatus, compared: &[Arc<Compared>]) -> Option<Compares> {
        let read = Read { render, previous, controls: &Controls::default() };
        Compares::keep(&read, &counts(3), |_, _| true, compared, items(compared), &BTreeSet::new())
    }

    #[test]
    fn only_a_pass_with_everything_in_sync_from_the_watches_is_kept() {
        let (r, previous) = (render(), AppStatus::default());
        let synced = config_map("a", true, ObjectReason::Synced);
        assert!(kept(&r, &previous, std::slice::from_ref(&synced)).is_some());
        let unlabelled = config_map("b", false, ObjectReason::Synced);
        assert!(kept(&r, &previous, &[synced.clone(), unlabelled]).is_none(), "read with a GET, not watched");
        let missing = config_map("c", true, ObjectReason::Missing);
        assert!(kept(&r, &previous, &[synced.clone(), missing]).is_none());
        let mut takeover = (*config_map("d", true, ObjectReason::Synced)).clone();
        takeover.takeover = Some(json!([]));
        assert!(kept(&r, &previous, &[synced.clone(), Arc::new(takeover)]).is_none(), "fields to take over");
        // kept without the object: revived with the live object the cache gives for its
        // kind and key, and everything else as compared
        let mut waved = (*config_map("e", true, ObjectReason::Synced)).clone();
        (waved.wave, waved.options.prune_last, waved.finished_digest) = (3, true, Some("d1".into()));
        waved.marked = crate::compare::sensitive::Marked(vec!["/data/password".into()]);
        let both = [synced.clone(), Arc::new(waved.clone())];
        let shells = kept(&r, &previous, &both).unwrap();
        let revived = shells.revive(|kind, key| Some(json!({"revived": kind.resource.kind, "name": key.name}).into()));
        let revived = revived.unwrap();
        assert_eq!(revived[0].live.as_deref(), Some(&json!({"revived": "ConfigMap", "name": "a"})));
        assert_eq!((revived[0].key.clone(), revived[0].reason.clone()), (synced.key.clone(), ObjectReason::Synced));
        let e = &revived[1];
        assert_eq!(
            (&e.key, e.wave, &e.options, &e.finished_digest),
            (&waved.key, 3, &waved.options, &waved.finished_digest)
        );
        assert_eq!(
            (&e.source, &e.marked.0, e.kind.as_ref().map(|k| k.namespaced)),
            (&waved.source, &waved.marked.0, Some(true))
        );
        assert!(revived.iter().all(|c| c.apply.is_null() && c.desired.is_null() && c.differences.is_empty()));
        assert!(shells.revive(|_, _| None).is_none(), "an object the cache no longer holds");
        let read = Read { render: &r, previous: &previous, controls: &Controls::default() };
        let c = std::slice::from_ref(&synced);
        let unlisted = Compares::keep(&read, &counts(3), |_, _| false, c, items(c), &BTreeSet::new());
        assert!(unlisted.is_none(), "a kind whose watch has not listed");
        let uncounted = Compares::keep(&read, &HashMap::new(), |_, _| true, c, items(c), &BTreeSet::new());
        assert!(uncounted.is_none(), "a kind with no count from before the comparison");
        let prune_kind = BTreeSet::from([("apps/v1".to_string(), "Deployment".to_string())]);
        let other = Compares::keep(&read, &counts(3), |_, _| true, c, items(c), &prune_kind);
        assert!(other.is_none(), "a remembered kind (prune candidates) without a count");
        let unaligned = Compares::keep(&read, &counts(3), |_, _| true, c, Arc::default(), &BTreeSet::new());
        assert!(unaligned.is_none(), "items that are not the plan's view of the comparisons");
    }

    #[test]
    fn any_change_of_what_a_pass_read_compares_again() {
        let (r, previous) = (render(), AppStatus::default());
        let kept = kept(&r, &previous, &[config_map("a", true, ObjectReason::Synced)]).unwrap();
        let (controls, same_content) = (Controls::default(), render());
        let read = |render, previous, controls| Read { render, previous, controls };
        let three = |_: &str, _: &str| Some(3);
        assert_eq!(kept.changed(&read(&r, &previous, &controls), three), None);
        // an event of the kind (a hand edit, a deletion, a relist), or its watch not listed
        assert!(kept.changed(&read(&r, &previous, &controls), |_, _| Some(4)).is_some());
        assert!(kept.changed(&read(&r, &previous, &controls), |_, _| None).is_some());
        // a new render, even of the same content (a new commit, a render cache eviction)
        assert!(kept.changed(&read(&same_content, &previous, &controls), three).is_some());
        // a request on the application's resource (sync, refresh, pause, rollback)
        let refresh = Controls { refresh: Some("2026-11-30T10:00:00Z".into()), ..Controls::default() };
        assert!(kept.changed(&read(&r, &previous, &refresh), three).is_some());
        // another status to start from
        let kinds = AppStatus { kinds: vec![("v1".into(), "Secret".into())], ..AppStatus::default() };
        assert!(kept.changed(&read(&r, &kinds, &controls), three).is_some());
        let job = Finished {
            object: "Job.batch/lab/migrate".into(),
            manifest: "d1".into(),
            health: crate::health::HealthStatus::Healthy,
            message: "job completed".into(),
        };
        let finished = AppStatus { finished: vec![job], ..AppStatus::default() };
        assert!(kept.changed(&read(&r, &finished, &controls), three).is_some());
    }
}
