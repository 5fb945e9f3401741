//! Sensitive values: the one rule every output of plumb goes through, so that a value
//! protected by RBAC on `secrets` never reaches a wider audience (status ConfigMap,
//! HTTP API, Events, logs, commit statuses, `plumb diff`).
//!
//! A field is **sensitive** when it sits, in a core `v1` `Secret`, under `data` or
//! `stringData` (whatever the key), or is the Secret's
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (it repeats the whole
//! body). A sensitive value prints as `(sensitive, hmac:<first 8 hex>)`: the key and
//! the field path stay visible, two different values get different marks (so drift is
//! still seen and a before/after is still readable), and nothing of the value is shown.
//! The mark is an HMAC-SHA256 of the value's bytes under the installation's
//! [`MaskKey`] (32 random bytes in the Secret [`MASK_KEY_SECRET`] of plumb's namespace,
//! which plumb creates when it is missing): whoever reads Events, statuses or the API
//! without the right to read that Secret cannot test guesses against a mark (an unkeyed
//! hash of a short password or PIN falls to a word list in well under a second). Without
//! a key (a CLI that may not read the Secret) a value prints as `(sensitive)`. A `data`
//! value is base64-decoded first, so `data.x` and `stringData.x` of the same content get
//! the same mark.
//!
//! An environment may mark more fields sensitive (`sensitiveFields`: group, kind and
//! JSON pointers, [`crate::config::SensitiveFields`]); [`SensitiveRules::marked`] gives
//! an object's [`Marked`] pointers, and the `*_with` functions mask those by the same
//! rule (the mark is over the string's bytes, or the JSON text of any other value).
//!
//! Error texts are scrubbed with [`scrub`]: every value of the Secret involved
//! (plain, base64, JSON-escaped) is replaced by its mark, and the byte snippets the API
//! server quotes from a request body it could not decode (`…|<bytes>|…`) are cut.
//!
//! Source of the rule: `kubectl diff` masks Secret data (kubernetes/kubernetes#87840,
//! PR 96084); Flux censors Secret payloads in apply errors (kustomize-controller#419).

use base64::Engine as _;
use globset::{Glob, GlobMatcher};
use hmac::{KeyInit as _, Mac as _};
use serde_json::Value;

use super::Difference;
use crate::config::SensitiveFields;

/// The RFC 6901 pointers of one object's fields an environment marks sensitive
/// (everything under each too); empty for most objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marked(pub Vec<String>);

impl Marked {
    /// Whether no field is marked.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `pointer` is a marked field or lies under one.
    fn covers(&self, pointer: &str) -> bool {
        self.0.iter().any(|m| pointer == m || pointer.strip_prefix(m.as_str()).is_some_and(|r| r.starts_with('/')))
    }
}

/// An environment's `sensitiveFields`, compiled (group and kind are globs; an omitted
/// group matches any group).
#[derive(Debug, Clone, Default)]
pub struct SensitiveRules(Vec<(Option<GlobMatcher>, GlobMatcher, Vec<String>)>);

impl SensitiveRules {
    /// Compiles the rules; a glob that does not compile (rejected when the policy is
    /// validated) matches only its own text.
    pub fn new<'a>(rules: impl IntoIterator<Item = &'a SensitiveFields>) -> Self {
        let glob = |s: &str| Glob::new(s).or_else(|_| Glob::new(&globset::escape(s))).ok().map(|g| g.compile_matcher());
        SensitiveRules(
            rules
                .into_iter()
                .filter_map(|r| {
                    let pointers = r.json_pointers.iter().map(|p| p.value.clone()).collect();
                    let group = match r.group.as_deref() {
                        Some(g) => Some(glob(g)?),
                        None => None,
                    };
                    Some((group, glob(&r.kind.value)?, pointers))
                })
                .collect(),
        )
    }

    /// The fields of `object` (the object of manifest `m`) these rules mark, with those
    /// holding a value decrypted from SOPS ([`crate::render::Manifest::decrypted`]).
    pub fn marked_manifest(&self, m: &crate::render::Manifest, object: &Value) -> Marked {
        let mut marked = self.marked(object);
        let decrypted = m.decrypted();
        if !decrypted.is_empty() {
            marked.0.extend(decrypted.into_iter().map(String::from));
            marked.0.sort();
            marked.0.dedup();
        }
        marked
    }

    /// The fields of `obj` these rules mark (by its `apiVersion`'s group and `kind`).
    pub fn marked(&self, obj: &Value) -> Marked {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let group = crate::tracking::group_of(api_version);
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let mut out: Vec<String> = self
            .0
            .iter()
            .filter(|(g, k, _)| k.is_match(kind) && g.as_ref().is_none_or(|g| g.is_match(group)))
            .flat_map(|(_, _, p)| p.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        Marked(out)
    }
}

/// The annotation `kubectl apply` (client-side) writes: a copy of the whole object.
pub use super::managers::LAST_APPLIED;

/// The Secret in plumb's namespace (`settings.statusNamespace`) that holds the
/// installation's [`MaskKey`] under [`MASK_KEY_FIELD`].
pub const MASK_KEY_SECRET: &str = "plumb-mask-key";

/// The key of [`MASK_KEY_SECRET`]'s `data` holding the mask key (32 bytes).
pub const MASK_KEY_FIELD: &str = "key";

/// What a keyed mark starts with.
const PREFIX: &str = "(sensitive, hmac:";

/// The mark of a value when there is no key.
pub const UNMARKED: &str = "(sensitive)";

/// The key sensitive values are marked with: an installation's secret bytes (see the
/// module docs), or none (marks are then [`UNMARKED`]). Cheap to clone; its bytes are
/// never printed.
#[derive(Clone, Default)]
pub struct MaskKey(Option<std::sync::Arc<[u8]>>);

impl std::fmt::Debug for MaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "MaskKey(set)" } else { "MaskKey(none)" })
    }
}

impl MaskKey {
    /// A key of these bytes (an empty slice is no key).
    pub fn new(bytes: &[u8]) -> Self {
        Self((!bytes.is_empty()).then(|| bytes.into()))
    }

    /// No key: every sensitive value prints as [`UNMARKED`].
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether there is a key.
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// HMAC-SHA256 of `domain`, a NUL byte and `bytes` under this key, in lower-case
    /// hex (64 characters); `None` without a key. `domain` keeps what is signed for one
    /// purpose from ever equalling a signature for another (a mark signs bytes alone).
    pub fn sign(&self, domain: &str, bytes: &[u8]) -> Option<String> {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(self.0.as_deref()?).ok()?;
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(bytes);
        Some(hex::encode(mac.finalize().into_bytes()))
    }

    /// `(sensitive, hmac:<first 8 hex of HMAC-SHA256(key, bytes)>)`, or [`UNMARKED`].
    fn mark(&self, bytes: &[u8]) -> String {
        let Some(key) = &self.0 else { return UNMARKED.to_string() };
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else { return UNMARKED.to_string() };
        mac.update(bytes);
        format!("{PREFIX}{})", &hex::encode(mac.finalize().into_bytes())[..8])
    }
}

/// Whether `s` is a mark (keyed or not): [`mask`] leaves it alone.
fn is_mark(s: &str) -> bool {
    s == UNMARKED || (s.starts_with(PREFIX) && s.len() == PREFIX.len() + 9 && s.ends_with(')'))
}

/// Whether `obj` is a core `v1` `Secret` (the only kind whose values are sensitive
/// today).
pub fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret")
        && obj.get("apiVersion").and_then(Value::as_str).is_none_or(|v| v == "v1")
}

/// The mark of one sensitive value under `key` ([`MaskKey`]: `(sensitive, hmac:<first
/// 8 hex>)`, or `(sensitive)` without a key). `base64`: the value is a `data` entry
/// (marked after decoding when it decodes). A value that already is a mark is
/// returned as it is.
pub fn mask(value: &Value, base64: bool, key: &MaskKey) -> String {
    let bytes: Vec<u8> = match value {
        Value::String(s) if is_mark(s) => return s.clone(),
        Value::String(s) if base64 => {
            base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_else(|_| s.as_bytes().to_vec())
        }
        Value::String(s) => s.as_bytes().to_vec(),
        v => v.to_string().into_bytes(),
    };
    key.mark(&bytes)
}

/// How the value at RFC 6901 `pointer` of a Secret is sensitive: `Some(true)` for a
/// `data` value (base64), `Some(false)` for `stringData` or the last-applied
/// annotation, `None` when it is not sensitive. `scalar`: the value there is not an
/// object (a `data` that is itself a string is masked whole).
fn sensitive_at(pointer: &str, scalar: bool) -> Option<bool> {
    let last_applied = format!("/metadata/annotations/{}", LAST_APPLIED.replace('~', "~0").replace('/', "~1"));
    if pointer == last_applied {
        return Some(false);
    }
    for (field, base64) in [("/data", true), ("/stringData", false)] {
        if let Some(rest) = pointer.strip_prefix(field)
            && (rest.starts_with('/') || (rest.is_empty() && scalar))
        {
            return Some(base64);
        }
    }
    None
}

/// Masks, in place, every sensitive value inside `v`, which sits at `pointer` of an
/// object (`""` for the whole object): a Secret's values when `secret`, and the
/// `marked` fields, under `key`.
fn mask_at(pointer: &str, v: &mut Value, secret: bool, marked: &Marked, key: &MaskKey) {
    let base64 =
        if secret { sensitive_at(pointer, !v.is_object()) } else { None }.or(marked.covers(pointer).then_some(false));
    if let Some(base64) = base64 {
        if !v.is_null() {
            *v = Value::String(mask(v, base64, key));
        }
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                mask_at(&p, child, secret, marked, key);
            }
        }
        Value::Array(items) if !marked.is_empty() => {
            for (i, child) in items.iter_mut().enumerate() {
                mask_at(&format!("{pointer}/{i}"), child, secret, marked, key);
            }
        }
        _ => {}
    }
}

/// A copy of `obj` with its sensitive values masked under `key` (keys stay visible);
/// any other object is returned as it is.
pub fn mask_object(obj: &Value, key: &MaskKey) -> Value {
    mask_object_with(obj, &Marked::default(), key)
}

/// [`mask_object`], with the `marked` fields of `obj` masked too.
pub fn mask_object_with(obj: &Value, marked: &Marked, key: &MaskKey) -> Value {
    let mut v = obj.clone();
    let secret = is_secret(obj);
    if secret || !marked.is_empty() {
        mask_at("", &mut v, secret, marked, key);
    }
    v
}

/// Masks under `key`, in place, both values of each difference of a Secret (`secret`);
/// nothing changes for other kinds. The paths stay as they are.
pub fn mask_differences(secret: bool, key: &MaskKey, differences: &mut [Difference]) {
    mask_differences_with(secret, &Marked::default(), key, differences);
}

/// [`mask_differences`], with the `marked` fields masked too (of any kind).
pub fn mask_differences_with(secret: bool, marked: &Marked, key: &MaskKey, differences: &mut [Difference]) {
    if !secret && marked.is_empty() {
        return;
    }
    for d in differences {
        for side in [&mut d.desired, &mut d.live].into_iter().flatten() {
            mask_at(&d.path, side, secret, marked, key);
        }
    }
}

/// The values at the `marked` fields of `obj` as they may appear in a message (each
/// string, and the JSON text of anything else; JSON-escaped too), with their marks.
fn marked_values(obj: &Value, marked: &Marked, key: &MaskKey) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for p in &marked.0 {
        let Some(v) = obj.pointer(p) else { continue };
        let mark = mask(v, false, key);
        let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let escaped = serde_json::to_string(&text).unwrap_or_default().trim_matches('"').to_string();
        found.push((text, mark.clone()));
        found.push((escaped, mark));
    }
    found
}

/// The sensitive strings of `obj` as they may appear in a message: each `data` value
/// (as sent, and decoded), each `stringData` value (as sent, and base64-encoded), each in
/// its JSON-escaped form too. Values shorter than 4 bytes are left out: replacing them
/// would garble the message more than it protects.
fn secrets_of(obj: &Value, key: &MaskKey) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut found = Vec::new();
    for (field, base64) in [("data", true), ("stringData", false)] {
        let Some(m) = obj.get(field).and_then(Value::as_object) else { continue };
        for v in m.values() {
            let Some(s) = v.as_str() else { continue };
            let mark = mask(v, base64, key);
            let other =
                if base64 { b64.decode(s).ok().and_then(|b| String::from_utf8(b).ok()) } else { Some(b64.encode(s)) };
            for form in std::iter::once(s.to_string()).chain(other) {
                let escaped = serde_json::to_string(&form).unwrap_or_default();
                let escaped = escaped.trim_matches('"').to_string();
                found.push((form, mark.clone()));
                found.push((escaped, mark.clone()));
            }
        }
    }
    if let Some(s) = obj.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)).and_then(Value::as_str) {
        let mark = mask(&Value::String(s.into()), false, key);
        if let Ok(inner) = serde_json::from_str::<Value>(s) {
            found.extend(secrets_of(&inner, key));
        }
        found.push((s.to_string(), mark));
    }
    found.retain(|(s, _)| s.len() >= 4);
    found
}

/// `message` (an error about one object) with every sensitive value of the Secrets
/// among `objects` replaced by its mark under `key`, and the request-body snippets the
/// API server quotes (`…|<bytes>|…`, as in `error found in #10 byte of …|"x": "y"|…`)
/// cut to `…|(sensitive)|…`. Returned as it is when no object is a Secret.
pub fn scrub(message: &str, objects: &[&Value], key: &MaskKey) -> String {
    scrub_with(message, objects, &Marked::default(), key)
}

/// [`scrub`], with the values at the `marked` fields of `objects` replaced too (the
/// request-body snippets are cut as soon as any field is marked).
pub fn scrub_with(message: &str, objects: &[&Value], marked: &Marked, key: &MaskKey) -> String {
    let secrets: Vec<&Value> = objects.iter().copied().filter(|o| is_secret(o)).collect();
    if secrets.is_empty() && marked.is_empty() {
        return message.to_string();
    }
    let mut values: Vec<(String, String)> = secrets.iter().flat_map(|o| secrets_of(o, key)).collect();
    values.extend(objects.iter().flat_map(|o| marked_values(o, marked, key)));
    values.retain(|(s, _)| s.len() >= 4);
    values.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    let mut out = cut_snippets(message);
    for (value, mark) in values {
        out = out.replace(&value, &mark);
    }
    out
}

/// Cuts what stands between `...|` and `|...` (the API server's quote of raw request
/// bytes in a decoding error).
fn cut_snippets(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find("...|") {
        let after = &rest[start + 4..];
        let Some(end) = after.find("|...") else { break };
        out.push_str(&rest[..start + 4]);
        out.push_str("(sensitive)");
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The shared case k8s-04: Git's and the live Secret.
    fn desired() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-db", "namespace": "gitops-lab"},
            "type": "Opaque",
            "data": {"host": "ZGIuZ2l0b3BzLWxhYi5zdmM=", "password": "Y2hhbmdlbWUtMQ=="},
            "stringData": {"username": "web"}})
    }

    fn live() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-db", "namespace": "gitops-lab",
            "annotations": {LAST_APPLIED: "{\"data\":{\"password\":\"aHVudGVyLXR3bw==\"}}"}},
            "type": "Opaque",
            "data": {"host": "ZGIuZ2l0b3BzLWxhYi5zdmM=", "password": "aHVudGVyLXR3bw==", "username": "d2Vi"}})
    }

    /// Every value of the case, plain and base64 (`web` is too common a word to grep).
    const VALUES: [&str; 7] = [
        "aHVudGVyLXR3bw==",
        "hunter-two",
        "Y2hhbmdlbWUtMQ==",
        "changeme-1",
        "ZGIuZ2l0b3BzLWxhYi5zdmM=",
        "db.gitops-lab.svc",
        "d2Vi",
    ];

    fn assert_clean(text: &str) {
        for v in VALUES {
            assert!(!text.contains(v), "{v} in {text}");
        }
    }

    /// One installation's key (tests).
    fn key() -> MaskKey {
        MaskKey::new(b"the mask key of one installation")
    }

    /// A mark is keyed: the same value under another installation's key gets another
    /// mark, no mark is the unkeyed SHA-256 a word list can be run against, equal
    /// values under one key get equal marks (drift stays visible), and without a key
    /// nothing but `(sensitive)` is shown.
    #[test]
    fn a_mark_cannot_be_reversed_without_the_installation_s_key() {
        use sha2::Digest as _;
        let (ours, theirs) = (key(), MaskKey::new(b"another installation's key"));
        let mark = mask(&json!("hunter2"), false, &ours);
        assert!(mark.starts_with(PREFIX) && mark.len() == PREFIX.len() + 9, "{mark}");
        assert_ne!(mask(&json!("hunter2"), false, &theirs), mark, "another key, another mark");
        let unkeyed = &hex::encode(sha2::Sha256::digest(b"hunter2"))[..8];
        assert!(!mark.contains(unkeyed), "{mark} is the unkeyed sha256 ({unkeyed})");
        assert_eq!(mask(&json!("hunter2"), false, &ours), mark, "equal values, equal marks");
        assert_ne!(mask(&json!("hunter3"), false, &ours), mark, "another value, another mark");
        assert_eq!(mask(&json!("aHVudGVyMg=="), true, &ours), mark, "data is marked decoded, as stringData");
        assert_eq!(mask(&json!(mark.clone()), true, &ours), mark, "masking twice changes nothing");
        assert_eq!(mask(&json!("not base64!"), true, &ours), mask(&json!("not base64!"), false, &ours));
        assert_eq!(mask(&json!("hunter2"), false, &MaskKey::none()), UNMARKED, "no key: no mark");
        assert!(!MaskKey::new(b"").is_set(), "an empty key is no key");
        assert_eq!(format!("{ours:?}"), "MaskKey(set)", "the key's bytes are never printed");
    }

    #[test]
    fn secret_objects_keep_keys_and_lose_values() {
        let m = mask_object(&live(), &key());
        assert_clean(&m.to_string());
        assert_eq!(
            m["data"].as_object().map(|d| d.keys().cloned().collect::<Vec<_>>()).unwrap_or_default(),
            ["host", "password", "username"]
        );
        assert_eq!(m["metadata"]["name"], "web-db");
        assert!(m["metadata"]["annotations"][LAST_APPLIED].as_str().is_some_and(|s| s.starts_with(PREFIX)));
        let d = mask_object(&desired(), &key());
        assert_eq!(d["stringData"]["username"], json!(mask(&json!("web"), false, &key())));
        // not a core Secret: untouched
        for other in [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "hunter-two"}}),
            json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"k": "hunter-two"}}),
        ] {
            assert_eq!(mask_object(&other, &key()), other);
        }
    }

    #[test]
    fn differences_keep_their_paths_and_show_distinct_marks() {
        let mut ds = super::super::diff(&desired(), &live());
        mask_differences(true, &key(), &mut ds);
        let text: Vec<String> = ds.iter().map(Difference::describe).collect();
        assert_clean(&text.join("\n"));
        let pw = ds.iter().find(|d| d.path == "/data/password").map(Difference::describe).unwrap_or_default();
        assert_eq!(
            pw,
            format!(
                "/data/password {}→{}",
                mask(&json!("aHVudGVyLXR3bw=="), true, &key()),
                mask(&json!("Y2hhbmdlbWUtMQ=="), true, &key())
            )
        );
        // a whole `data` or the whole object at once (the shallowest path differs)
        let mut whole = vec![
            Difference { path: "/data".into(), desired: Some(desired()["data"].clone()), live: None, manager: None },
            Difference { path: String::new(), desired: None, live: Some(live()), manager: None },
        ];
        mask_differences(true, &key(), &mut whole);
        assert_clean(&serde_json::to_string(&whole).unwrap_or_default());
        assert!(
            whole[0].desired.as_ref().is_some_and(|d| d["password"].as_str().is_some_and(|s| s.starts_with(PREFIX)))
        );
        // a ConfigMap's differences are shown as they are
        let mut cm = vec![Difference { path: "/data/k".into(), desired: Some(json!("v")), live: None, manager: None }];
        mask_differences(false, &key(), &mut cm);
        assert_eq!(cm[0].desired, Some(json!("v")));
    }

    fn rules(yaml: &str) -> SensitiveRules {
        let text = format!("environments:\n  - name: dev\n    sensitiveFields: {yaml}\n");
        let config = crate::config::load_str(&text, std::path::Path::new("p.yaml"), std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        SensitiveRules::new(&config.environments[0].sensitive_fields)
    }

    fn database(password: &str, token: &str) -> Value {
        json!({"apiVersion": "db.example.com/v1", "kind": "Database", "metadata": {"name": "orders"},
            "spec": {"size": 3, "password": password, "users": [{"name": "app", "token": token}]}})
    }

    /// Issue 12: fields an environment marks sensitive are masked by the same rule as
    /// Secret data, whatever the kind; the rule matches by group and kind.
    #[test]
    fn marked_fields_of_any_kind_are_masked() {
        let r = rules("[{group: db.example.com, kind: Database, jsonPointers: [/spec/password, /spec/users/0/token]}]");
        let obj = database("hunter-two", "tok-3f9a1c");
        let marked = r.marked(&obj);
        assert_eq!(marked, Marked(vec!["/spec/password".into(), "/spec/users/0/token".into()]));
        assert!(r.marked(&json!({"apiVersion": "other.example.com/v1", "kind": "Database"})).is_empty(), "group");
        assert!(r.marked(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_empty(), "kind");
        assert!(rules("[{kind: 'Data*', jsonPointers: [/spec]}]").marked(&obj).0 == ["/spec"], "globs, any group");

        let m = mask_object_with(&obj, &marked, &key());
        assert_eq!(m["spec"]["password"], json!(mask(&json!("hunter-two"), false, &key())));
        assert_eq!(m["spec"]["users"][0]["token"], json!(mask(&json!("tok-3f9a1c"), false, &key())));
        assert_eq!((m["spec"]["size"].clone(), m["spec"]["users"][0]["name"].clone()), (json!(3), json!("app")));
        assert_eq!(mask_object(&obj, &key()), obj, "without the environment's rule nothing is masked");

        // differences at, under and above a marked field
        let live = database("changeme-1", "tok-3f9a1c");
        let mut ds = super::super::diff(&obj, &live);
        ds.push(Difference { path: "/spec".into(), desired: Some(obj["spec"].clone()), live: None, manager: None });
        mask_differences_with(false, &marked, &key(), &mut ds);
        let text = serde_json::to_string(&ds).unwrap_or_default()
            + &ds.iter().map(Difference::describe).collect::<Vec<_>>().join("\n");
        for v in ["hunter-two", "changeme-1", "tok-3f9a1c"] {
            assert!(!text.contains(v), "{v} in {text}");
        }
        let pw = ds.iter().find(|d| d.path == "/spec/password").map(Difference::describe).unwrap_or_default();
        assert_eq!(
            pw,
            format!(
                "/spec/password {}→{}",
                mask(&json!("changeme-1"), false, &key()),
                mask(&json!("hunter-two"), false, &key())
            )
        );

        // an error quoting the values
        let msg = "Database.db.example.com \"orders\" is invalid: spec.password: Invalid value: \"hunter-two\"";
        let s = scrub_with(msg, &[&obj], &marked, &key());
        assert!(!s.contains("hunter-two") && s.contains("spec.password") && s.contains(PREFIX), "{s}");
        assert_eq!(scrub(msg, &[&obj], &key()), msg, "without the rule, a Database is not a Secret");
    }

    #[test]
    fn errors_quoting_a_secret_body_are_scrubbed() {
        let body = desired();
        let cases = [
            // a 422 quoting stringData
            "Secret \"web-db\" is invalid: stringData[password]: Invalid value: \"changeme-1\": too short",
            // a decode error quoting the request body
            "v1.Secret.Data: decode base64: illegal base64 data, error found in #10 byte of ...|\"password\":\"Y2hhbmdlbWUtMQ==\",\"x\":\"a|..., bigger context ...|{\"data\":{\"host\":\"ZGIuZ2l0b3BzLWxhYi5zdmM=\"}|...",
            "patch failed: {\"data\":{\"host\":\"ZGIuZ2l0b3BzLWxhYi5zdmM=\"},\"stringData\":{\"username\":\"web\"}}",
            "was db.gitops-lab.svc, is aHVudGVyLXR3bw==",
        ];
        for m in cases {
            let s = scrub(m, &[&body, &live()], &key());
            assert_clean(&s);
            assert!(s.contains("web-db") || s.contains(PREFIX) || s.contains("(sensitive)"), "{s}");
        }
        assert!(scrub(cases[0], &[&body], &key()).contains("stringData[password]"), "keys stay");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"password": "changeme-1"}});
        assert_eq!(scrub(cases[0], &[&cm], &key()), cases[0], "only Secrets are scrubbed");
    }
}
