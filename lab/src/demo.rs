//! `plumb-lab demo`: watch plumb keep a cluster equal to a Git repository.
//!
//! Starts a local control plane (unless `--kubeconfig` names a cluster), creates a Git
//! repository from `config/examples/` served over HTTP, installs a `post-receive` hook
//! that sends a Gitea-format signed webhook on every push, and runs `plumb serve`
//! against it with the dev policy (prune + selfHeal). It prints the webhook URL, where
//! to commit, and every change of revision, sync and health status.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use plumb::{cluster::Cluster, config, metrics::Metrics, reconcile::Context};

use crate::{ControlPlane, ControlPlaneOptions, GitServer, Repo};

/// Options of `plumb-lab demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Run against this cluster instead of starting a local control plane.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Address of plumb's HTTP server.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Working directory (repository, policy, secret); default `.plumb/demo`.
    #[arg(long, default_value = ".plumb/demo")]
    pub dir: PathBuf,
    /// Manifests to start the repository with.
    #[arg(long, default_value = "config/examples")]
    pub examples: PathBuf,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// Runs the demo until Ctrl-C (or `--seconds`).
///
/// # Errors
/// Control plane, Git or policy failures, with their cause.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir).with_context(|| format!("clean {}", args.dir.display()))?;
    }
    std::fs::create_dir_all(&args.dir)?;
    let dir = std::fs::canonicalize(&args.dir)?;

    let (control_plane, kubeconfig) = match &args.kubeconfig {
        Some(k) => (None, k.clone()),
        None => {
            println!("starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)…");
            let cp = tokio::task::spawn_blocking(|| ControlPlane::start(ControlPlaneOptions::default())).await??;
            let k = cp.kubeconfig.clone();
            (Some(cp), k)
        }
    };

    let repo = Repo::init(&dir, "fleet")?;
    copy_dir(&args.examples, &repo.work)?;
    let first = repo.commit("web: initial manifests (3 replicas, nginx 1.27.3)")?;
    let git = GitServer::start(&dir)?;
    let url = format!("{}/fleet.git", git.base);

    let secret = hex::encode(rand::random::<[u8; 16]>());
    let secret_file = dir.join("webhook-secret");
    std::fs::write(&secret_file, format!("{secret}\n"))?;
    let webhook = format!("http://{}/api/webhook", args.listen);
    install_hook(&repo, &url, &secret_file, &webhook)?;

    let policy = dir.join("plumb.yaml");
    // the kustomize overlay of config/examples, rendered by the kustomize that
    // `tools/testbins/build.sh kustomize` built
    let kustomize = crate::testbins_dir().join("kustomize/current/bin/kustomize");
    std::fs::write(
        &policy,
        format!(
            "settings:\n  renderTools: {{kustomize: {}}}\nrepositories:\n  - name: fleet\n    url: {url}\n    webhookSecretFile: webhook-secret\nenvironments:\n  - name: dev\n    syncPolicy: {{automated: true, prune: true, selfHeal: true, syncOptions: [CreateNamespace=true]}}\n    reconcileInterval: 30s\napplications:\n  - name: web\n    repository: fleet\n    revision: main\n    path: apps/web\n    namespace: gitops-lab\n    environment: dev\n  - name: web-prod\n    repository: fleet\n    revision: main\n    path: kustomize/web/overlays/prod\n    namespace: web-prod\n    environment: dev\n",
            kustomize.display()
        ),
    )?;
    let config = config::load(&policy)?;
    let cluster = Cluster::connect(Some(&kubeconfig)).await?;
    let ctx = Arc::new(
        Context::new(cluster, Arc::new(config), dir.join("mirrors"), Arc::new(Metrics::default())).with_watches(),
    );
    ctx.store.ensure_namespace().await?;
    let token = CancellationToken::new();
    let handle = plumb::serve::serve(ctx.clone(), args.listen, token.clone()).await?;

    println!();
    println!("plumb is serving the webhook on http://{}", handle.addr);
    println!(
        "  status API     : http://{}/api/v1/applications and /metrics (Authorization: Bearer <token>; `kubectl create token` for a ServiceAccount allowed to `get applications.plumb.dev` / `get /metrics`)",
        handle.internal_addr
    );
    println!("  Git repository : {url}  (first commit {})", &first[..7]);
    println!("  webhook        : POST {webhook}  (Gitea/GitHub signature, secret in {})", secret_file.display());
    println!("  kubeconfig     : {}", kubeconfig.display());
    println!("  policy         : {}", policy.display());
    println!();
    println!("Try it:");
    println!(
        "  cd {} && sed -i 's/1.27.3/1.27.4/' apps/web/deployment.yaml && git commit -qam 'web: bump nginx' && git push -q origin main",
        repo.work.display()
    );
    println!(
        "  kubectl --kubeconfig {} -n gitops-lab scale deployment web --replicas=5   # selfHeal sets it back to 3",
        kubeconfig.display()
    );
    println!(
        "  cd {} && sed -i 's/newTag: 2.0.0/newTag: 2.0.1/' kustomize/web/overlays/prod/kustomization.yaml && git commit -qam 'web-prod: 2.0.1' && git push -q origin main   # the kustomize overlay",
        repo.work.display()
    );
    println!();

    let stop = async {
        match args.seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::pin!(stop);
    // the last line printed per application
    let mut last = std::collections::HashMap::new();
    loop {
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        for s in ctx.statuses().await {
            let line = format!(
                "{}  revision {} \"{}\"  sync {}  health {}{}",
                s.app,
                &s.revision[..s.revision.len().min(7)],
                plumb::cli::output::sanitize(&s.subject),
                s.sync,
                s.health,
                s.conditions.first().map(|c| format!("  [{}: {}]", c.type_, c.message)).unwrap_or_default()
            );
            if last.get(&s.app) != Some(&line) {
                println!("{}  {line}", plumb::status::now());
                last.insert(s.app.clone(), line);
            }
        }
    }
    token.cancel();
    handle.tracker.wait().await;
    // stop the watches before the control plane goes away
    drop(ctx);
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(git);
    drop(control_plane);
    Ok(ExitCode::SUCCESS)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("examples {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A `post-receive` hook that POSTs a Gitea-format push, signed with the secret, to
/// plumb — what a forge does, with `curl` and `openssl`.
fn install_hook(repo: &Repo, url: &str, secret_file: &std::path::Path, webhook: &str) -> anyhow::Result<()> {
    let hook = repo.bare.join("hooks/post-receive");
    std::fs::write(
        &hook,
        format!(
            r#"#!/bin/sh
secret=$(head -n1 '{secret}')
while read old new ref; do
  body=$(printf '{{"ref":"%s","before":"%s","after":"%s","repository":{{"full_name":"lab/fleet","clone_url":"{url}"}},"head_commit":{{"id":"%s"}},"commits":[],"total_commits":0}}' "$ref" "$old" "$new" "$new")
  sig=$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret" | sed 's/^.* //')
  curl -s -o /dev/null -w 'webhook: HTTP %{{http_code}}\n' -H 'Content-Type: application/json' -H 'X-Gitea-Event: push' \
    -H "X-Gitea-Delivery: $(cat /proc/sys/kernel/random/uuid)" -H "X-Gitea-Signature: $sig" --data-binary "$body" '{webhook}' || true
done
"#,
            secret = secret_file.display()
        ),
    )?;
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(())
}
