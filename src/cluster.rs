//! Cluster: the thin adapter to the Kubernetes API (kube-rs).
//!
//! Objects cross this boundary as `serde_json::Value` so that the pure core never sees a
//! kube type. Kinds are mapped to resources through aggregated discovery (one round
//! trip), refreshed once when a kind is not found (e.g. right after a CRD was applied).

use kube::{
    Client,
    api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions},
    core::GroupVersionKind,
    discovery::{Discovery, Scope},
};
use serde_json::Value;
use tokio::sync::RwLock;

use crate::{
    FIELD_MANAGER,
    tracking::{APP_LABEL, ObjectKey},
};

/// A Kubernetes API failure, naming the object or kind it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server does not serve this kind (no CRD, wrong apiVersion).
    #[error("kind {kind} ({api_version}) is not served by the cluster")]
    UnknownKind {
        /// apiVersion of the manifest.
        api_version: String,
        /// kind of the manifest.
        kind: String,
    },
    /// A request failed.
    #[error("{action} {object}: {}", brief(source))]
    Request {
        /// What was attempted (`get`, `dry-run apply`, `apply`, `list`, `delete`).
        action: &'static str,
        /// The object (or kind) concerned.
        object: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Discovery failed.
    #[error("discovery: {0}")]
    Discovery(#[source] Box<kube::Error>),
    /// A write dropped: the pass's shard is no longer held by this replica
    /// ([`crate::fence`]).
    #[error(transparent)]
    Fenced(#[from] crate::fence::Closed),
}

/// Before a write of `action` on `key`: `Ok` unless the pass's fence closed.
fn fenced(action: &str, key: &ObjectKey) -> Result<(), Error> {
    Ok(crate::fence::check(|| format!("{action} {key}"))?)
}

impl Error {
    /// Whether the API server refused a dry-run as such (405, or an aggregated API or
    /// admission webhook that does not support dry-run), rather than the object.
    pub fn refuses_dry_run(&self) -> bool {
        match self {
            Error::Request { action: "dry-run apply", source, .. } => match source.as_ref() {
                kube::Error::Api(s) => {
                    s.code == 405 || s.message.contains("does not support dry run") || s.message.contains("dryRun")
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Fields the API server refused to change because they are immutable (a Job's
    /// `spec.template`, a Service's `spec.clusterIP`, a Deployment's `spec.selector`, …),
    /// read from the causes of the answer (`details.causes[].field` of a cause whose
    /// message says "immutable"), or from its message when the server gave no causes.
    /// Empty for any other error, a 422 included.
    pub fn immutable_fields(&self) -> Vec<String> {
        let Error::Request { source, .. } = self else { return vec![] };
        let kube::Error::Api(s) = source.as_ref() else { return vec![] };
        immutable_fields(s)
    }

    /// Whether the server answered 404: the object, or its namespace, does not exist.
    pub fn not_found(&self) -> bool {
        matches!(self, Error::Request { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 404))
    }

    /// Whether the server answered 404 for the *resource* rather than for an object:
    /// the version of the kind is not served (any more), e.g. after a CRD upgrade. Such
    /// an answer says nothing about the object, which may well exist through another
    /// served version of its group and kind.
    pub fn resource_missing(&self) -> bool {
        matches!(self, Error::Request { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 404 && !names_an_object(s)))
    }

    fn request(action: &'static str, object: impl ToString, source: kube::Error) -> Self {
        Error::Request { action, object: object.to_string(), source: Box::new(source) }
    }
}

/// Whether a 404 answer names the object it did not find (`details.name`): the API
/// server's "not found" for an object of a served resource always does; a request to a
/// resource it does not serve gets a bare 404 ("the server could not find the requested
/// resource", or a plain-text "404 page not found").
fn names_an_object(s: &kube::core::Status) -> bool {
    s.details.as_ref().is_some_and(|d| !d.name.is_empty())
}

/// How a DELETE the API server accepted ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The object is gone, or only Kubernetes' own finalizers (the garbage collector's
    /// `foregroundDeletion`, `orphan`; `kubernetes.io/pvc-protection`, …) hold it while
    /// the control plane finishes (see [`crate::plan::Deletion::blocking`]).
    Accepted,
    /// The object now carries `metadata.deletionTimestamp` and stays until finalizers
    /// of other controllers are removed by them.
    Blocked(crate::plan::Deletion),
}

pub use crate::kind::Kind;

/// The cluster connection plus a discovery cache.
pub struct Cluster {
    client: Client,
    /// Who records Events (`plumb`, the pod's host name).
    reporter: kube::runtime::events::Reporter,
    discovery: RwLock<Discovery>,
    requests: std::sync::atomic::AtomicU64,
    writes: std::sync::atomic::AtomicU64,
    dry_runs: std::sync::atomic::AtomicU64,
    /// Resolved kinds by (apiVersion, kind): a served kind does not change its resource.
    kinds: std::sync::RwLock<std::collections::HashMap<(String, String), Kind>>,
    /// The configuration the client was built from ([`Cluster::connect`]), to build
    /// clients that impersonate ([`Cluster::impersonate`]).
    config: Option<kube::Config>,
    /// How clients are built from `config` (e.g. with their requests counted), for the
    /// impersonating ones too; `None`: plain [`Client::try_from`].
    factory: Option<ClientFactory>,
}

/// Builds a client from a configuration, e.g. one whose requests are counted (`plumb
/// serve`'s `plumb_kube_requests_total`).
pub type ClientFactory = std::sync::Arc<dyn Fn(kube::Config) -> anyhow::Result<Client> + Send + Sync>;

impl Cluster {
    /// Connects and runs discovery.
    ///
    /// # Errors
    /// [`Error::Discovery`] when the API server cannot be reached.
    pub async fn new(client: Client) -> Result<Self, Error> {
        let discovery =
            Discovery::new(client.clone()).run_aggregated().await.map_err(|e| Error::Discovery(Box::new(e)))?;
        let reporter =
            kube::runtime::events::Reporter { controller: "plumb".into(), instance: std::env::var("HOSTNAME").ok() };
        Ok(Self {
            client,
            reporter,
            discovery: RwLock::new(discovery),
            requests: 1.into(),
            writes: 0.into(),
            dry_runs: 0.into(),
            kinds: Default::default(),
            config: None,
            factory: None,
        })
    }

    /// Connects with `--kubeconfig` when given, else the usual inference (see
    /// [`config`]), and runs discovery. Unlike [`Cluster::new`], the result can
    /// [`Cluster::impersonate`].
    ///
    /// # Errors
    /// No or invalid configuration; [`Error::Discovery`].
    pub async fn connect(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Self> {
        Self::from_config(config(kubeconfig).await?, None).await
    }

    /// [`Cluster::connect`] with `--context` (see [`config_in`]).
    ///
    /// # Errors
    /// As [`Cluster::connect`].
    pub async fn connect_in(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<Self> {
        Self::from_config(config_in(kubeconfig, context).await?, None).await
    }

    /// [`Cluster::connect`] with every client (the impersonating ones of
    /// [`Cluster::impersonate`] too) built by `factory`.
    ///
    /// # Errors
    /// As [`Cluster::connect`].
    pub async fn connect_with(
        kubeconfig: Option<&std::path::Path>,
        context: Option<&str>,
        factory: ClientFactory,
    ) -> anyhow::Result<Self> {
        Self::from_config(config_in(kubeconfig, context).await?, Some(factory)).await
    }

    async fn from_config(config: kube::Config, factory: Option<ClientFactory>) -> anyhow::Result<Self> {
        let client = match &factory {
            Some(build) => build(config.clone())?,
            None => Client::try_from(config.clone())?,
        };
        let mut cluster = Self::new(client).await?;
        cluster.config = Some(config);
        cluster.factory = factory;
        Ok(cluster)
    }

    /// The same cluster, every request made as `user` (Kubernetes user impersonation,
    /// `Impersonate-User`; a ServiceAccount is `system:serviceaccount:<ns>:<name>`):
    /// Kubernetes RBAC then decides what it may do. This identity needs the
    /// `impersonate` verb on that user.
    ///
    /// # Errors
    /// The cluster was not [`Cluster::connect`]ed; [`Error::Discovery`] (the
    /// impersonated user cannot run discovery).
    pub async fn impersonate(&self, user: &str) -> anyhow::Result<Self> {
        let Some(base) = &self.config else {
            anyhow::bail!(
                "impersonating {user} needs a cluster connected from a kubeconfig or in-cluster configuration"
            );
        };
        let mut config = base.clone();
        config.auth_info.impersonate = Some(user.to_string());
        Self::from_config(config, self.factory.clone()).await
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Requests sent through this adapter so far (gets, lists, dry-runs, applies,
    /// deletes, events, discovery), and how many of them were writes to objects
    /// (applies, deletes, managedFields takeovers; Events are not counted as writes).
    pub fn requests(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.requests.load(Relaxed), self.writes.load(Relaxed))
    }

    /// Server-side-apply dry-runs sent so far.
    pub fn dry_runs(&self) -> u64 {
        self.dry_runs.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count(&self, write: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.requests.fetch_add(1, Relaxed);
        if write {
            self.writes.fetch_add(1, Relaxed);
        }
    }

    /// Maps `apiVersion` + `kind` to a served resource, refreshing discovery once on a miss.
    ///
    /// # Errors
    /// [`Error::UnknownKind`], [`Error::Discovery`].
    pub async fn kind(&self, api_version: &str, kind: &str) -> Result<Kind, Error> {
        let id = (api_version.to_string(), kind.to_string());
        if let Some(k) = self.kinds.read().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(k);
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match self.lookup(&gvk).await {
            Some(k) => k,
            None => {
                self.refresh().await?;
                self.lookup(&gvk)
                    .await
                    .ok_or_else(|| Error::UnknownKind { api_version: api_version.into(), kind: kind.into() })?
            }
        };
        if let Ok(mut m) = self.kinds.write() {
            m.insert(id, found.clone());
        }
        Ok(found)
    }

    /// The served resource of `group` + `kind` at the version the API server
    /// recommends (its preferred version when that serves the kind). An object belongs
    /// to its group and kind, not to a version: the API server serves a stored object
    /// through every served version of its kind, so tracked objects are looked up this
    /// way, never through a remembered version that may no longer be served. Refreshes
    /// discovery once on a miss.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] (with `group` as apiVersion) when no version of the
    /// group serves the kind — its CRD is gone, and its objects with it; [`Error::Discovery`].
    pub async fn served(&self, group: &str, kind: &str) -> Result<Kind, Error> {
        if let Some(k) = self.recommended(group, kind).await {
            return Ok(k);
        }
        self.refresh().await?;
        self.recommended(group, kind)
            .await
            .ok_or_else(|| Error::UnknownKind { api_version: group.into(), kind: kind.into() })
    }

    async fn recommended(&self, group: &str, kind: &str) -> Option<Kind> {
        let d = self.discovery.read().await;
        let (resource, caps) = d.get(group)?.recommended_kind(kind)?;
        Some(Kind { resource: std::sync::Arc::new(resource), namespaced: caps.scope == Scope::Namespaced })
    }

    /// Runs discovery again and forgets every resolved kind (a CRD may have stopped
    /// serving a version, or started serving one).
    ///
    /// # Errors
    /// [`Error::Discovery`].
    pub async fn refresh(&self) -> Result<(), Error> {
        self.count(false);
        let fresh =
            Discovery::new(self.client.clone()).run_aggregated().await.map_err(|e| Error::Discovery(Box::new(e)))?;
        *self.discovery.write().await = fresh;
        if let Ok(mut m) = self.kinds.write() {
            m.clear();
        }
        Ok(())
    }

    /// The API server's version (`gitVersion`, e.g. `v1.36.3`) and, from discovery as
    /// last run, every served `group/version` and `group/version/Kind` (`v1`,
    /// `v1/ConfigMap`, `apps/v1/Deployment`; sorted, subresources left out): what a
    /// chart renderer calls the cluster's capabilities (Helm's
    /// `.Capabilities.APIVersions.Has` takes either form).
    ///
    /// # Errors
    /// [`Error::Request`] when the version cannot be read.
    pub async fn capabilities(&self) -> Result<(String, Vec<String>), Error> {
        self.count(false);
        let version =
            self.client.apiserver_version().await.map_err(|e| Error::request("get", "/version", e))?.git_version;
        let d = self.discovery.read().await;
        let mut versions = Vec::new();
        for g in d.groups() {
            for v in g.versions() {
                let gv = if g.name().is_empty() { v.to_string() } else { format!("{}/{v}", g.name()) };
                versions.extend(g.versioned_resources(v).into_iter().map(|(r, _)| format!("{gv}/{}", r.kind)));
                versions.push(gv);
            }
        }
        versions.sort_unstable();
        versions.dedup();
        Ok((version, versions))
    }

    /// Whether any served kind matches the globs `group` (`None` = any group) and `kind`.
    pub async fn serves_kind_like(&self, group: Option<&str>, kind: &str) -> bool {
        let matcher = |p: &str| globset::Glob::new(p).ok().map(|g| g.compile_matcher());
        let (Some(k), g) = (matcher(kind), group.map(matcher)) else { return true };
        let d = self.discovery.read().await;
        d.groups().any(|ag| {
            g.as_ref().is_none_or(|gm| gm.as_ref().is_none_or(|gm| gm.is_match(ag.name())))
                && ag.resources_by_stability().iter().any(|(r, _)| k.is_match(&r.kind))
        })
    }

    async fn lookup(&self, gvk: &GroupVersionKind) -> Option<Kind> {
        self.discovery.read().await.resolve_gvk(gvk).map(|(resource, caps)| Kind {
            resource: std::sync::Arc::new(resource),
            namespaced: caps.scope == Scope::Namespaced,
        })
    }

    fn api(&self, kind: &Kind, namespace: &str) -> Api<DynamicObject> {
        if kind.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &*kind.resource)
        } else {
            Api::all_with(self.client.clone(), &*kind.resource)
        }
    }

    /// Reads one object; `None` when it does not exist.
    ///
    /// # Errors
    /// [`Error::Request`].
    /// A 404 that names no object (the version is not served) is an error, never "absent".
    pub async fn get(&self, kind: &Kind, key: &ObjectKey) -> Result<Option<Value>, Error> {
        self.count(false);
        match self.api(kind, &key.namespace).get(&key.name).await {
            Ok(obj) => Ok(Some(to_value(obj))),
            Err(kube::Error::Api(s)) if s.code == 404 && names_an_object(&s) => Ok(None),
            Err(e) => Err(Error::request("get", key, e)),
        }
    }

    /// Server-side apply of `obj` as field manager `plumb`, forcing conflicts, with strict
    /// field validation (an unknown field is an error naming it, never silently dropped); with
    /// `dry_run` nothing is persisted and the answer is what the object would become.
    ///
    /// # Errors
    /// [`Error::Request`] carrying the API server's reason (validation, admission,
    /// immutable field, …).
    pub async fn apply(&self, kind: &Kind, key: &ObjectKey, obj: &Value, dry_run: bool) -> Result<Value, Error> {
        self.apply_validated(kind, key, obj, dry_run, true).await
    }

    /// [`Cluster::apply`] with field validation `Strict` when `strict`; otherwise (sync
    /// option `Validate=false`) `Ignore`, and the fields the server says are not in the
    /// schema are removed before applying: server-side apply cannot carry unknown fields
    /// whatever the validation ("failed to create typed patch object (…): .extra: field
    /// not declared in schema"), and dropping them is what `Validate=false` asks for.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn apply_validated(
        &self,
        kind: &Kind,
        key: &ObjectKey,
        obj: &Value,
        dry_run: bool,
        strict: bool,
    ) -> Result<Value, Error> {
        let action = if dry_run { "dry-run apply" } else { "apply" };
        let mut pp = PatchParams::apply(FIELD_MANAGER).force();
        pp = if strict { pp.validation_strict() } else { pp.validation_ignore() };
        if dry_run {
            pp = pp.dry_run();
        }
        let mut body = std::borrow::Cow::Borrowed(obj);
        for _ in 0..16 {
            if !dry_run {
                fenced(action, key)?;
            }
            self.count(!dry_run);
            if dry_run {
                self.dry_runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            match self.api(kind, &key.namespace).patch(&key.name, &pp, &Patch::Apply(body.as_ref())).await {
                Ok(out) => return Ok(to_value(out)),
                Err(kube::Error::Api(s)) if !strict => {
                    let unknown = undeclared_fields(&s.message);
                    let mut stripped = body.clone().into_owned();
                    let removed = unknown.iter().filter(|p| remove_undeclared(&mut stripped, p)).count();
                    if removed == 0 {
                        return Err(Error::request(action, key, kube::Error::Api(s)));
                    }
                    body = std::borrow::Cow::Owned(stripped);
                }
                Err(e) => return Err(Error::request(action, key, e)),
            }
        }
        Err(Error::request(
            action,
            key,
            kube::Error::Api(kube::core::Status::failure("too many unknown fields", "Invalid").boxed()),
        ))
    }

    /// Replaces `metadata.managedFields` of an object (a JSON patch), e.g. to take over
    /// the fields of client-side tools before a server-side apply.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn replace_managed_fields(&self, kind: &Kind, key: &ObjectKey, fields: &Value) -> Result<(), Error> {
        fenced("take over fields of", key)?;
        self.count(true);
        let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
            {"op": "replace", "path": "/metadata/managedFields", "value": fields}
        ]))
        .map_err(|e| Error::request("take over fields of", key, kube::Error::SerdeError(e)))?;
        self.api(kind, &key.namespace)
            .patch(&key.name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
            .map_err(|e| Error::request("take over fields of", key, e))?;
        Ok(())
    }

    /// Every object of `kind` labelled `plumb.dev/app=<app>`, in all namespaces.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn list_app(&self, kind: &Kind, app: &str) -> Result<Vec<Value>, Error> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &*kind.resource);
        self.list(kind, &api, &format!("{APP_LABEL}={app}")).await
    }

    /// The objects of `kind` that `api` lists (all namespaces or one) matching label
    /// selector `selector`, with their apiVersion and kind (list items come without them).
    async fn list(&self, kind: &Kind, api: &Api<DynamicObject>, selector: &str) -> Result<Vec<Value>, Error> {
        self.count(false);
        let what = format!("{} -l {selector}", kind.resource.kind);
        let list =
            api.list(&ListParams::default().labels(selector)).await.map_err(|e| Error::request("list", what, e))?;
        Ok(list
            .items
            .into_iter()
            .map(|mut o| {
                o.types = Some(kube::core::TypeMeta {
                    api_version: kind.resource.api_version.clone(),
                    kind: kind.resource.kind.clone(),
                });
                to_value(o)
            })
            .collect())
    }

    /// Writes `obj` with a full replace (PUT) as field manager `plumb`, or creates it
    /// when absent (sync option `Replace=true`): fields Git does not declare are removed
    /// whoever owns them. The live `resourceVersion` is sent, so a concurrent write makes
    /// it fail (409) rather than be lost. Field validation is the server's default for
    /// PUT (`Warn`: unknown fields are dropped with a warning).
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn replace(&self, kind: &Kind, key: &ObjectKey, obj: &Value) -> Result<Value, Error> {
        let api = self.api(kind, &key.namespace);
        let mut dynamic: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| Error::request("replace", key, kube::Error::SerdeError(e)))?;
        let pp = kube::api::PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let live = self.get(kind, key).await?;
        fenced("replace", key)?;
        self.count(true);
        let out = match live.as_ref().and_then(|l| l.pointer("/metadata/resourceVersion")).and_then(Value::as_str) {
            Some(rv) => {
                dynamic.metadata.resource_version = Some(rv.into());
                api.replace(&key.name, &pp, &dynamic).await.map_err(|e| Error::request("replace", key, e))?
            }
            None => api.create(&pp, &dynamic).await.map_err(|e| Error::request("create", key, e))?,
        };
        Ok(to_value(out))
    }

    /// A dry-run replace (PUT, `dryRun=All`) of `obj` as field manager `plumb`: what the
    /// object would be if it were written whole as `obj` (defaulted, admitted,
    /// validated); nothing is persisted. `obj` carries the live `resourceVersion`, so an
    /// object changed since fails (409). Used to see what plumb's apply leaves once it
    /// took the fields of hand tools over ([`crate::compare::managers::released`]).
    ///
    /// # Errors
    /// [`Error::Request`] (action `dry-run replace`).
    pub async fn replace_dry_run(&self, kind: &Kind, key: &ObjectKey, obj: &Value) -> Result<Value, Error> {
        let dynamic: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| Error::request("dry-run replace", key, kube::Error::SerdeError(e)))?;
        let pp = kube::api::PostParams { dry_run: true, field_manager: Some(FIELD_MANAGER.into()) };
        self.count(false);
        self.dry_runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = self
            .api(kind, &key.namespace)
            .replace(&key.name, &pp, &dynamic)
            .await
            .map_err(|e| Error::request("dry-run replace", key, e))?;
        Ok(to_value(out))
    }

    /// Deletes an object only if its UID is still `uid` (never a re-created namesake),
    /// with the given propagation (default foreground: dependents go first). A 404
    /// naming the object counts as done. A 404 for the resource (`kind`'s version is no
    /// longer served) is retried once through the version discovery now serves for the
    /// same group and kind; when none serves it, the kind's CRD is gone and its objects
    /// with it.
    ///
    /// # Errors
    /// [`Error::Request`] (a 409 means the UID precondition failed); [`Error::Discovery`].
    pub async fn delete(
        &self,
        kind: &Kind,
        key: &ObjectKey,
        uid: &str,
        propagation: crate::plan::Propagation,
    ) -> Result<Deleted, Error> {
        match self.delete_through(kind, key, uid, propagation).await {
            Err(e) if e.resource_missing() => {
                self.refresh().await?;
                match self.served(&kind.resource.group, &kind.resource.kind).await {
                    Ok(now) => self.delete_through(&now, key, uid, propagation).await,
                    Err(Error::UnknownKind { .. }) => Ok(Deleted::Accepted),
                    Err(other) => Err(other),
                }
            }
            other => other,
        }
    }

    async fn delete_through(
        &self,
        kind: &Kind,
        key: &ObjectKey,
        uid: &str,
        propagation: crate::plan::Propagation,
    ) -> Result<Deleted, Error> {
        fenced("delete", key)?;
        self.count(true);
        let dp = match propagation {
            crate::plan::Propagation::Foreground => DeleteParams::foreground(),
            crate::plan::Propagation::Background => DeleteParams::background(),
            crate::plan::Propagation::Orphan => DeleteParams::orphan(),
        }
        .preconditions(Preconditions { uid: Some(uid.into()), resource_version: None });
        match self.api(kind, &key.namespace).delete(&key.name, &dp).await {
            Ok(either::Either::Left(obj)) => {
                let deletion = crate::plan::Deletion {
                    since: obj.metadata.deletion_timestamp.map(|t| t.0.to_string()).unwrap_or_default(),
                    finalizers: obj.metadata.finalizers.unwrap_or_default(),
                };
                Ok(if deletion.blocking().is_empty() { Deleted::Accepted } else { Deleted::Blocked(deletion) })
            }
            Ok(either::Either::Right(_)) => Ok(Deleted::Accepted),
            Err(kube::Error::Api(s)) if s.code == 404 && names_an_object(&s) => Ok(Deleted::Accepted),
            Err(e) => Err(Error::request("delete", key, e)),
        }
    }
}

impl Cluster {
    /// Waits until CustomResourceDefinition `name` is Established and its names are
    /// accepted (kstatus Current; see [`crate::health`]), polling every 250 ms for at
    /// most `timeout`.
    ///
    /// # Errors
    /// A message naming the CRD: names not accepted (Degraded), or still not
    /// Established after `timeout`, with its last condition.
    pub async fn wait_established(&self, name: &str, timeout: std::time::Duration) -> Result<(), String> {
        let kind = self.kind("apiextensions.k8s.io/v1", "CustomResourceDefinition").await.map_err(|e| e.to_string())?;
        let key = ObjectKey {
            group: "apiextensions.k8s.io".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: String::new(),
            name: name.into(),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let obj = self.get(&kind, &key).await.map_err(|e| e.to_string())?;
            let h = crate::health::assess(obj.as_ref());
            match h.status {
                crate::health::HealthStatus::Healthy => return Ok(()),
                crate::health::HealthStatus::Degraded => return Err(format!("{key}: {}", h.message)),
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(format!("{key} not Established after {}s: {}", timeout.as_secs(), h.message));
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            }
        }
    }

    /// Waits until discovery serves `apiVersion` + `kind` (right after its CRD became
    /// Established), for at most `timeout`.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] after `timeout`; [`Error::Discovery`].
    pub async fn wait_kind(&self, api_version: &str, kind: &str, timeout: std::time::Duration) -> Result<Kind, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.kind(api_version, kind).await {
                Err(Error::UnknownKind { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                other => return other,
            }
        }
    }

    /// Waits until the object with UID `uid` is gone (a re-created namesake counts as
    /// gone), for at most `timeout`.
    ///
    /// # Errors
    /// A message naming the object when it is still there after `timeout`.
    pub async fn wait_gone(
        &self,
        kind: &Kind,
        key: &ObjectKey,
        uid: &str,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let live = self.get(kind, key).await.map_err(|e| e.to_string())?;
            if live.as_ref().and_then(|l| l.pointer("/metadata/uid")).and_then(Value::as_str) != Some(uid) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("{key} still being deleted after {}s", timeout.as_secs()));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    /// The StorageClass a PersistentVolumeClaim binds through (see
    /// [`crate::health::storage::class_of`]); `None` when it names none, or it cannot
    /// be read (health then keeps to the claim's phase).
    pub async fn storage_class_of(&self, claim: &Value) -> Option<Value> {
        let kind = self.kind("storage.k8s.io/v1", "StorageClass").await.ok()?;
        let named = claim.pointer("/spec/storageClassName").and_then(Value::as_str).is_some();
        let classes = if named {
            vec![]
        } else {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &*kind.resource);
            self.list(&kind, &api, "").await.ok()?
        };
        let name = crate::health::storage::class_of(claim, &classes)?;
        let key = ObjectKey {
            group: "storage.k8s.io".into(),
            kind: "StorageClass".into(),
            namespace: String::new(),
            name: name.into(),
        };
        self.get(&kind, &key).await.ok().flatten()
    }

    /// The names of every object of `kind` in `namespace` (cluster-wide for a
    /// cluster-scoped kind), labelled or not: one metadata-only LIST, which answers
    /// "does it exist" for many objects at once where a GET answers for one.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn names(&self, kind: &Kind, namespace: &str) -> Result<std::collections::HashSet<String>, Error> {
        self.count(false);
        let what = format!("{} in {namespace}", kind.resource.kind);
        let list = self
            .api(kind, namespace)
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| Error::request("list", what, e))?;
        Ok(list.items.into_iter().filter_map(|o| o.metadata.name).collect())
    }

    /// Every object of namespaced `kind` in `namespace`, labelled or not, as the watch
    /// cache keeps them: what a workload's health reads of its children (Pods,
    /// ReplicaSets) in a process without watches (the command line). One LIST.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn list_children(&self, kind: &Kind, namespace: &str) -> Result<Vec<crate::compare::Cached>, Error> {
        self.count(false);
        let what = format!("{} in {namespace}", kind.resource.kind);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &*kind.resource);
        let list = api.list(&ListParams::default()).await.map_err(|e| Error::request("list", what, e))?;
        Ok(list.items.into_iter().map(crate::compare::Cached::from).collect())
    }

    /// Objects of `kind` in `namespace` (all namespaces when empty) matching label
    /// selector `selector` (`a=b,c=d`).
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn list_labelled(&self, kind: &Kind, namespace: &str, selector: &str) -> Result<Vec<Value>, Error> {
        let api: Api<DynamicObject> = if namespace.is_empty() || !kind.namespaced {
            Api::all_with(self.client.clone(), &*kind.resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &*kind.resource)
        };
        self.list(kind, &api, selector).await
    }

    /// Objects of `kind` in `namespace` that carry no `plumb.dev/app` label.
    ///
    /// # Errors
    /// [`Error::Request`].
    pub async fn list_unlabelled(&self, kind: &Kind, namespace: &str) -> Result<Vec<Value>, Error> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &*kind.resource);
        self.list(kind, &api, &format!("!{APP_LABEL}")).await
    }
}

impl Cluster {
    /// Publishes a Kubernetes Event about live object `obj` (`kubectl describe` shows
    /// it). `warning` selects type Warning over Normal. Failures are logged, not
    /// returned: an Event is a courtesy, never a reason to fail a sync.
    pub async fn event(&self, obj: &Value, warning: bool, reason: crate::status::EventReason, note: String) {
        let s = |p: &str| obj.pointer(p).and_then(Value::as_str).map(String::from);
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            name: s("/metadata/name"),
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid"),
            ..Default::default()
        };
        let ev = kube::runtime::events::Event {
            type_: if warning {
                kube::runtime::events::EventType::Warning
            } else {
                kube::runtime::events::EventType::Normal
            },
            reason: reason.as_str().into(),
            // the API server refuses notes over 1024 bytes
            note: Some(truncate(note, 1024)),
            action: reason.action().into(),
            secondary: None,
        };
        if let Err(e) =
            crate::fence::check(|| format!("event {reason} on {}", reference.name.as_deref().unwrap_or("?")))
        {
            return tracing::warn!("{e}");
        }
        self.count(false);
        // A recorder of its own for each Event: kube's recorder folds Events of the same
        // reason on the same object into one series that keeps the first note, so a
        // second sync or prune would show the first one's revision or object.
        let recorder = kube::runtime::events::Recorder::new(self.client.clone(), self.reporter.clone());
        if let Err(e) = recorder.publish(&ev, &reference).await {
            tracing::warn!("event {reason} on {:?}: {e}", reference.name);
        }
    }
}

/// kube's error in one line: for an API answer, the server's message (kube's own
/// rendering adds the whole Status, object included).
fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        other => other.to_string(),
    }
}

/// Whether a cause's message says the field is immutable, in the server's own words
/// rather than in the invalid value it quotes (which may contain anything): the last
/// `: `-separated part of the message's first or last line mentions "immutable" —
/// "…: field is immutable" (after a multi-line value), "Forbidden: spec is immutable
/// after creation except …" (before one).
fn says_immutable(message: &str) -> bool {
    let tail = |line: &str| line.rsplit(": ").next().is_some_and(|t| t.contains("immutable"));
    message.lines().next().is_some_and(tail) || message.lines().last().is_some_and(tail)
}

/// The denial of an admission policy or webhook, when `message` is one, as the API
/// server words it: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>'
/// [with binding '<b>'] denied request: <text>` (whatever the status code the policy
/// chose), or `admission webhook "<w>" denied the request: <text>`. Returns who denied
/// it (`ValidatingAdmissionPolicy 'p'`, `admission webhook "w"`) and the text. Only the
/// start of the message is read: a value Git wrote is quoted after it, never before.
fn admission_denial(message: &str) -> Option<(&str, &str)> {
    let rest = message.split_once(" is forbidden: ").map_or(message, |(_, r)| r);
    if rest.starts_with("ValidatingAdmissionPolicy '") {
        let (by, text) = rest.split_once(" denied request: ")?;
        let by = by.split_once(" with binding ").map_or(by, |(p, _)| p);
        return Some((by, text));
    }
    if message.starts_with("admission webhook \"") {
        let (by, text) = message.split_once(" denied the request: ")?;
        return Some((by, text));
    }
    None
}

/// The fields an admission denial says are immutable: the path before "is immutable"
/// (`spec.template is immutable`, `spec.template: field is immutable`) named with who
/// denied the change; `named by <who>` when the text names no path. Empty when the
/// denial does not say "immutable".
fn denied_as_immutable(by: &str, text: &str) -> Vec<String> {
    if !text.contains("immutable") {
        return vec![];
    }
    // a field path as the API server writes them (`spec.template`, `spec.ports[0]`)
    let path_like = |w: &str| {
        w.contains(['.', '['])
            && w.contains(|c: char| c.is_ascii_alphabetic())
            && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-[]/=\"'".contains(c))
    };
    let before = text.split(" is immutable").next().unwrap_or("");
    let field = before.trim_end_matches(": field").trim_end_matches(':').rsplit([' ', ',']).next().unwrap_or("");
    let field = field.trim_end_matches(':');
    if text.contains(" is immutable") && path_like(field) {
        vec![format!("{field} (denied by {by})")]
    } else {
        vec![format!("named by {by}")]
    }
}

/// See [`Error::immutable_fields`].
fn immutable_fields(s: &kube::core::Status) -> Vec<String> {
    if let Some((by, text)) = admission_denial(&s.message) {
        return denied_as_immutable(by, text);
    }
    let mut fields: Vec<String> = s
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .filter(|c| says_immutable(&c.message))
        .map(|c| c.field.clone())
        .filter(|f| !f.is_empty())
        .collect();
    if fields.is_empty() {
        // "Job.batch \"x\" is invalid: spec.template: Invalid value: …: field is immutable"
        fields.extend(
            s.message
                .split("; ")
                .filter(|part| says_immutable(part))
                .filter_map(|part| part.rsplit_once(": Invalid value").or_else(|| part.rsplit_once(": Forbidden")))
                .map(|(f, _)| f.rsplit(": ").next().unwrap_or(f).trim().to_string()),
        );
    }
    fields.dedup();
    fields
}

/// Paths the server names in a server-side apply refused for unknown fields
/// ("failed to create typed patch object (…): .spec.foo: field not declared in
/// schema"), as written: `.spec.template.spec.containers[name="main"].foo`.
fn undeclared_fields(message: &str) -> Vec<String> {
    const MARK: &str = ": field not declared in schema";
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(i) = rest.find(MARK) {
        let before = &rest[..i];
        let start = before.rfind([' ', '\n']).map_or(0, |j| j + 1);
        if before[start..].starts_with('.') {
            out.push(before[start..].to_string());
        }
        rest = &rest[i + MARK.len()..];
    }
    out
}

/// Removes the field at a structured-merge-diff path (`.a.b[k="v",n=1].c`, list
/// elements selected by their key fields) from `obj`. Returns whether it was there.
fn remove_undeclared(obj: &mut Value, path: &str) -> bool {
    // tokens: ("field", None) or (_, Some(selector)) for a list element
    let mut tokens: Vec<Result<String, Vec<(String, String)>>> = Vec::new();
    let mut chars = path.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '.' => {
                let end = path[i + 1..].find(['.', '[']).map_or(path.len(), |j| i + 1 + j);
                tokens.push(Ok(path[i + 1..end].to_string()));
                while chars.peek().is_some_and(|(j, _)| *j < end) {
                    chars.next();
                }
            }
            '[' => {
                let Some(close) = path[i..].find(']').map(|j| i + j) else { return false };
                let inside = &path[i + 1..close];
                if let Ok(index) = inside.trim().parse::<usize>() {
                    // an element of a list without keys, by position
                    tokens.push(Ok(index.to_string()));
                } else {
                    let pairs = inside
                        .split(',')
                        .filter_map(|kv| kv.split_once('='))
                        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                        .collect();
                    tokens.push(Err(pairs));
                }
                while chars.peek().is_some_and(|(j, _)| *j <= close) {
                    chars.next();
                }
            }
            _ => return false,
        }
    }
    let Some((last, parents)) = tokens.split_last() else { return false };
    let mut cur = obj;
    for t in parents {
        let next = match t {
            Ok(field) if cur.is_array() => field.parse::<usize>().ok().and_then(|i| cur.get_mut(i)),
            Ok(field) => cur.get_mut(field.as_str()),
            Err(pairs) => cur.as_array_mut().and_then(|items| {
                items.iter_mut().find(|item| {
                    pairs.iter().all(|(k, v)| {
                        item.get(k).is_some_and(|x| {
                            x.as_str()
                                .map_or_else(|| serde_json::from_str::<Value>(v).is_ok_and(|n| n == *x), |s| s == v)
                        })
                    })
                })
            }),
        };
        let Some(n) = next else { return false };
        cur = n;
    }
    match last {
        Ok(field) => cur.as_object_mut().is_some_and(|m| m.remove(field).is_some()),
        Err(_) => false,
    }
}

/// `s` cut to at most `max` bytes on a character boundary, ending with `…` when cut.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max - '…'.len_utf8();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn to_value(obj: DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

/// Builds a client from `--kubeconfig` when given, else the usual inference
/// (`KUBECONFIG`, `~/.kube/config`, in-cluster service account).
///
/// # Errors
/// When no configuration is found or it is invalid.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    Ok(Client::try_from(config(kubeconfig).await?)?)
}

/// The client configuration from `--kubeconfig` when given, else the usual inference
/// (`KUBECONFIG`, `~/.kube/config`, in-cluster service account).
///
/// # Errors
/// When no configuration is found or it is invalid.
pub async fn config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    config_in(kubeconfig, None).await
}

/// [`config`] with a kubeconfig context other than the current one (`--context`).
/// Without `--kubeconfig`, the files of `KUBECONFIG` (a `:`-separated list) are merged
/// as kubectl merges them (the first file to set a value wins; files that do not exist
/// are skipped), else `~/.kube/config`; without a context either, the in-cluster
/// service account is the last resort.
///
/// # Errors
/// When no configuration is found, it is invalid, or it has no such context.
pub async fn config_in(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    if let Some(path) = kubeconfig {
        let kc = kube::config::Kubeconfig::read_from(path)?;
        return Ok(kube::Config::from_custom_kubeconfig(kc, &options).await?);
    }
    // As kubectl: the files of KUBECONFIG that exist, merged; a missing one is skipped.
    let listed: Vec<std::path::PathBuf> = std::env::var_os("KUBECONFIG")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty() && p.exists()).collect())
        .unwrap_or_default();
    if !listed.is_empty() {
        let kc = listed.iter().try_fold(kube::config::Kubeconfig::default(), |merged, p| {
            kube::config::Kubeconfig::read_from(p).and_then(|next| merged.merge(next))
        })?;
        return Ok(kube::Config::from_custom_kubeconfig(kc, &options).await?);
    }
    Ok(match context {
        Some(_) => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    })
}

/// [`client`] with `--context` (see [`config_in`]).
///
/// # Errors
/// As [`config_in`].
pub async fn client_in(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<Client> {
    Ok(Client::try_from(config_in(kubeconfig, context).await?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(message: &str, causes: &[(&str, &str)]) -> kube::core::Status {
        let mut s = kube::core::Status::failure(message, "Invalid").with_code(422);
        if !causes.is_empty() {
            s.details = Some(kube::core::response::StatusDetails {
                causes: causes
                    .iter()
                    .map(|(field, message)| kube::core::response::StatusCause {
                        reason: "FieldValueInvalid".into(),
                        message: (*message).into(),
                        field: (*field).into(),
                    })
                    .collect(),
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                retry_after_seconds: 0,
            });
        }
        s
    }

    #[test]
    fn immutable_fields_come_from_the_causes_not_the_code() {
        let job = status(
            "Job.batch \"migrate\" is invalid: spec.template: Invalid value: {...}: field is immutable",
            &[("spec.template", "Invalid value: {...}: field is immutable")],
        );
        assert_eq!(immutable_fields(&job), ["spec.template"]);
        let svc = status(
            "Service \"web\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.9\"}: may not change once set; spec.clusterIP: Invalid value: \"10.0.0.9\": field is immutable",
            &[],
        );
        assert_eq!(immutable_fields(&svc), ["spec.clusterIP"]);
        let other = status(
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            &[("spec.replicas", "Invalid value: -1: must be greater than or equal to 0")],
        );
        assert!(immutable_fields(&other).is_empty(), "a 422 alone is not an immutable field");
        let quoted = status(
            "ConfigMap \"x\" is invalid: data[immutable key]: Invalid value: \"immutable key\": a valid config key must consist of alphanumeric characters",
            &[(
                "data[immutable key]",
                "Invalid value: \"immutable key\": a valid config key must consist of alphanumeric characters",
            )],
        );
        assert!(immutable_fields(&quoted).is_empty(), "the word in a quoted value does not count");
        let pvc = status(
            "PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests\n  core.PersistentVolumeClaimSpec{\n- AccessModes: {\"ReadWriteOnce\"},\n+ AccessModes: {\"ReadWriteMany\"},\n  }",
            &[(
                "spec",
                "Forbidden: spec is immutable after creation except resources.requests\n  core.PersistentVolumeClaimSpec{\n- AccessModes: x,\n  }",
            )],
        );
        assert_eq!(immutable_fields(&pvc), ["spec"]);
    }

    /// flux2#3627 class: an admission policy or webhook that denies a change saying a
    /// field "is immutable" makes the field immutable (Force=true re-creates); its other
    /// denials do not, nor does the same wording inside a value Git wrote.
    #[test]
    fn an_admission_denial_saying_is_immutable_names_an_immutable_field() {
        let vap = status(
            "jobs.batch \"migrate\" is forbidden: ValidatingAdmissionPolicy 'frozen-jobs' with binding 'frozen-jobs' denied request: spec.template is immutable once the Job ran",
            &[(
                "",
                "ValidatingAdmissionPolicy 'frozen-jobs' with binding 'frozen-jobs' denied request: spec.template is immutable once the Job ran",
            )],
        );
        assert_eq!(immutable_fields(&vap), ["spec.template (denied by ValidatingAdmissionPolicy 'frozen-jobs')"]);
        let webhook = status(
            "admission webhook \"guard.example.com\" denied the request: spec.selector: field is immutable",
            &[],
        );
        assert_eq!(immutable_fields(&webhook), ["spec.selector (denied by admission webhook \"guard.example.com\")"]);
        let unnamed =
            status("admission webhook \"guard.example.com\" denied the request: this object is immutable!", &[]);
        assert_eq!(immutable_fields(&unnamed), ["named by admission webhook \"guard.example.com\""]);
        let other = status(
            "jobs.batch \"migrate\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: images must come from registry.example",
            &[("", "images must come from registry.example: is immutable")],
        );
        assert!(immutable_fields(&other).is_empty(), "a denial for another reason");
        let quoted = status(
            "ConfigMap \"x\" is invalid: data[k]: Invalid value: \"admission webhook \\\"w\\\" denied the request: k is immutable\": bad",
            &[],
        );
        assert!(immutable_fields(&quoted).is_empty(), "the wording inside a quoted value does not count");
    }

    #[test]
    fn unknown_fields_named_by_the_server_are_removed() {
        let message = "failed to create typed patch object (ns/web; apps/v1, Kind=Deployment): errors:\n  .spec.template.spec.containers[name=\"main\"].colour: field not declared in schema\n  .extra: field not declared in schema";
        let paths = undeclared_fields(message);
        assert_eq!(paths, [".spec.template.spec.containers[name=\"main\"].colour", ".extra"]);
        let mut obj = serde_json::json!({"extra": 1, "spec": {"template": {"spec": {"containers": [
            {"name": "side", "colour": "red"}, {"name": "main", "colour": "blue", "image": "x"}]}}}});
        assert!(paths.iter().all(|p| remove_undeclared(&mut obj, p)));
        assert_eq!(
            obj,
            serde_json::json!({"spec": {"template": {"spec": {"containers": [
                {"name": "side", "colour": "red"}, {"name": "main", "image": "x"}]}}}})
        );
        assert!(!remove_undeclared(&mut obj, ".nope.deeper"));
        let mut tolerations = serde_json::json!({"tolerations": [{"key": "a"}, {"key": "b", "bogus": 1}]});
        assert!(remove_undeclared(&mut tolerations, ".tolerations[1].bogus"));
        assert_eq!(tolerations, serde_json::json!({"tolerations": [{"key": "a"}, {"key": "b"}]}));
        let cut = truncate("é".repeat(600), 1024);
        assert!(cut.len() <= 1024 && cut.ends_with('…'), "{}", cut.len());
    }
}
