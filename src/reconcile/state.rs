//! What one application's passes carry from one to the next ([`AppState`]), owned by
//! whoever runs them in turn: the scheduler's actor under `plumb serve`, the CLI for its
//! one pass, or the context for callers that own none ([`super::Context::run_pass`]).
//! A new per-application memory is a field here, never a map keyed by name.

use std::sync::Arc;

use crate::{health::ProgressingSince, plan::HealState, status::AppStatus};

/// One application's memory between its passes.
#[derive(Default)]
pub struct AppState {
    /// The status the last saved pass recorded; `None` before the first pass that saved
    /// one (the pass then reads it, with the history, from the status store).
    pub(super) previous: Option<Arc<AppStatus>>,
    /// selfHeal's backoff ([`crate::plan::decide`]).
    pub(super) heal: Option<HealState>,
    /// The comparisons of the last pass, while they may serve the next (`reuse.rs`).
    pub(super) compares: Option<Arc<super::reuse::Compares>>,
    /// The last render split into objects and hooks, while the render is the same
    /// (`hooks.rs`).
    pub(super) hooks: Option<Arc<super::hooks::Split>>,
    /// Since when each object has been Progressing ([`crate::health::stalled`]).
    pub(super) progressing: ProgressingSince,
    /// The generation of this replica's hold of the application's shard the last pass
    /// ran under ([`crate::fence::Hold`]).
    held_under: Option<u64>,
    /// Failed passes in a row (see [`AppState::failed`]).
    failures: u32,
}

impl AppState {
    /// Before a pass under hold `generation` of the application's shard: a new hold
    /// (the shard was taken over, maybe after another replica ran the application)
    /// forgets everything, so the pass starts from the Application's status and the
    /// live objects, as after a restart.
    pub fn held_under(&mut self, generation: u64) {
        if self.held_under != Some(generation) {
            *self = Self { held_under: Some(generation), ..Self::default() };
        }
    }

    /// Counts a pass that ended in an error (`true`) or not: the failed passes in a row
    /// so far (0 after one that did not fail), for the retry's backoff
    /// (`crate::scheduler::retry_after`).
    pub fn failed(&mut self, failed: bool) -> u32 {
        self.failures = if failed { self.failures.saturating_add(1) } else { 0 };
        self.failures
    }
}
