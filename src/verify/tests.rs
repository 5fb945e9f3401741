//! Verdicts over objects recorded with real `git`, `ssh-keygen` and `gpg`
//! (`testdata/make.sh`).

use super::*;

fn commit(name: &str) -> Vec<u8> {
    let path = format!("{}/src/verify/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ssh_fpr(pub_file: &str) -> String {
    let text = String::from_utf8(commit(pub_file)).expect("utf8");
    ssh_key::PublicKey::from_openssh(text.trim()).expect("key").fingerprint(ssh_key::HashAlg::Sha256).to_string()
}

fn keys() -> TrustedKeys {
    TrustedKeys {
        ssh: Some(AllowedSigners::parse(include_str!("testdata/allowed_signers")).expect("signers")),
        openpgp: Some(Keyring::parse(include_bytes!("testdata/keyring.asc")).expect("keyring")),
    }
}

fn pgp_fpr(ring: &[u8], n: usize) -> String {
    format!("{:X}", pgp::types::KeyDetails::fingerprint(&Keyring::parse(ring).expect("keyring").keys[n].primary_key))
}

fn verdict(kind: ObjectKind, raw: &[u8], keys: &TrustedKeys) -> Result<Verified, Unverified> {
    verify_object(kind, raw, keys, &Limits::default())
}

#[test]
fn ssh_signatures_by_allowed_keys_verify_in_every_key_type() {
    let k = keys();
    let got = verdict(ObjectKind::Commit, &commit("ssh-ed25519.commit"), &k).expect("ada verifies");
    assert_eq!(
        got,
        Verified { format: SignatureFormat::Ssh, fingerprint: ssh_fpr("ada.pub"), signer: "ada@example.com".into() }
    );
    let got = verdict(ObjectKind::Commit, &commit("ssh-ecdsa.commit"), &k).expect("bob verifies");
    assert_eq!((got.fingerprint, got.signer), (ssh_fpr("bob.pub"), "bob@example.com,robert@example.com".into()));
    // carol's line has a window that ended before her commit; a line without one trusts her.
    let carol = format!("carol@example.com {}", String::from_utf8(commit("carol.pub")).expect("utf8"));
    let open = TrustedKeys { ssh: Some(AllowedSigners::parse(&carol).expect("parses")), openpgp: None };
    let got = verdict(ObjectKind::Commit, &commit("ssh-rsa.commit"), &open).expect("carol verifies");
    assert_eq!(got.fingerprint, ssh_fpr("carol.pub"));
    let tag = verdict(ObjectKind::Tag, &commit("ssh-ed25519.tag"), &k).expect("the tag verifies");
    assert_eq!(tag.fingerprint, ssh_fpr("ada.pub"));
}

#[test]
fn unsigned_objects_are_refused() {
    assert_eq!(verdict(ObjectKind::Commit, &commit("unsigned.commit"), &keys()), Err(Unverified::Unsigned));
    assert_eq!(verdict(ObjectKind::Tag, &commit("unsigned.tag"), &keys()), Err(Unverified::Unsigned));
}

#[test]
fn a_key_nobody_listed_is_unknown_and_named_by_its_fingerprint() {
    let k = keys();
    assert_eq!(
        verdict(ObjectKind::Commit, &commit("ssh-unknown.commit"), &k),
        Err(Unverified::UnknownKey { fingerprint: ssh_fpr("mallory.pub") })
    );
    let eve = pgp_fpr(include_bytes!("testdata/eve.asc"), 0);
    assert_eq!(
        verdict(ObjectKind::Commit, &commit("pgp-unknown.commit"), &k),
        Err(Unverified::UnknownKey { fingerprint: eve })
    );
    // Nothing configured for the format: every key is unknown.
    let none = TrustedKeys::default();
    assert!(matches!(
        verdict(ObjectKind::Commit, &commit("ssh-ed25519.commit"), &none),
        Err(Unverified::UnknownKey { .. })
    ));
    assert!(matches!(verdict(ObjectKind::Commit, &commit("pgp.commit"), &none), Err(Unverified::UnknownKey { .. })));
}

#[test]
fn a_tampered_object_has_a_bad_signature() {
    let k = keys();
    for (name, from, to) in [
        ("ssh-ed25519.commit", "signed by ada (ed25519)", "signed by ada (ed25519)!"),
        ("ssh-ed25519.commit", "tree fd", "tree fe"),
        ("pgp.commit", "signed by ada with OpenPGP", "signed by ada with OpenPGP."),
        ("ssh-ed25519.tag", "release v1", "release v9"),
        ("pgp.tag", "release v3", "release v4"),
    ] {
        let raw = String::from_utf8(commit(name)).expect("utf8");
        assert!(raw.contains(from), "{name}");
        let kind = if name.ends_with(".tag") { ObjectKind::Tag } else { ObjectKind::Commit };
        let got = verdict(kind, raw.replacen(from, to, 1).as_bytes(), &k);
        assert!(matches!(got, Err(Unverified::BadSignature { .. })), "{name}: {got:?}");
    }
}

#[test]
fn a_signature_for_another_namespace_is_bad() {
    let got = verdict(ObjectKind::Commit, &commit("ssh-wrong-namespace.commit"), &keys());
    match got {
        Err(Unverified::BadSignature { fingerprint, why }) => {
            assert_eq!(fingerprint, ssh_fpr("ada.pub"));
            assert!(why.contains("\"file\""), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn allowed_signers_options_are_honoured() {
    let ada = String::from_utf8(commit("ada.pub")).expect("utf8");
    let ssh = |line: String| TrustedKeys { ssh: Some(AllowedSigners::parse(&line).expect("parses")), openpgp: None };
    let raw = commit("ssh-ed25519.commit"); // committed at 1767323045 (2026-01-02T03:04:05Z)
    let got = verdict(ObjectKind::Commit, &raw, &ssh(format!("ada namespaces=\"file\" {ada}")));
    assert!(matches!(got, Err(Unverified::NamespaceNotAllowed { line: 1, .. })), "{got:?}");
    let got = verdict(ObjectKind::Commit, &raw, &ssh(format!("ada valid-after=\"20260102030406\" {ada}")));
    assert!(
        matches!(
            got,
            Err(Unverified::OutsideValidity {
                at: 1_767_323_045,
                valid_after: Some(1_767_323_046),
                valid_before: None,
                ..
            })
        ),
        "{got:?}"
    );
    let got = verdict(ObjectKind::Commit, &raw, &ssh(format!("ada valid-before=\"20260102030404Z\" {ada}")));
    assert!(matches!(got, Err(Unverified::OutsideValidity { valid_before: Some(1_767_323_044), .. })), "{got:?}");
    // Both bounds inclusive, as ssh-keygen: signed exactly at the edge is inside.
    let edge = ssh(format!("ada valid-after=\"20260102030405\",valid-before=\"20260102030405\" {ada}"));
    assert!(verdict(ObjectKind::Commit, &raw, &edge).is_ok());
    // A later line for the same key that allows the time is enough.
    let two = ssh(format!("old valid-before=\"20200101\" {ada}new valid-after=\"20250101\" {ada}"));
    assert_eq!(verdict(ObjectKind::Commit, &raw, &two).expect("second line").signer, "new");
    // The recorded file: carol's window ended on 2026-01-01, her commit is of 2026-01-02.
    let got = verdict(ObjectKind::Commit, &commit("ssh-rsa.commit"), &keys());
    assert!(matches!(got, Err(Unverified::OutsideValidity { valid_before: Some(1_767_225_600), .. })), "{got:?}");
}

#[test]
fn openpgp_signatures_by_keyring_keys_verify() {
    let k = keys();
    let ada = pgp_fpr(include_bytes!("testdata/keyring.asc"), 0);
    let got = verdict(ObjectKind::Commit, &commit("pgp.commit"), &k).expect("ada verifies");
    assert_eq!(
        got,
        Verified {
            format: SignatureFormat::OpenPgp,
            fingerprint: ada.clone(),
            signer: "Ada Author <ada@example.com>".into()
        }
    );
    assert_eq!(verdict(ObjectKind::Tag, &commit("pgp.tag"), &k).expect("the tag verifies").fingerprint, ada);
}

#[test]
fn expired_and_revoked_openpgp_keys_are_refused() {
    let k = keys();
    let olga = pgp_fpr(include_bytes!("testdata/keyring.asc"), 1);
    match verdict(ObjectKind::Commit, &commit("pgp-expired.commit"), &k) {
        Err(Unverified::KeyExpired { fingerprint, signer, expired_at, at }) => {
            assert_eq!((fingerprint, signer.as_str()), (olga, "Olga Old <olga@example.com>"));
            assert!(expired_at < at, "{expired_at} {at}");
        }
        other => panic!("{other:?}"),
    }
    let rex = pgp_fpr(include_bytes!("testdata/keyring.asc"), 2);
    assert_eq!(
        verdict(ObjectKind::Commit, &commit("pgp-revoked.commit"), &k),
        Err(Unverified::KeyRevoked { fingerprint: rex, signer: "Rex Revoked <rex@example.com>".into() })
    );
}

#[test]
fn malformed_armor_is_refused_as_malformed() {
    let k = keys();
    for (name, from, to) in [
        ("ssh-ed25519.commit", " U1NIU0lH", " U1NIU0lX"),
        ("ssh-ed25519.commit", " -----END SSH SIGNATURE-----\n", ""),
        ("ssh-ed25519.commit", " U1NIU0lHAAAAAQ", " U1NIU0lH!!AAAAAQ"),
        ("pgp.commit", " -----END PGP SIGNATURE-----\n", ""),
        ("pgp.commit", "\n iHUEAB", "\n AAAAAB"),
    ] {
        let raw = String::from_utf8(commit(name)).expect("utf8");
        assert!(raw.contains(from), "{name}: {from}");
        let got = verdict(ObjectKind::Commit, raw.replacen(from, to, 1).as_bytes(), &k);
        assert!(matches!(got, Err(Unverified::Malformed { .. })), "{name} {from:?}: {got:?}");
    }
}

#[test]
fn oversized_signatures_are_refused_before_decoding_and_x509_is_unsupported() {
    let raw = String::from_utf8(commit("ssh-ed25519.commit")).expect("utf8");
    let huge = raw.replacen(
        " -----END SSH SIGNATURE-----",
        &format!("{} -----END SSH SIGNATURE-----", " AAAA\n".repeat(20_000)),
        1,
    );
    let got = verdict(ObjectKind::Commit, huge.as_bytes(), &keys());
    assert!(matches!(got, Err(Unverified::TooLarge { what: "signature", limit: 65_536, .. })), "{got:?}");
    let x509 = raw.replace("SSH SIGNATURE", "SIGNED MESSAGE");
    assert_eq!(
        verdict(ObjectKind::Commit, x509.as_bytes(), &keys()),
        Err(Unverified::UnsupportedFormat { format: "x509" })
    );
}

#[test]
fn every_reason_has_a_distinct_label() {
    let all = [
        Unverified::Unsigned,
        Unverified::UnknownKey { fingerprint: String::new() },
        Unverified::BadSignature { fingerprint: String::new(), why: String::new() },
        Unverified::KeyExpired { fingerprint: String::new(), signer: String::new(), expired_at: 0, at: 0 },
        Unverified::KeyRevoked { fingerprint: String::new(), signer: String::new() },
        Unverified::OutsideValidity {
            fingerprint: String::new(),
            signer: String::new(),
            at: 0,
            valid_after: None,
            valid_before: None,
        },
        Unverified::NamespaceNotAllowed { fingerprint: String::new(), principal: String::new(), line: 0 },
        Unverified::UnsupportedFormat { format: "x509" },
        Unverified::Malformed { why: String::new() },
        Unverified::TooLarge { what: "object", bytes: 0, limit: 0 },
    ];
    let labels: std::collections::BTreeSet<_> = all.iter().map(Unverified::reason).collect();
    assert_eq!(labels.len(), all.len());
}
