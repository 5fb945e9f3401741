//! `plumb import`: Argo CD `Application`s and `AppProject`s, or Flux `GitRepository`,
//! `HelmRepository`, `Kustomization` and `HelmRelease` objects, turned into a plumb
//! policy file. Pure: objects in, the policy (as a value) and what could not be mapped
//! out. What each field becomes:
//!
//! | Argo CD | plumb |
//! |---|---|
//! | `Application` `metadata.name` | `applications[].name` |
//! | `spec.source.repoURL` | a `repositories[]` entry (one per URL) |
//! | `spec.source.targetRevision` (`HEAD` or empty: `main`) | `revision` |
//! | `spec.source.path` | `path` |
//! | `spec.source.helm.{releaseName, valueFiles, values, valuesObject}` | `source.{releaseName, valueFiles (from the repository root), values}` |
//! | `spec.source.kustomize.{images, namePrefix, nameSuffix}` | `source.{images, namePrefix, nameSuffix}` |
//! | `spec.destination.namespace` | `namespace` |
//! | `spec.project` + `spec.syncPolicy` | `environment` (one per project and sync policy) |
//! | `syncPolicy.automated.{prune, selfHeal, allowEmpty}`, `syncOptions` | `syncPolicy.{automated, prune, selfHeal, allowEmpty, syncOptions}` |
//! | `AppProject` `spec.destinations[].namespace` | the environment's `destinations.namespaces` |
//! | `AppProject` `spec.clusterResourceWhitelist` | the environment's `clusterResources` |
//!
//! | Flux | plumb |
//! |---|---|
//! | `GitRepository` `spec.url` | a `repositories[]` entry |
//! | `GitRepository` `spec.ref.{branch, tag, commit}` | the `revision` of what reads it |
//! | `Kustomization` `metadata.name`, `spec.path`, `spec.targetNamespace` | an application's `name`, `path`, `namespace` |
//! | `Kustomization` `spec.prune`, `spec.interval` | the environment's `syncPolicy.prune`, `reconcileInterval` (automated, selfHeal: Flux always applies and reverts) |
//! | `Kustomization` `spec.dependsOn` | `dependsOn` |
//! | `HelmRelease` `spec.chart.spec.{chart, sourceRef}` of a `GitRepository` | an application of the chart's path |
//! | `HelmRelease` `spec.{releaseName, targetNamespace, values}` | `source.releaseName`, `namespace`, `source.values` |
//!
//! Everything else (charts from chart repositories — plumb reads their values from a
//! Git repository of the policy, so the note gives the `source.chart` to write —,
//! multiple sources, other clusters, retry, `postBuild`, secret references, sync
//! windows, …) is listed in the notes, never dropped silently.
//! Sources: Argo CD "Application Specification" and "Projects" docs; Flux
//! "GitRepository", "Kustomization" and "HelmRelease" API references.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// A converted policy and what could not be carried over.
#[derive(Debug, Default, PartialEq)]
pub struct Imported {
    /// The policy file's content (`repositories`, `environments`, `applications`).
    pub policy: Value,
    /// One line per field or object not mapped: `Kind/namespace/name: what and why`.
    pub notes: Vec<String>,
    /// How many applications the policy declares.
    pub applications: usize,
}

#[derive(Default)]
struct Builder {
    repositories: Vec<(String, String)>,
    environments: Vec<(String, Value)>,
    applications: Vec<Value>,
    notes: Vec<String>,
}

impl Builder {
    /// The repository named for `url` (one per URL; the name from its last segment).
    fn repository(&mut self, url: &str) -> String {
        if let Some((name, _)) = self.repositories.iter().find(|(_, u)| u == url) {
            return name.clone();
        }
        let tail = url.trim_end_matches('/').trim_end_matches(".git").rsplit(['/', ':']).next().unwrap_or("repo");
        let base = dns_label(tail, "repo");
        let name = unique(&base, self.repositories.iter().map(|(n, _)| n.as_str()));
        self.repositories.push((name.clone(), url.to_string()));
        name
    }

    /// The environment for `sync` (named after `hint`, one per distinct policy).
    fn environment(&mut self, hint: &str, sync: Value) -> String {
        if let Some((name, _)) = self.environments.iter().find(|(_, s)| *s == sync) {
            return name.clone();
        }
        let name = unique(&dns_label(hint, "env"), self.environments.iter().map(|(n, _)| n.as_str()));
        self.environments.push((name.clone(), sync));
        name
    }

    fn note(&mut self, obj: &Value, what: impl std::fmt::Display) {
        self.notes.push(format!("{}: {what}", id(obj)));
    }
}

/// `Kind/namespace/name` of an object.
fn id(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    format!("{}/{}/{}", s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// `text` as a DNS-1123 label (lower case, `-` for anything else, at most 63), or
/// `fallback` when nothing is left.
fn dns_label(text: &str, fallback: &str) -> String {
    let mut out: String =
        text.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    out.truncate(63);
    let out = out.trim_matches('-').to_string();
    if out.is_empty() { fallback.to_string() } else { out }
}

/// `base`, or `base-2`, `base-3`… when taken.
fn unique<'a>(base: &str, taken: impl Iterator<Item = &'a str> + Clone) -> String {
    let free = |n: &str| !taken.clone().any(|t| t == n);
    if free(base) {
        return base.to_string();
    }
    (2..).map(|i| format!("{base}-{i}")).find(|n| free(n)).unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Converts `objects` (Argo CD and Flux objects, any order; others are noted).
pub fn import(objects: &[Value]) -> Imported {
    let mut b = Builder::default();
    let kind_of = |o: &Value| {
        let group = str_at(o, "/apiVersion").unwrap_or_default().split('/').next().unwrap_or_default().to_string();
        (group, str_at(o, "/kind").unwrap_or_default().to_string())
    };
    let by = |group: &'static str, kind: &'static str| {
        objects.iter().filter(move |o| {
            let (g, k) = kind_of(o);
            g == group && k == kind
        })
    };
    let projects: BTreeMap<String, &Value> = by("argoproj.io", "AppProject")
        .map(|p| (str_at(p, "/metadata/name").unwrap_or_default().to_string(), p))
        .collect();
    for app in by("argoproj.io", "Application") {
        argo_application(&mut b, app, &projects);
    }
    for project in projects.values() {
        for field in ["sourceRepos", "roles", "syncWindows", "signatureKeys", "orphanedResources"] {
            if project.pointer(&format!("/spec/{field}")).is_some() {
                b.note(project, format!("spec.{field} not mapped (plumb: see environments in docs/reference.md)"));
            }
        }
    }
    let git: BTreeMap<String, &Value> = by("source.toolkit.fluxcd.io", "GitRepository")
        .map(|g| (str_at(g, "/metadata/name").unwrap_or_default().to_string(), g))
        .collect();
    let helm_repos: BTreeMap<String, &Value> = by("source.toolkit.fluxcd.io", "HelmRepository")
        .map(|g| (str_at(g, "/metadata/name").unwrap_or_default().to_string(), g))
        .collect();
    for k in by("kustomize.toolkit.fluxcd.io", "Kustomization") {
        flux_kustomization(&mut b, k, &git);
    }
    for h in by("helm.toolkit.fluxcd.io", "HelmRelease") {
        flux_helm_release(&mut b, h, &git, &helm_repos);
    }
    for o in objects {
        let (g, k) = kind_of(o);
        let known = matches!(
            (g.as_str(), k.as_str()),
            ("argoproj.io", "Application" | "AppProject")
                | ("source.toolkit.fluxcd.io", "GitRepository" | "HelmRepository")
                | ("kustomize.toolkit.fluxcd.io", "Kustomization")
                | ("helm.toolkit.fluxcd.io", "HelmRelease")
        );
        if !known {
            b.note(o, "not an Argo CD or Flux object plumb imports; skipped");
        }
    }
    let applications = b.applications.len();
    let repositories: Vec<Value> = b.repositories.iter().map(|(n, u)| json!({"name": n, "url": u})).collect();
    let environments: Vec<Value> = b
        .environments
        .iter()
        .map(|(n, e)| {
            let mut env = Map::new();
            env.insert("name".into(), json!(n));
            if let Value::Object(m) = e {
                env.extend(m.clone());
            }
            Value::Object(env)
        })
        .collect();
    Imported {
        policy: json!({"repositories": repositories, "environments": environments, "applications": b.applications}),
        notes: b.notes,
        applications,
    }
}

/// The sync options plumb offers, of `opts`; the others noted.
fn sync_options(b: &mut Builder, obj: &Value, opts: Option<&Value>) -> Vec<String> {
    let mut out = vec![];
    for o in opts.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        match o {
            "ServerSideApply=true" | "ServerSideDiff=true" => {}
            o if crate::config::check_sync_option(o).is_ok() => out.push(o.to_string()),
            o => b.note(obj, format!("sync option `{o}` has no plumb equivalent; not mapped")),
        }
    }
    out
}

fn argo_application(b: &mut Builder, app: &Value, projects: &BTreeMap<String, &Value>) {
    let name = dns_label(str_at(app, "/metadata/name").unwrap_or("app"), "app");
    let spec = &app["spec"];
    let source = match (spec.get("source"), spec["sources"].as_array()) {
        (Some(s), _) => s.clone(),
        (None, Some(list)) if !list.is_empty() => {
            b.note(app, format!("spec.sources has {} sources: only the first is imported", list.len()));
            list[0].clone()
        }
        _ => {
            b.note(app, "no spec.source: skipped");
            return;
        }
    };
    let Some(url) = str_at(&source, "/repoURL") else {
        b.note(app, "no spec.source.repoURL: skipped");
        return;
    };
    if let Some(server) = str_at(spec, "/destination/server").filter(|s| *s != "https://kubernetes.default.svc") {
        b.note(app, format!("destination server {server}: plumb applies to the cluster it runs in"));
    }
    if let Some(cluster) = str_at(spec, "/destination/name").filter(|s| *s != "in-cluster") {
        b.note(app, format!("destination cluster {cluster}: plumb applies to the cluster it runs in"));
    }
    let Some(namespace) = str_at(spec, "/destination/namespace") else {
        b.note(app, "no spec.destination.namespace (plumb needs one): skipped");
        return;
    };
    let policy = &spec["syncPolicy"];
    let automated = policy.get("automated").is_some_and(|a| !a.is_null());
    let mut sync = Map::new();
    sync.insert("automated".into(), json!(automated));
    for (from, to) in [("prune", "prune"), ("selfHeal", "selfHeal"), ("allowEmpty", "allowEmpty")] {
        if policy["automated"][from].as_bool() == Some(true) {
            sync.insert(to.into(), json!(true));
        }
    }
    let options = sync_options(b, app, policy.get("syncOptions"));
    if !options.is_empty() {
        sync.insert("syncOptions".into(), json!(options));
    }
    if policy.get("retry").is_some() {
        b.note(app, "syncPolicy.retry not mapped (plumb retries with its own backoff)");
    }
    let project = str_at(spec, "/project").unwrap_or("default");
    let mut env = Map::new();
    env.insert("syncPolicy".into(), Value::Object(sync));
    if let Some(p) = projects.get(project) {
        let namespaces: Vec<&str> = p["spec"]["destinations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| str_at(d, "/namespace"))
            .collect();
        if !namespaces.is_empty() && !namespaces.contains(&"*") {
            env.insert("destinations".into(), json!({"namespaces": namespaces}));
        }
        let kinds: Vec<Value> = p["spec"]["clusterResourceWhitelist"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| json!({"group": k["group"].as_str().unwrap_or_default(), "kind": k["kind"].as_str().unwrap_or_default()}))
            .collect();
        if !kinds.is_empty() {
            env.insert("clusterResources".into(), json!(kinds));
        }
    }
    if let Some(chart) = str_at(&source, "/chart") {
        let version = str_at(&source, "/targetRevision").unwrap_or("*");
        b.note(
            app,
            format!(
                "a chart from the chart repository {url}: not imported (plumb reads a chart's value files from a \
                 Git repository of the policy); declare it with `source: {{chart: {{repository: {url}, name: {chart}, \
                 version: '{version}'}}}}` and a `repository` and `path` for its values"
            ),
        );
        return;
    }
    let environment = b.environment(project, Value::Object(env));
    let repository = b.repository(url);
    let revision = match str_at(&source, "/targetRevision") {
        None | Some("HEAD") => "main".to_string(),
        Some(r) => r.to_string(),
    };
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    out.insert("repository".into(), json!(repository));
    let mut src = Map::new();
    out.insert("revision".into(), json!(revision));
    out.insert("path".into(), json!(str_at(&source, "/path").unwrap_or(".")));
    out.insert("namespace".into(), json!(namespace));
    out.insert("environment".into(), json!(environment));
    let path = str_at(&source, "/path").unwrap_or("");
    helm_fields(&source["helm"], path, &mut src);
    let k = &source["kustomize"];
    if let Some(images) = k["images"].as_array().filter(|i| !i.is_empty()) {
        let mapped: Vec<Value> = images.iter().filter_map(Value::as_str).filter_map(image_override).collect();
        src.insert("images".into(), json!(mapped));
    }
    for field in ["namePrefix", "nameSuffix"] {
        if let Some(v) = str_at(k, &format!("/{field}")) {
            src.insert(field.into(), json!(v));
        }
    }
    for field in ["directory", "plugin"] {
        if source.get(field).is_some() {
            b.note(app, format!("spec.source.{field} not mapped"));
        }
    }
    if !src.is_empty() {
        out.insert("source".into(), Value::Object(src));
    }
    b.applications.push(Value::Object(out));
}

/// Argo CD's `helm` block into `src` (value files are relative to the chart's `path`;
/// plumb's are from the repository root).
fn helm_fields(helm: &Value, path: &str, src: &mut Map<String, Value>) {
    if let Some(r) = str_at(helm, "/releaseName") {
        src.insert("releaseName".into(), json!(r));
    }
    let files: Vec<String> =
        helm["valueFiles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|f| {
                if path.is_empty() || path == "." {
                    f.to_string()
                } else {
                    format!("{}/{f}", path.trim_end_matches('/'))
                }
            })
            .collect();
    if !files.is_empty() {
        src.insert("valueFiles".into(), json!(files));
    }
    if let Some(v) = helm.get("valuesObject").filter(|v| v.is_object()) {
        src.insert("values".into(), v.clone());
    } else if let Some(text) = str_at(helm, "/values")
        && let Ok(v) = serde_saphyr::from_str::<Value>(text)
        && v.is_object()
    {
        src.insert("values".into(), v);
    }
}

/// Argo CD's kustomize image (`name=new:tag`, `name:tag`, `name@digest`) as plumb's.
fn image_override(text: &str) -> Option<Value> {
    let (name, rest) = text.split_once('=').unwrap_or((text, text));
    let name = name.split([':', '@']).next()?;
    let mut o = json!({"name": name});
    let (image, digest) = rest.split_once('@').map_or((rest, None), |(i, d)| (i, Some(d)));
    let (new_name, tag) = match image.rsplit_once(':').filter(|(_, t)| !t.contains('/')) {
        Some((n, t)) => (n, Some(t)),
        None => (image, None),
    };
    if new_name != name {
        o["newName"] = json!(new_name);
    }
    if let Some(t) = tag {
        o["newTag"] = json!(t);
    }
    if let Some(d) = digest {
        o["digest"] = json!(d);
    }
    Some(o)
}

/// A Flux `GitRepository`'s URL and the revision its `ref` names.
fn flux_git(b: &mut Builder, owner: &Value, git: &BTreeMap<String, &Value>, name: &str) -> Option<(String, String)> {
    let Some(repo) = git.get(name) else {
        b.note(owner, format!("sourceRef GitRepository {name} is not among the files: skipped"));
        return None;
    };
    let url = str_at(repo, "/spec/url")?;
    let r = &repo["spec"]["ref"];
    let revision = ["commit", "tag", "branch", "name"]
        .iter()
        .find_map(|k| str_at(r, &format!("/{k}")))
        .map(|s| s.trim_start_matches("refs/heads/").to_string())
        .unwrap_or_else(|| "main".into());
    if str_at(r, "/semver").is_some() {
        b.note(repo, "spec.ref.semver not mapped: plumb tracks a branch, a tag or a commit");
    }
    if repo.pointer("/spec/secretRef").is_some() {
        b.note(repo, "spec.secretRef: give plumb the credentials as tokenFile/tokenSecretRef or sshKeyFile");
    }
    if repo.pointer("/spec/verify").is_some() {
        b.note(repo, "spec.verify: plumb's is verifyCommits (allowed_signers or an OpenPGP keyring)");
    }
    Some((b.repository(url), revision))
}

/// Flux's reconciling environment: automated, selfHeal, `prune` as the object says,
/// its interval.
fn flux_environment(b: &mut Builder, obj: &Value, prune: bool) -> String {
    let mut env = Map::new();
    let mut sync = json!({"automated": true, "selfHeal": true});
    if prune {
        sync["prune"] = json!(true);
    }
    env.insert("syncPolicy".into(), sync);
    if let Some(interval) = str_at(obj, "/spec/interval").and_then(go_duration_seconds) {
        env.insert("reconcileInterval".into(), json!(interval));
    }
    b.environment("flux", Value::Object(env))
}

/// A Go duration (`5m`, `1h30m`, `90s`) in seconds.
fn go_duration_seconds(text: &str) -> Option<u64> {
    let (mut total, mut number) = (0u64, String::new());
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().ok()?;
        number.clear();
        total += n * match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
    }
    (number.is_empty() && total > 0).then_some(total)
}

fn flux_kustomization(b: &mut Builder, k: &Value, git: &BTreeMap<String, &Value>) {
    let spec = &k["spec"];
    if str_at(spec, "/sourceRef/kind") != Some("GitRepository") {
        b.note(k, "sourceRef is not a GitRepository (an OCIRepository or Bucket): skipped");
        return;
    }
    let Some((repository, revision)) = flux_git(b, k, git, str_at(spec, "/sourceRef/name").unwrap_or_default()) else {
        return;
    };
    let Some(namespace) = str_at(spec, "/targetNamespace").or_else(|| str_at(k, "/metadata/namespace")) else {
        b.note(k, "no spec.targetNamespace nor metadata.namespace (plumb needs one): skipped");
        return;
    };
    let environment = flux_environment(b, k, spec["prune"].as_bool() == Some(true));
    let path = str_at(spec, "/path").unwrap_or("./").trim_start_matches("./").trim_end_matches('/');
    let mut app = json!({
        "name": dns_label(str_at(k, "/metadata/name").unwrap_or("app"), "app"),
        "repository": repository, "revision": revision, "path": if path.is_empty() { "." } else { path },
        "namespace": namespace, "environment": environment,
    });
    let depends: Vec<String> = spec["dependsOn"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| str_at(d, "/name"))
        .map(|n| dns_label(n, "app"))
        .collect();
    if !depends.is_empty() {
        app["dependsOn"] = json!(depends);
    }
    if let Some(images) = spec["images"].as_array().filter(|i| !i.is_empty()) {
        app["source"] = json!({"images": images});
    }
    for field in ["postBuild", "patches", "components", "decryption", "healthChecks", "wait", "suspend", "kubeConfig"] {
        if spec.get(field).is_some() {
            b.note(k, format!("spec.{field} not mapped"));
        }
    }
    b.applications.push(app);
}

fn flux_helm_release(
    b: &mut Builder,
    h: &Value,
    git: &BTreeMap<String, &Value>,
    helm_repos: &BTreeMap<String, &Value>,
) {
    let spec = &h["spec"];
    let chart = &spec["chart"]["spec"];
    let Some(name) = str_at(chart, "/chart") else {
        b.note(h, "no spec.chart.spec.chart (chartRef is not imported): skipped");
        return;
    };
    let Some(namespace) = str_at(spec, "/targetNamespace").or_else(|| str_at(h, "/metadata/namespace")) else {
        b.note(h, "no namespace: skipped");
        return;
    };
    let source_name = str_at(chart, "/sourceRef/name").unwrap_or_default();
    let environment = flux_environment(b, h, true);
    let mut app = json!({
        "name": dns_label(str_at(h, "/metadata/name").unwrap_or("app"), "app"),
        "namespace": namespace, "environment": environment,
    });
    let mut src = Map::new();
    match str_at(chart, "/sourceRef/kind") {
        Some("GitRepository") => {
            let Some((repository, revision)) = flux_git(b, h, git, source_name) else { return };
            app["repository"] = json!(repository);
            app["revision"] = json!(revision);
            app["path"] = json!(name.trim_start_matches("./").trim_end_matches('/'));
        }
        Some("HelmRepository") => {
            let url = helm_repos.get(source_name).and_then(|r| str_at(r, "/spec/url")).unwrap_or("?");
            let version = str_at(chart, "/version").unwrap_or("*");
            b.note(
                h,
                format!(
                    "a chart from the HelmRepository {source_name} ({url}): not imported (plumb reads a chart's value \
                     files from a Git repository of the policy); declare it with `source: {{chart: {{repository: \
                     {url}, name: {name}, version: '{version}'}}}}` and a `repository` and `path` for its values"
                ),
            );
            return;
        }
        _ => {
            b.note(h, "chart sourceRef is neither a GitRepository nor a HelmRepository: skipped");
            return;
        }
    }
    if let Some(r) = str_at(spec, "/releaseName") {
        src.insert("releaseName".into(), json!(r));
    }
    if let Some(v) = spec.get("values").filter(|v| v.is_object()) {
        src.insert("values".into(), v.clone());
    }
    for field in
        ["valuesFrom", "postRenderers", "install", "upgrade", "test", "rollback", "uninstall", "dependsOn", "suspend"]
    {
        if spec.get(field).is_some() {
            b.note(h, format!("spec.{field} not mapped"));
        }
    }
    if !src.is_empty() {
        app["source"] = Value::Object(src);
    }
    b.applications.push(app);
}

#[cfg(test)]
mod tests;
