// Every PyTorch fixture through the public API, on every compiled Highway
// target, single-threaded and on a 2-thread pool.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"

namespace mha_test {
namespace {

void RunMha(Fixture& f, mha::ThreadPool* pool) {
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_OK(mha::MultiheadAttention::Create(f.ModuleConfig(), &module));
  ASSERT_OK(module->LoadSafetensors(f.bytes.data(), f.bytes.size(), {"param."}));
  mha::TensorView q, k, v;
  ASSERT_OK(f.View("input.query", &q));
  ASSERT_OK(f.View("input.key", &k));
  ASSERT_OK(f.View("input.value", &v));
  mha::ForwardOptions options;
  ASSERT_OK(f.Options(&options));
  mha::ForwardResult result;
  ASSERT_OK(module->Forward(q, k, v, options, &result, pool));
  mha::Tensor expected;
  ASSERT_OK(f.Expected("expected.output", &expected));
  ExpectClose(result.output, expected, "output");
  if (f.need_weights) {
    ASSERT_OK(f.Expected("expected.weights", &expected));
    ExpectClose(result.weights, expected, "weights");
    // The same output without weights: the flash path, which also skips
    // the keys that masks remove.
    options.need_weights = false;
    ASSERT_OK(module->Forward(q, k, v, options, &result, pool));
    ASSERT_OK(f.Expected("expected.output", &expected));
    ExpectClose(result.output, expected, "output without weights");
  }
  EXPECT_TRUE(options.need_weights || result.weights.shape.empty());
}

void RunSdpa(Fixture& f, mha::ThreadPool* pool) {
  mha::TensorView q, k, v;
  ASSERT_OK(f.View("input.query", &q));
  ASSERT_OK(f.View("input.key", &k));
  ASSERT_OK(f.View("input.value", &v));
  mha::SdpaOptions options;
  ASSERT_OK(f.Options(&options));
  mha::Tensor output, expected;
  ASSERT_OK(mha::ScaledDotProductAttention(q, k, v, options, &output, pool));
  ASSERT_OK(f.Expected("expected.output", &expected));
  ExpectClose(output, expected, "output");
}

std::string FixtureName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = path.substr(slash + 1);
  return name.substr(0, name.size() - std::string(".safetensors").size());
}

class FixtureTest : public hwy::TestWithParamTargetAndT<std::string> {};

TEST_P(FixtureTest, MatchesPyTorch) {
  Fixture f;
  ASSERT_OK(LoadFixture(GetParam(), &f));
  // The dispatched kernels run on the target under test.
  ASSERT_STREQ(mha::kernels::TargetName(), hwy::TargetName(std::get<0>(
      ::testing::TestWithParam<std::tuple<int64_t, std::string>>::GetParam())));
  mha::ThreadPool pool(2);
  for (mha::ThreadPool* p : {static_cast<mha::ThreadPool*>(nullptr), &pool}) {
    SCOPED_TRACE(p == nullptr ? "single thread" : "2-thread pool");
    if (f.kind == "mha") {
      RunMha(f, p);
    } else {
      RunSdpa(f, p);
    }
  }
}

// int8 weights (quantized at load) within the bound docs/precision.md
// states, on every target, single-threaded.
TEST_P(FixtureTest, Int8WeightsWithinBound) {
  Fixture f;
  ASSERT_OK(LoadFixture(GetParam(), &f));
  ScopedInt8Weights int8;
  if (f.kind == "mha") {
    RunMha(f, nullptr);
  } else {
    RunSdpa(f, nullptr);  // no weights: float32's tolerance holds (and the target is used)
  }
}

// Every GEMM register tile the kernels ship, not only the one this target
// chooses (the WASM binding has no hook to force one: this is where the
// others run).
TEST_P(FixtureTest, EveryGemmTileMatchesPyTorch) {
  Fixture f;
  ASSERT_OK(LoadFixture(GetParam(), &f));
  for (size_t tile_rows : mha::kernels::kGemmTileRows) {
    SCOPED_TRACE(mha::kernels::GemmTileName(tile_rows));
    mha::kernels::SetGemmTileRows(tile_rows);
    if (f.kind == "mha") {
      RunMha(f, nullptr);
    } else {
      RunSdpa(f, nullptr);
    }
  }
  mha::kernels::SetGemmTileRows(0);
}

std::string ParamName(const testing::TestParamInfo<std::tuple<int64_t, std::string>>& info) {
  return std::string(hwy::TargetName(std::get<0>(info.param))) + "_" +
         FixtureName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTargets, FixtureTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::ValuesIn(ListFixtures())),
                         ParamName);

TEST(FixtureList, HasFixtures) { EXPECT_GE(ListFixtures().size(), 50u); }

}  // namespace
}  // namespace mha_test
