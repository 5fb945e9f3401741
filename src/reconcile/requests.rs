//! Stage 0 of a pass: what people asked on the application's resource
//! (`applications.plumb.dev`, see [`crate::status::store::Controls`]) and what it changes for
//! this pass: a new sync request makes it a manual sync, a pause in force holds
//! automated sync and selfHeal, a pin replaces the tracked ref's head by a recorded
//! revision (`plumb rollback`).

use super::{Error, Io, Mode};
use crate::{
    config::{Application, Environment, Repository},
    render,
    status::{
        self, AppStatus, Condition, ConditionType, EventReason, Pin, ROLLBACK_ANNOTATION, SUSPEND_ANNOTATION, short,
    },
};

/// What the requests change for one pass, and what its status shows of them.
pub(super) struct Requested {
    /// The pass's mode (a new sync request turns a policy pass into a manual sync).
    pub mode: Mode,
    /// The revision to compare instead of the tracked ref (a pin).
    pub revision: Option<String>,
    /// Automated sync and selfHeal are paused.
    pub paused: bool,
    /// The requests as read.
    pub controls: status::store::Controls,
    /// The sync request handled (`status.syncRequest`).
    pub sync_request: String,
    /// The pause in force (`status.suspended`).
    pub suspended: Option<status::Suspension>,
    /// The pin in force (`status.pinned`).
    pub pinned: Option<Pin>,
    /// What the status says of them (`SyncPaused`, `Pinned`, a refused pin's
    /// `SyncError`).
    pub conditions: Vec<Condition>,
}

impl Requested {
    /// No request in force: `mode` as asked.
    pub fn none(mode: Mode) -> Self {
        Self {
            mode,
            revision: None,
            paused: false,
            controls: status::store::Controls::default(),
            sync_request: String::new(),
            suspended: None,
            pinned: None,
            conditions: vec![],
        }
    }
}

impl Io<'_> {
    /// Reads the requests on `app`'s resource: what they change for this pass and what
    /// its status shows of those in force (the pause, the pin, the handled sync
    /// request), with their Events. Previews and comparisons only show the pause and
    /// pin; they act on none. `now` tells whether a pause is in force.
    ///
    /// # Errors
    /// [`Error::Status`] when the resource cannot be read. A pin that cannot be
    /// resolved or is refused is a `SyncError` condition, not an error: the pass goes
    /// on with the tracked ref.
    pub(super) async fn requested(
        self,
        previous: &AppStatus,
        (app, env, repo): (&Application, &Environment, &Repository),
        mode: Mode,
        now: jiff::Timestamp,
    ) -> Result<Requested, Error> {
        let name = app.name.value.as_str();
        // a preview shows what it can: one who may not read the resource still may diff
        let controls = match self.controls_of(name).await {
            Ok(c) => c,
            Err(e) if !mode.writes() => {
                tracing::debug!(app = name, "requests not read: {e}");
                status::store::Controls::default()
            }
            Err(e) => return Err(e),
        };
        let mut out = Requested::none(mode);
        out.sync_request.clone_from(&previous.sync_request);
        if mode == Mode::Policy
            && let Some(v) = &controls.sync
            && *v != previous.sync_request
        {
            out.mode = Mode::Manual { prune: env.sync_policy.prune, approve: false };
            out.sync_request.clone_from(v);
            tracing::info!(app = name, "sync requested on applications.plumb.dev/{name} at {v}");
        }
        self.pause(&mut out, previous, &controls, (name, env, app.self_management), mode, now).await?;
        if mode.writes() && previous.suspended != out.suspended && !previous.app.is_empty() {
            let note = match &out.suspended {
                Some(s) => format!("paused {}", s.describe(env.max_pause())),
                None => "automated sync resumed".to_string(),
            };
            let reason = if out.suspended.is_some() { EventReason::Paused } else { EventReason::Resumed };
            self.event(name, false, reason, note).await;
        }
        match controls.pin.clone() {
            Some(pin) => {
                let overridden = controls.pin_override.as_deref();
                self.pin(&mut out, (previous, overridden), pin, (app, repo), mode).await?;
            }
            None if mode.writes() && previous.pinned.is_some() => {
                let note = "pin released: the tracked ref is synced again".into();
                self.event(name, false, EventReason::PinReleased, note).await;
            }
            None => {}
        }
        out.controls = controls;
        Ok(out)
    }

    /// The pause in force into `out`: the request capped at the environment's
    /// `maxPause` from when plumb first saw it ([`status::Suspension::capped`]). A pause
    /// that ran out at its cap is removed from the resource when `mode` writes (else
    /// the same request would count as new, and pause again).
    async fn pause(
        self,
        out: &mut Requested,
        previous: &AppStatus,
        controls: &status::store::Controls,
        (name, env, self_managed): (&str, &Environment, bool),
        mode: Mode,
        now: jiff::Timestamp,
    ) -> Result<(), Error> {
        let Some(asked) = controls.suspend.clone() else { return Ok(()) };
        if self_managed {
            // a pause would hold back an administrator's change to plumb's own policy
            out.conditions.push(Condition::new(ConditionType::SyncError, SELF_PAUSE_REFUSED));
            return Ok(());
        }
        let pause = asked.capped(previous.suspended.as_ref(), env.max_pause(), now);
        if pause.in_force(now) {
            out.paused = true;
            let message = format!("automated sync and selfHeal paused {}", pause.describe(env.max_pause()));
            out.conditions.push(Condition::new(ConditionType::SyncPaused, message));
            out.suspended = Some(pause);
        } else if !pause.asked_until.is_empty() && mode.writes() {
            self.store.annotate(name, SUSPEND_ANNOTATION, None).await?;
            tracing::info!(app = name, "pause ended at the environment's maxPause; {SUSPEND_ANNOTATION} removed");
        }
        Ok(())
    }

    /// Resolves a pin into `out`: the revision to compare and the pin in force, or
    /// neither when it is released (the tracked ref moved with `until_next_commit`) or
    /// refused (unresolvable; outside the tracked history without the override right,
    /// see [`Io::pin_allowed`]). The name the request gives is resolved once, when the
    /// pin is first seen, and the commit recorded (`pinned.revision`, `pinned.requested`):
    /// a pin never follows a branch.
    async fn pin(
        self,
        out: &mut Requested,
        (previous, overridden): (&AppStatus, Option<&str>),
        mut pin: Pin,
        (app, repo): (&Application, &Repository),
        mode: Mode,
    ) -> Result<(), Error> {
        let name = app.name.value.as_str();
        let tracked = &app.revision.value;
        let requested = std::mem::take(&mut pin.revision);
        // the same request as the pin in force: its commit as recorded, never resolved again
        let same = previous
            .pinned
            .as_ref()
            .filter(|p| p.at == pin.at && p.requested == requested && !p.tracked.is_empty() && !p.revision.is_empty());
        let resolved = match self.sources.resolve(repo, tracked).await {
            Ok(head) => match same {
                Some(p) => Ok((head, p.revision.clone())),
                None => self.sources.resolve(repo, &requested).await.map(|target| (head, target)),
            },
            Err(e) => Err(e),
        };
        let (head, target) = match resolved {
            Ok(found) => found,
            Err(e) => {
                let message = format!("rollback to {requested} not applied: {e}");
                out.conditions.push(Condition::new(ConditionType::SyncError, message));
                return Ok(());
            }
        };
        pin.tracked = same.map_or_else(|| head.clone(), |p| p.tracked.clone());
        // `--until-next-commit` ends on the first commit that changes what the
        // application renders: another team's commit elsewhere keeps the pin
        let mut unchanged = None;
        if pin.until_next_commit && head != pin.tracked {
            match self.inputs_changed(name, repo, &pin.tracked, &head).await {
                Ok(true) => {
                    if mode.writes() {
                        self.release_pin(name).await?;
                        let note = format!(
                            "pin to {} released: {tracked} moved to {}, which changes what {name} renders",
                            short(&target),
                            short(&head)
                        );
                        self.event(name, false, EventReason::PinReleased, note).await;
                    }
                    return Ok(());
                }
                Ok(false) => unchanged = Some(format!("; {} changes nothing {name} renders", short(&head))),
                Err(e) => {
                    unchanged = Some(format!("; whether {} changes what {name} renders is unknown ({e})", short(&head)))
                }
            }
        }
        let override_asked = pin.force && overridden == Some(requested.as_str());
        let checked = (previous, override_asked, app.self_management);
        if let Err(why) = self.pin_allowed((name, repo, tracked), (&head, &target), checked).await? {
            out.conditions.push(Condition::new(ConditionType::SyncError, why));
            return Ok(());
        }
        pin.revision.clone_from(&target);
        pin.requested = requested;
        let until = if pin.until_next_commit { "the next commit of" } else { "`plumb rollback --release`; commits of" };
        let message = format!(
            "pinned to {} at {} (rollback{}): {until} {tracked} are not synced{}",
            short(&target),
            pin.at,
            claimed(&pin.by),
            if pin.until_next_commit { " until then" } else { "" }
        ) + unchanged.as_deref().unwrap_or_default();
        out.conditions.push(Condition::new(ConditionType::Pinned, message));
        if mode.writes() && previous.pinned.as_ref().is_none_or(|p| p.at != pin.at) {
            let note = format!("pinned to {} (rollback{})", short(&target), claimed(&pin.by));
            self.event(name, false, EventReason::Pinned, note).await;
        }
        out.pinned = Some(pin);
        out.revision = Some(target);
        Ok(())
    }

    /// Whether commit `new` of `repo` changes what application `app` renders at commit
    /// `old` ([`crate::source::Pool::render_inputs`]).
    ///
    /// # Errors
    /// The render inputs of either commit cannot be read: the pin stays.
    async fn inputs_changed(self, app: &str, repo: &Repository, old: &str, new: &str) -> Result<bool, render::Error> {
        let before = self.sources.render_inputs(app, repo, old).await?;
        Ok(self.sources.render_inputs(app, repo, new).await? != before)
    }

    /// Whether commit `target` may run on application `app` tracking `tracked` (at
    /// `head`): when it is in the tracked ref's history (an ancestor of `head`, or
    /// `head`) or a revision synced before (the history's successful syncs); else only
    /// with an override (`override_asked`: `force` and
    /// [`status::ROLLBACK_OVERRIDE_ANNOTATION`] naming the request's revision) while the
    /// API server enforces the right to write it ([`Io::admission_enforced`]). `Err`
    /// holds the refusal, naming the commit, the tracked ref and the missing right.
    ///
    /// # Errors
    /// [`Error::Status`] when the history cannot be read.
    async fn pin_allowed(
        self,
        (app, repo, tracked): (&str, &Repository, &str),
        (head, target): (&str, &str),
        (previous, override_asked, self_managed): (&AppStatus, bool, bool),
    ) -> Result<Result<(), String>, Error> {
        // plumb's own installation: an older commit is an older policy (wider boundaries,
        // applications since removed), so any pin needs the override right
        if !self_managed {
            let ancestor = self.sources.descends(repo, head, target).await == Some(true);
            if ancestor || previous.synced_revision == target {
                return Ok(Ok(()));
            }
            let (_, history) = self.store.load(app).await?;
            if history.iter().any(|r| r.revision == target && r.result == status::SyncResult::Succeeded) {
                return Ok(Ok(()));
            }
        }
        let enforced = if override_asked {
            self.admission_enforced(status::ROLLBACK_OVERRIDE_POLICY, status::ROLLBACK_OVERRIDE_POLICY_YAML).await
        } else {
            Err(String::new())
        };
        if enforced.is_ok() {
            return Ok(Ok(()));
        }
        let why = match enforced {
            Err(e) if override_asked => format!("; {e}"),
            _ => "; the request carries no override (`plumb rollback --force`)".to_string(),
        };
        if self_managed {
            return Ok(Err(format!(
                "rollback to {} refused: {app} is plumb's own installation (selfManagement), whose older commits hold \
                 an older policy; revert in Git, or pin with the right `override` on applications.plumb.dev/{app}{why}",
                short(target)
            )));
        }
        Ok(Err(format!(
            "rollback to {} refused: it is not in the history of {tracked} ({}) and was never synced; running it needs \
             the right `override` on applications.plumb.dev/{app} (a right apart from `patch`){why}",
            short(target),
            short(head),
        )))
    }

    /// Whether the API server checks a right for whoever writes an annotation: the
    /// ValidatingAdmissionPolicy `name` and its binding (same name) are installed, the
    /// policy's variables and validations as shipped in `shipped`
    /// ([`status::ROLLBACK_OVERRIDE_POLICY_YAML`],
    /// [`status::ALLOW_UNVERIFIED_POLICY_YAML`]), the binding denying every write it
    /// matches ([`enforcing`]). `Err` says what is missing.
    pub(super) async fn admission_enforced(self, name: &str, shipped: &str) -> Result<(), String> {
        let file = format!("deploy/admission/{}.yaml", name.trim_start_matches("plumb-"));
        let missing = |what: &str, e: String| {
            format!("plumb cannot tell who holds it: {what} {name} is not readable ({e}; install {file})")
        };
        let api = "admissionregistration.k8s.io/v1";
        let key = crate::tracking::ObjectKey {
            group: "admissionregistration.k8s.io".into(),
            kind: "ValidatingAdmissionPolicyBinding".into(),
            namespace: String::new(),
            name: name.into(),
        };
        let read = |kind: &'static str| {
            let key = crate::tracking::ObjectKey { kind: kind.into(), ..key.clone() };
            async move {
                let k = self.cluster.kind(api, kind).await.map_err(|e| e.to_string())?;
                self.cluster.get(&k, &key).await.map_err(|e| e.to_string())?.ok_or_else(|| "not found".to_string())
            }
        };
        let binding = read("ValidatingAdmissionPolicyBinding").await.map_err(|e| missing("the binding", e))?;
        let policy =
            read("ValidatingAdmissionPolicy").await.map_err(|e| missing("the ValidatingAdmissionPolicy", e))?;
        enforcing(name, shipped, &policy, &binding).map_err(|e| format!("plumb cannot tell who holds it: {e} ({file})"))
    }

    /// Removes a pin and its override from `app`'s resource.
    async fn release_pin(self, app: &str) -> Result<(), Error> {
        let keys = [(ROLLBACK_ANNOTATION, None), (status::ROLLBACK_OVERRIDE_ANNOTATION, None)];
        self.store.annotate_all(app, &keys).await?;
        Ok(())
    }
}

/// The refusal of a pause of the selfManagement application: a pause is a request any
/// holder of `patch applications.plumb.dev` can write, and would hold back a change of
/// plumb's own policy (a revoked boundary) for up to `maxPause`.
pub const SELF_PAUSE_REFUSED: &str = "pause refused: this is plumb's own installation (selfManagement), which follows Git \
only; to stop it syncing, set its environment's syncPolicy in Git";

/// Whether `policy` and `binding` (as read from the API server) make it check what the
/// policy `name` shipped in `shipped` checks: the policy's `variables`, `validations`,
/// `failurePolicy` and the writes it matches (its resource rules, with no selector,
/// exclusion or match condition narrowing them) are the shipped ones (an older or
/// edited policy under the same name does not count), and the binding binds it with action `Deny` to every object it
/// matches (the API server defaults `matchResources` to empty selectors), without
/// parameters. `Err` names what differs. Pure.
pub(super) fn enforcing(
    name: &str,
    shipped: &str,
    policy: &serde_json::Value,
    binding: &serde_json::Value,
) -> Result<(), String> {
    let wanted: serde_json::Value = serde_saphyr::from_multiple::<serde_json::Value>(shipped)
        .ok()
        .and_then(|docs| docs.into_iter().find(|d| d["kind"] == "ValidatingAdmissionPolicy"))
        .ok_or_else(|| format!("the shipped policy {name} does not parse"))?;
    // the expressions the API server evaluates; messages and formatting may differ
    let checks = |p: &serde_json::Value| {
        let list = |field: &str, keys: &[&str]| -> Vec<Vec<String>> {
            p["spec"][field]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    keys.iter()
                        .map(|k| v[*k].as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" "))
                        .collect()
                })
                .collect()
        };
        // which writes it sees: the same rules, no selector or condition narrowing them
        let m = &p["spec"]["matchConstraints"];
        let rules: Vec<Vec<Vec<String>>> = m["resourceRules"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                ["apiGroups", "apiVersions", "operations", "resources"]
                    .iter()
                    .map(|k| {
                        r[*k].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
                    })
                    .collect()
            })
            .collect();
        let unnarrowed = ["namespaceSelector", "objectSelector"]
            .iter()
            .all(|k| m[*k].is_null() || m[*k].as_object().is_some_and(|o| o.is_empty()))
            && m["excludeResourceRules"].as_array().is_none_or(Vec::is_empty)
            && p["spec"]["matchConditions"].as_array().is_none_or(Vec::is_empty);
        (
            list("variables", &["name", "expression"]),
            list("validations", &["expression"]),
            p["spec"]["failurePolicy"].as_str().map(str::to_owned),
            (rules, unnarrowed),
        )
    };
    if checks(policy) != checks(&wanted) {
        return Err(format!("the ValidatingAdmissionPolicy {name} is not the one plumb ships"));
    }
    let spec = &binding["spec"];
    let denies = spec["validationActions"].as_array().is_some_and(|a| a.iter().any(|v| v == "Deny"));
    let empty = |v: &serde_json::Value| v.is_null() || v.as_object().is_some_and(|o| o.is_empty());
    let none = |v: &serde_json::Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
    let m = &spec["matchResources"];
    let everything = empty(&m["namespaceSelector"])
        && empty(&m["objectSelector"])
        && none(&m["resourceRules"])
        && none(&m["excludeResourceRules"]);
    if spec["policyName"] != name || !denies || !everything || !spec["paramRef"].is_null() {
        return Err(format!("the binding {name} does not deny every write of the policy {name}"));
    }
    Ok(())
}

/// ` ; claimed by NAME, not verified`, or nothing: who a request says asked (the
/// writing client's word, see [`status::Suspension`]).
fn claimed(who: &str) -> String {
    if who.is_empty() { String::new() } else { format!("; claimed by {who}, not verified") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shipped() -> (serde_json::Value, serde_json::Value) {
        let docs =
            serde_saphyr::from_multiple::<serde_json::Value>(status::ALLOW_UNVERIFIED_POLICY_YAML).expect("yaml");
        (docs[0].clone(), docs[1].clone())
    }

    #[test]
    fn only_the_shipped_policy_bound_to_deny_everything_counts() {
        let name = status::ALLOW_UNVERIFIED_POLICY;
        let yaml = status::ALLOW_UNVERIFIED_POLICY_YAML;
        let (policy, mut binding) = shipped();
        // as the API server returns them: defaults filled in
        binding["spec"]["matchResources"] = json!({"namespaceSelector": {}, "objectSelector": {}});
        assert_eq!(enforcing(name, yaml, &policy, &binding), Ok(()));
        // a policy of that name whose checks differ (older, edited) does not count
        let mut weaker = policy.clone();
        weaker["spec"]["validations"].as_array_mut().expect("validations").pop();
        let e = enforcing(name, yaml, &weaker, &binding).expect_err("weaker");
        assert!(e.contains("not the one plumb ships"), "{e}");
        let mut ignore = policy.clone();
        ignore["spec"]["failurePolicy"] = json!("Ignore");
        assert!(enforcing(name, yaml, &ignore, &binding).is_err());
        // one that sees other writes, or fewer of them, does not count either
        let mut elsewhere = policy.clone();
        elsewhere["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["configmaps"]);
        assert!(enforcing(name, yaml, &elsewhere, &binding).is_err());
        let mut skipping = policy.clone();
        skipping["spec"]["matchConditions"] = json!([{"name": "never", "expression": "false"}]);
        assert!(enforcing(name, yaml, &skipping, &binding).is_err());
        let mut selected = policy.clone();
        selected["spec"]["matchConstraints"]["objectSelector"] = json!({"matchLabels": {"checked": "yes"}});
        assert!(enforcing(name, yaml, &selected, &binding).is_err());
        // as the API server returns it: selectors defaulted to empty, matchPolicy added
        let mut defaulted = policy.clone();
        defaulted["spec"]["matchConstraints"]["namespaceSelector"] = json!({});
        defaulted["spec"]["matchConstraints"]["objectSelector"] = json!({});
        defaulted["spec"]["matchConstraints"]["matchPolicy"] = json!("Equivalent");
        defaulted["spec"]["matchConstraints"]["resourceRules"][0]["scope"] = json!("*");
        assert_eq!(enforcing(name, yaml, &defaulted, &binding), Ok(()));
        // a binding that only warns, or matches only some objects, does not count
        let mut warns = binding.clone();
        warns["spec"]["validationActions"] = json!(["Warn"]);
        assert!(enforcing(name, yaml, &policy, &warns).expect_err("warn").contains("does not deny"));
        let mut some = binding.clone();
        some["spec"]["matchResources"]["namespaceSelector"] = json!({"matchLabels": {"a": "b"}});
        assert!(enforcing(name, yaml, &policy, &some).is_err());
        // the rollback policy is not the allow-unverified one
        let rollback =
            serde_saphyr::from_multiple::<serde_json::Value>(status::ROLLBACK_OVERRIDE_POLICY_YAML).expect("yaml");
        assert!(enforcing(name, yaml, &rollback[0], &binding).is_err());
        assert_eq!(
            enforcing(
                status::ROLLBACK_OVERRIDE_POLICY,
                status::ROLLBACK_OVERRIDE_POLICY_YAML,
                &rollback[0],
                &rollback[1]
            ),
            Ok(())
        );
    }

    #[test]
    fn an_allowance_names_one_commit_and_one_user() {
        let sha = "a".repeat(40);
        assert_eq!(
            status::allowance(&format!("{sha} system:serviceaccount:ci:bot")),
            Some((sha.as_str(), "system:serviceaccount:ci:bot"))
        );
        assert_eq!(status::allowance(&format!("{sha} Ada Lovelace")), Some((sha.as_str(), "Ada Lovelace")));
        assert_eq!(status::allowance(&sha), None, "no user");
        assert_eq!(status::allowance("main alice"), None, "a branch is not a commit");
        assert_eq!(status::allowance(&format!("{} alice", &sha[..7])), None, "a short id is not a commit");
    }
}
