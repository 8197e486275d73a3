// The rotary table of the scalar reference (docs/design.md, "The attention of
// today's models", step 3), written from the contract's formulas pair by
// pair, sharing no code with src/attention/rope_scaling.cc.
#ifndef MHA_TESTS_FUZZ_REFERENCE_ROPE_H_
#define MHA_TESTS_FUZZ_REFERENCE_ROPE_H_

#include <vector>

#include "src/multihead_attention.h"

namespace mha_fuzz {

// inv_i for the rotary.dim / 2 pairs of a valid, resolved rotary config, and
// in *attention the factor on cos and sin.
std::vector<double> ReferenceInvFreq(const mha::RotaryConfig& r, double* attention);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_REFERENCE_ROPE_H_
