// The softmax building blocks on every Highway target: ExpNonPositive against
// std::exp over its whole domain and its special values, and SoftmaxRow
// against a double-precision softmax.
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "hwy/aligned_allocator.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/native/softmax_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/softmax-inl.h"
#include "tests/native/reference.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs exp_fn (ExpNonPositive or Exp2NonPositive) on xs, one vector at a time.
template <class ExpFn>
std::vector<float> Apply(const ExpFn& exp_fn, const std::vector<float>& xs) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  std::vector<float> out(xs.size());
  auto buffer = hwy::AllocateAligned<float>(lanes);
  for (size_t i = 0; i < xs.size(); i += lanes) {
    for (size_t l = 0; l < lanes; ++l) buffer[l] = xs[HWY_MIN(i + l, xs.size() - 1)];
    hn::Store(exp_fn(d, hn::Load(d, buffer.get())), d, buffer.get());
    for (size_t l = 0; l < lanes && i + l < xs.size(); ++l) out[i + l] = buffer[l];
  }
  return out;
}

std::vector<float> ExpOf(const std::vector<float>& xs) {
  return Apply([](auto d, auto v) { return ExpNonPositive(d, v); }, xs);
}

std::vector<float> Exp2Of(const std::vector<float>& xs) {
  return Apply([](auto d, auto v) { return Exp2NonPositive(d, v); }, xs);
}

void TestExpNonPositiveMatchesStdExp() {
  std::vector<float> xs;
  for (float x = 0.0f; x > -90.0f; x -= 0.0137f) xs.push_back(x);
  for (float x : {-0.0f, -1e-30f, -1e-7f, -0.34657f, -0.34658f, -87.29f, -87.31f, -103.0f}) {
    xs.push_back(x);
  }
  const std::vector<float> got = ExpOf(xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    if (xs[i] < -87.3f) {
      HWY_ASSERT(got[i] == 0.0f);  // masked keys must weigh exactly 0
    } else if (std::fabs(got[i] - want) > 3e-7 * want) {
      HWY_ABORT("ExpNonPositive(%.9g) = %.9g, exp = %.9g", xs[i], got[i], want);
    }
  }
}

void TestExpNonPositiveSpecialValues() {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> got = ExpOf({-inf, std::numeric_limits<float>::quiet_NaN(), 0.0f});
  HWY_ASSERT(got[0] == 0.0f);
  HWY_ASSERT(std::isnan(got[1]));  // a NaN score must poison its row, not vanish
  HWY_ASSERT(got[2] == 1.0f);
}

void TestExp2NonPositiveMatchesStdExp2() {
  std::vector<float> ys;
  for (float y = 0.0f; y > -128.0f; y -= 0.0137f) ys.push_back(y);
  for (float y : {-0.0f, -1e-30f, -1e-7f, -0.5f, -0.50001f, -1.5f, -125.9f, -126.01f, -140.0f}) {
    ys.push_back(y);
  }
  const std::vector<float> got = Exp2Of(ys);
  for (size_t i = 0; i < ys.size(); ++i) {
    const double want = std::exp2(static_cast<double>(ys[i]));
    if (ys[i] <= -127.0f) {
      HWY_ASSERT(got[i] == 0.0f);  // masked keys must weigh exactly 0
    } else if (ys[i] < -126.0f) {
      HWY_ASSERT(std::fabs(got[i] - want) <= 0x1p-126);  // 0 or near 2^y
    } else if (std::fabs(got[i] - want) > 3e-7 * want) {
      HWY_ABORT("Exp2NonPositive(%.9g) = %.9g, exp2 = %.9g", ys[i], got[i], want);
    }
  }
}

void TestExp2NonPositiveSpecialValues() {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> got = Exp2Of({-inf, std::numeric_limits<float>::quiet_NaN(), 0.0f});
  HWY_ASSERT(got[0] == 0.0f);
  HWY_ASSERT(std::isnan(got[1]));
  HWY_ASSERT(got[2] == 1.0f);
}

void TestSoftmaxRowMatchesDouble() {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{67}}) {
    std::vector<float> row = mha_test::RandomVector(n, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; i += 3) row[i] *= 40.0f;  // spread the exponents
    if (n > 1) row[1] = neg_inf;
    std::vector<double> want(row.begin(), row.end());
    mha_test::ReferenceSoftmax(&want);
    std::vector<float> got = row;
    SoftmaxRow(got.data(), n);
    for (size_t i = 0; i < n; ++i) HWY_ASSERT(std::fabs(got[i] - want[i]) <= 1e-6 * want[i] + 1e-9);
  }
  std::vector<float> masked(5, neg_inf);  // nothing to attend: NaN, as PyTorch
  SoftmaxRow(masked.data(), masked.size());
  for (float x : masked) HWY_ASSERT(std::isnan(x));
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mha {
HWY_BEFORE_TEST(SoftmaxTest);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExpNonPositiveMatchesStdExp);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExpNonPositiveSpecialValues);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExp2NonPositiveMatchesStdExp2);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestExp2NonPositiveSpecialValues);
HWY_EXPORT_AND_TEST_P(SoftmaxTest, TestSoftmaxRowMatchesDouble);
}  // namespace mha
#endif
