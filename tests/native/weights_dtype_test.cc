// Weights kept in float16, bfloat16 and int8 through the whole module, on
// every compiled Highway target, single-threaded and on a 2-thread pool:
// with weights every type holds exactly (q / 128, a 127 in each row: int8's
// scale is then 1/128 exactly), every output must be float32's bit for bit
// (int8: within kInt8ExactWeights, as its GEMV quantizes rows to int16):
// the fused self-attention GEMM, q/k/v apart (kdim != embed_dim),
// cross-attention on a fused module, and decoding steps of 1 and 2 rows
// (the GEMV kernels) after a prefill (the register tiles). Also
// weights_dtype 'auto' on F16/BF16 safetensors, memory() (which calls do not
// grow) and bad dtypes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"
#include "tests/native/fixture.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

using mha::MultiheadAttention;
using mha::MultiheadAttentionConfig;
using mha::WeightsDtype;

using Params = std::map<std::string, std::vector<float>>;

// Weights (2-D) q / 128, q in [-127, 127], the first of each row 127;
// everything else as drawn.
Params MakeParams(const MultiheadAttention& m) {
  Params params;
  uint32_t seed = 10;
  for (const mha::ParameterSpec& spec : m.Parameters()) {
    std::vector<float> v = RandomVector(mha::NumElements(spec.shape), seed++);
    if (spec.shape.size() == 2) {
      const int64_t cols = spec.shape[1];
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = i % cols == 0 ? 127.0f / 128 : std::nearbyint(v[i] * 127.0f) / 128;
      }
    }
    params[spec.name] = std::move(v);
  }
  return params;
}

std::map<std::string, mha::TensorView> Views(const MultiheadAttention& m, const Params& params) {
  std::map<std::string, mha::TensorView> views;
  for (const mha::ParameterSpec& spec : m.Parameters()) {
    views[spec.name] = {params.at(spec.name).data(), spec.shape};
  }
  return views;
}

struct Case {
  const char* name;
  MultiheadAttentionConfig config;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  MultiheadAttentionConfig fused;
  fused.embed_dim = 64;
  fused.num_heads = 4;
  cases.push_back({"fused", fused});
  MultiheadAttentionConfig apart = fused;
  apart.kdim = 24;
  apart.vdim = 40;
  apart.bias = false;
  cases.push_back({"apart", apart});
  MultiheadAttentionConfig gqa = fused;
  gqa.num_kv_heads = 2;
  gqa.rotary.enabled = true;
  cases.push_back({"gqa_rotary", gqa});
  // K's and V's first columns inside a panel on every target (22 and 44).
  MultiheadAttentionConfig odd;
  odd.embed_dim = 22;
  odd.num_heads = 2;
  cases.push_back({"fused_odd_columns", odd});
  return cases;
}

// The outputs of one-shot calls (self- and cross-attention, with and without
// weights) and of a decoding schedule, concatenated.
void RunCalls(const MultiheadAttentionConfig& config, WeightsDtype dtype, const Params& params,
              mha::ThreadPool* pool, std::vector<float>* out, size_t* memory = nullptr) {
  MultiheadAttentionConfig c = config;
  c.weights_dtype = dtype;
  std::unique_ptr<MultiheadAttention> m;
  ASSERT_OK(MultiheadAttention::Create(c, &m));
  ASSERT_OK(m->LoadStateDict(Views(*m, params)));
  if (memory != nullptr) *memory = m->memory();
  const int64_t E = c.embed_dim, kdim = m->config().kdim, vdim = m->config().vdim;
  const int64_t L = 9, S = 13, N = 2;
  const std::vector<float> x = RandomVector(L * N * E, 1), k = RandomVector(S * N * kdim, 2),
                           v = RandomVector(S * N * vdim, 3);
  const mha::TensorView query{x.data(), {L, N, E}};
  const mha::TensorView key{k.data(), {S, N, kdim}}, value{v.data(), {S, N, vdim}};
  const auto append = [&](const mha::Tensor& t) {
    out->insert(out->end(), t.data.begin(), t.data.end());
  };
  mha::ForwardResult r;
  for (bool need_weights : {false, true}) {
    mha::ForwardOptions o;
    o.need_weights = need_weights;
    ASSERT_OK(m->Forward(query, key, value, o, &r, pool));
    append(r.output);
    if (kdim == E && vdim == E) {
      o.is_causal = true;
      ASSERT_OK(m->Forward(query, query, query, o, &r, pool));
      append(r.output);
    }
  }
  // Cross-attention runs on the packed weights as they are: no copy of them.
  if (memory != nullptr) EXPECT_EQ(m->memory(), *memory) << "memory() grew";
  if (kdim != E || vdim != E) return;
  std::unique_ptr<mha::KVCache> cache;
  ASSERT_OK(m->CreateKVCache(N, 32, mha::KVCacheDtype::kFloat32, &cache));
  mha::ForwardOptions o;
  o.need_weights = false;
  o.cache = cache.get();
  o.is_causal = true;
  ASSERT_OK(m->Forward(query, query, query, o, &r, pool));  // prefill
  append(r.output);
  for (int64_t rows : {1, 2, 1}) {
    const std::vector<float> step = RandomVector(rows * N * E, 20 + rows);
    const mha::TensorView t{step.data(), {rows, N, E}};
    ASSERT_OK(m->Forward(t, t, t, o, &r, pool));
    append(r.output);
  }
}

// int8 with weights it holds exactly: only the GEMV's 16-bit quantization of
// the rows (a relative 2^-16 of a block's largest |x|) separates it from
// float32, by at most this share of the largest |output|.
constexpr float kInt8ExactWeights = 1e-4f;

class WeightsDtypeTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(WeightsDtypeTest);

TEST_P(WeightsDtypeTest, EveryTypeGivesFloat32sBits) {
  mha::ThreadPool two(2);
  for (const Case& test : Cases()) {
    for (mha::ThreadPool* pool : {static_cast<mha::ThreadPool*>(nullptr), &two}) {
      SCOPED_TRACE(std::string(test.name) + (pool ? ", 2 threads" : ", 1 thread"));
      std::unique_ptr<MultiheadAttention> shape;
      ASSERT_OK(MultiheadAttention::Create(test.config, &shape));
      const Params params = MakeParams(*shape);
      std::vector<float> expected;
      size_t f32_memory = 0;
      RunCalls(test.config, WeightsDtype::kFloat32, params, pool, &expected, &f32_memory);
      ASSERT_FALSE(expected.empty());
      for (auto [dtype, share] : {std::make_pair(WeightsDtype::kFloat16, 0.56),
                                  std::make_pair(WeightsDtype::kBFloat16, 0.56),
                                  std::make_pair(WeightsDtype::kInt8, 0.34)}) {
        SCOPED_TRACE("weights_dtype " + std::to_string(static_cast<int>(dtype)));
        std::vector<float> actual;
        size_t memory = 0;
        RunCalls(test.config, dtype, params, pool, &actual, &memory);
        ASSERT_EQ(actual.size(), expected.size());
        if (dtype == WeightsDtype::kInt8) {
          float error = 0.0f, largest = 0.0f;
          for (size_t i = 0; i < actual.size(); ++i) {
            error = std::max(error, std::fabs(actual[i] - expected[i]));
            largest = std::max(largest, std::fabs(expected[i]));
          }
          EXPECT_LE(error, kInt8ExactWeights * largest);
        } else {
          EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0);
        }
        EXPECT_LE(memory, share * f32_memory) << f32_memory;
      }
    }
  }
}

TEST_P(WeightsDtypeTest, AutoKeepsTheCheckpointsPrecision) {
  const MultiheadAttentionConfig config = Cases()[2].config;
  std::unique_ptr<MultiheadAttention> f32;
  ASSERT_OK(MultiheadAttention::Create(config, &f32));
  const Params params = MakeParams(*f32);
  ASSERT_OK(f32->LoadStateDict(Views(*f32, params)));
  mha::TensorView x;
  const std::vector<float> input = RandomVector(3 * 64, 5);
  x = {input.data(), {3, 64}};
  mha::ForwardResult expected, actual;
  ASSERT_OK(f32->Forward(x, x, x, mha::ForwardOptions(), &expected));
  for (const std::string dtype : {"F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    const std::vector<uint8_t> file = SafetensorsOf(*f32, params, dtype);
    std::unique_ptr<MultiheadAttention> m;
    ASSERT_OK(MultiheadAttention::Create(config, &m));  // weights_dtype kAuto
    EXPECT_EQ(m->memory(), 0u);
    ASSERT_OK(m->LoadSafetensors(file.data(), file.size()));
    EXPECT_LE(m->memory(), 0.56 * f32->memory());
    ASSERT_OK(m->Forward(x, x, x, mha::ForwardOptions(), &actual));
    ASSERT_EQ(actual.output.data.size(), expected.output.data.size());
    EXPECT_EQ(std::memcmp(actual.output.data.data(), expected.output.data.data(),
                          actual.output.data.size() * sizeof(float)), 0);
    // Asked for float32, the same file takes float32's memory.
    MultiheadAttentionConfig wide = config;
    wide.weights_dtype = WeightsDtype::kFloat32;
    ASSERT_OK(MultiheadAttention::Create(wide, &m));
    ASSERT_OK(m->LoadSafetensors(file.data(), file.size()));
    EXPECT_EQ(m->memory(), f32->memory());
  }
}

TEST(WeightsDtype, UnknownValueIsAnError) {
  MultiheadAttentionConfig c = Cases()[0].config;
  c.weights_dtype = static_cast<WeightsDtype>(9);
  std::unique_ptr<MultiheadAttention> m;
  const mha::Status s = MultiheadAttention::Create(c, &m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("weights_dtype"), std::string::npos) << s.message();
}

// int8 cannot hold a NaN or an infinity (docs/design.md: quantized weights refuse
// non-finite values at load): LoadStateDict and LoadParameter refuse one in
// any weight it quantizes, naming the parameter, the flat index and the
// value, and leave the module as it was. float32 loads it (NaN spreads).
TEST(WeightsDtype, Int8RefusesANonFiniteWeight) {
  for (const Case& test : Cases()) {
    SCOPED_TRACE(test.name);
    MultiheadAttentionConfig c = test.config;
    c.weights_dtype = WeightsDtype::kInt8;
    std::unique_ptr<MultiheadAttention> m, f32;
    ASSERT_OK(MultiheadAttention::Create(c, &m));
    ASSERT_OK(MultiheadAttention::Create(test.config, &f32));
    const Params params = MakeParams(*m);
    ASSERT_OK(m->LoadStateDict(Views(*m, params)));
    const std::vector<float> x = RandomVector(3 * c.embed_dim, 7);
    const mha::TensorView q{x.data(), {3, c.embed_dim}};
    const std::vector<float> kv = RandomVector(3 * std::max(m->config().kdim, m->config().vdim), 8);
    const mha::TensorView k{kv.data(), {3, m->config().kdim}}, v{kv.data(), {3, m->config().vdim}};
    mha::ForwardOptions o;
    o.need_weights = false;
    mha::ForwardResult before, after;
    ASSERT_OK(m->Forward(q, k, v, o, &before));
    const size_t memory = m->memory();
    for (const mha::ParameterSpec& spec : m->Parameters()) {
      if (spec.shape.size() != 2) continue;  // biases stay float32
      for (const float bad : {NAN, INFINITY, -INFINITY}) {
        Params broken = params;
        const size_t index = broken[spec.name].size() / 2 + 5;
        broken[spec.name][index] = bad;
        const std::string expected = spec.name + ": element " + std::to_string(index) + " is " +
                                     std::to_string(bad) + "; int8 weights must be finite";
        for (const mha::Status& s :
             {m->LoadStateDict(Views(*m, broken)),
              m->LoadParameter(spec.name, broken[spec.name].data(), spec.shape)}) {
          EXPECT_EQ(s.code(), mha::StatusCode::kInvalidArgument);
          EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
        }
        EXPECT_EQ(m->memory(), memory);
        ASSERT_OK(m->Forward(q, k, v, o, &after));
        EXPECT_EQ(after.output.data, before.output.data);
        ASSERT_OK(f32->LoadStateDict(Views(*f32, broken)));
      }
    }
  }
}

}  // namespace
}  // namespace mha_test
