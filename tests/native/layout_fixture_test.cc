// Every weight-layout fixture (tests/fixtures/layouts): the module found in
// a model's checkpoint (whole or in shards, F32/F16/BF16) loads through
// LoadSafetensors and LoadStateDict and reproduces the PyTorch module's
// output, on every compiled Highway target; ListAttentionModules finds the
// modules the generator placed.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/layout_fixture.h"
#include "src/io/weight_layouts.h"

namespace mha_test {
namespace {

// Forward with and without weights; both outputs must match the module's.
void ExpectOutput(LayoutFixture& f, mha::MultiheadAttention& module, mha::ThreadPool* pool) {
  std::map<std::string, std::vector<float>> storage;
  std::map<std::string, mha::TensorView> floats;
  ASSERT_OK(f.FloatTensors(&storage, &floats));
  mha::ForwardOptions options;
  auto kpm = f.file.tensors.find("test.input.key_padding_mask");
  if (kpm != f.file.tensors.end()) {
    options.key_padding_mask = mha::MaskView::Bool(kpm->second.data, kpm->second.shape);
  }
  options.is_causal = f.config.Find("is_causal")->boolean;
  const mha::TensorView& expected = floats.at("test.expected.output");
  const std::vector<float> want(expected.data, expected.data + mha::NumElements(expected.shape));
  for (bool need_weights : {false, true}) {
    options.need_weights = need_weights;
    mha::ForwardResult result;
    ASSERT_OK(module.Forward(floats.at("test.input.query"), floats.at("test.input.key"),
                             floats.at("test.input.value"), options, &result, pool));
    ExpectClose(result.output, want, expected.shape,
                need_weights ? "output with weights" : "output");
  }
}

class LayoutFixtureTest : public hwy::TestWithParamTargetAndT<std::string> {
 protected:
  void SetUp() override {
    hwy::TestWithParamTargetAndT<std::string>::SetUp();
    ASSERT_OK(LoadLayoutFixture(GetParam(), &fixture_));
    ASSERT_OK(fixture_.Options(&options_));
    ASSERT_OK(mha::MultiheadAttention::Create(fixture_.ModuleConfig(), &module_));
    ASSERT_STREQ(mha::kernels::TargetName(), hwy::TargetName(std::get<0>(
        ::testing::TestWithParam<std::tuple<int64_t, std::string>>::GetParam())));
  }

  LayoutFixture fixture_;
  mha::WeightOptions options_;
  std::unique_ptr<mha::MultiheadAttention> module_;
};

TEST_P(LayoutFixtureTest, LoadSafetensorsMatchesPyTorch) {
  ASSERT_OK(module_->LoadSafetensors(fixture_.file, options_));
  mha::ThreadPool pool(2);
  ExpectOutput(fixture_, *module_, nullptr);
  ExpectOutput(fixture_, *module_, &pool);
}

TEST_P(LayoutFixtureTest, LoadStateDictMatchesPyTorch) {
  std::map<std::string, std::vector<float>> storage;
  std::map<std::string, mha::TensorView> dict;
  ASSERT_OK(fixture_.FloatTensors(&storage, &dict));
  ASSERT_OK(module_->LoadStateDict(dict, options_));
  ExpectOutput(fixture_, *module_, nullptr);
}

// int8 weights within the bound docs/precision.md states.
TEST_P(LayoutFixtureTest, Int8WeightsWithinBound) {
  ScopedInt8Weights int8;
  ASSERT_OK(mha::MultiheadAttention::Create(fixture_.ModuleConfig(), &module_));
  ASSERT_OK(module_->LoadSafetensors(fixture_.file, options_));
  ExpectOutput(fixture_, *module_, nullptr);
}

std::string ParamName(const testing::TestParamInfo<std::tuple<int64_t, std::string>>& info) {
  return std::string(hwy::TargetName(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllTargets, LayoutFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::ValuesIn(ListLayoutFixtures())),
                         ParamName);

// The listing finds exactly the modules the generator placed (target-free).
TEST(LayoutFixtureListing, FindsTheModulesPlaced) {
  const std::vector<std::string> names = ListLayoutFixtures();
  ASSERT_GE(names.size(), 19u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    LayoutFixture f;
    ASSERT_OK(LoadLayoutFixture(name, &f));
    const std::vector<mha::AttentionModuleInfo> found = mha::ListAttentionModules(f.Shapes());
    const mha::json::Value& expected = *f.config.Find("modules");
    ASSERT_EQ(found.size(), expected.array.size());
    for (size_t i = 0; i < found.size(); ++i) {
      const mha::json::Value& e = expected.array[i];
      const mha::AttentionModuleInfo& m = found[i];
      EXPECT_EQ(m.module.prefix, e.Find("prefix")->string);
      EXPECT_EQ(mha::LayoutName(m.module.layout), e.Find("layout")->string);
      EXPECT_EQ(m.embed_dim, e.Find("embed_dim")->integer);
      EXPECT_EQ(m.kdim, e.Find("kdim")->integer);
      EXPECT_EQ(m.vdim, e.Find("vdim")->integer);
      EXPECT_EQ(m.q_size, e.Find("q_size")->integer);
      EXPECT_EQ(m.k_size, e.Find("k_size")->integer);
      EXPECT_EQ(m.v_size, e.Find("v_size")->integer);
      EXPECT_EQ(m.bias, e.Find("bias")->boolean);
    }
  }
}

}  // namespace
}  // namespace mha_test
