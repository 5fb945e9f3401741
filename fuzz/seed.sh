#!/usr/bin/env bash
# Writes the fuzz seeds of target webhook_decide from the webhook vectors: for each
# vector, `<name>` = headers.txt, a blank line, the body file (as sent; every
# headers.txt starts with "Host:", an even first byte, so its own signatures are kept),
# and `<name>.signed` = the same behind a line "1" (odd first byte: the target re-signs
# the body with the test secret, so mutations of the body still reach the parsers).
# Usage: fuzz/seed.sh [vector dir]   (default: ../shared/webhook-vectors beside the repo)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vectors=${1:-$here/../../shared/webhook-vectors}
out=$here/seeds/webhook_decide
mkdir -p "$out"
n=0
for dir in "$vectors"/*/; do
  name=$(basename "$dir")
  body=$dir/body.json
  [ -f "$body" ] || body=$dir/body.form
  { cat "$dir/headers.txt"; printf '\n'; cat "$body"; } > "$out/$name"
  { printf '1\n'; cat "$out/$name"; } > "$out/$name.signed"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no vectors in $vectors" >&2; exit 1; }
echo "$n vectors → $((2 * n)) seeds in $out"
