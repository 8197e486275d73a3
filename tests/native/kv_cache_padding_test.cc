// The padding a module's cache remembers (docs/design.md, "Caches an app
// keeps"): a left-padded prefill's key padding mask, then decode steps
// without mask and positions, give the same bits as passing the mask and
// Hugging Face's positions every step, on 1 and 2 threads; explicit ones
// still override; truncate, reorder, select, clone, resize and save/load
// carry the padding.
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "src/thread_pool.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::KVCache;

constexpr int64_t kE = 16, kN = 2, kPrompt = 5;  // kE: DecoderConfig's embed_dim
// Entry 0 has 3 pads then 2 tokens; entry 1 no pad.
const std::vector<int64_t> kPads = {3, 0};

std::unique_ptr<mha::MultiheadAttention> NewModule(bool rolling) {
  return RandomModule(DecoderConfig(rolling ? 4 : -1), 30);
}

// The key padding mask over `slots` slots (1: pad) and Hugging Face's
// position_ids of the L rows from slot `first` (pads at 1).
std::vector<uint8_t> Mask(int64_t slots) {
  std::vector<uint8_t> mask(static_cast<size_t>(kN * slots), 0);
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t s = 0; s < kPads[n] && s < slots; ++s) mask[n * slots + s] = 1;
  }
  return mask;
}
std::vector<int32_t> Positions(int64_t first, int64_t L) {
  std::vector<int32_t> positions;
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t i = 0; i < L; ++i) {
      const int64_t slot = first + i;
      positions.push_back(static_cast<int32_t>(slot >= kPads[n] ? slot - kPads[n] : 1));
    }
  }
  return positions;
}

// One call of L rows per entry on `cache`; with `explicit_padding` the mask
// (over every slot) and positions are passed, else only the prefill's mask.
std::vector<float> Step(mha::MultiheadAttention& module, KVCache* cache, int64_t L, uint32_t seed,
                        bool explicit_padding, mha::ThreadPool* pool) {
  const std::vector<float> x = RandomVector(static_cast<size_t>(kN * L * kE), seed);
  const int64_t P = cache->length(), T = P + L;
  const std::vector<uint8_t> mask = Mask(T);
  const std::vector<int32_t> positions = Positions(P, L);
  mha::ForwardOptions o;
  o.is_causal = true;
  o.need_weights = false;
  o.cache = cache;
  if (explicit_padding || P == 0) o.key_padding_mask = mha::MaskView::Bool(mask.data(), {kN, T});
  if (explicit_padding) {
    o.positions = positions.data();
    o.num_positions = positions.size();
  }
  mha::ForwardResult r;
  const mha::TensorView t{x.data(), {kN, L, kE}};
  const mha::Status status = module.Forward(t, t, t, o, &r, pool);
  EXPECT_TRUE(status.ok()) << status.message();
  return r.output.data;
}

// Prefill then 8 steps; the outputs.
std::vector<std::vector<float>> RunCalls(mha::MultiheadAttention& module, KVCache* cache,
                                    bool explicit_padding, mha::ThreadPool* pool) {
  std::vector<std::vector<float>> outputs;
  outputs.push_back(Step(module, cache, kPrompt, 1, explicit_padding, pool));
  for (uint32_t seed = 2; seed <= 9; ++seed) {
    outputs.push_back(Step(module, cache, 1, seed, explicit_padding, pool));
  }
  return outputs;
}

// The same bits (the prefill's rows of pads only are NaN: every key they see is masked).
bool SameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

TEST(KVCachePadding, RememberedEqualsExplicitBitForBit) {
  mha::ThreadPool two(2);
  for (bool rolling : {false, true}) {
    for (mha::ThreadPool* pool : {static_cast<mha::ThreadPool*>(nullptr), &two}) {
      SCOPED_TRACE(std::string(rolling ? "rolling" : "") + (pool ? " 2 threads" : " 1 thread"));
      std::unique_ptr<mha::MultiheadAttention> module = NewModule(rolling);
      std::unique_ptr<KVCache> remembered, given;
      const int64_t max_length = rolling ? 9 : 16;  // rolling: the ring wraps at step 5
      ASSERT_OK(module->CreateKVCache(kN, max_length, mha::KVCacheDtype::kFloat32, rolling, &remembered));
      ASSERT_OK(module->CreateKVCache(kN, max_length, mha::KVCacheDtype::kFloat32, rolling, &given));
      const auto outputs = RunCalls(*module, remembered.get(), false, pool);
      EXPECT_EQ(remembered->padding(), kPads);
      EXPECT_TRUE(SameBits(outputs, RunCalls(*module, given.get(), true, pool)));
      EXPECT_EQ(given->padding(), kPads);  // remembered there too
    }
  }
}

// An explicit mask overrides the remembered one: a step that unmasks the
// pads changes entry 0's output, not entry 1's (no pads). So the test above
// sees the padding.
TEST(KVCachePadding, ExplicitMaskOverrides) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule(false);
  std::unique_ptr<KVCache> cache, unmasked;
  ASSERT_OK(module->CreateKVCache(kN, 16, mha::KVCacheDtype::kFloat32, false, &cache));
  ASSERT_OK(module->CreateKVCache(kN, 16, mha::KVCacheDtype::kFloat32, false, &unmasked));
  Step(*module, cache.get(), kPrompt, 1, false, nullptr);
  Step(*module, unmasked.get(), kPrompt, 1, false, nullptr);
  const std::vector<float> x = RandomVector(static_cast<size_t>(kN * kE), 2);
  const std::vector<uint8_t> none(kN * (kPrompt + 1), 0);
  mha::ForwardOptions o;
  o.need_weights = false;
  o.cache = unmasked.get();
  o.key_padding_mask = mha::MaskView::Bool(none.data(), {kN, kPrompt + 1});
  mha::ForwardResult r;
  const mha::TensorView t{x.data(), {kN, 1, kE}};
  ASSERT_OK(module->Forward(t, t, t, o, &r));
  const std::vector<float> remembered = Step(*module, cache.get(), 1, 2, false, nullptr);
  EXPECT_NE(std::vector<float>(r.output.data.begin(), r.output.data.begin() + kE),
            std::vector<float>(remembered.begin(), remembered.begin() + kE));
  EXPECT_EQ(std::vector<float>(r.output.data.begin() + kE, r.output.data.end()),
            std::vector<float>(remembered.begin() + kE, remembered.end()));
  EXPECT_EQ(unmasked->padding(), kPads);  // a later mask does not change it
}

// zlib's crc32, as docs/kv-cache-format.md says.
uint32_t Crc32(const uint8_t* data, size_t size) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    c ^= data[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

// Truncate, reorder, select, clone, resize and save/load carry the padding.
TEST(KVCachePadding, KeptThroughCopiesAndSaves) {
  std::unique_ptr<mha::MultiheadAttention> module = NewModule(false);
  std::unique_ptr<KVCache> cache;
  ASSERT_OK(module->CreateKVCache(kN, 16, mha::KVCacheDtype::kFloat16, false, &cache));
  Step(*module, cache.get(), kPrompt, 1, false, nullptr);
  std::unique_ptr<KVCache> copy, beams, loaded;
  ASSERT_OK(cache->Clone(&copy));
  EXPECT_EQ(copy->padding(), kPads);
  const int32_t pick[] = {1, 0, 0};
  ASSERT_OK(cache->Select(pick, 3, &beams));
  EXPECT_EQ(beams->padding(), (std::vector<int64_t>{0, 3, 3}));
  std::vector<uint8_t> bytes;
  ASSERT_OK(cache->Save(&bytes));
  ASSERT_OK(module->LoadKVCache(bytes.data(), bytes.size(), &loaded));
  EXPECT_EQ(loaded->padding(), kPads);
  EXPECT_EQ(Step(*module, loaded.get(), 1, 2, false, nullptr),
            Step(*module, cache.get(), 1, 2, false, nullptr));
  ASSERT_OK(cache->Resize(20));
  EXPECT_EQ(cache->padding(), kPads);
  const int32_t swap[] = {1, 0};
  ASSERT_OK(cache->Reorder(swap, 2));
  EXPECT_EQ(cache->padding(), (std::vector<int64_t>{0, 3}));
  ASSERT_OK(cache->Truncate(2));
  EXPECT_EQ(cache->padding(), (std::vector<int64_t>{0, 2}));
  cache->Reset();
  EXPECT_EQ(cache->padding(), (std::vector<int64_t>{0, 0}));
  // A saved padding larger than the length (checksum made right) is refused.
  std::vector<uint8_t> bad = bytes;
  bad[84] = 200;
  const size_t payload = bad.size() - 88;
  const uint32_t crc = Crc32(bad.data() + 84, payload);
  for (size_t i = 0; i < 4; ++i) bad[84 + payload + i] = static_cast<uint8_t>(crc >> (8 * i));
  ExpectInvalidArgument(module->LoadKVCache(bad.data(), bad.size(), &loaded),
                        {"padding of entry 0 is 200, more than the length 5"});
}

}  // namespace
}  // namespace mha_test
