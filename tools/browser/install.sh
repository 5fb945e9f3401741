#!/usr/bin/env bash
# Installs Debian's Chromium (package `chromium`, /usr/bin/chromium) for the status page's
# browser test (lab/tests/status_page.rs), when it is missing. Needs root and apt-get
# (CI: a fresh Debian machine); elsewhere it says what to install and fails.
#
#   tools/browser/install.sh        # prints the path of the browser on success
#
# The test starts it headless itself; no driver (chromedriver, Playwright) is needed.
set -euo pipefail
browser=${PLUMB_CHROMIUM:-/usr/bin/chromium}
if [ -x "$browser" ]; then
  echo "$browser"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's chromium (for lab/tests/status_page.rs)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
if [ ! -x "$browser" ]; then
  echo "no browser at $browser: install Debian's chromium package (apt-get install chromium) or set PLUMB_CHROMIUM" >&2
  exit 1
fi
"$browser" --version >&2
echo "$browser"
