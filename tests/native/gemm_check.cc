#include "tests/native/gemm_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/kernels/kernels.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

// "" when c (m rows of ldc) holds `expected` (m x n) and 7 in column n.
std::string Compare(const std::vector<float>& c, size_t ldc, const std::vector<float>& expected,
                    size_t m, size_t n) {
  for (size_t i = 0; i < m; ++i) {
    if (c[i * ldc + n] != 7.0f) return "row " + std::to_string(i) + ": column past n written";
    for (size_t j = 0; j < n; ++j) {
      const float a = c[i * ldc + j], e = expected[i * n + j];
      if (!(std::fabs(a - e) <= 1e-4 + 1e-4 * std::fabs(e))) {
        return "[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + std::to_string(a) +
               ", expected " + std::to_string(e);
      }
    }
  }
  return "";
}

// B (n x layout.k) and its bias packed with `layout`, zero past n as the
// module allocates them; floats for their alignment.
std::vector<float> Pack(const mha::kernels::PanelLayout& layout, const std::vector<float>& b,
                        const std::vector<float>& bias, size_t n) {
  std::vector<float> packed_floats(layout.Bytes(n) / sizeof(float));
  uint8_t* p = reinterpret_cast<uint8_t*>(packed_floats.data());
  mha::kernels::PackRows(layout, b.data(), layout.k, 0, n, p);
  mha::kernels::PackBias(layout, bias.data(), 0, n, p);
  return packed_floats;
}

// C = A B^T + bias through packed B of `type`, computed in two column
// blocks split at a panel boundary, as threads split it; a sentinel 7 in
// column n of each row (ldc = n + 1).
std::vector<float> PackedGemm(mha::kernels::WeightType type, const std::vector<float>& a,
                              const std::vector<float>& b, const std::vector<float>& bias,
                              size_t m, size_t n, size_t depth) {
  namespace k = mha::kernels;
  const k::PanelLayout layout = k::GemmLayout(type, depth);
  const std::vector<float> packed_floats = Pack(layout, b, bias, n);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(packed_floats.data());
  const k::GemmPlan plan = k::PlanGemm(layout, m);
  std::vector<float> scratch(plan.scratch);
  const size_t ldc = n + 1;
  std::vector<float> c(m * ldc, 7.0f);
  const size_t split = n > layout.width ? layout.width : n;
  k::GemmTile(plan, a.data(), depth, p, n, c.data(), ldc, 0, 0, split, scratch.data());
  k::GemmTile(plan, a.data(), depth, p, n, c.data(), ldc, 0, split, n, scratch.data());
  return c;
}

// Weights q / 128 with q in [-127, 127] and 127 in each row: exact in
// float16 and bfloat16, and int8 quantizes them to q with scale 1/128
// exactly, so 16-bit types must give float32's results bit for bit, and
// int8 too except for the rows its GEMV quantizes to int16 (Int8Bound).
std::vector<float> QuantizableWeights(size_t n, size_t depth) {
  std::vector<float> b = RandomVector(n * depth, 4);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = i % depth == 0 ? 127.0f / 128 : std::nearbyint(b[i] * 127.0f) / 128;
  }
  return b;
}

// The int8 GEMV's error with weights |w| < 1 held exactly: each input x
// rounded to int16 steps of at most max|x| / 32767 (half a step off), over
// `depth` products, plus float rounding.
double Int8Bound(const std::vector<float>& a, size_t depth, float expected) {
  float max = 0.0f;
  for (float x : a) max = std::max(max, std::fabs(x));
  return depth * max / 65534.0 + 1e-6 * (1.0 + std::fabs(expected));
}

std::string CheckWeightTypes(const std::vector<float>& a, const std::vector<float>& bias, size_t m,
                             size_t n, size_t depth) {
  namespace k = mha::kernels;
  const std::vector<float> b = QuantizableWeights(n, depth);
  const std::vector<float> expected = PackedGemm(k::WeightType::kFloat32, a, b, bias, m, n, depth);
  for (k::WeightType type : {k::WeightType::kFloat16, k::WeightType::kBFloat16}) {
    const std::vector<float> c = PackedGemm(type, a, b, bias, m, n, depth);
    if (std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) != 0) {
      return "weights of type " + std::to_string(static_cast<int>(type)) +
             " differ from float32's bits";
    }
  }
  const std::vector<float> c = PackedGemm(k::WeightType::kInt8, a, b, bias, m, n, depth);
  for (size_t i = 0; i < c.size(); ++i) {
    if (!(std::fabs(c[i] - expected[i]) <= Int8Bound(a, depth, expected[i]))) {
      return "int8 weights: element " + std::to_string(i) + " = " + std::to_string(c[i]) +
             ", float32's " + std::to_string(expected[i]);
    }
  }
  return "";
}

// int8's GEMV rows (one or two) with an infinity or NaN in the last row,
// in the second block of kInt8ActivationBlock inputs: every output of that
// row non-finite, as float32's are, and the other row finite.
std::string CheckInt8NonFinite() {
  namespace k = mha::kernels;
  const size_t n = 5, depth = k::kInt8ActivationBlock + 44;
  const std::vector<float> b = QuantizableWeights(n, depth), bias = RandomVector(n, 3);
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    for (size_t m : {1, 2}) {
      std::vector<float> a = RandomVector(m * depth, 5);
      a[(m - 1) * depth + depth - 3] = bad;
      const std::vector<float> c = PackedGemm(k::WeightType::kInt8, a, b, bias, m, n, depth);
      for (size_t row = 0; row < m; ++row) {
        for (size_t j = 0; j < n; ++j) {
          if (std::isfinite(c[row * (n + 1) + j]) == (row == m - 1)) {
            return "int8, " + std::to_string(bad) + " in row " + std::to_string(m - 1) + " of " +
                   std::to_string(m) + ": output [" + std::to_string(row) + ", " +
                   std::to_string(j) + "] = " + std::to_string(c[row * (n + 1) + j]);
          }
        }
      }
    }
  }
  return "";
}

// int8's GEMV rows (one or two) of tiny values, down to subnormals: n * 2^e
// with integers |n| <= 64 and 32767 * 2^e the largest of each block of
// kInt8ActivationBlock inputs, so that they quantize to n exactly with scale
// 2^e, and the weights' int8 form is exact too (QuantizableWeights): every
// output is then the exact sum rounded once, on every target. 32767 / max
// overflows float below 2^-114 or so: every value then saturated, and
// targets differed in the bits (inf * 0 for zeros).
std::string CheckInt8TinyRows() {
  namespace k = mha::kernels;
  const size_t n = 5, depth = k::kInt8ActivationBlock + 44;
  const std::vector<float> b = QuantizableWeights(n, depth), bias(n, 0.0f);
  for (int e : {-20, -100, -129, -140, -149}) {
    for (size_t m : {1, 2}) {
      std::vector<float> a = RandomVector(m * depth, 6);
      std::vector<double> ints(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ints[i] = i % depth % k::kInt8ActivationBlock == 0 ? 32767.0 : std::nearbyint(a[i] * 64);
        a[i] = static_cast<float>(std::ldexp(ints[i], e));
      }
      const std::vector<float> c = PackedGemm(k::WeightType::kInt8, a, b, bias, m, n, depth);
      for (size_t row = 0; row < m; ++row) {
        for (size_t j = 0; j < n; ++j) {
          double sum = 0.0;  // exact: integers below 2^53
          for (size_t i = 0; i < depth; ++i) sum += ints[row * depth + i] * (b[j * depth + i] * 128);
          const float expected = static_cast<float>(std::ldexp(sum, e - 7));
          if (c[row * (n + 1) + j] != expected) {
            return "int8, row of max 32767 * 2^" + std::to_string(e) + ", " + std::to_string(m) +
                   " rows: output [" + std::to_string(row) + ", " + std::to_string(j) + "] = " +
                   std::to_string(c[row * (n + 1) + j] / std::ldexp(1.0, e - 7)) + " * 2^" +
                   std::to_string(e - 7) + ", expected " + std::to_string(sum) + " * 2^" +
                   std::to_string(e - 7);
          }
        }
      }
    }
  }
  return "";
}

// For every row count of a block up to past 64 (linear.cc's) and every
// weight type: GemmTile under PlanGemm's plan writes every float of the
// plan's scratch and none past it (sentinel bits), and its results are the
// reference's (float32), float32's bits (16-bit) or within Int8Bound (int8).
// The int8 rows span two quantization blocks and an odd k (the padded pair).
std::string CheckGemmScratch() {
  namespace k = mha::kernels;
  const uint32_t kSentinel = 0x7fa5a5a5u;  // a NaN no kernel writes
  const size_t kGuard = 64;
  const size_t n = k::GemmPanelWidth() + 3, depth = 2 * k::kInt8ActivationBlock + 3;
  const std::vector<float> b = QuantizableWeights(n, depth), bias = RandomVector(n, 3);
  for (size_t m = 1; m <= 67; ++m) {
    const std::vector<float> a = RandomVector(m * depth, 7);
    std::vector<float> c32;  // float32 weights' results, first
    for (k::WeightType type : {k::WeightType::kFloat32, k::WeightType::kFloat16,
                               k::WeightType::kBFloat16, k::WeightType::kInt8}) {
      const std::string at = "type " + std::to_string(static_cast<int>(type)) + ", " +
                             std::to_string(m) + " rows: ";
      const k::PanelLayout layout = k::GemmLayout(type, depth);
      const std::vector<float> packed_floats = Pack(layout, b, bias, n);
      const uint8_t* p = reinterpret_cast<const uint8_t*>(packed_floats.data());
      const k::GemmPlan plan = k::PlanGemm(layout, m);
      if (plan.rows != m || plan.tile_rows != k::GemmTileRows() || plan.gemv_rows > 2) {
        return at + "plan of " + std::to_string(plan.rows) + " rows, tile " +
               std::to_string(plan.tile_rows) + ", " + std::to_string(plan.gemv_rows) +
               " GEMV rows";
      }
      std::vector<uint32_t> scratch(plan.scratch + kGuard, kSentinel);
      std::vector<float> c(m * (n + 1), 7.0f);
      k::GemmTile(plan, a.data(), depth, p, n, c.data(), n + 1, 0, 0, n,
                  reinterpret_cast<float*>(scratch.data()));
      for (size_t i = 0; i < scratch.size(); ++i) {
        if ((scratch[i] == kSentinel) != (i >= plan.scratch)) {
          return at + "scratch float " + std::to_string(i) +
                 (i < plan.scratch ? " unused, of " : " written, past ") +
                 std::to_string(plan.scratch);
        }
      }
      if (type == k::WeightType::kFloat32) {
        const std::string error =
            Compare(c, n + 1, ReferenceGemm(a, b, bias.data(), m, n, depth), m, n);
        if (!error.empty()) return at + error;
        c32 = c;
        continue;
      }
      for (size_t i = 0; i < c.size(); ++i) {
        const bool close = type == k::WeightType::kInt8
                               ? std::fabs(c[i] - c32[i]) <= Int8Bound(a, depth, c32[i])
                               : c[i] == c32[i];
        if (!close) {
          return at + "element " + std::to_string(i) + " = " + std::to_string(c[i]) +
                 ", float32's " + std::to_string(c32[i]);
        }
      }
    }
  }
  return "";
}

// Shapes that cover whole tiles, row and column tails, panels with and
// without a neighbour in their column block (2x4v's pairs: a pair with a
// partial second panel, a pair and a panel left over) and the GEMV rows.
std::string CheckShapes() {
  namespace k = mha::kernels;
  const size_t width = k::GemmPanelWidth();
  for (size_t m : {1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 17, 64, 67}) {
    for (size_t n : {size_t{1}, size_t{7}, width - 1, width, width + 1, 2 * width + 3,
                     3 * width + 5, 4 * width}) {
      for (size_t depth : {1, 3, 16, 33}) {
        const std::vector<float> a = RandomVector(m * depth, 1), b = RandomVector(n * depth, 2),
                                 bias = RandomVector(n, 3);
        const size_t ldc = n + 1;
        const std::vector<float> c =
            PackedGemm(k::WeightType::kFloat32, a, b, bias, m, n, depth);
        std::string error = Compare(c, ldc, ReferenceGemm(a, b, bias.data(), m, n, depth), m, n);
        if (error.empty()) error = CheckWeightTypes(a, bias, m, n, depth);
        if (!error.empty()) {
          return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                 std::to_string(depth) + ": " + error;
        }
      }
    }
  }
  return "";
}

}  // namespace

std::string CheckGemmTile(size_t tile_rows) {
  mha::kernels::SetGemmTileRows(tile_rows);
  // The scratch first: the other checks run with exactly the plan's scratch.
  std::string error = CheckGemmScratch();
  if (error.empty()) error = CheckShapes();
  if (error.empty()) error = CheckInt8NonFinite();
  if (error.empty()) error = CheckInt8TinyRows();
  mha::kernels::SetGemmTileRows(0);
  return error;
}

}  // namespace mha_test
