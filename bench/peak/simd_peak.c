// The WebAssembly SIMD128 peak: independent f32x4 mul+add chains (SIMD128 has
// no fused multiply-add), 12 of them so that latency never limits, 14 live
// registers with the two constants (x64 engines map v128 to 16 xmm).
// Built by bench/run.mjs with emcc into build/bench/simd_peak.wasm.
#include <wasm_simd128.h>

#define STEP(a) a = wasm_f32x4_add(wasm_f32x4_mul(a, mul), add)

// Runs `iterations` steps of 12 chains (96 FLOPs a step); returns a lane of
// the sum so that nothing is optimised away. The caller passes the constants
// (e.g. 0.9999, 1e-4, 1) so that the compiler cannot fold the chains.
float simd_peak(int iterations, float mul_value, float add_value, float start) {
  const v128_t mul = wasm_f32x4_splat(mul_value);
  const v128_t add = wasm_f32x4_splat(add_value);
  // Distinct starts: identical chains would be merged into one.
  v128_t a0 = wasm_f32x4_splat(start), a1 = wasm_f32x4_add(a0, add);
  v128_t a2 = wasm_f32x4_add(a1, add), a3 = wasm_f32x4_add(a2, add);
  v128_t a4 = wasm_f32x4_add(a3, add), a5 = wasm_f32x4_add(a4, add);
  v128_t a6 = wasm_f32x4_add(a5, add), a7 = wasm_f32x4_add(a6, add);
  v128_t a8 = wasm_f32x4_add(a7, add), a9 = wasm_f32x4_add(a8, add);
  v128_t a10 = wasm_f32x4_add(a9, add), a11 = wasm_f32x4_add(a10, add);
  for (int i = 0; i < iterations; ++i) {
    STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5);
    STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11);
  }
  const v128_t sum = wasm_f32x4_add(
      wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)),
                     wasm_f32x4_add(wasm_f32x4_add(a4, a5), wasm_f32x4_add(a6, a7))),
      wasm_f32x4_add(wasm_f32x4_add(a8, a9), wasm_f32x4_add(a10, a11)));
  return wasm_f32x4_extract_lane(sum, 0);
}
