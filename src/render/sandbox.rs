//! Running a render tool as a child process, fenced in: a clean environment (only
//! `HOME` pointing at the working copy, an empty `PATH` — the system's when network is
//! allowed, for kustomize's `git` — and, without network, proxy variables pointing at a
//! closed local port, so Go's HTTP client cannot reach out), no
//! standard input, a time limit (the child is killed when it passes), an output size
//! limit, and the first lines of its standard error in the error, credentials in URLs
//! removed. This fences the tools plumb runs (kustomize, helm, sops: their own file
//! restrictions on, plugins off); it is not an OS sandbox — no namespaces or seccomp —
//! and a program that ignores proxy variables could still open a socket.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::io::AsyncReadExt;

/// How much a tool may do in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest run; the child is killed after it.
    pub timeout: Duration,
    /// Largest standard output, in bytes.
    pub max_output: usize,
    /// Whether the tool may use the network.
    pub network: bool,
}

/// How many lines of a tool's standard error an error keeps.
const STDERR_LINES: usize = 8;

/// Why a tool run failed; the message names the tool and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The tool could not be started.
    #[error("{command}: cannot start: {message}")]
    Start {
        /// Tool and arguments.
        command: String,
        /// The OS error.
        message: String,
    },
    /// The tool exited with an error.
    #[error("{command}: {status}: {stderr}")]
    Failed {
        /// Tool and arguments.
        command: String,
        /// Exit status.
        status: String,
        /// First lines of standard error, credentials removed.
        stderr: String,
    },
    /// The tool ran longer than the time limit and was killed.
    #[error("{command}: killed after {seconds} s (settings.renderTools.timeoutSeconds)")]
    Timeout {
        /// Tool and arguments.
        command: String,
        /// The limit, in seconds.
        seconds: u64,
    },
    /// The tool wrote more than the output limit and was killed.
    #[error("{command}: output larger than {limit} bytes (settings.renderTools.maxOutputBytes)")]
    TooLarge {
        /// Tool and arguments.
        command: String,
        /// The limit, in bytes.
        limit: usize,
    },
}

/// Finds the binary `name` (`configured`, else `$PLUMB_<NAME>`, else `name` on `PATH`)
/// and runs it with `version_args` (one child process): its path and what it printed.
///
/// # Errors
/// [`super::Error::Tool`] when it cannot be found or run.
pub async fn locate(
    name: &str,
    configured: Option<&Path>,
    version_args: &[&str],
    limits: Limits,
) -> Result<(PathBuf, String), super::Error> {
    let var = format!("PLUMB_{}", name.to_uppercase());
    let path = configured
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(&var).map(PathBuf::from))
        .or_else(|| std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file()))
        .ok_or_else(|| super::Error::Tool {
            message: format!("{name} not found: set settings.renderTools.{name} or {var}, or put it on PATH"),
        })?;
    let dir = tempfile::tempdir().map_err(|e| super::Error::Tool { message: format!("{name}: temp dir: {e}") })?;
    let out = run(&path, version_args, dir.path(), limits).await?;
    Ok((path, String::from_utf8_lossy(&out).into_owned()))
}

/// Runs `tool args` in `dir` within `limits`; returns its standard output.
///
/// # Errors
/// [`RunError`].
pub async fn run(tool: &Path, args: &[&str], dir: &Path, limits: Limits) -> Result<Vec<u8>, RunError> {
    run_with_env(tool, args, dir, &[], limits).await
}

/// [`run`] with `env` added to the clean environment (e.g. a key file's path).
///
/// # Errors
/// [`RunError`].
pub async fn run_with_env(
    tool: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    limits: Limits,
) -> Result<Vec<u8>, RunError> {
    let name = tool.file_name().map_or_else(|| tool.display().to_string(), |n| n.to_string_lossy().to_string());
    let command = std::iter::once(name.as_str()).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let mut cmd = tokio::process::Command::new(tool);
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        // with network (remote kustomize bases) the tool may need `git`; else nothing
        .env("PATH", if limits.network { "/usr/local/bin:/usr/bin:/bin" } else { "" })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.envs(env.iter().copied());
    if !limits.network {
        for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            cmd.env(var, "http://127.0.0.1:9");
        }
    }
    let mut child = cmd.spawn().map_err(|e| RunError::Start { command: command.clone(), message: e.to_string() })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RunError::Start { command, message: "no pipes".into() });
    };
    let work = async {
        let errors = tokio::spawn(async move {
            let mut err = Vec::new();
            let _ = stderr.take(64 * 1024).read_to_end(&mut err).await;
            err
        });
        let mut out = Vec::new();
        let limit = u64::try_from(limits.max_output).unwrap_or(u64::MAX).saturating_add(1);
        let read = stdout.take(limit).read_to_end(&mut out).await;
        if out.len() > limits.max_output {
            let _ = child.start_kill();
            return Err(RunError::TooLarge { command: command.clone(), limit: limits.max_output });
        }
        read.map_err(|e| RunError::Start { command: command.clone(), message: e.to_string() })?;
        let status =
            child.wait().await.map_err(|e| RunError::Start { command: command.clone(), message: e.to_string() })?;
        let err = errors.await.unwrap_or_default();
        if !status.success() {
            return Err(RunError::Failed {
                command: command.clone(),
                status: status.to_string(),
                stderr: first_lines(&err),
            });
        }
        Ok(out)
    };
    match tokio::time::timeout(limits.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(RunError::Timeout { command, seconds: limits.timeout.as_secs() }),
    }
}

/// The first [`STDERR_LINES`] non-empty lines of `stderr`, joined with ` | `, with
/// user info removed from every URL.
fn first_lines(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines().map(str::trim).filter(|l| !l.is_empty()).take(STDERR_LINES).map(redact).collect::<Vec<_>>().join(" | ")
}

/// `line` with `user:password@` removed from every `scheme://…` URL.
pub fn redact(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(|c: char| c.is_whitespace() || c == '/' || c == '"' || c == '\'').unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***@");
                out.push_str(&authority[at + 1..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_user_info() {
        assert_eq!(
            redact("fetch https://bob:s3cret@git.example.test/a.git failed; ssh://git@h/x ok"),
            "fetch https://***@git.example.test/a.git failed; ssh://***@h/x ok"
        );
        assert_eq!(redact("no url here"), "no url here");
        assert_eq!(first_lines(b"\n a \n\nb\n"), "a | b");
    }

    fn limits(secs: u64, max: usize) -> Limits {
        Limits { timeout: Duration::from_secs(secs), max_output: max, network: false }
    }

    /// The real `sh` (absolute path: the child's PATH is empty).
    #[tokio::test]
    async fn limits_and_clean_environment() {
        let sh = Path::new("/bin/sh");
        let dir = tempfile::tempdir().expect("tmp");
        let out = run(sh, &["-c", "echo \"$HOME|$PATH|$HTTPS_PROXY|$CARGO\""], dir.path(), limits(10, 1024))
            .await
            .expect("runs");
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(text, format!("{}||http://127.0.0.1:9|\n", dir.path().display()), "clean environment");
        let err = run(sh, &["-c", "echo 'bad https://u:p@h/x' >&2; exit 3"], dir.path(), limits(10, 1024)).await;
        assert_eq!(
            err.expect_err("fails").to_string(),
            "sh -c echo 'bad https://u:p@h/x' >&2; exit 3: exit status: 3: bad https://***@h/x"
        );
        let err = run(sh, &["-c", "while :; do :; done"], dir.path(), limits(1, 1024)).await.expect_err("timeout");
        assert!(matches!(err, RunError::Timeout { seconds: 1, .. }), "{err}");
        let err =
            run(sh, &["-c", "while :; do echo y; done"], dir.path(), limits(10, 4096)).await.expect_err("too large");
        assert!(matches!(err, RunError::TooLarge { limit: 4096, .. }), "{err}");
    }
}
