// The decoding kernels against scalar references, on every target: rotary
// positions (both pairings, partial dims, vector tails) and the float16
// conversions of a float16 KV cache.
#include <cmath>
#include <cstdint>
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

// Every half, infinities and NaN included, on every target (the emulated
// conversions once turned them into finite numbers).
TEST_P(DecodeKernelTest, HalfToFloatIsExactForEveryHalf) {
  std::vector<uint16_t> halves;
  for (uint32_t bits = 0; bits < 65536; ++bits) halves.push_back(static_cast<uint16_t>(bits));
  std::vector<float> floats(halves.size());
  mha::kernels::HalfToFloat(halves.data(), halves.size(), floats.data());
  for (size_t i = 0; i < halves.size(); ++i) {
    const double expected = HalfValue(halves[i]);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(floats[i])) << "half bits " << halves[i] << " -> " << floats[i];
    } else {
      ASSERT_EQ(floats[i], expected) << "half bits " << halves[i];
    }
  }
}

// The IEEE half nearest x, ties to even (the default rounding of
// nearbyint): overflow gives infinity, and x below 2^-14 a subnormal.
uint16_t NearestHalfBits(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isnan(a)) return sign | 0x7E00;
  if (std::isinf(a)) return sign | 0x7C00;
  if (a < std::ldexp(1.0, -14)) {
    // Units of 2^-24; rounding up to 1024 gives the smallest normal's bits.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int exponent;
  std::frexp(a, &exponent);  // a in [2^(exponent-1), 2^exponent)
  double mantissa = std::nearbyint(std::ldexp(a, 11 - exponent));  // in [1024, 2048]
  if (mantissa == 2048) {
    mantissa = 1024;
    ++exponent;
  }
  const int biased = exponent - 1 + 15;
  if (biased >= 31) return sign | 0x7C00;
  return sign | static_cast<uint16_t>((biased << 10) | (static_cast<int>(mantissa) - 1024));
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
    const uint16_t expected = NearestHalfBits(x[i]);
    if (std::isnan(x[i])) {
      ASSERT_TRUE((halves[i] & 0x7C00) == 0x7C00 && (halves[i] & 0x3FF) != 0)
          << "NaN -> half bits " << halves[i];
    } else {
      ASSERT_EQ(halves[i], expected) << "x = " << x[i];
    }
  }
}

}  // namespace
}  // namespace mha_test
