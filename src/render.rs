//! Render: turn the files of an application's directory into manifests.
//!
//! Plain YAML/JSON directories: every `*.yaml`, `*.yml` and `*.json` file under the
//! path (recursively, in path order), every document of a multi-document file, and the
//! items of a `kind: List`. Empty documents are skipped. YAML is read with kubectl's
//! scalar rules where they differ from YAML 1.2: a leading-zero integer such as `0644`
//! is octal (sigs.k8s.io/yaml follows YAML 1.1 here). A file that does not parse, or a
//! document that is not a Kubernetes object, is an error naming the file, the document
//! and the line — never silently skipped.

use serde_json::Value;

use crate::tracking::ObjectKey;

/// One rendered object and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `path/in/repo.yaml#N` (N = 1-based document index).
    pub source: String,
    /// The object as written (JSON model).
    pub object: Value,
}

/// Why the directory could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A file is not valid YAML/JSON.
    #[error("{file}:{line}: document {document}: {message}")]
    Parse {
        /// File path inside the repository.
        file: String,
        /// 1-based line of the error (0 when unknown).
        line: u32,
        /// 1-based document index in the file.
        document: usize,
        /// The parser's message.
        message: String,
    },
    /// A document parsed but is not a Kubernetes object.
    #[error("{file}: document {document}: {message}")]
    NotAnObject {
        /// File path inside the repository.
        file: String,
        /// 1-based document index in the file.
        document: usize,
        /// What is missing.
        message: String,
    },
    /// A limit of [`crate::limits`] was exceeded (YAML expansion of a file, rendered
    /// bytes).
    #[error(transparent)]
    Limit(#[from] crate::limits::Exceeded),
    /// Two documents declare the same object.
    #[error("{key} is declared twice: {first} and {second}")]
    Duplicate {
        /// The object.
        key: String,
        /// First declaration.
        first: String,
        /// Second declaration.
        second: String,
    },
}

/// Whether a path names a manifest file plumb reads.
pub fn is_manifest_file(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml") || path.ends_with(".json")
}

/// Renders `files` (path inside the repository, content), sorted by path.
///
/// # Errors
/// [`Error`] for the first file that cannot be used; nothing is returned in that case
/// (a partial render must never reach prune).
pub fn render(files: &[(String, Vec<u8>)]) -> Result<Vec<Manifest>, Error> {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().filter(|(p, _)| is_manifest_file(p)).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (path, bytes) in sorted {
        for (i, doc) in parse_documents(path, bytes)?.into_iter().enumerate() {
            let document = i + 1;
            let items = match doc {
                Value::Null => continue,
                Value::Object(ref m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
                    m.get("items").and_then(Value::as_array).cloned().unwrap_or_default()
                }
                other => vec![other],
            };
            for object in items {
                check_object(&object).map_err(|message| Error::NotAnObject {
                    file: path.clone(),
                    document,
                    message,
                })?;
                out.push(Manifest { source: format!("{path}#{document}"), object });
            }
        }
    }
    let mut seen = std::collections::HashMap::new();
    for m in &out {
        if let Some(key) = ObjectKey::of(&m.object)
            && let Some(first) = seen.insert(key.clone(), m.source.clone())
        {
            return Err(Error::Duplicate { key: key.to_string(), first, second: m.source.clone() });
        }
    }
    Ok(out)
}

fn parse_documents(path: &str, bytes: &[u8]) -> Result<Vec<Value>, Error> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::Parse {
        file: path.into(),
        line: 0,
        document: 1,
        message: format!("not UTF-8: {e}"),
    })?;
    if path.ends_with(".json") {
        return serde_json::from_str::<Value>(text).map(|v| vec![v]).map_err(|e| Error::Parse {
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
    use serde_json::json;

    use super::*;

    fn f(path: &str, text: &str) -> (String, Vec<u8>) {
        (path.to_string(), text.as_bytes().to_vec())
    }

    #[test]
    fn multi_document_lists_and_octal() {
        let files = vec![
            f(
                "b.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
            ),
            f(
                "a.yaml",
                "---\n# comment only\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      volumes: [{name: v, secret: {secretName: s, defaultMode: 0644}}]\n",
            ),
            f("README.md", "not yaml: ["),
        ];
        let out = render(&files).expect("renders");
        let names: Vec<_> = out.iter().map(|m| m.source.as_str()).collect();
        assert_eq!(names, ["a.yaml#2", "a.yaml#3", "b.yaml#1"]);
        assert_eq!(out[1].object.pointer("/spec/template/spec/volumes/0/secret/defaultMode"), Some(&json!(420)));
    }

    #[test]
    fn bad_yaml_names_file_document_and_line() {
        let files =
            vec![f("apps/web/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [unclosed\n")];
        let err = render(&files).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.starts_with("apps/web/cm.yaml:"), "{msg}");
        assert!(msg.contains("document 2"), "{msg}");
    }

    #[test]
    fn non_objects_and_duplicates_are_errors() {
        let missing_kind = vec![f("x.yaml", "apiVersion: v1\nmetadata: {name: a}\n")];
        assert!(render(&missing_kind).expect_err("no kind").to_string().contains("missing kind"));
        let dup = vec![
            f("x.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
            f("y.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#),
        ];
        assert!(matches!(render(&dup), Err(Error::Duplicate { .. })));
    }

    #[test]
    fn empty_directory_renders_nothing() {
        assert_eq!(render(&[]), Ok(vec![]));
    }
}
