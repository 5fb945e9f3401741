//! The directories of one commit's tree, for an applicationSet's `directories`
//! generator ([`crate::config::generators`]): read from the mirror's objects, never a
//! working tree; only real directories (trees) count — a symlink or a submodule is not
//! listed.

use git2::{ObjectType, Oid};

use super::{Error, Mirror};

/// The most directories one listing returns (10,000): a listing that would return
/// more is [`Error::TooManyDirectories`], so that a glob over a huge repository costs
/// a bounded walk.
pub const MAX_LISTED_DIRECTORIES: usize = 10_000;

impl Mirror {
    /// Every directory of commit `revision` (40 hex, in the mirror) down to `depth`
    /// path segments, as repository paths without leading or trailing `/`
    /// (`apps`, `apps/web`), sorted.
    ///
    /// # Errors
    /// [`Error::Local`] (no such commit), [`Error::TooManyDirectories`].
    pub fn directories(&self, revision: &str, depth: usize) -> Result<Vec<String>, Error> {
        let local = |source| Error::Local { dir: self.repo.path().into(), source };
        let root =
            Oid::from_str(revision).and_then(|o| self.repo.find_commit(o)).and_then(|c| c.tree()).map_err(local)?;
        let mut out = Vec::new();
        // (tree, its path, its depth)
        let mut stack = vec![(root, String::new(), 0usize)];
        while let Some((tree, path, level)) = stack.pop() {
            if level >= depth {
                continue;
            }
            for e in tree.iter() {
                if e.kind() != Some(ObjectType::Tree) {
                    continue;
                }
                let Ok(name) = e.name() else { continue };
                let child = if path.is_empty() { name.to_string() } else { format!("{path}/{name}") };
                if out.len() >= MAX_LISTED_DIRECTORIES {
                    return Err(Error::TooManyDirectories {
                        revision: revision.into(),
                        depth,
                        limit: MAX_LISTED_DIRECTORIES,
                    });
                }
                out.push(child.clone());
                if level + 1 < depth {
                    let sub = self.repo.find_tree(e.id()).map_err(local)?;
                    stack.push((sub, child, level + 1));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::source::{Credentials, tests::git};

    #[test]
    fn lists_real_directories_down_to_a_depth() {
        let tmp = tempfile::tempdir().expect("tmp");
        let work = tmp.path().join("work");
        for f in ["apps/web/deploy.yaml", "apps/api/base/deploy.yaml", "apps/README.md", "docs/x.md"] {
            let p = work.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, "a: 1\n").expect("write");
        }
        std::os::unix::fs::symlink("web", work.join("apps/link")).expect("symlink");
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-qm", "c"]);
        let cache = tmp.path().join("cache");
        let mirror = Mirror::open(&cache, work.to_str().expect("utf8"), Credentials::default()).expect("open");
        let revision = mirror.resolve("main").expect("resolve").revision;
        assert_eq!(mirror.directories(&revision, 1).expect("list"), ["apps", "docs"]);
        assert_eq!(mirror.directories(&revision, 2).expect("list"), ["apps", "apps/api", "apps/web", "docs"]);
        assert_eq!(mirror.directories(&revision, 3).expect("list").len(), 5);
        assert!(mirror.directories(&"0".repeat(40), 1).is_err());
    }
}
