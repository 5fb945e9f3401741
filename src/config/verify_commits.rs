//! `verifyCommits:` of an environment (or an application, replacing its environment's):
//! which keys may sign what plumb deploys (see [`crate::verify`]).
//!
//! ```yaml
//! verifyCommits:
//!   allowedSignersFile: /etc/plumb/allowed_signers   # Git's gpg.ssh.allowedSignersFile format
//!   openpgpKeyringFile: /etc/plumb/keyring.asc       # armored public keys (gpg --armor --export)
//!   # or allowedSignersRef / openpgpKeyringRef: {name, key}, a Secret in plumb's namespace
//!   mode: head    # head (default): the commit synced is signed by a trusted key
//!                 # tag: the revision is an annotated tag whose tag object is signed
//! ```
//!
//! Relative paths are resolved against the policy file's directory. An application's
//! `verifyCommits` replaces its environment's as a whole; it cannot turn verification off
//! where the environment asks for it (it must name keys too).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::SecretRef;
use crate::verify::{AllowedSigners, Keyring, MAX_KEY_FILE_BYTES, TrustedKeys};

/// `verifyCommits:` (see the module docs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyCommits {
    /// An allowed signers file (SSH keys; ssh-keygen(1) ALLOWED SIGNERS).
    #[serde(default)]
    pub allowed_signers_file: Option<Spanned<PathBuf>>,
    /// An armored OpenPGP keyring.
    #[serde(default)]
    pub openpgp_keyring_file: Option<Spanned<PathBuf>>,
    /// The allowed signers from a Secret instead of `allowedSignersFile`.
    #[serde(default)]
    pub allowed_signers_ref: Option<SecretRef>,
    /// The keyring from a Secret instead of `openpgpKeyringFile`.
    #[serde(default)]
    pub openpgp_keyring_ref: Option<SecretRef>,
    /// What must be signed (default `head`).
    #[serde(default)]
    pub mode: VerifyMode,
}

/// What `verifyCommits` requires to be signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// The commit to sync carries a signature by a trusted key (`git verify-commit`).
    #[default]
    Head,
    /// The application's revision is an annotated tag whose tag object carries a
    /// signature by a trusted key (`git verify-tag`); the commit it points at is synced.
    Tag,
}

impl VerifyMode {
    /// `head` or `tag`, as written in the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::Head => "head",
            VerifyMode::Tag => "tag",
        }
    }
}

impl VerifyCommits {
    /// Relative key file paths joined to `base` (the policy file's directory).
    pub(super) fn resolve(&mut self, base: &Path) {
        for p in [&mut self.allowed_signers_file, &mut self.openpgp_keyring_file].into_iter().flatten() {
            if p.value.is_relative() {
                p.value = base.join(&p.value);
            }
        }
    }

    /// What is wrong, each with the policy line it belongs to (0: the caller's line):
    /// no key source, a file given with its `…Ref`, and with `files`, a key file that
    /// cannot be read or has a bad line (named `file:line`).
    pub fn problems(&self, files: bool) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        let none = self.allowed_signers_file.is_none()
            && self.openpgp_keyring_file.is_none()
            && self.allowed_signers_ref.is_none()
            && self.openpgp_keyring_ref.is_none();
        if none {
            out.push((
                0,
                "verifyCommits names no keys: give allowedSignersFile, openpgpKeyringFile or their …Ref".into(),
            ));
        }
        if self.allowed_signers_file.is_some() && self.allowed_signers_ref.is_some() {
            out.push((0, "verifyCommits: allowedSignersFile and allowedSignersRef: give one".into()));
        }
        if self.openpgp_keyring_file.is_some() && self.openpgp_keyring_ref.is_some() {
            out.push((0, "verifyCommits: openpgpKeyringFile and openpgpKeyringRef: give one".into()));
        }
        if files {
            let line = |f: &Spanned<PathBuf>| f.referenced.line() as u32;
            if let Some(f) = &self.allowed_signers_file
                && let Err(e) = read_signers(&f.value)
            {
                out.push((line(f), format!("verifyCommits: {e}")));
            }
            if let Some(f) = &self.openpgp_keyring_file
                && let Err(e) = read_keyring(&f.value)
            {
                out.push((line(f), format!("verifyCommits: {e}")));
            }
        }
        out
    }

    /// Reads and parses the key files (after [`crate::secret_refs`] filled the files of
    /// the `…Ref`s).
    ///
    /// # Errors
    /// A message naming the file (and its line, for an allowed signers file) that cannot
    /// be read, is over [`MAX_KEY_FILE_BYTES`], or does not parse.
    pub fn trusted_keys(&self) -> Result<TrustedKeys, String> {
        let ssh = self.allowed_signers_file.as_ref().map(|f| read_signers(&f.value)).transpose()?;
        let openpgp = self.openpgp_keyring_file.as_ref().map(|f| read_keyring(&f.value)).transpose()?;
        Ok(TrustedKeys { ssh, openpgp })
    }
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_KEY_FILE_BYTES as u64 {
        return Err(format!("{}: {} bytes, over the limit of {MAX_KEY_FILE_BYTES}", path.display(), meta.len()));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// An allowed signers file, its bad line named `file:line: why`.
fn read_signers(path: &Path) -> Result<AllowedSigners, String> {
    let bytes = read_bounded(path)?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    AllowedSigners::parse(&text).map_err(|e| format!("{}:{}: {}", path.display(), e.line, e.why))
}

/// An armored keyring, its problem named `file: why`.
fn read_keyring(path: &Path) -> Result<Keyring, String> {
    Keyring::parse(&read_bounded(path)?).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::load_str;

    fn policy(verify: &str) -> String {
        format!(
            "repositories:\n  - {{name: fleet, url: https://git.example.com/fleet.git}}\nenvironments:\n  - name: prod\n    verifyCommits:\n{verify}applications:\n  - {{name: web, repository: fleet, path: web, namespace: web, environment: prod}}\n"
        )
    }

    #[test]
    fn key_files_resolve_against_the_policy_and_parse() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("signers"), include_str!("../verify/testdata/allowed_signers")).expect("write");
        std::fs::write(dir.path().join("ring.asc"), include_bytes!("../verify/testdata/keyring.asc")).expect("write");
        let text = policy("      allowedSignersFile: signers\n      openpgpKeyringFile: ring.asc\n      mode: tag\n");
        let config = load_str(&text, &dir.path().join("p.yaml"), dir.path()).expect("valid");
        let vc = config.environments[0].verify_commits.as_ref().expect("verifyCommits");
        assert_eq!(vc.mode, super::VerifyMode::Tag);
        assert_eq!(vc.allowed_signers_file.as_ref().map(|f| f.value.clone()), Some(dir.path().join("signers")));
        let keys = vc.trusted_keys().expect("keys");
        assert_eq!(keys.ssh.map(|s| s.signers.len()), Some(3));
        assert_eq!(keys.openpgp.map(|k| k.keys.len()), Some(3));
    }

    #[test]
    fn a_bad_key_line_is_named_with_its_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let signers = "# team\nada@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDZMrNrZR5GS3hn4Vo1JZSPX6lNyloRnWJMJrRhmtVzw\nbob ssh-ed25519 AAAAbroken\n";
        std::fs::write(dir.path().join("signers"), signers).expect("write");
        let text = policy("      allowedSignersFile: signers\n");
        let msg = load_str(&text, &dir.path().join("p.yaml"), dir.path()).expect_err("invalid").to_string();
        let want = format!(
            "p.yaml:6: environment `prod`: verifyCommits: {}:3: not a public key",
            dir.path().join("signers").display()
        );
        assert!(msg.contains(&want), "{msg}\nwanted {want}");
    }

    #[test]
    fn keys_are_required_and_a_file_excludes_its_ref() {
        let msg = load_str(&policy("      mode: head\n"), Path::new("p.yaml"), Path::new("/nowhere"))
            .expect_err("no keys")
            .to_string();
        assert!(msg.contains("p.yaml:4: environment `prod`: verifyCommits names no keys"), "{msg}");
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("p.yaml");
        let both = policy("      openpgpKeyringFile: /k.asc\n      openpgpKeyringRef: {name: s, key: k}\n");
        std::fs::write(&file, both).expect("write");
        let msg = crate::config::load_without_secrets(&file).expect_err("both").to_string();
        assert!(msg.contains("openpgpKeyringFile and openpgpKeyringRef: give one"), "{msg}");
        // Without checking files, a missing key file is no problem; a wrong mode always is.
        std::fs::write(&file, policy("      allowedSignersFile: /s\n")).expect("write");
        assert!(crate::config::load_without_secrets(&file).is_ok());
        std::fs::write(&file, policy("      allowedSignersFile: /s\n      mode: branch\n")).expect("write");
        let msg = crate::config::load_without_secrets(&file).expect_err("mode").to_string();
        assert!(msg.contains("p.yaml:7"), "{msg}");
    }
}
