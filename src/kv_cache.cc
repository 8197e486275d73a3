#include "src/kv_cache.h"

#include <cstring>
#include <string>

#include "src/kernels/kernels.h"
#include "src/tensor.h"

namespace mha {

const char* KVCacheDtypeName(KVCacheDtype dtype) {
  return dtype == KVCacheDtype::kFloat16 ? "float16" : "float32";
}

Status KVCache::Create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out) {
  return CreateOwned(config, 0, out);
}

Status KVCache::CreateOwned(const KVCacheConfig& config, uint64_t owner,
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
  std::unique_ptr<KVCache> cache(new (std::nothrow) KVCache(config, owner));
  if (cache == nullptr) return Status::OutOfMemory("cache: not enough memory");
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(c.num_kv_heads);
  const size_t key_elements = n * static_cast<size_t>(c.head_dim);
  const size_t value_elements = n * static_cast<size_t>(c.v_head_dim);
  cache->keys_ = hwy::AllocateAligned<uint8_t>(key_elements * element_size);
  cache->values_ = hwy::AllocateAligned<uint8_t>(value_elements * element_size);
  if (!cache->keys_ || !cache->values_) {
    return Status::OutOfMemory("cache: not enough memory for max_length " +
                               std::to_string(c.max_length) + " (" +
                               std::to_string((key_elements + value_elements) * element_size) +
                               " bytes)");
  }
  *out = std::move(cache);
  return Status::Ok();
}

Status KVCache::Truncate(int64_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (length < 0 || length > length_) {
    return Status::InvalidArgument("truncate: expected a length in [0, " +
                                   std::to_string(length_) + "] (the keys the cache holds), got " +
                                   std::to_string(length));
  }
  length_ = length;
  return Status::Ok();
}

std::string KVCache::Describe() const {
  const KVCacheConfig& c = config_;
  return "cache (batch_size " + std::to_string(c.batch_size) + ", num_kv_heads " +
         std::to_string(c.num_kv_heads) + ", head_dim " + std::to_string(c.head_dim) +
         ", v_head_dim " + std::to_string(c.v_head_dim) + ", max_length " +
         std::to_string(c.max_length) + ", " + KVCacheDtypeName(c.dtype) + ", holding " +
         std::to_string(length_) + ")";
}

Status KVCache::CheckAppend(int64_t new_keys) const {
  if (new_keys > config_.max_length - length_) {
    return Status::InvalidArgument("cache: appending " + std::to_string(new_keys) +
                                   " keys to a cache holding " + std::to_string(length_) +
                                   " would exceed its max_length " +
                                   std::to_string(config_.max_length) +
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

void WriteRows(const KVCache::NewRows& rows, size_t new_keys, const KVCacheConfig& c,
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

void KVCache::Write(const NewRows& keys, const NewRows& values, size_t new_keys) {
  const size_t start = static_cast<size_t>(length_);
  WriteRows(keys, new_keys, config_, static_cast<size_t>(config_.head_dim), start, keys_.get());
  WriteRows(values, new_keys, config_, static_cast<size_t>(config_.v_head_dim), start,
            values_.get());
}

KVCache::Rows KVCache::Read(size_t length, bool half_ok, AlignedBuffer* scratch) const {
  const size_t heads = static_cast<size_t>(config_.num_kv_heads);
  const size_t kd = static_cast<size_t>(config_.head_dim), vd = static_cast<size_t>(config_.v_head_dim);
  const bool convert = config_.dtype == KVCacheDtype::kFloat16 && !half_ok;
  // Rows per (entry, head) block: the storage's, or the converted copy's.
  const size_t block = convert ? length : static_cast<size_t>(config_.max_length);
  Rows rows;
  rows.k_step = kd;
  rows.k_head = block * kd;
  rows.k_batch = heads * rows.k_head;
  rows.v_step = vd;
  rows.v_head = block * vd;
  rows.v_batch = heads * rows.v_head;
  if (config_.dtype == KVCacheDtype::kFloat32) {
    rows.keys = reinterpret_cast<const float*>(keys_.get());
    rows.values = reinterpret_cast<const float*>(values_.get());
  } else if (half_ok) {
    rows.keys_half = reinterpret_cast<const uint16_t*>(keys_.get());
    rows.values_half = reinterpret_cast<const uint16_t*>(values_.get());
  } else {
    const size_t blocks = static_cast<size_t>(config_.batch_size) * heads;
    const size_t max_length = static_cast<size_t>(config_.max_length);
    float* keys = scratch->Get(blocks * length * (kd + vd) + 1);
    float* values = keys + blocks * length * kd;
    const uint16_t* k16 = reinterpret_cast<const uint16_t*>(keys_.get());
    const uint16_t* v16 = reinterpret_cast<const uint16_t*>(values_.get());
    for (size_t b = 0; b < blocks; ++b) {
      kernels::HalfToFloat(k16 + b * max_length * kd, length * kd, keys + b * length * kd);
      kernels::HalfToFloat(v16 + b * max_length * vd, length * vd, values + b * length * vd);
    }
    rows.keys = keys;
    rows.values = values;
  }
  return rows;
}

}  // namespace mha
