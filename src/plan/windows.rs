//! Sync windows (`syncWindows` of an environment): when automated sync, selfHeal and a
//! person's sync may run. Pure: the calendar is a function of `now` and the windows.
//!
//! Rules (Argo CD's AppProject sync windows, docs "Sync Windows"):
//! - a window starts at each time its cron `schedule` names, read in its `timeZone`
//!   (IANA, default UTC; jiff's bundled tz database), and lasts `duration` of elapsed
//!   time (a 10 h window over a DST change ends 10 real hours later); a start
//!   that falls into a DST gap moves to the first time after it, a repeated hour
//!   starts once (croner's rules);
//! - only windows whose `applications` globs match the application count (default:
//!   every application); with none, syncs always run;
//! - an active **deny** window holds every sync, even where an allow window is active
//!   (deny wins);
//! - when any **allow** window matches, syncs run only while one is active;
//! - `manualSync: true` lets a person's sync through a window that holds it; a manual
//!   sync is held when any window that holds it lacks `manualSync: true`;
//! - drift is still compared and shown while a window holds syncs.

pub use crate::config::{Window, WindowKind as Kind, compile_windows as compile};

impl Window {
    /// The end of its occurrence active at `now`, if one is: the latest start at or
    /// before `now` plus the duration, when that is after `now`.
    pub fn active_until(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let start = self.schedule.find_previous_occurrence(&now.to_zoned(self.tz.clone()), true).ok()?;
        let end = start.timestamp().checked_add(self.duration).ok()?;
        (now < end).then_some(end)
    }

    /// Its first start after `now`.
    pub fn next_start(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        self.schedule.find_next_occurrence(&now.to_zoned(self.tz.clone()), false).ok().map(|z| z.timestamp())
    }
}

pub use crate::status::SyncWindows as Verdict;

/// How many window boundaries (starts and ends) [`verdict`] looks ahead for the next
/// change.
pub const HORIZON: usize = 400;

/// Who the windows hold at one instant: (automated sync held by, manual sync held by),
/// each the windows that hold it (empty: runs), and the active windows with their end.
fn held_at<'a>(
    windows: &[&'a Window],
    t: jiff::Timestamp,
) -> (Vec<&'a Window>, Vec<&'a Window>, Vec<(&'a Window, jiff::Timestamp)>) {
    let active: Vec<(&Window, jiff::Timestamp)> =
        windows.iter().filter_map(|w| w.active_until(t).map(|end| (*w, end))).collect();
    let denies: Vec<&Window> = active.iter().filter(|(w, _)| w.kind == Kind::Deny).map(|(w, _)| *w).collect();
    let allow_active = active.iter().any(|(w, _)| w.kind == Kind::Allow);
    let auto: Vec<&Window> = if !denies.is_empty() {
        denies
    } else if allow_active {
        vec![]
    } else {
        windows.iter().filter(|w| w.kind == Kind::Allow).copied().collect()
    };
    let manual = if auto.iter().all(|w| w.manual_sync) { vec![] } else { auto.clone() };
    (auto, manual, active)
}

/// What `windows` say for application `app` at `now` (rules in the module docs); the
/// next change is found by stepping through the windows' starts and ends, at most
/// [`HORIZON`] of them.
pub fn verdict(windows: &[Window], app: &str, now: jiff::Timestamp) -> Verdict {
    let matching: Vec<&Window> = windows.iter().filter(|w| w.matches(app)).collect();
    if matching.is_empty() {
        return Verdict::default();
    }
    let (auto, manual, active) = held_at(&matching, now);
    let held = !auto.is_empty();
    let mut t = now;
    let mut next = None;
    for _ in 0..HORIZON {
        let boundary = matching.iter().filter_map(|w| {
            let end = w.active_until(t);
            let start = w.next_start(t);
            [end, start].into_iter().flatten().filter(|b| *b > t).min()
        });
        let Some(b) = boundary.min() else { break };
        if held_at(&matching, b).0.is_empty() == held {
            next = Some(b);
            break;
        }
        t = b;
    }
    let first = matching[0];
    let when = |t: Option<jiff::Timestamp>| match t {
        Some(t) => format!("syncs may start at {}", first.local(t)),
        None => "no window opens soon".to_string(),
    };
    let why = |holding: &[&Window]| {
        let names: Vec<String> = holding
            .iter()
            .map(|w| match w.kind {
                Kind::Deny => {
                    let end = w.active_until(now).map(|e| w.local(e)).unwrap_or_default();
                    format!("{} is active until {end}", w.describe())
                }
                Kind::Allow => format!("{} is not active", w.describe()),
            })
            .collect();
        format!("{}; {}", names.join(", "), when(next))
    };
    Verdict {
        closed: held.then(|| why(&auto)),
        manual_closed: (!manual.is_empty()).then(|| why(&manual)),
        active: active.iter().map(|(w, end)| format!("{} until {}", w.describe(), w.local(*end))).collect(),
        next_change: next.map(|t| t.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::config::SyncWindow;

    fn window(kind: &str, schedule: &str, duration: &str, tz: &str, apps: &[&str], manual: bool) -> SyncWindow {
        SyncWindow::of(kind, schedule, duration, tz, apps, manual)
    }

    fn at(t: &str) -> jiff::Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn a_window_is_active_from_each_start_for_its_duration_across_dst() {
        let w = |schedule: &str, duration: &str| {
            Window::compile(1, &window("deny", schedule, duration, "Europe/Berlin", &["*"], false)).unwrap()
        };
        // (window, now, its end when active, its next start)
        let cases = [
            (
                "9:00 daily, 1h: inside (CET, +01:00)",
                w("0 9 * * *", "1h"),
                "2026-03-28T08:30:00Z",
                Some("2026-03-28T09:00:00Z"),
                "2026-03-29T07:00:00Z",
            ),
            ("9:00 daily, 1h: after", w("0 9 * * *", "1h"), "2026-03-28T09:00:00Z", None, "2026-03-29T07:00:00Z"),
            (
                "the day DST starts: 9:00 is 07:00Z (CEST, +02:00)",
                w("0 9 * * *", "1h"),
                "2026-03-29T07:10:00Z",
                Some("2026-03-29T08:00:00Z"),
                "2026-03-30T07:00:00Z",
            ),
            (
                "at 08:30Z on that day the window has ended",
                w("0 9 * * *", "1h"),
                "2026-03-29T08:30:00Z",
                None,
                "2026-03-30T07:00:00Z",
            ),
            (
                "a start in the DST gap (02:30) moves to 03:00 CEST",
                w("30 2 * * *", "1h"),
                "2026-03-29T00:59:00Z",
                None,
                "2026-03-29T01:00:00Z",
            ),
            (
                "…and lasts its duration from there",
                w("30 2 * * *", "1h"),
                "2026-03-29T01:30:00Z",
                Some("2026-03-29T02:00:00Z"),
                "2026-03-30T00:30:00Z",
            ),
            (
                "the day DST ends: 9:00 is 08:00Z (CET)",
                w("0 9 * * *", "1h"),
                "2026-10-25T08:30:00Z",
                Some("2026-10-25T09:00:00Z"),
                "2026-10-26T08:00:00Z",
            ),
            (
                "a repeated hour (02:30 twice) starts once, the first time",
                w("30 2 * * *", "30m"),
                "2026-10-25T00:00:00Z",
                None,
                "2026-10-25T00:30:00Z",
            ),
            ("…not again an hour later", w("30 2 * * *", "30m"), "2026-10-25T01:40:00Z", None, "2026-10-26T01:30:00Z"),
            (
                "Fridays 14:00 CET for 10h, to 00:00 CET",
                w("0 14 * * 5", "10h"),
                "2026-12-04T22:59:00Z",
                Some("2026-12-04T23:00:00Z"),
                "2026-12-11T13:00:00Z",
            ),
        ];
        for (name, w, now, end, next) in cases {
            let now = at(now);
            assert_eq!(w.active_until(now), end.map(at), "{name}: active until");
            assert_eq!(w.next_start(now), Some(at(next)), "{name}: next start");
        }
    }

    #[test]
    fn deny_wins_allow_restricts_manual_sync_passes_with_manual_sync() {
        let compile = |ws: &[SyncWindow]| compile(ws).unwrap();
        let deny9 = window("deny", "0 9 * * *", "1h", "UTC", &["*"], false);
        let deny9_manual = window("deny", "0 9 * * *", "1h", "UTC", &["*"], true);
        let allow22 = window("allow", "0 22 * * *", "2h", "UTC", &["*"], false);
        let allow_all_day = window("allow", "0 0 * * *", "24h", "UTC", &["*"], false);
        let only_db = window("deny", "0 9 * * *", "1h", "UTC", &["db-*"], false);
        struct Case {
            name: &'static str,
            windows: Vec<SyncWindow>,
            now: &'static str,
            closed: Option<&'static str>,
            manual_closed: bool,
            next_change: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "no window applies: always",
                windows: vec![only_db.clone()],
                now: "2026-12-02T09:30:00Z",
                closed: None,
                manual_closed: false,
                next_change: None,
            },
            Case {
                name: "inside a deny window: held, until it ends",
                windows: vec![deny9.clone()],
                now: "2026-12-02T09:30:00Z",
                closed: Some(
                    "deny window 1 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC; syncs may start at 2026-12-02 10:00 UTC",
                ),
                manual_closed: true,
                next_change: Some("2026-12-02T10:00:00Z"),
            },
            Case {
                name: "outside it: runs, the next change is its start",
                windows: vec![deny9.clone()],
                now: "2026-12-02T10:00:00Z",
                closed: None,
                manual_closed: false,
                next_change: Some("2026-12-03T09:00:00Z"),
            },
            Case {
                name: "manualSync: true lets a person through",
                windows: vec![deny9_manual.clone()],
                now: "2026-12-02T09:00:00Z",
                closed: Some(
                    "deny window 1 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC; syncs may start at 2026-12-02 10:00 UTC",
                ),
                manual_closed: false,
                next_change: Some("2026-12-02T10:00:00Z"),
            },
            Case {
                name: "an allow window not active: held until it opens",
                windows: vec![allow22.clone()],
                now: "2026-12-02T12:00:00Z",
                closed: Some(
                    "allow window 1 (0 22 * * * UTC, 2h) is not active; syncs may start at 2026-12-02 22:00 UTC",
                ),
                manual_closed: true,
                next_change: Some("2026-12-02T22:00:00Z"),
            },
            Case {
                name: "inside the allow window: runs until it ends",
                windows: vec![allow22.clone()],
                now: "2026-12-02T23:00:00Z",
                closed: None,
                manual_closed: false,
                next_change: Some("2026-12-03T00:00:00Z"),
            },
            Case {
                name: "deny wins over an active allow",
                windows: vec![allow_all_day, deny9_manual.clone(), deny9.clone()],
                now: "2026-12-02T09:15:00Z",
                closed: Some(
                    "deny window 2 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC, deny window 3 (0 9 * * * UTC, 1h) is active until 2026-12-02 10:00 UTC; syncs may start at 2026-12-02 10:00 UTC",
                ),
                manual_closed: true,
                next_change: Some("2026-12-02T10:00:00Z"),
            },
        ];
        for c in cases {
            let v = verdict(&compile(&c.windows), "web", at(c.now));
            assert_eq!(v.closed.as_deref(), c.closed, "{}", c.name);
            assert_eq!(v.manual_closed.is_some(), c.manual_closed, "{}: manual", c.name);
            assert_eq!(v.next_change.as_deref(), c.next_change, "{}: next change", c.name);
        }
        let v = verdict(&compile(&[deny9]), "web", at("2026-12-02T09:30:00Z"));
        assert_eq!(v.active, ["deny window 1 (0 9 * * * UTC, 1h) until 2026-12-02 10:00 UTC"]);
    }

    #[test]
    fn a_deny_window_in_berlin_across_the_dst_change() {
        let ws = compile(&[window("deny", "0 8 * * *", "10h", "Europe/Berlin", &["*"], false)]).unwrap();
        // Saturday 28 March, 18:00 CET = 17:00Z ends it; Sunday 29 March (CEST) it opens at 06:00Z
        let v = verdict(&ws, "web", at("2026-03-28T12:00:00Z"));
        assert_eq!(v.next_change.as_deref(), Some("2026-03-28T17:00:00Z"));
        let v = verdict(&ws, "web", at("2026-03-28T17:00:00Z"));
        assert_eq!((v.closed, v.next_change.as_deref()), (None, Some("2026-03-29T06:00:00Z")));
        let v = verdict(&ws, "web", at("2026-03-29T06:00:00Z"));
        assert!(v.closed.unwrap().ends_with("until 2026-03-29 18:00 CEST; syncs may start at 2026-03-29 18:00 CEST"));
        // the day the clocks go back (03:00 CEST → 02:00 CET): 08:00 CET is 07:00Z, 10 h
        // later 17:00Z (18:00 CET); the next morning 08:00 CET is 07:00Z again
        let v = verdict(&ws, "web", at("2026-10-25T16:59:00Z"));
        assert!(v.closed.unwrap().contains("until 2026-10-25 18:00 CET"));
        assert_eq!(v.next_change.as_deref(), Some("2026-10-25T17:00:00Z"));
        let v = verdict(&ws, "web", at("2026-10-25T17:00:00Z"));
        assert_eq!((v.closed, v.next_change.as_deref()), (None, Some("2026-10-26T07:00:00Z")));
    }
}
