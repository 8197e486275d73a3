// The layouts of issue 22 (docs/design.md, "The attention of today's models"):
// neox (GPT-NeoX, BLOOM, Falcon-7B, Falcon-40B: query_key_value grouped per
// key/value head + dense), Phi-3's fused qkv_proj and T5's q/k/v/o, found,
// listed and refused with messages naming both sides. Their results against
// PyTorch are the layout fixtures' (layout_fixture_test.cc).
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/io/weight_layouts.h"
#include "src/multihead_attention.h"
#include "tests/native/layout_fixture.h"

namespace mha_test {
namespace {

void ExpectError(const mha::Status& status, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok()) << "accepted";
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "message \"" << status.message() << "\" lacks \"" << part << "\"";
  }
}

struct Loaded {
  LayoutFixture f;
  mha::WeightOptions options;
  mha::AttentionModule module;
};

void Load(const std::string& name, Loaded* out) {
  ASSERT_TRUE(LoadLayoutFixture(name, &out->f).ok());
  ASSERT_TRUE(out->f.Options(&out->options).ok());
  ASSERT_TRUE(mha::FindAttentionModule(out->f.Shapes(), out->options, &out->module).ok());
}

TEST(FusedLayouts, DetectedWithTheirNames) {
  Loaded l;
  Load("falcon_40b_gqa_two_shards", &l);
  EXPECT_EQ(l.module.layout, mha::WeightLayout::kNeox);
  EXPECT_EQ(l.module.qkv, "transformer.h.1.self_attention.query_key_value");
  EXPECT_EQ(l.module.out, "transformer.h.1.self_attention.dense");
  Load("phi3_qkv_proj_bf16", &l);
  EXPECT_EQ(l.module.layout, mha::WeightLayout::kQkvLinear);
  EXPECT_EQ(l.module.qkv, "model.layers.1.self_attn.qkv_proj");
  EXPECT_EQ(l.module.out, "model.layers.1.self_attn.o_proj");
  Load("t5_q_k_v_o", &l);
  EXPECT_EQ(l.module.out, "encoder.block.1.layer.0.SelfAttention.o");
}

TEST(FusedLayouts, NeoxGroupsNeedTheHeadsOfTheCheckpoint) {
  // Falcon-40B's 4 query heads in 2 groups, loaded as if it had 4 key/value heads: the fused
  // rows do not fit, and the error names the tensor and the configuration.
  Loaded l;
  Load("falcon_40b_gqa_two_shards", &l);
  mha::MultiheadAttentionConfig c = l.f.ModuleConfig();
  c.num_kv_heads = 4;
  std::unique_ptr<mha::MultiheadAttention> m;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  ExpectError(m->LoadSafetensors(l.f.file, l.options),
              {"transformer.h.1.self_attention.query_key_value.weight: expected shape (48, 16)",
               "num_kv_heads 4", "received (32, 16)"});
  // v_head_dim != qk_head_dim has no neox form.
  c.num_kv_heads = 2;
  c.v_head_dim = 2;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  ExpectError(m->LoadSafetensors(l.f.file, l.options),
              {"query_key_value.weight: the neox layout needs", "v_head_dim == qk_head_dim"});
  // The layout has fixed names.
  l.options.names = {{"qkv", "query_key_value"}};
  l.options.layout = mha::WeightLayout::kNeox;
  ExpectError(m->LoadSafetensors(l.f.file, l.options), {"names: the neox layout has fixed names"});
}

TEST(FusedLayouts, ForcedNeoxWithoutItsTensors) {
  Loaded l;
  Load("phi3_qkv_proj_bf16", &l);
  l.options.layout = mha::WeightLayout::kNeox;
  std::unique_ptr<mha::MultiheadAttention> m;
  ASSERT_TRUE(mha::MultiheadAttention::Create(l.f.ModuleConfig(), &m).ok());
  ExpectError(m->LoadSafetensors(l.f.file, l.options),
              {"no attention module under prefix 'model.layers.1.self_attn.'",
               "layout neox: no query_key_value.weight", "qkv_proj.weight"});
}

}  // namespace
}  // namespace mha_test
