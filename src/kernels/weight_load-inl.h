// Weights of a packed panel (weight_panel.h) as float vectors, converted in
// registers: float32 as is; bfloat16 (both halves of a row from one load) by
// an and and a shift; float16 through
// float16-inl.h (hardware where Highway has it, the exact integer path
// elsewhere). The conversions are exact, so a kernel that reads them gives
// the results of the same kernel on the widened floats, bit for bit. (int8
// weights have kernels of their own: gemv-inl.h, gemm-inl.h.)

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#undef MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#else
#define MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "src/kernels/float16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The stored element of each kernels::WeightType.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

// The mask of the upper half of each lane, for bfloat16's LoadWeights: made
// once, before a kernel's loop. In WebAssembly it is read from memory, so
// that no optimizer (LLVM, then binaryen) turns it into a v128.const at each
// use inside the loop, which V8 builds in several instructions every time;
// elsewhere it stays a constant the compiler keeps in a register.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> UpperHalfMask(D) {
#if HWY_TARGET == HWY_WASM
  static volatile uint32_t bits = 0xFFFF0000u;
#else
  constexpr uint32_t bits = 0xFFFF0000u;
#endif
  return hn::Set(hn::RebindToUnsigned<D>(), bits);
}

// A row of 2 * Lanes(d) weights at p: its first half in *lo, its second in
// *hi. `upper` is UpperHalfMask(d) (bfloat16 uses it).
template <class D, class DU = hn::RebindToUnsigned<D>>
HWY_INLINE void LoadWeights(D d, const float* HWY_RESTRICT p, hn::Vec<DU> upper, hn::Vec<D>* lo,
                            hn::Vec<D>* hi) {
  (void)upper;
  *lo = hn::LoadU(d, p);
  *hi = hn::LoadU(d, p + hn::Lanes(d));
}
template <class D, class DU = hn::RebindToUnsigned<D>>
HWY_INLINE void LoadWeights(D d, const Half* HWY_RESTRICT p, hn::Vec<DU> upper, hn::Vec<D>* lo,
                            hn::Vec<D>* hi) {
  (void)upper;
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(p);
  *lo = LoadHalves(d, bits);
  *hi = LoadHalves(d, bits + hn::Lanes(d));
}
// Interleaved (weight_panel.h, BFloat16Slot): lane i holds column i in its
// lower 16 bits and column Lanes(d) + i in its upper 16.
template <class D, class DU = hn::RebindToUnsigned<D>>
HWY_INLINE void LoadWeights(D d, const BFloat16* HWY_RESTRICT p, hn::Vec<DU> upper,
                            hn::Vec<D>* lo, hn::Vec<D>* hi) {
  const auto pairs = hn::LoadU(DU(), reinterpret_cast<const uint32_t*>(p));
  *lo = hn::BitCast(d, hn::ShiftLeft<16>(pairs));
  *hi = hn::BitCast(d, hn::And(pairs, upper));
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
