//! Bug reports turned into inputs (`shared/cases`), read at test time.
#![allow(clippy::unwrap_used)]

use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    HealthInput, HealthOverride, HealthSettings, HealthStatus, ProgressingSince, assess_with, ignores_health_check,
    roll_up, stalled, track_progressing,
};
use crate::tracking::ObjectKey;

fn case_file(case: &str, file: &str) -> Vec<u8> {
    let path = format!(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/cases/{}/{}"), case, file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn objects(case: &str, file: &str) -> Vec<Value> {
    crate::render::render(&[(file.to_string(), case_file(case, file))])
        .unwrap()
        .into_iter()
        .map(|m| m.object())
        .collect()
}

/// The top level of the case's `overrides.yaml`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OverridesFile {
    health_overrides: Vec<HealthOverride>,
}

/// "Observed 3 h after creation" (live.yaml's `creationTimestamp` is 09:00).
fn observed_at() -> jiff::Timestamp {
    "2025-02-01T12:00:00Z".parse().unwrap()
}

/// Assesses every desired object of argocd-14 against its live counterpart.
fn assess_case(live: &[Value], overrides: &[&HealthOverride]) -> Vec<(ObjectKey, HealthStatus, String)> {
    let settings = HealthSettings::default();
    objects("argocd-14", "desired.yaml")
        .iter()
        .map(|d| {
            let key = ObjectKey::of(d).unwrap();
            assert!(!ignores_health_check(d));
            let l = live.iter().find(|l| ObjectKey::of(l).as_ref() == Some(&key));
            let h = assess_with(&HealthInput::new(l, observed_at(), &settings).overrides(overrides));
            (key, h.status, h.message)
        })
        .collect()
}

fn stall_message(results: &[(ObjectKey, HealthStatus, String)]) -> Option<String> {
    // first seen Progressing 15 minutes before the observation, still so now
    let first = observed_at() - jiff::SignedDuration::from_mins(15);
    let pass = |prev: &ProgressingSince, t| track_progressing(prev, results.iter().map(|(k, h, _)| (k, *h)), t);
    let since = pass(&pass(&ProgressingSince::new(), first), observed_at());
    stalled(&since, observed_at(), HealthSettings::default().stall_after).map(|s| s.message)
}

/// argocd-14 variant A (no override): Ingress and LoadBalancer Service without a
/// published address are Progressing with the reason, the app stays Progressing and
/// carries the stall warning naming both.
#[test]
fn argocd_14_without_override_progressing_with_reason_and_stall_warning() {
    let live = objects("argocd-14", "live.yaml");
    let results = assess_case(&live, &[]);
    let by_kind = |k: &str| results.iter().find(|(key, _, _)| key.kind == k).unwrap();
    for kind in ["Ingress", "Service"] {
        let (_, status, message) = by_kind(kind);
        assert_eq!(
            (*status, message.as_str()),
            (HealthStatus::Progressing, "no address published in status.loadBalancer after 3h"),
            "{kind}"
        );
    }
    assert_eq!(roll_up(results.iter().map(|(_, h, _)| h)), HealthStatus::Progressing);
    assert_eq!(stall_message(&results).as_deref(), Some("health stalled: Ingress web/portal, Service web/portal-lb"));
}

/// argocd-14 variant B (the case's `overrides.yaml`, read as plumb's override format):
/// the Ingress of class `internal-nginx` is Healthy once it exists; the Service stays
/// Progressing and alone makes the app Progressing.
#[test]
fn argocd_14_with_override_ingress_healthy_service_still_progressing() {
    let file: OverridesFile =
        serde_saphyr::from_str(&String::from_utf8(case_file("argocd-14", "overrides.yaml")).unwrap()).unwrap();
    let overrides: Vec<&HealthOverride> = file.health_overrides.iter().collect();
    let live = objects("argocd-14", "live.yaml");
    let results = assess_case(&live, &overrides);
    let by_kind = |k: &str| results.iter().find(|(key, _, _)| key.kind == k).unwrap();
    let (_, status, message) = by_kind("Ingress");
    assert_eq!(*status, HealthStatus::Healthy, "{message}");
    assert_eq!(message, "healthy when present (health override, ingressClassName=internal-nginx)");
    assert_eq!(by_kind("Service").1, HealthStatus::Progressing);
    assert_eq!(roll_up(results.iter().map(|(_, h, _)| h)), HealthStatus::Progressing);
    assert_eq!(stall_message(&results).as_deref(), Some("health stalled: Service web/portal-lb"));

    // the override is for that class only: another class is back to the built-in rule
    let mut other = live.clone();
    other[0]["spec"]["ingressClassName"] = json!("public-nginx");
    let results = assess_case(&other, &overrides);
    assert_eq!(results.iter().find(|(k, _, _)| k.kind == "Ingress").unwrap().1, HealthStatus::Progressing);
}

/// argocd-14, both variants: a ClusterIP / NodePort Service is always Healthy; an Ingress
/// whose status lists an `ip` or a `hostname` is Healthy.
#[test]
fn argocd_14_addresses_and_plain_services_are_healthy_in_both_variants() {
    let file: OverridesFile =
        serde_saphyr::from_str(&String::from_utf8(case_file("argocd-14", "overrides.yaml")).unwrap()).unwrap();
    let with: Vec<&HealthOverride> = file.health_overrides.iter().collect();
    for overrides in [&[][..], &with[..]] {
        for (service_type, address) in
            [("ClusterIP", json!({"ip": "192.0.2.7"})), ("NodePort", json!({"hostname": "portal.lb.example.test"}))]
        {
            let mut live = objects("argocd-14", "live.yaml");
            for o in &mut live {
                match o["kind"].as_str().unwrap() {
                    "Ingress" => o["status"]["loadBalancer"]["ingress"] = json!([address]),
                    _ => o["spec"]["type"] = json!(service_type),
                }
            }
            let results = assess_case(&live, overrides);
            for (key, status, message) in &results {
                assert_eq!(*status, HealthStatus::Healthy, "{key} ({service_type}): {message}");
            }
            assert_eq!(roll_up(results.iter().map(|(_, h, _)| h)), HealthStatus::Healthy);
            assert_eq!(stall_message(&results), None);
        }
    }
}

/// A declared object not yet created is Missing but does not make the app Missing.
#[test]
fn argocd_14_missing_service_does_not_make_the_app_missing() {
    let live: Vec<Value> = objects("argocd-14", "live.yaml").into_iter().filter(|o| o["kind"] == "Ingress").collect();
    let results = assess_case(&live, &[]);
    assert!(results.iter().any(|(_, h, _)| *h == HealthStatus::Missing));
    assert_eq!(roll_up(results.iter().map(|(_, h, _)| h)), HealthStatus::Progressing);
    let results = assess_case(&[], &[]);
    assert_eq!(roll_up(results.iter().map(|(_, h, _)| h)), HealthStatus::Missing);
}
