//! `notifications:` of a policy: where plumb tells people what happened (providers) and
//! which events go where (routes), in the spirit of Flux's `Provider` + `Alert` and
//! Argo CD Notifications' services + triggers (see [`crate::notify`]).
//!
//! ```yaml
//! notifications:
//!   providers:
//!     - name: team-chat
//!       type: slack                  # slack | teams | webhook | smtp
//!       urlFile: /etc/plumb/slack-url   # or urlSecretRef: {name, key}, or url: (not secret)
//!     - name: audit
//!       type: webhook                # JSON body signed `X-Plumb-Signature: sha256=<hex>`
//!       url: https://audit.example.com/plumb
//!       secretRef: {name: plumb-notify, key: hmac}   # or secretFile: the HMAC key
//!     - name: oncall-mail
//!       type: smtp
//!       url: smtp://mail.example.com:587   # smtp:// STARTTLS; smtps:// TLS; smtp+plain:// a local relay
//!       from: plumb@example.com
//!       to: [oncall@example.com]
//!       username: plumb              # with passwordFile / passwordSecretRef
//!       passwordSecretRef: {name: plumb-notify, key: smtp}
//!   routes:
//!     - triggers: [sync-failed, render-failed, health-degraded]   # empty: every trigger
//!       environments: [prod]         # empty: every environment
//!       applications: []             # empty: every application
//!       providers: [team-chat, oncall-mail]
//!       template: "{app} ({environment}) {trigger} at {short}: {message}"   # optional
//! ```
//!
//! Addresses come only from the policy and its secrets, never from Git. Relative files
//! are resolved against the policy file's directory.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::SecretRef;

/// What happened to an application that a route may send on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A sync failed or a guard refused it.
    SyncFailed,
    /// A sync applied everything planned: the revision is deployed.
    SyncSucceeded,
    /// The application's health became Degraded.
    HealthDegraded,
    /// Healthy again after a Degraded that was told.
    HealthRecovered,
    /// The commit does not render (broken YAML, a failing kustomize or Helm).
    RenderFailed,
    /// A prune is held until a person approves it (`Prune=confirm`, data-loss classes).
    PruneWaitingApproval,
    /// `verifyCommits`: the newest revision is not signed by a trusted key.
    UnverifiedRevision,
}

impl Trigger {
    /// Every trigger, in the order messages of one pass are sent.
    pub const ALL: [Trigger; 7] = [
        Trigger::RenderFailed,
        Trigger::UnverifiedRevision,
        Trigger::SyncFailed,
        Trigger::SyncSucceeded,
        Trigger::PruneWaitingApproval,
        Trigger::HealthDegraded,
        Trigger::HealthRecovered,
    ];

    /// The name as written in the policy (`sync-failed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::SyncFailed => "sync-failed",
            Trigger::SyncSucceeded => "sync-succeeded",
            Trigger::HealthDegraded => "health-degraded",
            Trigger::HealthRecovered => "health-recovered",
            Trigger::RenderFailed => "render-failed",
            Trigger::PruneWaitingApproval => "prune-waiting-approval",
            Trigger::UnverifiedRevision => "unverified-revision",
        }
    }
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `notifications:` (see the module docs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Notifications {
    /// Where messages go.
    #[serde(default)]
    pub providers: Vec<NotificationProvider>,
    /// Which triggers of which applications go to which providers.
    #[serde(default)]
    pub routes: Vec<Route>,
}

/// The kind of a [`NotificationProvider`]: the body it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// Slack incoming webhook (and compatibles: Mattermost, Rocket.Chat):
    /// `{"text": "…"}`, escaped for Slack's formatting.
    Slack,
    /// Microsoft Teams incoming webhook or Workflows: a message with one Adaptive Card.
    Teams,
    /// Any HTTP endpoint: a JSON event, its body signed with HMAC-SHA256.
    Webhook,
    /// E-mail over SMTP: a plain text and an HTML part.
    Smtp,
}

/// One destination of messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotificationProvider {
    /// Name the routes refer to (a DNS-1123 label).
    pub name: Spanned<String>,
    /// What is sent.
    #[serde(rename = "type")]
    pub type_: ProviderType,
    /// The address, written in the policy: `https://…` (or `http://`) for the HTTP
    /// types; for `smtp`, `smtp://host[:port]` (STARTTLS required, default port 587),
    /// `smtps://host[:port]` (TLS, 465) or `smtp+plain://host[:port]` (no TLS: a relay
    /// on the same node or pod, 25).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// A file holding the address instead of `url` (a Slack or Teams webhook URL is a
    /// secret: whoever knows it can post). One trailing newline stripped.
    #[serde(default)]
    pub url_file: Option<Spanned<PathBuf>>,
    /// The address from a Secret in plumb's namespace instead (see [`crate::secret_refs`]).
    #[serde(default)]
    pub url_secret_ref: Option<SecretRef>,
    /// `webhook`: a file holding the HMAC-SHA256 key of `X-Plumb-Signature`.
    #[serde(default)]
    pub secret_file: Option<Spanned<PathBuf>>,
    /// `webhook`: the HMAC key from a Secret instead of `secretFile`.
    #[serde(default)]
    pub secret_ref: Option<SecretRef>,
    /// `smtp`: the sender, `plumb@example.com` or `plumb <plumb@example.com>`.
    #[serde(default)]
    pub from: Option<String>,
    /// `smtp`: the recipients.
    #[serde(default)]
    pub to: Vec<String>,
    /// `smtp`: the user name of SMTP AUTH (with `passwordFile` or `passwordSecretRef`).
    #[serde(default)]
    pub username: Option<String>,
    /// `smtp`: a file holding the SMTP password.
    #[serde(default)]
    pub password_file: Option<Spanned<PathBuf>>,
    /// `smtp`: the password from a Secret instead of `passwordFile`.
    #[serde(default)]
    pub password_secret_ref: Option<SecretRef>,
}

impl NotificationProvider {
    /// A provider of `type_` named `name` posting to `url`, with nothing else set
    /// (`--notify-url`'s Slack provider; tests).
    pub fn at(name: Spanned<String>, type_: ProviderType, url: Spanned<String>) -> Self {
        Self {
            name,
            type_,
            url: Some(url),
            url_file: None,
            url_secret_ref: None,
            secret_file: None,
            secret_ref: None,
            from: None,
            to: Vec::new(),
            username: None,
            password_file: None,
            password_secret_ref: None,
        }
    }
}

/// Which messages go where: an event matches when its trigger, environment and
/// application are each listed (an empty list matches all).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Route {
    /// The triggers sent (empty: all).
    #[serde(default)]
    pub triggers: Vec<Trigger>,
    /// The environments whose applications are sent (empty: all).
    #[serde(default)]
    pub environments: Vec<String>,
    /// The applications sent (empty: all).
    #[serde(default)]
    pub applications: Vec<String>,
    /// The providers the message goes to (names of `providers`).
    pub providers: Vec<Spanned<String>>,
    /// The text of the message instead of the trigger's own, with placeholders
    /// ([`TEMPLATE_FIELDS`]) that are replaced by values escaped for each provider.
    #[serde(default)]
    pub template: Option<Spanned<String>>,
}

/// The placeholders a route's `template` may use: `{app}`, `{environment}`,
/// `{revision}` (the full commit), `{short}` (its first 7 characters), `{subject}` (the
/// commit's subject line), `{trigger}`, `{result}` (of a sync: `failed`, `refused`,
/// `succeeded`) and `{message}` (what happened, cut at 4,000 characters).
pub const TEMPLATE_FIELDS: [&str; 8] =
    ["app", "environment", "revision", "short", "subject", "trigger", "result", "message"];

/// The placeholders of `template` (`{name}`) that are not [`TEMPLATE_FIELDS`], and
/// whether a brace is left open. `{{` and `}}` are literal braces.
pub fn template_problems(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
            continue;
        }
        if let Some(after) = tail.strip_prefix('}') {
            out.push("a `}` without its `{` (write `}}` for a brace)".to_string());
            rest = after;
            continue;
        }
        match tail.find('}') {
            Some(end) => {
                let name = &tail[1..end];
                if !TEMPLATE_FIELDS.contains(&name) {
                    out.push(format!("unknown placeholder `{{{name}}}` (known: {})", TEMPLATE_FIELDS.join(", ")));
                }
                rest = &tail[end + 1..];
            }
            None => {
                out.push("a `{` left open (write `{{` for a brace)".to_string());
                break;
            }
        }
    }
    out
}

impl Notifications {
    /// Relative files joined to `base` (the policy file's directory).
    pub(super) fn resolve(&mut self, base: &Path) {
        for p in &mut self.providers {
            for f in [&mut p.url_file, &mut p.secret_file, &mut p.password_file].into_iter().flatten() {
                if f.value.is_relative() {
                    f.value = base.join(&f.value);
                }
            }
        }
    }

    /// What is wrong, each with its policy line (0 when not known): names not unique
    /// or not DNS-1123 labels, no address or two, an address that is not of the
    /// provider's scheme or carries credentials, a webhook without a key, an `smtp`
    /// provider without `from` and `to`, a route naming an unknown provider or none, an
    /// unknown template placeholder; with `files`, a secret file that does not exist.
    pub fn problems(&self, files: bool) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        let mut names = std::collections::HashSet::new();
        for p in &self.providers {
            let at = p.name.referenced.line() as u32;
            let name = &p.name.value;
            if !super::validate::is_dns_label(name) {
                out.push((at, format!("notifications: provider `{name}`: name must be a DNS-1123 label")));
            }
            if !names.insert(name.as_str()) {
                out.push((at, format!("notifications: provider `{name}` is defined twice")));
            }
            out.extend(p.problems(files).into_iter().map(|m| (at, format!("notifications: provider `{name}`: {m}"))));
        }
        for (i, r) in self.routes.iter().enumerate() {
            let at = r.providers.first().map_or(0, |p| p.referenced.line() as u32);
            if r.providers.is_empty() {
                out.push((at, format!("notifications: routes[{i}] names no providers")));
            }
            for p in r.providers.iter().filter(|p| !names.contains(p.value.as_str())) {
                let at = p.referenced.line() as u32;
                out.push((at, format!("notifications: routes[{i}]: no provider named `{}`", p.value)));
            }
            if let Some(t) = &r.template {
                for m in template_problems(&t.value) {
                    out.push((t.referenced.line() as u32, format!("notifications: routes[{i}].template: {m}")));
                }
            }
        }
        out
    }
}

impl NotificationProvider {
    /// What is wrong with this provider (see [`Notifications::problems`]).
    fn problems(&self, files: bool) -> Vec<String> {
        let mut out = Vec::new();
        let given = [self.url.is_some(), self.url_file.is_some(), self.url_secret_ref.is_some()];
        match given.iter().filter(|g| **g).count() {
            0 => out.push("give its address: url, urlFile or urlSecretRef".to_string()),
            1 => {}
            _ => out.push("url, urlFile and urlSecretRef: give one".to_string()),
        }
        if let Some(url) = &self.url
            && let Err(m) = check_url(self.type_, &url.value)
        {
            out.push(m);
        }
        let webhook = self.type_ == ProviderType::Webhook;
        let key = self.secret_file.is_some() || self.secret_ref.is_some();
        if webhook && !key {
            out.push("a webhook's body is signed: give secretFile or secretRef (the HMAC key)".into());
        }
        if !webhook && key {
            out.push("secretFile/secretRef sign only `webhook` bodies".into());
        }
        if self.secret_file.is_some() && self.secret_ref.is_some() {
            out.push("secretFile and secretRef: give one".into());
        }
        let smtp = self.type_ == ProviderType::Smtp;
        let password = self.password_file.is_some() || self.password_secret_ref.is_some();
        if smtp {
            if self.from.as_deref().is_none_or(str::is_empty) {
                out.push("an e-mail needs `from`".into());
            }
            if self.to.is_empty() {
                out.push("an e-mail needs `to` (one or more addresses)".into());
            }
            if password != self.username.is_some() {
                out.push("username and passwordFile/passwordSecretRef go together".into());
            }
            if password
                && let Some(url) = &self.url
                && let Err(m) = plain_credentials(&url.value)
            {
                out.push(m);
            }
        } else if self.from.is_some() || !self.to.is_empty() || self.username.is_some() || password {
            out.push("from, to, username and password are for `smtp` providers".into());
        }
        if self.password_file.is_some() && self.password_secret_ref.is_some() {
            out.push("passwordFile and passwordSecretRef: give one".into());
        }
        if files {
            for f in [&self.url_file, &self.secret_file, &self.password_file].into_iter().flatten() {
                if !f.value.is_file() {
                    out.push(format!("{}: no such file", f.value.display()));
                }
            }
        }
        out
    }
}

/// Whether `url` suits a provider of type `kind`: an absolute `http(s)://` URL for the
/// HTTP types, `smtp://`, `smtps://` or `smtp+plain://` with a host for `smtp`; no user
/// or password in it (they belong in files).
///
/// # Errors
/// What is wrong, naming the URL without its credentials.
pub fn check_url(kind: ProviderType, url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("url is not a URL: {e}"))?;
    let schemes: &[&str] = match kind {
        ProviderType::Smtp => &["smtp", "smtps", "smtp+plain"],
        _ => &["https", "http"],
    };
    if !schemes.contains(&parsed.scheme()) {
        return Err(format!("url scheme `{}` is not one of {}", parsed.scheme(), schemes.join(", ")));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("url names no host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url carries credentials: put them in a file or Secret".into());
    }
    Ok(())
}

/// Why `url` may not carry SMTP AUTH credentials, if it may not: `smtp+plain://` sends
/// the password in the clear, so only to a relay on this host (a loopback address or
/// `localhost`); `smtp://` (STARTTLS required) and `smtps://` may.
///
/// # Errors
/// What is wrong, naming the host.
pub fn plain_credentials(url: &str) -> Result<(), String> {
    let Ok(parsed) = url::Url::parse(url) else { return Ok(()) };
    if parsed.scheme() != "smtp+plain" {
        return Ok(());
    }
    // a scheme URLs do not know: its host is opaque text, an address included
    let host = parsed.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Ok(());
    }
    Err(format!(
        "smtp+plain:// would send the password in the clear to {}: use smtp:// (STARTTLS) or smtps://, or a relay on loopback",
        host
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_goes_in_the_clear_only_to_loopback() {
        for ok in [
            "smtp://mail.example.com",
            "smtps://mail.example.com",
            "smtp+plain://127.0.0.1:25",
            "smtp+plain://[::1]:25",
            "smtp+plain://localhost",
        ] {
            assert!(plain_credentials(ok).is_ok(), "{ok}");
        }
        let err = plain_credentials("smtp+plain://mail.example.com:25").expect_err("no credentials");
        assert!(err.contains("in the clear to mail.example.com"), "{err}");
        assert!(plain_credentials("smtp+plain://10.0.0.1").is_err());
    }

    #[test]
    fn templates_name_known_fields_only() {
        assert!(template_problems("{app} ({environment}) {{literal}} {message}").is_empty());
        assert_eq!(template_problems("{app} {secret}").len(), 1);
        assert_eq!(template_problems("{app").len(), 1);
        assert_eq!(template_problems("app}").len(), 1);
    }

    /// Every problem is named with its policy line.
    #[test]
    fn problems_are_reported_with_their_line() {
        let text = "notifications:\n  providers:\n    - {name: hook, type: webhook, url: \"https://u:p@x.example/\"}\n    - {name: mail, type: smtp, url: \"smtp://m.example\"}\n  routes:\n    - {providers: [hook, nope], environments: [staging], template: \"{secret}\"}\n";
        let path = Path::new("p.yaml");
        let err = crate::config::load_str(text, path, Path::new(".")).err().map(|e| e.to_string()).unwrap_or_default();
        for want in [
            "p.yaml:3: notifications: provider `hook`: url carries credentials",
            "p.yaml:3: notifications: provider `hook`: a webhook's body is signed",
            "p.yaml:4: notifications: provider `mail`: an e-mail needs `from`",
            "p.yaml:4: notifications: provider `mail`: an e-mail needs `to`",
            "p.yaml:6: notifications: routes[0]: no provider named `nope`",
            "p.yaml:6: notifications: routes[0].template: unknown placeholder `{secret}`",
            "p.yaml:6: notifications: routes[0]: no environment named `staging`",
        ] {
            assert!(err.contains(want), "{want}\nnot in:\n{err}");
        }
    }

    #[test]
    fn urls_fit_their_provider() {
        assert!(check_url(ProviderType::Slack, "https://hooks.example.com/x").is_ok());
        assert!(check_url(ProviderType::Slack, "smtp://mail").is_err());
        assert!(check_url(ProviderType::Smtp, "smtp+plain://127.0.0.1:2525").is_ok());
        assert!(check_url(ProviderType::Webhook, "https://u:p@example.com/").is_err());
        assert!(check_url(ProviderType::Teams, "file:///etc/passwd").is_err());
    }
}
