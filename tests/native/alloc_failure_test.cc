// Every allocation a decoding call makes (module and SDPA), failed one at a
// time: the call returns OutOfMemory and leaves module and cache as they
// were (DESIGN.md, "Decoding": on any error the cache is left as it was),
// and the next call gives exactly what a twin that never failed gives.
//
// This binary replaces the global operator new (plain and aligned; the
// core's AlignedBuffer uses the aligned one), so that the k-th allocation
// after g_allocations_left = k fails.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace {

// Allocations left before the one that fails; negative: none fails.
std::atomic<long> g_allocations_left{-1};

bool ShouldFail() {
  long left = g_allocations_left.load();
  while (left >= 0 && !g_allocations_left.compare_exchange_weak(left, left - 1)) {
  }
  return left == 0;
}

void* Allocate(size_t size, size_t alignment) {
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

// rolling: a window of 8 and a rolling cache of the smallest size for a
// chunk of 20 (7 + 20), which the calls below pass.
Twin MakeTwin(KVCacheDtype dtype, bool rolling = false) {
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
  EXPECT_TRUE(t.module->CreateKVCache(1, rolling ? 27 : kMax, dtype, rolling, &t.cache).ok());
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
// succeeds; each failure must be OutOfMemory and leave the cache's length.
// Returns the failures.
int FailEachAllocation(const std::function<mha::Status()>& call, const mha::KVCache& cache) {
  int failures = 0;
  for (long k = 0;; ++k) {
    const int64_t length = cache.length();
    g_allocations_left = k;
    const mha::Status status = call();
    const bool failed = g_allocations_left.exchange(-1) < 0;
    if (status.ok()) {
      EXPECT_FALSE(failed) << "allocation " << k << " failed and the call succeeded";
      return failures;
    }
    ++failures;
    EXPECT_TRUE(failed) << status.message();
    EXPECT_EQ(status.code(), mha::StatusCode::kOutOfMemory) << status.message();
    EXPECT_EQ(cache.length(), length) << "allocation " << k << ": " << status.message();
    if (k >= 1000 || ::testing::Test::HasFailure()) return failures;
  }
}

class AllocFailureTest : public ::testing::TestWithParam<KVCacheDtype> {};

// A rolling cache too, its ring full from the second round on: a failed call
// may have overwritten its oldest keys (no longer held then), which its retry
// never sees.
TEST_P(AllocFailureTest, EveryFailedAllocationLeavesModuleAndCacheAsTheyWere) {
  for (const bool rolling : {false, true}) {
    SCOPED_TRACE(rolling ? "rolling" : "full");
    Twin failing = MakeTwin(GetParam(), rolling), control = MakeTwin(GetParam(), rolling);
    // Each kind of call: the decode kernel, averaged and per-head weights
    // (weights are what the result allocated after the cache grew), flash.
    const Call calls[] = {{"prompt", 5, false, true},
                          {"decode step", 1, false, true},
                          {"step with averaged weights", 1, true, true},
                          {"step with per-head weights", 2, true, false},
                          {"chunk of 20 (flash)", 20, false, true}};
    uint32_t seed = 20;
    for (int round = 0; round < (rolling ? 2 : 1); ++round) {
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
// prompt, a decode step and a chunk of 20 (flash), grouped-query heads.
TEST_P(AllocFailureTest, ScaledDotProductAttentionLeavesTheCacheAsItWas) {
  mha::KVCacheConfig config{1, 2, 8, 8, kMax, GetParam()};
  std::unique_ptr<mha::KVCache> failing, control;
  ASSERT_TRUE(mha::KVCache::Create(config, &failing).ok());
  ASSERT_TRUE(mha::KVCache::Create(config, &control).ok());
  uint32_t seed = 40;
  for (int64_t rows : {5, 1, 20}) {
    SCOPED_TRACE(rows);
    const std::vector<float> q = RandomVector(4 * rows * 8, seed++), kv = RandomVector(2 * rows * 8, seed++);
    const TensorView qv{q.data(), {1, 4, rows, 8}}, kvv{kv.data(), {1, 2, rows, 8}};
    mha::SdpaOptions o;
    o.enable_gqa = true;
    o.is_causal = true;
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
    EXPECT_EQ(actual.shape, expected.shape);
    EXPECT_EQ(actual.data, expected.data);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllocFailureTest,
                         ::testing::Values(KVCacheDtype::kFloat32, KVCacheDtype::kFloat16),
                         [](const testing::TestParamInfo<KVCacheDtype>& info) {
                           return std::string(mha::KVCacheDtypeName(info.param));
                         });

}  // namespace
}  // namespace mha_test
