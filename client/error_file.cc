#include "client/error_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddp::client {
namespace {

constexpr int kMaxDepth = 64;

// A tiny JSON reader: just enough to walk objects and decode strings; never
// throws, never recurses deeper than kMaxDepth, never reads past the text.
class JsonReader {
 public:
  explicit JsonReader(absl::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  bool ReadString(std::string* out) {
    if (!Consume('"')) return false;
    out->clear();
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
      char e = text_[pos_++];
      switch (e) {
        case 'n':
          out->push_back('\n');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!ReadHex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < text_.size() &&
              text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
            pos_ += 2;
            uint32_t low = 0;
            if (!ReadHex4(&low)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          out->push_back(e);  // \" \\ \/
      }
    }
    return false;
  }

  // Skips any value. False on malformed input or excessive nesting.
  bool SkipValue(int depth = 0) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    std::string ignored;
    char c = text_[pos_];
    if (c == '"') return ReadString(&ignored);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      if (Consume(close)) return true;
      do {
        if (c == '{' && (!ReadString(&ignored) || !Consume(':'))) return false;
        if (!SkipValue(depth + 1)) return false;
      } while (Consume(','));
      return Consume(close);
    }
    const size_t start = pos_;  // number, true, false, null
    while (pos_ < text_.size() &&
           (absl::ascii_isalnum(text_[pos_]) || text_[pos_] == '-' ||
            text_[pos_] == '+' || text_[pos_] == '.')) {
      ++pos_;
    }
    return pos_ > start;
  }

 private:
  bool ReadHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return false;
    *out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      int v = absl::ascii_isdigit(h)   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (v < 0) return false;
      *out = (*out << 4) | v;
    }
    return true;
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

  absl::string_view text_;
  size_t pos_ = 0;
};

std::string Cap(std::string text, size_t max_chars) {
  if (text.size() > max_chars) {
    text.resize(max_chars);
    text += "...";
  }
  return text;
}

// Reads the members of the object at the reader's position; for each key calls
// `on_member(key, reader)` which must consume the value. False on malformed
// input.
template <typename F>
bool ForEachMember(JsonReader& reader, F on_member) {
  if (!reader.Consume('{')) return false;
  if (reader.Consume('}')) return true;
  do {
    std::string key;
    if (!reader.ReadString(&key) || !reader.Consume(':')) return false;
    if (!on_member(key, reader)) return false;
  } while (reader.Consume(','));
  return reader.Consume('}');
}

bool ReadStringOrSkip(JsonReader& reader, std::string* out) {
  if (reader.Peek('"')) return reader.ReadString(out);
  return reader.SkipValue();
}

bool ParseRecordFormat(absl::string_view text, ErrorFileContent* content) {
  JsonReader reader(text);
  bool found = false;
  bool ok = ForEachMember(reader, [&](const std::string& key, JsonReader& r) {
    if (key != "message") return r.SkipValue();
    found = true;
    if (r.Peek('"')) return r.ReadString(&content->message);
    return ForEachMember(r, [&](const std::string& inner, JsonReader& r2) {
      if (inner == "message") return ReadStringOrSkip(r2, &content->message);
      if (inner != "extraInfo") return r2.SkipValue();
      return ForEachMember(r2, [&](const std::string& info, JsonReader& r3) {
        if (info == "py_callstack")
          return ReadStringOrSkip(r3, &content->traceback);
        if (info == "timestamp")
          return ReadStringOrSkip(r3, &content->timestamp);
        return r3.SkipValue();
      });
    });
  });
  return ok && found;
}

}  // namespace

std::optional<ErrorFileContent> ParseErrorFile(absl::string_view text,
                                               const ErrorFileLimits& limits) {
  text = absl::StripAsciiWhitespace(text.substr(0, limits.max_file_bytes));
  if (text.empty()) return std::nullopt;
  ErrorFileContent content;
  if (!ParseRecordFormat(text, &content) || content.message.empty()) {
    content = ErrorFileContent();
    content.message =
        std::string(text);  // not torch's format: keep the text itself
  }
  content.message = Cap(std::move(content.message), limits.max_field_chars);
  content.traceback = Cap(std::move(content.traceback), limits.max_field_chars);
  content.timestamp = Cap(std::move(content.timestamp), 64);
  return content;
}

std::optional<ErrorTimestamp> ParseErrorTimestamp(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return std::nullopt;
  ErrorTimestamp stamp;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) {
    if (seconds <= 0) return std::nullopt;
    stamp.time = absl::FromUnixSeconds(seconds);
    return stamp;
  }
  // Microseconds are as fine as a double of today's Unix seconds resolves.
  double fractional = 0;
  if (!absl::SimpleAtod(text, &fractional) || !(fractional > 0) ||
      fractional > 1e12) {
    return std::nullopt;
  }
  stamp.time = absl::FromUnixMicros(
      static_cast<int64_t>(fractional * 1e6 + 0.5));
  stamp.whole_seconds = false;
  return stamp;
}

absl::StatusOr<ErrorFileContent> ReadErrorFile(const std::string& path,
                                               const ErrorFileLimits& limits) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("no error file at ", path));
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  std::string text;
  char buffer[8192];
  while (text.size() < limits.max_file_bytes) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  std::optional<ErrorFileContent> content = ParseErrorFile(text, limits);
  if (!content)
    return absl::NotFoundError(absl::StrCat("error file ", path, " is empty"));
  return *content;
}

}  // namespace ddp::client
