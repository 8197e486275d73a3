// Decode attention: a few query rows (the new tokens, times the query heads
// that share one key/value head) against a long run of cached keys.
//
// The rows' keys are read once for all of them (grouped-query heads share
// every key load), in float32 or converted from float16 in registers. A call
// covers one range of keys and leaves a partial softmax state per row (max,
// sum of exponentials, unnormalised output); ranges run on different threads
// and DecodeMerge combines their states (flash-decoding). Scores for a
// sub-block of keys are kept per row, so the softmax over them is vectorised
// along the keys.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
#undef MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
#else
#define MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hwy/highway.h"
#include "src/kernels/float16-inl.h"
#include "src/kernels/kernels.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::DecodeGroup;

// Keys whose scores are held at once: one row of them per query row stays in L1.
constexpr size_t kDecodeSubBlock = 64;

inline size_t DecodeVectorDim(size_t dim) {
  const hn::ScalableTag<float> d;
  return (dim + hn::Lanes(d) - 1) / hn::Lanes(d) * hn::Lanes(d);
}

// Scratch: scaled queries (rows x qk_pad), scores (rows x kDecodeSubBlock),
// one key and one value row converted to float (qk_pad + v_pad).
inline size_t DecodeScratchSize(const DecodeGroup& g) {
  const size_t qk_pad = DecodeVectorDim(g.qk_dim), v_pad = DecodeVectorDim(g.v_dim);
  return g.num_rows * (qk_pad + kDecodeSubBlock) + qk_pad + v_pad;
}

inline size_t DecodeStateSize(const DecodeGroup& g) { return g.num_rows * (g.v_dim + 2); }

// Row j of k or v as floats, zero-padded to whole vectors in `buf`, or in
// place when it needs no conversion or padding.
inline const float* KeyValueRow(const DecodeGroup& g, const void* base, size_t stride,
                                size_t dim, size_t j, float* HWY_RESTRICT buf) {
  const size_t padded = DecodeVectorDim(dim);
  if (g.half) {
    HalfToFloat(static_cast<const uint16_t*>(base) + j * stride, dim, buf);
  } else {
    const float* row = static_cast<const float*>(base) + j * stride;
    if (padded == dim) return row;
    std::memcpy(buf, row, dim * sizeof(float));
  }
  for (size_t e = dim; e < padded; ++e) buf[e] = 0.0f;
  return buf;
}

// scores[r][c] = scale * q_r . k_(j0+c) + masks, for c < cols.
inline void DecodeScores(const DecodeGroup& g, size_t j0, size_t cols, const float* qs,
                         float* HWY_RESTRICT scores, float* HWY_RESTRICT key_buf) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d), qk_pad = DecodeVectorDim(g.qk_dim);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t c = 0; c < cols; ++c) {
    const size_t j = j0 + c;
    const float* k = KeyValueRow(g, g.k, g.k_stride, g.qk_dim, j, key_buf);
    const float bias = g.key_bias != nullptr ? g.key_bias[j] : 0.0f;
    for (size_t r = 0; r < g.num_rows; ++r) {
      const float* q = qs + r * qk_pad;
      auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
      size_t e = 0;
      for (; e + 2 * lanes <= qk_pad; e += 2 * lanes) {
        acc0 = hn::MulAdd(hn::Load(d, q + e), hn::LoadU(d, k + e), acc0);
        acc1 = hn::MulAdd(hn::Load(d, q + e + lanes), hn::LoadU(d, k + e + lanes), acc1);
      }
      if (e < qk_pad) acc0 = hn::MulAdd(hn::Load(d, q + e), hn::LoadU(d, k + e), acc0);
      float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1))) + bias;
      if (g.mask[r] != nullptr) s += g.mask[r][j];
      if (j > g.last_key[r]) s = neg_inf;
      scores[r * kDecodeSubBlock + c] = s;
    }
  }
}

// Online softmax of one sub-block for row r: updates max and sum in `state`,
// turns the row's scores into exp(score - max) and returns the factor that
// rescales what was accumulated before.
inline float DecodeSoftmax(size_t cols, float* HWY_RESTRICT row, float* HWY_RESTRICT state) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  float max = state[0];
  for (size_t c = 0; c < cols; ++c) max = row[c] > max ? row[c] : max;
  // Nothing attendable yet: shift by 0 so that exp(-inf) stays 0, not NaN.
  const float shift = max == -std::numeric_limits<float>::infinity() ? 0.0f : max;
  const float corr = hn::GetLane(ExpNonPositive(d1, hn::Set(d1, state[0] - shift)));
  auto sum = hn::Zero(d);
  size_t c = 0;
  for (; c + lanes <= cols; c += lanes) {
    const auto e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, row + c), hn::Set(d, shift)));
    hn::StoreU(e, d, row + c);
    sum = hn::Add(sum, e);
  }
  float total = hn::GetLane(hn::SumOfLanes(d, sum));
  for (; c < cols; ++c) {
    row[c] = hn::GetLane(ExpNonPositive(d1, hn::Set(d1, row[c] - shift)));
    total += row[c];
  }
  state[0] = max;
  state[1] = state[1] * corr + total;
  return corr;
}

// acc_r = acc_r * corr_r + sum_c p[r][c] * v_(j0+c), acc_r in the state.
inline void DecodeValues(const DecodeGroup& g, size_t j0, size_t cols, const float* probs,
                         const float* corr, float* HWY_RESTRICT state,
                         float* HWY_RESTRICT value_buf) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d), dv = g.v_dim, whole = dv / lanes * lanes;
  for (size_t r = 0; r < g.num_rows; ++r) {
    float* acc = state + r * (dv + 2) + 2;
    for (size_t e = 0; e < dv; ++e) acc[e] *= corr[r];
  }
  for (size_t c = 0; c < cols; ++c) {
    const float* v = KeyValueRow(g, g.v, g.v_stride, dv, j0 + c, value_buf);
    for (size_t r = 0; r < g.num_rows; ++r) {
      float* acc = state + r * (dv + 2) + 2;
      // No skipping p == 0: a NaN value must spread as PyTorch's 0 * NaN does.
      const float p = probs[r * kDecodeSubBlock + c];
      const auto pv = hn::Set(d, p);
      size_t e = 0;
      for (; e < whole; e += lanes) {
        hn::StoreU(hn::MulAdd(pv, hn::LoadU(d, v + e), hn::LoadU(d, acc + e)), d, acc + e);
      }
      for (; e < dv; ++e) {
        hn::StoreU(hn::MulAdd(hn::Set(d1, p), hn::LoadU(d1, v + e), hn::LoadU(d1, acc + e)), d1,
                   acc + e);
      }
    }
  }
}

inline void DecodePartial(const DecodeGroup& g, size_t j0, size_t j1, float* state,
                          float* scratch) {
  const size_t qk_pad = DecodeVectorDim(g.qk_dim);
  float* qs = scratch;
  float* scores = qs + g.num_rows * qk_pad;
  float* key_buf = scores + g.num_rows * kDecodeSubBlock;
  float* value_buf = key_buf + qk_pad;
  for (size_t r = 0; r < g.num_rows; ++r) {
    float* q = qs + r * qk_pad;
    for (size_t e = 0; e < g.qk_dim; ++e) q[e] = g.q[r][e] * g.scale;
    for (size_t e = g.qk_dim; e < qk_pad; ++e) q[e] = 0.0f;
    float* s = state + r * (g.v_dim + 2);
    s[0] = -std::numeric_limits<float>::infinity();
    s[1] = 0.0f;
    for (size_t e = 0; e < g.v_dim; ++e) s[2 + e] = 0.0f;
  }
  float corr[kernels::kMaxDecodeRows];
  for (size_t c0 = j0; c0 < j1; c0 += kDecodeSubBlock) {
    const size_t cols = HWY_MIN(kDecodeSubBlock, j1 - c0);
    DecodeScores(g, c0, cols, qs, scores, key_buf);
    for (size_t r = 0; r < g.num_rows; ++r) {
      corr[r] = DecodeSoftmax(cols, scores + r * kDecodeSubBlock, state + r * (g.v_dim + 2));
    }
    DecodeValues(g, c0, cols, scores, corr, state, value_buf);
  }
}

inline void DecodeMerge(const DecodeGroup& g, const float* states, size_t count, size_t stride) {
  const size_t dv = g.v_dim;
  for (size_t r = 0; r < g.num_rows; ++r) {
    float max = -std::numeric_limits<float>::infinity();
    for (size_t b = 0; b < count; ++b) {
      const float m = states[b * stride + r * (dv + 2)];
      max = m > max ? m : max;
    }
    float* out = g.out[r];
    for (size_t e = 0; e < dv; ++e) out[e] = 0.0f;
    float sum = 0.0f;
    for (size_t b = 0; b < count; ++b) {
      const float* s = states + b * stride + r * (dv + 2);
      if (s[1] == 0.0f) continue;  // no attendable key in this range
      const float w = std::exp(s[0] - max);
      sum += s[1] * w;
      for (size_t e = 0; e < dv; ++e) out[e] += s[2 + e] * w;
    }
    const float inv = sum > 0.0f ? 1.0f / sum : std::numeric_limits<float>::quiet_NaN();
    for (size_t e = 0; e < dv; ++e) out[e] *= inv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
