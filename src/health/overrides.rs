//! Declarative health overrides: per group/kind rules written in the policy, so that a
//! custom resource — or a built-in kind whose controller behaves unusually — is assessed
//! without code. plumb's counterpart of Argo CD's `resource.customizations.health` Lua
//! scripts and Flux's `healthCheckExprs`, restricted to data.
//!
//! Format ([`HealthOverride`], in an environment's `health.overrides` or an
//! application's `healthOverrides`; the first override that applies wins, the
//! application's before the environment's):
//!
//! ```yaml
//! # an ingress controller that admits objects but never publishes an address
//! - group: networking.k8s.io
//!   kind: Ingress
//!   match: {ingressClassName: internal-nginx}   # below spec; "/metadata/labels/x" for a pointer
//!   rule: healthy-when-present
//! # a custom resource with its own conditions, first matching row wins
//! - group: db.example.com
//!   kind: Cluster
//!   conditions:
//!     - {type: Ready, status: "True", health: Healthy}
//!     - {type: Ready, status: "False", reason: BackupFailed, health: Degraded}
//!     - {type: Paused, status: "True", health: Suspended}
//!   otherwise: Progressing                      # omitted: the built-in rules decide
//! ```
//!
//! An override is consulted after the generic lifecycle checks (being deleted, a
//! generation not yet observed — the conditions would describe an older spec) and before
//! everything else, including the `Stalled` / `Reconciling` conditions.

use serde_json::Value;

use super::{Health, HealthOverride, HealthRule, fields};

/// Whether `override_` applies to `obj`: group (omitted = any), kind (`*` = any) and
/// every `match` entry.
pub fn applies(override_: &HealthOverride, obj: &Value) -> bool {
    let group_ok = override_.group.as_deref().is_none_or(|g| g == fields::group(obj));
    let kind = override_.kind.value.as_str();
    group_ok
        && (kind == "*" || kind == fields::kind(obj))
        && override_.match_fields.iter().all(|(k, want)| matches(obj, k, want))
}

/// The pointer a `match` key names: itself when it starts with `/`, else below `/spec/`.
pub fn match_pointer(key: &str) -> String {
    if key.starts_with('/') { key.to_string() } else { format!("/spec/{key}") }
}

fn matches(obj: &Value, key: &str, want: &Value) -> bool {
    let Some(live) = fields::at(obj, &match_pointer(key)) else {
        return false;
    };
    let scalar_text = |v: &Value| match v {
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    live == want
        || match (live, want) {
            (Value::String(s), other) | (other, Value::String(s)) => scalar_text(other).is_some_and(|t| t == *s),
            _ => false,
        }
}

/// The health the first applicable override gives `obj`, or `None` when none applies
/// (or the one that applies leaves the decision to the built-in rules).
pub fn apply(obj: &Value, overrides: &[&HealthOverride]) -> Option<Health> {
    overrides.iter().filter(|o| applies(o, obj)).find_map(|o| evaluate(o, obj))
}

fn evaluate(o: &HealthOverride, obj: &Value) -> Option<Health> {
    if o.rule == Some(HealthRule::HealthyWhenPresent) {
        let mut message = String::from("healthy when present (health override");
        for (k, v) in &o.match_fields {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            message.push_str(&format!(", {k}={v}"));
        }
        message.push(')');
        return Some(Health::healthy(message));
    }
    let list = fields::at(obj, "/status/conditions").and_then(Value::as_array);
    for row in &o.conditions {
        let hit = list.into_iter().flatten().map(fields::Condition::of).find(|c| {
            c.type_() == row.type_
                && row.status.as_deref().is_none_or(|s| s == c.status)
                && row.reason.as_deref().is_none_or(|r| r == c.reason)
        });
        if let Some(c) = hit {
            return Some(Health::new(row.health, c.describe()));
        }
    }
    o.otherwise.map(|h| Health::new(h, "no condition of the health override matched"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::super::{HealthInput, HealthOverride, HealthSettings, HealthStatus::*, assess_with, test_support::now};

    fn overrides(yaml: &str) -> Vec<HealthOverride> {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn condition_rows_decide_in_order() {
        let o = overrides(
            r#"
- group: db.example.com
  kind: Cluster
  conditions:
    - {type: Ready, status: "True", health: Healthy}
    - {type: Ready, status: "False", reason: BackupFailed, health: Degraded}
    - {type: Paused, status: "True", health: Suspended}
  otherwise: Progressing
- group: db.example.com
  kind: Backup
  conditions:
    - {type: Done, status: "True", health: Healthy}
"#,
        );
        let refs: Vec<&HealthOverride> = o.iter().collect();
        let s = HealthSettings::default();
        let cluster = |kind: &str, conditions: serde_json::Value| json!({"apiVersion": "db.example.com/v1", "kind": kind, "metadata": {"name": "c"}, "status": {"conditions": conditions}});
        let cases = [
            (cluster("Cluster", json!([{"type": "Ready", "status": "True"}])), Healthy, "Ready=True"),
            (
                cluster(
                    "Cluster",
                    json!([{"type": "Ready", "status": "False", "reason": "BackupFailed", "message": "disk full"}]),
                ),
                Degraded,
                "Ready=False (BackupFailed): disk full",
            ),
            (
                cluster(
                    "Cluster",
                    json!([{"type": "Ready", "status": "False", "reason": "Scaling"}, {"type": "Paused", "status": "True"}]),
                ),
                Suspended,
                "Paused=True",
            ),
            (cluster("Cluster", json!([])), Progressing, "no condition of the health override matched"),
            // the override is consulted before kstatus' Stalled rule
            (
                cluster("Cluster", json!([{"type": "Stalled", "status": "True"}, {"type": "Ready", "status": "True"}])),
                Healthy,
                "Ready=True",
            ),
            // no row matches and no `otherwise`: the built-in rules decide
            (
                cluster("Backup", json!([{"type": "Ready", "status": "False", "reason": "UploadFailed"}])),
                Degraded,
                "Ready=False (UploadFailed)",
            ),
        ];
        for (i, (obj, status, message)) in cases.iter().enumerate() {
            let h = assess_with(&HealthInput::new(Some(obj), now(), &s).overrides(&refs));
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "case {i}");
        }
    }

    #[test]
    fn match_narrows_the_override() {
        let o = overrides(
            r#"
- kind: Service
  match: {type: LoadBalancer, "/metadata/labels/tier": edge, "/metadata/labels/replicas": 2}
  rule: healthy-when-present
"#,
        );
        let refs: Vec<&HealthOverride> = o.iter().collect();
        let s = HealthSettings::default();
        let svc = |tier: &str| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb", "labels": {"tier": tier, "replicas": "2"}},
                "spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}})
        };
        let h = assess_with(&HealthInput::new(Some(&svc("edge")), now(), &s).overrides(&refs));
        assert_eq!(
            (h.status, h.message.as_str()),
            (
                Healthy,
                "healthy when present (health override, /metadata/labels/replicas=2, /metadata/labels/tier=edge, type=LoadBalancer)"
            )
        );
        let h = assess_with(&HealthInput::new(Some(&svc("inner")), now(), &s).overrides(&refs));
        assert_eq!(h.status, Progressing, "{}", h.message);
        // being deleted still comes first
        let mut deleting = svc("edge");
        deleting["metadata"]["deletionTimestamp"] = json!("2025-02-01T11:59:00Z");
        assert_eq!(assess_with(&HealthInput::new(Some(&deleting), now(), &s).overrides(&refs)).status, Progressing);
    }

    #[test]
    fn bad_overrides_are_refused_when_parsed() {
        for bad in [
            "- {kind: Ingress, rule: healthy-eventually}",
            "- {kind: Ingress, rule: healthy-when-present, colour: blue}",
            "- {kind: X, conditions: [{type: Ready, health: Fine}]}",
        ] {
            assert!(serde_saphyr::from_str::<Vec<HealthOverride>>(bad).is_err(), "{bad}");
        }
    }
}
