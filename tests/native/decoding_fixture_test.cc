// Every decoding fixture (tests/fixtures/decoding, from PyTorch via
// decoding_fixtures.py and beam_fixtures.py, and tests/fixtures/models, the
// attention of today's models via model_fixtures.py, and tests/fixtures/generation, ragged
// batches with positions and rolling caches via generation_fixtures.py) through the public API:
// a schedule of calls on one KV cache (prefill, steps, chunks, truncation,
// beam-search reorders, cross-attention over a filled cache), each call's
// output and weights against the fixture, on every compiled Highway target,
// single-threaded and on a 2-thread pool where the decode kernel's key ranges
// really split (a test hook lowers the threshold; the test checks that the
// split happened).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/attention/decode_attention.h"
#include "src/io/json.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"

namespace mha_test {
namespace {


struct Step {
  int64_t truncate = -1;  // >= 0: truncate the cache to this length instead of a call
  std::vector<int32_t> reorder;  // not empty: reorder the cache so instead of a call
  bool is_causal = false, self = false, has_keys = false;
  bool need_weights = false, average_attn_weights = true;
};

struct DecodeConfig {
  std::string mode;  // "self", "cross" or "sdpa"
  mha::MultiheadAttentionConfig module;
  int64_t batch_size = 1, max_length = 0;
  mha::KVCacheDtype dtype = mha::KVCacheDtype::kFloat32;
  bool rolling = false;  // generation fixtures
  int64_t keep = -1;     // generation fixtures: >= 0, a StreamingLLM cache
  bool enable_gqa = false;
  std::vector<Step> steps;
};

int64_t Int(const mha::json::Value& v, const char* key) {
  const mha::json::Value* x = v.Find(key);
  return x != nullptr ? x->integer : 0;
}

// A number the config may omit (0 then).
float Number(const mha::json::Value& v, const char* key) {
  const mha::json::Value* x = v.Find(key);
  return x != nullptr ? static_cast<float>(x->number) : 0.0f;
}

bool Bool(const mha::json::Value& v, const char* key) {
  const mha::json::Value* x = v.Find(key);
  return x != nullptr && x->boolean;
}

// A number the config may omit (nullopt then).
std::optional<double> Optional(const mha::json::Value& v, const char* key) {
  const mha::json::Value* x = v.Find(key);
  if (x == nullptr) return std::nullopt;
  return x->number;
}

// rotary: {"dim", "base", "interleaved"}, with "scaling" (config.json's
// rope_scaling) or "inv_freq" and "attention_factor" (model fixtures).
mha::RotaryConfig RotaryFrom(const mha::json::Value& v) {
  mha::RotaryConfig r;
  r.enabled = true;
  r.dim = Int(v, "dim");
  r.base = Optional(v, "base");
  r.interleaved = Bool(v, "interleaved");
  r.attention_factor = Optional(v, "attention_factor");
  if (const mha::json::Value* table = v.Find("inv_freq")) {
    for (const mha::json::Value& f : table->array) r.inv_freq.push_back(f.number);
  }
  const mha::json::Value* s = v.Find("scaling");
  if (s == nullptr) return r;
  mha::RopeScaling& scaling = r.scaling;
  const mha::json::Value* type = s->Find("rope_type");
  scaling.type = (type != nullptr ? type : s->Find("type"))->string;
  scaling.factor = Optional(*s, "factor");
  scaling.low_freq_factor = Optional(*s, "low_freq_factor");
  scaling.high_freq_factor = Optional(*s, "high_freq_factor");
  scaling.original_max_position_embeddings = Optional(*s, "original_max_position_embeddings");
  scaling.beta_fast = Optional(*s, "beta_fast");
  scaling.beta_slow = Optional(*s, "beta_slow");
  scaling.attention_factor = Optional(*s, "attention_factor");
  scaling.mscale = Optional(*s, "mscale");
  scaling.mscale_all_dim = Optional(*s, "mscale_all_dim");
  if (const mha::json::Value* truncate = s->Find("truncate")) scaling.truncate = truncate->boolean;
  return r;
}

mha::Status ReadDecodeConfig(const Fixture& f, DecodeConfig* out) {
  mha::json::Value v;
  MHA_RETURN_IF_ERROR(mha::json::Parse(f.config_text.data(), f.config_text.size(), &v));
  DecodeConfig& c = *out;
  c.mode = v.Find("mode")->string;
  mha::MultiheadAttentionConfig& m = c.module;
  m.embed_dim = Int(v, "embed_dim");
  m.num_heads = Int(v, "num_heads");
  m.num_kv_heads = Int(v, "num_kv_heads");
  m.bias = Bool(v, "bias");
  m.kdim = Int(v, "kdim");
  m.vdim = Int(v, "vdim");
  m.batch_first = Bool(v, "batch_first");
  m.qk_head_dim = Int(v, "qk_head_dim");
  m.v_head_dim = Int(v, "v_head_dim");
  m.scale = Number(v, "scale");
  m.softcap = Number(v, "softcap");
  m.sinks = Bool(v, "sinks");
  m.weights_dtype = CurrentPrecision().weights;
  // alibi: null, true, {"slopes": [...]} or {"symmetric": true}.
  const mha::json::Value* alibi = v.Find("alibi");
  if (alibi != nullptr && alibi->type != mha::json::Type::kNull) {
    m.alibi.enabled = true;
    if (alibi->type == mha::json::Type::kObject) {
      m.alibi.symmetric = Bool(*alibi, "symmetric");
      if (const mha::json::Value* slopes = alibi->Find("slopes")) {
        for (const mha::json::Value& s : slopes->array) m.alibi.slopes.push_back(s.number);
      }
    }
  }
  // qk_norm: null or {"type": "rms" | "layer", "over": "head" | "all", "eps", "weight_offset"}.
  const mha::json::Value* norm = v.Find("qk_norm");
  if (norm != nullptr && norm->type == mha::json::Type::kObject) {
    m.qk_norm.enabled = true;
    m.qk_norm.type = norm->Find("type")->string == "layer" ? mha::QkNormType::kLayer
                                                           : mha::QkNormType::kRms;
    m.qk_norm.over = norm->Find("over")->string == "all" ? mha::QkNormOver::kAll
                                                         : mha::QkNormOver::kHead;
    m.qk_norm.eps = Number(*norm, "eps");
    m.qk_norm.weight_offset = Number(*norm, "weight_offset");
  }
  // window: null, W (left W - 1) or [left, right].
  const mha::json::Value* window = v.Find("window");
  if (window != nullptr && window->type == mha::json::Type::kArray) {
    m.window = {window->array[0].integer, window->array[1].integer};
  } else if (window != nullptr && window->type == mha::json::Type::kNumber) {
    m.window.left = window->integer - 1;
  }
  const mha::json::Value* rotary = v.Find("rotary");
  if (rotary->type == mha::json::Type::kObject) m.rotary = RotaryFrom(*rotary);
  c.batch_size = Int(v, "batch_size");
  c.max_length = Int(v, "max_length");
  const std::string& dtype = v.Find("dtype")->string;
  c.dtype = dtype == "float16"    ? mha::KVCacheDtype::kFloat16
            : dtype == "bfloat16" ? mha::KVCacheDtype::kBFloat16
                                  : mha::KVCacheDtype::kFloat32;
  c.enable_gqa = Bool(v, "enable_gqa");
  c.rolling = Bool(v, "rolling");
  if (const mha::json::Value* keep = v.Find("keep")) c.keep = keep->integer;
  for (const mha::json::Value& s : v.Find("steps")->array) {
    Step step;
    step.truncate = s.Find("truncate")->integer;
    if (const mha::json::Value* reorder = s.Find("reorder")) {
      for (const mha::json::Value& index : reorder->array) {
        step.reorder.push_back(static_cast<int32_t>(index.integer));
      }
    }
    step.is_causal = Bool(s, "is_causal");
    step.self = Bool(s, "self");
    step.has_keys = Bool(s, "has_keys");
    step.need_weights = Bool(s, "need_weights");
    step.average_attn_weights = Bool(s, "average_attn_weights");
    c.steps.push_back(step);
  }
  return mha::Status::Ok();
}

// The rows a call appends: the key argument's sequence length.
int64_t NewKeys(const DecodeConfig& c, const mha::TensorView& key, bool sdpa) {
  if (key.shape.empty()) return 0;
  if (sdpa) return key.shape[key.shape.size() - 2];
  return key.shape[c.module.batch_first && key.shape.size() == 3 ? 1 : 0];
}

// Runs the schedule; *decode_steps counts its calls that the decode kernel
// runs (no weights, 1 to 16 query rows).
void RunSchedule(Fixture& f, const DecodeConfig& c, mha::ThreadPool* pool, int* decode_steps) {
  const bool sdpa = c.mode == "sdpa";
  std::unique_ptr<mha::MultiheadAttention> module;
  std::unique_ptr<mha::KVCache> cache;
  if (sdpa) {
    mha::TensorView k, v;
    ASSERT_OK(f.View("step0.key", &k));
    ASSERT_OK(f.View("step0.value", &v));
    mha::KVCacheConfig kc;
    kc.batch_size = k.shape[0];
    kc.num_kv_heads = k.shape[1];
    kc.head_dim = k.shape[3];
    kc.v_head_dim = v.shape[3];
    kc.max_length = c.max_length;
    kc.dtype = c.dtype;
    kc.rolling = c.rolling;
    ASSERT_OK(mha::KVCache::Create(kc, &cache));
  } else {
    ASSERT_OK(mha::MultiheadAttention::Create(c.module, &module));
    ASSERT_OK(module->LoadSafetensors(f.bytes.data(), f.bytes.size(), {"param."}));
    ASSERT_OK(c.keep >= 0
                  ? module->CreateStreamingKVCache(c.batch_size, c.max_length, c.dtype, c.keep, &cache)
                  : module->CreateKVCache(c.batch_size, c.max_length, c.dtype, c.rolling, &cache));
  }
  int call = 0;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Step& step = c.steps[i];
    SCOPED_TRACE("step " + std::to_string(i));
    if (step.truncate >= 0) {
      ASSERT_OK(cache->Truncate(step.truncate));
      continue;
    }
    if (!step.reorder.empty()) {
      const int64_t length = cache->length();
      ASSERT_OK(cache->Reorder(step.reorder.data(), step.reorder.size()));
      EXPECT_EQ(cache->length(), length);
      continue;
    }
    const std::string prefix = "step" + std::to_string(i) + ".";
    mha::TensorView q, k, v;
    ASSERT_OK(f.View(prefix + "query", &q));
    if (step.self) {
      k = v = q;  // the same pointer: the fused self-attention projection
    } else if (step.has_keys) {
      ASSERT_OK(f.View(prefix + "key", &k));
      ASSERT_OK(f.View(prefix + "value", &v));
    }
    // A StreamingLLM cache counts the keys it holds.
    const int64_t appended = cache->length() + NewKeys(c, k, sdpa);
    const int64_t expected_length = c.keep >= 0 ? std::min(appended, c.max_length) : appended;
    const int64_t rows = sdpa ? q.shape[q.shape.size() - 2]
                              : q.shape[c.module.batch_first && q.shape.size() == 3 ? 1 : 0];
    if (!step.need_weights && rows >= 1 && rows <= 16) ++*decode_steps;
    mha::Tensor expected, output;
    ASSERT_OK(f.Expected(prefix + "output", &expected));
    if (sdpa) {
      mha::SdpaOptions o;
      o.is_causal = step.is_causal;
      o.enable_gqa = c.enable_gqa;
      o.scale = c.module.scale;
      o.softcap = c.module.softcap;
      o.window = c.module.window;
      if (c.module.sinks) ASSERT_OK(f.View("param.sinks", &o.sinks));
      const std::vector<float>& slopes = c.module.alibi.slopes;
      if (!slopes.empty()) o.alibi_slopes = {slopes.data(), {static_cast<int64_t>(slopes.size())}};
      o.cache = cache.get();
      ASSERT_OK(mha::ScaledDotProductAttention(q, k, v, o, &output, pool));
    } else {
      mha::ForwardOptions o;
      ASSERT_OK(f.Mask(prefix + "key_padding_mask", &o.key_padding_mask));
      ASSERT_OK(f.Mask(prefix + "attn_mask", &o.attn_mask));
      o.is_causal = step.is_causal;
      o.need_weights = step.need_weights;
      o.average_attn_weights = step.average_attn_weights;
      o.cache = cache.get();
      // Generation fixtures: positions as F32 integers.
      std::vector<int32_t> positions;
      if (f.Has(prefix + "positions")) {
        mha::TensorView p;
        ASSERT_OK(f.View(prefix + "positions", &p));
        positions.assign(p.data, p.data + mha::NumElements(p.shape));
        o.positions = positions.data();
        o.num_positions = positions.size();
      }
      mha::ForwardResult result;
      ASSERT_OK(module->Forward(q, k, v, o, &result, pool));
      output = std::move(result.output);
      if (step.need_weights) {
        mha::Tensor weights;
        ASSERT_OK(f.Expected(prefix + "weights", &weights));
        ExpectClose(result.weights, weights, "weights");
      }
    }
    ExpectClose(output, expected, "output");
    EXPECT_EQ(cache->length(), expected_length);
    ++call;
  }
  EXPECT_GE(call, c.steps.size() == 1 ? 1 : 3);  // one call: a one-shot forward
}

class DecodingFixtureTest : public hwy::TestWithParamTargetAndT<std::string> {};

TEST_P(DecodingFixtureTest, EveryCallMatchesPyTorch) {
  Fixture f;
  ASSERT_OK(LoadFixture(GetParam(), &f));
  ASSERT_EQ(f.kind, "decode");
  DecodeConfig c;
  ASSERT_OK(ReadDecodeConfig(f, &c));
  int decode_steps = 0;
  {
    SCOPED_TRACE("single thread");
    RunSchedule(f, c, nullptr, &decode_steps);
  }
  mha::ThreadPool pool(2);
  mha::SetDecodeSplitForTesting(1);
  const size_t splits = mha::DecodeSplitCalls();
  decode_steps = 0;
  {
    SCOPED_TRACE("2-thread pool, decode keys split");
    RunSchedule(f, c, &pool, &decode_steps);
  }
  mha::SetDecodeSplitForTesting(0);
  if (decode_steps > 0) EXPECT_GT(mha::DecodeSplitCalls(), splits) << "no decode call split";
}

// int8 weights within the bound docs/precision.md states, every call of
// the schedule, single-threaded.
TEST_P(DecodingFixtureTest, Int8WeightsWithinBound) {
  Fixture f;
  ASSERT_OK(LoadFixture(GetParam(), &f));
  ScopedInt8Weights int8;
  DecodeConfig c;
  ASSERT_OK(ReadDecodeConfig(f, &c));
  int decode_steps = 0;
  RunSchedule(f, c, nullptr, &decode_steps);
}

std::string ParamName(const testing::TestParamInfo<std::tuple<int64_t, std::string>>& info) {
  const std::string& path = std::get<1>(info.param);
  const std::string file = path.substr(path.find_last_of('/') + 1);
  return std::string(hwy::TargetName(std::get<0>(info.param))) + "_" +
         file.substr(0, file.size() - std::string(".safetensors").size());
}

INSTANTIATE_TEST_SUITE_P(AllTargets, DecodingFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::ValuesIn(ListFixtures("decoding"))),
                         ParamName);

INSTANTIATE_TEST_SUITE_P(Models, DecodingFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::ValuesIn(ListFixtures("models"))),
                         ParamName);

INSTANTIATE_TEST_SUITE_P(Generation, DecodingFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                                            ::testing::ValuesIn(ListFixtures("generation"))),
                         ParamName);

TEST(DecodingFixtureList, HasFixtures) {
  const std::vector<std::string> all = ListFixtures("decoding");
  EXPECT_GE(all.size(), 25u);
  EXPECT_GE(std::count_if(all.begin(), all.end(), [](const std::string& path) {
              return path.find("/beam_") != std::string::npos;
            }), 5);
  EXPECT_GE(ListFixtures("models").size(), 8u);
  EXPECT_GE(ListFixtures("generation").size(), 9u);
}

}  // namespace
}  // namespace mha_test
