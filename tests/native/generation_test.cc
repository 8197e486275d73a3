// Generation (docs/design.md, "Generation: beams, ragged batches, sliding
// windows"): per-row rotary positions and rolling caches, against the same
// calls without them, and their errors. (Fixtures against PyTorch:
// decoding_fixture_test.cc; the fuzzer draws both too.)
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "src/scaled_dot_product_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::ForwardOptions;
using mha::ForwardResult;
using mha::KVCache;
using mha::KVCacheDtype;
using mha::Shape;
using mha::Status;
using mha::TensorView;

constexpr int64_t kE = 16, kH = 4, kHkv = 2;

void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

mha::MultiheadAttentionConfig Config(int64_t window, bool rotary = true) {
  mha::MultiheadAttentionConfig c;
  c.embed_dim = kE;
  c.num_heads = kH;
  c.num_kv_heads = kHkv;
  c.rotary.enabled = rotary;
  if (window > 0) c.window.left = window - 1;
  return c;
}

std::unique_ptr<mha::MultiheadAttention> MakeModule(const mha::MultiheadAttentionConfig& c) {
  std::unique_ptr<mha::MultiheadAttention> m;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  uint32_t seed = 3;
  for (const mha::ParameterSpec& spec : m->Parameters()) {
    const std::vector<float> data =
        RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    EXPECT_TRUE(m->LoadParameter(spec.name, data.data(), spec.shape).ok());
  }
  return m;
}

// On every target the CPU supports.
class PositionsTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(PositionsTest);
class RollingCacheTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(RollingCacheTest);

// A padded batch: entry 0 holds 3 tokens after 2 pads and with a hole (a
// pad between its second and third), entry 1 six tokens; with Hugging
// Face's position_ids and the pads masked, entry 0's rows are those of its 3
// tokens alone (its slots alone would put the third token one further).
TEST_P(PositionsTest, PaddedRowsEqualTheSequenceAlone) {
  for (const bool batch_first : {false, true}) {
    mha::MultiheadAttentionConfig c = Config(0);
    c.batch_first = batch_first;
    auto m = MakeModule(c);
    const int64_t N = 2, L = 6;
    const std::vector<float> tokens = RandomVector(N * L * kE, 11);  // (N, L, E)
    std::vector<float> input(N * L * kE);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < L; ++i) {
        const int64_t at = batch_first ? n * L + i : i * N + n;
        std::copy_n(tokens.begin() + (n * L + i) * kE, kE, input.begin() + at * kE);
      }
    }
    const Shape shape = batch_first ? Shape{N, L, kE} : Shape{L, N, kE};
    const std::vector<int32_t> positions = {1, 1, 0, 1, 1, 2, 0, 1, 2, 3, 4, 5};
    const std::vector<uint8_t> padding = {1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    ForwardOptions o;
    o.is_causal = true;
    o.need_weights = false;
    o.positions = positions.data();
    o.num_positions = positions.size();
    o.key_padding_mask = mha::MaskView::Bool(padding.data(), {N, L});
    ForwardResult batch;
    const TensorView x{input.data(), shape};
    ASSERT_TRUE(m->Forward(x, x, x, o, &batch).ok());

    mha::MultiheadAttentionConfig single = c;
    single.batch_first = false;
    auto alone = MakeModule(single);
    std::vector<float> sequence;
    for (const int64_t i : {2, 3, 5}) {
      sequence.insert(sequence.end(), tokens.begin() + i * kE, tokens.begin() + (i + 1) * kE);
    }
    ForwardOptions plain;
    plain.is_causal = true;
    plain.need_weights = false;
    ForwardResult one;
    const TensorView s{sequence.data(), {3, 1, kE}};
    ASSERT_TRUE(alone->Forward(s, s, s, plain, &one).ok());
    const int64_t slots[] = {2, 3, 5};
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t row = batch_first ? slots[i] : slots[i] * N;
      for (int64_t e = 0; e < kE; ++e) {
        EXPECT_NEAR(batch.output.data[row * kE + e], one.output.data[i * kE + e], 1e-5)
            << "batch_first " << batch_first << " row " << i;
      }
    }
  }
}

TEST(PositionsErrorsTest, NameTheArgumentAndNumbers) {
  auto rotary = MakeModule(Config(0));
  auto plain = MakeModule(Config(0, false));
  const std::vector<float> x = RandomVector(4 * 2 * kE, 5);
  const std::vector<int32_t> positions(8, 0);
  ForwardOptions o;
  o.positions = positions.data();
  o.num_positions = 8;
  ForwardResult r;
  const TensorView q{x.data(), {4, 2, kE}}, k{x.data(), {3, 2, kE}};
  ExpectError(plain->Forward(q, q, q, o, &r), {"positions", "without rotary"});
  ExpectError(rotary->Forward(q, k, k, o, &r), {"positions", "key has 3 rows", "query 4"});
  o.num_positions = 7;
  ExpectError(rotary->Forward(q, q, q, o, &r), {"positions", "expected 8", "got 7"});
}

// Decodes `steps` (a schedule of rows per call) through `cache`, and after
// call `truncate_after` truncates by `back` keys and decodes those rows again.
std::vector<float> Decode(mha::MultiheadAttention& m, KVCache& cache,
                          const std::vector<int64_t>& steps, const std::vector<float>& tokens,
                          int64_t N, size_t truncate_after = SIZE_MAX, int64_t back = 0) {
  std::vector<float> out;
  int64_t at = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const int64_t rows = steps[s];
    const TensorView x{tokens.data() + at * N * kE, {rows, N, kE}};
    ForwardOptions o;
    o.cache = &cache;
    o.is_causal = true;
    o.need_weights = s % 3 == 2;  // the weights path now and then
    ForwardResult r;
    const Status status = m.Forward(x, x, x, o, &r);
    EXPECT_TRUE(status.ok()) << status.message();
    out.insert(out.end(), r.output.data.begin(), r.output.data.end());
    at += rows;
    if (s == truncate_after) {
      EXPECT_TRUE(cache.Truncate(cache.length() - back).ok());
      at -= back;
    }
  }
  return out;
}

// A rolling cache at the smallest maxLength a schedule allows, and larger,
// against a cache that keeps every key: the same outputs, several times
// past maxLength, with a truncate inside what is held.
TEST_P(RollingCacheTest, EqualsAFullCache) {
  const int64_t W = 6, N = 2;
  for (const KVCacheDtype dtype : {KVCacheDtype::kFloat32, KVCacheDtype::kFloat16}) {
    auto m = MakeModule(Config(W));
    const std::vector<int64_t> steps = {4, 1, 1, 3, 1, 1, 1, 2, 1, 1, 1, 1, 4, 1, 1, 1, 1, 1,
                                        1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t total = 64;
    const std::vector<float> tokens = RandomVector(total * N * kE, 21);
    std::unique_ptr<KVCache> full;
    ASSERT_TRUE(m->CreateKVCache(N, total, dtype, &full).ok());
    const std::vector<float> expected = Decode(*m, *full, steps, tokens, N, 9, 3);
    for (const int64_t max_length : {W - 1 + 4, W + 4, 2 * W + 7}) {
      std::unique_ptr<KVCache> rolling;
      ASSERT_TRUE(m->CreateKVCache(N, max_length, dtype, true, &rolling).ok());
      const std::vector<float> got = Decode(*m, *rolling, steps, tokens, N, 9, 3);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], expected[i]) << "max_length " << max_length << " element " << i;
      }
      EXPECT_EQ(rolling->length(), full->length());
      EXPECT_EQ(rolling->held(), max_length);
    }
  }
}

// Beam search on a ring that has wrapped: the held rows move as a full
// cache's do (both runs of slots).
TEST_P(RollingCacheTest, ReordersTheRing) {
  const int64_t W = 4, N = 3, total = 20;
  auto m = MakeModule(Config(W));
  const std::vector<float> tokens = RandomVector(total * N * kE, 8);
  std::unique_ptr<KVCache> full, rolling;
  ASSERT_TRUE(m->CreateKVCache(N, total, KVCacheDtype::kFloat32, &full).ok());
  ASSERT_TRUE(m->CreateKVCache(N, W + 1, KVCacheDtype::kFloat32, true, &rolling).ok());
  const int32_t orders[][3] = {{2, 0, 0}, {1, 2, 0}, {0, 0, 1}};
  for (int64_t t = 0; t < total; ++t) {
    if (t % 3 == 2) {
      const int32_t* order = orders[(t / 3) % 3];
      ASSERT_TRUE(full->Reorder(order, N).ok());
      ASSERT_TRUE(rolling->Reorder(order, N).ok());
    }
    const TensorView x{tokens.data() + t * N * kE, {1, N, kE}};
    ForwardOptions o;
    o.is_causal = true;
    o.need_weights = false;
    ForwardResult a, b;
    o.cache = full.get();
    ASSERT_TRUE(m->Forward(x, x, x, o, &a).ok());
    o.cache = rolling.get();
    ASSERT_TRUE(m->Forward(x, x, x, o, &b).ok());
    EXPECT_EQ(a.output.data, b.output.data) << "step " << t;
  }
}

TEST_P(RollingCacheTest, Errors) {
  auto unwindowed = MakeModule(Config(0));
  std::unique_ptr<KVCache> cache;
  ExpectError(unwindowed->CreateKVCache(1, 8, KVCacheDtype::kFloat32, true, &cache),
              {"rolling", "finite left window"});
  auto m = MakeModule(Config(4));  // left window 3
  ASSERT_TRUE(m->CreateKVCache(1, 5, KVCacheDtype::kFloat32, true, &cache).ok());
  const std::vector<float> x = RandomVector(3 * kE, 2);
  ForwardOptions o;
  o.cache = cache.get();
  o.is_causal = true;
  ForwardResult r;
  const TensorView three{x.data(), {3, 1, kE}}, one{x.data(), {1, 1, kE}};
  ExpectError(m->Forward(three, three, three, o, &r),
              {"max_length (5)", "left window (3)", "keys appended (3)", "left as it was"});
  EXPECT_EQ(cache->length(), 0);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(m->Forward(one, one, one, o, &r).ok());
  EXPECT_EQ(cache->length(), 7);
  EXPECT_EQ(cache->held(), 5);
  // Holds 2..6; truncating to 4 needs 1..3.
  ExpectError(cache->Truncate(4), {"holds positions 2..6", "needs positions 1..3"});
  ASSERT_TRUE(cache->Truncate(5).ok());  // needs 2..4
  EXPECT_EQ(cache->held(), 3);
  EXPECT_EQ(cache->length(), 5);
  cache->Reset();
  EXPECT_EQ(cache->held(), 0);
  EXPECT_EQ(cache->length(), 0);
}

// The functional form: a free-standing rolling cache under SDPA's window,
// against a full one; and a call without a finite left window is an error.
TEST_P(RollingCacheTest, ScaledDotProductAttention) {
  const int64_t B = 1, H = 2, D = 8, left = 4, max_length = left + 1, total = 23;
  mha::KVCacheConfig config{B, H, D, D, max_length, KVCacheDtype::kFloat32, true};
  std::unique_ptr<KVCache> rolling, full;
  ASSERT_TRUE(KVCache::Create(config, &rolling).ok());
  config.rolling = false;
  config.max_length = total;
  ASSERT_TRUE(KVCache::Create(config, &full).ok());
  const std::vector<float> q = RandomVector(total * H * D, 1), k = RandomVector(total * H * D, 2),
                           v = RandomVector(total * H * D, 3);
  for (int64_t t = 0; t < total; ++t) {
    mha::SdpaOptions o;
    o.is_causal = true;
    o.window.left = left;
    mha::Tensor a, b;
    const TensorView qt{q.data() + t * H * D, {B, H, 1, D}}, kt{k.data() + t * H * D, {B, H, 1, D}},
        vt{v.data() + t * H * D, {B, H, 1, D}};
    o.cache = full.get();
    ASSERT_TRUE(mha::ScaledDotProductAttention(qt, kt, vt, o, &a).ok());
    o.cache = rolling.get();
    ASSERT_TRUE(mha::ScaledDotProductAttention(qt, kt, vt, o, &b).ok());
    EXPECT_EQ(a.data, b.data) << "step " << t;
    if (t == total - 1) {
      o.window.left = -1;
      ExpectError(mha::ScaledDotProductAttention(qt, kt, vt, o, &b), {"finite left window"});
      o.window.left = left + 1;
      ExpectError(mha::ScaledDotProductAttention(qt, kt, vt, o, &b), {"max_length (5)"});
    }
  }
}

}  // namespace
}  // namespace mha_test
