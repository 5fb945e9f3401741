//! The shared webhook secret, kept out of logs.

use std::fmt;

/// A webhook secret: the HMAC key (Gitea, Forgejo, Gogs, GitHub, Bitbucket) or the plain
/// token (GitLab `X-Gitlab-Token`), as raw bytes.
///
/// `Debug` prints `Secret(***)`; there is no `Display` and no serialization, so the bytes
/// cannot end up in a log line or a response by accident. An empty secret is treated as
/// "no secret": it never verifies a delivery (an empty HMAC key is public knowledge, and
/// Gitea sends empty digests when its hook has no secret).
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps the secret bytes exactly as given (no trimming; see
    /// [`Secret::has_trailing_newline`]).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// True when the secret has no bytes (and therefore never verifies anything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when the secret ends in `\n` or `\r`: usually a file written with a trailing
    /// newline, which never matches what was typed into the forge (coreos/fedora-coreos-pipeline
    /// PR #663; GitLab itself strips line breaks from its token). Worth a startup warning.
    pub fn has_trailing_newline(&self) -> bool {
        matches!(self.0.last(), Some(b'\n' | b'\r'))
    }

    /// The secret bytes, for the verifiers in this module only.
    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl From<Vec<u8>> for Secret {
    fn from(bytes: Vec<u8>) -> Self {
        Secret(bytes)
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Secret(text.as_bytes().to_vec())
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Self {
        Secret(text.into_bytes())
    }
}

impl Drop for Secret {
    /// Best effort: overwrite the bytes before the allocation is freed. Without `unsafe`
    /// volatile writes the optimizer may elide this; it is hygiene, not a guarantee.
    fn drop(&mut self) {
        self.0.iter_mut().for_each(|b| *b = 0);
        std::hint::black_box(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_bytes() {
        let secret = Secret::from("s3cr3t-for-tests");
        let shown = format!("{secret:?} {secret:#?}");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert!(!shown.contains("s3cr3t"));
        assert!(!shown.contains("115")); // first byte as a number
    }

    #[test]
    fn debug_of_containing_struct_hides_bytes() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Holder {
            secret: Option<Secret>,
        }
        let shown = format!("{:?}", Holder { secret: Some(Secret::new(b"hunter2".to_vec())) });
        assert_eq!(shown, "Holder { secret: Some(Secret(***)) }");
    }

    #[test]
    fn trailing_newline_is_detected() {
        assert!(Secret::from("abc\n").has_trailing_newline());
        assert!(Secret::from("abc\r").has_trailing_newline());
        assert!(!Secret::from("abc").has_trailing_newline());
        assert!(!Secret::from("").has_trailing_newline());
        assert!(Secret::from("").is_empty());
    }
}
