// Weights of a packed panel (weight_panel.h) as float vectors, converted in
// registers: float32 as is; bfloat16 widened by a shift; float16 through
// float16-inl.h (hardware where Highway has it, the exact integer path
// elsewhere); int8 converted (exact) and multiplied by its column's scale.
// The 16-bit conversions are exact, so a kernel that reads them gives the
// results of the same kernel on the widened floats, bit for bit.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#undef MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#else
#define MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "src/kernels/float16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The stored element of each kernels::WeightType.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

// Lanes(d) weights at p, before the int8 scale.
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
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const int8_t* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, D> d8;
  const hn::RebindToSigned<D> di;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, p)));
}

// The weight from what LoadWeights gave: times the column's scale for int8
// (one multiply, the same in every kernel).
template <class W, class V>
HWY_INLINE V Dequantize(V w, V scale) {
  if constexpr (std::is_same_v<W, int8_t>) {
    return hn::Mul(w, scale);
  } else {
    (void)scale;
    return w;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_WEIGHT_LOAD_INL_H_
