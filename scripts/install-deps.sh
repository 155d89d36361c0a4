#!/usr/bin/env bash
# Installs the build and test dependencies from Debian's packages (needs root or sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
pkgs=(cmake ninja-build g++ clang git pkg-config
      libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev python3-minimal)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "install-deps: ok"
