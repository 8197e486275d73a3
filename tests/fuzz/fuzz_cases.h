// The fuzz cases, shared by the libFuzzer entry points (tests/fuzz/*_fuzzer.cc)
// and the corpus replay gtest (tests/native/fuzz_replay_test.cc). Each decodes
// any byte string into one case, runs it and returns "" when every check
// passed, else what went wrong. Crashes and sanitizer reports are left to the
// harness.
#ifndef MHA_TESTS_FUZZ_FUZZ_CASES_H_
#define MHA_TESTS_FUZZ_FUZZ_CASES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace mha_fuzz {

// ParseSafetensors, ToFloat32 on every entry, and MultiheadAttention::LoadSafetensors
// into modules whose parameters the fixtures carry (then a forward when it loaded).
std::string RunSafetensorsCase(const uint8_t* data, size_t size);

// One MultiheadAttention::Forward or ScaledDotProductAttention call with a
// fuzzed config, shapes (valid or not), masks and values, or a decoding
// schedule on a KV cache (decode_case.h): valid calls must succeed and match
// the scalar reference, invalid ones must return an error.
std::string RunForwardCase(const uint8_t* data, size_t size);

// For the libFuzzer entry points: prints `problem` and aborts unless it is
// empty, so libFuzzer records the input. Returns 0.
int AbortOnProblem(const char* fuzz_case, const std::string& problem);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_FUZZ_CASES_H_
