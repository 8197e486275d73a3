// Includes inside src/ go one way (docs/development.md, "Layout"): a file includes files
// of its own part or of a lower layer, never of a higher one or of a sibling.
//   4  src/core/ (what the public API declares)
//   3  src/*.h, the public API: it includes only itself and the vocabulary, so that a user of
//      the headers sees the contract alone (no attention/, io/ or kernel internals)
//   2  src/attention/ (policy around the kernels) | src/io/ (checkpoints): siblings
//   1  the API's vocabulary, used below it: src/status.h, tensor.h, thread_pool.h and the
//      config types rope_scaling.h and weight_options.h
//   0  src/kernels/
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

struct Part {
  int layer;
  std::string name;
};

// The layer of a path relative to the repository ("src/io/json.h").
Part PartOf(const std::string& path) {
  if (path.rfind("src/kernels/", 0) == 0) return {0, "kernels"};
  if (path == "src/status.h" || path == "src/tensor.h" || path == "src/thread_pool.h" ||
      path == "src/rope_scaling.h" || path == "src/weight_options.h") {
    return {1, "vocabulary"};
  }
  if (path.rfind("src/attention/", 0) == 0) return {2, "attention"};
  if (path.rfind("src/io/", 0) == 0) return {2, "io"};
  if (path.rfind("src/core/", 0) == 0) return {4, "core"};
  return {3, "api"};
}

// Whether `from` may include `to`.
bool Allowed(const std::string& from, const std::string& to) {
  const Part a = PartOf(from), b = PartOf(to);
  if (a.name == "api") return b.name == "api" || b.name == "vocabulary";
  return a.name == b.name || b.layer < a.layer;
}

// Every `#include "src/..."` of every file under src/, as (file, included).
std::vector<std::pair<std::string, std::string>> Includes(const fs::path& root) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::regex include(R"(^\s*#\s*include\s+"(src/[^"]+)\")");
  for (const auto& entry : fs::recursive_directory_iterator(root / "src")) {
    if (!entry.is_regular_file()) continue;
    const std::string file = fs::relative(entry.path(), root).generic_string();
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, include)) out.emplace_back(file, m[1]);
    }
  }
  return out;
}

TEST(Layers, IncludesGoOneWay) {
  const auto includes = Includes(MHA_SOURCE_DIR);
  ASSERT_GT(includes.size(), 50u);
  for (const auto& [file, included] : includes) {
    EXPECT_TRUE(fs::exists(fs::path(MHA_SOURCE_DIR) / included)) << file << ": " << included;
    EXPECT_TRUE(Allowed(file, included))
        << file << " (" << PartOf(file).name << ") includes " << included << " ("
        << PartOf(included).name << "), which is not below it";
  }
}

// The rule itself: what it must refuse.
TEST(Layers, RefusesIncludesThatGoUpOrSideways) {
  EXPECT_FALSE(Allowed("src/kernels/gemm-inl.h", "src/tensor.h"));
  EXPECT_FALSE(Allowed("src/attention/rotary.h", "src/multihead_attention.h"));
  EXPECT_FALSE(Allowed("src/io/weight_plan.cc", "src/attention/linear.h"));
  EXPECT_FALSE(Allowed("src/tensor.h", "src/io/json.h"));
  EXPECT_TRUE(Allowed("src/core/kv_cache.cc", "src/kernels/kernels.h"));
  EXPECT_TRUE(Allowed("src/core/multihead_attention_weights.cc", "src/io/weight_plan.h"));
  EXPECT_TRUE(Allowed("src/multihead_attention.h", "src/weight_options.h"));
  EXPECT_TRUE(Allowed("src/io/weight_layouts.h", "src/weight_options.h"));
  // The public headers' old includes of internals.
  EXPECT_FALSE(Allowed("src/multihead_attention.h", "src/io/safetensors.h"));
  EXPECT_FALSE(Allowed("src/multihead_attention.h", "src/io/weight_layouts.h"));
  EXPECT_FALSE(Allowed("src/multihead_attention.h", "src/attention/rope_scaling.h"));
  EXPECT_FALSE(Allowed("src/kv_cache.h", "src/core/kv_cache_internal.h"));
}

}  // namespace
