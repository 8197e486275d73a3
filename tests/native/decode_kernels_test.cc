// The decoding kernels against scalar references, on every target: rotary
// positions (both pairings, partial dims, vector tails) and the float16 and
// bfloat16 conversions of a 16-bit KV cache.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

class DecodeKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(DecodeKernelTest);

TEST_P(DecodeKernelTest, RotateHeadsMatchesReference) {
  uint32_t seed = 1;
  for (bool interleaved : {false, true}) {
    for (size_t head_dim : {size_t{2}, size_t{10}, size_t{64}, size_t{80}}) {
      for (size_t dim : {size_t{2}, head_dim / 2 * 2 - (head_dim > 8 ? 6 : 0), head_dim}) {
        SCOPED_TRACE(testing::Message() << "interleaved=" << interleaved << " head_dim="
                                        << head_dim << " dim=" << dim);
        const size_t heads = 3, stride = head_dim + 1;  // heads need not be adjacent
        std::vector<float> x = RandomVector(heads * stride, seed++);
        const std::vector<float> angles = RandomVector(dim / 2, seed++);
        std::vector<float> cos(dim / 2), sin(dim / 2);
        for (size_t i = 0; i < dim / 2; ++i) {
          cos[i] = static_cast<float>(std::cos(3.0 * angles[i]));
          sin[i] = static_cast<float>(std::sin(3.0 * angles[i]));
        }
        std::vector<float> expected = x;
        for (size_t h = 0; h < heads; ++h) {
          for (size_t i = 0; i < dim / 2; ++i) {
            const size_t ia = h * stride + (interleaved ? 2 * i : i);
            const size_t ib = h * stride + (interleaved ? 2 * i + 1 : i + dim / 2);
            const double a = x[ia], b = x[ib];
            expected[ia] = static_cast<float>(a * cos[i] - b * sin[i]);
            expected[ib] = static_cast<float>(b * cos[i] + a * sin[i]);
          }
        }
        mha::kernels::RotateHeads(x.data(), heads, stride, dim, interleaved, cos.data(),
                                  sin.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_NEAR(x[i], expected[i], 1e-6) << "[" << i << "]";
        }
      }
    }
  }
}

// The value of IEEE half `bits`, computed from its fields.
double HalfValue(uint16_t bits) {
  const int exponent = (bits >> 10) & 31;
  const double mantissa = bits & 1023;
  const double magnitude = exponent == 31 ? (mantissa == 0 ? HUGE_VAL : std::nan(""))
                           : exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1024.0 + mantissa, exponent - 25);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

// Every 16-bit pattern widened by `widen` in runs of `run` values: a run of
// 65536 takes the widest path of every target (two vectors at once where
// vectors are 128-bit), 4 one vector at a time, 1 the single-lane tail.
template <class Widen>
std::vector<float> WidenEveryPattern(Widen widen, size_t run) {
  std::vector<uint16_t> bits;
  for (uint32_t b = 0; b < 65536; ++b) bits.push_back(static_cast<uint16_t>(b));
  std::vector<float> floats(bits.size());
  for (size_t i = 0; i < bits.size(); i += run) widen(bits.data() + i, run, floats.data() + i);
  return floats;
}

// Every half, infinities and NaN included, on every target and path (the
// emulated conversions once turned them into finite numbers).
TEST_P(DecodeKernelTest, HalfToFloatIsExactForEveryHalf) {
  for (size_t run : {size_t{65536}, size_t{4}, size_t{1}}) {
    const std::vector<float> floats = WidenEveryPattern(mha::kernels::HalfToFloat, run);
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const double expected = HalfValue(static_cast<uint16_t>(bits));
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(floats[bits])) << "half bits " << bits << " -> " << floats[bits];
      } else {
        ASSERT_EQ(floats[bits], expected) << "half bits " << bits << ", run " << run;
      }
    }
  }
}

// A bfloat16 is the upper half of a float32: every pattern widens to
// exactly those bits (NaN payloads included), on every target and path.
TEST_P(DecodeKernelTest, BFloat16ToFloatIsExactForEveryBFloat16) {
  for (size_t run : {size_t{65536}, size_t{4}, size_t{1}}) {
    const std::vector<float> floats = WidenEveryPattern(mha::kernels::BFloat16ToFloat, run);
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      uint32_t got;
      std::memcpy(&got, &floats[bits], sizeof(got));
      ASSERT_EQ(got, bits << 16) << "bfloat16 bits " << bits << ", run " << run;
    }
  }
}

// The bits of the value nearest x, ties to even (the default rounding of
// nearbyint), in the format of e exponent and m mantissa bits (IEEE half: 5,
// 10; bfloat16: 8, 7): overflow gives infinity, magnitudes below the
// smallest normal a subnormal.
uint16_t NearestBits(float x, int e, int m) {
  const int bias = (1 << (e - 1)) - 1, inf = ((1 << e) - 1) << m;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isnan(a)) return sign | inf | (1 << (m - 1));
  if (std::isinf(a)) return sign | inf;
  if (a < std::ldexp(1.0, 1 - bias)) {
    // Units of the smallest subnormal; rounding up to 2^m gives the smallest normal's bits.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, bias - 1 + m)));
  }
  int exponent;
  std::frexp(a, &exponent);  // a in [2^(exponent-1), 2^exponent)
  double mantissa = std::nearbyint(std::ldexp(a, m + 1 - exponent));  // in [2^m, 2^(m+1)]
  if (mantissa == std::ldexp(1.0, m + 1)) {
    mantissa /= 2;
    ++exponent;
  }
  const int biased = exponent - 1 + bias;
  if (biased >= (1 << e) - 1) return sign | inf;
  return sign | static_cast<uint16_t>((biased << m) | (static_cast<int>(mantissa) - (1 << m)));
}

TEST_P(DecodeKernelTest, FloatToHalfRoundsToNearestEvenWithIeeeSpecials) {
  // Random magnitudes over the whole half range and beyond (subnormals,
  // overflow), exact ties, the edges of the range, specials, odd lengths.
  std::vector<float> x;
  const std::vector<float> r = RandomVector(6001, 7);
  for (size_t i = 0; i < r.size(); ++i) {
    x.push_back(std::ldexp(r[i], static_cast<int>(i % 53) - 30));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {1.0f + 0.5f / 1024, 1.0f + 1.5f / 1024, -3.0f - 2.5f / 512, 65504.0f,
                        65519.99f, 65520.0f, -65520.0f, 70000.0f, 1e10f, -1e30f, inf, -inf,
                        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::max(), std::ldexp(1.0f, -24),
                        std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(3.0f, -25),
                        std::ldexp(1023.5f, -24), std::ldexp(1.0f, -14), 0.0f, -0.0f,
                        std::numeric_limits<float>::denorm_min()}) {
    x.push_back(special);
  }
  std::vector<uint16_t> halves(x.size());
  mha::kernels::FloatToHalf(x.data(), x.size(), halves.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t expected = NearestBits(x[i], 5, 10);
    if (std::isnan(x[i])) {
      ASSERT_TRUE((halves[i] & 0x7C00) == 0x7C00 && (halves[i] & 0x3FF) != 0)
          << "NaN -> half bits " << halves[i];
    } else {
      ASSERT_EQ(halves[i], expected) << "x = " << x[i];
    }
  }
}

TEST_P(DecodeKernelTest, FloatToBFloat16RoundsToNearestEvenWithIeeeSpecials) {
  // Random magnitudes over the whole float range (subnormals, the largest
  // floats), exact ties, carries into the exponent, specials, odd lengths.
  std::vector<float> x;
  const std::vector<float> r = RandomVector(6001, 8);
  for (size_t i = 0; i < r.size(); ++i) {
    x.push_back(std::ldexp(r[i], static_cast<int>(i % 277) - 149));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float special : {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -3.0f - 0x1p-7f, 1.9990234375f,
                        std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                        0x1.fep127f, 0x1.fdp127f, inf, -inf, nan, -nan,
                        std::numeric_limits<float>::denorm_min(), 0x1p-133f, 0x3p-134f,
                        0x1.02p-126f, 0x1.01p-126f, 0.0f, -0.0f}) {
    x.push_back(special);
  }
  // A NaN whose payload lies in the dropped bits only: must stay a NaN.
  const uint32_t low_nan_bits = 0x7F800001;
  float low_nan;
  std::memcpy(&low_nan, &low_nan_bits, sizeof(low_nan));
  x.push_back(low_nan);
  std::vector<uint16_t> bits(x.size());
  mha::kernels::FloatToBFloat16(x.data(), x.size(), bits.data());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE((bits[i] & 0x7F80) == 0x7F80 && (bits[i] & 0x7F) != 0)
          << "NaN -> bfloat16 bits " << bits[i];
    } else {
      ASSERT_EQ(bits[i], NearestBits(x[i], 8, 7)) << "x = " << x[i];
    }
  }
}

}  // namespace
}  // namespace mha_test
