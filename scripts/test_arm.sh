#!/usr/bin/env bash
# `npm run test:arm`: cross-builds the native core for aarch64 (Debian's
# g++-aarch64-linux-gnu, Highway and GoogleTest for arm64) and runs every
# GoogleTest suite under qemu-aarch64 -cpu max at several SVE vector lengths.
# Highway 1.0.3 compiles NEON, SVE, SVE2, SVE_256 and SVE2_128 for aarch64 and
# the per-target tests run each one the emulated CPU supports: NEON, SVE and
# SVE2 at every length, SVE2_128 only at 128 bits, SVE_256 only at 256 bits.
# Prints passed/failed counts per target and vector length.
#
# --quick (the stage `npm test` runs): everything but the RSS soak, which runs
# 10,000 forwards (3-6 minutes per vector length under qemu) on whichever
# target is best and checks the process RSS; the native x86 stage runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build/arm
SVE_BITS=(128 256 512)
if [ "${1:-}" = --quick ]; then export GTEST_FILTER="-SoakTest.*"; fi

bash scripts/setup_arm.sh
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release --no-warn-unused-cli >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

LOGS="$BUILD/test-logs"
rm -rf "$LOGS"
mkdir -p "$LOGS"

# One suite at one vector length; its output goes to a log named after both.
run_suite() {
  local binary=$1 bits=$2
  local log="$LOGS/$(basename "$binary").sve$bits.log"
  if QEMU_CPU="max,sve-default-vector-length=$((bits / 8))" \
      qemu-aarch64 "$binary" >"$log" 2>&1; then
    echo "arm: $(basename "$binary") at SVE $bits bits passed"
  else
    echo "arm: $(basename "$binary") at SVE $bits bits FAILED:"
    grep -E '^\[  FAILED  \]|Failure|Abort' "$log" | head -40
    return 1
  fi
}
export -f run_suite
export LOGS

suites=("$BUILD"/*_test)
status=0
for binary in "${suites[@]}"; do
  for bits in "${SVE_BITS[@]}"; do echo "$binary $bits"; done
done | xargs -P "$(nproc)" -n 2 bash -c 'run_suite "$@"' _ || status=1

# A table of passed/failed counts per suite and Highway target (rows) and SVE
# vector length (columns), from gtest's result lines. Per-target test names end
# in the target name (".../SVE2", or ".../SVE2_<param>" for typed ones); a test
# that started but never finished (its suite crashed) counts as failed.
awk -v columns="${SVE_BITS[*]}" '
  function record(name, result,   n, parts, target, row) {
    sub(/,$/, "", name)
    n = split(name, parts, "/")
    target = "-"
    if (n > 1 && match(parts[n], /^(NEON|SVE2_128|SVE_256|SVE2|SVE|EMU128|SCALAR)(_|$)/)) {
      target = substr(parts[n], RSTART, RLENGTH); sub(/_$/, "", target)
    }
    row = sprintf("%-20s %-9s", suite, target)
    rows[row] = 1; count[row, bits, result]++; total[result]++
  }
  FNR == 1 {
    if (running != "") record(running, "failed")
    running = ""
    match(FILENAME, /[^\/]*\.sve[0-9]+\.log$/)
    split(substr(FILENAME, RSTART, RLENGTH), name_parts, ".")
    suite = name_parts[1]; bits = substr(name_parts[2], 4)
  }
  /^\[ RUN      \] / { running = $4 }
  /^\[       OK \] / { record($4, "passed"); running = "" }
  /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { record($4, "failed"); running = "" }
  END {
    if (running != "") record(running, "failed")
    ncol = split(columns, col, " ")
    header = sprintf("arm: %-20s %-9s", "suite", "target")
    for (c = 1; c <= ncol; ++c) header = header sprintf("  %9s", "SVE " col[c])
    print header " (passed/failed per SVE vector length in bits)"
    for (row in rows) {
      line = "arm: " row
      for (c = 1; c <= ncol; ++c) {
        p = count[row, col[c], "passed"] + 0; f = count[row, col[c], "failed"] + 0
        line = line sprintf("  %9s", p + f > 0 ? p "/" f : "")
      }
      print line | "sort"
    }
    close("sort")
    printf "arm: %d passed, %d failed\n", total["passed"], total["failed"]
    exit total["failed"] > 0
  }
' "$LOGS"/*.log || status=1
exit $status
