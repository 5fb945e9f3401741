//! OpenPGP signatures (`gpg.format openpgp`, Git's default) checked against an armored
//! keyring (`gpg --armor --export KEY…`), with rpgp (the `pgp` crate, RFC 9580) — no `gpg`.
//!
//! A signature verifies when its issuer (fingerprint, or key id for old signatures) is the
//! primary key or a signing subkey of a keyring key, the cryptographic check passes over the
//! payload, the key (and the subkey) carries no revocation signature that verifies, and the
//! key existed and had not expired (RFC 9580 §5.2.3.18, key expiration time of the newest
//! self-signature) both at the signature's creation time and at the object's committer (or
//! tagger) time. Any revocation refuses the key at every time, whatever its reason: a key
//! is revoked because it may be in someone else's hands, who can claim any time.
//! Self-signatures are checked when the keyring is read; third-party certifications are
//! ignored (plumb trusts the keys listed, not a web of trust).

use std::io::Cursor;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{Signature, SignatureType};
use pgp::types::{KeyDetails, Tag};

use super::{SignatureFormat, Unverified, Verified};

/// The keys of an armored keyring, their self-signatures checked.
#[derive(Clone, Debug, Default)]
pub struct Keyring {
    /// The keys, in file order.
    pub keys: Vec<SignedPublicKey>,
}

/// Why a keyring cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct KeyringError {
    /// What is wrong, naming the key (its fingerprint) when one is at fault.
    pub why: String,
}

impl Keyring {
    /// Parses armored public keys (one or several armor blocks, each with one or more keys).
    /// A block that does not parse, a secret key, or a key whose user ids carry no valid
    /// self-signature is an error naming it; an empty keyring is an error too.
    pub fn parse(text: &[u8]) -> Result<Self, KeyringError> {
        let mut keys = Vec::new();
        let text = String::from_utf8_lossy(text);
        // Each armor block on its own: gpg writes one per `--export` call, and people
        // concatenate them.
        for (n, block) in text.split_inclusive("-----END PGP PUBLIC KEY BLOCK-----").enumerate() {
            if block.trim().is_empty() {
                continue;
            }
            let (parsed, _) = SignedPublicKey::from_armor_many(Cursor::new(block.as_bytes()))
                .map_err(|e| KeyringError { why: format!("armor block {}: {e}", n + 1) })?;
            for key in parsed {
                let key = key.map_err(|e| KeyringError { why: format!("armor block {}: {e}", n + 1) })?;
                check_self_signatures(&key)?;
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Err(KeyringError { why: "no public key in the keyring".into() });
        }
        Ok(Keyring { keys })
    }
}

fn fingerprint(key: &impl KeyDetails) -> String {
    format!("{:X}", key.fingerprint())
}

/// Every user id has at least one self-certification that verifies.
fn check_self_signatures(key: &SignedPublicKey) -> Result<(), KeyringError> {
    let fpr = fingerprint(&key.primary_key);
    if key.details.users.is_empty() {
        return Err(KeyringError { why: format!("key {fpr} has no user id") });
    }
    for user in &key.details.users {
        let ok =
            user.signatures.iter().any(|s| s.verify_certification(&key.primary_key, Tag::UserId, &user.id).is_ok());
        if !ok {
            return Err(KeyringError {
                why: format!(
                    "key {fpr}: user id {:?} has no valid self-signature",
                    String::from_utf8_lossy(user.id.id())
                ),
            });
        }
    }
    Ok(())
}

/// The newest self-signature of the primary key that verifies (certifications of its user
/// ids and direct-key signatures): the one whose key flags and expiration count.
fn newest_self_signature(key: &SignedPublicKey) -> Option<&Signature> {
    let certs = key.details.users.iter().flat_map(|u| {
        u.signatures.iter().filter(|s| s.verify_certification(&key.primary_key, Tag::UserId, &u.id).is_ok())
    });
    let direct = key.details.direct_signatures.iter().filter(|s| s.verify_key(&key.primary_key).is_ok());
    certs.chain(direct).max_by_key(|s| s.created().map(|t| t.as_secs()))
}

/// The newest binding of a subkey that verifies.
fn newest_binding<'a>(key: &SignedPublicKey, sub: &'a SignedPublicSubKey) -> Option<&'a Signature> {
    sub.signatures
        .iter()
        .filter(|s| s.typ() == Some(SignatureType::SubkeyBinding))
        .filter(|s| s.verify_subkey_binding(&key.primary_key, &sub.key).is_ok())
        .max_by_key(|s| s.created().map(|t| t.as_secs()))
}

/// `[created, expires)` of a key from its creation time and the expiration of `sig`, in
/// seconds since the epoch; `None` for no expiry.
fn window(created: u32, sig: Option<&Signature>) -> (i64, Option<i64>) {
    let expiry = sig.and_then(Signature::key_expiration_time).map(|d| std::time::Duration::from(d).as_secs());
    let expiry = expiry.filter(|s| *s > 0).and_then(|s| i64::try_from(s).ok());
    (i64::from(created), expiry.map(|s| i64::from(created).saturating_add(s)))
}

/// Judges the key window at each of the times.
fn judge(fpr: &str, signer: &str, (from, until): (i64, Option<i64>), times: &[i64]) -> Result<(), Unverified> {
    for &at in times {
        if at < from {
            return Err(Unverified::OutsideValidity {
                fingerprint: fpr.to_owned(),
                signer: signer.to_owned(),
                at,
                valid_after: Some(from),
                valid_before: until,
            });
        }
        if let Some(until) = until
            && at >= until
        {
            return Err(Unverified::KeyExpired {
                fingerprint: fpr.to_owned(),
                signer: signer.to_owned(),
                expired_at: until,
                at,
            });
        }
    }
    Ok(())
}

/// Verifies an armored OpenPGP signature over `payload` of an object made at `time`
/// (seconds since the epoch) against `keyring` (`None`: nothing trusted, every key unknown).
pub fn verify(armored: &[u8], payload: &[u8], time: i64, keyring: Option<&Keyring>) -> Result<Verified, Unverified> {
    let (sig, _) = DetachedSignature::from_armor_single(Cursor::new(armored))
        .map_err(|e| Unverified::Malformed { why: format!("OpenPGP signature: {e}") })?;
    let sig = sig.signature;
    if !matches!(sig.typ(), Some(SignatureType::Binary | SignatureType::Text)) {
        return Err(Unverified::Malformed { why: format!("OpenPGP signature of type {:?}, not over data", sig.typ()) });
    }
    let issuer = sig
        .issuer_fingerprint()
        .first()
        .map(|f| format!("{f:X}"))
        .or_else(|| sig.issuer_key_id().first().map(hex::encode_upper))
        .ok_or_else(|| Unverified::Malformed { why: "OpenPGP signature without an issuer".into() })?;
    let created = sig
        .created()
        .map(|t| i64::from(t.as_secs()))
        .ok_or_else(|| Unverified::Malformed { why: "OpenPGP signature without a creation time".into() })?;
    let is = |fpr: &str| fpr == issuer || fpr.ends_with(&issuer);
    let found = keyring.into_iter().flat_map(|k| &k.keys).find_map(|key| {
        if is(&fingerprint(&key.primary_key)) {
            return Some((key, None));
        }
        key.public_subkeys.iter().find(|s| is(&fingerprint(&s.key))).map(|s| (key, Some(s)))
    });
    let Some((key, sub)) = found else {
        return Err(Unverified::UnknownKey { fingerprint: issuer });
    };
    let primary_fpr = fingerprint(&key.primary_key);
    let signer = key.details.users.first().map(|u| String::from_utf8_lossy(u.id.id()).into_owned()).unwrap_or_default();
    let crypto = match sub {
        Some(s) => sig.verify(&s.key, payload),
        None => sig.verify(&key.primary_key, payload),
    };
    crypto.map_err(|e| Unverified::BadSignature { fingerprint: issuer.clone(), why: e.to_string() })?;
    if key.details.revocation_signatures.iter().any(|r| r.verify_key(&key.primary_key).is_ok()) {
        return Err(Unverified::KeyRevoked { fingerprint: primary_fpr, signer });
    }
    let times = [created, time];
    let self_sig = newest_self_signature(key);
    judge(&primary_fpr, &signer, window(key.primary_key.created_at().as_secs(), self_sig), &times)?;
    if let Some(sub) = sub {
        let revoked = sub.signatures.iter().any(|r| {
            r.typ() == Some(SignatureType::SubkeyRevocation)
                && r.verify_subkey_binding(&key.primary_key, &sub.key).is_ok()
        });
        if revoked {
            return Err(Unverified::KeyRevoked { fingerprint: issuer, signer });
        }
        let binding = newest_binding(key, sub);
        if !binding.is_some_and(|b| b.key_flags().sign()) {
            return Err(Unverified::BadSignature {
                fingerprint: issuer,
                why: "the subkey is not bound for signing".into(),
            });
        }
        judge(&issuer, &signer, window(sub.key.created_at().as_secs(), binding), &times)?;
    }
    Ok(Verified { format: SignatureFormat::OpenPgp, fingerprint: issuer, signer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyring_reads_every_key_and_refuses_garbage() {
        let ring = Keyring::parse(include_bytes!("testdata/keyring.asc")).expect("parses");
        assert_eq!(ring.keys.len(), 3);
        let two = [&include_bytes!("testdata/keyring.asc")[..], b"\n", include_bytes!("testdata/eve.asc")].concat();
        assert_eq!(Keyring::parse(&two).expect("parses").keys.len(), 4);
        assert!(Keyring::parse(b"").expect_err("empty").why.contains("no public key"));
        let broken = String::from_utf8_lossy(include_bytes!("testdata/eve.asc")).replacen("m", "Q", 3);
        assert!(Keyring::parse(broken.as_bytes()).is_err());
    }
}
