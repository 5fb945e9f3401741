//! plumb-lab: real parts to run plumb against, for the integration tests, the
//! benchmarks and `plumb-lab demo`. Not part of the product: the `plumb` crate and its
//! binary contain none of this.
//!
//! - [`ControlPlane`]: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
//!   and kwok (fake nodes whose pods "run"), built from their Go modules by
//!   `tools/testbins/build.sh` and started on loopback with fresh PKI in a temp dir.
//! - [`GitServer`]: bare repositories served over smart HTTP by Git's own
//!   `git http-backend` (CGI), bridged by a small axum server.
//! - [`Repo`]: a bare repository plus a work tree to commit into.
//! - [`ChartRepo`], [`OciRegistry`]: a Helm chart repository served by the lab (basic
//!   auth optional) and a local OCI registry (`crane registry serve`), charts packaged
//!   and pushed with the real helm.
//! - [`Gitea`]: a real forge (Gitea built from its Go module), with REST helpers for
//!   users, tokens, repositories, webhooks and commit statuses.
//!
//! Every process started here is watched: when the process that started it exits —
//! normally or after a panic — the component is killed within half a second, so no
//! stray apiservers are left behind.

mod chart_repo;
mod control_plane;
pub mod demo;
mod git_server;
mod gitea;
mod repo;

pub use chart_repo::{ChartRepo, OciRegistry, helm as run_helm, helm_bin, package_chart};
pub use control_plane::{ControlPlane, Options as ControlPlaneOptions, testbins_dir};
pub use git_server::GitServer;
pub use gitea::{ADMIN as GITEA_ADMIN, Auth as GiteaAuth, Gitea, GiteaRepo};
pub use repo::Repo;
