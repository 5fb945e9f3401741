//! Hooks: objects of an application that run *around* a sync rather than being part
//! of its desired state — a migration Job before the rollout, a smoke test after it,
//! a clean-up when it fails. Pure: what a manifest's annotations make of it
//! ([`classify`]), which hooks a phase runs and in which order ([`phase_hooks`]), what
//! a live hook's state is ([`observe`]) and what a phase does next given those states
//! ([`next_step`]). The IO is `reconcile/hooks.rs`.
//!
//! Annotations (the first present wins, in this order):
//! - `plumb.dev/hook` or Argo CD's `argocd.argoproj.io/hook`: a comma list of
//!   `PreSync`, `Sync`, `PostSync`, `SyncFail`, `PreDelete`, `PostDelete` (Argo CD's
//!   names; Argo CD's `Skip` leaves the object out: neither applied nor a hook);
//! - Helm's `helm.sh/hook`: `pre-install`/`pre-upgrade` → PreSync, `post-install`/
//!   `post-upgrade` → PostSync, `pre-delete` → PreDelete, `post-delete` → PostDelete;
//!   `pre-install` without `pre-upgrade` runs only on the application's first sync
//!   (Helm's install), `pre-upgrade` without `pre-install` only on later ones (the
//!   same for `post-…`); `pre-rollback`/`post-rollback` are not run (plumb has no Helm
//!   rollback) and `test`, `test-success`, `test-failure` are never applied: such an
//!   object is reported as skipped.
//! - delete policy: `plumb.dev/hook-delete-policy`, `argocd.argoproj.io/hook-delete-policy`
//!   (`BeforeHookCreation`, `HookSucceeded`, `HookFailed`) or `helm.sh/hook-delete-policy`
//!   (`before-hook-creation`, `hook-succeeded`, `hook-failed`); a comma list, default
//!   `BeforeHookCreation` (Argo CD's and Helm's default).
//! - order inside a phase: `plumb.dev/sync-wave` (Argo CD orders hooks by wave), else
//!   `helm.sh/hook-weight`, else 0; lowest first, then kind and name. A phase runs its
//!   hooks of one order together and the next order only once they all succeeded.
//! - `plumb.dev/hook-timeout`: seconds a hook may run before it counts as failed
//!   (default [`DEFAULT_TIMEOUT`]).
//!
//! Each sync creates its hooks anew under a name carrying the revision
//! ([`run_name`]: `<name>-<short revision>`): a Job's template is immutable, so a new
//! revision's hook is a new object and never an update of the last one. A hook's own
//! state is read from the live object: a Job is done when its `Complete` (or
//! `SuccessCriteriaMet`) condition is True, failed when `Failed` (or `FailureTarget`) is; a Pod when its phase is `Succeeded`/`Failed`; any
//! other kind is done once created.

use serde_json::Value;

use crate::tracking::ObjectKey;

/// plumb's hook annotation (a comma list of [`Phase`] names).
pub const HOOK_ANNOTATION: &str = "plumb.dev/hook";
/// Argo CD's hook annotation, read as [`HOOK_ANNOTATION`].
pub const ARGO_HOOK_ANNOTATION: &str = "argocd.argoproj.io/hook";
/// Helm's hook annotation (`pre-install`, `post-upgrade`, `test`, …).
pub const HELM_HOOK_ANNOTATION: &str = "helm.sh/hook";
/// plumb's delete policy annotation (a comma list of [`DeletePolicy`] names).
pub const DELETE_POLICY_ANNOTATION: &str = "plumb.dev/hook-delete-policy";
/// Argo CD's delete policy annotation.
pub const ARGO_DELETE_POLICY_ANNOTATION: &str = "argocd.argoproj.io/hook-delete-policy";
/// Helm's delete policy annotation (`before-hook-creation`, `hook-succeeded`, `hook-failed`).
pub const HELM_DELETE_POLICY_ANNOTATION: &str = "helm.sh/hook-delete-policy";
/// Helm's order of hooks (an integer as a string).
pub const HELM_WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
/// Seconds a hook may run before it counts as failed.
pub const TIMEOUT_ANNOTATION: &str = "plumb.dev/hook-timeout";
/// Label on every hook plumb creates, naming the application: the inventory, the
/// orphan listing and prune never count objects carrying it.
pub const HOOK_OF_LABEL: &str = "plumb.dev/hook-of";
/// Label on every hook plumb creates: the hook's name as declared in Git (its live
/// name carries the revision, [`run_name`]).
pub const HOOK_NAME_LABEL: &str = "plumb.dev/hook-name";
/// Annotation on every hook plumb creates: the start (RFC 3339) of the sync that
/// created it. A live hook of another sync is not this sync's run.
pub const HOOK_SYNC_ANNOTATION: &str = "plumb.dev/hook-sync";
/// Default seconds a hook may run (Argo CD has none; Helm's `--timeout` is 5 minutes).
pub const DEFAULT_TIMEOUT: u64 = 300;
/// Most hooks one application may declare (a sync's cost stays bounded: one read per
/// hook per pass while a sync runs).
pub const MAX_HOOKS: usize = 50;

/// When in a sync's life a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// Before anything of the sync is applied or pruned; must succeed.
    PreSync,
    /// With the objects of the sync; must succeed before PostSync.
    Sync,
    /// Once every object is applied and Healthy; a failure fails the sync.
    PostSync,
    /// When the sync failed (a hook or an object).
    SyncFail,
    /// Before the application's objects are deleted (decommission).
    PreDelete,
    /// After the application's objects are deleted (decommission).
    PostDelete,
}

impl Phase {
    /// The phase's name as annotations write it (`PreSync`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::PreSync => "PreSync",
            Phase::Sync => "Sync",
            Phase::PostSync => "PostSync",
            Phase::SyncFail => "SyncFail",
            Phase::PreDelete => "PreDelete",
            Phase::PostDelete => "PostDelete",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a hook of a phase runs: always, or (Helm's `pre-install` / `pre-upgrade` alone)
/// only on the application's first sync or only on later ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every sync.
    Always,
    /// Only the application's first sync (Helm's install).
    FirstSync,
    /// Only syncs after the first (Helm's upgrade).
    LaterSyncs,
}

/// What happens to a hook plumb created once it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletePolicy {
    /// The last run of the hook is deleted before the next one is created (default).
    BeforeHookCreation,
    /// Deleted once it succeeded (when the sync ends).
    HookSucceeded,
    /// Deleted once it failed (when the sync ends).
    HookFailed,
}

/// One hook declared in Git.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// Its identity as declared (namespace defaulted by the caller): its live name is
    /// [`run_name`] of this name.
    pub key: ObjectKey,
    /// The phases it runs in, each with when.
    pub phases: Vec<(Phase, When)>,
    /// What happens once it finished.
    pub delete: Vec<DeletePolicy>,
    /// Order inside a phase (lowest first).
    pub order: i32,
    /// Seconds it may run.
    pub timeout: u64,
}

impl Hook {
    /// Whether it runs in `phase` of a sync (`first`: the application's first sync).
    pub fn runs_in(&self, phase: Phase, first: bool) -> bool {
        self.phases.iter().any(|&(p, w)| {
            p == phase
                && match w {
                    When::Always => true,
                    When::FirstSync => first,
                    When::LaterSyncs => !first,
                }
        })
    }
}

/// What a manifest's annotations make of it.
#[derive(Debug, Clone, PartialEq)]
pub enum Classified {
    /// An ordinary object of the desired state.
    Object,
    /// A hook (its key's namespace as written: empty when not given).
    Hook(Hook),
    /// Neither applied nor run (Helm `test`, rollback-only hooks, Argo CD `Skip`): why.
    Skipped(String),
}

/// What the annotations of `obj` make of it (rules in the module docs).
///
/// # Errors
/// An unknown hook or delete policy name, or a weight/timeout that is not a number:
/// the message names the annotation and the value (the caller adds the object).
pub fn classify(obj: &Value) -> Result<Classified, String> {
    let ann = |name: &str| obj.pointer("/metadata/annotations").and_then(|a| a.get(name)).and_then(Value::as_str);
    let Some(key) = ObjectKey::of(obj) else { return Ok(Classified::Object) };
    let phases = if let Some((name, v)) =
        [HOOK_ANNOTATION, ARGO_HOOK_ANNOTATION].into_iter().find_map(|n| ann(n).map(|v| (n, v)))
    {
        let mut phases = Vec::new();
        for word in list(v) {
            let phase = match word {
                "PreSync" => Phase::PreSync,
                "Sync" => Phase::Sync,
                "PostSync" => Phase::PostSync,
                "SyncFail" => Phase::SyncFail,
                "PreDelete" => Phase::PreDelete,
                "PostDelete" => Phase::PostDelete,
                "Skip" => return Ok(Classified::Skipped(format!("{name}: Skip"))),
                other => {
                    return Err(format!(
                        "annotation {name}: unknown hook `{other}` (PreSync, Sync, PostSync, SyncFail, PreDelete, PostDelete, Skip)"
                    ));
                }
            };
            phases.push((phase, When::Always));
        }
        phases
    } else if let Some(v) = ann(HELM_HOOK_ANNOTATION) {
        match helm_phases(v)? {
            Some(p) => p,
            None => return Ok(Classified::Skipped(format!("{HELM_HOOK_ANNOTATION}: {v} (never applied by plumb)"))),
        }
    } else {
        return Ok(Classified::Object);
    };
    if phases.is_empty() {
        return Err(format!("annotation {HOOK_ANNOTATION}: no hook named"));
    }
    let delete = delete_policies(ann)?;
    let order = match (ann(crate::plan::SYNC_WAVE_ANNOTATION), ann(HELM_WEIGHT_ANNOTATION)) {
        (Some(_), _) => crate::plan::sync_wave(obj)?,
        (None, Some(w)) => w.trim().parse().map_err(|_| {
            format!("annotation {HELM_WEIGHT_ANNOTATION}: `{w}` is not an integer (e.g. \"-5\", \"0\")")
        })?,
        (None, None) => 0,
    };
    let timeout = match ann(TIMEOUT_ANNOTATION) {
        None => DEFAULT_TIMEOUT,
        Some(t) => t.trim().parse().ok().filter(|&s: &u64| s > 0).ok_or_else(|| {
            format!("annotation {TIMEOUT_ANNOTATION}: `{t}` is not a positive number of seconds (e.g. \"600\")")
        })?,
    };
    Ok(Classified::Hook(Hook { key, phases, delete, order, timeout }))
}

/// The words of a comma list, trimmed, empty ones left out.
fn list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|w| !w.is_empty())
}

/// The phases of Helm hook list `v`; `None` when it names no hook plumb runs (only
/// tests or rollback hooks).
fn helm_phases(v: &str) -> Result<Option<Vec<(Phase, When)>>, String> {
    let words: Vec<&str> = list(v).collect();
    let mut phases = Vec::new();
    for (install, upgrade, phase) in
        [("pre-install", "pre-upgrade", Phase::PreSync), ("post-install", "post-upgrade", Phase::PostSync)]
    {
        match (words.contains(&install), words.contains(&upgrade)) {
            (true, true) => phases.push((phase, When::Always)),
            (true, false) => phases.push((phase, When::FirstSync)),
            (false, true) => phases.push((phase, When::LaterSyncs)),
            (false, false) => {}
        }
    }
    for (word, phase) in [("pre-delete", Phase::PreDelete), ("post-delete", Phase::PostDelete)] {
        if words.contains(&word) {
            phases.push((phase, When::Always));
        }
    }
    const KNOWN: [&str; 11] = [
        "pre-install",
        "pre-upgrade",
        "post-install",
        "post-upgrade",
        "pre-delete",
        "post-delete",
        "pre-rollback",
        "post-rollback",
        "test",
        "test-success",
        "test-failure",
    ];
    if let Some(other) = words.iter().find(|w| !KNOWN.contains(w)) {
        return Err(format!("annotation {HELM_HOOK_ANNOTATION}: unknown hook `{other}` ({})", KNOWN.join(", ")));
    }
    // a test is never applied, whatever else the list names (`helm test` runs it)
    let test = words.iter().any(|w| w.starts_with("test"));
    Ok((!phases.is_empty() && !test).then_some(phases))
}

/// The delete policies the annotations (`ann` reads one) name; the default when none.
fn delete_policies<'a>(ann: impl Fn(&str) -> Option<&'a str>) -> Result<Vec<DeletePolicy>, String> {
    let mut out = Vec::new();
    if let Some((name, v)) =
        [DELETE_POLICY_ANNOTATION, ARGO_DELETE_POLICY_ANNOTATION].into_iter().find_map(|n| ann(n).map(|v| (n, v)))
    {
        for w in list(v) {
            out.push(match w {
                "BeforeHookCreation" => DeletePolicy::BeforeHookCreation,
                "HookSucceeded" => DeletePolicy::HookSucceeded,
                "HookFailed" => DeletePolicy::HookFailed,
                other => {
                    return Err(format!(
                        "annotation {name}: unknown delete policy `{other}` (BeforeHookCreation, HookSucceeded, HookFailed)"
                    ));
                }
            });
        }
    } else if let Some(v) = ann(HELM_DELETE_POLICY_ANNOTATION) {
        for w in list(v) {
            out.push(match w {
                "before-hook-creation" => DeletePolicy::BeforeHookCreation,
                "hook-succeeded" => DeletePolicy::HookSucceeded,
                "hook-failed" => DeletePolicy::HookFailed,
                other => {
                    return Err(format!(
                        "annotation {HELM_DELETE_POLICY_ANNOTATION}: unknown delete policy `{other}` (before-hook-creation, hook-succeeded, hook-failed)"
                    ));
                }
            });
        }
    }
    if out.is_empty() {
        out.push(DeletePolicy::BeforeHookCreation);
    }
    Ok(out)
}

/// The live name of hook `name` run by a sync of `revision`: `<name>-<first 7
/// characters>`, the name cut so that the whole is at most 63 characters (a Job's
/// name becomes a label value of its pods) and does not end in `-` or `.` before the
/// suffix.
pub fn run_name(name: &str, revision: &str) -> String {
    let short = crate::status::short(revision);
    let room = 63usize.saturating_sub(short.len() + 1);
    let mut base: &str = name;
    if base.len() > room {
        let mut end = room;
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        base = &base[..end];
    }
    let base = base.trim_end_matches(['-', '.']);
    format!("{base}-{short}")
}

/// Hook name `name` as the value of label [`HOOK_NAME_LABEL`]: itself when it fits a
/// label value (at most 63 characters: Kubernetes' label syntax), else its first 54
/// characters and 8 hex digits of its SHA-256 (distinct names stay distinct).
pub fn name_label(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hex = hex::encode(&digest[..4]);
    // a DNS name is ASCII: byte 54 is a character boundary
    let head = name.get(..54).unwrap_or(name).trim_end_matches(['-', '.']);
    format!("{head}-{hex}")
}

/// Which of `hooks` run in `phase` of a sync (`first`: the application's first sync),
/// as indexes into `hooks`, by order, then kind and name.
pub fn phase_hooks<'a>(hooks: impl IntoIterator<Item = &'a Hook>, phase: Phase, first: bool) -> Vec<usize> {
    let mut out: Vec<(usize, &Hook)> = hooks.into_iter().enumerate().filter(|(_, h)| h.runs_in(phase, first)).collect();
    out.sort_by(|(_, a), (_, b)| (a.order, &a.key.kind, &a.key.name).cmp(&(b.order, &b.key.kind, &b.key.name)));
    out.into_iter().map(|(i, _)| i).collect()
}

/// The state of one hook of a sync, as its live object shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookState {
    /// Not created by this sync (absent, or left by another sync).
    NotCreated,
    /// Created and not finished: for how many seconds.
    Running(u64),
    /// Done: when (RFC 3339, empty when the object does not say).
    Succeeded(String),
    /// Failed: when, and why (the object's own words).
    Failed(String, String),
}

/// The state of hook run `live` (`None`: absent) for the sync that started at
/// `sync_started` (RFC 3339; compared with the run's [`HOOK_SYNC_ANNOTATION`]), at `now`.
pub fn observe(live: Option<&Value>, sync_started: &str, now: jiff::Timestamp) -> HookState {
    let Some(obj) = live else { return HookState::NotCreated };
    let mark = obj.pointer("/metadata/annotations").and_then(|a| a.get(HOOK_SYNC_ANNOTATION)).and_then(Value::as_str);
    if mark != Some(sync_started) || obj.pointer("/metadata/deletionTimestamp").is_some() {
        return HookState::NotCreated;
    }
    state_of(obj, now)
}

/// The state of live hook object `obj` at `now`, whoever created it: a Job by its
/// conditions (`Failed`/`FailureTarget`, `Complete`/`SuccessCriteriaMet`), a Pod by its
/// phase, any other kind done once it exists.
pub fn state_of(obj: &Value, now: jiff::Timestamp) -> HookState {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    let created = text("/metadata/creationTimestamp").parse::<jiff::Timestamp>().ok();
    let age = created.map_or(0, |c| u64::try_from((now.as_second() - c.as_second()).max(0)).unwrap_or(0));
    match obj.get("kind").and_then(Value::as_str) {
        Some("Job") => {
            let conditions = obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let is_true = |t: &str| {
                conditions.iter().find(|c| {
                    c.get("type").and_then(Value::as_str) == Some(t)
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            };
            let at = |c: &Value| c.get("lastTransitionTime").and_then(Value::as_str).unwrap_or_default().to_string();
            // `FailureTarget` / `SuccessCriteriaMet`: the Job controller decided (Kubernetes
            // 1.31+ sets `Failed` / `Complete` only once every pod terminated, which a
            // pod on a lost node never does)
            if let Some(c) = is_true("Failed").or_else(|| is_true("FailureTarget")) {
                let why = [c.get("reason"), c.get("message")]
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(": ");
                return HookState::Failed(at(c), if why.is_empty() { "Job failed".into() } else { why });
            }
            if let Some(c) = is_true("Complete").or_else(|| is_true("SuccessCriteriaMet")) {
                let done = text("/status/completionTime");
                return HookState::Succeeded(if done.is_empty() { at(c) } else { done });
            }
            HookState::Running(age)
        }
        Some("Pod") => match obj.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => HookState::Succeeded(String::new()),
            Some("Failed") => {
                let why = [text("/status/reason"), text("/status/message")]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                HookState::Failed(String::new(), if why.is_empty() { "Pod failed".into() } else { why })
            }
            _ => HookState::Running(age),
        },
        _ => HookState::Succeeded(text("/metadata/creationTimestamp")),
    }
}

/// What a phase does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create these hooks now (indexes into the phase's hooks): the next order.
    Create(Vec<usize>),
    /// Hooks run: the message names them.
    Wait(String),
    /// Every hook of the phase succeeded (or it has none).
    Done,
    /// A hook failed or timed out: the message names it and why.
    Failed(String),
}

/// The next step of `phase` whose hooks are `hooks` (as [`phase_hooks`] orders them)
/// and their states `states` (same order; `names[i]` the live `kind/namespace/name` of
/// hook `i`). Hooks of one order run together; the next order starts once they all
/// succeeded; a failure (or a run longer than the hook's timeout) fails the phase.
pub fn next_step(phase: Phase, hooks: &[&Hook], states: &[HookState], names: &[String]) -> Step {
    let mut i = 0;
    while i < hooks.len() {
        let order = hooks[i].order;
        let group: Vec<usize> = (i..hooks.len()).take_while(|&j| hooks[j].order == order).collect();
        i += group.len();
        for &j in &group {
            match &states[j] {
                HookState::Failed(_, why) => return Step::Failed(format!("{phase} hook {} failed: {why}", names[j])),
                HookState::Running(age) if *age > hooks[j].timeout => {
                    return Step::Failed(format!(
                        "{phase} hook {} timed out: still running after {age}s (timeout {}s, {TIMEOUT_ANNOTATION})",
                        names[j], hooks[j].timeout
                    ));
                }
                _ => {}
            }
        }
        let missing: Vec<usize> = group.iter().copied().filter(|&j| states[j] == HookState::NotCreated).collect();
        if !missing.is_empty() {
            return Step::Create(missing);
        }
        let running: Vec<String> =
            group.iter().filter(|&&j| matches!(states[j], HookState::Running(_))).map(|&j| names[j].clone()).collect();
        if !running.is_empty() {
            return Step::Wait(format!("waiting for {phase} hook(s) to complete: {}", running.join(", ")));
        }
    }
    Step::Done
}

/// Whether live object `obj` is a hook plumb ran (it carries [`HOOK_OF_LABEL`]): never
/// part of an application's inventory, never an orphan, never pruned.
pub fn is_hook_run(obj: &Value) -> bool {
    obj.pointer("/metadata/labels").and_then(|l| l.get(HOOK_OF_LABEL)).is_some()
}

/// The application whose hook run live object `obj` is ([`HOOK_OF_LABEL`]), if any.
pub fn hook_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/labels").and_then(|l| l.get(HOOK_OF_LABEL)).and_then(Value::as_str)
}

/// Whether a finished run of `hook` is deleted when its sync ends: `succeeded` says
/// how it ended.
pub fn deleted_after(hook: &Hook, succeeded: bool) -> bool {
    hook.delete.contains(if succeeded { &DeletePolicy::HookSucceeded } else { &DeletePolicy::HookFailed })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn obj(annotations: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "annotations": annotations}})
    }

    fn hook(annotations: Value) -> Hook {
        match classify(&obj(annotations)).unwrap() {
            Classified::Hook(h) => h,
            other => panic!("not a hook: {other:?}"),
        }
    }

    #[test]
    fn annotations_make_phases_in_plumb_argo_and_helm_words() {
        use Phase::*;
        use When::*;
        let cases: &[(Value, &[(Phase, When)])] = &[
            (json!({"plumb.dev/hook": "PreSync"}), &[(PreSync, Always)]),
            (json!({"plumb.dev/hook": "PreSync, SyncFail"}), &[(PreSync, Always), (SyncFail, Always)]),
            (json!({"argocd.argoproj.io/hook": "PostSync"}), &[(PostSync, Always)]),
            (json!({"argocd.argoproj.io/hook": "PreDelete,PostDelete"}), &[(PreDelete, Always), (PostDelete, Always)]),
            // plumb's annotation wins over Argo CD's and Helm's
            (json!({"plumb.dev/hook": "Sync", "helm.sh/hook": "post-install"}), &[(Sync, Always)]),
            (json!({"helm.sh/hook": "pre-install,pre-upgrade"}), &[(PreSync, Always)]),
            (json!({"helm.sh/hook": "pre-install"}), &[(PreSync, FirstSync)]),
            (json!({"helm.sh/hook": "pre-upgrade"}), &[(PreSync, LaterSyncs)]),
            (json!({"helm.sh/hook": "post-install"}), &[(PostSync, FirstSync)]),
            (json!({"helm.sh/hook": "post-install,post-upgrade"}), &[(PostSync, Always)]),
            (json!({"helm.sh/hook": "pre-upgrade,post-install"}), &[(PreSync, LaterSyncs), (PostSync, FirstSync)]),
            (json!({"helm.sh/hook": "pre-delete"}), &[(PreDelete, Always)]),
            (json!({"helm.sh/hook": "post-delete"}), &[(PostDelete, Always)]),
            (json!({"helm.sh/hook": "pre-rollback,post-upgrade"}), &[(PostSync, LaterSyncs)]),
        ];
        for (annotations, want) in cases {
            assert_eq!(hook(annotations.clone()).phases, *want, "{annotations}");
        }
    }

    #[test]
    fn tests_rollbacks_and_skip_are_never_applied_and_plain_objects_stay_objects() {
        for annotations in [
            json!({"helm.sh/hook": "test"}),
            json!({"helm.sh/hook": "test-success"}),
            json!({"helm.sh/hook": "test-failure"}),
            json!({"helm.sh/hook": "post-install,test"}),
            json!({"helm.sh/hook": "pre-rollback"}),
            json!({"helm.sh/hook": "post-rollback"}),
            json!({"argocd.argoproj.io/hook": "Skip"}),
        ] {
            assert!(matches!(classify(&obj(annotations.clone())), Ok(Classified::Skipped(_))), "{annotations}");
        }
        assert_eq!(classify(&obj(json!({"plumb.dev/sync-wave": "2"}))), Ok(Classified::Object));
        assert_eq!(classify(&json!({"kind": "ConfigMap"})), Ok(Classified::Object));
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_the_annotation_and_the_value() {
        let cases = [
            (json!({"plumb.dev/hook": "PreSynk"}), "annotation plumb.dev/hook: unknown hook `PreSynk`"),
            (json!({"argocd.argoproj.io/hook": "Post"}), "annotation argocd.argoproj.io/hook: unknown hook `Post`"),
            (json!({"helm.sh/hook": "pre-instal"}), "annotation helm.sh/hook: unknown hook `pre-instal`"),
            (
                json!({"plumb.dev/hook": "PreSync", "plumb.dev/hook-delete-policy": "Never"}),
                "annotation plumb.dev/hook-delete-policy: unknown delete policy `Never`",
            ),
            (
                json!({"helm.sh/hook": "pre-install", "helm.sh/hook-delete-policy": "HookSucceeded"}),
                "annotation helm.sh/hook-delete-policy: unknown delete policy `HookSucceeded`",
            ),
            (json!({"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "x"}), "helm.sh/hook-weight: `x`"),
            (json!({"plumb.dev/hook": "PreSync", "plumb.dev/hook-timeout": "0"}), "plumb.dev/hook-timeout: `0`"),
            (json!({"plumb.dev/hook": " , "}), "no hook named"),
        ];
        for (annotations, want) in cases {
            let err = classify(&obj(annotations.clone())).unwrap_err();
            assert!(err.contains(want), "{annotations}: {err}");
        }
    }

    #[test]
    fn delete_policies_order_and_timeout_are_read() {
        use DeletePolicy::*;
        let h = hook(json!({"plumb.dev/hook": "PreSync"}));
        assert_eq!((h.delete, h.order, h.timeout), (vec![BeforeHookCreation], 0, DEFAULT_TIMEOUT));
        let h = hook(json!({"plumb.dev/hook": "PreSync", "plumb.dev/hook-delete-policy": "HookSucceeded,HookFailed",
            "plumb.dev/sync-wave": "-2", "plumb.dev/hook-timeout": "30"}));
        assert_eq!((h.delete, h.order, h.timeout), (vec![HookSucceeded, HookFailed], -2, 30));
        let h =
            hook(json!({"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/hook-delete-policy": "HookFailed"}));
        assert_eq!(h.delete, vec![HookFailed]);
        let h = hook(json!({"helm.sh/hook": "post-install", "helm.sh/hook-weight": "5",
            "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}));
        assert_eq!((h.delete, h.order), (vec![BeforeHookCreation, HookSucceeded], 5));
        // the wave wins over Helm's weight
        let h = hook(json!({"helm.sh/hook": "post-install", "helm.sh/hook-weight": "5", "plumb.dev/sync-wave": "1"}));
        assert_eq!(h.order, 1);
        assert!(deleted_after(
            &hook(json!({"plumb.dev/hook": "Sync", "plumb.dev/hook-delete-policy": "HookSucceeded"})),
            true
        ));
        assert!(!deleted_after(
            &hook(json!({"plumb.dev/hook": "Sync", "plumb.dev/hook-delete-policy": "HookSucceeded"})),
            false
        ));
        assert!(!deleted_after(&hook(json!({"plumb.dev/hook": "Sync"})), true));
    }

    #[test]
    fn a_hook_run_is_known_by_its_label() {
        let run = json!({"metadata": {"labels": {HOOK_OF_LABEL: "shop"}}});
        assert_eq!((is_hook_run(&run), hook_of(&run)), (true, Some("shop")));
        let plain = json!({"metadata": {"labels": {"plumb.dev/app": "shop"}}});
        assert_eq!((is_hook_run(&plain), hook_of(&plain)), (false, None));
    }

    #[test]
    fn a_run_name_carries_the_revision_within_63_characters() {
        let rev = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(run_name("migrate", rev), "migrate-0123456");
        let long = "a".repeat(60);
        let name = run_name(&long, rev);
        assert_eq!((name.len(), name.ends_with("-0123456")), (63, true));
        let dashed = format!("{}-b", "a".repeat(54));
        assert_eq!(run_name(&dashed, rev), format!("{}-0123456", "a".repeat(54)), "no `--` left by the cut");
    }

    #[test]
    fn a_long_hook_name_fits_its_label_and_stays_distinct() {
        assert_eq!(name_label("migrate"), "migrate");
        let (a, b) = (format!("{}-one", "x".repeat(70)), format!("{}-two", "x".repeat(70)));
        let (la, lb) = (name_label(&a), name_label(&b));
        assert!(la.len() <= 63 && lb.len() <= 63, "{la} {lb}");
        assert_ne!(la, lb);
        assert!(
            la.starts_with(&"x".repeat(54)) && la.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()),
            "{la}"
        );
    }

    #[test]
    fn a_phase_runs_its_hooks_by_order_kind_and_name_first_sync_or_later() {
        let mk = |name: &str, ann: Value| {
            let mut h = hook(ann);
            h.key.name = name.into();
            h
        };
        let hooks = vec![
            mk("late", json!({"plumb.dev/hook": "PreSync", "plumb.dev/sync-wave": "1"})),
            mk("b", json!({"plumb.dev/hook": "PreSync"})),
            mk("a", json!({"plumb.dev/hook": "PreSync"})),
            mk("install", json!({"helm.sh/hook": "pre-install"})),
            mk("upgrade", json!({"helm.sh/hook": "pre-upgrade"})),
            mk("after", json!({"plumb.dev/hook": "PostSync"})),
        ];
        let names = |first| {
            phase_hooks(&hooks, Phase::PreSync, first).iter().map(|&i| hooks[i].key.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(true), ["a", "b", "install", "late"]);
        assert_eq!(names(false), ["a", "b", "upgrade", "late"]);
        assert_eq!(phase_hooks(&hooks, Phase::PostSync, false).len(), 1);
        assert!(phase_hooks(&hooks, Phase::SyncFail, false).is_empty());
    }

    fn job(mark: &str, conditions: Value) -> Value {
        json!({"kind": "Job", "metadata": {"name": "m", "creationTimestamp": "2026-12-02T10:00:00Z",
            "annotations": {HOOK_SYNC_ANNOTATION: mark}}, "status": {"conditions": conditions,
            "completionTime": "2026-12-02T10:00:09Z"}})
    }

    #[test]
    fn a_live_hook_s_state_is_read_from_its_own_object() {
        let now: jiff::Timestamp = "2026-12-02T10:01:00Z".parse().unwrap();
        let t = "2026-12-02T09:59:00Z";
        let complete = json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-02T10:00:09Z"}]);
        let failed = json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
            "message": "Job was active longer than specified deadline", "lastTransitionTime": "2026-12-02T10:00:02Z"}]);
        let pod = |phase: &str| json!({"kind": "Pod", "metadata": {"annotations": {HOOK_SYNC_ANNOTATION: t}}, "status": {"phase": phase}});
        let cm = json!({"kind": "ConfigMap", "metadata": {"creationTimestamp": "2026-12-02T10:00:00Z", "annotations": {HOOK_SYNC_ANNOTATION: t}}});
        let cases: Vec<(Option<Value>, HookState)> = vec![
            (None, HookState::NotCreated),
            (Some(job("2026-12-01T00:00:00Z", complete.clone())), HookState::NotCreated), // another sync's run
            (Some(job(t, json!([]))), HookState::Running(60)),
            (Some(job(t, complete)), HookState::Succeeded("2026-12-02T10:00:09Z".into())),
            (
                Some(job(t, failed)),
                HookState::Failed(
                    "2026-12-02T10:00:02Z".into(),
                    "DeadlineExceeded: Job was active longer than specified deadline".into(),
                ),
            ),
            (
                Some(job(t, json!([{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"}]))),
                HookState::Failed(String::new(), "DeadlineExceeded".into()),
            ),
            (
                Some(job(t, json!([{"type": "SuccessCriteriaMet", "status": "True"}]))),
                HookState::Succeeded("2026-12-02T10:00:09Z".into()),
            ),
            (Some(pod("Running")), HookState::Running(0)),
            (Some(pod("Succeeded")), HookState::Succeeded(String::new())),
            (Some(pod("Failed")), HookState::Failed(String::new(), "Pod failed".into())),
            (Some(cm), HookState::Succeeded("2026-12-02T10:00:00Z".into())),
        ];
        for (live, want) in cases {
            assert_eq!(observe(live.as_ref(), t, now), want, "{live:?}");
        }
    }

    #[test]
    fn a_phase_creates_the_next_order_waits_and_fails_on_the_first_failure() {
        use HookState::*;
        let mut a = hook(json!({"plumb.dev/hook": "PreSync"}));
        a.timeout = 100;
        let b = Hook { order: 1, ..a.clone() };
        let c = Hook { order: 1, ..a.clone() };
        let hooks = [&a, &b, &c];
        let names: Vec<String> = ["Job/ns/a", "Job/ns/b", "Job/ns/c"].map(String::from).to_vec();
        let ok = || Succeeded(String::new());
        let cases: Vec<([HookState; 3], Step)> = vec![
            ([NotCreated, NotCreated, NotCreated], Step::Create(vec![0])),
            (
                [Running(5), NotCreated, NotCreated],
                Step::Wait("waiting for PreSync hook(s) to complete: Job/ns/a".into()),
            ),
            ([ok(), NotCreated, NotCreated], Step::Create(vec![1, 2])),
            ([ok(), Running(1), ok()], Step::Wait("waiting for PreSync hook(s) to complete: Job/ns/b".into())),
            ([ok(), ok(), ok()], Step::Done),
            (
                [Failed(String::new(), "BackoffLimitExceeded".into()), NotCreated, NotCreated],
                Step::Failed("PreSync hook Job/ns/a failed: BackoffLimitExceeded".into()),
            ),
            (
                [Running(101), NotCreated, NotCreated],
                Step::Failed(
                    "PreSync hook Job/ns/a timed out: still running after 101s (timeout 100s, plumb.dev/hook-timeout)"
                        .into(),
                ),
            ),
        ];
        for (states, want) in cases {
            assert_eq!(next_step(Phase::PreSync, &hooks, &states, &names), want, "{states:?}");
        }
        assert_eq!(next_step(Phase::PostSync, &[], &[], &[]), Step::Done);
    }
}
