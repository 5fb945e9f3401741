//! Compare: is the live object equal to what Git declares?
//!
//! The desired side is the API server's answer to a server-side-apply **dry-run** of the
//! manifest (field manager `plumb`, force): it carries the server's defaults, admission
//! mutations and list-merge semantics, and keeps fields other managers own. The live
//! side is the object as read. Both are [normalized](fn@normalize) (server-populated
//! fields removed), the environment's ignore rules are applied to both ([`ignore`]), and
//! what remains is [diffed](fn@diff). When there is no live object no dry-run is made:
//! the object is `missing`, and the sync's apply is what validates it (its namespace is
//! checked first: it must exist or be declared in Git).

pub mod client_side;
pub mod diff;
pub mod ignore;
pub mod managers;
pub mod normalize;
pub mod pointer;

use serde::{Deserialize, Serialize};

/// The jq paths of `ignoreDifferences` are part of the policy language: compiled and
/// validated by [`crate::config::jq`], kept here under their old path.
pub use crate::config::jq;
pub use diff::{Difference, diff};
pub use ignore::IgnoreRules;
pub use normalize::normalize;

/// Sync status of an object or an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SyncStatus {
    /// Live equals Git.
    Synced,
    /// Live differs from Git (or is missing, or must be pruned).
    OutOfSync,
    /// Could not be compared (fetch, render or compare error).
    #[default]
    Unknown,
}

impl std::fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Synced => "Synced",
            Self::OutOfSync => "OutOfSync",
            Self::Unknown => "Unknown",
        })
    }
}

/// Roll-up: Unknown if any is Unknown, else OutOfSync if any is, else Synced.
pub fn roll_up(statuses: impl IntoIterator<Item = SyncStatus>) -> SyncStatus {
    let mut out = SyncStatus::Synced;
    for s in statuses {
        match s {
            SyncStatus::Unknown => return SyncStatus::Unknown,
            SyncStatus::OutOfSync => out = SyncStatus::OutOfSync,
            SyncStatus::Synced => {}
        }
    }
    out
}
