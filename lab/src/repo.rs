//! A bare repository with a work tree to commit into (for tests and the demo).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// A bare repository `<root>/<name>.git` and its work tree `<root>/<name>-work`.
pub struct Repo {
    /// The bare repository (what the Git server serves).
    pub bare: PathBuf,
    /// The work tree (commit here, then [`Repo::commit`] pushes).
    pub work: PathBuf,
}

impl Repo {
    /// Creates both, with branch `main`.
    ///
    /// # Errors
    /// When git fails.
    pub fn init(root: &Path, name: &str) -> anyhow::Result<Self> {
        let bare = root.join(format!("{name}.git"));
        let work = root.join(format!("{name}-work"));
        std::fs::create_dir_all(&work)?;
        git(root, &["init", "-q", "--bare", "-b", "main", &bare.display().to_string()])?;
        git(&work, &["init", "-q", "-b", "main"])?;
        git(&work, &["remote", "add", "origin", &bare.display().to_string()])?;
        Ok(Self { bare, work })
    }

    /// Points `origin` at `url` (e.g. a forge's clone URL carrying a token as the
    /// basic-auth password); later [`Repo::commit`]s push there instead of the bare
    /// repository.
    ///
    /// # Errors
    /// When git fails.
    pub fn set_origin(&self, url: &str) -> anyhow::Result<()> {
        git(&self.work, &["remote", "set-url", "origin", url])
    }

    /// Writes `path` (relative to the work tree) with `content`.
    ///
    /// # Errors
    /// IO errors.
    pub fn write(&self, path: &str, content: &str) -> anyhow::Result<()> {
        let p = self.work.join(path);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&p, content).with_context(|| p.display().to_string())
    }

    /// Removes `path` (file or directory) from the work tree.
    ///
    /// # Errors
    /// IO errors.
    pub fn remove(&self, path: &str) -> anyhow::Result<()> {
        let p = self.work.join(path);
        if p.is_dir() {
            std::fs::remove_dir_all(&p)?
        } else {
            std::fs::remove_file(&p)?
        }
        Ok(())
    }

    /// Commits everything with `message`, pushes `main`, and returns the commit SHA.
    ///
    /// # Errors
    /// When git fails.
    pub fn commit(&self, message: &str) -> anyhow::Result<String> {
        git(&self.work, &["add", "-A"])?;
        git(&self.work, &["commit", "-q", "--allow-empty", "-m", message])?;
        git(&self.work, &["push", "-q", "origin", "main"])?;
        let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&self.work).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Checks out branch `name` in the work tree, creating it at the current commit
    /// when it does not exist (`git checkout -B`-like, keeping an existing branch).
    ///
    /// # Errors
    /// When git fails.
    pub fn switch(&self, name: &str) -> anyhow::Result<()> {
        if git(&self.work, &["rev-parse", "--verify", "-q", &format!("refs/heads/{name}")]).is_ok() {
            git(&self.work, &["checkout", "-q", name])
        } else {
            git(&self.work, &["checkout", "-q", "-b", name])
        }
    }

    /// Commits everything with `message` on the branch checked out, pushes that branch
    /// to `origin`, and returns the commit SHA.
    ///
    /// # Errors
    /// When git fails.
    pub fn commit_branch(&self, message: &str) -> anyhow::Result<String> {
        git(&self.work, &["add", "-A"])?;
        git(&self.work, &["commit", "-q", "--allow-empty", "-m", message])?;
        let branch = git_output(&self.work, &["rev-parse", "--abbrev-ref", "HEAD"])?;
        git(&self.work, &["push", "-q", "origin", &branch])?;
        git_output(&self.work, &["rev-parse", "HEAD"])
    }

    /// Rewrites history: commits the work tree as a new root commit (no parent, so
    /// unrelated to everything before), force-pushes it to `main`, and returns its SHA.
    ///
    /// # Errors
    /// When git fails.
    pub fn commit_unrelated(&self, message: &str) -> anyhow::Result<String> {
        git(&self.work, &["add", "-A"])?;
        let tree = git_output(&self.work, &["write-tree"])?;
        let sha = git_output(&self.work, &["commit-tree", &tree, "-m", message])?;
        git(&self.work, &["update-ref", "refs/heads/main", &sha])?;
        git(&self.work, &["push", "-q", "--force", "origin", "main"])?;
        Ok(sha)
    }
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    git_output(dir, args).map(drop)
}

/// Runs git in `dir`; returns its trimmed stdout.
fn git_output(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "plumb lab")
        .env("GIT_AUTHOR_EMAIL", "lab@plumb.invalid")
        .env("GIT_COMMITTER_NAME", "plumb lab")
        .env("GIT_COMMITTER_EMAIL", "lab@plumb.invalid")
        .output()
        .context("git")?;
    if !out.status.success() {
        bail!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
