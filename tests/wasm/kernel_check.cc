// Kernel checks inside WebAssembly that the production binding cannot
// reach: every GEMM register tile (the binding runs only the one chosen for
// the host) against the scalar reference. Built with the single-thread
// SIMD128 variant (build_wasm.sh) and run by tests/js/gemm_tiles.test.js;
// prints one JSON line per tile.
#include <cstdio>

#include "src/kernels/kernels.h"
#include "tests/native/gemm_check.h"

int main() {
  for (size_t tile_rows : mha::kernels::kGemmTileRows) {
    const std::string error = mha_test::CheckGemmTile(tile_rows);
    std::printf("{\"tile\": \"%s\", \"target\": \"%s\", \"error\": \"%s\"}\n",
                mha::kernels::GemmTileName(tile_rows), mha::kernels::TargetName(), error.c_str());
  }
  return 0;
}
