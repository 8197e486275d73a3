// A bounds-checked reader for the .safetensors format
// (8-byte little-endian header length, JSON header, raw little-endian data).
#ifndef MHA_SRC_IO_SAFETENSORS_H_
#define MHA_SRC_IO_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/status.h"
#include "src/tensor.h"

namespace mha {

// Every dtype of the format. Only F32, F16 and BF16 convert to float32; the
// others parse (a checkpoint's I64 position ids or BOOL buffers never stop a
// load) and are refused only when asked for as floats.
enum class DType {
  kF32, kF16, kBF16, kBool, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kI32, kU32, kF64, kI64, kU64
};

size_t DTypeSize(DType dtype);        // bytes per element
const char* DTypeName(DType dtype);   // as the header spells it: "F32", "I64", ...

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  const uint8_t* data;  // points into the caller's buffer; null when not given
  size_t size;          // bytes
  size_t shard = 0;     // index of the file it came from (ParseSafetensorsShards)
  uint64_t offset = 0;  // of its first byte from the start of that file
};

struct SafetensorsFile {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" string pairs
};

// Parses `bytes` (which must outlive `*out`). Validates the header length,
// the JSON, every dtype, shape and offset pair (in bounds, matching
// shape * element size, not overlapping). An unknown dtype is an error
// naming the tensor.
Status ParseSafetensors(const uint8_t* bytes, size_t size, SafetensorsFile* out);

// The same from the first `size` bytes of a file of `file_size` bytes (at
// least its length field and header): offsets are checked against
// `file_size`, and entries whose data is not within `size` get a null `data`.
// Lets a caller read a header before copying any tensor's bytes.
Status ParseSafetensorsHeader(const uint8_t* bytes, size_t size, uint64_t file_size,
                              SafetensorsFile* out);

// One file of a checkpoint: its first `size` bytes of `file_size`.
struct SafetensorsShard {
  const uint8_t* bytes;
  size_t size;
  uint64_t file_size;
};

// Parses the shards of one checkpoint into one set of tensors (each entry
// records its shard). A name in two shards is an error naming both.
// Metadata: the first shard's value of each key.
Status ParseSafetensorsShards(const std::vector<SafetensorsShard>& shards, SafetensorsFile* out);

// Name -> shape of every tensor (what layout detection reads).
std::map<std::string, Shape> TensorShapes(const SafetensorsFile& file);

// Converts an F32/F16/BF16 entry to float32.
Status ToFloat32(const std::string& name, const SafetensorsEntry& entry, std::vector<float>* out);

}  // namespace mha

#endif  // MHA_SRC_IO_SAFETENSORS_H_
