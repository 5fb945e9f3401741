//! Service and Ingress: is an address published?
//!
//! Sources: Argo CD `gitops-engine/pkg/health/health_{service,ingress}.go` and the
//! Kubernetes Service / Ingress API (`status.loadBalancer.ingress[]` with `ip` or
//! `hostname`).
//!
//! - Service of `type: LoadBalancer` with no address in `status.loadBalancer.ingress` →
//!   Progressing (`no address published in status.loadBalancer after 3h`); every other
//!   Service (ClusterIP, NodePort, ExternalName, headless) → Healthy.
//! - Ingress (`networking.k8s.io`, legacy `extensions`) with an `ip` or `hostname` in
//!   `status.loadBalancer.ingress` → Healthy, else Progressing with the same message.
//!
//! Progressing without a timeout, as Argo CD: some controllers never publish an address
//! (argocd-14). plumb does not wait silently: [`super::stall`] raises a *stalled* warning
//! on the application, and an override (`rule: healthy-when-present`, matched on the
//! ingress class) accepts such controllers explicitly.

use serde_json::Value;

use super::{Clock, Health, fields};

/// The first published address (`ip` or `hostname`) of `status.loadBalancer.ingress`.
fn published_address(obj: &Value) -> Option<&str> {
    fields::at(obj, "/status/loadBalancer/ingress")?.as_array()?.iter().find_map(|i| {
        ["ip", "hostname"].iter().find_map(|k| i.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()))
    })
}

fn waiting_for_address(obj: &Value, clock: Clock<'_>) -> Health {
    match fields::timestamp(obj, "/metadata/creationTimestamp") {
        Some(created) => Health::progressing(format!(
            "no address published in status.loadBalancer after {}",
            fields::age(fields::elapsed(clock.now(), Some(created)))
        )),
        None => Health::progressing("no address published in status.loadBalancer"),
    }
}

/// Health of a Service (`v1`).
pub fn service(obj: &Value, clock: Clock<'_>) -> Health {
    if fields::str_at(obj, "/spec/type") != Some("LoadBalancer") {
        return Health::healthy("");
    }
    match published_address(obj) {
        Some(addr) => Health::healthy(format!("load balancer at {addr}")),
        None => waiting_for_address(obj, clock),
    }
}

/// Health of an Ingress (`networking.k8s.io/v1`, `extensions/v1beta1`).
pub fn ingress(obj: &Value, clock: Clock<'_>) -> Health {
    match published_address(obj) {
        Some(addr) => Health::healthy(format!("address {addr}")),
        None => waiting_for_address(obj, clock),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{
        HealthStatus::{self, *},
        test_support::{ago, assess_at},
    };

    #[test]
    fn addresses() {
        let svc = |type_: &str, status: Value| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "creationTimestamp": ago(720)},
                "spec": {"type": type_}, "status": status})
        };
        let ing = |status: Value| {
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i", "creationTimestamp": ago(720)},
                "spec": {}, "status": status})
        };
        let cases: Vec<(&str, Value, HealthStatus, &str)> = vec![
            ("ClusterIP", svc("ClusterIP", json!({})), Healthy, ""),
            ("NodePort", svc("NodePort", json!({"loadBalancer": {}})), Healthy, ""),
            ("ExternalName", svc("ExternalName", json!({})), Healthy, ""),
            (
                "LoadBalancer without address",
                svc("LoadBalancer", json!({"loadBalancer": {}})),
                Progressing,
                "no address published in status.loadBalancer after 12m",
            ),
            (
                "LoadBalancer with an ip",
                svc("LoadBalancer", json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})),
                Healthy,
                "load balancer at 192.0.2.10",
            ),
            (
                "Ingress with a hostname",
                ing(json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.test"}]}})),
                Healthy,
                "address lb.example.test",
            ),
            (
                "Ingress with an ip",
                ing(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.11"}]}})),
                Healthy,
                "address 192.0.2.11",
            ),
            (
                "Ingress with an empty entry",
                ing(json!({"loadBalancer": {"ingress": [{}]}})),
                Progressing,
                "no address published in status.loadBalancer after 12m",
            ),
            (
                "Ingress without status",
                ing(json!({})),
                Progressing,
                "no address published in status.loadBalancer after 12m",
            ),
        ];
        for (what, obj, status, message) in &cases {
            let h = assess_at(obj, &[]);
            assert_eq!((h.status, h.message.as_str()), (*status, *message), "{what}");
        }
    }
}
