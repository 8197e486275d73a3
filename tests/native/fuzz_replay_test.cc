// Replays every committed fuzz input (tests/fuzz/corpus/<case>/*: seeds and
// the reproducers of crashes found) through the fuzz cases, so each stays a
// regression test in every native build.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_cases.h"

namespace mha_test {
namespace {

std::vector<std::string> CorpusFiles(const std::string& fuzz_case) {
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(MHA_FUZZ_CORPUS_DIR) + "/" + fuzz_case)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

std::string FileName(const testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).filename().string();
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
  return name;
}

class ForwardCorpus : public testing::TestWithParam<std::string> {};
class SafetensorsCorpus : public testing::TestWithParam<std::string> {};

TEST_P(ForwardCorpus, PassesItsChecks) {
  const std::vector<uint8_t> bytes = ReadFile(GetParam());
  EXPECT_EQ(mha_fuzz::RunForwardCase(bytes.data(), bytes.size()), "");
}

TEST_P(SafetensorsCorpus, PassesItsChecks) {
  const std::vector<uint8_t> bytes = ReadFile(GetParam());
  ASSERT_FALSE(bytes.empty()) << GetParam();
  EXPECT_EQ(mha_fuzz::RunSafetensorsCase(bytes.data(), bytes.size()), "");
}

INSTANTIATE_TEST_SUITE_P(Files, ForwardCorpus, testing::ValuesIn(CorpusFiles("forward")), FileName);
INSTANTIATE_TEST_SUITE_P(Files, SafetensorsCorpus, testing::ValuesIn(CorpusFiles("safetensors")),
                         FileName);

}  // namespace
}  // namespace mha_test
