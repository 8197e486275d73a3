#include "src/core/attention_call.h"

#include <string>

namespace mha {

Status CheckScoreOptions(const ScoreOptions& options, const ScoreRules& rules) {
  MHA_RETURN_IF_ERROR(CheckOption(rules.scale, options.scale));
  MHA_RETURN_IF_ERROR(CheckOption(rules.softcap, options.softcap));
  const WindowConfig& w = options.window;
  if (w.left < -1 || w.right < -1) {
    return Status::InvalidArgument("window: expected left and right >= 0 (or -1 for no bound), "
                                   "got [" + std::to_string(w.left) + ", " +
                                   std::to_string(w.right) + "]");
  }
  return Status::Ok();
}

AttentionPlan MakePlan(const CallDims& dims, size_t num_extra, bool need_weights, bool causal,
                       const ScoreOptions& score) {
  AttentionPlan plan;
  plan.N = static_cast<size_t>(dims.N);
  plan.H = static_cast<size_t>(dims.H);
  plan.Hkv = static_cast<size_t>(dims.Hkv);
  plan.L = static_cast<size_t>(dims.L);
  plan.S = static_cast<size_t>(dims.S);
  plan.P = static_cast<size_t>(dims.P);
  plan.qk_dim = static_cast<size_t>(dims.qk_dim);
  plan.v_dim = static_cast<size_t>(dims.v_dim);
  plan.num_extra = num_extra;
  plan.causal = causal;
  plan.score = score;
  plan.kernel = ChooseAttentionKernel(plan.L, need_weights, num_extra);
  return plan;
}

KVRows AppendKeys(KVCache* cache, const KVRows& new_rows, size_t S) {
  if (cache == nullptr) return new_rows;
  KVCacheAccess::Write(*cache, {new_rows.keys, new_rows.k_batch, new_rows.k_step, new_rows.k_head},
                       {new_rows.values, new_rows.v_batch, new_rows.v_step, new_rows.v_head}, S);
  return KVCacheAccess::Read(*cache);
}

void FillHeads(const AttentionPlan& plan, const HeadSources& sources,
               std::vector<kernels::AttentionHead>* heads) {
  heads->clear();
  if (plan.N * plan.H == 0) return;  // no head (and Hkv may be 0: no group to divide by)
  const size_t group = plan.H / plan.Hkv, keys = plan.Keys(), T = plan.T();
  for (size_t n = 0; n < plan.N; ++n) {
    const size_t masked_keys = sources.masked_keys != nullptr ? sources.masked_keys[n] : T;
    const float* key_bias = sources.key_bias != nullptr ? sources.key_bias + n * T : nullptr;
    const size_t* live = sources.live != nullptr ? sources.live + n * 2 * (T + 1) : nullptr;
    if (live != nullptr && !kernels::BiasBetweenLiveKeys(key_bias, live, live + T + 1, T)) {
      key_bias = nullptr;  // padding at the ends alone: the live ends hide it
    }
    for (size_t h = 0; h < plan.H; ++h) {
      kernels::AttentionHead head;
      head.q = sources.q.At(n, h);
      head.q_stride = sources.q.row;
      sources.kv.PointHead(n, h / group, &head);
      head.out = sources.out.At(n, h);
      head.out_stride = sources.out.row;
      head.num_queries = plan.L;
      head.masked_keys = masked_keys;
      head.qk_dim = plan.qk_dim;
      head.v_dim = plan.v_dim;
      head.scale = plan.score.scale;
      head.num_extra = plan.num_extra;
      if (plan.num_extra > 0) {
        head.extra_k = sources.extra_k + h * plan.num_extra * plan.qk_dim;
        head.extra_v = sources.extra_v + h * plan.num_extra * plan.v_dim;
      }
      kernels::ScoreRule& rule = head.rule;
      if (sources.mask.base != nullptr) {
        rule.mask = sources.mask.At(n, h);
        rule.mask_stride = sources.mask.row;
      }
      rule.key_bias = key_bias;
      if (live != nullptr) {
        rule.live_from = live;
        rule.live_to = live + T + 1;
      }
      rule.causal = plan.causal;
      rule.causal_offset = plan.P;
      rule.softcap = plan.score.softcap;
      const WindowConfig& w = plan.score.window;
      rule.window_left = w.left >= 0 ? static_cast<size_t>(w.left) : kernels::kNoWindow;
      rule.window_right = w.right >= 0 ? static_cast<size_t>(w.right) : kernels::kNoWindow;
      if (sources.sinks != nullptr) rule.sink = sources.sinks[h];
      if (sources.alibi_slopes != nullptr) rule.alibi_slope = sources.alibi_slopes[h];
      rule.alibi_symmetric = sources.alibi_symmetric;
      if (sources.weights != nullptr) {
        head.weights = sources.weights + (n * plan.H + h) * plan.L * keys;
        head.weights_stride = keys;
      }
      heads->push_back(head);
    }
  }
}

void CommitKeys(KVCache* cache, size_t T) {
  if (cache != nullptr) KVCacheAccess::Grow(*cache, static_cast<int64_t>(T));
}

}  // namespace mha
