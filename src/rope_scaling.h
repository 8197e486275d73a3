// Hugging Face's rope_scaling as a module's config holds it (docs/design.md, "The
// attention of today's models", step 3); src/attention/rope_scaling.h turns it
// into a rotary table.
#ifndef MHA_SRC_ROPE_SCALING_H_
#define MHA_SRC_ROPE_SCALING_H_

#include <optional>
#include <string>

namespace mha {

// Hugging Face's rope_scaling dict; absent fields are nullopt. type (its
// rope_type, or type): "" none, "default" none, "linear", "llama3" or "yarn";
// any other is an error naming it.
struct RopeScaling {
  std::string type;
  std::optional<double> factor;                            // every kind but default
  std::optional<double> low_freq_factor, high_freq_factor;  // llama3
  std::optional<double> original_max_position_embeddings;  // llama3, yarn
  std::optional<double> beta_fast, beta_slow;              // yarn: 32 and 1 when absent
  bool truncate = true;                                    // yarn
  std::optional<double> attention_factor, mscale, mscale_all_dim;  // yarn
  bool given() const { return !type.empty(); }
};

}  // namespace mha

#endif  // MHA_SRC_ROPE_SCALING_H_
