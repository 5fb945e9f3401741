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
//! The pure core — [`config`], [`render`], [`compare`], [`health`], [`plan`],
//! [`webhook`], [`tracking`] — takes values and returns values. The IO adapters —
//! [`source`] (git2), [`cluster`] (kube), [`status`], [`server`], [`forge`] (commit
//! statuses) — are thin; [`reconcile`]
//! is the one place that sequences them, and [`scheduler`] decides when it runs.

pub mod cli;
pub mod cluster;
pub mod compare;
pub mod config;
pub mod forge;
pub mod health;
pub mod metrics;
pub mod plan;
pub mod reconcile;
pub mod render;
pub mod scheduler;
pub mod server;
pub mod source;
pub mod status;
pub mod tracking;
pub mod watch;
pub mod webhook;

/// Field manager of every server-side apply plumb makes to application objects.
pub const FIELD_MANAGER: &str = "plumb";
