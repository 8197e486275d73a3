// Every allocation a decoding call makes (module and SDPA), failed one at a
// time: the call returns OutOfMemory and leaves module and cache as they
// were (docs/design.md, "Decoding": on any error the cache is left as it was),
// and the next call gives exactly what a twin that never failed gives. The
// same for every allocation of a load: the weights stay as they were.
//
// This binary replaces the global operator new (plain and aligned; the
// core's AlignedBuffer uses the aligned one), so that the k-th allocation
// after g_allocations_left = k fails.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/core/kv_cache_internal.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"
#include "src/io/safetensors.h"

namespace {

// Allocations left before the one that fails; negative: none fails.
std::atomic<long> g_allocations_left{-1};
// Every allocation, counted.
std::atomic<long> g_allocations{0};

bool ShouldFail() {
  long left = g_allocations_left.load();
  while (left >= 0 && !g_allocations_left.compare_exchange_weak(left, left - 1)) {
  }
  return left == 0;
}

void* Allocate(size_t size, size_t alignment) {
  g_allocations.fetch_add(1);
  if (ShouldFail()) throw std::bad_alloc();
  void* p = nullptr;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment,
                     size == 0 ? 1 : size) != 0) {
    throw std::bad_alloc();
  }
  return p;
}

}  // namespace

void* operator new(size_t size) { return Allocate(size, alignof(std::max_align_t)); }
void* operator new(size_t size, std::align_val_t alignment) {
  return Allocate(size, static_cast<size_t>(alignment));
}
// The nothrow forms too: the core's AlignedBuffer uses the aligned one, and
// a sanitizer's own would otherwise pair with these deletes.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new(size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return operator new(size, alignment);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace mha_test {
namespace {

using mha::KVCacheDtype;
using mha::TensorView;

constexpr int64_t kE = 16, kH = 4, kMax = 64;

struct Twin {
  std::unique_ptr<mha::MultiheadAttention> module;
  std::unique_ptr<mha::KVCache> cache;
};

// The caches of a module's calls: full (non-rolling), rolling: a window of 8
// and a rolling cache of the smallest size for a chunk of 20 (7 + 20), which
// the calls below pass; streaming: StreamingLLM, 27 slots, 4 sinks.
enum class Kind { kFull, kRolling, kStreaming };

Twin MakeTwin(KVCacheDtype dtype, Kind kind = Kind::kFull) {
  const bool rolling = kind == Kind::kRolling;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = kE;
  c.num_heads = kH;
  c.num_kv_heads = 2;
  c.rotary.enabled = true;
  if (rolling) c.window.left = 7;
  Twin t;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &t.module).ok());
  uint32_t seed = 1;
  for (const mha::ParameterSpec& spec : t.module->Parameters()) {
    const std::vector<float> data =
        RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    EXPECT_TRUE(t.module->LoadParameter(spec.name, data.data(), spec.shape).ok());
  }
  EXPECT_TRUE((kind == Kind::kStreaming
                   ? t.module->CreateStreamingKVCache(1, 27, dtype, 4, &t.cache)
                   : t.module->CreateKVCache(1, rolling ? 27 : kMax, dtype, rolling, &t.cache))
                  .ok());
  return t;
}

struct Call {
  const char* name;
  int64_t rows;  // query (and new key) rows
  bool need_weights, average;
};

// Makes no allocation of its own before Forward.
mha::Status RunCall(Twin& t, const Call& call, const TensorView& x, mha::ForwardResult* result) {
  mha::ForwardOptions o;
  o.cache = t.cache.get();
  o.is_causal = true;
  o.need_weights = call.need_weights;
  o.average_attn_weights = call.average;
  return t.module->Forward(x, x, x, o, result, nullptr);
}

// Runs `call` with its first, second, ... allocation failing until it
// succeeds; each failure must be OutOfMemory and pass `expect_unchanged`
// (run with no allocation failing). Returns the failures.
int FailEachAllocation(const std::function<mha::Status()>& call,
                       const std::function<void()>& expect_unchanged) {
  int failures = 0;
  for (long k = 0;; ++k) {
    g_allocations_left = k;
    const mha::Status status = call();
    const bool failed = g_allocations_left.exchange(-1) < 0;
    if (status.ok()) {
      EXPECT_FALSE(failed) << "allocation " << k << " failed and the call succeeded";
      return failures;
    }
    ++failures;
    SCOPED_TRACE("allocation " + std::to_string(k) + " failed: " + status.message());
    EXPECT_TRUE(failed);
    EXPECT_EQ(status.code(), mha::StatusCode::kOutOfMemory);
    expect_unchanged();
    if (k >= 1000 || ::testing::Test::HasFailure()) return failures;
  }
}

// The bytes of the keys and values a cache holds, slot by slot.
std::vector<uint8_t> HeldBytes(const mha::KVCache& cache) {
  const mha::KVRows rows = mha::KVCacheAccess::Read(cache);
  const bool f32 = rows.storage == mha::kernels::Storage::kFloat32;
  const size_t element = f32 ? 4 : 2;
  const auto* keys = f32 ? reinterpret_cast<const uint8_t*>(rows.keys)
                         : reinterpret_cast<const uint8_t*>(rows.keys16);
  const auto* values = f32 ? reinterpret_cast<const uint8_t*>(rows.values)
                           : reinterpret_cast<const uint8_t*>(rows.values16);
  const mha::HeldSlots held = mha::KVCacheAccess::Held(cache);
  std::vector<uint8_t> bytes;
  const auto append = [&](const uint8_t* row, size_t size) {
    bytes.insert(bytes.end(), row, row + size * element);
  };
  for (size_t n = 0; n < static_cast<size_t>(cache.config().batch_size); ++n) {
    for (size_t g = 0; g < static_cast<size_t>(cache.config().num_kv_heads); ++g) {
      for (const mha::HeldSlots::Run& run : held.runs) {
        for (size_t slot = run.first; slot < run.first + run.count; ++slot) {
          append(keys + (n * rows.k_batch + g * rows.k_head + slot * rows.k_step) * element,
                 rows.k_step);
          append(values + (n * rows.v_batch + g * rows.v_head + slot * rows.v_step) * element,
                 rows.v_step);
        }
      }
    }
  }
  return bytes;
}

// The same for a call on a cache: its length, held count and contents stay.
int FailEachAllocation(const std::function<mha::Status()>& call, const mha::KVCache& cache) {
  const int64_t length = cache.length(), held = cache.held();
  const std::vector<uint8_t> bytes = HeldBytes(cache);
  return FailEachAllocation(call, [&] {
    EXPECT_EQ(cache.length(), length);
    EXPECT_EQ(cache.held(), held);
    EXPECT_TRUE(HeldBytes(cache) == bytes);
  });
}

class AllocFailureTest : public ::testing::TestWithParam<KVCacheDtype> {};

// A rolling cache too, its ring full from the second round on: a failed call
// puts back the oldest keys it overwrote (length, held and contents stay);
// and a StreamingLLM one, full from the second round on: a failed call puts
// back the keys it dropped and moved.
TEST_P(AllocFailureTest, EveryFailedAllocationLeavesModuleAndCacheAsTheyWere) {
  for (const Kind kind : {Kind::kFull, Kind::kRolling, Kind::kStreaming}) {
    SCOPED_TRACE(kind == Kind::kFull ? "full" : kind == Kind::kRolling ? "rolling" : "streaming");
    Twin failing = MakeTwin(GetParam(), kind), control = MakeTwin(GetParam(), kind);
    // Each kind of call: the decode kernel, averaged and per-head weights
    // (weights are what the result allocated after the cache grew), flash.
    const Call calls[] = {{"prompt", 5, false, true},
                          {"decode step", 1, false, true},
                          {"step with averaged weights", 1, true, true},
                          {"step with per-head weights", 2, true, false},
                          {"chunk of 20 (flash)", 20, false, true}};
    uint32_t seed = 20;
    for (int round = 0; round < (kind == Kind::kFull ? 1 : 2); ++round) {
      for (const Call& call : calls) {
        SCOPED_TRACE(call.name);
        const std::vector<float> tokens = RandomVector(call.rows * kE, seed++);
        const TensorView x{tokens.data(), {call.rows, 1, kE}};
        mha::ForwardResult expected, actual;  // `actual`: of the call that succeeded
        ASSERT_TRUE(RunCall(control, call, x, &expected).ok());
        const std::function<mha::Status()> run = [&] {
          actual = mha::ForwardResult();  // no capacity left from an earlier try
          return RunCall(failing, call, x, &actual);
        };
        EXPECT_GT(FailEachAllocation(run, *failing.cache), 0);
        ASSERT_FALSE(HasFailure());
        EXPECT_EQ(failing.cache->length(), control.cache->length());
        EXPECT_EQ(actual.output.shape, expected.output.shape);
        EXPECT_EQ(actual.output.data, expected.output.data);
        EXPECT_EQ(actual.weights.shape, expected.weights.shape);
        EXPECT_EQ(actual.weights.data, expected.weights.data);
        EXPECT_EQ(failing.cache->held(), control.cache->held());
      }
    }
  }
}

// The same for scaled_dot_product_attention on a free-standing cache: a
// prompt, a decode step and a chunk of 20 (flash), grouped-query heads; and
// on a rolling one (window 8, 27 slots), its ring full from the second round.
TEST_P(AllocFailureTest, ScaledDotProductAttentionLeavesTheCacheAsItWas) {
  for (const bool rolling : {false, true}) {
    SCOPED_TRACE(rolling ? "rolling" : "full");
    mha::KVCacheConfig config{1, 2, 8, 8, rolling ? 27 : kMax, GetParam(), rolling};
    std::unique_ptr<mha::KVCache> failing, control;
    ASSERT_TRUE(mha::KVCache::Create(config, &failing).ok());
    ASSERT_TRUE(mha::KVCache::Create(config, &control).ok());
    uint32_t seed = 40;
    // One round; two for the rolling cache, its ring full in the second.
    const std::vector<int64_t> calls = rolling ? std::vector<int64_t>{5, 1, 20, 5, 1, 20}
                                               : std::vector<int64_t>{5, 1, 20};
    for (const int64_t rows : calls) {
      SCOPED_TRACE(rows);
      const std::vector<float> q = RandomVector(4 * rows * 8, seed++), kv = RandomVector(2 * rows * 8, seed++);
      const TensorView qv{q.data(), {1, 4, rows, 8}}, kvv{kv.data(), {1, 2, rows, 8}};
      mha::SdpaOptions o;
      o.enable_gqa = true;
      o.is_causal = true;
      if (rolling) o.window.left = 7;
      mha::Tensor expected, actual;
      o.cache = control.get();
      ASSERT_TRUE(mha::ScaledDotProductAttention(qv, kvv, kvv, o, &expected).ok());
      o.cache = failing.get();
      const std::function<mha::Status()> run = [&] {
        actual = mha::Tensor();
        return mha::ScaledDotProductAttention(qv, kvv, kvv, o, &actual);
      };
      EXPECT_GT(FailEachAllocation(run, *failing), 0);
      ASSERT_FALSE(HasFailure());
      EXPECT_EQ(failing->length(), control->length());
      EXPECT_EQ(failing->held(), control->held());
      EXPECT_EQ(actual.shape, expected.shape);
      EXPECT_EQ(actual.data, expected.data);
    }
  }
}

// On a full rolling ring a step saves the keys it overwrites in a buffer
// the cache keeps (KVCacheAccess::SaveOverwritten), not one of its own per
// call: it allocates no more than a step before the ring was full.
TEST(AllocCountTest, AStepOnAFullRingAllocatesNoMoreThanOneBefore) {
  mha::KVCacheConfig config{1, 2, 8, 8, 27, KVCacheDtype::kFloat32, true};
  std::unique_ptr<mha::KVCache> cache;
  ASSERT_TRUE(mha::KVCache::Create(config, &cache).ok());
  const std::vector<float> q = RandomVector(4 * 8, 60), kv = RandomVector(2 * 8, 61);
  const TensorView qv{q.data(), {1, 4, 1, 8}}, kvv{kv.data(), {1, 2, 1, 8}};
  mha::SdpaOptions o;
  o.enable_gqa = true;
  o.is_causal = true;
  o.window.left = 7;
  o.cache = cache.get();
  mha::Tensor out;
  std::vector<long> allocations;
  for (int step = 0; step < 40; ++step) {  // the ring is full from step 27 on
    const long before = g_allocations.load();
    ASSERT_TRUE(mha::ScaledDotProductAttention(qv, kvv, kvv, o, &out).ok());
    allocations.push_back(g_allocations.load() - before);
  }
  for (int step = 30; step < 40; ++step) {
    EXPECT_LE(allocations[step], allocations[20]) << "step " << step << " on the full ring";
  }
}

// The same for a module's StreamingLLM cache: once full, each step makes
// room (KVCacheAccess::MakeRoom: rows saved, moved and re-rotated) in
// buffers the cache keeps.
TEST(AllocCountTest, AStepOnAFullStreamingCacheAllocatesNoMoreThanOneBefore) {
  for (const KVCacheDtype dtype : {KVCacheDtype::kFloat32, KVCacheDtype::kFloat16}) {
    SCOPED_TRACE(mha::KVCacheDtypeName(dtype));
    Twin t = MakeTwin(dtype, Kind::kStreaming);
    const Call step{"step", 1, false, false};
    mha::ForwardResult result;
    std::vector<long> allocations;
    for (int i = 0; i < 40; ++i) {  // full from step 27 on
      const std::vector<float> x = RandomVector(kE, 70 + i);
      const long before = g_allocations.load();
      ASSERT_TRUE(RunCall(t, step, {x.data(), {1, 1, kE}}, &result).ok());
      allocations.push_back(g_allocations.load() - before);
    }
    for (int i = 30; i < 40; ++i) {
      EXPECT_LE(allocations[i], allocations[20]) << "step " << i << " on the full cache";
    }
  }
}

// Parameters by state_dict name.
using Params = std::map<std::string, std::vector<float>>;

Params RandomParams(const mha::MultiheadAttention& m, uint32_t seed) {
  Params params;
  for (const mha::ParameterSpec& spec : m.Parameters()) {
    params[spec.name] = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
  }
  return params;
}

// `params` in the module's shapes.
std::map<std::string, TensorView> StateDict(const mha::MultiheadAttention& m,
                                            const Params& params) {
  std::map<std::string, TensorView> tensors;
  for (const mha::ParameterSpec& spec : m.Parameters()) {
    tensors[spec.name] = {params.at(spec.name).data(), spec.shape};
  }
  return tensors;
}

// Loads are all or nothing (multihead_attention.h: "an error loads
// nothing"): each allocation of a load failed in turn leaves the module's
// outputs bit for bit and its memory() as they were, fused (in_proj_weight)
// and split (kdim != embed_dim), for a first load, a reload of the same
// dtype, a dtype change (float32 -> bfloat16 -> float32) and shards.
TEST(AllocFailureLoadTest, EveryFailedAllocationLeavesTheWeightsAsTheyWere) {
  for (const int64_t kdim : {kE, int64_t{12}}) {
    SCOPED_TRACE(kdim == kE ? "fused" : "split (kdim = vdim = 12)");
    mha::MultiheadAttentionConfig c;
    c.embed_dim = kE;
    c.num_heads = kH;
    c.kdim = kdim;
    c.vdim = kdim;
    std::unique_ptr<mha::MultiheadAttention> m;
    ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
    const std::vector<float> q = RandomVector(3 * kE, 60), kv = RandomVector(5 * kdim, 61);
    const auto run = [&](mha::ForwardResult* result) {
      mha::ForwardOptions o;
      o.need_weights = false;
      return m->Forward({q.data(), {3, kE}}, {kv.data(), {5, kdim}}, {kv.data(), {5, kdim}}, o,
                        result);
    };
    // Before the first load: parameters not loaded, and no memory.
    mha::ForwardResult before;
    mha::Status forward = run(&before);
    size_t memory = m->memory();
    const auto expect_unchanged = [&] {
      EXPECT_EQ(m->memory(), memory);
      mha::ForwardResult after;
      const mha::Status status = run(&after);
      EXPECT_EQ(status.code(), forward.code()) << status.message();
      EXPECT_EQ(after.output.data, before.output.data);
    };
    const Params a = RandomParams(*m, 70), b = RandomParams(*m, 80), c16 = RandomParams(*m, 90),
                 d = RandomParams(*m, 100);
    std::set<std::string> first, second;
    for (const mha::ParameterSpec& spec : m->Parameters()) {
      (first.size() <= second.size() ? first : second).insert(spec.name);
    }
    const std::vector<uint8_t> bf16 = SafetensorsOf(*m, c16, "BF16");
    const std::vector<std::vector<uint8_t>> shards = {SafetensorsOf(*m, d, "F32", first),
                                                      SafetensorsOf(*m, d, "F32", second)};
    mha::SafetensorsFile sharded;
    ASSERT_TRUE(mha::ParseSafetensorsShards({{shards[0].data(), shards[0].size(), shards[0].size()},
                                             {shards[1].data(), shards[1].size(), shards[1].size()}},
                                            &sharded).ok());
    // The calls below allocate nothing before the load's own allocations.
    const std::map<std::string, TensorView> dict_a = StateDict(*m, a), dict_b = StateDict(*m, b);
    const std::pair<const char*, std::function<mha::Status()>> loads[] = {
        {"first load", [&] { return m->LoadStateDict(dict_a); }},
        {"reload, same dtype", [&] { return m->LoadStateDict(dict_b); }},
        {"bfloat16 file (a dtype change)", [&] { return m->LoadSafetensors(bf16.data(), bf16.size()); }},
        {"float32 shards (a dtype change)", [&] { return m->LoadSafetensors(sharded); }}};
    for (const auto& [name, load] : loads) {
      SCOPED_TRACE(name);
      EXPECT_GT(FailEachAllocation(load, expect_unchanged), 0);
      ASSERT_FALSE(HasFailure());
      mha::ForwardResult after;
      forward = run(&after);
      ASSERT_TRUE(forward.ok()) << forward.message();
      EXPECT_NE(after.output.data, before.output.data);
      before = after;
      memory = m->memory();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllocFailureTest,
                         ::testing::Values(KVCacheDtype::kFloat32, KVCacheDtype::kFloat16),
                         [](const testing::TestParamInfo<KVCacheDtype>& info) {
                           return std::string(mha::KVCacheDtypeName(info.param));
                         });

}  // namespace
}  // namespace mha_test
