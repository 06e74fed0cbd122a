#!/bin/sh
# Install smoe's build and test dependencies from Debian's packages.
# Idempotent: packages already installed are skipped (no apt-get at all when
# nothing is missing). Needs root, or sudo.
set -eu
# usage: scripts/deps.sh [EXTRA_PACKAGE ...]
pkgs="build-essential cmake ninja-build pkg-config libyaml-dev libcjson-dev \
libopenblas-dev libopenmpi-dev openmpi-bin libssl-dev iproute2 libpng-dev librsvg2-bin $*"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
