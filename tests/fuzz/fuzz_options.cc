#include "tests/fuzz/fuzz_options.h"

#include <cmath>

namespace mha_fuzz {

void FuzzScoreOptions(FuzzInput& in, bool positional, mha::MultiheadAttentionConfig* c) {
  if (in.Int(0, 3) == 0) c->scale = in.Bool() ? 1.0f : 0.3f;
  if (in.Int(0, 3) == 0) c->softcap = in.Bool() ? 0.7f : 20.0f;
  if (positional && in.Int(0, 3) == 0) c->window = {in.Int(-1, 4), in.Int(-1, 4)};
  if (positional && in.Int(0, 3) == 0) {
    c->alibi.enabled = true;
    c->alibi.symmetric = in.Bool();
  }
  c->sinks = in.Int(0, 3) == 0;
}

void FuzzRotaryTable(FuzzInput& in, mha::RotaryConfig* r) {
  const int kind = in.Int(0, 4);
  if (kind == 4) {
    for (int64_t i = 0; i < r->dim / 2; ++i) {
      r->inv_freq.push_back(std::ldexp(1.0f + in.Int(0, 255) / 256.0f, -in.Int(0, 12)));
    }
    if (in.Bool()) r->attention_factor = 0.5 + in.Int(0, 8) / 8.0;
    if (in.Bool()) r->dim = 0;
    return;
  }
  const double bases[] = {10000.0, 100.0, 3.0};
  r->base = bases[in.Int(0, 2)];
  mha::RopeScaling& s = r->scaling;
  const double context = std::ldexp(1.0, in.Int(2, 13));  // original_max_position_embeddings
  if (kind == 1) {
    s.type = "linear";
    s.factor = 1 + in.Int(0, 15) / 2.0;
  } else if (kind == 2) {
    s.type = "llama3";
    s.factor = 1 + in.Int(0, 31);
    s.low_freq_factor = 0.5 + in.Int(0, 3) / 2.0;
    s.high_freq_factor = *s.low_freq_factor + 0.5 + in.Int(0, 7);
    s.original_max_position_embeddings = context;
  } else if (kind == 3) {
    s.type = "yarn";
    s.factor = 0.5 + in.Int(0, 63) / 2.0;
    s.original_max_position_embeddings = context;
    if (in.Bool()) s.beta_fast = 1 + in.Int(0, 63);
    if (in.Bool()) s.beta_slow = 0.5 + in.Int(0, 3);
    s.truncate = in.Bool();
    const int attention = in.Int(0, 2);
    if (attention == 1) s.attention_factor = 0.5 + in.Int(0, 8) / 8.0;
    if (attention == 2) {
      s.mscale = in.Int(1, 4) * 0.25;
      s.mscale_all_dim = in.Int(1, 4) * 0.25;
    }
  }
}

std::string DescribeOptions(const mha::MultiheadAttentionConfig& c) {
  std::string d;
  if (c.scale != 0.0f) d += ", scale " + std::to_string(c.scale);
  if (c.softcap != 0.0f) d += ", softcap " + std::to_string(c.softcap);
  if (c.window.enabled()) {
    d += ", window [" + std::to_string(c.window.left) + ", " + std::to_string(c.window.right) + "]";
  }
  if (c.alibi.enabled) d += c.alibi.symmetric ? ", symmetric alibi" : ", alibi";
  if (c.sinks) d += ", sinks";
  const mha::RotaryConfig& r = c.rotary;
  if (!r.enabled) return d;
  d += ", rotary " + std::to_string(r.dim) + (r.interleaved ? " interleaved" : "");
  if (!r.inv_freq.empty()) d += " (table given)";
  if (r.scaling.given()) d += " " + r.scaling.type;
  if (r.attention_factor) d += ", attention factor " + std::to_string(*r.attention_factor);
  return d;
}

}  // namespace mha_fuzz
