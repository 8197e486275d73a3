#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan, build/fuzz) and runs
# each from its committed seed corpus (tests/fuzz/corpus/<case>) for
# FUZZ_SECONDS (default 60). A crash leaves its input in build/fuzz/crashes/:
# add it to the corpus (it is then replayed by fuzz_replay_test) and fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"

cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DMHA_SANITIZE=ON -DMHA_BUILD_FUZZERS=ON -DMHA_BUILD_TESTS=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target forward_fuzzer safetensors_fuzzer

export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p build/fuzz/crashes
for fuzz_case in safetensors forward; do
  # New inputs go to a scratch corpus; the committed seeds stay as they are.
  work="build/fuzz/corpus/$fuzz_case"
  mkdir -p "$work"
  echo "fuzz: $fuzz_case for ${seconds}s"
  log="build/fuzz/$fuzz_case.log"
  status=0
  "build/fuzz/tests/fuzz/${fuzz_case}_fuzzer" "$work" "tests/fuzz/corpus/$fuzz_case" \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="build/fuzz/crashes/${fuzz_case}-" \
    >"$log" 2>&1 || status=$?
  grep -E "stat::number_of_executed_units|stat::new_units_added|fuzz case failed|ERROR|SUMMARY" "$log" || true
  if [ "$status" -ne 0 ]; then tail -n 60 "$log"; exit "$status"; fi
done
