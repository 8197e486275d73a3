// Rotary tables (docs/design.md, "The attention of today's models", step 3): the
// inverse frequency of each rotary pair and the factor on cos and sin, from a
// base and Hugging Face's rope_scaling (as config.json has it) or from a table
// given outright. The rotary kernel only consumes the table
// (src/attention/rotary.h).
#ifndef MHA_SRC_ATTENTION_ROPE_SCALING_H_
#define MHA_SRC_ATTENTION_ROPE_SCALING_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "src/rope_scaling.h"
#include "src/status.h"

namespace mha {

// Pair i at position p turns by p * inv_freq[i]; cos and sin are multiplied
// by attention_factor.
struct RotaryFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};

// The table of `dim` rotary features (even, already checked): inv_freq when
// given (dim / 2 finite entries; not with base or scaling), else base
// (default 10000) scaled per `scaling`, in double, in transformers' order of
// operations (modeling_rope_utils.py); attention_factor (positive, finite; not
// with scaling) when given, else 1 or YaRN's. InvalidArgument naming the
// field (rotary.inv_freq, rotary.scaling.factor, ...) otherwise.
Status RotaryTable(size_t dim, std::optional<double> base, const RopeScaling& scaling,
                   const std::vector<float>& inv_freq, std::optional<double> attention_factor,
                   RotaryFrequencies* out);

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_ROPE_SCALING_H_
