// KVCache::Reorder (beam search): every mapping of a few entries moves the
// held rows (short and long runs) as index_select(0, indices) would; a beam
// search that reorders between steps (duplicating beams, dropping others,
// cycles) decodes the rows of one full causal forward per beam, on every
// compiled Highway target, for module and free (SDPA) caches in float32 and
// the 16-bit dtypes; bad indices leave the cache as it was; a reorder on one thread and
// attention on another never see each other's half-done work.
#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/core/kv_cache_internal.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::KVCache;
using mha::KVCacheAccess;
using mha::KVCacheDtype;

// The raw bytes of the held keys and values of batch entry n.
std::vector<uint8_t> EntryBytes(const KVCache& cache, size_t n) {
  const mha::KVRows rows = KVCacheAccess::Read(cache);
  const bool narrow = rows.storage != mha::kernels::Storage::kFloat32;
  const size_t element = narrow ? 2 : 4;
  const auto* keys = narrow ? static_cast<const void*>(rows.keys16) : rows.keys;
  const auto* values = narrow ? static_cast<const void*>(rows.values16) : rows.values;
  std::vector<uint8_t> bytes;
  const auto append = [&](const void* base, size_t batch, size_t head, size_t step) {
    for (size_t g = 0; g < static_cast<size_t>(cache.config().num_kv_heads); ++g) {
      for (size_t t = 0; t < static_cast<size_t>(cache.length()); ++t) {
        const auto* row = static_cast<const uint8_t*>(base) + (n * batch + g * head + t * step) * element;
        bytes.insert(bytes.end(), row, row + step * element);
      }
    }
  };
  append(keys, rows.k_batch, rows.k_head, rows.k_step);
  append(values, rows.v_batch, rows.v_head, rows.v_step);
  return bytes;
}

std::vector<std::vector<uint8_t>> AllEntries(const KVCache& cache) {
  std::vector<std::vector<uint8_t>> entries;
  for (size_t n = 0; n < static_cast<size_t>(cache.config().batch_size); ++n) {
    entries.push_back(EntryBytes(cache, n));
  }
  return entries;
}

// Fills `held` rows of every entry with random keys and values.
void Fill(KVCache& cache, int64_t held, uint32_t seed) {
  const mha::KVCacheConfig& c = cache.config();
  const size_t n = static_cast<size_t>(c.batch_size), h = static_cast<size_t>(c.num_kv_heads);
  const size_t k = static_cast<size_t>(c.head_dim), v = static_cast<size_t>(c.v_head_dim);
  const std::vector<float> keys = RandomVector(n * held * h * k, seed);
  const std::vector<float> values = RandomVector(n * held * h * v, seed + 1);
  // (N, held, H, dim): entry-, then row-, then head-major.
  const mha::NewKVRows key_rows{keys.data(), held * h * k, h * k, k};
  const mha::NewKVRows value_rows{values.data(), held * h * v, h * v, v};
  std::unique_lock<std::mutex> lock = KVCacheAccess::Lock(cache);
  KVCacheAccess::Write(cache, key_rows, value_rows, static_cast<size_t>(held));
  KVCacheAccess::Grow(cache, cache.length() + held);
}

// Reorders a cache of `config` holding `held` keys by every mapping of its
// batch_size entries (n^n of them); entry b must hold the old entry from[b].
void ExpectEveryMapping(const mha::KVCacheConfig& config, int64_t held) {
  const int32_t n = static_cast<int32_t>(config.batch_size);
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(KVCache::Create(config, &cache));
  std::vector<int32_t> from(static_cast<size_t>(n), 0);
  size_t mappings = 0;
  while (true) {
    // Entries all different again (a mapping before may have copied one everywhere).
    ASSERT_OK(cache->Truncate(0));
    Fill(*cache, held, static_cast<uint32_t>(mappings));
    const std::vector<std::vector<uint8_t>> before = AllEntries(*cache);
    ASSERT_EQ(std::set<std::vector<uint8_t>>(before.begin(), before.end()).size(), from.size());
    ASSERT_OK(cache->Reorder(from.data(), from.size()));
    for (size_t b = 0; b < from.size(); ++b) {
      ASSERT_EQ(EntryBytes(*cache, b), before[static_cast<size_t>(from[b])])
          << "n " << n << ", mapping " << mappings << ", entry " << b;
    }
    ++mappings;
    // The next mapping, as a base-n counter.
    size_t digit = 0;
    while (digit < from.size() && ++from[digit] == n) from[digit++] = 0;
    if (digit == from.size()) break;
  }
  size_t expected = 1;
  for (int32_t i = 0; i < n; ++i) expected *= static_cast<size_t>(n);
  EXPECT_EQ(mappings, expected);
  EXPECT_EQ(cache->length(), held);
}

// Every mapping of 1 to 6 entries (46,656 of 6), in every dtype.
TEST(KVCacheReorder, EveryMappingOfUpToSixEntries) {
  for (const KVCacheDtype dtype :
       {KVCacheDtype::kFloat32, KVCacheDtype::kFloat16, KVCacheDtype::kBFloat16}) {
    for (int64_t n = 1; n <= 6; ++n) ExpectEveryMapping({n, 2, 3, 5, 4, dtype}, 3);
  }
}

// Runs of held rows longer than Reorder's stack buffer, and not a multiple of
// it (23 rows of 100 and 60 features: 9,200 and 5,520 bytes in float32).
TEST(KVCacheReorder, EveryMappingOfLongRuns) {
  for (const KVCacheDtype dtype : {KVCacheDtype::kFloat32, KVCacheDtype::kFloat16}) {
    ExpectEveryMapping({4, 2, 100, 60, 30, dtype}, 23);
  }
}

TEST(KVCacheReorder, EmptyCacheAndModuleCache) {
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 8;
  c.num_heads = 2;
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_OK(mha::MultiheadAttention::Create(c, &module));
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(module->CreateKVCache(3, 5, KVCacheDtype::kFloat16, &cache));
  const int32_t from[] = {2, 2, 0};
  ASSERT_OK(cache->Reorder(from, 3));  // nothing held: nothing to move
  Fill(*cache, 5, 7);
  const std::vector<std::vector<uint8_t>> before = AllEntries(*cache);
  ASSERT_OK(cache->Reorder(from, 3));
  EXPECT_EQ(AllEntries(*cache), (std::vector<std::vector<uint8_t>>{before[2], before[2], before[0]}));
}

TEST(KVCacheReorder, BadIndicesLeaveTheCacheAsItWas) {
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(KVCache::Create({4, 2, 3, 3, 6, KVCacheDtype::kFloat32}, &cache));
  Fill(*cache, 4, 3);
  const std::vector<std::vector<uint8_t>> before = AllEntries(*cache);
  const int32_t three[] = {1, 0, 2};
  ExpectInvalidArgument(cache->Reorder(three, 3), {"reorder: indices", "batch_size (4)", "got 3", "left as it was"});
  ExpectInvalidArgument(cache->Reorder(nullptr, 4), {"reorder: indices", "batch_size (4)", "got none"});
  // The bad index comes after entries a partial reorder would already have moved.
  const int32_t past[] = {1, 0, 3, 4};
  ExpectInvalidArgument(cache->Reorder(past, 4), {"reorder: indices[3]", "[0, 4)", "got 4", "left as it was"});
  const int32_t negative[] = {3, -1, 0, 0};
  ExpectInvalidArgument(cache->Reorder(negative, 4), {"reorder: indices[1]", "[0, 4)", "got -1"});
  EXPECT_EQ(AllEntries(*cache), before);
  EXPECT_EQ(cache->length(), 4);
}

// Reorders on one thread while another attends the cache: each call holds the
// cache's lock, so every attention sees the entries in one order or the other,
// never half moved (and ThreadSanitizer sees no race).
TEST(KVCacheReorder, AttentionOnAnotherThreadSeesWholeReorders) {
  constexpr int64_t kDim = 64, kHeld = 256;
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(KVCache::Create({2, 1, kDim, kDim, kHeld, KVCacheDtype::kFloat32}, &cache));
  Fill(*cache, kHeld, 5);
  const std::vector<float> q = RandomVector(2 * kDim, 6);
  mha::SdpaOptions o;
  o.cache = cache.get();
  const auto attend = [&](mha::Tensor* out) {
    return mha::ScaledDotProductAttention({q.data(), {2, 1, 1, kDim}}, {}, {}, o, out);
  };
  const int32_t swap[] = {1, 0};
  mha::Tensor in_order, swapped;
  ASSERT_OK(attend(&in_order));
  ASSERT_OK(cache->Reorder(swap, 2));
  ASSERT_OK(attend(&swapped));
  ASSERT_NE(in_order.data, swapped.data);
  std::atomic<bool> done{false};
  std::thread reorders([&] {
    for (int i = 0; i < 2000; ++i) EXPECT_TRUE(cache->Reorder(swap, 2).ok());
    done = true;
  });
  int calls = 0, torn = 0;
  while (!done) {
    mha::Tensor out;
    ASSERT_OK(attend(&out));
    torn += out.data != in_order.data && out.data != swapped.data;
    ++calls;
  }
  reorders.join();
  EXPECT_EQ(torn, 0) << "of " << calls << " calls";
  mha::Tensor last;
  ASSERT_OK(attend(&last));
  EXPECT_EQ(last.data, swapped.data);  // 1 + 2000 swaps
}

// A beam search of kBeams beams: a prompt per beam, then steps that reorder
// the beams and append one token each. The reference keeps every beam's
// whole sequence, reorders those, and runs one causal forward per beam over
// it; each step's output rows must be that forward's last rows.
constexpr int64_t kBeams = 4, kE = 16, kH = 4, kHkv = 2, kD = kE / kH, kPrompt = 5;
const std::vector<std::vector<int32_t>> kReorders = {
    {1, 1, 3, 0},  // beam 1 twice, beam 2 dropped
    {0, 1, 2, 3},  // unchanged
    {3, 2, 1, 0},  // two swaps
    {1, 2, 3, 0},  // one cycle of four
    {2, 2, 2, 2},  // one beam everywhere
    {0, 0, 1, 1},
    {3, 0, 0, 2},
    {1, 0, 3, 3},  // a swap and a duplicate
};

enum class Api { kModule, kSdpa };

struct BeamCase {
  Api api;
  KVCacheDtype dtype;
};

// The features of one position of a sequence: a module's input token (kE), or
// SDPA's query (kH x kD), key and value (kHkv x kD each) of one position.
int64_t TokenSize(Api api) { return api == Api::kModule ? kE : (kH + 2 * kHkv) * kD; }

// Runs the attention of `batch` sequences of `length` tokens each (tokens
// (batch, length, TokenSize), position-major within a sequence) on `cache`
// (null: none; every call is causal) and returns its output, (batch, length,
// kE) for either api.
class Attention {
 public:
  explicit Attention(const BeamCase& c) : case_(c) {
    mha::MultiheadAttentionConfig m;
    m.embed_dim = kE;
    m.num_heads = kH;
    m.num_kv_heads = kHkv;
    m.batch_first = true;
    m.rotary.enabled = true;
    EXPECT_TRUE(mha::MultiheadAttention::Create(m, &module_).ok());
    uint32_t seed = 40;
    for (const mha::ParameterSpec& spec : module_->Parameters()) {
      const std::vector<float> w = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
      EXPECT_TRUE(module_->LoadParameter(spec.name, w.data(), spec.shape).ok());
    }
  }

  std::unique_ptr<KVCache> NewCache(int64_t batch, int64_t max_length) const {
    std::unique_ptr<KVCache> cache;
    if (case_.api == Api::kModule) {
      EXPECT_TRUE(module_->CreateKVCache(batch, max_length, case_.dtype, &cache).ok());
    } else {
      EXPECT_TRUE(KVCache::Create({batch, kHkv, kD, kD, max_length, case_.dtype}, &cache).ok());
    }
    return cache;
  }

  mha::Status Run(const std::vector<float>& tokens, int64_t batch, int64_t length, KVCache* cache,
                  std::vector<float>* out) {
    if (case_.api == Api::kModule) {
      mha::ForwardOptions o;
      o.is_causal = true;
      o.need_weights = false;
      o.cache = cache;
      const mha::TensorView x{tokens.data(), {batch, length, kE}};
      mha::ForwardResult r;
      MHA_RETURN_IF_ERROR(module_->Forward(x, x, x, o, &r));
      *out = std::move(r.output.data);
      return mha::Status::Ok();
    }
    // SDPA wants (batch, heads, length, kD): gather each part from the tokens.
    std::vector<float> parts[3];
    const int64_t heads[3] = {kH, kHkv, kHkv}, offsets[3] = {0, kH * kD, (kH + kHkv) * kD};
    for (int p = 0; p < 3; ++p) {
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t h = 0; h < heads[p]; ++h) {
          for (int64_t t = 0; t < length; ++t) {
            const float* src = tokens.data() + (n * length + t) * TokenSize(Api::kSdpa) + offsets[p] + h * kD;
            parts[p].insert(parts[p].end(), src, src + kD);
          }
        }
      }
    }
    mha::SdpaOptions o;
    o.is_causal = true;
    o.enable_gqa = true;
    o.cache = cache;
    mha::Tensor output;  // (batch, kH, length, kD)
    MHA_RETURN_IF_ERROR(mha::ScaledDotProductAttention(
        {parts[0].data(), {batch, kH, length, kD}}, {parts[1].data(), {batch, kHkv, length, kD}},
        {parts[2].data(), {batch, kHkv, length, kD}}, o, &output));
    out->assign(static_cast<size_t>(batch * length * kE), 0.0f);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t h = 0; h < kH; ++h) {
        for (int64_t t = 0; t < length; ++t) {
          std::memcpy(out->data() + (n * length + t) * kE + h * kD,
                      output.data.data() + ((n * kH + h) * length + t) * kD, kD * sizeof(float));
        }
      }
    }
    return mha::Status::Ok();
  }

 private:
  BeamCase case_;
  std::unique_ptr<mha::MultiheadAttention> module_;
};

class BeamSearchTest : public hwy::TestWithParamTargetAndT<int> {};

const BeamCase kCases[] = {{Api::kModule, KVCacheDtype::kFloat32},
                           {Api::kModule, KVCacheDtype::kFloat16},
                           {Api::kSdpa, KVCacheDtype::kFloat32},
                           {Api::kSdpa, KVCacheDtype::kFloat16}};

TEST_P(BeamSearchTest, ReorderedStepsMatchOneForwardPerBeam) {
  const BeamCase c = kCases[GetParam()];
  Attention attention(c);
  const int64_t token = TokenSize(c.api);
  const int64_t max_length = kPrompt + static_cast<int64_t>(kReorders.size());
  std::unique_ptr<KVCache> cache = attention.NewCache(kBeams, max_length);
  // Every beam's whole sequence, (kBeams, its length, token): a different prompt each.
  std::vector<std::vector<float>> beams;
  for (int64_t b = 0; b < kBeams; ++b) beams.push_back(RandomVector(kPrompt * token, 100 + b));
  std::vector<float> prompts, out;
  for (const std::vector<float>& beam : beams) prompts.insert(prompts.end(), beam.begin(), beam.end());
  ASSERT_OK(attention.Run(prompts, kBeams, kPrompt, cache.get(), &out));
  for (size_t step = 0; step < kReorders.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<int32_t>& from = kReorders[step];
    ASSERT_OK(cache->Reorder(from.data(), from.size()));
    std::vector<std::vector<float>> reordered;
    for (int32_t b : from) reordered.push_back(beams[static_cast<size_t>(b)]);
    beams = std::move(reordered);
    const std::vector<float> tokens = RandomVector(kBeams * token, 200 + static_cast<uint32_t>(step));
    for (int64_t b = 0; b < kBeams; ++b) {
      beams[b].insert(beams[b].end(), tokens.begin() + b * token, tokens.begin() + (b + 1) * token);
    }
    ASSERT_OK(attention.Run(tokens, kBeams, 1, cache.get(), &out));
    for (int64_t b = 0; b < kBeams; ++b) {
      SCOPED_TRACE("beam " + std::to_string(b));
      const int64_t length = static_cast<int64_t>(beams[b].size()) / token;
      // float16 caches: the full forward stores its keys in a fresh cache of
      // the same dtype, so that both sides attend the same rounded keys.
      std::unique_ptr<KVCache> own =
          c.dtype == KVCacheDtype::kFloat16 ? attention.NewCache(1, length) : nullptr;
      std::vector<float> full;
      ASSERT_OK(attention.Run(beams[b], 1, length, own.get(), &full));
      const mha::Tensor row{std::vector<float>(out.begin() + b * kE, out.begin() + (b + 1) * kE), {kE}};
      ExpectClose(row, std::vector<float>(full.end() - kE, full.end()), {kE}, "last row");
    }
  }
}

std::string CaseName(const testing::TestParamInfo<std::tuple<int64_t, int>>& info) {
  const BeamCase& c = kCases[std::get<1>(info.param)];
  return std::string(hwy::TargetName(std::get<0>(info.param))) +
         (c.api == Api::kModule ? "_module_" : "_sdpa_") + mha::KVCacheDtypeName(c.dtype);
}

INSTANTIATE_TEST_SUITE_P(AllTargets, BeamSearchTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::Range(0, 4)),
                         CaseName);

}  // namespace
}  // namespace mha_test
