// NaN and Infinity in, PyTorch's NaN out, on every Highway target: a NaN
// score (from a NaN or infinite query, key or float mask value) makes its
// row NaN instead of silently dropping that key; a row with no key is NaN
// even with a sink; and a NaN outside a window is never read.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/tests/hwy_gtest.h"
#include "src/attention/decode_attention.h"
#include "src/multihead_attention.h"
#include "src/thread_pool.h"
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
  float softcap = 0.0f;

  mha::Tensor Run() {
    mha::SdpaOptions options;
    options.attn_mask = mha::MaskView::Float(mask.data(), {kL, kS});
    options.softcap = softcap;
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

// A module of `config` (embed_dim kE, 2 heads) with every parameter random.
std::unique_ptr<mha::MultiheadAttention> RandomModule(mha::MultiheadAttentionConfig config,
                                                      uint32_t seed) {
  config.embed_dim = kE;
  config.num_heads = 2;
  std::unique_ptr<mha::MultiheadAttention> module;
  EXPECT_TRUE(mha::MultiheadAttention::Create(config, &module).ok());
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    const std::vector<float> values = RandomVector(mha::NumElements(spec.shape), seed++);
    EXPECT_TRUE(module->LoadParameter(spec.name, values.data(), spec.shape).ok());
  }
  return module;
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

// Soft-capping keeps a NaN score NaN, as tanh(NaN) is.
TEST_P(NanTest, NanInAQueryOrFloatMaskMakesThatRowNan) {
  for (float softcap : {0.0f, 30.0f}) {
    Sdpa sdpa;
    sdpa.softcap = softcap;
    sdpa.q[(0 * kL + 3) * kE + 1] = kNaN;  // batch 0, query 3
    sdpa.mask[1 * kS + 60] = kNaN;         // query 1 of every batch
    const mha::Tensor out = sdpa.Run();
    for (int64_t b = 0; b < kB; ++b) {
      for (int64_t i = 0; i < kL; ++i) {
        const bool nan = i == 1 || (b == 0 && i == 3);
        EXPECT_TRUE(RowIs(out, b, i, nan)) << "batch " << b << " row " << i << " softcap " << softcap;
      }
    }
  }
}

TEST_P(NanTest, MhaWeightsRowOfANanKeyIsNan) {
  std::unique_ptr<mha::MultiheadAttention> module = RandomModule({}, 10);
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

// docs/design.md: a row whose every key is masked is NaN, and a sink does not
// rescue it (there is nothing to attend). Sinks, a causal window of 2 and
// key padding of keys 40 and 41 leave query 41 no key, in the flash kernel,
// the weights path and the decode kernel (a step against a cache), and in
// the functional form's mask; every other row stays finite.
TEST_P(NanTest, SinksDoNotRescueARowWithNoKey) {
  constexpr int64_t kRows = 64, kEmpty = 41;
  mha::MultiheadAttentionConfig config;
  config.sinks = true;
  config.window.left = 1;
  std::unique_ptr<mha::MultiheadAttention> module = RandomModule(config, 20);
  const std::vector<float> x = RandomVector(kRows * kE, 7);
  std::vector<uint8_t> padding(kRows, 0);
  padding[kEmpty - 1] = padding[kEmpty] = 1;
  auto expect_rows = [](const std::vector<float>& data, int64_t first, int64_t rows,
                        int64_t width, const char* what) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t e = 0; e < width; ++e) {
        const float value = data[i * width + e];
        EXPECT_TRUE(first + i == kEmpty ? std::isnan(value) : std::isfinite(value))
            << what << ": row " << first + i << " = " << value;
      }
    }
  };
  for (bool need_weights : {false, true}) {
    mha::ForwardOptions options;
    options.is_causal = true;
    options.need_weights = need_weights;
    options.key_padding_mask = mha::MaskView::Bool(padding.data(), {1, kRows});
    mha::ForwardResult r;
    const mha::TensorView in{x.data(), {kRows, 1, kE}};
    ASSERT_TRUE(module->Forward(in, in, in, options, &r).ok());
    expect_rows(r.output.data, 0, kRows, kE, need_weights ? "weights path" : "flash");
    if (need_weights) expect_rows(r.weights.data, 0, kRows, kRows, "weights");
  }
  std::unique_ptr<mha::KVCache> cache;
  ASSERT_TRUE(module->CreateKVCache(1, kRows, mha::KVCacheDtype::kFloat32, &cache).ok());
  for (int64_t i = 0; i <= kEmpty + 1; ++i) {  // one step per row
    mha::ForwardOptions options;
    options.is_causal = true;
    options.need_weights = false;
    options.cache = cache.get();
    options.key_padding_mask = mha::MaskView::Bool(padding.data(), {1, i + 1});
    mha::ForwardResult r;
    const mha::TensorView in{x.data() + i * kE, {1, 1, kE}};
    ASSERT_TRUE(module->Forward(in, in, in, options, &r).ok());
    expect_rows(r.output.data, i, 1, kE, "decode step");
  }
  // The functional form: no key may be attended by row 3 of each batch.
  Sdpa sdpa;
  std::vector<uint8_t> may(kL * kS, 1);
  std::fill(may.begin() + 3 * kS, may.begin() + 4 * kS, 0);
  const std::vector<float> sinks = {2.0f};
  mha::SdpaOptions options;
  options.attn_mask = mha::MaskView::Bool(may.data(), {kL, kS});
  options.sinks = {sinks.data(), {1}};
  mha::Tensor out;
  ASSERT_TRUE(mha::ScaledDotProductAttention({sdpa.q.data(), {kB, 1, kL, kE}},
                                             {sdpa.k.data(), {kB, 1, kS, kE}},
                                             {sdpa.v.data(), {kB, 1, kS, kE}}, options, &out).ok());
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t i = 0; i < kL; ++i) EXPECT_TRUE(RowIs(out, b, i, i == 3)) << "sdpa row " << i;
  }
}

// The window skips the key tiles outside it, in the flash and the decode
// kernel, rather than masking them: a NaN in the first token's key and value
// (the projections of a NaN input row) reaches the rows that see it, and no
// row whose window starts past its tile (a masked read would spread PyTorch's
// 0 * NaN to every row).
TEST_P(NanTest, WindowNeverReadsTheTilesOutsideIt) {
  constexpr int64_t kRows = 200, kPrefill = 190;
  mha::MultiheadAttentionConfig config;
  config.window.left = 3;
  std::unique_ptr<mha::MultiheadAttention> module = RandomModule(config, 30);
  std::vector<float> x = RandomVector(kRows * kE, 8);
  x[0] = kNaN;
  mha::ForwardOptions options;
  options.is_causal = true;
  options.need_weights = false;
  mha::ForwardResult r;
  const mha::TensorView all{x.data(), {kRows, 1, kE}};
  ASSERT_TRUE(module->Forward(all, all, all, options, &r).ok());
  for (int64_t i = 0; i < kRows; ++i) {
    // Rows 0-3 see key 0; from 128 on, every query chunk starts past its tile.
    if (i < 4) EXPECT_TRUE(std::isnan(r.output.data[i * kE])) << "flash row " << i;
    if (i >= 128) EXPECT_TRUE(std::isfinite(r.output.data[i * kE])) << "flash row " << i;
  }
  std::unique_ptr<mha::KVCache> cache;
  ASSERT_TRUE(module->CreateKVCache(1, kRows, mha::KVCacheDtype::kFloat32, &cache).ok());
  options.cache = cache.get();
  const mha::TensorView prefill{x.data(), {kPrefill, 1, kE}};
  ASSERT_TRUE(module->Forward(prefill, prefill, prefill, options, &r).ok());
  for (int64_t i = kPrefill; i < kRows; ++i) {
    const mha::TensorView step{x.data() + i * kE, {1, 1, kE}};
    ASSERT_TRUE(module->Forward(step, step, step, options, &r).ok());
    for (float value : r.output.data) EXPECT_TRUE(std::isfinite(value)) << "decode step " << i;
  }
}

// docs/design.md, "Semantics (the contract)": row i reads the keys of its
// window and causal bounds without the key padding at either end of them; a
// NaN in its query or in a key or value it reads reaches it, and no other.
// Key padding at the start, in the middle and at the end of 150 keys (three
// key tiles), NaN in a query row, a key or a value (separate key and value
// inputs) at keys before, between and after the padding and at tile edges.
struct RuleCase {
  int left, right;  // window, -1: no bound
  bool causal;
  char kind;        // 'q', 'k' or 'v'
  int64_t at;       // its row
};
constexpr int64_t kRuleRows = 150;

bool Padded(int64_t j) { return j < 20 || (j >= 100 && j < 105) || j >= 140; }

// Whether row i reads key j (j < keys: the keys there are when it runs).
bool Reads(const RuleCase& c, int64_t i, int64_t j, int64_t keys) {
  const int64_t start = c.left < 0 ? 0 : std::max<int64_t>(0, i - c.left);
  int64_t end = c.causal ? std::min(i + 1, keys) : keys;
  if (c.right >= 0) end = std::min(end, i + c.right + 1);
  int64_t first = start, last = end - 1;
  while (first < end && Padded(first)) ++first;
  while (last >= first && Padded(last)) --last;
  return j >= first && j <= last;
}

bool RowNaN(const RuleCase& c, int64_t i, int64_t keys) {
  bool any = false;
  for (int64_t j = 0; j < keys; ++j) any = any || (Reads(c, i, j, keys) && !Padded(j));
  return !any || (c.kind == 'q' ? i == c.at : Reads(c, i, c.at, keys));
}

std::vector<RuleCase> RuleCases(bool causal_only) {
  std::vector<RuleCase> cases;
  const int windows[3][2] = {{-1, -1}, {5, -1}, {5, 3}};
  for (const auto& w : windows) {
    for (bool causal : {false, true}) {
      if (causal_only && !causal) continue;
      for (char kind : {'q', 'k', 'v'}) {
        for (int64_t at : {10, 30, 63, 64, 102, 120, 145}) {
          cases.push_back({w[0], w[1], causal, kind, at});
        }
      }
    }
  }
  return cases;
}

std::string Describe(const RuleCase& c) {
  return "window [" + std::to_string(c.left) + ", " + std::to_string(c.right) + "]" +
         (c.causal ? " causal" : "") + " NaN " + c.kind + " at " + std::to_string(c.at);
}

struct RuleInputs {
  std::vector<float> q = RandomVector(kRuleRows * kE, 41), k = RandomVector(kRuleRows * kE, 42),
                     v = RandomVector(kRuleRows * kE, 43);
  std::vector<uint8_t> padding = std::vector<uint8_t>(kRuleRows);
  explicit RuleInputs(const RuleCase& c) {
    std::vector<float>& x = c.kind == 'q' ? q : c.kind == 'k' ? k : v;
    x[c.at * kE + 3] = kNaN;
    for (int64_t j = 0; j < kRuleRows; ++j) padding[j] = Padded(j) ? 1 : 0;
  }
};

std::unique_ptr<mha::MultiheadAttention> RuleModule(const RuleCase& c) {
  mha::MultiheadAttentionConfig config;
  config.window.left = c.left;
  config.window.right = c.right;
  return RandomModule(config, 60);
}

void ExpectRows(const RuleCase& c, const std::vector<float>& out, int64_t first, int64_t rows,
                int64_t keys, const std::string& what) {
  for (int64_t i = 0; i < rows; ++i) {
    const bool nan = RowNaN(c, first + i, keys);
    for (int64_t e = 0; e < kE; ++e) {
      const float x = out[i * kE + e];
      ASSERT_TRUE(nan ? std::isnan(x) : std::isfinite(x))
          << Describe(c) << ", " << what << ": row " << first + i << " = " << x;
    }
  }
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// The flash kernel and the weights path in one call over every row.
TEST_P(NanTest, NanReachesTheRowsThatReadItInOneCall) {
  mha::ThreadPool two(2), eight(8);
  for (const RuleCase& c : RuleCases(false)) {
    std::unique_ptr<mha::MultiheadAttention> module = RuleModule(c);
    RuleInputs in(c);
    for (bool need_weights : {false, true}) {
      mha::ForwardOptions options;
      options.is_causal = c.causal;
      options.need_weights = need_weights;
      options.key_padding_mask = mha::MaskView::Bool(in.padding.data(), {1, kRuleRows});
      const std::string what = need_weights ? "weights path" : "flash";
      std::vector<float> first;
      for (mha::ThreadPool* pool : {static_cast<mha::ThreadPool*>(nullptr), &two, &eight}) {
        mha::ForwardResult r;
        ASSERT_TRUE(module->Forward({in.q.data(), {kRuleRows, 1, kE}},
                                    {in.k.data(), {kRuleRows, 1, kE}},
                                    {in.v.data(), {kRuleRows, 1, kE}}, options, &r, pool).ok());
        if (pool == nullptr) {
          ExpectRows(c, r.output.data, 0, kRuleRows, kRuleRows, what);
          first = r.output.data;
        } else {
          ExpectSameBits(first, r.output.data, Describe(c) + ", " + what + " threads " +
                                                   std::to_string(pool->num_threads()));
        }
      }
    }
  }
}

// The same rows through a cache, in steps of 1 and of 3 rows (the decode
// kernel) and a prefill of 70 then steps of 1: the NaN sits in the cache or
// in a new row. Bits do not depend on the thread count; the pattern of NaN
// rows does not depend on how the keys are split into ranges either.
TEST_P(NanTest, NanReachesTheRowsThatReadItThroughACache) {
  mha::ThreadPool two(2), eight(8);
  for (const RuleCase& c : RuleCases(true)) {
    std::unique_ptr<mha::MultiheadAttention> module = RuleModule(c);
    RuleInputs in(c);
    for (int64_t prefill : {1, 3, 70}) {
      const int64_t step = prefill == 70 ? 1 : prefill;
      std::vector<float> first;
      const std::pair<mha::ThreadPool*, size_t> runs[] = {{nullptr, 0}, {&two, 0}, {&eight, 0},
                                                          {&two, 1}};
      for (const auto& [pool, split] : runs) {
        mha::SetDecodeSplitForTesting(split);
        std::unique_ptr<mha::KVCache> cache;
        ASSERT_TRUE(module->CreateKVCache(1, kRuleRows, mha::KVCacheDtype::kFloat32, &cache).ok());
        std::vector<float> out;
        for (int64_t t = 0; t < kRuleRows;) {
          const int64_t rows = std::min(t == 0 ? prefill : step, kRuleRows - t);
          mha::ForwardOptions options;
          options.is_causal = true;
          options.need_weights = false;
          options.cache = cache.get();
          options.key_padding_mask = mha::MaskView::Bool(in.padding.data(), {1, t + rows});
          mha::ForwardResult r;
          ASSERT_TRUE(module->Forward({in.q.data() + t * kE, {rows, 1, kE}},
                                      {in.k.data() + t * kE, {rows, 1, kE}},
                                      {in.v.data() + t * kE, {rows, 1, kE}}, options, &r, pool)
                          .ok());
          out.insert(out.end(), r.output.data.begin(), r.output.data.end());
          t += rows;
        }
        mha::SetDecodeSplitForTesting(0);
        const std::string what = "steps of " + std::to_string(step) + " after " +
                                 std::to_string(prefill) + (split != 0 ? ", split" : "");
        ExpectRows(c, out, 0, kRuleRows, kRuleRows, what);
        if (split == 0 && !first.empty()) ExpectSameBits(first, out, Describe(c) + ", " + what);
        if (first.empty()) first = out;
      }
    }
  }
}

HWY_TARGET_INSTANTIATE_TEST_SUITE_P(NanTest);

}  // namespace
}  // namespace mha_test
