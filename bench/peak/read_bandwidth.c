// The read bandwidth WebAssembly sees: f32x4 loads summed into 8 independent
// accumulators (so that the adds never limit), over a buffer far larger than
// the last-level cache. Built by bench/run.mjs with emcc into
// build/bench/read_bandwidth.wasm; bench/peak/read_bandwidth.mjs drives it.
#include <stddef.h>
#include <stdlib.h>
#include <wasm_simd128.h>

static float* buffer;
static size_t count;

// Allocates and writes `bytes` (a multiple of 128): pages never written could
// all map to one zero page and read from the cache. Returns 0 on failure.
int read_setup(size_t bytes) {
  count = bytes / sizeof(float);
  buffer = malloc(bytes);
  if (!buffer) return 0;
  for (size_t i = 0; i < count; ++i) buffer[i] = (float)(i & 1023) * 1e-3f;
  return 1;
}

// Reads the whole buffer once; returns a lane of the sum so that nothing is
// optimised away.
float read_pass(void) {
  v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i < count; i += 32) {
    const float* p = buffer + i;
    a0 = wasm_f32x4_add(a0, wasm_v128_load(p));
    a1 = wasm_f32x4_add(a1, wasm_v128_load(p + 4));
    a2 = wasm_f32x4_add(a2, wasm_v128_load(p + 8));
    a3 = wasm_f32x4_add(a3, wasm_v128_load(p + 12));
    a4 = wasm_f32x4_add(a4, wasm_v128_load(p + 16));
    a5 = wasm_f32x4_add(a5, wasm_v128_load(p + 20));
    a6 = wasm_f32x4_add(a6, wasm_v128_load(p + 24));
    a7 = wasm_f32x4_add(a7, wasm_v128_load(p + 28));
  }
  const v128_t sum = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)),
                                    wasm_f32x4_add(wasm_f32x4_add(a4, a5), wasm_f32x4_add(a6, a7)));
  return wasm_f32x4_extract_lane(sum, 0);
}
