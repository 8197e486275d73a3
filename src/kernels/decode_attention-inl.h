// Decode attention: a few query rows (the new tokens, times the query heads
// that share one key/value head) against a long run of cached keys.
//
// Keys go through in sub-blocks that every row of the group reads while
// they are in L1 (grouped-query heads share every load from memory); float16
// sub-blocks are converted once. Per row, a sub-block's scores come from
// dot products reduced four keys at a time, its softmax is vectorised along
// the keys and its values accumulate in registers. A call covers one range
// of keys and leaves a partial softmax state per row (unnormalised output,
// max, sum of exponentials); ranges run on different threads and
// DecodeMerge combines their states (flash-decoding).

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
#include "src/kernels/mul_add-inl.h"
#include "src/kernels/score_rule-inl.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::DecodeGroup;

// Keys per sub-block: their scores per row, and their keys and values when
// converted, stay in L1 while every row of the group reads them.
constexpr size_t kDecodeSubBlock = 32;
// Vectors of value features per step of the value loop: two sets of 4
// accumulators (even and odd keys) and the loaded vectors fit the 16
// registers of AVX2, SSE4, NEON and WASM. Value rows are padded to whole
// steps (64 floats on AVX-512: a head dim of 64 needs none).
constexpr size_t kDecodeValueVectors = 4;

inline size_t DecodeKeyPad(size_t dim) {
  const hn::ScalableTag<float> d;
  return (dim + hn::Lanes(d) - 1) / hn::Lanes(d) * hn::Lanes(d);
}

inline size_t DecodeValuePad(size_t dim) {
  const hn::ScalableTag<float> d;
  const size_t step = kDecodeValueVectors * hn::Lanes(d);
  return (dim + step - 1) / step * step;
}

// Scratch: scaled queries (rows x key pad), scores (rows x kDecodeSubBlock),
// a sub-block of keys and one of values converted to padded floats.
inline size_t DecodeScratchSize(const DecodeGroup& g) {
  const size_t qk_pad = DecodeKeyPad(g.qk_dim), v_pad = DecodeValuePad(g.v_dim);
  return g.num_rows * (qk_pad + kDecodeSubBlock) + kDecodeSubBlock * (qk_pad + v_pad);
}

// Per row: the unnormalised output (value pad floats), then max and sum.
inline size_t DecodeStateRow(const DecodeGroup& g) { return DecodeValuePad(g.v_dim) + 2; }
inline size_t DecodeStateSize(const DecodeGroup& g) { return g.num_rows * DecodeStateRow(g); }

// Keys [j0, j0 + cols) of k or v as floats zero-padded to `padded`, *step
// floats apart: in place when stored so in consecutive rows, else converted
// into `buf` (also a sub-block that crosses a ring's end).
inline const float* DecodeBlock(const DecodeGroup& g, const void* base, size_t stride, size_t dim,
                                size_t padded, size_t j0, size_t cols, float* HWY_RESTRICT buf,
                                size_t* step) {
  const bool narrow = g.storage != kernels::Storage::kFloat32;
  if (!narrow && dim == padded && kernels::RingRun(j0, cols, g.ring)) {
    *step = stride;
    return static_cast<const float*>(base) + kernels::RingRow(j0, g.ring) * stride;
  }
  for (size_t c = 0; c < cols; ++c) {
    float* row = buf + c * padded;
    const size_t at = kernels::RingRow(j0 + c, g.ring) * stride;
    if (narrow) {
      Widen16(g.storage, static_cast<const uint16_t*>(base) + at, dim, row);
    } else {
      std::memcpy(row, static_cast<const float*>(base) + at, dim * sizeof(float));
    }
    for (size_t e = dim; e < padded; ++e) row[e] = 0.0f;
  }
  *step = padded;
  return buf;
}

// out[0..3] = the lane sums of a, b, c, e: four keys' dot products reduced
// together (within each 128-bit block by interleaving, then across blocks).
template <class D, class V>
HWY_INLINE void SumOfLanes4(D d, V a, V b, V c, V e, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR || HWY_HAVE_SCALABLE
  out[0] = hn::GetLane(hn::SumOfLanes(d, a));
  out[1] = hn::GetLane(hn::SumOfLanes(d, b));
  out[2] = hn::GetLane(hn::SumOfLanes(d, c));
  out[3] = hn::GetLane(hn::SumOfLanes(d, e));
#else
  const hn::RepartitionToWide<hn::RebindToUnsigned<D>> dw;
  const auto ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));
  const auto ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  const auto lo = hn::InterleaveLower(dw, hn::BitCast(dw, ab), hn::BitCast(dw, ce));
  const auto hi = hn::InterleaveUpper(dw, hn::BitCast(dw, ab), hn::BitCast(dw, ce));
  const auto sums = hn::Add(hn::BitCast(d, lo), hn::BitCast(d, hi));  // per block: a b c e
  const hn::Full128<float> d4;
  HWY_ALIGN float blocks[hn::MaxLanes(d)];
  hn::Store(sums, d, blocks);
  auto total = hn::Load(d4, blocks);
  for (size_t i = 4; i < hn::Lanes(d); i += 4) total = hn::Add(total, hn::Load(d4, blocks + i));
  hn::StoreU(total, d4, out);
#endif
}

// scores[c] = q . k_c for c < cols (k rows `step` floats apart, qk_pad
// floats each, q pre-scaled), four keys at a time, with two accumulator
// chains per key (even and odd vectors) to hide the FMA latency.
inline void DecodeDots(const float* HWY_RESTRICT q, const float* HWY_RESTRICT k, size_t step,
                       size_t qk_pad, size_t cols, float* HWY_RESTRICT scores) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    const float* k0 = k + c * step;
    const float* k1 = k0 + step;
    const float* k2 = k1 + step;
    const float* k3 = k2 + step;
    auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
    size_t e = 0;
    for (; e + 2 * lanes <= qk_pad; e += 2 * lanes) {
      const auto qa = hn::Load(d, q + e), qb = hn::Load(d, q + e + lanes);
      a0 = FusedMulAdd(qa, hn::LoadU(d, k0 + e), a0);
      a1 = FusedMulAdd(qa, hn::LoadU(d, k1 + e), a1);
      a2 = FusedMulAdd(qa, hn::LoadU(d, k2 + e), a2);
      a3 = FusedMulAdd(qa, hn::LoadU(d, k3 + e), a3);
      b0 = FusedMulAdd(qb, hn::LoadU(d, k0 + e + lanes), b0);
      b1 = FusedMulAdd(qb, hn::LoadU(d, k1 + e + lanes), b1);
      b2 = FusedMulAdd(qb, hn::LoadU(d, k2 + e + lanes), b2);
      b3 = FusedMulAdd(qb, hn::LoadU(d, k3 + e + lanes), b3);
    }
    if (e < qk_pad) {
      const auto qa = hn::Load(d, q + e);
      a0 = FusedMulAdd(qa, hn::LoadU(d, k0 + e), a0);
      a1 = FusedMulAdd(qa, hn::LoadU(d, k1 + e), a1);
      a2 = FusedMulAdd(qa, hn::LoadU(d, k2 + e), a2);
      a3 = FusedMulAdd(qa, hn::LoadU(d, k3 + e), a3);
    }
    SumOfLanes4(d, hn::Add(a0, b0), hn::Add(a1, b1), hn::Add(a2, b2), hn::Add(a3, b3),
                scores + c);
  }
  for (; c < cols; ++c) {
    auto a0 = hn::Zero(d);
    for (size_t e = 0; e < qk_pad; e += lanes) {
      a0 = FusedMulAdd(hn::Load(d, q + e), hn::LoadU(d, k + c * step + e), a0);
    }
    scores[c] = hn::GetLane(hn::SumOfLanes(d, a0));
  }
}

// Online softmax of one sub-block for one row: updates max and sum in `ms`,
// turns the row's scores into exp(score - max) and returns the factor that
// rescales what was accumulated before.
inline float DecodeSoftmax(size_t cols, float* HWY_RESTRICT row, float* HWY_RESTRICT ms) {
  const hn::CappedTag<float, 1> d1;
  const float row_max = RowMax(row, cols);
  const float max = row_max > ms[0] ? row_max : ms[0];
  // Nothing attendable yet: shift by 0 so that exp(-inf) stays 0, not NaN.
  const float shift = max == -std::numeric_limits<float>::infinity() ? 0.0f : max;
  const float corr = hn::GetLane(ExpNonPositive(d1, hn::Set(d1, ms[0] - shift)));
  ms[0] = max;
  ms[1] = ms[1] * corr + ExpShiftSum(row, cols, shift);
  return corr;
}

// acc = acc * corr + sum_c p[c] * v_c over v_pad features (v rows `step`
// floats apart), kDecodeValueVectors vectors of accumulators at a time held
// in registers across the keys: two sets (even and odd keys) to hide the FMA
// latency.
inline void DecodeValues(const float* HWY_RESTRICT p, const float* HWY_RESTRICT v, size_t step,
                         size_t v_pad, size_t cols, float corr, float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vcorr = hn::Set(d, corr);
  for (size_t e = 0; e < v_pad; e += kDecodeValueVectors * lanes) {
    auto a0 = hn::Mul(hn::LoadU(d, acc + e), vcorr);
    auto a1 = hn::Mul(hn::LoadU(d, acc + e + lanes), vcorr);
    auto a2 = hn::Mul(hn::LoadU(d, acc + e + 2 * lanes), vcorr);
    auto a3 = hn::Mul(hn::LoadU(d, acc + e + 3 * lanes), vcorr);
    auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
    // No skipping p == 0: a NaN value must spread as PyTorch's 0 * NaN does.
    size_t c = 0;
    for (; c + 2 <= cols; c += 2) {
      const float* row = v + c * step + e;
      const auto pa = hn::Set(d, p[c]), pb = hn::Set(d, p[c + 1]);
      a0 = FusedMulAdd(pa, hn::LoadU(d, row), a0);
      a1 = FusedMulAdd(pa, hn::LoadU(d, row + lanes), a1);
      a2 = FusedMulAdd(pa, hn::LoadU(d, row + 2 * lanes), a2);
      a3 = FusedMulAdd(pa, hn::LoadU(d, row + 3 * lanes), a3);
      b0 = FusedMulAdd(pb, hn::LoadU(d, row + step), b0);
      b1 = FusedMulAdd(pb, hn::LoadU(d, row + step + lanes), b1);
      b2 = FusedMulAdd(pb, hn::LoadU(d, row + step + 2 * lanes), b2);
      b3 = FusedMulAdd(pb, hn::LoadU(d, row + step + 3 * lanes), b3);
    }
    if (c < cols) {
      const float* row = v + c * step + e;
      const auto pa = hn::Set(d, p[c]);
      a0 = FusedMulAdd(pa, hn::LoadU(d, row), a0);
      a1 = FusedMulAdd(pa, hn::LoadU(d, row + lanes), a1);
      a2 = FusedMulAdd(pa, hn::LoadU(d, row + 2 * lanes), a2);
      a3 = FusedMulAdd(pa, hn::LoadU(d, row + 3 * lanes), a3);
    }
    hn::StoreU(hn::Add(a0, b0), d, acc + e);
    hn::StoreU(hn::Add(a1, b1), d, acc + e + lanes);
    hn::StoreU(hn::Add(a2, b2), d, acc + e + 2 * lanes);
    hn::StoreU(hn::Add(a3, b3), d, acc + e + 3 * lanes);
  }
}

inline void DecodePartial(const DecodeGroup& g, size_t j0, size_t j1, float* state,
                          float* scratch) {
  const size_t qk_pad = DecodeKeyPad(g.qk_dim), v_pad = DecodeValuePad(g.v_dim);
  const size_t row_size = DecodeStateRow(g);
  float* qs = scratch;
  float* scores = qs + g.num_rows * qk_pad;
  float* key_buf = scores + g.num_rows * kDecodeSubBlock;
  float* value_buf = key_buf + kDecodeSubBlock * qk_pad;
  for (size_t r = 0; r < g.num_rows; ++r) {
    float* q = qs + r * qk_pad;
    for (size_t e = 0; e < g.qk_dim; ++e) q[e] = g.q[r][e] * g.scale;
    for (size_t e = g.qk_dim; e < qk_pad; ++e) q[e] = 0.0f;
    float* s = state + r * row_size;
    for (size_t e = 0; e < v_pad; ++e) s[e] = 0.0f;
    s[v_pad] = -std::numeric_limits<float>::infinity();
    s[v_pad + 1] = 0.0f;
  }
  for (size_t c0 = j0; c0 < j1; c0 += kDecodeSubBlock) {
    const size_t cols = HWY_MIN(kDecodeSubBlock, j1 - c0);
    size_t k_step, v_step;
    const float* k = DecodeBlock(g, g.k, g.k_stride, g.qk_dim, qk_pad, c0, cols, key_buf, &k_step);
    const float* v =
        DecodeBlock(g, g.v, g.v_stride, g.v_dim, v_pad, c0, cols, value_buf, &v_step);
    for (size_t r = 0; r < g.num_rows; ++r) {
      // Only the keys this row reads (ScoreRule::Keys), whatever the others hold.
      const kernels::KeyRange keys = g.rule[r].Keys(0, g.num_keys);
      const size_t b = HWY_MAX(keys.begin, c0), e = HWY_MIN(keys.end, c0 + cols);
      if (b >= e) continue;
      float* row = scores + r * kDecodeSubBlock;
      float* s = state + r * row_size;
      DecodeDots(qs + r * qk_pad, k + (b - c0) * k_step, k_step, qk_pad, e - b, row);
      ApplyScoreRule(g.rule[r], g.num_keys, 0, 1, b, e - b, e - b, 1.0f, row, 1);
      const float corr = DecodeSoftmax(e - b, row, s + v_pad);
      DecodeValues(row, v + (b - c0) * v_step, v_step, v_pad, e - b, corr, s);
    }
  }
}

inline void DecodeMerge(const DecodeGroup& g, const float* states, size_t count, size_t stride) {
  const size_t dv = g.v_dim, v_pad = DecodeValuePad(dv), row_size = DecodeStateRow(g);
  for (size_t r = 0; r < g.num_rows; ++r) {
    float max = -std::numeric_limits<float>::infinity();
    for (size_t b = 0; b < count; ++b) {
      const float m = states[b * stride + r * row_size + v_pad];
      max = m > max ? m : max;
    }
    float* out = g.out[r];
    for (size_t e = 0; e < dv; ++e) out[e] = 0.0f;
    float sum = 0.0f;
    for (size_t b = 0; b < count; ++b) {
      const float* s = states + b * stride + r * row_size;
      // A range with no attendable key weighs 0; its 0 * NaN (a NaN value
      // of a masked key the row reads) spreads as in one range.
      const float w = s[v_pad] == -std::numeric_limits<float>::infinity()
                          ? 0.0f
                          : std::exp(s[v_pad] - max);
      sum += s[v_pad + 1] * w;
      for (size_t e = 0; e < dv; ++e) out[e] += s[e] * w;
    }
    if (sum > 0.0f) sum += std::exp(g.rule[r].sink - max);
    const float inv = sum > 0.0f ? 1.0f / sum : std::numeric_limits<float>::quiet_NaN();
    for (size_t e = 0; e < dv; ++e) out[e] *= inv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
