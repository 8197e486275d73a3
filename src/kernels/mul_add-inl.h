// MulAdd for the kernels: a * b + c, fused where the target can.
//
// Natively this is hn::MulAdd (one FMA on AVX2/AVX-512/NEON/SVE). WebAssembly
// SIMD128 has no FMA, so Highway 1.0.3 emits f32x4.mul + f32x4.add. The
// relaxed-SIMD build (MHA_WASM_RELAXED_SIMD) instead calls the import
// env.mha_relaxed_madd, which scripts/relax_wasm.mjs replaces after linking
// by f32x4.relaxed_madd and inlines: one FMA where the host has one. (Emscripten
// 3.1.6's binaryen cannot read relaxed-SIMD opcodes, so the instruction cannot
// come from the compiler.) relaxed_madd may round once or twice, depending on
// the host; the kernels' accuracy holds either way.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_MUL_ADD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_MUL_ADD_INL_H_
#undef MHA_SRC_KERNELS_MUL_ADD_INL_H_
#else
#define MHA_SRC_KERNELS_MUL_ADD_INL_H_
#endif

#include "hwy/highway.h"

#if defined(MHA_WASM_RELAXED_SIMD) && !defined(MHA_RELAXED_MADD_DECLARED)
#define MHA_RELAXED_MADD_DECLARED
#include <wasm_simd128.h>
// Replaced after linking (see above); calling it unreplaced throws in JS.
extern "C" __attribute__((import_module("env"), import_name("mha_relaxed_madd")))
__f32x4 mha_relaxed_madd(__f32x4 a, __f32x4 b, __f32x4 c);
#endif

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class V>
HWY_INLINE V FusedMulAdd(V a, V b, V c) {
#if defined(MHA_WASM_RELAXED_SIMD) && HWY_TARGET == HWY_WASM
  return V{mha_relaxed_madd(a.raw, b.raw, c.raw)};
#else
  return hn::MulAdd(a, b, c);
#endif
}

// c - a * b, fused where the target can.
template <class V>
HWY_INLINE V FusedNegMulAdd(V a, V b, V c) {
#if defined(MHA_WASM_RELAXED_SIMD) && HWY_TARGET == HWY_WASM
  return FusedMulAdd(hn::Neg(a), b, c);
#else
  return hn::NegMulAdd(a, b, c);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_MUL_ADD_INL_H_
