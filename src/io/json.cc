#include "src/io/json.h"

#include <cstdlib>
#include <new>
#include <set>

namespace mha {
namespace json {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const char* text, size_t size) : text_(text), size_(size) {}

  Status ParseDocument(Value* out) {
    SkipWhitespace();
    MHA_RETURN_IF_ERROR(ParseValue(out, 0));
    SkipWhitespace();
    if (pos_ != size_) return Error("unexpected text after the JSON value");
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return Status::InvalidArgument("JSON: " + what + " at byte " + std::to_string(pos_));
  }

  bool AtEnd() const { return pos_ >= size_; }
  char Peek() const { return text_[pos_]; }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  bool ConsumeLiteral(const char* literal) {
    size_t n = 0;
    while (literal[n] != '\0') ++n;
    if (size_ - pos_ < n || std::string(text_ + pos_, n) != literal) return false;
    pos_ += n;
    return true;
  }

  Status ParseValue(Value* out, int depth) {
    if (depth > kMaxDepth) return Error("nesting deeper than " + std::to_string(kMaxDepth));
    if (AtEnd()) return Error("unexpected end of input");
    *out = Value();
    switch (Peek()) {
      case '{':
        return ParseObject(out, depth);
      case '[':
        return ParseArray(out, depth);
      case '"':
        out->type = Type::kString;
        return ParseString(&out->string);
      case 't':
      case 'f':
        out->type = Type::kBool;
        out->boolean = Peek() == 't';
        if (ConsumeLiteral(out->boolean ? "true" : "false")) return Status::Ok();
        return Error("invalid literal");
      case 'n':
        if (ConsumeLiteral("null")) return Status::Ok();
        return Error("invalid literal");
      default:
        return ParseNumber(out);
    }
  }

  Status ParseObject(Value* out, int depth) {
    out->type = Type::kObject;
    ++pos_;  // '{'
    SkipWhitespace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return Status::Ok();
    }
    std::set<std::string> keys;
    while (true) {
      SkipWhitespace();
      if (AtEnd() || Peek() != '"') return Error("expected a string key");
      std::string key;
      MHA_RETURN_IF_ERROR(ParseString(&key));
      if (!keys.insert(key).second) return Error("duplicate key \"" + key + "\"");
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') return Error("expected ':'");
      ++pos_;
      SkipWhitespace();
      Value member;
      MHA_RETURN_IF_ERROR(ParseValue(&member, depth + 1));
      out->object.emplace_back(std::move(key), std::move(member));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated object");
      if (Peek() == '}') {
        ++pos_;
        return Status::Ok();
      }
      if (Peek() != ',') return Error("expected ',' or '}'");
      ++pos_;
    }
  }

  Status ParseArray(Value* out, int depth) {
    out->type = Type::kArray;
    ++pos_;  // '['
    SkipWhitespace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipWhitespace();
      Value element;
      MHA_RETURN_IF_ERROR(ParseValue(&element, depth + 1));
      out->array.push_back(std::move(element));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated array");
      if (Peek() == ']') {
        ++pos_;
        return Status::Ok();
      }
      if (Peek() != ',') return Error("expected ',' or ']'");
      ++pos_;
    }
  }

  Status ParseHex4(uint32_t* out) {
    if (size_ - pos_ < 4) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return Error("invalid \\u escape");
    }
    pos_ += 4;
    *out = v;
    return Status::Ok();
  }

  // After "\u": one code point, joining a UTF-16 surrogate pair.
  Status ParseUnicodeEscape(uint32_t* code_point) {
    uint32_t high;
    MHA_RETURN_IF_ERROR(ParseHex4(&high));
    if (high >= 0xDC00 && high <= 0xDFFF) return Error("unpaired low surrogate");
    if (high < 0xD800 || high > 0xDBFF) {
      *code_point = high;
      return Status::Ok();
    }
    if (!ConsumeLiteral("\\u")) return Error("unpaired high surrogate");
    uint32_t low;
    MHA_RETURN_IF_ERROR(ParseHex4(&low));
    if (low < 0xDC00 || low > 0xDFFF) return Error("invalid low surrogate");
    *code_point = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    return Status::Ok();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return Status::Ok();
      if (c < 0x20) return Error("control character in string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (AtEnd()) return Error("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          MHA_RETURN_IF_ERROR(ParseUnicodeEscape(&cp));
          AppendUtf8(cp, out);
          break;
        }
        default:
          --pos_;
          return Error(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  bool ConsumeDigits() {
    size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
    return pos_ > start;
  }

  // JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  Status ParseNumber(Value* out) {
    size_t start = pos_;
    if (Peek() == '-') ++pos_;
    if (AtEnd() || Peek() < '0' || Peek() > '9') return Error("unexpected character");
    if (Peek() == '0') {
      ++pos_;
      if (!AtEnd() && Peek() >= '0' && Peek() <= '9') return Error("leading zero in number");
    } else {
      ConsumeDigits();
    }
    bool integral = true;
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      integral = false;
      if (!ConsumeDigits()) return Error("expected digits after '.'");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      integral = false;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (!ConsumeDigits()) return Error("expected exponent digits");
    }
    const std::string literal(text_ + start, pos_ - start);
    out->type = Type::kNumber;
    out->number = std::strtod(literal.c_str(), nullptr);
    out->is_integer = integral && ParseInt64(literal, &out->integer);
    return Status::Ok();
  }

  // Exact int64 value of an already validated integer literal; false on overflow.
  static bool ParseInt64(const std::string& literal, int64_t* out) {
    bool negative = literal[0] == '-';
    uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    uint64_t v = 0;
    for (size_t i = negative ? 1 : 0; i < literal.size(); ++i) {
      uint64_t digit = static_cast<uint64_t>(literal[i] - '0');
      if (v > (limit - digit) / 10) return false;
      v = v * 10 + digit;
    }
    *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    return true;
  }

  const char* text_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

const Value* Value::Find(const std::string& key) const {
  for (const auto& member : object) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

Status Parse(const char* text, size_t size, Value* out) {
  try {
    return Parser(text, size).ParseDocument(out);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("JSON: out of memory while parsing");
  }
}

const char* TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "bool";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "unknown";
}

}  // namespace json
}  // namespace mha
