//! Signed commits and tags, verified in process (pure: bytes and keys in, a verdict out).
//!
//! An environment that sets `verifyCommits` trusts a set of keys: SSH keys in Git's
//! allowed signers format ([`ssh`]) and/or OpenPGP keys in an armored keyring
//! ([`openpgp`]). A revision is deployable when the commit (mode `head`) or the annotated
//! tag (mode `tag`) is signed by one of them, as `git verify-commit` / `git verify-tag`
//! would say with the same keys — but without running `gpg` or `ssh-keygen`:
//!
//! 1. [`object::parse`] splits the raw object (`git cat-file commit|tag`) into the signed
//!    payload and the armored signature, as gitformat-signature(5) describes;
//! 2. the armor's first line picks the format; [`ssh::verify`] or [`openpgp::verify`]
//!    checks the signature over the payload and the key's standing at the object's
//!    committer (tagger) time;
//! 3. the answer is [`Verified`] (who signed) or [`Unverified`] (why not).
//!
//! **Bounded cost**: an object over [`Limits::max_object_bytes`] (1 MiB by default) or a
//! signature over [`Limits::max_signature_bytes`] (64 KiB) is refused before any decoding;
//! key files over [`MAX_KEY_FILE_BYTES`] (1 MiB) are refused by whoever reads them.

pub mod object;
pub mod openpgp;
pub mod ssh;

pub use object::{ObjectKind, SignatureFormat, SignedObject};
pub use openpgp::Keyring;
pub use ssh::AllowedSigners;

/// The largest allowed signers file or keyring plumb reads, in bytes.
pub const MAX_KEY_FILE_BYTES: usize = 1 << 20;

/// Size limits checked before a signature is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest commit or tag object, in bytes (default 1 MiB).
    pub max_object_bytes: usize,
    /// The largest armored signature, in bytes (default 64 KiB; an OpenPGP signature by a
    /// 16384-bit RSA key is under 3 KiB, an SSH one under 3 KiB).
    pub max_signature_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_object_bytes: 1 << 20, max_signature_bytes: 64 << 10 }
    }
}

/// The keys an environment (or an application) trusts.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    /// SSH signers (`allowedSignersFile` / `allowedSignersRef`), if configured.
    pub ssh: Option<AllowedSigners>,
    /// OpenPGP keys (`openpgpKeyringFile` / `openpgpKeyringRef`), if configured.
    pub openpgp: Option<Keyring>,
}

/// A signature that verified: who signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// SSH or OpenPGP.
    pub format: SignatureFormat,
    /// The signing key: `SHA256:…` (SSH, as `ssh-keygen -l` prints it) or the upper-case
    /// hex fingerprint of the OpenPGP (sub)key that signed.
    pub fingerprint: String,
    /// The principals of the allowed signers line (SSH) or the first user id of the key
    /// (OpenPGP).
    pub signer: String,
}

/// `t` (seconds since the epoch) as RFC 3339 UTC, or the number when out of range.
fn when(t: i64) -> String {
    jiff::Timestamp::from_second(t).map_or_else(|_| t.to_string(), |ts| ts.to_string())
}

/// Why an object is not deployable. Each variant carries what a person needs to act:
/// the key's fingerprint, the signer, the times (seconds since the Unix epoch).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The object carries no signature at all.
    #[error("unsigned")]
    Unsigned,
    /// Signed by a key none of the trusted keys is (nor a subkey of).
    #[error("signed by an unknown key {fingerprint}")]
    UnknownKey {
        /// The fingerprint (SSH) or the issuer fingerprint / key id (OpenPGP).
        fingerprint: String,
    },
    /// The key is trusted but the signature does not verify over this object (the object
    /// was changed after signing, or the signature was made for something else).
    #[error("bad signature by {fingerprint}: {why}")]
    BadSignature {
        /// The signing key.
        fingerprint: String,
        /// What failed.
        why: String,
    },
    /// The OpenPGP key had expired at the signature's creation or the committer time.
    #[error("signed by {signer} ({fingerprint}) whose key expired at {}, before {}", when(*expired_at), when(*at))]
    KeyExpired {
        /// The key (or subkey).
        fingerprint: String,
        /// Its user id.
        signer: String,
        /// When it expired, seconds since the epoch.
        expired_at: i64,
        /// The time judged, seconds since the epoch.
        at: i64,
    },
    /// The OpenPGP key (or the subkey) carries a revocation.
    #[error("signed by {signer} ({fingerprint}) whose key is revoked")]
    KeyRevoked {
        /// The key (or subkey).
        fingerprint: String,
        /// Its user id.
        signer: String,
    },
    /// The object's time is outside the signer's validity window (`valid-after` /
    /// `valid-before` of an allowed signers line, or before an OpenPGP key's creation).
    #[error("signed by {signer} ({fingerprint}) at {}, outside its validity{}{}",
        when(*at),
        valid_after.map(|t| format!(" from {}", when(t))).unwrap_or_default(),
        valid_before.map(|t| format!(" until {}", when(t))).unwrap_or_default())]
    OutsideValidity {
        /// The key.
        fingerprint: String,
        /// The principals or user id.
        signer: String,
        /// The committer (tagger) or signature time judged, seconds since the epoch.
        at: i64,
        /// Start of the window, if any, seconds since the epoch.
        valid_after: Option<i64>,
        /// End of the window, if any, seconds since the epoch.
        valid_before: Option<i64>,
    },
    /// The allowed signers line of the key restricts `namespaces=` and `git` is not among
    /// them.
    #[error("the key {fingerprint} of {principal} (allowed signers line {line}) may not sign in the namespace git")]
    NamespaceNotAllowed {
        /// The key.
        fingerprint: String,
        /// The principals of the line.
        principal: String,
        /// The line of the allowed signers file.
        line: usize,
    },
    /// The signature's format is one plumb does not verify (X.509).
    #[error("a {format} signature, which plumb does not verify (use ssh or openpgp)")]
    UnsupportedFormat {
        /// Git's `gpg.format` name.
        format: &'static str,
    },
    /// The object or the signature does not parse (bad armor, bad base64, truncated blob).
    #[error("malformed: {why}")]
    Malformed {
        /// What did not parse.
        why: String,
    },
    /// The object or its signature is over the size limit ([`Limits`]).
    #[error("the {what} is {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        /// `object` or `signature`.
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

impl Unverified {
    /// A short, fixed name of the reason (`unsigned`, `unknown-key`, …): a metric label
    /// and the start of a condition's message.
    pub fn reason(&self) -> &'static str {
        match self {
            Unverified::Unsigned => "unsigned",
            Unverified::UnknownKey { .. } => "unknown-key",
            Unverified::BadSignature { .. } => "bad-signature",
            Unverified::KeyExpired { .. } => "key-expired",
            Unverified::KeyRevoked { .. } => "key-revoked",
            Unverified::OutsideValidity { .. } => "outside-validity",
            Unverified::NamespaceNotAllowed { .. } => "namespace-not-allowed",
            Unverified::UnsupportedFormat { .. } => "unsupported-format",
            Unverified::Malformed { .. } => "malformed",
            Unverified::TooLarge { .. } => "too-large",
        }
    }
}

/// Verifies a raw commit or tag object (as `git cat-file` prints it) against `keys`.
pub fn verify_object(
    kind: ObjectKind,
    raw: &[u8],
    keys: &TrustedKeys,
    limits: &Limits,
) -> Result<Verified, Unverified> {
    let object = object::parse(kind, raw, limits)?;
    verify_parsed(&object, keys)
}

/// Verifies an object already split by [`object::parse`].
pub fn verify_parsed(object: &SignedObject, keys: &TrustedKeys) -> Result<Verified, Unverified> {
    let Some(signature) = &object.signature else {
        return Err(Unverified::Unsigned);
    };
    match object.format() {
        Some(SignatureFormat::Ssh) => ssh::verify(signature, &object.payload, object.time, keys.ssh.as_ref()),
        Some(SignatureFormat::OpenPgp) => {
            openpgp::verify(signature, &object.payload, object.time, keys.openpgp.as_ref())
        }
        Some(f @ SignatureFormat::X509) => Err(Unverified::UnsupportedFormat { format: f.as_str() }),
        None => Err(Unverified::Malformed { why: "a gpgsig header without a known armor".into() }),
    }
}

#[cfg(test)]
mod tests;
