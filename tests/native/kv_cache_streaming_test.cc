// StreamingLLM caches (KVCacheConfig::keep; docs/design.md, "Caches an app keeps"): their
// results against Hugging Face's SinkCache are the generation fixtures' (streaming_*,
// decoding_fixture_test.cc); here bad `keep` and oversized calls are refused naming the numbers
// with the cache unchanged, and save/load, clone, select and resize continue bit for bit.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::KVCache;
using mha::KVCacheDtype;

constexpr int64_t kN = 2;

std::unique_ptr<mha::MultiheadAttention> NewModule() { return RandomModule(DecoderConfig(-1), 50); }

std::vector<std::vector<float>> Steps(mha::MultiheadAttention& module, KVCache* cache,
                                      uint32_t first, uint32_t last) {
  std::vector<std::vector<float>> outputs(last - first + 1);
  for (uint32_t seed = first; seed <= last; ++seed) {
    EXPECT_TRUE(CausalStep(module, cache, kN, 1, seed, &outputs[seed - first]).ok());
  }
  return outputs;
}

TEST(KVCacheStreaming, BadKeepIsRefusedNamingIt) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule();
  std::unique_ptr<KVCache> cache;
  for (int64_t keep : {int64_t{-2}, int64_t{8}, int64_t{9}}) {
    ExpectInvalidArgument(module->CreateStreamingKVCache(kN, 8, KVCacheDtype::kFloat32, keep, &cache),
                          {"rolling.keep: expected an integer in [0, max_length - 1] = [0, 7]",
                           "got " + std::to_string(keep)});
  }
  mha::KVCacheConfig free{kN, 2, 4, 4, 8, KVCacheDtype::kFloat32};
  free.keep = 2;
  ExpectInvalidArgument(KVCache::Create(free, &cache), {"rolling.keep", "a module's"});
  EXPECT_EQ(cache, nullptr);
}

// A full cache (keep 2, max_length 8) takes at most 6 new keys a call; more is refused, the
// cache unchanged, and the next calls give what they would have.
TEST(KVCacheStreaming, OversizedCallIsRefusedAndTheCacheKept) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule();
  std::unique_ptr<KVCache> cache, twin;
  ASSERT_OK(module->CreateStreamingKVCache(kN, 8, KVCacheDtype::kFloat32, 2, &cache));
  ASSERT_OK(module->CreateStreamingKVCache(kN, 8, KVCacheDtype::kFloat32, 2, &twin));
  std::vector<float> out;
  for (KVCache* c : {cache.get(), twin.get()}) {
    ASSERT_OK(CausalStep(*module, c, kN, 7, 1, &out));
    ASSERT_OK(CausalStep(*module, c, kN, 3, 2, &out));  // drops 2
  }
  EXPECT_EQ(cache->length(), 8);
  ExpectInvalidArgument(CausalStep(*module, cache.get(), kN, 7, 3, &out),
                        {"appending 7 keys", "at most max_length - keep = 6 keys a call",
                         "streaming, keep 2", "left as it was"});
  EXPECT_EQ(cache->length(), 8);
  ASSERT_OK(CausalStep(*module, cache.get(), kN, 6, 4, &out));  // the most it takes
  std::vector<float> twin_out;
  ASSERT_OK(CausalStep(*module, twin.get(), kN, 6, 4, &twin_out));
  EXPECT_EQ(out, twin_out);
  EXPECT_EQ(Steps(*module, cache.get(), 5, 9), Steps(*module, twin.get(), 5, 9));
}

// Saved, cloned and selected at a full cache, each continues bit for bit; resized, it grows.
TEST(KVCacheStreaming, CopiesContinueBitForBit) {
  for (KVCacheDtype dtype : {KVCacheDtype::kFloat32, KVCacheDtype::kFloat16}) {
    SCOPED_TRACE(mha::KVCacheDtypeName(dtype));
    std::unique_ptr<mha::MultiheadAttention> module = NewModule();
    std::unique_ptr<KVCache> cache;
    ASSERT_OK(module->CreateStreamingKVCache(kN, 6, dtype, 3, &cache));
    std::vector<float> out;
    ASSERT_OK(CausalStep(*module, cache.get(), kN, 4, 1, &out));
    Steps(*module, cache.get(), 2, 5);  // past max_length
    std::vector<uint8_t> bytes;
    ASSERT_OK(cache->Save(&bytes));
    std::unique_ptr<KVCache> loaded, copy, selected, grown;
    ASSERT_OK(module->LoadKVCache(bytes.data(), bytes.size(), &loaded));
    EXPECT_EQ(loaded->config().keep, 3);
    ASSERT_OK(cache->Clone(&copy));
    const int32_t swap[] = {1, 0};
    ASSERT_OK(cache->Select(swap, 2, &selected));
    ASSERT_OK(cache->Clone(&grown));
    ASSERT_OK(grown->Resize(9));
    std::vector<uint8_t> again;
    ASSERT_OK(loaded->Save(&again));
    EXPECT_EQ(again, bytes);
    const auto uninterrupted = Steps(*module, cache.get(), 6, 12);
    EXPECT_EQ(Steps(*module, loaded.get(), 6, 12), uninterrupted);
    EXPECT_EQ(Steps(*module, copy.get(), 6, 12), uninterrupted);
    ASSERT_OK(selected->Reorder(swap, 2));  // back to the order of `cache`
    EXPECT_EQ(Steps(*module, selected.get(), 6, 12), uninterrupted);
    // A larger cache keeps growing to 9, and differs from the uninterrupted one once that
    // one drops keys again (step 6 on).
    EXPECT_NE(Steps(*module, grown.get(), 6, 12), uninterrupted);
    EXPECT_EQ(grown->length(), 9);
    ASSERT_OK(copy->Truncate(2));
    ExpectInvalidArgument(copy->Resize(3), {"resize", "rolling.keep", "[0, 2]", "got 3"});
    // A free-standing load is refused (its keys could not be re-rotated).
    ExpectInvalidArgument(KVCache::Load(bytes.data(), bytes.size(), &loaded), {"a module's"});
  }
}

}  // namespace
}  // namespace mha_test
