//! Sync windows as the policy writes them (`syncWindows` of an environment), and
//! compiled: the cron schedule parsed (croner), the time zone found (jiff's bundled tz
//! database), the duration and the application globs checked. The calendar (which
//! window is active when) is [`crate::plan::windows`].

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One sync window of an environment (`syncWindows`), as written; compiled and checked
/// by [`crate::plan::windows::Window::compile`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SyncWindow {
    /// `allow` or `deny`.
    pub kind: Spanned<String>,
    /// When the window opens: a cron expression (5 fields, or 6 with seconds first;
    /// `@daily`, …), read in `timeZone`.
    pub schedule: Spanned<String>,
    /// How long it stays open after each start: `1h`, `30m`, `1h30m`, `90s`.
    pub duration: Spanned<String>,
    /// IANA time zone the schedule is read in (`Europe/Berlin`); default `UTC`.
    #[serde(default)]
    pub time_zone: Option<Spanned<String>>,
    /// Globs of the application names it applies to; default: every application of the
    /// environment.
    #[serde(default)]
    pub applications: Option<Vec<String>>,
    /// Whether a person's `plumb sync` may run while this window holds syncs (default
    /// false: it holds them too).
    #[serde(default)]
    pub manual_sync: bool,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Syncs run only while an allow window is active.
    Allow,
    /// Syncs are held while it is active.
    Deny,
}

/// A sync window, compiled.
#[derive(Debug, Clone)]
pub struct Window {
    /// Its position in `syncWindows`, 1-based (messages name it so).
    pub index: usize,
    /// Allow or deny.
    pub kind: WindowKind,
    pub(crate) schedule_text: String,
    pub(crate) schedule: croner::Cron,
    pub(crate) duration: jiff::SignedDuration,
    pub(crate) tz_name: String,
    pub(crate) tz: jiff::tz::TimeZone,
    pub(crate) applications: globset::GlobSet,
    /// `manualSync`.
    pub manual_sync: bool,
}

/// A window's schedule must start within this many days of now (3,000: February 29
/// comes at most eight years apart): one that starts more rarely, or never
/// (`0 0 30 2 *`), is refused by validation.
pub const RARE_DAYS: i64 = 3_000;

/// A field of a sync window that does not compile: its line (0 when unknown) and why.
pub type WindowProblem = (u32, String);

fn line(s: &serde_saphyr::Spanned<String>) -> u32 {
    u32::try_from(s.referenced.line()).unwrap_or(0)
}

impl Window {
    /// Compiles window number `index` (1-based) of `syncWindows`.
    ///
    /// # Errors
    /// Each field that is wrong, with its line: `kind` not `allow` or `deny`, a
    /// `schedule` croner does not parse, a `duration` that is not a positive jiff
    /// friendly duration (`1h`, `30m`, `1h30m`), a `timeZone` the tz database does not
    /// know, an `applications` glob that does not compile.
    pub fn compile(index: usize, w: &SyncWindow) -> Result<Window, Vec<WindowProblem>> {
        let mut problems = Vec::new();
        let at = line(&w.kind);
        let kind = match w.kind.value.as_str() {
            "allow" => Some(WindowKind::Allow),
            "deny" => Some(WindowKind::Deny),
            other => {
                problems.push((at, format!("syncWindows[{index}]: kind `{other}` must be allow or deny")));
                None
            }
        };
        let schedule = match w.schedule.value.parse::<croner::Cron>() {
            Ok(c) => Some(c),
            Err(e) => {
                let msg =
                    format!("syncWindows[{index}]: schedule `{}` is not a cron expression: {e}", w.schedule.value);
                problems.push((line(&w.schedule), msg));
                None
            }
        };
        let duration = match w.duration.value.parse::<jiff::SignedDuration>() {
            Ok(d) if d.is_positive() => Some(d),
            _ => {
                let msg = format!(
                    "syncWindows[{index}]: duration `{}` must be a positive duration (e.g. 1h, 30m, 1h30m)",
                    w.duration.value
                );
                problems.push((line(&w.duration), msg));
                None
            }
        };
        let tz_name = w.time_zone.as_ref().map_or("UTC", |t| t.value.as_str()).to_string();
        let tz = match jiff::tz::TimeZone::get(&tz_name) {
            Ok(tz) => Some(tz),
            Err(_) => {
                let at = w.time_zone.as_ref().map_or(at, line);
                problems.push((
                    at,
                    format!("syncWindows[{index}]: timeZone `{tz_name}` is not an IANA time zone (e.g. Europe/Berlin)"),
                ));
                None
            }
        };
        // a schedule that never (or only rarely) starts, like `0 0 30 2 *`, would make
        // every pass search far for its occurrences: refused once, here
        if let (Some(c), Some(tz)) = (&schedule, &tz) {
            let now = jiff::Timestamp::now().to_zoned(tz.clone());
            let soon = now.timestamp().checked_add(jiff::SignedDuration::from_hours(24 * RARE_DAYS)).ok();
            let next = c.find_next_occurrence(&now, false).ok().map(|z| z.timestamp());
            if next.is_none_or(|n| soon.is_none_or(|soon| n > soon)) {
                problems.push((
                    line(&w.schedule),
                    format!(
                        "syncWindows[{index}]: schedule `{}` does not start within {RARE_DAYS} days",
                        w.schedule.value
                    ),
                ));
            }
        }
        let mut globs = globset::GlobSetBuilder::new();
        for g in w.applications.as_deref().unwrap_or(&["*".to_string()]) {
            match globset::Glob::new(g) {
                Ok(g) => {
                    globs.add(g);
                }
                Err(e) => {
                    problems.push((at, format!("syncWindows[{index}]: applications: `{g}` is not a valid glob: {e}")))
                }
            }
        }
        let applications = globs.build().ok();
        match (kind, schedule, duration, tz, applications) {
            (Some(kind), Some(schedule), Some(duration), Some(tz), Some(applications)) if problems.is_empty() => {
                Ok(Window {
                    index,
                    kind,
                    schedule_text: w.schedule.value.clone(),
                    schedule,
                    duration,
                    tz_name,
                    tz,
                    applications,
                    manual_sync: w.manual_sync,
                })
            }
            _ => Err(problems),
        }
    }

    /// Whether it applies to application `app`.
    pub fn matches(&self, app: &str) -> bool {
        self.applications.is_match(app)
    }

    /// `deny window 2 (0 9 * * 1-5 Europe/Berlin, 8h)`.
    pub fn describe(&self) -> String {
        let kind = match self.kind {
            WindowKind::Allow => "allow",
            WindowKind::Deny => "deny",
        };
        format!("{kind} window {} ({} {}, {:#})", self.index, self.schedule_text, self.tz_name, self.duration)
    }

    /// `t` on this window's wall clock: `2026-03-29 09:00 CEST`.
    pub(crate) fn local(&self, t: jiff::Timestamp) -> String {
        t.to_zoned(self.tz.clone()).strftime("%Y-%m-%d %H:%M %Z").to_string()
    }
}

/// Compiles an environment's `syncWindows`.
///
/// # Errors
/// Every problem of every window, with its line ([`Window::compile`]).
pub fn compile_windows(windows: &[SyncWindow]) -> Result<Vec<Window>, Vec<WindowProblem>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        match Window::compile(i + 1, w) {
            Ok(w) => out.push(w),
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems) }
}

#[cfg(test)]
impl SyncWindow {
    /// A window of these fields, positions unknown (tests).
    pub(crate) fn of(kind: &str, schedule: &str, duration: &str, tz: &str, apps: &[&str], manual: bool) -> Self {
        let spanned =
            |s: &str| Spanned::new(s.to_string(), serde_saphyr::Location::UNKNOWN, serde_saphyr::Location::UNKNOWN);
        SyncWindow {
            kind: spanned(kind),
            schedule: spanned(schedule),
            duration: spanned(duration),
            time_zone: Some(spanned(tz)),
            applications: Some(apps.iter().map(|s| (*s).to_string()).collect()),
            manual_sync: manual,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn window(kind: &str, schedule: &str, duration: &str, tz: &str, apps: &[&str]) -> SyncWindow {
        SyncWindow::of(kind, schedule, duration, tz, apps, false)
    }

    #[test]
    fn bad_windows_are_named_with_their_field() {
        let bad = [
            window("maybe", "0 9 * * *", "1h", "UTC", &["*"]),
            window("deny", "0 25 * * *", "1h", "UTC", &["*"]),
            window("deny", "0 9 * * *", "soon", "UTC", &["*"]),
            window("deny", "0 9 * * *", "-1h", "UTC", &["*"]),
            window("deny", "0 9 * * *", "1h", "Mars/Olympus", &["*"]),
            window("deny", "0 9 * * *", "1h", "UTC", &["web["]),
        ];
        let problems: Vec<String> = compile_windows(&bad).unwrap_err().into_iter().map(|(_, m)| m).collect();
        let starts = [
            "syncWindows[1]: kind `maybe` must be allow or deny",
            "syncWindows[2]: schedule `0 25 * * *` is not a cron expression",
            "syncWindows[3]: duration `soon` must be a positive duration",
            "syncWindows[4]: duration `-1h` must be a positive duration",
            "syncWindows[5]: timeZone `Mars/Olympus` is not an IANA time zone",
            "syncWindows[6]: applications: `web[` is not a valid glob",
        ];
        assert_eq!(problems.len(), starts.len(), "{problems:?}");
        for (p, want) in problems.iter().zip(starts) {
            assert!(p.starts_with(want), "{p} should start with {want}");
        }
        let good = [
            window("allow", "@daily", "1h30m", "Europe/Berlin", &["web-*"]),
            window("deny", "0 0 9 * * 1-5", "90s", "UTC", &["*"]),
        ];
        let ws = compile_windows(&good).unwrap();
        assert_eq!(ws[0].describe(), "allow window 1 (@daily Europe/Berlin, 1h 30m)");
        assert!(ws[0].matches("web-1") && !ws[0].matches("api"));
    }
}
