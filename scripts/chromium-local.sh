#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver (Debian packages) for the browser tests, once.
# Idempotent: does nothing when /usr/bin/chromium and /usr/bin/chromedriver are both present.
#   scripts/chromium-local.sh
set -euo pipefail
if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
    sudo="sudo"
fi
echo "chromium-local: installing chromium and chromium-driver (Debian packages)" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
test -x /usr/bin/chromium && test -x /usr/bin/chromedriver
