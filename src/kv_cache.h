// mha::KVCache: the keys and values of earlier calls, kept for decoding (see
// DESIGN.md, "Decoding: KV cache, grouped-query heads, rotary positions").
//
// A cache holds up to max_length keys (and their values) per batch entry and
// key/value head, in float32 or IEEE float16. All its memory is allocated at
// creation: appending never allocates, so memory is what max_length says.
// Keys are stored as attention reads them (projected, biased and rotated).
//
// A module's cache (MultiheadAttention::CreateKVCache) is tied to that module
// and attends through MultiheadAttention::Forward; a free-standing cache
// (KVCache::Create) serves ScaledDotProductAttention. Calls that use a cache
// lock it: calls on one cache run one at a time, in the order they lock it.
#ifndef MHA_SRC_KV_CACHE_H_
#define MHA_SRC_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "hwy/aligned_allocator.h"
#include "src/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/status.h"

namespace mha {

enum class KVCacheDtype { kFloat32, kFloat16 };

// "float32" / "float16", as JS names them.
const char* KVCacheDtypeName(KVCacheDtype dtype);

struct KVCacheConfig {
  int64_t batch_size = 0;    // N, > 0
  int64_t num_kv_heads = 0;  // key/value heads, > 0
  int64_t head_dim = 0;      // features per key head, > 0
  int64_t v_head_dim = 0;    // features per value head, > 0
  int64_t max_length = 0;    // keys it can hold per batch entry, > 0
  KVCacheDtype dtype = KVCacheDtype::kFloat32;
};

class KVCache {
 public:
  // A free-standing cache (for ScaledDotProductAttention). Errors name the
  // config field; OutOfMemory when its storage cannot be had.
  static Status Create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out);

  const KVCacheConfig& config() const { return config_; }
  // Keys held per batch entry (every entry holds the same number).
  int64_t length() const { return length_; }

  // Keeps the first `length` keys (0 <= length <= length()); the rest are
  // forgotten. An error leaves the cache as it was.
  Status Truncate(int64_t length);
  void Reset() { Truncate(0); }

  // ---- For the core (multihead_attention, scaled_dot_product_attention) ----

  // 0 for a free-standing cache, else the id of the module that made it.
  uint64_t owner() const { return owner_; }

  // "cache (batch_size 1, num_kv_heads 8, head_dim 64, v_head_dim 64,
  // max_length 4096, float32, holding 12)", for error messages.
  std::string Describe() const;

  // OK when `new_keys` more keys fit; else an error naming the numbers.
  Status CheckAppend(int64_t new_keys) const;

  // Storage, head-major: per batch entry and key/value head, max_length rows
  // of head_dim keys (of v_head_dim values): row t of head g of entry n
  // starts at element ((n * num_kv_heads + g) * max_length + t) * head_dim.
  // So a head's keys are one contiguous run that decoding streams through
  // (position-major rows made each head read a slice of every row, and the
  // prefetched rest of the row was gone before the next head needed it: 5x
  // slower, measured). Elements are float, or uint16_t (IEEE half bits) for
  // kFloat16.
  void* keys() { return keys_.get(); }
  void* values() { return values_.get(); }
  const void* keys() const { return keys_.get(); }
  const void* values() const { return values_.get(); }
  size_t element_size() const { return config_.dtype == KVCacheDtype::kFloat16 ? 2 : 4; }

  // New rows to append: the features of head g of new key j of batch entry
  // n start at data + n * batch_stride + j * seq_stride + g * head_stride.
  struct NewRows {
    const float* data;
    size_t batch_stride, seq_stride, head_stride;
  };
  // Stores new_keys keys and values per batch entry at positions length()..
  // (converted to float16 if so stored). They count only after Grow; the
  // caller has checked CheckAppend(new_keys).
  void Write(const NewRows& keys, const NewRows& values, size_t new_keys);

  // Records that the rows [length(), length) of every batch entry now hold
  // keys and values; length() <= length <= max_length.
  void Grow(int64_t length) { length_ = length; }

  // Where attention reads keys and values: row j of the keys of batch entry
  // n, key/value head g starts at keys + n * k_batch + g * k_head + j * k_step
  // (values likewise), or in the float16 rows keys_half / values_half when
  // those are set. Callers describe their own inputs with one; Read
  // describes the cache.
  struct Rows {
    const float* keys = nullptr;
    const float* values = nullptr;
    const uint16_t* keys_half = nullptr;
    const uint16_t* values_half = nullptr;
    size_t k_batch = 0, k_head = 0, k_step = 0;
    size_t v_batch = 0, v_head = 0, v_step = 0;

    // Points `head` at the keys and values of entry n, head g (and sets its strides).
    void PointHead(size_t n, size_t g, kernels::AttentionHead* head) const {
      const size_t k = n * k_batch + g * k_head, v = n * v_batch + g * v_head;
      if (keys_half != nullptr) {
        head->k_half = keys_half + k;
        head->v_half = values_half + v;
      } else {
        head->k = keys + k;
        head->v = values + v;
      }
      head->k_stride = k_step;
      head->v_stride = v_step;
    }
  };
  // The first `length` keys and values of every entry, for attention: as
  // float32 (the storage itself, or float16 converted into `scratch`), or, when
  // `half_ok` and stored so, as the float16 storage itself.
  Rows Read(size_t length, bool half_ok, AlignedBuffer* scratch) const;

  // Held by each call that reads or writes the cache.
  std::mutex& mutex() { return mutex_; }

  // Used by MultiheadAttention::CreateKVCache.
  static Status CreateOwned(const KVCacheConfig& config, uint64_t owner,
                            std::unique_ptr<KVCache>* out);

 private:
  KVCache(const KVCacheConfig& config, uint64_t owner) : config_(config), owner_(owner) {}

  KVCacheConfig config_;
  uint64_t owner_ = 0;
  int64_t length_ = 0;
  hwy::AlignedFreeUniquePtr<uint8_t[]> keys_, values_;
  std::mutex mutex_;
};

}  // namespace mha

#endif  // MHA_SRC_KV_CACHE_H_
