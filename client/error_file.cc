#include "client/error_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ddp::client {
namespace {

std::string Cap(std::string text, size_t max_chars) {
  if (text.size() > max_chars) {
    text.resize(max_chars);
    text += "...";
  }
  return text;
}

// The string member `name` of `fields`, or "" when absent or not a string.
std::string StringMember(const google::protobuf::Map<std::string, google::protobuf::Value>& fields,
                         const std::string& name) {
  auto it = fields.find(name);
  if (it == fields.end() || it->second.kind_case() != google::protobuf::Value::kStringValue) {
    return "";
  }
  return it->second.string_value();
}

// torch's @record format (or {"message": "text"}), parsed by protobuf's JSON
// parser into a google.protobuf.Struct. False when `text` is not a JSON object
// with a "message" member.
bool ParseRecordFormat(absl::string_view text, ErrorFileContent* content) {
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(std::string(text), &root).ok()) return false;
  auto message = root.fields().find("message");
  if (message == root.fields().end()) return false;
  if (message->second.kind_case() == google::protobuf::Value::kStringValue) {
    content->message = message->second.string_value();
    return true;
  }
  if (message->second.kind_case() != google::protobuf::Value::kStructValue) return true;
  const auto& record = message->second.struct_value().fields();
  content->message = StringMember(record, "message");
  auto extra = record.find("extraInfo");
  if (extra != record.end() && extra->second.kind_case() == google::protobuf::Value::kStructValue) {
    content->traceback = StringMember(extra->second.struct_value().fields(), "py_callstack");
    content->timestamp = StringMember(extra->second.struct_value().fields(), "timestamp");
  }
  return true;
}

}  // namespace

std::optional<ErrorFileContent> ParseErrorFile(absl::string_view text,
                                               const ErrorFileLimits& limits) {
  text = absl::StripAsciiWhitespace(text.substr(0, limits.max_file_bytes));
  if (text.empty()) return std::nullopt;
  ErrorFileContent content;
  if (!ParseRecordFormat(text, &content) || content.message.empty()) {
    content = ErrorFileContent();
    content.message = std::string(text);  // not torch's format: keep the text itself
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
  if (!absl::SimpleAtod(text, &fractional) || !(fractional > 0) || fractional > 1e12) {
    return std::nullopt;
  }
  stamp.time = absl::FromUnixMicros(static_cast<int64_t>(fractional * 1e6 + 0.5));
  stamp.whole_seconds = false;
  return stamp;
}

absl::StatusOr<ErrorFileContent> ReadErrorFile(const std::string& path,
                                               const ErrorFileLimits& limits) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no error file at ", path));
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
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
  if (!content) return absl::NotFoundError(absl::StrCat("error file ", path, " is empty"));
  return *content;
}

}  // namespace ddp::client
