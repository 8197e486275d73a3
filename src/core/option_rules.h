// The rules of the numeric options the core checks, in one table: the core's
// checks read it, the binding hands it to the JS package (whose
// web/src/option_rules.js scripts/option_rules.mjs writes from it), and the
// fuzzers' oracle asks the same checks, so that no copy of a rule can drift.

#ifndef MHA_SRC_CORE_OPTION_RULES_H_
#define MHA_SRC_CORE_OPTION_RULES_H_

#include "src/status.h"

namespace mha {

// A finite value of at least `min` (-inf: any finite value), as the float the
// core computes with.
struct OptionRule {
  const char* call;      // "module" (MultiheadAttentionConfig) or "sdpa" (SdpaOptions)
  const char* name;      // the option, as messages name it
  float min;
  const char* expected;  // the message's "expected ..."
};

// The score options' rules (attention_call.h, ScoreOptions) of a module's
// config and of the functional form's options.
struct ScoreRules {
  OptionRule scale, softcap;
};
extern const ScoreRules kModuleScoreRules;
extern const ScoreRules kSdpaScoreRules;

// Ok, or InvalidArgument "<name>: expected <expected>, got <value>".
Status CheckOption(const OptionRule& rule, float value);

}  // namespace mha

#endif  // MHA_SRC_CORE_OPTION_RULES_H_
