// A grow-only, vector-aligned float buffer: steady-state calls reuse it.
#ifndef MHA_SRC_ALIGNED_BUFFER_H_
#define MHA_SRC_ALIGNED_BUFFER_H_

#include <cstddef>
#include <new>
#include <utility>

#include "hwy/aligned_allocator.h"

namespace mha {

class AlignedBuffer {
 public:
  // Returns at least n floats (contents unspecified). Throws std::bad_alloc.
  float* Get(size_t n) {
    if (n > capacity_) {
      // Keep the old buffer if the new one cannot be had.
      auto grown = hwy::AllocateAligned<float>(n);
      if (!grown) throw std::bad_alloc();
      data_ = std::move(grown);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<float[]> data_;
  size_t capacity_ = 0;
};

}  // namespace mha

#endif  // MHA_SRC_ALIGNED_BUFFER_H_
