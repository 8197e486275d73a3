// Attention for one (batch, head) over a chunk of queries, in tiles of keys.
//
// Scores are computed transposed, one row per key and vectors across the
// chunk's queries: K and V are read in place, only the chunk of Q is
// transposed (once per chunk, with the scale folded in), and the softmax
// over keys becomes lane-wise max, exp and sum down the rows, with no
// horizontal reductions. Without weights, an online softmax keeps a running
// max and sum per query, so the L x S score matrix never exists (flash
// attention); tiles that causal, window or key-padding masks remove entirely
// are skipped. With weights, the scores go to the caller's weights rows, are
// softmax-normalised there and then multiply V. Keys and values stored in 16
// bits (a float16 or bfloat16 KV cache) are widened one tile at a time, into
// per-thread scratch: never the whole cache at once.

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

#include "hwy/highway.h"
#include "src/kernels/float16-inl.h"
#include "src/kernels/kernels.h"
#include "src/kernels/online_softmax-inl.h"
#include "src/kernels/register_tile-inl.h"
#include "src/kernels/score_rule-inl.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::AttentionHead;
using kernels::RingRow;
using kernels::RingRun;

// Keys per tile: their transposed scores (kKeyTile x chunk) stay in L1.
constexpr size_t kKeyTile = 64;

inline size_t RoundUp(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// The register tile spans a vector pair of columns, so padded value rows come
// in vector pairs.
inline size_t PaddedVDim(size_t v_dim) {
  const hn::ScalableTag<float> d;
  return RoundUp(v_dim, 2 * hn::Lanes(d));
}

// Queries are padded to whole vector pairs (the columns of the score tile)
// and whole tiles of rows (of the value tile), so that neither tile needs
// bounds checks: padding queries are computed and never stored.
inline size_t PaddedQueries(size_t n) {
  const hn::ScalableTag<float> d;
  return RoundUp(n, HWY_MAX(2 * hn::Lanes(d), kTileRows));
}

// Queries whose state is kept at once.
inline size_t QueryChunk() { return PaddedQueries(64); }

// V rows are read in place when whole vector pairs cover them; otherwise (and
// for the extra keys, stored apart) a tile is copied with zero padding.
inline bool ValuesInPlace(const AttentionHead& h) { return PaddedVDim(h.v_dim) == h.v_dim; }

// Per-thread scratch, each `chunk` wide: Q^T (qk_dim rows), scores^T
// (kKeyTile rows), max, sum and correction (one row each); then the output
// accumulator (chunk x v_pad), a padded V tile (kKeyTile x v_pad) and, for
// 16-bit keys, a K tile (kKeyTile x qk_dim).
inline size_t AttentionScratchSize(const AttentionHead& head) {
  const size_t chunk = QueryChunk();
  const size_t v_pad = PaddedVDim(head.v_dim);
  const size_t key_tile = head.k16 != nullptr ? kKeyTile * head.qk_dim : 0;
  return (head.qk_dim + kKeyTile + 3) * chunk + (chunk + kKeyTile) * v_pad + key_tile;
}

struct ChunkScratch {
  float* qt;
  float* st;
  float* row_max;
  float* row_sum;
  float* corr;
  float* acc;
  float* vt;
  float* kt;
};

inline ChunkScratch SplitScratch(const AttentionHead& h, float* scratch) {
  const size_t chunk = QueryChunk();
  ChunkScratch s;
  s.qt = scratch;
  s.st = s.qt + h.qk_dim * chunk;
  s.row_max = s.st + kKeyTile * chunk;
  s.row_sum = s.row_max + chunk;
  s.corr = s.row_sum + chunk;
  s.acc = s.corr + chunk;
  s.vt = s.acc + chunk * PaddedVDim(h.v_dim);
  s.kt = s.vt + kKeyTile * PaddedVDim(h.v_dim);
  return s;
}

// Key j of the tile that starts at key j0: 16-bit keys were converted to kt.
inline const float* KeyRow(const AttentionHead& h, size_t j0, const float* kt, size_t j) {
  if (j >= h.masked_keys) return h.extra_k + (j - h.masked_keys) * h.qk_dim;
  return h.k16 != nullptr ? kt + (j - j0) * h.qk_dim : h.k + RingRow(j, h.ring) * h.k_stride;
}

// Writes value j (v_dim floats) to `row`.
inline void CopyValueRow(const AttentionHead& h, size_t j, float* HWY_RESTRICT row) {
  if (j >= h.masked_keys) {
    std::memcpy(row, h.extra_v + (j - h.masked_keys) * h.v_dim, h.v_dim * sizeof(float));
  } else if (h.v16 != nullptr) {
    Widen16(h.storage, h.v16 + RingRow(j, h.ring) * h.v_stride, h.v_dim, row);
  } else {
    std::memcpy(row, h.v + RingRow(j, h.ring) * h.v_stride, h.v_dim * sizeof(float));
  }
}

// Keys of [j0, j0 + cols) that masks apply to (the rest are extra keys).
inline size_t MaskedCols(const AttentionHead& h, size_t j0, size_t cols) {
  return h.masked_keys > j0 ? HWY_MIN(cols, h.masked_keys - j0) : 0;
}

// qt[d * chunk + q] = scale * Q[i0 + q][d] for q < n; zero up to n_pad.
// Four query rows at a time: StoreInterleaved4 turns a vector of each row's
// dims into groups of four queries per dim, and each group is one 16-byte
// copy. Where keys are few the transpose is a visible part of attention, and
// element by element it was slower; what is left is mostly reading Q and
// writing the output from memory.
inline void TransposeQueryChunk(const AttentionHead& h, size_t i0, size_t n, size_t n_pad,
                                float scale, float* HWY_RESTRICT qt) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t chunk = QueryChunk();
  const auto vscale = hn::Set(d, scale);
  HWY_ALIGN float groups[4 * hn::MaxLanes(d)];
  const size_t n4 = n / 4 * 4;
  const size_t d_vec = h.qk_dim / lanes * lanes;
  for (size_t q = 0; q < n4; q += 4) {
    const float* row = h.q + (i0 + q) * h.q_stride;
    for (size_t dd = 0; dd < d_vec; dd += lanes) {
      const auto r0 = hn::Mul(hn::LoadU(d, row + dd), vscale);
      const auto r1 = hn::Mul(hn::LoadU(d, row + h.q_stride + dd), vscale);
      const auto r2 = hn::Mul(hn::LoadU(d, row + 2 * h.q_stride + dd), vscale);
      const auto r3 = hn::Mul(hn::LoadU(d, row + 3 * h.q_stride + dd), vscale);
      hn::StoreInterleaved4(r0, r1, r2, r3, d, groups);
      for (size_t i = 0; i < lanes; ++i) {
        std::memcpy(qt + (dd + i) * chunk + q, groups + 4 * i, 4 * sizeof(float));
      }
    }
  }
  // The rest one by one: dims past d_vec of those rows, every dim of the last n - n4.
  for (size_t q = 0; q < n; ++q) {
    const float* row = h.q + (i0 + q) * h.q_stride;
    for (size_t dd = q < n4 ? d_vec : 0; dd < h.qk_dim; ++dd) qt[dd * chunk + q] = row[dd] * scale;
  }
  for (size_t dd = 0; dd < h.qk_dim; ++dd) {
    for (size_t q = n; q < n_pad; ++q) qt[dd * chunk + q] = 0.0f;
  }
}

// st[c * chunk + q] = q_(i0+q) . k_(j0+c) + unit * masks for c < cols,
// q < n_pad (queries from n on see zeros and are never used); unit is the
// factor already in qt beyond the head's scale (1, or log2(e) in base 2).
inline void ScoreTile(const AttentionHead& h, size_t i0, size_t n, size_t n_pad, size_t j0,
                      size_t cols, float unit, const ChunkScratch& s) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t chunk = QueryChunk();
  const float* HWY_RESTRICT qt = s.qt;
  float* HWY_RESTRICT st = s.st;
  const size_t masked_cols = MaskedCols(h, j0, cols);
  if (h.k16 != nullptr) {
    for (size_t c = 0; c < masked_cols; ++c) {
      Widen16(h.storage, h.k16 + RingRow(j0 + c, h.ring) * h.k_stride, h.qk_dim, s.kt + c * h.qk_dim);
    }
  }
  for (size_t c = 0; c < cols; c += kTileRows) {
    const size_t rows = HWY_MIN(kTileRows, cols - c);
    const float* k_rows[kTileRows];
    for (size_t r = 0; r < kTileRows; ++r) {
      k_rows[r] = KeyRow(h, j0, s.kt, j0 + c + HWY_MIN(r, rows - 1));
    }
    for (size_t q = 0; q < n_pad; q += 2 * lanes) {
      // Every key of these rows is past what these columns' queries read
      // (ScoreRule::Keys); ApplyScoreRule below writes them.
      if (j0 + c + rows <= h.masked_keys &&
          j0 + c >= h.rule.Keys(i0 + q + 2 * lanes - 1, h.masked_keys).end) {
        continue;
      }
      float* out = st + c * chunk + q;
      RegisterTile(
          d, k_rows, 1, qt + q, chunk, h.qk_dim, [&](size_t, size_t) { return hn::Zero(d); },
          [&](size_t r, V s0, V s1) {
            if (r < rows) StoreRow(d, s0, s1, 2 * lanes, out + r * chunk);
          });
    }
  }
  ApplyScoreRule(h.rule, h.masked_keys, i0, n, j0, cols, masked_cols, unit, st, chunk);
}

// For queries q < n: acc_q = acc_q * corr[q] + sum_c st[c][q] * V[j0 + c]
// over the keys of the tile that query reads (ScoreRule::Keys, and the
// extra keys): none other, even at weight 0, so that a NaN value it may not
// read never reaches it. Each loaded V vector feeds kTileRows queries.
inline void AccumulateTile(const AttentionHead& h, size_t i0, size_t n, size_t j0, size_t cols,
                           const ChunkScratch& s) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t chunk = QueryChunk();
  const size_t v_pad = PaddedVDim(h.v_dim);
  const float* v = s.vt;
  size_t v_stride = v_pad;
  if (ValuesInPlace(h) && h.v16 == nullptr && j0 + cols <= h.masked_keys &&
      RingRun(j0, cols, h.ring)) {
    v = h.v + RingRow(j0, h.ring) * h.v_stride;
    v_stride = h.v_stride;
  } else {
    for (size_t c = 0; c < cols; ++c) {
      float* row = s.vt + c * v_pad;
      CopyValueRow(h, j0 + c, row);
      std::fill(row + h.v_dim, row + v_pad, 0.0f);
    }
  }
  // The tile's masked keys end at masked_end; extra keys follow, read by all.
  const size_t tile_end = j0 + cols;
  const size_t masked_end = HWY_MIN(tile_end, HWY_MAX(j0, h.masked_keys));
  const auto reads = [&](size_t q) {
    return Clip(h.rule.Keys(i0 + q, h.masked_keys), j0, masked_end);
  };
  for (size_t q0 = 0; q0 < n; q0 += kTileRows) {
    const size_t rows = HWY_MIN(kTileRows, n - q0);
    // The keys every row of the block reads go through the register tile;
    // those only some read (a causal or window edge) row by row after it.
    const kernels::KeyRange first = reads(q0), last = reads(q0 + rows - 1);
    kernels::KeyRange common{last.begin, HWY_MAX(last.begin, first.end)};
    if (common.end == masked_end) common.end = tile_end;
    // Columns of st up to PaddedQueries(n) exist: no repeated rows needed.
    const float* p_rows[kTileRows];
    TileRowPointers(s.st + (common.begin - j0) * chunk + q0, 1, kTileRows, p_rows);
    const float* v_common = v + (common.begin - j0) * v_stride;
    float* acc = s.acc + q0 * v_pad;
    for (size_t e = 0; e < v_pad; e += 2 * lanes) {
      RegisterTile(
          d, p_rows, chunk, v_common + e, v_stride, common.end - common.begin,
          [&](size_t r, size_t half) {
            const size_t row = HWY_MIN(r, rows - 1);
            return hn::Mul(hn::LoadU(d, acc + row * v_pad + e + half * lanes),
                           hn::Set(d, s.corr[q0 + row]));
          },
          [&](size_t r, V a0, V a1) {
            if (r < rows) StoreRow(d, a0, a1, 2 * lanes, acc + r * v_pad + e);
          });
    }
    for (size_t r = 0; r < rows; ++r) {
      const kernels::KeyRange mine = reads(q0 + r);
      const float* p = s.st + q0 + r;
      float* row_acc = acc + r * v_pad;
      AddKeys(p, QueryChunk(), v, v_stride, v_pad, j0, mine.begin, HWY_MIN(mine.end, common.begin), row_acc);
      AddKeys(p, QueryChunk(), v, v_stride, v_pad, j0, HWY_MAX(mine.begin, common.end), mine.end, row_acc);
      if (common.end < tile_end) AddKeys(p, QueryChunk(), v, v_stride, v_pad, j0, masked_end, tile_end, row_acc);
    }
  }
}

// Keys some query of [i0, i0 + n) reads (ScoreRule::Keys: both ends grow
// with the query), and whether the tile [j0, j0 + cols) holds one of them or
// an extra key.
inline kernels::KeyRange ChunkKeys(const AttentionHead& h, size_t i0, size_t n) {
  return {h.rule.Keys(i0, h.masked_keys).begin, h.rule.Keys(i0 + n - 1, h.masked_keys).end};
}
inline bool TileRead(const AttentionHead& h, const kernels::KeyRange& keys, size_t j0,
                     size_t cols) {
  return j0 + cols > h.masked_keys || (j0 < keys.end && j0 + cols > keys.begin);
}

// out[i0 + q] = acc_q / (sum[q] + 2^(sink - max[q])); NaN for a query that
// attended to nothing. `sink` in the units of max (-inf: none, or already in
// the sums).
inline void WriteOutputRows(const AttentionHead& h, size_t i0, size_t n, const ChunkScratch& s,
                            float sink) {
  const size_t v_pad = PaddedVDim(h.v_dim);
  for (size_t q = 0; q < n; ++q) {
    const float inv = InverseDenominator(s.row_sum[q], s.row_max[q], sink);
    const float* acc = s.acc + q * v_pad;
    float* out = h.out + (i0 + q) * h.out_stride;
    for (size_t e = 0; e < h.v_dim; ++e) out[e] = acc[e] * inv;
  }
}

// Online-softmax attention for queries [i0, i0 + n), n <= QueryChunk().
inline void FlashChunk(const AttentionHead& h, size_t i0, size_t n, const ChunkScratch& s) {
  const size_t chunk = QueryChunk();
  const size_t n_pad = PaddedQueries(n);
  TransposeQueryChunk(h, i0, n, n_pad, h.scale * kLog2e, s.qt);
  std::fill(s.row_max, s.row_max + chunk, kNegInf);
  std::fill(s.row_sum, s.row_sum + chunk, 0.0f);
  std::fill(s.acc, s.acc + n * PaddedVDim(h.v_dim), 0.0f);
  const size_t num_keys = h.num_keys();
  // Tiles no query of the chunk reads are skipped: a window of W costs O(W)
  // per query, whatever the keys, and causal half the tiles.
  const kernels::KeyRange keys = ChunkKeys(h, i0, n);
  for (size_t j0 = keys.begin / kKeyTile * kKeyTile; j0 < num_keys; j0 += kKeyTile) {
    size_t cols = HWY_MIN(kKeyTile, num_keys - j0);
    if (!TileRead(h, keys, j0, cols)) continue;
    if (j0 + cols <= h.masked_keys) cols = HWY_MIN(cols, keys.end - j0);
    ScoreTile(h, i0, n, n_pad, j0, cols, kLog2e, s);
    OnlineSoftmaxTile(cols, n_pad, s.st, chunk, s.row_max, s.row_sum, s.corr);
    AccumulateTile(h, i0, n, j0, cols, s);
  }
  WriteOutputRows(h, i0, n, s, h.rule.sink * kLog2e);
}

// Materialised attention for queries [i0, i0 + n): weights rows first.
inline void WeightsChunk(const AttentionHead& h, size_t i0, size_t n, const ChunkScratch& s) {
  const size_t chunk = QueryChunk();
  const size_t n_pad = PaddedQueries(n);
  TransposeQueryChunk(h, i0, n, n_pad, h.scale, s.qt);
  const size_t num_keys = h.num_keys();
  float* weights = h.weights + i0 * h.weights_stride;
  for (size_t j0 = 0; j0 < num_keys; j0 += kKeyTile) {
    const size_t cols = HWY_MIN(kKeyTile, num_keys - j0);
    ScoreTile(h, i0, n, n_pad, j0, cols, 1.0f, s);
    for (size_t q = 0; q < n; ++q) {
      float* row = weights + q * h.weights_stride + j0;
      for (size_t c = 0; c < cols; ++c) row[c] = s.st[c * chunk + q];
    }
  }
  for (size_t q = 0; q < n; ++q) {
    SoftmaxRow(weights + q * h.weights_stride, num_keys, h.rule.sink);
  }
  std::fill(s.corr, s.corr + chunk, 1.0f);
  // Normalised already; a row that reads no key (nor an extra one) attended
  // nothing and is NaN, as in the flash path.
  for (size_t q = 0; q < n; ++q) {
    const kernels::KeyRange reads = h.rule.Keys(i0 + q, h.masked_keys);
    s.row_sum[q] = reads.begin == reads.end && h.num_extra == 0 ? 0.0f : 1.0f;
  }
  std::fill(s.acc, s.acc + n * PaddedVDim(h.v_dim), 0.0f);
  const kernels::KeyRange keys = ChunkKeys(h, i0, n);
  for (size_t j0 = 0; j0 < num_keys; j0 += kKeyTile) {
    const size_t cols = HWY_MIN(kKeyTile, num_keys - j0);
    if (!TileRead(h, keys, j0, cols)) continue;
    for (size_t c = 0; c < cols; ++c) {
      float* row = s.st + c * chunk;
      for (size_t q = 0; q < n; ++q) row[q] = weights[q * h.weights_stride + j0 + c];
      std::fill(row + n, row + n_pad, 0.0f);
    }
    AccumulateTile(h, i0, n, j0, cols, s);
  }
  WriteOutputRows(h, i0, n, s, kNegInf);
}

inline void Attention(const AttentionHead& h, size_t q_begin, size_t q_end, float* scratch) {
  const ChunkScratch s = SplitScratch(h, scratch);
  for (size_t i = q_begin; i < q_end; i += QueryChunk()) {
    const size_t n = HWY_MIN(q_end - i, QueryChunk());
    if (h.weights != nullptr) {
      WeightsChunk(h, i, n, s);
    } else {
      FlashChunk(h, i, n, s);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_FLASH_ATTENTION_INL_H_
