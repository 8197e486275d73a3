// Attention for one (batch, head) over a range of queries, in tiles of keys.
//
// Keys are processed kKeyTile at a time: the tile of K is transposed (so
// scores vectorise across keys for any head dim) and the tile of V padded to
// whole vectors. Without weights, an online softmax keeps a running max and
// sum per query, so the L x S score matrix never exists (flash attention);
// tiles that causal or key-padding masks remove entirely are skipped. With
// weights, scores go straight into the caller's weights rows, are
// softmax-normalised in place and then multiply V.

#if defined(MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_
#undef MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_
#else
#define MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "src/kernels/gemm-inl.h"
#include "src/kernels/kernels.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::AttentionHead;

// Score rows computed together: 4 accumulators share each loaded K vector.
constexpr size_t kQueryBlock = 4;
// Queries whose running state (max, sum, accumulator) is kept at once; each
// K/V tile is transposed once per this many queries.
constexpr size_t kQueryChunk = 64;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The inner loops handle two vectors of keys or value features at once
// (4 rows x 2 vectors: 8 accumulators, as the GEMM tile), so tiles and padded
// value rows come in pairs of vectors.
inline size_t RoundUpToVectorPair(size_t n) {
  const hn::ScalableTag<float> d;
  const size_t pair = 2 * hn::Lanes(d);
  return (n + pair - 1) / pair * pair;
}

// Keys per tile: 64, rounded up to whole vector pairs.
inline size_t KeyTile() { return RoundUpToVectorPair(64); }

inline size_t PaddedVDim(size_t v_dim) { return RoundUpToVectorPair(v_dim); }

// Per-thread scratch: K tile (qk_dim x tile), V tile (tile x v_pad), scores
// (block x tile), and per chunk query max, sum and accumulator.
inline size_t AttentionScratchSize(const AttentionHead& head) {
  const size_t tile = KeyTile();
  const size_t v_pad = PaddedVDim(head.v_dim);
  return head.qk_dim * tile + tile * v_pad + kQueryBlock * tile + 2 * kQueryChunk +
         kQueryChunk * v_pad;
}

inline const float* KeyRow(const AttentionHead& h, size_t j) {
  return j < h.masked_keys ? h.k + j * h.k_stride : h.extra_k + (j - h.masked_keys) * h.qk_dim;
}

inline const float* ValueRow(const AttentionHead& h, size_t j) {
  return j < h.masked_keys ? h.v + j * h.v_stride : h.extra_v + (j - h.masked_keys) * h.v_dim;
}

// kt[d * tile + c] = K[j0 + c][d]; zero past the last key.
inline void TransposeKeyTile(const AttentionHead& h, size_t j0, size_t cols, size_t tile,
                             float* HWY_RESTRICT kt) {
  for (size_t c = 0; c < cols; ++c) {
    const float* row = KeyRow(h, j0 + c);
    for (size_t dd = 0; dd < h.qk_dim; ++dd) kt[dd * tile + c] = row[dd];
  }
  for (size_t dd = 0; dd < h.qk_dim; ++dd) {
    for (size_t c = cols; c < tile; ++c) kt[dd * tile + c] = 0.0f;
  }
}

// vt[c * v_pad + e] = V[j0 + c][e]; zero padding (rows past cols are not read).
inline void PadValueTile(const AttentionHead& h, size_t j0, size_t cols, size_t v_pad,
                         float* HWY_RESTRICT vt) {
  for (size_t c = 0; c < cols; ++c) {
    std::memcpy(vt + c * v_pad, ValueRow(h, j0 + c), h.v_dim * sizeof(float));
    for (size_t e = h.v_dim; e < v_pad; ++e) vt[c * v_pad + e] = 0.0f;
  }
}

// row[c] += add[c] for c < n.
inline void AddRow(const float* HWY_RESTRICT add, size_t n, float* HWY_RESTRICT row) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t c = 0;
  for (; c + lanes <= n; c += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(d, row + c), hn::LoadU(d, add + c)), d, row + c);
  }
  for (; c < n; ++c) row[c] += add[c];
}

// scores[r * tile + c] = scale * q[i0 + r] . K[j0 + c] + masks, for r < rows
// (<= kQueryBlock); -inf past the last key.
inline void ScoreBlock(const AttentionHead& h, size_t i0, size_t rows, size_t j0, size_t cols,
                       const float* HWY_RESTRICT kt, size_t tile, float* HWY_RESTRICT scores) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const float* q_rows[4];
  RowPointers4(h.q + i0 * h.q_stride, h.q_stride, rows, q_rows);
  const auto vscale = hn::Set(d, h.scale);
  for (size_t c = 0; c < tile; c += 2 * lanes) {
    auto s00 = hn::Zero(d), s01 = s00, s10 = s00, s11 = s00;
    auto s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    MulAdd4x2v(d, q_rows, kt + c, tile, h.qk_dim, s00, s01, s10, s11, s20, s21, s30, s31);
    StoreRows4x2v(d, rows, 2 * lanes, scores + c, tile, hn::Mul(s00, vscale),
                  hn::Mul(s01, vscale), hn::Mul(s10, vscale), hn::Mul(s11, vscale),
                  hn::Mul(s20, vscale), hn::Mul(s21, vscale), hn::Mul(s30, vscale),
                  hn::Mul(s31, vscale));
  }
  const size_t masked_cols = h.masked_keys > j0 ? HWY_MIN(cols, h.masked_keys - j0) : 0;
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = i0 + r;
    float* row = scores + r * tile;
    if (h.mask != nullptr) AddRow(h.mask + i * h.mask_stride + j0, masked_cols, row);
    if (h.key_bias != nullptr) AddRow(h.key_bias + j0, masked_cols, row);
    // Causal: keys j > i of this tile, those after column i - j0.
    if (h.causal) {
      for (size_t c = i + 1 > j0 ? i + 1 - j0 : 0; c < masked_cols; ++c) row[c] = kNegInf;
    }
    for (size_t c = cols; c < tile; ++c) row[c] = kNegInf;
  }
}

// For r < rows (<= kQueryBlock): acc_r = acc_r * corr[r] + sum_c p_r[c] * vt[c],
// where p_r = p + r * p_stride and acc_r = acc + r * v_pad. Each loaded V
// vector feeds four rows. Missing rows repeat the last and are not stored.
inline void AccumulateBlock(const float* HWY_RESTRICT p, size_t p_stride, size_t rows,
                            size_t cols, const float* HWY_RESTRICT vt, size_t v_pad,
                            const float* HWY_RESTRICT corr, float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const float* p_rows[4];
  RowPointers4(p, p_stride, rows, p_rows);
  const float* acc_rows[4];
  RowPointers4(acc, v_pad, rows, acc_rows);
  const size_t r1 = HWY_MIN(1, rows - 1), r2 = HWY_MIN(2, rows - 1), r3 = HWY_MIN(3, rows - 1);
  for (size_t e = 0; e < v_pad; e += 2 * lanes) {
    auto a00 = hn::Mul(hn::LoadU(d, acc_rows[0] + e), hn::Set(d, corr[0]));
    auto a01 = hn::Mul(hn::LoadU(d, acc_rows[0] + e + lanes), hn::Set(d, corr[0]));
    auto a10 = hn::Mul(hn::LoadU(d, acc_rows[1] + e), hn::Set(d, corr[r1]));
    auto a11 = hn::Mul(hn::LoadU(d, acc_rows[1] + e + lanes), hn::Set(d, corr[r1]));
    auto a20 = hn::Mul(hn::LoadU(d, acc_rows[2] + e), hn::Set(d, corr[r2]));
    auto a21 = hn::Mul(hn::LoadU(d, acc_rows[2] + e + lanes), hn::Set(d, corr[r2]));
    auto a30 = hn::Mul(hn::LoadU(d, acc_rows[3] + e), hn::Set(d, corr[r3]));
    auto a31 = hn::Mul(hn::LoadU(d, acc_rows[3] + e + lanes), hn::Set(d, corr[r3]));
    MulAdd4x2v(d, p_rows, vt + e, v_pad, cols, a00, a01, a10, a11, a20, a21, a30, a31);
    StoreRows4x2v(d, rows, 2 * lanes, acc + e, v_pad, a00, a01, a10, a11, a20, a21, a30, a31);
  }
}

// True when key padding removes every key of [j0, j0 + cols).
inline bool TileFullyPadded(const AttentionHead& h, size_t j0, size_t cols) {
  if (h.key_bias == nullptr || j0 + cols > h.masked_keys) return false;
  for (size_t c = 0; c < cols; ++c) {
    if (h.key_bias[j0 + c] != kNegInf) return false;
  }
  return true;
}

inline void WriteOutputRow(const AttentionHead& h, size_t i, const float* acc, float inv_sum) {
  float* out = h.out + i * h.out_stride;
  for (size_t e = 0; e < h.v_dim; ++e) out[e] = acc[e] * inv_sum;
}

// Online-softmax attention for queries [i_begin, i_end) (<= kQueryChunk).
inline void FlashChunk(const AttentionHead& h, size_t i_begin, size_t i_end, float* scratch) {
  const size_t tile = KeyTile();
  const size_t v_pad = PaddedVDim(h.v_dim);
  float* kt = scratch;
  float* vt = kt + h.qk_dim * tile;
  float* scores = vt + tile * v_pad;
  float* row_max = scores + kQueryBlock * tile;
  float* row_sum = row_max + kQueryChunk;
  float* acc = row_sum + kQueryChunk;
  const size_t n = i_end - i_begin;
  for (size_t r = 0; r < n; ++r) {
    row_max[r] = kNegInf;
    row_sum[r] = 0.0f;
  }
  std::memset(acc, 0, n * v_pad * sizeof(float));

  const size_t num_keys = h.num_keys();
  for (size_t j0 = 0; j0 < num_keys; j0 += tile) {
    const size_t cols = HWY_MIN(tile, num_keys - j0);
    const bool tile_has_extra = j0 + cols > h.masked_keys;
    // Causal: every query of the chunk is before this tile's first key (a
    // later tile may still hold the never-masked extra keys).
    if (h.causal && !tile_has_extra && j0 > i_end - 1) continue;
    if (TileFullyPadded(h, j0, cols)) continue;
    TransposeKeyTile(h, j0, cols, tile, kt);
    PadValueTile(h, j0, cols, v_pad, vt);
    for (size_t i0 = i_begin; i0 < i_end; i0 += kQueryBlock) {
      const size_t rows = HWY_MIN(kQueryBlock, i_end - i0);
      if (h.causal && !tile_has_extra && j0 > i0 + rows - 1) continue;
      ScoreBlock(h, i0, rows, j0, cols, kt, tile, scores);
      float corr[kQueryBlock];
      for (size_t r = 0; r < rows; ++r) {
        const size_t local = i0 - i_begin + r;
        float* p = scores + r * tile;
        const float new_max = HWY_MAX(row_max[local], RowMax(p, cols));
        if (new_max == kNegInf) {  // nothing attendable yet: contributes nothing
          std::fill(p, p + cols, 0.0f);
          corr[r] = 1.0f;
          continue;
        }
        corr[r] = std::exp(row_max[local] - new_max);
        row_sum[local] = row_sum[local] * corr[r] + ExpShiftSum(p, cols, new_max);
        row_max[local] = new_max;
      }
      AccumulateBlock(scores, tile, rows, cols, vt, v_pad, corr, acc + (i0 - i_begin) * v_pad);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r]
                                        : std::numeric_limits<float>::quiet_NaN();
    WriteOutputRow(h, i_begin + r, acc + r * v_pad, inv);
  }
}

// Materialised attention for queries [i_begin, i_end): weights rows first.
inline void WeightsChunk(const AttentionHead& h, size_t i_begin, size_t i_end, float* scratch) {
  const size_t tile = KeyTile();
  const size_t v_pad = PaddedVDim(h.v_dim);
  float* kt = scratch;
  float* vt = kt + h.qk_dim * tile;
  float* scores = vt + tile * v_pad;
  float* acc = scores + kQueryBlock * tile + 2 * kQueryChunk;
  const size_t num_keys = h.num_keys();
  for (size_t j0 = 0; j0 < num_keys; j0 += tile) {
    const size_t cols = HWY_MIN(tile, num_keys - j0);
    TransposeKeyTile(h, j0, cols, tile, kt);
    for (size_t i0 = i_begin; i0 < i_end; i0 += kQueryBlock) {
      const size_t rows = HWY_MIN(kQueryBlock, i_end - i0);
      ScoreBlock(h, i0, rows, j0, cols, kt, tile, scores);
      for (size_t r = 0; r < rows; ++r) {
        std::memcpy(h.weights + (i0 + r) * h.weights_stride + j0, scores + r * tile,
                    cols * sizeof(float));
      }
    }
  }
  for (size_t i = i_begin; i < i_end; ++i) SoftmaxRow(h.weights + i * h.weights_stride, num_keys);
  std::memset(acc, 0, (i_end - i_begin) * v_pad * sizeof(float));
  for (size_t j0 = 0; j0 < num_keys; j0 += tile) {
    const size_t cols = HWY_MIN(tile, num_keys - j0);
    PadValueTile(h, j0, cols, v_pad, vt);
    const float ones[kQueryBlock] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (size_t i0 = i_begin; i0 < i_end; i0 += kQueryBlock) {
      AccumulateBlock(h.weights + i0 * h.weights_stride + j0, h.weights_stride,
                      HWY_MIN(kQueryBlock, i_end - i0), cols, vt, v_pad, ones,
                      acc + (i0 - i_begin) * v_pad);
    }
  }
  for (size_t i = i_begin; i < i_end; ++i) WriteOutputRow(h, i, acc + (i - i_begin) * v_pad, 1.0f);
}

inline void Attention(const AttentionHead& h, size_t q_begin, size_t q_end, float* scratch) {
  for (size_t i = q_begin; i < q_end; i += kQueryChunk) {
    const size_t end = HWY_MIN(q_end, i + kQueryChunk);
    if (h.weights != nullptr) {
      WeightsChunk(h, i, end, scratch);
    } else {
      FlashChunk(h, i, end, scratch);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_
