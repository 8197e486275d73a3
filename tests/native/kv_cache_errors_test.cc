// Bad decoding calls: each returns an error naming the cache (or argument)
// and the numbers, leaves the cache as it was, and decoding then continues
// with the same results as a run that never saw the error.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::KVCache;
using mha::KVCacheDtype;
using mha::Status;
using mha::TensorView;

constexpr int64_t kE = 8, kH = 4, kHkv = 2, kN = 2, kMax = 6;

void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

std::unique_ptr<mha::MultiheadAttention> MakeModule(const mha::MultiheadAttentionConfig& c) {
  std::unique_ptr<mha::MultiheadAttention> m;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  uint32_t seed = 1;
  for (const mha::ParameterSpec& spec : m->Parameters()) {
    const std::vector<float> data = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    EXPECT_TRUE(m->LoadParameter(spec.name, data.data(), spec.shape).ok());
  }
  return m;
}

mha::MultiheadAttentionConfig GqaConfig() {
  mha::MultiheadAttentionConfig c;
  c.embed_dim = kE;
  c.num_heads = kH;
  c.num_kv_heads = kHkv;
  c.rotary.enabled = true;
  return c;
}

class KVCacheErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = MakeModule(GqaConfig());
    ASSERT_TRUE(module_->CreateKVCache(kN, kMax, KVCacheDtype::kFloat32, &cache_).ok());
    tokens_ = RandomVector(kMax * kN * kE, 9);
  }

  // Rows [begin, end) of the token sequence, (L, N, E).
  TensorView Tokens(int64_t begin, int64_t end) {
    return {tokens_.data() + begin * kN * kE, {end - begin, kN, kE}};
  }

  Status Step(int64_t begin, int64_t end, mha::ForwardOptions o, mha::ForwardResult* result) {
    o.cache = cache_.get();
    o.is_causal = true;
    const TensorView x = Tokens(begin, end);
    return module_->Forward(x, x, x, o, result);
  }

  // Prefill 3 tokens, then (after the test's errors) the rest one by one:
  // the outputs must equal a fresh cache's.
  void TearDown() override {
    EXPECT_EQ(cache_->length(), 3);
    std::unique_ptr<KVCache> fresh;
    ASSERT_TRUE(module_->CreateKVCache(kN, kMax, KVCacheDtype::kFloat32, &fresh).ok());
    for (int64_t t = 3; t < kMax; ++t) {
      mha::ForwardResult a, b;
      ASSERT_TRUE(Step(t, t + 1, {}, &a).ok());
      std::swap(cache_, fresh);
      if (t == 3) ASSERT_TRUE(Step(0, 3, {}, &b).ok());
      ASSERT_TRUE(Step(t, t + 1, {}, &b).ok());
      std::swap(cache_, fresh);
      EXPECT_EQ(a.output.data, b.output.data) << "step " << t;
    }
  }

  void Prefill() {
    mha::ForwardResult r;
    ASSERT_TRUE(Step(0, 3, {}, &r).ok());
  }

  std::unique_ptr<mha::MultiheadAttention> module_;
  std::unique_ptr<KVCache> cache_;
  std::vector<float> tokens_;
};

TEST_F(KVCacheErrorsTest, AppendingPastMaxLengthLeavesTheCache) {
  Prefill();
  mha::ForwardResult r;
  const std::vector<float> big = RandomVector(4 * kN * kE, 3);
  const TensorView x{big.data(), {4, kN, kE}};
  mha::ForwardOptions o;
  o.cache = cache_.get();
  ExpectError(module_->Forward(x, x, x, o, &r),
              {"cache", "appending 4 keys", "holding 3", "max_length 6", "left as it was"});
}

TEST_F(KVCacheErrorsTest, WrongBatch) {
  Prefill();
  mha::ForwardResult r;
  const std::vector<float> one = RandomVector(kE, 3);
  const TensorView x{one.data(), {1, 1, kE}};
  mha::ForwardOptions o;
  o.cache = cache_.get();
  ExpectError(module_->Forward(x, x, x, o, &r), {"cache", "batch size 2", "batch size 1"});
}

TEST_F(KVCacheErrorsTest, CacheOfAnotherModule) {
  Prefill();
  std::unique_ptr<mha::MultiheadAttention> other = MakeModule(GqaConfig());
  mha::ForwardResult r;
  mha::ForwardOptions o;
  o.cache = cache_.get();
  const TensorView x = Tokens(3, 4);
  ExpectError(other->Forward(x, x, x, o, &r), {"cache", "another module", "holding 3"});
}

TEST_F(KVCacheErrorsTest, FunctionalCacheInAModuleAndModuleCacheInSdpa) {
  Prefill();
  std::unique_ptr<KVCache> functional;
  ASSERT_TRUE(KVCache::Create({kN, kHkv, kE / kH, kE / kH, kMax, KVCacheDtype::kFloat32},
                              &functional).ok());
  mha::ForwardResult r;
  mha::ForwardOptions o;
  o.cache = functional.get();
  const TensorView x = Tokens(3, 4);
  ExpectError(module_->Forward(x, x, x, o, &r), {"cache", "createKVCache"});
  const std::vector<float> q = RandomVector(kN * kH * kE / kH, 4);
  const std::vector<float> k = RandomVector(kN * kHkv * kE / kH, 5);
  mha::SdpaOptions so;
  so.cache = cache_.get();
  so.enable_gqa = true;
  mha::Tensor out;
  ExpectError(mha::ScaledDotProductAttention({q.data(), {kN, kH, 1, kE / kH}},
                                             {k.data(), {kN, kHkv, 1, kE / kH}},
                                             {k.data(), {kN, kHkv, 1, kE / kH}}, so, &out),
              {"cache", "belongs to a MultiheadAttention module"});
  EXPECT_EQ(functional->length(), 0);
}

TEST_F(KVCacheErrorsTest, MasksMustSpanEveryKeyAttended) {
  Prefill();
  mha::ForwardResult r;
  const std::vector<uint8_t> kpm(kN * 1, 0);  // only the new key: T is 4
  mha::ForwardOptions o;
  o.key_padding_mask = mha::MaskView::Bool(kpm.data(), {kN, 1});
  ExpectError(Step(3, 4, o, &r), {"key_padding_mask", "(2, 4)", "(2, 1)", "the cache's 3 keys"});
}

TEST_F(KVCacheErrorsTest, KeyAndValueAbsentOrOneOfThem) {
  Prefill();
  mha::ForwardResult r;
  mha::ForwardOptions o;
  const TensorView x = Tokens(3, 4);
  ExpectError(module_->Forward(x, {}, {}, o, &r), {"key, value", "required without a cache"});
  o.cache = cache_.get();
  ExpectError(module_->Forward(x, x, {}, o, &r), {"key, value", "both absent"});
  // Both absent: attends the cache's 3 keys and appends nothing.
  ASSERT_TRUE(module_->Forward(x, {}, {}, o, &r).ok());
  EXPECT_EQ(r.output.shape, (mha::Shape{1, kN, kE}));
}

TEST_F(KVCacheErrorsTest, TruncateOutOfRange) {
  Prefill();
  ExpectError(cache_->Truncate(4), {"truncate", "[0, 3]", "got 4"});
  ExpectError(cache_->Truncate(-1), {"truncate", "got -1"});
}

TEST(KVCacheCreateErrors, BiasKVAndZeroAttnExcludeACache) {
  for (bool zero_attn : {false, true}) {
    mha::MultiheadAttentionConfig c;
    c.embed_dim = kE;
    c.num_heads = kH;
    c.add_bias_kv = !zero_attn;
    c.add_zero_attn = zero_attn;
    std::unique_ptr<mha::MultiheadAttention> m = MakeModule(c);
    std::unique_ptr<KVCache> cache;
    ExpectError(m->CreateKVCache(1, 4, KVCacheDtype::kFloat32, &cache),
                {"cache", "add_bias_kv or add_zero_attn"});
    EXPECT_EQ(cache, nullptr);
  }
}

TEST(KVCacheCreateErrors, BadDimsAndSizes) {
  std::unique_ptr<KVCache> cache;
  ExpectError(KVCache::Create({1, 2, 8, 8, 0, KVCacheDtype::kFloat32}, &cache),
              {"max_length", "positive", "0"});
  ExpectError(KVCache::Create({1, 0, 8, 8, 4, KVCacheDtype::kFloat16}, &cache), {"num_kv_heads"});
  const Status huge =
      KVCache::Create({1 << 30, 1 << 10, 1 << 10, 8, 1 << 30, KVCacheDtype::kFloat16}, &cache);
  ExpectError(huge, {"cache", "max_length 1073741824", "address space"});
  EXPECT_EQ(huge.code(), mha::StatusCode::kOutOfMemory);
  EXPECT_EQ(cache, nullptr);
  // Keys and values of 3 * 2^62 bytes each: either fits in size_t, their sum
  // (what bytes() reports) wraps.
  const int64_t half = int64_t{1} << 31;
  const Status halves =
      KVCache::Create({1, 1, half, half, 3 << 29, KVCacheDtype::kFloat32}, &cache);
  ExpectError(halves, {"cache", "max_length 1610612736", "address space"});
  EXPECT_EQ(halves.code(), mha::StatusCode::kOutOfMemory);
  EXPECT_EQ(cache, nullptr);
}

// bytes(): keys and values of every entry, head and position, in the dtype's
// element size; a module's cache has the module's head dims.
TEST(KVCacheBytes, AreWhatTheStorageTakes) {
  for (const auto& [dtype, element] : {std::pair{KVCacheDtype::kFloat32, 4},
                                       std::pair{KVCacheDtype::kFloat16, 2},
                                       std::pair{KVCacheDtype::kBFloat16, 2}}) {
    SCOPED_TRACE(mha::KVCacheDtypeName(dtype));
    std::unique_ptr<KVCache> cache;
    ASSERT_TRUE(KVCache::Create({3, 2, 5, 7, 11, dtype}, &cache).ok());
    EXPECT_EQ(cache->bytes(), size_t{3} * 11 * 2 * (5 + 7) * element);
    mha::MultiheadAttentionConfig c;
    c.embed_dim = kE;
    c.num_heads = kH;
    ASSERT_TRUE(MakeModule(c)->CreateKVCache(2, 9, dtype, &cache).ok());
    EXPECT_EQ(cache->bytes(), size_t{2} * 9 * 2 * kE * element);
  }
}

TEST(KVCacheCreateErrors, SdpaCacheOfOtherHeadDims) {
  std::unique_ptr<KVCache> cache;
  ASSERT_TRUE(KVCache::Create({1, 2, 4, 4, 8, KVCacheDtype::kFloat16}, &cache).ok());
  const std::vector<float> q = RandomVector(2 * 8, 1);
  mha::SdpaOptions o;
  o.cache = cache.get();
  mha::Tensor out;
  ExpectError(mha::ScaledDotProductAttention({q.data(), {1, 2, 1, 8}}, {q.data(), {1, 2, 1, 8}},
                                             {q.data(), {1, 2, 1, 8}}, o, &out),
              {"cache (batch_size 1, num_kv_heads 2, head_dim 4", "head_dim 8"});
  // Query heads not a multiple of the cache's without enable_gqa.
  ExpectError(mha::ScaledDotProductAttention({q.data(), {1, 4, 1, 4}}, {}, {}, o, &out),
              {"cache", "4 heads", "enable_gqa"});
  EXPECT_EQ(cache->length(), 0);
  // Nothing to attend: an empty cache and no keys.
  o.enable_gqa = true;
  ExpectError(mha::ScaledDotProductAttention({q.data(), {1, 4, 1, 4}}, {}, {}, o, &out),
              {"key", "empty cache"});
}

TEST(KVCacheCreateErrors, GqaAndRotaryConfig) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 16;
  c.num_heads = 4;
  c.num_kv_heads = 3;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"num_kv_heads", "divisor", "4", "3"});
  c.num_kv_heads = 2;
  c.rotary.enabled = true;
  c.rotary.dim = 3;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"rotary.dim", "even", "4", "got 3"});
  c.rotary.dim = 6;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"rotary.dim", "got 6"});
  c.rotary.dim = 0;
  // Positive and finite, as the JS API checks it (web/src/config.js).
  for (const double base : {-1.0, 0.0, std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()}) {
    c.rotary.base = base;
    ExpectError(mha::MultiheadAttention::Create(c, &m), {"rotary.base", "positive finite"});
  }
  c.rotary.base = 1e301;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  c.rotary.base = 10000.0;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  EXPECT_EQ(m->config().rotary.dim, 4);
  // Grouped-query parameters: keys and values project to 2 heads of 4.
  const std::vector<mha::ParameterSpec> specs = m->Parameters();
  ASSERT_EQ(specs.size(), 6u);
  EXPECT_EQ(specs[0].name, "q_proj_weight");
  EXPECT_EQ(specs[0].shape, (mha::Shape{16, 16}));
  EXPECT_EQ(specs[1].shape, (mha::Shape{8, 16}));
  EXPECT_EQ(specs[2].shape, (mha::Shape{8, 16}));
  EXPECT_EQ(specs[3].name, "in_proj_bias");
  EXPECT_EQ(specs[3].shape, (mha::Shape{32}));
}

}  // namespace
}  // namespace mha_test
