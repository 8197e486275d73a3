// The core's side of mha::KVCache (src/kv_cache.h): its storage and lock,
// appending and reading keys. Used by MultiheadAttention::Forward and
// ScaledDotProductAttention; not part of the API.
#ifndef MHA_SRC_CORE_KV_CACHE_INTERNAL_H_
#define MHA_SRC_CORE_KV_CACHE_INTERNAL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "src/attention/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/kv_cache.h"
#include "src/status.h"

namespace mha {

struct Rotation;  // src/attention/rotary.h

// Bytes of one stored key or value feature.
inline size_t ElementSize(KVCacheDtype dtype) { return dtype == KVCacheDtype::kFloat32 ? 4 : 2; }

// A call's padding (its prefill mask's or the remembered), the mask and the
// positions made from it (src/core/multihead_attention_padding.cc): grown by
// the first call that needs them and kept with the cache.
struct PadBuffers {
  std::vector<int64_t> call_padding;
  std::vector<uint8_t> mask;
  std::vector<int32_t> positions;
};

// Storage, head-major: per batch entry and key/value head, max_length rows
// of head_dim keys (of v_head_dim values): row t of head g of entry n
// starts at element ((n * num_kv_heads + g) * max_length + t) * head_dim.
// So a head's keys are one contiguous run that decoding streams through
// (position-major rows made each head read a slice of every row, and the
// prefetched rest of the row was gone before the next head needed it).
// Elements are float, or uint16_t (IEEE half or bfloat16 bits). Position p
// sits in row p % max_length: row p itself unless rolling, where the rows
// are a ring holding the last `held` positions.
struct KVCache::State {
  std::mutex mutex;  // held by each call that reads or writes the cache
  // Written under `mutex`; read without it by KVCache::length() / held().
  std::atomic<int64_t> length{0};
  std::atomic<int64_t> held{0};
  hwy::AlignedFreeUniquePtr<uint8_t[]> keys, values;
  // batch_size counters for Reorder, allocated with the storage so that
  // reordering allocates nothing (src/core/kv_cache.cc).
  hwy::AlignedFreeUniquePtr<int32_t[]> reorder_marks;
  // Per batch entry the pad slots remembered from a prefill's key padding
  // mask (docs/design.md, "Caches an app keeps"): positions 0 .. padding[n]
  // - 1 of entry n are pads. Then batch_size more, Reorder's scratch; both
  // allocated with the storage.
  hwy::AlignedFreeUniquePtr<int64_t[]> padding;
  PadBuffers pad_buffers;
  // The held keys and values the current call may overwrite (a full rolling
  // ring's oldest), saved so that a failed call can put them back: grown on
  // the first such call and kept, not allocated per call.
  AlignedBuffer overwritten;
  // Keys a streaming cache dropped to make room for the current call
  // (MakeRoom), whose other held rows `overwritten` holds as they were; 0
  // when it made none.
  int64_t made_room = 0;
  // MakeRoom's rotary angles and a float key row: grown by the first call
  // that makes room and kept, not allocated per decoding step.
  std::vector<float> room_angles, room_row;
};

// New rows to append: the features of head g of new key j of batch entry n
// start at data + n * batch_stride + j * seq_stride + g * head_stride.
struct NewKVRows {
  const float* data;
  size_t batch_stride, seq_stride, head_stride;
};

// Where attention reads keys and values: row j of the keys of batch entry n,
// key/value head g starts at keys + n * k_batch + g * k_head + j * k_step
// (values likewise), or in the 16-bit rows keys16 / values16 when storage
// says so; with ring != 0, key j is row j % ring (a rolling cache).
// Callers describe their own inputs with one; KVCacheAccess::Read describes
// the cache.
struct KVRows {
  const float* keys = nullptr;
  const float* values = nullptr;
  kernels::Storage storage = kernels::Storage::kFloat32;
  const uint16_t* keys16 = nullptr;
  const uint16_t* values16 = nullptr;
  size_t k_batch = 0, k_head = 0, k_step = 0;
  size_t v_batch = 0, v_head = 0, v_step = 0;
  size_t ring = 0;

  // Points `head` at the keys and values of entry n, head g (and sets its strides).
  void PointHead(size_t n, size_t g, kernels::AttentionHead* head) const {
    const size_t k = n * k_batch + g * k_head, v = n * v_batch + g * v_head;
    head->storage = storage;
    if (storage != kernels::Storage::kFloat32) {
      head->k16 = keys16 + k;
      head->v16 = values16 + v;
    } else {
      head->k = keys + k;
      head->v = values + v;
    }
    head->k_stride = k_step;
    head->v_stride = v_step;
    head->ring = ring;
  }
};

// The rows that hold keys, per batch entry and head: one run of slots, or
// two where a rolling cache's ring wraps.
struct HeldSlots {
  struct Run {
    size_t first = 0, count = 0;
  } runs[2];
};

class KVCacheAccess {
 public:
  // A cache tied to module `owner` (MultiheadAttention::CreateKVCache), whose
  // left window (-1: none) a rolling cache needs; owner 0 for a
  // free-standing one (window_left 0: each call brings its window).
  static Status Create(const KVCacheConfig& config, uint64_t owner, int64_t window_left,
                       std::unique_ptr<KVCache>* out);

  // Load (KVCache::Load) tied as Create ties; `module`: the config a
  // module's caches have (num_kv_heads, head_dim, v_head_dim are compared),
  // or null for a free-standing cache.
  static Status Load(const uint8_t* bytes, size_t size, const KVCacheConfig* module,
                     uint64_t owner, int64_t window_left, std::unique_ptr<KVCache>* out);

  static uint64_t Owner(const KVCache& cache) { return cache.owner_; }

  // Held by each call that reads or writes the cache, for the whole call.
  static std::unique_lock<std::mutex> Lock(KVCache& cache) {
    return std::unique_lock<std::mutex>(cache.state_->mutex);
  }

  // "cache (batch_size 1, num_kv_heads 8, head_dim 64, v_head_dim 64,
  // max_length 4096, float32, holding 12)", for error messages.
  static std::string Describe(const KVCache& cache);

  // OK when `new_keys` more keys fit (a rolling cache: when the ring keeps
  // every key the call's queries may see, with left window `window_left`,
  // -1 for none); else an error naming the numbers.
  static Status CheckAppend(const KVCache& cache, int64_t new_keys, int64_t window_left);

  // Stores new_keys keys and values per batch entry at positions length()..
  // (converted to the cache's dtype). They count only after Grow; the
  // caller holds the lock and has checked CheckAppend(new_keys). A rolling
  // cache's new keys overwrite its oldest.
  static void Write(KVCache& cache, const NewKVRows& keys, const NewKVRows& values,
                    size_t new_keys);

  // Records that positions [length(), length) of every batch entry now hold
  // keys and values. The caller holds the lock.
  static void Grow(KVCache& cache, int64_t length);

  // Before a call that may write new_keys keys: copies the held keys and
  // values they would overwrite (a full rolling ring's oldest) aside, into
  // the cache's State::overwritten. Throws std::bad_alloc, the cache
  // unchanged. The caller holds the lock.
  static void SaveOverwritten(KVCache& cache, int64_t new_keys);

  // The keys and values of `count` positions from `first` on (their slots,
  // wrapping in a ring) of every head, copied into State::overwritten when
  // `save` (grown: throws std::bad_alloc, the cache unchanged), else back
  // from it (no allocation). The caller holds the lock.
  static void CopySlots(KVCache& cache, size_t first, size_t count, bool save);

  // After a call that may have written new_keys keys (Write) and then
  // failed: puts back what SaveOverwritten saved, so that the cache is as
  // it was (length, held and contents). Does not allocate.
  static void Abandon(KVCache& cache, int64_t new_keys);

  // The keys a call appending new_keys sees before its own: length(), or in
  // a streaming cache (keep >= 0) what is left after MakeRoom.
  static int64_t KeysBefore(const KVCache& cache, int64_t new_keys);

  // A streaming cache, before a call appending new_keys (checked by
  // CheckAppend): drops the keys after the first `keep` that the call needs
  // room for and moves the others down, turning their rotary features by
  // `rotation` (null: none) to their new slots. The rows it moves are saved
  // first (State::overwritten): throws std::bad_alloc with the cache
  // unchanged. The caller holds the lock.
  static void MakeRoom(KVCache& cache, int64_t new_keys, const Rotation* rotation);
  // After a failed call: undoes MakeRoom (length, rows, padding). Does not
  // allocate.
  static void UndoMakeRoom(KVCache& cache);

  // The slots of the held positions.
  static HeldSlots Held(const KVCache& cache);

  // The remembered pad slots per batch entry (batch_size of them), and a
  // call's buffers for them. The caller holds the lock.
  static int64_t* Padding(KVCache& cache) { return cache.state_->padding.get(); }
  static PadBuffers& PadScratch(KVCache& cache) { return cache.state_->pad_buffers; }

  // The storage, for attention: float32 rows, or 16-bit ones (keys16,
  // values16) that the kernels convert as they read them.
  static KVRows Read(const KVCache& cache);
};

}  // namespace mha

#endif  // MHA_SRC_CORE_KV_CACHE_INTERNAL_H_
