//! Stage 0 of a pass: what people asked on the application's resource
//! (`applications.plumb.dev`, see [`crate::status::store::Controls`]) and what it changes for
//! this pass: a new sync request makes it a manual sync, a pause in force holds
//! automated sync and selfHeal, a pin replaces the tracked ref's head by a recorded
//! revision (`plumb rollback`).

use super::{Error, Io, Mode};
use crate::{
    config::{Application, Environment, Repository},
    status::{self, AppStatus, Condition, ConditionType, EventReason, Pin, ROLLBACK_ANNOTATION, short},
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
        out.suspended = controls.suspend.clone().filter(|s| s.in_force(now));
        if let Some(s) = &out.suspended {
            out.paused = true;
            let message =
                format!("automated sync and selfHeal paused by {} until {}: {}", or_unknown(&s.by), s.until, s.reason);
            out.conditions.push(Condition::new(ConditionType::SyncPaused, message));
        }
        if mode.writes() && previous.suspended != out.suspended && !previous.app.is_empty() {
            let note = match &out.suspended {
                Some(s) => format!("paused by {} until {}: {}", or_unknown(&s.by), s.until, s.reason),
                None => "automated sync resumed".to_string(),
            };
            let reason = if out.suspended.is_some() { EventReason::Paused } else { EventReason::Resumed };
            self.event(name, false, reason, note).await;
        }
        match controls.pin.clone() {
            Some(pin) => self.pin(&mut out, previous, pin, (app, repo), mode).await?,
            None if mode.writes() && previous.pinned.is_some() => {
                let note = "pin released: the tracked ref is synced again".into();
                self.event(name, false, EventReason::PinReleased, note).await;
            }
            None => {}
        }
        out.controls = controls;
        Ok(out)
    }

    /// Resolves a pin into `out`: the revision to compare and the pin in force, or
    /// neither when it is released (the tracked ref moved with `until_next_commit`) or
    /// refused (not an ancestor of the tracked ref without `force`; unresolvable).
    async fn pin(
        self,
        out: &mut Requested,
        previous: &AppStatus,
        mut pin: Pin,
        (app, repo): (&Application, &Repository),
        mode: Mode,
    ) -> Result<(), Error> {
        let name = app.name.value.as_str();
        let tracked = &app.revision.value;
        let resolved = match self.sources.resolve(repo, tracked).await {
            Ok(head) => self.sources.resolve(repo, &pin.revision).await.map(|target| (head, target)),
            Err(e) => Err(e),
        };
        let (head, target) = match resolved {
            Ok(found) => found,
            Err(e) => {
                let message = format!("rollback to {} not applied: {e}", pin.revision);
                out.conditions.push(Condition::new(ConditionType::SyncError, message));
                return Ok(());
            }
        };
        // the head when the pin was first seen, kept while the same pin stays
        let same = previous.pinned.as_ref().filter(|p| p.at == pin.at && !p.tracked.is_empty());
        pin.tracked = same.map_or_else(|| head.clone(), |p| p.tracked.clone());
        if pin.until_next_commit && head != pin.tracked {
            if mode.writes() {
                self.store.annotate(name, ROLLBACK_ANNOTATION, None).await?;
                let note = format!("pin to {} released: {tracked} moved to {}", short(&target), short(&head));
                self.event(name, false, EventReason::PinReleased, note).await;
            }
            return Ok(());
        }
        if !pin.force && self.sources.descends(repo, &head, &target).await != Some(true) {
            let message = format!(
                "rollback to {} refused: it is not an ancestor of {tracked} ({}); `plumb rollback {} {} --force` to run it anyway",
                short(&target),
                short(&head),
                name,
                short(&target)
            );
            out.conditions.push(Condition::new(ConditionType::SyncError, message));
            return Ok(());
        }
        pin.revision.clone_from(&target);
        let until = if pin.until_next_commit { "the next commit of" } else { "`plumb rollback --release`; commits of" };
        let message = format!(
            "pinned to {} by {} at {} (rollback): {until} {tracked} are not synced{}",
            short(&target),
            or_unknown(&pin.by),
            pin.at,
            if pin.until_next_commit { " until then" } else { "" }
        );
        out.conditions.push(Condition::new(ConditionType::Pinned, message));
        if mode.writes() && previous.pinned.as_ref().is_none_or(|p| p.at != pin.at) {
            let note = format!("pinned to {} by {} (rollback)", short(&target), or_unknown(&pin.by));
            self.event(name, false, EventReason::Pinned, note).await;
        }
        out.pinned = Some(pin);
        out.revision = Some(target);
        Ok(())
    }
}

fn or_unknown(who: &str) -> &str {
    if who.is_empty() { "(unknown)" } else { who }
}
