#!/usr/bin/env bash
# Records the signed Git objects the unit tests of src/verify read: real `git`, `ssh-keygen`
# and `gpg` make them once; plumb never runs any of these tools. Run from anywhere:
#   src/verify/testdata/make.sh
# It rewrites every file of this directory except itself (keys are fresh each run, so the
# expected fingerprints in the tests are read from the recorded files, not written down).
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export GNUPGHOME=$work/gnupg HOME=$work
mkdir -m 700 gnupg
export GIT_AUTHOR_NAME="Ada Author" GIT_AUTHOR_EMAIL=ada@example.com
export GIT_COMMITTER_NAME="Ada Author" GIT_COMMITTER_EMAIL=ada@example.com
# Committer and tagger time of the SSH-signed objects: 2026-01-02T03:04:05Z (1767323045).
export GIT_AUTHOR_DATE="1767323045 +0000" GIT_COMMITTER_DATE="1767323045 +0000"

ssh-keygen -q -t ed25519 -N '' -C ada@example.com -f ada
ssh-keygen -q -t ed25519 -N '' -C mallory@example.com -f mallory
ssh-keygen -q -t ecdsa -b 256 -N '' -C bob@example.com -f bob
ssh-keygen -q -t rsa -b 3072 -N '' -C carol@example.com -f carol

git init -q repo
cd repo
git config gpg.format ssh
commit() { # key file message -> raw commit object on stdout
  echo "$2" >file
  git add file
  if [ -n "$1" ]; then git -c user.signingkey="$work/$1.pub" commit -q -S -m "$2"; else git commit -q -m "$2"; fi
  git cat-file commit HEAD
}
commit ada "signed by ada (ed25519)" >"$out/ssh-ed25519.commit"
commit bob "signed by bob (ecdsa p256)" >"$out/ssh-ecdsa.commit"
commit carol "signed by carol (rsa 3072)" >"$out/ssh-rsa.commit"
commit mallory "signed by mallory, whom nobody trusts" >"$out/ssh-unknown.commit"
commit "" "not signed" >"$out/unsigned.commit"
git -c user.signingkey="$work/ada.pub" tag -s -m "release v1 signed by ada" v1
git cat-file tag v1 >"$out/ssh-ed25519.tag"
git tag -a -m "release v2, not signed" v2
git cat-file tag v2 >"$out/unsigned.tag"
# A signature by ada over the same payload in the namespace "file" instead of "git".
sed '/^gpgsig /,/^ -----END SSH SIGNATURE-----$/d' "$out/ssh-ed25519.commit" >payload
ssh-keygen -q -Y sign -n file -f "$work/ada" payload
{
  sed -n '1,/^committer /p' payload
  printf 'gpgsig '
  sed -n '1p' payload.sig
  sed -n '2,$s/^/ /p' payload.sig
  sed -n '/^committer /,$p' payload | sed 1d
} >"$out/ssh-wrong-namespace.commit"
cd "$work"
cp ada.pub "$out/ada.pub"
cp bob.pub "$out/bob.pub"
cp carol.pub "$out/carol.pub"
cp mallory.pub "$out/mallory.pub"
{
  echo "# who may sign what plumb deploys"
  echo "ada@example.com namespaces=\"git\" $(cut -d' ' -f1,2 ada.pub)"
  echo "bob@example.com,robert@example.com $(cut -d' ' -f1,2 bob.pub)"
  echo
  echo "carol@example.com valid-after=\"20250101\",valid-before=\"20260101\" $(cut -d' ' -f1,2 carol.pub)"
} >"$out/allowed_signers"

# OpenPGP: ada's key (no expiry), a key that expired before the commit time, one revoked
# after signing, and one nobody trusts.
gen() { # uid expire -> fingerprint
  gpg -q --batch --pinentry-mode loopback --passphrase '' --quick-gen-key "$1" ed25519 sign "$2" 2>/dev/null
  gpg --with-colons --list-keys "$1" | awk -F: '/^fpr/ {print $10; exit}'
}
ada_fpr=$(gen "Ada Author <ada@example.com>" never)
old_fpr=$(gen "Olga Old <olga@example.com>" never)
rev_fpr=$(gen "Rex Revoked <rex@example.com>" never)
eve_fpr=$(gen "Eve Unknown <eve@example.com>" never)
cd repo
git config gpg.format openpgp
# OpenPGP keys carry their creation time: these commits are made now, after it.
now="$(date +%s) +0000"
export GIT_AUTHOR_DATE=$now GIT_COMMITTER_DATE=$now
pgp_commit() { # fingerprint message [committer date] -> raw commit object on stdout
  echo "$2" >file
  git add file
  GIT_COMMITTER_DATE=${3:-$GIT_COMMITTER_DATE} git -c user.signingkey="$1" commit -q -S -m "$2"
  git cat-file commit HEAD
}
pgp_commit "$ada_fpr" "signed by ada with OpenPGP" >"$out/pgp.commit"
pgp_commit "$eve_fpr" "signed by eve, whom nobody trusts" >"$out/pgp-unknown.commit"
pgp_commit "$rev_fpr" "signed by rex, whose key is revoked" >"$out/pgp-revoked.commit"
git -c user.signingkey="$ada_fpr" tag -s -m "release v3 signed by ada" v3
git cat-file tag v3 >"$out/pgp.tag"
# olga's key gets an expiry one day after its creation; her commit claims a committer time
# a year later (the key is judged at the commit's committer time).
gpg -q --batch --pinentry-mode loopback --passphrase '' --quick-set-expire "$old_fpr" 1d 2>/dev/null
pgp_commit "$old_fpr" "signed by olga after her key expired" "$(( $(date +%s) + 365 * 86400 )) +0000" >"$out/pgp-expired.commit"
cd "$work"
gpg -q --batch --pinentry-mode loopback --passphrase '' --yes --gen-revoke "$rev_fpr" 2>/dev/null <<<$'y\n1\nkey compromised\n\ny\n' >rev.asc || \
  sed 's/^:-----/-----/' "gnupg/openpgp-revocs.d/$rev_fpr.rev" >rev.asc
gpg -q --batch --import rev.asc 2>/dev/null
gpg --armor --export "$ada_fpr" "$old_fpr" "$rev_fpr" >"$out/keyring.asc"
gpg --armor --export "$eve_fpr" >"$out/eve.asc"
echo "recorded in $out:"
ls "$out"
