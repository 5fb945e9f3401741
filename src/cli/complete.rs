//! Shell completion with application names: `plumb completion SHELL` prints a script
//! that asks plumb itself for each completion (clap_complete's dynamic completion: the
//! shell runs `COMPLETE=SHELL plumb -- WORDS…`), so subcommands, flags and the names
//! of applications complete alike.
//!
//! An application name completes from the policy file when the command line (or
//! `PLUMB_CONFIG`) names one (`-c FILE`), else from the `Application` resources in
//! plumb's namespace (`-n`, `PLUMB_NAMESPACE`, else `plumb-system`) read with the
//! kubeconfig (`--kubeconfig`, `--context`) — at most [`CLUSTER_TIMEOUT`], so a cluster
//! out of reach (or a credential plugin that waits) costs the shell a short wait and no
//! names, never an error.

use std::{ffi::OsStr, path::PathBuf, time::Duration};

use clap_complete::engine::CompletionCandidate;

/// Longest wait for the cluster's answer while completing (2 s).
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the names come from, as the words being completed say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// `-c` / `--config`.
    pub config: Option<PathBuf>,
    /// `-n` / `--namespace`.
    pub namespace: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
}

/// The scope the words of a command line give (`--flag value` and `--flag=value`; the
/// word being completed may be among them).
pub fn scope<S: AsRef<OsStr>>(words: &[S]) -> Scope {
    let words: Vec<String> = words.iter().map(|w| w.as_ref().to_string_lossy().into_owned()).collect();
    let mut s = Scope::default();
    for (i, w) in words.iter().enumerate() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (w.as_str(), None),
        };
        let Some(value) = inline.or_else(|| words.get(i + 1).cloned()) else { continue };
        match flag {
            "-c" | "--config" => s.config = Some(value.into()),
            "-n" | "--namespace" => s.namespace = Some(value),
            "--kubeconfig" => s.kubeconfig = Some(value.into()),
            "--context" => s.context = Some(value),
            _ => {}
        }
    }
    s
}

/// The names of `names` that start with `current`, sorted, each once.
pub fn matching(mut names: Vec<String>, current: &str) -> Vec<String> {
    names.retain(|n| n.starts_with(current));
    names.sort();
    names.dedup();
    names
}

/// The application names that complete `current` (see the module docs); none when
/// neither the policy nor the cluster can be read.
pub fn app_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let mut s = scope(&std::env::args_os().collect::<Vec<_>>());
    s.config = s.config.or_else(|| std::env::var_os("PLUMB_CONFIG").map(PathBuf::from));
    s.namespace = s.namespace.or_else(|| std::env::var("PLUMB_NAMESPACE").ok());
    let names = match &s.config {
        // a regular file of a policy's size: never a FIFO or a device to block on
        Some(file) if std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.len() <= MAX_POLICY_BYTES) => {
            crate::config::load_without_secrets(file)
                .map(|c| c.applications.iter().map(|a| a.name.value.clone()).collect())
                .unwrap_or_default()
        }
        Some(_) => vec![],
        None => from_cluster(&s),
    };
    matching(names, &current.to_string_lossy()).into_iter().map(CompletionCandidate::new).collect()
}

/// Largest policy file read for names (4 MiB).
pub const MAX_POLICY_BYTES: u64 = 4 << 20;

/// The names of the `Application` resources in the scope's namespace, within
/// [`CLUSTER_TIMEOUT`] (on a thread of its own, left behind when late: completion runs
/// before plumb's runtime, and a kubeconfig's credential plugin may block).
fn from_cluster(s: &Scope) -> Vec<String> {
    let s = s.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read_names(s));
    });
    rx.recv_timeout(CLUSTER_TIMEOUT).ok().flatten().unwrap_or_default()
}

/// The names of the `Application` resources the scope names (blocking).
fn read_names(s: Scope) -> Option<Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    rt.block_on(async {
        let client = crate::cluster::client_in(s.kubeconfig.as_deref(), s.context.as_deref()).await.ok()?;
        let ns = s.namespace.unwrap_or_else(|| super::read::DEFAULT_NAMESPACE.to_string());
        let store = crate::status::store::Store::new(client, &ns);
        let resources = store.list_resources().await.ok()?;
        Some(resources.into_iter().filter_map(|r| r.metadata.name).collect())
    })
}

/// The registration script of `shell`: it runs `COMPLETE=SHELL <this binary> -- WORDS…`
/// for every completion.
///
/// # Errors
/// Writing to `out`.
pub fn registration(shell: clap_complete::Shell, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let Some(completer) = shells.completer(&name) else {
        return Err(std::io::Error::other(format!("no dynamic completion for {name}")));
    };
    let bin = std::env::current_exe().map_or_else(|_| "plumb".to_string(), |p| p.to_string_lossy().into_owned());
    completer.write_registration("COMPLETE", "plumb", "plumb", &bin, out)
}

/// `plumb completion SHELL`: prints [`registration`].
///
/// # Errors
/// No dynamic completion for `shell`, or standard output is closed.
pub fn print(shell: clap_complete::Shell) -> anyhow::Result<std::process::ExitCode> {
    let mut script = Vec::new();
    registration(shell, &mut script)?;
    out!("{}", String::from_utf8_lossy(&script));
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_scope_follows_the_flags_of_the_command_line() {
        let s = scope(&["plumb", "--", "plumb", "sync", "-c", "p.yaml", "--context=lab", "-n", "ops", "w"]);
        assert_eq!(
            s,
            Scope {
                config: Some("p.yaml".into()),
                namespace: Some("ops".into()),
                kubeconfig: None,
                context: Some("lab".into())
            }
        );
        assert_eq!(scope(&["plumb", "get", "--kubeconfig", "k"]).kubeconfig, Some("k".into()));
        assert_eq!(scope(&["plumb", "get", "-c"]), Scope::default(), "a flag without its value");
    }

    #[test]
    fn names_that_start_with_the_word_sorted_once() {
        let names = vec!["web".into(), "api".into(), "web-canary".into(), "web".into()];
        assert_eq!(matching(names.clone(), "we"), ["web", "web-canary"]);
        assert_eq!(matching(names, ""), ["api", "web", "web-canary"]);
    }
}
