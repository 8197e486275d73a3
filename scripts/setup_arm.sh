#!/usr/bin/env bash
# Installs what the aarch64 cross build and its tests need and is missing
# (Debian 12): the cross compiler, qemu-user, and Highway and GoogleTest for
# arm64 as multiarch packages (headers shared with amd64, libraries under
# /usr/lib/aarch64-linux-gnu). Idempotent.
set -euo pipefail

PACKAGES=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# The arm64 packages can only be found after this (and an apt-get update).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup_arm: adding the arm64 architecture to dpkg"
  $SUDO dpkg --add-architecture arm64
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup_arm: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
