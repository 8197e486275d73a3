// StreamingLLM caches (KVCacheConfig::keep; docs/design.md, "Caches an app
// keeps"): making room for a call by dropping the oldest keys after the
// sinks and moving the others down, re-rotated to their new slots, as Hugging
// Face's SinkCache (transformers v4.45-v4.47, src/transformers/cache_utils.py,
// SinkCache.update and _get_rerotation_cos_sin) does.
#include <algorithm>
#include <cstring>

#include "src/attention/rotary.h"
#include "src/core/kv_cache_internal.h"
#include "src/kernels/kernels.h"

namespace mha {

int64_t KVCacheAccess::KeysBefore(const KVCache& cache, int64_t new_keys) {
  const KVCacheConfig& c = cache.config_;
  const int64_t length = cache.length();
  return c.keep >= 0 ? std::min(length, c.max_length - new_keys) : length;
}

namespace {

// Turns the first rotation.dim features of `count` key rows (head_dim each,
// in the cache's dtype) by the angles of `angles` (one FillRotaryTable row),
// through the float row `row`.
void RotateKeys(uint8_t* keys, size_t count, size_t head_dim, KVCacheDtype dtype,
                const Rotation& rotation, const float* angles, float* row) {
  const size_t element = ElementSize(dtype), dim = rotation.dim;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* stored = keys + i * head_dim * element;
    uint16_t* bits = reinterpret_cast<uint16_t*>(stored);
    float* x = dtype == KVCacheDtype::kFloat32 ? reinterpret_cast<float*>(stored) : row;
    if (dtype == KVCacheDtype::kFloat16) kernels::HalfToFloat(bits, head_dim, row);
    if (dtype == KVCacheDtype::kBFloat16) kernels::BFloat16ToFloat(bits, head_dim, row);
    kernels::RotateHeads(x, 1, head_dim, dim, rotation.interleaved, angles, angles + dim / 2);
    if (dtype == KVCacheDtype::kFloat16) kernels::FloatToHalf(row, head_dim, bits);
    if (dtype == KVCacheDtype::kBFloat16) kernels::FloatToBFloat16(row, head_dim, bits);
  }
}

}  // namespace

void KVCacheAccess::MakeRoom(KVCache& cache, int64_t new_keys, const Rotation* rotation) {
  KVCache::State& s = *cache.state_;
  const KVCacheConfig& c = cache.config_;
  s.made_room = 0;
  const int64_t length = cache.length(), dropped = length - KeysBefore(cache, new_keys);
  if (dropped <= 0) return;
  const size_t keep = static_cast<size_t>(c.keep), moved = static_cast<size_t>(length) - keep;
  const size_t heads = static_cast<size_t>(c.batch_size * c.num_kv_heads);
  const size_t element = ElementSize(c.dtype), max_length = static_cast<size_t>(c.max_length);
  const size_t k_row = static_cast<size_t>(c.head_dim) * element;
  const size_t v_row = static_cast<size_t>(c.v_head_dim) * element;
  // Everything that may throw first: the angles, a float row, the saved rows.
  // Back by `dropped` slots: Hugging Face's rerotation_cos/sin, cos and sin
  // of (shifted - original) positions, without the attention factor.
  Rotation back = rotation != nullptr ? *rotation : Rotation{};
  back.attention_factor = 1.0;
  const int32_t shift = static_cast<int32_t>(-dropped);
  if (rotation != nullptr) {
    FillRotaryTable(back, 1, 0, &shift, &s.room_angles);
    s.room_row.resize(static_cast<size_t>(c.head_dim));
  }
  CopySlots(cache, keep, moved, true);
  const size_t kept = moved - static_cast<size_t>(dropped), from = keep + static_cast<size_t>(dropped);
  for (size_t head = 0; head < heads; ++head) {
    uint8_t* keys = s.keys.get() + head * max_length * k_row;
    uint8_t* values = s.values.get() + head * max_length * v_row;
    std::memmove(keys + keep * k_row, keys + from * k_row, kept * k_row);
    std::memmove(values + keep * v_row, values + from * v_row, kept * v_row);
    if (rotation != nullptr) {
      RotateKeys(keys + keep * k_row, kept, static_cast<size_t>(c.head_dim), c.dtype, back,
                 s.room_angles.data(), s.room_row.data());
    }
  }
  // Pad slots among the dropped are gone; the scratch half keeps the old counts.
  int64_t* padding = s.padding.get();
  for (int64_t n = 0; n < c.batch_size; ++n) {
    const int64_t pads = padding[n];
    padding[c.batch_size + n] = pads;
    padding[n] = std::min(pads, c.keep) + std::max<int64_t>(0, pads - c.keep - dropped);
  }
  s.made_room = dropped;
  s.length.store(length - dropped, std::memory_order_release);
  s.held.store(length - dropped, std::memory_order_release);
}

void KVCacheAccess::UndoMakeRoom(KVCache& cache) {
  KVCache::State& s = *cache.state_;
  const KVCacheConfig& c = cache.config_;
  if (s.made_room == 0) return;
  const int64_t length = cache.length() + s.made_room;
  CopySlots(cache, static_cast<size_t>(c.keep), static_cast<size_t>(length - c.keep), false);
  std::copy(s.padding.get() + c.batch_size, s.padding.get() + 2 * c.batch_size, s.padding.get());
  s.made_room = 0;
  s.length.store(length, std::memory_order_release);
  s.held.store(length, std::memory_order_release);
}

}  // namespace mha
