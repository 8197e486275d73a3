// The forward fuzz case: MultiheadAttention::Forward or
// ScaledDotProductAttention with fuzzed everything, checked against
// tests/fuzz/reference_mha.h. Small dims keep each case fast and in range.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "src/core/attention_call.h"
#include "src/multihead_attention.h"
#include "tests/fuzz/decode_case.h"
#include "tests/fuzz/fuzz_cases.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_options.h"
#include "tests/fuzz/reference_mha.h"

namespace mha_fuzz {
namespace {

using mha::Shape;

bool NonNegative(const Shape& s) {
  for (int64_t d : s) {
    if (d < 0) return false;
  }
  return true;
}

// The forward contract's shape rules (multihead_attention.h), restated.
bool MhaShapesValid(const mha::MultiheadAttentionConfig& c, const Shape& q, const Shape& k,
                    const Shape& v, const mha::ForwardOptions& o) {
  const size_t rank = q.size();
  if ((rank != 2 && rank != 3) || k.size() != rank || v.size() != rank) return false;
  if (!NonNegative(q) || !NonNegative(k) || !NonNegative(v)) return false;
  const bool batched = rank == 3, bf = batched && c.batch_first;
  const int64_t L = q[bf ? 1 : 0], S = k[bf ? 1 : 0], N = batched ? q[bf ? 0 : 1] : 1;
  auto layout = [&](int64_t seq, int64_t f) {
    return !batched ? Shape{seq, f} : bf ? Shape{N, seq, f} : Shape{seq, N, f};
  };
  if (q != layout(L, c.embed_dim) || k != layout(S, c.kdim) || v != layout(S, c.vdim)) return false;
  if (S == 0 && !c.add_bias_kv && !c.add_zero_attn) return false;
  const Shape kpm = batched ? Shape{N, S} : Shape{S};
  if (o.key_padding_mask.present() && o.key_padding_mask.shape != kpm) return false;
  const Shape per_head = {batched ? N * c.num_heads : c.num_heads, L, S};
  const Shape& am = o.attn_mask.shape;
  return !o.attn_mask.present() || am == Shape{L, S} || am == per_head;
}

// scaled_dot_product_attention's shape rules (multihead_attention.h), restated.
bool SdpaShapesValid(const Shape& q, const Shape& k, const Shape& v, const mha::SdpaOptions& o) {
  const size_t rank = q.size();
  if ((rank != 3 && rank != 4) || k.size() != rank || v.size() != rank) return false;
  if (!NonNegative(q) || !NonNegative(k) || !NonNegative(v)) return false;
  Shape k_want = q, v_want = q;
  k_want[rank - 2] = v_want[rank - 2] = k[rank - 2];
  v_want[rank - 1] = v[rank - 1];
  if (k != k_want || v != v_want || q[rank - 1] == 0 || k[rank - 2] == 0) return false;
  const Shape per_head = {rank == 4 ? q[1] : 1};
  for (const mha::TensorView* t : {&o.sinks, &o.alibi_slopes}) {
    if (t->data != nullptr && t->shape != per_head) return false;
  }
  if (!o.attn_mask.present()) return true;
  if (o.is_causal) return false;
  const Shape& m = o.attn_mask.shape;
  if (m.size() < 2 || m.size() > rank || m.back() != k[rank - 2]) return false;
  Shape target = q;
  target[rank - 1] = k[rank - 2];
  for (size_t d = 0; d < m.size(); ++d) {
    const int64_t t = target[rank - m.size() + d];
    if (m[d] != t && m[d] != 1) return false;
  }
  return true;
}

bool RowHasNan(const std::vector<float>& data, size_t row_len, size_t row) {
  for (size_t e = 0; e < row_len; ++e) {
    if (std::isnan(data[row * row_len + e])) return true;
  }
  return false;
}

// PyTorch's NaN rows: a NaN in a query row makes that output row NaN; with
// no mask (so no key is skipped), a NaN in any key row (or value row, when
// v_len > 0) makes every output row of its batch NaN. Batches are numbered by query_batch(row) and
// key_batch(row); `out` must be NaN wherever this says so.
template <typename QueryBatch, typename KeyBatch>
std::string CheckNanRows(const std::vector<float>& q, size_t q_len, const std::vector<float>& k,
                         size_t k_len, const std::vector<float>& v, size_t v_len, bool unmasked,
                         QueryBatch query_batch, KeyBatch key_batch, const mha::Tensor& out,
                         size_t out_len) {
  const size_t rows = q_len > 0 ? q.size() / q_len : 0;
  std::vector<bool> nan_batch;
  for (size_t r = 0; unmasked && k_len > 0 && r < k.size() / k_len; ++r) {
    const bool nan = RowHasNan(k, k_len, r) || (v_len > 0 && RowHasNan(v, v_len, r));
    if (nan_batch.size() <= key_batch(r)) nan_batch.resize(key_batch(r) + 1, false);
    if (nan) nan_batch[key_batch(r)] = true;
  }
  for (size_t r = 0; r < rows; ++r) {
    const size_t b = query_batch(r);
    const bool nan = RowHasNan(q, q_len, r) || (b < nan_batch.size() && nan_batch[b]);
    for (size_t e = 0; nan && e < out_len; ++e) {
      if (!std::isnan(out.data[r * out_len + e])) {
        return "NaN input for output row " + std::to_string(r) + " but its element " +
               std::to_string(e) + " is " + std::to_string(out.data[r * out_len + e]);
      }
    }
  }
  return "";
}

// "" when `b` holds the very bits of `a` (NaN included): the same call at
// another thread count (docs/design.md, "Semantics (the contract)").
std::string SameBits(const mha::Tensor& a, const mha::Tensor& b, const std::string& what) {
  // (memcmp of an empty tensor's null data is undefined, hence the test of size.)
  const bool same = a.shape == b.shape && a.data.size() == b.data.size() &&
                    (a.data.empty() ||
                     std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0);
  return same ? "" : what + ": other bits at another thread count";
}

// Weights that weights_dtype int8 quantizes: the projections'.
bool Quantized(const std::string& name) {
  return name == "out_proj.weight" ||
         (name.size() >= 11 && name.compare(name.size() - 11, 11, "proj_weight") == 0);
}

bool AllFinite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); });
}

std::string Outcome(const mha::Status& status, bool valid, const std::string& shapes) {
  if (status.ok()) return valid ? "" : "accepted an invalid call: " + shapes;
  if (status.message().empty()) return "error without a message for " + shapes;
  if (valid && status.code() != mha::StatusCode::kOutOfMemory) {
    return "rejected a valid call (" + shapes + "): " + status.message();
  }
  return "";
}

// pool, other: the thread counts the call runs at, and must give the same bits at.
std::string MhaCase(FuzzInput& in, bool specials, mha::ThreadPool* pool, mha::ThreadPool* other) {
  mha::MultiheadAttentionConfig config;
  config.num_heads = in.Int(1, 4);
  config.embed_dim = in.Bool() ? in.Int(1, 16) : config.num_heads * in.Int(1, 4);
  config.bias = in.Bool();
  config.add_bias_kv = in.Int(0, 3) == 0;
  config.add_zero_attn = in.Int(0, 3) == 0;
  config.kdim = in.Int(0, 3) == 0 ? in.Int(1, 12) : 0;
  config.vdim = in.Int(0, 3) == 0 ? in.Int(1, 12) : 0;
  config.qk_head_dim = in.Int(0, 3) == 0 ? in.Int(1, 6) : 0;
  config.v_head_dim = in.Int(0, 3) == 0 ? in.Int(1, 6) : 0;
  config.batch_first = in.Bool();
  // The score options of today's models; window and ALiBi only where every key
  // has a position (Create refuses them with bias_k or zero attention).
  FuzzScoreOptions(in, !config.add_bias_kv && !config.add_zero_attn, &config);
  FuzzQkNorm(in, &config.qk_norm);
  // int8 weights now and then: a non-finite projection weight is refused at
  // load, naming the tensor; the reference's float weights do not bound the
  // quantized results, so they are checked for NaN, finiteness and bits.
  const bool int8 = in.Int(0, 3) == 0;
  if (int8) config.weights_dtype = mha::WeightsDtype::kInt8;
  std::unique_ptr<mha::MultiheadAttention> module;
  const mha::Status created = mha::MultiheadAttention::Create(config, &module);
  const bool creatable = config.embed_dim % config.num_heads == 0 ||
                         (config.qk_head_dim > 0 && config.v_head_dim > 0);
  if (created.ok() != creatable || (!created.ok() && created.message().empty())) {
    return "Create(embed_dim " + std::to_string(config.embed_dim) + ", num_heads " +
           std::to_string(config.num_heads) + "): " + (created.ok() ? "ok" : created.message());
  }
  if (!created.ok()) return "";
  const mha::MultiheadAttentionConfig& c = module->config();

  // Parameters; now and then one is left out, and Forward must then refuse.
  std::map<std::string, std::vector<float>> params;
  const std::vector<mha::ParameterSpec> specs = module->Parameters();
  int skipped = in.Int(0, 15) == 0 ? in.Int(0, 15) % static_cast<int>(specs.size()) : -1;
  bool tame = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (static_cast<int>(i) == skipped) continue;
    std::vector<float>& values = params[specs[i].name];
    // Sinks stay finite: a NaN one would poison its head's rows, masked or not.
    FuzzTensor(in, specs[i].shape, specials && specs[i].name != "sinks", &values);
    tame &= Tame(values);
    const mha::Status loaded = module->LoadParameter(specs[i].name, values.data(), specs[i].shape);
    if (int8 && Quantized(specs[i].name) && !AllFinite(values)) {
      if (loaded.ok() || loaded.message().find(specs[i].name) == std::string::npos) {
        return "int8 LoadParameter(" + specs[i].name + ") of a non-finite weight: " +
               (loaded.ok() ? "ok" : loaded.message());
      }
      skipped = static_cast<int>(i);  // not loaded: Forward must refuse
      continue;
    }
    if (!loaded.ok()) return "LoadParameter(" + specs[i].name + "): " + loaded.message();
  }

  const bool batched = in.Int(0, 3) != 0;
  const bool self = c.kdim == c.embed_dim && c.vdim == c.embed_dim && in.Int(0, 3) == 0;
  const int64_t L = in.Int(0, 9), N = in.Int(0, 3), H = c.num_heads;
  const int64_t S = self ? L : in.Int(0, 9);
  auto layout = [&](int64_t seq, int64_t f) {
    return !batched ? Shape{seq, f} : c.batch_first ? Shape{N, seq, f} : Shape{seq, N, f};
  };
  std::vector<float> qd, kd, vd, kpm_f, am_f;
  std::vector<uint8_t> kpm_b, am_b;
  const mha::TensorView query = FuzzTensor(in, MaybeBreak(in, layout(L, c.embed_dim)), specials, &qd);
  // Rows of tiny values now and then (int8 quantizes them by their max).
  if (in.Int(0, 7) == 0) {
    for (float& x : qd) x *= 1e-37f;
  }
  mha::TensorView key = query, value = query;
  if (!self) {
    key = FuzzTensor(in, MaybeBreak(in, layout(S, c.kdim)), specials, &kd);
    value = FuzzTensor(in, MaybeBreak(in, layout(S, c.vdim)), specials, &vd);
  }
  mha::ForwardOptions o;
  o.key_padding_mask = FuzzMask(in, in.Int(0, 2), MaybeBreak(in, batched ? Shape{N, S} : Shape{S}),
                                specials, &kpm_b, &kpm_f);
  const Shape am_shape = in.Bool() ? Shape{L, S} : Shape{batched ? N * H : H, L, S};
  o.attn_mask = FuzzMask(in, in.Int(0, 2), MaybeBreak(in, am_shape), specials, &am_b, &am_f);
  o.need_weights = in.Bool();
  o.average_attn_weights = in.Bool();
  o.is_causal = in.Int(0, 3) == 0;

  mha::ForwardResult result;
  const mha::Status status = module->Forward(query, key, value, o, &result, pool);
  const bool valid = MhaShapesValid(c, query.shape, key.shape, value.shape, o) && skipped < 0;
  const std::string shapes = "MHA query " + mha::ShapeString(query.shape) + ", key " +
                             mha::ShapeString(key.shape) + ", value " + mha::ShapeString(value.shape) +
                             ", key_padding_mask " + mha::ShapeString(o.key_padding_mask.shape) +
                             ", attn_mask " + mha::ShapeString(o.attn_mask.shape);
  const std::string outcome = Outcome(status, valid, shapes);
  if (!outcome.empty() || !status.ok()) return outcome;
  mha::ForwardResult again;
  if (!module->Forward(query, key, value, o, &again, other).ok()) return shapes + ": failed again";
  std::string bits = SameBits(result.output, again.output, shapes + ": output");
  if (bits.empty()) bits = SameBits(result.weights, again.weights, shapes + ": weights");
  if (!bits.empty()) return bits;

  tame &= Tame(qd) && Tame(kd) && Tame(vd) && Tame(kpm_f, true) && Tame(am_f, true);
  if (!tame) {
    const bool batched = query.shape.size() == 3, bf = batched && c.batch_first;
    const size_t Lq = query.shape[bf ? 1 : 0], Sk = key.shape[bf ? 1 : 0];
    const size_t Nq = batched ? query.shape[bf ? 0 : 1] : 1;
    auto batch_of = [&](size_t seq) {
      return [=](size_t row) { return !batched ? 0 : bf ? row / seq : row % Nq; };
    };
    const bool unmasked = !o.key_padding_mask.present() && !o.attn_mask.present() &&
                          !o.is_causal && !c.window.enabled();
    return CheckNanRows(qd, c.embed_dim, self ? qd : kd, c.kdim, self ? qd : vd, c.vdim, unmasked,
                        batch_of(Lq), batch_of(Sk), result.output, c.embed_dim);
  }
  if (int8) {
    // Finite in, finite out where a row has a key (the reference says which).
    mha::ForwardResult expected;
    ReferenceMha(c, params, query, key, value, o, &expected);
    for (size_t i = 0; i < result.output.data.size(); ++i) {
      if (std::isfinite(expected.output.data[i]) && !std::isfinite(result.output.data[i])) {
        return shapes + ": int8 output [" + std::to_string(i) + "] is " +
               std::to_string(result.output.data[i]);
      }
    }
    return "";
  }
  mha::ForwardResult expected;
  ReferenceMha(c, params, query, key, value, o, &expected);
  std::string diff = Compare(result.output, expected.output, shapes + ": output");
  if (diff.empty()) diff = Compare(result.weights, expected.weights, shapes + ": weights");
  return diff;
}

std::string SdpaCase(FuzzInput& in, bool specials, mha::ThreadPool* pool, mha::ThreadPool* other) {
  const bool rank4 = in.Bool();
  const int64_t B = in.Int(0, 2), H = in.Int(0, 3), L = in.Int(0, 9), S = in.Int(0, 9);
  const int64_t E = in.Int(0, 8), Ev = in.Int(0, 8);
  auto shape = [&](int64_t seq, int64_t f) { return rank4 ? Shape{B, H, seq, f} : Shape{B, seq, f}; };
  std::vector<float> qd, kd, vd, mask_f;
  std::vector<uint8_t> mask_b;
  const mha::TensorView query = FuzzTensor(in, MaybeBreak(in, shape(L, E)), specials, &qd);
  const mha::TensorView key = FuzzTensor(in, MaybeBreak(in, shape(S, E)), specials, &kd);
  const mha::TensorView value = FuzzTensor(in, MaybeBreak(in, shape(S, Ev)), specials, &vd);
  mha::SdpaOptions o;
  // A mask of 2 to 4 trailing dims of (B, H, L, S), some broadcast (1).
  Shape mask_shape = shape(L, S);
  mask_shape.erase(mask_shape.begin(), mask_shape.begin() + in.Int(0, rank4 ? 2 : 1));
  for (size_t d = 0; d + 1 < mask_shape.size(); ++d) {
    if (in.Int(0, 3) == 0) mask_shape[d] = 1;
  }
  o.attn_mask = FuzzMask(in, in.Int(0, 2), MaybeBreak(in, mask_shape), specials, &mask_b, &mask_f);
  o.is_causal = in.Int(0, 3) == 0;
  o.scale = in.Int(0, 3) == 0 ? in.Value(specials) : 0.0f;
  if (in.Int(0, 3) == 0) o.softcap = in.Bool() ? 0.7f : 20.0f;
  if (in.Int(0, 3) == 0) o.window = {in.Int(-1, 4), in.Int(-1, 4)};
  std::vector<float> sinks, slopes;  // finite, as the module's sinks
  if (in.Int(0, 3) == 0) o.sinks = FuzzTensor(in, MaybeBreak(in, {rank4 ? H : 1}), false, &sinks);
  if (in.Int(0, 3) == 0) {
    o.alibi_slopes = FuzzTensor(in, MaybeBreak(in, {rank4 ? H : 1}), false, &slopes);
  }

  mha::Tensor output;
  const mha::Status status = mha::ScaledDotProductAttention(query, key, value, o, &output, pool);
  // The options by the core's own rules (option_rules.h): the draw has infinite scales too.
  const bool valid = SdpaShapesValid(query.shape, key.shape, value.shape, o) &&
                     mha::CheckScoreOptions({o.scale, o.softcap, o.window}, mha::kSdpaScoreRules).ok();
  const std::string shapes = "SDPA query " + mha::ShapeString(query.shape) + ", key " +
                             mha::ShapeString(key.shape) + ", value " + mha::ShapeString(value.shape) +
                             ", attn_mask " + mha::ShapeString(o.attn_mask.shape) +
                             (o.is_causal ? ", causal" : "");
  const std::string outcome = Outcome(status, valid, shapes);
  if (!outcome.empty() || !status.ok()) return outcome;
  mha::Tensor again;
  if (!mha::ScaledDotProductAttention(query, key, value, o, &again, other).ok()) {
    return shapes + ": failed again";
  }
  const std::string bits = SameBits(output, again, shapes + ": output");
  if (!bits.empty()) return bits;

  const size_t q_row = query.shape.back(), out_row = value.shape.back();
  if (!(Tame(qd) && Tame(kd) && Tame(vd) && Tame(mask_f, true) && Tame({o.scale}))) {
    const size_t L = query.shape[query.shape.size() - 2], S = key.shape[key.shape.size() - 2];
    const bool unmasked = !o.attn_mask.present() && !o.is_causal && !o.window.enabled();
    // A NaN value only poisons its own feature here: no output projection mixes them.
    return CheckNanRows(qd, q_row, kd, key.shape.back(), vd, 0, unmasked,
                        [=](size_t row) { return row / L; }, [=](size_t row) { return row / S; },
                        output, out_row);
  }
  mha::Tensor expected;
  ReferenceSdpa(query, key, value, o, &expected);
  return Compare(output, expected, shapes + ": output");
}

}  // namespace

std::string RunForwardCase(const uint8_t* data, size_t size) {
  static mha::ThreadPool two(2), eight(8);
  FuzzInput in(data, size);
  const bool specials = in.Int(0, 3) == 0;
  // 1, 2 or 8 threads; the forward cases run again on 2 (1 when on a pool).
  mha::ThreadPool* const pools[] = {nullptr, &two, &eight};
  mha::ThreadPool* pool = pools[in.Int(0, 2)];
  mha::ThreadPool* other = pool != nullptr ? nullptr : &two;
  switch (in.Int(0, 3)) {
    case 1: return SdpaCase(in, specials, pool, other);
    case 3: return DecodeCase(in, pool);
    default: return MhaCase(in, specials, pool, other);
  }
}

}  // namespace mha_fuzz
