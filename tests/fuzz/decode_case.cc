#include "tests/fuzz/decode_case.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "src/multihead_attention.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_options.h"
#include "tests/fuzz/reference_mha.h"

namespace mha_fuzz {
namespace {

using mha::Shape;

// float16 storage: the reference rounds keys and values as the cache does,
// but from double projections, so a value near a rounding tie may round the
// other way (one half ulp, 2^-11 relative).
constexpr double kFloat16Slack = 2.0;

mha::MultiheadAttentionConfig FuzzConfig(FuzzInput& in) {
  mha::MultiheadAttentionConfig c;
  c.num_heads = in.Int(1, 4);
  do {
    c.num_kv_heads = in.Int(1, static_cast<int>(c.num_heads));
  } while (c.num_heads % c.num_kv_heads != 0);
  c.embed_dim = c.num_heads * in.Int(1, 4);
  if (in.Int(0, 3) == 0) {
    c.qk_head_dim = in.Int(1, 6);
    c.v_head_dim = in.Int(1, 6);
  }
  c.bias = in.Bool();
  c.batch_first = in.Bool();
  const int64_t qk = c.qk_head_dim > 0 ? c.qk_head_dim : c.embed_dim / c.num_heads;
  if (qk >= 2 && in.Bool()) {
    c.rotary.enabled = true;
    c.rotary.dim = 2 * in.Int(1, static_cast<int>(qk / 2));
    c.rotary.interleaved = in.Bool();
    FuzzRotaryTable(in, &c.rotary);
  }
  FuzzQkNorm(in, &c.qk_norm);
  FuzzScoreOptions(in, true, &c);
  // A left window (a rolling cache needs one).
  if (in.Int(0, 3) == 0) c.window.left = in.Int(0, 4);
  return c;
}

// Rows [begin, end) of the (T, N, E) history in the module's layout.
mha::TensorView Rows(const std::vector<float>& history, int64_t begin, int64_t end, int64_t N,
                     int64_t E, bool batched, bool bf, std::vector<float>* out) {
  const int64_t len = end - begin;
  out->assign(len * N * E, 0.0f);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      const int64_t dst = bf ? n * len + t : t * N + n;
      for (int64_t e = 0; e < E; ++e) (*out)[dst * E + e] = history[((begin + t) * N + n) * E + e];
    }
  }
  const Shape shape = !batched ? Shape{len, E} : bf ? Shape{N, len, E} : Shape{len, N, E};
  return {out->data(), shape};
}

}  // namespace

std::string DecodeCase(FuzzInput& in, mha::ThreadPool* pool) {
  std::unique_ptr<mha::MultiheadAttention> module;
  const mha::Status created = mha::MultiheadAttention::Create(FuzzConfig(in), &module);
  if (!created.ok()) return "decode: Create: " + created.message();
  const mha::MultiheadAttentionConfig& c = module->config();
  std::map<std::string, std::vector<float>> params;
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    FuzzTensor(in, spec.shape, false, &params[spec.name]);
    const mha::Status loaded = module->LoadParameter(spec.name, params[spec.name].data(), spec.shape);
    if (!loaded.ok()) return "decode: LoadParameter(" + spec.name + "): " + loaded.message();
  }
  const bool batched = in.Int(0, 3) != 0, bf = batched && c.batch_first;
  const int64_t N = batched ? in.Int(1, 2) : 1, E = c.embed_dim;
  const int64_t max_length = in.Int(1, 12);
  const bool half = in.Int(0, 2) == 0;
  const int64_t left = c.window.left;
  const bool rolling = left >= 0 && in.Bool();
  std::unique_ptr<mha::KVCache> cache;
  const mha::Status made = module->CreateKVCache(
      N, max_length, half ? mha::KVCacheDtype::kFloat16 : mha::KVCacheDtype::kFloat32, rolling,
      &cache);
  if (!made.ok()) return "decode: CreateKVCache: " + made.message();

  std::vector<float> history;     // (T, N, E): the tokens the cache holds
  std::vector<int32_t> rotated;   // (T, N): their rotary positions
  int64_t held = 0;               // a rolling cache's keys in memory, as the contract says
  // Per entry, the pad slots the cache remembers (a prefill mask's leading masked ones).
  std::vector<int64_t> pads(static_cast<size_t>(N), 0);
  for (int call = 0, calls = in.Int(1, 6); call < calls; ++call) {
    const int64_t P = cache->length();
    const int op = in.Int(0, 7);
    if (op == 0 && in.Bool()) {  // a beam-search reorder; an index N must fail and change nothing
      std::vector<int32_t> from(static_cast<size_t>(N));
      bool valid = true;
      for (int32_t& f : from) {
        const int b = in.Int(0, 7);
        f = b < 7 ? b % static_cast<int>(N) : static_cast<int>(N);
        valid = valid && b < 7;
      }
      const mha::Status reordered = cache->Reorder(from.data(), from.size());
      if (reordered.ok() != valid || cache->length() != P) {
        return "decode: reorder (N " + std::to_string(N) + (valid ? "" : ", an index N") +
               "): " + (reordered.ok() ? "ok" : reordered.message());
      }
      if (!valid) continue;
      const std::vector<float> old = history;
      const std::vector<int32_t> old_positions = rotated;
      const std::vector<int64_t> old_pads = pads;
      for (int64_t n = 0; n < N; ++n) pads[n] = old_pads[from[n]];
      for (int64_t t = 0; t < P; ++t) {
        for (int64_t n = 0; n < N; ++n) {
          std::copy_n(old.begin() + (t * N + from[n]) * E, E, history.begin() + (t * N + n) * E);
          rotated[t * N + n] = old_positions[t * N + from[n]];
        }
      }
      continue;
    }
    if (op == 0) {
      // A rolling cache keeps the keys keep - left .. keep - 1 the next query sees, or fails.
      const int64_t keep = in.Int(0, static_cast<int>(P));
      const int64_t needed = rolling ? std::max<int64_t>(0, keep - left) : keep;
      const bool valid = needed >= keep || needed >= P - held;
      const mha::Status truncated = cache->Truncate(keep);
      if (truncated.ok() != valid || cache->length() != (valid ? keep : P)) {
        return "decode: truncate " + std::to_string(keep) + " of " + std::to_string(P) +
               (rolling ? " (rolling, held " + std::to_string(held) + ")" : "") + ": " +
               (truncated.ok() ? "ok" : truncated.message());
      }
      if (!valid) continue;
      held = std::max<int64_t>(0, held - (P - keep));
      for (int64_t& p : pads) p = std::min(p, keep);
      history.resize(keep * N * E);
      rotated.resize(keep * N);
      continue;
    }
    const bool attend_only = op == 1 && P > 0;
    const int64_t L = in.Int(1, 4), S = attend_only ? 0 : L, T = P + S;
    std::vector<float> tokens, step_rows, key_rows, kpm_f, am_f;
    std::vector<uint8_t> kpm_b, am_b;
    const Shape shape = !batched ? Shape{L, E} : bf ? Shape{N, L, E} : Shape{L, N, E};
    const mha::TensorView x = FuzzTensor(in, shape, false, &tokens);
    mha::ForwardOptions o;
    o.cache = cache.get();
    // Per-row rotary positions (self-attention steps), any in [0, 40).
    std::vector<int32_t> positions;
    if (c.rotary.enabled && !attend_only && in.Int(0, 2) == 0) {
      for (int64_t i = 0; i < N * L; ++i) positions.push_back(in.Int(0, 39));
      o.positions = positions.data();
      o.num_positions = positions.size();
    }
    o.is_causal = in.Int(0, 3) != 0;
    o.need_weights = in.Int(0, 3) == 0;
    o.average_attn_weights = in.Bool();
    if (in.Int(0, 2) == 0) {
      o.key_padding_mask = FuzzMask(in, 1, batched ? Shape{N, T} : Shape{T}, false, &kpm_b, &kpm_f);
    }
    if (in.Int(0, 3) == 0) o.attn_mask = FuzzMask(in, 2, Shape{L, T}, false, &am_b, &am_f);
    // What the cache adds (docs/design.md, "Caches an app keeps"): its padding as a mask
    // and, with rotary, per-entry positions, where the call gives none.
    const bool prefill = P == 0 && o.key_padding_mask.present();
    std::vector<int64_t> call_pads = pads;
    for (int64_t n = 0; n < N && prefill; ++n) {
      int64_t t = 0;
      while (t < T && (o.key_padding_mask.kind == mha::MaskKind::kBool
                           ? kpm_b[n * T + t] != 0
                           : std::isinf(kpm_f[n * T + t]) && kpm_f[n * T + t] < 0)) {
        ++t;
      }
      call_pads[n] = t;
    }
    const bool padded = std::any_of(call_pads.begin(), call_pads.end(), [](int64_t p) { return p > 0; });
    mha::ForwardOptions ref = o;
    std::vector<uint8_t> pad_mask;
    std::vector<int32_t> pad_positions;
    if (padded && !o.key_padding_mask.present()) {
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t t = 0; t < T; ++t) pad_mask.push_back(t < call_pads[n] ? 1 : 0);
      }
      ref.key_padding_mask = mha::MaskView::Bool(pad_mask.data(), batched ? Shape{N, T} : Shape{T});
    }
    if (padded && c.rotary.enabled && positions.empty()) {
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t i = 0; i < L; ++i) {
          pad_positions.push_back(static_cast<int32_t>(P + i >= call_pads[n] ? P + i - call_pads[n] : 1));
        }
      }
      ref.positions = pad_positions.data();
      ref.num_positions = pad_positions.size();
    }
    mha::ForwardResult result;
    const mha::TensorView none;
    const mha::Status status = module->Forward(x, attend_only ? none : x, attend_only ? none : x,
                                                o, &result, pool);
    const std::string what =
        "decode call " + std::to_string(call) + " (P " + std::to_string(P) + ", L " +
        std::to_string(L) + ", S_new " + std::to_string(S) + "; H " + std::to_string(c.num_heads) +
        ", Hkv " + std::to_string(c.num_kv_heads) + ", E " + std::to_string(E) + ", head dims " +
        std::to_string(c.qk_head_dim) + "/" + std::to_string(c.v_head_dim) +
        DescribeOptions(c) + (half ? ", float16" : "") + (o.is_causal ? ", causal" : "") +
        (o.key_padding_mask.present() ? ", kpm" : "") + (o.attn_mask.present() ? ", attn_mask" : "") +
        (o.need_weights ? ", weights" : "") + (positions.empty() ? "" : ", positions") +
        (rolling ? ", rolling, left " + std::to_string(left) + ", max_length " +
                       std::to_string(max_length)
                 : "") + ")";
    if (rolling ? max_length < left + S : T > max_length) {
      if (status.ok() || cache->length() != P) return what + ": appended past max_length";
      continue;
    }
    if (!status.ok()) return what + ": " + status.message();
    if (cache->length() != T) return what + ": cache length " + std::to_string(cache->length());
    if (rolling && cache->held() != std::min(held + S, max_length)) {
      return what + ": held " + std::to_string(cache->held());
    }
    held = std::min(held + S, max_length);
    if (prefill) pads = call_pads;
    // The new tokens join the history (seq-first) when appended, with their positions.
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t src = bf ? n * L + t : t * N + n;
        history.insert(history.end(), tokens.begin() + src * E, tokens.begin() + (src + 1) * E);
        rotated.push_back(ref.positions == nullptr ? static_cast<int32_t>(P + t)
                                                   : ref.positions[n * L + t]);
      }
    }
    const mha::TensorView keys = Rows(history, 0, T, N, E, batched, bf, &key_rows);
    std::vector<int32_t> key_positions(static_cast<size_t>(N * T));  // batch-major
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < N; ++n) key_positions[n * T + t] = rotated[t * N + n];
    }
    mha::ForwardResult expected;
    ReferenceMha(c, params, x, keys, keys, ref, &expected, static_cast<size_t>(P), half,
                 key_positions.data());
    const double slack = half ? kFloat16Slack : 1.0;
    std::string diff = Compare(result.output, expected.output, what + ": output", slack);
    if (diff.empty()) diff = Compare(result.weights, expected.weights, what + ": weights", slack);
    if (!diff.empty()) return diff;
  }
  return "";
}

}  // namespace mha_fuzz
