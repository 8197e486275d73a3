// float32 <-> the 16-bit formats of a KV cache's keys and values, IEEE
// float16 and bfloat16 (the upper half of a float32), with the same results
// on every target: round to nearest even, overflow to infinity, infinities
// and NaN kept (a NaN stays a NaN; its payload may not). Widening bfloat16
// is a shift; widening a half is where the targets differ (below).
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
#include "src/kernels/kernels.h"

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

// Loads Lanes(df) halves as floats. Where Highway emulates PromoteTo (as many
// operations per vector as the attention's own arithmetic on a float16 cache),
// the half's exponent and mantissa are moved into
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

// The formats, as tags for the templates below.
struct HalfFormat {};
struct BFloat16Format {};

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, HalfFormat, const uint16_t* HWY_RESTRICT p) {
  return LoadHalves(df, p);
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadWide(DF df, BFloat16Format, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

template <class DF>
HWY_INLINE void StoreNarrow(DF df, HalfFormat, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  StoreHalves(df, v, p);
}

// Rounded to nearest even by adding just under half a unit of the 16 kept
// bits plus the lowest kept bit (a carry into the exponent is the right
// result, up to infinity); a NaN gets a quiet bit, so that its kept upper
// half stays a NaN.
template <class DF>
HWY_INLINE void StoreNarrow(DF df, BFloat16Format, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const auto bits = hn::BitCast(du, v);
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFF)), odd));
  const auto quiet = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40));
  const auto nan = hn::Gt(hn::And(bits, hn::Set(du, 0x7FFFFFFF)), hn::Set(du, 0x7F800000));
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::IfThenElse(nan, quiet, rounded))), d16, p);
}

#if HWY_TARGET != HWY_SCALAR && HWY_MAX_BYTES == 16
// Widens 2 * Lanes(df) values at once to *lo and *hi (in order): where
// vectors are one 128-bit block, interleaving two 16-bit vectors makes
// 32-bit lanes. bfloat16: zeros below each value.
template <class DF>
HWY_INLINE void LoadWidePair(DF df, BFloat16Format, const uint16_t* HWY_RESTRICT p,
                             hn::Vec<DF>* lo, hn::Vec<DF>* hi) {
  const hn::Repartition<uint16_t, DF> d16;
  const auto v = hn::LoadU(d16, p), zero = hn::Zero(d16);
  *lo = hn::BitCast(df, hn::InterleaveLower(d16, zero, v));
  *hi = hn::BitCast(df, hn::InterleaveUpper(d16, zero, v));
}

#if MHA_HALF_EMULATED
// Halves: LoadHalves' recipe on 16-bit lanes, half the operations per value.
// The upper 16 bits of a float become the sign, three zeros and the half's
// upper 13 bits (an arithmetic shift by 3 with the copies of the sign
// cleared), or for infinity and NaN an exponent of all ones; the lower 16
// its 3 lowest bits. Scaled by 2^112 (infinity and NaN stay so), as there.
template <class DF>
HWY_INLINE void LoadWidePair(DF df, HalfFormat, const uint16_t* HWY_RESTRICT p,
                             hn::Vec<DF>* lo, hn::Vec<DF>* hi) {
  const hn::Repartition<int16_t, DF> d16;
  const auto h = hn::BitCast(d16, hn::LoadU(hn::RebindToUnsigned<decltype(d16)>(), p));
  const auto exponent = hn::And(h, hn::Set(d16, 0x7C00));
  const auto special = hn::And(hn::VecFromMask(d16, hn::Eq(exponent, hn::Set(d16, 0x7C00))),
                               hn::Set(d16, 0x7000));
  const auto upper = hn::Or(hn::And(hn::ShiftRight<3>(h), hn::Set(d16, -0x7001)), special);
  const auto lower = hn::ShiftLeft<13>(h);
  const auto scale = hn::Set(df, 0x1p112f);
  *lo = hn::Mul(hn::BitCast(df, hn::InterleaveLower(d16, lower, upper)), scale);
  *hi = hn::Mul(hn::BitCast(df, hn::InterleaveUpper(d16, lower, upper)), scale);
}
#endif
#endif

// dst[i] = the 16-bit value src[i] widened, for i < n (exact).
template <class Format>
HWY_INLINE void WidenRow(Format format, const uint16_t* HWY_RESTRICT src, size_t n,
                         float* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR && HWY_MAX_BYTES == 16 && MHA_HALF_EMULATED
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    hn::Vec<decltype(d)> lo, hi;
    LoadWidePair(d, format, src + i, &lo, &hi);
    hn::StoreU(lo, d, dst + i);
    hn::StoreU(hi, d, dst + i + lanes);
  }
#endif
  for (; i + lanes <= n; i += lanes) hn::StoreU(LoadWide(d, format, src + i), d, dst + i);
  for (; i < n; ++i) hn::StoreU(LoadWide(d1, format, src + i), d1, dst + i);
}

// dst[i] = src[i] rounded to the 16-bit format, for i < n.
template <class Format>
HWY_INLINE void NarrowRow(Format format, const float* HWY_RESTRICT src, size_t n,
                          uint16_t* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) {
    StoreNarrow(d, format, hn::LoadU(d, src + i), dst + i);
  }
  for (; i < n; ++i) StoreNarrow(d1, format, hn::LoadU(d1, src + i), dst + i);
}

inline void FloatToHalf(const float* HWY_RESTRICT src, size_t n, uint16_t* HWY_RESTRICT dst) {
  NarrowRow(HalfFormat(), src, n, dst);
}
inline void HalfToFloat(const uint16_t* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  WidenRow(HalfFormat(), src, n, dst);
}
inline void FloatToBFloat16(const float* HWY_RESTRICT src, size_t n, uint16_t* HWY_RESTRICT dst) {
  NarrowRow(BFloat16Format(), src, n, dst);
}
inline void BFloat16ToFloat(const uint16_t* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  WidenRow(BFloat16Format(), src, n, dst);
}

// dst[i] = src[i] widened from 16-bit `storage`, for i < n.
inline void Widen16(kernels::Storage storage, const uint16_t* HWY_RESTRICT src, size_t n,
                    float* HWY_RESTRICT dst) {
  if (storage == kernels::Storage::kBFloat16) {
    WidenRow(BFloat16Format(), src, n, dst);
  } else {
    WidenRow(HalfFormat(), src, n, dst);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_FLOAT16_INL_H_
