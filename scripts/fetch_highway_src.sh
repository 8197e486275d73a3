#!/usr/bin/env bash
# Fetches Debian's Highway source package (the same 1.0.3 as libhwy-dev) into
# build/third_party/highway for the WebAssembly build: Emscripten's sysroot
# does not see /usr/include/hwy, and hwy/targets.cc + hwy/aligned_allocator.cc
# must be compiled for WASM. Idempotent; the result is never committed.
# Prints the source directory on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=build/third_party
SRC_DIR="$DEST/highway"

if [ -f "$SRC_DIR/hwy/targets.cc" ]; then
  echo "$SRC_DIR"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# apt-get source needs a deb-src entry for bookworm.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "fetch_highway_src: adding a deb-src entry for bookworm" >&2
  $SUDO tee /etc/apt/sources.list.d/bookworm-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO apt-get update -qq >&2
fi

# Same version as the installed headers, so native and WASM see one Highway.
VERSION=$(dpkg-query -W -f='${Version}' libhwy-dev 2>/dev/null || true)
mkdir -p "$DEST/download"
(
  cd "$DEST/download"
  if [ -n "$VERSION" ]; then
    apt-get source -qq "highway=$VERSION" >&2 || apt-get source -qq highway >&2
  else
    apt-get source -qq highway >&2
  fi
)
extracted=$(find "$DEST/download" -maxdepth 1 -mindepth 1 -type d -name 'highway-*' | head -n 1)
if [ -z "$extracted" ] || [ ! -f "$extracted/hwy/targets.cc" ]; then
  echo "fetch_highway_src: apt-get source highway did not produce hwy/targets.cc" >&2
  exit 1
fi
rm -rf "$SRC_DIR"
mv "$extracted" "$SRC_DIR"
rm -rf "$DEST/download"
echo "$SRC_DIR"
