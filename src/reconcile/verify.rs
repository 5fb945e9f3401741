//! The signature gate of a pass (`verifyCommits`, see [`crate::verify`]): before the
//! source stage, the commit the tracked ref names now (or, in mode `tag`, the annotated
//! tag) is checked against the application's trusted keys. A verified commit is what the
//! pass reads — by its id, so a ref moved meanwhile cannot slip an unchecked commit in.
//! An unverified one is never read for a sync: the pass reads the last synced revision
//! instead (what runs: selfHeal keeps reverting drift to it), with an
//! `UnverifiedRevision` condition naming the commit, its author and why; with nothing
//! synced yet, the pass stops there. Verdicts are kept by application and object id: a
//! pass over a commit already checked costs a map lookup and a `stat` of the key files;
//! a key file that changed is read again and the application's verdicts forgotten.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use crate::{
    config::{Application, Environment, Repository, VerifyMode},
    status::{Condition, ConditionType, Verification, short},
    verify::{self, ObjectKind, TrustedKeys, Unverified, Verified},
};

/// How many verdicts are kept before the map is emptied (each is a few hundred bytes).
const VERDICTS: usize = 4_096;

/// Each application's trusted keys (parsed once per version of its key files) and the
/// verdicts of the objects its passes checked.
#[derive(Default)]
pub(super) struct Verdicts {
    keys: Mutex<HashMap<String, (Stamp, Arc<TrustedKeys>)>>,
    seen: Mutex<HashMap<(String, String), Checked>>,
}

/// The modification time and size of each key file: a changed file (an edited
/// allowed_signers, a ConfigMap's new version) is read again and the application's
/// verdicts are forgotten, so a key taken off the list stops at the next pass.
type Stamp = Vec<Option<(std::time::SystemTime, u64)>>;

fn stamp(vc: &crate::config::VerifyCommits) -> Stamp {
    [&vc.allowed_signers_file, &vc.openpgp_keyring_file]
        .into_iter()
        .flatten()
        .map(|f| std::fs::metadata(&f.value).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

/// The verdict on one object, with what the status shows of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checked {
    /// The commit the revision names (mode `tag`: the one the tag points at).
    pub commit: String,
    /// The commit's author (mode `tag`: the tagger).
    pub author: String,
    /// The verdict.
    pub verdict: Result<Verified, Unverified>,
}

impl Verdicts {
    /// `app`'s trusted keys, read from its key files on first use and when they change.
    fn keys(&self, app: &str, vc: &crate::config::VerifyCommits) -> Result<Arc<TrustedKeys>, String> {
        let now = stamp(vc);
        if let Some((_, k)) = self.keys.lock().ok().and_then(|k| k.get(app).cloned()).filter(|(s, _)| *s == now) {
            return Ok(k);
        }
        let keys = Arc::new(vc.trusted_keys()?);
        if let Ok(mut k) = self.keys.lock() {
            k.insert(app.to_string(), (now, keys.clone()));
        }
        if let Ok(mut seen) = self.seen.lock() {
            seen.retain(|(a, _), _| a != app);
        }
        Ok(keys)
    }

    fn get(&self, app: &str, id: &str) -> Option<Checked> {
        self.seen.lock().ok()?.get(&(app.to_string(), id.to_string())).cloned()
    }

    fn put(&self, app: &str, id: &str, checked: Checked) {
        if let Ok(mut seen) = self.seen.lock() {
            if seen.len() >= VERDICTS {
                seen.clear();
            }
            seen.insert((app.to_string(), id.to_string()), checked);
        }
    }
}

/// Why the gate could not judge: the key files or the repository could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VerifyFailure {
    /// A key file of `verifyCommits` is missing or does not parse.
    #[error("verifyCommits keys: {0}")]
    Keys(String),
    /// The revision could not be resolved or its object read.
    #[error(transparent)]
    Fetch(#[from] crate::source::FetchError),
}

/// Checks what `wanted` names now for application `app` (None when it verifies
/// nothing), reading refs as recent as `asked` accepts; `true` with a verdict made now
/// (not one kept from an earlier pass).
pub(super) async fn check(
    verdicts: &Verdicts,
    sources: &crate::source::Pool,
    (app, env, repo): (&Application, &Environment, &Repository),
    wanted: &str,
    asked: crate::source::Since,
) -> Result<(Option<(VerifyMode, Checked)>, bool), VerifyFailure> {
    let Some(vc) = app.verify_commits(env) else { return Ok((None, false)) };
    let name = app.name.value.as_str();
    let keys = verdicts.keys(name, vc).map_err(VerifyFailure::Keys)?;
    let tag = vc.mode == VerifyMode::Tag;
    // the verdict on the commit the refs already read name: no trip to the mirror
    if !tag
        && let Some(commit) = sources.peek(repo, wanted, asked)
        && let Some(checked) = verdicts.get(name, &commit)
    {
        return Ok((Some((vc.mode, checked)), false));
    }
    let (commit, raw) = sources.signed_object(repo, wanted, asked, tag).await?;
    let kind = if tag { ObjectKind::Tag } else { ObjectKind::Commit };
    let id = format!("{}{commit}", if tag { "tag " } else { "" });
    if let Some(checked) = verdicts.get(name, &id) {
        return Ok((Some((vc.mode, checked)), false));
    }
    let checked = judge(kind, &commit, raw.as_deref(), &keys);
    verdicts.put(name, &id, checked.clone());
    Ok((Some((vc.mode, checked)), true))
}

/// The verdict on the raw object of `commit` (`None`: no annotated tag, or no object).
fn judge(kind: ObjectKind, commit: &str, raw: Option<&[u8]>, keys: &TrustedKeys) -> Checked {
    let Some(raw) = raw else {
        return Checked { commit: commit.to_string(), author: String::new(), verdict: Err(Unverified::Unsigned) };
    };
    let limits = verify::Limits::default();
    let parsed = match verify::object::parse(kind, raw, &limits) {
        Ok(p) => p,
        Err(e) => return Checked { commit: commit.to_string(), author: String::new(), verdict: Err(e) },
    };
    let mut verdict = verify::verify_parsed(&parsed, keys);
    // a tag of a tag, or one whose target is not the commit synced, proves nothing of it
    if let Some((target, typ)) = &parsed.target
        && (typ != "commit" || target != commit)
        && verdict.is_ok()
    {
        verdict = Err(Unverified::Malformed { why: format!("the tag points at the {typ} {target}, not at {commit}") });
    }
    Checked { commit: commit.to_string(), author: parsed.author, verdict }
}

/// What the pass does about a check: the revision it reads instead of the tracked ref
/// (`Some`: a commit id), the condition it shows, and the status's verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Held {
    /// The commit the source stage reads: the verified one, the last synced one when
    /// the newest is not verified, `None` to read the revision as configured.
    pub revision: Option<String>,
    /// `UnverifiedRevision`, when the newest revision is not trusted.
    pub condition: Option<Condition>,
    /// Nothing trusted to read (unverified and nothing synced yet): the pass stops.
    pub stop: bool,
    /// What the status shows.
    pub verification: Option<Verification>,
}

/// The gate (pure): what to read given the check of the newest revision, what was last
/// synced (`synced`, empty when nothing) and, when a person's sync allows it, who
/// (`allowed_by`, `plumb sync --allow-unverified`).
pub(super) fn hold(checked: Option<&(VerifyMode, Checked)>, synced: &str, allowed_by: Option<&str>) -> Held {
    let Some((mode, c)) = checked else {
        return Held { revision: None, condition: None, stop: false, verification: None };
    };
    let mut v = Verification {
        revision: c.commit.clone(),
        mode: mode.as_str().into(),
        verified: c.verdict.is_ok(),
        author: c.author.clone(),
        ..Verification::default()
    };
    match &c.verdict {
        Ok(ok) => {
            (v.signer, v.fingerprint) = (ok.signer.clone(), ok.fingerprint.clone());
            Held { revision: Some(c.commit.clone()), condition: None, stop: false, verification: Some(v) }
        }
        Err(why) => {
            v.reason = why.to_string();
            v.fingerprint = fingerprint(why).to_string();
            if let Some(who) = allowed_by {
                v.allowed_by = who.to_string();
                return Held { revision: Some(c.commit.clone()), condition: None, stop: false, verification: Some(v) };
            }
            let by = if c.author.is_empty() { String::new() } else { format!(" by {}", c.author) };
            let keeping = if synced.is_empty() || synced == c.commit {
                "nothing is synced until a trusted revision comes".to_string()
            } else {
                format!("keeping {}, the last synced revision", short(synced))
            };
            let message = format!("{} {}{by} is not trusted: {why}; {keeping}", mode_word(*mode), short(&c.commit));
            let condition = Some(Condition::new(ConditionType::UnverifiedRevision, message));
            let keep = (!synced.is_empty() && synced != c.commit).then(|| synced.to_string());
            Held { stop: keep.is_none(), revision: keep, condition, verification: Some(v) }
        }
    }
}

/// The gate's answer `held` once the revision it keeps (the last synced one) was
/// checked as `kept`: unchanged when `kept` verifies; else nothing is trusted to read
/// (a revision synced before `verifyCommits` was turned on, or signed by a key since
/// revoked): the pass stops, its condition naming both revisions. Pure.
pub(super) fn kept_untrusted(mut held: Held, kept: &Checked) -> Held {
    let Err(why) = &kept.verdict else { return held };
    if let Some(c) = held.condition.as_mut()
        && let Some((head, _)) = c.message.rsplit_once("; keeping ")
    {
        c.message = format!(
            "{head}; the last synced revision {} is not trusted either: {why}; nothing is synced until a trusted revision comes",
            short(&kept.commit)
        );
    }
    held.revision = None;
    held.stop = true;
    held
}

/// An application whose tracked ref names a commit that is not trusted is OutOfSync,
/// whatever runs: what Git says is not what is deployed.
pub(super) fn out_of_sync_when_unverified(st: &mut crate::status::AppStatus) {
    if st.conditions.iter().any(|c| c.type_ == ConditionType::UnverifiedRevision) {
        st.sync = crate::compare::SyncStatus::OutOfSync;
    }
}

fn mode_word(mode: VerifyMode) -> &'static str {
    match mode {
        VerifyMode::Head => "commit",
        VerifyMode::Tag => "the tag of commit",
    }
}

/// The key an unverified signature names, if any.
fn fingerprint(why: &Unverified) -> &str {
    match why {
        Unverified::UnknownKey { fingerprint }
        | Unverified::BadSignature { fingerprint, .. }
        | Unverified::KeyExpired { fingerprint, .. }
        | Unverified::KeyRevoked { fingerprint, .. }
        | Unverified::OutsideValidity { fingerprint, .. }
        | Unverified::NamespaceNotAllowed { fingerprint, .. } => fingerprint,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::SignatureFormat;

    fn checked(verdict: Result<Verified, Unverified>) -> (VerifyMode, Checked) {
        (VerifyMode::Head, Checked { commit: "b".repeat(40), author: "Mallory <m@example.com>".into(), verdict })
    }

    #[test]
    fn nothing_configured_reads_the_revision_as_configured() {
        assert_eq!(hold(None, "a", None), Held { revision: None, condition: None, stop: false, verification: None });
    }

    #[test]
    fn a_verified_commit_is_read_by_its_id() {
        let ok = Verified { format: SignatureFormat::Ssh, fingerprint: "SHA256:x".into(), signer: "ada".into() };
        let held = hold(Some(&checked(Ok(ok))), &"a".repeat(40), None);
        assert_eq!((held.revision, held.condition, held.stop), (Some("b".repeat(40)), None, false));
        let v = held.verification.expect("shown");
        assert!(v.verified && v.signer == "ada" && v.fingerprint == "SHA256:x" && v.reason.is_empty(), "{v:?}");
    }

    #[test]
    fn an_unverified_commit_keeps_the_last_synced_revision_and_says_why() {
        let unknown = Err(Unverified::UnknownKey { fingerprint: "SHA256:m".into() });
        let held = hold(Some(&checked(unknown.clone())), &"a".repeat(40), None);
        assert_eq!((held.revision.as_deref(), held.stop), (Some("a".repeat(40).as_str()), false));
        let c = held.condition.expect("condition");
        assert_eq!(c.type_, ConditionType::UnverifiedRevision);
        assert_eq!(
            c.message,
            "commit bbbbbbb by Mallory <m@example.com> is not trusted: signed by an unknown key SHA256:m; keeping aaaaaaa, the last synced revision"
        );
        let v = held.verification.expect("shown");
        assert!(!v.verified && v.fingerprint == "SHA256:m" && v.reason.contains("unknown key"), "{v:?}");
        // nothing synced yet: nothing to read
        let first = hold(Some(&checked(Err(Unverified::Unsigned))), "", None);
        assert!(first.stop && first.revision.is_none(), "{first:?}");
        assert!(first.condition.expect("condition").message.contains("unsigned; nothing is synced"));
        // a person's sync that allows it reads the commit and is recorded with who
        let allowed = hold(Some(&checked(unknown)), &"a".repeat(40), Some("alice"));
        assert_eq!((allowed.revision, allowed.condition), (Some("b".repeat(40)), None));
        assert_eq!(allowed.verification.expect("shown").allowed_by, "alice");
    }

    #[test]
    fn an_untrusted_revision_is_not_kept_either() {
        let held = hold(Some(&checked(Err(Unverified::Unsigned))), &"a".repeat(40), None);
        let ok = Verified { format: SignatureFormat::Ssh, fingerprint: "SHA256:x".into(), signer: "ada".into() };
        let trusted = Checked { commit: "a".repeat(40), author: String::new(), verdict: Ok(ok) };
        assert_eq!(kept_untrusted(held.clone(), &trusted), held);
        let untrusted = Checked { verdict: Err(Unverified::Unsigned), ..trusted };
        let stopped = kept_untrusted(held, &untrusted);
        assert!(stopped.stop && stopped.revision.is_none(), "{stopped:?}");
        assert_eq!(
            stopped.condition.expect("condition").message,
            "commit bbbbbbb by Mallory <m@example.com> is not trusted: unsigned; the last synced revision aaaaaaa is not trusted either: unsigned; nothing is synced until a trusted revision comes"
        );
    }

    #[test]
    fn changed_key_files_are_read_again_and_forget_the_verdicts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("signers");
        let ada = include_str!("../verify/testdata/ada.pub");
        std::fs::write(&file, format!("ada {ada}")).expect("write");
        let at = serde_saphyr::Location::UNKNOWN;
        let vc = crate::config::VerifyCommits {
            allowed_signers_file: Some(serde_saphyr::Spanned::new(file.clone(), at, at)),
            ..Default::default()
        };
        let count = |k: Arc<TrustedKeys>| k.ssh.as_ref().map_or(0, |s| s.signers.len());
        let v = Verdicts::default();
        assert_eq!(v.keys("a", &vc).map(count), Ok(1));
        let (_, seen) = checked(Err(Unverified::Unsigned));
        v.put("a", "x", seen.clone());
        v.put("b", "x", seen);
        assert_eq!(v.keys("a", &vc).map(count), Ok(1));
        assert!(v.get("a", "x").is_some(), "unchanged keys keep the verdicts");
        std::fs::write(&file, format!("ada {ada}bob {ada}")).expect("write");
        assert_eq!(v.keys("a", &vc).map(count), Ok(2));
        assert!(v.get("a", "x").is_none() && v.get("b", "x").is_some());
        std::fs::write(&file, "bob ssh-ed25519 AAAAbroken\n").expect("write");
        assert!(v.keys("a", &vc).expect_err("bad line").contains(":1: not a public key"));
    }

    #[test]
    fn a_tag_proves_only_the_commit_it_points_at() {
        let raw = include_bytes!("../verify/testdata/ssh-ed25519.tag");
        let keys = TrustedKeys {
            ssh: Some(verify::AllowedSigners::parse(include_str!("../verify/testdata/allowed_signers")).expect("keys")),
            openpgp: None,
        };
        let parsed = verify::object::parse(ObjectKind::Tag, raw, &verify::Limits::default()).expect("tag");
        let (target, _) = parsed.target.expect("target");
        assert!(judge(ObjectKind::Tag, &target, Some(raw), &keys).verdict.is_ok());
        let other = judge(ObjectKind::Tag, &"c".repeat(40), Some(raw), &keys);
        assert!(matches!(other.verdict, Err(Unverified::Malformed { .. })), "{other:?}");
        let lightweight = judge(ObjectKind::Tag, &target, None, &keys);
        assert_eq!(lightweight.verdict, Err(Unverified::Unsigned));
    }
}
