// Where a module's tensors are in a checkpoint and how they are named
// (docs/design.md, "Weights from the modules people have"): the options of
// MultiheadAttention's loads; src/io/weight_layouts.h detects and maps layouts.
#ifndef MHA_SRC_WEIGHT_OPTIONS_H_
#define MHA_SRC_WEIGHT_OPTIONS_H_

#include <map>
#include <string>

#include "src/tensor.h"

namespace mha {

enum class WeightLayout { kAuto, kTorch, kQkvLinear, kGpt2, kNeox };

struct WeightOptions {
  // Only names starting with it are considered, and matched after it
  // (e.g. "encoder.layer.0.attention.").
  std::string prefix;
  // kAuto: detected from the names under `prefix`.
  WeightLayout layout = WeightLayout::kAuto;
  // For layouts not in the table: role ("q", "k", "v", "out", or "qkv" for a
  // fused projection) -> module name under `prefix` ("to_q", "attn.proj"),
  // whose tensors are "<name>.weight" and, optionally, "<name>.bias". Roles
  // left out are detected. With `names`, the layout is qkv-linear (a fused
  // "qkv" is then one nn.Linear, weight (q + k + v, E)) unless `layout` says
  // gpt2 (Conv1D roles "qkv" and "out"); the torch layout takes no names.
  std::map<std::string, std::string> names;
};

// A checkpoint as the layout code sees it: tensor name -> shape.
using ShapeMap = std::map<std::string, Shape>;

}  // namespace mha

#endif  // MHA_SRC_WEIGHT_OPTIONS_H_
