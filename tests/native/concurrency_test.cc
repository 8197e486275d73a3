// Several modules used from several threads at once (own pools, one shared
// pool, no pool, one module shared by threads) give exactly the sequential
// results; and many forwards of mixed shapes keep the process RSS flat.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "gtest/gtest.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

// One module with random parameters and the inputs of one forward call.
struct Job {
  std::unique_ptr<mha::MultiheadAttention> module;
  std::vector<float> query, key, value;
  mha::Shape q_shape, kv_shape;
  std::vector<uint8_t> kpm;  // (N, S), some keys masked
  mha::ForwardOptions options;

  mha::Status Run(mha::ForwardResult* result, mha::ThreadPool* pool) {
    const mha::Shape v_shape = kv_shape;
    return module->Forward({query.data(), q_shape}, {key.data(), kv_shape}, {value.data(), v_shape},
                           options, result, pool);
  }
};

// Self- or cross-attention (L, N, E) with a key padding mask and per-job options.
Job MakeJob(int64_t E, int64_t H, int64_t L, int64_t S, int64_t N, uint32_t seed) {
  Job job;
  mha::MultiheadAttentionConfig config;
  config.embed_dim = E;
  config.num_heads = H;
  config.add_zero_attn = seed % 2 == 0;
  EXPECT_TRUE(mha::MultiheadAttention::Create(config, &job.module).ok());
  for (const mha::ParameterSpec& spec : job.module->Parameters()) {
    const std::vector<float> values = RandomVector(mha::NumElements(spec.shape), seed++);
    EXPECT_TRUE(job.module->LoadParameter(spec.name, values.data(), spec.shape).ok());
  }
  job.q_shape = {L, N, E};
  job.kv_shape = {S, N, E};
  job.query = RandomVector(L * N * E, seed++);
  job.key = RandomVector(S * N * E, seed++);
  job.value = RandomVector(S * N * E, seed++);
  job.kpm.assign(N * S, 0);
  for (int64_t n = 0; n < N; ++n) job.kpm[n * S + (n + seed) % S] = 1;
  job.options.key_padding_mask = mha::MaskView::Bool(job.kpm.data(), {N, S});
  job.options.is_causal = seed % 3 == 0;
  job.options.average_attn_weights = seed % 2 == 1;
  return job;
}

std::vector<Job> MakeJobs() {
  std::vector<Job> jobs;
  jobs.push_back(MakeJob(16, 2, 7, 7, 2, 10));
  jobs.push_back(MakeJob(32, 4, 70, 33, 1, 20));
  jobs.push_back(MakeJob(8, 1, 3, 130, 3, 31));
  jobs.push_back(MakeJob(64, 8, 65, 65, 2, 40));
  return jobs;
}

// Bitwise (NaN-safe): each element is computed by the same code whichever
// thread runs it, so results must not differ at all.
bool SameBits(const mha::Tensor& a, const mha::Tensor& b) {
  return a.shape == b.shape && a.data.size() == b.data.size() &&
         std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
}

bool SameResult(const mha::ForwardResult& a, const mha::ForwardResult& b) {
  return SameBits(a.output, b.output) && SameBits(a.weights, b.weights);
}

TEST(ConcurrencyTest, ModulesOnManyThreadsMatchSequentialResults) {
  std::vector<Job> jobs = MakeJobs();
  std::vector<mha::ForwardResult> expected(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) ASSERT_TRUE(jobs[j].Run(&expected[j], nullptr).ok());

  mha::ThreadPool shared_pool(2);
  constexpr int kRounds = 40;
  std::atomic<int> mismatches{0}, errors{0};
  // Two threads per module: one module is also used from two threads at once.
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 2 * jobs.size(); ++t) {
    threads.emplace_back([&, t] {
      Job& job = jobs[t % jobs.size()];
      mha::ThreadPool own_pool(2);
      mha::ForwardResult result;
      for (int round = 0; round < kRounds; ++round) {
        mha::ThreadPool* pools[] = {nullptr, &own_pool, &shared_pool};
        if (!job.Run(&result, pools[(round + t) % 3]).ok()) {
          ++errors;
          continue;
        }
        if (!SameResult(result, expected[t % jobs.size()])) ++mismatches;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of " << 2 * jobs.size() * kRounds << " forwards";

  // And once more on this thread, after all that.
  for (size_t j = 0; j < jobs.size(); ++j) {
    mha::ForwardResult again;
    ASSERT_TRUE(jobs[j].Run(&again, &shared_pool).ok());
    EXPECT_TRUE(SameResult(again, expected[j])) << "job " << j;
  }
}

#if defined(__SANITIZE_ADDRESS__)
#define MHA_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MHA_UNDER_ASAN 1
#endif
#endif

// Resident set size in bytes, from /proc/self/statm (Linux).
size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  size_t total_pages = 0, resident_pages = 0;
  const int read = std::fscanf(f, "%zu %zu", &total_pages, &resident_pages);
  std::fclose(f);
  return read == 2 ? resident_pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

TEST(SoakTest, MixedShapesKeepResidentMemoryFlat) {
#ifdef MHA_UNDER_ASAN
  GTEST_SKIP() << "ASan's quarantine holds freed memory; it checks leaks itself";
#else
  std::vector<Job> jobs = MakeJobs();
  mha::ThreadPool pool(2);
  auto run = [&](int forwards) {
    for (int i = 0; i < forwards; ++i) {
      // Each call a new result object, as callers usually do; alternate pools.
      mha::ForwardResult fresh;
      ASSERT_TRUE(jobs[i % jobs.size()].Run(&fresh, i % 2 ? &pool : nullptr).ok());
    }
  };
  run(200);  // warm-up: every buffer reaches its largest size
  const size_t warm = ResidentBytes();
  ASSERT_GT(warm, 0u) << "/proc/self/statm unreadable";
  run(10000);
  const size_t after = ResidentBytes();
  // The largest job needs ~1 MiB of buffers; growth of a few MiB would mean
  // per-call allocations that are never returned.
  EXPECT_LT(after, warm + (4u << 20)) << "RSS grew from " << warm << " to " << after << " bytes";
#endif
}

}  // namespace
}  // namespace mha_test
