// float32 <-> IEEE float16 for the keys and values of a float16 KV cache,
// with the same results on every target: round to nearest even, overflow to
// infinity, infinities and NaN kept (a NaN stays a NaN; its payload may not).
//
// Highway 1.0.3 converts in hardware on AVX2/AVX-512 (F16C), NEON and SVE,
// with IEEE behaviour. On SSE4, SSSE3, EMU128, SCALAR and WASM its emulated
// DemoteTo truncates the mantissa and turns values beyond the half range
// (|x| > 65504, infinities, NaN) into finite numbers, and its PromoteTo is
// slow: there both directions are written here with integer operations.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_FLOAT16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_FLOAT16_INL_H_
#undef MHA_SRC_KERNELS_FLOAT16_INL_H_
#else
#define MHA_SRC_KERNELS_FLOAT16_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef MHA_HALF_EMULATED
#if (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4) || HWY_TARGET == HWY_WASM || \
    HWY_TARGET == HWY_WASM_EMU256 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
#define MHA_HALF_EMULATED 1
#else
#define MHA_HALF_EMULATED 0
#endif

// Loads Lanes(df) halves as floats. Where Highway emulates PromoteTo (about
// 15 operations per vector, as much as the attention's arithmetic on a
// float16 cache in WASM), the half's exponent and mantissa are moved into
// place and scaled by 2^112 instead: exact for every finite half, subnormal
// ones included (they become float32 denormals that the product
// normalises). A half exponent of all ones (infinity, NaN) becomes a float
// exponent of all ones, the mantissa kept.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalves(DF df, const uint16_t* HWY_RESTRICT p) {
#if MHA_HALF_EMULATED
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d16, p)));
  const auto magnitude = hn::ShiftLeft<13>(hn::And(bits, hn::Set(di, 0x7FFF)));
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(di, 0x8000)));
  const auto finite = hn::BitCast(di, hn::Mul(hn::BitCast(df, magnitude), hn::Set(df, 0x1p112f)));
  const auto special = hn::Or(magnitude, hn::Set(di, 0x7F800000));
  const auto is_special = hn::Gt(magnitude, hn::Set(di, (0x7C00 << 13) - 1));
  const auto value = hn::IfThenElse(is_special, special, finite);
  return hn::BitCast(df, hn::Or(value, sign));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
}

// Stores Lanes(df) floats as halves, rounded to nearest even.
template <class DF>
HWY_INLINE void StoreHalves(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
#if MHA_HALF_EMULATED
  // On the magnitude's bits (as signed integers: all comparisons hold for
  // 0 <= a <= 0x7FFFFFFF), three cases: infinity or NaN (beyond the half
  // range, rounding included: >= 65520 rounds to infinity); a half
  // subnormal (below 2^-14), where adding 0.5 puts the half's mantissa in
  // the float's lowest bits, rounded by the float addition itself; else a
  // normal half, rebiased, with just under half a half-ulp (13 dropped
  // bits) plus the kept lowest bit added so that truncation rounds to
  // nearest even (a carry into the exponent is the right result, up to
  // infinity).
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const auto bits = hn::BitCast(di, v);
  const auto a = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000));
  const auto nan = hn::Gt(a, hn::Set(di, 0x7F800000));
  const auto special = hn::IfThenElse(nan, hn::Set(di, 0x7E00), hn::Set(di, 0x7C00));
  const auto half_magic = hn::Set(di, 126 << 23);  // 0.5f
  const auto sum = hn::Add(hn::BitCast(df, a), hn::BitCast(df, half_magic));
  const auto subnormal = hn::Sub(hn::BitCast(di, sum), half_magic);
  const auto odd = hn::And(hn::ShiftRight<13>(a), hn::Set(di, 1));
  const auto rebias = hn::Set(di, static_cast<int32_t>((15u - 127u) << 23) + 0xFFF);
  const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(a, rebias), odd));
  auto half = hn::IfThenElse(hn::Lt(a, hn::Set(di, 113 << 23)), subnormal, normal);
  half = hn::IfThenElse(hn::Gt(a, hn::Set(di, (143 << 23) - 1)), special, half);
  hn::StoreU(hn::DemoteTo(d16, hn::Or(half, sign)), d16, p);
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
#endif
}

// dst[i] = half(src[i]) for i < n.
inline void FloatToHalf(const float* HWY_RESTRICT src, size_t n, uint16_t* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) StoreHalves(d, hn::LoadU(d, src + i), dst + i);
  for (; i < n; ++i) StoreHalves(d1, hn::LoadU(d1, src + i), dst + i);
}

// dst[i] = float(src[i]) for i < n (exact).
inline void HalfToFloat(const uint16_t* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) hn::StoreU(LoadHalves(d, src + i), d, dst + i);
  for (; i < n; ++i) hn::StoreU(LoadHalves(d1, src + i), d1, dst + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_FLOAT16_INL_H_
