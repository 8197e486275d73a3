// NaN and Infinity in, PyTorch's NaN out, on every Highway target: a NaN
// score (from a NaN or infinite query, key or float mask value) makes its
// row NaN instead of silently dropping that key.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// (B, L, E) queries against S keys; S spans several key tiles.
constexpr int64_t kB = 2, kL = 5, kS = 70, kE = 8;

struct Sdpa {
  std::vector<float> q = RandomVector(kB * kL * kE, 1), k = RandomVector(kB * kS * kE, 2),
                     v = RandomVector(kB * kS * kE, 3);
  std::vector<float> mask = std::vector<float>(kL * kS, 0.0f);  // (L, S), additive

  mha::Tensor Run() {
    mha::SdpaOptions options;
    options.attn_mask = mha::MaskView::Float(mask.data(), {kL, kS});
    mha::Tensor out;
    EXPECT_TRUE(mha::ScaledDotProductAttention({q.data(), {kB, kL, kE}}, {k.data(), {kB, kS, kE}},
                                               {v.data(), {kB, kS, kE}}, options, &out).ok());
    return out;
  }
};

// Whether row (b, i) of an SDPA output is all NaN / all finite.
bool RowIs(const mha::Tensor& out, int64_t b, int64_t i, bool nan) {
  for (int64_t e = 0; e < kE; ++e) {
    const float x = out.data[(b * kL + i) * kE + e];
    if (nan ? !std::isnan(x) : !std::isfinite(x)) return false;
  }
  return true;
}

class NanTest : public hwy::TestWithParamTarget {};

TEST_P(NanTest, NanOrInfInAKeyMakesEveryRowOfItsBatchNan) {
  for (float bad : {kNaN, kInf}) {
    Sdpa sdpa;
    sdpa.k[(1 * kS + 37) * kE + 2] = bad;  // batch 1, key 37 (a later key tile)
    const mha::Tensor out = sdpa.Run();
    for (int64_t i = 0; i < kL; ++i) {
      EXPECT_TRUE(RowIs(out, 0, i, false)) << "batch 0 row " << i << " (bad " << bad << ")";
      EXPECT_TRUE(RowIs(out, 1, i, true)) << "batch 1 row " << i << " (bad " << bad << ")";
    }
  }
}

TEST_P(NanTest, NanInAQueryOrFloatMaskMakesThatRowNan) {
  Sdpa sdpa;
  sdpa.q[(0 * kL + 3) * kE + 1] = kNaN;  // batch 0, query 3
  sdpa.mask[1 * kS + 60] = kNaN;         // query 1 of every batch
  const mha::Tensor out = sdpa.Run();
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t i = 0; i < kL; ++i) {
      const bool nan = i == 1 || (b == 0 && i == 3);
      EXPECT_TRUE(RowIs(out, b, i, nan)) << "batch " << b << " row " << i;
    }
  }
}

TEST_P(NanTest, MhaWeightsRowOfANanKeyIsNan) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = kE;
  config.num_heads = 2;
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_TRUE(mha::MultiheadAttention::Create(config, &module).ok());
  uint32_t seed = 10;
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    const std::vector<float> values = RandomVector(mha::NumElements(spec.shape), seed++);
    ASSERT_TRUE(module->LoadParameter(spec.name, values.data(), spec.shape).ok());
  }
  std::vector<float> q = RandomVector(kL * kE, 4), k = RandomVector(kS * kE, 5);
  k[20 * kE] = kNaN;
  for (bool need_weights : {true, false}) {
    mha::ForwardOptions options;
    options.need_weights = need_weights;
    mha::ForwardResult result;
    ASSERT_TRUE(module->Forward({q.data(), {kL, kE}}, {k.data(), {kS, kE}}, {k.data(), {kS, kE}},
                                options, &result).ok());
    for (float x : result.output.data) EXPECT_TRUE(std::isnan(x));
    for (float x : result.weights.data) EXPECT_TRUE(std::isnan(x));
  }
}

HWY_TARGET_INSTANTIATE_TEST_SUITE_P(NanTest);

}  // namespace
}  // namespace mha_test
