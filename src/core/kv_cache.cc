#include "src/kv_cache.h"

#include <new>

#include <cstring>
#include <string>

#include "src/kernels/kernels.h"
#include "src/core/kv_cache_internal.h"
#include "src/tensor.h"

namespace mha {

const char* KVCacheDtypeName(KVCacheDtype dtype) {
  return dtype == KVCacheDtype::kFloat16 ? "float16" : "float32";
}

KVCache::KVCache(const KVCacheConfig& config, uint64_t owner)
    : config_(config), owner_(owner), state_(new State) {}

KVCache::~KVCache() = default;

int64_t KVCache::length() const { return state_->length.load(std::memory_order_acquire); }

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
  const size_t element_size = c.dtype == KVCacheDtype::kFloat16 ? 2 : 4;
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
  if (!state.keys || !state.values) {
    return Status::OutOfMemory("cache: not enough memory for max_length " +
                               std::to_string(c.max_length) + " (" +
                               std::to_string((key_elements + value_elements) * element_size) +
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
  } else {
    std::memcpy(dst, src, count * sizeof(float));
  }
}

void WriteRows(const NewKVRows& rows, size_t new_keys, const KVCacheConfig& c,
               size_t head_dim, size_t start, uint8_t* storage) {
  const size_t heads = static_cast<size_t>(c.num_kv_heads);
  const size_t element = c.dtype == KVCacheDtype::kFloat16 ? 2 : 4;
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
  if (c.dtype == KVCacheDtype::kFloat16) {
    rows.keys_half = reinterpret_cast<const uint16_t*>(keys);
    rows.values_half = reinterpret_cast<const uint16_t*>(values);
  } else {
    rows.keys = reinterpret_cast<const float*>(keys);
    rows.values = reinterpret_cast<const float*>(values);
  }
  return rows;
}

}  // namespace mha
