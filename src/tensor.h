// Non-owning views of the caller's tensors and masks, and shape helpers.
#ifndef MHA_SRC_TENSOR_H_
#define MHA_SRC_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/status.h"

namespace mha {

using Shape = std::vector<int64_t>;

// A row-major, contiguous float32 tensor owned by the caller.
struct TensorView {
  const float* data = nullptr;
  Shape shape;

  // TensorView{}: an argument not given (key and value with a cache).
  bool absent() const { return data == nullptr && shape.empty(); }
};

enum class MaskKind { kNone, kBool, kFloat };

// A bool mask (one byte per element, nonzero = true) or an additive float mask.
// What `true` means depends on the caller: nn.MultiheadAttention masks keys
// that are true, scaled_dot_product_attention keeps them.
struct MaskView {
  MaskKind kind = MaskKind::kNone;
  const uint8_t* bool_data = nullptr;
  const float* float_data = nullptr;
  Shape shape;

  bool present() const { return kind != MaskKind::kNone; }
  const void* data() const {
    return kind == MaskKind::kBool ? static_cast<const void*>(bool_data) : float_data;
  }
  static MaskView Bool(const uint8_t* data, Shape shape) {
    return MaskView{MaskKind::kBool, data, nullptr, std::move(shape)};
  }
  static MaskView Float(const float* data, Shape shape) {
    return MaskView{MaskKind::kFloat, nullptr, data, std::move(shape)};
  }
};

// An owned float32 tensor, as the core returns results.
struct Tensor {
  std::vector<float> data;
  Shape shape;
};

// "(2, 3, 4)", as error messages print shapes.
std::string ShapeString(const Shape& shape);

// Rejects negative dims, and null data behind a non-empty shape, naming `arg`.
Status CheckDimsAndData(const std::string& arg, const Shape& shape, const void* data);

// "a, b, c", as error messages list names.
std::string JoinNames(const std::vector<std::string>& names);

// Product of the dims; 0 for an empty shape list is never used (scalars are rejected).
int64_t NumElements(const Shape& shape);

// The product of the dims as a double: no overflow for hostile shapes.
double ElementCount(const Shape& shape);

// True when `elements` values of `element_size` bytes can be one buffer: the
// byte count fits in size_t (32 bits in WebAssembly), so no size or offset
// computed from the dims wraps around.
bool Addressable(double elements, size_t element_size = sizeof(float));

}  // namespace mha

#endif  // MHA_SRC_TENSOR_H_
