#include "src/tensor.h"

#include <cstdint>

namespace mha {

std::string ShapeString(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Status CheckDimsAndData(const std::string& arg, const Shape& shape, const void* data) {
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument(arg + ": negative dim in shape " + ShapeString(shape));
  }
  if (data == nullptr && ElementCount(shape) > 0) {
    return Status::InvalidArgument(arg + ": data is null for shape " + ShapeString(shape));
  }
  return Status::Ok();
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double ElementCount(const Shape& shape) {
  double n = 1.0;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

bool Addressable(double elements, size_t element_size) {
  return elements * static_cast<double>(element_size) < static_cast<double>(SIZE_MAX);
}

}  // namespace mha
