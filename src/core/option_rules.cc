#include "src/core/option_rules.h"

#include <cmath>
#include <limits>
#include <string>

namespace mha {

// 0 asks for a scale's default and for no softcap. The functional form takes
// any finite scale, as PyTorch's does; a module's is positive.
const ScoreRules kModuleScoreRules = {
    {"module", "scale", 0.0f, "a positive finite number (or 0 for the default)"},
    {"module", "softcap", 0.0f, "a positive finite number (or 0 for none)"},
};
const ScoreRules kSdpaScoreRules = {
    {"sdpa", "scale", -std::numeric_limits<float>::infinity(), "a finite number"},
    {"sdpa", "softcap", 0.0f, "a positive finite number (or 0 for none)"},
};

Status CheckOption(const OptionRule& rule, float value) {
  if (std::isfinite(value) && value >= rule.min) return Status::Ok();
  return Status::InvalidArgument(std::string(rule.name) + ": expected " + rule.expected +
                                 ", got " + std::to_string(value));
}

}  // namespace mha
