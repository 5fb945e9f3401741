//! Plain YAML/JSON directories, read as `kubectl apply -f DIR --recursive` reads them.
//!
//! - every `*.yaml`, `*.yml` and `*.json` file (path order), every document of a
//!   multi-document file; empty documents are skipped;
//! - a file may be UTF-8 (with or without a byte-order mark) or UTF-16 with a byte-order
//!   mark (Windows editors save that way; kubectl transcodes it);
//! - a list document is expanded: `kind: List`, and any `kind: <Something>List` that has
//!   an `items` array and no `metadata.name` (kubectl decodes every document with
//!   `items` as an unstructured list: `RoleList`, `ConfigMapList`, …). A custom kind
//!   ending in `List` with a `metadata.name` is an object;
//! - YAML follows kubectl's scalar rules where they differ from YAML 1.2: a
//!   leading-zero integer such as `0644` is octal (sigs.k8s.io/yaml follows YAML 1.1);
//! - server-set metadata is removed with a warning ([`super::server_set`]).
//!
//! A file that does not parse, a Git LFS pointer, or a document (or list item) that is
//! not a Kubernetes object is an error naming the file, the document (and item) and the
//! line — never silently skipped.

use std::borrow::Cow;

use serde_json::Value;

use super::{Error, Manifest, Rendered, server_set};
use crate::tracking::ObjectKey;

/// Whether a path names a manifest file plumb reads.
pub fn is_manifest_file(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml") || path.ends_with(".json")
}

/// Renders `files` (path inside the repository, content), sorted by path, with the
/// warnings of the render (server-set fields removed).
///
/// # Errors
/// [`Error`] for the first file that cannot be used; nothing is returned in that case
/// (a partial render must never reach prune).
pub fn render_files(files: &[(String, Vec<u8>)]) -> Result<Rendered, Error> {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().filter(|(p, _)| is_manifest_file(p)).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Rendered::default();
    for (path, bytes) in sorted {
        render_stream(path, bytes, true, &mut out)?;
    }
    check_duplicates(&out.manifests)?;
    Ok(out)
}

/// Reads `files` as [`render_files`] does but keeps every object as written
/// (server-set fields too): for reading exported live objects, not for a desired state.
///
/// # Errors
/// [`Error`], as [`render_files`].
pub fn read_objects(files: &[(String, Vec<u8>)]) -> Result<Vec<Manifest>, Error> {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().filter(|(p, _)| is_manifest_file(p)).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Rendered::default();
    for (path, bytes) in sorted {
        render_stream(path, bytes, false, &mut out)?;
    }
    check_duplicates(&out.manifests)?;
    Ok(out.manifests)
}

/// Renders one YAML stream (a file, or a tool's output named `path`) into `out`;
/// `strip`: remove server-set fields (with a warning).
pub(super) fn render_stream(path: &str, bytes: &[u8], strip: bool, out: &mut Rendered) -> Result<(), Error> {
    for (i, doc) in parse_documents(path, bytes)?.into_iter().enumerate() {
        let document = i + 1;
        let not_object = |item: Option<usize>, message: String| Error::NotAnObject {
            file: path.to_string(),
            document,
            item,
            message,
        };
        let (items, listed) = match doc {
            Value::Null => continue,
            other => match list_items(&other) {
                Ok(Some(items)) => (items, true),
                Ok(None) => (vec![other], false),
                Err(message) => return Err(not_object(None, message)),
            },
        };
        for (n, mut object) in items.into_iter().enumerate() {
            let item = listed.then_some(n);
            check_object(&object).map_err(|message| not_object(item, message))?;
            let removed = if strip { server_set::strip(&mut object) } else { vec![] };
            if !removed.is_empty() {
                let at = item.map_or(String::new(), |n| format!(" items[{n}]"));
                out.warnings.push(format!(
                    "{path}#{document}{at}: {} set by the API server; plumb ignores {} (remove {} from Git)",
                    removed.join(", "),
                    if removed.len() == 1 { "it" } else { "them" },
                    if removed.len() == 1 { "it" } else { "them" },
                ));
            }
            let at = item.map_or(String::new(), |n| format!(" items[{n}]"));
            let foreign = super::compat::translate(&mut object);
            out.warnings.extend(foreign.into_iter().map(|w| format!("{path}#{document}{at}: {w}")));
            out.manifests.push(Manifest::new(format!("{path}#{document}"), &object));
        }
    }
    Ok(())
}

/// Fails on two manifests declaring the same object.
pub(super) fn check_duplicates(manifests: &[Manifest]) -> Result<(), Error> {
    let mut seen = std::collections::HashMap::new();
    for m in manifests {
        if let Some(key) = ObjectKey::of(&m.object())
            && let Some(first) = seen.insert(key.clone(), m.source.clone())
        {
            return Err(Error::Duplicate { key: key.to_string(), first, second: m.source.clone() });
        }
    }
    Ok(())
}

/// The items of a list document, `None` for an object (see the module docs).
fn list_items(doc: &Value) -> Result<Option<Vec<Value>>, String> {
    let Some(m) = doc.as_object() else { return Ok(None) };
    let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default();
    let named = doc.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    match m.get("items") {
        _ if kind == "List" => match m.get("items") {
            None | Some(Value::Null) => Ok(Some(vec![])),
            Some(Value::Array(a)) => Ok(Some(a.clone())),
            Some(_) => Err("`items` of a List must be a sequence".into()),
        },
        Some(Value::Array(a)) if kind.ends_with("List") && !named => Ok(Some(a.clone())),
        None if kind.ends_with("List") && !named => {
            Err(format!("kind {kind} has no `items` (a list) and no metadata.name (an object): neither can be applied"))
        }
        _ => Ok(None),
    }
}

/// The text of a file: UTF-8 (a byte-order mark is dropped) or UTF-16 with a byte-order
/// mark, transcoded.
fn decode<'a>(path: &str, bytes: &'a [u8]) -> Result<Cow<'a, str>, Error> {
    let bad = |message: String| Error::Parse { file: path.into(), line: 0, document: 1, message };
    let utf16 = |rest: &[u8], be: bool| -> Result<Cow<'a, str>, Error> {
        if !rest.len().is_multiple_of(2) {
            return Err(bad("UTF-16 (byte-order mark) with an odd number of bytes".into()));
        }
        let units = rest
            .chunks_exact(2)
            .map(|c| if be { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_le_bytes([c[0], c[1]]) });
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .map(Cow::Owned)
            .map_err(|e| bad(format!("not valid UTF-16: {e}")))
    };
    match bytes {
        [0xEF, 0xBB, 0xBF, rest @ ..] => std::str::from_utf8(rest).map(Cow::Borrowed),
        [0xFF, 0xFE, rest @ ..] => return utf16(rest, false),
        [0xFE, 0xFF, rest @ ..] => return utf16(rest, true),
        _ => std::str::from_utf8(bytes).map(Cow::Borrowed),
    }
    .map_err(|e| bad(format!("not UTF-8 (nor UTF-16 with a byte-order mark): {e}")))
}

/// The first line of a Git LFS pointer file (<https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md>).
const LFS_POINTER: &str = "version https://git-lfs.github.com/spec/v1";

fn parse_documents(path: &str, bytes: &[u8]) -> Result<Vec<Value>, Error> {
    let text = decode(path, bytes)?;
    if let Some(rest) = text.strip_prefix(LFS_POINTER) {
        let oid = rest.lines().find_map(|l| l.strip_prefix("oid ")).unwrap_or("?").to_string();
        return Err(Error::LfsPointer { file: path.into(), oid });
    }
    let text = text.as_ref();
    if path.ends_with(".json") {
        return serde_json::from_str::<Strict>(text).map(|v| vec![v.0]).map_err(|e| Error::Parse {
            file: path.into(),
            line: e.line() as u32,
            document: 1,
            message: e.to_string(),
        });
    }
    let mut out = Vec::new();
    for (i, (offset, chunk)) in split_documents(text).into_iter().enumerate() {
        let is_empty =
            chunk.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l.starts_with("---"));
        if is_empty {
            out.push(Value::Null);
            continue;
        }
        let options = serde_saphyr::options! { legacy_octal_numbers: true };
        let doc = serde_saphyr::from_str_with_options::<Value>(&chunk, options).map_err(|e| Error::Parse {
            file: path.into(),
            line: offset + e.location().map_or(0, |l| l.line() as u32),
            document: i + 1,
            message: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
        out.push(doc);
    }
    Ok(out)
}

/// A JSON value read with duplicate keys refused, as YAML refuses them (serde_json
/// alone keeps the last; kubectl's strict decoding and the API server's field
/// validation report them): the error names the key, serde_json adds line and column.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

/// Builds a [`Value`] as serde_json's own visitor does, refusing a key seen twice in
/// one object.
struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(d).map(|s: Strict| s.0)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Splits a YAML stream at document markers (`---` at the start of a line; a block
/// scalar cannot contain one at column 0). Returns each document's text with the number
/// of lines before it, so parser line numbers can be made file-relative. A leading
/// marker does not open an extra (empty) document.
fn split_documents(text: &str) -> Vec<(u32, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 0u32;
    let mut seen_content = false;
    for (n, line) in text.lines().enumerate() {
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if marker {
            if seen_content || !current.trim().is_empty() {
                docs.push((start, std::mem::take(&mut current)));
            }
            current.clear();
            start = n as u32 + 1;
            seen_content = true;
            let rest = line[3..].trim_start();
            if !rest.is_empty() && !rest.starts_with('#') {
                current.push_str(rest);
                current.push('\n');
                start = n as u32;
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    if !current.trim().is_empty() || docs.is_empty() {
        docs.push((start, current));
    }
    docs
}

fn check_object(v: &Value) -> Result<(), String> {
    let Some(m) = v.as_object() else {
        return Err("not a mapping".into());
    };
    for (field, what) in [("apiVersion", "apiVersion"), ("kind", "kind")] {
        if m.get(field).and_then(Value::as_str).is_none_or(|s| s.is_empty()) {
            return Err(format!("missing {what}"));
        }
    }
    if v.pointer("/metadata/name").and_then(Value::as_str).is_none_or(|s| s.is_empty()) {
        return Err("missing metadata.name (generateName is not supported: objects need a stable identity)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON manifest with a key twice is refused like YAML, naming file, line and
    /// key; nested objects too; one key in two objects is fine.
    #[test]
    fn json_duplicate_keys_are_refused_naming_file_line_and_key() {
        let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\"name\": \"a\"},\n  \"data\": {\"k\": \"1\",\n    \"k\": \"2\"}\n}\n";
        let files = [("apps/web/cm.json".to_string(), text.as_bytes().to_vec())];
        let err = render_files(&files).expect_err("duplicate key").to_string();
        assert!(err.starts_with("apps/web/cm.json:6: document 1: duplicate key `k` at line 6"), "{err}");
        let top =
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"a\"}}";
        let err = render_files(&[("a.json".to_string(), top.as_bytes().to_vec())]).expect_err("dup").to_string();
        assert!(err.contains("duplicate key `kind`"), "{err}");
        let ok = "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\", \"labels\": {\"name\": \"x\"}}, \"data\": {\"n\": 1.5, \"b\": true, \"z\": null, \"l\": [1, -2]}}";
        let r = render_files(&[("b.json".to_string(), ok.as_bytes().to_vec())]).expect("renders");
        assert_eq!(r.manifests[0].object().pointer("/data/l/1"), Some(&serde_json::json!(-2)));
        assert_eq!(r.manifests[0].object().pointer("/data/n"), Some(&serde_json::json!(1.5)));
    }
}
