//! The IO of a sync's hooks ([`crate::plan::hooks`] decides): split hooks out of a
//! render, check them against the application's boundary, create each run, read its
//! state, delete it by its policy, and drive a sync through its phases across passes.
//!
//! A sync with hooks (`Io::hooked`): PreSync hooks run (by order) and must succeed
//! before anything else of the sync is applied or pruned; then the Sync hooks start and
//! the objects are applied (waves as usual); once every object is applied and Healthy
//! and the Sync hooks succeeded, the PostSync hooks run. While a phase runs the sync is
//! `Running` naming the hooks, and the next pass goes on. A failed or timed-out hook
//! fails the sync (nothing more is applied or pruned), creates the SyncFail hooks and
//! publishes a Warning Event `HookFailed`. When the sync ends, runs whose policy says
//! so (`HookSucceeded`, `HookFailed`) are deleted (propagation Background: a Job's
//! pods go with it).
//!
//! Each run is created under [`plan::hooks::run_name`] (the revision in the name) with
//! label [`plan::hooks::HOOK_OF_LABEL`] (never inventory, never pruned), and annotation
//! [`plan::hooks::HOOK_SYNC_ANNOTATION`] naming the sync. A live object of that name
//! left by another sync (a sync of the same revision again) is deleted and created
//! anew; under `BeforeHookCreation` the runs of earlier revisions are deleted first.
//! A run deleted by hand while its sync goes on is created again.

use std::sync::Arc;

use serde_json::Value;

use super::{Io, compare::Scope};
use crate::{
    apply,
    cluster::Kind,
    plan::{
        Propagation,
        hooks::{self as rules, DeletePolicy, Hook, HookState, Phase, Step},
    },
    render::{Manifest, Rendered},
    status::{EventReason, HookRun, SyncRecord},
    tracking::ObjectKey,
};

/// The hooks of one render, split from its objects.
#[derive(Debug, Clone, Default)]
pub(super) struct Hooks {
    /// The hooks, with their bodies as written.
    pub declared: Vec<(Hook, Arc<Manifest>)>,
    /// Objects neither applied nor run (Helm tests, rollback hooks, `Skip`): the
    /// object and why.
    pub skipped: Vec<(String, String)>,
}

impl Hooks {
    /// Whether the render declares no hook to run.
    pub fn is_empty(&self) -> bool {
        self.declared.is_empty()
    }
}

/// A render split into its objects and its hooks ([`split`]), kept for the next pass
/// while the render is the same (the comparisons of a pass serve the next only for the
/// very same render: `reuse.rs`).
#[derive(Debug)]
pub(super) struct Split {
    /// The render split.
    pub from: Arc<Rendered>,
    /// Its objects (`from` itself when it has no hooks).
    pub objects: Arc<Rendered>,
    /// Its hooks.
    pub hooks: Hooks,
    /// [`Rendered::digest`] of `objects`, once asked for ([`Split::digest`]).
    digest: std::sync::OnceLock<String>,
}

impl Split {
    /// [`Rendered::digest`] of its objects, computed once per render.
    pub fn digest(&self) -> &str {
        self.digest.get_or_init(|| self.objects.digest())
    }
}

/// `rendered` split into its objects and its hooks ([`rules::classify`]); the objects
/// are `rendered` itself when no manifest mentions a hook annotation.
///
/// # Errors
/// [`crate::render::Error::Hook`]: an annotation that cannot be read, or more than
/// [`rules::MAX_HOOKS`] hooks.
pub(super) fn split(rendered: &Arc<Rendered>) -> Result<Split, crate::render::Error> {
    let from = rendered.clone();
    if !rendered.manifests.iter().any(|m| m.mentions("/hook")) {
        return Ok(Split { from, objects: rendered.clone(), hooks: Hooks::default(), digest: Default::default() });
    }
    let mut hooks = Hooks::default();
    let mut objects = Vec::with_capacity(rendered.manifests.len());
    for m in &rendered.manifests {
        if !m.mentions("/hook") {
            objects.push(m.clone());
            continue;
        }
        let obj = m.object();
        let object = ObjectKey::of(&obj).map(|k| k.to_string()).unwrap_or_default();
        let error =
            |message: String| crate::render::Error::Hook { file: m.source.clone(), object: object.clone(), message };
        match rules::classify(&obj).map_err(error)? {
            rules::Classified::Object => objects.push(m.clone()),
            rules::Classified::Skipped(why) => hooks.skipped.push((object.clone(), why)),
            rules::Classified::Hook(h) => hooks.declared.push((h, Arc::new(m.clone()))),
        }
    }
    if hooks.declared.len() > rules::MAX_HOOKS {
        return Err(crate::render::Error::Hook {
            file: rendered.manifests.first().map(|m| m.source.clone()).unwrap_or_default(),
            object: format!("{} hooks", hooks.declared.len()),
            message: format!(
                "an application declares at most {} hooks (plumb.dev/hook, argocd.argoproj.io/hook, helm.sh/hook); split it",
                rules::MAX_HOOKS
            ),
        });
    }
    let objects = Arc::new(Rendered { manifests: objects, ..Rendered::clone(rendered) });
    Ok(Split { from, objects, hooks, digest: Default::default() })
}

/// One hook ready to run: its kind, the live key of this sync's run and the body to
/// create.
struct Resolved<'h> {
    hook: &'h Hook,
    kind: Kind,
    /// The run's key (its name carries the revision).
    run: ObjectKey,
    /// The declared name as label [`rules::HOOK_NAME_LABEL`] holds it ([`rules::name_label`]).
    base: String,
    body: Value,
}

/// What one sync with hooks knows of itself.
pub(super) struct HookSync<'a> {
    /// The render's hooks.
    pub hooks: &'a Hooks,
    /// The application's first sync (Helm's install).
    pub first: bool,
    /// The start of the sync (RFC 3339): the mark of its runs.
    pub started: String,
    /// The revision synced.
    pub revision: &'a str,
}

impl Io<'_> {
    /// Every hook resolved: kind served, namespace defaulted, inside the application's
    /// boundary, body named and marked for this sync.
    ///
    /// # Errors
    /// The refusal (every hook outside the boundary, or of a kind not served), worded
    /// as a refused sync: nothing is written.
    async fn resolve<'h>(self, scope: &Scope<'_>, h: &'h HookSync<'_>) -> Result<Vec<Resolved<'h>>, String> {
        let mut out = Vec::new();
        let mut refusals = Vec::new();
        for (hook, manifest) in &h.hooks.declared {
            let kind = match scope.writer.kind(manifest.api_version(), manifest.kind()).await {
                Ok(k) => k,
                Err(e) => {
                    refusals.push(format!("hook {}: {e}", hook.key));
                    continue;
                }
            };
            let body = manifest.object();
            let Some(key) = crate::compare::object::identity(&body, kind.namespaced, scope.namespace) else { continue };
            if let Err(why) = scope.boundary.check(&key, kind.namespaced, &body) {
                refusals.push(format!("hook {key} {why}"));
                continue;
            }
            let run = ObjectKey { name: rules::run_name(&key.name, h.revision), ..key.clone() };
            // the run's own name too: a Namespace hook's run is another Namespace
            if let Err(why) = scope.boundary.check(&run, kind.namespaced, &body) {
                refusals.push(format!("hook {key} (run {}) {why}", run.name));
                continue;
            }
            let base = rules::name_label(&key.name);
            let body = run_body(body, &run, scope.app, &base, &h.started);
            out.push(Resolved { hook, kind, run, base, body });
        }
        if refusals.is_empty() {
            Ok(out)
        } else {
            Err(format!("sync refused, nothing written: {}", refusals.join("; ")))
        }
    }

    /// The state of each of `runs` for the sync that started at `started`, and when
    /// each was created (RFC 3339, empty when unknown).
    async fn observe_runs(self, scope: &Scope<'_>, runs: &[&Resolved<'_>], started: &str) -> Vec<(HookState, String)> {
        let now = jiff::Timestamp::now();
        let mut out = Vec::with_capacity(runs.len());
        for r in runs {
            // a failed read counts as still running: the next pass reads again
            out.push(match scope.writer.get(&r.kind, &r.run).await {
                Ok(live) => {
                    let created = live
                        .as_ref()
                        .and_then(|l| l.pointer("/metadata/creationTimestamp"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    (rules::observe(live.as_ref(), started, now), created)
                }
                Err(e) => {
                    tracing::warn!(app = scope.app, "hook {}: {e}", r.run);
                    (HookState::Running(0), String::new())
                }
            });
        }
        out
    }

    /// Creates run `r`: under `BeforeHookCreation` the application's earlier runs of
    /// the same hook go first; a namesake left by another sync is deleted and waited
    /// for; a namesake that is no hook run of this application is left alone.
    ///
    /// # Errors
    /// The API server's answer, naming the run; a namesake of someone else's.
    async fn create_run(self, scope: &Scope<'_>, r: &Resolved<'_>) -> Result<(), String> {
        let w = scope.writer;
        if r.hook.delete.contains(&DeletePolicy::BeforeHookCreation) {
            let selector = format!("{}={},{}={}", rules::HOOK_OF_LABEL, scope.app, rules::HOOK_NAME_LABEL, r.base);
            let earlier = w.list_labelled(&r.kind, &r.run.namespace, &selector).await.map_err(|e| e.to_string())?;
            for o in earlier {
                if let Some(key) = ObjectKey::of(&o).filter(|k| k.name != r.run.name) {
                    self.delete_run(w, &r.kind, &key, &o).await;
                }
            }
        }
        if let Some(old) = w.get(&r.kind, &r.run).await.map_err(|e| e.to_string())? {
            // a namesake that is not this application's hook run is never taken over
            if rules::hook_of(&old) != Some(scope.app) {
                return Err(format!(
                    "{} exists and is not a hook run of application {} (label {}): it is left alone",
                    r.run,
                    scope.app,
                    rules::HOOK_OF_LABEL
                ));
            }
            let uid = self.delete_run(w, &r.kind, &r.run, &old).await;
            w.wait_gone(&r.kind, &r.run, &uid, apply::CRD_TIMEOUT).await?;
        }
        w.apply(&r.kind, &r.run, &r.body, false).await.map_err(|e| e.to_string())?;
        tracing::info!(app = scope.app, "hook {} created", r.run);
        Ok(())
    }

    /// Deletes run `key` (live object `live`; propagation Background), logging a
    /// failure; returns its UID.
    async fn delete_run(self, w: &crate::cluster::Cluster, kind: &Kind, key: &ObjectKey, live: &Value) -> String {
        let uid = live.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Err(e) = w.delete(kind, key, &uid, Propagation::Background).await {
            tracing::warn!("hook {key}: delete: {e}");
        }
        uid
    }

    /// One step of `phase`: reads its runs, creates the next order's, and adds what
    /// it saw to `seen`.
    async fn phase(
        self,
        scope: &Scope<'_>,
        phase: Phase,
        all: &[Resolved<'_>],
        h: &HookSync<'_>,
        seen: &mut Vec<HookRun>,
    ) -> Step {
        let runs: Vec<&Resolved<'_>> =
            rules::phase_hooks(all.iter().map(|r| r.hook), phase, h.first).into_iter().map(|i| &all[i]).collect();
        let hooks: Vec<&Hook> = runs.iter().map(|r| r.hook).collect();
        let names: Vec<String> = runs.iter().map(|r| r.run.to_string()).collect();
        let mut observed = self.observe_runs(scope, &runs, &h.started).await;
        let states: Vec<HookState> = observed.iter().map(|(s, _)| s.clone()).collect();
        let mut step = rules::next_step(phase, &hooks, &states, &names);
        if let Step::Create(idx) = &step {
            let mut created = Vec::new();
            for &i in idx {
                if let Err(e) = self.create_run(scope, runs[i]).await {
                    step = Step::Failed(format!("{phase} hook {} could not be created: {e}", names[i]));
                    observed[i].0 = HookState::Failed(String::new(), e);
                    break;
                }
                observed[i] = (HookState::Running(0), crate::status::now());
                created.push(names[i].clone());
            }
            if !matches!(step, Step::Failed(_)) {
                step = Step::Wait(format!("started {phase} hook(s): {}", created.join(", ")));
            }
        }
        let now = crate::status::now();
        for (i, (state, created)) in observed.iter().enumerate() {
            seen.extend(hook_run(phase, &names[i], runs[i].hook, state, created, &now));
        }
        step
    }

    /// Creates every SyncFail hook of the sync (they are not waited for).
    async fn sync_fail(self, scope: &Scope<'_>, all: &[Resolved<'_>], h: &HookSync<'_>, seen: &mut Vec<HookRun>) {
        let now = crate::status::now();
        for r in all.iter().filter(|r| r.hook.runs_in(Phase::SyncFail, h.first)) {
            let state = match self.create_run(scope, r).await {
                Ok(()) => HookState::Running(0),
                Err(e) => HookState::Failed(String::new(), format!("could not be created: {e}")),
            };
            seen.extend(hook_run(Phase::SyncFail, &r.run.to_string(), r.hook, &state, &now, &now));
        }
    }

    /// When a sync ends: deletes the runs of this sync its hooks' policies delete
    /// (`HookSucceeded` once succeeded, `HookFailed` once failed).
    async fn delete_finished(self, scope: &Scope<'_>, all: &[Resolved<'_>], started: &str) {
        let now = jiff::Timestamp::now();
        for r in all.iter().filter(|r| r.hook.delete.iter().any(|d| *d != DeletePolicy::BeforeHookCreation)) {
            let Ok(Some(live)) = scope.writer.get(&r.kind, &r.run).await else { continue };
            let delete = match rules::observe(Some(&live), started, now) {
                HookState::Succeeded(_) => rules::deleted_after(r.hook, true),
                HookState::Failed(..) => rules::deleted_after(r.hook, false),
                // past its timeout it failed the sync: it counts as failed
                HookState::Running(age) if age > r.hook.timeout => rules::deleted_after(r.hook, false),
                HookState::Running(_) | HookState::NotCreated => false,
            };
            if delete {
                self.delete_run(scope.writer, &r.kind, &r.run, &live).await;
                tracing::info!(app = scope.app, "hook {} deleted (its delete policy)", r.run);
            }
        }
    }

    /// A sync with hooks (order in the module docs): `apply` runs the objects' part
    /// (waves, prune) once the PreSync hooks succeeded; `healthy` says, from its
    /// outcome, which desired objects are not Healthy yet (empty: all are). Returns
    /// the outcome the sync's record is made from, the hooks seen added to `rec`, or
    /// the refusal when a hook is outside the boundary (nothing written).
    pub(super) async fn hooked<'f, F, H>(
        self,
        scope: &Scope<'_>,
        h: &HookSync<'_>,
        rec: &mut SyncRecord,
        apply: F,
        healthy: H,
    ) -> Result<apply::Outcome, String>
    where
        F: std::future::Future<Output = apply::Outcome> + 'f,
        H: Fn(&apply::Outcome) -> Vec<String>,
    {
        let all = self.resolve(scope, h).await?;
        let mut seen = Vec::new();
        let fail = |message: String| apply::Error::Hook { app: scope.app.to_string(), message };
        let mut outcome = match self.phase(scope, Phase::PreSync, &all, h, &mut seen).await {
            Step::Done => {
                let during = self.phase(scope, Phase::Sync, &all, h, &mut seen).await;
                let mut outcome = apply.await;
                if outcome.failures.is_empty() && outcome.waiting.is_none() {
                    match during {
                        Step::Failed(why) => outcome.failures.push(fail(why)),
                        Step::Wait(why) => outcome.waiting = Some(why),
                        Step::Create(_) | Step::Done => {
                            let step = self.post_sync(scope, &all, h, &healthy(&outcome), &mut seen).await;
                            match step {
                                Step::Failed(why) => outcome.failures.push(fail(why)),
                                Step::Wait(why) => outcome.waiting = Some(why),
                                Step::Create(_) | Step::Done => {}
                            }
                        }
                    }
                }
                outcome
            }
            // nothing applied, nothing pruned
            Step::Failed(why) => apply::Outcome { failures: vec![fail(why)], ..apply::Outcome::default() },
            Step::Wait(why) => apply::Outcome {
                waiting: Some(format!("{why}; nothing else of the sync is applied or pruned until they succeed")),
                ..apply::Outcome::default()
            },
            // `phase` turns a creation into a wait
            Step::Create(_) => {
                apply::Outcome { waiting: Some("PreSync hooks start".into()), ..apply::Outcome::default() }
            }
        };
        self.ended(scope, &all, h, &mut outcome, &mut seen).await;
        let mut runs = std::mem::take(&mut rec.hooks);
        let mut omitted = rec.hooks_omitted;
        let skipped = h.hooks.skipped.iter().map(|(object, why)| HookRun {
            phase: "Skipped".into(),
            object: object.clone(),
            result: "Skipped".into(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_seconds: 0,
            message: why.clone(),
        });
        crate::status::merge_hook_runs(&mut runs, &mut omitted, seen.into_iter().chain(skipped).collect());
        (rec.hooks, rec.hooks_omitted) = (runs, omitted);
        Ok(outcome)
    }

    /// The PostSync phase once the objects are applied: waits while objects
    /// (`not_ready`, named with their health) are not Healthy.
    async fn post_sync(
        self,
        scope: &Scope<'_>,
        all: &[Resolved<'_>],
        h: &HookSync<'_>,
        not_ready: &[String],
        seen: &mut Vec<HookRun>,
    ) -> Step {
        let post = rules::phase_hooks(all.iter().map(|r| r.hook), Phase::PostSync, h.first);
        if !post.is_empty() && !not_ready.is_empty() {
            return Step::Wait(format!("PostSync hooks wait until every object is Healthy: {}", not_ready.join(", ")));
        }
        self.phase(scope, Phase::PostSync, all, h, seen).await
    }

    /// The end of a pass of a sync with hooks: on a failure, the Warning Events and
    /// the SyncFail hooks; when the sync ends, the runs its policies delete.
    async fn ended(
        self,
        scope: &Scope<'_>,
        all: &[Resolved<'_>],
        h: &HookSync<'_>,
        outcome: &mut apply::Outcome,
        seen: &mut Vec<HookRun>,
    ) {
        if !outcome.failures.is_empty() {
            for f in &outcome.failures {
                if let apply::Error::Hook { message, .. } = f {
                    tracing::warn!(app = scope.app, "{message}");
                    self.event(scope.app, true, EventReason::HookFailed, message.clone()).await;
                }
            }
            self.sync_fail(scope, all, h, seen).await;
        }
        if outcome.waiting.is_none() || !outcome.failures.is_empty() {
            self.delete_finished(scope, all, &h.started).await;
        }
    }
}

/// The body of run `run` of hook `base` of application `app`, for the sync started at
/// `started`: the declared object renamed, labelled and marked, plumb's hook
/// annotations left as written.
fn run_body(mut body: Value, run: &ObjectKey, app: &str, base: &str, started: &str) -> Value {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), Value::String(run.name.clone()));
        if !run.namespace.is_empty() {
            meta.insert("namespace".into(), Value::String(run.namespace.clone()));
        }
        for (field, entries) in [
            ("labels", vec![(rules::HOOK_OF_LABEL, app), (rules::HOOK_NAME_LABEL, base)]),
            ("annotations", vec![(rules::HOOK_SYNC_ANNOTATION, started)]),
        ] {
            let map = meta.entry(field).or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !map.is_object() {
                *map = Value::Object(serde_json::Map::new());
            }
            if let Some(m) = map.as_object_mut() {
                for (k, v) in entries {
                    m.insert(k.into(), Value::String(v.into()));
                }
            }
        }
    }
    body
}

/// What the record keeps of run `name` of `hook` in `phase` in state `state`, created
/// at `created`, seen at `now` (RFC 3339); `None` when not created.
fn hook_run(phase: Phase, name: &str, hook: &Hook, state: &HookState, created: &str, now: &str) -> Option<HookRun> {
    let (result, finished, message) = match state {
        HookState::NotCreated => return None,
        HookState::Running(age) if *age > hook.timeout => {
            ("TimedOut", now.to_string(), format!("still running after {age}s (timeout {}s)", hook.timeout))
        }
        HookState::Running(_) => ("Running", String::new(), String::new()),
        HookState::Succeeded(at) => {
            ("Succeeded", if at.is_empty() { now.to_string() } else { at.clone() }, String::new())
        }
        HookState::Failed(at, why) => ("Failed", if at.is_empty() { now.to_string() } else { at.clone() }, why.clone()),
    };
    let secs = |t: &str| t.parse::<jiff::Timestamp>().ok().map(|t| t.as_second());
    let end = if finished.is_empty() { now } else { finished.as_str() };
    let duration = match (secs(created), secs(end)) {
        (Some(a), Some(b)) => u64::try_from((b - a).max(0)).unwrap_or(0),
        _ => 0,
    };
    Some(HookRun {
        phase: phase.as_str().into(),
        object: name.into(),
        result: result.into(),
        started_at: created.to_string(),
        finished_at: finished,
        duration_seconds: duration,
        message,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn rendered(objects: &[Value]) -> Arc<Rendered> {
        let manifests = objects.iter().enumerate().map(|(i, o)| Manifest::new(format!("app/all.yaml#{}", i + 1), o));
        Arc::new(Rendered { manifests: manifests.collect(), ..Rendered::default() })
    }

    fn obj(kind: &str, name: &str, annotations: Value) -> Value {
        json!({"apiVersion": if kind == "Job" { "batch/v1" } else { "v1" }, "kind": kind,
            "metadata": {"name": name, "annotations": annotations}})
    }

    #[test]
    fn a_render_splits_into_objects_hooks_and_skipped_tests() {
        let plain = rendered(&[obj("ConfigMap", "a", json!({}))]);
        let s = split(&plain).unwrap();
        assert!(Arc::ptr_eq(&s.objects, &plain), "a render without hooks is not copied");
        assert!(s.hooks.is_empty());
        let r = rendered(&[
            obj("ConfigMap", "a", json!({"note": "mentions /hook but is none"})),
            obj("Job", "migrate", json!({"plumb.dev/hook": "PreSync"})),
            obj("Pod", "web-test", json!({"helm.sh/hook": "test"})),
            obj("Job", "notify", json!({"argocd.argoproj.io/hook": "PostSync"})),
        ]);
        let s = split(&r).unwrap();
        assert_eq!(s.objects.manifests.iter().map(|m| m.kind()).collect::<Vec<_>>(), ["ConfigMap"]);
        let names: Vec<&str> = s.hooks.declared.iter().map(|(h, _)| h.key.name.as_str()).collect();
        assert_eq!(names, ["migrate", "notify"]);
        assert_eq!(
            s.hooks.skipped,
            [("Pod/web-test".to_string(), "helm.sh/hook: test (never applied by plumb)".to_string())]
        );
    }

    #[test]
    fn a_bad_hook_annotation_or_too_many_hooks_fail_the_render_naming_where() {
        let r = rendered(&[obj("Job", "migrate", json!({"plumb.dev/hook": "BeforeSync"}))]);
        let e = split(&r).unwrap_err().to_string();
        assert!(
            e.starts_with("app/all.yaml#1: Job.batch/migrate: annotation plumb.dev/hook: unknown hook `BeforeSync`"),
            "{e}"
        );
        let many: Vec<Value> =
            (0..=rules::MAX_HOOKS).map(|i| obj("Job", &format!("j{i}"), json!({"plumb.dev/hook": "Sync"}))).collect();
        let e = split(&rendered(&many)).unwrap_err().to_string();
        assert!(e.contains("51 hooks: an application declares at most 50 hooks"), "{e}");
    }

    #[test]
    fn a_run_is_renamed_labelled_and_marked_for_its_sync() {
        let run = ObjectKey {
            group: "batch".into(),
            kind: "Job".into(),
            namespace: "web".into(),
            name: "migrate-0123456".into(),
        };
        let body = run_body(
            obj("Job", "migrate", json!({"plumb.dev/hook": "PreSync"})),
            &run,
            "shop",
            "migrate",
            "2026-12-02T10:00:00Z",
        );
        assert_eq!(body.pointer("/metadata/name"), Some(&json!("migrate-0123456")));
        assert_eq!(body.pointer("/metadata/namespace"), Some(&json!("web")));
        assert_eq!(
            body.pointer("/metadata/labels"),
            Some(&json!({"plumb.dev/hook-of": "shop", "plumb.dev/hook-name": "migrate"}))
        );
        assert_eq!(
            body.pointer("/metadata/annotations"),
            Some(&json!({"plumb.dev/hook": "PreSync", "plumb.dev/hook-sync": "2026-12-02T10:00:00Z"}))
        );
        assert!(rules::is_hook_run(&body), "the inventory skips it");
    }

    #[test]
    fn a_run_s_record_says_result_start_finish_and_duration() {
        let Ok(rules::Classified::Hook(hook)) =
            rules::classify(&obj("Job", "m", json!({"plumb.dev/hook": "PreSync", "plumb.dev/hook-timeout": "60"})))
        else {
            panic!("a hook")
        };
        let (created, now) = ("2026-12-02T10:00:00Z", "2026-12-02T10:00:30Z");
        let cases = [
            (HookState::NotCreated, None),
            (HookState::Running(30), Some(("Running", "", 30, ""))),
            (HookState::Running(61), Some(("TimedOut", now, 30, "still running after 61s (timeout 60s)"))),
            (HookState::Succeeded("2026-12-02T10:00:12Z".into()), Some(("Succeeded", "2026-12-02T10:00:12Z", 12, ""))),
            (
                HookState::Failed(String::new(), "DeadlineExceeded".into()),
                Some(("Failed", now, 30, "DeadlineExceeded")),
            ),
        ];
        for (state, want) in cases {
            let got = hook_run(Phase::PreSync, "Job.batch/web/m-0123456", &hook, &state, created, now);
            let got = got
                .as_ref()
                .map(|r| (r.result.as_str(), r.finished_at.as_str(), r.duration_seconds, r.message.as_str()));
            assert_eq!(got, want, "{state:?}");
        }
    }
}
