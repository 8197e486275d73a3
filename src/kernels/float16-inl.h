// float32 <-> IEEE float16 for the keys and values of a float16 KV cache,
// with Highway's PromoteTo / DemoteTo on every target.
//
// Highway 1.0.3 converts in hardware on AVX2/AVX-512 (F16C), NEON and SVE,
// rounding to nearest even. On SSE4, SSSE3, EMU128 and WASM it emulates
// DemoteTo by truncating the mantissa; truncation errors all point towards
// zero and add up (measured: 6e-3 relative on a decoding fixture's output,
// 1e-3 with rounding), so there the float32 bits are first rounded to the
// nearest even half (normal range; half subnormals still truncate). The
// emulation also turns values beyond the half range (|x| > 65504,
// infinities, NaN) into finite numbers; keys and values of attention stay
// far inside that range.

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
// normalises), in 7 operations. Infinities and NaN come out finite, as from
// Highway's emulation; the emulated StoreHalves never stores them.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalves(DF df, const uint16_t* HWY_RESTRICT p) {
#if MHA_HALF_EMULATED
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const auto bits = hn::PromoteTo(du, hn::LoadU(d16, p));
  const auto magnitude = hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x7FFFu)));
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u)));
  const auto value = hn::Mul(hn::BitCast(df, magnitude), hn::Set(df, 0x1p112f));
  return hn::BitCast(df, hn::Or(hn::BitCast(du, value), sign));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
}

template <class DF>
HWY_INLINE void StoreHalves(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
#if MHA_HALF_EMULATED
  // Adds just under half a half-ulp (13 dropped bits), plus the kept lowest
  // bit for ties to even, so that truncation rounds to nearest even.
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto odd = hn::And(hn::ShiftRight<13>(bits), hn::Set(du, 1u));
  v = hn::BitCast(df, hn::Add(bits, hn::Add(hn::Set(du, 0xFFFu), odd)));
#endif
  hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
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
