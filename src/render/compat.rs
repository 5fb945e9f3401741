//! Argo CD's and Flux's per-object annotations, read with plumb's meaning where plumb
//! has one: a repository written for either keeps its intent when plumb renders it.
//! Each rendered object's foreign annotations are translated into plumb's own
//! (`plumb.dev/…`, added beside them), unless the object already carries plumb's; a
//! foreign annotation or option plumb has no equivalent for is named in a warning (the
//! application's `RenderWarning`), never silently ignored. Pure.
//!
//! | Argo CD / Flux | plumb |
//! |---|---|
//! | `argocd.argoproj.io/sync-wave: N` | `plumb.dev/sync-wave: N` |
//! | `argocd.argoproj.io/sync-options: A=b,…` | `plumb.dev/sync-options` (the options plumb knows; `ServerSideApply=true` is plumb's only way) |
//! | `argocd.argoproj.io/compare-options: IgnoreExtraneous` | `plumb.dev/compare-options: IgnoreExtraneous` (`ServerSideDiff=true`: plumb's only way) |
//! | `argocd.argoproj.io/ignore-healthcheck: "true"` | `plumb.dev/compare-options: IgnoreHealthCheck` |
//! | `argocd.argoproj.io/hook`, `…/hook-delete-policy` | read as they are ([`crate::plan::hooks`]) |
//! | `kustomize.toolkit.fluxcd.io/prune: disabled` | `plumb.dev/sync-options: Prune=false` |
//! | `kustomize.toolkit.fluxcd.io/force: enabled` | `plumb.dev/sync-options: Force=true` |
//! | `kustomize.toolkit.fluxcd.io/ssa: Merge` | `plumb.dev/ssa: Merge` (`Override`: plumb's default) |
//!
//! Sources: Argo CD "Sync Options", "Sync Phases and Waves", "Compare Options" and
//! "Resource Health" docs; Flux "Kustomization" docs (controlling the apply behaviour).

use serde_json::Value;

const ARGO: &str = "argocd.argoproj.io/";
const FLUX: &str = "kustomize.toolkit.fluxcd.io/";
const SYNC_WAVE: &str = "plumb.dev/sync-wave";
const SYNC_OPTIONS: &str = "plumb.dev/sync-options";
const COMPARE_OPTIONS: &str = "plumb.dev/compare-options";
const SSA: &str = "plumb.dev/ssa";

/// Argo CD annotations plumb reads under their own names (hooks).
const READ_AS_IS: &[&str] = &["argocd.argoproj.io/hook", "argocd.argoproj.io/hook-delete-policy"];

/// Argo CD annotations that only record Argo CD's own bookkeeping: nothing to say.
const BOOKKEEPING: &[&str] = &["argocd.argoproj.io/tracking-id", "argocd.argoproj.io/instance"];

/// Translates `object`'s Argo CD and Flux annotations (see the module docs); returns
/// one warning per annotation or option with no plumb meaning.
pub fn translate(object: &mut Value) -> Vec<String> {
    let Some(annotations) = object.pointer("/metadata/annotations").and_then(Value::as_object) else {
        return vec![];
    };
    let foreign: Vec<(String, String)> = annotations
        .iter()
        .filter(|(k, _)| k.starts_with(ARGO) || k.starts_with(FLUX))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    if foreign.is_empty() {
        return vec![];
    }
    let has = |key: &str| annotations.contains_key(key);
    let (mut warnings, mut add) = (Vec::new(), Vec::<(&str, String)>::new());
    let mut options: Vec<String> = vec![];
    let mut compare: Vec<&str> = vec![];
    for (key, value) in &foreign {
        let value = value.trim();
        let mut none = |why: &str| warnings.push(format!("annotation {key}: {value}: {why}; ignored"));
        match key.as_str() {
            k if READ_AS_IS.contains(&k) || BOOKKEEPING.contains(&k) => {}
            // plumb's own, when the object carries it, wins
            "argocd.argoproj.io/sync-wave" => {
                if !has(SYNC_WAVE) {
                    add.push((SYNC_WAVE, value.to_string()));
                }
            }
            "argocd.argoproj.io/sync-options" => {
                for opt in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                    match opt {
                        "ServerSideApply=true" => {}
                        o if crate::config::check_sync_option(o).is_ok() => options.push(o.to_string()),
                        o => warnings.push(format!("annotation {key}: option `{o}` has no plumb equivalent; ignored")),
                    }
                }
            }
            "argocd.argoproj.io/compare-options" => {
                for opt in value.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                    match opt {
                        "IgnoreExtraneous" => compare.push("IgnoreExtraneous"),
                        "ServerSideDiff=true" => {}
                        o => warnings.push(format!("annotation {key}: option `{o}` has no plumb equivalent; ignored")),
                    }
                }
            }
            "argocd.argoproj.io/ignore-healthcheck" if value.eq_ignore_ascii_case("true") => {
                compare.push("IgnoreHealthCheck");
            }
            // the defaults, as plumb's
            "argocd.argoproj.io/ignore-healthcheck" => {}
            "kustomize.toolkit.fluxcd.io/prune" if value.eq_ignore_ascii_case("disabled") => {
                options.push("Prune=false".into());
            }
            "kustomize.toolkit.fluxcd.io/force" if value.eq_ignore_ascii_case("enabled") => {
                options.push("Force=true".into());
            }
            "kustomize.toolkit.fluxcd.io/prune" | "kustomize.toolkit.fluxcd.io/force" => {}
            "kustomize.toolkit.fluxcd.io/ssa" if value.eq_ignore_ascii_case("Merge") => {
                if !has(SSA) {
                    add.push((SSA, "Merge".into()));
                }
            }
            "kustomize.toolkit.fluxcd.io/ssa" if value.eq_ignore_ascii_case("Override") => {}
            "kustomize.toolkit.fluxcd.io/ssa" => {
                none("plumb applies every declared object (no IfNotPresent or Ignore)")
            }
            "kustomize.toolkit.fluxcd.io/reconcile" => {
                none("plumb has no per-object opt-out of reconciliation (leave the object out of Git)");
            }
            _ => none("plumb has no equivalent"),
        }
    }
    if !options.is_empty() && !has(SYNC_OPTIONS) {
        add.push((SYNC_OPTIONS, options.join(",")));
    }
    if !compare.is_empty() && !has(COMPARE_OPTIONS) {
        add.push((COMPARE_OPTIONS, compare.join(",")));
    }
    if let Some(a) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        for (k, v) in add {
            a.insert(k.to_string(), Value::String(v));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": annotations}})
    }

    fn translated(annotations: Value) -> (Value, Vec<String>) {
        let mut o = object(annotations);
        let w = translate(&mut o);
        (o["metadata"]["annotations"].clone(), w)
    }

    #[test]
    fn argo_cd_annotations_read_with_plumb_s_meaning() {
        let (a, w) = translated(json!({
            "argocd.argoproj.io/sync-wave": "-2",
            "argocd.argoproj.io/sync-options": "Prune=false, ServerSideApply=true,SkipDryRunOnMissingResource=true,Replace=true",
            "argocd.argoproj.io/compare-options": "IgnoreExtraneous,ServerSideDiff=true",
            "argocd.argoproj.io/ignore-healthcheck": "true",
            "argocd.argoproj.io/hook": "PreSync",
        }));
        assert_eq!(a[SYNC_WAVE], "-2");
        assert_eq!(a[SYNC_OPTIONS], "Prune=false,Replace=true");
        assert_eq!(a[COMPARE_OPTIONS], "IgnoreExtraneous,IgnoreHealthCheck");
        assert_eq!(a["argocd.argoproj.io/sync-wave"], "-2", "the original stays");
        assert_eq!(
            w,
            [
                "annotation argocd.argoproj.io/sync-options: option `SkipDryRunOnMissingResource=true` has no plumb equivalent; ignored"
            ]
        );
        // what plumb then reads of it (the wave and the health check are read from the
        // same annotations by `plan` and `health`)
        let mut o = object(a);
        let options = crate::config::SyncOptions::of_object(&o);
        assert!(options.prune_disabled && options.replace, "{options:?}");
        let before = o.clone();
        assert!(translate(&mut o).len() == 1, "translating twice adds nothing new");
        assert_eq!(o, before);
    }

    #[test]
    fn flux_annotations_read_with_plumb_s_meaning() {
        let (a, w) = translated(json!({
            "kustomize.toolkit.fluxcd.io/prune": "disabled",
            "kustomize.toolkit.fluxcd.io/force": "enabled",
            "kustomize.toolkit.fluxcd.io/ssa": "Merge",
        }));
        assert_eq!((a[SYNC_OPTIONS].as_str(), a[SSA].as_str()), (Some("Force=true,Prune=false"), Some("Merge")));
        assert!(w.is_empty(), "{w:?}");
        let (_, w) = translated(json!({
            "kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent",
            "kustomize.toolkit.fluxcd.io/reconcile": "disabled",
        }));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("kustomize.toolkit.fluxcd.io/reconcile: disabled") && w[1].contains("IfNotPresent"),
            "{w:?}"
        );
    }

    #[test]
    fn plumb_s_own_annotations_win_and_plain_objects_are_untouched() {
        let (a, w) = translated(json!({
            "argocd.argoproj.io/sync-wave": "3",
            "plumb.dev/sync-wave": "1",
            "argocd.argoproj.io/sync-options": "Prune=false",
            "plumb.dev/sync-options": "Replace=true",
            "kustomize.toolkit.fluxcd.io/ssa": "Merge",
            "plumb.dev/ssa": "Merge",
        }));
        assert_eq!((a[SYNC_WAVE].as_str(), a[SYNC_OPTIONS].as_str()), (Some("1"), Some("Replace=true")));
        assert!(w.is_empty(), "{w:?}");
        let mut plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let before = plain.clone();
        assert!(translate(&mut plain).is_empty());
        assert_eq!(plain, before);
        let (_, w) = translated(json!({"argocd.argoproj.io/manifest-generate-paths": "."}));
        assert_eq!(w, ["annotation argocd.argoproj.io/manifest-generate-paths: .: plumb has no equivalent; ignored"]);
    }
}
