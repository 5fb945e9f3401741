//! What each provider is sent for one [`Event`] (pure): the text from the route's
//! template (or the trigger's own), every field escaped for its target, and the body.
//!
//! - Slack: `{"text": …}`, fields escaped as Slack's "Escaping text" says (`&`, `<`,
//!   `>`), so that Git cannot make a mention or a link.
//! - Teams: a message with one Adaptive Card (a `TextBlock` and a `FactSet`), the
//!   Markdown characters of fields backslash-escaped ([`escape_markdown`]).
//! - Webhook: a JSON event (serde escapes it), signed over the exact body bytes with
//!   HMAC-SHA256: `X-Plumb-Signature: sha256=<lower-case hex>`.
//! - E-mail: a subject without control characters, a plain text part and an HTML part
//!   with the fields HTML-escaped.
//!
//! Each field is cut at [`MAX_TEXT_CHARS`] and each text too, never inside an escape.

use hmac::{KeyInit as _, Mac as _};

use super::Event;
use crate::config::{ProviderType, Trigger};

/// Longest field or message text, in characters (Slack's recommended limit for `text`;
/// it truncates at 40,000). Longer ones are cut and end with `…`.
pub const MAX_TEXT_CHARS: usize = 4000;

/// The header carrying a webhook body's signature: `sha256=` and the lower-case hex
/// HMAC-SHA256 of the body with the provider's key (as GitHub's `X-Hub-Signature-256`).
pub const SIGNATURE_HEADER: &str = "X-Plumb-Signature";

/// The header naming a webhook body's trigger (`sync-failed`, …).
pub const EVENT_HEADER: &str = "X-Plumb-Event";

/// The text of `trigger` when its route gives no template.
pub fn default_template(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::SyncFailed => "plumb: sync of {app} ({environment}) at {short} {result}: {message}",
        Trigger::SyncSucceeded => "plumb: {app} ({environment}) deployed {short}: {message}",
        Trigger::HealthDegraded => "plumb: {app} ({environment}) at {short} is Degraded: {message}",
        Trigger::HealthRecovered => "plumb: {app} ({environment}) at {short} recovered: {message}",
        Trigger::RenderFailed => "plumb: {app} ({environment}) cannot render {short}: {message}",
        Trigger::PruneWaitingApproval => {
            "plumb: {app} ({environment}) at {short}: a prune waits for approval: {message}"
        }
        Trigger::UnverifiedRevision => "plumb: {app} ({environment}): revision {short} is not trusted: {message}",
    }
}

/// `s` escaped for Slack's message formatting ("Formatting text for app surfaces",
/// "Escaping text"): `&` → `&amp;`, `<` → `&lt;`, `>` → `&gt;`, so that text from Git
/// or the cluster cannot make a mention (`<!channel>`), a link or a user ping.
pub fn escape_slack(s: &str) -> String {
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

/// `s` escaped for HTML text and attribute values (`&`, `<`, `>`, `"`, `'`): the status
/// page's [`crate::page::escape`].
pub use crate::page::escape as escape_html;

/// `s` with the characters that start Markdown emphasis, a link, code, a heading, a
/// table or an HTML tag backslash-escaped (CommonMark 0.31, "Backslash escapes": any
/// ASCII punctuation may be; these are the ones the Adaptive Card Markdown subset that
/// Teams renders acts on): a commit message cannot make a link or hide text. Other
/// punctuation stays as written, so the text reads the same where escapes are not
/// honoured.
pub fn escape_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\`*_[]<>#~|".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` unchanged (JSON bodies are escaped by serde; plain text needs nothing).
pub fn escape_none(s: &str) -> String {
    s.to_string()
}

/// `text` cut to at most [`MAX_TEXT_CHARS`] characters (the last one `…`), never inside
/// an escape (`&lt;`, `\<`): a cut escape is dropped whole.
pub fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_TEXT_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_TEXT_CHARS - 1).collect();
    if let Some(amp) = s.rfind('&')
        && !s[amp..].contains(';')
    {
        s.truncate(amp);
    }
    // an odd run of backslashes at the end is an escape cut in half
    let slashes = s.len() - s.trim_end_matches('\\').len();
    if slashes % 2 == 1 {
        s.pop();
    }
    s.push('…');
    s
}

/// `template` with each placeholder (`{app}`, … [`crate::config::notifications::TEMPLATE_FIELDS`])
/// replaced by the event's field, cut at [`MAX_TEXT_CHARS`] and passed through
/// `escape`; `{{` and `}}` are literal braces; an unknown placeholder stays as written
/// (validation rejects it). The whole text is then [`cut`].
pub fn fill(template: &str, e: &Event, escape: fn(&str) -> String) -> String {
    let field = |name: &str| -> Option<String> {
        let v = match name {
            "app" => e.app.as_str(),
            "environment" => e.environment.as_str(),
            "revision" => e.revision.as_str(),
            "short" => crate::status::short(&e.revision),
            "subject" => e.subject.as_str(),
            "trigger" => e.trigger.as_str(),
            "result" => e.result.as_str(),
            "message" => e.message.as_str(),
            _ => return None,
        };
        Some(escape(&cut(v)))
    };
    let mut out = String::with_capacity(template.len() + e.message.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        match tail.find('}').filter(|_| tail.starts_with('{')) {
            Some(end) => {
                match field(&tail[1..end]) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&tail[..=end]),
                }
                rest = &tail[end + 1..];
            }
            None => {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    cut(&out)
}

/// The escaping a provider type needs in its text.
pub fn escaper(kind: ProviderType) -> fn(&str) -> String {
    match kind {
        ProviderType::Slack => escape_slack,
        ProviderType::Teams => escape_markdown,
        ProviderType::Webhook | ProviderType::Smtp => escape_none,
    }
}

/// Slack's body: `{"text": text}` (`text` already escaped by [`fill`]).
pub fn slack(text: &str) -> Vec<u8> {
    serde_json::json!({ "text": text }).to_string().into_bytes()
}

/// Teams' body: a message with one Adaptive Card 1.4 (what incoming webhooks and
/// Workflows' "post to a channel when a webhook request is received" accept): the
/// text, then a FactSet of application, environment, revision and trigger (each
/// Markdown-escaped).
pub fn teams(e: &Event, text: &str) -> Vec<u8> {
    let fact = |title: &str, value: &str| serde_json::json!({ "title": title, "value": escape_markdown(&cut(value)) });
    let card = serde_json::json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            { "type": "TextBlock", "text": text, "wrap": true },
            { "type": "FactSet", "facts": [
                fact("Application", &e.app),
                fact("Environment", &e.environment),
                fact("Revision", crate::status::short(&e.revision)),
                fact("Trigger", e.trigger.as_str()),
            ]},
        ],
    });
    serde_json::json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    })
    .to_string()
    .into_bytes()
}

/// The generic webhook's body: a JSON object `{trigger, application, environment,
/// revision, subject, result, message, text, at}` (`at`: RFC 3339 time it was
/// decided, so that a receiver can refuse a replayed old body), fields cut at
/// [`MAX_TEXT_CHARS`].
pub fn webhook(e: &Event, text: &str, at: jiff::Timestamp) -> Vec<u8> {
    serde_json::json!({
        "trigger": e.trigger.as_str(),
        "application": cut(&e.app),
        "environment": cut(&e.environment),
        "revision": cut(&e.revision),
        "subject": cut(&e.subject),
        "result": e.result,
        "message": cut(&e.message),
        "text": text,
        "at": at.to_string(),
    })
    .to_string()
    .into_bytes()
}

/// The value of [`SIGNATURE_HEADER`] for `body` signed with `key`: `sha256=<hex>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    match hmac::Hmac::<sha2::Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(body);
            format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
        }
        // HMAC accepts keys of any length; this arm cannot be reached.
        Err(_) => String::new(),
    }
}

/// An e-mail: subject, plain text and HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    /// One line, no control characters, at most 200 characters.
    pub subject: String,
    /// The text (unescaped: plain text).
    pub plain: String,
    /// The text as HTML, the fields escaped.
    pub html: String,
}

/// The e-mail of `e` from `template`.
pub fn mail(e: &Event, template: &str) -> Mail {
    let plain = fill(template, e, escape_none);
    let subject: String = plain.chars().map(|c| if c.is_control() { ' ' } else { c }).take(200).collect();
    let html = format!(
        "<html><body><p>{}</p><table><tr><td>Application</td><td>{}</td></tr><tr><td>Environment</td><td>{}</td></tr><tr><td>Revision</td><td>{}</td></tr><tr><td>Trigger</td><td>{}</td></tr></table></body></html>",
        fill(template, e, escape_html),
        escape_html(&cut(&e.app)),
        escape_html(&cut(&e.environment)),
        escape_html(&cut(&e.revision)),
        e.trigger.as_str(),
    );
    Mail { subject, plain, html }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn event(message: &str) -> Event {
        Event {
            trigger: Trigger::SyncFailed,
            app: "web<!here>".into(),
            environment: "prod".into(),
            revision: "abcdef123".into(),
            subject: "fix *all* [things](http://evil.example)".into(),
            result: "failed".into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_default_text_keeps_the_notify_url_wording() {
        let e = Event { app: "web".into(), ..event("why") };
        assert_eq!(
            fill(default_template(e.trigger), &e, escape_slack),
            "plumb: sync of web (prod) at abcdef1 failed: why"
        );
    }

    /// Git values and API error text cannot ping a channel or make a link in Slack.
    #[test]
    fn slack_text_escapes_control_sequences_in_every_value() {
        let e = event("denied: <!channel> a>b & <http://evil.example|click>");
        let text = fill(default_template(e.trigger), &e, escape_slack);
        assert_eq!(
            text,
            "plumb: sync of web&lt;!here&gt; (prod) at abcdef1 failed: denied: &lt;!channel&gt; a&gt;b &amp; &lt;http://evil.example|click&gt;"
        );
        let long = fill(default_template(e.trigger), &event(&"<".repeat(10_000)), escape_slack);
        assert!(long.chars().count() <= MAX_TEXT_CHARS);
        assert!(long.ends_with("&lt;…"), "an escape is never cut in half");
    }

    #[test]
    fn templates_fill_escaped_fields_and_keep_literal_braces() {
        let e = event("x");
        let text = fill("{{{trigger}}} {subject} {nope}", &e, escape_markdown);
        assert_eq!(text, "{sync-failed} fix \\*all\\* \\[things\\](http://evil.example) {nope}");
        assert_eq!(fill("{app}", &e, escape_html), "web&lt;!here&gt;");
    }

    #[test]
    fn teams_posts_one_adaptive_card() {
        let e = event("x");
        let text = fill(default_template(e.trigger), &e, escape_markdown);
        let body: serde_json::Value = serde_json::from_slice(&teams(&e, &text)).unwrap();
        assert_eq!(body["type"], "message");
        let a = &body["attachments"][0];
        assert_eq!(a["contentType"], "application/vnd.microsoft.card.adaptive");
        assert_eq!(a["content"]["type"], "AdaptiveCard");
        assert_eq!(a["content"]["body"][0]["text"], text.as_str());
        assert_eq!(a["content"]["body"][1]["facts"][0]["value"], "web\\<!here\\>");
    }

    #[test]
    fn the_webhook_signature_is_the_hmac_of_the_exact_body() {
        let e = event("x");
        let body = webhook(&e, "t", "2026-12-03T10:00:00Z".parse().unwrap());
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["application"], "web<!here>");
        assert_eq!(json["at"], "2026-12-03T10:00:00Z");
        let sig = signature(b"key", &body);
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"key").unwrap();
        mac.update(&body);
        let hex = sig.strip_prefix("sha256=").unwrap();
        assert!(mac.verify_slice(&hex::decode(hex).unwrap()).is_ok());
        assert_ne!(signature(b"other", &body), sig);
    }

    #[test]
    fn mail_escapes_html_and_keeps_the_subject_one_line() {
        let e = event("<script>alert(1)</script>\r\nBcc: x@evil");
        let m = mail(&e, default_template(e.trigger));
        assert!(!m.subject.contains('\n') && !m.subject.contains('\r'));
        assert!(!m.html.contains("<script>"), "{}", m.html);
        assert!(m.html.contains("&lt;script&gt;"));
        assert!(m.plain.contains("<script>"), "plain text is not escaped");
    }
}
