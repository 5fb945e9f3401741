//! The live side around the desired objects: what the application owns that Git no
//! longer declares (prune candidates), the children a workload's health reads, the
//! namespaces objects go into, what other applications declare (hand-over), and
//! objects nobody tracks (`orphanedResources.warn`).

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use serde_json::Value;

use super::Io;
use crate::{
    cluster::Kind,
    compare::{Cached, Compared, SyncStatus},
    config::Environment,
    plan::{self, Claims, PruneCandidate, SyncOptions},
    source::Desired,
    tracking::{self, ObjectKey, group_of},
};

/// Owned objects Git no longer declares.
#[derive(Default)]
pub(super) struct Candidates {
    /// Each with its kind (for the delete).
    pub orphans: Vec<(PruneCandidate, Kind)>,
    /// Those carrying `IgnoreExtraneous` (never make the application OutOfSync).
    pub extraneous: HashSet<String>,
    /// Kinds that could not be listed, or listing errors.
    pub errors: Vec<String>,
    /// Objects labelled `plumb.dev/app` for the application that carry no tracking-id
    /// and that Git does not declare: plumb neither compares nor prunes them.
    pub untracked: Vec<String>,
    /// `(group, kind)` of remembered kinds no version of which is served any more
    /// (their CRD is gone, and their objects with it): forgotten.
    pub gone: Vec<(String, String)>,
}

/// The children of one pass's workloads: each kind's objects of a namespace read once,
/// by owner — from the watch cache when the process has one ([`crate::watch::LiveCache::by_owner`]),
/// else by one LIST ([`crate::cluster::Cluster::list_children`]): `plumb sync --local
/// --wait` judges a crash-looping Pod as the server does.
#[derive(Default)]
pub(super) struct Children {
    /// By (kind, namespace): owner uid → objects; `None` while that watch is not ready
    /// (or the LIST failed).
    read: HashMap<(String, String), Option<crate::watch::ByOwner>>,
}

/// The children of one workload, as the watch cache holds them.
#[derive(Default)]
pub(super) struct Owned {
    pods: Vec<Arc<Cached>>,
    replica_sets: Vec<Arc<Cached>>,
    /// The kinds of Pods and ReplicaSets, once looked up.
    kinds: Option<(Kind, Kind)>,
}

impl Owned {
    /// The pods and ReplicaSets as JSON, with their apiVersion and kind (for
    /// [`crate::health`]).
    pub fn values(&self) -> (Vec<Value>, Vec<Value>) {
        let Some((pod_kind, rs_kind)) = &self.kinds else { return (vec![], vec![]) };
        let json = |objs: &[Arc<Cached>], kind| objs.iter().map(|o| crate::watch::with_types(o, kind)).collect();
        (json(&self.pods, pod_kind), json(&self.replica_sets, rs_kind))
    }

    /// Feeds `h` which children these are, at which version (uid and resourceVersion
    /// of each, in order).
    pub fn hash_versions(&self, h: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        for objs in [&self.pods, &self.replica_sets] {
            objs.len().hash(h);
            for o in objs {
                (o.uid(), o.resource_version()).hash(h);
            }
        }
    }
}

impl Io<'_> {
    /// Lists, for every kind in `kinds`, the objects `app` owns (tracking-id naming the
    /// application and the object) that are not among `desired`: the prune candidates,
    /// those already being deleted included (they exist until their finalizers go).
    /// `defaults` are the application's sync options.
    ///
    /// Kinds are looked up by group and kind through the version discovery serves now,
    /// never through the remembered version (a CRD upgrade may have stopped serving it;
    /// the objects are still there through another version). A kind none of whose
    /// versions is served any more has no objects left: nothing to prune.
    pub(super) async fn prune_candidates(
        self,
        app: &str,
        desired: &HashSet<ObjectKey>,
        kinds: &BTreeSet<(String, String)>,
        defaults: &SyncOptions,
    ) -> Candidates {
        let mut out = Candidates::default();
        let installation = self.config.settings.installation_id.as_deref();
        let groups: BTreeSet<(&str, &str)> = kinds.iter().map(|(av, k)| (group_of(av), k.as_str())).collect();
        for (group, kind_name) in groups {
            let (kind, objs) = match self.list_served(group, kind_name, app, desired).await {
                Ok(Some(found)) => found,
                Ok(None) => {
                    // no version served: the CRD is gone, its objects with it
                    out.gone.push((group.to_string(), kind_name.to_string()));
                    continue;
                }
                Err(e) => {
                    out.errors.push(e.to_string());
                    continue;
                }
            };
            for o in &objs {
                let Some(key) = ObjectKey::of(o) else { continue };
                // a hook plumb ran is never an orphan nor pruned, even if labelled by hand
                if plan::hooks::is_hook_run(o) {
                    continue;
                }
                if !tracking::is_owned_by(o, app, installation) {
                    // labelled for the application by hand (or by a copy): neither compared nor pruned
                    let marked = o.pointer("/metadata/annotations").and_then(|a| a.get(tracking::TRACKING_ANNOTATION));
                    if marked.is_none() && !desired.contains(&key) {
                        out.untracked.push(key.to_string());
                    }
                    continue;
                }
                if desired.contains(&key) || out.orphans.iter().any(|(c, _)| c.key == key) {
                    continue;
                }
                // Helm keeps it (helm-05): a veto on the live object, not a difference
                let kept = plan::keeps(o);
                if kept || plan::ignores_extraneous(o) {
                    out.extraneous.insert(key.to_string());
                }
                let approval = self.prune_approval(&kind, &key, o).await;
                let deletion = o.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).map(|since| {
                    let finalizers = o.pointer("/metadata/finalizers").and_then(Value::as_array);
                    plan::Deletion {
                        since: since.to_string(),
                        finalizers: finalizers
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(String::from)
                            .collect(),
                    }
                });
                // another controller took it over: its controller decides, not Git
                let held = self.live_controller(o).await.map(|owner| {
                    out.extraneous.insert(key.to_string());
                    format!("controlled by {owner} — left to its controller")
                });
                let candidate = PruneCandidate {
                    uid: o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string(),
                    key,
                    options: defaults.with_object(&SyncOptions::of_object(o)),
                    approved: approval == Ok(true),
                    approval_problem: approval.err(),
                    held,
                    deletion,
                    adopted: tracking::is_adopted(o),
                    kept,
                    replaced_by: None,
                };
                out.orphans.push((candidate, kind.clone()));
            }
        }
        out
    }

    /// [`plan::prune_approval`] of `obj`, judged on the object as the API server holds
    /// it when `obj` came from the watch cache without plumb's own field set
    /// ([`crate::watch::compacted`]): who wrote the annotation is in that field set.
    async fn prune_approval(self, kind: &Kind, key: &ObjectKey, obj: &Value) -> Result<bool, String> {
        let now = jiff::Timestamp::now();
        let judged = plan::prune_approval(obj, now);
        if judged.is_ok() || !crate::watch::compacted(obj) {
            return judged;
        }
        match self.cluster.get(kind, key).await {
            Ok(Some(whole)) => plan::prune_approval(&whole, now),
            Ok(None) => Ok(false),
            Err(e) => Err(format!("{} could not be verified: {e}", plan::PRUNE_APPROVED_ANNOTATION)),
        }
    }

    /// The owner `obj` names as its controller (`ownerReferences[]` with `controller:
    /// true`; at most one, Kubernetes API conventions) when that owner exists with the
    /// referenced UID, as `Kind[.group]/namespace/name`. A reference to a gone owner
    /// (the garbage collector will remove the object) or to a kind no longer served
    /// protects nothing; a reference without `controller: true` is a dependency link, not
    /// control (argocd-21).
    async fn live_controller(self, obj: &Value) -> Option<String> {
        let refs = obj.pointer("/metadata/ownerReferences")?.as_array()?;
        let owner = refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
        let s = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = self.cluster.kind(s("apiVersion"), s("kind")).await.ok()?;
        let namespace = if kind.namespaced { obj.pointer("/metadata/namespace").and_then(Value::as_str) } else { None };
        let key = ObjectKey {
            group: kind.resource.group.clone(),
            kind: kind.resource.kind.clone(),
            namespace: namespace.unwrap_or("").to_string(),
            name: s("name").to_string(),
        };
        let live = self.cluster.get(&kind, &key).await.ok()??;
        (live.pointer("/metadata/uid").and_then(Value::as_str) == Some(s("uid"))).then(|| key.to_string())
    }

    /// The objects of `group`/`kind` labelled for `app`, through the version discovery
    /// serves; when that version turns out not to be served any more (a 404 for the
    /// resource), once more after discovery is refreshed. `None` when no version of the
    /// kind is served.
    async fn list_served(
        self,
        group: &str,
        kind: &str,
        app: &str,
        desired: &HashSet<ObjectKey>,
    ) -> Result<Option<(Kind, Vec<Value>)>, crate::cluster::Error> {
        let served = |refresh: bool| async move {
            if refresh {
                self.cluster.refresh().await?;
            }
            match self.cluster.served(group, kind).await {
                Ok(k) => Ok(Some(k)),
                Err(crate::cluster::Error::UnknownKind { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        };
        let Some(k) = served(false).await? else { return Ok(None) };
        match self.list_owned(&k, app, desired).await {
            Ok(objs) => Ok(Some((k, objs))),
            Err(e) if e.resource_missing() => {
                let Some(k) = served(true).await? else { return Ok(None) };
                let objs = self.list_owned(&k, app, desired).await?;
                Ok(Some((k, objs)))
            }
            Err(e) => Err(e),
        }
    }

    /// The objects of `kind` labelled for `app` (watch cache, else a LIST), those in
    /// `desired` left out before the (costly) conversion of cached objects.
    async fn list_owned(
        self,
        kind: &Kind,
        app: &str,
        desired: &HashSet<ObjectKey>,
    ) -> Result<Vec<Value>, crate::cluster::Error> {
        let Some(objs) = self.live.as_ref().and_then(|c| c.list_app(kind, app)) else {
            return self.cluster.list_app(kind, app).await;
        };
        Ok(objs
            .iter()
            .filter(|o| {
                let key = ObjectKey {
                    group: kind.resource.group.clone(),
                    kind: kind.resource.kind.clone(),
                    namespace: o.namespace().unwrap_or_default().to_string(),
                    name: o.name().to_string(),
                };
                !desired.contains(&key)
            })
            .map(|o| crate::watch::with_types(o, kind))
            .collect())
    }

    /// Pods (and, for a Deployment, ReplicaSets) a workload owns, from the watch cache
    /// (read through `children`, which one pass keeps); none without watches or before
    /// they are ready (health then uses status only).
    pub(super) async fn children(self, c: &Compared, children: &mut Children) -> Owned {
        let Some(live) = &c.live else { return Owned::default() };
        let workload = crate::watch::has_children(&c.key.group, &c.key.kind);
        let Some(uid) = live.uid().filter(|_| workload) else {
            return Owned::default();
        };
        let (Ok(pod_kind), Ok(rs_kind)) =
            (self.cluster.kind("v1", "Pod").await, self.cluster.kind("apps/v1", "ReplicaSet").await)
        else {
            return Owned::default();
        };
        let ns = &c.key.namespace;
        let (pods, replica_sets) = if c.key.kind == "Deployment" {
            let rss = self.owned_by(children, &rs_kind, ns, uid).await;
            // the Pods' watch starts with the ReplicaSets' (before any is known): a Pod's
            // change then asks for a health look (`watch::Changed::Child`)
            self.owned_by(children, &pod_kind, ns, "").await;
            let mut pods = Vec::new();
            for rs in &rss {
                if let Some(rs_uid) = rs.uid() {
                    pods.extend(self.owned_by(children, &pod_kind, ns, rs_uid).await);
                }
            }
            (pods, rss)
        } else {
            (self.owned_by(children, &pod_kind, ns, uid).await, vec![])
        };
        Owned { pods, replica_sets, kinds: Some((pod_kind, rs_kind)) }
    }

    /// The objects of `kind` in `namespace` with an owner reference to `owner_uid`, read
    /// once per pass and namespace (see [`Children`]).
    async fn owned_by(
        self,
        children: &mut Children,
        kind: &Kind,
        namespace: &str,
        owner_uid: &str,
    ) -> Vec<Arc<Cached>> {
        let key = (kind.resource.kind.clone(), namespace.to_string());
        if !children.read.contains_key(&key) {
            let read = match &self.live {
                Some(cache) => cache.by_owner(kind, namespace),
                None if namespace.is_empty() || !kind.namespaced => None,
                None => match self.cluster.list_children(kind, namespace).await {
                    Ok(objects) => Some(crate::watch::by_owner(objects.into_iter().map(Arc::new))),
                    Err(e) => {
                        tracing::debug!("children of workloads in {namespace} not read: {e}");
                        None
                    }
                },
            };
            children.read.insert(key.clone(), read);
        }
        children.read.get(&key).and_then(Option::as_ref).and_then(|b| b.get(owner_uid)).cloned().unwrap_or_default()
    }

    /// Marks objects that would be created in a namespace neither in the cluster nor
    /// declared in Git (nor created by `CreateNamespace=true`) as errors, so a preview
    /// does not promise what the sync cannot do. A namespace declared in Git makes its
    /// objects "missing" (created after it), never an error.
    pub(super) async fn check_namespaces(self, compared: &mut [Arc<Compared>], app_namespace: &str, create: bool) {
        let declared: HashSet<String> = compared
            .iter()
            .filter(|c| c.key.group.is_empty() && c.key.kind == "Namespace")
            .map(|c| c.key.name.clone())
            .collect();
        let mut known: HashMap<String, bool> = HashMap::new();
        for c in compared.iter_mut() {
            let namespaced = c.awaits_crd() || c.kind.as_ref().is_some_and(|k| k.namespaced);
            let ns = c.key.namespace.clone();
            if c.live.is_some() || c.sync() != SyncStatus::OutOfSync || !namespaced || ns.is_empty() {
                continue;
            }
            if declared.contains(&ns) || (create && ns == app_namespace) {
                continue;
            }
            let exists = match known.get(&ns) {
                Some(e) => *e,
                None => {
                    let e = self.namespace_exists(&ns).await;
                    known.insert(ns.clone(), e);
                    e
                }
            };
            if !exists {
                let why = format!("namespace \"{ns}\" not found: it is neither in the cluster nor declared in Git");
                *c = Arc::new(c.failed(why));
            }
        }
    }

    /// Whether a Namespace exists (true when that cannot be told: the apply will say).
    async fn namespace_exists(self, name: &str) -> bool {
        match self.cluster.kind("v1", "Namespace").await {
            Ok(kind) => !matches!(self.cluster.get(&kind, &namespace_key(name)).await, Ok(None)),
            Err(_) => true,
        }
    }

    /// `CreateNamespace=true`: creates `namespace` when it does not exist; failures are
    /// logged (the applies into it then say what went wrong).
    pub(super) async fn ensure_namespace(self, writer: &crate::cluster::Cluster, app: &str, namespace: &str) {
        if self.namespace_exists(namespace).await {
            return;
        }
        // marked as created for `app`: it may declare it in Git without adopting it
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": namespace, "annotations": {tracking::CREATED_FOR_ANNOTATION: app}}});
        let created = match self.cluster.kind("v1", "Namespace").await {
            Ok(kind) => writer.apply(&kind, &namespace_key(namespace), &ns, false).await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = created {
            tracing::warn!(namespace, "CreateNamespace: {e}");
        }
    }

    /// Whether `live`, tracked by another application of this policy, moved to the
    /// application comparing it: the tracking application's render (at its revision,
    /// read from the refs `refs_since` accepts: the pass's own) no longer
    /// declares `key`. Unreadable renders and applications of other policies keep it
    /// theirs.
    pub(super) async fn moved_here(self, live: &Value, key: &ObjectKey, refs_since: crate::source::Since) -> bool {
        let Some(owner) = tracking::tracked_app(live) else { return false };
        let Ok((app, _, repo)) = self.app(owner) else { return false };
        match self.sources.desired(owner, repo, &app.revision.value, &app.path.value, refs_since).await {
            Desired::Rendered(_, manifests, _) => {
                !manifests.manifests.iter().filter_map(|m| ObjectKey::of(&m.object())).any(|mut k| {
                    if k.namespace.is_empty() && !key.namespace.is_empty() {
                        k.namespace = app.namespace.value.clone();
                    }
                    k == *key
                })
            }
            _ => false,
        }
    }

    /// Before anything is pruned: lets [`plan::hand_over`] hold what moved to another
    /// application. Only the applications whose boundaries would let them own one of
    /// the candidates are read — at their revision, from the refs `refs_since` accepts,
    /// each within [`HAND_OVER_WAIT`]; the others cannot have taken any, and are not
    /// fetched. One that cannot be read in time (a hung or failing repository, a render
    /// error) holds back only the candidates it could own. Returns the objects handed
    /// over.
    pub(super) async fn hand_over(
        self,
        name: &str,
        candidates: &mut [PruneCandidate],
        refs_since: crate::source::Since,
    ) -> Vec<String> {
        if candidates.is_empty() {
            return vec![];
        }
        let own_namespace = &self.config.settings.status_namespace;
        let mut claims = Claims::default();
        for other in self.config.applications.iter().filter(|a| a.name.value != name) {
            let Ok((app, env, repo)) = self.app(&other.name.value) else { continue };
            // a boundary that does not compile lets its application write nothing
            let Ok(boundary) = plan::Boundary::new(&app.boundaries(env), &app.namespace.value, own_namespace) else {
                continue;
            };
            let boundary = boundary.with_lease_namespaces(self.config.settings.lease_namespaces());
            let could_own =
                |c: &PruneCandidate| boundary.check(&c.key, !c.key.namespace.is_empty(), &Value::Null).is_ok();
            if !candidates.iter().any(could_own) {
                continue;
            }
            let who = &app.name.value;
            let desired = self.sources.desired(who, repo, &app.revision.value, &app.path.value, refs_since);
            let why = match tokio::time::timeout(HAND_OVER_WAIT, desired).await {
                Ok(Desired::Rendered(_, rendered, _)) => {
                    claims.declare(who, declared_keys(app, &rendered));
                    continue;
                }
                Ok(Desired::FetchFailed(e)) => e.to_string(),
                Ok(Desired::RenderFailed(_, e)) => e.to_string(),
                Err(_) => {
                    format!("no answer within {}", crate::config::shown_duration(HAND_OVER_WAIT))
                }
            };
            claims.unknown.push(plan::Unknown { app: who.clone(), why, boundary });
        }
        let handed = plan::hand_over(&claims, candidates);
        for k in &handed {
            tracing::info!(app = name, object = %k, "moved to another application: not pruned");
        }
        handed
    }

    /// The ignoreDifferences rules of `app` and `env` that match no kind the cluster
    /// serves nor any kind the render declares (most likely a typo: `app` for `apps`),
    /// as `group/kind` (`*` for any group).
    pub(super) async fn unmatched_rules(
        self,
        app: &crate::config::Application,
        env: &Environment,
        rendered: &crate::render::Rendered,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for r in env.ignore_differences.iter().chain(&app.ignore_differences) {
            let rendered_kind = globset::Glob::new(&r.kind)
                .map(|g| g.compile_matcher())
                .is_ok_and(|m| rendered.manifests.iter().any(|o| m.is_match(o.kind())));
            if !rendered_kind && !self.cluster.serves_kind_like(r.group.as_deref(), &r.kind).await {
                out.push(format!("{}/{}", r.group.as_deref().unwrap_or("*"), r.kind));
            }
        }
        out
    }

    /// `orphanedResources.warn`: objects in the application's namespaces that no
    /// application tracks, as `Kind/namespace/name`, sorted. Looks at the common
    /// namespaced kinds and every kind the application applied.
    pub(super) async fn orphaned_resources(
        self,
        env: &Environment,
        namespaces: &BTreeSet<String>,
        kinds: &BTreeSet<(String, String)>,
    ) -> Result<Vec<String>, crate::cluster::Error> {
        const COMMON: &[(&str, &str)] = &[
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("v1", "Service"),
            ("v1", "ServiceAccount"),
            ("v1", "PersistentVolumeClaim"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "Job"),
            ("batch/v1", "CronJob"),
            ("networking.k8s.io/v1", "Ingress"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ];
        let mut all: BTreeSet<(String, String)> =
            COMMON.iter().map(|(a, k)| ((*a).to_string(), (*k).to_string())).collect();
        all.extend(kinds.iter().cloned());
        let mut out = Vec::new();
        for (api_version, kind_name) in &all {
            let Ok(kind) = self.cluster.kind(api_version, kind_name).await else { continue };
            if !kind.namespaced {
                continue;
            }
            for ns in namespaces {
                for o in self.cluster.list_unlabelled(&kind, ns).await? {
                    if !plan::hooks::is_hook_run(&o)
                        && plan::orphan_reported(&o, &env.orphaned_resources.ignore)
                        && let Some(k) = ObjectKey::of(&o)
                    {
                        out.push(k.to_string());
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// The identity of Namespace `name`.
fn namespace_key(name: &str) -> ObjectKey {
    ObjectKey { group: String::new(), kind: "Namespace".into(), namespace: String::new(), name: name.into() }
}

/// The longest the hand-over check waits for another application's desired state.
pub const HAND_OVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `app`'s manifests declare, namespaced objects without a namespace given the
/// application's.
fn declared_keys<'r>(
    app: &'r crate::config::Application,
    rendered: &'r crate::render::Rendered,
) -> impl Iterator<Item = ObjectKey> + 'r {
    rendered.manifests.iter().filter_map(|m| ObjectKey::of(&m.object())).map(|mut k| {
        if k.namespace.is_empty() {
            k.namespace.clone_from(&app.namespace.value);
        }
        k
    })
}
