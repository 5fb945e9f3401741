//! Reading policy files and the secret files they point at.

use std::path::{Path, PathBuf};

use super::Config;

/// Why a policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// The policy file.
        file: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not parse or does not fit the model (unknown key, wrong type).
    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        /// The policy file.
        file: PathBuf,
        /// 1-based line (0 when unknown).
        line: u32,
        /// 1-based column (0 when unknown).
        column: u32,
        /// The parser's message.
        message: String,
    },
    /// The file parsed but has problems; every one is listed, one per line.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Each problem with its location.
        problems: Vec<super::Problem>,
    },
}

/// Reads, parses and validates the policy file at `file`.
///
/// # Errors
/// [`Error::Read`], [`Error::Parse`] (with line and column) or [`Error::Invalid`] listing
/// every problem found, each as `file:line: message`.
pub fn load(file: &Path) -> Result<Config, Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Read { file: file.into(), source })?;
    let base = file.parent().unwrap_or(Path::new("."));
    load_str(&text, file, base)
}

/// Parses and validates policy text; `file` names it in errors and relative secret
/// paths are resolved against `base`.
///
/// # Errors
/// As [`load`].
pub fn load_str(text: &str, file: &Path, base: &Path) -> Result<Config, Error> {
    load_checked(text, file, base, true)
}

/// [`load`] without checking that the secret files exist ([`super::validate_with`]):
/// for commands that never read them (`diff`, `render`, `sync --dry-run`, the read
/// commands given a policy); a fetch that needs a missing credential fails then,
/// naming it.
///
/// # Errors
/// As [`load`].
pub fn load_without_secrets(file: &Path) -> Result<Config, Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Read { file: file.into(), source })?;
    load_checked(&text, file, file.parent().unwrap_or(Path::new(".")), false)
}

fn load_checked(text: &str, file: &Path, base: &Path, files: bool) -> Result<Config, Error> {
    let mut config: Config = serde_saphyr::from_str(text).map_err(|e| {
        let loc = e.location();
        Error::Parse {
            file: file.into(),
            line: loc.map_or(0, |l| l.line() as u32),
            column: loc.map_or(0, |l| l.column() as u32),
            message: without_position(&first_line(&e.to_string())),
        }
    })?;
    config.file = file.into();
    config.digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()));
    for repo in &mut config.repositories {
        for p in
            [&mut repo.webhook_secret_file, &mut repo.token_file, &mut repo.ssh_key_file, &mut repo.known_hosts_file]
                .into_iter()
                .flatten()
        {
            if p.value.is_relative() {
                p.value = base.join(&p.value);
            }
        }
        if let Some(cs) = &mut repo.commit_status
            && cs.token_file.value.is_relative()
        {
            cs.token_file.value = base.join(&cs.token_file.value);
        }
    }
    config.notifications.resolve(base);
    for vc in config.environments.iter_mut().filter_map(|e| e.verify_commits.as_mut()) {
        vc.resolve(base);
    }
    let templates = config.application_sets.iter_mut().map(|s| &mut s.template);
    for app in config.applications.iter_mut().chain(templates) {
        resolve_files(app, base);
    }
    // `list` sets now; `directories` sets need their repository (see super::generators)
    let expansion = super::generators::expand_into(&mut config, &Default::default(), &Default::default());
    let mut problems = expansion.problems;
    problems.extend(super::validate_with(&config, files));
    if problems.is_empty() { Ok(config) } else { Err(Error::Invalid { problems }) }
}

/// Makes the files application `app` names (SOPS key, chart credentials and keyrings,
/// verifyCommits keys) relative to `base` when they are relative.
fn resolve_files(app: &mut super::Application, base: &Path) {
    if let Some(vc) = app.verify_commits.as_mut() {
        vc.resolve(base);
    }
    if let Some(keys) = &mut app.source.sops
        && keys.age_key_file.is_relative()
    {
        keys.age_key_file = base.join(&keys.age_key_file);
    }
    // chart credentials and keyrings are files of the policy too
    if let Some(c) = app.source.chart.as_mut() {
        for p in [&mut c.password_file, &mut c.token_file, &mut c.keyring_file].into_iter().flatten() {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// Reads a secret file: its bytes exactly, except that **one** trailing newline
/// (`\n` or `\r\n`) is stripped, since editors and `echo` add one.
///
/// # Errors
/// The IO error of reading the file.
pub fn read_secret(file: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = std::fs::read(file)?;
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.truncate(bytes.len() - 1);
    }
    Ok(bytes)
}

/// A parser message without its own "error: line N column M: " prefix (the error
/// already says `file:line:column`).
fn without_position(message: &str) -> String {
    let m = message.strip_prefix("error: ").unwrap_or(message);
    match m.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((pos, rest)) if pos.contains(" column ") => rest.to_string(),
        _ => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_strips_exactly_one_trailing_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (content, want) in [
            (&b"s3cr3t"[..], &b"s3cr3t"[..]),
            (b"s3cr3t\n", b"s3cr3t"),
            (b"s3cr3t\r\n", b"s3cr3t"),
            (b"s3cr3t\n\n", b"s3cr3t\n"),
            (b" s3cr3t \n", b" s3cr3t "),
        ] {
            let f = dir.path().join("s");
            std::fs::write(&f, content).expect("write");
            assert_eq!(read_secret(&f).expect("read"), want);
        }
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let text = "repositories: []\napplications: []\nenvironmnts: []\n";
        let err = load_str(text, Path::new("p.yaml"), Path::new(".")).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.starts_with("p.yaml:3:"), "{msg}");
        assert!(msg.contains("environmnts"), "{msg}");
    }

    #[test]
    fn max_pause_is_a_duration_defaulting_to_seven_days() {
        let text =
            "repositories: []\napplications: []\nenvironments:\n  - name: prod\n    maxPause: 12h\n  - name: dev\n";
        let config = load_str(text, Path::new("p.yaml"), Path::new(".")).expect("valid");
        let pauses: Vec<u64> = config.environments.iter().map(|e| e.max_pause().as_secs()).collect();
        assert_eq!(pauses, [12 * 3600, 7 * 24 * 3600]);
        let bad = "repositories: []\napplications: []\nenvironments:\n  - name: prod\n    maxPause: forever\n";
        let msg = load_str(bad, Path::new("p.yaml"), Path::new(".")).expect_err("must fail").to_string();
        assert!(msg.contains("p.yaml:5") && msg.contains("`forever` is not a duration"), "{msg}");
    }

    #[test]
    fn take_over_managers_name_other_tools() {
        let text = "repositories: []\napplications: []\nenvironments:\n  - name: dev\n    syncPolicy: {takeOverManagers: [k9s, plumb]}\n";
        let err = load_str(text, Path::new("p.yaml"), Path::new(".")).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("p.yaml:4") && msg.contains("`plumb` is not another tool's field manager"), "{msg}");
        assert!(!msg.contains("k9s"), "{msg}");
        let ok = "repositories: []\napplications: []\nenvironments:\n  - name: dev\n    syncPolicy: {takeOverManagers: [k9s]}\n";
        let config = load_str(ok, Path::new("p.yaml"), Path::new(".")).expect("valid");
        assert_eq!(config.environments[0].sync_policy.take_over_managers, ["k9s"]);
    }
}
