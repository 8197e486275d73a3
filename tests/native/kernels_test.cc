// The dispatched kernels against the scalar references, on every target:
// GEMM tiles and tails, and attention with each mask kind, extra keys and
// the weights path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/aligned_allocator.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "tests/native/gemm_check.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::kernels::AttentionHead;
using mha::kernels::Storage;

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      ASSERT_TRUE(std::isnan(actual[i])) << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(actual[i], expected[i], 1e-4 + 1e-4 * std::fabs(expected[i])) << what << " [" << i << "]";
  }
}

class KernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(KernelTest);

// Every register tile (kGemmTileRows), not only the one GemmTile chooses.
TEST_P(KernelTest, GemmMatchesReferenceOnTilesAndTails) {
  for (size_t tile_rows : mha::kernels::kGemmTileRows) {
    EXPECT_EQ(CheckGemmTile(tile_rows), "") << "tile " << mha::kernels::GemmTileName(tile_rows);
  }
}

TEST_P(KernelTest, ChosenGemmTileIsOneOfTheTiles) {
  const size_t chosen = mha::kernels::GemmTileRows();
  std::printf("GEMM tile on %s: %s\n", mha::kernels::TargetName(),
              mha::kernels::GemmTileName(chosen));
  bool listed = false;
  for (size_t tile_rows : mha::kernels::kGemmTileRows) listed |= tile_rows == chosen;
  EXPECT_TRUE(listed) << chosen;
}

// ALiBi's bias is the slope times the integer j - p_i: a query at position P
// past 2^24 (a rolling cache's) with a window of 8 keys in a ring of 8 gives
// the bits it gives at P = 7 (same ring rows, same key tile), up to 2^31.
TEST_P(KernelTest, AlibiBiasIsExactAtLargePositions) {
  constexpr size_t kRing = 8, kDim = 16;
  const std::vector<float> q = RandomVector(kDim, 70), k = RandomVector(kRing * kDim, 71),
                           v = RandomVector(kRing * kDim, 72);
  auto run = [&](size_t position) {
    AttentionHead h;
    h.q = q.data();
    h.k = k.data();
    h.v = v.data();
    h.q_stride = h.k_stride = h.v_stride = h.qk_dim = h.v_dim = kDim;
    h.ring = kRing;
    h.num_queries = 1;
    h.masked_keys = position + 1;
    h.rule.causal = true;
    h.rule.causal_offset = position;
    h.rule.window_left = kRing - 1;
    h.rule.alibi_slope = 0.375f;
    std::vector<float> out(kDim);
    h.out = out.data();
    h.out_stride = kDim;
    auto scratch = hwy::AllocateAligned<float>(mha::kernels::AttentionScratchSize(h));
    mha::kernels::Attention(h, 0, 1, scratch.get());
    return out;
  };
  const std::vector<float> small = run(7);
  for (size_t position : {(size_t{1} << 25) + 7, (size_t{1} << 31) - 57}) {
    const std::vector<float> large = run(position);
    for (size_t e = 0; e < kDim; ++e) {
      ASSERT_EQ(large[e], small[e]) << "P " << position << " [" << e << "]";
    }
  }
}

// Random keys and values (rows `k_stride` / `v_stride` floats apart) and,
// when stored in 16 bits, those bits, the floats then rounded to them (what
// the reference must see).
struct Keys {
  std::vector<float> k, v;
  std::vector<uint16_t> k16, v16;
};

std::vector<uint16_t> StoreAs16(Storage storage, std::vector<float>* x) {
  std::vector<uint16_t> bits(x->size());
  if (storage == Storage::kBFloat16) {
    mha::kernels::FloatToBFloat16(x->data(), x->size(), bits.data());
    mha::kernels::BFloat16ToFloat(bits.data(), x->size(), x->data());
  } else {
    mha::kernels::FloatToHalf(x->data(), x->size(), bits.data());
    mha::kernels::HalfToFloat(bits.data(), x->size(), x->data());
  }
  return bits;
}

Keys RandomKeys(size_t keys, size_t k_stride, size_t v_stride, Storage storage, uint32_t seed) {
  Keys r{RandomVector(keys * k_stride, seed), RandomVector(keys * v_stride, seed + 1), {}, {}};
  if (storage != Storage::kFloat32) {
    r.k16 = StoreAs16(storage, &r.k);
    r.v16 = StoreAs16(storage, &r.v);
  }
  return r;
}

struct AttentionCase {
  size_t queries, keys, qk_dim, v_dim, extra;
  bool causal, mask, key_bias, weights;
  size_t causal_offset = 0;  // queries after a cache of this many keys
  Storage storage = Storage::kFloat32;  // of keys and values (k16, v16 if 16-bit)
};

void CheckAttention(const AttentionCase& c, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "L=" << c.queries << " S=" << c.keys << " qk=" << c.qk_dim
                                  << " v=" << c.v_dim << " extra=" << c.extra << " causal=" << c.causal
                                  << " mask=" << c.mask << " kpm=" << c.key_bias << " weights=" << c.weights
                                  << " offset=" << c.causal_offset
                                  << " storage=" << static_cast<int>(c.storage));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Rows are strided wider than the head, as heads inside projections are.
  const size_t q_stride = c.qk_dim + 2, k_stride = c.qk_dim + 3, v_stride = c.v_dim + 1;
  const std::vector<float> q = RandomVector(c.queries * q_stride, seed),
                           ek = RandomVector(c.extra * c.qk_dim, seed + 3),
                           ev = RandomVector(c.extra * c.v_dim, seed + 4);
  const Keys stored = RandomKeys(c.keys, k_stride, v_stride, c.storage, seed + 1);
  const std::vector<float>& k = stored.k;
  const std::vector<float>& v = stored.v;
  std::vector<float> mask = RandomVector(c.queries * c.keys, seed + 5), key_bias(c.keys, 0.0f);
  for (size_t i = 0; i < mask.size(); i += 5) mask[i] = neg_inf;
  // Pad every key of the first 64-key tile except key 0 and the last two keys.
  for (size_t j = 1; j < c.keys && j < 64; ++j) key_bias[j] = neg_inf;
  if (c.keys > 2) key_bias[c.keys - 1] = 0.5f;
  AttentionHead h;
  h.q = q.data();
  h.q_stride = q_stride;
  h.k = k.data();
  h.k_stride = k_stride;
  h.v = v.data();
  h.v_stride = v_stride;
  h.extra_k = ek.data();
  h.extra_v = ev.data();
  h.num_extra = c.extra;
  h.num_queries = c.queries;
  h.masked_keys = c.keys;
  h.qk_dim = c.qk_dim;
  h.v_dim = c.v_dim;
  h.scale = 0.7f;
  h.rule.causal = c.causal;
  h.rule.causal_offset = c.causal_offset;
  if (c.mask) {
    h.rule.mask = mask.data();
    h.rule.mask_stride = c.keys;
  }
  if (c.key_bias) h.rule.key_bias = key_bias.data();
  const size_t out_stride = c.v_dim + 3;
  std::vector<float> out(c.queries * out_stride), weights;
  h.out = out.data();
  h.out_stride = out_stride;
  if (c.weights) {
    weights.assign(c.queries * h.num_keys(), 0.0f);
    h.weights = weights.data();
    h.weights_stride = h.num_keys();
  }
  std::vector<float> expected_out, expected_weights;
  ReferenceAttention(h, &expected_out, &expected_weights);
  if (c.storage != Storage::kFloat32) {
    h.k = h.v = nullptr;
    h.storage = c.storage;
    h.k16 = stored.k16.data();
    h.v16 = stored.v16.data();
  }
  auto scratch = hwy::AllocateAligned<float>(mha::kernels::AttentionScratchSize(h));
  // Two query ranges, as two threads would split them.
  const size_t split = c.queries / 2;
  mha::kernels::Attention(h, 0, split, scratch.get());
  mha::kernels::Attention(h, split, c.queries, scratch.get());
  std::vector<float> actual(c.queries * c.v_dim);
  for (size_t i = 0; i < c.queries; ++i) {
    for (size_t e = 0; e < c.v_dim; ++e) actual[i * c.v_dim + e] = out[i * out_stride + e];
  }
  ExpectNear(actual, expected_out, "output");
  if (c.weights) ExpectNear(weights, expected_weights, "weights");
}

TEST_P(KernelTest, AttentionMatchesReference) {
  uint32_t seed = 10;
  for (bool weights : {false, true}) {
    for (const AttentionCase& c : std::vector<AttentionCase>{
             {1, 1, 1, 1, 0, false, false, false, weights},
             {7, 7, 3, 5, 0, true, false, false, weights},
             {17, 65, 8, 8, 0, false, true, false, weights},
             {65, 63, 16, 4, 0, true, false, true, weights},
             {130, 130, 64, 64, 0, true, true, true, weights},
             {9, 70, 80, 17, 1, false, false, true, weights},
             {5, 3, 2, 3, 2, true, true, true, weights},
             {70, 129, 5, 128, 2, true, false, true, weights},
             // Bottom-right causal after a cache: one step, a chunk, a prefill.
             {1, 200, 16, 16, 0, true, false, true, weights, 199},
             {3, 70, 8, 8, 0, true, true, false, weights, 67},
             {66, 133, 64, 64, 0, true, false, false, weights, 67},
             {9, 73, 4, 4, 0, true, false, true, weights, 0},
         }) {
      CheckAttention(c, seed++);
    }
  }
}

// float16 and bfloat16 keys and values (a 16-bit cache on a call the decode
// kernel does not take): converted one key tile at a time, extra keys still
// float.
TEST_P(KernelTest, AttentionReads16BitKeysAndValues) {
  uint32_t seed = 50;
  for (Storage s : {Storage::kFloat16, Storage::kBFloat16}) {
    for (bool weights : {false, true}) {
      for (const AttentionCase& c : std::vector<AttentionCase>{
               {17, 65, 8, 8, 0, false, true, false, weights, 0, s},
               {130, 130, 64, 64, 0, true, true, true, weights, 0, s},
               {70, 129, 5, 128, 0, true, false, true, weights, 0, s},
               {9, 70, 80, 17, 1, false, false, true, weights, 0, s},
               {1, 200, 16, 16, 0, true, false, true, weights, 199, s},
           }) {
        CheckAttention(c, seed++);
      }
    }
  }
}

struct DecodeCase {
  size_t heads, queries, keys, qk_dim, v_dim;
  bool causal, mask, key_bias;
  Storage storage;
  size_t ranges;
};

// `heads` query heads sharing one key/value head, each with `queries` rows:
// DecodePartial over `ranges` key ranges and DecodeMerge against the
// attention reference of each head.
void CheckDecode(const DecodeCase& c, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "heads=" << c.heads << " L=" << c.queries << " T=" << c.keys
                                  << " qk=" << c.qk_dim << " v=" << c.v_dim << " causal=" << c.causal
                                  << " mask=" << c.mask << " kpm=" << c.key_bias
                                  << " storage=" << static_cast<int>(c.storage)
                                  << " ranges=" << c.ranges);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t k_stride = c.qk_dim + 3, v_stride = c.v_dim + 1, rows = c.heads * c.queries;
  const std::vector<float> q = RandomVector(rows * c.qk_dim, seed);
  const Keys stored = RandomKeys(c.keys, k_stride, v_stride, c.storage, seed + 1);
  const std::vector<float>& k = stored.k;
  const std::vector<float>& v = stored.v;
  std::vector<float> mask = RandomVector(rows * c.keys, seed + 3), key_bias(c.keys, 0.0f);
  for (size_t i = 0; i < mask.size(); i += 7) mask[i] = neg_inf;
  for (size_t j = 1; j < c.keys; j += 3) key_bias[j] = neg_inf;
  const size_t offset = c.keys - c.queries;  // the queries are the last positions
  mha::kernels::DecodeGroup g;
  const bool narrow = c.storage != Storage::kFloat32;
  g.k = narrow ? static_cast<const void*>(stored.k16.data()) : k.data();
  g.v = narrow ? static_cast<const void*>(stored.v16.data()) : v.data();
  g.storage = c.storage;
  g.k_stride = k_stride;
  g.v_stride = v_stride;
  g.num_keys = c.keys;
  g.qk_dim = c.qk_dim;
  g.v_dim = c.v_dim;
  g.scale = 0.4f;
  std::vector<float> out(rows * c.v_dim, 7.0f), expected;
  for (size_t r = 0; r < rows; ++r) {
    g.q[r] = q.data() + r * c.qk_dim;
    g.out[r] = out.data() + r * c.v_dim;
  }
  g.num_rows = rows;
  for (size_t h = 0; h < c.heads; ++h) {
    AttentionHead head;
    head.q = g.q[h * c.queries];
    head.q_stride = c.qk_dim;
    head.k = k.data();
    head.k_stride = k_stride;
    head.v = v.data();
    head.v_stride = v_stride;
    head.num_queries = c.queries;
    head.masked_keys = c.keys;
    head.qk_dim = c.qk_dim;
    head.v_dim = c.v_dim;
    head.scale = g.scale;
    head.rule.causal = c.causal;
    head.rule.causal_offset = offset;
    if (c.mask) {
      head.rule.mask = mask.data() + h * c.queries * c.keys;
      head.rule.mask_stride = c.keys;
    }
    if (c.key_bias) head.rule.key_bias = key_bias.data();
    // The group's rows of this head, as RunDecodeHeads makes them.
    for (size_t i = 0; i < c.queries; ++i) g.rule[h * c.queries + i] = head.rule.Row(i);
    std::vector<float> head_out, weights;
    ReferenceAttention(head, &head_out, &weights);
    expected.insert(expected.end(), head_out.begin(), head_out.end());
  }
  const size_t stride = mha::kernels::DecodeStateSize(g) + 5;  // states need not be adjacent
  std::vector<float> states(c.ranges * stride);
  std::vector<float> scratch(mha::kernels::DecodeScratchSize(g) + 64);
  float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  for (size_t i = 0; i < c.ranges; ++i) {
    mha::kernels::DecodePartial(g, c.keys * i / c.ranges, c.keys * (i + 1) / c.ranges,
                                states.data() + i * stride, aligned);
  }
  mha::kernels::DecodeMerge(g, states.data(), c.ranges, stride);
  ExpectNear(out, expected, "decode output");
}

TEST_P(KernelTest, DecodeMatchesReference) {
  uint32_t seed = 100;
  for (Storage s : {Storage::kFloat32, Storage::kFloat16, Storage::kBFloat16}) {
    for (const DecodeCase& c : std::vector<DecodeCase>{
             {1, 1, 1, 4, 4, false, false, false, s, 1},
             {1, 1, 200, 64, 64, true, false, false, s, 3},
             {2, 1, 90, 64, 64, true, false, true, s, 2},
             {4, 1, 130, 64, 64, true, false, true, s, 2},
             {2, 3, 70, 17, 9, true, true, true, s, 4},
             {8, 2, 65, 128, 80, false, true, false, s, 1},
             {3, 5, 9, 5, 3, true, true, true, s, 2},
         }) {
      CheckDecode(c, seed++);
    }
  }
}

// The decode kernel for group g over keys [0, keys) in two ranges, then
// their merge into g's outputs.
void DecodeInTwoRanges(const mha::kernels::DecodeGroup& g, size_t keys) {
  const size_t state = mha::kernels::DecodeStateSize(g);
  std::vector<float> states(2 * state);
  auto scratch = hwy::AllocateAligned<float>(mha::kernels::DecodeScratchSize(g));
  mha::kernels::DecodePartial(g, 0, keys / 2, states.data(), scratch.get());
  mha::kernels::DecodePartial(g, keys / 2, keys, states.data() + state, scratch.get());
  mha::kernels::DecodeMerge(g, states.data(), 2, state);
}

// A row alone (its keys in vector lanes, decode_attention-inl.h) gives the
// bits it gets beside another row (the rows in lanes): the same products
// and sums in the same order, on every target. Key counts around the tiles'
// four keys and the 32-key sub-blocks, two ranges, padded keys (a NaN value
// among them spreads), a soft cap, the compile-time head dim and others.
TEST_P(KernelTest, DecodeRowAloneGivesItsBitsInATile) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 400;
  for (Storage s : {Storage::kFloat32, Storage::kFloat16}) {
    for (size_t dim : {64, 20}) {
      for (size_t keys : {1, 3, 33, 70, 131}) {
        for (bool nan : {false, true}) {
          SCOPED_TRACE(testing::Message() << "storage=" << static_cast<int>(s) << " dim=" << dim
                                          << " T=" << keys << " nan=" << nan);
          const std::vector<float> q = RandomVector(2 * dim, seed++);
          Keys stored = RandomKeys(keys, dim, dim + 1, s, seed++);
          std::vector<float> key_bias(keys, 0.5f);
          for (size_t j = 2; j < keys; j += 5) key_bias[j] = neg_inf;
          if (nan && keys > 2) stored.v[2 * (dim + 1) + 1] = std::nanf("");
          if (nan && keys > 2 && s != Storage::kFloat32) stored.v16[2 * (dim + 1) + 1] = 0x7E00;
          mha::kernels::ScoreRule rule;
          rule.key_bias = key_bias.data();
          rule.softcap = 3.0f;
          std::vector<float> alone(dim, 7.0f), pair(2 * dim, 7.0f);
          for (size_t rows : {1, 2}) {
            mha::kernels::DecodeGroup g;
            g.storage = s;
            const bool narrow = s != Storage::kFloat32;
            g.k = narrow ? static_cast<const void*>(stored.k16.data()) : stored.k.data();
            g.v = narrow ? static_cast<const void*>(stored.v16.data()) : stored.v.data();
            g.k_stride = dim;
            g.v_stride = dim + 1;
            g.num_keys = keys;
            g.qk_dim = g.v_dim = dim;
            g.scale = 0.4f;
            g.num_rows = rows;
            for (size_t r = 0; r < rows; ++r) {
              g.q[r] = q.data() + r * dim;
              g.out[r] = (rows == 1 ? alone : pair).data() + r * dim;
              g.rule[r] = rule;
            }
            DecodeInTwoRanges(g, keys);
          }
          EXPECT_EQ(std::memcmp(alone.data(), pair.data(), dim * sizeof(float)), 0);
          EXPECT_EQ(std::isnan(alone[1]), nan && keys > 2);
        }
      }
    }
  }
}

// A head of `queries` rows of q against `keys` float32 keys of `stored`, dim
// features each, rows adjacent, scale 0.3, no rule.
AttentionHead PlainHead(const std::vector<float>& q, const Keys& stored, size_t queries,
                        size_t keys, size_t dim) {
  AttentionHead h;
  h.q = q.data();
  h.q_stride = h.k_stride = h.v_stride = h.out_stride = h.qk_dim = h.v_dim = dim;
  h.k = stored.k.data();
  h.v = stored.v.data();
  h.num_queries = queries;
  h.masked_keys = keys;
  h.scale = 0.3f;
  return h;
}

// What the three paths that apply ScoreRule give for head h (its out and
// weights unset): the flash kernel, its weights path (and its weights) and
// the decode kernel over two key ranges (its first kMaxDecodeRows queries).
struct PathOutputs {
  std::vector<float> flash, with_weights, weights, decode;
};

PathOutputs RunPaths(AttentionHead h) {
  const size_t queries = h.num_queries, keys = h.masked_keys;
  PathOutputs out;
  out.flash.assign(queries * h.v_dim, 0.0f);
  out.with_weights = out.decode = out.flash;
  out.weights.assign(queries * keys, 0.0f);
  auto scratch = hwy::AllocateAligned<float>(mha::kernels::AttentionScratchSize(h));
  h.out = out.flash.data();
  mha::kernels::Attention(h, 0, queries, scratch.get());
  h.out = out.with_weights.data();
  h.weights = out.weights.data();
  h.weights_stride = keys;
  mha::kernels::Attention(h, 0, queries, scratch.get());
  mha::kernels::DecodeGroup g;
  g.k = h.k;
  g.v = h.v;
  g.k_stride = h.k_stride;
  g.v_stride = h.v_stride;
  g.qk_dim = h.qk_dim;
  g.v_dim = h.v_dim;
  g.num_keys = keys;
  g.scale = h.scale;
  g.num_rows = std::min(queries, mha::kernels::kMaxDecodeRows);
  for (size_t i = 0; i < g.num_rows; ++i) {
    g.q[i] = h.q + i * h.q_stride;
    g.out[i] = out.decode.data() + i * h.v_dim;
    g.rule[i] = h.rule.Row(i);
  }
  DecodeInTwoRanges(g, keys);
  return out;
}

// One head of few queries through the three paths that apply ScoreRule:
// the flash kernel, its weights path and the decode kernel (two key ranges).
// They must agree with each other (and the reference) on which keys each
// query sees and with what bias: causal after a cache, masks, padded keys;
// and, with a sink (which the reference lacks), with each other.
TEST_P(KernelTest, FlashWeightsAndDecodePathsAgree) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 300;
  for (float sink : {neg_inf, 1.5f}) {
    for (size_t queries : {1, 3, 16}) {
      for (size_t keys : {1, 70, 200}) {
        SCOPED_TRACE(testing::Message() << "L=" << queries << " T=" << keys << " sink=" << sink);
        // The queries are the last positions (all of them past the keys when fewer).
        const size_t dim = 16, offset = keys > queries ? keys - queries : 0;
        const std::vector<float> q = RandomVector(queries * dim, seed++);
        const Keys stored = RandomKeys(keys, dim, dim, Storage::kFloat32, seed++);
        std::vector<float> mask = RandomVector(queries * keys, seed++), key_bias(keys, 0.25f);
        for (size_t i = 0; i < mask.size(); i += 3) mask[i] = neg_inf;
        for (size_t j = 1; j < keys; j += 4) key_bias[j] = neg_inf;
        AttentionHead h = PlainHead(q, stored, queries, keys, dim);
        h.rule = {key_bias.data(), mask.data(), keys, true, offset};
        h.rule.sink = sink;
        std::vector<float> expected, expected_weights;
        ReferenceAttention(h, &expected, &expected_weights);
        const PathOutputs out = RunPaths(h);
        ExpectNear(out.with_weights, out.flash, "weights path vs flash");
        ExpectNear(out.decode, out.flash, "decode vs flash");
        if (sink == neg_inf) {
          ExpectNear(out.flash, expected, "flash");
          ExpectNear(out.weights, expected_weights, "weights");
        }
      }
    }
  }
}

// Key padding at the ends alone (a bias of 0 between the live ends) left out
// of the rule, as FillHeads leaves it (BiasBetweenLiveKeys), gives the bits
// the bias gives through the flash kernel, its weights path and the decode
// kernel (one row, and rows in lanes); a hole or a value between the live
// ends keeps the bias.
TEST_P(KernelTest, KeyBiasOfZeroBetweenLiveEndsMayBeLeftOut) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 500;
  for (size_t queries : {1, 4, 20}) {
    for (size_t keys : {21, 70, 131}) {
      SCOPED_TRACE(testing::Message() << "L=" << queries << " T=" << keys);
      const size_t dim = 64;
      const std::vector<float> q = RandomVector(queries * dim, seed++);
      const Keys stored = RandomKeys(keys, dim, dim, Storage::kFloat32, seed++);
      std::vector<float> key_bias(keys, 0.0f);
      key_bias[0] = key_bias[1] = key_bias[keys - 1] = neg_inf;  // pads at both ends
      std::vector<size_t> from(keys + 1), to(keys + 1);
      mha::kernels::LiveKeys(key_bias.data(), keys, from.data(), to.data());
      PathOutputs out[2];  // with the bias, then without it
      for (int without : {0, 1}) {
        AttentionHead h = PlainHead(q, stored, queries, keys, dim);
        h.rule.causal = true;
        h.rule.causal_offset = keys - queries;
        h.rule.key_bias = without ? nullptr : key_bias.data();
        h.rule.live_from = from.data();
        h.rule.live_to = to.data();
        out[without] = RunPaths(h);
      }
      const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      EXPECT_TRUE(same(out[0].flash, out[1].flash)) << "flash";
      EXPECT_TRUE(same(out[0].with_weights, out[1].with_weights)) << "weights path";
      EXPECT_TRUE(same(out[0].weights, out[1].weights)) << "weights";
      EXPECT_TRUE(same(out[0].decode, out[1].decode)) << "decode";
      EXPECT_FALSE(mha::kernels::BiasBetweenLiveKeys(key_bias.data(), from.data(), to.data(), keys));
      for (float between : {neg_inf, 0.5f}) {
        std::vector<float> kept = key_bias;
        kept[keys / 2] = between;
        mha::kernels::LiveKeys(kept.data(), keys, from.data(), to.data());
        EXPECT_TRUE(mha::kernels::BiasBetweenLiveKeys(kept.data(), from.data(), to.data(), keys))
            << "between: " << between;
      }
    }
  }
}

TEST_P(KernelTest, FullyMaskedRowIsNaN) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (bool weights : {false, true}) {
    const std::vector<float> q = RandomVector(2 * 4, 1), k = RandomVector(3 * 4, 2), v = RandomVector(3 * 4, 3);
    const std::vector<float> mask = {neg_inf, neg_inf, neg_inf, 0.0f, neg_inf, 0.0f};
    AttentionHead h;
    h.q = q.data();
    h.q_stride = h.k_stride = h.v_stride = h.out_stride = 4;
    h.k = k.data();
    h.v = v.data();
    h.num_queries = 2;
    h.masked_keys = 3;
    h.qk_dim = h.v_dim = 4;
    h.rule.mask = mask.data();
    h.rule.mask_stride = 3;
    std::vector<float> out(8), w(6);
    if (weights) {
      h.weights = w.data();
      h.weights_stride = 3;
    }
    h.out = out.data();
    auto scratch = hwy::AllocateAligned<float>(mha::kernels::AttentionScratchSize(h));
    mha::kernels::Attention(h, 0, 2, scratch.get());
    for (size_t e = 0; e < 4; ++e) {
      EXPECT_TRUE(std::isnan(out[e])) << e;
      EXPECT_FALSE(std::isnan(out[4 + e])) << e;
    }
  }
}

}  // namespace
}  // namespace mha_test
