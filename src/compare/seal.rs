//! Sealed comparisons: how a replica that takes over an application's shard (or a
//! restarted process) trusts the last owner's judgement of its objects instead of
//! dry-running every one of them again.
//!
//! A pass that compares every object of its render as Synced, and writes nothing,
//! records a seal in the Application's status ([`seal`]): an HMAC-SHA256 under the
//! installation's key (the Secret that also keys the masks of sensitive values, read
//! only by plumb) over the policy's digest, the application's name, the digest of the
//! render, and each object's identity with the live `resourceVersion` it was judged at.
//! A later pass that has no comparisons of its own computes the same over its render
//! and its watch cache: when the two are equal, nothing the judgement read has changed
//! (the same policy, the same manifests, every object at the same resourceVersion,
//! which the API server changes on every write), so every object is Synced as it was,
//! with no dry-run. Anything else (an object changed by hand, a commit that changes the
//! render, a policy reload, no key) compares as usual. Whoever may write the status
//! cannot make a seal without the key. Pure.

use super::sensitive::MaskKey;
use crate::tracking::ObjectKey;

/// The domain of a seal's HMAC ([`MaskKey::sign`]).
pub const DOMAIN: &str = "plumb.dev/seal/v1";

/// What a seal covers besides the objects.
#[derive(Debug, Clone, Copy)]
pub struct Covers<'a> {
    /// The policy's digest ([`crate::config::Config::digest`]).
    pub policy: &'a str,
    /// The application's name.
    pub app: &'a str,
    /// The render's digest ([`crate::render::Rendered::digest`]).
    pub render: &'a str,
}

/// The seal of a judgement that found every one of `objects` (identity and live
/// `resourceVersion`, in any order) Synced, for what `covers` names; `None` without a
/// key. Equal inputs give equal seals whatever the order of `objects`.
pub fn seal<'a>(
    key: &MaskKey,
    covers: Covers<'_>,
    objects: impl IntoIterator<Item = (&'a ObjectKey, &'a str)>,
) -> Option<String> {
    let mut objects: Vec<(&str, &str, &str, &str, &str)> = objects
        .into_iter()
        .map(|(k, rv)| (k.group.as_str(), k.kind.as_str(), k.namespace.as_str(), k.name.as_str(), rv))
        .collect();
    objects.sort_unstable();
    let body = serde_json::json!([covers.policy, covers.app, covers.render, objects]);
    key.sign(DOMAIN, body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey { group: String::new(), kind: kind.into(), namespace: "web".into(), name: name.into() }
    }

    /// The same judgement seals the same in any order; anything it read changed, or
    /// another key, seals otherwise; no key seals nothing.
    #[test]
    fn a_seal_covers_policy_application_render_and_every_object_s_version() {
        let k = MaskKey::new(b"installation key");
        let covers = Covers { policy: "p1", app: "web", render: "r1" };
        let (a, b) = (key("ConfigMap", "a"), key("ConfigMap", "b"));
        let sealed = seal(&k, covers, [(&a, "10"), (&b, "11")]).expect("a key");
        assert_eq!(sealed.len(), 64);
        assert_eq!(seal(&k, covers, [(&b, "11"), (&a, "10")]).as_ref(), Some(&sealed), "any order");
        let changed = [
            seal(&k, covers, [(&a, "10"), (&b, "12")]),
            seal(&k, covers, [(&a, "10")]),
            seal(&k, covers, [(&a, "10"), (&b, "11"), (&key("Secret", "b"), "11")]),
            seal(&k, Covers { policy: "p2", ..covers }, [(&a, "10"), (&b, "11")]),
            seal(&k, Covers { app: "shop", ..covers }, [(&a, "10"), (&b, "11")]),
            seal(&k, Covers { render: "r2", ..covers }, [(&a, "10"), (&b, "11")]),
            seal(&MaskKey::new(b"another key"), covers, [(&a, "10"), (&b, "11")]),
        ];
        for (i, other) in changed.iter().enumerate() {
            assert!(other.as_ref().is_some_and(|o| *o != sealed), "case {i}: {other:?}");
        }
        assert_eq!(seal(&MaskKey::none(), covers, [(&a, "10")]), None);
    }

    /// A seal is not a mark: the same key signs another domain differently.
    #[test]
    fn a_seal_is_signed_in_its_own_domain() {
        let k = MaskKey::new(b"installation key");
        assert_ne!(k.sign(DOMAIN, b"x"), k.sign("other", b"x"));
    }
}
