// Caches an app keeps (KVCache::Save / Load, Select, Clone, Resize): each
// continues bit for bit as one uninterrupted run would, for module caches
// (rotary, grouped-query heads) in float32, float16 and bfloat16, rolling
// and not, and for free-standing ones through ScaledDotProductAttention;
// bytes that are not a saved cache of the right heads are refused, naming
// what differs, with nothing made.
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

constexpr int64_t kE = 16, kH = 4, kHkv = 2, kD = kE / kH;

struct Case {
  KVCacheDtype dtype;
  bool rolling;
};

const Case kCases[] = {{KVCacheDtype::kFloat32, false}, {KVCacheDtype::kFloat16, false},
                       {KVCacheDtype::kBFloat16, false}, {KVCacheDtype::kFloat32, true},
                       {KVCacheDtype::kFloat16, true}, {KVCacheDtype::kBFloat16, true}};

std::string Name(const Case& c) {
  return std::string(mha::KVCacheDtypeName(c.dtype)) + (c.rolling ? " rolling" : "");
}

// A causal self-attention module with rotary and grouped-query heads (a left
// window of 3 when `window`), random weights.
std::unique_ptr<mha::MultiheadAttention> NewModule(bool window, int64_t num_kv_heads = kHkv) {
  mha::MultiheadAttentionConfig m;
  m.embed_dim = kE;
  m.num_heads = kH;
  m.num_kv_heads = num_kv_heads;
  m.batch_first = true;
  m.rotary.enabled = true;
  if (window) m.window.left = 3;
  std::unique_ptr<mha::MultiheadAttention> module;
  EXPECT_TRUE(mha::MultiheadAttention::Create(m, &module).ok());
  uint32_t seed = 10;
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    const std::vector<float> w = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    EXPECT_TRUE(module->LoadParameter(spec.name, w.data(), spec.shape).ok());
  }
  return module;
}

// `length` tokens of each of `batch` entries through the module on `cache`;
// the output.
std::vector<float> Step(mha::MultiheadAttention& module, KVCache* cache, int64_t batch,
                        int64_t length, uint32_t seed) {
  std::vector<float> output;
  const mha::Status status = CausalStep(module, cache, batch, length, seed, &output);
  EXPECT_TRUE(status.ok()) << status.message();
  return output;
}

// The outputs of steps seeds first..last (one token each).
std::vector<std::vector<float>> Steps(mha::MultiheadAttention& module, KVCache* cache,
                                      int64_t batch, uint32_t first, uint32_t last) {
  std::vector<std::vector<float>> outputs;
  for (uint32_t seed = first; seed <= last; ++seed) outputs.push_back(Step(module, cache, batch, 1, seed));
  return outputs;
}

// Prefill (5 tokens), then steps 1..12 in one run; saved after step 4 and
// loaded into a new cache, the steps 5..12 give the same bits. A rolling
// cache (max_length 6, left window 3) wraps its ring before and after.
TEST(KVCacheSave, LoadedCacheContinuesBitForBit) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(Name(c));
    std::unique_ptr<mha::MultiheadAttention> module = NewModule(c.rolling);
    const int64_t max_length = c.rolling ? 6 : 20;
    std::unique_ptr<KVCache> cache;
    ASSERT_OK(module->CreateKVCache(2, max_length, c.dtype, c.rolling, &cache));
    Step(*module, cache.get(), 2, c.rolling ? 3 : 5, 1);
    Steps(*module, cache.get(), 2, 2, 4);
    std::vector<uint8_t> bytes;
    ASSERT_OK(cache->Save(&bytes));
    const std::vector<std::vector<float>> uninterrupted = Steps(*module, cache.get(), 2, 5, 12);

    std::unique_ptr<KVCache> loaded;
    ASSERT_OK(module->LoadKVCache(bytes.data(), bytes.size(), &loaded));
    EXPECT_EQ(loaded->length(), c.rolling ? 6 : 8);
    EXPECT_EQ(loaded->config().max_length, max_length);
    std::vector<uint8_t> again;
    ASSERT_OK(loaded->Save(&again));
    EXPECT_EQ(again, bytes);
    EXPECT_EQ(Steps(*module, loaded.get(), 2, 5, 12), uninterrupted);
  }
}

// A free-standing cache: attention through ScaledDotProductAttention.
TEST(KVCacheSave, FreeStandingCacheContinuesBitForBit) {
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(KVCache::Create({1, kHkv, kD, kD, 12, KVCacheDtype::kBFloat16}, &cache));
  const auto step = [](KVCache* on, uint32_t seed) {
    const std::vector<float> q = RandomVector(kH * kD, seed), k = RandomVector(kHkv * kD, seed + 50),
                             v = RandomVector(kHkv * kD, seed + 100);
    mha::SdpaOptions o;
    o.enable_gqa = true;
    o.cache = on;
    mha::Tensor out;
    EXPECT_TRUE(mha::ScaledDotProductAttention({q.data(), {1, kH, 1, kD}}, {k.data(), {1, kHkv, 1, kD}},
                                               {v.data(), {1, kHkv, 1, kD}}, o, &out).ok());
    return out.data;
  };
  for (uint32_t seed = 1; seed <= 4; ++seed) step(cache.get(), seed);
  std::vector<uint8_t> bytes;
  ASSERT_OK(cache->Save(&bytes));
  std::vector<std::vector<float>> uninterrupted, loaded_steps;
  for (uint32_t seed = 5; seed <= 9; ++seed) uninterrupted.push_back(step(cache.get(), seed));
  std::unique_ptr<KVCache> loaded;
  ASSERT_OK(KVCache::Load(bytes.data(), bytes.size(), &loaded));
  for (uint32_t seed = 5; seed <= 9; ++seed) loaded_steps.push_back(step(loaded.get(), seed));
  EXPECT_EQ(loaded_steps, uninterrupted);
}

TEST(KVCacheSave, BadBytesAreRefusedNamingWhatDiffers) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule(false);
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(module->CreateKVCache(1, 8, KVCacheDtype::kFloat16, false, &cache));
  Step(*module, cache.get(), 1, 3, 1);
  std::vector<uint8_t> bytes;
  ASSERT_OK(cache->Save(&bytes));
  ASSERT_EQ(bytes.size(), 88u + 8 + 3 * kHkv * 2 * kD * 2);  // 8: one entry's padding
  std::unique_ptr<KVCache> out;
  const auto load = [&](std::vector<uint8_t> b) { return module->LoadKVCache(b.data(), b.size(), &out); };
  for (size_t size : {size_t{0}, size_t{10}, size_t{87}}) {
    ExpectInvalidArgument(load({bytes.begin(), bytes.begin() + size}), {"bytes: expected a saved KVCache", "truncated"});
  }
  ExpectInvalidArgument(load({bytes.begin(), bytes.end() - 1}),
              {"bytes: expected " + std::to_string(bytes.size()) + " bytes", "float16, held 3",
               "got " + std::to_string(bytes.size() - 1) + " (truncated)", "nothing was loaded"});
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  ExpectInvalidArgument(load(longer), {"got " + std::to_string(bytes.size() + 1)});
  std::vector<uint8_t> b = bytes;
  b[0] = 'X';
  ExpectInvalidArgument(load(b), {"not a saved KVCache"});
  b = bytes;
  b[8] = 1;
  ExpectInvalidArgument(load(b), {"format version 1", "reads version 2"});
  b = bytes;
  b[56] ^= 1;  // max_length
  ExpectInvalidArgument(load(b), {"header's checksum", "corrupted"});
  b = bytes;
  b[100] ^= 0x40;  // a key
  ExpectInvalidArgument(load(b), {"values' checksum", "corrupted"});
  b = bytes;
  b[b.size() - 1] ^= 1;  // the checksum itself
  ExpectInvalidArgument(load(b), {"values' checksum"});
  EXPECT_EQ(out, nullptr);

  // Another module's heads; a rolling cache for a module without a window.
  std::unique_ptr<mha::MultiheadAttention> mqa = NewModule(false, 1);
  ExpectInvalidArgument(mqa->LoadKVCache(bytes.data(), bytes.size(), &out),
              {"heads differ", "num_kv_heads 2 (this module's: 1)"});
  std::unique_ptr<mha::MultiheadAttention> windowed = NewModule(true);
  std::unique_ptr<KVCache> rolling;
  ASSERT_OK(windowed->CreateKVCache(1, 8, KVCacheDtype::kFloat32, true, &rolling));
  std::vector<uint8_t> rolling_bytes;
  ASSERT_OK(rolling->Save(&rolling_bytes));
  ExpectInvalidArgument(module->LoadKVCache(rolling_bytes.data(), rolling_bytes.size(), &out),
              {"rolling needs a module with a finite left window"});
  EXPECT_EQ(out, nullptr);
  // A module's saved cache loads free-standing too (the same keys).
  ASSERT_OK(KVCache::Load(bytes.data(), bytes.size(), &out));
  EXPECT_EQ(out->length(), 3);
}

// The saved bytes of entry b of `cache` alone (Select then Save).
std::vector<uint8_t> EntryBytes(const KVCache& cache, int32_t b) {
  std::unique_ptr<KVCache> entry;
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(cache.Select(&b, 1, &entry).ok());
  EXPECT_TRUE(entry->Save(&bytes).ok());
  return bytes;
}

// One prompt prefilled once and selected into 4 beams holds what 4 separate
// prefills of it hold, bit for bit; each beam then decodes as its own cache
// would (to rounding: a batch of 4 and a batch of 1 project through other
// GEMM paths).
TEST(KVCacheSelect, OnePrefillToFourBeamsEqualsFourPrefills) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(Name(c));
    std::unique_ptr<mha::MultiheadAttention> module = NewModule(c.rolling);
    const int64_t max_length = c.rolling ? 5 : 12;
    const auto prefill = [&](std::unique_ptr<KVCache>* cache) {
      ASSERT_OK(module->CreateKVCache(1, max_length, c.dtype, c.rolling, cache));
      Step(*module, cache->get(), 1, 2, 1);
      Steps(*module, cache->get(), 1, 2, 4);  // the ring is full when rolling
    };
    std::unique_ptr<KVCache> one, beams;
    prefill(&one);
    const int32_t four[] = {0, 0, 0, 0};
    ASSERT_OK(one->Select(four, 4, &beams));
    EXPECT_EQ(beams->config().batch_size, 4);
    EXPECT_EQ(beams->length(), one->length());
    std::unique_ptr<KVCache> own[4];
    for (int32_t b = 0; b < 4; ++b) {
      prefill(&own[b]);
      EXPECT_EQ(EntryBytes(*beams, b), EntryBytes(*own[b], 0));
    }
    const std::vector<float> x = RandomVector(4 * kE, 20);
    const std::vector<float> together = Step(*module, beams.get(), 4, 1, 20);
    for (int32_t b = 0; b < 4; ++b) {
      mha::ForwardOptions o;
      o.is_causal = true;
      o.need_weights = false;
      o.cache = own[b].get();
      mha::ForwardResult r;
      const mha::TensorView t{x.data() + b * kE, {1, 1, kE}};
      ASSERT_OK(module->Forward(t, t, t, o, &r));
      ExpectClose(r.output, std::vector<float>(together.begin() + b * kE, together.begin() + (b + 1) * kE),
                  {1, 1, kE}, "beam " + std::to_string(b));
    }
  }
}

TEST(KVCacheSelect, ReordersDropsAndRefusesBadIndices) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule(false);
  std::unique_ptr<KVCache> cache, selected;
  ASSERT_OK(module->CreateKVCache(3, 8, KVCacheDtype::kBFloat16, false, &cache));
  Step(*module, cache.get(), 3, 4, 1);
  const int32_t order[] = {2, 0};
  ASSERT_OK(cache->Select(order, 2, &selected));
  for (int32_t b = 0; b < 2; ++b) EXPECT_EQ(EntryBytes(*selected, b), EntryBytes(*cache, order[b]));
  EXPECT_NE(EntryBytes(*cache, 0), EntryBytes(*cache, 2));
  std::unique_ptr<KVCache> out;
  const int32_t bad[] = {0, 3};
  ExpectInvalidArgument(cache->Select(bad, 2, &out), {"select: indices[1]", "[0, 3)", "got 3"});
  ExpectInvalidArgument(cache->Select(bad, 0, &out), {"select: indices", "got none"});
  EXPECT_EQ(out, nullptr);
}

// A clone and its original continue apart: each as an uninterrupted run would.
TEST(KVCacheClone, CloneAndOriginalBothContinue) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(Name(c));
    std::unique_ptr<mha::MultiheadAttention> module = NewModule(c.rolling);
    std::unique_ptr<KVCache> reference, cache, clone;
    for (std::unique_ptr<KVCache>* each : {&reference, &cache}) {
      ASSERT_OK(module->CreateKVCache(2, c.rolling ? 6 : 12, c.dtype, c.rolling, each));
      Step(*module, each->get(), 2, 3, 1);
      Steps(*module, each->get(), 2, 2, 4);
    }
    ASSERT_OK(cache->Clone(&clone));
    const std::vector<std::vector<float>> forked = Steps(*module, clone.get(), 2, 50, c.rolling ? 55 : 51);
    EXPECT_EQ(Steps(*module, cache.get(), 2, 5, c.rolling ? 9 : 5),
              Steps(*module, reference.get(), 2, 5, c.rolling ? 9 : 5));
    std::unique_ptr<KVCache> again;
    ASSERT_OK(module->CreateKVCache(2, c.rolling ? 6 : 12, c.dtype, c.rolling, &again));
    Step(*module, again.get(), 2, 3, 1);
    Steps(*module, again.get(), 2, 2, 4);
    EXPECT_EQ(Steps(*module, again.get(), 2, 50, c.rolling ? 55 : 51), forked);
  }
}

// Grown in place, a cache continues as one created with the larger
// max_length from the start; shrinking below what it holds is refused.
TEST(KVCacheResize, GrownCacheContinuesAsOneCreatedLarger) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(Name(c));
    std::unique_ptr<mha::MultiheadAttention> module = NewModule(c.rolling);
    std::unique_ptr<KVCache> large, cache;
    ASSERT_OK(module->CreateKVCache(2, 24, c.dtype, c.rolling, &large));
    ASSERT_OK(module->CreateKVCache(2, 6, c.dtype, c.rolling, &cache));
    for (KVCache* each : {large.get(), cache.get()}) {
      Step(*module, each, 2, 3, 1);
      Steps(*module, each, 2, 2, c.rolling ? 6 : 4);  // a rolling ring wraps
    }
    ExpectInvalidArgument(cache->Resize(5),
                {"resize: expected a max_length >= " + std::to_string(cache->held()), "left as it was"});
    ASSERT_OK(cache->Resize(24));
    EXPECT_EQ(cache->config().max_length, 24);
    EXPECT_EQ(Steps(*module, cache.get(), 2, 10, 20), Steps(*module, large.get(), 2, 10, 20));
    ASSERT_OK(cache->Resize(cache->held()));  // shrinking to what it holds
    EXPECT_EQ(cache->config().max_length, cache->held());
    if (c.rolling) {
      EXPECT_EQ(Step(*module, cache.get(), 2, 1, 30), Step(*module, large.get(), 2, 1, 30));
    }
  }
}

}  // namespace
}  // namespace mha_test
