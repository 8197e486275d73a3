// KVCache::Select, Clone and Resize: a cache's held keys and values copied
// into new storage (a new cache's, or its own, of another max_length).
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "src/core/kv_cache_internal.h"
#include "src/kv_cache.h"

namespace mha {

namespace {

// A cache's storage, as copies see it.
struct Slots {
  uint8_t* keys;
  uint8_t* values;
  size_t max_length;
};

// Copies the keys and values of positions [length - held, length) of
// key/value head `from_head` of `from` to head `to_head` of `to` (heads
// counted over batch entries: n * num_kv_heads + g), each from its slot in
// `from` to its slot in `to` (p % max_length of each: they may differ).
void CopyHead(const KVCacheConfig& c, int64_t length, int64_t held, const Slots& from,
              size_t from_head, const Slots& to, size_t to_head) {
  const size_t element = ElementSize(c.dtype);
  for (const auto& [source, target, dim] :
       {std::make_tuple(from.keys, to.keys, c.head_dim),
        std::make_tuple(from.values, to.values, c.v_head_dim)}) {
    const size_t row = static_cast<size_t>(dim) * element;
    const uint8_t* head_from = source + from_head * from.max_length * row;
    uint8_t* head_to = target + to_head * to.max_length * row;
    for (size_t p = static_cast<size_t>(length - held); p < static_cast<size_t>(length); ++p) {
      std::memcpy(head_to + (p % to.max_length) * row, head_from + (p % from.max_length) * row,
                  row);
    }
  }
}

}  // namespace

Status KVCache::Select(const int32_t* indices, size_t count, std::unique_ptr<KVCache>* out) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t n = config_.batch_size;
  if (indices == nullptr || count == 0) {
    return Status::InvalidArgument("select: indices: expected at least one batch entry, got none");
  }
  for (size_t b = 0; b < count; ++b) {
    if (indices[b] < 0 || indices[b] >= n) {
      return Status::InvalidArgument("select: indices[" + std::to_string(b) +
                                     "]: expected an index in [0, " + std::to_string(n) +
                                     ") (the cache's batch_size), got " +
                                     std::to_string(indices[b]));
    }
  }
  KVCacheConfig c = config_;
  c.batch_size = static_cast<int64_t>(count);
  std::unique_ptr<KVCache> selected;
  MHA_RETURN_IF_ERROR(KVCacheAccess::Create(c, owner_, window_left_, &selected));
  selected->state_->length.store(length(), std::memory_order_relaxed);
  selected->state_->held.store(held(), std::memory_order_relaxed);
  const size_t max = static_cast<size_t>(c.max_length), heads = static_cast<size_t>(c.num_kv_heads);
  const Slots from{state_->keys.get(), state_->values.get(), max};
  const Slots to{selected->state_->keys.get(), selected->state_->values.get(), max};
  for (size_t b = 0; b < count; ++b) {
    selected->state_->padding[b] = state_->padding[indices[b]];
    for (size_t g = 0; g < heads; ++g) {
      CopyHead(c, length(), held(), from, static_cast<size_t>(indices[b]) * heads + g, to,
               b * heads + g);
    }
  }
  *out = std::move(selected);
  return Status::Ok();
}

Status KVCache::Clone(std::unique_ptr<KVCache>* out) const {
  std::vector<int32_t> every(static_cast<size_t>(config_.batch_size));
  std::iota(every.begin(), every.end(), 0);
  return Select(every.data(), every.size(), out);
}

Status KVCache::Resize(int64_t max_length) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t held_now = held();
  if (max_length < held_now) {
    return Status::InvalidArgument(
        "resize: expected a max_length >= " + std::to_string(held_now) +
        " (the keys the cache holds per entry; truncate first to hold fewer), got " +
        std::to_string(max_length) + "; the cache is left as it was");
  }
  KVCacheConfig c = config_;
  c.max_length = max_length;
  std::unique_ptr<KVCache> resized;
  Status status = KVCacheAccess::Create(c, owner_, window_left_, &resized);
  if (!status.ok()) {
    return Status(status.code(), "resize: " + status.message() + "; the cache is left as it was");
  }
  const Slots from{state_->keys.get(), state_->values.get(),
                   static_cast<size_t>(config_.max_length)};
  const Slots to{resized->state_->keys.get(), resized->state_->values.get(),
                 static_cast<size_t>(max_length)};
  const size_t heads = static_cast<size_t>(c.batch_size * c.num_kv_heads);
  for (size_t head = 0; head < heads; ++head) {
    CopyHead(c, length(), held_now, from, head, to, head);
  }
  state_->keys.swap(resized->state_->keys);
  state_->values.swap(resized->state_->values);
  config_.max_length = max_length;
  return Status::Ok();
}

}  // namespace mha
