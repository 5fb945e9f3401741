//! The boundaries of an application: where its Git may make plumb write (see
//! [`crate::config::Boundaries`] for the policy shape). Pure: fed an object's identity
//! and body, says whether it may be written and, if not, by which rule.
//!
//! Rules, in order:
//!
//! 1. plumb's own namespace (the status namespace) and its Namespace are never written,
//!    nor the namespace of its Leases when another (`settings.leaseNamespace`, `plumb
//!    serve --lease-namespace`: [`Boundary::with_lease_namespaces`]; whoever writes
//!    Leases there can hold shards); what an application owns there anyway (adopted
//!    before) is never pruned ([`Boundary::never_pruned`]);
//! 2. plumb's own RBAC — ClusterRoles and ClusterRoleBindings named `plumb` or
//!    `plumb-*`, and any RoleBinding or ClusterRoleBinding that grants such a
//!    ClusterRole — is never written (Git could otherwise hand plumb's rights to anyone),
//!    nor is plumb's resource definition `applications.plumb.dev` (whatever
//!    `clusterResources` allows: deleting it deletes every `Application`);
//! 3. a namespaced object goes only into a namespace matching `destinations.namespaces`
//!    (default: exactly the application's namespace), and never is of a kind matching
//!    `namespaceResources.deny`;
//! 4. a cluster-scoped object must match `clusterResources`; a Namespace whose name
//!    matches the destinations is always allowed (default: nothing else).
//!
//! The one application with `selfManagement: true` (plumb's own installation, written by
//! `plumb bootstrap`) is exempt from rules 1 and 2, and may also write the `Application`
//! resource definition (`applications.plumb.dev`); rules 3 and 4 hold for it as for any
//! other (its namespace is plumb's, validation sees to it). What it must never delete —
//! plumb's Namespace, that definition (every `Application` would go with it), plumb's
//! Deployment, ServiceAccount, RBAC and policy ConfigMap — is [`Boundary::never_pruned`].

use globset::{Glob, GlobMatcher};
use serde_json::Value;

use crate::{
    config::{Boundaries, GroupKind},
    tracking::ObjectKey,
};

/// Compiled boundaries of one application.
#[derive(Debug, Clone)]
pub struct Boundary {
    namespaces: Vec<(String, GlobMatcher)>,
    cluster: Option<Vec<(GroupKind, GlobMatcher, GlobMatcher)>>,
    deny: Vec<(GroupKind, GlobMatcher, GlobMatcher)>,
    own_namespace: String,
    /// The Leases' namespaces other than `own_namespace` (rule 1).
    lease_namespaces: Vec<String>,
    self_management: bool,
}

/// The name of plumb's `Application` resource definition.
pub const DEFINITION: &str = "applications.plumb.dev";

/// The name of the ConfigMap holding plumb's policy in its namespace (`deploy/base`).
pub const POLICY_CONFIG_MAP: &str = "plumb-policy";

impl Boundary {
    /// The boundaries `b` of an application whose namespace is `app_namespace`, in an
    /// installation whose own namespace is `own_namespace`.
    ///
    /// # Errors
    /// A glob that does not compile, named (the policy's validation reports it first).
    pub fn new(b: &Boundaries, app_namespace: &str, own_namespace: &str) -> Result<Self, String> {
        let glob = |g: &str| Glob::new(g).map(|g| g.compile_matcher()).map_err(|e| format!("`{g}`: {e}"));
        let kinds = |list: &[GroupKind]| -> Result<Vec<_>, String> {
            list.iter().map(|gk| Ok((gk.clone(), glob(&gk.group)?, glob(&gk.kind)?))).collect()
        };
        let namespaces = match &b.destinations {
            Some(d) => d.namespaces.iter().map(|n| Ok((n.clone(), glob(n)?))).collect::<Result<_, String>>()?,
            None => vec![(app_namespace.to_string(), glob(&globset::escape(app_namespace))?)],
        };
        Ok(Self {
            namespaces,
            cluster: b.cluster_resources.as_deref().map(kinds).transpose()?,
            deny: b.namespace_resources.as_ref().map_or(Ok(vec![]), |n| kinds(&n.deny))?,
            own_namespace: own_namespace.to_string(),
            lease_namespaces: Vec::new(),
            self_management: b.self_management,
        })
    }

    /// These boundaries where plumb keeps its Leases also in `lease_namespaces`
    /// ([`crate::config::Settings::lease_namespaces`]), which are then never written
    /// from Git either (but by the self application).
    #[must_use]
    pub fn with_lease_namespaces<'a>(mut self, lease_namespaces: impl IntoIterator<Item = &'a str>) -> Self {
        for ns in lease_namespaces {
            if ns != self.own_namespace && !self.lease_namespaces.iter().any(|n| n == ns) {
                self.lease_namespaces.push(ns.to_string());
            }
        }
        self
    }

    /// The Leases' namespace `key` lies in, or is (its Namespace), if any.
    fn in_lease_namespace(&self, key: &ObjectKey) -> Option<&str> {
        self.lease_namespaces
            .iter()
            .find(|ns| key.namespace == **ns || (is(key, "", "Namespace") && key.name == **ns))
            .map(String::as_str)
    }

    /// Why `key` is never pruned by this application, if so. For the self application
    /// (`selfManagement: true`), the objects plumb needs to run: its Namespace and the
    /// Namespace of its Leases; the `Application` resource definition (deleting it
    /// deletes every `Application`); in its namespace its Deployments, ServiceAccounts,
    /// Roles, RoleBindings and the policy ConfigMap ([`POLICY_CONFIG_MAP`]); in the
    /// Leases' namespace its Roles and RoleBindings; anywhere its own RBAC by name
    /// (ClusterRoles, ClusterRoleBindings and RoleBindings named `plumb` or `plumb-*`).
    /// For every other application, whatever it came to own in plumb's namespace or the
    /// Leases' (rule 1 refuses writing there; such an object was adopted or labelled
    /// before): deleting a Lease would end a replica's hold of its shard. Whatever the
    /// options or approvals: removing such a file from Git leaves the object in place,
    /// to be deleted by hand.
    pub fn never_pruned(&self, key: &ObjectKey) -> Option<String> {
        let own = &self.own_namespace;
        let leases = self.in_lease_namespace(key);
        if !self.self_management {
            let reserved = key.namespace == *own || (is(key, "", "Namespace") && key.name == *own) || leases.is_some();
            return reserved.then(|| {
                format!(
                    "{} is in plumb's own namespaces, which Git never writes: never pruned, delete it by hand",
                    kind_of(key)
                )
            });
        }
        let rbac = key.group == "rbac.authorization.k8s.io";
        let needed = (is(key, "", "Namespace") && (key.name == *own || leases.is_some()))
            || (is(key, "apiextensions.k8s.io", "CustomResourceDefinition") && key.name == DEFINITION)
            || (rbac
                && matches!(key.kind.as_str(), "ClusterRole" | "ClusterRoleBinding" | "RoleBinding")
                && plumbs(&key.name))
            || (key.namespace == *own
                && (is(key, "apps", "Deployment")
                    || is(key, "", "ServiceAccount")
                    || (rbac && matches!(key.kind.as_str(), "Role" | "RoleBinding"))
                    || (is(key, "", "ConfigMap") && key.name == POLICY_CONFIG_MAP)))
            || (leases.is_some() && rbac && matches!(key.kind.as_str(), "Role" | "RoleBinding"));
        needed.then(|| {
            format!("plumb's own installation ({}) is never pruned by selfManagement: delete it by hand", kind_of(key))
        })
    }

    /// Why `Force=true` never deletes and re-creates `key` (to change an immutable
    /// field) under `selfManagement`: it is one of the objects [`Boundary::never_pruned`]
    /// keeps (re-creating the resource definition would delete every `Application`),
    /// whatever `protectDataLoss` says. `None` for other objects and applications.
    pub fn never_recreated(&self, key: &ObjectKey) -> Option<String> {
        if !self.self_management {
            return None;
        }
        self.never_pruned(key).map(|_| format!("plumb's own installation ({}) under selfManagement", kind_of(key)))
    }

    /// Whether object `key` (of a namespaced kind when `namespaced`; `obj` its body) may
    /// be written.
    ///
    /// # Errors
    /// The rule that refuses it, in words: `namespace "kube-system" is not among the
    /// destinations (destinations.namespaces: web)`.
    pub fn check(&self, key: &ObjectKey, namespaced: bool, obj: &Value) -> Result<(), String> {
        let own = &self.own_namespace;
        if self.self_management {
            if is(key, "", "Namespace") && key.name == *own
                || is(key, "apiextensions.k8s.io", "CustomResourceDefinition") && key.name == DEFINITION
                || !namespaced && own_rbac(key, obj).is_some()
            {
                return Ok(());
            }
        } else {
            if (namespaced && key.namespace == *own) || (is(key, "", "Namespace") && key.name == *own) {
                return Err(format!(
                    "plumb's own namespace \"{own}\" is never written from Git (only by the application with selfManagement: true)"
                ));
            }
            if let Some(leases) = self.in_lease_namespace(key).filter(|_| namespaced || is(key, "", "Namespace")) {
                return Err(format!(
                    "namespace \"{leases}\" holds plumb's Leases (settings.leaseNamespace or --lease-namespace): never written from Git (only by the application with selfManagement: true)"
                ));
            }
            if is(key, "apiextensions.k8s.io", "CustomResourceDefinition") && key.name == DEFINITION {
                return Err(format!(
                    "plumb's own resource definition ({DEFINITION}) is never written from Git (only by the application with selfManagement: true)"
                ));
            }
            if let Some(why) = own_rbac(key, obj) {
                return Err(why);
            }
        }
        if namespaced {
            if !self.namespaces.iter().any(|(_, m)| m.is_match(&key.namespace)) {
                return Err(format!(
                    "namespace \"{}\" is not among the destinations (destinations.namespaces: {})",
                    key.namespace,
                    self.namespaces.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            if let Some((gk, ..)) = self.deny.iter().find(|(_, g, k)| g.is_match(&key.group) && k.is_match(&key.kind)) {
                return Err(format!("{} is denied (namespaceResources.deny: {})", kind_of(key), show(gk)));
            }
            return Ok(());
        }
        if is(key, "", "Namespace") && self.namespaces.iter().any(|(_, m)| m.is_match(&key.name)) {
            return Ok(());
        }
        let allowed = self.cluster.as_ref().map_or(&[][..], Vec::as_slice);
        if allowed.iter().any(|(_, g, k)| g.is_match(&key.group) && k.is_match(&key.kind)) {
            return Ok(());
        }
        let listed = if allowed.is_empty() {
            "none".to_string()
        } else {
            allowed.iter().map(|(gk, ..)| show(gk)).collect::<Vec<_>>().join(", ")
        };
        Err(format!("cluster-scoped {} is not allowed (clusterResources: {listed})", kind_of(key)))
    }
}

fn is(key: &ObjectKey, group: &str, kind: &str) -> bool {
    key.group == group && key.kind == kind
}

fn kind_of(key: &ObjectKey) -> String {
    if key.group.is_empty() { key.kind.clone() } else { format!("{}.{}", key.kind, key.group) }
}

fn show(gk: &GroupKind) -> String {
    if gk.group.is_empty() { gk.kind.clone() } else { format!("{}.{}", gk.kind, gk.group) }
}

/// Whether `name` names plumb's own RBAC.
fn plumbs(name: &str) -> bool {
    name == "plumb" || name.starts_with("plumb-")
}

/// Why `key` is plumb's own RBAC, or grants plumb's ClusterRole, if it does.
fn own_rbac(key: &ObjectKey, obj: &Value) -> Option<String> {
    if key.group != "rbac.authorization.k8s.io" {
        return None;
    }
    if matches!(key.kind.as_str(), "ClusterRole" | "ClusterRoleBinding") && plumbs(&key.name) {
        return Some(format!("plumb's own RBAC ({} {}) is never written from Git", key.kind, key.name));
    }
    let role = obj.pointer("/roleRef").filter(|_| matches!(key.kind.as_str(), "RoleBinding" | "ClusterRoleBinding"))?;
    let (kind, name) = (role.get("kind").and_then(Value::as_str)?, role.get("name").and_then(Value::as_str)?);
    (kind == "ClusterRole" && plumbs(name))
        .then(|| format!("{} grants plumb's own ClusterRole {name}, which Git may not hand out", key.kind))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::{Destinations, NamespaceResources};

    fn key(group: &str, kind: &str, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey { group: group.into(), kind: kind.into(), namespace: namespace.into(), name: name.into() }
    }

    fn gk(group: &str, kind: &str) -> GroupKind {
        GroupKind { group: group.into(), kind: kind.into() }
    }

    const OWN: &str = "plumb's own namespace \"plumb-system\" is never written from Git (only by the application with selfManagement: true)";

    #[test]
    fn defaults_keep_an_application_in_its_namespace() {
        let b = Boundary::new(&Boundaries::default(), "web", "plumb-system").expect("valid");
        let none = json!({});
        // (object, namespaced) → refusal (None: allowed)
        let table: &[(ObjectKey, bool, Option<&str>)] = &[
            (key("", "ConfigMap", "web", "a"), true, None),
            (key("apps", "Deployment", "web", "a"), true, None),
            (key("", "Namespace", "", "web"), false, None),
            (
                key("", "ConfigMap", "kube-system", "a"),
                true,
                Some("namespace \"kube-system\" is not among the destinations (destinations.namespaces: web)"),
            ),
            (
                key("", "ConfigMap", "web-2", "a"),
                true,
                Some("namespace \"web-2\" is not among the destinations (destinations.namespaces: web)"),
            ),
            (
                key("", "Namespace", "", "other"),
                false,
                Some("cluster-scoped Namespace is not allowed (clusterResources: none)"),
            ),
            (
                key("rbac.authorization.k8s.io", "ClusterRoleBinding", "", "x"),
                false,
                Some(
                    "cluster-scoped ClusterRoleBinding.rbac.authorization.k8s.io is not allowed (clusterResources: none)",
                ),
            ),
            (key("", "ConfigMap", "plumb-system", "plumb-app-other"), true, Some(OWN)),
            (key("", "Namespace", "", "plumb-system"), false, Some(OWN)),
        ];
        for (k, namespaced, want) in table {
            assert_eq!(b.check(k, *namespaced, &none).err().as_deref(), *want, "{k}");
        }
    }

    /// With `--lease-namespace` another namespace than plumb's own, an application whose
    /// destinations match it writes nothing there (its Git could otherwise write a shard's
    /// Lease and hold the shard), nor its Namespace; the self application still may.
    #[test]
    fn the_lease_namespace_is_never_written_from_git() {
        let anywhere =
            Boundaries { destinations: Some(Destinations { namespaces: vec!["*".into()] }), ..Boundaries::default() };
        let b = Boundary::new(&anywhere, "web", "plumb-system").expect("valid");
        let b = b.with_lease_namespaces(["plumb-leases"]);
        let lease = key("coordination.k8s.io", "Lease", "plumb-leases", "plumb-shard-0");
        let refused = "namespace \"plumb-leases\" holds plumb's Leases (settings.leaseNamespace or --lease-namespace): never written from Git (only by the application with selfManagement: true)";
        assert_eq!(b.check(&lease, true, &json!({})).err().as_deref(), Some(refused));
        let ns = key("", "Namespace", "", "plumb-leases");
        assert_eq!(b.check(&ns, false, &json!({})).err().as_deref(), Some(refused));
        assert!(b.check(&key("", "ConfigMap", "web", "a"), true, &json!({})).is_ok(), "elsewhere as before");
        // without the flag, or naming plumb's own namespace, nothing changes
        let plain = Boundary::new(&anywhere, "web", "plumb-system").expect("valid");
        assert!(plain.check(&lease, true, &json!({})).is_ok());
        let same = plain.clone().with_lease_namespaces(["plumb-system"]);
        assert_eq!(same.check(&lease, true, &json!({})).err(), plain.check(&lease, true, &json!({})).err());
        let own = Boundaries { self_management: true, ..anywhere };
        let own =
            Boundary::new(&own, "plumb-system", "plumb-system").expect("valid").with_lease_namespaces(["plumb-leases"]);
        assert!(own.check(&lease, true, &json!({})).is_ok(), "plumb's own installation");
        // what an application came to own there anyway is never pruned by it; the self
        // application keeps that Namespace and its RBAC there
        assert!(b.never_pruned(&lease).is_some_and(|why| why.contains("never pruned")));
        assert!(b.never_pruned(&ns).is_some() && b.never_pruned(&key("", "ConfigMap", "plumb-system", "x")).is_some());
        assert_eq!(b.never_pruned(&key("", "ConfigMap", "web", "a")), None);
        assert_eq!(b.never_recreated(&lease), None, "only the self application's are named so");
        let role = key("rbac.authorization.k8s.io", "Role", "plumb-leases", "leases");
        assert!(own.never_pruned(&ns).is_some() && own.never_pruned(&role).is_some());
        assert_eq!(own.never_pruned(&key("", "ConfigMap", "plumb-leases", "x")), None);
    }

    #[test]
    fn environments_widen_and_narrow() {
        let boundaries = Boundaries {
            destinations: Some(Destinations { namespaces: vec!["shop".into(), "shop-*".into()] }),
            cluster_resources: Some(vec![
                gk("rbac.authorization.k8s.io", "ClusterRole"),
                gk("apiextensions.k8s.io", "*"),
            ]),
            namespace_resources: Some(NamespaceResources {
                deny: vec![gk("", "ResourceQuota"), gk("rbac.authorization.k8s.io", "*Binding")],
            }),
            self_management: false,
        };
        let b = Boundary::new(&boundaries, "web", "plumb-system").expect("valid");
        let none = json!({});
        let grant = |name: &str| json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}});
        let table: &[(ObjectKey, bool, &Value, Option<&str>)] = &[
            (key("", "ConfigMap", "shop-eu", "a"), true, &none, None),
            (
                key("", "ConfigMap", "web", "a"),
                true,
                &none,
                Some("namespace \"web\" is not among the destinations (destinations.namespaces: shop, shop-*)"),
            ),
            (key("", "Namespace", "", "shop-us"), false, &none, None),
            (key("apiextensions.k8s.io", "CustomResourceDefinition", "", "w.example"), false, &none, None),
            (key("rbac.authorization.k8s.io", "ClusterRole", "", "shop-reader"), false, &none, None),
            (
                key("", "ResourceQuota", "shop", "q"),
                true,
                &none,
                Some("ResourceQuota is denied (namespaceResources.deny: ResourceQuota)"),
            ),
            (
                key("rbac.authorization.k8s.io", "RoleBinding", "shop", "rb"),
                true,
                &none,
                Some(
                    "RoleBinding.rbac.authorization.k8s.io is denied (namespaceResources.deny: *Binding.rbac.authorization.k8s.io)",
                ),
            ),
            (
                key("rbac.authorization.k8s.io", "ClusterRole", "", "plumb"),
                false,
                &none,
                Some("plumb's own RBAC (ClusterRole plumb) is never written from Git"),
            ),
            (
                key("rbac.authorization.k8s.io", "ClusterRoleBinding", "", "x"),
                false,
                &grant("plumb"),
                Some("ClusterRoleBinding grants plumb's own ClusterRole plumb, which Git may not hand out"),
            ),
            (
                key("rbac.authorization.k8s.io", "ClusterRoleBinding", "", "x"),
                false,
                &grant("view"),
                Some(
                    "cluster-scoped ClusterRoleBinding.rbac.authorization.k8s.io is not allowed (clusterResources: ClusterRole.rbac.authorization.k8s.io, *.apiextensions.k8s.io)",
                ),
            ),
        ];
        for (k, namespaced, obj, want) in table {
            assert_eq!(b.check(k, *namespaced, obj).err().as_deref(), *want, "{k}");
        }
        let bad =
            Boundaries { destinations: Some(Destinations { namespaces: vec!["[".into()] }), ..Boundaries::default() };
        assert!(Boundary::new(&bad, "web", "plumb-system").is_err());
    }

    /// The objects of `deploy/` that plumb's own installation consists of: the self
    /// application may write each, and every other application none of them, even one
    /// whose environment allows every namespace and every cluster-scoped kind (`*/*`).
    /// That is all this proves: such an environment is admin anyway (its Git can bind
    /// cluster-admin to a subject of its own), it just cannot write plumb's objects.
    #[test]
    fn only_the_self_application_writes_plumbs_installation() {
        let own = Boundary::new(
            &Boundaries { self_management: true, ..Boundaries::default() },
            "plumb-system",
            "plumb-system",
        )
        .expect("valid");
        let wide = Boundaries {
            destinations: Some(Destinations { namespaces: vec!["*".into()] }),
            cluster_resources: Some(vec![gk("*", "*")]),
            namespace_resources: None,
            self_management: false,
        };
        let other = Boundary::new(&wide, "web", "plumb-system").expect("valid");
        let grant =
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "plumb-apply"}});
        let none = json!({});
        let rbac = "rbac.authorization.k8s.io";
        let installation: &[(ObjectKey, bool, &Value, &str)] = &[
            (key("", "Namespace", "", "plumb-system"), false, &none, OWN),
            (key("apps", "Deployment", "plumb-system", "plumb"), true, &none, OWN),
            (key("", "ConfigMap", "plumb-system", "plumb-policy"), true, &none, OWN),
            (key(rbac, "RoleBinding", "plumb-system", "plumb-self"), true, &none, OWN),
            (
                key(rbac, "ClusterRoleBinding", "", "plumb-cluster-admin"),
                false,
                &none,
                "plumb's own RBAC (ClusterRoleBinding plumb-cluster-admin) is never written from Git",
            ),
            (
                key(rbac, "ClusterRole", "", "plumb-apply"),
                false,
                &none,
                "plumb's own RBAC (ClusterRole plumb-apply) is never written from Git",
            ),
        ];
        for (k, namespaced, obj, refusal) in installation {
            assert_eq!(own.check(k, *namespaced, obj), Ok(()), "{k}");
            assert_eq!(other.check(k, *namespaced, obj).err().as_deref(), Some(*refusal), "{k}");
        }
        // the definition (deleting it deletes every Application): the self application
        // without clusterResources, no other whatever its clusterResources
        let crd = key("apiextensions.k8s.io", "CustomResourceDefinition", "", DEFINITION);
        assert_eq!(own.check(&crd, false, &none), Ok(()));
        assert_eq!(
            other.check(&crd, false, &none).err().as_deref(),
            Some(
                "plumb's own resource definition (applications.plumb.dev) is never written from Git (only by the application with selfManagement: true)"
            )
        );
        let widgets = key("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.example.com");
        assert_eq!(other.check(&widgets, false, &none), Ok(()));
        // a binding granting plumb's ClusterRole: the self application in its destinations
        // only; any other application nowhere
        let in_web = key(rbac, "RoleBinding", "web", "plumb-apply");
        assert_eq!(
            own.check(&in_web, true, &grant).err().as_deref(),
            Some("namespace \"web\" is not among the destinations (destinations.namespaces: plumb-system)")
        );
        assert_eq!(
            other.check(&in_web, true, &grant).err().as_deref(),
            Some("RoleBinding grants plumb's own ClusterRole plumb-apply, which Git may not hand out")
        );
        // besides its installation, the self application is held like any other
        assert_eq!(
            own.check(&key("", "ConfigMap", "web", "a"), true, &none).err().as_deref(),
            Some("namespace \"web\" is not among the destinations (destinations.namespaces: plumb-system)")
        );
        assert_eq!(
            own.check(&key(rbac, "ClusterRole", "", "admin-2"), false, &none).err().as_deref(),
            Some("cluster-scoped ClusterRole.rbac.authorization.k8s.io is not allowed (clusterResources: none)")
        );
    }

    #[test]
    fn the_self_application_never_prunes_what_plumb_needs_to_run() {
        let own = Boundary::new(
            &Boundaries { self_management: true, ..Boundaries::default() },
            "plumb-system",
            "plumb-system",
        )
        .expect("valid");
        let rbac = "rbac.authorization.k8s.io";
        for k in [
            key("", "Namespace", "", "plumb-system"),
            key("apiextensions.k8s.io", "CustomResourceDefinition", "", DEFINITION),
            key("apps", "Deployment", "plumb-system", "plumb"),
            key("", "ServiceAccount", "plumb-system", "plumb"),
            key("", "ConfigMap", "plumb-system", POLICY_CONFIG_MAP),
            key(rbac, "Role", "plumb-system", "plumb-self"),
            key(rbac, "RoleBinding", "plumb-system", "plumb-self"),
            key(rbac, "ClusterRole", "", "plumb-read"),
            key(rbac, "ClusterRoleBinding", "", "plumb-cluster-admin"),
            key(rbac, "RoleBinding", "web", "plumb-apply"),
        ] {
            let why = own.never_pruned(&k).unwrap_or_else(|| panic!("{k} is pruned"));
            assert!(why.starts_with("plumb's own installation ("), "{why}");
        }
        for k in [
            key("", "Service", "plumb-system", "plumb-webhook"),
            key("networking.k8s.io", "NetworkPolicy", "plumb-system", "plumb"),
            key("", "ConfigMap", "plumb-system", "other"),
            key("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.example.com"),
            key("", "Namespace", "", "web"),
        ] {
            assert_eq!(own.never_pruned(&k), None, "{k}");
        }
        let plain = Boundary::new(&Boundaries::default(), "web", "plumb-system").expect("valid");
        assert_eq!(plain.never_pruned(&key("apps", "Deployment", "web", "plumb")), None);
    }
}
