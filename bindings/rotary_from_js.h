// The rotary part of createMultiheadAttention's config (web/src/rotary_config.js
// checked the types; absent numbers are undefined) as the core's RotaryConfig.
#ifndef MHA_BINDINGS_ROTARY_FROM_JS_H_
#define MHA_BINDINGS_ROTARY_FROM_JS_H_

#include <emscripten/val.h>

#include <optional>
#include <string>

#include "src/multihead_attention.h"

namespace mha {

inline std::optional<double> OptionalNumber(const emscripten::val& number) {
  if (number.isUndefined()) return std::nullopt;
  return number.as<double>();
}

inline RotaryConfig RotaryFromJS(const emscripten::val& rotary) {
  RotaryConfig r;
  r.enabled = true;
  r.dim = static_cast<int64_t>(rotary["dim"].as<double>());
  r.base = OptionalNumber(rotary["base"]);
  r.interleaved = rotary["interleaved"].as<bool>();
  r.attention_factor = OptionalNumber(rotary["attention_factor"]);
  if (!rotary["inv_freq"].isUndefined()) {
    r.inv_freq = emscripten::convertJSArrayToNumberVector<float>(rotary["inv_freq"]);
  }
  const emscripten::val s = rotary["scaling"];
  if (s.isUndefined()) return r;
  RopeScaling& scaling = r.scaling;
  scaling.type = s["type"].as<std::string>();
  scaling.factor = OptionalNumber(s["factor"]);
  scaling.low_freq_factor = OptionalNumber(s["low_freq_factor"]);
  scaling.high_freq_factor = OptionalNumber(s["high_freq_factor"]);
  scaling.original_max_position_embeddings = OptionalNumber(s["original_max_position_embeddings"]);
  scaling.beta_fast = OptionalNumber(s["beta_fast"]);
  scaling.beta_slow = OptionalNumber(s["beta_slow"]);
  scaling.truncate = s["truncate"].as<bool>();
  scaling.attention_factor = OptionalNumber(s["attention_factor"]);
  scaling.mscale = OptionalNumber(s["mscale"]);
  scaling.mscale_all_dim = OptionalNumber(s["mscale_all_dim"]);
  return r;
}

}  // namespace mha

#endif  // MHA_BINDINGS_ROTARY_FROM_JS_H_
