// The internal JSON parser (src/io/json.h) used for safetensors headers and
// fixture configs.
#include "src/io/json.h"

#include <gtest/gtest.h>

#include <string>

namespace mha {
namespace {

json::Value ParseOk(const std::string& text) {
  json::Value v;
  Status status = json::Parse(text.data(), text.size(), &v);
  EXPECT_TRUE(status.ok()) << text << ": " << status.message();
  return v;
}

TEST(JsonTest, ParsesNestedValues) {
  json::Value v = ParseOk(R"( {"a": [1, -2, 3.5e1, true, false, null], "b": {"c": "d"}} )");
  ASSERT_EQ(v.type, json::Type::kObject);
  const json::Value* a = v.Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 6u);
  EXPECT_TRUE(a->array[0].is_integer);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_EQ(a->array[1].integer, -2);
  EXPECT_FALSE(a->array[2].is_integer);
  EXPECT_DOUBLE_EQ(a->array[2].number, 35.0);
  EXPECT_TRUE(a->array[3].boolean);
  EXPECT_EQ(a->array[4].type, json::Type::kBool);
  EXPECT_FALSE(a->array[4].boolean);
  EXPECT_EQ(a->array[5].type, json::Type::kNull);
  ASSERT_NE(v.Find("b"), nullptr);
  EXPECT_EQ(v.Find("b")->Find("c")->string, "d");
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonTest, DecodesEscapes) {
  json::Value v = ParseOk(R"("q\"b\\s\/n\n t\t u\u00e9 pair\ud83d\ude00")");
  EXPECT_EQ(v.string, "q\"b\\s/n\n t\t u\xC3\xA9 pair\xF0\x9F\x98\x80");
}

TEST(JsonTest, Int64Limits) {
  EXPECT_EQ(ParseOk("9223372036854775807").integer, INT64_MAX);
  EXPECT_EQ(ParseOk("-9223372036854775808").integer, INT64_MIN);
  json::Value too_big = ParseOk("9223372036854775808");
  EXPECT_FALSE(too_big.is_integer);
  EXPECT_EQ(too_big.type, json::Type::kNumber);
}

TEST(JsonTest, RejectsMalformedInput) {
  const char* bad[] = {"",
                       "{",
                       "{\"a\":1,}",
                       "[1,]",
                       "[1 2]",
                       "{\"a\" 1}",
                       "{a:1}",
                       "\"unterminated",
                       "\"bad\\x\"",
                       "\"\\u12\"",
                       "\"\\udc00\"",
                       "\"\\ud800x\"",
                       "\"tab\tin\"",
                       "01",
                       "1.",
                       "1e",
                       "-",
                       "+1",
                       "tru",
                       "nul",
                       "{} x",
                       "{\"a\":1,\"a\":2}"};
  for (const char* text : bad) {
    json::Value v;
    Status status = json::Parse(text, std::string(text).size(), &v);
    EXPECT_FALSE(status.ok()) << "accepted: " << text;
    EXPECT_NE(status.message().find("JSON"), std::string::npos) << status.message();
  }
}

TEST(JsonTest, RejectsDeepNesting) {
  std::string deep(1000, '[');
  json::Value v;
  Status status = json::Parse(deep.data(), deep.size(), &v);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("nesting"), std::string::npos) << status.message();
  std::string ok = std::string(30, '[') + std::string(30, ']');
  EXPECT_TRUE(json::Parse(ok.data(), ok.size(), &v).ok());
}

TEST(JsonTest, NeverReadsPastSize) {
  // The buffer continues with valid JSON; the parser must stop at `size`.
  const std::string text = "[1, 2]";
  json::Value v;
  EXPECT_FALSE(json::Parse(text.data(), 4, &v).ok());
  EXPECT_TRUE(json::Parse(text.data(), 6, &v).ok());
}

}  // namespace
}  // namespace mha
