// Decode attention: a few query rows (the new tokens, times the query heads
// that share one key/value head) against a long run of cached keys.
//
// Keys go through in sub-blocks; the rows of the group go through them in
// register tiles of 1, 2, 4 or 8 rows, so that each key and value vector
// loaded feeds every row of the tile (grouped-query heads share every load).
// Scores come out with the rows in vector lanes, as in the flash kernel's
// transposed tiles, and take its online softmax (online_softmax-inl.h): base
// 2, lane-wise max and sum, no horizontal reductions, accumulators rescaled
// only when a row's max grows (a row alone: its keys in the lanes); values
// accumulate through the register tile the flash kernel uses. 16-bit
// (float16, bfloat16) sub-blocks are converted once.
// A call covers one range of keys and leaves a partial softmax state per row
// (unnormalised output, max, sum of exponentials); ranges run on different
// threads and DecodeMerge combines their states (flash-decoding).

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
#include <algorithm>
#include <cstring>
#include <limits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "src/kernels/float16-inl.h"
#include "src/kernels/kernels.h"
#include "src/kernels/mul_add-inl.h"
#include "src/kernels/online_softmax-inl.h"
#include "src/kernels/register_tile-inl.h"
#include "src/kernels/score_rule-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::DecodeGroup;

// Keys per sub-block: their scores, and their keys and values when
// converted, stay in L1 while every tile of rows reads them.
constexpr size_t kDecodeSubBlock = 32;

inline size_t DecodeKeyPad(size_t dim) {
  const hn::ScalableTag<float> d;
  return (dim + hn::Lanes(d) - 1) / hn::Lanes(d) * hn::Lanes(d);
}

// Value rows come in vector pairs: the register tile's columns.
inline size_t DecodeValuePad(size_t dim) {
  const hn::ScalableTag<float> d;
  return (dim + 2 * hn::Lanes(d) - 1) / (2 * hn::Lanes(d)) * (2 * hn::Lanes(d));
}

// Rows per register tile: the flash kernel's (4, 8 with 32 registers), fewer
// for a smaller group (1, 2 or 4).
inline size_t DecodeTileRows(size_t num_rows) {
  size_t rows = 1;
  while (rows < num_rows && rows < kTileRows) rows *= 2;
  return rows;
}

// Rows padded to whole tiles and to whole vectors (the softmax's lanes), and
// to 4: scores are written four rows at a time. Padding rows score -inf. A
// row alone takes no padding: its scores are consecutive, keys in the lanes
// of its tile and its softmax (DecodeScoresRow, OnlineSoftmaxRow).
inline size_t DecodeChunk(size_t num_rows) {
  if (num_rows == 1) return 1;
  const hn::ScalableTag<float> d;
  const size_t tile = DecodeTileRows(num_rows);
  const size_t rows = (num_rows + tile - 1) / tile * tile;
  const size_t multiple = HWY_MAX(hn::Lanes(d), size_t{4});
  return (rows + multiple - 1) / multiple * multiple;
}

// Score slots per row: a sub-block and the keys a tile computes past its end
// (keys in pairs, or in fours for one row), in whole vectors (the one-row
// softmax's).
inline size_t DecodeScoreKeys() { return DecodeKeyPad(kDecodeSubBlock + 3); }

// Scratch: scaled queries (chunk x key pad, padding rows zero), scores
// (score keys x chunk), max, sum and correction (chunk each), a sub-block of
// keys and one of values converted to padded floats.
inline size_t DecodeScratchSize(const DecodeGroup& g) {
  const size_t qk_pad = DecodeKeyPad(g.qk_dim), v_pad = DecodeValuePad(g.v_dim);
  const size_t chunk = DecodeChunk(g.num_rows);
  return chunk * (qk_pad + DecodeScoreKeys() + 3) + kDecodeSubBlock * (qk_pad + v_pad);
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

// Floats per cache line (64 bytes).
constexpr size_t kLineFloats = 16;

// Brings the cache line at p in: a prefetch where the machine has one;
// WebAssembly has none, so there a load (volatile: kept though unused).
HWY_INLINE void BringLine(const float* p) {
#if HWY_ARCH_WASM
  (void)*reinterpret_cast<const volatile float*>(p);
#else
  hwy::Prefetch(p);
#endif
}

// Row kRow of a score tile takes one step: a vector of its query against
// two keys' vectors. Rows past the tile's compile away.
template <size_t kRow, size_t kRows, class D, class V>
HWY_INLINE void DotStep(D d, const float* HWY_RESTRICT q, V k0, V k1, V& a0, V& a1) {
  if constexpr (kRow < kRows) {
    const V qv = hn::Load(d, q);
    a0 = FusedMulAdd(qv, k0, a0);
    a1 = FusedMulAdd(qv, k1, a1);
  }
}

// st[c * chunk + r] = q_r . k_c for the kRows rows of q (pre-scaled, qk_pad
// floats apart) and keys c < cols (`k_step` floats apart), two keys at a
// time: each key vector is loaded once for every row, and each (row, key)
// dot product stays in one accumulator until four rows' are reduced together
// into one vector of rows. Writes rows up to 4 (zeros past kRows, padding)
// and, for odd cols, key `cols` too (scratch). kDim: qk_pad known at compile
// time (0: not), so that the query rows are constant offsets from one pointer.
// Also brings in the same keys' value rows (v_dim floats, `v_step` apart), a
// line at a time: the values pass walks them column by column (its register
// tile), a stride the hardware prefetchers follow poorly and the out-of-order
// window covers only a few keys of; read here in key order, among the keys'
// loads, they stream as the keys do, and the values pass finds them in L1.
template <size_t kRows, size_t kDim>
HWY_NOINLINE void DecodeScores(const float* HWY_RESTRICT q, size_t qk_pad,
                               const float* HWY_RESTRICT k, size_t k_step, size_t cols,
                               float* HWY_RESTRICT st, size_t chunk, const float* v,
                               size_t v_step, size_t v_dim) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t dim = kDim != 0 ? kDim : qk_pad;
  for (size_t c = 0; c < cols; c += 2, k += 2 * k_step, v += 2 * v_step, st += 2 * chunk) {
    const float* HWY_RESTRICT k0 = k;
    const float* HWY_RESTRICT k1 = c + 1 < cols ? k + k_step : k;
    const float* v1 = c + 1 < cols ? v + v_step : v;
    for (size_t e = 0; e < v_dim; e += kLineFloats) {
      BringLine(v + e);
      BringLine(v1 + e);
    }
    V a00 = hn::Zero(d), a01 = hn::Zero(d), a10 = hn::Zero(d), a11 = hn::Zero(d);
    V a20 = hn::Zero(d), a21 = hn::Zero(d), a30 = hn::Zero(d), a31 = hn::Zero(d);
    V a40 = hn::Zero(d), a41 = hn::Zero(d), a50 = hn::Zero(d), a51 = hn::Zero(d);
    V a60 = hn::Zero(d), a61 = hn::Zero(d), a70 = hn::Zero(d), a71 = hn::Zero(d);
    const float* HWY_RESTRICT qe = q;
    // One feature step, u vectors past qe, k0 and k1.
    const auto step = [&](size_t u) HWY_ATTR {
      const size_t e = u * lanes;
      const V kv0 = hn::LoadU(d, k0 + e), kv1 = hn::LoadU(d, k1 + e);
      DotStep<0, kRows>(d, qe + e, kv0, kv1, a00, a01);
      DotStep<1, kRows>(d, qe + dim + e, kv0, kv1, a10, a11);
      DotStep<2, kRows>(d, qe + 2 * dim + e, kv0, kv1, a20, a21);
      DotStep<3, kRows>(d, qe + 3 * dim + e, kv0, kv1, a30, a31);
      DotStep<4, kRows>(d, qe + 4 * dim + e, kv0, kv1, a40, a41);
      DotStep<5, kRows>(d, qe + 5 * dim + e, kv0, kv1, a50, a51);
      DotStep<6, kRows>(d, qe + 6 * dim + e, kv0, kv1, a60, a61);
      DotStep<7, kRows>(d, qe + 7 * dim + e, kv0, kv1, a70, a71);
    };
    // The count from qk_pad, not kDim: a count known at compile time would
    // fold the steps' exit tests away (UnrolledSteps says why they stay).
    UnrolledSteps(qk_pad / lanes, step, [&](size_t n) {
      qe += n * lanes;
      k0 += n * lanes;
      k1 += n * lanes;
    });
    SumOfLanes4(d, a00, a10, a20, a30, st);
    SumOfLanes4(d, a01, a11, a21, a31, st + chunk);
    if constexpr (kRows > 4) {
      SumOfLanes4(d, a40, a50, a60, a70, st + 4);
      SumOfLanes4(d, a41, a51, a61, a71, st + chunk + 4);
    }
  }
}

// The one-row tile: st[c] = q . k_c (chunk 1) for keys c < cols, four at a
// time, each query vector loaded once for four key vectors; SumOfLanes4
// reduces the four keys' sums together, where a row of the tile above would
// fill one of its four slots. Each dot product keeps that tile's order (its
// features in one accumulator, the same reduction): the same bits. Writes up
// to three keys past cols (scratch) and brings in the keys' value rows as
// DecodeScores does.
template <size_t kDim>
HWY_NOINLINE void DecodeScoresRow(const float* HWY_RESTRICT q, size_t qk_pad,
                                  const float* HWY_RESTRICT k, size_t k_step, size_t cols,
                                  float* HWY_RESTRICT st, size_t /*chunk*/, const float* v,
                                  size_t v_step, size_t v_dim) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t dim = kDim != 0 ? kDim : qk_pad;
  for (size_t c = 0; c < cols; c += 4, k += 4 * k_step, v += 4 * v_step, st += 4) {
    const size_t n = HWY_MIN(cols - c, size_t{4});
    for (size_t j = 0; j < n; ++j) {
      for (size_t e = 0; e < v_dim; e += kLineFloats) BringLine(v + j * v_step + e);
    }
    // Keys past cols repeat key c.
    const float* HWY_RESTRICT k0 = k;
    const float* HWY_RESTRICT k1 = n > 1 ? k + k_step : k;
    const float* HWY_RESTRICT k2 = n > 2 ? k + 2 * k_step : k;
    const float* HWY_RESTRICT k3 = n > 3 ? k + 3 * k_step : k;
    V a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    for (size_t e = 0; e < dim; e += lanes) {
      const V qv = hn::Load(d, q + e);
      a0 = FusedMulAdd(qv, hn::LoadU(d, k0 + e), a0);
      a1 = FusedMulAdd(qv, hn::LoadU(d, k1 + e), a1);
      a2 = FusedMulAdd(qv, hn::LoadU(d, k2 + e), a2);
      a3 = FusedMulAdd(qv, hn::LoadU(d, k3 + e), a3);
    }
    SumOfLanes4(d, a0, a1, a2, a3, st);
  }
}

using DecodeScoresFn = void (*)(const float*, size_t, const float*, size_t, size_t, float*,
                                size_t, const float*, size_t, size_t);

template <size_t kDim>
DecodeScoresFn DecodeScoresFor(size_t rows) {
  if (rows == 1) return &DecodeScoresRow<kDim>;
  if (rows == 2) return &DecodeScores<2, kDim>;
  if (rows == 4) return &DecodeScores<4, kDim>;
  return &DecodeScores<kTileRows, kDim>;
}

// DecodeChunk of a group that is one tile of `tile` rows, where vectors hold
// at most 4 floats (WebAssembly, SSE4, NEON).
constexpr size_t DecodeTileChunk(size_t tile) { return HWY_MAX(tile, size_t{4}); }

// For the `rows` (<= kRows) rows of one tile: acc_r = acc_r * corr[r] (when
// `rescale`) + sum_c p[c * chunk + r] * v_c over v_pad features (v rows
// `v_step` floats apart, acc rows `row_size`), through the flash kernel's
// register tile: each loaded value vector feeds every row. No skipping
// p == 0: a NaN value must spread as PyTorch's 0 * NaN does.
// kStep != 0: the tile is a whole group (rows == kRows, chunk ==
// DecodeTileChunk(kRows)) and v_step == kStep, known at compile time, so that
// the loads of the tile's key loop take constant offsets from pointers that
// advance once per iteration (WebAssembly engines fold no runtime index into
// an address: each is an integer operation per load).
template <size_t kRows, size_t kStep>
HWY_NOINLINE void DecodeValues(const float* HWY_RESTRICT p, size_t chunk,
                               const float* HWY_RESTRICT v, size_t v_step, size_t v_pad,
                               size_t cols, size_t rows, const float* HWY_RESTRICT corr,
                               bool rescale, float* HWY_RESTRICT acc, size_t row_size) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t tile_chunk = kStep != 0 ? DecodeTileChunk(kRows) : chunk;
  const size_t tile_step = kStep != 0 ? kStep : v_step;
  const size_t tile_rows = kStep != 0 ? kRows : rows;
  const float* p_rows[kRows];
  TileRowPointers<kRows>(p, 1, kRows, p_rows);
  for (size_t e = 0; e < v_pad; e += 2 * lanes) {
    RegisterTile<kRows>(
        d, p_rows, tile_chunk, v + e, tile_step, cols,
        [&](size_t r, size_t half) {
          if (r >= tile_rows) return hn::Zero(d);
          const V a = hn::LoadU(d, acc + r * row_size + e + half * lanes);
          return rescale ? hn::Mul(a, hn::Set(d, corr[r])) : a;
        },
        [&](size_t r, V a0, V a1) {
          if (r < tile_rows) StoreRow(d, a0, a1, 2 * lanes, acc + r * row_size + e);
        });
  }
}

// The same for one row (chunk 1): the registers hold two pairs of its value
// vectors (RegisterTile's two panels), so each weight is broadcast once per
// four vectors, each key's row read in half the passes; a last pair, if any,
// goes through DecodeValues<1>. Each feature keeps its accumulation order.
HWY_NOINLINE void DecodeValuesRow(const float* HWY_RESTRICT p, size_t chunk,
                                  const float* HWY_RESTRICT v, size_t v_step, size_t v_pad,
                                  size_t cols, size_t rows, const float* HWY_RESTRICT corr,
                                  bool rescale, float* HWY_RESTRICT acc, size_t row_size) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t wide = v_pad / (4 * lanes) * (4 * lanes);
  const float* p_rows[1] = {p};
  for (size_t e = 0; e < wide; e += 4 * lanes) {
    RegisterTile<1, 2>(
        d, p_rows, chunk, v + e, v_step, cols,
        [&](size_t pair, size_t half) {
          const V a = hn::LoadU(d, acc + e + (2 * pair + half) * lanes);
          return rescale ? hn::Mul(a, hn::Set(d, corr[0])) : a;
        },
        [&](size_t pair, V a0, V a1) { StoreRow(d, a0, a1, 2 * lanes, acc + e + 2 * pair * lanes); },
        2 * lanes);
  }
  if (wide < v_pad) {
    DecodeValues<1, 0>(p, chunk, v + wide, v_step, v_pad - wide, cols, rows, corr, rescale,
                    acc + wide, row_size);
  }
}

using DecodeValuesFn = void (*)(const float*, size_t, const float*, size_t, size_t, size_t,
                                size_t, const float*, bool, float*, size_t);

template <size_t kStep>
DecodeValuesFn DecodeValuesFor(size_t rows) {
  if (rows == 1) return &DecodeValuesRow;
  if (rows == 2) return &DecodeValues<2, kStep>;
  if (rows == 4) return &DecodeValues<4, kStep>;
  return &DecodeValues<kTileRows, kStep>;
}

template <size_t kDim>
void DecodeRange(const DecodeGroup& g, size_t j0, size_t j1, float* state, float* scratch) {
  const size_t qk_pad = DecodeKeyPad(g.qk_dim), v_pad = DecodeValuePad(g.v_dim);
  const size_t row_size = DecodeStateRow(g);
  const size_t rows = g.num_rows, chunk = DecodeChunk(rows), tile = DecodeTileRows(rows);
  float* qs = scratch;
  float* st = qs + chunk * qk_pad;
  float* row_max = st + DecodeScoreKeys() * chunk;
  float* row_sum = row_max + chunk;
  float* corr = row_sum + chunk;
  float* key_buf = corr + chunk;
  float* value_buf = key_buf + kDecodeSubBlock * qk_pad;
  // Base 2, as the flash kernel: the scale carries log2(e).
  const float scale = g.scale * kLog2e;
  for (size_t r = 0; r < chunk; ++r) {
    float* q = qs + r * qk_pad;
    const size_t dim = r < rows ? g.qk_dim : 0;
    for (size_t e = 0; e < dim; ++e) q[e] = g.q[r][e] * scale;
    for (size_t e = dim; e < qk_pad; ++e) q[e] = 0.0f;
    row_max[r] = kNegInf;
    row_sum[r] = 0.0f;
  }
  for (size_t r = 0; r < rows; ++r) {
    for (size_t e = 0; e < v_pad; ++e) state[r * row_size + e] = 0.0f;
  }
  // Each row's keys (ScoreRule::Keys), once per call, not per sub-block.
  kernels::KeyRange reads[kernels::kMaxDecodeRows];
  for (size_t r = 0; r < rows; ++r) reads[r] = g.rule[r].Keys(0, g.num_keys);
  const DecodeScoresFn scores = DecodeScoresFor<kDim>(tile);
  const DecodeValuesFn values = DecodeValuesFor<0>(tile);
  // A group of one tile whose value rows are kDim floats apart takes the
  // tile with constant offsets (DecodeValues).
  const DecodeValuesFn values_fixed =
      rows == tile && chunk == DecodeTileChunk(tile) ? DecodeValuesFor<kDim>(tile) : values;
  for (size_t c0 = j0; c0 < j1; c0 += kDecodeSubBlock) {
    const size_t cols = HWY_MIN(kDecodeSubBlock, j1 - c0);
    size_t k_step, v_step;
    const float* k = DecodeBlock(g, g.k, g.k_stride, g.qk_dim, qk_pad, c0, cols, key_buf, &k_step);
    const float* v =
        DecodeBlock(g, g.v, g.v_stride, g.v_dim, v_pad, c0, cols, value_buf, &v_step);
    for (size_t r0 = 0; r0 < rows; r0 += tile) {
      scores(qs + r0 * qk_pad, qk_pad, k, k_step, cols, st + r0, chunk, v, v_step, g.v_dim);
    }
    for (size_t r = 0; r < rows; ++r) {
      ApplyScoreRule(g.rule[r], g.num_keys, 0, 1, c0, cols, cols, kLog2e, st + r, chunk);
    }
    for (size_t c = 0; c < cols; ++c) std::fill(st + c * chunk + rows, st + (c + 1) * chunk, kNegInf);
    const bool grew = rows == 1 ? OnlineSoftmaxRow(cols, st, row_max, row_sum, corr)
                                : OnlineSoftmaxTile(cols, chunk, st, chunk, row_max, row_sum, corr);
    for (size_t r0 = 0; r0 < rows; r0 += tile) {
      const size_t n = HWY_MIN(tile, rows - r0);
      // The keys of the block that every row of the tile reads (ScoreRule::Keys)
      // go through the register tile, a row's other ones through AddKeys, and
      // none it may not read, even at weight 0: a NaN value there never
      // reaches it.
      kernels::KeyRange common{c0, c0 + cols};
      for (size_t r = r0; r < r0 + n; ++r) {
        common = Clip(reads[r], common.begin, common.end);
      }
      const size_t skip = common.begin - c0;
      (v_step == kDim ? values_fixed : values)(
          st + skip * chunk + r0, chunk, v + skip * v_step, v_step, v_pad,
          common.end - common.begin, n, corr + r0, grew, state + r0 * row_size, row_size);
      for (size_t r = r0; r < r0 + n; ++r) {
        const kernels::KeyRange mine = Clip(reads[r], c0, c0 + cols);
        float* acc = state + r * row_size;
        AddKeys(st + r, chunk, v, v_step, v_pad, c0, mine.begin, HWY_MIN(mine.end, common.begin), acc);
        AddKeys(st + r, chunk, v, v_step, v_pad, c0, HWY_MAX(mine.begin, common.end), mine.end, acc);
      }
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    state[r * row_size + v_pad] = row_max[r];
    state[r * row_size + v_pad + 1] = row_sum[r];
  }
}

inline void DecodePartial(const DecodeGroup& g, size_t j0, size_t j1, float* state,
                          float* scratch) {
  switch (DecodeKeyPad(g.qk_dim)) {
    case 64: return DecodeRange<64>(g, j0, j1, state, scratch);
    case 128: return DecodeRange<128>(g, j0, j1, state, scratch);
    default: return DecodeRange<0>(g, j0, j1, state, scratch);
  }
}

// Each range's state is in base 2 (its max carries log2(e)), as the sink is
// made to be.
inline void DecodeMerge(const DecodeGroup& g, const float* states, size_t count, size_t stride) {
  const size_t dv = g.v_dim, v_pad = DecodeValuePad(dv), row_size = DecodeStateRow(g);
  for (size_t r = 0; r < g.num_rows; ++r) {
    float max = kNegInf;
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
      const float w = s[v_pad] == kNegInf ? 0.0f : std::exp2(s[v_pad] - max);
      sum += s[v_pad + 1] * w;
      for (size_t e = 0; e < dv; ++e) out[e] += s[e] * w;
    }
    const float inv = InverseDenominator(sum, max, g.rule[r].sink * kLog2e);
    for (size_t e = 0; e < dv; ++e) out[e] *= inv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_DECODE_ATTENTION_INL_H_
