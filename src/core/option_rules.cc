#include "src/core/option_rules.h"

#include <cmath>
#include <limits>
#include <string>

namespace mha {

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

// 0 asks for a scale's default and for no softcap. The functional form takes
// any finite scale, as PyTorch's does; a module's is positive.
const ScoreRules kModuleScoreRules = {
    {"module", "scale", 0.0f, false, kInf, "a positive finite number (or 0 for the default)"},
    {"module", "softcap", 0.0f, false, kInf, "a positive finite number (or 0 for none)"},
};
const ScoreRules kSdpaScoreRules = {
    {"sdpa", "scale", -kInf, false, kInf, "a finite number"},
    {"sdpa", "softcap", 0.0f, false, kInf, "a positive finite number (or 0 for none)"},
};
const ModuleRules kModuleRules = {
    {"module", "dropout", 0.0f, false, 1.0f, "a probability in [0, 1)"},
    {"module", "qk_norm.eps", 0.0f, true, kInf, "a positive finite number"},
    {"module", "qk_norm.weight_offset", -kInf, false, kInf, "a finite number"},
};

Status CheckOption(const OptionRule& rule, float value) {
  const bool above_min = rule.min_excluded ? value > rule.min : value >= rule.min;
  if (std::isfinite(value) && above_min && value < rule.max) return Status::Ok();
  return Status::InvalidArgument(std::string(rule.name) + ": expected " + rule.expected +
                                 ", got " + std::to_string(value));
}

}  // namespace mha
