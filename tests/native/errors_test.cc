// One test per kind of bad input: each returns an error naming the argument
// and shapes, and the module then still runs a valid forward correctly.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::MaskView;
using mha::Shape;
using mha::Status;
using mha::TensorView;

constexpr int64_t kE = 8, kH = 2, kL = 3, kN = 2, kS = 5;

void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

class ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mha::MultiheadAttentionConfig config;
    config.embed_dim = kE;
    config.num_heads = kH;
    ASSERT_TRUE(mha::MultiheadAttention::Create(config, &module_).ok());
    in_w_ = RandomVector(3 * kE * kE, 1);
    in_b_ = RandomVector(3 * kE, 2);
    out_w_ = RandomVector(kE * kE, 3);
    out_b_ = RandomVector(kE, 4);
    LoadAll();
    query_ = RandomVector(kL * kN * kE, 5);
    key_ = RandomVector(kS * kN * kE, 6);
    value_ = RandomVector(kS * kN * kE, 7);
    ASSERT_TRUE(Valid(&expected_).ok());
  }

  void LoadAll() {
    ASSERT_TRUE(module_->LoadParameter("in_proj_weight", in_w_.data(), {3 * kE, kE}).ok());
    ASSERT_TRUE(module_->LoadParameter("in_proj_bias", in_b_.data(), {3 * kE}).ok());
    ASSERT_TRUE(module_->LoadParameter("out_proj.weight", out_w_.data(), {kE, kE}).ok());
    ASSERT_TRUE(module_->LoadParameter("out_proj.bias", out_b_.data(), {kE}).ok());
  }

  Status Valid(mha::ForwardResult* result) {
    return module_->Forward(Q(), K(), V(), mha::ForwardOptions(), result);
  }

  TensorView Q() { return {query_.data(), {kL, kN, kE}}; }
  TensorView K() { return {key_.data(), {kS, kN, kE}}; }
  TensorView V() { return {value_.data(), {kS, kN, kE}}; }

  Status ForwardWith(const mha::ForwardOptions& options) {
    mha::ForwardResult result;
    return module_->Forward(Q(), K(), V(), options, &result);
  }

  // After every error the same module must give the same valid result.
  void TearDown() override {
    mha::ForwardResult result;
    ASSERT_TRUE(Valid(&result).ok());
    EXPECT_EQ(result.output.data, expected_.output.data);
    EXPECT_EQ(result.weights.data, expected_.weights.data);
  }

  std::unique_ptr<mha::MultiheadAttention> module_;
  std::vector<float> in_w_, in_b_, out_w_, out_b_, query_, key_, value_;
  mha::ForwardResult expected_;
};

TEST(CreateErrors, NonPositiveDims) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 0;
  c.num_heads = 2;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"embed_dim", "positive", "0"});
  c.embed_dim = 8;
  c.num_heads = -1;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"num_heads", "-1"});
  c.num_heads = 2;
  c.kdim = -3;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"kdim", "-3"});
  EXPECT_EQ(m, nullptr);
}

TEST(CreateErrors, HeadsNotDividingEmbedDim) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 10;
  c.num_heads = 3;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"num_heads", "10", "3", "divisible"});
  // Explicit head dims lift the requirement, as docs/design.md allows.
  c.qk_head_dim = 4;
  c.v_head_dim = 5;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
}

TEST(CreateErrors, DropoutOutOfRange) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 8;
  c.num_heads = 2;
  c.dropout = 1.5f;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"dropout"});
}

TEST_F(ErrorsTest, UnknownParameter) {
  ExpectError(module_->LoadParameter("bias_k", in_b_.data(), {1, 1, kE}),
              {"bias_k", "in_proj_weight"});
}

TEST_F(ErrorsTest, ParameterOfWrongShape) {
  ExpectError(module_->LoadParameter("in_proj_weight", in_w_.data(), {kE, 3 * kE}),
              {"in_proj_weight", "(24, 8)", "(8, 24)"});
}

TEST_F(ErrorsTest, MissingParameterInStateDictLoadsNothing) {
  // Different weights for the parameters given: TearDown's forward proves
  // none of them was loaded.
  const std::vector<float> other_w = RandomVector(3 * kE * kE, 99), other_out = RandomVector(kE * kE, 98);
  std::map<std::string, TensorView> dict = {{"m.in_proj_weight", {other_w.data(), {3 * kE, kE}}},
                                            {"m.out_proj.weight", {other_out.data(), {kE, kE}}}};
  ExpectError(module_->LoadStateDict(dict, {"m."}), {"missing", "m.in_proj_bias", "m.out_proj.bias"});
  dict["m.in_proj_bias"] = {in_b_.data(), {3 * kE}};
  dict["m.out_proj.bias"] = {out_b_.data(), {kE + 1}};
  ExpectError(module_->LoadStateDict(dict, {"m."}), {"m.out_proj.bias", "(8,)", "(9,)"});
}

TEST_F(ErrorsTest, ForwardBeforeParametersLoaded) {
  std::unique_ptr<mha::MultiheadAttention> fresh;
  mha::MultiheadAttentionConfig c;
  c.embed_dim = kE;
  c.num_heads = kH;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &fresh).ok());
  mha::ForwardResult r;
  ExpectError(fresh->Forward(Q(), K(), V(), {}, &r), {"not loaded", "in_proj_weight"});
}

TEST_F(ErrorsTest, BadSafetensorsBytes) {
  const std::string junk = "definitely not a safetensors file";
  ExpectError(module_->LoadSafetensors(reinterpret_cast<const uint8_t*>(junk.data()), junk.size()),
              {"safetensors"});
  ExpectError(module_->LoadSafetensors(nullptr, 0), {"safetensors"});
}

TEST_F(ErrorsTest, QueryOfWrongRank) {
  mha::ForwardResult r;
  ExpectError(module_->Forward({query_.data(), {kL, kN, kE, 1}}, K(), V(), {}, &r),
              {"query", "(3, 2, 8, 1)"});
}

TEST_F(ErrorsTest, QueryOfWrongEmbedDim) {
  mha::ForwardResult r;
  ExpectError(module_->Forward({query_.data(), {kL, kN * 2, kE / 2}}, K(), V(), {}, &r),
              {"query", "(3, 4, 8)", "(3, 4, 4)"});
}

TEST_F(ErrorsTest, KeyValueRankDiffersFromQuery) {
  mha::ForwardResult r;
  ExpectError(module_->Forward(Q(), {key_.data(), {kS * kN, kE}}, V(), {}, &r), {"key", "3-D"});
}

TEST_F(ErrorsTest, BatchMismatch) {
  mha::ForwardResult r;
  ExpectError(module_->Forward(Q(), {key_.data(), {kN * kS, 1, kE}}, V(), {}, &r),
              {"key", "(10, 2, 8)", "(10, 1, 8)"});
}

TEST_F(ErrorsTest, KeyValueLengthMismatch) {
  mha::ForwardResult r;
  ExpectError(module_->Forward(Q(), K(), {value_.data(), {kS - 1, kN, kE}}, {}, &r),
              {"value", "(5, 2, 8)", "(4, 2, 8)"});
}

TEST_F(ErrorsTest, NullData) {
  mha::ForwardResult r;
  ExpectError(module_->Forward({nullptr, {kL, kN, kE}}, K(), V(), {}, &r), {"query", "null"});
}

TEST_F(ErrorsTest, NegativeDim) {
  mha::ForwardResult r;
  ExpectError(module_->Forward({query_.data(), {-kL, kN, kE}}, K(), V(), {}, &r),
              {"query", "negative", "(-3, 2, 8)"});
}

TEST_F(ErrorsTest, NoKeys) {
  mha::ForwardResult r;
  ExpectError(module_->Forward(Q(), {key_.data(), {0, kN, kE}}, {value_.data(), {0, kN, kE}}, {},
                               &r),
              {"key", "S >= 1"});
}

TEST_F(ErrorsTest, KeyPaddingMaskOfWrongShape) {
  std::vector<uint8_t> mask(kN * kS + 1, 0);
  mha::ForwardOptions o;
  o.key_padding_mask = MaskView::Bool(mask.data(), {kN, kS + 1});
  ExpectError(ForwardWith(o), {"key_padding_mask", "(2, 5)", "(2, 6)"});
}

TEST_F(ErrorsTest, AttnMaskOfWrongShape) {
  std::vector<float> mask(kN * kH * kL * kS, 0.0f);
  mha::ForwardOptions o;
  o.attn_mask = MaskView::Float(mask.data(), {kN, kL, kS});
  ExpectError(ForwardWith(o), {"attn_mask", "(3, 5)", "(4, 3, 5)", "(2, 3, 5)"});
}

TEST_F(ErrorsTest, MaskWithNullData) {
  mha::ForwardOptions o;
  o.attn_mask = MaskView::Bool(nullptr, {kL, kS});
  ExpectError(ForwardWith(o), {"attn_mask", "null"});
}

TEST_F(ErrorsTest, RequestTooLargeForMemory) {
  mha::ForwardResult r;
  const int64_t huge = int64_t{1} << 22;
  ExpectError(module_->Forward({query_.data(), {huge, huge, kE}}, {key_.data(), {1, huge, kE}},
                               {value_.data(), {1, huge, kE}}, {}, &r),
              {"memory"});
}

TEST(SdpaErrors, ShapesAndMasks) {
  const std::vector<float> q = RandomVector(2 * 3 * 4, 1), k = RandomVector(2 * 5 * 4, 2), v = RandomVector(2 * 5 * 6, 3);
  mha::Tensor out;
  mha::SdpaOptions o;
  ExpectError(mha::ScaledDotProductAttention({q.data(), {2, 3, 4}}, {k.data(), {2, 5, 3}},
                                             {v.data(), {2, 5, 6}}, o, &out),
              {"key", "(2, 5, 4)", "(2, 5, 3)"});
  ExpectError(mha::ScaledDotProductAttention({q.data(), {24}}, {k.data(), {2, 5, 4}},
                                             {v.data(), {2, 5, 6}}, o, &out),
              {"query", "(24,)"});
  std::vector<uint8_t> mask(3 * 4, 1);
  o.attn_mask = MaskView::Bool(mask.data(), {3, 4});
  ExpectError(mha::ScaledDotProductAttention({q.data(), {2, 3, 4}}, {k.data(), {2, 5, 4}},
                                             {v.data(), {2, 5, 6}}, o, &out),
              {"attn_mask", "(2, 3, 5)", "(3, 4)"});
  o.is_causal = true;
  o.attn_mask = MaskView::Bool(mask.data(), {3, 5});
  ExpectError(mha::ScaledDotProductAttention({q.data(), {2, 3, 4}}, {k.data(), {2, 5, 4}},
                                             {v.data(), {2, 5, 6}}, o, &out),
              {"attn_mask", "is_causal"});
  o = mha::SdpaOptions();
  ASSERT_TRUE(mha::ScaledDotProductAttention({q.data(), {2, 3, 4}}, {k.data(), {2, 5, 4}},
                                             {v.data(), {2, 5, 6}}, o, &out).ok());
  EXPECT_EQ(out.shape, (Shape{2, 3, 6}));
}

}  // namespace
}  // namespace mha_test
