// The GEMM kernels against the scalar reference with one register tile
// forced, on the target that runs: shared by the native suite
// (kernels_test.cc, every Highway target) and the WebAssembly check
// (tests/wasm/kernel_check.cc), since the binding has no hook to force a tile.
#ifndef MHA_TESTS_NATIVE_GEMM_CHECK_H_
#define MHA_TESTS_NATIVE_GEMM_CHECK_H_

#include <cstddef>
#include <string>

namespace mha_test {

// Runs GemmTile with the tile of `tile_rows` rows on shapes that cover whole
// tiles, row and column tails and the GEMV rows (1 and 2), split at a panel
// boundary as threads split it. Returns "" when every element is within
// 1e-4 + 1e-4 * |expected| and the column past n is untouched, packed
// float16 and bfloat16 weights give float32's results on the same values
// bit for bit and int8 ones within its rows' int16 rounding, an int8 GEMV
// row holding an infinity or NaN gives non-finite outputs, int8 GEMV rows
// of tiny values (down to subnormals) that quantize exactly give the exact
// results, and for every row count up to 67 and every weight type GemmTile
// uses exactly the scratch its GemmPlan sizes; else the first mismatch.
std::string CheckGemmTile(size_t tile_rows);

}  // namespace mha_test

#endif  // MHA_TESTS_NATIVE_GEMM_CHECK_H_
