// The score options of today's models (docs/design.md, "The attention of today's
// models"): the errors their checks give, on the module and the functional
// form. Their results are the model fixtures' (decoding_fixture_test.cc).
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/attention/rope_scaling.h"
#include "src/io/weight_layouts.h"
#include "src/multihead_attention.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::Status;

void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

mha::MultiheadAttentionConfig SmallConfig() {
  mha::MultiheadAttentionConfig c;
  c.embed_dim = 8;
  c.num_heads = 2;
  return c;
}

// Query (2, 3, 4) against keys and values (2, 5, 4): one head.
mha::Status Sdpa(const std::vector<float>& q, const std::vector<float>& k,
                 const mha::SdpaOptions& o, mha::Tensor* out) {
  return mha::ScaledDotProductAttention({q.data(), {2, 3, 4}}, {k.data(), {2, 5, 4}},
                                        {k.data(), {2, 5, 4}}, o, out);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(ModelOptionErrors, ScaleAndSoftcapOnTheModule) {
  std::unique_ptr<mha::MultiheadAttention> m;
  for (const float scale : {-0.5f, kInf, kNaN}) {
    mha::MultiheadAttentionConfig c = SmallConfig();
    c.scale = scale;
    ExpectError(mha::MultiheadAttention::Create(c, &m), {"scale: expected a positive finite"});
  }
  for (const float softcap : {-50.0f, kInf, kNaN}) {
    mha::MultiheadAttentionConfig c = SmallConfig();
    c.softcap = softcap;
    ExpectError(mha::MultiheadAttention::Create(c, &m), {"softcap: expected a positive finite"});
  }
  mha::MultiheadAttentionConfig c = SmallConfig();
  c.scale = 0.0625f;
  c.softcap = 50.0f;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  EXPECT_EQ(m->config().scale, 0.0625f);
  // 0: the default, resolved to 1 / sqrt(qk_head_dim).
  ASSERT_TRUE(mha::MultiheadAttention::Create(SmallConfig(), &m).ok());
  EXPECT_EQ(m->config().scale, 0.5f);
}

TEST(ModelOptionErrors, WindowOnTheModule) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c = SmallConfig();
  c.window = {-2, 3};
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"window: expected left and right", "-2"});
  // Both sides named: the window and the keys without a position.
  c.window = {3, -1};
  c.add_bias_kv = true;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"window", "add_bias_kv", "add_zero_attn"});
  c.add_bias_kv = false;
  c.add_zero_attn = true;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"window", "add_zero_attn"});
  c.add_zero_attn = false;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
}

// A Llama-style checkpoint (qkv-linear) of a module E = 8, 2 heads, without
// biases, with or without gpt-oss's "sinks".
struct SinksCheckpoint {
  std::vector<float> w = RandomVector(8 * 8, 5), s = RandomVector(2, 6);
  std::map<std::string, mha::TensorView> Dict(bool sinks) const {
    std::map<std::string, mha::TensorView> d;
    for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      d[std::string("attn.") + p + ".weight"] = {w.data(), {8, 8}};
    }
    if (sinks) d["attn.sinks"] = {s.data(), {2}};
    return d;
  }
};

TEST(ModelOptionErrors, SinksPresentExactlyWhenAsked) {
  const SinksCheckpoint ckpt;
  mha::WeightOptions options;
  options.prefix = "attn.";
  mha::MultiheadAttentionConfig c = SmallConfig();
  c.bias = false;
  std::unique_ptr<mha::MultiheadAttention> plain, with_sinks;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &plain).ok());
  c.sinks = true;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &with_sinks).ok());
  EXPECT_EQ(with_sinks->Parameters().back().name, "sinks");
  EXPECT_EQ(with_sinks->Parameters().back().shape, (mha::Shape{2}));
  // Both sides named: the tensor and the option.
  ExpectError(plain->LoadStateDict(ckpt.Dict(true), options),
              {"attn.sinks", "in the checkpoint", "without sinks"});
  ExpectError(with_sinks->LoadStateDict(ckpt.Dict(false), options),
              {"attn.sinks", "not in the checkpoint", "with sinks"});
  EXPECT_TRUE(plain->LoadStateDict(ckpt.Dict(false), options).ok());
  EXPECT_TRUE(with_sinks->LoadStateDict(ckpt.Dict(true), options).ok());
  // listAttentionModules reports them.
  mha::ShapeMap shapes;
  for (const auto& [name, t] : ckpt.Dict(true)) shapes[name] = t.shape;
  const std::vector<mha::AttentionModuleInfo> found = mha::ListAttentionModules(shapes);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].sinks);
  shapes.erase("attn.sinks");
  EXPECT_FALSE(mha::ListAttentionModules(shapes)[0].sinks);
}

TEST(ModelOptionErrors, Alibi) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c = SmallConfig();
  c.alibi.enabled = true;
  c.alibi.slopes = {0.5f, 0.25f, 0.125f};
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"alibi.slopes", "num_heads (2)", "3"});
  c.alibi.slopes = {0.5f, std::numeric_limits<float>::quiet_NaN()};
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"alibi.slopes", "finite"});
  c.alibi.slopes.clear();
  c.add_zero_attn = true;
  ExpectError(mha::MultiheadAttention::Create(c, &m), {"alibi", "add_zero_attn"});
  c.add_zero_attn = false;
  ASSERT_TRUE(mha::MultiheadAttention::Create(c, &m).ok());
  // The ALiBi paper's slopes: 2^-8(h+1)/p for p = 2^floor(log2 H), then 2^-4(2k+1)/p.
  EXPECT_EQ(m->config().alibi.slopes, (std::vector<float>{0.0625f, 0.00390625f}));
  EXPECT_EQ(mha::AlibiSlopes(3), (std::vector<float>{0.0625f, 0.00390625f, 0.25f}));
}

// A module of 2 heads of 4 features with rotary options `r` (enabled).
mha::Status CreateWithRotary(mha::RotaryConfig r) {
  std::unique_ptr<mha::MultiheadAttention> m;
  mha::MultiheadAttentionConfig c = SmallConfig();
  c.rotary = std::move(r);
  c.rotary.enabled = true;
  return mha::MultiheadAttention::Create(c, &m);
}

mha::RopeScaling Yarn() {
  mha::RopeScaling s;
  s.type = "yarn";
  s.factor = 32.0;
  s.original_max_position_embeddings = 4096.0;
  return s;
}

TEST(ModelOptionErrors, RotaryScaling) {
  mha::RotaryConfig r;
  r.scaling.type = "dynamic";
  ExpectError(CreateWithRotary(r), {"rotary.scaling: rope_type 'dynamic' is not supported",
                                    "any other table: rotary.inv_freq and rotary.attention_factor"});
  r.scaling = Yarn();
  ASSERT_TRUE(CreateWithRotary(r).ok());
  r.scaling.factor.reset();
  ExpectError(CreateWithRotary(r), {"rotary.scaling.factor: required by rope_type 'yarn'"});
  r.scaling = Yarn();
  r.scaling.beta_fast = kNaN;
  ExpectError(CreateWithRotary(r), {"rotary.scaling.beta_fast: expected a positive finite"});
  r.scaling = Yarn();
  r.scaling.mscale_all_dim = kInf;
  ExpectError(CreateWithRotary(r), {"rotary.scaling.mscale_all_dim: expected a finite number"});
  r.scaling = Yarn();
  r.base = 1.0;
  ExpectError(CreateWithRotary(r), {"rotary.base: YaRN needs a base other than 1"});
  r.base.reset();
  r.attention_factor = 1.5;
  ExpectError(CreateWithRotary(r), {"rotary.attention_factor: cannot be combined with "
                                    "rotary.scaling"});
  r = mha::RotaryConfig();
  r.scaling.type = "llama3";
  r.scaling.factor = 8.0;
  r.scaling.low_freq_factor = 4.0;
  r.scaling.high_freq_factor = 1.0;
  r.scaling.original_max_position_embeddings = 8192.0;
  ExpectError(CreateWithRotary(r), {"rotary.scaling.high_freq_factor: expected a number above "
                                    "low_freq_factor, got 1"});
  r.scaling.type = "linear";
  r.scaling.factor = -2.0;
  ExpectError(CreateWithRotary(r), {"rotary.scaling.factor: expected a positive finite"});
  r = mha::RotaryConfig();
  r.inv_freq = {1.0f, 0.5f};
  r.attention_factor = 1.2;
  ASSERT_TRUE(CreateWithRotary(r).ok());
  r.base = 10000.0;
  ExpectError(CreateWithRotary(r), {"rotary.inv_freq: cannot be combined with rotary.base"});
  r.base.reset();
  r.scaling.type = "default";
  ExpectError(CreateWithRotary(r), {"rotary.inv_freq: cannot be combined with rotary.scaling"});
  r.scaling.type.clear();
  r.dim = 4;
  r.inv_freq = {1.0f};
  ExpectError(CreateWithRotary(r), {"rotary.inv_freq: expected dim / 2 (2) finite entries, got 1"});
  r.inv_freq = {1.0f, kInf};
  ExpectError(CreateWithRotary(r), {"rotary.inv_freq: expected dim / 2 (2) finite entries"});
  r.inv_freq = {1.0f, 0.5f, 0.25f};  // dim 6 from the table: above qk_head_dim
  r.dim = 0;
  ExpectError(CreateWithRotary(r), {"rotary.dim", "qk_head_dim (4), got 6"});
  r.inv_freq.clear();
  r.attention_factor = 0.0;
  ExpectError(CreateWithRotary(r), {"rotary.attention_factor: expected a positive finite"});
}

// The tables themselves: Llama 3.1's bands and gpt-oss's YaRN (docs/design.md, step 3).
TEST(RotaryTable, Llama3BandsAndYarn) {
  mha::RopeScaling llama;
  llama.type = "llama3";
  llama.factor = 8.0;
  llama.low_freq_factor = 1.0;
  llama.high_freq_factor = 4.0;
  llama.original_max_position_embeddings = 8192.0;
  mha::RotaryFrequencies t, plain;
  ASSERT_TRUE(mha::RotaryTable(128, 500000.0, llama, {}, std::nullopt, &t).ok());
  ASSERT_TRUE(mha::RotaryTable(128, 500000.0, {}, {}, std::nullopt, &plain).ok());
  int kept = 0, slowed = 0, blended = 0;
  for (size_t i = 0; i < 64; ++i) {
    const double wavelength = 2 * 3.14159265358979323846 / plain.inv_freq[i];
    if (wavelength < 2048) kept += t.inv_freq[i] == plain.inv_freq[i];
    if (wavelength > 8192) slowed += t.inv_freq[i] == plain.inv_freq[i] / 8;
    if (wavelength >= 2048 && wavelength <= 8192) {
      blended += t.inv_freq[i] < plain.inv_freq[i] && t.inv_freq[i] > plain.inv_freq[i] / 8;
    }
  }
  EXPECT_EQ(kept + slowed + blended, 64);
  EXPECT_GT(blended, 0);
  mha::RopeScaling yarn = Yarn();  // gpt-oss: base 150000, truncate false
  yarn.truncate = false;
  ASSERT_TRUE(mha::RotaryTable(64, 150000.0, yarn, {}, std::nullopt, &t).ok());
  ASSERT_TRUE(mha::RotaryTable(64, 150000.0, {}, {}, std::nullopt, &plain).ok());
  EXPECT_DOUBLE_EQ(t.attention_factor, 0.1 * std::log(32.0) + 1.0);
  EXPECT_DOUBLE_EQ(t.inv_freq[0], plain.inv_freq[0]);
  EXPECT_DOUBLE_EQ(t.inv_freq[31], plain.inv_freq[31] / 32);
}

TEST(ModelOptionErrors, SoftcapOnTheFunctionalForm) {
  const std::vector<float> q = RandomVector(2 * 3 * 4, 1), k = RandomVector(2 * 5 * 4, 2);
  mha::Tensor out;
  mha::SdpaOptions o;
  o.softcap = -1.0f;
  ExpectError(Sdpa(q, k, o, &out), {"softcap: expected a positive finite", "-1"});
  o.softcap = 0.5f;
  o.window = {1, -3};
  ExpectError(Sdpa(q, k, o, &out), {"window: expected left and right", "-3"});
  o.window = {1, 0};
  const std::vector<float> sinks = {0.5f, -1.0f, 2.0f};
  o.sinks = {sinks.data(), {3}};
  ExpectError(Sdpa(q, k, o, &out), {"sinks: expected shape (1,)", "(3,)"});
  o.sinks = {sinks.data(), {1}};
  o.alibi_slopes = {sinks.data(), {2}};
  ExpectError(Sdpa(q, k, o, &out), {"alibi_slopes: expected shape (1,)", "(2,)"});
  o.alibi_slopes = {sinks.data(), {1}};
  ASSERT_TRUE(Sdpa(q, k, o, &out).ok());
}

// The functional form takes any finite scale, as PyTorch does (the module's
// must be positive); and a call without heads (H = 0, Hkv = 0) returns an empty
// output, with no group of heads to divide by (the fuzzer found FillHeads
// dividing by Hkv = 0).
TEST(ModelOptionErrors, FunctionalFormScaleAndNoHeads) {
  const std::vector<float> q = RandomVector(2 * 3 * 4, 1), k = RandomVector(2 * 5 * 4, 2);
  mha::Tensor out;
  mha::SdpaOptions o;
  o.scale = -0.5f;
  EXPECT_TRUE(Sdpa(q, k, o, &out).ok());
  // Not an infinite one (1e39 as a float32): every score would be NaN.
  o.scale = kInf;
  ExpectError(Sdpa(q, k, o, &out), {"scale: expected a finite number", "inf"});
  o.scale = 0.0f;
  o.softcap = 1.0f;
  ASSERT_TRUE(mha::ScaledDotProductAttention({q.data(), {2, 0, 3, 4}}, {k.data(), {2, 0, 5, 4}},
                                             {k.data(), {2, 0, 5, 4}}, o, &out).ok());
  EXPECT_EQ(out.shape, (mha::Shape{2, 0, 3, 4}));
}

}  // namespace
}  // namespace mha_test
