// Weights of a packed panel (weight_panel.h) as float vectors, converted in
// registers: float32 as is; bfloat16 widened by a shift; float16 through
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

// Lanes(d) weights at p.
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const Half* HWY_RESTRICT p) {
  return LoadHalves(d, reinterpret_cast<const uint16_t*>(p));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const BFloat16* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, D> d16;
  const hn::RebindToUnsigned<D> du;
  const auto wide = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p)));
  return hn::BitCast(d, hn::ShiftLeft<16>(wide));
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
