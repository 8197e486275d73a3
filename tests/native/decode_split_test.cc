// A decoding step large enough to share (src/attention/decode_attention.cc splits the
// cached keys across the pool and merges the partial softmax states) gives
// what the materialised weights path gives on one thread, for float32 and
// float16 caches, grouped-query heads and rotary positions, on every target,
// with the same bits at every thread count.
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

constexpr int64_t kE = 256, kH = 4, kKeys = 1200;

class DecodeSplitTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(DecodeSplitTest);

TEST_P(DecodeSplitTest, SplitKeysMatchTheWeightsPath) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = kE;
  config.num_heads = kH;
  config.num_kv_heads = 2;
  config.rotary.enabled = true;
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_TRUE(mha::MultiheadAttention::Create(config, &module).ok());
  uint32_t seed = 1;
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    const std::vector<float> data = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    ASSERT_TRUE(module->LoadParameter(spec.name, data.data(), spec.shape).ok());
  }
  const std::vector<float> source = RandomVector(kKeys * kE, 50), token = RandomVector(kE, 51);
  const mha::TensorView keys{source.data(), {kKeys, 1, kE}}, step{token.data(), {1, 1, kE}};
  mha::ThreadPool pool(2), eight(8);
  for (mha::KVCacheDtype dtype : {mha::KVCacheDtype::kFloat32, mha::KVCacheDtype::kFloat16}) {
    SCOPED_TRACE(mha::KVCacheDtypeName(dtype));
    std::unique_ptr<mha::KVCache> cache;
    ASSERT_TRUE(module->CreateKVCache(1, kKeys + 1, dtype, &cache).ok());
    mha::ForwardOptions o;
    o.cache = cache.get();
    o.need_weights = false;
    mha::ForwardResult filled, split, weights;
    // One query appends all the keys: filling costs little attention.
    ASSERT_TRUE(module->Forward(step, keys, keys, o, &filled, &pool).ok());
    o.is_causal = true;
    ASSERT_TRUE(module->Forward(step, step, step, o, &split, &pool).ok());
    // The ranges do not depend on the threads (docs/design.md, "Semantics
    // (the contract)"): the same bits on 1, 2 and 8.
    for (mha::ThreadPool* other : {static_cast<mha::ThreadPool*>(nullptr), &eight}) {
      mha::ForwardResult again;
      ASSERT_TRUE(cache->Truncate(kKeys).ok());
      ASSERT_TRUE(module->Forward(step, step, step, o, &again, other).ok());
      EXPECT_EQ(std::memcmp(again.output.data.data(), split.output.data.data(),
                            split.output.data.size() * sizeof(float)), 0)
          << (other == nullptr ? 1 : 8) << " threads vs 2";
    }
    ASSERT_TRUE(cache->Truncate(kKeys).ok());
    o.need_weights = true;
    ASSERT_TRUE(module->Forward(step, step, step, o, &weights, nullptr).ok());
    ASSERT_EQ(weights.weights.shape, (mha::Shape{1, 1, kKeys + 1}));
    ExpectClose(split.output, weights.output, "decode across the pool vs weights path");
  }
}

}  // namespace
}  // namespace mha_test
