//! History records: one sync is one entry, however many passes its waves take. Pure.

use super::{HISTORY_LEN, SyncRecord, SyncResult};

/// Now, RFC 3339 (UTC).
pub fn now() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `t` in RFC 3339 (UTC, milliseconds): how the status and history write times.
pub fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Pushes `record` to the front of `history`, keeping at most [`HISTORY_LEN`]. A
/// record continuing the newest one (see [`continue_sync`]: same revision and start)
/// replaces it: one sync is one entry, however many passes its waves took. A newest
/// entry still `Running` at another revision is over: [`supersede`]d by `record`.
pub fn push_history(history: &mut Vec<SyncRecord>, record: SyncRecord) {
    if history.first().is_some_and(|h| h.revision == record.revision && h.started_at == record.started_at) {
        history[0] = record;
        return;
    }
    if let Some(first) = history.first_mut() {
        supersede(first, &record);
    }
    if history.first().is_some_and(|h| same_failure(h, &record)) {
        history[0] = fold_failure(history.first(), record);
        return;
    }
    history.insert(0, record);
    history.truncate(HISTORY_LEN);
}

/// Ends `running` as `Superseded` when it is a `Running` sync of another revision than
/// `next` (which started after it): a new revision replaces a sync that waits for a
/// wave's health, `PruneLast` or a hook, instead of queueing behind it (Flux's
/// `CancelHealthCheckOnNewRevision`). Its end is `next`'s start; its message keeps what
/// it waited for. `true` when it was superseded.
pub fn supersede(running: &mut SyncRecord, next: &SyncRecord) -> bool {
    if running.result != SyncResult::Running || running.revision == next.revision {
        return false;
    }
    running.result = SyncResult::Superseded;
    running.finished_at.clone_from(&next.started_at);
    running.message = format!("superseded by {} while it waited: {}", super::short(&next.revision), running.message);
    true
}

/// Whether `next` fails as `last` did: both Failed, of the same revision and reason,
/// with the same message and objects. Such a retry folds into `last` (its `retries`
/// counted) instead of taking an entry of its own: a delete the API server keeps
/// refusing does not push every other sync out of the history.
pub fn same_failure(last: &SyncRecord, next: &SyncRecord) -> bool {
    last.result == SyncResult::Failed
        && next.result == SyncResult::Failed
        && last.revision == next.revision
        && last.reason == next.reason
        && last.message == next.message
        && last.applied == next.applied
        && last.pruned == next.pruned
}

/// `next` as the entry it makes after `last`: when it fails as `last` did
/// ([`same_failure`]), `last`'s entry with one more retry (its start kept, `next`'s
/// end); otherwise `next` itself. The status's last sync is this entry, so the gate's
/// backoff counts the retries.
pub fn fold_failure(last: Option<&SyncRecord>, mut next: SyncRecord) -> SyncRecord {
    if let Some(last) = last.filter(|l| same_failure(l, &next) && l.started_at != next.started_at) {
        next.started_at.clone_from(&last.started_at);
        next.retries = last.retries + 1;
    }
    next
}

/// The history to write when the stored one (`stored`) changed since `ours` was read
/// from it: every entry of both, one per sync (revision, reason and start), newest
/// first, at most [`HISTORY_LEN`]. For one sync in both, ours wins unless ours is
/// still `Running` and the stored one is not (another writer finished it).
pub fn merge_history(stored: &[SyncRecord], ours: &[SyncRecord]) -> Vec<SyncRecord> {
    let key = |r: &SyncRecord| (r.revision.clone(), r.reason, r.started_at.clone());
    let mut out: Vec<SyncRecord> = ours.to_vec();
    for s in stored {
        match out.iter_mut().find(|o| key(o) == key(s)) {
            Some(o) if o.result == SyncResult::Running && s.result != SyncResult::Running => *o = s.clone(),
            Some(_) => {}
            None => out.push(s.clone()),
        }
    }
    // RFC 3339 timestamps of one width (see [`now`]) sort as text.
    out.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    out.truncate(HISTORY_LEN);
    out
}

/// The record of a pass that goes on with a `Running` sync (`previous`, at the same
/// revision, for the same reason): it keeps the sync's start and adds up what each
/// pass applied and pruned. Any other `next` is returned as it is.
pub fn continue_sync(previous: Option<&SyncRecord>, mut next: SyncRecord) -> SyncRecord {
    if let Some(p) =
        previous.filter(|p| p.result == SyncResult::Running && p.revision == next.revision && p.reason == next.reason)
    {
        next.started_at.clone_from(&p.started_at);
        let mut applied = p.applied.clone();
        applied.extend(next.applied.drain(..).filter(|a| !p.applied.contains(a)));
        applied.sort();
        next.applied = applied;
        let mut recreated = p.recreated.clone();
        recreated.extend(next.recreated.drain(..).filter(|a| !p.recreated.contains(a)));
        next.recreated = recreated;
        let mut pruned = p.pruned.clone();
        pruned.append(&mut next.pruned);
        next.pruned = pruned;
        // a record read back from the store names only part of its objects
        next.applied_omitted += p.applied_omitted;
        next.pruned_omitted += p.pruned_omitted;
        // the hooks of the earlier passes, each updated by what this pass saw of it
        let mut hooks = p.hooks.clone();
        let mut omitted = p.hooks_omitted;
        super::merge_hook_runs(&mut hooks, &mut omitted, std::mem::take(&mut next.hooks));
        (next.hooks, next.hooks_omitted) = (hooks, omitted);
        next.install |= p.install;
    }
    next
}

/// A Running sync with nothing left to do (its last objects got there some other way)
/// is over: its entry says so instead of staying Running.
pub fn finished_running(last: Option<&SyncRecord>, revision: &str) -> Option<SyncRecord> {
    let prev = last.filter(|l| l.result == SyncResult::Running && l.revision == revision)?;
    let mut done = prev.clone();
    (done.result, done.message, done.finished_at) =
        (SyncResult::Succeeded, "finished: nothing left to do".into(), now());
    Some(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::SyncResult;

    fn record(started: &str, result: SyncResult, applied: &[&str]) -> SyncRecord {
        SyncRecord {
            subject: "s".into(),
            started_at: started.into(),
            result,
            applied: applied.iter().map(|a| (*a).to_string()).collect(),
            ..SyncRecord::new("abc", crate::status::SyncReason::NewRevision)
        }
    }

    #[test]
    fn a_sync_over_several_passes_is_one_entry() {
        let mut history = vec![record("t0", SyncResult::Succeeded, &["old"])];
        let first = record("t1", SyncResult::Running, &["a"]);
        push_history(&mut history, first.clone());
        let second = continue_sync(Some(&first), record("t2", SyncResult::Running, &[]));
        push_history(&mut history, second.clone());
        let last = continue_sync(Some(&second), record("t3", SyncResult::Succeeded, &["b"]));
        push_history(&mut history, last);
        assert_eq!(history.len(), 2);
        assert_eq!((history[0].started_at.as_str(), history[0].result), ("t1", SyncResult::Succeeded));
        assert_eq!(history[0].applied, ["a", "b"]);
        let fresh = continue_sync(Some(&history[0].clone()), record("t4", SyncResult::Succeeded, &["c"]));
        assert_eq!(fresh.started_at, "t4", "a finished sync is not continued");
        let running = record("t5", SyncResult::Running, &[]);
        let mut heal = record("t6", SyncResult::Succeeded, &[]);
        heal.reason = crate::status::SyncReason::SelfHeal;
        assert_eq!(continue_sync(Some(&running), heal).started_at, "t6", "another reason is another sync");
    }

    #[test]
    fn a_new_revision_supersedes_a_waiting_sync() {
        let mut waiting = record("t1", SyncResult::Running, &["a"]);
        waiting.message = "wave 1 waits until wave 0 is Healthy: Deployment.apps/n/web Progressing".into();
        let mut history = vec![record("t0", SyncResult::Succeeded, &[]), waiting];
        history.swap(0, 1);
        let newer = SyncRecord { revision: "def0123".into(), ..record("t2", SyncResult::Running, &["b"]) };
        push_history(&mut history, newer);
        assert_eq!(history.len(), 3);
        assert_eq!((history[0].revision.as_str(), history[0].result), ("def0123", SyncResult::Running));
        let old = &history[1];
        assert_eq!(
            (old.result, old.finished_at.as_str(), old.applied.as_slice()),
            (SyncResult::Superseded, "t2", &["a".to_string()][..])
        );
        assert!(old.message.starts_with("superseded by def0123 while it waited: wave 1 waits"), "{}", old.message);
        // the same revision goes on (continue_sync), and a finished sync is never superseded
        let mut same = record("t3", SyncResult::Running, &[]);
        assert!(!supersede(&mut same, &record("t4", SyncResult::Running, &[])));
        let mut done = record("t3", SyncResult::Succeeded, &[]);
        assert!(!supersede(&mut done, &SyncRecord { revision: "x".into(), ..record("t4", SyncResult::Running, &[]) }));
    }

    #[test]
    fn a_failure_that_repeats_is_one_entry_with_a_count() {
        let failed = |started: &str, message: &str| SyncRecord {
            message: message.into(),
            finished_at: format!("{started}-end"),
            ..record(started, SyncResult::Failed, &[])
        };
        let mut history = vec![record("t0", SyncResult::Succeeded, &["old"])];
        for t in ["t1", "t2", "t3", "t4"] {
            push_history(&mut history, failed(t, "delete ConfigMap/a/b: forbidden"));
        }
        assert_eq!(history.len(), 2, "{history:?}");
        let folded = &history[0];
        assert_eq!((folded.started_at.as_str(), folded.finished_at.as_str(), folded.retries), ("t1", "t4-end", 3));
        // another failure is another entry
        push_history(&mut history, failed("t5", "delete ConfigMap/a/c: forbidden"));
        assert_eq!((history.len(), history[0].retries), (3, 0));
        // a folded entry merges with the stored one by its first start: no duplicate
        let merged = merge_history(&history, &history);
        assert_eq!(merged.len(), 3);
    }

    #[test]
    fn concurrent_histories_merge_without_loss_or_duplicate() {
        let stored = vec![record("t3", SyncResult::Succeeded, &["x"]), record("t1", SyncResult::Succeeded, &[])];
        let ours = vec![record("t2", SyncResult::Running, &["a"]), record("t1", SyncResult::Succeeded, &[])];
        let merged = merge_history(&stored, &ours);
        let starts: Vec<&str> = merged.iter().map(|r| r.started_at.as_str()).collect();
        assert_eq!(starts, ["t3", "t2", "t1"], "union, newest first, t1 once");
        let finished = vec![record("t2", SyncResult::Succeeded, &["a", "b"])];
        let merged = merge_history(&finished, &[record("t2", SyncResult::Running, &["a"])]);
        assert_eq!((merged.len(), merged[0].result), (1, SyncResult::Succeeded), "a stale Running does not undo");
        let merged = merge_history(&[record("t2", SyncResult::Running, &["a"])], &finished);
        assert_eq!(merged[0].applied, ["a", "b"], "ours wins");
        let many: Vec<SyncRecord> = (0..15).map(|i| record(&format!("t{i:02}"), SyncResult::Succeeded, &[])).collect();
        assert_eq!(merge_history(&many, &[]).len(), HISTORY_LEN);
    }

    #[test]
    fn timestamps_have_one_width() {
        let t = now();
        assert_eq!(t.len(), "2026-11-29T18:00:00.000Z".len(), "{t}");
        assert!(t.parse::<jiff::Timestamp>().is_ok());
    }

    fn running_record(result: SyncResult, revision: &str) -> SyncRecord {
        SyncRecord {
            started_at: "t0".into(),
            result,
            message: "wave 1 waits".into(),
            applied: vec!["a".into()],
            ..SyncRecord::new(revision, crate::status::SyncReason::NewRevision)
        }
    }

    #[test]
    fn only_a_running_sync_at_the_same_revision_is_finished() {
        let done = finished_running(Some(&running_record(SyncResult::Running, "abc")), "abc").expect("finished");
        assert_eq!(
            (done.result, done.message.as_str(), done.started_at.as_str()),
            (SyncResult::Succeeded, "finished: nothing left to do", "t0")
        );
        assert_eq!(done.applied, ["a"]);
        assert!(finished_running(Some(&running_record(SyncResult::Running, "abc")), "def").is_none());
        assert!(finished_running(Some(&running_record(SyncResult::Succeeded, "abc")), "abc").is_none());
        assert!(finished_running(None, "abc").is_none());
    }
}
