#include "src/io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "src/io/json.h"

namespace mha {
namespace {

// The reference implementation refuses headers above 100 MB; so do we, before
// allocating anything for one.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

Status Invalid(const std::string& what) { return Status::InvalidArgument("safetensors: " + what); }

struct DTypeInfo {
  const char* name;
  DType dtype;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {"F32", DType::kF32, 4},         {"F16", DType::kF16, 2},   {"BF16", DType::kBF16, 2},
    {"BOOL", DType::kBool, 1},       {"U8", DType::kU8, 1},     {"I8", DType::kI8, 1},
    {"F8_E5M2", DType::kF8E5M2, 1},  {"F8_E4M3", DType::kF8E4M3, 1},
    {"I16", DType::kI16, 2},         {"U16", DType::kU16, 2},   {"I32", DType::kI32, 4},
    {"U32", DType::kU32, 4},         {"F64", DType::kF64, 8},   {"I64", DType::kI64, 8},
    {"U64", DType::kU64, 8}};

const DTypeInfo& Info(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[0];  // unreachable: the table lists every enumerator
}

Status ParseDType(const std::string& name, const std::string& dtype, DType* out) {
  std::vector<std::string> names;
  for (const DTypeInfo& info : kDTypes) {
    if (dtype == info.name) {
      *out = info.dtype;
      return Status::Ok();
    }
    names.push_back(info.name);
  }
  return Invalid("tensor \"" + name + "\" has unknown dtype " + dtype + "; the format's dtypes are " +
                 JoinNames(names));
}

// A non-negative integer that fits in int64.
bool IsCount(const json::Value& v) {
  return v.type == json::Type::kNumber && v.is_integer && v.integer >= 0;
}

Status ParseShape(const std::string& name, const json::Value& v, Shape* shape) {
  if (v.type != json::Type::kArray) {
    return Invalid("tensor \"" + name + "\": \"shape\" must be an array, got " +
                   json::TypeName(v.type));
  }
  for (const json::Value& dim : v.array) {
    if (!IsCount(dim)) {
      return Invalid("tensor \"" + name + "\": \"shape\" must hold non-negative integers");
    }
    shape->push_back(dim.integer);
  }
  return Status::Ok();
}

// Bytes of `shape` at `element_size`, failing on overflow.
Status ByteSize(const std::string& name, const Shape& shape, size_t element_size, uint64_t* bytes) {
  uint64_t n = element_size;
  for (int64_t dim : shape) {
    const uint64_t d = static_cast<uint64_t>(dim);
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / d) {
      return Invalid("tensor \"" + name + "\": shape " + ShapeString(shape) +
                     " overflows the addressable size");
    }
    n *= d;
  }
  // Element counts must also fit int64 (NumElements) and size_t.
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
      n > std::numeric_limits<size_t>::max()) {
    return Invalid("tensor \"" + name + "\": shape " + ShapeString(shape) +
                   " overflows the addressable size");
  }
  *bytes = n;
  return Status::Ok();
}

struct Range {
  uint64_t begin, end;
  const std::string* name;
};

// `data` holds the first `available` of the data section's `data_size` bytes.
Status ParseTensor(const std::string& name, const json::Value& v, const uint8_t* data,
                   uint64_t available, uint64_t data_size, SafetensorsEntry* entry,
                   Range* range) {
  if (v.type != json::Type::kObject) {
    return Invalid("tensor \"" + name + "\" must be an object, got " + json::TypeName(v.type));
  }
  for (const auto& member : v.object) {
    if (member.first != "dtype" && member.first != "shape" && member.first != "data_offsets") {
      return Invalid("tensor \"" + name + "\" has unknown field \"" + member.first + "\"");
    }
  }
  const json::Value* dtype = v.Find("dtype");
  const json::Value* shape = v.Find("shape");
  const json::Value* offsets = v.Find("data_offsets");
  if (!dtype || !shape || !offsets) {
    return Invalid("tensor \"" + name + "\" needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  if (dtype->type != json::Type::kString) {
    return Invalid("tensor \"" + name + "\": \"dtype\" must be a string");
  }
  MHA_RETURN_IF_ERROR(ParseDType(name, dtype->string, &entry->dtype));
  MHA_RETURN_IF_ERROR(ParseShape(name, *shape, &entry->shape));
  if (offsets->type != json::Type::kArray || offsets->array.size() != 2 ||
      !IsCount(offsets->array[0]) || !IsCount(offsets->array[1])) {
    return Invalid("tensor \"" + name +
                   "\": \"data_offsets\" must be [begin, end] of non-negative integers");
  }
  const uint64_t begin = static_cast<uint64_t>(offsets->array[0].integer);
  const uint64_t end = static_cast<uint64_t>(offsets->array[1].integer);
  if (begin > end || end > data_size) {
    return Invalid("tensor \"" + name + "\": data_offsets [" + std::to_string(begin) + ", " +
                   std::to_string(end) + "] out of range for a data section of " +
                   std::to_string(data_size) + " bytes");
  }
  uint64_t expected;
  MHA_RETURN_IF_ERROR(ByteSize(name, entry->shape, DTypeSize(entry->dtype), &expected));
  if (end - begin != expected) {
    return Invalid("tensor \"" + name + "\": shape " + ShapeString(entry->shape) + " of " +
                   dtype->string + " needs " + std::to_string(expected) +
                   " bytes, data_offsets give " + std::to_string(end - begin));
  }
  entry->data = end <= available ? data + begin : nullptr;
  entry->size = static_cast<size_t>(expected);
  entry->offset = begin;  // from the data section; Parse adds the header
  *range = Range{begin, end, &name};
  return Status::Ok();
}

Status ParseMetadata(const json::Value& v, std::map<std::string, std::string>* metadata) {
  if (v.type != json::Type::kObject) return Invalid("\"__metadata__\" must be an object");
  for (const auto& member : v.object) {
    if (member.second.type != json::Type::kString) {
      return Invalid("\"__metadata__\" value \"" + member.first + "\" must be a string, got " +
                     json::TypeName(member.second.type));
    }
    (*metadata)[member.first] = member.second.string;
  }
  return Status::Ok();
}

// Non-empty byte ranges may not share a byte.
Status CheckNoOverlap(std::vector<Range> ranges) {
  ranges.erase(
      std::remove_if(ranges.begin(), ranges.end(), [](const Range& r) { return r.begin == r.end; }),
      ranges.end());
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return Invalid("tensors \"" + *ranges[i - 1].name + "\" and \"" + *ranges[i].name +
                     "\" have overlapping data_offsets");
    }
  }
  return Status::Ok();
}

Status Parse(const uint8_t* bytes, size_t size, uint64_t file_size, SafetensorsFile* out) {
  if (size > file_size) {
    return Invalid(std::to_string(size) + " bytes given of a file of " +
                   std::to_string(file_size));
  }
  if (size < 8) {
    return Invalid((size == file_size ? "file is " : "the first ") + std::to_string(size) +
                   " bytes, too short for the 8-byte header length");
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > file_size - 8 || header_size > kMaxHeaderBytes) {
    return Invalid("header length " + std::to_string(header_size) + " exceeds the " +
                   std::to_string(file_size - 8) + " bytes after the length field" +
                   (header_size > kMaxHeaderBytes ? " (or the 100 MB limit)" : ""));
  }
  if (header_size > size - 8) {
    return Invalid("header length " + std::to_string(header_size) + " exceeds the " +
                   std::to_string(size - 8) + " bytes given after the length field");
  }
  json::Value header;
  MHA_RETURN_IF_ERROR(json::Parse(reinterpret_cast<const char*>(bytes + 8),
                                  static_cast<size_t>(header_size), &header));
  if (header.type != json::Type::kObject) {
    return Invalid("header must be a JSON object, got " + std::string(json::TypeName(header.type)));
  }
  const uint8_t* data = bytes + 8 + header_size;
  const uint64_t available = size - 8 - header_size;
  const uint64_t data_size = file_size - 8 - header_size;
  SafetensorsFile file;
  std::vector<Range> ranges;
  for (const auto& member : header.object) {
    if (member.first == "__metadata__") {
      MHA_RETURN_IF_ERROR(ParseMetadata(member.second, &file.metadata));
      continue;
    }
    SafetensorsEntry entry{};
    Range range{};
    MHA_RETURN_IF_ERROR(
        ParseTensor(member.first, member.second, data, available, data_size, &entry, &range));
    entry.offset += 8 + header_size;
    ranges.push_back(range);
    file.tensors.emplace(member.first, std::move(entry));
  }
  MHA_RETURN_IF_ERROR(CheckNoOverlap(std::move(ranges)));
  *out = std::move(file);
  return Status::Ok();
}

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  return BitsToFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

const char* DTypeName(DType dtype) { return Info(dtype).name; }

Status ParseSafetensors(const uint8_t* bytes, size_t size, SafetensorsFile* out) {
  return ParseSafetensorsHeader(bytes, size, size, out);
}

Status ParseSafetensorsHeader(const uint8_t* bytes, size_t size, uint64_t file_size,
                              SafetensorsFile* out) {
  if (bytes == nullptr && size != 0) return Invalid("null buffer of non-zero size");
  try {
    return Parse(bytes, size, file_size, out);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: out of memory while parsing the header");
  }
}

Status ParseSafetensorsShards(const std::vector<SafetensorsShard>& shards, SafetensorsFile* out) {
  if (shards.empty()) return Invalid("no file given (expected one or more shards)");
  try {
    SafetensorsFile merged;
    for (size_t i = 0; i < shards.size(); ++i) {
      SafetensorsFile file;
      const Status status =
          ParseSafetensorsHeader(shards[i].bytes, shards[i].size, shards[i].file_size, &file);
      if (!status.ok()) {
        if (shards.size() == 1) return status;
        return Status(status.code(), "shard " + std::to_string(i) + ": " + status.message());
      }
      for (auto& [name, entry] : file.tensors) {
        entry.shard = i;
        const auto inserted = merged.tensors.emplace(name, entry);
        if (!inserted.second) {
          return Invalid("tensor \"" + name + "\" is in shard " +
                         std::to_string(inserted.first->second.shard) + " and in shard " +
                         std::to_string(i));
        }
      }
      merged.metadata.insert(file.metadata.begin(), file.metadata.end());
    }
    *out = std::move(merged);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: out of memory while parsing the headers");
  }
}

std::map<std::string, Shape> TensorShapes(const SafetensorsFile& file) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, entry] : file.tensors) shapes[name] = entry.shape;
  return shapes;
}

Status ToFloat32(const std::string& name, const SafetensorsEntry& entry, std::vector<float>* out) {
  if (entry.dtype != DType::kF32 && entry.dtype != DType::kF16 && entry.dtype != DType::kBF16) {
    return Invalid("tensor \"" + name + "\" has dtype " + DTypeName(entry.dtype) +
                   "; parameters load from F32, F16 or BF16 tensors");
  }
  const size_t element_size = DTypeSize(entry.dtype);
  uint64_t expected = 0;
  MHA_RETURN_IF_ERROR(ByteSize(name, entry.shape, element_size, &expected));
  if (expected != entry.size || (entry.size != 0 && entry.data == nullptr)) {
    return Invalid("tensor \"" + name + "\": " + std::to_string(entry.size) +
                   " bytes do not hold shape " + ShapeString(entry.shape));
  }
  const size_t n = entry.size / element_size;
  try {
    out->resize(n);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: out of memory converting tensor \"" + name + "\"");
  }
  const uint8_t* p = entry.data;
  float* dst = out->data();
  switch (entry.dtype) {
    case DType::kF32:
      for (size_t i = 0; i < n; ++i) dst[i] = BitsToFloat(LoadU32(p + 4 * i));
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(LoadU16(p + 2 * i));
      break;
    default:  // kBF16: the high half of a float32
      for (size_t i = 0; i < n; ++i)
        dst[i] = BitsToFloat(static_cast<uint32_t>(LoadU16(p + 2 * i)) << 16);
      break;
  }
  return Status::Ok();
}

}  // namespace mha
