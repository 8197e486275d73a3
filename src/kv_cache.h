// mha::KVCache: the keys and values of earlier calls, kept for decoding (see
// docs/design.md, "Decoding: KV cache, grouped-query heads, rotary positions").
//
// A cache holds up to max_length keys (and their values) per batch entry and
// key/value head, in float32, IEEE float16 or bfloat16. All its memory is allocated at
// creation: appending never allocates, so memory is what max_length says.
// Keys are stored as attention reads them (projected, biased and rotated).
//
// A module's cache (MultiheadAttention::CreateKVCache) is tied to that module
// and attends through MultiheadAttention::Forward; a free-standing cache
// (KVCache::Create) serves ScaledDotProductAttention. Calls that use a cache
// lock it: calls on one cache run one at a time, in the order they lock it.
//
// What the core does with a cache (appending, reading) is in
// src/core/kv_cache_internal.h, not part of the API.
#ifndef MHA_SRC_KV_CACHE_H_
#define MHA_SRC_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/status.h"

namespace mha {

enum class KVCacheDtype { kFloat32, kFloat16, kBFloat16 };

// "float32" / "float16" / "bfloat16", as JS names them.
const char* KVCacheDtypeName(KVCacheDtype dtype);

struct KVCacheConfig {
  int64_t batch_size = 0;    // N, > 0
  int64_t num_kv_heads = 0;  // key/value heads, > 0
  int64_t head_dim = 0;      // features per key head, > 0
  int64_t v_head_dim = 0;    // features per value head, > 0
  int64_t max_length = 0;    // keys it can hold per batch entry, > 0
  KVCacheDtype dtype = KVCacheDtype::kFloat32;
  // A rolling cache (docs/design.md, "Generation: beams, ragged batches, sliding
  // windows"), for attention with a finite left window: a ring of
  // max_length slots; an append that would pass max_length drops the oldest
  // keys, which no later query can see. Each call needs max_length >= its
  // left window + the keys it appends.
  bool rolling = false;
  // >= 0: a StreamingLLM cache (docs/design.md, "Caches an app keeps"), a
  // module's only (MultiheadAttention::CreateStreamingKVCache), not rolling:
  // an append that would pass max_length first drops the oldest keys after
  // the first `keep` (the sinks) and moves the others down, re-rotating
  // them (the module's rotary) to their new slots, as Hugging Face's
  // SinkCache does; length() counts the keys held, the positions within the
  // cache. keep < max_length; a call appends at most max_length - keep keys
  // when it makes room. -1: not streaming.
  int64_t keep = -1;
};

class KVCache {
 public:
  // A free-standing cache (for ScaledDotProductAttention). Errors name the
  // config field; OutOfMemory when its storage cannot be had.
  static Status Create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  const KVCacheConfig& config() const { return config_; }
  // Positions appended per batch entry (every entry holds the same number):
  // the keys' count P that the next call's masks and weights span. Safe to
  // call while another thread runs a call on the cache: it sees the length
  // before or after that call.
  int64_t length() const;
  // Keys in memory per batch entry, the last held() positions: length()
  // unless rolling, where it stops at max_length.
  int64_t held() const;

  // Per batch entry, the pad slots it remembers (docs/design.md, "Caches an
  // app keeps"): the leading masked slots of the key padding mask given at
  // its prefill (the first call after creation or a truncate to 0), which
  // later module calls keep masked, their rotary positions counted from the
  // first real token, unless a call passes its own mask or positions.
  std::vector<int64_t> padding() const;

  // Bytes its storage of keys and values takes (what max_length says).
  size_t bytes() const;

  // Keeps the first `length` keys (0 <= length <= length()); the rest are
  // forgotten. A rolling cache of a module with left window `left` needs
  // the keys length - left .. length - 1 still held (a free-standing one:
  // length >= length() - held()). An error leaves the cache as it was.
  Status Truncate(int64_t length);
  void Reset() { Truncate(0); }

  // Beam search (Hugging Face's reorder_cache, index_select(0, beam_idx)):
  // batch entry b becomes the old entry indices[b], for every b in
  // [0, batch_size); indices may repeat some entries and leave out others.
  // Moves only the held rows, in place, without allocating. `count` must be
  // batch_size and every index in [0, batch_size); an error leaves the cache
  // as it was.
  Status Reorder(const int32_t* indices, size_t count);

  // Caches an app keeps (docs/design.md, "Caches an app keeps: save, restore,
  // fork, grow, stream"). Each locks the cache, as calls do.

  // Its config, length, held keys and values in the format of
  // docs/kv-cache-format.md, into `out` (replaced). OutOfMemory when the
  // bytes cannot be had.
  Status Save(std::vector<uint8_t>* out) const;
  // A free-standing cache from Save's bytes (of any cache), continuing
  // exactly where the saved one was. A version, size, checksum or field it
  // does not accept: an error naming it, nothing allocated.
  static Status Load(const uint8_t* bytes, size_t size, std::unique_ptr<KVCache>* out);

  // A new cache (of the same module, or free-standing, config and length)
  // whose entry b holds this cache's entry indices[b], for b in [0, count):
  // any count >= 1 (one prefill to four beams: {0, 0, 0, 0}).
  Status Select(const int32_t* indices, size_t count, std::unique_ptr<KVCache>* out) const;
  // Select of every entry, in order: a copy.
  Status Clone(std::unique_ptr<KVCache>* out) const;
  // Makes max_length `max_length` (>= held()), in place: new storage, the
  // held keys copied; config().max_length changes. An error (too short, out
  // of memory) leaves the cache as it was.
  Status Resize(int64_t max_length);

 private:
  friend class KVCacheAccess;  // the core's side (src/core/kv_cache_internal.h)
  struct State;                // storage, length, lock and Reorder's bookkeeping
  KVCache(const KVCacheConfig& config, uint64_t owner, int64_t window_left);

  KVCacheConfig config_;
  uint64_t owner_ = 0;
  int64_t window_left_ = 0;  // a rolling module cache's module's left window; else 0
  std::unique_ptr<State> state_;
};

}  // namespace mha

#endif  // MHA_SRC_KV_CACHE_H_
