//! A generic outgoing webhook (`plumb serve --notify-url`, Slack-compatible JSON
//! `{"text": "…"}`) for what needs a person: a sync that failed, a sync refused (a
//! prune waiting for approval, a guard), an application whose health became Degraded.
//! [`messages`] decides (pure); [`Outgoing`] posts, best effort (a failure is logged).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use bytes::Bytes;

use crate::{
    forge::HttpClient,
    health::HealthStatus,
    status::{AppStatus, SyncRecord, SyncResult},
};

/// Longest message posted, in characters (Slack's recommended limit for `text`; it
/// truncates at 40,000). A longer one is cut and ends with `…`.
pub const MAX_TEXT_CHARS: usize = 4000;

/// What was told about one application so far: the health the previous pass saw and
/// the failed or refused sync last told (its result and revision), so that a sync
/// retried with the same outcome at the same revision is told once. Owned by
/// [`Outgoing`], one per application; `Told::default()` before its first pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Told {
    /// Health after the previous pass (`None` before the first).
    pub health: Option<HealthStatus>,
    /// The failed or refused sync last told, `(result, revision)`; cleared by a sync
    /// that succeeded or went on to a later wave.
    pub failure: Option<(SyncResult, String)>,
}

/// `s` escaped for Slack's message formatting ("Formatting text for app surfaces",
/// "Escaping text"): `&` → `&amp;`, `<` → `&lt;`, `>` → `&gt;`, so that text from Git
/// or the cluster cannot make a mention (`<!channel>`), a link or a user ping.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The messages a pass calls for, given what was told before (`told`), and what is told
/// after them.
///
/// - A failed or refused sync is told once per outcome and revision: a retry that fails
///   the same way at the same revision says nothing, a new revision, a different outcome
///   or a failure after a recovery is told again.
/// - Health is told when it becomes Degraded.
///
/// Every interpolated value is [`escape`]d; each message is at most [`MAX_TEXT_CHARS`].
pub fn messages(told: &Told, st: &AppStatus, sync: Option<&SyncRecord>) -> (Vec<String>, Told) {
    let short = escape(crate::status::short(&st.revision));
    let (app, env) = (escape(&st.app), escape(&st.environment));
    let mut out = Vec::new();
    let mut next = Told { health: Some(st.health), failure: told.failure.clone() };
    if let Some(s) = sync {
        let word = match s.result {
            SyncResult::Failed => Some("failed"),
            SyncResult::Refused => Some("refused"),
            SyncResult::Succeeded | SyncResult::Running | SyncResult::Superseded => None,
        };
        match word {
            Some(word) => {
                let failure = Some((s.result, s.revision.clone()));
                if told.failure != failure {
                    out.push(format!("plumb: sync of {app} ({env}) at {short} {word}: {}", escape(&s.message)));
                }
                next.failure = failure;
            }
            None => next.failure = None,
        }
    }
    if st.health == HealthStatus::Degraded && told.health != Some(HealthStatus::Degraded) {
        let why: Vec<String> = st
            .resources
            .iter()
            .filter(|r| r.health == HealthStatus::Degraded)
            .map(|r| format!("{}: {}", escape(&r.object), escape(&r.health_message)))
            .collect();
        out.push(format!("plumb: {app} ({env}) at {short} is Degraded: {}", why.join("; ")));
    }
    (out.into_iter().map(cut).collect(), next)
}

/// `text` cut to at most [`MAX_TEXT_CHARS`] characters (the last one `…`), never inside
/// an escape (`&lt;`): a cut escape is dropped whole.
fn cut(text: String) -> String {
    if text.chars().count() <= MAX_TEXT_CHARS {
        return text;
    }
    let mut s: String = text.chars().take(MAX_TEXT_CHARS - 1).collect();
    if let Some(amp) = s.rfind('&')
        && !s[amp..].contains(';')
    {
        s.truncate(amp);
    }
    s.push('…');
    s
}

/// Posts [`messages`] to one URL.
pub struct Outgoing {
    url: String,
    client: HttpClient,
    told: Mutex<HashMap<String, Told>>,
}

impl Outgoing {
    /// A notifier posting to `url` (http or https).
    ///
    /// # Errors
    /// The HTTP client cannot be built (no TLS roots).
    pub fn new(url: &str) -> Result<Self, crate::forge::HttpError> {
        Ok(Self { url: url.into(), client: HttpClient::new()?, told: Mutex::default() })
    }

    /// Posts what the pass that produced `st` and `sync` calls for (5 s timeout each).
    pub async fn after_pass(&self, st: &AppStatus, sync: Option<&SyncRecord>) {
        let texts = match self.told.lock() {
            Ok(mut told) => {
                let entry = told.entry(st.app.clone()).or_default();
                let (texts, next) = messages(entry, st, sync);
                *entry = next;
                texts
            }
            Err(_) => return,
        };
        for text in texts {
            if let Err(e) = crate::fence::check(|| format!("notification about {}", st.app)) {
                return tracing::warn!("{e}");
            }
            let body = serde_json::json!({ "text": text }).to_string();
            let req = http::Request::post(&self.url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Bytes::from(body));
            let Ok(req) = req else {
                tracing::warn!("notify URL is not a valid URI");
                return;
            };
            match self.client.send(req, Duration::from_secs(5)).await {
                Ok((code, _)) if code.is_success() => {}
                Ok((code, _)) => tracing::warn!(app = %st.app, "notify webhook answered {code}"),
                Err(e) => tracing::warn!(app = %st.app, "notify webhook: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(health: HealthStatus) -> AppStatus {
        AppStatus {
            app: "web".into(),
            environment: "prod".into(),
            revision: "abcdef123".into(),
            health,
            ..Default::default()
        }
    }

    fn record(result: SyncResult) -> SyncRecord {
        SyncRecord {
            subject: "s".into(),
            result,
            message: "why".into(),
            ..SyncRecord::new("abcdef123", crate::status::SyncReason::NewRevision)
        }
    }

    fn told(seq: &[(AppStatus, Option<SyncRecord>)]) -> Vec<Vec<String>> {
        let mut told = Told::default();
        seq.iter()
            .map(|(st, sync)| {
                let (texts, next) = messages(&told, st, sync.as_ref());
                told = next;
                texts
            })
            .collect()
    }

    #[test]
    fn failures_refusals_and_new_degradation_are_told_once() {
        let st = status(HealthStatus::Healthy);
        assert_eq!(
            messages(&Told::default(), &st, Some(&record(SyncResult::Failed))).0,
            ["plumb: sync of web (prod) at abcdef1 failed: why"]
        );
        assert_eq!(
            messages(&Told::default(), &st, Some(&record(SyncResult::Refused))).0,
            ["plumb: sync of web (prod) at abcdef1 refused: why"]
        );
        assert!(messages(&Told::default(), &st, Some(&record(SyncResult::Succeeded))).0.is_empty());
        let degraded = status(HealthStatus::Degraded);
        let was_healthy = Told { health: Some(HealthStatus::Healthy), failure: None };
        assert_eq!(messages(&was_healthy, &degraded, None).0.len(), 1);
        let was_degraded = Told { health: Some(HealthStatus::Degraded), failure: None };
        assert!(messages(&was_degraded, &degraded, None).0.is_empty(), "told when it became Degraded only");
    }

    /// A sync that keeps failing the same way is told once; a new revision, another
    /// outcome, or a failure after a recovery is told again.
    #[test]
    fn a_retried_failing_sync_is_told_once_until_it_changes_or_recovers() {
        let st = || status(HealthStatus::Healthy);
        let failed = |rev: &str| SyncRecord { revision: rev.into(), ..record(SyncResult::Failed) };
        let counts: Vec<usize> = told(&[
            (st(), Some(failed("abcdef123"))),
            (st(), Some(failed("abcdef123"))),
            (st(), None),
            (st(), Some(failed("abcdef123"))),
            (st(), Some(record(SyncResult::Refused))),
            (st(), Some(failed("1234567aa"))),
            (st(), Some(record(SyncResult::Succeeded))),
            (st(), Some(failed("1234567aa"))),
        ])
        .iter()
        .map(Vec::len)
        .collect();
        assert_eq!(counts, [1, 0, 0, 0, 1, 1, 0, 1]);
    }

    /// Git values and API error text cannot ping a channel or make a link in Slack.
    #[test]
    fn notifications_escape_slack_control_sequences_in_every_value() {
        let mut st = status(HealthStatus::Degraded);
        st.app = "web<!here>".into();
        st.resources = vec![crate::status::ResourceStatus {
            object: "ConfigMap/a/<@U123>".into(),
            health: HealthStatus::Degraded,
            sync: crate::compare::SyncStatus::Synced,
            reason: String::new(),
            health_message: "image <http://evil.example|click> & more".into(),
        }];
        let rec = SyncRecord { message: "denied: <!channel> a>b".into(), ..record(SyncResult::Failed) };
        let (texts, _) = messages(&Told::default(), &st, Some(&rec));
        assert_eq!(
            texts,
            [
                "plumb: sync of web&lt;!here&gt; (prod) at abcdef1 failed: denied: &lt;!channel&gt; a&gt;b",
                "plumb: web&lt;!here&gt; (prod) at abcdef1 is Degraded: ConfigMap/a/&lt;@U123&gt;: \
                 image &lt;http://evil.example|click&gt; &amp; more",
            ]
        );
        for t in &texts {
            assert!(!t.contains('<') && !t.contains('>'), "{t}");
        }
        let long = SyncRecord { message: "<".repeat(10_000), ..record(SyncResult::Failed) };
        let (texts, _) = messages(&Told::default(), &status(HealthStatus::Healthy), Some(&long));
        assert!(texts[0].chars().count() <= MAX_TEXT_CHARS);
        assert!(texts[0].ends_with("&lt;…"), "an escape is never cut in half");
    }
}
