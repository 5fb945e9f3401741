#!/usr/bin/env bash
# Installs Debian's Chromium and its WebDriver (packages `chromium` and
# `chromium-driver`: /usr/bin/chromium, /usr/bin/chromedriver, built from one source, so
# their versions match) for the browser tests (lab/tests/status_page.rs, lab/tests/ui.rs),
# when either is missing. Needs root and apt-get (CI: a fresh Debian machine); elsewhere
# it says what to install and fails.
#
#   tools/browser/install.sh        # prints the path of the browser on success
#
# The tests start the browser headless themselves (screenshots, the DOM) and the driver
# for the test that clicks the page's buttons (lab/tests/ui.rs, over WebDriver).
set -euo pipefail
browser=${PLUMB_CHROMIUM:-/usr/bin/chromium}
driver=${PLUMB_CHROMEDRIVER:-/usr/bin/chromedriver}
if [ -x "$browser" ] && [ -x "$driver" ]; then
  echo "$browser"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's chromium and chromium-driver (for the lab's browser tests)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver fonts-dejavu-core >/dev/null
fi
for tool in "$browser" "$driver"; do
  if [ ! -x "$tool" ]; then
    echo "no $tool: install Debian's chromium and chromium-driver packages (apt-get install chromium chromium-driver) or set PLUMB_CHROMIUM / PLUMB_CHROMEDRIVER" >&2
    exit 1
  fi
done
"$browser" --version >&2
"$driver" --version >&2
echo "$browser"
