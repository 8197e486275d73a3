// q/k norms (docs/design.md, "The attention of today's models", step 2): the
// errors of the contract, naming both sides (a q_norm/k_norm in the
// checkpoint and the option), the weight shapes each `over` takes, and the
// kernel on every compiled Highway target. Results against PyTorch are the
// model fixtures' (qwen3_*, gemma3_*, olmo2_*, cohere_*, chameleon_*, run by
// decoding_fixture_test.cc).
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"
#include "src/io/weight_layouts.h"

namespace mha_test {
namespace {

void ExpectError(const mha::Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

// E = 8, 2 query heads of 4 features, 1 key/value head, no biases.
mha::MultiheadAttentionConfig NormConfig(bool enabled, mha::QkNormOver over) {
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 8;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.bias = false;
  c.qk_norm.enabled = enabled;
  c.qk_norm.over = over;
  return c;
}

// A Llama-style checkpoint (qkv-linear) of that module under "attn.", with
// the norm tensors given.
struct Checkpoint {
  std::vector<float> wq = RandomVector(8 * 8, 1), wkv = RandomVector(4 * 8, 2);
  std::vector<float> norm = RandomVector(16, 3);
  std::map<std::string, mha::TensorView> Dict(
      const std::map<std::string, mha::Shape>& norms) const {
    std::map<std::string, mha::TensorView> d = {{"attn.q_proj.weight", {wq.data(), {8, 8}}},
                                                {"attn.k_proj.weight", {wkv.data(), {4, 8}}},
                                                {"attn.v_proj.weight", {wkv.data(), {4, 8}}},
                                                {"attn.o_proj.weight", {wq.data(), {8, 8}}}};
    for (const auto& [name, shape] : norms) d["attn." + name] = {norm.data(), shape};
    return d;
  }
};

std::unique_ptr<mha::MultiheadAttention> Create(const mha::MultiheadAttentionConfig& c) {
  std::unique_ptr<mha::MultiheadAttention> m;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  return m;
}

TEST(QkNormErrors, EpsAndWeightOffset) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c = NormConfig(true, mha::QkNormOver::kHead);
  for (const float eps : {0.0f, -1e-6f, NAN, INFINITY}) {
    c.qk_norm.eps = eps;
    ExpectError(mha::MultiheadAttention::Create(c, &m), {"qk_norm.eps: expected a positive"});
  }
  c.qk_norm.eps = 1e-5f;
  c.qk_norm.weight_offset = INFINITY;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"qk_norm.weight_offset: expected a finite"});
}

TEST(QkNormErrors, NormsPresentExactlyWhenAsked) {
  const Checkpoint ckpt;
  mha::WeightOptions options;
  options.prefix = "attn.";
  const std::map<std::string, mha::Shape> norms = {{"q_norm.weight", {4}}, {"k_norm.weight", {4}}};
  auto plain = Create(NormConfig(false, mha::QkNormOver::kHead));
  auto normed = Create(NormConfig(true, mha::QkNormOver::kHead));
  ExpectError(plain->LoadStateDict(ckpt.Dict(norms), options),
              {"attn.q_norm.weight", "in the checkpoint", "without qk_norm"});
  ExpectError(normed->LoadStateDict(ckpt.Dict({}), options),
              {"attn.q_norm.weight", "not in the checkpoint", "with qk_norm rms over 'head'"});
  ExpectError(normed->LoadStateDict(ckpt.Dict({{"q_norm.weight", {4}}}), options),
              {"attn.k_norm.weight", "not in the checkpoint"});
  // RMSNorm has no bias.
  ExpectError(normed->LoadStateDict(ckpt.Dict({{"q_norm.weight", {4}}, {"k_norm.weight", {4}},
                                                {"q_norm.bias", {4}}}), options),
              {"attn.q_norm.bias", "qk_norm rms over 'head' has no bias", "type 'layer'"});
  EXPECT_TRUE(plain->LoadStateDict(ckpt.Dict({}), options).ok());
  EXPECT_TRUE(normed->LoadStateDict(ckpt.Dict(norms), options).ok());
  // The torch layout's names too.
  std::vector<float> in_proj = RandomVector(16 * 8, 4);
  std::map<std::string, mha::TensorView> torch = {{"in_proj_weight", {in_proj.data(), {16, 8}}},
                                                  {"out_proj.weight", {in_proj.data(), {8, 8}}},
                                                  {"q_norm.weight", {in_proj.data(), {4}}}};
  ExpectError(plain->LoadStateDict(torch), {"q_norm.weight", "without qk_norm"});
}

TEST(QkNormErrors, WeightShapesPerOver) {
  const Checkpoint ckpt;
  mha::WeightOptions options;
  options.prefix = "attn.";
  auto head = Create(NormConfig(true, mha::QkNormOver::kHead));
  auto all = Create(NormConfig(true, mha::QkNormOver::kAll));
  EXPECT_EQ(head->Parameters().back().shape, (mha::Shape{4}));
  EXPECT_EQ(all->Parameters().back().shape, (mha::Shape{4}));  // 1 key head of 4
  EXPECT_EQ(all->Parameters()[all->Parameters().size() - 2].shape, (mha::Shape{8}));
  // Over each head: shared (4) or per head (2, 4) / (1, 4); over all: (8) / (4).
  EXPECT_TRUE(head->LoadStateDict(ckpt.Dict({{"q_norm.weight", {2, 4}},
                                             {"k_norm.weight", {1, 4}}}), options).ok());
  ExpectError(head->LoadStateDict(ckpt.Dict({{"q_norm.weight", {8}}, {"k_norm.weight", {4}}}),
                                  options),
              {"attn.q_norm.weight: expected shape (4,) or (2, 4)", "received (8,)",
               "qk_norm rms over 'head'", "num_heads 2"});
  ExpectError(all->LoadStateDict(ckpt.Dict({{"q_norm.weight", {4}}, {"k_norm.weight", {4}}}),
                                 options),
              {"attn.q_norm.weight: expected shape (8,)", "received (4,)", "over 'all'"});
  EXPECT_TRUE(all->LoadStateDict(ckpt.Dict({{"q_norm.weight", {8}}, {"k_norm.weight", {4}}}),
                                 options).ok());
  // LoadParameter names the shapes it takes.
  ExpectError(head->LoadParameter("q_norm.weight", ckpt.norm.data(), {3, 4}),
              {"q_norm.weight: expected shape (4,) or (2, 4), got (3, 4)"});
}

// listAttentionModules tells the three forms apart, and a bias.
TEST(QkNorm, ListedFromTheShapes) {
  const Checkpoint ckpt;
  for (const auto& [q_shape, over] : std::vector<std::pair<mha::Shape, std::string>>{
           {{4}, "head"}, {{2, 4}, "head-per-head"}, {{8}, "all"}}) {
    mha::ShapeMap shapes;
    for (const auto& [name, t] : ckpt.Dict({{"q_norm.weight", q_shape}})) shapes[name] = t.shape;
    std::vector<mha::AttentionModuleInfo> found = mha::ListAttentionModules(shapes);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].qk_norm, over);
    EXPECT_FALSE(found[0].qk_norm_bias);
    shapes["attn.q_norm.bias"] = q_shape;
    EXPECT_TRUE(mha::ListAttentionModules(shapes)[0].qk_norm_bias);
  }
  mha::ShapeMap shapes;
  for (const auto& [name, t] : ckpt.Dict({})) shapes[name] = t.shape;
  EXPECT_EQ(mha::ListAttentionModules(shapes)[0].qk_norm, "");
}

// Forward of `m` on a fixed input (3 rows, batch 1, self-attention).
std::vector<float> Output(mha::MultiheadAttention* m) {
  const std::vector<float> x = RandomVector(3 * 8, 9);
  const mha::TensorView v{x.data(), {3, 1, 8}};
  mha::ForwardResult r;
  EXPECT_TRUE(m->Forward(v, v, v, {}, &r).ok());
  return r.output.data;
}

TEST(QkNorm, SharedWeightEqualsItsRepetitionPerHead) {
  const Checkpoint ckpt;
  mha::WeightOptions options;
  options.prefix = "attn.";
  mha::MultiheadAttentionConfig c = NormConfig(true, mha::QkNormOver::kHead);
  c.qk_norm.type = mha::QkNormType::kLayer;
  auto shared = Create(c);
  auto per_head = Create(c);
  const std::vector<float> x = RandomVector(3 * 8, 9);
  const mha::TensorView input{x.data(), {3, 1, 8}};
  mha::ForwardResult unused;
  ExpectError(shared->Forward(input, input, input, {}, &unused),
              {"parameters not loaded", "q_norm.weight, k_norm.weight"});
  std::vector<float> repeated(ckpt.norm.begin(), ckpt.norm.begin() + 4);
  repeated.insert(repeated.end(), repeated.begin(), repeated.end());
  ASSERT_TRUE(shared->LoadStateDict(ckpt.Dict({{"q_norm.weight", {4}}, {"k_norm.weight", {4}},
                                               {"q_norm.bias", {4}}}), options).ok());
  std::map<std::string, mha::TensorView> d = ckpt.Dict({{"k_norm.weight", {1, 4}}});
  d["attn.q_norm.weight"] = {repeated.data(), {2, 4}};
  d["attn.q_norm.bias"] = {repeated.data(), {2, 4}};
  ASSERT_TRUE(per_head->LoadStateDict(d, options).ok());
  EXPECT_EQ(Output(shared.get()), Output(per_head.get()));
  // The norm does something: without it the output differs.
  auto plain = Create(NormConfig(false, mha::QkNormOver::kHead));
  ASSERT_TRUE(plain->LoadStateDict(ckpt.Dict({}), options).ok());
  EXPECT_NE(Output(plain.get()), Output(shared.get()));
}

// The kernel against float64 on each target, widths around the vector sizes.
class QkNormKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(QkNormKernelTest);

TEST_P(QkNormKernelTest, MatchesDouble) {
  for (const size_t width : {1u, 3u, 4u, 7u, 8u, 16u, 17u, 33u, 64u}) {
    for (const bool layer : {false, true}) {
      const size_t groups = 3;
      std::vector<float> x = RandomVector(groups * width, 11), w = RandomVector(groups * width, 12),
                         b = RandomVector(groups * width, 13);
      for (float& v : x) v = 3.0f * v + 0.5f;  // a mean LayerNorm must remove
      std::vector<float> y = x;
      mha::kernels::NormalizeGroups(y.data(), groups, width, layer, 1e-5f, w.data(),
                                    layer ? b.data() : nullptr);
      for (size_t g = 0; g < groups; ++g) {
        const float* xs = x.data() + g * width;
        double mean = 0, squares = 0;
        for (size_t i = 0; i < width; ++i) mean += layer ? xs[i] / double(width) : 0.0;
        for (size_t i = 0; i < width; ++i) squares += (xs[i] - mean) * (xs[i] - mean);
        const double r = 1.0 / std::sqrt(squares / double(width) + 1e-5);
        for (size_t i = 0; i < width; ++i) {
          const size_t f = g * width + i;
          const double expected = (xs[i] - mean) * r * w[f] + (layer ? b[f] : 0.0);
          EXPECT_NEAR(y[f], expected, 2e-6 * (1.0 + std::abs(expected)))
              << "width " << width << " layer " << layer << " feature " << f;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mha_test
