#include "src/kernels/weight_panel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "src/kernels/kernels.h"

namespace mha {
namespace kernels {
namespace {

// Biases and scales are floats: int8 weights are padded to their alignment.
// Nothing more: a float32 or 16-bit row is a multiple of the vector size, so
// panels keep the alignment of the buffer (as float32 panels always had),
// and an int8 panel's rows are half vectors.
size_t RoundUp(size_t x) { return (x + sizeof(float) - 1) / sizeof(float) * sizeof(float); }

// Where weight kk of column c sits, in bytes from the start of packed B.
size_t WeightAt(const PanelLayout& l, size_t c, size_t kk) {
  const size_t panel = c / l.width * l.PanelBytes();
  if (l.type == WeightType::kInt8) return panel + Int8Offset(l.width, kk, c % l.width);
  const size_t slot = l.type == WeightType::kBFloat16 ? BFloat16Slot(l.width, c % l.width)
                                                      : c % l.width;
  return panel + (kk * l.width + slot) * WeightTypeBytes(l.type);
}

float* ColumnFloat(const PanelLayout& l, uint8_t* packed, size_t offset, size_t c) {
  return reinterpret_cast<float*>(packed + c / l.width * l.PanelBytes() + offset) + c % l.width;
}

// int8: the row's scale, max|w| / 127 (0 for a zero row); else 1.
float RowScale(WeightType type, const float* row, size_t k) {
  if (type != WeightType::kInt8) return 1.0f;
  float max = 0.0f;
  for (size_t i = 0; i < k; ++i) max = std::max(max, std::fabs(row[i]));
  return max / 127.0f;
}

// n floats in the stored type, into `out` (n elements).
void Convert(WeightType type, const float* src, size_t n, float scale, uint8_t* out) {
  switch (type) {
    case WeightType::kFloat32:
      std::memcpy(out, src, n * sizeof(float));
      return;
    case WeightType::kFloat16:
      FloatToHalf(src, n, reinterpret_cast<uint16_t*>(out));
      return;
    case WeightType::kBFloat16:
      FloatToBFloat16(src, n, reinterpret_cast<uint16_t*>(out));
      return;
    case WeightType::kInt8:
      for (size_t i = 0; i < n; ++i) {
        const float q = scale > 0.0f ? std::nearbyint(src[i] / scale) : 0.0f;
        out[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
      }
      return;
  }
}

}  // namespace

size_t WeightTypeBytes(WeightType type) {
  switch (type) {
    case WeightType::kFloat32: return 4;
    case WeightType::kFloat16:
    case WeightType::kBFloat16: return 2;
    case WeightType::kInt8: return 1;
  }
  return 4;
}

size_t PanelLayout::WeightBytes() const {
  const size_t rows = type == WeightType::kInt8 ? (k + 1) / 2 * 2 : k;  // int8: whole pairs
  return RoundUp(rows * width * WeightTypeBytes(type));
}

size_t PanelLayout::PanelBytes() const {
  const size_t floats = type == WeightType::kInt8 ? 2 : 1;  // bias (and scale)
  return WeightBytes() + floats * width * sizeof(float);
}

void PackRows(const PanelLayout& layout, const float* b, size_t ldb, size_t row0, size_t rows,
              uint8_t* packed) {
  const size_t es = WeightTypeBytes(layout.type);
  // Converted in chunks of whole rows on the stack: loading never allocates.
  constexpr size_t kChunk = 1024;
  uint8_t converted[kChunk * 4];
  for (size_t r = 0; r < rows; ++r) {
    const size_t c = row0 + r;
    const float* row = b + r * ldb;
    const float scale = RowScale(layout.type, row, layout.k);
    for (size_t k0 = 0; k0 < layout.k; k0 += kChunk) {
      const size_t n = std::min(kChunk, layout.k - k0);
      Convert(layout.type, row + k0, n, scale, converted);
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(packed + WeightAt(layout, c, k0 + i), converted + i * es, es);
      }
    }
    if (layout.type == WeightType::kInt8) {
      *ColumnFloat(layout, packed, layout.ScaleOffset(), c) = scale;
    }
  }
}

void PackBias(const PanelLayout& layout, const float* bias, size_t col0, size_t count,
              uint8_t* packed) {
  for (size_t i = 0; i < count; ++i) {
    *ColumnFloat(layout, packed, layout.BiasOffset(), col0 + i) = bias != nullptr ? bias[i] : 0.0f;
  }
}

void CopyColumns(const PanelLayout& from, const uint8_t* src, size_t src_col,
                 const PanelLayout& to, uint8_t* dst, size_t dst_col, size_t cols) {
  const size_t es = WeightTypeBytes(from.type);
  uint8_t* source = const_cast<uint8_t*>(src);  // ColumnFloat only reads through it here
  for (size_t i = 0; i < cols; ++i) {
    const size_t s = src_col + i, d = dst_col + i;
    for (size_t kk = 0; kk < from.k; ++kk) {
      std::memcpy(dst + WeightAt(to, d, kk), src + WeightAt(from, s, kk), es);
    }
    *ColumnFloat(to, dst, to.BiasOffset(), d) = *ColumnFloat(from, source, from.BiasOffset(), s);
    if (from.type == WeightType::kInt8) {
      *ColumnFloat(to, dst, to.ScaleOffset(), d) = *ColumnFloat(from, source, from.ScaleOffset(), s);
    }
  }
}

}  // namespace kernels
}  // namespace mha
