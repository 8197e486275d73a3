// Layout detection, the `layout` / `names` options and their errors, on the
// layout fixtures and on small state_dicts built here. Every failed load
// must leave the module as it was.
#include "src/io/weight_layouts.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/layout_fixture.h"

namespace mha {
namespace {

using mha_test::LayoutFixture;

void ExpectError(const Status& status, const std::vector<std::string>& parts) {
  ASSERT_FALSE(status.ok()) << "accepted";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "message \"" << status.message() << "\" lacks \"" << part << "\"";
  }
}

std::unique_ptr<MultiheadAttention> Module(int64_t embed_dim, int64_t num_heads, bool bias = true,
                                           int64_t qk_head_dim = 0) {
  MultiheadAttentionConfig c;
  c.embed_dim = embed_dim;
  c.num_heads = num_heads;
  c.bias = bias;
  c.qk_head_dim = qk_head_dim;
  c.batch_first = true;
  std::unique_ptr<MultiheadAttention> m;
  EXPECT_TRUE(MultiheadAttention::Create(c, &m).ok());
  return m;
}

class FixtureErrors : public testing::Test {
 protected:
  void Load(const std::string& name) {
    ASSERT_TRUE(mha_test::LoadLayoutFixture(name, &f_).ok());
    ASSERT_TRUE(f_.Options(&options_).ok());
  }
  LayoutFixture f_;
  WeightOptions options_;
};

TEST_F(FixtureErrors, NoAttentionModuleUnderPrefix) {
  Load("bert_kpm");
  auto m = Module(16, 2);
  options_.prefix = "bert.encoder.layer.1.";
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"no attention module under prefix 'bert.encoder.layer.1.'",
               "names under 'bert.encoder.layer.1.': attention.output.LayerNorm.bias",
               "attention.self.query.weight",
               "nearest prefixes holding an attention module: "
               "'bert.encoder.layer.1.attention.' (qkv-linear), "
               "'bert.encoder.layer.0.attention.' (qkv-linear)"});
  options_.prefix = "bert.encoder.layer.1.attention.self.";
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"found query/key/value projections but no output projection",
               "names under 'bert.encoder.layer.1.attention.self.': key.bias, key.weight"});
  options_.prefix = "roberta.";
  ExpectError(m->LoadSafetensors(f_.file, options_), {"no tensor name starts with 'roberta.'"});
}

TEST_F(FixtureErrors, ShapeThatDoesNotFitNamesTensorExpectedAndReceived) {
  Load("bert_kpm");
  auto m = Module(16, 2, true, /*qk_head_dim=*/4);
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"bert.encoder.layer.1.attention.self.query.weight: expected shape (8, 16)",
               "qk_head_dim 4", "received (16, 16)"});
  Load("gpt2_causal");
  m = Module(8, 2);
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"transformer.h.1.attn.c_attn.weight: expected shape (8, 24)", "received (16, 48)"});
}

TEST_F(FixtureErrors, KeyValueHeadsThatDoNotFit) {
  // Llama with as many key/value heads as query heads, into a grouped-query module.
  Load("llama_no_bias");
  MultiheadAttentionConfig c = f_.ModuleConfig();
  c.num_kv_heads = 1;
  std::unique_ptr<MultiheadAttention> m;
  ASSERT_TRUE(MultiheadAttention::Create(c, &m).ok());
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"model.layers.1.self_attn.k_proj.weight: expected shape (8, 16)", "num_kv_heads 1",
               "received (16, 16)"});
  // And the grouped-query checkpoint into a module without grouped heads.
  Load("llama_gqa_rotary");
  c = f_.ModuleConfig();
  c.num_kv_heads = 0;
  ASSERT_TRUE(MultiheadAttention::Create(c, &m).ok());
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"k_proj.weight: expected shape (16, 16)", "num_kv_heads 4", "received (8, 16)"});
}

TEST_F(FixtureErrors, BiasInTheFileWithBiasFalse) {
  Load("whisper_self_no_k_bias");
  auto m = Module(16, 2, /*bias=*/false);
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"model.encoder.layers.1.self_attn.q_proj.bias: in the checkpoint", "bias: false"});
}

TEST_F(FixtureErrors, ForcedLayoutThatIsNotThere) {
  Load("llama_no_bias");
  auto m = Module(16, 2, false);
  options_.layout = WeightLayout::kGpt2;
  ExpectError(m->LoadSafetensors(f_.file, options_),
              {"no attention module under prefix 'model.layers.1.self_attn.'", "layout gpt2",
               "names under 'model.layers.1.self_attn.': k_proj.weight, o_proj.weight"});
}

TEST_F(FixtureErrors, NamesThatAreWrong) {
  Load("names_diffusers");
  auto m = Module(16, 2);
  WeightOptions o = options_;
  o.names = {{"q", "to_q"}};
  ExpectError(m->LoadSafetensors(f_.file, o), {"q, k and v go together"});
  o.names = {{"query", "to_q"}};
  ExpectError(m->LoadSafetensors(f_.file, o), {"unknown role 'query'"});
  o.names = {{"qkv", "to_q"}, {"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}};
  ExpectError(m->LoadSafetensors(f_.file, o), {"either qkv"});
  o.names = options_.names;
  o.names["out"] = "to_out.1";
  ExpectError(m->LoadSafetensors(f_.file, o), {"no tensor 'unet.blocks.1.attn1.to_out.1.weight'"});
  o.names = options_.names;
  o.layout = WeightLayout::kTorch;
  ExpectError(m->LoadSafetensors(f_.file, o), {"torch layout has fixed names"});
  // Without names this style is no known layout.
  o = options_;
  o.names.clear();
  ExpectError(m->LoadSafetensors(f_.file, o),
              {"no attention module under prefix 'unet.blocks.1.attn1.'", "to_out.0.weight",
               "no prefix in this checkpoint holds an attention module"});
}

TEST_F(FixtureErrors, FailedLoadsChangeNothing) {
  Load("seed_q_k_v_out_proj");
  MultiheadAttentionConfig c = f_.ModuleConfig();
  std::unique_ptr<MultiheadAttention> m;
  ASSERT_TRUE(MultiheadAttention::Create(c, &m).ok());
  ASSERT_TRUE(m->LoadSafetensors(f_.file, options_).ok());
  std::map<std::string, std::vector<float>> storage;
  std::map<std::string, TensorView> t;
  ASSERT_TRUE(f_.FloatTensors(&storage, &t).ok());
  ForwardOptions fo;
  fo.need_weights = false;
  ForwardResult before, after;
  ASSERT_TRUE(m->Forward(t["test.input.query"], t["test.input.key"], t["test.input.value"], fo,
                         &before).ok());
  // Layer 0's out_proj with a wrong shape: its q, k, v are fine and must not load.
  WeightOptions o{"model.blocks.0.attn."};
  std::vector<float> wrong(16 * 15);
  t["model.blocks.0.attn.out_proj.weight"] = TensorView{wrong.data(), {16, 15}};
  ExpectError(m->LoadStateDict(t, o), {"model.blocks.0.attn.out_proj.weight", "(16, 15)"});
  ASSERT_TRUE(m->Forward(t["test.input.query"], t["test.input.key"], t["test.input.value"], fo,
                         &after).ok());
  EXPECT_EQ(before.output.data, after.output.data);
}

// A small state_dict: zero-filled tensors of the given shapes.
struct Dict {
  std::map<std::string, std::vector<float>> storage;
  std::map<std::string, TensorView> views;
  void Add(const std::string& name, const Shape& shape) {
    storage[name].assign(static_cast<size_t>(NumElements(shape)), 0.5f);
    views[name] = TensorView{storage[name].data(), shape};
  }
};

TEST(LayoutDetection, TwoCandidateLayoutsUnderOnePrefix) {
  Dict d;
  d.Add("m.in_proj_weight", {48, 16});
  d.Add("m.out_proj.weight", {16, 16});
  for (const char* p : {"m.q_proj.weight", "m.k_proj.weight", "m.v_proj.weight"}) d.Add(p, {16, 16});
  auto m = Module(16, 2, false);
  ExpectError(m->LoadStateDict(d.views, {"m."}),
              {"prefix 'm.' holds 2 candidate attention modules: torch, qkv-linear (q_proj, "
               "k_proj, v_proj, out_proj)",
               "`layout`", "names under 'm.': in_proj_weight, k_proj.weight"});
  EXPECT_TRUE(m->LoadStateDict(d.views, {"m.", WeightLayout::kTorch}).ok());
  EXPECT_TRUE(m->LoadStateDict(d.views, {"m.", WeightLayout::kQkvLinear}).ok());
  // Two names for one projection within qkv-linear.
  Dict e;
  for (const char* p : {"a.q.weight", "a.k.weight", "a.v.weight", "a.query.weight",
                        "a.key.weight", "a.value.weight", "a.W_o.weight"}) {
    e.Add(p, {16, 16});
  }
  ExpectError(m->LoadStateDict(e.views, {"a."}),
              {"2 candidate attention modules: qkv-linear (q, k, v, W_o), qkv-linear (query, key, "
               "value, W_o)"});
  EXPECT_TRUE(m->LoadStateDict(e.views, {"a.", WeightLayout::kAuto,
                                         {{"q", "query"}, {"k", "key"}, {"v", "value"}}}).ok());
}

TEST(LayoutDetection, TorchNamesTheConfigurationLacksAreErrors) {
  Dict d;
  d.Add("in_proj_weight", {48, 16});
  d.Add("out_proj.weight", {16, 16});
  d.Add("bias_k", {1, 1, 16});
  d.Add("norm.weight", {16});  // not an nn.MultiheadAttention name: ignored
  auto m = Module(16, 2, false);
  ExpectError(m->LoadStateDict(d.views), {"unexpected parameter 'bias_k'"});
  d.views.erase("bias_k");
  EXPECT_TRUE(m->LoadStateDict(d.views).ok());
}

TEST(LayoutDetection, StreamedLoadsNameTheTensorsRead) {
  LayoutFixture f;
  ASSERT_TRUE(mha_test::LoadLayoutFixture("gpt2_causal", &f).ok());
  auto m = Module(16, 2);
  std::vector<std::string> names;
  MultiheadAttention::StreamedLoad load;
  ASSERT_TRUE(m->StartLoad(f.file, {"transformer.h.1.attn."}, &load, &names).ok());
  EXPECT_EQ(names, std::vector<std::string>({"transformer.h.1.attn.c_attn.bias",
                                             "transformer.h.1.attn.c_attn.weight",
                                             "transformer.h.1.attn.c_proj.bias",
                                             "transformer.h.1.attn.c_proj.weight"}));
  ExpectError(m->StartLoad(f.file, {"transformer.h.1."}, &load, &names),
              {"nearest prefixes holding an attention module: 'transformer.h.1.attn.' (gpt2)"});
}

// A streamed load (StartLoad, FeedLoad, FinishLoad) changes nothing until
// it finishes, refuses tensors it does not read or has had, and, fed in
// reverse order (a GPT-2 c_attn weight makes three parameters), loads what
// LoadStateDict loads.
TEST(LayoutDetection, StreamedLoadsChangeNothingUntilFinished) {
  LayoutFixture f;
  ASSERT_TRUE(mha_test::LoadLayoutFixture("gpt2_causal", &f).ok());
  const WeightOptions o{"transformer.h.1.attn."};
  auto streamed = Module(16, 2);
  std::vector<std::string> names;
  {
    MultiheadAttention::StreamedLoad dropped;
    ASSERT_TRUE(streamed->StartLoad(f.file, o, &dropped, &names).ok());
    for (size_t i = 0; i + 1 < names.size(); ++i) {
      ASSERT_TRUE(streamed->FeedLoad(&dropped, names[i], f.file.tensors.at(names[i]).data).ok());
    }
    ExpectError(streamed->FeedLoad(&dropped, names[0], f.file.tensors.at(names[0]).data),
                {"'" + names[0] + "' is not one this load reads, or was given already"});
    ExpectError(streamed->FeedLoad(&dropped, "transformer.h.0.attn.c_attn.weight",
                                   f.file.tensors.at("transformer.h.0.attn.c_attn.weight").data),
                {"not one this load reads"});
    ExpectError(streamed->FinishLoad(&dropped), {"before every tensor it reads was given"});
  }
  EXPECT_EQ(streamed->memory(), 0u);
  MultiheadAttention::StreamedLoad load;
  ASSERT_TRUE(streamed->StartLoad(f.file, o, &load, &names).ok());
  for (auto name = names.rbegin(); name != names.rend(); ++name) {
    ASSERT_TRUE(streamed->FeedLoad(&load, *name, f.file.tensors.at(*name).data).ok());
  }
  ASSERT_TRUE(streamed->FinishLoad(&load).ok());

  std::map<std::string, std::vector<float>> storage;
  std::map<std::string, TensorView> t;
  ASSERT_TRUE(f.FloatTensors(&storage, &t).ok());
  auto planned = Module(16, 2);
  ASSERT_TRUE(planned->LoadStateDict(t, o).ok());
  EXPECT_EQ(streamed->memory(), planned->memory());
  std::vector<float> x(3 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  const TensorView query{x.data(), {1, 3, 16}};
  ForwardOptions fo;
  fo.need_weights = false;
  ForwardResult a, b;
  ASSERT_TRUE(streamed->Forward(query, query, query, fo, &a).ok());
  ASSERT_TRUE(planned->Forward(query, query, query, fo, &b).ok());
  EXPECT_EQ(a.output.data, b.output.data);

  // A finished load is over: finishing or feeding it again, feeding a load
  // never started or one another module started, are errors that change
  // nothing.
  ExpectError(streamed->FinishLoad(&load), {"no load started on this module"});
  ExpectError(streamed->FeedLoad(&load, names[0], f.file.tensors.at(names[0]).data),
              {"no load started on this module"});
  MultiheadAttention::StreamedLoad never_started;
  ExpectError(streamed->FinishLoad(&never_started), {"no load started on this module"});
  MultiheadAttention::StreamedLoad others;
  ASSERT_TRUE(planned->StartLoad(f.file, o, &others, &names).ok());
  ExpectError(streamed->FeedLoad(&others, names[0], f.file.tensors.at(names[0]).data),
              {"no load started on this module"});
  ExpectError(streamed->FinishLoad(&others), {"no load started on this module"});
  ASSERT_TRUE(streamed->Forward(query, query, query, fo, &a).ok());
  EXPECT_EQ(a.output.data, b.output.data);
}

TEST(LayoutListing, NaturalOrderAndIncompleteModulesLeftOut) {
  ShapeMap t;
  for (int layer : {10, 2, 1}) {
    const std::string p = "layers." + std::to_string(layer) + ".attn.";
    for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}) {
      t[p + n] = {8, 8};
    }
  }
  t["layers.2.attn.k_proj.weight"] = {4, 8};  // grouped-query: 4 key features
  t["layers.2.attn.v_proj.weight"] = {4, 8};
  t["incomplete.q.weight"] = {8, 8};
  t["incomplete.k.weight"] = {8, 8};
  t["incomplete.v.weight"] = {8, 8};         // no output projection
  t["bad.in_proj_weight"] = {7, 8};          // not 2 * q + v rows
  const std::vector<AttentionModuleInfo> found = ListAttentionModules(t);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].module.prefix, "layers.1.attn.");
  EXPECT_EQ(found[1].module.prefix, "layers.2.attn.");
  EXPECT_EQ(found[2].module.prefix, "layers.10.attn.");
  EXPECT_EQ(found[1].k_size, 4);
  EXPECT_EQ(found[1].v_size, 4);
  EXPECT_EQ(found[1].q_size, 8);
  EXPECT_FALSE(found[1].bias);
  EXPECT_EQ(found[1].module.out, "layers.2.attn.o_proj");
}

TEST(LayoutNames, RoundTrip) {
  for (WeightLayout layout : {WeightLayout::kAuto, WeightLayout::kTorch, WeightLayout::kQkvLinear,
                              WeightLayout::kGpt2, WeightLayout::kNeox}) {
    WeightLayout parsed;
    ASSERT_TRUE(ParseLayout(LayoutName(layout), &parsed).ok());
    EXPECT_EQ(parsed, layout);
  }
  WeightLayout parsed;
  ExpectError(ParseLayout("llama", &parsed), {"layout", "'llama'", "qkv-linear"});
}

}  // namespace
}  // namespace mha
