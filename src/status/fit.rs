//! What of a status and its history goes into the status ConfigMap, so that it stays
//! under the API server's limit of 1 MiB of data per ConfigMap, however many objects an
//! application has. Pure.
//!
//! - JSON is written compact.
//! - `status.json` keeps everything plumb needs on the next pass (`kinds`, `finished`,
//!   conditions, the last sync) and at most [`STATUS_BYTES`] in all: the per-object
//!   `resources` that are not Synced and Healthy come first, then the others while they
//!   fit; `resourcesOmitted` counts the objects left out (the application's sync and
//!   health status still sum up all of them).
//! - each sync record (history and `lastSync`) lists at most [`RECORD_OBJECTS`] applied
//!   and as many pruned objects, with `applied_omitted` / `pruned_omitted` counting the
//!   rest; a message longer than [`MESSAGE_BYTES`] is cut.
//! - `history.json` holds at most [`HISTORY_BYTES`]: the oldest records go first.
//!
//! What is served (status API, status page) is [`served`]: every free text capped at
//! [`MESSAGE_BYTES`], as a stored sync message is.

use super::{AppStatus, ResourceStatus, SyncRecord, SyncStatus};
use crate::health::HealthStatus;

/// Most bytes of `status.json` (640 KiB).
pub const STATUS_BYTES: usize = 640 * 1024;
/// Most bytes of `history.json` (320 KiB).
pub const HISTORY_BYTES: usize = 320 * 1024;
/// Most applied (and, apart, pruned) objects named by one sync record.
pub const RECORD_OBJECTS: usize = 100;
/// Most bytes of one sync record's message.
pub const MESSAGE_BYTES: usize = 8 * 1024;

/// The two values stored: `status.json` and `history.json`, compact JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// [`AppStatus`], its `resources` capped.
    pub status: String,
    /// The [`SyncRecord`]s, newest first, capped.
    pub history: String,
}

/// What to store for `status` and `history` within [`STATUS_BYTES`] and
/// [`HISTORY_BYTES`].
pub fn stored(status: &AppStatus, history: &[SyncRecord]) -> Stored {
    stored_within(status, history, STATUS_BYTES, HISTORY_BYTES)
}

/// [`stored`] with other limits (bytes).
pub fn stored_within(status: &AppStatus, history: &[SyncRecord], status_bytes: usize, history_bytes: usize) -> Stored {
    Stored { status: fit_status(status, status_bytes), history: fit_history(history, history_bytes) }
}

/// `record` naming at most [`RECORD_OBJECTS`] applied and pruned objects, with its
/// message cut at [`MESSAGE_BYTES`]; the counts of what was left out add up.
pub fn capped_record(record: &SyncRecord) -> SyncRecord {
    let mut r = record.clone();
    if r.applied.len() > RECORD_OBJECTS {
        r.applied_omitted += r.applied.len() - RECORD_OBJECTS;
        r.applied.truncate(RECORD_OBJECTS);
    }
    r.recreated.truncate(RECORD_OBJECTS);
    if r.pruned.len() > RECORD_OBJECTS {
        r.pruned_omitted += r.pruned.len() - RECORD_OBJECTS;
        r.pruned.truncate(RECORD_OBJECTS);
    }
    cap_text(&mut r.message);
    r
}

/// Cuts `text` longer than [`MESSAGE_BYTES`] on a character boundary and says how many
/// bytes were left out (` … (N more bytes left out)`); the result is at most
/// [`MESSAGE_BYTES`] and is not cut again.
pub fn cap_text(text: &mut String) {
    if text.len() > MESSAGE_BYTES {
        // room for the note, so that a cut text is not cut again
        let mut end = MESSAGE_BYTES - 64;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let cut = text.len() - end;
        text.truncate(end);
        text.push_str(&format!(" … ({cut} more bytes left out)"));
    }
}

/// The status as the status API and the status page serve it: every free text —
/// the subjects, the last sync's message, each object's reason and health message,
/// each condition's message, each finished Job's message, a pause's reason — cut by
/// [`cap_text`] to the bound a stored sync message has ([`MESSAGE_BYTES`]), and the
/// last sync's objects capped as stored ([`capped_record`]). The objects themselves are
/// all served.
pub fn served(status: &AppStatus) -> AppStatus {
    let mut st = status.clone();
    cap_text(&mut st.subject);
    if let Some(r) = st.last_sync.as_mut() {
        *r = capped_record(r);
        cap_text(&mut r.subject);
    }
    for r in &mut st.resources {
        cap_text(&mut r.reason);
        cap_text(&mut r.health_message);
    }
    for c in &mut st.conditions {
        cap_text(&mut c.message);
    }
    for f in &mut st.finished {
        cap_text(&mut f.message);
    }
    if let Some(s) = st.suspended.as_mut() {
        cap_text(&mut s.reason);
    }
    st
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn fit_status(status: &AppStatus, limit: usize) -> String {
    let mut st = status.clone();
    st.last_sync = st.last_sync.as_ref().map(capped_record);
    let resources = std::mem::take(&mut st.resources);
    let already = st.resources_omitted;
    let base = json(&st).len();
    // "resources":[…] is already in `base` as `[]`; each object adds its JSON and a comma
    let mut room = limit.saturating_sub(base + 32);
    let fine = |r: &ResourceStatus| r.sync == SyncStatus::Synced && r.health == HealthStatus::Healthy;
    let mut order: Vec<usize> = (0..resources.len()).collect();
    order.sort_by_key(|&i| fine(&resources[i])); // stable: not-fine first, in order
    let mut keep = vec![false; resources.len()];
    for i in order {
        let size = json(&resources[i]).len() + 1;
        if size > room {
            break;
        }
        room -= size;
        keep[i] = true;
    }
    let kept = keep.iter().filter(|k| **k).count();
    st.resources_omitted = already + resources.len() - kept;
    st.resources = resources.into_iter().zip(keep).filter_map(|(r, k)| k.then_some(r)).collect();
    json(&st)
}

fn fit_history(history: &[SyncRecord], limit: usize) -> String {
    let mut records: Vec<SyncRecord> = history.iter().map(capped_record).collect();
    loop {
        let text = json(&records);
        if text.len() <= limit || records.len() <= 1 {
            return text;
        }
        records.pop();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn object(i: usize, sync: SyncStatus, health: HealthStatus) -> ResourceStatus {
        ResourceStatus {
            object: format!("ConfigMap/big-application-namespace/config-{i:05}"),
            sync,
            reason: if sync == SyncStatus::Synced { String::new() } else { "differs at /data/a".into() },
            health,
            health_message: String::new(),
        }
    }

    fn record(n: usize, applied: usize) -> SyncRecord {
        SyncRecord {
            subject: "bump".into(),
            started_at: "2026-11-30T12:00:00.000Z".into(),
            finished_at: "2026-11-30T12:01:00.000Z".into(),
            applied: (0..applied).map(|i| format!("ConfigMap/big-application-namespace/config-{i:05}")).collect(),
            ..SyncRecord::new(format!("{n:040}"), crate::status::SyncReason::NewRevision)
        }
    }

    fn big(objects: usize) -> (AppStatus, Vec<SyncRecord>) {
        let mut st = AppStatus { app: "big".into(), environment: "prod".into(), ..AppStatus::default() };
        st.resources = (0..objects)
            .map(|i| match i {
                7 => object(i, SyncStatus::OutOfSync, HealthStatus::Healthy),
                1999 => object(i, SyncStatus::Synced, HealthStatus::Degraded),
                _ => object(i, SyncStatus::Synced, HealthStatus::Healthy),
            })
            .collect();
        st.kinds = vec![("v1".into(), "ConfigMap".into())];
        let history: Vec<SyncRecord> = (0..10).map(|n| record(n, objects)).collect();
        st.last_sync = history.first().cloned();
        (st, history)
    }

    /// A small application is stored whole.
    #[test]
    fn small_status_is_stored_whole() {
        let (st, history) = big(20);
        let s = stored(&st, &history);
        let back: AppStatus = serde_json::from_str(&s.status).unwrap();
        assert_eq!(back, st);
        let back: Vec<SyncRecord> = serde_json::from_str(&s.history).unwrap();
        assert_eq!(back, history);
    }

    /// Issue 12: 2,000 objects and 10 syncs of all of them, naively about 1.9 MB, fit
    /// in the limits; what was left out is counted, and what is wrong is kept.
    #[test]
    fn large_status_fits_and_counts_what_was_left_out() {
        let (st, history) = big(2000);
        let naive =
            serde_json::to_string_pretty(&st).unwrap().len() + serde_json::to_string_pretty(&history).unwrap().len();
        assert!(naive > 1024 * 1024, "the case is large enough: {naive}");
        let limit = 48 * 1024;
        let s = stored_within(&st, &history, limit, limit);
        assert!(s.status.len() <= limit, "{}", s.status.len());
        assert!(s.history.len() <= limit, "{}", s.history.len());
        let back: AppStatus = serde_json::from_str(&s.status).unwrap();
        assert!(back.resources_omitted > 0);
        assert_eq!(back.resources.len() + back.resources_omitted, 2000);
        let kept: Vec<&str> = back.resources.iter().map(|r| r.object.as_str()).collect();
        assert!(kept.contains(&"ConfigMap/big-application-namespace/config-00007"), "OutOfSync kept");
        assert!(kept.contains(&"ConfigMap/big-application-namespace/config-01999"), "Degraded kept");
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "in their order");
        assert_eq!(back.kinds, st.kinds, "kinds are never left out");
        let last = back.last_sync.unwrap();
        assert_eq!((last.applied.len(), last.applied_omitted), (RECORD_OBJECTS, 2000 - RECORD_OBJECTS));
        let records: Vec<SyncRecord> = serde_json::from_str(&s.history).unwrap();
        assert!(!records.is_empty() && records.len() < 10, "oldest records went first: {}", records.len());
        assert_eq!(records[0].revision, history[0].revision, "the newest stays");
        assert!(records.iter().all(|r| r.applied.len() + r.applied_omitted == 2000));
        // with the real limits all ten records stay
        let s = stored(&st, &history);
        assert!(s.status.len() + s.history.len() < 1024 * 1024 - 64 * 1024);
        assert_eq!(serde_json::from_str::<Vec<SyncRecord>>(&s.history).unwrap().len(), 10);
    }

    /// A capped record capped again keeps its counts; long messages are cut on a char
    /// boundary and say how much was left out.
    #[test]
    fn records_cap_idempotently() {
        let mut r = record(1, 250);
        r.message = "é".repeat(MESSAGE_BYTES);
        let once = capped_record(&r);
        assert_eq!((once.applied.len(), once.applied_omitted), (RECORD_OBJECTS, 150));
        assert!(once.message.len() <= MESSAGE_BYTES, "{}", once.message.len());
        assert!(once.message.ends_with(&format!("({} more bytes left out)", MESSAGE_BYTES + 64)));
        assert_eq!(capped_record(&once), once);
    }
}
