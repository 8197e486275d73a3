#include "src/attention/decode_attention.h"
#include "src/attention/shared_work.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace mha {
namespace {

using kernels::AttentionHead;
using kernels::DecodeGroup;

// Keys per range at least: a range's fixed costs (queries, state, merge)
// stay small beside its keys.
constexpr size_t kMinKeysPerRange = 128;
// Ranges per thread: items are claimed dynamically, so a few per thread even
// out threads slowed by other load.
constexpr size_t kRangesPerThread = 4;
// The split is planned for this many threads whatever the pool holds (the
// WebAssembly build's pool size), so that the ranges, and so the output's
// bits, are the same at every thread count; one thread merely runs them all.
constexpr size_t kSplitThreads = 8;

std::atomic<size_t> g_forced_keys_per_range{0};  // SetDecodeSplitForTesting
std::atomic<size_t> g_split_calls{0};

bool SameKeys(const AttentionHead& a, const AttentionHead& b) {
  return a.k == b.k && a.v == b.v && a.k16 == b.k16 && a.v16 == b.v16 &&
         a.rule.key_bias == b.rule.key_bias && a.masked_keys == b.masked_keys;
}

// Appends the rows of `head` (its queries) to `group`.
void AddRows(const AttentionHead& head, DecodeGroup* group) {
  for (size_t i = 0; i < head.num_queries; ++i) {
    const size_t r = group->num_rows++;
    group->q[r] = head.q + i * head.q_stride;
    group->out[r] = head.out + i * head.out_stride;
    group->rule[r] = head.rule.Row(i);
  }
}

DecodeGroup StartGroup(const AttentionHead& head) {
  DecodeGroup g;
  g.storage = head.storage;
  const bool narrow = head.storage != kernels::Storage::kFloat32;
  g.k = narrow ? static_cast<const void*>(head.k16) : head.k;
  g.v = narrow ? static_cast<const void*>(head.v16) : head.v;
  g.k_stride = head.k_stride;
  g.v_stride = head.v_stride;
  g.ring = head.ring;
  g.num_keys = head.masked_keys;
  g.qk_dim = head.qk_dim;
  g.v_dim = head.v_dim;
  g.scale = head.scale;
  return g;
}

// Keys no row reads (ScoreRule::Keys) are left out of the ranges: sets the
// group's first_key and num_keys (its end).
void LimitKeys(DecodeGroup* g) {
  size_t begin = SIZE_MAX, end = 0;
  for (size_t r = 0; r < g->num_rows; ++r) {
    const kernels::KeyRange keys = g->rule[r].Keys(0, g->num_keys);
    if (keys.begin == keys.end) continue;
    begin = std::min(begin, keys.begin);
    end = std::max(end, keys.end);
  }
  g->num_keys = end;
  g->first_key = std::min(begin, end);
}

}  // namespace

void RunDecodeHeads(const std::vector<AttentionHead>& heads, ThreadPool* pool,
                    AlignedBuffer* scratch) {
  // Grow-only, one per calling thread; the pool's threads read this one.
  thread_local std::vector<DecodeGroup> buffer;
  std::vector<DecodeGroup>& groups = buffer;
  groups.clear();
  for (size_t i = 0; i < heads.size(); ++i) {
    const AttentionHead& h = heads[i];
    if (i == 0 || !SameKeys(h, heads[i - 1]) ||
        groups.back().num_rows + h.num_queries > kernels::kMaxDecodeRows) {
      groups.push_back(StartGroup(h));
    }
    AddRows(h, &groups.back());
  }
  size_t total_keys = 0, state_size = 0, scratch_size = 0;
  double work = 0.0;  // a size_t product could wrap on wasm32
  for (DecodeGroup& g : groups) {
    LimitKeys(&g);
    total_keys += g.num_keys - g.first_key;
    state_size = std::max(state_size, kernels::DecodeStateSize(g));
    scratch_size = std::max(scratch_size, kernels::DecodeScratchSize(g));
    work += static_cast<double>(g.num_rows) * (g.num_keys - g.first_key) * (g.qk_dim + g.v_dim);
  }
  const size_t forced = g_forced_keys_per_range.load(std::memory_order_relaxed);
  if (forced == 0) pool = SharedPool(pool, work);
  const size_t min_keys = forced != 0 ? forced : kMinKeysPerRange;
  const size_t threads = pool != nullptr ? pool->num_threads() : 1;
  // Ranges per group: enough items for kSplitThreads (two at least when
  // forced), few keys each no less than min_keys.
  const size_t wanted = std::max<size_t>(
      forced != 0 ? 2 : 1, (kSplitThreads * kRangesPerThread + groups.size() - 1) / groups.size());
  const size_t max_keys = total_keys / groups.size() + 1;
  const size_t ranges = std::max<size_t>(1, std::min(wanted, max_keys / min_keys));
  if (ranges > 1) g_split_calls.fetch_add(1, std::memory_order_relaxed);
  state_size = (state_size + 15) / 16 * 16;
  scratch_size = (scratch_size + 63) / 64 * 64;
  float* states = scratch->Get(groups.size() * ranges * state_size + threads * scratch_size);
  float* thread_scratch = states + groups.size() * ranges * state_size;
  auto task = [&](size_t begin, size_t end, size_t thread) {
    for (size_t item = begin; item < end; ++item) {
      const DecodeGroup& g = groups[item / ranges];
      const size_t range = item % ranges;
      // In 64 bits: keys * ranges can wrap a 32-bit size_t (wasm32).
      const uint64_t keys = g.num_keys - g.first_key;
      const size_t j0 = g.first_key + static_cast<size_t>(keys * range / ranges);
      const size_t j1 = g.first_key + static_cast<size_t>(keys * (range + 1) / ranges);
      kernels::DecodePartial(g, j0, j1, states + item * state_size,
                             thread_scratch + thread * scratch_size);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(groups.size() * ranges, task);
  } else {
    task(0, groups.size() * ranges, 0);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    kernels::DecodeMerge(groups[i], states + i * ranges * state_size, ranges, state_size);
  }
}

void SetDecodeSplitForTesting(size_t min_keys_per_range) {
  g_forced_keys_per_range.store(min_keys_per_range, std::memory_order_relaxed);
}

size_t DecodeSplitCalls() { return g_split_calls.load(std::memory_order_relaxed); }

}  // namespace mha
