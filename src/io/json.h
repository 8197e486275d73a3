// A small, strict JSON parser for safetensors headers and fixture configs.
// Internal: not part of the public API. It never throws (std::bad_alloc is
// caught and returned as a Status) and limits nesting depth so that hostile
// input cannot exhaust the stack.
#ifndef MHA_SRC_IO_JSON_H_
#define MHA_SRC_IO_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/status.h"

namespace mha {
namespace json {

enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

struct Value {
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0.0;
  // For numbers written without fraction or exponent that fit in int64.
  bool is_integer = false;
  int64_t integer = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // document order, keys unique

  // The member named `key` of an object, or null when absent (or not an object).
  const Value* Find(const std::string& key) const;
};

// Parses exactly one JSON value from text[0, size), surrounded by optional
// whitespace. Duplicate object keys, trailing commas, control characters in
// strings, invalid escapes / UTF-16 surrogates and nesting deeper than 64 are
// errors whose message gives the byte offset.
Status Parse(const char* text, size_t size, Value* out);

// "null", "bool", "number", "string", "array" or "object", for error messages.
const char* TypeName(Type type);

}  // namespace json
}  // namespace mha

#endif  // MHA_SRC_IO_JSON_H_
