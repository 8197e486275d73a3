// A bounds-checked reader for the .safetensors format
// (8-byte little-endian header length, JSON header, raw little-endian data).
#ifndef MHA_SRC_SAFETENSORS_H_
#define MHA_SRC_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/status.h"
#include "src/tensor.h"

namespace mha {

enum class DType { kF32, kF16, kBF16, kBool, kU8 };

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  const uint8_t* data;  // points into the caller's buffer
  size_t size;          // bytes
};

struct SafetensorsFile {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" string pairs
};

// Parses `bytes` (which must outlive `*out`). Validates the header length,
// the JSON, every dtype, shape and offset pair (in bounds, matching
// shape * element size, not overlapping). Other dtypes (I64, F64, ...) are an
// error naming the tensor.
Status ParseSafetensors(const uint8_t* bytes, size_t size, SafetensorsFile* out);

// Converts an F32/F16/BF16 entry to float32.
Status ToFloat32(const std::string& name, const SafetensorsEntry& entry, std::vector<float>* out);

}  // namespace mha

#endif  // MHA_SRC_SAFETENSORS_H_
