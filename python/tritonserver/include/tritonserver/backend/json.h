// A small read-only JSON value, enough for model configurations, backend
// settings and host policies as the core serializes them.
//
//   const Json& config = model.config();
//   int64_t max_batch = config["max_batch_size"].AsInt();
//   for (const Json& input : config["input"].AsArray())
//     std::string name = input["name"].AsString();
//
// Looking up a missing key or index gives a null value (so lookups chain);
// As*() on a value of another type throws Error(INVALID_ARG). The core's
// configuration JSON prints 64-bit integers (dims, ...) as strings: AsInt()
// accepts both numbers and decimal strings.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tritonserver/backend/error.h"

namespace tritonserver::backend {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;  // in document order

  Json() = default;

  // Parses a whole JSON document; throws Error(INVALID_ARG) saying where it
  // is malformed.
  static Json Parse(std::string_view text);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool AsBool() const {
    Expect(Type::kBool);
    return bool_;
  }
  double AsDouble() const;
  int64_t AsInt() const;
  const std::string& AsString() const {
    Expect(Type::kString);
    return text_;
  }
  const Array& AsArray() const {
    Expect(Type::kArray);
    return array_;
  }
  const Object& AsObject() const {
    Expect(Type::kObject);
    return object_;
  }

  // Members and elements; null when absent (or when this is not an
  // object/array).
  bool Contains(std::string_view key) const { return Find(key) != nullptr; }
  const Json& operator[](std::string_view key) const {
    const Json* found = Find(key);
    return found != nullptr ? *found : Null();
  }
  const Json& operator[](size_t index) const {
    return type_ == Type::kArray && index < array_.size() ? array_[index] : Null();
  }
  // Elements of an array or members of an object; 0 otherwise.
  size_t size() const {
    return type_ == Type::kArray ? array_.size() : type_ == Type::kObject ? object_.size() : 0;
  }

 private:
  friend class JsonParser;

  static const Json& Null() {
    static const Json null;
    return null;
  }
  static const char* TypeName(Type type) {
    switch (type) {
      case Type::kNull:
        return "null";
      case Type::kBool:
        return "a boolean";
      case Type::kNumber:
        return "a number";
      case Type::kString:
        return "a string";
      case Type::kArray:
        return "an array";
      case Type::kObject:
        return "an object";
    }
    return "?";
  }
  void Expect(Type type) const {
    if (type_ != type) {
      throw Error::InvalidArgument(std::string("JSON value is ") + TypeName(type_) + ", not " +
                                   TypeName(type));
    }
  }
  const Json* Find(std::string_view key) const {
    if (type_ != Type::kObject) return nullptr;
    for (const Member& member : object_) {
      if (member.first == key) return &member.second;
    }
    return nullptr;
  }

  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;  // a string's value, or a number's literal text
  Array array_;
  Object object_;
};

inline double Json::AsDouble() const {
  if (type_ != Type::kNumber && type_ != Type::kString) Expect(Type::kNumber);
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text_.c_str(), &end);
  if (text_.empty() || end != text_.c_str() + text_.size() || errno != 0) {
    throw Error::InvalidArgument("JSON value '" + text_ + "' is not a floating-point number");
  }
  return value;
}

inline int64_t Json::AsInt() const {
  if (type_ != Type::kNumber && type_ != Type::kString) Expect(Type::kNumber);
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text_.c_str(), &end, 10);
  if (text_.empty() || end != text_.c_str() + text_.size() || errno != 0) {
    throw Error::InvalidArgument("JSON value '" + text_ + "' is not a 64-bit integer");
  }
  return static_cast<int64_t>(value);
}

// Recursive descent over RFC 8259 JSON, nesting limited to kMaxDepth.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json ParseDocument() {
    Json value = ParseValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error::InvalidArgument("malformed JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void ExpectChar(char c) {
    if (!Consume(c)) Fail(std::string("expected '") + c + "'");
  }
  void ExpectWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) Fail("invalid literal");
    pos_ += word.size();
  }

  Json ParseValue(int depth) {
    if (depth > kMaxDepth) Fail("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) Fail("unexpected end of input");
    Json value;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      value.type_ = Json::Type::kObject;
      if (Consume('}')) return value;
      do {
        SkipSpace();
        std::string key = ParseString();
        ExpectChar(':');
        value.object_.emplace_back(std::move(key), ParseValue(depth + 1));
      } while (Consume(','));
      ExpectChar('}');
    } else if (c == '[') {
      ++pos_;
      value.type_ = Json::Type::kArray;
      if (Consume(']')) return value;
      do {
        value.array_.push_back(ParseValue(depth + 1));
      } while (Consume(','));
      ExpectChar(']');
    } else if (c == '"') {
      value.type_ = Json::Type::kString;
      value.text_ = ParseString();
    } else if (c == 't') {
      ExpectWord("true");
      value.type_ = Json::Type::kBool;
      value.bool_ = true;
    } else if (c == 'f') {
      ExpectWord("false");
      value.type_ = Json::Type::kBool;
    } else if (c == 'n') {
      ExpectWord("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.type_ = Json::Type::kNumber;
      value.text_ = ParseNumber();
    } else {
      Fail(std::string("unexpected character '") + c + "'");
    }
    return value;
  }

  std::string ParseNumber() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        ++pos_;
      }
      if (pos_ == from) Fail("expected a digit");
    };
    if (text_[pos_] == '-') ++pos_;
    digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
        ++pos_;
      }
      digits();
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  unsigned ParseHex4() {
    if (pos_ + 4 > text_.size()) Fail("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9') {
        code |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        code |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        code |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        Fail("invalid \\u escape");
      }
    }
    return code;
  }

  static void AppendUtf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string ParseString() {
    if (pos_ >= text_.size() || text_[pos_] != '"') Fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = ParseHex4();
          if (code >= 0xD800 && code <= 0xDBFF) {  // a surrogate pair
            if (text_.substr(pos_, 2) != "\\u") Fail("lone surrogate");
            pos_ += 2;
            const unsigned low = ParseHex4();
            if (low < 0xDC00 || low > 0xDFFF) Fail("invalid surrogate pair");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code <= 0xDFFF) {
            Fail("lone surrogate");
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          Fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

inline Json Json::Parse(std::string_view text) { return JsonParser(text).ParseDocument(); }

}  // namespace tritonserver::backend
