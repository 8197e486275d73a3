// How one attention module's tensors become nn.MultiheadAttention's
// parameters: which tensor, which rows, transposed (Conv1D) or not, and zero
// biases where the checkpoint has none. Every shape is checked against the
// module's configuration first, and errors name the checkpoint's tensor.
#ifndef MHA_SRC_IO_WEIGHT_PLAN_H_
#define MHA_SRC_IO_WEIGHT_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/status.h"
#include "src/tensor.h"
#include "src/io/weight_layouts.h"

namespace mha {

// What the module's configuration expects (from its parameter shapes).
struct ProjectionShapes {
  Shape q, k, v, out;     // Linear weights: (out_features, in_features)
  int64_t num_heads = 0, num_kv_heads = 0;  // the neox layout's groups
  bool bias = true;
  Shape bias_k, bias_v;   // empty without add_bias_kv
  Shape sinks;            // empty without sinks
  // The shapes q_norm.weight and k_norm.weight may have (empty without
  // qk_norm); norm_bias: q_norm.bias / k_norm.bias may be present (LayerNorm).
  std::vector<Shape> q_norm, k_norm;
  bool norm_bias = false;
  std::string qk_norm;    // "qk_norm rms over 'head'", for messages
  std::string config;     // "embed_dim 16, num_heads 2, ...", for messages
};

// Rows [begin, end) of a tensor (its dim 0; a Conv1D weight is transposed
// first, so rows are Linear output features); a 1-D tensor's rows are its
// elements. An empty `tensor` gives zeros: end - begin of them (biases only).
struct Piece {
  std::string tensor;
  bool transpose = false;
  int64_t begin = 0, end = 0;
};

// One parameter under its nn.MultiheadAttention name, pieces stacked on dim 0.
struct ParameterRecipe {
  std::string name;
  Shape shape;
  std::vector<Piece> pieces;
};

// The recipes for `module`. torch: every nn.MultiheadAttention name under the
// prefix as it is (the module checks those names and shapes itself, and
// their recipe names are relative to the prefix). Other layouts: q/k/v_proj_weight,
// in_proj_bias, out_proj.*, bias_k/bias_v, sinks, after checking every tensor used
// against `expected`; a bias in the checkpoint when `expected.bias` is false
// is an error. Every layout, torch's too: q_norm.* / k_norm.* under the
// prefix, present exactly when the module has q/k norms.
Status PlanParameters(const ShapeMap& tensors, const AttentionModule& module,
                      const ProjectionShapes& expected, std::vector<ParameterRecipe>* out);

// The tensor a recipe uses as it is (one whole, untransposed piece of the
// same shape), or null when it must be assembled.
const std::string* WholeTensor(const ParameterRecipe& recipe, const ShapeMap& tensors);

// Writes NumElements(recipe.shape) floats to `out` from the sources' float32
// data (each of its shape in `tensors`).
void Assemble(const ParameterRecipe& recipe, const ShapeMap& tensors,
              const std::map<std::string, const float*>& sources, float* out);

}  // namespace mha

#endif  // MHA_SRC_IO_WEIGHT_PLAN_H_
