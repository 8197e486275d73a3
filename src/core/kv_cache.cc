#include "src/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "src/kernels/kernels.h"
#include "src/core/kv_cache_internal.h"
#include "src/tensor.h"

namespace mha {

const char* KVCacheDtypeName(KVCacheDtype dtype) {
  switch (dtype) {
    case KVCacheDtype::kFloat16: return "float16";
    case KVCacheDtype::kBFloat16: return "bfloat16";
    default: return "float32";
  }
}

namespace {

// Bytes of one stored key or value feature.
size_t ElementSize(KVCacheDtype dtype) { return dtype == KVCacheDtype::kFloat32 ? 4 : 2; }

// The key and value elements of a cache of config c.
size_t Elements(const KVCacheConfig& c) {
  const size_t rows = static_cast<size_t>(c.batch_size * c.max_length * c.num_kv_heads);
  return rows * static_cast<size_t>(c.head_dim + c.v_head_dim);
}

}  // namespace

KVCache::KVCache(const KVCacheConfig& config, uint64_t owner)
    : config_(config), owner_(owner), state_(new State) {}

KVCache::~KVCache() = default;

int64_t KVCache::length() const { return state_->length.load(std::memory_order_acquire); }

size_t KVCache::bytes() const { return Elements(config_) * ElementSize(config_.dtype); }

Status KVCache::Create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out) {
  return KVCacheAccess::Create(config, 0, out);
}

Status KVCacheAccess::Create(const KVCacheConfig& config, uint64_t owner,
                             std::unique_ptr<KVCache>* out) {
  const KVCacheConfig& c = config;
  const std::pair<const char*, int64_t> dims[] = {
      {"batch_size", c.batch_size}, {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
      {"v_head_dim", c.v_head_dim}, {"max_length", c.max_length}};
  for (const auto& [name, value] : dims) {
    if (value <= 0) {
      return Status::InvalidArgument(std::string("cache: ") + name +
                                     ": expected a positive integer, got " +
                                     std::to_string(value));
    }
  }
  const size_t element_size = ElementSize(c.dtype);
  const double rows = static_cast<double>(c.batch_size) * static_cast<double>(c.max_length);
  const double widest = static_cast<double>(c.num_kv_heads) *
                        static_cast<double>(c.head_dim > c.v_head_dim ? c.head_dim : c.v_head_dim);
  if (!Addressable(rows * widest, element_size) || c.max_length > (int64_t{1} << 40)) {
    return Status::OutOfMemory("cache: out of memory for batch_size " +
                               std::to_string(c.batch_size) + " and max_length " +
                               std::to_string(c.max_length) +
                               ": its storage would exceed the address space");
  }
  std::unique_ptr<KVCache> cache;
  try {
    cache.reset(new KVCache(config, owner));
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("cache: not enough memory");
  }
  KVCache::State& state = *cache->state_;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(c.num_kv_heads);
  const size_t key_elements = n * static_cast<size_t>(c.head_dim);
  const size_t value_elements = n * static_cast<size_t>(c.v_head_dim);
  state.keys = hwy::AllocateAligned<uint8_t>(key_elements * element_size);
  state.values = hwy::AllocateAligned<uint8_t>(value_elements * element_size);
  state.reorder_marks = hwy::AllocateAligned<int32_t>(static_cast<size_t>(c.batch_size));
  if (!state.keys || !state.values || !state.reorder_marks) {
    return Status::OutOfMemory("cache: not enough memory for max_length " +
                               std::to_string(c.max_length) + " (" +
                               std::to_string(cache->bytes()) +
                               " bytes)");
  }
  *out = std::move(cache);
  return Status::Ok();
}

Status KVCache::Truncate(int64_t length) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t held = state_->length.load(std::memory_order_relaxed);
  if (length < 0 || length > held) {
    return Status::InvalidArgument("truncate: expected a length in [0, " + std::to_string(held) +
                                   "] (the keys the cache holds), got " + std::to_string(length));
  }
  state_->length.store(length, std::memory_order_release);
  return Status::Ok();
}

namespace {

// The held rows of the batch entries in one storage (keys or values): entry
// n's rows of key/value head g are the held_bytes at Run(n, g).
struct HeldRuns {
  uint8_t* base;
  size_t heads, head_bytes, held_bytes;

  uint8_t* Run(size_t n, size_t g) const { return base + (n * heads + g) * head_bytes; }

  // Entry `to` becomes a copy of entry `from` (another one).
  void Copy(size_t to, size_t from) const {
    for (size_t g = 0; g < heads; ++g) std::memcpy(Run(to, g), Run(from, g), held_bytes);
  }

  // Rotates the cycle through `start` (from[x] != x on it, and it comes back
  // to start): each entry x on it becomes the old entry from[x]. A chunk at a
  // time through a stack buffer: k + 1 copies of each chunk for k entries.
  void Rotate(const int32_t* from, size_t start) const {
    uint8_t chunk[4096];
    for (size_t g = 0; g < heads; ++g) {
      for (size_t i = 0; i < held_bytes; i += sizeof(chunk)) {
        const size_t bytes = std::min(sizeof(chunk), held_bytes - i);
        std::memcpy(chunk, Run(start, g) + i, bytes);
        size_t x = start;
        for (; static_cast<size_t>(from[x]) != start; x = static_cast<size_t>(from[x])) {
          std::memcpy(Run(x, g) + i, Run(static_cast<size_t>(from[x]), g) + i, bytes);
        }
        std::memcpy(Run(x, g) + i, chunk, bytes);
      }
    }
  }
};

// Makes entry b of `runs` the old entry from[b], for b in [0, n), in place.
// marks[x] (n of them) is -1 for an entry that is not (or no longer) to be
// written, else how many entries still to be written read it. First, every
// entry that no one still needs is written (each write may free its source:
// the chain is followed); what is left to write then reads only itself in
// cycles (every entry there has exactly one reader left), each rotated. A
// source of several entries is overwritten only after all of them have read
// it, so duplicates and drops need no buffer of an entry's size.
void Permute(const int32_t* from, size_t n, int32_t* marks, const HeldRuns (&runs)[2]) {
  for (size_t x = 0; x < n; ++x) marks[x] = static_cast<size_t>(from[x]) == x ? -1 : 0;
  for (size_t x = 0; x < n; ++x) {
    if (marks[x] >= 0 && marks[from[x]] >= 0) ++marks[from[x]];
  }
  for (size_t start = 0; start < n; ++start) {
    for (size_t x = start; marks[x] == 0;) {
      const size_t source = static_cast<size_t>(from[x]);
      for (const HeldRuns& r : runs) r.Copy(x, source);
      marks[x] = -1;
      if (marks[source] > 0) --marks[source];
      x = source;
    }
  }
  for (size_t start = 0; start < n; ++start) {
    if (marks[start] < 0) continue;
    for (const HeldRuns& r : runs) r.Rotate(from, start);
    for (size_t x = start; marks[x] >= 0; x = static_cast<size_t>(from[x])) marks[x] = -1;
  }
}

}  // namespace

Status KVCache::Reorder(const int32_t* indices, size_t count) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t n = config_.batch_size;
  const std::string unchanged = "; the cache is left as it was";
  if (count != static_cast<uint64_t>(n) || indices == nullptr) {
    return Status::InvalidArgument("reorder: indices: expected batch_size (" + std::to_string(n) +
                                   ") entries, got " +
                                   (indices == nullptr ? "none" : std::to_string(count)) +
                                   unchanged);
  }
  for (size_t b = 0; b < count; ++b) {
    if (indices[b] < 0 || indices[b] >= n) {
      return Status::InvalidArgument("reorder: indices[" + std::to_string(b) +
                                     "]: expected an index in [0, " + std::to_string(n) +
                                     ") (the cache's batch_size), got " +
                                     std::to_string(indices[b]) + unchanged);
    }
  }
  const size_t held = static_cast<size_t>(state_->length.load(std::memory_order_relaxed));
  const size_t element = ElementSize(config_.dtype);
  const size_t heads = static_cast<size_t>(config_.num_kv_heads);
  const size_t max_length = static_cast<size_t>(config_.max_length);
  const size_t k_row = static_cast<size_t>(config_.head_dim) * element;
  const size_t v_row = static_cast<size_t>(config_.v_head_dim) * element;
  const HeldRuns runs[2] = {{state_->keys.get(), heads, max_length * k_row, held * k_row},
                            {state_->values.get(), heads, max_length * v_row, held * v_row}};
  Permute(indices, count, state_->reorder_marks.get(), runs);
  return Status::Ok();
}

std::string KVCacheAccess::Describe(const KVCache& cache) {
  const KVCacheConfig& c = cache.config_;
  return "cache (batch_size " + std::to_string(c.batch_size) + ", num_kv_heads " +
         std::to_string(c.num_kv_heads) + ", head_dim " + std::to_string(c.head_dim) +
         ", v_head_dim " + std::to_string(c.v_head_dim) + ", max_length " +
         std::to_string(c.max_length) + ", " + KVCacheDtypeName(c.dtype) + ", holding " +
         std::to_string(cache.length()) + ")";
}

Status KVCacheAccess::CheckAppend(const KVCache& cache, int64_t new_keys) {
  const int64_t held = cache.length(), max_length = cache.config_.max_length;
  if (new_keys > max_length - held) {
    return Status::InvalidArgument("cache: appending " + std::to_string(new_keys) +
                                   " keys to a cache holding " + std::to_string(held) +
                                   " would exceed its max_length " + std::to_string(max_length) +
                                   "; the cache is left as it was");
  }
  return Status::Ok();
}

namespace {

// Copies (or converts) `count` floats into the cache's storage.
void Store(const float* src, size_t count, KVCacheDtype dtype, uint8_t* dst) {
  if (dtype == KVCacheDtype::kFloat16) {
    kernels::FloatToHalf(src, count, reinterpret_cast<uint16_t*>(dst));
  } else if (dtype == KVCacheDtype::kBFloat16) {
    kernels::FloatToBFloat16(src, count, reinterpret_cast<uint16_t*>(dst));
  } else {
    std::memcpy(dst, src, count * sizeof(float));
  }
}

void WriteRows(const NewKVRows& rows, size_t new_keys, const KVCacheConfig& c,
               size_t head_dim, size_t start, uint8_t* storage) {
  const size_t heads = static_cast<size_t>(c.num_kv_heads);
  const size_t element = ElementSize(c.dtype);
  const size_t max_length = static_cast<size_t>(c.max_length);
  for (size_t n = 0; n < static_cast<size_t>(c.batch_size); ++n) {
    for (size_t g = 0; g < heads; ++g) {
      for (size_t j = 0; j < new_keys; ++j) {
        const float* src = rows.data + n * rows.batch_stride + j * rows.seq_stride +
                           g * rows.head_stride;
        const size_t row = (n * heads + g) * max_length + start + j;
        Store(src, head_dim, c.dtype, storage + row * head_dim * element);
      }
    }
  }
}

}  // namespace

void KVCacheAccess::Write(KVCache& cache, const NewKVRows& keys, const NewKVRows& values,
                          size_t new_keys) {
  const KVCacheConfig& c = cache.config_;
  const size_t start = static_cast<size_t>(cache.length());
  WriteRows(keys, new_keys, c, static_cast<size_t>(c.head_dim), start, cache.state_->keys.get());
  WriteRows(values, new_keys, c, static_cast<size_t>(c.v_head_dim), start,
            cache.state_->values.get());
}

KVRows KVCacheAccess::Read(const KVCache& cache) {
  const KVCacheConfig& c = cache.config_;
  const size_t heads = static_cast<size_t>(c.num_kv_heads), max_length = static_cast<size_t>(c.max_length);
  KVRows rows;
  rows.k_step = static_cast<size_t>(c.head_dim);
  rows.k_head = max_length * rows.k_step;
  rows.k_batch = heads * rows.k_head;
  rows.v_step = static_cast<size_t>(c.v_head_dim);
  rows.v_head = max_length * rows.v_step;
  rows.v_batch = heads * rows.v_head;
  const uint8_t* keys = cache.state_->keys.get();
  const uint8_t* values = cache.state_->values.get();
  if (c.dtype != KVCacheDtype::kFloat32) {
    rows.storage = c.dtype == KVCacheDtype::kFloat16 ? kernels::Storage::kFloat16
                                                     : kernels::Storage::kBFloat16;
    rows.keys16 = reinterpret_cast<const uint16_t*>(keys);
    rows.values16 = reinterpret_cast<const uint16_t*>(values);
  } else {
    rows.keys = reinterpret_cast<const float*>(keys);
    rows.values = reinterpret_cast<const float*>(values);
  }
  return rows;
}

}  // namespace mha
