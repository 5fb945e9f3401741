//! Running a render tool as a child process, fenced in:
//!
//! - a clean environment: a fresh, empty `HOME` outside the working copy (a temporary
//!   directory removed after the run; Helm's `HELM_CONFIG_HOME`, `HELM_CACHE_HOME`,
//!   `HELM_DATA_HOME`, `HELM_PLUGINS` and the XDG directories under it,
//!   `HELM_NO_PLUGINS=1`), an empty `PATH` (the system's when network is allowed, for
//!   kustomize's `git`), no standard input;
//! - no network unless allowed: the child runs in a network namespace of its own
//!   (util-linux `unshare --net`, or `unshare --net --map-root-user` where plumb is not
//!   root), which has no interface but a loopback that is down — not even the host's
//!   loopback services are reachable. Which of the two works is probed once per process
//!   ([`isolation`]); where neither does (a container without the right to make
//!   namespaces) plumb says so at start-up and in every render's warnings and keeps
//!   only the proxy fence: proxy variables pointing at a closed local port, which Go
//!   does not use for loopback addresses;
//! - resource ceilings (util-linux `prlimit`, set before the tool's first instruction):
//!   `RLIMIT_DATA` (the memory the tool may allocate, `settings.renderTools.maxMemoryBytes`;
//!   Go's runtime reserves address space it never uses, so `RLIMIT_AS` would count
//!   what is not memory), `RLIMIT_CPU` (`cpuSeconds`; SIGXCPU then SIGKILL a second
//!   later) and `RLIMIT_FSIZE` (no file larger than the output limit);
//! - a time limit (the child is killed when it passes), an output size limit, and the
//!   first lines of its standard error in the error, credentials in URLs removed.
//!
//! It is no seccomp sandbox: the tool reads what the OS lets plumb's user read, which is
//! why the working copy holds only the application's inputs
//! ([`crate::source::Mirror::export`]) and the tools run with their own file
//! restrictions on (kustomize's `LoadRestrictionsRootOnly`).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
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
    /// Most memory the tool may allocate (`RLIMIT_DATA`), in bytes; 0: no ceiling.
    pub max_memory: u64,
    /// Most CPU time the tool may use (`RLIMIT_CPU`), in seconds; 0: no budget.
    pub cpu_seconds: u64,
}

impl Default for Limits {
    /// The defaults of `settings.renderTools`, without network.
    fn default() -> Self {
        let t = crate::config::RenderTools::default();
        Self {
            timeout: Duration::from_secs(t.timeout_seconds),
            max_output: t.max_output_bytes,
            network: false,
            max_memory: t.max_memory_bytes,
            cpu_seconds: t.cpu_seconds,
        }
    }
}

/// How a tool's child process is contained on this machine, probed once per process
/// ([`isolation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolation {
    /// The command that puts a child in a network namespace of its own
    /// (`[/usr/bin/unshare, --net]`, with `--map-root-user` where needed); `None`
    /// where no namespace can be made.
    pub no_network: Option<Vec<String>>,
    /// util-linux `prlimit`, which sets the child's rlimits; `None` when missing.
    pub prlimit: Option<PathBuf>,
}

impl Isolation {
    /// What is missing, as a sentence for the start-up log and a render's warnings;
    /// `None` when the child is fully contained.
    pub fn missing(&self) -> Option<String> {
        let mut gaps = Vec::new();
        if self.no_network.is_none() {
            gaps.push(
                "no network namespace can be made here (util-linux `unshare --net` and `unshare --net --map-root-user` both fail): render tools are kept off the network by proxy variables only, which do not cover loopback addresses"
                    .to_string(),
            );
        }
        if self.prlimit.is_none() {
            gaps.push(
                "util-linux `prlimit` is not installed: render tools run without a memory ceiling or CPU budget"
                    .to_string(),
            );
        }
        (!gaps.is_empty()).then(|| gaps.join("; "))
    }

    /// The command line that runs `tool args` within `limits` under this isolation.
    fn wrap(&self, tool: &Path, args: &[&str], limits: Limits) -> (PathBuf, Vec<String>) {
        let mut line: Vec<String> = Vec::new();
        if !limits.network
            && let Some(ns) = &self.no_network
        {
            line.extend(ns.iter().cloned());
            line.push("--".into());
        }
        if let Some(prlimit) = &self.prlimit {
            line.push(prlimit.display().to_string());
            if limits.max_memory > 0 {
                line.push(format!("--data={}", limits.max_memory));
            }
            if limits.cpu_seconds > 0 {
                line.push(format!("--cpu={}:{}", limits.cpu_seconds, limits.cpu_seconds + 1));
            }
            line.push(format!("--fsize={}", limits.max_output));
            line.push("--".into());
        }
        line.push(tool.display().to_string());
        line.extend(args.iter().map(|a| (*a).to_string()));
        let program = PathBuf::from(line.remove(0));
        (program, line)
    }
}

/// Where util-linux's binaries are looked for (besides `PATH`).
const SYSTEM_DIRS: [&str; 5] = ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"];

/// The system binary `name` (in [`SYSTEM_DIRS`] or on plumb's `PATH`).
fn system_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    SYSTEM_DIRS.iter().map(PathBuf::from).chain(path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// This machine's [`Isolation`], probed on first use (at most two short child
/// processes: `unshare --net`, then `unshare --net --map-root-user`, each running
/// `unshare --version`).
pub fn isolation() -> &'static Isolation {
    static PROBED: OnceLock<Isolation> = OnceLock::new();
    PROBED.get_or_init(|| {
        let prlimit = system_binary("prlimit");
        let no_network = system_binary("unshare").and_then(|unshare| {
            let u = unshare.display().to_string();
            [vec![u.clone(), "--net".to_string()], vec![u.clone(), "--net".into(), "--map-root-user".into()]]
                .into_iter()
                .find(|prefix| {
                    std::process::Command::new(&prefix[0])
                        .args(&prefix[1..])
                        .args(["--", &u, "--version"])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
        });
        Isolation { no_network, prlimit }
    })
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
    /// The tool reached its memory ceiling or CPU budget and died there.
    #[error("{command}: {what}")]
    Ceiling {
        /// Tool and arguments.
        command: String,
        /// Which ceiling, and the setting.
        what: String,
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

/// The variables of the tool's fresh home `home`: `HOME`, the XDG directories and
/// Helm's, all under it, plugins off.
fn home_env(home: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut vars = vec![("HOME", home.to_path_buf())];
    for (var, sub) in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
        ("HELM_CONFIG_HOME", ".config/helm"),
        ("HELM_CACHE_HOME", ".cache/helm"),
        ("HELM_DATA_HOME", ".local/share/helm"),
        ("HELM_PLUGINS", ".local/share/helm/plugins"),
        ("KUSTOMIZE_PLUGIN_HOME", ".config/kustomize/plugin"),
    ] {
        vars.push((var, home.join(sub)));
    }
    vars
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
    // the wrappers would report a missing tool as their own exit status
    if let Err(e) = std::fs::metadata(tool) {
        return Err(RunError::Start { command, message: e.to_string() });
    }
    let home = tempfile::Builder::new()
        .prefix("plumb-tool-home-")
        .tempdir()
        .map_err(|e| RunError::Start { command: command.clone(), message: format!("home directory: {e}") })?;
    let (program, line) = isolation().wrap(tool, args, limits);
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&line)
        .current_dir(dir)
        .env_clear()
        .envs(home_env(home.path()))
        .env("HELM_NO_PLUGINS", "1")
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
            if let Some(what) = ceiling(status, &err, limits) {
                return Err(RunError::Ceiling { command: command.clone(), what });
            }
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

/// Which ceiling of `limits` a child that ended with `status` and standard error
/// `stderr` died at, if any: SIGXCPU or SIGKILL (plumb kills only on its own time and
/// output limits, reported before this) is the CPU budget; a Go runtime's "out of
/// memory" (or an allocation failure) is the memory ceiling.
fn ceiling(status: std::process::ExitStatus, stderr: &[u8], limits: Limits) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    const SIGKILL: i32 = 9;
    const SIGXCPU: i32 = 24;
    if limits.cpu_seconds > 0 && matches!(status.signal(), Some(SIGXCPU | SIGKILL)) {
        return Some(format!("killed at its CPU budget of {} s (settings.renderTools.cpuSeconds)", limits.cpu_seconds));
    }
    let text = String::from_utf8_lossy(&stderr[..stderr.len().min(4096)]).to_ascii_lowercase();
    let oom = ["out of memory", "cannot allocate memory", "memory allocation failed"].iter().any(|w| text.contains(w));
    (limits.max_memory > 0 && oom).then(|| {
        format!("died at its memory ceiling of {} bytes (settings.renderTools.maxMemoryBytes)", limits.max_memory)
    })
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
        Limits { timeout: Duration::from_secs(secs), max_output: max, network: false, max_memory: 0, cpu_seconds: 0 }
    }

    /// The real `sh` (absolute path: the child's PATH is empty).
    #[tokio::test]
    async fn limits_and_clean_environment() {
        let sh = Path::new("/bin/sh");
        let dir = tempfile::tempdir().expect("tmp");
        let out = run(
            sh,
            &["-c", "echo \"$PATH|$HTTPS_PROXY|$CARGO|$HELM_NO_PLUGINS\"; echo \"$HOME\"; echo \"$HELM_PLUGINS\"; /bin/ls -A \"$HOME\" | /usr/bin/wc -l"],
            dir.path(),
            limits(10, 1024),
        )
        .await
        .expect("runs");
        let text = String::from_utf8(out).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "|http://127.0.0.1:9||1", "clean environment: {text}");
        let home = Path::new(lines[1]);
        assert!(home.is_absolute() && !home.starts_with(dir.path()), "HOME outside the working copy: {text}");
        assert!(!home.exists(), "HOME removed after the run: {text}");
        assert_eq!(lines[2], home.join(".local/share/helm/plugins").display().to_string());
        assert_eq!(lines[3].trim(), "0", "HOME starts empty");
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

    /// The child runs under its memory ceiling and CPU budget (read back from the
    /// kernel), and a loop dies at the budget, not at the time limit.
    #[tokio::test]
    async fn the_child_has_a_memory_ceiling_and_a_cpu_budget() {
        assert!(isolation().prlimit.is_some(), "util-linux prlimit is part of the test machine");
        let dir = tempfile::tempdir().expect("tmp");
        let l = Limits { max_memory: 256 * 1024 * 1024, cpu_seconds: 1, ..limits(30, 1 << 20) };
        let out = run(Path::new("/bin/cat"), &["/proc/self/limits"], dir.path(), l).await.expect("runs");
        let text = String::from_utf8(out).expect("utf8");
        let row = |name: &str| {
            text.lines().find(|l| l.starts_with(name)).map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        assert_eq!(row("Max data size").as_deref(), Some("Max data size 268435456 268435456 bytes"), "{text}");
        assert_eq!(row("Max cpu time").as_deref(), Some("Max cpu time 1 2 seconds"), "{text}");
        let started = std::time::Instant::now();
        let err = run(Path::new("/bin/sh"), &["-c", "while :; do :; done"], dir.path(), l).await.expect_err("dies");
        assert_eq!(
            err.to_string(),
            "sh -c while :; do :; done: killed at its CPU budget of 1 s (settings.renderTools.cpuSeconds)"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "not at the time limit");
    }

    /// Without network the child is in a network namespace of its own: a connection
    /// to a listener on the host's loopback fails and the listener sees none.
    #[tokio::test]
    async fn the_child_cannot_reach_the_host_s_loopback() {
        assert!(isolation().no_network.is_some(), "the test machine can make network namespaces");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let dir = tempfile::tempdir().expect("tmp");
        let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
        let bash = Path::new("/usr/bin/bash");
        let err = run(bash, &["-c", &script], dir.path(), limits(10, 1024)).await.expect_err("no connection");
        assert!(err.to_string().contains("exit status: 1"), "{err}");
        assert!(listener.accept().is_err(), "the listener saw a connection");
        // the same run with network allowed connects: the check can fail
        let out = run(bash, &["-c", &script], dir.path(), Limits { network: true, ..limits(10, 1024) }).await;
        assert_eq!(out.expect("connects"), b"connected\n");
        assert!(listener.accept().is_ok(), "the listener saw the allowed connection");
    }
}
