#include "src/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "src/kernels/kernels.h"
#include "src/core/kv_cache_internal.h"
#include "src/core/option_rules.h"
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

// The key and value elements of a cache of config c.
size_t Elements(const KVCacheConfig& c) {
  const size_t rows = static_cast<size_t>(c.batch_size * c.max_length * c.num_kv_heads);
  return rows * static_cast<size_t>(c.head_dim + c.v_head_dim);
}

}  // namespace

KVCache::KVCache(const KVCacheConfig& config, uint64_t owner, int64_t window_left)
    : config_(config), owner_(owner), window_left_(window_left), state_(new State) {}

KVCache::~KVCache() = default;

int64_t KVCache::length() const { return state_->length.load(std::memory_order_acquire); }
int64_t KVCache::held() const { return state_->held.load(std::memory_order_acquire); }

size_t KVCache::bytes() const { return Elements(config_) * ElementSize(config_.dtype); }

Status KVCache::Create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out) {
  return KVCacheAccess::Create(config, 0, 0, out);
}

Status KVCacheAccess::Create(const KVCacheConfig& config, uint64_t owner, int64_t window_left,
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
  // Keys and values together, as bytes() counts them: each half may fit where
  // their sum wraps.
  const double elements = rows * static_cast<double>(c.num_kv_heads) *
                          (static_cast<double>(c.head_dim) + static_cast<double>(c.v_head_dim));
  if (!Addressable(elements, element_size) || c.max_length > kMaxCacheLength) {
    return Status::OutOfMemory("cache: out of memory for batch_size " +
                               std::to_string(c.batch_size) + " and max_length " +
                               std::to_string(c.max_length) +
                               ": its storage would exceed the address space");
  }
  if (c.keep != -1) {
    if (c.keep < 0 || c.keep >= c.max_length) {
      return Status::InvalidArgument("cache: rolling.keep: expected an integer in [0, max_length - 1] "
                                     "= [0, " + std::to_string(c.max_length - 1) +
                                     "] (the keys kept as sinks), got " + std::to_string(c.keep));
    }
    if (c.rolling || owner == 0) {
      return Status::InvalidArgument("cache: rolling.keep: a StreamingLLM cache is a module's "
                                     "(its rotary re-rotates the keys it moves), and not also a "
                                     "window's rolling one");
    }
  }
  if (c.rolling && window_left < 0) {
    return Status::InvalidArgument("cache: rolling needs a module with a finite left window "
                                   "(window), and this module has none: every key stays "
                                   "visible, so none may be dropped (rolling: { keep } makes a "
                                   "StreamingLLM cache, which needs none)");
  }
  std::unique_ptr<KVCache> cache;
  try {
    cache.reset(new KVCache(config, owner, c.rolling ? window_left : 0));
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
  state.padding = hwy::AllocateAligned<int64_t>(2 * static_cast<size_t>(c.batch_size));
  if (!state.keys || !state.values || !state.reorder_marks || !state.padding) {
    return Status::OutOfMemory("cache: not enough memory for max_length " +
                               std::to_string(c.max_length) + " (" +
                               std::to_string(cache->bytes()) +
                               " bytes)");
  }
  std::fill(state.padding.get(), state.padding.get() + c.batch_size, int64_t{0});
  *out = std::move(cache);
  return Status::Ok();
}

std::vector<int64_t> KVCache::padding() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return std::vector<int64_t>(state_->padding.get(), state_->padding.get() + config_.batch_size);
}

Status KVCache::Truncate(int64_t length) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t now = state_->length.load(std::memory_order_relaxed);
  const int64_t held = state_->held.load(std::memory_order_relaxed);
  if (length < 0 || length > now) {
    return Status::InvalidArgument("truncate: expected a length in [0, " + std::to_string(now) +
                                   "] (the keys the cache holds), got " + std::to_string(length));
  }
  // A rolling cache keeps what the next query sees: keys length - left ..
  // length - 1 (none for length 0, as reset).
  const int64_t first_needed = std::max<int64_t>(0, length - window_left_);
  if (first_needed < length && first_needed < now - held) {
    return Status::InvalidArgument(
        "truncate: the rolling cache holds positions " + std::to_string(now - held) + ".." +
        std::to_string(now - 1) + " (max_length " + std::to_string(config_.max_length) +
        "); truncating to " + std::to_string(length) + " needs positions " +
        std::to_string(first_needed) + ".." + std::to_string(length - 1) + " (left window " +
        std::to_string(window_left_) + "); the cache is left as it was");
  }
  // Pads past the new length are forgotten with the keys.
  int64_t* padding = state_->padding.get();
  for (int64_t n = 0; n < config_.batch_size; ++n) padding[n] = std::min(padding[n], length);
  state_->held.store(std::max<int64_t>(0, held - (now - length)), std::memory_order_release);
  state_->length.store(length, std::memory_order_release);
  return Status::Ok();
}

std::string KVCacheAccess::Describe(const KVCache& cache) {
  const KVCacheConfig& c = cache.config_;
  return "cache (batch_size " + std::to_string(c.batch_size) + ", num_kv_heads " +
         std::to_string(c.num_kv_heads) + ", head_dim " + std::to_string(c.head_dim) +
         ", v_head_dim " + std::to_string(c.v_head_dim) + ", max_length " +
         std::to_string(c.max_length) + ", " + KVCacheDtypeName(c.dtype) +
         (c.keep >= 0 ? ", streaming, keep " + std::to_string(c.keep) : "") +
         (c.rolling ? ", rolling, length " + std::to_string(cache.length()) + ", holding " +
                          std::to_string(cache.held())
                    : ", holding " + std::to_string(cache.length())) +
         ")";
}

namespace {

// A rolling cache keeps every key a query of the call may see: its left
// window and the new keys fit in the ring, and the keys before the call
// that the first query sees are still held (only a free-standing cache,
// truncated or used with a wider window before, may lack them).
Status CheckRollingAppend(const KVCache& cache, int64_t new_keys, int64_t left) {
  const int64_t max_length = cache.config().max_length;
  const std::string unchanged = "; the cache is left as it was";
  if (left < 0) {
    return Status::InvalidArgument(KVCacheAccess::Describe(cache) +
                                   ": a rolling cache needs a finite left window (window), and "
                                   "this call has none" + unchanged);
  }
  if (max_length < left + new_keys) {
    return Status::InvalidArgument(
        KVCacheAccess::Describe(cache) + ": a rolling cache needs max_length (" +
        std::to_string(max_length) + ") >= left window (" + std::to_string(left) +
        ") + keys appended (" + std::to_string(new_keys) + "); append at most " +
        std::to_string(std::max<int64_t>(0, max_length - left)) + " keys a call" + unchanged);
  }
  const int64_t length = cache.length(), held = cache.held();
  const int64_t first_needed = std::max<int64_t>(0, length - left);
  if (first_needed < length - held) {
    return Status::InvalidArgument(
        KVCacheAccess::Describe(cache) + ": the queries see positions from " +
        std::to_string(first_needed) + " (left window " + std::to_string(left) +
        "), but the rolling cache holds them from " + std::to_string(length - held) + " only" +
        unchanged);
  }
  return Status::Ok();
}

}  // namespace

Status KVCacheAccess::CheckAppend(const KVCache& cache, int64_t new_keys, int64_t window_left) {
  if (cache.config_.rolling) return CheckRollingAppend(cache, new_keys, window_left);
  const int64_t held = cache.length(), max_length = cache.config_.max_length;
  const int64_t keep = cache.config_.keep;
  if (keep >= 0 && new_keys > max_length - keep && held + new_keys > max_length) {
    return Status::InvalidArgument(Describe(cache) + ": appending " + std::to_string(new_keys) +
                                   " keys; a StreamingLLM cache makes room for at most "
                                   "max_length - keep = " + std::to_string(max_length - keep) +
                                   " keys a call; the cache is left as it was");
  }
  if (keep >= 0) return Status::Ok();
  if (new_keys > max_length - held) {
    return Status::InvalidArgument("cache: appending " + std::to_string(new_keys) +
                                   " keys to a cache holding " + std::to_string(held) +
                                   " would exceed its max_length " + std::to_string(max_length) +
                                   "; the cache is left as it was (resize it to a larger "
                                   "max_length, or make a rolling cache for a model with a "
                                   "window)");
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

// Position start + j goes to row (start + j) % max_length: a rolling cache's
// ring (start + j itself otherwise, below max_length).
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
        const size_t row = (n * heads + g) * max_length + (start + j) % max_length;
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

void KVCacheAccess::Grow(KVCache& cache, int64_t length) {
  KVCache::State& s = *cache.state_;
  const int64_t added = length - s.length.load(std::memory_order_relaxed);
  const int64_t held = s.held.load(std::memory_order_relaxed) + added;
  s.held.store(std::min(held, cache.config_.max_length), std::memory_order_release);
  s.length.store(length, std::memory_order_release);
}

namespace {

// Held keys an append of new_keys overwrites: a full rolling ring's oldest.
size_t Overwritten(const KVCache& cache, int64_t new_keys) {
  const int64_t excess = cache.held() + new_keys - cache.config().max_length;
  return cache.config().rolling && excess > 0 ? static_cast<size_t>(excess) : 0;
}

// The slots of `count` positions from `first` on (count <= max_length).
HeldSlots Slots(size_t max_length, size_t first, size_t count) {
  HeldSlots slots;
  slots.runs[0] = {first % max_length, std::min(count, max_length - first % max_length)};
  slots.runs[1] = {0, count - slots.runs[0].count};
  return slots;
}

}  // namespace

void KVCacheAccess::CopySlots(KVCache& cache, size_t first, size_t count, bool save) {
  const KVCacheConfig& c = cache.config_;
  const size_t element = ElementSize(c.dtype), max_length = static_cast<size_t>(c.max_length);
  const size_t heads = static_cast<size_t>(c.batch_size * c.num_kv_heads);
  const HeldSlots slots = Slots(max_length, first, count);
  const size_t bytes = heads * count * static_cast<size_t>(c.head_dim + c.v_head_dim) * element;
  uint8_t* saved = reinterpret_cast<uint8_t*>(
      cache.state_->overwritten.Get(save ? (bytes + 3) / 4 : 0));
  for (const auto& [storage, dim] : {std::make_pair(cache.state_->keys.get(), c.head_dim),
                                     std::make_pair(cache.state_->values.get(), c.v_head_dim)}) {
    const size_t row = static_cast<size_t>(dim) * element;
    for (size_t head = 0; head < heads; ++head) {
      for (const HeldSlots::Run& run : slots.runs) {
        uint8_t* stored = storage + (head * max_length + run.first) * row;
        const size_t n = run.count * row;
        save ? std::memcpy(saved, stored, n) : std::memcpy(stored, saved, n);
        saved += n;
      }
    }
  }
}

void KVCacheAccess::SaveOverwritten(KVCache& cache, int64_t new_keys) {
  const size_t count = Overwritten(cache, new_keys);
  const size_t oldest = static_cast<size_t>(cache.length() - cache.held());
  if (count != 0) CopySlots(cache, oldest, count, true);
}

void KVCacheAccess::Abandon(KVCache& cache, int64_t new_keys) {
  const size_t count = Overwritten(cache, new_keys);
  const size_t oldest = static_cast<size_t>(cache.length() - cache.held());
  if (count != 0) CopySlots(cache, oldest, count, false);
}

HeldSlots KVCacheAccess::Held(const KVCache& cache) {
  return Slots(static_cast<size_t>(cache.config_.max_length),
               static_cast<size_t>(cache.length() - cache.held()),
               static_cast<size_t>(cache.held()));
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
  rows.ring = c.rolling ? max_length : 0;
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
