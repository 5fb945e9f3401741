//! Compare: is the live object equal to what Git declares?
//!
//! The desired side is the API server's answer to a server-side-apply **dry-run** of the
//! manifest (field manager `plumb`, force): it carries the server's defaults, admission
//! mutations and list-merge semantics, and keeps fields other managers own. The live
//! side is the object as read. Both are [normalized](fn@normalize) (server-populated
//! fields removed), the environment's ignore rules are applied to both ([`ignore`]), and
//! what remains is [diffed](fn@diff). When hand tools hold fields of the live object
//! ([`managers::HAND_MANAGERS`], e.g. `kubectl-create`), Git's side is what the server
//! would hold once plumb took them over: the answer is asked again without the fields
//! the takeover releases ([`managers::released`]), so the server's defaults come back
//! and are no drift. When there is no live object no dry-run is made:
//! the object is `missing`, and the sync's apply is what validates it (its namespace is
//! checked first: it must exist or be declared in Git).

mod cached;
pub mod client_side;
pub mod diff;
pub mod ignore;
pub mod live;
pub mod managers;
pub mod normalize;
pub mod object;
pub mod pointer;
pub mod seal;
pub mod sensitive;

/// The jq paths of `ignoreDifferences` are part of the policy language: compiled and
/// validated by [`crate::config::jq`], kept here under their old path.
pub use crate::config::jq;
pub use cached::Cached;
pub use diff::{Difference, diff};
pub use ignore::IgnoreRules;
pub use live::Live;
pub use normalize::normalize;
pub use object::{Compared, ObjectDiff, ObjectReason};

pub use crate::status::{SyncStatus, roll_up_sync as roll_up};
