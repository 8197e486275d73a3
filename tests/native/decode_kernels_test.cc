// The decoding kernels against scalar references, on every target: rotary
// positions (both pairings, partial dims, vector tails) and the float16
// conversions of a float16 KV cache.
#include <cmath>
#include <cstdint>
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
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                         : std::ldexp(1024.0 + mantissa, exponent - 25);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

TEST_P(DecodeKernelTest, HalfToFloatIsExactForEveryFiniteHalf) {
  std::vector<uint16_t> halves;
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    if (((bits >> 10) & 31) != 31) halves.push_back(static_cast<uint16_t>(bits));
  }
  std::vector<float> floats(halves.size());
  mha::kernels::HalfToFloat(halves.data(), halves.size(), floats.data());
  for (size_t i = 0; i < halves.size(); ++i) {
    ASSERT_EQ(floats[i], HalfValue(halves[i])) << "half bits " << halves[i];
  }
}

// x rounded to the nearest half, ties to even, for |x| in the normal range.
double NearestHalf(double x) {
  int exponent;
  std::frexp(x, &exponent);                    // |x| in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, exponent - 11);  // 11 significant bits
  return std::nearbyint(x / ulp) * ulp;        // the default mode: ties to even
}

TEST_P(DecodeKernelTest, FloatToHalfRoundsToNearestEven) {
  // Random magnitudes over the normal half range, exact ties, odd lengths.
  std::vector<float> x;
  const std::vector<float> r = RandomVector(3001, 7);
  for (size_t i = 0; i < r.size(); ++i) {
    x.push_back(std::ldexp(r[i], static_cast<int>(i % 29) - 13));
  }
  for (float tie : {1.0f + 0.5f / 1024, 1.0f + 1.5f / 1024, -3.0f - 2.5f / 512, 65504.0f}) {
    x.push_back(tie);
  }
  std::vector<uint16_t> halves(x.size());
  mha::kernels::FloatToHalf(x.data(), x.size(), halves.data());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) < std::ldexp(1.0, -14)) continue;  // half subnormals: see float16-inl.h
    ASSERT_EQ(HalfValue(halves[i]), NearestHalf(x[i])) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace mha_test
