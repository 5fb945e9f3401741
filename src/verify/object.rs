//! A raw Git commit or annotated tag object split into what was signed and the signature,
//! the way Git itself splits them (gitformat-signature(5)):
//!
//! - a **commit** carries its signature in a `gpgsig` header whose value continues on the
//!   following lines that start with one space; the signed payload is the object without
//!   that header (and without any other `gpgsig…` header, e.g. `gpgsig-sha256`, which Git
//!   also leaves out of the payload);
//! - an **annotated tag** carries its signature at the end of its message, from the last
//!   line that opens an armor (`-----BEGIN PGP SIGNATURE-----`,
//!   `-----BEGIN SSH SIGNATURE-----`, …); the payload is everything before that line.
//!
//! The bytes are those `git cat-file commit <id>` / `git cat-file tag <id>` print (and
//! what libgit2's `odb.read(id).data()` returns): no `commit <size>\0` prefix.

use super::{Limits, Unverified};

/// The signature formats Git writes, told apart by the first line of the armor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureFormat {
    /// `-----BEGIN SSH SIGNATURE-----`: an SSHSIG blob (`gpg.format ssh`).
    Ssh,
    /// `-----BEGIN PGP SIGNATURE-----` (or `PGP MESSAGE`): OpenPGP (`gpg.format openpgp`).
    OpenPgp,
    /// `-----BEGIN SIGNED MESSAGE-----`: X.509 / CMS (`gpg.format x509`), which plumb does
    /// not verify.
    X509,
}

impl SignatureFormat {
    /// The format whose armor this line opens, if any.
    fn of_line(line: &[u8]) -> Option<Self> {
        const MARKERS: [(&[u8], SignatureFormat); 4] = [
            (b"-----BEGIN SSH SIGNATURE-----", SignatureFormat::Ssh),
            (b"-----BEGIN PGP SIGNATURE-----", SignatureFormat::OpenPgp),
            (b"-----BEGIN PGP MESSAGE-----", SignatureFormat::OpenPgp),
            (b"-----BEGIN SIGNED MESSAGE-----", SignatureFormat::X509),
        ];
        MARKERS.iter().find(|(m, _)| line.starts_with(m)).map(|(_, f)| *f)
    }

    /// The name Git's `gpg.format` gives this format.
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureFormat::Ssh => "ssh",
            SignatureFormat::OpenPgp => "openpgp",
            SignatureFormat::X509 => "x509",
        }
    }
}

/// Whether the object is a commit or an annotated tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// A commit object (`git cat-file commit`).
    Commit,
    /// An annotated tag object (`git cat-file tag`).
    Tag,
}

/// A Git object split into its signed payload and its signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedObject {
    /// Commit or tag.
    pub kind: ObjectKind,
    /// The exact bytes the signature covers.
    pub payload: Vec<u8>,
    /// The armored signature (header continuation spaces removed), if the object has one.
    pub signature: Option<Vec<u8>>,
    /// The committer (commit) or tagger (tag) time, in seconds since the Unix epoch: the
    /// time validity windows and key expiry are judged at, as `git verify-commit` does for
    /// SSH signatures. 0 when the object has no such line (old tags).
    pub time: i64,
    /// `Name <email>` of the author (commit) or the tagger (tag); empty when absent.
    pub author: String,
    /// For a tag: the id of the object it points at (`object` header) and its type.
    pub target: Option<(String, String)>,
}

impl SignedObject {
    /// The format of the signature, if the object carries one.
    pub fn format(&self) -> Option<SignatureFormat> {
        self.signature.as_deref().and_then(SignatureFormat::of_line)
    }
}

/// Splits a raw object. Refuses (as [`Unverified::TooLarge`]) an object over
/// `limits.max_object_bytes` or a signature over `limits.max_signature_bytes` before
/// anything is decoded; the scan itself is one pass over the bytes.
pub fn parse(kind: ObjectKind, raw: &[u8], limits: &Limits) -> Result<SignedObject, Unverified> {
    if raw.len() > limits.max_object_bytes {
        return Err(Unverified::TooLarge { what: "object", bytes: raw.len(), limit: limits.max_object_bytes });
    }
    let (payload, signature) = match kind {
        ObjectKind::Commit => split_commit(raw),
        ObjectKind::Tag => split_tag(raw),
    };
    if let Some(sig) = &signature
        && sig.len() > limits.max_signature_bytes
    {
        return Err(Unverified::TooLarge { what: "signature", bytes: sig.len(), limit: limits.max_signature_bytes });
    }
    let header_end = find_blank_line(&payload).unwrap_or(payload.len());
    let headers = &payload[..header_end];
    let (time_header, author_header): (&[u8], &[u8]) = match kind {
        ObjectKind::Commit => (b"committer ", b"author "),
        ObjectKind::Tag => (b"tagger ", b"tagger "),
    };
    let time = header(headers, time_header).map(ident_time).transpose()?.unwrap_or(0);
    let author = header(headers, author_header).map(ident_name).unwrap_or_default();
    let target = match kind {
        ObjectKind::Commit => None,
        ObjectKind::Tag => {
            let object = header(headers, b"object ")
                .ok_or(Unverified::Malformed { why: "a tag without an object header".into() })?;
            let typ =
                header(headers, b"type ").ok_or(Unverified::Malformed { why: "a tag without a type header".into() })?;
            Some((String::from_utf8_lossy(object).into_owned(), String::from_utf8_lossy(typ).into_owned()))
        }
    };
    Ok(SignedObject { kind, payload, signature, time, author, target })
}

/// Lines of `buf`, each with its `\n` (the last one may lack it).
fn lines(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    buf.split_inclusive(|b| *b == b'\n')
}

/// Offset of the empty line ending the headers.
fn find_blank_line(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    for line in lines(buf) {
        if line == b"\n" {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// A commit without its `gpgsig` header (continuation lines included) and that header's
/// value. Headers named `gpgsig-…` (signatures over the object's other hash) are left out of
/// the payload too and their values ignored; the message after the first empty line is
/// copied as is.
fn split_commit(raw: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut payload = Vec::with_capacity(raw.len());
    let mut signature: Option<Vec<u8>> = None;
    // Inside the value of `gpgsig` (Some(true)) or of another `gpgsig…` header (Some(false)).
    let mut inside: Option<bool> = None;
    let mut at = 0;
    for line in lines(raw) {
        if line == b"\n" {
            payload.extend_from_slice(&raw[at..]);
            break;
        }
        at += line.len();
        if inside.is_some() && line.first() == Some(&b' ') {
            if inside == Some(true)
                && let Some(sig) = signature.as_mut()
            {
                sig.extend_from_slice(&line[1..]);
            }
            continue;
        }
        inside = None;
        if let Some(value) = line.strip_prefix(b"gpgsig ") {
            signature.get_or_insert_with(Vec::new).extend_from_slice(value);
            inside = Some(true);
        } else if line.starts_with(b"gpgsig") {
            inside = Some(false);
        } else {
            payload.extend_from_slice(line);
        }
    }
    (payload, signature)
}

/// A tag's payload (everything before the last line opening an armor) and its signature.
fn split_tag(raw: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut start = None;
    let mut at = 0;
    for line in lines(raw) {
        if SignatureFormat::of_line(line).is_some() {
            start = Some(at);
        }
        at += line.len();
    }
    match start {
        Some(s) => (raw[..s].to_vec(), Some(raw[s..].to_vec())),
        None => (raw.to_vec(), None),
    }
}

/// The value of the first header named `name` (which ends with its space), without `\n`.
fn header<'a>(headers: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    lines(headers).find_map(|l| l.strip_prefix(name)).map(|v| v.strip_suffix(b"\n").unwrap_or(v))
}

/// `Name <email>` of an identity line `Name <email> 1767323045 +0000`.
fn ident_name(value: &[u8]) -> String {
    let end = value.iter().rposition(|b| *b == b'>').map_or(value.len(), |i| i + 1);
    String::from_utf8_lossy(&value[..end]).into_owned()
}

/// The seconds of an identity line `Name <email> 1767323045 +0000`.
fn ident_time(value: &[u8]) -> Result<i64, Unverified> {
    let after = value.iter().rposition(|b| *b == b'>').map_or(value, |i| &value[i + 1..]);
    let text = String::from_utf8_lossy(after);
    text.split_whitespace().next().and_then(|s| s.parse::<i64>().ok()).ok_or_else(|| Unverified::Malformed {
        why: format!("an identity without a time: {}", String::from_utf8_lossy(value)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNED: &[u8] = include_bytes!("testdata/ssh-ed25519.commit");
    const TAG: &[u8] = include_bytes!("testdata/ssh-ed25519.tag");

    #[test]
    fn a_commit_payload_is_the_object_without_its_gpgsig_header() {
        let o = parse(ObjectKind::Commit, SIGNED, &Limits::default()).expect("parses");
        let text = String::from_utf8(o.payload.clone()).expect("utf8");
        assert!(!text.contains("gpgsig") && !text.contains("SSH SIGNATURE"), "{text}");
        assert!(text.starts_with("tree ") && text.ends_with("\n\nsigned by ada (ed25519)\n"), "{text}");
        let sig = String::from_utf8(o.signature.clone().expect("signed")).expect("utf8");
        assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH"), "{sig}");
        assert!(sig.ends_with("-----END SSH SIGNATURE-----\n"), "{sig}");
        assert_eq!(o.format(), Some(SignatureFormat::Ssh));
        assert_eq!((o.time, o.author.as_str()), (1_767_323_045, "Ada Author <ada@example.com>"));
    }

    #[test]
    fn the_payload_is_what_git_signed() {
        // Rebuilding the object from payload and signature (Git's own insertion after the
        // committer line) gives back the recorded bytes.
        let o = parse(ObjectKind::Commit, SIGNED, &Limits::default()).expect("parses");
        let sig = o.signature.clone().expect("signed");
        let text = String::from_utf8(o.payload).expect("utf8");
        let (head, message) = text.split_once("\n\n").expect("message");
        let indented = String::from_utf8(sig).expect("utf8").trim_end().replace('\n', "\n ");
        let rebuilt = format!("{head}\ngpgsig {indented}\n\n{message}");
        assert_eq!(rebuilt.as_bytes(), SIGNED);
    }

    #[test]
    fn other_gpgsig_headers_are_left_out_and_the_message_is_kept_whole() {
        let raw = b"tree 1\ngpgsig-sha256 -----BEGIN SSH SIGNATURE-----\n abc\n -----END SSH SIGNATURE-----\nauthor A <a> 5 +0000\ncommitter A <a> 7 +0000\n\nmsg\ngpgsig not a header\n";
        let o = parse(ObjectKind::Commit, raw, &Limits::default()).expect("parses");
        assert_eq!(o.signature, None);
        assert_eq!(o.payload, b"tree 1\nauthor A <a> 5 +0000\ncommitter A <a> 7 +0000\n\nmsg\ngpgsig not a header\n");
        assert_eq!(o.time, 7);
    }

    #[test]
    fn a_tag_payload_ends_before_its_last_armor() {
        let o = parse(ObjectKind::Tag, TAG, &Limits::default()).expect("parses");
        let text = String::from_utf8(o.payload.clone()).expect("utf8");
        assert!(text.ends_with("\n\nrelease v1 signed by ada\n"), "{text}");
        assert_eq!(o.format(), Some(SignatureFormat::Ssh));
        let (object, typ) = o.target.expect("target");
        assert_eq!((object.len(), typ.as_str()), (40, "commit"));
        assert_eq!(o.time, 1_767_323_045);
    }

    #[test]
    fn an_unsigned_object_has_no_signature() {
        for (kind, raw) in [
            (ObjectKind::Commit, &include_bytes!("testdata/unsigned.commit")[..]),
            (ObjectKind::Tag, &include_bytes!("testdata/unsigned.tag")[..]),
        ] {
            let o = parse(kind, raw, &Limits::default()).expect("parses");
            assert_eq!((o.signature, o.payload.as_slice()), (None, raw));
        }
    }

    #[test]
    fn oversized_objects_and_signatures_are_refused_before_decoding() {
        let small = Limits { max_object_bytes: 100, ..Limits::default() };
        assert!(matches!(
            parse(ObjectKind::Commit, SIGNED, &small),
            Err(Unverified::TooLarge { what: "object", limit: 100, .. })
        ));
        let small_sig = Limits { max_signature_bytes: 100, ..Limits::default() };
        assert!(matches!(
            parse(ObjectKind::Commit, SIGNED, &small_sig),
            Err(Unverified::TooLarge { what: "signature", limit: 100, .. })
        ));
    }
}
