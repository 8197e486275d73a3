#include "tests/native/gemm_check.h"

#include <cmath>
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

}  // namespace

std::string CheckGemmTile(size_t tile_rows) {
  namespace k = mha::kernels;
  k::SetGemmTileRows(tile_rows);
  const size_t width = k::GemmPanelWidth();
  std::string error;
  for (size_t m : {1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 17, 64, 67}) {
    for (size_t n : {size_t{1}, size_t{7}, width - 1, width, width + 1, 3 * width + 5}) {
      for (size_t depth : {1, 3, 16, 33}) {
        const std::vector<float> a = RandomVector(m * depth, 1), b = RandomVector(n * depth, 2),
                                 bias = RandomVector(n, 3);
        std::vector<float> packed(k::PackedBSize(n, depth));
        k::PackB(b.data(), depth, bias.data(), n, depth, packed.data());
        // A sentinel column past n must survive: tails store only n columns.
        const size_t ldc = n + 1;
        std::vector<float> c(m * ldc, 7.0f);
        const size_t split = n > width ? width : n;
        k::GemmTile(a.data(), depth, packed.data(), n, depth, c.data(), ldc, 0, m, 0, split);
        k::GemmTile(a.data(), depth, packed.data(), n, depth, c.data(), ldc, 0, m, split, n);
        error = Compare(c, ldc, ReferenceGemm(a, b, bias.data(), m, n, depth), m, n);
        if (!error.empty()) {
          error = "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                  std::to_string(depth) + ": " + error;
          break;
        }
      }
      if (!error.empty()) break;
    }
    if (!error.empty()) break;
  }
  k::SetGemmTileRows(0);
  return error;
}

}  // namespace mha_test
