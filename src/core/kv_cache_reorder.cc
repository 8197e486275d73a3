// KVCache::Reorder (beam search): the held rows of the batch entries
// permuted in place, without allocating.
#include <algorithm>
#include <cstring>
#include <string>

#include "src/core/kv_cache_internal.h"
#include "src/kv_cache.h"

namespace mha {

namespace {

// A run of held rows of the batch entries in one storage (keys or values):
// entry n's rows of key/value head g are the held_bytes at Run(n, g).
struct HeldRuns {
  uint8_t* base;
  size_t heads, head_bytes, offset, held_bytes;

  uint8_t* Run(size_t n, size_t g) const { return base + (n * heads + g) * head_bytes + offset; }

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
  const size_t element = ElementSize(config_.dtype);
  const size_t heads = static_cast<size_t>(config_.num_kv_heads);
  const size_t max_length = static_cast<size_t>(config_.max_length);
  const size_t k_row = static_cast<size_t>(config_.head_dim) * element;
  const size_t v_row = static_cast<size_t>(config_.v_head_dim) * element;
  // The held rows: one run of slots, or two when a rolling cache's wrap.
  for (const HeldSlots::Run& run : KVCacheAccess::Held(*this).runs) {
    if (run.count == 0) continue;
    const HeldRuns runs[2] = {
        {state_->keys.get(), heads, max_length * k_row, run.first * k_row, run.count * k_row},
        {state_->values.get(), heads, max_length * v_row, run.first * v_row, run.count * v_row}};
    Permute(indices, count, state_->reorder_marks.get(), runs);
  }
  int64_t* padding = state_->padding.get();
  int64_t* reordered = padding + count;  // the scratch half
  for (size_t b = 0; b < count; ++b) reordered[b] = padding[indices[b]];
  std::copy(reordered, reordered + count, padding);
  return Status::Ok();
}


}  // namespace mha
