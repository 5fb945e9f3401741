//! Repository secrets read from Kubernetes Secrets instead of files:
//! `webhookSecretRef`, `tokenSecretRef` and `sshKeySecretRef` (`{name, key}`, a Secret
//! in plumb's namespace, `settings.statusNamespace`), and an application's chart
//! credentials (`source.chart.passwordSecretRef`, `source.chart.tokenSecretRef`), and the
//! keys of `verifyCommits` (`allowedSignersRef`, `openpgpKeyringRef`), and the
//! addresses and keys of notification providers (`urlSecretRef`, `secretRef`,
//! `passwordSecretRef`).
//!
//! Before the policy is used, each referenced value is read through the API and written
//! to a file of its own (mode 0600) under the cache directory, and the matching
//! `…File` field points at it, so everything downstream reads files as before. `plumb
//! serve` reads the referenced Secrets again every policy-reload interval and restarts
//! its actors and listeners in place when one changed (as for a changed policy file):
//! a rotated token or webhook secret is used within seconds, without a restart.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use serde_saphyr::{Location, Spanned};

use crate::config::{Config, SecretRef};

/// The resourceVersion of each referenced Secret when read, by name.
pub type Versions = BTreeMap<String, String>;

/// A referenced Secret or key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API request failed (no such Secret, no right to read it).
    #[error("{repo}: {field} {namespace}/{name}: {source}")]
    Read {
        /// Who references it: ``repository `fleet` `` or ``application `web` ``.
        repo: String,
        /// `webhookSecretRef`, `tokenSecretRef` or `sshKeySecretRef`.
        field: &'static str,
        /// Namespace searched.
        namespace: String,
        /// Secret name.
        name: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Secret has no such key.
    #[error("{repo}: {field}: Secret {namespace}/{name} has no key `{key}`")]
    MissingKey {
        /// Who references it: ``repository `fleet` `` or ``application `web` ``.
        repo: String,
        /// `webhookSecretRef`, `tokenSecretRef` or `sshKeySecretRef`.
        field: &'static str,
        /// Namespace searched.
        namespace: String,
        /// Secret name.
        name: String,
        /// The key.
        key: String,
    },
    /// The file could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A reference, by its field name, and the file field it fills.
type Slot<'a> = (&'static str, &'a Option<SecretRef>, &'a mut Option<Spanned<PathBuf>>);

/// Whether `config` references any Secret.
pub fn any(config: &Config) -> bool {
    config
        .repositories
        .iter()
        .any(|r| r.webhook_secret_ref.is_some() || r.token_secret_ref.is_some() || r.ssh_key_secret_ref.is_some())
        || config
            .applications
            .iter()
            .filter_map(|a| a.source.chart.as_ref())
            .any(|c| c.password_secret_ref.is_some() || c.token_secret_ref.is_some())
        || verify_commits(config).any(|(_, v)| v.allowed_signers_ref.is_some() || v.openpgp_keyring_ref.is_some())
        || config
            .notifications
            .providers
            .iter()
            .any(|p| p.url_secret_ref.is_some() || p.secret_ref.is_some() || p.password_secret_ref.is_some())
}

/// Every `verifyCommits` of the policy with its owner's file-name prefix (`env-prod`,
/// `app-web`).
fn verify_commits(config: &Config) -> impl Iterator<Item = (String, &crate::config::VerifyCommits)> {
    let envs =
        config.environments.iter().filter_map(|e| Some((format!("env-{}", e.name.value), e.verify_commits.as_ref()?)));
    let apps =
        config.applications.iter().filter_map(|a| Some((format!("app-{}", a.name.value), a.verify_commits.as_ref()?)));
    envs.chain(apps)
}

/// Reads every Secret `config` references from its status namespace and writes each
/// value to `dir/<repository>-<field>` (mode 0600), setting the matching `…File`
/// field. Returns the resourceVersions read.
///
/// # Errors
/// [`Error`]: a Secret or key that cannot be read, a file that cannot be written.
pub async fn materialize(client: &Client, config: &mut Config, dir: &Path) -> Result<Versions, Error> {
    let namespace = config.settings.status_namespace.clone();
    let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let mut versions = Versions::new();
    std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.into(), source })?;
    for repo in &mut config.repositories {
        let name = repo.name.value.clone();
        let slots: [Slot<'_>; 3] = [
            ("webhookSecretRef", &repo.webhook_secret_ref, &mut repo.webhook_secret_file),
            ("tokenSecretRef", &repo.token_secret_ref, &mut repo.token_file),
            ("sshKeySecretRef", &repo.ssh_key_secret_ref, &mut repo.ssh_key_file),
        ];
        for (field, reference, file) in slots {
            let Some(r) = reference else { continue };
            let owner = format!("repository `{name}`");
            let (value, version) = read(&api, &namespace, &owner, field, r).await?;
            let path = dir.join(format!("{name}-{field}"));
            write_private(&path, &value).map_err(|source| Error::Write { path: path.clone(), source })?;
            versions.insert(r.name.clone(), version);
            *file = Some(Spanned::new(path, Location::UNKNOWN, Location::UNKNOWN));
        }
    }
    for app in &mut config.applications {
        let name = app.name.value.clone();
        let Some(chart) = app.source.chart.as_mut() else { continue };
        let slots = [
            ("source.chart.passwordSecretRef", &chart.password_secret_ref, &mut chart.password_file),
            ("source.chart.tokenSecretRef", &chart.token_secret_ref, &mut chart.token_file),
        ];
        for (field, reference, file) in slots {
            let Some(r) = reference else { continue };
            let (value, version) = read(&api, &namespace, &format!("application `{name}`"), field, r).await?;
            let path = dir.join(format!("app-{name}-{}", field.rsplit('.').next().unwrap_or(field)));
            write_private(&path, &value).map_err(|source| Error::Write { path: path.clone(), source })?;
            versions.insert(r.name.clone(), version);
            *file = Some(path);
        }
    }
    materialize_verify_commits(config, &api, (&namespace, dir), &mut versions).await?;
    for p in &mut config.notifications.providers {
        let owner = format!("notification provider `{}`", p.name.value);
        let slots: [Slot<'_>; 3] = [
            ("urlSecretRef", &p.url_secret_ref, &mut p.url_file),
            ("secretRef", &p.secret_ref, &mut p.secret_file),
            ("passwordSecretRef", &p.password_secret_ref, &mut p.password_file),
        ];
        for (field, reference, file) in slots {
            let Some(r) = reference else { continue };
            let (value, version) = read(&api, &namespace, &owner, field, r).await?;
            let path = dir.join(format!("notify-{}-{field}", p.name.value));
            write_private(&path, &value).map_err(|source| Error::Write { path: path.clone(), source })?;
            versions.insert(r.name.clone(), version);
            *file = Some(Spanned::new(path, Location::UNKNOWN, Location::UNKNOWN));
        }
    }
    Ok(versions)
}

/// The `allowedSignersRef` / `openpgpKeyringRef` of every `verifyCommits`, written to
/// `dir/<env-NAME|app-NAME>-<field>` and set as the matching `…File`.
async fn materialize_verify_commits(
    config: &mut Config,
    api: &Api<Secret>,
    (namespace, dir): (&str, &Path),
    versions: &mut Versions,
) -> Result<(), Error> {
    let envs = config
        .environments
        .iter_mut()
        .filter_map(|e| Some((format!("env-{}", e.name.value), e.verify_commits.as_mut()?)));
    let apps = config
        .applications
        .iter_mut()
        .filter_map(|a| Some((format!("app-{}", a.name.value), a.verify_commits.as_mut()?)));
    for (owner, vc) in envs.chain(apps).collect::<Vec<_>>() {
        let slots: [Slot<'_>; 2] = [
            ("verifyCommits.allowedSignersRef", &vc.allowed_signers_ref, &mut vc.allowed_signers_file),
            ("verifyCommits.openpgpKeyringRef", &vc.openpgp_keyring_ref, &mut vc.openpgp_keyring_file),
        ];
        for (field, reference, file) in slots {
            let Some(r) = reference else { continue };
            let (value, version) = read(api, namespace, &owner, field, r).await?;
            let path = dir.join(format!("{owner}-{}", field.rsplit('.').next().unwrap_or(field)));
            write_private(&path, &value).map_err(|source| Error::Write { path: path.clone(), source })?;
            versions.insert(r.name.clone(), version);
            *file = Some(Spanned::new(path, Location::UNKNOWN, Location::UNKNOWN));
        }
    }
    Ok(())
}

/// The value of `r` (a key of a Secret in `namespace`) referenced by `owner`'s `field`,
/// and the Secret's resourceVersion.
async fn read(
    api: &Api<Secret>,
    namespace: &str,
    owner: &str,
    field: &'static str,
    r: &SecretRef,
) -> Result<(Vec<u8>, String), Error> {
    let read = |source| Error::Read {
        repo: owner.to_string(),
        field,
        namespace: namespace.to_string(),
        name: r.name.clone(),
        source: Box::new(source),
    };
    let secret = api.get(&r.name).await.map_err(read)?;
    let value = secret.data.as_ref().and_then(|d| d.get(&r.key)).ok_or_else(|| Error::MissingKey {
        repo: owner.to_string(),
        field,
        namespace: namespace.to_string(),
        name: r.name.clone(),
        key: r.key.clone(),
    })?;
    Ok((value.0.clone(), secret.metadata.resource_version.clone().unwrap_or_default()))
}

/// Whether a Secret of `versions` (in `namespace`) changed or can no longer be read.
pub async fn changed(client: &Client, namespace: &str, versions: &Versions) -> bool {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for (name, version) in versions {
        match api.get(name).await {
            Ok(s) if s.metadata.resource_version.as_ref() == Some(version) => {}
            Ok(_) => {
                tracing::info!(secret = %name, "a referenced Secret changed: restarting with its new value");
                return true;
            }
            Err(e) => {
                tracing::warn!(secret = %name, "reading a referenced Secret: {e}");
            }
        }
    }
    false
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::{io::Write as _, os::unix::fs::OpenOptionsExt as _};
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
