//! The reference in `docs/` names everything a user can set or read, as the code
//! defines it:
//!
//! - every subcommand, every `--flag` (in its command's section) and every environment
//!   variable of the CLI (walked from clap's command tree) appears in `docs/cli.md`;
//! - every metric registered in `src/` (checked against the Prometheus text of a fresh
//!   [`plumb::metrics::Metrics`]; counters also as `NAME_total`) appears in
//!   `docs/reference.md`;
//! - every policy file field (read from the serde structs reachable from
//!   `config::Config` in `src/`, with their `rename_all` and `rename`) is a row of
//!   `docs/reference.md`'s policy tables, all fields of one struct in one table;
//! - every `plumb.dev/…` annotation or label written as a string in `src/` appears in
//!   `docs/reference.md`;
//! - every `plumb <subcommand>` in a code block of the README or `docs/` names a real
//!   subcommand.
//! - every relative link of the README and `docs/` names a file that exists and, for a
//!   Markdown file, one of its headings.
//!
//! A name added to the code without a line in the docs fails here, naming it.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use clap::CommandFactory as _;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every subcommand path (`webhook replay`) with the long flags it takes (its own and the
/// global ones it inherits), from clap's command tree.
fn cli_commands() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut BTreeMap<String, BTreeSet<String>>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let sub_path = format!("{path} {}", sub.get_name()).trim().to_string();
            let flags = sub
                .get_arguments()
                .filter(|a| !a.is_hide_set() && !a.is_global_set())
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .filter(|l| l != "--help" && l != "--version")
                .collect();
            out.insert(sub_path.clone(), flags);
            walk(sub, &sub_path, out);
        }
    }
    let mut cmd = plumb::cli::Cli::command();
    cmd.build();
    let mut out = BTreeMap::new();
    let globals = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|l| l != "--help" && l != "--version")
        .collect();
    out.insert(String::new(), globals);
    walk(&cmd, "", &mut out);
    out
}

#[test]
fn every_cli_subcommand_and_flag_is_in_the_cli_reference() {
    let doc = read("docs/cli.md");
    let mut missing = Vec::new();
    for (path, flags) in cli_commands() {
        if !path.is_empty() && !doc.contains(&format!("plumb {path}")) {
            missing.push(format!("subcommand `plumb {path}`"));
        }
        // A flag is documented in its command's section: between its heading and the next.
        let section = if path.is_empty() { global_section(&doc) } else { command_section(&doc, &path) };
        for flag in flags {
            if !section.is_some_and(|s| contains_word(s, &flag)) {
                missing.push(format!("`{flag}` of `plumb {path}`"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/cli.md lacks:\n  {}", missing.join("\n  "));
}

#[test]
fn every_environment_variable_of_the_cli_is_in_the_cli_reference() {
    fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
        out.extend(cmd.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()));
        cmd.get_subcommands().for_each(|sub| walk(sub, out));
    }
    let doc = read("docs/cli.md");
    let mut names = BTreeSet::new();
    walk(&plumb::cli::Cli::command(), &mut names);
    assert!(names.contains("PLUMB_CONFIG"), "{names:?}");
    let missing: Vec<_> = names.iter().filter(|n| !contains_word(&doc, &format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "docs/cli.md lacks the environment variables {missing:?}");
}

/// The text under the heading `### plumb PATH` (up to the next heading of that level or
/// above).
fn command_section<'a>(doc: &'a str, path: &str) -> Option<&'a str> {
    section_after(doc, &format!("\n### `plumb {path}`"))
}

/// The text under `## Global flags`.
fn global_section(doc: &str) -> Option<&str> {
    section_after(doc, "\n## Global flags")
}

fn section_after<'a>(doc: &'a str, heading: &str) -> Option<&'a str> {
    let start = doc.find(&format!("{heading}\n")).or_else(|| doc.find(&format!("{heading} ")))? + heading.len();
    let rest = &doc[start..];
    let end = ["\n## ", "\n### "].iter().filter_map(|h| rest.find(h)).min().unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `word` occurs in `text` not followed by another name character (`--prune` is not found
/// in `--prune-last`).
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let next = text[i + word.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The metric names registered in `src/` (`registry.register("name", …)` under the
/// registry's prefix `plumb`), checked against the Prometheus text exposition of a fresh
/// [`plumb::metrics::Metrics`] (which leaves out families without samples).
fn metric_names() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, _) in text.match_indices(".register(") {
            let rest = &text[i + ".register(".len()..];
            let Some(name) = rest.trim_start().strip_prefix('"').and_then(|r| r.split('"').next()) else { continue };
            names.insert(format!("plumb_{name}"));
        }
    }
    let text = plumb::metrics::Metrics::default().encode();
    for exposed in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_whitespace().next()) {
        assert!(names.contains(exposed), "{exposed} is exposed but its registration was not found in src/: {names:?}");
    }
    assert!(names.len() > 10 && names.contains("plumb_passes"), "too few metrics found: {names:?}");
    names
}

#[test]
fn every_metric_is_in_the_reference() {
    let doc = read("docs/reference.md");
    // a counter's samples carry the suffix `_total`: either name documents it
    let missing: Vec<_> = metric_names()
        .into_iter()
        .filter(|m| !contains_word(&doc, &format!("`{m}")) && !contains_word(&doc, &format!("`{m}_total")))
        .collect();
    assert!(missing.is_empty(), "docs/reference.md lacks the metrics {missing:?}");
}

/// One type deriving `Deserialize` in `src/`: its file, `rename_all`, whether it is an
/// `untagged` enum, and its body's lines.
#[derive(Debug)]
struct SerdeType {
    file: PathBuf,
    is_enum: bool,
    rename_all: Option<String>,
    untagged: bool,
    body: Vec<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn serde_types() -> BTreeMap<String, Vec<SerdeType>> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut out: BTreeMap<String, Vec<SerdeType>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if !(lines[i].trim_start().starts_with("#[derive(") && lines[i].contains("Deserialize")) {
                i += 1;
                continue;
            }
            let mut attrs = String::new();
            let mut j = i;
            while j < lines.len() && type_head(lines[j]).is_none() {
                attrs.push_str(lines[j]);
                j += 1;
            }
            let Some((is_enum, name)) = lines.get(j).and_then(|l| type_head(l)) else { break };
            let mut depth = brace_depth(lines[j]);
            let mut body = Vec::new();
            let mut k = j + 1;
            while depth > 0 && k < lines.len() {
                body.push(lines[k].to_string());
                depth += brace_depth(lines[k]);
                k += 1;
            }
            let rename_all = quoted_after(&attrs, "rename_all = \"");
            let untagged = attrs.contains("untagged");
            out.entry(name).or_default().push(SerdeType { file: file.clone(), is_enum, rename_all, untagged, body });
            i = k;
        }
    }
    out
}

fn brace_depth(line: &str) -> i64 {
    let code = line.split("//").next().unwrap_or("");
    code.matches('{').count() as i64 - code.matches('}').count() as i64
}

/// `(is_enum, name)` of a line `pub struct Name {` / `enum Name {`.
fn type_head(line: &str) -> Option<(bool, String)> {
    let mut words = line.split_whitespace().skip_while(|w| w.starts_with("pub"));
    let kw = words.next()?;
    let is_enum = match kw {
        "struct" => false,
        "enum" => true,
        _ => return None,
    };
    let name: String = words.next()?.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    Some((is_enum, name))
}

fn quoted_after(text: &str, prefix: &str) -> Option<String> {
    let start = text.find(prefix)? + prefix.len();
    Some(text[start..].split('"').next()?.to_string())
}

fn rename(name: &str, rule: Option<&str>) -> String {
    match rule {
        Some("camelCase") => {
            let mut out = String::new();
            let mut up = false;
            for (i, c) in name.chars().enumerate() {
                if c == '_' {
                    up = true;
                } else if up {
                    out.extend(c.to_uppercase());
                    up = false;
                } else if i == 0 {
                    out.extend(c.to_lowercase());
                } else {
                    out.push(c);
                }
            }
            out
        }
        Some("lowercase") => name.to_lowercase(),
        _ => name.to_string(),
    }
}

/// The keys a type contributes to a policy file, and the types of their values: a
/// struct's fields (not `skip`ped), an externally tagged enum's data-carrying variants.
fn keys_of(t: &SerdeType) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut attrs = String::new();
    for line in &t.body {
        let s = line.trim();
        if s.starts_with("///") || s.starts_with("//") {
            continue;
        }
        if s.starts_with("#[") {
            attrs.push_str(s);
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent != 4 || s.is_empty() {
            continue;
        }
        let skipped = attrs.contains("skip)") || attrs.contains("skip,") || attrs.contains("skip_deserializing");
        let renamed = quoted_after(&attrs, "rename = \"");
        attrs.clear();
        if skipped {
            continue;
        }
        if t.is_enum {
            let name: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let data = s[name.len()..].trim_start();
            if t.untagged || !(data.starts_with('(') || data.starts_with('{')) {
                continue;
            }
            out.push((renamed.unwrap_or_else(|| rename(&name, t.rename_all.as_deref())), data.to_string()));
        } else {
            let s = s.strip_prefix("pub(crate) ").or_else(|| s.strip_prefix("pub ")).unwrap_or(s);
            let Some((field, ty)) = s.split_once(':') else { continue };
            out.push((renamed.unwrap_or_else(|| rename(field.trim(), t.rename_all.as_deref())), ty.to_string()));
        }
    }
    out
}

/// The type names a field's type mentions (`Option<Vec<super::GroupKind>>` → `GroupKind`).
fn type_names(ty: &str) -> Vec<String> {
    ty.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .map(str::to_string)
        .collect()
}

/// Every key of the policy file: `Type.key` for each field reachable from `Config`.
fn policy_fields() -> BTreeSet<(String, String)> {
    let types = serde_types();
    let mut seen = BTreeSet::new();
    let mut fields = BTreeSet::new();
    let mut todo = vec!["Config".to_string()];
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(candidates) = types.get(&name) else { continue };
        // Names defined twice: the policy's own in src/config/ first.
        let t = candidates.iter().find(|t| t.file.to_string_lossy().contains("/src/config/")).unwrap_or(&candidates[0]);
        for (key, ty) in keys_of(t) {
            fields.insert((name.clone(), key));
            todo.extend(type_names(&ty));
        }
    }
    for (ty, key) in [("Repository", "webhookSecretRef"), ("SyncPolicy", "selfHeal"), ("Limits", "maxFiles")] {
        assert!(fields.contains(&(ty.to_string(), key.to_string())), "the parser lost {ty}.{key}: {fields:?}");
    }
    assert!(fields.len() > 150, "only {} policy fields found: {fields:?}", fields.len());
    fields
}

/// The field names of each table of the reference's "Policy file" part: per `###`
/// section, the first column's `name` of every row.
fn policy_tables(doc: &str) -> Vec<(String, BTreeSet<String>)> {
    let start = doc.find("\n## Policy file\n").expect("docs/reference.md has a \"## Policy file\" part");
    let part = &doc[start + 1..];
    let part = &part[..part[1..].find("\n## ").map_or(part.len(), |e| e + 1)];
    part.split("\n### ")
        .skip(1)
        .map(|section| {
            let title = section.lines().next().unwrap_or_default().to_string();
            let rows = section
                .lines()
                .filter_map(|l| l.strip_prefix("| `"))
                .filter_map(|l| l.split('`').next())
                .map(str::to_string)
                .collect();
            (title, rows)
        })
        .collect()
}

#[test]
fn every_policy_field_is_in_the_reference() {
    let doc = read("docs/reference.md");
    let tables = policy_tables(&doc);
    let mut by_type: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (ty, key) in policy_fields() {
        by_type.entry(ty).or_default().insert(key);
    }
    // Each type's fields are the rows of one table (the type's section).
    let mut missing = Vec::new();
    for (ty, keys) in &by_type {
        let best = tables.iter().max_by_key(|(_, rows)| keys.intersection(rows).count());
        let lacking: Vec<_> = match best {
            Some((_, rows)) => keys.difference(rows).cloned().collect(),
            None => keys.iter().cloned().collect(),
        };
        if !lacking.is_empty() {
            let section = best.map_or("none", |(title, _)| title.as_str());
            missing.push(format!("{ty}: {lacking:?} (closest table: {section})"));
        }
    }
    assert!(missing.is_empty(), "docs/reference.md's policy tables lack:\n  {}", missing.join("\n  "));
}

/// `plumb.dev/NAME` written as a whole string literal in `src/` (annotations, labels).
fn annotation_names() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, _) in text.match_indices("\"plumb.dev/") {
            let rest = &text[i + 1..];
            let Some(end) = rest.find('"') else { continue };
            let name = &rest[..end];
            let suffix = &name["plumb.dev/".len()..];
            if !suffix.is_empty() && suffix != "v1alpha1" && suffix.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            {
                names.insert(name.to_string());
            }
        }
    }
    assert!(names.contains("plumb.dev/tracking-id"), "{names:?}");
    names
}

#[test]
fn every_annotation_is_in_the_reference() {
    let doc = read("docs/reference.md");
    let missing: Vec<_> = annotation_names().into_iter().filter(|a| !contains_word(&doc, a)).collect();
    assert!(missing.is_empty(), "docs/reference.md lacks the annotations and labels {missing:?}");
}

/// Markdown files whose examples are checked: the README and everything under `docs/`.
fn doc_files() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut stack = vec![root().join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn every_plumb_command_in_a_code_block_exists() {
    let commands = cli_commands();
    let top: BTreeSet<&str> = commands.keys().filter_map(|k| k.split(' ').next()).filter(|k| !k.is_empty()).collect();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        // the language of the open code block, if one is open
        let mut block: Option<String> = None;
        for (n, line) in text.lines().enumerate() {
            if let Some(lang) = line.trim_start().strip_prefix("```") {
                block = if block.is_some() { None } else { Some(lang.trim().to_string()) };
                continue;
            }
            let command = match block.as_deref() {
                Some("sh" | "bash" | "shell") => line,
                Some("console") => match line.strip_prefix("$ ") {
                    Some(command) => command,
                    None => continue,
                },
                _ => continue,
            };
            for sub in invoked_subcommands(command) {
                checked += 1;
                if !top.contains(sub.as_str()) {
                    wrong.push(format!("{}:{}: plumb {sub}", file.strip_prefix(root()).unwrap().display(), n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "no such subcommand:\n  {}", wrong.join("\n  "));
    assert!(checked > 20, "only {checked} plumb commands found in code blocks");
}

/// The word after each `plumb ` that starts a command in a shell line: at its start, after
/// a pipe, `&&`, `;`, `(` or `$(`, as `kubectl plumb`, or as `target/release/plumb`.
fn invoked_subcommands(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in line.match_indices("plumb ") {
        let before = line[..i].trim_end();
        let starts = before.is_empty()
            || before.ends_with('|')
            || before.ends_with("&&")
            || before.ends_with(';')
            || before.ends_with('(')
            || before.ends_with("kubectl")
            || line[..i].ends_with("release/");
        if !starts {
            continue;
        }
        let word: String = line[i + "plumb ".len()..].chars().take_while(|c| c.is_ascii_lowercase()).collect();
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let dir = file.parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split([')', ' ']).next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let linked = if path.is_empty() { file.clone() } else { dir.join(path) };
            let name = file.strip_prefix(root()).unwrap().display().to_string();
            if !linked.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
            } else if !fragment.is_empty() && linked.extension().is_some_and(|e| e == "md") {
                let heads = anchors(&std::fs::read_to_string(&linked).unwrap());
                if !heads.contains(fragment) {
                    broken.push(format!("{name}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n  {}", broken.join("\n  "));
}
