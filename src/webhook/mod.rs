//! Push-webhook receiver core: decides what to do with one webhook delivery.
//!
//! Pure code: values in, a [`Decision`] out. No IO, no clock, no HTTP framework; the
//! HTTP handler passes the headers and the *raw* body bytes it received to
//! [`Receiver::decide`] and answers with [`Decision::http_status`] and
//! [`Decision::reason`].
//!
//! # Verify, then parse
//!
//! A delivery goes through a fixed pipeline and stops at the first step that fails:
//!
//! 1. **Size**: a body over [`Receiver::max_body_bytes`] is rejected with 413 before
//!    anything reads it.
//! 2. **Provider** from headers only ([`Provider::detect`]); none → 400.
//! 3. **Content type**: JSON or `x-www-form-urlencoded` (`payload=` field); else 415.
//! 4. **Authentication** over the exact bytes the sender signed (raw body, or for the
//!    Gitea family in form mode the decoded `payload` field). The repository is not
//!    known yet, so the presented signature is checked in constant time against the
//!    secret of every configured repository, and the receiver remembers which ones
//!    verified. None verified → 401, with a reason that never depends on the
//!    configuration.
//! 5. **Parse** the JSON only now; malformed → 400. Pings, test deliveries, deletions and
//!    events other than pushes are acknowledged with 200.
//! 6. **Match**: a push selects the repositories whose [`RepoKey`] equals a key from the
//!    payload *and* whose secret verified this delivery; watches of those repositories
//!    whose revision matches the ref give the applications to reconcile (202), minus
//!    those whose changed-path filter finds complete file lists that touch nothing under
//!    their path ([`path_verdict`]). Nothing to do → 200, with one reason whether the
//!    repository is unknown or only the ref is unwatched, so responses never reveal
//!    which repositories are configured.
//!
//! What happens next is the server's: [`Dedupe`] drops repeats of a queued delivery
//! (same delivery id, or same repository, ref and `after`, within 60 s), and a bounded
//! queue hands the applications to the scheduler (`crate::server`).
//!
//! The rules come from the senders' own code and documentation; each item names its
//! source. Background: `shared/reference/webhooks.md`; test vectors:
//! `shared/webhook-vectors/`.
#![warn(missing_docs)]

mod body;
mod decision;
mod dedupe;
mod matching;
mod paths;
mod payload;
mod provider;
mod pull;
mod receiver;
mod refs;
mod repo_key;
mod secret;
mod sha1;
mod signature;
mod watched;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod vectors_test;

pub use decision::{Action, Decision};
pub use dedupe::{DEFAULT_DEDUPE_CAPACITY, DEFAULT_DEDUPE_WINDOW, Dedupe, DeliveryKeys};
pub use matching::revision_matches;
pub use paths::{PathVerdict, file_lists_complete, path_verdict};
pub use payload::{PayloadError, Push, RefDeletion, RepoIdentity};
pub use provider::Provider;
pub use pull::{PullAction, PullError, PullRequest};
pub use receiver::{DEFAULT_MAX_BODY_BYTES, Receiver};
pub use refs::{RefKind, split_ref};
pub use repo_key::RepoKey;
pub use secret::Secret;
pub use signature::{Digests, Failure, Scheme, SignedBytes, Streaming, Verification};
pub use watched::{Watch, WatchedRepository};
