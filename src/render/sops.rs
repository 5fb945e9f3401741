//! SOPS-encrypted files of a plain YAML source: decrypted with the real `sops` binary
//! (age keys from a key file named in the policy, `source.sops.ageKeyFile`), sandboxed
//! ([`super::sandbox`]: no network, the key file's path its only added variable), one
//! run per encrypted file. Decrypted content stays in memory (the render cache); a
//! file that fails to decrypt fails the render naming it, and an encrypted file
//! without a key configured is an error too — never applied as it is.

use std::path::{Path, PathBuf};

use super::{
    Error,
    sandbox::{self, Limits},
};

/// Whether a file is SOPS-encrypted: named `*.sops.yaml`/`.yml`/`.json`, or carrying
/// SOPS's metadata (a top-level `sops:` mapping with a `mac`).
pub fn is_encrypted(path: &str, bytes: &[u8]) -> bool {
    if [".sops.yaml", ".sops.yml", ".sops.json"].iter().any(|s| path.ends_with(s)) {
        return true;
    }
    let text = String::from_utf8_lossy(bytes);
    let yaml = text.lines().any(|l| l.trim_end() == "sops:") && text.contains("    mac: ");
    let json = path.ends_with(".json") && text.contains("\"sops\":") && text.contains("\"mac\":");
    yaml || json
}

/// A located sops binary and the version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sops {
    /// The binary (absolute path).
    pub path: PathBuf,
    /// What `sops --version` prints first (e.g. `sops 3.13.3`).
    pub version: String,
}

impl Sops {
    /// Finds the binary (`configured`, else `$PLUMB_SOPS`, else `sops` on `PATH`) and
    /// asks its version (one child process).
    ///
    /// # Errors
    /// [`Error::Tool`] when it cannot be found or run.
    pub async fn locate(configured: Option<&Path>, limits: Limits) -> Result<Self, Error> {
        let args = ["--version", "--disable-version-check"];
        let (path, out) = sandbox::locate("sops", configured, &args, limits).await?;
        Ok(Self { path, version: out.lines().next().unwrap_or_default().trim().to_string() })
    }

    /// Decrypts the file `path` (repository path, for messages and its format) of
    /// content `bytes` with the age keys in `age_key_file`.
    ///
    /// # Errors
    /// [`Error::Decrypt`] naming the file, with sops's first lines of stderr.
    pub async fn decrypt(
        &self,
        path: &str,
        bytes: &[u8],
        age_key_file: &Path,
        limits: Limits,
    ) -> Result<Vec<u8>, Error> {
        let fail = |message: String| Error::Decrypt { file: path.to_string(), message };
        let dir = tempfile::tempdir().map_err(|e| fail(format!("temp dir: {e}")))?;
        let name = Path::new(path).file_name().map_or_else(|| "file.yaml".into(), |n| n.to_string_lossy().to_string());
        std::fs::write(dir.path().join(&name), bytes).map_err(|e| fail(e.to_string()))?;
        let key = age_key_file.to_string_lossy();
        let env = [("SOPS_AGE_KEY_FILE", key.as_ref())];
        sandbox::run_with_env(&self.path, &["--decrypt", "--disable-version-check", &name], dir.path(), &env, limits)
            .await
            .map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_files_are_recognised() {
        let enc = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData:\n    password: ENC[AES256_GCM,data:x,type:str]\nsops:\n    age:\n        - recipient: age1x\n    lastmodified: \"2026-01-01T00:00:00Z\"\n    mac: ENC[AES256_GCM,data:y,type:str]\n    version: 3.13.3\n";
        assert!(is_encrypted("app/db.yaml", enc.as_bytes()));
        assert!(is_encrypted("app/db.sops.yaml", b"a: 1\n"), "by name");
        assert!(is_encrypted("app/db.json", br#"{"data": {}, "sops": {"mac": "ENC[x]"}}"#));
        assert!(!is_encrypted("app/cm.yaml", b"apiVersion: v1\nkind: ConfigMap\ndata:\n  sops: \"no\"\n"));
        assert!(!is_encrypted("app/cm.yaml", b"sops:\n  note: a key of that name without a mac\n"));
    }
}
