#include "tests/fuzz/fuzz_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mha_fuzz {

mha::Shape MaybeBreak(FuzzInput& in, mha::Shape shape) {
  switch (in.Int(0, 15)) {
    case 0:
      if (!shape.empty()) shape[in.Int(0, 7) % shape.size()] = in.Int(-2, 12);
      break;
    case 1:
      if (!shape.empty()) shape.pop_back();
      break;
    case 2:
      shape.push_back(in.Int(0, 3));
      break;
    default:
      break;
  }
  return shape;
}

size_t BufferSize(const mha::Shape& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(std::max<int64_t>(d, 0));
  return n;
}

mha::TensorView FuzzTensor(FuzzInput& in, const mha::Shape& shape, bool specials,
                           std::vector<float>* values) {
  values->resize(BufferSize(shape));
  for (float& v : *values) v = in.Value(specials);
  return mha::TensorView{values->data(), shape};
}

void FuzzQkNorm(FuzzInput& in, mha::QkNormConfig* norm) {
  norm->enabled = in.Int(0, 3) == 0;
  if (!norm->enabled) return;
  norm->type = in.Bool() ? mha::QkNormType::kLayer : mha::QkNormType::kRms;
  norm->over = in.Bool() ? mha::QkNormOver::kAll : mha::QkNormOver::kHead;
  norm->weight_offset = in.Bool() ? 1.0f : 0.0f;
}

mha::MaskView FuzzMask(FuzzInput& in, int kind, const mha::Shape& shape, bool specials,
                       std::vector<uint8_t>* bytes, std::vector<float>* floats) {
  if (kind == 1) {
    const uint8_t density = in.Byte();  // share of masked elements, /256
    bytes->resize(BufferSize(shape));
    for (uint8_t& b : *bytes) b = in.Byte() < density ? 1 : 0;
    return mha::MaskView::Bool(bytes->data(), shape);
  }
  if (kind == 2) {
    floats->resize(BufferSize(shape));
    for (float& f : *floats) {
      const uint8_t b = in.Byte();
      if (b < 48) {
        f = -std::numeric_limits<float>::infinity();
      } else if (specials && b < 52) {
        f = b < 50 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
      } else {
        f = (static_cast<int>(b) - 150) / 32.0f;  // [-3, 3.3]
      }
    }
    return mha::MaskView::Float(floats->data(), shape);
  }
  return mha::MaskView();
}

bool Tame(const std::vector<float>& values, bool allow_neg_inf) {
  for (float v : values) {
    if (allow_neg_inf && v == -std::numeric_limits<float>::infinity()) continue;
    if (!(std::fabs(v) <= 1e3f)) return false;
  }
  return true;
}

std::string Compare(const mha::Tensor& actual, const mha::Tensor& expected, const std::string& what,
                    double slack) {
  if (actual.shape != expected.shape) {
    return what + ": shape " + mha::ShapeString(actual.shape) + ", reference " +
           mha::ShapeString(expected.shape);
  }
  if (actual.data.size() != expected.data.size()) {
    return what + ": " + std::to_string(actual.data.size()) + " elements for shape " +
           mha::ShapeString(actual.shape);
  }
  double scale = 1.0;
  for (float e : expected.data) {
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(double(e)));
  }
  for (size_t i = 0; i < actual.data.size(); ++i) {
    const double a = actual.data[i], e = expected.data[i];
    const bool ok = std::isnan(e) ? std::isnan(a) : std::fabs(a - e) <= slack * (1e-4 * scale + 1e-3 * std::fabs(e));
    if (!ok) {
      return what + ": element " + std::to_string(i) + " is " + std::to_string(a) +
             ", reference " + std::to_string(e);
    }
  }
  return "";
}

}  // namespace mha_fuzz
