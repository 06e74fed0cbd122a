#!/bin/sh
# Install smoe's build and test dependencies from Debian's packages.
# Idempotent: packages already installed are skipped (no apt-get at all when
# nothing is missing). Installing needs root, or sudo.
set -eu
# usage: scripts/deps.sh [EXTRA_PACKAGE ...]
pkgs="build-essential cmake ninja-build pkg-config libyaml-dev libcjson-dev \
libopenblas-dev libopenmpi-dev openmpi-bin libssl-dev iproute2 $*"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "scripts/deps.sh: installing packages needs root or sudo; missing:$missing" >&2
    echo "scripts/deps.sh: run this script as root, or install those packages and run it again" >&2
    exit 1
  fi
  SUDO=sudo
fi
echo "installing:$missing"
echo "(apt-get update, then install: about 30-60 s and 150-250 MB of downloads on a fresh machine)"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
