// Shapes whose buffers could not be addressed (their byte counts overflow
// size_t, 32 bits in WebAssembly, 64 bits here) are an OutOfMemory error
// before anything is read or allocated: sizes must never wrap around into a
// small buffer that the kernels then overrun. The data here is far smaller
// than the shapes claim, so reading it would be caught by ASan.
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "src/multihead_attention.h"

namespace mha_test {
namespace {

constexpr int64_t kHuge = int64_t{1} << 33;

void ExpectTooLarge(const mha::Status& status) {
  EXPECT_EQ(status.code(), mha::StatusCode::kOutOfMemory) << status.message();
  EXPECT_NE(status.message().find("address space"), std::string::npos) << status.message();
}

TEST(OverflowTest, MhaWeightsBeyondTheAddressSpace) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = 2;
  config.num_heads = 2;
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_TRUE(mha::MultiheadAttention::Create(config, &module).ok());
  const std::vector<float> small(64, 0.0f);
  // N * H * L * S = 2^67 weights; the projections alone (2^33 rows) would fit.
  const mha::TensorView x{small.data(), {kHuge, 1, 2}};
  mha::ForwardOptions options;
  mha::ForwardResult result;
  ExpectTooLarge(module->Forward(x, x, x, options, &result));
  options.average_attn_weights = false;
  ExpectTooLarge(module->Forward(x, x, x, options, &result));
}

TEST(OverflowTest, MhaShapeWhoseElementCountOverflowsInt64) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = 2;
  config.num_heads = 1;
  std::unique_ptr<mha::MultiheadAttention> module;
  ASSERT_TRUE(mha::MultiheadAttention::Create(config, &module).ok());
  const std::vector<float> small(64, 0.0f);
  const mha::TensorView x{small.data(), {kHuge, kHuge, 2}};
  mha::ForwardOptions options;
  options.need_weights = false;
  mha::ForwardResult result;
  ExpectTooLarge(module->Forward(x, x, x, options, &result));
}

TEST(OverflowTest, SdpaOutputBeyondTheAddressSpace) {
  const std::vector<float> small(64, 0.0f);
  mha::Tensor output;
  // Output (1, 2^33, 2^33): query and key are one feature wide, value 2^33.
  const mha::Status status = mha::ScaledDotProductAttention(
      {small.data(), {1, kHuge, 1}}, {small.data(), {1, 1, 1}}, {small.data(), {1, 1, kHuge}},
      mha::SdpaOptions(), &output);
  ExpectTooLarge(status);
  EXPECT_TRUE(output.data.empty());
}

}  // namespace
}  // namespace mha_test
