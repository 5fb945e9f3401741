//! A kind the API server serves, as discovery found it: a leaf of plain data, so that
//! the pure core (one object's comparison, the live object's view) can name a kind
//! without reaching the cluster client ([`crate::cluster`] resolves them).

/// A served kind: its resource and whether objects of it live in namespaces.
#[derive(Debug, Clone)]
pub struct Kind {
    /// Resource (group, version, plural), shared: every comparison of an object keeps
    /// its kind, which was a copy of five strings per object.
    pub resource: std::sync::Arc<kube::core::ApiResource>,
    /// True for namespaced kinds.
    pub namespaced: bool,
}
