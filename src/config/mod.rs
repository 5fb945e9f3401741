//! Policy files: which repositories plumb reads, which applications it keeps in the
//! cluster, and the per-environment sync policy that says what it may do about them.
//!
//! A policy file is YAML with three lists and optional settings:
//!
//! ```yaml
//! repositories:            # where desired state comes from
//!   - name: fleet
//!     url: https://git.example.com/acme/fleet.git
//!     webhookSecretFile: /etc/plumb/webhook-secret   # HMAC secret of the forge's webhook
//! environments:            # sync policy, one per environment (dev, prod, ...)
//!   - name: dev
//!     syncPolicy: {automated: true, prune: true, selfHeal: true}
//! applications:            # one path of one repository at one revision -> one namespace
//!   - {name: web, repository: fleet, revision: main, path: apps/web, namespace: web, environment: dev}
//! ```
//!
//! An optional `applicationSets:` list generates applications from a template
//! ([`generators`]).
//!
//! Loading ([`load`]) parses with serde-saphyr (unknown keys rejected), then
//! [`validate`] checks references and values and reports **every** problem with the
//! file and line it comes from. The model itself ([`model`]) is plain data.

pub mod chart_version;
mod commit_status;
pub mod generators;
pub mod graph;
mod health_status;
pub mod jq;
mod load;
pub mod model;
pub mod notifications;
pub mod repo_url;
mod source;
mod sync_options;
mod sync_window;
mod validate;
mod verify_commits;

pub use commit_status::{DestinationError, StatusDestination};
pub use generators::{ApplicationSet, Generator};
pub use health_status::HealthStatus;
pub use load::{Error, load, load_str, load_without_secrets, read_secret};
pub use model::*;
pub use notifications::{NotificationProvider, Notifications, ProviderType, Route, Trigger};
pub use source::{ChartSource, CrdPolicy, ImageOverride, RenderTools, SopsKeys, Source, SourceType};
pub use sync_options::{Propagation, SYNC_OPTIONS, SyncOption, SyncOptions, check_sync_option};
pub use sync_window::{SyncWindow, Window, WindowKind, WindowProblem, compile_windows};
pub use validate::{Problem, validate, validate_with, warnings};
pub use verify_commits::{VerifyCommits, VerifyMode};
