// The safetensors reader: round trips, one test per header error, float
// conversions against known bit patterns, and every committed fixture.
#include "src/io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/native/fixture.h"

namespace mha {
namespace {

std::vector<uint8_t> LittleEndian(uint64_t v, int bytes) {
  std::vector<uint8_t> out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}

// A file whose length field says `header_length` (default: the real length).
std::vector<uint8_t> MakeFile(const std::string& header, const std::vector<uint8_t>& data,
                              uint64_t header_length) {
  std::vector<uint8_t> file = LittleEndian(header_length, 8);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

std::vector<uint8_t> MakeFile(const std::string& header, const std::vector<uint8_t>& data = {}) {
  return MakeFile(header, data, header.size());
}

Status Parse(const std::vector<uint8_t>& file, SafetensorsFile* out) {
  return ParseSafetensors(file.data(), file.size(), out);
}

// Parsing must fail with a message containing every one of `parts`.
void ExpectError(const std::vector<uint8_t>& file, const std::vector<std::string>& parts) {
  SafetensorsFile out;
  Status status = Parse(file, &out);
  ASSERT_FALSE(status.ok()) << "accepted a bad file";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "message \"" << status.message() << "\" lacks \"" << part << "\"";
  }
}

std::string OneTensor(const std::string& dtype, const std::string& shape,
                      const std::string& offsets) {
  return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets +
         "}}";
}

std::vector<uint8_t> Floats(const std::vector<float>& values) {
  std::vector<uint8_t> out;
  for (float f : values) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::vector<uint8_t> le = LittleEndian(bits, 4);
    out.insert(out.end(), le.begin(), le.end());
  }
  return out;
}

TEST(SafetensorsTest, RoundTripsEveryDtypeAndMetadata) {
  // An odd-length header puts the F32 data at an unaligned address.
  std::vector<uint8_t> data = Floats({1.5f, -2.0f, 3.25f});      // t32: [0, 12)
  for (uint8_t b : {0x00, 0x3C, 0x00, 0xC0}) data.push_back(b);  // t16: [12, 16)
  for (uint8_t b : {0x80, 0x3F, 0x40, 0xC0}) data.push_back(b);  // tb16: [16, 20)
  for (uint8_t b : {1, 0, 1}) data.push_back(b);                 // flags: [20, 23)
  data.push_back(200);                                           // byte: [23, 24)
  const std::string header = R"({"__metadata__":{"config":"{\"a\": 1}","who":"caf\u00e9"},)"
                             R"("t32":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                             R"("t16":{"dtype":"F16","shape":[1,2],"data_offsets":[12,16]},)"
                             R"("tb16":{"shape":[2],"dtype":"BF16","data_offsets":[16,20]},)"
                             R"("flags":{"dtype":"BOOL","shape":[3],"data_offsets":[20,23]},)"
                             R"("byte":{"dtype":"U8","shape":[],"data_offsets":[23,24]},)"
                             R"("empty":{"dtype":"F32","shape":[0,4],"data_offsets":[24,24]}} )";
  std::vector<uint8_t> file = MakeFile(header, data);
  SafetensorsFile out;
  Status status = Parse(file, &out);
  ASSERT_TRUE(status.ok()) << status.message();

  EXPECT_EQ(out.metadata.at("config"), "{\"a\": 1}");
  EXPECT_EQ(out.metadata.at("who"), "caf\xC3\xA9");
  ASSERT_EQ(out.tensors.size(), 6u);
  const uint8_t* data_start = file.data() + 8 + header.size();
  const SafetensorsEntry& t32 = out.tensors.at("t32");
  EXPECT_EQ(t32.dtype, DType::kF32);
  EXPECT_EQ(t32.shape, Shape({3}));
  EXPECT_EQ(t32.data, data_start);
  EXPECT_EQ(t32.size, 12u);
  EXPECT_EQ(out.tensors.at("t16").shape, Shape({1, 2}));
  EXPECT_EQ(out.tensors.at("flags").dtype, DType::kBool);
  EXPECT_EQ(out.tensors.at("flags").data[2], 1);
  EXPECT_EQ(out.tensors.at("byte").dtype, DType::kU8);
  EXPECT_EQ(out.tensors.at("byte").shape, Shape({}));
  EXPECT_EQ(out.tensors.at("byte").data[0], 200);
  EXPECT_EQ(out.tensors.at("empty").size, 0u);

  std::vector<float> values;
  ASSERT_TRUE(ToFloat32("t32", t32, &values).ok());
  EXPECT_EQ(values, std::vector<float>({1.5f, -2.0f, 3.25f}));
  ASSERT_TRUE(ToFloat32("t16", out.tensors.at("t16"), &values).ok());
  EXPECT_EQ(values, std::vector<float>({1.0f, -2.0f}));
  ASSERT_TRUE(ToFloat32("tb16", out.tensors.at("tb16"), &values).ok());
  EXPECT_EQ(values, std::vector<float>({1.0f, -3.0f}));
  ASSERT_TRUE(ToFloat32("empty", out.tensors.at("empty"), &values).ok());
  EXPECT_TRUE(values.empty());
}

TEST(SafetensorsTest, RejectsTruncatedFile) {
  ExpectError({1, 0, 0}, {"3 bytes", "too short"});
  // The header length says 40 but only 10 bytes follow.
  ExpectError(MakeFile("{}", std::vector<uint8_t>(8), 40), {"header length 40", "10 bytes"});
}

TEST(SafetensorsTest, RejectsAbsurdHeaderLength) {
  ExpectError(MakeFile("{}", {}, uint64_t{1} << 63), {"header length 9223372036854775808"});
  ExpectError(MakeFile("{}", {}, ~uint64_t{0}), {"header length"});
}

TEST(SafetensorsTest, RejectsBadJson) {
  ExpectError(MakeFile(R"({"t":{"dtype":"F32",}})"), {"JSON", "byte"});
  ExpectError(MakeFile("{\"t\":"), {"JSON"});
}

TEST(SafetensorsTest, RejectsHeaderThatIsNotAnObject) {
  ExpectError(MakeFile("[1, 2]"), {"header must be a JSON object", "array"});
}

TEST(SafetensorsTest, RejectsUnknownDtypeNamingTheTensor) {
  ExpectError(MakeFile(OneTensor("F4", "[1]", "[0,1]"), std::vector<uint8_t>(1)),
              {"\"t\"", "unknown dtype F4", "I64"});
}

// A checkpoint's integer and bool buffers parse with their sizes checked;
// only a float conversion refuses them, naming the dtype.
TEST(SafetensorsTest, ParsesEveryDtypeOfTheFormat) {
  const std::pair<const char*, size_t> kDTypes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto& [dtype, size] : kDTypes) {
    SCOPED_TRACE(dtype);
    const std::string offsets = "[0," + std::to_string(3 * size) + "]";
    SafetensorsFile out;
    const std::vector<uint8_t> file =
        MakeFile(OneTensor(dtype, "[3]", offsets), std::vector<uint8_t>(3 * size));
    ASSERT_TRUE(Parse(file, &out).ok());
    const SafetensorsEntry& entry = out.tensors.at("t");
    EXPECT_STREQ(DTypeName(entry.dtype), dtype);
    EXPECT_EQ(DTypeSize(entry.dtype), size);
    std::vector<float> floats;
    const Status converted = ToFloat32("t", entry, &floats);
    const std::string name = dtype;
    EXPECT_EQ(converted.ok(), name == "F32" || name == "F16" || name == "BF16");
    if (!converted.ok()) EXPECT_NE(converted.message().find(name), std::string::npos);
    // The wrong size for this dtype is an error.
    ExpectError(MakeFile(OneTensor(dtype, "[3]", "[0," + std::to_string(3 * size + 1) + "]"),
                         std::vector<uint8_t>(3 * size + 1)),
                {"\"t\"", "needs " + std::to_string(3 * size) + " bytes"});
  }
}

TEST(SafetensorsTest, HeaderOnlyParseChecksOffsetsAgainstTheWholeFile) {
  std::vector<uint8_t> data = Floats({1.0f, 2.0f});
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const std::vector<uint8_t> file = MakeFile(header, data);
  SafetensorsFile out;
  // The header and a's bytes given: a has data, b only its place.
  const size_t given = 8 + header.size() + 4;
  ASSERT_TRUE(ParseSafetensorsHeader(file.data(), given, file.size(), &out).ok());
  EXPECT_EQ(out.tensors.at("a").data, file.data() + 8 + header.size());
  EXPECT_EQ(out.tensors.at("b").data, nullptr);
  EXPECT_EQ(out.tensors.at("b").offset, 8 + header.size() + 4);
  std::vector<float> floats;
  EXPECT_FALSE(ToFloat32("b", out.tensors.at("b"), &floats).ok());
  // Offsets past the real file size fail even with only the header given.
  Status status = ParseSafetensorsHeader(file.data(), 8 + header.size(), file.size() - 1, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("\"b\""), std::string::npos) << status.message();
  // A header longer than the bytes given.
  status = ParseSafetensorsHeader(file.data(), 20, file.size(), &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bytes given"), std::string::npos) << status.message();
}

TEST(SafetensorsTest, ShardsMergeAndNameDuplicates) {
  const std::vector<uint8_t> one = MakeFile(OneTensor("F32", "[1]", "[0,4]"), Floats({1.0f}));
  const std::vector<uint8_t> two = MakeFile(
      R"({"u":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::vector<uint8_t>(8));
  SafetensorsFile out;
  ASSERT_TRUE(ParseSafetensorsShards({{one.data(), one.size(), one.size()},
                                      {two.data(), two.size(), two.size()}},
                                     &out)
                  .ok());
  EXPECT_EQ(out.tensors.at("t").shard, 0u);
  EXPECT_EQ(out.tensors.at("u").shard, 1u);
  Status status = ParseSafetensorsShards(
      {{one.data(), one.size(), one.size()}, {one.data(), one.size(), one.size()}}, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("\"t\" is in shard 0 and in shard 1"), std::string::npos)
      << status.message();
  status = ParseSafetensorsShards({{one.data(), one.size(), one.size()}, {one.data(), 3, 3}}, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("shard 1: "), std::string::npos) << status.message();
  EXPECT_FALSE(ParseSafetensorsShards({}, &out).ok());
}

TEST(SafetensorsTest, RejectsOffsetsOutOfRange) {
  ExpectError(MakeFile(OneTensor("F32", "[2]", "[0,8]"), std::vector<uint8_t>(4)),
              {"\"t\"", "out of range", "4 bytes"});
}

TEST(SafetensorsTest, RejectsOffsetsBeginAfterEnd) {
  ExpectError(MakeFile(OneTensor("U8", "[2]", "[4,2]"), std::vector<uint8_t>(8)),
              {"\"t\"", "[4, 2]"});
}

TEST(SafetensorsTest, RejectsOffsetsNotMatchingShape) {
  ExpectError(MakeFile(OneTensor("F16", "[3]", "[0,8]"), std::vector<uint8_t>(8)),
              {"\"t\"", "needs 6 bytes", "give 8"});
}

TEST(SafetensorsTest, RejectsOverlappingTensors) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})";
  ExpectError(MakeFile(header, std::vector<uint8_t>(8)), {"\"a\"", "\"b\"", "overlapping"});
}

TEST(SafetensorsTest, RejectsNegativeDims) {
  ExpectError(MakeFile(OneTensor("U8", "[-1, 2]", "[0,0]")), {"\"t\"", "non-negative"});
}

TEST(SafetensorsTest, RejectsNonIntegerDims) {
  ExpectError(MakeFile(OneTensor("U8", "[1.5]", "[0,0]")), {"\"t\"", "shape"});
}

TEST(SafetensorsTest, RejectsShapeOverflow) {
  ExpectError(MakeFile(OneTensor("F32", "[4294967296, 4294967296]", "[0,0]")),
              {"\"t\"", "overflows"});
  // Fits uint64 as bytes but not int64 as an element count.
  ExpectError(MakeFile(OneTensor("U8", "[9223372036854775807, 2]", "[0,0]")), {"overflows"});
}

TEST(SafetensorsTest, RejectsMissingAndUnknownFields) {
  ExpectError(MakeFile(R"({"t":{"dtype":"U8","shape":[1]}})"), {"\"t\"", "data_offsets"});
  ExpectError(MakeFile(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}})"),
              {"\"t\"", "unknown field \"x\""});
  ExpectError(MakeFile(R"({"t":[]})"), {"\"t\"", "must be an object"});
}

TEST(SafetensorsTest, RejectsNonStringMetadata) {
  ExpectError(MakeFile(R"({"__metadata__":{"n":3}})"), {"__metadata__", "\"n\"", "number"});
}

TEST(SafetensorsTest, EveryTruncationOrCorruptionFailsCleanly) {
  const std::string header = OneTensor("F32", "[2, 1]", "[0,8]");
  const std::vector<uint8_t> file = MakeFile(header, Floats({1.0f, 2.0f}));
  SafetensorsFile out;
  ASSERT_TRUE(Parse(file, &out).ok());
  for (size_t size = 0; size < file.size(); ++size) {
    // A copy of exactly `size` bytes, so that a sanitizer sees any overread.
    std::vector<uint8_t> prefix(file.begin(), file.begin() + size);
    EXPECT_FALSE(ParseSafetensors(prefix.data(), prefix.size(), &out).ok()) << size;
  }
  for (size_t i = 0; i < 8 + header.size(); ++i) {
    std::vector<uint8_t> corrupt = file;
    corrupt[i] ^= 0x5A;
    Status status = Parse(corrupt, &out);  // may or may not parse; must not crash
    if (status.ok()) {
      for (const auto& t : out.tensors) {
        EXPECT_LE(t.second.data + t.second.size, corrupt.data() + corrupt.size());
      }
    }
  }
}

float ConvertOne(DType dtype, uint16_t bits) {
  const uint8_t raw[2] = {static_cast<uint8_t>(bits & 0xFF), static_cast<uint8_t>(bits >> 8)};
  SafetensorsEntry entry{dtype, {1}, raw, 2};
  std::vector<float> out;
  Status status = ToFloat32("x", entry, &out);
  EXPECT_TRUE(status.ok()) << status.message();
  return out.empty() ? 0.0f : out[0];
}

TEST(SafetensorsTest, ConvertsF16BitPatterns) {
  EXPECT_EQ(ConvertOne(DType::kF16, 0x3C00), 1.0f);
  EXPECT_EQ(ConvertOne(DType::kF16, 0xC000), -2.0f);
  EXPECT_EQ(ConvertOne(DType::kF16, 0x3555), 0.333251953125f);
  EXPECT_EQ(ConvertOne(DType::kF16, 0x7BFF), 65504.0f);               // largest normal
  EXPECT_EQ(ConvertOne(DType::kF16, 0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(ConvertOne(DType::kF16, 0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(ConvertOne(DType::kF16, 0x83FF), -std::ldexp(1023.0f, -24));
  EXPECT_EQ(ConvertOne(DType::kF16, 0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(ConvertOne(DType::kF16, 0x8000)));
  EXPECT_EQ(ConvertOne(DType::kF16, 0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ConvertOne(DType::kF16, 0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ConvertOne(DType::kF16, 0x7E00)));
  EXPECT_TRUE(std::isnan(ConvertOne(DType::kF16, 0xFC01)));
}

TEST(SafetensorsTest, ConvertsBF16BitPatterns) {
  EXPECT_EQ(ConvertOne(DType::kBF16, 0x3F80), 1.0f);
  EXPECT_EQ(ConvertOne(DType::kBF16, 0xC040), -3.0f);
  EXPECT_EQ(ConvertOne(DType::kBF16, 0x3EAB), 0.333984375f);
  EXPECT_EQ(ConvertOne(DType::kBF16, 0x0001), std::ldexp(1.0f, -133));   // subnormal
  EXPECT_EQ(ConvertOne(DType::kBF16, 0x7F7F), std::ldexp(255.0f, 120));  // largest finite
  EXPECT_EQ(ConvertOne(DType::kBF16, 0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ConvertOne(DType::kBF16, 0x7FC0)));
}

TEST(SafetensorsTest, ToFloat32RejectsNonFloatAndInconsistentEntries) {
  const uint8_t raw[4] = {0, 0, 0, 0};
  std::vector<float> out;
  Status status = ToFloat32("mask", SafetensorsEntry{DType::kBool, {4}, raw, 4}, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("\"mask\""), std::string::npos) << status.message();
  status = ToFloat32("w", SafetensorsEntry{DType::kF32, {2}, raw, 4}, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("(2,)"), std::string::npos) << status.message();
}

// Every committed fixture parses and is self-consistent, so the suites that
// compare against them test the engine rather than the files.
TEST(SafetensorsTest, EveryFixtureLoads) {
  const std::vector<std::string> paths = mha_test::ListFixtures();
  ASSERT_GE(paths.size(), 1u) << "no fixtures in " << MHA_FIXTURE_DIR;
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    mha_test::Fixture fixture;
    Status status = mha_test::LoadFixture(path, &fixture);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_TRUE(fixture.kind == "mha" || fixture.kind == "sdpa") << fixture.kind;
    TensorView query, output;
    ASSERT_TRUE(fixture.View("input.query", &query).ok());
    ASSERT_TRUE(fixture.View("input.key", nullptr).ok());
    ASSERT_TRUE(fixture.View("input.value", nullptr).ok());
    ASSERT_TRUE(fixture.View("expected.output", &output).ok());
    ASSERT_FALSE(query.shape.empty());
    // The output keeps the query's layout; only the feature dim may differ.
    ASSERT_EQ(output.shape.size(), query.shape.size());
    for (size_t i = 0; i + 1 < query.shape.size(); ++i) {
      EXPECT_EQ(output.shape[i], query.shape[i]) << "dim " << i;
    }
    if (fixture.kind == "mha") {
      EXPECT_EQ(query.shape.back(), fixture.embed_dim);
      EXPECT_EQ(output.shape.back(), fixture.embed_dim);
      EXPECT_EQ(fixture.Has("expected.weights"), fixture.need_weights);
    }
  }
}

}  // namespace
}  // namespace mha
