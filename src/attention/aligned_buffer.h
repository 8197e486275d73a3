// A grow-only, vector-aligned float buffer: steady-state calls reuse it.
#ifndef MHA_SRC_ATTENTION_ALIGNED_BUFFER_H_
#define MHA_SRC_ATTENTION_ALIGNED_BUFFER_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#include "hwy/aligned_allocator.h"  // HWY_ALIGNMENT

namespace mha {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // A moved-from buffer is empty: its next Get allocates.
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::move(other.data_)), capacity_(std::exchange(other.capacity_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }

  // Returns at least n floats (contents unspecified). Throws std::bad_alloc.
  // Memory comes from the aligned operator new, like every other allocation
  // of a call, so one replacement of it (tests/native/alloc_failure_test.cc)
  // can make any of them fail (the nothrow form calls the replaced one).
  float* Get(size_t n) {
    if (n > capacity_) {
      // Keep the old buffer if the new one cannot be had. The nothrow form:
      // under AddressSanitizer (allocator_may_return_null) the throwing one
      // aborts instead of throwing.
      float* grown = static_cast<float*>(
          ::operator new(n * sizeof(float), std::align_val_t{HWY_ALIGNMENT}, std::nothrow));
      if (grown == nullptr) throw std::bad_alloc();
      data_.reset(grown);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete(p, std::align_val_t{HWY_ALIGNMENT}); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t capacity_ = 0;
};

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_ALIGNED_BUFFER_H_
