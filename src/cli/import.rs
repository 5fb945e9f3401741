//! `plumb import`: the Argo CD and Flux objects of YAML files or of the live cluster
//! turned into a policy file ([`crate::import`] maps them; this reads them and prints).

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use kube::{
    Api,
    api::{DynamicObject, ListParams},
    discovery,
};

use super::output;

/// The kinds read from the cluster, `(group, kind)`: Argo CD's `AppProject` and
/// `Application`, Flux's `GitRepository`, `HelmRepository`, `Kustomization` and
/// `HelmRelease`. Each is listed in every namespace the kubeconfig's user may list,
/// at the version the API server prefers.
pub const CLUSTER_KINDS: [(&str, &str); 6] = [
    ("argoproj.io", "AppProject"),
    ("argoproj.io", "Application"),
    ("source.toolkit.fluxcd.io", "GitRepository"),
    ("source.toolkit.fluxcd.io", "HelmRepository"),
    ("kustomize.toolkit.fluxcd.io", "Kustomization"),
    ("helm.toolkit.fluxcd.io", "HelmRelease"),
];

/// Most objects read from the cluster (of all kinds together): a larger fleet is
/// imported from files, a part at a time.
pub const MAX_CLUSTER_OBJECTS: usize = 5000;

/// The objects of `files` (multi-document YAML; a `kind: …List` gives its items).
///
/// # Errors
/// A file that cannot be read or is no YAML, naming it.
pub fn from_files(files: &[PathBuf]) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut objects = vec![];
    for f in files {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let docs = serde_saphyr::from_multiple::<serde_json::Value>(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            match doc["items"].as_array() {
                Some(items) if doc["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                    objects.extend(items.iter().cloned());
                }
                _ => objects.push(doc),
            }
        }
    }
    Ok(objects)
}

/// The objects of [`CLUSTER_KINDS`] in the cluster `client` reaches, and a note per
/// kind the cluster does not serve (its API group is not installed).
///
/// # Errors
/// Discovery or a list failed for another reason than a missing group (the API
/// server's answer, e.g. 403 naming the resource), or more than
/// [`MAX_CLUSTER_OBJECTS`].
pub async fn from_cluster(client: kube::Client) -> anyhow::Result<(Vec<serde_json::Value>, Vec<String>)> {
    let (mut objects, mut missing) = (vec![], vec![]);
    for (group, kind) in CLUSTER_KINDS {
        let resource = match discovery::group(&client, group).await {
            Ok(g) => g.recommended_kind(kind).map(|(ar, _)| ar),
            Err(kube::Error::Discovery(_)) => None,
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(anyhow::anyhow!("discovering API group {group}: {e}")),
        };
        let Some(ar) = resource else {
            missing.push(format!("{kind}.{group}: not served by this cluster"));
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = tokio::time::timeout(LIST_TIMEOUT, api.list(&params))
                .await
                .map_err(|_| {
                    anyhow::anyhow!("listing {}.{group}: no answer in {} s", ar.plural, LIST_TIMEOUT.as_secs())
                })?
                .with_context(|| format!("listing {}.{group}", ar.plural))?;
            for mut o in page.items {
                // list items may leave out their type: the import keys on it
                o.types = Some(kube::api::TypeMeta { api_version: ar.api_version.clone(), kind: ar.kind.clone() });
                objects.push(serde_json::to_value(&o)?);
                if objects.len() > MAX_CLUSTER_OBJECTS {
                    anyhow::bail!(
                        "more than {MAX_CLUSTER_OBJECTS} Argo CD and Flux objects: import them from files, a part at a time"
                    );
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => params = params.continue_token(&c),
                None => break,
            }
        }
    }
    Ok((objects, missing))
}

/// Objects asked for per list request.
const PAGE: u32 = 500;

/// Longest wait for one page of a list (30 s).
const LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `note` on one line of a YAML comment: every control character (a line feed, a
/// carriage return, which also ends a YAML comment) becomes a space, so a value read
/// from Git or the cluster cannot add keys to the policy printed after it.
pub fn comment_line(note: &str) -> String {
    note.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// `plumb import`: the objects of `files`, or with `from_cluster` of the cluster `kube`
/// reaches (kinds it does not serve noted on standard error), printed as a policy.
///
/// # Errors
/// As [`from_files`], [`from_cluster`] and [`print`].
pub async fn run(kube: &super::KubeArgs, files: &[PathBuf], from_cluster: bool) -> anyhow::Result<ExitCode> {
    if !from_cluster {
        return print(&from_files(files)?, &format!("{} file(s)", files.len()));
    }
    let (objects, missing) = self::from_cluster(kube.client().await?).await?;
    for m in &missing {
        errln!("note: {m}");
    }
    print(&objects, "the cluster")
}

/// Prints the policy `objects` make (the notes on standard error and as comments);
/// `from` names where they came from for the error when none is an application.
///
/// # Errors
/// The policy cannot be written as YAML.
pub fn print(objects: &[serde_json::Value], from: &str) -> anyhow::Result<ExitCode> {
    let imported = crate::import::import(objects);
    let mut text = String::from("# made by `plumb import`; check it with `plumb validate`\n");
    for n in &imported.notes {
        errln!("not mapped: {}", output::sanitize(n));
        text.push_str(&format!("# not mapped: {}\n", comment_line(n)));
    }
    if imported.applications == 0 {
        errln!("error: no application to import in {from}");
        return Ok(ExitCode::from(1));
    }
    // the sections in the order people write them
    for section in ["repositories", "environments", "applications"] {
        text.push_str(&serde_saphyr::to_string(&serde_json::json!({section: imported.policy[section]}))?);
    }
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// A note quoting `x\rnotifications: …` stays one comment: a YAML reader sees no key.
    #[test]
    fn a_note_cannot_end_its_comment() {
        let note = "Application/argocd/web: syncOptions x\rnotifications: {providers: []} #\u{85}\n# b";
        let line = super::comment_line(note);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let yaml = format!("# not mapped: {line}\nrepositories: []\n");
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(v, serde_json::json!({"repositories": []}));
    }
}
