// The rules of the numeric options the core checks, in one table: the core's
// checks read it, the binding hands it to the JS package (whose
// web/src/option_rules.js scripts/option_rules.mjs writes from it), and the
// fuzzers' oracle asks the same checks, so that no copy of a rule can drift.

#ifndef MHA_SRC_CORE_OPTION_RULES_H_
#define MHA_SRC_CORE_OPTION_RULES_H_

#include <cstdint>

#include "src/status.h"

namespace mha {

// A finite value in [min, max) ((min, max) when min_excluded; -inf, +inf: no
// bound), as the float the core computes with.
struct OptionRule {
  const char* call;      // "module" (MultiheadAttentionConfig) or "sdpa" (SdpaOptions)
  const char* name;      // the option, as messages name it
  float min;
  bool min_excluded;     // min itself refused (a positive number)
  float max;
  const char* expected;  // the message's "expected ..."
};

// The score options' rules (attention_call.h, ScoreOptions) of a module's
// config and of the functional form's options.
struct ScoreRules {
  OptionRule scale, softcap;
};
extern const ScoreRules kModuleScoreRules;
extern const ScoreRules kSdpaScoreRules;

// The other numeric options of a module's config.
struct ModuleRules {
  OptionRule dropout, qk_norm_eps, qk_norm_weight_offset;
};
extern const ModuleRules kModuleRules;

// Sizes the core refuses before allocating anything (besides a cache whose
// storage is not addressable: tensor.h, Addressable).
constexpr int64_t kMaxDim = int64_t{1} << 24;          // each dim of a module's config
constexpr int64_t kMaxCacheLength = int64_t{1} << 40;  // a cache's max_length

// Ok, or InvalidArgument "<name>: expected <expected>, got <value>".
Status CheckOption(const OptionRule& rule, float value);

}  // namespace mha

#endif  // MHA_SRC_CORE_OPTION_RULES_H_
