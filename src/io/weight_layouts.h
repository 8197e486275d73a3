// Which tensors of a checkpoint hold one attention module's projections, in
// the layouts people save (docs/design.md, "Weights from the modules people have"):
//   torch       nn.MultiheadAttention's own names (in_proj_weight, ...).
//   qkv-linear  one nn.Linear per projection: q/k/v + out_proj, W_q/W_k/W_v +
//               W_o or W, query/key/value + fc_out, BERT's self.query.. +
//               output.dense, ViT's attention.query.., Llama's and Whisper's
//               q_proj/k_proj/v_proj + o_proj or out_proj.
//               Fused: Phi-3's qkv_proj ([q | k | v] rows) + o_proj. T5's
//               q/k/v + o.
//   gpt2        c_attn (Conv1D: weight (E, q + k + v), fused, stored
//               transposed) + c_proj (Conv1D).
//   neox        query_key_value, fused and grouped per key/value head: for
//               each of the num_kv_heads groups, num_heads / num_kv_heads
//               query heads, one key head, one value head (GPT-NeoX's and
//               BLOOM's view (H, 3, D), Falcon-7B's H + 2 heads, Falcon-40B's
//               groups) + dense.
// Names and shapes only: MultiheadAttention reads the data
// (multihead_attention_weights.cc, with the mapping of weight_plan.h).
#ifndef MHA_SRC_IO_WEIGHT_LAYOUTS_H_
#define MHA_SRC_IO_WEIGHT_LAYOUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/status.h"
#include "src/tensor.h"
#include "src/weight_options.h"

namespace mha {

// "auto", "torch", "qkv-linear", "gpt2", "neox".
const char* LayoutName(WeightLayout layout);
Status ParseLayout(const std::string& name, WeightLayout* out);

// One attention module of a checkpoint: its projections' module names, in
// full (prefix included; "<name>.weight" exists). torch uses none of them;
// a fused projection sets `qkv` and leaves q, k and v empty.
struct AttentionModule {
  std::string prefix;
  WeightLayout layout = WeightLayout::kAuto;
  std::string q, k, v, qkv, out;
};

// The module under options.prefix. Errors: no attention module there, or
// several candidates (two layouts, or two names for one projection); both
// list the names found under the prefix and the nearest prefixes that hold
// an attention module. A forced layout or names that do not match the
// tensors are errors naming what is missing.
Status FindAttentionModule(const ShapeMap& tensors, const WeightOptions& options,
                           AttentionModule* out);

// What the shapes say about one module found by ListAttentionModules.
struct AttentionModuleInfo {
  AttentionModule module;
  int64_t embed_dim = 0;  // query features (and the output projection's)
  int64_t kdim = 0;       // key features
  int64_t vdim = 0;       // value features
  // Output features of the q, k and v projections: num_heads * qk_head_dim,
  // num_kv_heads * qk_head_dim, num_kv_heads * v_head_dim.
  int64_t q_size = 0, k_size = 0, v_size = 0;
  bool bias = false;     // the checkpoint holds some projection bias
  bool bias_kv = false;  // it holds bias_k and bias_v
  bool sinks = false;    // it holds "sinks" (one logit per head, gpt-oss)
  // Its q/k norms: "" (none), "head" (q_norm.weight of one head's features,
  // shared), "head-per-head" (one row per head) or "all" (the whole projection);
  // qk_norm_bias: it holds q_norm.bias (LayerNorm's).
  std::string qk_norm;
  bool qk_norm_bias = false;
};

// Every attention module the tensors hold whose shapes are consistent,
// prefixes in natural order ("layer.2." before "layer.10."); a prefix with
// candidates of two layouts gives one entry each. The number of heads is in
// no name or shape: it comes from the model's configuration (Hugging Face's
// config.json: num_attention_heads, num_key_value_heads).
std::vector<AttentionModuleInfo> ListAttentionModules(const ShapeMap& tensors);

}  // namespace mha

#endif  // MHA_SRC_IO_WEIGHT_LAYOUTS_H_
