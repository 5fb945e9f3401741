//! Git refs as pushes name them: `refs/heads/<branch>` and `refs/tags/<tag>`.

use serde::Serialize;

/// Kind of a git ref. Serializes as `branch` / `tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// `refs/heads/<name>`.
    Branch,
    /// `refs/tags/<name>`.
    Tag,
}

impl RefKind {
    /// `refs/heads/` or `refs/tags/`.
    pub fn prefix(self) -> &'static str {
        match self {
            RefKind::Branch => "refs/heads/",
            RefKind::Tag => "refs/tags/",
        }
    }
}

/// Splits a full ref into kind and name: `refs/heads/release/1.2` → `(Branch, "release/1.2")`.
///
/// Only the `refs/heads/` or `refs/tags/` prefix is removed; names keep their `/`
/// (argoproj/argo-cd #7906). `None` for other refs (`refs/pull/…`, `refs/notes/…`), short
/// names and empty names.
pub fn split_ref(full: &str) -> Option<(RefKind, &str)> {
    [RefKind::Branch, RefKind::Tag]
        .into_iter()
        .find_map(|kind| full.strip_prefix(kind.prefix()).filter(|name| !name.is_empty()).map(|name| (kind, name)))
}

/// 40 (SHA-1) or 64 (SHA-256 object format) hex digits.
pub(crate) fn is_commit_sha(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}
