#!/usr/bin/env bash
# Native tests under AddressSanitizer + UndefinedBehaviorSanitizer (build/asan),
# then the multi-threaded ones under ThreadSanitizer (build/tsan).
# Any report aborts its test, so a passing ctest means zero reports.
set -euo pipefail
cd "$(dirname "$0")/.."

# -O1 keeps the sanitized suite fast enough for CI while keeping stacks readable.
# clang: its UBSan also catches arithmetic on null pointers, which GCC's does not.
cmake -S . -B build/asan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMHA_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
cmake --build build/asan -j "$(nproc)"

# allocator_may_return_null: an impossible request must fail like malloc does
# (the core turns it into an OutOfMemory status), not abort inside ASan.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:abort_on_error=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build/asan && ctest --output-on-failure -j "$(nproc)")

# ThreadSanitizer on the suites that share modules and pools across threads.
cmake -S . -B build/tsan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -fsanitize=thread" >/dev/null
cmake --build build/tsan -j "$(nproc)" --target concurrency_test thread_pool_test
export TSAN_OPTIONS="halt_on_error=1"
build/tsan/concurrency_test --gtest_brief=1
build/tsan/thread_pool_test --gtest_brief=1
