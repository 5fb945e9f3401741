//! No import cycles between plumb's modules.
//!
//! Reads every `.rs` file under `src/` (not `src/main.rs`, which is another crate), finds
//! the references it makes to other modules of the crate — `use crate::…` (multi-line
//! `use crate::{…}` trees included), `crate::a::B` anywhere in code, `super::…`,
//! `self::…`, `pub use` re-exports — and builds a module graph at file granularity.
//! A reference from module `F` to module `T` is an edge between the two children of
//! their lowest common ancestor that contain them (`config::validate` →
//! `plan::options` is the edge `config → plan`); a reference to one's own ancestor or
//! descendant is no edge. Comments (`//`, `/* */`), string and char literals are
//! skipped. The test fails listing every elementary cycle, each as `a → b → a` with the
//! `file:line` of one reference per edge.
//!
//! The layering this protects is in `shared/DESIGN.md`: wiring → driver → IO and pure
//! core, with `config` near the bottom of the pure core.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// A module path below the crate root (`["webhook", "signature"]`); the root is `[]`.
type ModPath = Vec<String>;

/// One reference that makes an edge: where it is written and what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Site {
    file: String,
    line: usize,
    path: String,
}

/// The collapsed graph: `from → to → first reference seen`.
type Graph = BTreeMap<ModPath, BTreeMap<ModPath, Site>>;

/// The module a source file defines, from its path relative to `src/`; `None` for
/// files that are not part of the library crate.
fn module_of(rel: &str) -> Option<ModPath> {
    let rel = rel.strip_suffix(".rs")?;
    if rel == "main" {
        return None;
    }
    if rel == "lib" {
        return Some(Vec::new());
    }
    let mut parts: ModPath = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// The source with comments, string literals and char literals blanked out (newlines
/// kept, so line numbers stay right).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'/' && next == Some(b'*') {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j.min(b.len())]);
            i = j.min(b.len());
        } else if (c == b'r' || c == b'b') && !prev_is_ident(b, i) && raw_string_start(b, i).is_some() {
            let (hashes, body) = raw_string_start(b, i).unwrap_or((0, i));
            let closing: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let end = b[body..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(b.len(), |p| body + p + closing.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}', '"') or a lifetime ('a).
            let end = if next == Some(b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|p| i + 2 + p + 1)
            } else {
                // One (possibly multi-byte) char followed by a quote.
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `r"`, `r#"`, `br"`, `br#"` at `i`: the number of `#` and where the body starts.
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    (b.get(j) == Some(&b'"')).then_some((hashes, j + 1))
}

/// A token of stripped source: an identifier/keyword or one punctuation (`::` counts
/// as one), with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tok {
    text: String,
    line: usize,
}

fn tokenize(code: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut line = 1;
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            toks.push(Tok { text: code[i..end].to_string(), line });
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            toks.push(Tok { text: "::".into(), line });
        } else if !c.is_whitespace() {
            toks.push(Tok { text: c.to_string(), line });
        }
    }
    toks
}

/// The module paths (relative to the crate root) named by the references in one file,
/// each with its line. `here` is the file's module.
fn references(here: &ModPath, code: &str) -> Vec<(usize, ModPath, String)> {
    let toks = tokenize(code);
    let mut out = Vec::new();
    // Child modules declared in the file (`mod store;`): `use store::X` names them.
    let children: BTreeSet<&str> =
        toks.windows(3).filter(|w| w[0].text == "mod" && w[2].text == ";").map(|w| w[1].text.as_str()).collect();
    // Inline modules (`mod tests { … }`): (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        match t.text.as_str() {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if toks.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push((toks[i + 1].text.clone(), depth + 1));
            }
            // `use child::…` at the file's top level: a path relative to this module
            "use"
                if inline.is_empty()
                    && toks.get(i + 1).is_some_and(|t| children.contains(t.text.as_str()))
                    && toks.get(i + 2).is_some_and(|t| t.text == "::") =>
            {
                let mut paths = Vec::new();
                let end = use_tree(&toks, i + 1, here.clone(), &mut paths);
                out.extend(paths);
                i = end.max(i + 1);
                continue;
            }
            "crate" | "super" | "self" if toks.get(i + 1).is_some_and(|t| t.text == "::") => {
                // Only a path start: not `foo::super::` / `$crate::` / `x.self`.
                let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
                if prev != Some("::") && prev != Some("$") {
                    let mut current = here.clone();
                    current.extend(inline.iter().map(|(n, _)| n.clone()));
                    let (base, after) = path_base(&toks, i, &current);
                    if let Some(base) = base {
                        let mut paths = Vec::new();
                        let end = use_tree(&toks, after, base, &mut paths);
                        for (line, p, shown) in paths {
                            out.push((line, p, shown));
                        }
                        i = end.max(i + 1);
                        continue;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Resolves the leading `crate::` / `self::` / `super::super::…` of the path at `i`
/// against `current` (the module the code is in): the base module path and the index
/// of the first token after the last leading keyword's `::`.
fn path_base(toks: &[Tok], mut i: usize, current: &ModPath) -> (Option<ModPath>, usize) {
    let mut base = match toks[i].text.as_str() {
        "crate" => Vec::new(),
        "self" => current.clone(),
        _ => {
            let mut b = current.clone();
            if b.pop().is_none() {
                return (None, i + 2);
            }
            b
        }
    };
    i += 2;
    while toks.get(i).is_some_and(|t| t.text == "super") && toks.get(i + 1).is_some_and(|t| t.text == "::") {
        if base.pop().is_none() {
            return (None, i + 2);
        }
        i += 2;
    }
    (Some(base), i)
}

/// Reads a path or use tree starting at `i` with prefix `base`; pushes every full path
/// it names (`a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`). Returns the index after
/// it.
fn use_tree(toks: &[Tok], mut i: usize, mut base: ModPath, out: &mut Vec<(usize, ModPath, String)>) -> usize {
    let line = toks.get(i).map_or(0, |t| t.line);
    while let Some(t) = toks.get(i) {
        if t.text == "{" {
            i += 1;
            loop {
                match toks.get(i).map(|t| t.text.as_str()) {
                    None => return i,
                    Some("}") => return i + 1,
                    Some(",") => i += 1,
                    Some(_) => i = use_tree(toks, i, base.clone(), out),
                }
            }
        }
        if t.text == "self" && !base.is_empty() {
            // `a::{self, …}`: the module itself.
            i += 1;
            break;
        }
        if t.text == "*" {
            i += 1;
            break;
        }
        if !t.text.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            break;
        }
        base.push(t.text.clone());
        i += 1;
        if toks.get(i).is_some_and(|t| t.text == "::") {
            i += 1;
        } else {
            break;
        }
    }
    let shown = base.join("::");
    out.push((line, base, shown));
    // Skip `as alias`.
    if toks.get(i).is_some_and(|t| t.text == "as") {
        i += 2;
    }
    i
}

/// The longest prefix of `path` that is a module of `modules`.
fn resolve(path: &ModPath, modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p)).unwrap_or_default()
}

/// Builds the collapsed sibling graph from `(path relative to src/, source)` pairs.
fn graph(files: &[(String, String)]) -> Graph {
    let parsed: Vec<(String, ModPath, String)> =
        files.iter().filter_map(|(rel, src)| module_of(rel).map(|m| (rel.clone(), m, strip(src)))).collect();
    let modules: BTreeSet<ModPath> = parsed.iter().map(|(_, m, _)| m.clone()).collect();
    let mut g = Graph::new();
    for (rel, from, code) in &parsed {
        for (line, path, shown) in references(from, code) {
            let to = resolve(&path, &modules);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // own ancestor or descendant (or itself)
            }
            let (a, b) = (from[..=common].to_vec(), to[..=common].to_vec());
            let site = Site { file: format!("src/{rel}"), line, path: format!("crate::{shown}") };
            g.entry(a).or_default().entry(b).or_insert(site);
        }
    }
    g
}

/// Every elementary cycle of `g`, each starting at its smallest module, sorted.
fn cycles(g: &Graph) -> Vec<Vec<ModPath>> {
    let mut found = BTreeSet::new();
    for start in g.keys() {
        // Depth-first search for paths back to `start` through modules greater than it.
        let mut stack: Vec<(ModPath, Vec<ModPath>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((node, path)) = stack.pop() {
            for next in g.get(&node).into_iter().flat_map(BTreeMap::keys) {
                if next == start {
                    found.insert(path.clone());
                } else if next > start && !path.contains(next) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    found.into_iter().collect()
}

fn name(m: &ModPath) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

/// The report of the cycles: one block per cycle.
fn report(g: &Graph, cycles: &[Vec<ModPath>]) -> String {
    let mut out = String::new();
    for c in cycles {
        let names: Vec<String> = c.iter().chain(std::iter::once(&c[0])).map(name).collect();
        let _ = writeln!(out, "{}", names.join(" → "));
        for (i, from) in c.iter().enumerate() {
            let to = &c[(i + 1) % c.len()];
            if let Some(site) = g.get(from).and_then(|e| e.get(to)) {
                let _ = writeln!(out, "    {} → {}: {}:{} ({})", name(from), name(to), site.file, site.line, site.path);
            }
        }
    }
    out
}

fn read_tree(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("read src/").map(|e| e.expect("dir entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_tree(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src/").to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&path).expect("read source")));
        }
    }
}

#[test]
fn no_module_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let g = graph(&files);
    if std::env::var_os("PLUMB_MODULE_GRAPH").is_some() {
        // `PLUMB_MODULE_GRAPH=1 cargo test --test module_cycles -- --nocapture`: every edge.
        for (from, tos) in &g {
            for (to, site) in tos {
                println!("{} → {}: {}:{} ({})", name(from), name(to), site.file, site.line, site.path);
            }
        }
    }
    let found = cycles(&g);
    assert!(found.is_empty(), "{} module import cycle(s):\n{}", found.len(), report(&g, &found));
}

// ---- the checker's own tests ------------------------------------------------------

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(p, s)| ((*p).to_string(), (*s).to_string())).collect()
}

fn m(s: &str) -> ModPath {
    s.split("::").map(str::to_string).collect()
}

#[test]
fn checker_finds_a_cycle_through_nested_modules() {
    let g = graph(&files(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "mod x;\npub use x::X;\n"),
        ("a/x.rs", "use crate::{\n    b::{self, y::Y},\n};\npub struct X;\n"),
        ("b/mod.rs", "pub mod y;\n"),
        ("b/y.rs", "pub struct Y;\nfn f() -> crate::a::X { crate::a::X }\n"),
    ]));
    let found = cycles(&g);
    assert_eq!(found, vec![vec![m("a"), m("b")]]);
    let text = report(&g, &found);
    assert!(text.starts_with("a → b → a\n"), "{text}");
    assert!(text.contains("src/a/x.rs:2"), "{text}");
    assert!(text.contains("src/b/y.rs:2"), "{text}");
}

#[test]
fn checker_passes_a_layered_tree_and_ignores_comments_strings_and_family() {
    let g = graph(&files(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod x;\npub mod y;\nuse self::x::X;\n"),
        ("a/x.rs", "use super::y::Y; // crate::b::Z\npub struct X;\n"),
        (
            "a/y.rs",
            "pub struct Y;\n/// See [`crate::b::B`].\nconst S: &str = \"crate::b::B\";\nconst R: &str = r#\"super::x\"#;\nconst C: char = '\"';\nfn f<'a>(_: &'a str) {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::X;\n}\n",
        ),
        ("b/mod.rs", "use crate::a::{x::X, y::Y};\n/* crate::b::* and /* nested */ super::a */\n"),
    ]));
    assert_eq!(cycles(&g), Vec::<Vec<ModPath>>::new(), "{g:?}");
    assert!(g[&m("b")].contains_key(&m("a")));
    assert!(g[&m("a::x")].contains_key(&m("a::y")));
    // y's comment, doc, strings and test module (`super::super` is `a`) make no edge.
    assert!(!g.contains_key(&m("a::y")), "{g:?}");
    assert!(!g.contains_key(&m("a")), "a's reference to its child x is no edge: {g:?}");
}

#[test]
fn checker_counts_reexports_and_finds_longer_cycles() {
    let g = graph(&files(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("a.rs", "pub use crate::b::B;\n"),
        ("b.rs", "pub struct B(crate::c::C);\n"),
        ("c.rs", "pub struct C;\nimpl C { fn a() { let _ = crate::a::B; } }\n"),
    ]));
    let found = cycles(&g);
    assert_eq!(found, vec![vec![m("a"), m("b"), m("c")]]);
    assert!(report(&g, &found).starts_with("a → b → c → a\n"));
}

// ---- the pure core's layer rule ---------------------------------------------------

/// The pure core (values in, values out; `shared/DESIGN.md`): these modules and their
/// children, except [`IO_INSIDE_PURE`].
const PURE: &[&str] = &["config", "compare", "health", "plan", "webhook", "tracking", "kind", "status"];

/// IO adapters that live inside a pure module's folder.
const IO_INSIDE_PURE: &[&str] = &["status::store"];

/// The modules that do IO or sequence it: the pure core references none of them.
const IO: &[&str] = &[
    "cluster",
    "watch",
    "source",
    "render::helm",
    "render::kustomize",
    "render::sops",
    "render::sandbox",
    "render::tools",
    "apply",
    "forge",
    "notify",
    "reconcile",
    "serve",
    "server",
    "cli",
    "scheduler",
    "leader",
    "poller",
    "probes",
    "reload",
    "auth",
    "kube_metrics",
    "secret_refs",
    "status::store",
];

fn within(m: &ModPath, roots: &[&str]) -> bool {
    roots.iter().any(|r| {
        let r = self::m(r);
        m.len() >= r.len() && m[..r.len()] == r[..]
    })
}

/// Every reference from a pure module to an IO module, as `from → to: file:line (path)`.
fn layer_violations(files: &[(String, String)]) -> Vec<String> {
    let parsed: Vec<(String, ModPath, String)> =
        files.iter().filter_map(|(rel, src)| module_of(rel).map(|m| (rel.clone(), m, strip(src)))).collect();
    let modules: BTreeSet<ModPath> = parsed.iter().map(|(_, m, _)| m.clone()).collect();
    let mut out = Vec::new();
    for (rel, from, code) in &parsed {
        if !within(from, PURE) || within(from, IO_INSIDE_PURE) {
            continue;
        }
        for (line, path, shown) in references(from, code) {
            let to = resolve(&path, &modules);
            if within(&to, IO) {
                out.push(format!("{} → {}: src/{rel}:{line} (crate::{shown})", name(from), name(&to)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_pure_core_imports_no_io_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    let found = layer_violations(&files);
    assert!(found.is_empty(), "{} reference(s) from the pure core to IO:\n{}", found.len(), found.join("\n"));
}

#[test]
fn the_layer_rule_finds_a_pure_module_reaching_io() {
    let files = files(&[
        ("lib.rs", "pub mod plan; pub mod cluster; pub mod status;"),
        ("plan.rs", "use crate::status::Condition;\nfn f() { crate::cluster::connect(); }"),
        ("cluster.rs", "use crate::plan::Plan;"),
        ("status.rs", "mod store;\npub use store::Store;"),
        ("status/store.rs", "use crate::cluster::Client;"),
    ]);
    assert_eq!(
        layer_violations(&files),
        [
            "plan → cluster: src/plan.rs:2 (crate::cluster::connect)".to_string(),
            "status → status::store: src/status.rs:2 (crate::status::store::Store)".to_string(),
        ]
    );
}

/// The HTTP server reads the published statuses and hands deliveries to a queue: it
/// names neither the driver nor the scheduler (`serve` wires them).
#[test]
fn the_http_server_knows_neither_the_driver_nor_the_scheduler() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let code = strip(&std::fs::read_to_string(src.join("server.rs")).expect("read src/server.rs"));
    let named: Vec<String> = references(&m("server"), &code)
        .into_iter()
        .filter(|(_, p, _)| p.first().is_some_and(|r| r == "reconcile" || r == "scheduler"))
        .map(|(line, _, shown)| format!("src/server.rs:{line} (crate::{shown})"))
        .collect();
    assert!(named.is_empty(), "server.rs names the driver or the scheduler: {named:?}");
}
