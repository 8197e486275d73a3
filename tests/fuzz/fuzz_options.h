// The options of today's models (docs/design.md, "The attention of today's
// models") drawn for the fuzz cases: the score options and the rotary table.
#ifndef MHA_TESTS_FUZZ_FUZZ_OPTIONS_H_
#define MHA_TESTS_FUZZ_FUZZ_OPTIONS_H_

#include <string>

#include "src/multihead_attention.h"
#include "tests/fuzz/fuzz_input.h"

namespace mha_fuzz {

// scale, softcap, sinks, and (when `positional`: every key has a position,
// no bias_k or zero attention) a window and ALiBi.
void FuzzScoreOptions(FuzzInput& in, bool positional, mha::MultiheadAttentionConfig* c);

// The table of an enabled rotary config of rotary.dim features: a base, plain
// or scaled (linear, llama3, yarn with its options), or inv_freq given (with
// dim left for its length) and an attention factor.
void FuzzRotaryTable(FuzzInput& in, mha::RotaryConfig* r);

// The options drawn, for a failing case's description.
std::string DescribeOptions(const mha::MultiheadAttentionConfig& c);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_FUZZ_OPTIONS_H_
