// Reads the weight-layout fixtures in tests/fixtures/layouts (format:
// tests/fixtures/layouts/README.md): a checkpoint, whole or in shards, with
// the test's inputs and the PyTorch module's output under "test.".
#ifndef MHA_TESTS_NATIVE_LAYOUT_FIXTURE_H_
#define MHA_TESTS_NATIVE_LAYOUT_FIXTURE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/io/json.h"
#include "src/multihead_attention.h"
#include "src/io/safetensors.h"

namespace mha_test {

struct LayoutFixture {
  std::string name;  // the case: file name without shard suffix and extension
  std::vector<std::vector<uint8_t>> shards;
  mha::SafetensorsFile file;  // all shards; entries point into `shards`
  mha::json::Value config;    // the "config" metadata

  LayoutFixture() = default;
  LayoutFixture(const LayoutFixture&) = delete;
  LayoutFixture& operator=(const LayoutFixture&) = delete;

  mha::MultiheadAttentionConfig ModuleConfig() const;
  // prefix, layout and names as the case loads them.
  mha::Status Options(mha::WeightOptions* out) const;
  // Every F32, F16 and BF16 tensor as float32 (a state_dict); `storage` owns the data.
  mha::Status FloatTensors(std::map<std::string, std::vector<float>>* storage,
                           std::map<std::string, mha::TensorView>* out) const;
  // Name -> shape of every tensor.
  mha::ShapeMap Shapes() const;
};

// Case names of tests/fixtures/layouts, sorted.
std::vector<std::string> ListLayoutFixtures();

mha::Status LoadLayoutFixture(const std::string& name, LayoutFixture* out);

}  // namespace mha_test

#endif  // MHA_TESTS_NATIVE_LAYOUT_FIXTURE_H_
