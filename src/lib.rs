//! plumb — a GitOps reconciler: keeps a Kubernetes cluster equal to a Git repository.
//!
//! One pass of one application (see [`reconcile`]):
//!
//! ```text
//!  trigger ──▶ source ──▶ render ──▶ compare ──────────▶ plan ──▶ apply ──▶ record
//!  (webhook,   (git2:     (plain     (normalize, dry-run  (apply,   (SSA,     (status +
//!   poll,       fetch     YAML       diff, ignore rules,  prune,    prune)    history in a
//!   manual)     one ref)  dirs)      sync status, health) refuse)             ConfigMap)
//! ```
//!
//! Dependencies point one way:
//!
//! - **wiring**: [`serve`] (actors, watches, HTTP, commit statuses) and [`cli`];
//! - **driver**: [`reconcile`] — [`reconcile::Context::run_pass`] is a short list of
//!   stage calls;
//! - **IO**, thin: [`source`] (git2 mirrors, renders), [`cluster`] (kube), [`apply`] (the
//!   writes of a sync), [`status`]'s store, [`watch`], [`server`] (HTTP), [`forge`]
//!   (commit statuses), [`auth`] (TokenReview + SubjectAccessReview of the internal
//!   listener), [`scheduler`] (when passes run; it knows no other module), [`poller`]
//!   (one `ls-remote` per repository and interval, naming the applications whose
//!   revision moved);
//! - **pure core**, values in and out: [`config`], [`render`], [`compare`] (with
//!   [`compare::object`]: one object prepared and judged), [`health`], [`plan`] (guards,
//!   order, the sync gate [`plan::decide`], sync progress, hand-over), [`status`]'s
//!   types and roll-up, [`webhook`], [`tracking`], [`verify`] (signed commits and tags).
//!
//! No module imports one that imports it back (`tests/module_cycles.rs` checks).

pub mod apply;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod compare;
pub mod config;
pub mod decommission;
pub mod fence;
pub mod forge;
pub mod generators;
pub mod health;
pub mod import;
pub mod kind;
pub mod kube_metrics;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod notify;
pub mod page;
pub mod plan;
pub mod poller;
pub mod preview;
pub mod probes;
pub mod reconcile;
pub mod reload;
pub mod render;
pub mod scheduler;
pub mod secret_refs;
pub mod serve;
pub mod server;
pub mod source;
pub mod status;
pub mod tracking;
pub mod verify;
pub mod watch;
pub mod webhook;

/// Field manager of every server-side apply plumb makes to application objects.
pub const FIELD_MANAGER: &str = "plumb";
