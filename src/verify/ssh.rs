//! SSH signatures (`gpg.format ssh`) and the allowed signers they are checked against.
//!
//! A Git SSH signature is an SSHSIG blob (OpenSSH `PROTOCOL.sshsig`) in an
//! `-----BEGIN SSH SIGNATURE-----` armor, made in the namespace `git` with the hash `sha512`
//! (or `sha256`). Who may sign is written in Git's `gpg.ssh.allowedSignersFile` format, the
//! ALLOWED SIGNERS section of ssh-keygen(1): one signer a line,
//!
//! ```text
//! # comment
//! ada@example.com,ada@corp.example namespaces="git" ssh-ed25519 AAAAC3Nza… ada's laptop
//! bob@example.com valid-after="20260101",valid-before="20270101Z" ecdsa-sha2-nistp256 AAAA…
//! ```
//!
//! principals (comma-separated), options (comma-separated: `namespaces="pattern,…"`,
//! `valid-after="YYYYMMDD[HHMM[SS]][Z]"`, `valid-before=…`), then the public key as in an
//! `authorized_keys` line. plumb reads times as UTC whether or not they end in `Z`
//! (ssh-keygen reads those without `Z` in the local zone, which in a container is UTC).
//! `cert-authority` (trusting every key a CA certified) is refused: plumb verifies plain keys
//! only. As ssh-keygen does, the validity window `[valid-after, valid-before]` is judged at
//! the object's committer (or tagger) time, the time `git verify-commit` passes as
//! `verify-time`.

use ssh_key::{HashAlg, PublicKey, SshSig};

use super::{SignatureFormat, Unverified, Verified};

/// The namespace Git signs in (`ssh-keygen -Y sign -n git`).
pub const GIT_NAMESPACE: &str = "git";

/// One line of an allowed signers file.
#[derive(Clone, Debug)]
pub struct AllowedSigner {
    /// The 1-based line of the file.
    pub line: usize,
    /// The principals the line names (e-mail addresses as a rule), as written.
    pub principals: String,
    /// `namespaces=` patterns (`*`, `?`, a leading `!` negates), if the line restricts them.
    pub namespaces: Option<String>,
    /// `valid-after=`, in seconds since the Unix epoch (UTC).
    pub valid_after: Option<i64>,
    /// `valid-before=`, in seconds since the Unix epoch (UTC).
    pub valid_before: Option<i64>,
    /// The trusted key.
    pub key: PublicKey,
}

/// A parsed allowed signers file.
#[derive(Clone, Debug, Default)]
pub struct AllowedSigners {
    /// The signers, in file order.
    pub signers: Vec<AllowedSigner>,
}

/// A line of an allowed signers file that plumb cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct LineError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub why: String,
}

impl AllowedSigners {
    /// Parses the text of an allowed signers file: empty lines and lines starting with `#`
    /// are skipped; the first line plumb cannot use is the error (ssh-keygen skips bad lines;
    /// plumb refuses the file, so a typo never silently drops a trusted key).
    pub fn parse(text: &str) -> Result<Self, LineError> {
        let mut signers = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            signers.push(parse_line(i + 1, line).map_err(|why| LineError { line: i + 1, why })?);
        }
        Ok(AllowedSigners { signers })
    }
}

/// Key types that may open the key part of a line (ssh-keygen's `sshkey_type_from_name`).
fn is_key_type(word: &str) -> bool {
    word.starts_with("ssh-") || word.starts_with("ecdsa-sha2-") || word.starts_with("sk-")
}

/// Splits off the first field of `s`: up to the first blank outside double quotes.
fn field(s: &str) -> (&str, &str) {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ' ' | '\t' if !quoted => return (&s[..i], s[i..].trim_start()),
            _ => {}
        }
    }
    (s, "")
}

fn parse_line(number: usize, line: &str) -> Result<AllowedSigner, String> {
    let (principals, rest) = field(line);
    let principals = principals.trim_matches('"').to_owned();
    if rest.is_empty() {
        return Err("a principal without a key".into());
    }
    let (first, after) = field(rest);
    let (options, key_text) = if is_key_type(first) { ("", rest) } else { (first, after) };
    let mut signer = AllowedSigner {
        line: number,
        principals,
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key: PublicKey::from_openssh(key_text).map_err(|e| format!("not a public key ({e}): {key_text}"))?,
    };
    for option in split_options(options) {
        let (name, value) = option.split_once('=').map_or((option, None), |(n, v)| (n, Some(v.trim_matches('"'))));
        match (name.to_ascii_lowercase().as_str(), value) {
            ("namespaces", Some(v)) => signer.namespaces = Some(v.to_owned()),
            ("valid-after", Some(v)) => signer.valid_after = Some(parse_time(v)?),
            ("valid-before", Some(v)) => signer.valid_before = Some(parse_time(v)?),
            ("cert-authority", _) => {
                return Err("cert-authority is not supported: plumb trusts plain keys, list them one a line".into());
            }
            _ => {
                return Err(format!(
                    "unsupported option {option:?} (plumb reads namespaces=, valid-after=, valid-before=)"
                ));
            }
        }
    }
    Ok(signer)
}

/// The comma-separated options, commas inside double quotes kept.
fn split_options(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, optionally ending in `Z`, read as UTC.
fn parse_time(v: &str) -> Result<i64, String> {
    let digits = v.strip_suffix(['Z', 'z']).unwrap_or(v);
    let bad = || format!("{v:?} is not a time (YYYYMMDD[HHMM[SS]][Z])");
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| digits.get(r).map_or(Ok(0), str::parse::<i16>).map_err(|_| bad());
    let dt = jiff::civil::DateTime::new(
        num(0..4)?,
        num(4..6)? as i8,
        num(6..8)? as i8,
        num(8..10)? as i8,
        num(10..12)? as i8,
        num(12..14)? as i8,
        0,
    )
    .map_err(|e| format!("{v:?}: {e}"))?;
    dt.to_zoned(jiff::tz::TimeZone::UTC).map(|z| z.timestamp().as_second()).map_err(|e| format!("{v:?}: {e}"))
}

/// Whether `name` matches a comma-separated ssh pattern list (`*`, `?`, `!` negates and
/// wins), as ssh's `match_pattern_list`.
fn matches_list(name: &str, list: &str) -> bool {
    let mut matched = false;
    for pat in list.split(',').map(str::trim) {
        match pat.strip_prefix('!') {
            Some(neg) if wildcard(name.as_bytes(), neg.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= wildcard(name.as_bytes(), pat.as_bytes()),
        }
    }
    matched
}

fn wildcard(s: &[u8], p: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| wildcard(&s[i..], rest)),
        Some((b'?', rest)) => !s.is_empty() && wildcard(&s[1..], rest),
        Some((c, rest)) => s.first() == Some(c) && wildcard(&s[1..], rest),
    }
}

/// Verifies an armored SSH signature over `payload` made at `time` (seconds since the
/// epoch) against `signers`. The signature must be in the namespace `git`, by a key some
/// line lists, valid at `time` and allowed the namespace `git`; the first such line names
/// the signer. `signers: None` (no allowed signers configured) makes every key unknown.
pub fn verify(
    armored: &[u8],
    payload: &[u8],
    time: i64,
    signers: Option<&AllowedSigners>,
) -> Result<Verified, Unverified> {
    let sig = SshSig::from_pem(armored).map_err(|e| Unverified::Malformed { why: format!("SSH signature: {e}") })?;
    let fingerprint = PublicKey::from(sig.public_key().clone()).fingerprint(HashAlg::Sha256).to_string();
    if sig.namespace() != GIT_NAMESPACE {
        return Err(Unverified::BadSignature {
            fingerprint,
            why: format!("made for the namespace {:?}, not {GIT_NAMESPACE:?}", sig.namespace()),
        });
    }
    let candidates: Vec<&AllowedSigner> = signers
        .map(|s| s.signers.iter().filter(|s| s.key.key_data() == sig.public_key()).collect())
        .unwrap_or_default();
    let Some(first) = candidates.first() else {
        return Err(Unverified::UnknownKey { fingerprint });
    };
    first
        .key
        .verify(GIT_NAMESPACE, payload, &sig)
        .map_err(|e| Unverified::BadSignature { fingerprint: fingerprint.clone(), why: e.to_string() })?;
    let mut refusal = None;
    for signer in &candidates {
        if let Some(ns) = &signer.namespaces
            && !matches_list(GIT_NAMESPACE, ns)
        {
            refusal.get_or_insert(Unverified::NamespaceNotAllowed {
                fingerprint: fingerprint.clone(),
                principal: signer.principals.clone(),
                line: signer.line,
            });
            continue;
        }
        if signer.valid_after.is_some_and(|a| time < a) || signer.valid_before.is_some_and(|b| time > b) {
            refusal.get_or_insert(Unverified::OutsideValidity {
                fingerprint: fingerprint.clone(),
                signer: signer.principals.clone(),
                at: time,
                valid_after: signer.valid_after,
                valid_before: signer.valid_before,
            });
            continue;
        }
        return Ok(Verified { format: SignatureFormat::Ssh, fingerprint, signer: signer.principals.clone() });
    }
    Err(refusal.unwrap_or(Unverified::UnknownKey { fingerprint }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_principals_options_and_keys() {
        let signers = AllowedSigners::parse(include_str!("testdata/allowed_signers")).expect("parses");
        let got: Vec<_> = signers
            .signers
            .iter()
            .map(|s| {
                (
                    s.line,
                    s.principals.as_str(),
                    s.namespaces.as_deref(),
                    s.valid_after,
                    s.valid_before,
                    s.key.algorithm().as_str().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (2, "ada@example.com", Some("git"), None, None, "ssh-ed25519".to_owned()),
                (3, "bob@example.com,robert@example.com", None, None, None, "ecdsa-sha2-nistp256".to_owned()),
                (5, "carol@example.com", None, Some(1_735_689_600), Some(1_767_225_600), "ssh-rsa".to_owned()),
            ]
        );
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        let key = include_str!("testdata/ada.pub").trim();
        for (text, line, why) in [
            (format!("# c\n\nada {key}\nbob ssh-ed25519 AAAAnotbase64\n"), 4, "not a public key"),
            (format!("ada cert-authority {key}\n"), 1, "cert-authority is not supported"),
            ("ada\n".to_string(), 1, "a principal without a key"),
            (format!("\nada valid-after=\"2026\" {key}\n"), 2, "is not a time"),
            (format!("ada valid-before=\"20261340\" {key}\n"), 1, "\"20261340\""),
            (format!("ada no-touch-required {key}\n"), 1, "unsupported option"),
        ] {
            let err = AllowedSigners::parse(&text).expect_err(&text);
            assert_eq!(err.line, line, "{text}: {err}");
            assert!(err.why.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn times_are_utc_with_or_without_z_and_quoted_options_keep_commas() {
        assert_eq!(parse_time("20260102"), Ok(1_767_312_000));
        assert_eq!(parse_time("202601020304Z"), Ok(1_767_323_040));
        assert_eq!(parse_time("20260102030405"), Ok(1_767_323_045));
        assert_eq!(
            split_options("namespaces=\"git,file\",valid-after=\"20260101\""),
            ["namespaces=\"git,file\"", "valid-after=\"20260101\""]
        );
    }

    #[test]
    fn namespace_patterns_follow_ssh() {
        assert!(matches_list("git", "git"));
        assert!(matches_list("git", "file,g*"));
        assert!(matches_list("git", "g?t"));
        assert!(!matches_list("git", "file"));
        assert!(!matches_list("git", "*,!git"));
        assert!(!matches_list("git", "gi"));
    }
}
