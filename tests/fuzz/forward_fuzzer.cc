// libFuzzer entry point: tests/fuzz/forward_case.cc.
#include "tests/fuzz/fuzz_cases.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return mha_fuzz::AbortOnProblem("forward", mha_fuzz::RunForwardCase(data, size));
}
