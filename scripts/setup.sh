#!/usr/bin/env bash
# Installs what the build and tests need and is missing (Debian 12). Idempotent.
set -euo pipefail

# The browser tests' engines: chromium, firefox-esr, and WebKitGTK (webkit2gtk-driver brings
# libwebkit2gtk-4.1-0, whose MiniBrowser the tests launch under xvfb-run, which needs xauth).
PACKAGES=(cmake g++ make libhwy-dev libgtest-dev libbenchmark-dev emscripten chromium clang-14 libclang-rt-14-dev
          firefox-esr webkit2gtk-driver xvfb xauth)

missing=()
for p in "${PACKAGES[@]}"; do
  # Native or arch-independent copy installed ("dpkg -s" is ambiguous once
  # the arm64 multiarch copies of the -dev packages are there too).
  dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$p" 2>/dev/null |
    grep -Eq "^($(dpkg --print-architecture)|all) installed$" || missing+=("$p")
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # Waits for another apt-get (a parallel setup) instead of failing on its lock.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" >/dev/null
fi
