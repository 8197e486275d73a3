#include "src/attention.h"

#include <algorithm>
#include <limits>

#include "src/decode_attention.h"

namespace mha {
namespace {

// Queries per work item: a multiple of the kernel's query chunk (64), small
// enough to balance causal work across threads.
constexpr size_t kQueriesPerItem = 64;

// Multiply-adds of every head's scores and values (upper bound: all keys).
double AttentionWork(const std::vector<kernels::AttentionHead>& heads) {
  double work = 0.0;
  for (const kernels::AttentionHead& h : heads) {
    work += static_cast<double>(h.num_queries) * h.num_keys() * (h.qk_dim + h.v_dim);
  }
  return work;
}

}  // namespace

const float* AdditiveMask(const MaskView& mask, uint8_t masked_value, std::vector<float>* storage) {
  if (mask.kind == MaskKind::kFloat) return mask.float_data;
  if (mask.kind == MaskKind::kNone) return nullptr;
  const size_t n = static_cast<size_t>(NumElements(mask.shape));
  storage->resize(n);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const uint8_t value = mask.bool_data[i] != 0 ? 1 : 0;
    (*storage)[i] = value == masked_value ? neg_inf : 0.0f;
  }
  return storage->data();
}

void RunAttentionHeads(const std::vector<kernels::AttentionHead>& heads, ThreadPool* pool,
                       AlignedBuffer* scratch) {
  if (heads.empty()) return;
  const kernels::AttentionHead& first = heads[0];
  if (DecodeShaped(first.num_queries, first.weights != nullptr, first.num_extra)) {
    RunDecodeHeads(heads, pool, scratch);
    return;
  }
  pool = SharedPool(pool, AttentionWork(heads));
  const size_t queries = heads[0].num_queries;
  const size_t chunks = (queries + kQueriesPerItem - 1) / kQueriesPerItem;
  size_t per_thread = 0;
  for (const kernels::AttentionHead& head : heads) {
    per_thread = std::max(per_thread, kernels::AttentionScratchSize(head));
  }
  // Round up to 64 floats so each thread's share starts on its own cache lines.
  per_thread = (per_thread + 63) / 64 * 64;
  const size_t threads = pool != nullptr ? pool->num_threads() : 1;
  float* base = scratch->Get(per_thread * threads);
  auto task = [&](size_t begin, size_t end, size_t thread) {
    float* mine = base + thread * per_thread;
    for (size_t item = begin; item < end; ++item) {
      const kernels::AttentionHead& head = heads[item / chunks];
      // Last chunks first: under a causal mask they cost the most, and the
      // cheap first chunks even out the threads' finishing times.
      const size_t q0 = (chunks - 1 - item % chunks) * kQueriesPerItem;
      const size_t q1 = std::min(queries, q0 + kQueriesPerItem);
      kernels::Attention(head, q0, q1, mine);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(heads.size() * chunks, task);
  } else {
    task(0, heads.size() * chunks, 0);
  }
}

}  // namespace mha
