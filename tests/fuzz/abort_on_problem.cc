#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_cases.h"

namespace mha_fuzz {

int AbortOnProblem(const char* fuzz_case, const std::string& problem) {
  if (problem.empty()) return 0;
  std::fprintf(stderr, "%s fuzz case failed: %s\n", fuzz_case, problem.c_str());
  std::abort();
}

}  // namespace mha_fuzz
