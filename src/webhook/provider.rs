//! Which forge sent a delivery, recognised from headers alone.

use serde::{Deserialize, Serialize};

/// Case-insensitive view of request headers as received, `(name, value)` in send order.
///
/// Values are trimmed of surrounding spaces and tabs (HTTP optional whitespace, RFC 9110
/// §5.5). When a name repeats, the first occurrence wins.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Headers<'a> {
    pairs: &'a [(String, String)],
}

impl<'a> Headers<'a> {
    pub(crate) fn new(pairs: &'a [(String, String)]) -> Self {
        Headers { pairs }
    }

    /// First value of `name` (ASCII case-insensitive), trimmed.
    pub(crate) fn get(&self, name: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(n, _)| n.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim_matches([' ', '\t']))
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// The forge that sent a delivery, or the one a repository's deliveries come from
/// (`webhookProvider` of a repository in the policy). Serializes (and reads) as `gitea`,
/// `forgejo`, `gogs`, `github`, `gitlab`, `bitbucket-cloud`, `bitbucket-server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Provider {
    /// Gitea (`X-Gitea-Event`); also sends every Gogs and GitHub-style header.
    #[serde(rename = "gitea")]
    Gitea,
    /// Forgejo (`X-Forgejo-Event`); also sends every Gitea, Gogs and GitHub-style header.
    #[serde(rename = "forgejo")]
    Forgejo,
    /// Gogs (`X-Gogs-Event` without `X-Gitea-Event`).
    #[serde(rename = "gogs")]
    Gogs,
    /// GitHub.com or GitHub Enterprise Server (`X-GitHub-Event` alone).
    #[serde(rename = "github")]
    GitHub,
    /// GitLab (`X-Gitlab-Event`).
    #[serde(rename = "gitlab")]
    GitLab,
    /// Bitbucket Cloud (`X-Event-Key` with `X-Hook-UUID` or `X-Request-UUID`).
    #[serde(rename = "bitbucket-cloud")]
    BitbucketCloud,
    /// Bitbucket Server / Data Center (`X-Event-Key` without the Cloud headers).
    #[serde(rename = "bitbucket-server")]
    BitbucketServer,
}

impl Provider {
    /// Recognises the sender from its event header, most specific first, because senders
    /// add compatibility headers: Forgejo sends `X-Forgejo-*` plus all of Gitea's, Gitea
    /// sends `X-Gitea-*`, `X-Gogs-*` and `X-GitHub-*`, Gogs sends `X-Gogs-*` and
    /// `X-GitHub-*`. Order: `X-Forgejo-Event` > `X-Gitea-Event` > `X-Gogs-Event` >
    /// `X-Gitlab-Event` > `X-Event-Key` (Bitbucket) > `X-GitHub-Event`.
    ///
    /// Sources: Forgejo `services/webhook/shared/payloader.go` (`AddDefaultHeaders`), Gitea
    /// `services/webhook/deliver.go` (`addDefaultHeaders`), Gogs `internal/database/webhook.go`,
    /// GitHub "Webhook events and payloads" (delivery headers), GitLab
    /// `app/services/web_hook_service.rb`, Atlassian "Event payloads" (Cloud and Server).
    /// `None` when no provider's event header is present.
    pub fn detect(headers: &[(String, String)]) -> Option<Provider> {
        Self::detect_in(&Headers::new(headers))
    }

    pub(crate) fn detect_in(h: &Headers<'_>) -> Option<Provider> {
        if h.contains("x-forgejo-event") {
            Some(Provider::Forgejo)
        } else if h.contains("x-gitea-event") {
            Some(Provider::Gitea)
        } else if h.contains("x-gogs-event") {
            Some(Provider::Gogs)
        } else if h.contains("x-gitlab-event") {
            Some(Provider::GitLab)
        } else if h.contains("x-event-key") {
            if h.contains("x-hook-uuid") || h.contains("x-request-uuid") {
                Some(Provider::BitbucketCloud)
            } else {
                Some(Provider::BitbucketServer)
            }
        } else if h.contains("x-github-event") {
            Some(Provider::GitHub)
        } else {
            None
        }
    }

    /// Name as serialized (`gitea`, …, `bitbucket-server`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Gitea => "gitea",
            Provider::Forgejo => "forgejo",
            Provider::Gogs => "gogs",
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::BitbucketCloud => "bitbucket-cloud",
            Provider::BitbucketServer => "bitbucket-server",
        }
    }

    /// Gitea, Forgejo and Gogs share payloads and signing rules (form mode signs the JSON).
    pub(crate) fn is_gitea_family(self) -> bool {
        matches!(self, Provider::Gitea | Provider::Forgejo | Provider::Gogs)
    }

    /// Whether a delivery recognised as coming from `sender` may authenticate with the
    /// secret of a repository whose deliveries come from `self`: the same forge or one of
    /// its family, which signs the same way (Gitea, Forgejo and Gogs: Forgejo and Gogs
    /// servers answer to a repository configured `gitea`; Bitbucket Cloud and Server).
    /// So a GitHub repository's HMAC key never passes as a GitLab plain token, nor a
    /// GitLab token as an HMAC key.
    pub fn signs_like(self, sender: Provider) -> bool {
        match self {
            Provider::Gitea | Provider::Forgejo | Provider::Gogs => sender.is_gitea_family(),
            Provider::GitHub => sender == Provider::GitHub,
            Provider::GitLab => sender == Provider::GitLab,
            Provider::BitbucketCloud | Provider::BitbucketServer => {
                matches!(sender, Provider::BitbucketCloud | Provider::BitbucketServer)
            }
        }
    }

    /// Header naming the event: `push`, `Push Hook`, `repo:push`, ….
    pub(crate) fn event_header(self) -> &'static str {
        match self {
            Provider::Gitea => "x-gitea-event",
            Provider::Forgejo => "x-forgejo-event",
            Provider::Gogs => "x-gogs-event",
            Provider::GitHub => "x-github-event",
            Provider::GitLab => "x-gitlab-event",
            Provider::BitbucketCloud | Provider::BitbucketServer => "x-event-key",
        }
    }

    /// The finer event header of the Gitea family (`pull_request_sync` under
    /// `pull_request`); GitLab's counterpart, `object_kind`, is in the body.
    pub(crate) fn event_type<'a>(self, h: &Headers<'a>) -> Option<&'a str> {
        match self {
            Provider::Gitea => h.get("x-gitea-event-type"),
            Provider::Forgejo => h.get("x-forgejo-event-type"),
            Provider::Gogs => h.get("x-gogs-event-type"),
            _ => None,
        }
    }

    /// Delivery id used for deduplication: `X-Gitea-/X-Forgejo-/X-Gogs-Delivery`,
    /// `X-GitHub-Delivery` (kept on redelivery), GitLab `Idempotency-Key` (kept on retry,
    /// 17.4+) else `X-Gitlab-Event-UUID`, Bitbucket Cloud `X-Request-UUID`, Bitbucket
    /// Server `X-Request-Id`.
    pub(crate) fn delivery_id<'a>(self, h: &Headers<'a>) -> Option<&'a str> {
        match self {
            Provider::Gitea => h.get("x-gitea-delivery"),
            Provider::Forgejo => h.get("x-forgejo-delivery"),
            Provider::Gogs => h.get("x-gogs-delivery"),
            Provider::GitHub => h.get("x-github-delivery"),
            Provider::GitLab => {
                h.get("idempotency-key").filter(|v| !v.is_empty()).or_else(|| h.get("x-gitlab-event-uuid"))
            }
            Provider::BitbucketCloud => h.get("x-request-uuid"),
            Provider::BitbucketServer => h.get("x-request-id"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| ((*n).to_owned(), "push".to_owned())).collect()
    }

    #[test]
    fn detection_handles_compatibility_headers() {
        let gitea = ["X-GitHub-Event", "X-Gitea-Event", "X-Gogs-Event", "X-Hub-Signature"];
        let forgejo = ["X-Forgejo-Event", "X-GitHub-Event", "X-Gitea-Event", "X-Gogs-Event"];
        let cases: &[(&[&str], Option<Provider>)] = &[
            (&gitea, Some(Provider::Gitea)),
            (&forgejo, Some(Provider::Forgejo)),
            (&["X-Github-Event", "X-Gogs-Event"], Some(Provider::Gogs)),
            (&["X-GitHub-Event"], Some(Provider::GitHub)),
            (&["x-github-event"], Some(Provider::GitHub)),
            (&["X-Gitlab-Event"], Some(Provider::GitLab)),
            (&["X-Event-Key", "X-Hook-UUID"], Some(Provider::BitbucketCloud)),
            (&["X-Event-Key", "X-Request-UUID"], Some(Provider::BitbucketCloud)),
            (&["X-Event-Key", "X-Request-Id"], Some(Provider::BitbucketServer)),
            (&["Content-Type", "User-Agent"], None),
            (&[], None),
        ];
        for (names, want) in cases {
            assert_eq!(Provider::detect(&headers(names)), *want, "{names:?}");
        }
    }

    #[test]
    fn header_lookup_is_case_insensitive_and_trims() {
        let pairs = vec![("X-Thing".to_owned(), "  first\t".to_owned()), ("x-thing".to_owned(), "second".to_owned())];
        let h = Headers::new(&pairs);
        assert_eq!(h.get("X-THING"), Some("first"));
        assert_eq!(h.get("x-other"), None);
    }

    #[test]
    fn serialized_names() {
        for p in [
            Provider::Gitea,
            Provider::Forgejo,
            Provider::Gogs,
            Provider::GitHub,
            Provider::GitLab,
            Provider::BitbucketCloud,
            Provider::BitbucketServer,
        ] {
            assert_eq!(serde_json::to_value(p).ok(), Some(serde_json::Value::from(p.as_str())));
        }
    }
}
