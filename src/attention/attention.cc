#include "src/attention/attention.h"
#include "src/attention/shared_work.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "src/attention/decode_attention.h"

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

// Keys and values of one head are read in place when their rows are
// contiguous, and copied so first otherwise. Rows of the fused QKV projection
// are 3E floats apart: a key tile's 64 rows then fall into a few L1 sets (a
// 6 KiB stride maps them to 2 groups of 4) and as many pages, and the
// kernel's tiles run slower on them. One copy per KV head serves all its
// query heads and chunks; a copy per tile is slower still, its cache misses
// no longer hidden behind arithmetic.
bool StridedKeys(const kernels::AttentionHead& h) {
  return h.k != nullptr && (h.k_stride != h.qk_dim || h.v_stride != h.v_dim);
}

// Whether head i reads the keys and values of head i - 1 (the query heads
// of a GQA group are consecutive): they then share one copy.
bool SharesKeys(const std::vector<kernels::AttentionHead>& heads, size_t i) {
  if (i == 0) return false;
  const kernels::AttentionHead &a = heads[i - 1], &b = heads[i];
  return a.k == b.k && a.v == b.v && a.k_stride == b.k_stride && a.v_stride == b.v_stride &&
         a.masked_keys == b.masked_keys && a.ring == b.ring;
}

// Floats of head i's copy: none when it reads in place or shares the copy
// of the head before it.
size_t PackedFloats(const std::vector<kernels::AttentionHead>& heads, size_t i) {
  const kernels::AttentionHead& h = heads[i];
  if (!StridedKeys(h) || SharesKeys(heads, i)) return 0;
  return h.masked_keys * (h.qk_dim + h.v_dim);
}

// Points h at its masked keys and values copied in order at `packed`.
void PointAtPacked(kernels::AttentionHead* h, float* packed) {
  h->k = packed;
  h->k_stride = h->qk_dim;
  h->v = packed + h->masked_keys * h->qk_dim;
  h->v_stride = h->v_dim;
  h->ring = 0;
}

// Copies h's masked keys and values to `packed` (PackedFloats floats) and
// points h at them.
void PackKeys(kernels::AttentionHead* h, float* packed) {
  float* k = packed;
  float* v = packed + h->masked_keys * h->qk_dim;
  for (size_t j = 0; j < h->masked_keys; ++j) {
    const float* k_row = h->k + kernels::RingRow(j, h->ring) * h->k_stride;
    const float* v_row = h->v + kernels::RingRow(j, h->ring) * h->v_stride;
    for (size_t e = 0; e < h->qk_dim; ++e) k[j * h->qk_dim + e] = k_row[e];
    for (size_t e = 0; e < h->v_dim; ++e) v[j * h->v_dim + e] = v_row[e];
  }
  PointAtPacked(h, packed);
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

AttentionKernel ChooseAttentionKernel(size_t queries, bool need_weights, size_t num_extra) {
  if (need_weights) return AttentionKernel::kWeights;
  const bool decode = num_extra == 0 && queries > 0 && queries <= kernels::kMaxDecodeRows;
  return decode ? AttentionKernel::kDecode : AttentionKernel::kFlash;
}

void RunAttentionHeads(const std::vector<kernels::AttentionHead>& heads, AttentionKernel kernel,
                       ThreadPool* pool, AlignedBuffer* scratch) {
  if (heads.empty()) return;
  if (kernel == AttentionKernel::kDecode) {
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
  std::vector<size_t> packed_at(heads.size() + 1, per_thread * threads);
  for (size_t i = 0; i < heads.size(); ++i) {
    packed_at[i + 1] = packed_at[i] + (PackedFloats(heads, i) + 63) / 64 * 64;
  }
  float* base = scratch->Get(packed_at.back());
  std::vector<kernels::AttentionHead> packed_heads;
  const std::vector<kernels::AttentionHead>* run = &heads;
  if (packed_at.back() > packed_at[0]) {
    packed_heads = heads;
    auto pack = [&](size_t begin, size_t end, size_t) {
      for (size_t i = begin; i < end; ++i) {
        if (!StridedKeys(heads[i])) continue;
        size_t owner = i;  // the first head of those sharing i's keys: it copies them
        while (SharesKeys(heads, owner)) --owner;
        if (owner == i) {
          PackKeys(&packed_heads[i], base + packed_at[i]);
        } else {
          PointAtPacked(&packed_heads[i], base + packed_at[owner]);
        }
      }
    };
    if (pool != nullptr) {
      pool->ParallelFor(heads.size(), pack);
    } else {
      pack(0, heads.size(), 0);
    }
    run = &packed_heads;
  }
  auto task = [&](size_t begin, size_t end, size_t thread) {
    float* mine = base + thread * per_thread;
    for (size_t item = begin; item < end; ++item) {
      const kernels::AttentionHead& head = (*run)[item / chunks];
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
