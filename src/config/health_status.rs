//! The health vocabulary: the words a health assessment ends in. Policy files use them
//! (`conditions[].health`, `otherwise` of a health override), so they live here, below
//! [`crate::health`] which assesses objects and re-exports them.

use serde::{Deserialize, Serialize};

/// Health status, ordered from best to worst for the roll-up:
/// Healthy < Suspended < Progressing < Missing < Degraded < Unknown (Argo CD's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub enum HealthStatus {
    /// Working as declared.
    Healthy,
    /// Deliberately paused or suspended.
    Suspended,
    /// Not yet working, expected to get there.
    Progressing,
    /// Declared in Git, absent live.
    Missing,
    /// Failed, will not get better by waiting.
    Degraded,
    /// Could not be assessed.
    #[default]
    Unknown,
}

impl std::fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
