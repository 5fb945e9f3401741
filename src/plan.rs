//! Plan: from the comparison of one pass and the sync policy, decide what to apply, what
//! to prune, what to skip and why — or refuse the sync. Pure.
//!
//! Guards (all on by default):
//! - `allowEmpty: false` refuses a sync whose render produced zero objects (one commit
//!   pointing the path at an empty folder must not delete everything);
//! - prune only when `prune` is on, only objects this application owns (see
//!   [`crate::tracking`]), never those annotated `Prune=false`;
//! - the caller runs prune only when the render succeeded and every apply succeeded.
//!
//! Order: Namespaces, CRDs, ServiceAccounts and RBAC, ConfigMaps and Secrets, PVCs,
//! Services, workloads, then everything else; prune in the reverse order.

use serde::Serialize;

use crate::{config::SyncPolicy, tracking::ObjectKey};

/// Sync options (app-wide from the policy, per object from `plumb.dev/sync-options`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// `Prune=false`: never delete this object.
    pub prune_disabled: bool,
    /// `Prune=confirm`: delete only with an explicit approval (`plumb sync APP --approve`).
    pub prune_confirm: bool,
    /// `CreateNamespace=true`: create the destination namespace when missing.
    pub create_namespace: bool,
    /// `FailOnSharedResource=true`: refuse to sync when an object is tracked by another
    /// application, instead of taking it over.
    pub fail_on_shared: bool,
}

impl SyncOptions {
    /// Names plumb knows (others are rejected when the policy is validated).
    pub const KNOWN: &'static [&'static str] =
        &["Prune", "CreateNamespace", "PruneLast", "ApplyOutOfSyncOnly", "FailOnSharedResource"];

    /// Checks one `Name=value` option.
    ///
    /// # Errors
    /// A message naming the option when the shape or the name is wrong.
    pub fn parse_one(opt: &str) -> Result<(&str, &str), String> {
        let (name, value) = opt.split_once('=').ok_or_else(|| format!("sync option `{opt}` must be Name=value"))?;
        let (name, value) = (name.trim(), value.trim());
        if !Self::KNOWN.contains(&name) {
            return Err(format!("unknown sync option `{name}` (known: {})", Self::KNOWN.join(", ")));
        }
        Ok((name, value))
    }

    /// Parses a list of options; unknown or malformed entries are ignored here (policy
    /// files are validated at load; object annotations are best effort).
    pub fn parse<'a>(opts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = Self::default();
        for opt in opts {
            match Self::parse_one(opt) {
                Ok(("Prune", v)) => {
                    out.prune_disabled = v.eq_ignore_ascii_case("false");
                    out.prune_confirm = v.eq_ignore_ascii_case("confirm");
                }
                Ok(("CreateNamespace", v)) => out.create_namespace = v.eq_ignore_ascii_case("true"),
                Ok(("FailOnSharedResource", v)) => out.fail_on_shared = v.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        out
    }

    /// Whether an object carries `plumb.dev/compare-options: IgnoreExtraneous`: when Git
    /// no longer declares it, it still "requires pruning" but does not make the
    /// application OutOfSync.
    pub fn ignores_extraneous(obj: &serde_json::Value) -> bool {
        obj.pointer("/metadata/annotations")
            .and_then(|a| a.get("plumb.dev/compare-options"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| s.split(',').any(|o| o.trim() == "IgnoreExtraneous"))
    }

    /// Options of an object's `plumb.dev/sync-options` annotation (comma list).
    pub fn of_object(obj: &serde_json::Value) -> Self {
        let text = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(crate::tracking::SYNC_OPTIONS_ANNOTATION))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        Self::parse(text.split(',').map(str::trim).filter(|s| !s.is_empty()))
    }
}

/// The data-loss class of a kind, if deleting it can lose data that Git cannot bring
/// back: PersistentVolumeClaims (volumes), Namespaces (everything inside) and
/// CustomResourceDefinitions (every custom resource of that type). Objects of these
/// classes are pruned only with an approval, as if annotated `Prune=confirm`.
pub fn data_loss_class(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "PersistentVolumeClaim") => Some("PersistentVolumeClaim (its volume's data)"),
        ("", "Namespace") => Some("Namespace (every object inside it)"),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            Some("CustomResourceDefinition (every resource of that type)")
        }
        _ => None,
    }
}

/// Whether an object carries `plumb.dev/compare-options: IgnoreExtraneous`: when Git
/// no longer declares it, it still "requires pruning" but does not make the
/// application OutOfSync.
pub fn ignores_extraneous(obj: &serde_json::Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get("plumb.dev/compare-options"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|s| s.split(',').any(|o| o.trim() == "IgnoreExtraneous"))
}

/// Apply order rank of a kind (lower first).
pub fn kind_rank(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        ("", "ServiceAccount") => 2,
        ("rbac.authorization.k8s.io", _) => 3,
        ("", "ConfigMap" | "Secret") => 4,
        ("", "PersistentVolumeClaim") => 5,
        ("", "Service") => 6,
        ("apps", _) | ("batch", _) | ("", "Pod" | "ReplicationController") => 7,
        _ => 8,
    }
}

/// State of one desired object after comparison.
#[derive(Debug, Clone)]
pub struct DesiredItem {
    /// The object.
    pub key: ObjectKey,
    /// Whether it differs from live (missing counts as differing).
    pub out_of_sync: bool,
}

/// A live object owned by the application that Git no longer declares.
#[derive(Debug, Clone)]
pub struct PruneCandidate {
    /// The object.
    pub key: ObjectKey,
    /// Its UID (deletes carry it as a precondition).
    pub uid: String,
    /// Its own sync options.
    pub options: SyncOptions,
}

/// Why a sync is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncReason {
    /// Automated sync: the revision changed since the last sync.
    NewRevision,
    /// Automated sync with selfHeal: live drifted at the same revision.
    SelfHeal,
    /// `plumb sync`: a person asked for it, whatever the policy.
    Manual,
}

/// What one sync will do.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    /// Indexes into the desired list, in apply order.
    #[serde(skip)]
    pub apply: Vec<usize>,
    /// Objects to delete, in prune order.
    #[serde(skip)]
    pub prune: Vec<PruneCandidate>,
    /// Objects left alone, with the reason (`prune skipped: Prune=false`, …).
    pub skipped: Vec<(String, String)>,
    /// Set when the whole sync is refused; nothing is applied or pruned.
    pub refused: Option<String>,
}

/// Whether a pass should sync, and why.
///
/// `out_of_sync` is the application's roll-up; `revision_changed` compares the
/// fetched revision with the last one synced. Automated sync without selfHeal syncs
/// only a new revision (Argo CD's rule), so a hand change stays until the next commit.
pub fn sync_reason(policy: &SyncPolicy, out_of_sync: bool, revision_changed: bool, manual: bool) -> Option<SyncReason> {
    if manual {
        return Some(SyncReason::Manual);
    }
    if !policy.automated || !out_of_sync {
        return None;
    }
    if revision_changed {
        Some(SyncReason::NewRevision)
    } else if policy.self_heal {
        Some(SyncReason::SelfHeal)
    } else {
        None
    }
}

/// Plans a sync of `desired` (render output, compared) against the application's
/// `orphans` (owned live objects not in `desired`).
///
/// `prune` is the policy's switch (or the manual `--prune`); `allow_empty` the guard's;
/// `approved` lets objects marked `Prune=confirm`, and the data-loss classes of
/// [`data_loss_class`], be deleted.
pub fn plan(
    desired: &[DesiredItem],
    orphans: &[PruneCandidate],
    prune: bool,
    allow_empty: bool,
    approved: bool,
) -> Plan {
    let mut p = Plan::default();
    if desired.is_empty() && !allow_empty {
        p.refused = Some(format!(
            "refusing to sync: the render produced no objects and allowEmpty is false; {} tracked object(s) would be pruned",
            orphans.len()
        ));
        return p;
    }
    let mut apply: Vec<usize> = (0..desired.len()).filter(|&i| desired[i].out_of_sync).collect();
    apply.sort_by_key(|&i| (kind_rank(&desired[i].key.group, &desired[i].key.kind), i));
    p.apply = apply;
    for o in orphans {
        if !prune {
            p.skipped.push((o.key.to_string(), "requires pruning (prune is off)".into()));
        } else if o.options.prune_disabled {
            p.skipped.push((o.key.to_string(), "prune skipped: Prune=false".into()));
        } else if !approved && (o.options.prune_confirm || data_loss_class(&o.key.group, &o.key.kind).is_some()) {
            let why = data_loss_class(&o.key.group, &o.key.kind)
                .map_or_else(|| "Prune=confirm".to_string(), |c| format!("data-loss class {c}"));
            p.skipped.push((
                o.key.to_string(),
                format!("prune needs approval ({why}): plumb sync APP --prune true --approve"),
            ));
        } else {
            p.prune.push(o.clone());
        }
    }
    p.prune.sort_by_key(|o| std::cmp::Reverse(kind_rank(&o.key.group, &o.key.kind)));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey { group: group.into(), kind: kind.into(), namespace: "lab".into(), name: name.into() }
    }
    fn item(group: &str, kind: &str, out: bool) -> DesiredItem {
        DesiredItem { key: key(group, kind, "x"), out_of_sync: out }
    }
    fn orphan(kind: &str, prune_disabled: bool) -> PruneCandidate {
        PruneCandidate {
            key: key("", kind, "old"),
            uid: "u".into(),
            options: SyncOptions { prune_disabled, ..Default::default() },
        }
    }

    #[test]
    fn namespaces_first_only_out_of_sync_applied() {
        let d = [
            item("apps", "Deployment", true),
            item("", "ConfigMap", false),
            item("", "Namespace", true),
            item("", "Service", true),
        ];
        let p = plan(&d, &[], true, false, false);
        assert_eq!(p.apply, [2, 3, 0]);
        assert!(p.refused.is_none());
    }

    #[test]
    fn empty_render_is_refused_unless_allowed() {
        let orphans = [orphan("ConfigMap", false)];
        let p = plan(&[], &orphans, true, false, false);
        assert!(p.refused.as_deref().is_some_and(|r| r.contains("allowEmpty")));
        assert!(p.prune.is_empty() && p.apply.is_empty());
        let p = plan(&[], &orphans, true, true, false);
        assert!(p.refused.is_none());
        assert_eq!(p.prune.len(), 1);
    }

    #[test]
    fn prune_switch_and_prune_false() {
        let orphans = [orphan("ConfigMap", false), orphan("PersistentVolumeClaim", true), orphan("Namespace", false)];
        let d = [item("", "ConfigMap", false)];
        let off = plan(&d, &orphans, false, false, false);
        assert!(off.prune.is_empty());
        assert_eq!(off.skipped.len(), 3);
        let on = plan(&d, &orphans, true, false, false);
        assert_eq!(on.prune.iter().map(|o| o.key.kind.as_str()).collect::<Vec<_>>(), ["ConfigMap"]);
        assert_eq!(
            on.skipped[0],
            ("PersistentVolumeClaim/lab/old".to_string(), "prune skipped: Prune=false".to_string())
        );
        assert!(
            on.skipped[1].0 == "Namespace/lab/old" && on.skipped[1].1.contains("data-loss class Namespace"),
            "{:?}",
            on.skipped
        );
        let approved = plan(&d, &orphans, true, false, true);
        assert_eq!(
            approved.prune.iter().map(|o| o.key.kind.as_str()).collect::<Vec<_>>(),
            ["ConfigMap", "Namespace"],
            "Prune=false still wins"
        );
        let mut confirm = orphan("ConfigMap", false);
        confirm.options.prune_confirm = true;
        assert!(plan(&d, std::slice::from_ref(&confirm), true, false, false).prune.is_empty());
        assert_eq!(plan(&d, &[confirm], true, false, true).prune.len(), 1);
    }

    #[test]
    fn when_to_sync() {
        let auto = SyncPolicy { automated: true, ..Default::default() };
        let heal = SyncPolicy { automated: true, self_heal: true, ..Default::default() };
        let manual = SyncPolicy::default();
        assert_eq!(sync_reason(&auto, true, true, false), Some(SyncReason::NewRevision));
        assert_eq!(sync_reason(&auto, true, false, false), None);
        assert_eq!(sync_reason(&heal, true, false, false), Some(SyncReason::SelfHeal));
        assert_eq!(sync_reason(&heal, false, true, false), None);
        assert_eq!(sync_reason(&manual, true, true, false), None);
        assert_eq!(sync_reason(&manual, false, false, true), Some(SyncReason::Manual));
    }

    #[test]
    fn ignore_extraneous_annotation() {
        let with = serde_json::json!({"metadata": {"annotations": {"plumb.dev/compare-options": "IgnoreHealthCheck, IgnoreExtraneous"}}});
        assert!(ignores_extraneous(&with));
        assert!(!ignores_extraneous(&serde_json::json!({"metadata": {}})));
    }

    #[test]
    fn options_parse() {
        assert!(SyncOptions::parse(["Prune=false"]).prune_disabled);
        assert!(SyncOptions::parse(["Prune=confirm"]).prune_confirm);
        assert!(SyncOptions::parse(["CreateNamespace=true"]).create_namespace);
        assert!(SyncOptions::parse_one("Bogus=1").is_err());
        assert!(SyncOptions::parse_one("Prune").is_err());
        let obj =
            serde_json::json!({"metadata": {"annotations": {"plumb.dev/sync-options": "PruneLast=true, Prune=false"}}});
        assert!(SyncOptions::of_object(&obj).prune_disabled);
    }
}
