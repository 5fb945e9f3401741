//! The IO around [`crate::compare::seal`]: a pass's seal made from what it compared,
//! and a pass without comparisons of its own (a shard just taken over, a restart)
//! checking the last pass's seal against its render and the watch cache.

use crate::{
    compare::{
        Compared, ObjectReason, SyncStatus,
        object::identity,
        seal::{Covers, seal},
    },
    status::{AppStatus, SyncRecord, SyncResult},
    tracking::ObjectKey,
};

use super::{Context, compare::Scope, hooks::Split, sync::Writes};

impl Context {
    /// The seal of a pass that compared `compared` (the objects of `split`), ending
    /// with status `st`, after `sync` (its record and what it wrote; `None`: no sync):
    /// made when `st` is Synced, there is an installation key, and every object is
    /// Synced against a live resourceVersion — the one its comparison read, or for an
    /// object this pass's sync wrote, the one its server-side apply answered (a
    /// dry-run of that apply would answer the object unchanged: apply is idempotent,
    /// Kubernetes API docs "Server-Side Apply", as [`super::memo::Memo::applied_here`]
    /// relies on too). A sync seals only when it ended in this pass, without hooks,
    /// every write a server-side apply; a record without a sync (a sync's end told)
    /// seals nothing. Empty otherwise.
    pub(super) fn seal_of(
        &self,
        scope: &Scope<'_>,
        split: &Split,
        compared: &[std::sync::Arc<Compared>],
        st: &AppStatus,
        sync: (Option<&SyncRecord>, Option<&Writes>),
    ) -> String {
        if st.sync != SyncStatus::Synced {
            return String::new();
        }
        let none = Writes::new();
        let writes = match sync {
            (None, _) => &none,
            (Some(rec), Some(writes)) if rec.result == SyncResult::Succeeded && split.hooks.is_empty() => writes,
            (Some(_), _) => return String::new(),
        };
        let mut objects = Vec::with_capacity(compared.len());
        for c in compared {
            let rv = match (writes.get(&c.key), &c.reason) {
                (Some(Some(applied)), _) => applied.as_str(),
                (None, ObjectReason::Synced) => match c.live.as_ref().and_then(|l| l.resource_version()) {
                    Some(rv) => rv,
                    None => return String::new(),
                },
                _ => return String::new(),
            };
            objects.push((&c.key, rv));
        }
        if objects.is_empty() || objects.len() != split.objects.manifests.len() {
            return String::new();
        }
        let covers = Covers { policy: &self.config.digest, app: scope.app, render: split.digest() };
        seal(scope.mask_key, covers, objects).unwrap_or_default()
    }

    /// Whether the seal `previous` (the last pass's status) carries holds for the
    /// objects of `split` as the watch cache has them now; when it does, each is
    /// remembered Synced against its live resourceVersion, so that comparing it needs
    /// no dry-run. Waits for the watches of the render's kinds to list (as the
    /// comparison would); any object missing from the cache, or written by this process
    /// since, holds nothing.
    pub(super) async fn unseal(&self, scope: &Scope<'_>, split: &Split, previous: &AppStatus) -> bool {
        let (Some(live), sealed) = (&self.live, previous.synced_seal.as_str()) else { return false };
        if sealed.is_empty() {
            return false;
        }
        let manifests = &split.objects.manifests;
        self.watches_ready(manifests).await;
        let installation = self.config.settings.installation_id.as_deref();
        let mut found: Vec<(ObjectKey, u64, String)> = Vec::with_capacity(manifests.len());
        for m in manifests {
            let Ok(kind) = self.cluster.kind(m.api_version(), m.kind()).await else { return false };
            let Some(key) = identity(&m.object(), kind.namespaced, scope.namespace) else { return false };
            let Some(Some(cached)) = live.get_arc(&kind, &key) else { return false };
            let Some(rv) = cached.resource_version().filter(|_| self.memo.written(&key).is_none()) else {
                return false;
            };
            let hash = super::compare::prepared_hash(m.digest(), scope, installation, kind.namespaced, &m.source);
            found.push((key, hash, rv.to_string()));
        }
        let covers = Covers { policy: &self.config.digest, app: scope.app, render: split.digest() };
        let holds = seal(scope.mask_key, covers, found.iter().map(|(k, _, rv)| (k, rv.as_str())))
            .is_some_and(|s| s == sealed && !found.is_empty());
        if holds {
            tracing::debug!(app = scope.app, "the last pass's seal holds: its objects are Synced as they were");
            for (key, hash, rv) in &found {
                self.memo.remember_synced(key, *hash, rv);
            }
        }
        holds
    }
}
